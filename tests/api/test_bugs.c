// SPDX-License-Identifier: MIT
/*
 * test_bugs.c - tier-1 hardening: misuse that would corrupt memory is
 * caught when the objects reach their slab and reported in one line,
 * "uslab: BUG <cache>: <what> at <address>", before abort(); so is the
 * misuse of a cache handle (NULL, destroyed), at the call.
 */
#include <uslab.h>
#include <uslab/magazine.h>

#include "../test.h"

static struct uslab_cache *cache, *other;

/*
 * Sheaves only hold pointers: a double free is found when the objects go
 * back to their slab (shrink sends this thread's sheaves and the barn's
 * there), by the naive head check or by the slab's in-use count.
 */
static void double_free(void *arg)
{
	void *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_cache_free(cache, p);
	uslab_cache_free(cache, p);
	uslab_cache_shrink(cache);
}

/* The same object freed twice, far apart: found by the slab's count. */
static void double_free_far(void *arg)
{
	void *p[64], *q;

	(void)arg;
	for (int i = 0; i < 64; i++)
		p[i] = uslab_cache_alloc(cache);
	q = p[10];
	for (int i = 0; i < 64; i++)
		uslab_cache_free(cache, p[i]);
	for (int round = 0; round < 10; round++) {
		for (int i = 0; i < 64; i++)
			p[i] = uslab_cache_alloc(cache);
		for (int i = 63; i >= 0; i--)
			uslab_cache_free(cache, p[i]);
	}
	uslab_cache_free(cache, q);
	uslab_cache_shrink(cache);
}

static void wrong_cache(void *arg)
{
	(void)arg;
	uslab_cache_free(other, uslab_cache_alloc(cache));
	uslab_cache_shrink(other);
}

static void foreign_pointer(void *arg)
{
	static char not_ours[64] __attribute__((aligned(64)));

	(void)arg;
	uslab_cache_free(cache, not_ours);
	uslab_cache_shrink(cache);
}

static void interior_pointer(void *arg)
{
	char *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_cache_free(cache, p + 8);
	uslab_cache_shrink(cache);
}

/* Each misuse in a child, which must die with its report. */
static const struct death reports[] = {
	{ "double free", double_free, "uslab: BUG victim: double free" },
	{ "double free of an object freed long before", double_free_far,
	  "uslab: BUG victim: double free" },
	{ "free to the wrong cache", wrong_cache,
	  "uslab: BUG bystander: object of cache victim freed to this cache at 0x" },
	{ "foreign pointer", foreign_pointer,
	  "uslab: BUG victim: free of a pointer uslab did not hand out at 0x" },
	{ "interior pointer", interior_pointer,
	  "uslab: BUG victim: free of a pointer inside an object at 0x" },
};

static void test_reports(void)
{
	cache = uslab_cache_create("victim", 96, NULL, 0);
	other = uslab_cache_create("bystander", 96, NULL, 0);
	EXPECT_DEATHS(reports);
	uslab_cache_destroy(cache);
	uslab_cache_destroy(other);
}

/* Misuse of the cache handle itself: contained, with a report, never a crash or a hang. */
static void null_cache_alloc(void *arg)
{
	(void)arg;
	uslab_cache_alloc(NULL);
}

static void null_cache_bulk(void *arg)
{
	void *p[4];

	(void)arg;
	uslab_cache_alloc_bulk(NULL, 4, p);
}

static void destroy_twice(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("twice", 64, NULL, 0);

	(void)arg;
	uslab_cache_destroy(c);
	uslab_cache_destroy(c);
}

static void use_after_destroy(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("gone", 64, NULL, 0);

	(void)arg;
	uslab_cache_free(c, uslab_cache_alloc(c));
	uslab_cache_destroy(c);
	uslab_cache_alloc(c);
}

/*
 * A destroyed descriptor is never reused: a stale handle used after new
 * caches were created is still reported, instead of feeding a new cache
 * (inline paths included; test_handles.c tries more).
 */
static void stale_after_create(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("stale", 64, NULL, 0);
	struct uslab_cache *fresh[8];
	void *p;

	(void)arg;
	uslab_cache_destroy(c);
	for (int i = 0; i < 8; i++)
		fresh[i] = uslab_cache_create("fresh", 64, NULL, 0);
	p = uslab_cache_alloc(fresh[0]);
	uslab_cache_free(c, p); /* the stale handle */
}

static void stats_after_destroy(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("gone", 64, NULL, 0);
	struct uslab_cache_stats st;

	(void)arg;
	uslab_cache_destroy(c);
	uslab_cache_stats(c, &st);
}

/* Two threads on one magazine can leave a count no owner could: reported, no overflow. */
static void magazine_overfull(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("mag", 64, NULL, 0);
	struct uslab_magazine *m = uslab_magazine_create(c, 16, 0);

	(void)arg;
	m->count = m->capacity + 3; /* what a lost race between two pushers leaves */
	uslab_magazine_free(m, uslab_cache_alloc(c));
}

static void magazine_overfull_alloc(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("mag", 64, NULL, 0);
	struct uslab_magazine *m = uslab_magazine_create(c, 16, 0);

	(void)arg;
	m->count = m->capacity + 3;
	uslab_magazine_alloc(m);
}

/* A free that reaches the library's slow path is checked at the call (no shrink here). */
static void foreign_at_call(void *arg)
{
	static char not_ours[64] __attribute__((aligned(64)));
	struct uslab_cache_args a = { .sheaf_capacity = 1 }; /* every free is a slow one */
	struct uslab_cache *c = uslab_cache_create("direct", 64, &a, 0);

	(void)arg;
	uslab_cache_free(c, not_ours);
	_exit(0); /* not reached: no later shrink or flush reports it */
}

static void wrong_cache_at_call(void *arg)
{
	struct uslab_cache_args a = { .sheaf_capacity = 1 };
	struct uslab_cache *c = uslab_cache_create("direct", 64, &a, 0);
	struct uslab_cache *d = uslab_cache_create("elsewhere", 64, NULL, 0);

	(void)arg;
	uslab_cache_free(c, uslab_cache_alloc(d));
	_exit(0);
}

/* The library's free (USLAB_NO_INLINE programs) catches an immediate double free at the call. */
static void double_free_at_call(void *arg)
{
	void *p = uslab_cache_alloc(cache);

	(void)arg;
	(uslab_cache_free)(cache, p); /* the exported function, not the inline one */
	(uslab_cache_free)(cache, p);
	_exit(0); /* not reached */
}

/*
 * The library's free checks every pointer at the call, sheaves or not:
 * in a live slab of this very cache (a malloc'd or stack pointer, or an
 * object of another cache, stops there, not at the next flush).
 */
static void foreign_at_library_call(void *arg)
{
	char on_stack[64];

	(void)arg;
	(uslab_cache_free)(cache, on_stack);
	_exit(0); /* not reached */
}

static void wrong_cache_at_library_call(void *arg)
{
	struct uslab_cache *d = uslab_cache_create("elsewhere", 96, NULL, 0);

	(void)arg;
	(uslab_cache_free)(cache, uslab_cache_alloc(d));
	_exit(0);
}

static const struct death handle_misuse[] = {
	{ "alloc from NULL", null_cache_alloc, "uslab: BUG -: allocation of a NULL cache" },
	{ "bulk alloc from NULL", null_cache_bulk,
	  "uslab: BUG -: bulk allocation of a NULL cache" },
	{ "double destroy", destroy_twice,
	  "uslab: BUG -: destroy of a destroyed cache (or not a cache) at 0x" },
	{ "alloc after destroy", use_after_destroy,
	  "uslab: BUG -: allocation of a destroyed cache (or not a cache)" },
	{ "a stale handle after new caches were created", stale_after_create,
	  "uslab: BUG -: free of a destroyed cache (or not a cache)" },
	{ "stats after destroy", stats_after_destroy, "uslab: BUG -: stats of a destroyed cache" },
	{ "over-full magazine, free", magazine_overfull,
	  "uslab: BUG mag: magazine used by two threads at once (a count above the capacity; "
	  "count 19, capacity 16)" },
	{ "over-full magazine, alloc", magazine_overfull_alloc,
	  "uslab: BUG mag: magazine used by two threads at once (a count above the capacity; "
	  "count 19, capacity 16)" },
	{ "foreign pointer, at the call", foreign_at_call,
	  "uslab: BUG direct: free of a pointer uslab did not hand out" },
	{ "wrong cache, at the call", wrong_cache_at_call,
	  "uslab: BUG direct: object of cache elsewhere freed to this cache" },
	/* These three use the cache "victim". */
	{ "immediate double free, at the library's call", double_free_at_call,
	  "uslab: BUG victim: double free (the object is on top of this thread's sheaf)" },
	{ "stack pointer, at the library's call (sheaves)", foreign_at_library_call,
	  "uslab: BUG victim: free of a pointer uslab did not hand out" },
	{ "wrong cache, at the library's call (sheaves)", wrong_cache_at_library_call,
	  "uslab: BUG victim: object of cache elsewhere freed to this cache" },
};

static void test_handles(void)
{
	struct uslab_cache *c = uslab_cache_create("handles", 64, NULL, 0);
	void *p, *q;

	cache = uslab_cache_create("victim", 96, NULL, 0);
	EXPECT_DEATHS(handle_misuse);
	uslab_cache_destroy(cache);
	/* Documented errors, not bugs. */
	errno = 0;
	CHECK(uslab_cache_alloc_bulk(c, 4, NULL) == 0 && errno == EINVAL, "bulk into NULL: EINVAL");
	uslab_cache_free_bulk(c, 4, NULL); /* nothing */
	/* A NULL cache in a free means the object's own cache (as kfree). */
	p = uslab_cache_alloc(c);
	uslab_cache_free(NULL, p);
	q = uslab_cache_alloc(c);
	CHECK(q == p, "freed to its own cache: %p, want %p", q, p);
	uslab_cache_free(c, q);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

int main(void)
{
	RUN(test_reports);
	RUN(test_handles);
	return 0;
}
