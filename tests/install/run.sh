#!/bin/sh
# Install the build into a temporary prefix, then build and run a program
# against the installed copy: once with find_package(uslab), once with
# pkg-config.
set -eu
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
"$CMAKE" --install "$BUILD_DIR" --prefix "$prefix" >/dev/null
for f in include/uslab.h include/uslab/stats.h lib/libuslab.so lib/libuslab.a \
	 lib/pkgconfig/uslab.pc lib/cmake/uslab/uslabConfig.cmake; do
	test -e "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done
# The installed library loads no library it does not need: libm alone cost
# sed's peak RSS 378 KiB under the drop-in (src/sample_math.h).
if readelf -d "$prefix/lib/libuslab.so" | grep -q 'NEEDED.*libm\.so'; then
	echo "libuslab.so needs libm"
	exit 1
fi
"$CMAKE" -S "$SRC_DIR" -B "$prefix/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
"$CMAKE" --build "$prefix/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib" "$prefix/build/consumer"
"$prefix/build/consumer_static"
cc_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs uslab)
cc -o "$prefix/pc_consumer" "$SRC_DIR/consumer.c" $cc_flags -pthread
LD_LIBRARY_PATH="$prefix/lib" "$prefix/pc_consumer"
# Statically, with pkg-config --static's flags: the archive's own needs
# (liburcu) come from Libs.private and Requires.private.
pc_static=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --static --libs uslab | sed 's/-luslab//')
cc -o "$prefix/pc_consumer_static" "$SRC_DIR/consumer.c" \
	$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags uslab) \
	"$prefix/lib/libuslab.a" $pc_static
"$prefix/pc_consumer_static"
# The installed examples, built as their comments say, with pkg-config's flags.
ex="$prefix/share/doc/uslab/examples"
for f in packet_pipeline.c cxx_sessions.cpp include/uslab/uslab.hpp; do
	test -e "$ex/$f" || test -e "$prefix/$f" || { echo "not installed: $f"; exit 1; }
done
cc -O2 -o "$prefix/echo_server" "$ex/echo_server.c" $cc_flags -pthread
LD_LIBRARY_PATH="$prefix/lib" "$prefix/echo_server" 20 10 2 | grep -q "ok: every reply"
cc -O2 -o "$prefix/packet_pipeline" "$ex/packet_pipeline.c" $cc_flags -pthread
LD_LIBRARY_PATH="$prefix/lib" "$prefix/packet_pipeline" 100000 | grep -q "ok: every packet"
if pkg-config --exists liburcu-cds; then
	cc -O2 -o "$prefix/rcu_table" "$ex/rcu_table.c" $cc_flags \
		$(pkg-config --cflags --libs liburcu-memb liburcu-cds) -pthread
	LD_LIBRARY_PATH="$prefix/lib" "$prefix/rcu_table" 2 1 1 | grep -q "ok: no reader"
fi
c++ -std=c++17 -O2 -o "$prefix/cxx_sessions" "$ex/cxx_sessions.cpp" $cc_flags -pthread
LD_LIBRARY_PATH="$prefix/lib" "$prefix/cxx_sessions" 5000 2 | grep -q "ok: every session"
echo "ok install_consumer: find_package(uslab), uslab::uslab_static, pkg-config (also --static) and the examples"
