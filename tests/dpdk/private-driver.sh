#!/bin/sh
# private-driver.sh DRIVER CMD [ARG...] - run CMD with each ARG that is
# @DRIVER@ replaced by a path of DRIVER that EAL's -d accepts: DRIVER
# itself, or, when it lies below a world-writable directory (insecure.sh),
# a copy in a private directory, removed afterwards. CMD's exit status.
set -u
here=$(dirname "$0")
. "$here/insecure.sh"
driver=$1
shift
dir=
if insecure "$(dirname "$driver")"; then
	dir=$(private_dir) || exit 1
	cp "$driver" "$dir/" || exit 1
	driver=$dir/$(basename "$driver")
fi
n=$#
while [ "$n" -gt 0 ]; do
	a=$1
	shift
	[ "$a" = @DRIVER@ ] && a=$driver
	set -- "$@" "$a"
	n=$((n - 1))
done
"$@"
rc=$?
[ -z "$dir" ] || rm -rf "$dir"
exit $rc
