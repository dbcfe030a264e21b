#!/bin/sh
# run.sh LIB KIND PROGRAM [SRC_DIR] - run a real program under
# LD_PRELOAD=LIB (libuslab-malloc.so) and check its output: it must exit
# 0, write nothing to stderr (a preload that does not load is only a
# warning of ld.so there), show that the preload was active, and print
# exactly what the same program prints without the preload, and the few
# values known in advance.
#
#   KIND python   PROGRAM is Debian's python3; runs SRC_DIR/workload.py
#   KIND sqlite3  PROGRAM is Debian's sqlite3; runs SRC_DIR/workload.sql
#   KIND cxx      PROGRAM is cxx_threads (tests/preload/cxx_threads.cpp)
set -u
lib=$1 kind=$2 prog=$3 src=${4:-}

fail() {
	echo "FAIL preload_$kind: $*"
	exit 1
}

[ -f "$lib" ] || fail "no preload library $lib"
[ -x "$prog" ] || fail "$prog not found: install it (scripts/deps.sh test)"
tmp=$(mktemp -d) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT

# run NAME PRELOAD STDIN CMD...: stdout in $tmp/NAME.out; fails on an exit
# status other than 0 (a crash: 128 + the signal) or any stderr output.
run() {
	name=$1 preload=$2 stdin=$3
	shift 3
	if [ -n "$preload" ]; then
		env LD_PRELOAD="$preload" "$@" <"$stdin" >"$tmp/$name.out" 2>"$tmp/$name.err"
	else
		env -u LD_PRELOAD "$@" <"$stdin" >"$tmp/$name.out" 2>"$tmp/$name.err"
	fi
	status=$?
	if [ "$status" -ne 0 ] || [ -s "$tmp/$name.err" ]; then
		echo "--- stdout of the $name run:"
		tail -n 20 "$tmp/$name.out"
		echo "--- stderr of the $name run:"
		tail -n 20 "$tmp/$name.err"
		fail "$name run: exit status $status${preload:+ under LD_PRELOAD=$preload}: $*"
	fi
}

# expect FILE LINE: FILE has LINE, exactly.
expect() {
	grep -qxF -- "$2" "$1" || fail "expected the line '$2' in the output, got: $(cat "$1")"
}

# same: the preloaded run printed what the reference run printed.
same() {
	if ! cmp -s "$tmp/ref.out" "$tmp/preload.out"; then
		echo "--- output without the preload (-) and with it (+):"
		diff -u "$tmp/ref.out" "$tmp/preload.out" | head -n 40
		fail "output differs under LD_PRELOAD"
	fi
}

case $kind in
python)
	export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1
	run ref "" /dev/null "$prog" -s "$src/workload.py"
	# PYTHONMALLOC=malloc: every object of the interpreter from malloc.
	run preload "$lib" /dev/null env PYTHONMALLOC=malloc "$prog" -s "$src/workload.py" --preload
	same
	expect "$tmp/preload.out" "entries 75000"
	expect "$tmp/preload.out" "json 2625453"
	expect "$tmp/preload.out" "digest d61016bceedde8e7b54af786b7eadcb07de8a9131d20ceab1024faf5331e39de"
	;;
sqlite3)
	run ref "" "$src/workload.sql" "$prog" -bail :memory:
	# First, from the sqlite3 process itself: is the library mapped? ($PPID
	# is expanded by the shell of .system, a child of sqlite3.)
	# shellcheck disable=SC2016
	run preload "$lib" "$src/workload.sql" "$prog" -bail \
		-cmd '.system grep -c libuslab-malloc /proc/$PPID/maps' :memory:
	maps=$(head -n 1 "$tmp/preload.out")
	[ "$maps" -gt 0 ] 2>/dev/null || fail "libuslab-malloc.so not mapped in sqlite3 ($maps)"
	tail -n +2 "$tmp/preload.out" >"$tmp/preload.sql.out"
	mv "$tmp/preload.sql.out" "$tmp/preload.out"
	same
	# Known in advance: sum((31 x) % 1000) and sum(2 + digits(x) + 2 (x % 50))
	# for x = 1..100000, sum(x % 7) for x = 1..1000.
	expect "$tmp/preload.out" "orders|100000|49950000|5588895"
	expect "$tmp/preload.out" "customers|1000|3003"
	expect "$tmp/preload.out" "after-delete|78599|44638420|4571387"
	expect "$tmp/preload.out" "ok"
	;;
cxx)
	run ref "" /dev/null "$prog"
	run preload "$lib" /dev/null "$prog" --preload
	same
	expect "$tmp/preload.out" "ok cxx_threads"
	;;
*)
	fail "unknown kind $kind"
	;;
esac
echo "ok preload_$kind: same output with and without LD_PRELOAD=$lib"
head -n 5 "$tmp/preload.out"
