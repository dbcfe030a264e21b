// SPDX-License-Identifier: MIT
/*
 * test_handles.c - cache handles that do not name a live cache (issue 22):
 * a stale handle is reported however many caches were created since (item
 * 5), a handle that is not a cache at all is reported by the library's
 * calls before they read it (item 6), and the kmalloc classes still get
 * their ids when the user took every id there is (item 9). Each misuse
 * runs in a child, which must die by SIGABRT with its report.
 */
#include <stdlib.h>
#include <sys/resource.h>
#include <uslab.h>
#include <uslab/kmalloc.h>

#include "../test.h"

/* ------------------------------------------------------ item 9: ids */

/*
 * Create caches until creation fails (ENOSPC, documented), then every
 * kmalloc class must still serve, and uslab_kmalloc_cache() name it. Run
 * first: the classes are created lazily, at the first kmalloc.
 */
static void test_kmalloc_after_max_caches(void)
{
	static struct uslab_cache *user[USLAB_MAX_CACHES + 1];
	unsigned int n = 0, bad = 0;

	errno = 0;
	while (n <= USLAB_MAX_CACHES && (user[n] = uslab_cache_create("user", 64, NULL, 0)))
		n++;
	CHECK(n < USLAB_MAX_CACHES && errno == ENOSPC, "%u caches, then errno %d (ENOSPC)", n,
	      errno);
	CHECK(n == USLAB_MAX_CACHES - USLAB_KMALLOC_CLASSES, "%u user caches, want %d", n,
	      USLAB_MAX_CACHES - USLAB_KMALLOC_CLASSES);
	for (size_t size = 1; size <= USLAB_KMALLOC_MAX_CACHE_SIZE;
	     size += size < 64 ? 1 : size / 16) {
		void *p = uslab_kmalloc(size);
		struct uslab_cache *c = uslab_kmalloc_cache(size);

		if (!p || !c || uslab_cache_of(p) != c)
			bad++;
		uslab_kfree(p);
	}
	CHECK(!bad, "%u kmalloc sizes failed after %u user caches", bad, n);
	/* One freed id is one more user cache. */
	CHECK(!uslab_cache_destroy(user[n - 1]), "destroy");
	CHECK((user[n - 1] = uslab_cache_create("again", 64, NULL, 0)) != NULL, "create after");
	for (unsigned int i = 0; i < n; i++)
		CHECK(!uslab_cache_destroy(user[i]), "destroy %u", i);
}

/* ---------------------------------------------- item 5: stale handles */

/*
 * A destroyed cache's handle, after 70 caches older than it were destroyed
 * and 100 new ones created and kept: the 64-entry quarantine this replaced
 * gave one of those the stale handle's descriptor.
 */
static struct uslab_cache *stale_handle(void)
{
	struct uslab_cache *older[70], *c;

	for (int i = 0; i < 70; i++)
		older[i] = uslab_cache_create("older", 64, NULL, 0);
	c = uslab_cache_create("stale", 64, NULL, 0);
	uslab_cache_free(c, uslab_cache_alloc(c));
	CHECK(!uslab_cache_destroy(c), "destroy");
	for (int i = 0; i < 70; i++)
		CHECK(!uslab_cache_destroy(older[i]), "destroy older");
	for (int i = 0; i < 100; i++) {
		struct uslab_cache *x = uslab_cache_create("innocent", 64, NULL, 0);

		uslab_cache_free(x, uslab_cache_alloc(x)); /* its sheaves exist */
	}
	return c;
}

static void stale_destroy(void *arg)
{
	(void)arg;
	uslab_cache_destroy(stale_handle());
}

static void stale_alloc_inline(void *arg)
{
	(void)arg;
	uslab_cache_alloc(stale_handle());
}

static void stale_alloc_library(void *arg)
{
	(void)arg;
	(uslab_cache_alloc)(stale_handle());
}

static void stale_free_inline(void *arg)
{
	struct uslab_cache *c = stale_handle();
	struct uslab_cache *d = uslab_cache_create("live", 64, NULL, 0);

	(void)arg;
	uslab_cache_free(c, uslab_cache_alloc(d));
}

static void stale_bulk(void *arg)
{
	void *p[4];

	(void)arg;
	uslab_cache_alloc_bulk(stale_handle(), 4, p);
}

static void stale_shrink(void *arg)
{
	(void)arg;
	uslab_cache_shrink(stale_handle());
}

static void stale_stats(void *arg)
{
	struct uslab_cache_stats st;

	(void)arg;
	uslab_cache_stats(stale_handle(), &st);
}

static void stale_validate(void *arg)
{
	(void)arg;
	uslab_cache_validate(stale_handle());
}

#define DEAD "a destroyed cache (or not a cache)"
static const struct death stale[] = {
	{ "stale destroy", stale_destroy, "uslab: BUG -: destroy of " DEAD },
	{ "stale alloc (inline)", stale_alloc_inline, "uslab: BUG -: allocation of " DEAD },
	{ "stale alloc (library)", stale_alloc_library, "uslab: BUG -: allocation of " DEAD },
	{ "stale free (inline)", stale_free_inline, "uslab: BUG -: free of " DEAD },
	{ "stale bulk alloc", stale_bulk, "uslab: BUG -: bulk allocation of " DEAD },
	{ "stale shrink", stale_shrink, "uslab: BUG -: shrink of " DEAD },
	{ "stale stats", stale_stats, "uslab: BUG -: stats of " DEAD },
	{ "stale validate", stale_validate, "uslab: BUG -: validate of " DEAD },
};

/* A handle stale since 5000 caches were created and destroyed (past the table's first region). */
static void stale_far(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("stale", 64, NULL, 0);

	(void)arg;
	uslab_cache_destroy(c);
	for (int i = 0; i < 5000; i++)
		uslab_cache_destroy(uslab_cache_create("churn", 64, NULL, 0));
	(uslab_cache_alloc)(c);
}

static void test_stale(void)
{
	struct uslab_cache *c;
	void *p, *q[4];

	EXPECT_DEATHS(stale);
	CHECK(expect_death(stale_far, NULL, "uslab: BUG -: allocation of " DEAD), "far");
	/* Caches past the first region of descriptors work through every call. */
	for (int i = 0; i < 5000; i++)
		CHECK(!uslab_cache_destroy(uslab_cache_create("churn", 64, NULL, 0)), "churn");
	c = uslab_cache_create("far", 64, NULL, 0);
	p = (uslab_cache_alloc)(c);
	CHECK(p && uslab_cache_of(p) == c, "alloc from a far cache");
	(uslab_cache_free)(c, p);
	CHECK((uslab_cache_alloc_bulk)(c, 4, q) == 4, "bulk");
	(uslab_cache_free_bulk)(c, 4, q);
	CHECK(cache_stats(c).object_size == 64 && uslab_cache_validate(c) == 0, "stats, validate");
	CHECK(!uslab_cache_shrink(c) && !uslab_cache_destroy(c), "shrink, destroy");
}

/* ------------------------------------------------ item 6: not a cache */

/* Handles that are not caches: unmapped, inside a live cache, a freed malloc block. */
static struct uslab_cache *junk_handle(int kind)
{
	struct uslab_cache *live = uslab_cache_create("live", 64, NULL, 0);
	void *m;

	switch (kind) {
	case 0:
		return (struct uslab_cache *)(uintptr_t)0x5a5a5a5a5a50ull;
	case 1:
		return (struct uslab_cache *)((char *)live + 8);
	default:
		m = malloc(4096);
		memset(m, 0x7f, 4096);
		free(m);
		return m;
	}
}

static void junk_alloc(void *arg)
{
	(uslab_cache_alloc)(junk_handle((int)(intptr_t)arg));
}

static void junk_free(void *arg)
{
	struct uslab_cache *d = uslab_cache_create("d", 64, NULL, 0);

	(uslab_cache_free)(junk_handle((int)(intptr_t)arg), uslab_cache_alloc(d));
}

static void junk_alloc_bulk(void *arg)
{
	void *p[32];

	(uslab_cache_alloc_bulk)(junk_handle((int)(intptr_t)arg), 32, p);
}

static void junk_destroy(void *arg)
{
	uslab_cache_destroy(junk_handle((int)(intptr_t)arg));
}

static void junk_stats(void *arg)
{
	struct uslab_cache_stats st;

	uslab_cache_stats(junk_handle((int)(intptr_t)arg), &st);
}

static void test_junk(void)
{
	static void (*const calls[])(void *) = { junk_alloc, junk_free, junk_alloc_bulk,
						 junk_destroy, junk_stats };
	static const char *const what[] = { "allocation", "free", "bulk allocation", "destroy",
					    "stats" };
	char needle[128];

	for (int kind = 0; kind < 3; kind++) {
		for (unsigned int i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
			snprintf(needle, sizeof(needle),
				 "uslab: BUG -: %s of a handle that is not a cache", what[i]);
			CHECK(expect_death(calls[i], (void *)(intptr_t)kind, needle),
			      "%s, junk kind %d", what[i], kind);
		}
	}
}

/* With an argument (kmalloc, stale, junk): that test only. */
int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : "";

	if (!*only || !strcmp(only, "kmalloc"))
		RUN(test_kmalloc_after_max_caches); /* first: before any kmalloc class exists */
	if (!*only || !strcmp(only, "stale"))
		RUN(test_stale);
	if (!*only || !strcmp(only, "junk"))
		RUN(test_junk);
	return 0;
}
