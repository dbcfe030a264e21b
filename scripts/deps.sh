#!/bin/sh
# scripts/deps.sh [test|bench] - install the Debian packages uslab needs,
# only those missing; quiet when everything is present. Idempotent.
#
#   test:  the compiler, CMake, pkg-config, clang-format, liburcu
#   bench: the above, plus the peer allocators and gnuplot
set -eu
what=${1:-test}

pkgs="gcc g++ make cmake pkg-config clang-format liburcu-dev"
if [ "$what" = bench ]; then
	pkgs="$pkgs libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev"
	pkgs="$pkgs libdpdk-dev gnuplot-nox valgrind"
fi

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "scripts/deps.sh: installing$missing" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be stale or absent on a fresh machine.
$sudo apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
