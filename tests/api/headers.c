// SPDX-License-Identifier: MIT
/*
 * Every public header compiles and links, as C11 (api_headers_c) and as
 * C++ (api_headers_cxx: tests/CMakeLists.txt compiles this same file as
 * C++, so write what both languages accept).
 *
 * With USLAB_TEST_ATTRIBUTE_MACROS (api_headers_macros_c, _cxx): first
 * the words a program may define as macros, as the kernel defines
 * noinline and <stdnoreturn.h> noreturn, each to a stray token that breaks
 * any use of it: the headers must spell every attribute __name__ (issue
 * 35 item 4). The C library's headers come first, as in a program.
 */
#ifdef USLAB_TEST_ATTRIBUTE_MACROS
#if defined(__cplusplus) && __cplusplus >= 201703L
/* <uslab/uslab.hpp>'s standard headers, before the macros as in a program. */
#include <cstdlib>
#include <memory>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <utility>
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif
/* GCC's attribute names, and their arguments' words. */
#define access @
#define alias @
#define aligned @
#define alloc_align @
#define alloc_size @
#define always_inline @
#define artificial @
#define assume_aligned @
#define cleanup @
#define cold @
#define constructor @
#define copy @
#define deprecated @
#define destructor @
#define error @
#define externally_visible @
#define fallthrough @
#define flatten @
#define format @
#define format_arg @
#define gnu_inline @
#define hot @
#define leaf @
#define likely @
#define malloc @
#define may_alias @
#define mode @
#define no_instrument_function @
#define no_sanitize @
#define no_sanitize_address @
#define noclone @
#define noinline @
#define noipa @
#define none @
#define nonnull @
#define noreturn @
#define nothrow @
#define optimize @
#define packed @
#define pure @
#define read_only @
#define read_write @
#define returns_nonnull @
#define section @
#define sentinel @
#define target @
#define tls_model @
#define unlikely @
#define unused @
#define used @
#define vector_size @
#define visibility @
#define warn_unused_result @
#define warning @
#define weak @
#define write_only @
#define nodiscard @
#define maybe_unused @
/* The kernel's own short forms (include/linux/compiler_attributes.h; glibc has one). */
#undef __always_inline
#define __always_inline @
#define __aligned @
#define __cold @
#define __malloc @
#define __maybe_unused @
#define __must_check @
#define __noreturn @
#define __packed @
#define __printf @
#define __pure @
#define __section @
#define __used @
#define __weak @
#endif
#include <uslab.h>
#include <uslab/stats.h>
#include <uslab/kmem.h>
#include <uslab/rcu.h>
#include <uslab/magazine.h>
#include <uslab/counter.h>
#include <uslab.h> /* twice: include guards */
#if defined(__cplusplus) && __cplusplus >= 201703L
#include <uslab/uslab.hpp> /* the C++ API (C++17) */
#endif

int main(void)
{
	static struct uslab_cache_args a; /* zero ({ 0 } warns in C++, {} is not C11) */
	struct uslab_cache_stats st;
	struct uslab_cache *c = uslab_cache_create("hdr", 8, &a, USLAB_HWCACHE_ALIGN);

	if (!c || uslab_cache_stats(c, &st))
		return 1;
	uslab_cache_free(c, uslab_cache_alloc(c));
	uslab_kfree(uslab_kmalloc(24));
	kfree(kmalloc(100000, GFP_KERNEL));
	kfree(kstrdup("header", GFP_KERNEL));
	{
		void *o = uslab_cache_alloc(c);

		if (uslab_ksize(uslab_kmalloc(0)) != 0 || virt_to_slab(o) != uslab_slab_of(o))
			return 1;
		kfree(o);
	}
	kvfree_rcu(uslab_cache_alloc(c));
	kvfree_rcu_barrier();
	{
		struct uslab_magazine *m = uslab_magazine_create(c, 0, 0);
		struct uslab_free_batch b;
		void *p[2];

		if (!m || uslab_magazine_alloc_bulk(m, 2, p) != 2)
			return 1;
		uslab_magazine_free_bulk(m, 2, p);
		uslab_magazine_free(m, uslab_magazine_alloc(m));
		uslab_free_batch_init(&b, c);
		uslab_free_batch_add(&b, uslab_magazine_alloc(m));
		uslab_free_batch_flush(&b);
		if (uslab_magazine_count(m) > m->capacity)
			return 1;
		uslab_magazine_destroy(m);
	}
	{
		struct uslab_counter n;
		struct uslab_idgen g;

		if (uslab_counter_init(&n, 1) || uslab_idgen_init(&g, 5))
			return 1;
		uslab_counter_add(&n, 2);
		if (uslab_counter_sum(&n) != 3 || uslab_idgen_next(&g) != 5)
			return 1;
		uslab_idgen_destroy(&g);
		uslab_counter_destroy(&n);
	}
	return uslab_cache_destroy(c);
}
