#!/bin/sh
# test_stat.sh USLAB_STAT STAT_CHILD - uslab-stat against a live process.
# The child (stat_child.c) exports with USLAB_STATS=1 and says what it
# holds; every view of uslab-stat must agree, errors must be clear, the
# file must go at exit.
set -u
stat=$1 child=$2
dir=$(mktemp -d)
fail() { echo "test_stat: $*" >&2; rm -rf "$dir"; exit 1; }
mkfifo "$dir/in"
USLAB_STATS=1 USLAB_STATS_MS=20 "$child" < "$dir/in" > "$dir/out" &
pid=$!
exec 3> "$dir/in" # the child runs until this closes
for i in $(seq 100); do grep -q ready "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out" || fail "the child did not start"
sleep 0.2 # a snapshot after "ready"
want_a=$(sed -n 's/.*stat_a=\([0-9]*\).*/\1/p' "$dir/out")
want_b=$(sed -n 's/.*stat_b=\([0-9]*\).*/\1/p' "$dir/out")

# slabinfo: its header, a row per cache with the exact active objects, a totals line.
"$stat" "$pid" > "$dir/slabinfo" || fail "uslab-stat $pid failed"
head -1 "$dir/slabinfo" | grep -q "^slabinfo - version: 2.1" || fail "no slabinfo header"
awk -v a="$want_a" -v b="$want_b" '
	$1 == "stat_a" { if ($2 != a) { print "stat_a: " $2 " active, want " a; bad = 1 } seen++ }
	$1 == "stat_b" { if ($2 != b) { print "stat_b: " $2 " active, want " b; bad = 1 } seen++ }
	END { if (seen != 2) { print "rows missing"; bad = 1 } exit bad }' "$dir/slabinfo" ||
	fail "slabinfo disagrees with the child: $(cat "$dir/slabinfo")"
tail -1 "$dir/slabinfo" | grep -q "^# total: " || fail "no totals line"

# JSON: the same numbers, events counted, the deferred frees all done.
"$stat" --json "$pid" > "$dir/json" || fail "--json failed"
python3 - "$dir/json" "$want_a" "$want_b" <<'PY' || fail "--json disagrees: $(head -c 2000 "$dir/json")"
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["caches"]}
assert c["stat_a"]["active_objs"] == int(sys.argv[2]), c["stat_a"]
assert c["stat_b"]["active_objs"] == int(sys.argv[3]), c["stat_b"]
assert c["stat_a"]["sheaved"] == 0 and c["stat_a"]["events"]["sheaf_refill"] > 0, c["stat_a"]
assert d["rcu"]["queued"] == 100 and d["rcu"]["freed"] == 100, d["rcu"]
assert d["refreshes"] >= 2
PY

"$stat" --events "$pid" | grep -q "^stat_a " || fail "--events has no stat_a row"
"$stat" -s name "$pid" > /dev/null || fail "-s name failed"
# -s active: largest first, so stat_a (more active objects) above stat_b.
"$stat" -s active "$pid" | awk -v a="$want_a" -v b="$want_b" '
	$1 == "stat_a" { ia = NR } $1 == "stat_b" { ib = NR }
	END { exit !(ia && ib && (a > b ? ia < ib : ia > ib)) }' || fail "-s active: wrong order"
"$stat" --options "$pid" | grep -q "^USLAB_STATS  *on" || fail "--options does not show USLAB_STATS on"
"$stat" --list | awk -v p="$pid" '$1 == p { found = 1 } END { exit !found }' || fail "--list misses $pid"

# -w on a terminal (script gives it a pty): two refreshes at least.
timeout 2.5 script -qfc "$stat -w 1 $pid" /dev/null > "$dir/watch" 2>&1
[ "$(grep -c "slabinfo - version" "$dir/watch")" -ge 2 ] || fail "-w: fewer than two frames"

# Errors: exit 1 and one line.
"$stat" 999999999 2> "$dir/err"; [ $? -eq 1 ] && grep -q "no process" "$dir/err" || fail "nonexistent pid"
"$stat" $$ 2> "$dir/err"; [ $? -eq 1 ] && grep -q "does not export" "$dir/err" || fail "non-exporting pid"
"$stat" --bogus 2> /dev/null; [ $? -eq 2 ] || fail "usage error"
for bad in "12x" "abc" "-5" "99999999999"; do
	"$stat" "$bad" 2> /dev/null; [ $? -eq 2 ] || fail "pid '$bad' not refused"
done
for bad in nan 1e300 0 -1 2x; do
	"$stat" -w "$bad" "$pid" 2> /dev/null; [ $? -eq 2 ] || fail "-w $bad not refused"
done
# A file that is not a snapshot, for a live pid (this shell): refused with one line.
forged="/dev/shm/uslab-stat.$$"
head -c 100000 /dev/urandom > "$forged" && chmod 600 "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "stale or not of this version" "$dir/err" || fail "garbage file: $(cat "$dir/err")"
head -c 10 /dev/urandom > "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "stale or not of this version" "$dir/err" || fail "short file: $(cat "$dir/err")"
chmod 666 "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
rm -f "$forged"
[ $rc -eq 1 ] && grep -q "writable by others" "$dir/err" || fail "world-writable file: $(cat "$dir/err")"
if [ "$(id -u)" -ne 0 ]; then
	touch "/dev/shm/uslab-stat.$$" && chmod 000 "/dev/shm/uslab-stat.$$"
	"$stat" $$ 2> "$dir/err"; rc=$?
	rm -f "/dev/shm/uslab-stat.$$"
	[ $rc -eq 1 ] && grep -q "cannot read" "$dir/err" || fail "unreadable file"
fi

# At exit the file is gone.
exec 3>&-
wait "$pid" || fail "the child failed"
[ ! -e "/dev/shm/uslab-stat.$pid" ] || fail "the file is left after exit"
rm -rf "$dir"
echo "ok test_stat: slabinfo, json, events, options, list, -w, errors, forged files, exit"
