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
"$CMAKE" -S "$SRC_DIR" -B "$prefix/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
"$CMAKE" --build "$prefix/build" >/dev/null
LD_LIBRARY_PATH="$prefix/lib" "$prefix/build/consumer"
"$prefix/build/consumer_static"
cc_flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs uslab)
cc -o "$prefix/pc_consumer" "$SRC_DIR/consumer.c" $cc_flags -pthread
LD_LIBRARY_PATH="$prefix/lib" "$prefix/pc_consumer"
echo "ok install_consumer: find_package(uslab), uslab::uslab_static and pkg-config"
