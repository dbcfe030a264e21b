#!/bin/sh
# test_stat.sh USLAB_STAT STAT_CHILD - uslab-stat against a live process.
# The child (stat_child.c) exports with USLAB_STATS=1 and says what it
# holds; every view of uslab-stat must agree, errors must be clear, the
# file must go at exit. The page heap (--heap): the child's freed large
# objects stay retained (a purge delay of an hour: no decay tick purges
# them meanwhile) until it trims, and the view then shows what the child's
# own uslab_heap_stats() said.
set -u
stat=$1 child=$2
dir=$(mktemp -d)
fail() { echo "test_stat: $*" >&2; rm -rf "$dir"; exit 1; }
mkfifo "$dir/in"
# (USLAB_FAILSLAB never fails here: it only puts an escape sequence into the options text.)
USLAB_FAILSLAB="0,1,0,x$(printf '\033')[2J" USLAB_PURGE_DELAY_MS=3600000 USLAB_STATS=1 USLAB_STATS_MS=20 "$child" < "$dir/in" > "$dir/out" &
pid=$!
exec 3> "$dir/in" # the child runs until this closes
for i in $(seq 100); do grep -q ready "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out" || fail "the child did not start"
sleep 0.2 # a snapshot after "ready"
want_a=$(sed -n 's/.*stat_a=\([0-9]*\).*/\1/p' "$dir/out")
want_b=$(sed -n 's/.*stat_b=\([0-9]*\).*/\1/p' "$dir/out")
large_freed=$(sed -n 's/.*large_freed=\([0-9]*\).*/\1/p' "$dir/out")

# The file is in this user's own directory, mode 0700 (export_dir(): /run/user/UID or /dev/shm/uslab-UID).
uid=$(id -u)
if [ -d "/run/user/$uid" ] && [ "$(stat -c %u "/run/user/$uid")" = "$uid" ]; then
	udir="/run/user/$uid"
else
	udir="/dev/shm/uslab-$uid"
	[ "$(stat -c '%a %u' "$udir")" = "700 $uid" ] || fail "$udir: not mode 700 and $uid's"
fi
[ -f "$udir/uslab-stat.$pid" ] || fail "no $udir/uslab-stat.$pid"

# slabinfo: its header, a row per cache with the exact active objects, a totals line.
"$stat" "$pid" > "$dir/slabinfo" || fail "uslab-stat $pid failed"
head -1 "$dir/slabinfo" | grep -q "^slabinfo - version: 2.1" || fail "no slabinfo header"
awk -v a="$want_a" -v b="$want_b" '
	$1 == "stat_a" { if ($2 != a) { print "stat_a: " $2 " active, want " a; bad = 1 } seen++ }
	$1 == "stat_b" { if ($2 != b) { print "stat_b: " $2 " active, want " b; bad = 1 } seen++ }
	END { if (seen != 2) { print "rows missing"; bad = 1 } exit bad }' "$dir/slabinfo" ||
	fail "slabinfo disagrees with the child: $(cat "$dir/slabinfo")"
tail -2 "$dir/slabinfo" | head -1 | grep -q "^# total: " || fail "no totals line"
# Under it the heap's line, with the huge object the child holds.
tail -1 "$dir/slabinfo" | grep -q "^# heap: .* mapped, .* used, .* retained, .* purged (.*), [1-9][0-9]* arenas, 1 huge objects$" ||
	fail "no heap line: $(tail -1 "$dir/slabinfo")"
# A name with escape sequences is shown escaped, in every view: no ESC or BEL byte reaches the terminal.
grep -q '^evil\\x1b\[2J\\x1b\]0;x\\x07 ' "$dir/slabinfo" || fail "the escaped name is missing"
"$stat" --events "$pid" > "$dir/events"
"$stat" --list > "$dir/list"
"$stat" --options "$pid" > "$dir/options" 2>&1
grep -q '^USLAB_FAILSLAB  *0,1,0,x\\x1b\[2J ' "$dir/options" || fail "--options: the escaped value is missing"
for f in slabinfo events list options; do
	if LC_ALL=C grep -q "$(printf '[\033\007]')" "$dir/$f"; then fail "$f: a raw escape byte"; fi
done

# JSON: the same numbers, events counted, the deferred frees all done.
"$stat" --json "$pid" > "$dir/json" || fail "--json failed"
python3 - "$dir/json" "$want_a" "$want_b" <<'PY' || fail "--json disagrees: $(head -c 2000 "$dir/json")"
import json, sys
d = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in d["caches"]}
assert c["stat_a"]["active_objs"] == int(sys.argv[2]), c["stat_a"]
assert c["stat_b"]["active_objs"] == int(sys.argv[3]), c["stat_b"]
assert c["stat_a"]["sheaved"] == 0 and c["stat_a"]["events"]["sheaf_refill"] > 0, c["stat_a"]
assert c["stat_a"]["sheaf_capacity_min"] <= c["stat_a"]["sheaf_capacity"] <= c["stat_a"]["sheaf_capacity_max"], c["stat_a"]
assert d["rcu"]["queued"] == 100 and d["rcu"]["freed"] == 100, d["rcu"]
assert d["refreshes"] >= 2
h = d["heap"]
assert h["huge_objects"] == 1 and h["arenas"] >= 1, h
assert h["mapped_bytes"] >= h["used_bytes"] + h["retained_bytes"] >= 40 << 20, h
PY

# --heap before the trim: the freed large objects are retained (nothing purged them: the delay is an
# hour), the huge object held; every figure a line "name value", one per struct uslab_heap_stats field.
heapv() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
"$stat" --heap "$pid" > "$dir/heap" || fail "--heap failed"
for k in mapped_bytes used_bytes retained_bytes purged_bytes madvise_calls munmap_calls mremap_calls \
	grown_in_place arenas huge_objects huge_bytes object_bytes madvise_per_gib_purged; do
	[ -n "$(heapv $k "$dir/heap")" ] || fail "--heap: no $k: $(cat "$dir/heap")"
done
[ "$(heapv retained_bytes "$dir/heap")" -ge "$large_freed" ] ||
	fail "--heap: less retained than the $large_freed bytes freed: $(cat "$dir/heap")"
[ "$(heapv huge_objects "$dir/heap")" -eq 1 ] || fail "--heap: not one huge object: $(cat "$dir/heap")"
[ "$(heapv mapped_bytes "$dir/heap")" -ge $((64 << 20)) ] || fail "--heap: mapped: $(cat "$dir/heap")"
# The huge object's bytes (above 32 MiB), and the objects handed out: it and stat_a's 200-byte ones at least.
[ "$(heapv huge_bytes "$dir/heap")" -gt $((32 << 20)) ] || fail "--heap: huge_bytes: $(cat "$dir/heap")"
[ "$(heapv object_bytes "$dir/heap")" -ge $(($(heapv huge_bytes "$dir/heap") + want_a * 200)) ] &&
	[ "$(heapv object_bytes "$dir/heap")" -le "$(heapv used_bytes "$dir/heap")" ] ||
	fail "--heap: object_bytes: $(cat "$dir/heap")"

"$stat" --events "$pid" | grep -q "^stat_a " || fail "--events has no stat_a row"
# --sheaves: capacity now, min, max of each cache with sheaves (stat_a adapts: 126..1022 at most).
"$stat" --sheaves "$pid" | awk '$1 == "stat_a" { ok = $2 >= $3 && $2 <= $4 && $3 >= 2 } END { exit !ok }' ||
	fail "--sheaves: $("$stat" --sheaves "$pid")"
# --nodes: one NUMA node here, which it says; under a fake two-node topology (a second child),
# each cache's slabs per node, whose active objects add up to the cache's (text and JSON).
"$stat" --nodes "$pid" | grep -q "^# one NUMA node" || fail "--nodes, one node: $("$stat" --nodes "$pid")"
mkfifo "$dir/in2"
USLAB_NUMA_FAKE=0:0,1:1 USLAB_STATS=1 USLAB_STATS_MS=20 "$child" < "$dir/in2" > "$dir/out2" &
pid2=$!
exec 4> "$dir/in2"
for i in $(seq 100); do grep -q ready "$dir/out2" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out2" || fail "the NUMA child did not start"
sleep 0.2
# (The child is idle: slabinfo's active objects, sheaved ones included, hold still.)
want2=$("$stat" "$pid2" | awk '$1 == "stat_a" { print $2 }')
"$stat" --nodes "$pid2" > "$dir/nodes" || fail "--nodes failed"
awk -v a="$want2" '$1 == "stat_a" { sum += $5; n++ } END { exit !(n >= 1 && sum == a) }' "$dir/nodes" ||
	fail "--nodes: stat_a's active objects per node do not add up to $want2: $(cat "$dir/nodes")"
"$stat" --json "$pid2" | python3 -c '
import json, sys
c = [c for c in json.load(sys.stdin)["caches"] if c["name"] == "stat_a"][0]
assert len(c["nodes"]) == 2 and sum(n["active_objs"] for n in c["nodes"]) == c["active_objs"], c
' || fail "--json: the nodes of stat_a"
exec 4>&-
wait "$pid2" || fail "the NUMA child failed"
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
grep -q "^# heap: " "$dir/watch" || fail "-w: no heap line"

# uslab_trim in the child: the retained pages purged with madvise; the next snapshot shows the
# figures the child read right after (it is idle: they hold still), exactly.
echo trim >&3
for i in $(seq 100); do grep -q trimmed "$dir/out" 2>/dev/null && break; sleep 0.1; done
grep -q trimmed "$dir/out" || fail "the child did not trim"
sleep 0.2 # a snapshot after "trimmed"
"$stat" --heap "$pid" > "$dir/heap"
for kv in $(sed -n 's/^trimmed //p' "$dir/out"); do
	k=${kv%%=*} v=${kv#*=}
	[ "$(heapv "$k" "$dir/heap")" = "$v" ] ||
		fail "--heap after the trim: $k $(heapv "$k" "$dir/heap"), the child read $v: $(cat "$dir/heap")"
done
[ "$(heapv madvise_calls "$dir/heap")" -gt 0 ] || fail "--heap: no madvise after the trim"
[ "$(heapv purged_bytes "$dir/heap")" -ge "$large_freed" ] || fail "--heap: purged less than freed"
[ "$(heapv retained_bytes "$dir/heap")" -lt "$large_freed" ] || fail "--heap: still retained after the trim"
awk '$1 == "madvise_per_gib_purged" { exit !($2 > 0) }' "$dir/heap" || fail "--heap: madvise per GiB"
"$stat" --heap "$pid" | LC_ALL=C grep -q "$(printf '[\033\007]')" && fail "--heap: a raw escape byte"

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
forged="$udir/uslab-stat.$$"
head -c 100000 /dev/urandom > "$forged" && chmod 600 "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "stale or not of this version" "$dir/err" || fail "garbage file: $(cat "$dir/err")"
# A live process's snapshot of another version (a program of another uslab): named as such; the
# same file with another start time (a dead writer's, the pid reused) is stale.
forge_v1() { # $1: added to the start time
	python3 - "$$" "$1" <<'PY'
import os, struct, sys
pid, skew = int(sys.argv[1]), int(sys.argv[2])
start = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[19]) + skew
exe = os.stat("/proc/%d/exe" % pid)
hdr = struct.pack("<QIIiIQQQ", 0x3154415453424C55, 1, 0, pid, 0, start, exe.st_dev, exe.st_ino)
sys.stdout.buffer.write(hdr.ljust(100000, b"\0"))
PY
}
forge_v1 1 > "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "stale or not of this version" "$dir/err" || fail "stale file of another version: $(cat "$dir/err")"
forge_v1 0 > "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "is of snapshot version 1, this uslab-stat reads version [0-9]" "$dir/err" ||
	fail "another version: rc $rc: $(cat "$dir/err")"
[ "$(wc -l < "$dir/err")" -eq 1 ] || fail "another version: not one line: $(cat "$dir/err")"
head -c 10 /dev/urandom > "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
[ $rc -eq 1 ] && grep -q "stale or not of this version" "$dir/err" || fail "short file: $(cat "$dir/err")"
chmod 666 "$forged"
"$stat" $$ 2> "$dir/err"; rc=$?
rm -f "$forged"
[ $rc -eq 1 ] && grep -q "writable by others" "$dir/err" || fail "world-writable file: $(cat "$dir/err")"
# A FIFO where the file should be: refused at once, not a reader blocked for ever.
mkfifo "$forged"
timeout 10 "$stat" $$ 2> "$dir/err"; rc=$?
timeout 10 "$stat" --list > /dev/null 2>&1; rc2=$?
rm -f "$forged"
[ $rc -eq 1 ] && grep -q "not a regular file" "$dir/err" || fail "FIFO: rc $rc: $(cat "$dir/err")"
[ $rc2 -eq 0 ] || fail "--list with a FIFO: rc $rc2"
if [ "$(id -u)" -ne 0 ]; then
	touch "$forged" && chmod 000 "$forged"
	"$stat" $$ 2> "$dir/err"; rc=$?
	rm -f "$forged"
	[ $rc -eq 1 ] && grep -q "cannot read" "$dir/err" || fail "unreadable file"
fi

# A directory others can write (anyone could plant or block files there) is refused by both
# sides: the program warns once and runs on without exporting, uslab-stat refuses to read it.
mkdir -m 777 "$dir/open"
chmod 777 "$dir/open" # (whatever the umask)
USLAB_STATS_DIR="$dir/open" USLAB_STATS=1 "$stat" --options > /dev/null 2> "$dir/err" ||
	fail "USLAB_STATS_DIR writable by others: the program failed"
[ "$(grep -c "not exporting: $dir/open is writable by others" "$dir/err")" -eq 1 ] ||
	fail "USLAB_STATS_DIR writable by others: $(cat "$dir/err")"
[ -z "$(ls "$dir/open")" ] || fail "a file was written into a directory writable by others"
USLAB_STATS_DIR=relative USLAB_STATS=1 "$stat" --options > /dev/null 2> "$dir/err" ||
	fail "USLAB_STATS_DIR relative: the program failed"
grep -q "USLAB_STATS_DIR=relative ignored" "$dir/err" || fail "relative USLAB_STATS_DIR: $(cat "$dir/err")"

# A full file system: one warning and the program goes on (its blocks are reserved before the
# file is mapped: no SIGBUS at the first store). Needs a user and mount namespace for the tmpfs.
mkdir "$dir/full"
if unshare -Urm true 2> /dev/null; then
	unshare -Urm sh -c 'mount -t tmpfs -o size=64k,mode=700 none "$1" &&
		{ head -c 1M /dev/zero > "$1/fill"; USLAB_STATS_DIR="$1" USLAB_STATS=1 "$2" --options; }' \
		sh "$dir/full" "$stat" > /dev/null 2> "$dir/err"; rc=$?
	[ $rc -eq 0 ] || fail "full file system: exit status $rc: $(cat "$dir/err")"
	[ "$(grep -c "uslab: USLAB_STATS=1: not exporting: .*No space left on device" "$dir/err")" -eq 1 ] ||
		fail "full file system: $(cat "$dir/err")"
else
	echo "test_stat: (no user namespaces: the full file system case is not run)"
fi

# Environment values: decimal digits only, refused with a message otherwise, and --options shows
# the value in effect (never a refused one).
opt() { "$stat" --options 2> "$dir/err" | awk -v v="$1" '$1 == v { print $2 }'; }
[ "$(USLAB_MIN_ORDER=010 opt USLAB_MIN_ORDER)" = 10 ] || fail "USLAB_MIN_ORDER=010 is not ten"
for bad in 0x3 -18446744073709551615 " 3" +3 3x ""; do
	[ "$(USLAB_MIN_ORDER="$bad" opt USLAB_MIN_ORDER)" = 2 ] || fail "USLAB_MIN_ORDER='$bad' taken"
	grep -q "^uslab: USLAB_MIN_ORDER=.* ignored: want" "$dir/err" || fail "USLAB_MIN_ORDER='$bad': no message"
done
[ "$(USLAB_FAILSLAB=junk opt USLAB_FAILSLAB)" = unset ] || fail "a refused USLAB_FAILSLAB is shown"
[ "$(USLAB_DEBUG=F,x,y,QQ? opt USLAB_DEBUG)" = "F,x,y,QQ?" ] || fail "a valid USLAB_DEBUG is not shown"
[ "$(USLAB_DEBUG=FQ opt USLAB_DEBUG)" = unset ] || fail "a refused USLAB_DEBUG is shown"

# USLAB_STATS=exit: the table on the stderr the program started with, headed by pid and
# program, though the program closes stderr in its exit handler.
USLAB_STATS=exit "$child" exit 2> "$dir/exit" || fail "stat_child exit failed"
grep -q "^uslab: statistics of pid [0-9]* (stat_child) at exit" "$dir/exit" ||
	fail "USLAB_STATS=exit: no header: $(cat "$dir/exit")"
grep -q "^stat_exit " "$dir/exit" || fail "USLAB_STATS=exit: no stat_exit row: $(cat "$dir/exit")"

# -w while the process exits (issue 35 item 8): its last frame, then "process PID exited" and
# status 0, whether the process ended normally (its file removed at exit) or was killed (its file
# left behind), seen as a zombie or after it was reaped.
watch_exit() { # $1: the child's pid, $2: how it ends; the watcher's output in $dir/watch_exit
	# (without the children's stdin pipes, which would keep them alive)
	timeout 20 "$stat" -w 0.1 "$1" 3>&- 4>&- > "$dir/watch_exit" 2>&1 &
	watcher=$!
	sleep 0.5
	eval "$2"
	sleep 0.5 # (the watcher sees a zombie)
	wait "$1"
	child_rc=$?
	wait "$watcher"
	rc=$?
	# (the last line, after the frame's clear-to-end escape)
	[ $rc -eq 0 ] && tail -1 "$dir/watch_exit" | grep -q "^$(printf '\033')\[Juslab-stat: process $1 exited$" &&
		grep -q "slabinfo - version" "$dir/watch_exit" ||
		fail "-w when the process exits ($2): status $rc: $(tail -3 "$dir/watch_exit")"
}
mkfifo "$dir/in2"
USLAB_STATS=1 USLAB_STATS_MS=20 "$child" < "$dir/in2" > "$dir/out2" &
pid2=$!
exec 4> "$dir/in2"
for i in $(seq 100); do grep -q ready "$dir/out2" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$dir/out2" || fail "the second child did not start"
watch_exit "$pid2" "kill -KILL $pid2"
exec 4>&-
rm -f "$udir/uslab-stat.$pid2" # (left by the killed child)
[ "$child_rc" -eq 137 ] || fail "the killed child: status $child_rc"

# At exit the file is gone.
watch_exit "$pid" "exec 3>&-"
[ "$child_rc" -eq 0 ] || fail "the child failed"
[ ! -e "$udir/uslab-stat.$pid" ] || fail "the file is left after exit"
rm -rf "$dir"
echo "ok test_stat: slabinfo, json, events, heap (retained, then trimmed), options, list, -w" \
	"(to the process's exit or kill)," \
	"errors, forged files, another snapshot version, a FIFO," \
	"escaped names, directories others can write, a full file system, the exit table"
