// SPDX-License-Identifier: MIT
/*
 * Every public header compiles and links, as C11 (api_headers_c) and as
 * C++ (api_headers_cxx: tests/CMakeLists.txt compiles this same file as
 * C++, so write what both languages accept).
 */
#include <uslab.h>
#include <uslab/stats.h>
#include <uslab/kmem.h>
#include <uslab/rcu.h>
#include <uslab/magazine.h>
#include <uslab/counter.h>
#include <uslab.h> /* twice: include guards */

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
