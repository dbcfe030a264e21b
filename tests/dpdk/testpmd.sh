#!/bin/sh
# testpmd.sh TESTPMD DRIVER.so - an unmodified dpdk-testpmd on the uslab
# mempool ops: two net_null ports, io forwarding for three stats periods
# of a second, no hugepages, no NIC. Passes when testpmd selected the ops
# "uslab" for its mbuf pool, forwarded packets both ways (nonzero RX and
# TX on each port, a nonzero Rx-pps), never lacked an mbuf (RX-nombuf 0),
# and quit cleanly on SIGINT. A testpmd that dies or hangs fails the test
# within a minute.
set -u
testpmd=$1
driver=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fail() {
	cat "$log"
	echo "FAIL testpmd: $*"
	exit 1
}
: >"$log"
# --mbuf-pool-ops-name is an EAL option (before --). stdbuf: the log is
# read while testpmd runs.
stdbuf -oL "$testpmd" --no-huge --no-pci --no-shconf --no-telemetry -m 512 -l 0-1 \
	-d "$driver" --mbuf-pool-ops-name=uslab --vdev net_null0 --vdev net_null1 -- \
	--forward-mode=io --stats-period 1 --total-num-mbufs=16384 >"$log" 2>&1 </dev/null &
pid=$!
waited=0
while [ "$(grep -c "Rx-pps" "$log")" -lt 6 ]; do
	if ! kill -0 $pid 2>/dev/null; then
		wait $pid
		fail "exited with $? before three stats periods"
	fi
	if [ $waited -ge 300 ]; then
		kill -KILL $pid
		fail "no three stats periods within a minute"
	fi
	sleep 0.2
	waited=$((waited + 1))
done
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || fail "exited with $rc after SIGINT"
grep -q "preferred mempool ops selected: uslab$" "$log" || fail "mempool ops uslab not selected"
# The final "Forward statistics for port N" blocks: RX-packets, TX-packets.
fwd=$(awk '/Forward statistics for port/ { p = 1 } p && /RX-packets:/ { print "rx", $2 }
	p && /TX-packets:/ { print "tx", $2; p = 0 }' "$log")
[ "$(echo "$fwd" | wc -l)" -eq 4 ] || fail "no forward statistics for both ports"
echo "$fwd" | awk '$2 == 0 { bad = 1 } END { exit bad }' || fail "a port forwarded nothing"
grep -Eq "Rx-pps: +[1-9]" "$log" || fail "no Rx-pps in any stats period"
! grep -Eq "RX-nombuf: +[1-9]" "$log" || fail "mbuf allocation failures (RX-nombuf)"
pps=$(grep -E "Rx-pps: +[0-9]" "$log" | tail -2 | awk '{ printf "%s%.1f", sep, $2 / 1e6; sep = ", " }')
echo "ok testpmd: ops uslab, io forwarding on 2 net_null ports:" \
	"$(echo "$fwd" | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }') packets;" \
	"Rx Mpps per port in the last period $pps; RX-nombuf 0"
