// SPDX-License-Identifier: MIT
/*
 * test_kmalloc.c (unit) - kmalloc.c's size classes seen from inside: the
 * lookup is the smallest class for every size, every class is a cache of
 * exactly its size with slabs that waste little, large objects are slabs
 * of their own with the right order, and a request made while the library
 * starts is served from the boot heap.
 */
#include "internal.h"
#include "../test.h"

static void test_lookup(void)
{
	unsigned int prev = 0;

	for (size_t n = 1; n <= USLAB_KMALLOC_MAX_CACHE_SIZE; n++) {
		unsigned int i = uslab_priv_kmalloc_index(n);
		size_t cs = uslab_kmalloc_class_size(n);

		CHECK(i < USLAB_KMALLOC_CLASSES && (i == prev || i == prev + 1),
		      "index(%zu) = %u after %u: monotonic, no class skipped", n, i, prev);
		CHECK(cs >= n && (n <= 8 || uslab_kmalloc_class_size(n - 1) <= cs),
		      "class of %zu holds it", n);
		/* Smallest: the class below (if any) is too small. */
		CHECK(i == 0 || uslab_kmalloc_class_size(n) != n ||
			      uslab_priv_kmalloc_index(n + 1) == i + 1 ||
			      n == USLAB_KMALLOC_MAX_CACHE_SIZE,
		      "class boundary at %zu", n);
		prev = i;
	}
	CHECK(prev == USLAB_KMALLOC_CLASSES - 1, "last class %u", prev);
	/* The worst waste from 64 bytes up, in the classes and in large objects (doc/design.md). */
	for (int large = 0; large < 2; large++) {
		size_t from = large ? USLAB_KMALLOC_MAX_CACHE_SIZE + 1 : 64;
		size_t to = large ? 4u << 20 : USLAB_KMALLOC_MAX_CACHE_SIZE, at = from;
		double worst = 0;

		for (size_t n = from; n <= to; n++) {
			double w = (double)(uslab_kmalloc_class_size(n) - n) / (double)n;

			if (w > worst) {
				worst = w;
				at = n;
			}
		}
		CHECK(worst < 0.125, "waste %.4f at %zu", worst, at);
		printf("  worst waste, %s: %.3f%% (%zu bytes in %zu)\n",
		       large ? "large objects" : "classes from 64 B", 100 * worst, at,
		       uslab_kmalloc_class_size(at));
	}
	/* The inline path's table gives every size its class's cache id. */
	CHECK(uslab_kmalloc_cache(1), "classes");
	for (size_t n = 1; n <= USLAB_KMALLOC_MAX_CACHE_SIZE; n++)
		CHECK(uslab_priv_kmalloc_ids[uslab_priv_kmalloc_index(n)] ==
			      uslab_kmalloc_cache(n)->id,
		      "size %zu: id %u, class %s", n,
		      uslab_priv_kmalloc_ids[uslab_priv_kmalloc_index(n)],
		      uslab_kmalloc_cache(n)->name);
}

/* Checks every class, and prints its slab order, objects and tail waste (doc/design.md). */
static void test_class_caches(void)
{
	for (size_t n = 1; n <= USLAB_KMALLOC_MAX_CACHE_SIZE; n = uslab_kmalloc_class_size(n) + 1) {
		struct uslab_cache *c = uslab_kmalloc_cache(n);
		size_t cs = uslab_kmalloc_class_size(n), slab;

		CHECK(c && c->size == cs && c->object_size == cs, "%s: stride %u", c->name,
		      c->size);
		CHECK(c->flags & CACHE_KMALLOC, "%s is a kmalloc class", c->name);
		CHECK(c->sheaf_capacity >= 2, "%s has sheaves", c->name);
		slab = PAGE_SIZE << c->order;
		/* (USLAB_LAYOUT=onslab may reserve room for the index array.) */
		CHECK(c->objects == slab / cs || c->layout == USLAB_LAYOUT_ONSLAB,
		      "%s: objects per slab", c->name);
		/* The slab's tail wastes at most 1/8 of it (the order rule, KMALLOC_MAX_ORDER). */
		CHECK(slab - c->objects * cs <= slab / 8, "%s: order %u wastes %zu of %zu", c->name,
		      c->order, slab - c->objects * cs, slab);
		CHECK(c->order <= KMALLOC_MAX_ORDER, "%s: order %u", c->name, c->order);
		printf("  %-14s order %u, %3u objects, tail %4.1f%%, min_partial %u\n", c->name,
		       c->order, c->objects,
		       100.0 * (double)(slab - c->objects * cs) / (double)slab, c->min_partial);
		/* Empty slabs kept: at most 64 KiB of them, at least one. */
		CHECK(c->min_partial >= 1 &&
			      (c->min_partial == 1 || c->min_partial * slab <= 65536),
		      "%s: min_partial %u of %zu-byte slabs", c->name, c->min_partial, slab);
	}
}

static void test_large_slab(void)
{
	static const size_t sizes[] = { 32769, 65536, 65537, 1 << 20, (1 << 20) + 1 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = uslab_kmalloc(sizes[i]);
		struct slab *s = os_slab_lookup(p);
		size_t pages = (sizes[i] + PAGE_SIZE - 1) / PAGE_SIZE;

		CHECK(s && s->base == p && s->objects == 1 && s->state == SLAB_FULL,
		      "large %zu: a slab of its own", sizes[i]);
		CHECK(s->large && s->large_size == pages * PAGE_SIZE,
		      "large %zu: exactly its pages (the page heap does not round)", sizes[i]);
		CHECK(os_slab_lookup(p + sizes[i] - 1) == s, "its last page maps to it");
		CHECK(slab_object_at(s, p + sizes[i] - 1) == p, "any byte maps to the object");
		uslab_kfree(p);
	}
}

int main(void)
{
	RUN(test_lookup);
	RUN(test_class_caches);
	RUN(test_large_slab);
	return 0;
}
