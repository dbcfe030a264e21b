// SPDX-License-Identifier: MIT
/*
 * test_magazine.c - the contract of caller-owned magazines, the prefilled
 * reserve and on-stack free batches (uslab/magazine.h): defaults and
 * errors, the refill and half-flush policy counted through the magazine's
 * counters and the cache's bulk-call statistics, LIFO order and which half
 * goes back, bulk calls all or nothing, flush and destroy returning every
 * object, prefill guaranteeing N, free batches freeing everything including
 * the tail and mixed caches, and a magazine used by RX on one thread and
 * TX on another with content checks. Built twice: inline fast paths, and
 * through the library's functions (USLAB_NO_INLINE).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <uslab.h>

#include "../test.h"

static uint64_t stat_of(struct uslab_cache *c, enum uslab_stat_item item)
{
	struct uslab_cache_stats st;

	CHECK(uslab_cache_stats(c, &st) == 0, "stats");
	return st.events[item];
}

/* Every object back: after this thread's flush and a shrink, nothing is active. */
static void check_all_back(struct uslab_cache *c, const char *what)
{
	struct uslab_cache_stats st;

	uslab_thread_flush();
	uslab_cache_shrink(c);
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs == 0, "%s: every object back, active_objs %lu", what, st.active_objs);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* p[0..n) are distinct objects of @c. */
static void check_distinct(struct uslab_cache *c, size_t n, void **p)
{
	void **s = malloc(n * sizeof(void *));

	memcpy(s, p, n * sizeof(void *));
	qsort(s, n, sizeof(void *), cmp_ptr);
	for (size_t i = 0; i < n; i++) {
		CHECK(s[i] && uslab_cache_of(s[i]) == c, "entry %zu is an object of the cache", i);
		CHECK(i == 0 || s[i] != s[i - 1], "objects %zu and %zu are the same", i - 1, i);
	}
	free(s);
}

static void test_defaults_and_errors(void)
{
	struct uslab_cache *c = uslab_cache_create("mag-err", 64, NULL, 0);
	struct uslab_magazine *m;
	void *p[4];

	m = uslab_magazine_create(c, 0, 0);
	CHECK(m && m->capacity == USLAB_MAGAZINE_CAPACITY && m->refill == USLAB_MAGAZINE_REFILL,
	      "defaults 64 and 16: %u %u", m ? m->capacity : 0, m ? m->refill : 0);
	CHECK(uslab_magazine_count(m) == 0 && m->refills == 0 && m->flushes == 0, "starts empty");
	uslab_magazine_destroy(m);
	m = uslab_magazine_create(c, 8, 0);
	CHECK(m && m->capacity == 8 && m->refill == 8, "refill capped by a small capacity");
	CHECK(uslab_magazine_fill(m, 9) == -EINVAL, "fill beyond the capacity: -EINVAL");
	CHECK(uslab_magazine_count(m) == 0, "a failed fill took nothing");
	CHECK(uslab_magazine_alloc_bulk(m, 0, p) == 0, "alloc_bulk of 0 returns 0");
	uslab_magazine_free(m, NULL);
	CHECK(uslab_magazine_count(m) == 0, "free of NULL does nothing");
	uslab_magazine_destroy(m);

	errno = 0;
	CHECK(!uslab_magazine_create(NULL, 0, 0) && errno == EINVAL, "NULL cache: EINVAL");
	errno = 0;
	CHECK(!uslab_magazine_create(c, USLAB_MAGAZINE_MAX_CAPACITY + 1, 0) && errno == EINVAL,
	      "capacity too large: EINVAL");
	errno = 0;
	CHECK(!uslab_magazine_create(c, 32, 33) && errno == EINVAL,
	      "refill above capacity: EINVAL");
	errno = 0;
	CHECK(!uslab_magazine_create(c, 0, 65) && errno == EINVAL,
	      "refill above the default capacity: EINVAL");
	errno = 0;
	CHECK(!uslab_magazine_prefill(NULL, 4) && errno == EINVAL, "prefill, NULL cache: EINVAL");
	errno = 0;
	CHECK(!uslab_magazine_prefill(c, USLAB_MAGAZINE_MAX_CAPACITY / 2 + 1) && errno == EINVAL,
	      "prefill too many: EINVAL");
	CHECK(uslab_magazine_fill(NULL, 1) == -EINVAL, "fill of NULL: -EINVAL");
	uslab_magazine_flush(NULL);
	uslab_magazine_destroy(NULL);
	check_all_back(c, "errors");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* Empty -> one bulk alloc of `refill`; full -> the older half in one bulk free. */
static void test_policy(void)
{
	struct uslab_cache *c = uslab_cache_create("mag-policy", 128, NULL, 0);
	struct uslab_magazine *m = uslab_magazine_create(c, 64, 16);
	uint64_t a0 = stat_of(c, USLAB_STAT_ALLOC_BULK), f0 = stat_of(c, USLAB_STAT_FREE_BULK);
	void *o[65], *got[33];

	for (int i = 0; i < 16; i++) {
		CHECK((got[0] = uslab_magazine_alloc(m)) != NULL, "alloc %d", i);
		CHECK(uslab_magazine_count(m) == 15u - (unsigned int)i, "count after alloc %d: %u",
		      i, uslab_magazine_count(m));
		memset(got[0], i, 128);
		uslab_cache_free(c, got[0]);
	}
	CHECK(m->refills == 1, "one refill for 16 allocations: %lu", m->refills);
	CHECK(stat_of(c, USLAB_STAT_ALLOC_BULK) - a0 == 1, "the cache saw one bulk alloc: %llu",
	      (unsigned long long)(stat_of(c, USLAB_STAT_ALLOC_BULK) - a0));
	got[0] = uslab_magazine_alloc(m);
	CHECK(got[0] && m->refills == 2 && uslab_magazine_count(m) == 15,
	      "the 17th allocation refills again");
	uslab_magazine_free(m, got[0]);
	uslab_magazine_flush(m);
	CHECK(uslab_magazine_count(m) == 0 && m->flushes == 1, "flush empties, one bulk free");
	check_all_back(c, "after the refills");

	/* 64 frees fit; the 65th sends the 32 oldest back with one bulk free. */
	uslab_magazine_destroy(m);
	m = uslab_magazine_create(c, 64, 16);
	f0 = stat_of(c, USLAB_STAT_FREE_BULK);
	for (int i = 0; i < 65; i++)
		o[i] = uslab_cache_alloc(c);
	for (int i = 0; i < 64; i++)
		uslab_magazine_free(m, o[i]);
	CHECK(uslab_magazine_count(m) == 64 && m->flushes == 0,
	      "64 frees fit: count %u flushes %lu", uslab_magazine_count(m), m->flushes);
	uslab_magazine_free(m, o[64]);
	CHECK(uslab_magazine_count(m) == 33 && m->flushes == 1, "65th: count %u flushes %lu",
	      uslab_magazine_count(m), m->flushes);
	CHECK(stat_of(c, USLAB_STAT_FREE_BULK) - f0 == 1, "the cache saw one bulk free");
	/* LIFO, and the newest half stayed: o[64], o[63], ..., o[32]. */
	for (int i = 0; i < 33; i++) {
		got[i] = uslab_magazine_alloc(m);
		CHECK(got[i] == o[64 - i], "allocation %d returns the object freed %d-th", i,
		      64 - i);
	}
	CHECK(m->refills == 0, "no refill while objects rest");
	for (int i = 0; i < 33; i++)
		uslab_magazine_free(m, got[i]);
	uslab_magazine_destroy(m);
	check_all_back(c, "after the half flush");

	/* Capacity 1: every free of a full magazine sends one object back. */
	m = uslab_magazine_create(c, 1, 1);
	o[0] = uslab_magazine_alloc(m);
	o[1] = uslab_magazine_alloc(m);
	CHECK(o[0] && o[1] && o[0] != o[1] && m->refills == 2, "capacity 1 refills every time");
	uslab_magazine_free(m, o[0]);
	uslab_magazine_free(m, o[1]);
	CHECK(uslab_magazine_count(m) == 1 && m->flushes == 1, "capacity 1 flushes one");
	uslab_magazine_destroy(m);
	check_all_back(c, "capacity 1");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_bulk(void)
{
	struct uslab_cache *c = uslab_cache_create("mag-bulk", 96, NULL, 0);
	struct uslab_magazine *m = uslab_magazine_create(c, 64, 16);
	void *p[300], *q[300];
	size_t sizes[] = { 1, 5, 16, 40, 63, 64, 65, 100, 300 };
	unsigned long r0, f0;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		unsigned int before = uslab_magazine_count(m);

		CHECK(uslab_magazine_alloc_bulk(m, n, p) == n, "alloc_bulk(%zu)", n);
		check_distinct(c, n, p);
		for (size_t i = 0; i < n; i++)
			memcpy(p[i], &p[i], sizeof(void *));
		if (n <= before)
			CHECK(uslab_magazine_count(m) == before - n, "served from the magazine");
		for (size_t i = 0; i < n; i++)
			CHECK(memcmp(p[i], &p[i], sizeof(void *)) == 0, "stamp %zu of %zu", i, n);
		memcpy(q, p, n * sizeof(void *));
		p[n / 2] = NULL; /* a hole: skipped */
		uslab_magazine_free_bulk(m, n, p);
		for (size_t i = 0; i < n; i++)
			CHECK(p[i] == NULL, "entry %zu cleared", i);
		CHECK(uslab_magazine_count(m) <= m->capacity, "count within capacity");
		uslab_magazine_free(m, q[n / 2]);
	}
	/* A shortfall that fits: one bulk alloc of the shortfall plus a refill. */
	uslab_magazine_flush(m);
	r0 = m->refills;
	CHECK(uslab_magazine_alloc_bulk(m, 10, p) == 10 && m->refills == r0 + 1 &&
		      uslab_magazine_count(m) == 16,
	      "10 from an empty magazine: one refill, 16 left (%u)", uslab_magazine_count(m));
	uslab_magazine_free_bulk(m, 10, p);
	uslab_magazine_flush(m);
	/* More than the capacity: straight into the array, one bulk alloc. */
	r0 = m->refills;
	CHECK(uslab_magazine_alloc_bulk(m, 100, p) == 100 && m->refills == r0 + 1 &&
		      uslab_magazine_count(m) == 0,
	      "100 from an empty magazine of 64: one bulk alloc, nothing kept (%u)",
	      uslab_magazine_count(m));
	CHECK(uslab_magazine_alloc_bulk(m, 60, q) == 60 && m->refills == r0 + 2 &&
		      uslab_magazine_count(m) == 0,
	      "a refill's worth or more goes straight into the array (%u left)",
	      uslab_magazine_count(m));
	uslab_magazine_flush(m);
	uslab_magazine_free_bulk(m, 60, q);
	CHECK(uslab_magazine_count(m) == 60, "60 fit");
	/* Overflow of a bulk free: the older half goes back first, one call. */
	f0 = m->flushes;
	uslab_magazine_free_bulk(m, 20, p);
	CHECK(m->flushes == f0 + 1 && uslab_magazine_count(m) == 48, "flush half then push: %u",
	      uslab_magazine_count(m));
	/* Room 16, 32 to flush, 80 to take: 64 go straight back. */
	uslab_magazine_free_bulk(m, 80, p + 20);
	CHECK(m->flushes == f0 + 2 && uslab_magazine_count(m) == 64, "excess straight back: %u",
	      uslab_magazine_count(m));
	uslab_magazine_destroy(m);
	check_all_back(c, "bulk");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_flush_destroy(void)
{
	struct uslab_cache *c = uslab_cache_create("mag-destroy", 200, NULL, 0);
	struct uslab_magazine *m[4];
	struct uslab_cache_stats st;
	void *p[1000];

	for (int i = 0; i < 4; i++)
		m[i] = uslab_magazine_create(c, 16 << i, 0);
	for (int r = 0; r < 10; r++) {
		for (int i = 0; i < 1000; i++)
			CHECK((p[i] = uslab_magazine_alloc(m[i % 4])) != NULL, "alloc");
		for (int i = 0; i < 1000; i++)
			uslab_magazine_free(m[(i + r) % 4], p[i]);
	}
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs > 0, "objects resting in magazines are active: %lu", st.active_objs);
	uslab_magazine_flush(m[0]);
	CHECK(uslab_magazine_count(m[0]) == 0, "flushed");
	CHECK(uslab_cache_destroy(c) == -EBUSY, "objects in a magazine keep the cache busy");
	for (int i = 0; i < 4; i++)
		uslab_magazine_destroy(m[i]);
	check_all_back(c, "destroy");
	CHECK(uslab_cache_destroy(c) == 0, "destroy after the magazines");
}

static void test_prefill(void)
{
	struct uslab_cache *c = uslab_cache_create("mag-prefill", 512, NULL, 0);
	struct uslab_magazine *m;
	void *p[300];

	for (unsigned int n = 0; n <= 300; n += 75) {
		m = uslab_magazine_prefill(c, n);
		CHECK(m && uslab_magazine_count(m) >= n, "prefill(%u) holds %u", n,
		      m ? uslab_magazine_count(m) : 0);
		CHECK(m->capacity >= 2 * n && m->capacity >= USLAB_MAGAZINE_CAPACITY,
		      "capacity %u for %u", m->capacity, n);
		CHECK(m->refills == (n ? 1u : 0u), "one bulk allocation");
		for (unsigned int i = 0; i < n; i++)
			CHECK((p[i] = uslab_magazine_alloc(m)) != NULL, "reserved object %u", i);
		CHECK(m->refills == (n ? 1u : 0u), "the reserve served %u without a refill", n);
		check_distinct(c, n, p);
		for (unsigned int i = 0; i < n / 2; i++)
			uslab_magazine_free(m, p[i]);
		CHECK(uslab_magazine_fill(m, n) == 0 && uslab_magazine_count(m) >= n, "fill(%u)",
		      n);
		CHECK(uslab_magazine_fill(m, n / 2) == 0, "fill below the count does nothing");
		uslab_cache_free_bulk(c, n - n / 2, p + n / 2);
		uslab_magazine_destroy(m);
	}
	check_all_back(c, "prefill");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* Out of memory: prefill and fill fail with nothing kept. */
static void oom_child(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("mag-oom", 64 << 10, NULL, 0);
	struct uslab_magazine *m = uslab_magazine_create(c, 200000, 0);
	struct uslab_cache_stats st;
	struct rlimit rl;
	unsigned long vm = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	(void)arg;
	if (!m || !f || fscanf(f, "%lu", &vm) != 1)
		_exit(2);
	fclose(f);
	uslab_magazine_free(m, uslab_magazine_alloc(m));
	rl.rlim_cur = rl.rlim_max = vm * 4096 + (256ul << 20);
	if (setrlimit(RLIMIT_AS, &rl))
		_exit(3);
	errno = 0;
	if (uslab_magazine_prefill(c, 100000) || errno != ENOMEM)
		_exit(4);
	if (uslab_magazine_fill(m, 100000) != -ENOMEM || uslab_magazine_count(m) != 16)
		_exit(5);
	uslab_magazine_destroy(m);
	uslab_thread_flush();
	uslab_cache_shrink(c);
	uslab_cache_stats(c, &st);
	_exit(st.active_objs == 0 && uslab_cache_destroy(c) == 0 ? 0 : 6);
}

static void test_out_of_memory(void)
{
	check_oom_child(oom_child, "prefill/fill out of memory: ENOMEM, nothing kept");
}

static void test_free_batch(void)
{
	struct uslab_cache *c[3];
	struct uslab_free_batch b;
	void *p[1000];
	uint64_t f0;

	for (int k = 0; k < 3; k++)
		c[k] = uslab_cache_create("mag-batch", 32 + 100 * (size_t)k, NULL, 0);
	/* One cache: a bulk free per 64 objects, the tail at the flush. */
	CHECK(uslab_cache_alloc_bulk(c[0], 1000, p) == 1000, "alloc");
	f0 = stat_of(c[0], USLAB_STAT_FREE_BULK);
	uslab_free_batch_init(&b, c[0]);
	for (int i = 0; i < 1000; i++) {
		uslab_free_batch_add(&b, p[i]);
		uslab_free_batch_add(&b, NULL);
		CHECK(b.n == (unsigned int)(i + 1) % USLAB_FREE_BATCH_SIZE, "waiting %u after %d",
		      b.n, i + 1);
	}
	CHECK(stat_of(c[0], USLAB_STAT_FREE_BULK) - f0 == 1000 / USLAB_FREE_BATCH_SIZE,
	      "one bulk free per full batch");
	uslab_free_batch_flush(&b);
	CHECK(b.n == 0 && stat_of(c[0], USLAB_STAT_FREE_BULK) - f0 == 1000 / 64 + 1,
	      "the tail in one more");
	uslab_free_batch_flush(&b);
	CHECK(stat_of(c[0], USLAB_STAT_FREE_BULK) - f0 == 1000 / 64 + 1, "an empty flush is free");
	check_all_back(c[0], "free batch, one cache");

	/* Mixed caches through a NULL cache. */
	for (int i = 0; i < 1000; i++)
		p[i] = uslab_cache_alloc(c[i % 3]);
	uslab_free_batch_init(&b, NULL);
	for (int i = 0; i < 1000; i++)
		uslab_free_batch_add(&b, p[i]);
	uslab_free_batch_flush(&b);
	for (int k = 0; k < 3; k++) {
		check_all_back(c[k], "free batch, mixed caches");
		CHECK(uslab_cache_destroy(c[k]) == 0, "destroy");
	}
}

/* ---------------------------------------------- RX and TX on two threads */

#define RING 256
#define PACKETS 200000
#define OBJ 256

static struct uslab_cache *xc;

/* CHECK for the worker threads: counted per thread, added up after the join. */
static _Atomic unsigned long thread_checks;
static __thread unsigned long my_checks;
#define TCHECK(cond, ...) CHECK_COUNTED(my_checks, cond, __VA_ARGS__)
static struct {
	_Alignas(64) _Atomic size_t head;
	_Alignas(64) _Atomic size_t tail;
	_Alignas(64) uint64_t *slot[RING];
} ring;

static void stamp(uint64_t *o, uint64_t seq)
{
	for (size_t i = 0; i < OBJ / 8; i++)
		o[i] = seq * 0x9e3779b97f4a7c15ull + i;
}

static void *rx(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(xc, 0, 0);
	size_t head = 0;

	(void)arg;
	for (uint64_t seq = 0; seq < PACKETS; seq += 32) {
		void *burst[32];

		if (seq % 64) {
			TCHECK(uslab_magazine_alloc_bulk(m, 32, burst) == 32, "rx bulk");
		} else {
			for (int i = 0; i < 32; i++)
				TCHECK((burst[i] = uslab_magazine_alloc(m)) != NULL, "rx alloc");
		}
		for (int i = 0; i < 32; i++) {
			stamp(burst[i], seq + (uint64_t)i);
			while (head - atomic_load_explicit(&ring.tail, memory_order_acquire) ==
			       RING)
				;
			ring.slot[head % RING] = burst[i];
			atomic_store_explicit(&ring.head, ++head, memory_order_release);
		}
	}
	TCHECK(m->flushes == 0, "rx only allocates: never flushes");
	uslab_magazine_destroy(m);
	thread_checks += my_checks;
	return NULL;
}

static void *tx(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(xc, 0, 0);
	struct uslab_free_batch b;
	size_t tail = 0;

	(void)arg;
	uslab_free_batch_init(&b, xc);
	for (uint64_t seq = 0; seq < PACKETS; seq++) {
		uint64_t *o;

		while (atomic_load_explicit(&ring.head, memory_order_acquire) == tail)
			;
		o = ring.slot[tail % RING];
		atomic_store_explicit(&ring.tail, ++tail, memory_order_release);
		for (size_t i = 0; i < OBJ / 8; i++)
			TCHECK(o[i] == seq * 0x9e3779b97f4a7c15ull + i,
			       "packet %llu word %zu intact on the tx side",
			       (unsigned long long)seq, i);
		if (seq % 3)
			uslab_magazine_free(m, o);
		else
			uslab_free_batch_add(&b, o);
	}
	uslab_free_batch_flush(&b);
	TCHECK(m->refills == 0 && m->flushes > 0, "tx only frees: half flushes only");
	uslab_magazine_destroy(m);
	thread_checks += my_checks;
	return NULL;
}

/* A magazine handed from this thread to another and back. */
static struct uslab_magazine *handed;

static void *borrower(void *arg)
{
	void *p[100];

	(void)arg;
	for (int i = 0; i < 100; i++) {
		p[i] = uslab_magazine_alloc(handed);
		/* (after the first word: the free key's, <uslab/inline/priv.h>) */
		TCHECK(p[i] && memcmp((char *)p[i] + 8, "handed", 7) == 0,
		       "object %d kept its contents", i);
		stamp(p[i], (uint64_t)i);
	}
	for (int i = 0; i < 100; i++)
		uslab_magazine_free(handed, p[i]);
	thread_checks += my_checks;
	return NULL;
}

static void test_two_threads(void)
{
	pthread_t r, t;
	void *p[100];

	xc = uslab_cache_create("mag-rxtx", OBJ, NULL, 0);
	pthread_create(&r, NULL, rx, NULL);
	pthread_create(&t, NULL, tx, NULL);
	pthread_join(r, NULL);
	pthread_join(t, NULL);
	CHECK(atomic_load(&ring.head) == PACKETS && atomic_load(&ring.tail) == PACKETS,
	      "every packet went through");
	check_all_back(xc, "rx/tx");

	handed = uslab_magazine_prefill(xc, 100);
	for (int i = 0; i < 100; i++)
		p[i] = uslab_magazine_alloc(handed);
	for (int i = 0; i < 100; i++) {
		memcpy((char *)p[i] + 8, "handed", 7);
		uslab_magazine_free(handed, p[i]);
	}
	pthread_create(&t, NULL, borrower, NULL);
	pthread_join(t, NULL);
	for (int i = 0; i < 100; i++) {
		p[i] = uslab_magazine_alloc(handed);
		CHECK(p[i] && ((uint64_t *)p[i])[1] ==
				      (uint64_t)(99 - i) * 0x9e3779b97f4a7c15ull + 1,
		      "handed back with the borrower's stamps (%d)", i);
	}
	uslab_magazine_free_bulk(handed, 100, p);
	uslab_magazine_destroy(handed);
	check_all_back(xc, "handed over");
	CHECK(uslab_cache_destroy(xc) == 0, "destroy");
	test_checks += thread_checks;
}

/*
 * Two threads at once on one magazine (against its contract): the child
 * must stop with a "uslab: BUG" line, never a bare SIGSEGV, a hang or a
 * silent exit (issue 22 item 7: SIGSEGV with no message in 13 of 20 runs).
 * Each run in a child with a time limit; the threads pop and push bursts
 * of singles and bulk calls across the refill and half-flush points, and
 * write to each object (before the fix 9 of 20 runs ended in SIGSEGV so,
 * 1 of 20 without the writes); not under ASan, where an object a race
 * handed to both threads is reported as use-after-poison in this test,
 * before the magazine's report.
 */
#define RACE_RUNS 20

static struct uslab_magazine *raced;
static pthread_barrier_t race_start;

static void *racer(void *arg)
{
	uint64_t seed = (uintptr_t)arg;
	void *p[48];

	pthread_barrier_wait(&race_start);
	for (long round = 0; round < 2000000; round++) {
		unsigned int k = 1 + (unsigned int)(rnd_next(&seed) % 48);

		if (round & 1) {
			if (uslab_magazine_alloc_bulk(raced, k, p) != k)
				continue;
		} else {
			for (unsigned int i = 0; i < k; i++)
				p[i] = uslab_magazine_alloc(raced);
		}
#ifndef __SANITIZE_ADDRESS__
		for (unsigned int i = 0; i < k; i++) {
			if (p[i])
				*(volatile char *)p[i] = 1;
		}
#endif
		if (round & 2) {
			uslab_magazine_free_bulk(raced, k, p);
		} else {
			for (unsigned int i = 0; i < k; i++)
				uslab_magazine_free(raced, p[i]);
		}
	}
	return NULL;
}

static void race_child(void *arg)
{
	/* Keyed: an object the race hands out twice is found when freed twice. */
	struct uslab_cache *c = uslab_cache_create("raced", 64, NULL, USLAB_FREE_KEY);
	pthread_t t[2];

	alarm(60); /* a hang ends as SIGALRM, reported below */
	raced = uslab_magazine_create(c, 64, 16);
	pthread_barrier_init(&race_start, NULL, 2);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, racer, (void *)(uintptr_t)(arg ? 7 + i : 99 + i));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	fprintf(stderr, "two threads on one magazine, not reported\n");
}

static void test_two_threads_at_once(void)
{
	static char err[1 << 20];

#if defined(__SANITIZE_THREAD__)
	/*
	 * A forked child that starts threads: TSan refuses it when the parent
	 * had another thread at the fork (uslab's background threads, started
	 * by the tests before), and with die_after_fork=0 its runtime fails
	 * in the child now and then ("dup thread with used id"). The race is
	 * a deliberate one; the release and ASan builds run it.
	 */
	printf("   (skipped under ThreadSanitizer: threads in a forked child)\n");
	return;
#endif

	for (int run = 0; run < RACE_RUNS; run++) {
		int status = run_child(race_child, (void *)(uintptr_t)(run & 1), err, sizeof(err));

		/* Or an object the race handed out twice, freed twice: the free key's report. */
		CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
			      (strstr(err,
				      "uslab: BUG raced: magazine used by two threads at once") ||
			       strstr(err,
				      "uslab: BUG raced: double free (the object carries the free key")),
		      "run %d of %d: status %#x (signal %d), %zu bytes of stderr, the last:\n%s",
		      run + 1, RACE_RUNS, status, WIFSIGNALED(status) ? WTERMSIG(status) : 0,
		      strlen(err), err + (strlen(err) > 4096 ? strlen(err) - 4096 : 0));
	}
}

int main(void)
{
	printf("%s\n",
#ifdef USLAB_NO_INLINE
	       "through the library's functions"
#else
	       "inline fast paths"
#endif
	);
	RUN(test_defaults_and_errors);
	RUN(test_policy);
	RUN(test_bulk);
	RUN(test_flush_destroy);
	RUN(test_prefill);
	RUN(test_out_of_memory);
	RUN(test_free_batch);
	RUN(test_two_threads);
	RUN(test_two_threads_at_once);
	return 0;
}
