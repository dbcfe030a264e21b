// SPDX-License-Identifier: MIT
/*
 * test_threads.c - the cache contract across threads: frees on another
 * thread, sheaves returned at thread exit and by uslab_thread_flush(),
 * destroy reclaiming other threads' cached objects, cache ids reused
 * safely, and empty bulk calls by threads without state. Fork: unit_thread
 * (fork_drains) and api_faults (fork_typesafe_flush, fork_counters).
 */
#include <pthread.h>
#include <stdbool.h>
#include <uslab.h>

#include "../test.h"

enum { N = 20000 };

static struct uslab_cache *cache;
static void *objs[N];

static void *alloc_all(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++) {
		uint64_t *o = uslab_cache_alloc(cache);

		o[0] = (uint64_t)i;
		o[1] = ~(uint64_t)i;
		objs[i] = o;
	}
	return NULL;
}

static void *free_all(void *arg)
{
	(void)arg;
	for (int i = 0; i < N; i++) {
		uint64_t *o = objs[i];

		if (o[0] != (uint64_t)i || o[1] != ~(uint64_t)i)
			return (void *)1;
		uslab_cache_free(cache, o);
	}
	return NULL;
}

static void run_thread(void *(*fn)(void *), void **ret)
{
	pthread_t t;

	pthread_create(&t, NULL, fn, NULL);
	pthread_join(t, ret);
}

/* Allocated on one thread, freed on another; both threads exit. */
static void test_cross_thread_free(void)
{
	struct uslab_cache_stats st;
	void *ret;

	cache = uslab_cache_create("xthread", 48, NULL, 0);
	run_thread(alloc_all, &ret);
	uslab_cache_stats(cache, &st);
	CHECK(st.active_objs >= N, "objects active after the allocator exited");
	run_thread(free_all, &ret);
	CHECK(ret == NULL, "contents intact on the freeing thread");
	uslab_cache_stats(cache, &st);
	/* Both threads are gone: only barn sheaves may still hold objects. */
	CHECK(st.active_objs == st.barn_full * st.sheaf_capacity,
	      "exited threads returned their sheaves: active %lu barn %lu x %u", st.active_objs,
	      st.barn_full, st.sheaf_capacity);
	CHECK(st.events[USLAB_STAT_BARN_PUT] + st.events[USLAB_STAT_SHEAF_FLUSH] > 0,
	      "frees left the thread in batches");
	uslab_cache_shrink(cache);
	uslab_cache_stats(cache, &st);
	CHECK(st.active_objs == 0 && st.num_slabs == 0, "shrink: active %lu slabs %lu",
	      st.active_objs, st.num_slabs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

/* uslab_thread_flush() returns a live thread's cached objects. */
static void test_thread_flush(void)
{
	struct uslab_cache_stats st;
	void *p[300];

	cache = uslab_cache_create("flush", 100, NULL, 0);
	for (int i = 0; i < 300; i++)
		p[i] = uslab_cache_alloc(cache);
	for (int i = 0; i < 300; i++)
		uslab_cache_free(cache, p[i]);
	uslab_cache_stats(cache, &st);
	CHECK(st.active_objs > 0, "frees sit in this thread's sheaves");
	uslab_thread_flush();
	uslab_cache_stats(cache, &st);
	CHECK(st.active_objs == st.barn_full * st.sheaf_capacity,
	      "after flush only full sheaves in the barn: %lu", st.active_objs);
	uslab_thread_flush(); /* twice is harmless */
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

static pthread_barrier_t barrier;

/* Cache objects in this thread's sheaves, then stay alive for a while. */
static void *hold_sheaves(void *arg)
{
	void *p[50];

	(void)arg;
	for (int i = 0; i < 50; i++)
		p[i] = uslab_cache_alloc(cache);
	for (int i = 0; i < 50; i++)
		uslab_cache_free(cache, p[i]);
	pthread_barrier_wait(&barrier); /* sheaves are full of objects */
	pthread_barrier_wait(&barrier); /* main thread destroyed the cache */
	/* A new cache may reuse the id: this thread must see its objects. */
	void *o = uslab_cache_alloc(cache);
	bool ok = uslab_cache_of(o) == cache;

	uslab_cache_free(cache, o);
	pthread_barrier_wait(&barrier);
	return ok ? NULL : (void *)1;
}

static void test_destroy_reclaims(void)
{
	struct uslab_cache *old;
	pthread_t t;
	void *ret;

	pthread_barrier_init(&barrier, NULL, 2);
	cache = uslab_cache_create("reclaim", 64, NULL, 0);
	pthread_create(&t, NULL, hold_sheaves, NULL);
	pthread_barrier_wait(&barrier);
	old = cache;
	CHECK(uslab_cache_destroy(old) == 0,
	      "objects in another live thread's sheaves do not block destroy");
	cache = uslab_cache_create("reused", 64, NULL, 0);
	CHECK(cache, "create after destroy");
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	pthread_join(t, &ret);
	CHECK(ret == NULL, "the other thread got objects of the new cache");
	uslab_cache_shrink(cache);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy the new cache");
	pthread_barrier_destroy(&barrier);
}

/* Many short-lived threads: every one returns its sheaves at exit. */
static void *churn(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	void *p[200];

	for (int r = 0; r < 20; r++) {
		int n = (int)(rnd_next(&seed) % 200);

		for (int i = 0; i < n; i++)
			p[i] = uslab_cache_alloc(cache);
		for (int i = 0; i < n; i++)
			uslab_cache_free(cache, p[i]);
	}
	return NULL;
}

static void test_thread_churn(void)
{
	struct uslab_cache_stats st;

	/*
	 * The capacity pinned: an adaptive cache may grow its capacity while
	 * the threads trade (issue 23), and then the barn holds sheaves of two
	 * sizes, which the count below cannot tell apart.
	 */
	cache = uslab_cache_create("churn", 80, &(struct uslab_cache_args){ .sheaf_capacity = 126 },
				   0);
	for (int round = 0; round < 20; round++) {
		pthread_t t[4];

		for (int i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(round * 4 + i));
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
	}
	uslab_cache_stats(cache, &st);
	CHECK(st.active_objs == st.barn_full * st.sheaf_capacity,
	      "80 exited threads left nothing behind but barn sheaves: %lu", st.active_objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

/*
 * Bulk calls of n == 0 by threads that never allocated: they must not store
 * into the table of zeros such threads share (TSan reports a race if they
 * do), and they take and give nothing.
 */
static void *empty_bulk(void *arg)
{
	void *p[4] = { arg, arg, arg, arg };

	for (int i = 0; i < 10000; i++) {
		if (uslab_cache_alloc_bulk(cache, 0, p) != 0 || p[0] != arg)
			return (void *)1;
		uslab_cache_free_bulk(cache, 0, p);
		if (p[0] != arg)
			return (void *)1;
	}
	return NULL;
}

static void test_empty_bulk_unstarted(void)
{
	pthread_t t[2];
	void *ret;
	int marker;

	cache = uslab_cache_create("empty_bulk", 64, NULL, 0);
	CHECK(cache, "create");
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, empty_bulk, &marker), "thread");
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], &ret);
		CHECK(ret == NULL, "n = 0 took or cleared entries");
	}
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

int main(void)
{
	RUN(test_cross_thread_free);
	RUN(test_thread_flush);
	RUN(test_destroy_reclaims);
	RUN(test_thread_churn);
	RUN(test_empty_bulk_unstarted);
	return 0;
}
