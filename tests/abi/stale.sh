#!/bin/sh
# SPDX-License-Identifier: MIT
# api_abi_stale: a program compiled inline against headers of another
# generation of the private ABI (<uslab/inline/priv.h>, USLAB_PRIV_ABI) fails to
# link, or to start, with a message naming the symbol; it never runs
# against a layout it does not know. The stale program is simulated by the
# reference the inline paths of the headers before issue 34 made (the
# thread's table, uslab_priv_pcs_table, without a generation).
#
#	stale.sh CC INCLUDE_DIR LIB_DIR
set -u
cc=$1 inc=$2 lib=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$tmp/stale.c" <<'EOC'
/* What <uslab/fastpath.h> of generation 1 bound to. */
extern __thread char *uslab_priv_pcs_table __attribute__((tls_model("initial-exec")));
int main(void)
{
	return uslab_priv_pcs_table != 0;
}
EOC
cat >"$tmp/current.c" <<'EOC'
#include <uslab.h>
#include <uslab/kmalloc.h>
#include <uslab/magazine.h>
int main(void)
{
	struct uslab_cache *c = uslab_cache_create("abi", 64, NULL, 0);
	struct uslab_magazine *m = uslab_magazine_create(c, 0, 0);
	void *p = uslab_cache_alloc(c), *q = uslab_kmalloc(100), *r = uslab_magazine_alloc(m);

	uslab_cache_free(c, p);
	uslab_kfree(q);
	uslab_magazine_free(m, r);
	uslab_magazine_destroy(m);
	return uslab_cache_destroy(c);
}
EOC

# 1. At link time.
if "$cc" -O2 -o "$tmp/stale" "$tmp/stale.c" -L"$lib" -luslab >"$tmp/ld.txt" 2>&1; then
	fail "a stale program linked"
fi
grep -q "undefined reference to .uslab_priv_pcs_table" "$tmp/ld.txt" || { cat "$tmp/ld.txt"; fail "the link error does not name the symbol"; }
echo "ok link: $(grep -m1 'undefined reference' "$tmp/ld.txt")"

# 2. At start-up: linked against a library of generation 1 (a stub with its
# soname and the old symbol), then run against this one.
mkdir "$tmp/old"
echo '__thread char *uslab_priv_pcs_table;' >"$tmp/old/lib.c"
"$cc" -shared -fPIC -o "$tmp/old/libuslab.so" -Wl,-soname,libuslab.so.0 "$tmp/old/lib.c" ||
	fail "build of the old library"
"$cc" -O2 -o "$tmp/stale" "$tmp/stale.c" -L"$tmp/old" -luslab || fail "build of the stale program"
if LD_LIBRARY_PATH="$lib" "$tmp/stale" >"$tmp/run.txt" 2>&1; then
	fail "a stale program ran"
fi
grep -q "undefined symbol: uslab_priv_pcs_table" "$tmp/run.txt" || { cat "$tmp/run.txt"; fail "the load error does not name the symbol"; }
echo "ok load: $(head -1 "$tmp/run.txt")"

# 3. This generation's headers, inline and not: they link and run.
for def in "" -DUSLAB_NO_INLINE; do
	"$cc" -O2 $def -I"$inc" -o "$tmp/current" "$tmp/current.c" -L"$lib" -luslab -Wl,-rpath,"$lib" ||
		fail "build with this generation's headers ($def)"
	"$tmp/current" || fail "run with this generation's headers ($def)"
	nm -D "$tmp/current" | grep -q "uslab_priv_pcs_table\$" && fail "bound to the old name ($def)"
done
echo "ok current headers, inline and USLAB_NO_INLINE"
