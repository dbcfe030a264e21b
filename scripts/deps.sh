#!/bin/sh
# scripts/deps.sh [test|bench] - install the Debian packages uslab needs,
# only those missing; quiet when everything is present. Idempotent.
#
#   test:  the compiler, CMake, pkg-config, clang-format, clang (the public
#          headers are compiled by it too, as C and C++), liburcu,
#          python3 and sqlite3 (tests/preload runs them on libuslab-malloc.so),
#          valgrind (its client-request headers, and the memcheck test),
#          DPDK (libdpdk-dev: the mempool driver dpdk/ builds against;
#          dpdk-dev: dpdk-testpmd, which tests/dpdk runs on the driver),
#          systemtap-sdt-dev (<sys/sdt.h>: the static probes, src/probes.h),
#          bpftrace (tests/trace counts the probes' events), prometheus
#          (promtool, which lints uslab-stat --prometheus) and
#          google-perftools (google-pprof reads the heap profiles of
#          tests/profile)
#   bench: the above, plus the peer allocators and gnuplot, and the real
#          programs bench/run-malloc runs under each malloc (redis, python3,
#          sqlite3, gcc, GNU time, perl, gawk, sed, sort, xz, zstd, git,
#          lua, php), and strace (the heap suite counts madvise calls)
set -eu
what=${1:-test}

pkgs="gcc g++ make cmake pkg-config clang-format clang liburcu-dev python3 sqlite3 valgrind"
pkgs="$pkgs libdpdk-dev dpdk-dev systemtap-sdt-dev bpftrace"
pkgs="$pkgs prometheus google-perftools"
if [ "$what" = bench ]; then
	pkgs="$pkgs libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev"
	pkgs="$pkgs gnuplot-nox"
	pkgs="$pkgs redis-server redis-tools python3 sqlite3 time"
	# the heap suite (strace counts madvise calls) and the malloc suite's other real programs
	pkgs="$pkgs strace perl gawk sed coreutils xz-utils zstd git lua5.4 php-cli"
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
# Debian starts redis-server as a system service; bench/run-malloc runs its own
# instances on a private port, so a packaged one must not run beside them.
case " $missing " in
*" redis-server "*)
	if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
		$sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
	elif [ -x /etc/init.d/redis-server ]; then
		$sudo /etc/init.d/redis-server stop >/dev/null 2>&1 || true
		$sudo update-rc.d redis-server disable >/dev/null 2>&1 || true
	fi
	;;
esac
# Debian starts the Prometheus server (port 9090) as a system service too; the
# tests want only its promtool.
case " $missing " in
*" prometheus "*)
	if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
		$sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
	elif [ -x /etc/init.d/prometheus ]; then
		$sudo /etc/init.d/prometheus stop >/dev/null 2>&1 || true
		$sudo update-rc.d prometheus disable >/dev/null 2>&1 || true
	fi
	;;
esac
