// SPDX-License-Identifier: MIT
/*
 * test_slab.c - slab.c: free pointers are encoded and round-trip, carving
 * hands out every object once, detached freelists group objects by slab
 * with the seed's look-ahead, skip NULLs and clear the array; index
 * stacks (the three SLAB layouts) push and pop indices without touching
 * objects, OBJFREELIST's holder goes out last, indices are checked.
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
	struct slab *s = os_slab_alloc(cache->order, 0);
	void **dst = calloc(cache->objects + 1, sizeof(void *));
	unsigned int k;

	slab_setup(cache, s, NULL);
	k = slab_carve(cache, s, dst, 5);
	CHECK(k == 5 && s->bump == 5, "carve 5");
	k += slab_carve(cache, s, dst + 5, cache->objects);
	CHECK(k == cache->objects && s->bump == s->objects, "carve the rest");
	for (unsigned int i = 0; i < k; i++)
		CHECK(dst[i] == (char *)slab_first_object(cache, s) + (size_t)i * cache->size,
		      "object %u in order", i);
	CHECK(slab_carve(cache, s, dst, 1) == 0, "nothing left");
	s->cache = NULL;
	os_slab_free(s);
	free(dst);
}

/* Objects of two slabs, A and B, in a chosen pattern. */
static void test_detached_freelist(void)
{
	struct slab *a = os_slab_alloc(cache->order, 0), *b = os_slab_alloc(cache->order, 0);
	struct detached_freelist df;
	void *p[8];
	size_t next;

	slab_setup(cache, a, NULL);
	slab_setup(cache, b, NULL);
#define A(i) ((char *)slab_first_object(cache, a) + (size_t)(i)*cache->size)
#define B(i) ((char *)slab_first_object(cache, b) + (size_t)(i)*cache->size)
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

/* A slab of @c set up (with an OFFSLAB array when @c needs one) and put on no list. */
static struct slab *new_slab(struct uslab_cache *c)
{
	struct slab *s = os_slab_alloc(c->order, 0);

	slab_setup(c, s, c->offslab ? cache_alloc_direct(c->offslab) : NULL);
	return s;
}

static void del_slab(struct uslab_cache *c, struct slab *s)
{
	if (c->offslab)
		cache_free_direct(c->offslab, s->freelist);
	s->state = SLAB_FREE;
	s->cache = NULL;
	os_slab_free(s);
}

/*
 * Every index layout: objects carved, freed out of order in batches and
 * popped back come back newest first, each once; no object byte changes
 * except OBJFREELIST's holder (the first freed while the stack was empty).
 */
static void test_index_stack(void)
{
	static const unsigned int layouts[] = { USLAB_LAYOUT_OBJFREELIST, USLAB_LAYOUT_ONSLAB,
						USLAB_LAYOUT_OFFSLAB };
	static const size_t sizes[] = { 128, 256, 4000 };

	for (size_t li = 0; li < ARRAY_SIZE(layouts); li++) {
		for (size_t si = 0; si < ARRAY_SIZE(sizes); si++) {
			struct uslab_cache_args args = { .layout = layouts[li] };
			struct uslab_cache *c = uslab_cache_create("idx", sizes[si], &args, 0);
			const char *name = uslab_layout_name(layouts[li]);
			struct slab *s;
			unsigned int n, k, seen = 0;
			void **objs, **back;
			struct detached_freelist df;
			unsigned char *mark;

			CHECK(c && c->layout == layouts[li], "%s %zu", name, sizes[si]);
			s = new_slab(c);
			n = s->objects;
			objs = calloc(n, sizeof(void *));
			back = calloc(n, sizeof(void *));
			mark = calloc(n, 1);
			CHECK(slab_carve(c, s, objs, n) == n, "carve all");
			for (unsigned int i = 0; i < n; i++) {
				asan_unpoison(objs[i], c->object_size);
				memset(objs[i], 0x5a, c->object_size);
			}
			/* Push in a scrambled order, in batches of up to DF_IDX_MAX. */
			void **order = calloc(n, sizeof(void *));

			for (unsigned int i = 0; i < n; i++)
				order[i] = objs[(i * 7u + 3) % n];
			if (n % 7 == 0)
				for (unsigned int i = 0; i < n; i++)
					order[i] = objs[n - 1 - i];
			void *first = order[0]; /* (the build clears @order) */

			s->state = SLAB_FULL; /* as if handed out from a list */
			for (size_t at = 0; at < n;) {
				at = build_detached_freelist(c, n, order, at, 3, &df);
				if (!df.slab)
					break;
				CHECK(df.slab == s && df.cnt <= DF_IDX_MAX, "one slab, a batch");
				slab_push_indices(c, s, &df);
			}
			CHECK(s->nfree == n, "%s: all %u indices pushed (%u)", name, n, s->nfree);
			for (unsigned int i = 0; i < n; i++) {
				unsigned char *b = objs[i];
				int intact = 1;

				for (size_t j = 0; j < c->object_size; j++)
					intact &= b[j] == 0x5a;
				if (!intact) {
					CHECK(c->layout == USLAB_LAYOUT_OBJFREELIST &&
						      b == s->freelist,
					      "%s: only the holder is written (object %u)", name,
					      i);
				}
			}
			/* Pop in two goes: each object once, the holder last. */
			k = n / 3;
			slab_pop_indices(c, s, back, k);
			slab_pop_indices(c, s, back + k, n - k);
			CHECK(s->nfree == 0, "stack empty");
			if (c->layout == USLAB_LAYOUT_OBJFREELIST)
				CHECK(!s->freelist && back[n - 1] == first,
				      "holder (first freed) handed out last");
			for (unsigned int i = 0; i < n; i++) {
				size_t idx = (size_t)((char *)back[i] - (char *)objs[0]) / c->size;

				CHECK(idx < n && objs[idx] == back[i] && !mark[idx],
				      "%s: once each", name);
				mark[idx] = 1;
				seen++;
			}
			CHECK(seen == n, "all back");
			free(order);
			free(objs);
			free(back);
			free(mark);
			del_slab(c, s);
			uslab_cache_destroy(c);
		}
	}
}

static struct uslab_cache *bad_cache;

/* A write after free into OBJFREELIST's holder: the pop reports it. */
static void corrupt_holder(void *arg)
{
	struct uslab_cache *c = bad_cache;
	struct slab *s = new_slab(c);
	void *objs[4];
	struct detached_freelist df;
	size_t at = 0;

	(void)arg;
	slab_carve(c, s, objs, 4);
	s->state = SLAB_FULL;
	at = build_detached_freelist(c, 4, objs, at, 3, &df);
	slab_push_indices(c, s, &df);
	asan_unpoison(s->freelist, c->size);
	memset(s->freelist, 0xff, c->size); /* the program writes the freed object */
	slab_pop_indices(c, s, objs, 1);
}

/* The same object pushed twice in a row: the naive check. */
static void double_push(void *arg)
{
	struct uslab_cache *c = bad_cache;
	struct slab *s = new_slab(c);
	void *objs[3], *again[1];
	struct detached_freelist df;

	(void)arg;
	slab_carve(c, s, objs, 3); /* one more in use: the count check passes */
	s->state = SLAB_FULL;
	again[0] = objs[1];
	build_detached_freelist(c, 2, objs, 0, 3, &df);
	slab_push_indices(c, s, &df);
	build_detached_freelist(c, 1, again, 0, 3, &df);
	slab_push_indices(c, s, &df);
}

/* A free pointer overwritten to point inside an object: the walk stops there. */
static void interior_free_pointer(void *arg)
{
	struct slab *s = new_slab(cache);
	void *objs[2], *out[2];

	(void)arg;
	slab_carve(cache, s, objs, 2);
	asan_unpoison(objs[0], cache->size);
	fp_set(cache, objs[0], (char *)objs[1] + 8);
	slab_walk(cache, s, objs[0], 2, out);
}

static void test_index_checks(void)
{
	struct uslab_cache_args args = { .layout = USLAB_LAYOUT_OBJFREELIST };

	bad_cache = uslab_cache_create("idx-bad", 256, &args, 0);
	CHECK(expect_death(corrupt_holder, NULL, "index array of slab"), "corrupted index");
	CHECK(expect_death(double_push, NULL, "double free"), "double push");
	CHECK(expect_death(interior_free_pointer, NULL, "freelist corrupted in slab"),
	      "FREEPTR: a free pointer off an object boundary");
	uslab_cache_destroy(bad_cache);
}

int main(void)
{
	struct uslab_cache_args freeptr = { .layout = USLAB_LAYOUT_FREEPTR };

	cache = uslab_cache_create("slab-test", 104, &freeptr, 0);
	RUN(test_free_pointer);
	RUN(test_carve);
	RUN(test_detached_freelist);
	RUN(test_index_stack);
	RUN(test_index_checks);
	return 0;
}
