// SPDX-License-Identifier: MIT
/*
 * test_bulk.c - the contract of uslab_cache_alloc_bulk() and
 * uslab_cache_free_bulk(): any n from 1 to 20000, all or nothing, holes,
 * mixed caches through a NULL cache (kfree_bulk), allocated on one thread
 * and freed on another, failure for lack of memory leaking nothing, and
 * bulk calls counted. CTest runs it with USLAB_LOOKAHEAD 0, 3 and 8.
 */
#include <pthread.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <uslab.h>

#include "../test.h"

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* Distinct, owned by @c, and stamped with their own address. */
static void check_fresh(struct uslab_cache *c, size_t n, void **p, size_t size)
{
	void **sorted = malloc(n * sizeof(void *));

	memcpy(sorted, p, n * sizeof(void *));
	qsort(sorted, n, sizeof(void *), cmp_ptr);
	for (size_t i = 0; i < n; i++) {
		CHECK(sorted[i] && uslab_cache_of(sorted[i]) == c, "entry %zu is an object of c",
		      i);
		CHECK(i == 0 || (uintptr_t)sorted[i] - (uintptr_t)sorted[i - 1] >= size,
		      "objects %zu and %zu overlap or repeat", i - 1, i);
	}
	for (size_t i = 0; i < n; i++)
		memcpy(p[i], &p[i], sizeof(void *));
	free(sorted);
}

static void check_stamps(size_t n, void **p)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			CHECK(memcmp(p[i], &p[i], sizeof(void *)) == 0, "contents of %zu", i);
}

static void test_sizes(void)
{
	static const size_t sizes[] = { 1,   2,	  3,   4,    7,	   8,	 15,   16,   30,   32,
					34,  48,  64,  100,  126,  127,	 128,  158,  250,  253,
					254, 255, 500, 1000, 2047, 4096, 5000, 9999, 20000 };
	struct uslab_cache *c = uslab_cache_create("bulk", 96, NULL, 0);
	void **p = calloc(20000, sizeof(void *));
	struct uslab_cache_stats st;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		CHECK(uslab_cache_alloc_bulk(c, n, p) == n, "alloc_bulk(%zu)", n);
		check_fresh(c, n, p, 96);
		check_stamps(n, p);
		uslab_cache_free_bulk(c, n, p);
		for (size_t i = 0; i < n; i++)
			CHECK(p[i] == NULL, "entry %zu cleared after free_bulk(%zu)", i, n);
	}
	CHECK(uslab_cache_alloc_bulk(c, 0, p) == 0, "n = 0 takes nothing");
	uslab_cache_free_bulk(c, 0, p);
	uslab_cache_free_bulk(c, 5, NULL);
	uslab_thread_flush();
	uslab_cache_shrink(c);
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs == 0 && st.num_slabs == 0, "nothing lost: active %lu slabs %lu",
	      st.active_objs, st.num_slabs);
#ifdef USLAB_NO_INLINE
	/* Every call reaches the library; every call with n > 0 is counted. */
	CHECK(st.events[USLAB_STAT_ALLOC_BULK] == sizeof(sizes) / sizeof(sizes[0]),
	      "bulk alloc calls counted: %llu",
	      (unsigned long long)st.events[USLAB_STAT_ALLOC_BULK]);
	CHECK(st.events[USLAB_STAT_FREE_BULK] ==
		      sizeof(sizes) / sizeof(sizes[0]), /* not n == 0, not p == NULL */
	      "bulk free calls counted: %llu", (unsigned long long)st.events[USLAB_STAT_FREE_BULK]);
#else
	/* Inline calls served by the main sheaf are not counted; the rest are. */
	CHECK(st.events[USLAB_STAT_ALLOC_BULK] >= 5 &&
		      st.events[USLAB_STAT_ALLOC_BULK] <= sizeof(sizes) / sizeof(sizes[0]) + 1,
	      "bulk alloc calls reaching the library counted: %llu",
	      (unsigned long long)st.events[USLAB_STAT_ALLOC_BULK]);
#endif
	free(p);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* Bulk and single calls interleave on the same sheaves. */
static void test_mixed_with_single(void)
{
	struct uslab_cache *c = uslab_cache_create("bulk-mix", 40, NULL, 0);
	void *p[300], *q[300];
	uint64_t seed = 42;

	for (int round = 0; round < 200; round++) {
		size_t n = 1 + rnd_next(&seed) % 300, m = rnd_next(&seed) % 300;

		CHECK(uslab_cache_alloc_bulk(c, n, p) == n, "bulk %zu", n);
		for (size_t i = 0; i < m; i++)
			q[i] = uslab_cache_alloc(c);
		check_fresh(c, n, p, 40);
		for (size_t i = 0; i < m; i++)
			uslab_cache_free(c, q[i]);
		check_stamps(n, p);
		uslab_cache_free_bulk(c, n, p);
	}
	uslab_cache_shrink(c);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_holes(void)
{
	struct uslab_cache *c = uslab_cache_create("holes", 64, NULL, 0);
	enum { N = 3000 };
	void **p = calloc(N, sizeof(void *));
	struct uslab_cache_stats st;
	size_t live = 0;

	CHECK(uslab_cache_alloc_bulk(c, N, p) == N, "alloc");
	/* Free every third object singly: its entry becomes a hole. */
	for (int i = 0; i < N; i += 3) {
		uslab_cache_free(c, p[i]);
		p[i] = NULL;
	}
	for (int i = 0; i < N; i++)
		live += p[i] != NULL;
	uslab_cache_free_bulk(c, N, p);
	for (int i = 0; i < N; i++)
		CHECK(p[i] == NULL, "cleared");
	uslab_thread_flush();
	uslab_cache_shrink(c);
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs == 0, "holes skipped, every object freed once (%zu live before)",
	      live);
	free(p);
	uslab_cache_destroy(c);
}

/*
 * USLAB_ZERO_SIZE_PTR entries are holes too (<uslab.h>): skipped at every
 * size (the inline scalar loop, the vector move, the library's slow path
 * when main is full) and in a USLAB_FREE_KEY cache, never handed out.
 */
static void test_zero_size_holes(void)
{
	static const size_t sizes[] = { 2, 7, 9, 64, 126, 600, 5000 };

	for (int keyed = 0; keyed < 2; keyed++) {
		struct uslab_cache *c =
			uslab_cache_create("zsp", 64, NULL, keyed ? USLAB_FREE_KEY : 0);

		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k];
			void **p = calloc(n, sizeof(void *));
			struct uslab_cache_stats st;

			CHECK(uslab_cache_alloc_bulk(c, n, p) == n, "alloc %zu", n);
			for (size_t i = 0; i < n; i += 2) {
				uslab_cache_free(c, p[i]);
				p[i] = i % 4 ? NULL : USLAB_ZERO_SIZE_PTR;
			}
			uslab_cache_free_bulk(c, n, p);
			for (size_t i = 0; i < n; i++)
				CHECK(p[i] == NULL, "entry %zu of %zu cleared", i, n);
			/* Everything handed out again is an object of c. */
			CHECK(uslab_cache_alloc_bulk(c, n, p) == n, "alloc again %zu", n);
			for (size_t i = 0; i < n; i++)
				CHECK(!USLAB_ZERO_OR_NULL_PTR(p[i]) && uslab_cache_of(p[i]) == c,
				      "entry %zu of %zu (%p) is an object (keyed %d)", i, n, p[i],
				      keyed);
			uslab_cache_free_bulk(c, n, p);
			uslab_thread_flush();
			uslab_cache_shrink(c);
			uslab_cache_stats(c, &st);
			CHECK(st.active_objs == 0, "n %zu keyed %d: every object back", n, keyed);
			free(p);
		}
		uslab_cache_destroy(c);
	}
}

/*
 * Bulk calls larger than a sheaf, in a loop that the thread's two sheaves
 * serve between them (no barn trade): the capacity grows to hold them and
 * the thread's own sheaves with it (pcs_fit_bulk), so the calls fit main;
 * contents kept and every object back. Not with a pinned capacity.
 */
static void test_bulk_grows_sheaves(void)
{
	enum { N = 128 };
	struct uslab_cache *c = uslab_cache_create("bulkgrow", 256, NULL, 0);
	struct uslab_cache_stats st;
	void *p[N];
	int i;

	uslab_cache_stats(c, &st);
	if (st.sheaf_capacity_max < 254 || st.sheaf_capacity >= N || getenv("USLAB_PERCPU")) {
		printf("   (skipped: sheaf capacity %u, max %u)\n", st.sheaf_capacity,
		       st.sheaf_capacity_max);
		uslab_cache_destroy(c);
		return;
	}
	for (i = 0; i < 200000; i++) {
		CHECK(uslab_cache_alloc_bulk(c, N, p) == N, "alloc");
		check_fresh(c, N, p, 256);
		check_stamps(N, p);
		uslab_cache_free_bulk(c, N, p);
		uslab_cache_stats(c, &st);
		if (st.sheaf_capacity >= N && i > 100)
			break;
	}
	CHECK(st.sheaf_capacity >= N && st.events[USLAB_STAT_SHEAF_GROW] >= 1,
	      "capacity %u after %d calls of %d (grows %llu)", st.sheaf_capacity, i, N,
	      (unsigned long long)st.events[USLAB_STAT_SHEAF_GROW]);
	uslab_thread_flush();
	uslab_cache_shrink(c);
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs == 0, "every object back");
	uslab_cache_destroy(c);
}

/* kfree_bulk: one array, several caches, no cache named. */
static void test_mixed_caches(void)
{
	struct uslab_cache *c[3] = { uslab_cache_create("mix-a", 32, NULL, 0),
				     uslab_cache_create("mix-b", 200, NULL, 0),
				     uslab_cache_create("mix-c", 4000, NULL, 0) };
	enum { N = 6000 };
	void **p = calloc(N, sizeof(void *));
	uint64_t seed = 7;
	struct uslab_cache_stats st;

	for (int i = 0; i < N; i++) {
		p[i] = uslab_cache_alloc(c[rnd_next(&seed) % 3]);
		memcpy(p[i], &p[i], sizeof(void *));
	}
	check_stamps(N, p);
	uslab_cache_free_bulk(NULL, N, p);
	for (int i = 0; i < N; i++)
		CHECK(p[i] == NULL, "cleared");
	for (int k = 0; k < 3; k++) {
		uslab_thread_flush();
		uslab_cache_shrink(c[k]);
		uslab_cache_stats(c[k], &st);
		CHECK(st.active_objs == 0, "cache %d: all returned to their own slabs", k);
		CHECK(uslab_cache_destroy(c[k]) == 0, "destroy %d", k);
	}
	free(p);
}

static struct uslab_cache *xc;
static void *xobjs[5000];

static void *bulk_free_thread(void *arg)
{
	(void)arg;
	check_stamps(5000, xobjs);
	uslab_cache_free_bulk(xc, 5000, xobjs);
	return NULL;
}

static void test_cross_thread(void)
{
	struct uslab_cache_stats st;
	pthread_t t;

	xc = uslab_cache_create("bulk-x", 128, NULL, 0);
	CHECK(uslab_cache_alloc_bulk(xc, 5000, xobjs) == 5000, "alloc here");
	check_fresh(xc, 5000, xobjs, 128);
	pthread_create(&t, NULL, bulk_free_thread, NULL);
	pthread_join(t, NULL);
	uslab_thread_flush();
	uslab_cache_shrink(xc);
	uslab_cache_stats(xc, &st);
	CHECK(st.active_objs == 0, "freed on the other thread: active %lu", st.active_objs);
	CHECK(uslab_cache_destroy(xc) == 0, "destroy");
}

/* A bulk allocation that cannot be satisfied takes nothing and leaks nothing. */
static void oom_child(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("bulk-oom", 64 << 10, NULL, 0);
	struct uslab_cache_stats before, after;
	struct rlimit rl;
	void **p = calloc(100000, sizeof(void *));
	unsigned long vm = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	(void)arg;
	if (!f || fscanf(f, "%lu", &vm) != 1)
		_exit(2);
	fclose(f);
	/* A few objects first, so the cache has state to corrupt. */
	if (uslab_cache_alloc_bulk(c, 10, p) != 10)
		_exit(3);
	rl.rlim_cur = rl.rlim_max = vm * 4096 + (256ul << 20);
	if (setrlimit(RLIMIT_AS, &rl))
		_exit(4);
	uslab_cache_stats(c, &before);
	/* 100000 x 64 KiB = 6 GiB: cannot fit under the limit. */
	errno = 0;
	if (uslab_cache_alloc_bulk(c, 100000, p + 10) != 0 || errno != ENOMEM)
		_exit(5);
	uslab_cache_stats(c, &after);
	if (after.active_objs != before.active_objs)
		_exit(6);
	/* Still usable: */
	if (uslab_cache_alloc_bulk(c, 20, p + 10) != 20)
		_exit(7);
	memset(p[29], 1, 64 << 10);
	uslab_cache_free_bulk(c, 30, p);
	uslab_thread_flush();
	uslab_cache_shrink(c);
	uslab_cache_stats(c, &after);
	if (after.active_objs != 0)
		_exit(8);
	_exit(uslab_cache_destroy(c) == 0 ? 0 : 9);
}

static void test_out_of_memory(void)
{
	check_oom_child(oom_child, "bulk out of memory: all or nothing, no leak, usable after");
}

static void bulk_double_free(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("bulk-df", 64, NULL, 0);
	void *p[300], *q[2];

	(void)arg;
	uslab_cache_alloc_bulk(c, 300, p);
	q[0] = q[1] = p[100];
	uslab_cache_free_bulk(c, 2, q);
	uslab_cache_free_bulk(c, 300, p);
	uslab_cache_shrink(c);
}

static void test_bulk_double_free(void)
{
	CHECK(expect_death(bulk_double_free, NULL, "uslab: BUG bulk-df: double free"),
	      "a double free inside bulk frees is reported");
}

/*
 * Bursts of 64 through sheaves of 126, one thread, a window of 1024 in
 * flight (bench_forward's one thread): once settled, no sheaf swaps (the
 * spare serves a burst main cannot; thread_sheaves.c), and every object comes back
 * stamped as it left.
 */
static void test_burst_swaps(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 126 };
	struct uslab_cache *c = uslab_cache_create("bulk-bursts", 256, &a, 0);
	enum { B = 64, WIN = 1024, ROUNDS = 5000 };
	static void *ring[WIN];
	uint64_t swaps0 = 0;
	size_t head = 0, tail = 0;

	CHECK(c, "create");
	for (int r = 0; r < ROUNDS; r++) {
		struct uslab_cache_stats st;

		if (r == 100) { /* settled */
			CHECK(!uslab_cache_stats(c, &st), "stats");
			swaps0 = st.events[USLAB_STAT_SHEAF_SWAP];
		}
		CHECK(uslab_cache_alloc_bulk(c, B, ring + head % WIN) == B, "alloc burst");
		for (int k = 0; k < B; k++)
			*(size_t *)ring[(head + k) % WIN] = head + k;
		head += B;
		if (head - tail >= WIN) {
			for (int k = 0; k < B; k++)
				CHECK(*(size_t *)ring[(tail + k) % WIN] == tail + k, "stamp");
			uslab_cache_free_bulk(c, B, ring + tail % WIN);
			tail += B;
		}
	}
	struct uslab_cache_stats st;
	CHECK(!uslab_cache_stats(c, &st), "stats");
	/* (Counted only with statistics built in: USLAB_STATS.) */
	CHECK(st.events[USLAB_STAT_SHEAF_SWAP] - swaps0 <= 2,
	      "%lu swaps in %d settled bursts (two per burst without the rule)",
	      (unsigned long)(st.events[USLAB_STAT_SHEAF_SWAP] - swaps0), ROUNDS - 100);
	while (tail < head) {
		uslab_cache_free_bulk(c, B, ring + tail % WIN);
		tail += B;
	}
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

int main(void)
{
	const char *la = getenv("USLAB_LOOKAHEAD");

	printf("USLAB_LOOKAHEAD=%s, %s\n", la ? la : "(default)",
#ifdef USLAB_NO_INLINE
	       "through the library's functions"
#else
	       "inline fast paths"
#endif
	);
	RUN(test_sizes);
	RUN(test_mixed_with_single);
	RUN(test_holes);
	RUN(test_zero_size_holes);
	RUN(test_bulk_grows_sheaves);
	RUN(test_mixed_caches);
	RUN(test_cross_thread);
	RUN(test_out_of_memory);
	RUN(test_bulk_double_free);
	RUN(test_burst_swaps);
	return 0;
}
