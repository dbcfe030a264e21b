// SPDX-License-Identifier: MIT
/*
 * test_stale_key.c - no false "double free": memory that once held free
 * objects of a keyed cache (the free key in their first words) is handed
 * out again, in every way it can come back, to a program that never writes
 * the first word of what it gets, and every free of it must pass
 * (doc/design.md, "Free checks": the hand-out invariant).
 *
 *	api_stale_key [ROUNDS]	(default 20)
 *
 * Run with USLAB_FREE_KEY=1 (every cache keyed, the kmalloc classes too)
 * and USLAB_GUARD=1 (every slow path sampled: the guard's slots are reused
 * by objects of other caches), and with USLAB_PERCPU=1 beside them. At
 * cc44a97 the guard case stopped the program ("double free (the object
 * carries the free key"), as `objfreelist memory` did.
 */
#include <uslab.h>
#include <pthread.h>
#include <uslab/kmalloc.h>
#include <uslab/magazine.h>

#include "../test.h"

#define NOBJ 3000

static void *objs[NOBJ];
static unsigned int rounds = 20;
static struct uslab_cache *cur;

static void *free_quarter(void *arg)
{
	size_t lo = (size_t)(uintptr_t)arg;

	for (size_t i = lo; i < lo + NOBJ / 4; i++)
		uslab_cache_free(cur, objs[i]);
	return NULL;
}

/* A byte past the first word: the program's; the first word as handed out. */
static void touch(void *o, size_t size)
{
	if (size > 9)
		((volatile char *)o)[9] = 1;
}

/*
 * Caches of one size made and destroyed in turn (their slabs' pages go
 * back to the heap, the guard's slots to other objects): singly and in
 * bulk, freed singly, in bulk and from another thread, shrunk between
 * rounds; every layout.
 */
static void test_caches(void)
{
	static const size_t sizes[] = { 64, 256, 1024, 4096 };
	static const unsigned int layouts[] = { USLAB_LAYOUT_AUTO, USLAB_LAYOUT_FREEPTR,
						USLAB_LAYOUT_OBJFREELIST, USLAB_LAYOUT_ONSLAB,
						USLAB_LAYOUT_OFFSLAB };

	for (unsigned int r = 0; r < rounds; r++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			struct uslab_cache_args args = { 0 };
			pthread_t t;
			char name[32];

			args.layout = layouts[(r + k) % (sizeof(layouts) / sizeof(layouts[0]))];
			snprintf(name, sizeof(name), "stale-%zu", sizes[k]);
			cur = uslab_cache_create(name, sizes[k], &args, USLAB_FREE_KEY);
			if (!cur && errno == EINVAL) {
				args.layout =
					USLAB_LAYOUT_AUTO; /* (a layout that cannot serve it) */
				cur = uslab_cache_create(name, sizes[k], &args, USLAB_FREE_KEY);
			}
			CHECK(cur, "create %s", name);
			for (int i = 0; i < NOBJ / 2; i++)
				CHECK((objs[i] = uslab_cache_alloc(cur)), "alloc");
			CHECK(uslab_cache_alloc_bulk(cur, NOBJ / 2, objs + NOBJ / 2) == NOBJ / 2,
			      "bulk alloc");
			for (int i = 0; i < NOBJ; i++)
				touch(objs[i], sizes[k]);
			/* Each half freed the other way: the guard samples single allocations. */
			CHECK(!pthread_create(&t, NULL, free_quarter,
					      (void *)(uintptr_t)(NOBJ / 2)),
			      "thread");
			CHECK(!pthread_join(t, NULL), "join");
			for (int i = NOBJ / 2 + NOBJ / 4; i < NOBJ; i++)
				uslab_cache_free(cur, objs[i]);
			uslab_cache_free_bulk(cur, NOBJ / 2, objs);
			uslab_cache_shrink(cur);
			CHECK(uslab_cache_destroy(cur) == 0, "destroy %s", name);
		}
	}
}

/*
 * kmalloc objects freed (keyed when USLAB_FREE_KEY=1), their slabs given
 * back, then large buffers whose first word the program never writes,
 * shrunk with krealloc into a class object (the copy carries the first
 * word) and freed.
 */
static void test_large_krealloc(void)
{
	for (unsigned int r = 0; r < rounds; r++) {
		for (int i = 0; i < NOBJ; i++) {
			objs[i] = uslab_kmalloc(1024 + (size_t)(i % 7) * 64);
			CHECK(objs[i], "kmalloc");
			touch(objs[i], 1024);
		}
		uslab_cache_free_bulk(NULL, NOBJ, objs); /* kfree_bulk() */
		uslab_thread_flush();
		for (size_t size = 1024; size <= 1024 + 6 * 64; size += 64)
			uslab_cache_shrink(uslab_kmalloc_cache(size));
		for (int i = 0; i < 64; i++) {
			char *b = uslab_kmalloc(39597 + (size_t)i * 4096), *s;

			CHECK(b, "large");
			touch(b, 39597);
			s = uslab_krealloc(b, 156);
			CHECK(s, "krealloc");
			uslab_kfree(s);
		}
	}
}

/*
 * Objects of a cache without the key handed out on pages a keyed cache gave
 * back (their first words may hold the key), grown with krealloc into a
 * keyed kmalloc class (the copy carries the first word) and freed: found by
 * api_fuzz (USLAB_FREE_KEY=1), "kmalloc-6144: double free" before the fix.
 * Since, a keyed cache's slab leaves with no key in its objects: none of
 * the cache without the key carries it.
 */
static void *free_all(void *arg)
{
	struct uslab_cache *c = arg;

	for (int i = 0; i < NOBJ; i++)
		uslab_cache_free(c, objs[i]);
	return NULL;
}

static void test_unkeyed_krealloc(void)
{
	struct uslab_cache_args a = { .min_partial = 1 };
	struct uslab_cache *keyed = uslab_cache_create("stale-k", 4096, &a, USLAB_FREE_KEY);
	struct uslab_cache *plain = uslab_cache_create("stale-p", 4096, NULL, USLAB_NO_FREE_KEY);
	unsigned int grown = 0, stale = 0;
	pthread_t t;

	struct uslab_magazine *m;
	uintptr_t key;

	CHECK(keyed && plain, "create");
	/* The key, white-box: a magazine of a keyed cache keeps a copy (<uslab/magazine.h>). */
	m = uslab_magazine_create(keyed, 0, 0);
	CHECK(m && (key = m->uslab_priv_free_key) != 0, "a keyed cache's magazine has the key");
	uslab_magazine_destroy(m);
	for (int i = 0; i < NOBJ; i++)
		CHECK((objs[i] = uslab_cache_alloc(keyed)), "alloc");
	CHECK(!pthread_create(&t, NULL, free_all, keyed), "thread");
	CHECK(!pthread_join(t, NULL),
	      "join"); /* (its sheaves back: the slabs empty, to the heap) */
	for (int i = 0; i < NOBJ; i++)
		CHECK((objs[i] = uslab_cache_alloc(plain)), "alloc");
	for (int i = 0; i < NOBJ; i++) {
		uintptr_t first;

		memcpy(&first, objs[i], sizeof(first));
		stale += first == key;
		if (grown >= 64)
			continue;
		memset((char *)objs[i] + 8, 0x5a, 4096 - 8);
		objs[i] = uslab_krealloc(objs[i], 6000);
		CHECK(objs[i], "krealloc");
		uslab_kfree(objs[i]);
		objs[i] = NULL;
		grown++;
	}
	for (int i = 0; i < NOBJ; i++)
		if (objs[i])
			uslab_cache_free(plain, objs[i]);
	/* A keyed cache's slabs leave with no key in their objects (cache.c). */
	CHECK(stale == 0, "%u of %d objects of a cache without the key handed out with it", stale,
	      NOBJ);
	CHECK(uslab_cache_destroy(plain) == 0 && uslab_cache_destroy(keyed) == 0, "destroy");
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = (unsigned int)atoi(argv[1]);
	RUN(test_caches);
	RUN(test_large_krealloc);
	RUN(test_unkeyed_krealloc);
	return 0;
}
