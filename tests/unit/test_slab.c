// SPDX-License-Identifier: MIT
/*
 * test_slab.c - slab.c: free pointers are encoded and round-trip, carving
 * hands out every object once, detached freelists group objects by slab
 * with the seed's look-ahead, skip NULLs and clear the array.
 */
#include "internal.h"
#include "../test.h"

static struct uslab_cache *cache;

static void test_free_pointer(void)
{
	void *obj = uslab_cache_alloc(cache), *next = (char *)obj + 4096;
	void *raw;

	fp_set(cache, obj, next);
	raw = *(void **)((char *)obj + cache->fp_offset);
	CHECK(fp_get(cache, obj) == next, "round trip");
	CHECK(raw != next, "stored value is not the pointer");
	fp_set(cache, obj, NULL);
	CHECK(fp_get(cache, obj) == NULL, "NULL round trip");
	CHECK(*(void **)((char *)obj + cache->fp_offset) != NULL, "NULL is encoded too");
	CHECK(cache->fp_offset == ALIGN_DOWN(cache->object_size / 2, 8),
	      "free pointer in the middle of the object");
	uslab_cache_free(cache, obj);
}

static void test_carve(void)
{
	struct slab *s = os_slab_alloc(cache->order);
	void **dst = calloc(cache->objects + 1, sizeof(void *));
	unsigned int k;

	slab_setup(cache, s);
	k = slab_carve(cache, s, dst, 5);
	CHECK(k == 5 && s->bump == 5, "carve 5");
	k += slab_carve(cache, s, dst + 5, cache->objects);
	CHECK(k == cache->objects && s->bump == s->objects, "carve the rest");
	for (unsigned int i = 0; i < k; i++)
		CHECK(dst[i] == s->base + (size_t)i * cache->size, "object %u in order", i);
	CHECK(slab_carve(cache, s, dst, 1) == 0, "nothing left");
	s->cache = NULL;
	os_slab_free(s);
	free(dst);
}

/* Objects of two slabs, A and B, in a chosen pattern. */
static void test_detached_freelist(void)
{
	struct slab *a = os_slab_alloc(cache->order), *b = os_slab_alloc(cache->order);
	struct detached_freelist df;
	void *p[8];
	size_t next;

	slab_setup(cache, a);
	slab_setup(cache, b);
#define A(i) (a->base + (size_t)(i)*cache->size)
#define B(i) (b->base + (size_t)(i)*cache->size)
	/* A0 A1 B0 A2 B1 NULL A3 B2 */
	void *pattern[8] = { A(0), A(1), B(0), A(2), B(1), NULL, A(3), B(2) };

	memcpy(p, pattern, sizeof(p));
	next = build_detached_freelist(cache, 8, p, 0, 0, &df);
	CHECK(df.slab == a && df.cnt == 2 && next == 2,
	      "look-ahead 0 stops at the first other slab: cnt %u next %zu", df.cnt, next);
	CHECK(df.head == A(1) && df.tail == A(0) && fp_get(cache, A(1)) == A(0) &&
		      fp_get(cache, A(0)) == NULL,
	      "list A1 -> A0");

	memcpy(p, pattern, sizeof(p));
	next = build_detached_freelist(cache, 8, p, 0, 3, &df);
	CHECK(df.slab == a && df.cnt == 4 && next == 2,
	      "look-ahead 3 finds all of A: cnt %u next %zu", df.cnt, next);
	CHECK(!p[0] && !p[1] && !p[3] && !p[6] && p[2] == B(0) && p[4] == B(1),
	      "taken entries cleared, others kept");
	next = build_detached_freelist(cache, 8, p, next, 3, &df);
	CHECK(df.slab == b && df.cnt == 3 && next == 8, "then all of B");
	for (int i = 0; i < 8; i++)
		CHECK(p[i] == NULL, "array cleared (%d)", i);
	next = build_detached_freelist(cache, 8, p, next, 3, &df);
	CHECK(df.slab == NULL && next == 8, "nothing left");

	void *holes[4] = { NULL, NULL, B(5), NULL };

	next = build_detached_freelist(cache, 4, holes, 0, 3, &df);
	CHECK(df.slab == b && df.cnt == 1 && df.head == B(5), "leading NULLs skipped");
#undef A
#undef B
	a->cache = b->cache = NULL;
	os_slab_free(a);
	os_slab_free(b);
}

int main(void)
{
	cache = uslab_cache_create("slab-test", 104, NULL, 0);
	RUN(test_free_pointer);
	RUN(test_carve);
	RUN(test_detached_freelist);
	return 0;
}
