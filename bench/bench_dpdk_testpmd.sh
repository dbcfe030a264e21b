#!/bin/sh
# bench_dpdk_testpmd.sh TESTPMD DRIVER.so OPS MBCACHE SECONDS [WARM] - the Mpps of
# an unmodified dpdk-testpmd, io forwarding between two net_null ports
# (no NIC, no hugepages), its mbuf pool (16384 mbufs) on mempool ops OPS
# (uslab, the driver of dpdk/; ring_mp_mc, DPDK's default; stack) with a
# per-lcore mbuf cache of MBCACHE (testpmd --mbcache). One forwarding lcore
# (1, thread rte-worker-1), the CLI on lcore 0. The driver is loaded (-d)
# whatever OPS is, so every variant runs the same process image:
#
#   TESTPMD --no-huge --no-pci --no-shconf --no-telemetry -m 128 -l 0-1 -d DRIVER.so
#     --mbuf-pool-ops-name=OPS --vdev net_null0 --vdev net_null1 --
#     -i --auto-start --forward-mode=io --total-num-mbufs=16384 --mbcache=MBCACHE
#
# Every packet is one mbuf got (net_null RX) and put back (net_null TX).
# MBCACHE 250 is testpmd's default: the lcore cache serves most gets and
# puts, the ops see its refills and flushes; with 0 every burst of 32 (the
# default burst) reaches the ops.
#
# Forwarding starts, runs WARM seconds (default 1), then `show port stats all` twice,
# SECONDS apart, through a FIFO. Between the two: the packets each port
# received (RX-packets), the wall time, and the CPU time of the forwarding
# thread (/proc, utime + stime). The forwarding thread polls without
# sleeping, so packets per second of ITS CPU time is the forwarding rate
# with the time other programs took from that CPU left out (this machine
# is shared); the wall-clock rate is printed beside it. Prints
#
#   CSV,dpdk,testpmd-<OPS>,cache<MBCACHE>,mpps,<RX packets per port per second of forwarding-thread CPU time, millions>
#   CSV,dpdk,testpmd-<OPS>,cache<MBCACHE>,wall_mpps,<the same per wall-clock second>
#   CSV,dpdk,testpmd-<OPS>,cache<MBCACHE>,cpu_share,<forwarding-thread CPU time / wall time>
#   CSV,dpdk,testpmd-<OPS>,cache<MBCACHE>,nombuf,<RX-nombuf of the two ports at the end>
#
# and fails when testpmd did not select OPS, failed, hung or forwarded nothing.
set -u
testpmd=$1
driver=$2
ops=$3
mbcache=$4
secs=$5
warm=${6:-1}
dir=$(mktemp -d)
log=$dir/log
pid=
trap '[ -n "$pid" ] && kill -KILL $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() {
	cat "$log" >&2
	echo "bench_dpdk_testpmd.sh: testpmd on ops $ops (mbcache $mbcache): $*" >&2
	exit 1
}
mkfifo "$dir/cmd"
: >"$log" # before wait_for greps it (the background job creates it late)
stdbuf -oL "$testpmd" --no-huge --no-pci --no-shconf --no-telemetry -m 128 -l 0-1 \
	-d "$driver" --mbuf-pool-ops-name="$ops" --vdev net_null0 --vdev net_null1 -- \
	-i --auto-start --forward-mode=io --total-num-mbufs=16384 --mbcache="$mbcache" \
	<"$dir/cmd" >"$log" 2>&1 &
pid=$!
exec 3>"$dir/cmd"

# wait_for N PATTERN: until PATTERN is in the log N times (at most 60 s).
wait_for() {
	i=0
	while [ "$(grep -c "$2" "$log" || true)" -lt "$1" ]; do
		kill -0 $pid 2>/dev/null || fail "exited early"
		[ $i -lt 6000 ] || fail "hung (no '$2' after 60 s)"
		sleep 0.01
		i=$((i + 1))
	done
}
# The forwarding thread's CPU time in clock ticks, and the wall time in ticks.
ticks() {
	for t in /proc/$pid/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = rte-worker-1 ] && awk '{ print $14 + $15 }' "$t/stat"
	done
}
now() {
	awk -v hz="$(getconf CLK_TCK)" '{ printf "%.0f\n", $1 * hz }' /proc/uptime
}

wait_for 1 "Start automatic packet forwarding"
sleep "$warm"
echo "show port stats all" >&3
wait_for 2 "Rx-pps"
c0=$(ticks) w0=$(now)
sleep "$secs"
echo "show port stats all" >&3
wait_for 4 "Rx-pps"
c1=$(ticks) w1=$(now)
echo "quit" >&3
exec 3>&-
wait $pid
rc=$?
pid=
[ $rc -eq 0 ] || fail "exited with $rc"
grep -q "preferred mempool ops selected: $ops\$" "$log" || fail "ops not selected"
[ -n "$c0" ] && [ -n "$c1" ] || fail "no thread rte-worker-1"
# RX-packets of each port at the first and the second show.
grep -E "^ +RX-packets: +[0-9]+ +RX-missed" "$log" | head -4 | awk -v cpu=$((c1 - c0)) \
	-v wall=$((w1 - w0)) -v hz="$(getconf CLK_TCK)" -v tag="dpdk,testpmd-$ops,cache$mbcache" '
	{ n[NR] = $2 }
	END {
		pkts = (n[3] - n[1] + n[4] - n[2]) / 2
		if (NR != 4 || pkts <= 0 || cpu <= 0 || wall <= 0) exit 1
		printf "CSV,%s,mpps,%.3f\n", tag, pkts / (cpu / hz) / 1e6
		printf "CSV,%s,wall_mpps,%.3f\n", tag, pkts / (wall / hz) / 1e6
		printf "CSV,%s,cpu_share,%.3f\n", tag, cpu / wall
	}' || fail "nothing forwarded (CPU ticks $c0 -> $c1)"
echo "CSV,dpdk,testpmd-$ops,cache$mbcache,nombuf,$(grep -E "RX-nombuf: +[0-9]+" "$log" |
	tail -2 | awk '{ s += $2 } END { print s + 0 }')"
