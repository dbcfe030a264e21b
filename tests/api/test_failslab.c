// SPDX-License-Identifier: MIT
/*
 * test_failslab.c - USLAB_FAILSLAB fault injection, one mode per run (the
 * variable is read once at start-up; tests/CMakeLists.txt sets it):
 *
 *   all       USLAB_FAILSLAB=100            every allocation of the
 *             program's caches and kmalloc classes fails with ENOMEM:
 *             single, zalloc, bulk (nothing taken), magazine, kmalloc;
 *             uslab's own metadata and large kmalloc objects still work
 *   times     USLAB_FAILSLAB=100,1,5        exactly the first 5 fail
 *   interval  USLAB_FAILSLAB=100,4          exactly every 4th call fails
 *   cache     USLAB_FAILSLAB=100,1,-1,victim  only the cache "victim"
 *   repro     USLAB_FAILSLAB=30             about 30% fail, and the same
 *             calls fail in two runs of this program
 */
#include <uslab.h>
#include <uslab/kmalloc.h>
#include <uslab/magazine.h>

#include "../test.h"

#define CALLS 1000

static void mode_all(void)
{
	struct uslab_cache *c = uslab_cache_create("any", 64, NULL, 0);
	struct uslab_magazine *m;
	void *p[8] = { 0 }, *big;

	CHECK(c, "cache creation is not failed");
	errno = 0;
	CHECK(!uslab_cache_alloc(c) && errno == ENOMEM, "alloc: ENOMEM");
	errno = 0;
	CHECK(!uslab_cache_zalloc(c) && errno == ENOMEM, "zalloc: ENOMEM");
	errno = 0;
	CHECK(uslab_cache_alloc_bulk(c, 8, p) == 0 && errno == ENOMEM, "bulk: 0, ENOMEM");
	for (int i = 0; i < 8; i++)
		CHECK(!p[i], "bulk: nothing taken");
	errno = 0;
	CHECK(!uslab_kmalloc(100) && errno == ENOMEM, "kmalloc class: ENOMEM");
	big = uslab_kmalloc(1 << 20);
	CHECK(big, "a large kmalloc object is not a slab allocation: not failed");
	uslab_kfree(big);
	m = uslab_magazine_create(c, 16, 0);
	if (m) {
		errno = 0;
		CHECK(!uslab_magazine_alloc(m) && errno == ENOMEM, "magazine: ENOMEM");
		uslab_magazine_destroy(m);
	}
	CHECK(uslab_failslab_count() >= 5, "counted: %lu", uslab_failslab_count());
	CHECK(uslab_cache_destroy(c) == 0, "destroy: nothing was handed out");
}

static void mode_times(void)
{
	struct uslab_cache *c = uslab_cache_create("times", 64, NULL, 0);
	void *p[CALLS];

	for (int i = 0; i < CALLS; i++) {
		p[i] = uslab_cache_alloc(c);
		CHECK(!p[i] == (i < 5), "call %d: %s", i, p[i] ? "succeeded" : "failed");
	}
	CHECK(uslab_failslab_count() == 5, "5 failures: %lu", uslab_failslab_count());
	for (int i = 0; i < CALLS; i++)
		uslab_cache_free(c, p[i]);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/*
 * krealloc between two classes while every 4th allocation fails: a failed
 * growth returns NULL with ENOMEM and leaves the object as it was; a failed
 * shrink returns the object itself; the bytes both sizes hold survive.
 */
static void krealloc_failures(void)
{
	unsigned char *p = uslab_kmalloc(64), *q;
	size_t have = 64;
	int grow_failed = 0, shrink_kept = 0;

	CHECK(p, "kmalloc");
	memset(p, 0xa5, have);
	for (int i = 0; i < 40; i++) {
		size_t want = i % 2 ? 16 : 1024; /* two class sizes */

		memset(p, 0xa5, have);
		errno = 0;
		q = uslab_krealloc(p, want);
		if (!q) {
			CHECK(want > have && errno == ENOMEM,
			      "a failed krealloc %zu -> %zu: ENOMEM", have, want);
			grow_failed++;
			continue;
		}
		for (size_t j = 0; j < (want < have ? want : have); j++)
			CHECK(q[j] == 0xa5, "byte %zu after krealloc %zu -> %zu", j, have, want);
		if (q == p && want < have && uslab_ksize(p) == have) {
			shrink_kept++; /* its allocation failed: @p kept, at its size */
			continue;
		}
		CHECK(uslab_ksize(q) == want, "krealloc %zu -> %zu: ksize %zu", have, want,
		      uslab_ksize(q));
		p = q;
		have = want;
	}
	CHECK(grow_failed && shrink_kept, "failed growths %d, shrinks kept %d", grow_failed,
	      shrink_kept);
	uslab_kfree(p);
}

static void mode_interval(void)
{
	struct uslab_cache *c = uslab_cache_create("interval", 64, NULL, 0);

	for (int i = 1; i <= CALLS; i++) {
		void *o = uslab_cache_alloc(c);

		CHECK(!o == (i % 4 == 0), "call %d", i);
		uslab_cache_free(c, o);
	}
	CHECK(uslab_failslab_count() == CALLS / 4, "%d failures: %lu", CALLS / 4,
	      uslab_failslab_count());
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	krealloc_failures();
}

static void mode_cache(void)
{
	struct uslab_cache *v = uslab_cache_create("victim", 64, NULL, 0);
	struct uslab_cache *o = uslab_cache_create("other", 64, NULL, 0);
	void *p;

	for (int i = 0; i < CALLS; i++) {
		CHECK(!uslab_cache_alloc(v), "victim fails");
		p = uslab_cache_alloc(o);
		CHECK(p, "other works");
		uslab_cache_free(o, p);
		p = uslab_kmalloc(64);
		CHECK(p, "kmalloc works");
		uslab_kfree(p);
	}
	CHECK(uslab_failslab_count() == CALLS, "only victim's calls: %lu", uslab_failslab_count());
	uslab_cache_destroy(v);
	uslab_cache_destroy(o);
}

/* Print which of CALLS allocations failed, as a string of 0 and 1. */
static void mode_pattern(void)
{
	struct uslab_cache *c = uslab_cache_create("pattern", 64, NULL, 0);
	char s[CALLS + 1];

	for (int i = 0; i < CALLS; i++) {
		void *o = uslab_cache_alloc(c);

		s[i] = o ? '0' : '1';
		uslab_cache_free(c, o);
	}
	s[CALLS] = 0;
	puts(s);
}

static void run_pattern(const char *self, char *out)
{
	char cmd[4096];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s pattern", self);
	f = popen(cmd, "r");
	CHECK(f && fgets(out, CALLS + 2, f), "run %s", cmd);
	pclose(f);
}

static void mode_repro(const char *self)
{
	static char a[CALLS + 2], b[CALLS + 2];
	int ones = 0;

	run_pattern(self, a);
	run_pattern(self, b);
	CHECK(!strcmp(a, b), "the same calls fail in two runs");
	for (int i = 0; i < CALLS; i++)
		ones += a[i] == '1';
	CHECK(ones > CALLS * 25 / 100 && ones < CALLS * 35 / 100, "about 30%% fail: %d of %d", ones,
	      CALLS);
	printf("   %d of %d allocations failed, the same ones in both runs\n", ones, CALLS);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "all"))
		RUN(mode_all);
	else if (!strcmp(mode, "times"))
		RUN(mode_times);
	else if (!strcmp(mode, "interval"))
		RUN(mode_interval);
	else if (!strcmp(mode, "cache"))
		RUN(mode_cache);
	else if (!strcmp(mode, "pattern"))
		mode_pattern();
	else if (!strcmp(mode, "repro"))
		mode_repro(argv[0]);
	else {
		fprintf(stderr, "usage: %s all|times|interval|cache|repro\n", argv[0]);
		return 2;
	}
	return 0;
}
