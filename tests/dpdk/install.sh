#!/bin/sh
# install.sh CMAKE BUILD_DIR TESTPMD - install the build into a temporary
# prefix; the driver must be there, next to libuslab.so, and find it
# without LD_LIBRARY_PATH ($ORIGIN): testpmd.sh runs on the installed copy.
# The prefix is in the build directory, not under /tmp: EAL refuses to load
# a plugin below a world-writable directory ("directory path /tmp is
# world-writable and insecure").
set -eu
cmake=$1
build=$2
testpmd=$3
here=$(dirname "$0")
prefix=$build/tests/dpdk/install-prefix
rm -rf "$prefix"
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null
driver=$(find "$prefix" -name librte_mempool_uslab.so)
[ -n "$driver" ] || { echo "FAIL: librte_mempool_uslab.so not installed"; exit 1; }
[ -e "$(dirname "$driver")/libuslab.so.0" ] || { echo "FAIL: not next to libuslab.so.0"; exit 1; }
unset LD_LIBRARY_PATH
sh "$here/testpmd.sh" "$testpmd" "$driver"
echo "ok installed driver: ${driver#"$prefix"/}"
