#!/bin/sh
# test_bpftrace.sh BPFTRACE LIBUSLAB LIBMALLOC PROGRAM - bpftrace attached
# to uslab's static probes (src/probes.h, doc/tracing.md) counts exactly
# the events trace_probes causes: in libuslab.so (its cache "trace-c", a
# kmalloc size of its own), and in libuslab-malloc.so under LD_PRELOAD
# (sizes of its own). Counts are filtered by the program's name and those
# arguments, so other processes using the same libraries do not count.
#
# The probes are attached by path (every process mapping the library; the
# kernel raises the semaphores), as a user traces a service. Needs root
# (CI runs as root); where the kernel refuses BPF (no privilege, a
# container without it), it says why and skips (exit 77).
set -u
bt=$1
lib=$2
mlib=$3
prog=$4
skip() {
	echo "skipped: $*"
	exit 77
}
fail() {
	echo "FAIL: $*" >&2
	[ -f "$dir/out" ] && sed 's/^/  bpftrace: /' "$dir/out" >&2
	[ -f "$dir/err" ] && grep -v -e 'Addrspace mismatch' -e '^ *usdt:' -e '^ *~*$' "$dir/err" |
		sed 's/^/  bpftrace: /' >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || skip "not root: bpftrace needs CAP_BPF and CAP_PERFMON"
dir=$(mktemp -d) || exit 1
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
if ! "$bt" -e 'BEGIN { exit(); }' > "$dir/probe" 2>&1; then
	skip "the kernel refuses BPF here: $(grep -v '^$' "$dir/probe" | tail -1)"
fi
readelf -n "$lib" | grep -q "Provider: uslab" || fail "$lib has no static probes (built without <sys/sdt.h>?)"

c='comm == "trace_probes"'
m='comm == "trace_dropin"' # (the same program under another name: its own events)
cat > "$dir/probes.bt" <<EOT
BEGIN { printf("ready\n"); }
usdt:$lib:uslab:cache_create /$c && str(arg1) == "trace-c"/ { @cache_create = count(); }
usdt:$lib:uslab:cache_destroy /$c && str(arg1) == "trace-c"/ { @cache_destroy = count(); }
usdt:$lib:uslab:alloc /$c && str(arg4) == "trace-c"/ { @alloc = count(); }
usdt:$lib:uslab:free /$c && str(arg2) == "trace-c"/ { @free = count(); }
usdt:$lib:uslab:alloc_bulk /$c && str(arg1) == "trace-c" && arg2 == 64 && arg3 == 64/ { @alloc_bulk = count(); }
usdt:$lib:uslab:free_bulk /$c && str(arg1) == "trace-c" && arg2 == 64/ { @free_bulk = count(); }
usdt:$lib:uslab:kmalloc /$c && arg2 == 777/ { @kmalloc = count(); }
usdt:$lib:uslab:kfree /$c/ { @kfree = count(); }
usdt:$lib:uslab:sheaf_refill /$c && str(arg0) == "trace-c"/ { @sheaf_refill = count(); }
usdt:$lib:uslab:slab_new /$c && str(arg0) == "trace-c"/ { @slab_new = count(); }
usdt:$mlib:uslab:malloc /$m && arg2 == 12345/ { @malloc = count(); }
usdt:$mlib:uslab:calloc /$m && arg2 == 3 && arg3 == 4321/ { @calloc = count(); }
usdt:$mlib:uslab:realloc /$m && arg3 == 23456/ { @realloc = count(); }
usdt:$mlib:uslab:free /$m/ { @mfree = count(); }
EOT
"$bt" "$dir/probes.bt" > "$dir/out" 2>"$dir/err" &
pid=$!
i=0
until grep -q '^ready' "$dir/out"; do
	i=$((i + 1))
	[ $i -le 300 ] && kill -0 "$pid" 2>/dev/null || fail "bpftrace did not attach"
	sleep 0.1
done
"$prog" lib || fail "trace_probes lib"
ln -s "$prog" "$dir/trace_dropin" || exit 1
LD_PRELOAD=$mlib "$dir/trace_dropin" malloc || fail "trace_probes malloc"
kill -INT "$pid"
wait "$pid"
pid=
got() { sed -n "s/^@$1: //p" "$dir/out"; }
for kv in cache_create=1 cache_destroy=1 alloc=1000 free=1000 alloc_bulk=10 free_bulk=10 \
	kmalloc=500 kfree=500 malloc=300 calloc=200 realloc=100; do
	k=${kv%=*}
	want=${kv#*=}
	[ "$(got "$k")" = "$want" ] || fail "probe $k: $(got "$k") events, want $want"
done
for k in sheaf_refill slab_new; do
	[ "$(got "$k")" -ge 1 ] 2>/dev/null || fail "probe $k: no event"
done
[ "$(got mfree)" -ge 600 ] 2>/dev/null || fail "drop-in free: $(got mfree) events, want 600 or more"
echo "ok bpftrace counted every probe's events: $(grep '^@' "$dir/out" | tr '\n' ' ')"
