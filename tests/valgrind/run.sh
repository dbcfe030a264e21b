#!/bin/sh
# run.sh VALGRIND PROGRAM - memcheck over planted.c: each planted bug is
# reported against its function, and uslab itself causes no report.
set -u
out=$("$1" --tool=memcheck --leak-check=full --error-exitcode=0 "$2" 2>&1)
echo "$out"
fail=0
check() {
	if ! printf '%s\n' "$out" | grep -A12 "$1" | grep -q "$2"; then
		echo "run.sh: no \"$1\" report naming $2" >&2
		fail=1
	fi
}
check "Invalid read of size 8" read_after_free
check "Conditional jump or move depends on uninitialised value" branch_on_garbage
check "definitely lost in loss record" leak_one
# Three planted errors, no other (the leak is counted apart).
printf '%s\n' "$out" | grep -q "ERROR SUMMARY: 3 errors" || {
	echo "run.sh: want exactly the 3 planted errors" >&2
	fail=1
}
exit $fail
