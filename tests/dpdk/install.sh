#!/bin/sh
# install.sh CMAKE BUILD_DIR TESTPMD - install the build into a temporary
# prefix; the driver must be there, next to libuslab.so, and find it
# without LD_LIBRARY_PATH ($ORIGIN): testpmd.sh runs on the installed copy.
# The prefix is in the build directory, or in a private directory when
# that is below a world-writable one, which EAL refuses (insecure.sh).
set -eu
cmake=$1
build=$2
testpmd=$3
here=$(dirname "$0")
. "$here/insecure.sh"
if insecure "$build"; then
	prefix=$(private_dir)/prefix
else
	prefix=$build/tests/dpdk/install-prefix
	rm -rf "$prefix"
fi
trap 'rm -rf "$prefix"; [ "${prefix#"$build"}" != "$prefix" ] || rmdir "$(dirname "$prefix")"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
driver=$(find "$prefix" -name librte_mempool_uslab.so)
[ -n "$driver" ] || { echo "FAIL: librte_mempool_uslab.so not installed"; exit 1; }
[ -e "$(dirname "$driver")/libuslab.so.0" ] || { echo "FAIL: not next to libuslab.so.0"; exit 1; }
unset LD_LIBRARY_PATH
sh "$here/testpmd.sh" "$testpmd" "$driver"
echo "ok installed driver: ${driver#"$prefix"/}"
