#!/bin/sh
# test_notes.sh PROBES_H LIBUSLAB LIBMALLOC - every static probe of
# src/probes.h (PROBE_LIST: libuslab.so; MALLOC_PROBE_LIST:
# libuslab-malloc.so, when it is built) is in that library's ELF notes
# (readelf -n), with a semaphore, and no other uslab probe is.
set -u
h=$1
lib=$2
mlib=${3:-}
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
# The names of one list macro of probes.h: X(name) entries up to the next blank line.
names() {
	sed -n "/^#define $1(X)/,/^\$/p" "$h" | grep -o 'X([a-z_]*)' | sed 's/X(\(.*\))/\1/' | sort -u
}
notes() {
	readelf -n "$1" | awk '/Provider: uslab/ { p = 1; next } p && /Name:/ { print $2; p = 0 }' | sort -u
}
check() {
	want=$(names "$1")
	[ -n "$want" ] || fail "no probe names in $1 of $h"
	have=$(notes "$2")
	[ "$want" = "$have" ] || fail "$2: probes $(echo $have) ; probes.h $1: $(echo $want)"
	if readelf -n "$2" | grep -A3 "Provider: uslab" | grep "Semaphore: 0x0*\$"; then
		fail "$2: a probe without a semaphore"
	fi
	echo "ok $(basename "$2"): $(echo "$have" | wc -l) probes, each with a semaphore: $(echo $have)"
}
check PROBE_LIST "$lib"
[ -z "$mlib" ] || check MALLOC_PROBE_LIST "$mlib"
