// SPDX-License-Identifier: MIT
/*
 * test_untouched.c - the index layouts' promise (<uslab.h>, enum
 * uslab_layout) with the cache's default arguments: the allocator reads and
 * writes no byte of an object to free it or hand it out, whichever way the
 * object travels: single and bulk calls, sheaves, the barn, another
 * thread's frees, a magazine, a free batch, per-CPU sheaves (the run under
 * USLAB_PERCPU=1), slabs after a flush. Every object is stamped over all
 * its bytes with a pattern of its address; every object handed out again
 * that was stamped must read its stamp whole (OBJFREELIST: except at most
 * one object per slab, the one that held its slab's array while free).
 * Objects that were never stamped (fresh ones) are counted apart, and most
 * of those handed out must be stamped ones, or the test proves nothing.
 *
 *	api_untouched [ROUNDS]	(default 4)
 *
 * At cc44a97 the free key wrote the first 8 bytes of every object freed
 * into a sheaf, so this failed for every layout.
 */
#include <pthread.h>
#include <stdbool.h>
#include <uslab.h>
#include <uslab/magazine.h>

#include "../test.h"

#define SIZE 256
#define NOBJ 4096

static struct uslab_cache *cache;
static unsigned char *objs[NOBJ];

static unsigned char stamp_of(const void *p)
{
	return (unsigned char)(((uintptr_t)p >> 8) * 31 + 7) | 1; /* never 0: fresh pages read 0 */
}

static void stamp(unsigned char *p)
{
	memset(p, stamp_of(p), SIZE);
}

/* 1: the stamp whole; 0: a byte changed; -1: never stamped (a fresh object, all zeros). */
static int check(const unsigned char *p)
{
	unsigned char want = stamp_of(p);
	bool zero = true, same = true;

	for (int j = 0; j < SIZE; j++) {
		same &= p[j] == want;
		zero &= p[j] == 0;
	}
	return same ? 1 : zero ? -1 : 0;
}

/* Free objs[lo, hi) from another thread: singly, then in bulk runs. */
struct range {
	int lo, hi;
};

static void *free_range(void *arg)
{
	const struct range *r = arg;
	int mid = (r->lo + r->hi) / 2;

	for (int i = r->lo; i < mid; i++)
		uslab_cache_free(cache, objs[i]);
	for (int i = mid; i < r->hi; i += 32)
		uslab_cache_free_bulk(cache, (size_t)(r->hi - i < 32 ? r->hi - i : 32),
				      (void **)objs + i);
	return NULL;
}

static void *alloc_range(void *arg)
{
	const struct range *r = arg;

	unsigned long checks = 0; /* (test_checks is the main thread's) */

	for (int i = r->lo; i < r->hi; i++)
		CHECK_COUNTED(checks, (objs[i] = uslab_cache_alloc(cache)), "alloc in a thread");
	return NULL;
}

static void one_layout(unsigned int layout, unsigned int rounds)
{
	/* The default arguments but min_partial: empty slabs kept, not fresh pages again. */
	struct uslab_cache_args a = { .layout = layout, .min_partial = 1000 };
	unsigned long whole = 0, changed = 0, fresh = 0, slabs;
	struct uslab_cache_stats st;
	uint64_t seed = 23 + layout;

	cache = uslab_cache_create("untouched", SIZE, &a, 0);
	CHECK(cache, "create %s", uslab_layout_name(layout));
	for (int i = 0; i < NOBJ / 2; i++)
		CHECK((objs[i] = uslab_cache_alloc(cache)), "alloc");
	CHECK(uslab_cache_alloc_bulk(cache, NOBJ / 2, (void **)objs + NOBJ / 2) == NOBJ / 2,
	      "bulk alloc");
	for (unsigned int r = 0; r < rounds; r++) {
		struct uslab_magazine *m = uslab_magazine_create(cache, 64, 32);
		struct uslab_free_batch b;
		struct range other = { 0, NOBJ / 4 };
		pthread_t t;

		CHECK(m, "magazine");
		for (int i = 0; i < NOBJ; i++)
			stamp(objs[i]);
		for (int i = NOBJ - 1; i > 0; i--) {
			int j = (int)(rnd_next(&seed) % (uint64_t)(i + 1));
			unsigned char *x = objs[i];

			objs[i] = objs[j];
			objs[j] = x;
		}
		/* A quarter by another thread, a quarter singly, an eighth each in bulk, a magazine, a batch. */
		CHECK(!pthread_create(&t, NULL, free_range, &other), "thread");
		CHECK(!pthread_join(t, NULL), "join");
		for (int i = NOBJ / 4; i < NOBJ / 2; i++)
			uslab_cache_free(cache, objs[i]);
		uslab_cache_free_bulk(cache, NOBJ / 8, (void **)objs + NOBJ / 2);
		for (int i = NOBJ / 2 + NOBJ / 8; i < NOBJ / 2 + NOBJ / 4; i++)
			uslab_magazine_free(m, objs[i]);
		uslab_free_batch_init(&b, cache);
		for (int i = NOBJ / 2 + NOBJ / 4; i < NOBJ; i++)
			uslab_free_batch_add(&b, objs[i]);
		uslab_free_batch_flush(&b);
		uslab_magazine_destroy(m);
		if (r % 2)
			uslab_thread_flush(); /* (into slabs: the layout's own array) */
		/* Back: a quarter in another thread, the rest singly and in bulk. */
		CHECK(!pthread_create(&t, NULL, alloc_range, &other), "thread");
		CHECK(!pthread_join(t, NULL), "join");
		for (int i = NOBJ / 4; i < NOBJ / 2; i++)
			CHECK((objs[i] = uslab_cache_alloc(cache)), "alloc");
		CHECK(uslab_cache_alloc_bulk(cache, NOBJ / 2, (void **)objs + NOBJ / 2) == NOBJ / 2,
		      "bulk alloc");
		for (int i = 0; i < NOBJ; i++) {
			int c = check(objs[i]);

			whole += c == 1;
			changed += c == 0;
			fresh += c == -1;
		}
	}
	uslab_cache_stats(cache, &st);
	slabs = st.num_slabs * rounds;
	CHECK(st.layout == layout, "layout %s kept", uslab_layout_name(layout));
	if (layout == USLAB_LAYOUT_OBJFREELIST)
		CHECK(changed <= slabs, "objfreelist: %lu objects written, %lu slabs x rounds",
		      changed, slabs);
	else
		CHECK(changed == 0, "%s: %lu objects written (of %lu stamped handed out again)",
		      uslab_layout_name(layout), changed, whole + changed);
	CHECK(whole > 3 * (fresh + changed), "%s: %lu stamped objects came back, %lu fresh",
	      uslab_layout_name(layout), whole, fresh);
	uslab_cache_free_bulk(cache, NOBJ, (void **)objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

int main(int argc, char **argv)
{
	unsigned int rounds = argc > 1 ? (unsigned int)atoi(argv[1]) : 4;

	for (unsigned int l = USLAB_LAYOUT_OBJFREELIST; l < USLAB_LAYOUT_NR; l++) {
		unsigned long before = test_checks;

		one_layout(l, rounds);
		printf("ok %-40s (%lu checks)\n", uslab_layout_name(l), test_checks - before);
	}
	return 0;
}
