// SPDX-License-Identifier: MIT
/*
 * test_cache_layout.c - cache.c: SLUB's order rule, object layout, and the
 * node bookkeeping of refill and batched free.
 */
#include "internal.h"
#include "../test.h"

static unsigned int order_of(size_t size, unsigned int *objects)
{
	struct uslab_cache *c = uslab_cache_create("order", size, NULL, 0);
	unsigned int order = c->order;

	*objects = c->objects;
	uslab_cache_destroy(c);
	return order;
}

/*
 * min_objects = 4 * (fls(nr_cpus) + 1); the least waste within order 3.
 * The table is SLUB's (slub_min_order 0); uslab's default minimum order is
 * 2, checked after.
 */
static void test_order_rule(void)
{
	static const struct {
		size_t size;
		unsigned int order, objects;
	} want2[] = {
		/* expected with nr_cpus = 2 -> min_objects 12 */
		{ 8, 0, 512 },	 { 64, 0, 64 },	    { 100, 0, 39 },  { 256, 0, 16 },
		{ 512, 1, 16 },	 { 1024, 2, 16 },   { 2048, 3, 16 }, { 4096, 3, 8 },
		{ 65536, 4, 1 }, { 1 << 20, 8, 1 },
	};
	unsigned int objects, order, cpus = usl_opt.nr_cpus;

	/*
	 * The expectations are for 2 CPUs, on any machine: the rule reads
	 * usl_opt.nr_cpus when a cache is created; it is set meanwhile.
	 */
	CHECK(usl_opt.min_objects == 0 && usl_opt.max_order == 3 && usl_opt.min_order == 2,
	      "default tunables (run without USLAB_* in the environment)");
	printf("   (expectations for 2 CPUs; this machine has %u)\n", cpus);
	usl_opt.nr_cpus = 2;
	order = order_of(256, &objects);
	CHECK(order == 2 && objects == 64, "default: 256 B in 16 KiB slabs: order %u", order);
	order = order_of(2048, &objects);
	CHECK(order == 3 && objects == 16, "the min_objects rule still applies above it");
	usl_opt.min_order = 0;
	for (size_t i = 0; i < sizeof(want2) / sizeof(want2[0]); i++) {
		order = order_of(want2[i].size, &objects);
		CHECK(order == want2[i].order && objects == want2[i].objects,
		      "size %zu: order %u objects %u, want %u/%u", want2[i].size, order, objects,
		      want2[i].order, want2[i].objects);
	}
	/* 64 CPUs: min_objects 4 * (fls(64) + 1) = 32; 512 B needs order 2. */
	usl_opt.nr_cpus = 64;
	order = order_of(512, &objects);
	CHECK(order == 2 && objects == 32, "64 CPUs, 512 B: order %u objects %u, want 2/32", order,
	      objects);
	/* USLAB_MIN_OBJECTS overrides the CPU count: 12 is the 2-CPU value. */
	usl_opt.min_objects = 12;
	order = order_of(512, &objects);
	CHECK(order == 1 && objects == 16, "min_objects 12, 512 B: order %u objects %u, want 1/16",
	      order, objects);
	usl_opt.min_objects = 0;
	usl_opt.nr_cpus = cpus;
	usl_opt.min_order = 2;
}

static void ctor(void *p)
{
	(void)p;
}

static void test_layout(void)
{
	struct uslab_cache_args a = { .ctor = ctor };
	struct uslab_cache *c = uslab_cache_create("layout", 100, NULL, 0);
	struct uslab_cache *k = uslab_cache_create("layout-ctor", 100, &a, 0);

	CHECK(c->size == 104 && c->fp_offset == 48, "stride 104, free pointer at 48");
	CHECK(k->size == 112 && k->fp_offset == 104, "ctor: free pointer after the object");
	CHECK(c->recip == UINT64_MAX / 104 + 1, "reciprocal");
	CHECK(c->secret != k->secret, "per-cache secrets");
	uslab_cache_destroy(c);
	uslab_cache_destroy(k);
}

/* Refill takes whole freelists and carves; free_objects restores counts. */
static void test_refill_and_free(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 1, .min_partial = 2 };
	struct uslab_cache *c = uslab_cache_create("node", 256, &a, 0);
	struct node *n = &c->node;
	enum { N = 1000 };
	void **p = calloc(N, sizeof(void *));
	unsigned int got, per = c->objects;

	got = cache_refill(c, p, N);
	CHECK(got == N, "refill %u", got);
	CHECK(n->nr_slabs == (N + per - 1) / per, "slabs %lu", n->nr_slabs);
	CHECK(n->nr_objects - n->nr_free == N, "active %lu", n->nr_objects - n->nr_free);
	CHECK(n->nr_partial <= 1, "only the last slab is partial");
	/* Free every other object: every slab becomes partial, none empty. */
	for (int i = 0; i < N; i += 2) {
		asan_poison(p[i], c->size);
		cache_free_objects(c, &p[i], 1, 3);
		CHECK(p[i] == NULL, "entry cleared");
	}
	CHECK(n->nr_objects - n->nr_free == N / 2, "half active");
	CHECK(n->nr_partial == n->nr_slabs, "all slabs partial");
	/* Take them back: whole freelists, no new slab. */
	unsigned long slabs = n->nr_slabs;

	for (int i = 0; i < N; i += 2)
		CHECK(cache_refill(c, &p[i], 1) == 1, "refill one");
	CHECK(n->nr_slabs == slabs && n->nr_objects - n->nr_free == N, "no new slab");
	for (int i = 0; i < N; i++)
		asan_poison(p[i], c->size);
	cache_free_objects(c, p, N, 3);
	CHECK(n->nr_objects == n->nr_free, "all free");
	CHECK(n->nr_slabs == 2 && n->nr_empty == 2, "min_partial 2 kept: %lu slabs", n->nr_slabs);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	free(p);
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(test_order_rule);
	RUN(test_layout);
	RUN(test_refill_and_free);
	return 0;
}
