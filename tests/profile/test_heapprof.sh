#!/bin/sh
# SPDX-License-Identifier: MIT
# The sampled heap profile (src/profile.c, doc/tracing.md): heapprof_sites
# (site_main holds 80% of the live bytes, site_freed's objects are all
# freed) profiled through the malloc drop-in, through uslab_kmalloc (the
# library's call, and the inline path), at exit (USLAB_PROFILE=exit) and
# live (uslab-stat --heap-profile, --folded). google-pprof --text must name
# site_main first (the inline path: the inlined uslab_kmalloc_inline is
# first, or unoptimised the miss function uslab_priv_kmalloc_miss, and
# site_main the site with the largest cumulative share), its share
# within 10% of 80%, and site_freed (as many bytes, all freed) nothing
# (under 1%: the thread stacks uslab starts from its first allocation).
# Usage: test_heapprof.sh PPROF USLAB_STAT MALLOC_SO PROG_MALLOC PROG_KMALLOC PROG_KMALLOC_INLINE
set -eu
pprof=$1 stat=$2 malloc_so=$3 prog_malloc=$4 prog_kmalloc=$5 prog_inline=$6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 64 MiB live, one sample per 64 KiB on average: about 1,000 samples, a
# share's standard error about 1.3 points (the 10% tolerance is 8).
export USLAB_PROFILE_BYTES=65536
fail=0

# check NAME PROGRAM PROFILE FIRST: pprof's rows of PROFILE; FIRST is the
# name the first row must have (site_main, or the inlined kmalloc).
check() {
	"$pprof" --text "$2" "$3" >"$tmp/text" 2>"$tmp/err" || {
		echo "FAIL $1: google-pprof failed:"; cat "$tmp/err"; fail=1; return; }
	sed -n '1,6p' "$tmp/text" | sed "s/^/  $1: /"
	awk -v name="$1" -v first="$4" '
	/^ *[0-9.]+ +[0-9.]+% +[0-9.]+% +[0-9.]+ +[0-9.]+%/ {
		n++
		fn = $0; sub(/^ *[0-9.]+ +[0-9.]+% +[0-9.]+% +[0-9.]+ +[0-9.]+% +/, "", fn)
		if (n == 1) top = fn
		cum = $5; sub(/%/, "", cum)
		if (fn ~ /^site_/ && cum + 0 > best) { best = cum + 0; bestfn = fn }
		if (fn ~ /^site_freed/) freed = cum + 0
	}
	END {
		bad = 0
		# (An unoptimised program: its out-of-line miss is a frame of its own.)
		if (top != first && !(first ~ /inline/ && top == "uslab_priv_kmalloc_miss")) {
			print "FAIL " name ": first row " top ", not " first; bad = 1 }
		if (bestfn !~ /^site_main/) { print "FAIL " name ": largest site " bestfn; bad = 1 }
		if (best < 72 || best > 88) { print "FAIL " name ": site_main " best "%, not 80% +- 10%"; bad = 1 }
		# (Not 0: the first allocation of the run, in site_freed, starts
		# threads of uslab, whose C library allocations live on.)
		if (freed >= 1) { print "FAIL " name ": site_freed (all freed) has " freed "%"; bad = 1 }
		if (!bad) print "ok " name ": site_main " best "%"
		exit bad
	}' "$tmp/text" || fail=1
}

cd "$tmp"
# At exit, through the drop-in.
USLAB_PROFILE=exit LD_PRELOAD=$malloc_so "$prog_malloc" >/dev/null
check malloc-exit "$prog_malloc" "$(ls uslab-heap.*.prof)" site_main
rm -f uslab-heap.*.prof
# At exit, through the library's uslab_kmalloc (USLAB_PROFILE_DIR).
mkdir out
USLAB_PROFILE=exit USLAB_PROFILE_DIR=$tmp/out "$prog_kmalloc" >/dev/null
check kmalloc-exit "$prog_kmalloc" "$(ls out/uslab-heap.*.prof)" site_main
# The inline kmalloc: its frame is the inlined uslab_kmalloc_inline, in the site.
USLAB_PROFILE=exit "$prog_inline" >/dev/null
check kmalloc-inline "$prog_inline" "$(ls uslab-heap.*.prof)" "uslab_kmalloc_inline (inline)"
rm -f uslab-heap.*.prof

# Live, through uslab-stat, while the program waits.
mkdir stats
export USLAB_STATS_DIR=$tmp/stats
USLAB_STATS=1 USLAB_STATS_MS=50 USLAB_PROFILE=on LD_PRELOAD=$malloc_so \
	"$prog_malloc" 64 30 >ready &
pid=$!
i=0
while ! grep -q live ready 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.3 # (a refresh after the heap is built)
"$stat" --heap-profile $pid >live.prof || fail=1
"$stat" --folded $pid >live.folded || fail=1
kill $pid
wait $pid 2>/dev/null || true
grep -q '^MAPPED_LIBRARIES:$' live.prof || { echo "FAIL live: no MAPPED_LIBRARIES"; fail=1; }
check live "$prog_malloc" live.prof site_main
# Folded: "frame;...;frame bytes" lines, the bytes summing to the profile's.
awk '!/^[^ ]+(;[^ ]+)* [0-9]+$/ { print "FAIL folded: " $0; bad = 1; exit 1 } { s += $NF }
	END { if (!bad) print "ok folded: " NR " stacks, " s " bytes" }' live.folded || fail=1
# A hostile file where the exit profile goes (the same pid: exec): a FIFO is
# neither waited on nor written, a symlink not followed; a line says why.
mkdir -p "$tmp/h"
for kind in fifo link; do
	out=$(USLAB_PROFILE=exit USLAB_PROFILE_DIR=$tmp/h timeout 20 sh -c '
		f="$1/uslab-heap.$$.prof"
		if [ "$2" = fifo ]; then mkfifo "$f"; else ln -s "$1/target" "$f"; fi
		exec "$3" 1 >/dev/null' sh "$tmp/h" "$kind" "$prog_kmalloc" 2>&1) && rc=0 || rc=$?
	if [ $rc -ne 0 ] || ! echo "$out" | grep -q "USLAB_PROFILE=exit: .*uslab-heap" ||
		[ -e "$tmp/h/target" ]; then
		echo "FAIL hostile $kind: rc $rc: $out"
		fail=1
	else
		echo "ok hostile $kind: $(echo "$out" | grep USLAB_PROFILE=exit)"
	fi
	rm -f "$tmp/h"/*
done
exit $fail
