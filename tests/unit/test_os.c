// SPDX-License-Identifier: MIT
/*
 * test_os.c - os.c: slabs are naturally aligned, the registry maps every
 * byte of a live slab to its descriptor and nothing else, memory goes back
 * to the OS on free, arenas of an order are released when empty; purging
 * is done by later os calls in bounded batches, within the retain budget,
 * and completely by os_purge(); concurrent purges, arena releases and
 * reuse never hand out a slot twice.
 */
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "../test.h"

static struct uslab_cache fake; /* only its address is used */

static void test_alignment_and_lookup(void)
{
	for (unsigned int order = 0; order <= SLAB_MAX_ORDER; order += 3) {
		size_t size = PAGE_SIZE << order;
		struct slab *s = os_slab_alloc(order), *t = os_slab_alloc(order);

		CHECK(s && t && s != t, "two slabs of order %u", order);
		CHECK((uintptr_t)s->base % size == 0, "order %u naturally aligned", order);
		CHECK(s->order == order && s->state == SLAB_NEW, "descriptor initialised");
		CHECK(os_slab_lookup(s->base) == NULL, "not live before a cache owns it");
		s->cache = &fake;
		CHECK(os_slab_lookup(s->base) == s, "first byte");
		CHECK(os_slab_lookup(s->base + size - 1) == s, "last byte");
		CHECK(os_slab_lookup(s->base + size / 2) == s, "middle");
		CHECK(os_slab_lookup(s->base - 1) != s, "byte before");
		s->base[0] = 1;
		s->base[size - 1] = 2;
		s->cache = NULL;
		os_slab_free(s);
		CHECK(os_slab_lookup(t->base) == NULL, "free slot of t is not live");
		os_slab_free(t);
	}
	CHECK(os_slab_lookup(NULL) == NULL && os_slab_lookup((void *)-1) == NULL,
	      "NULL and the top of the address space");
}

/* Pages of [base, base + len) resident in memory, by mincore(2). */
static size_t resident_pages(const void *base, size_t len)
{
	unsigned char vec[len / PAGE_SIZE];
	size_t n = 0;

	if (mincore((void *)base, len, vec) != 0)
		return 0; /* unmapped: nothing resident */
	for (size_t i = 0; i < len / PAGE_SIZE; i++)
		n += vec[i] & 1;
	return n;
}

/*
 * ASan poisons a freed slab, which makes its shadow (1/8 of its size)
 * resident; the process's RSS then cannot fall by the whole slab.
 */
#ifdef __SANITIZE_ADDRESS__
#define SHADOW_ALLOWANCE(len) ((long)(len) / 8)
#else
#define SHADOW_ALLOWANCE(len) 0l
#endif

static void test_memory_returned(void)
{
	struct slab *s = os_slab_alloc(10); /* 4 MiB */
	char *base;
	long r0, r1, r2;

	CHECK(s, "alloc order 10");
	r0 = rss_bytes();
	memset(s->base, 0x77, PAGE_SIZE << 10);
	r1 = rss_bytes();
	os_slab_free(s);
	CHECK(os_dirty_bytes() >= 4ul << 20, "a freed slab's pages are retained for reuse");
	CHECK(rss_bytes() >= r1 - (64 << 10), "still resident");
	s = os_slab_alloc(10);
	CHECK(s->base[0] == 0x77, "the retained slab comes back first, warm");
	base = s->base;
	CHECK(resident_pages(base, PAGE_SIZE << 10) == 1024, "all 1024 pages resident");
	os_slab_free(s);
	os_purge();
	CHECK(os_dirty_bytes() == 0, "purge returns everything");
	CHECK(resident_pages(base, PAGE_SIZE << 10) == 0, "no page of the slab resident");
	r2 = rss_bytes();
	/* (sanitizer runtimes allocate meanwhile: allow them 64 KiB) */
	CHECK(r1 - r0 >= (4l << 20) - (64 << 10), "touching 4 MiB is resident: %ld", r1 - r0);
	CHECK(r1 - r2 >= (4l << 20) - (64 << 10) - SHADOW_ALLOWANCE(4l << 20),
	      "purge gives it back: %ld", r1 - r2);
	s = os_slab_alloc(10);
	CHECK(s->base[0] == 0 && s->base[12345] == 0, "reused memory reads as zero");
	os_slab_free(s);
}

static void test_arena_release(void)
{
	/* Order 12 slabs are 16 MiB: four per 64 MiB arena. */
	struct slab *s[9];
	size_t before = os_arena_count();

	for (int i = 0; i < 9; i++) {
		s[i] = os_slab_alloc(12);
		CHECK(s[i], "alloc %d", i);
	}
	CHECK(os_arena_count() >= before + 2, "9 slabs need 3 arenas");
	for (int i = 0; i < 9; i++)
		os_slab_free(s[i]);
	os_purge();
	CHECK(os_arena_count() <= before + 1, "empty arenas unmapped but one: %zu -> %zu", before,
	      os_arena_count());
	/* A slab from a released arena's address is no longer ours. */
	CHECK(os_slab_lookup(s[0]->base) == NULL, "lookup after release");
}

/* Retained pages go back after USLAB_PURGE_DELAY_MS, on a later os call. */
static void test_purge_delay(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	struct slab *s, *t;
	struct timespec ts = { 0, 30 * 1000 * 1000 };

	usl_opt.purge_delay_ms = 10;
	s = os_slab_alloc(4);
	os_slab_free(s);
	CHECK(os_dirty_bytes() == PAGE_SIZE << 4, "retained");
	nanosleep(&ts, NULL); /* three times the delay */
	t = os_slab_alloc(5); /* any os call purges what is old */
	os_slab_free(t);
	CHECK(os_dirty_bytes() == PAGE_SIZE << 5, "the old one purged, the new one retained");
	os_purge();
	usl_opt.purge_delay_ms = delay;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

#define NDIRTY 20

/*
 * A backlog of old dirty slabs is purged by later os calls, at most
 * OS_PURGE_BATCH slabs per call, until all their pages are gone.
 */
static void test_purge_bounded_steps(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	size_t slab = PAGE_SIZE << 2, prev, calls = 0;
	struct slab *s[NDIRTY], *t;
	char *base[NDIRTY];
	long r0, r1;

	os_purge();
	usl_opt.purge_delay_ms = 60000; /* none due while they are freed */
	for (int i = 0; i < NDIRTY; i++) {
		s[i] = os_slab_alloc(2);
		CHECK(s[i], "alloc %d", i);
		base[i] = s[i]->base;
		memset(base[i], 0x5a, slab);
	}
	r0 = rss_bytes();
	for (int i = 0; i < NDIRTY; i++)
		os_slab_free(s[i]);
	CHECK(os_dirty_bytes() == NDIRTY * slab, "all %d retained: %zu", NDIRTY, os_dirty_bytes());
	usl_opt.purge_delay_ms = delay;
	sleep_ms(3 * delay); /* all of them are due now */
	prev = os_dirty_bytes();
	t = os_slab_alloc(7); /* an os call on another order */
	CHECK(t, "alloc order 7");
	calls++;
	CHECK(os_dirty_bytes() < prev, "the call purged something");
	CHECK(prev - os_dirty_bytes() <= OS_PURGE_BATCH * slab,
	      "one call purges at most %d slabs: %zu -> %zu", OS_PURGE_BATCH, prev,
	      os_dirty_bytes());
	while (os_dirty_bytes() > 0 && calls < 4 * NDIRTY) {
		/* Free the order-7 slab (retained, not due) and take it back. */
		prev = os_dirty_bytes();
		os_slab_free(t);
		t = os_slab_alloc(7);
		calls += 2;
		CHECK(os_dirty_bytes() < prev, "progress on every pair of calls");
		CHECK(prev - os_dirty_bytes() <= 2 * OS_PURGE_BATCH * slab, "bounded: %zu -> %zu",
		      prev, os_dirty_bytes());
	}
	CHECK(os_dirty_bytes() == 0, "the backlog is gone after %zu calls", calls);
	CHECK(calls <= 1 + 2 * ((NDIRTY + OS_PURGE_BATCH - 1) / OS_PURGE_BATCH),
	      "in about %d / %d calls: %zu", NDIRTY, OS_PURGE_BATCH, calls);
	for (int i = 0; i < NDIRTY; i++)
		CHECK(resident_pages(base[i], slab) == 0, "slab %d's pages returned", i);
	r1 = rss_bytes();
	/* (mincore above is exact; RSS also moves with the sanitizers' runtimes) */
	CHECK(r0 - r1 >= (long)(NDIRTY * slab) / 2, "RSS fell by the backlog: %ld of %zu", r0 - r1,
	      NDIRTY * slab);
	os_slab_free(t);
	os_purge();
}

/* Beyond USLAB_RETAIN_KB the oldest slabs go at once, a bounded batch per free. */
static void test_retain_budget(void)
{
	unsigned int delay = usl_opt.purge_delay_ms, retain = usl_opt.retain_kb;
	size_t slab = PAGE_SIZE << 2;
	struct slab *s[NDIRTY];

	os_purge();
	usl_opt.purge_delay_ms = 60000; /* only the budget purges */
	usl_opt.retain_kb = 4 * slab / 1024;
	for (int i = 0; i < NDIRTY; i++)
		s[i] = os_slab_alloc(2);
	for (int i = 0; i < NDIRTY; i++) {
		os_slab_free(s[i]);
		CHECK(os_dirty_bytes() == (i < 4 ? (size_t)(i + 1) : 4) * slab,
		      "free %d: within the budget: %zu", i, os_dirty_bytes());
	}
	CHECK(resident_pages(s[0]->base, slab) == 0, "the oldest went back");
	/* Retained slabs are reused newest first. */
	CHECK(os_slab_alloc(2) == s[NDIRTY - 1], "newest first");
	os_slab_free(s[NDIRTY - 1]);
	usl_opt.retain_kb = retain;
	usl_opt.purge_delay_ms = delay;
	os_purge();
}

/* os_purge() empties every order at once. */
static void test_purge_everything(void)
{
	static const unsigned int ord[] = { 0, 2, 5, 9, 11 };
	unsigned int delay = usl_opt.purge_delay_ms, retain = usl_opt.retain_kb;
	struct slab *s[ARRAY_SIZE(ord)][3];
	size_t total = 0;

	os_purge();
	usl_opt.purge_delay_ms = 60000; /* nothing purged before os_purge() */
	usl_opt.retain_kb = 1u << 20;
	for (size_t i = 0; i < ARRAY_SIZE(ord); i++)
		for (int j = 0; j < 3; j++) {
			s[i][j] = os_slab_alloc(ord[i]);
			CHECK(s[i][j], "alloc order %u", ord[i]);
			/* One byte per page: every page resident. */
			for (size_t k = 0; k < (PAGE_SIZE << ord[i]); k += PAGE_SIZE)
				s[i][j]->base[k] = 1;
		}
	for (size_t i = 0; i < ARRAY_SIZE(ord); i++)
		for (int j = 0; j < 3; j++) {
			os_slab_free(s[i][j]);
			total += PAGE_SIZE << ord[i];
		}
	CHECK(os_dirty_bytes() == total, "all retained: %zu of %zu", os_dirty_bytes(), total);
	os_purge();
	CHECK(os_dirty_bytes() == 0, "os_purge returns everything");
	for (size_t i = 0; i < ARRAY_SIZE(ord); i++)
		for (int j = 0; j < 3; j++)
			CHECK(resident_pages(s[i][j]->base, PAGE_SIZE << ord[i]) == 0,
			      "order %u slab %d: no page resident", ord[i], j);
	usl_opt.retain_kb = retain;
	usl_opt.purge_delay_ms = delay;
}

/*
 * Threads allocating, writing, freeing (every free purging, arenas of
 * order 12 released and mapped again) and calling os_purge(): a slot is
 * never handed out twice nor purged under its owner.
 */
#define CONC_THREADS 3
#define CONC_ITERS 300

static void *conc_worker(void *arg)
{
	uintptr_t id = (uintptr_t)arg;
	uint64_t seed = id + 1;
	unsigned long checks = 0;

	for (int i = 0; i < CONC_ITERS; i++) {
		unsigned int order =
			(rnd_next(&seed) & 1) ? 12 : (unsigned int)(rnd_next(&seed) % 4);
		size_t size = PAGE_SIZE << order;
		struct slab *s = os_slab_alloc(order);
		uintptr_t stamp = id << 32 | (uintptr_t)i;

		CHECK_COUNTED(checks, s && s->state == SLAB_NEW, "a new slab");
		__atomic_store_n(&s->cache, &fake, __ATOMIC_RELEASE);
		*(uintptr_t *)s->base = stamp;
		*(uintptr_t *)(s->base + size - sizeof(stamp)) = stamp;
		CHECK_COUNTED(checks, os_slab_lookup(s->base + size / 2) == s, "lookup");
		if (id == 0 && i % 16 == 0)
			os_purge();
		sched_yield();
		CHECK_COUNTED(checks,
			      *(uintptr_t *)s->base == stamp &&
				      *(uintptr_t *)(s->base + size - sizeof(stamp)) == stamp,
			      "slab %p still ours", (void *)s->base);
		__atomic_store_n(&s->cache, NULL, __ATOMIC_RELEASE);
		os_slab_free(s);
	}
	return (void *)checks;
}

static void test_concurrent_purge(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	pthread_t th[CONC_THREADS];

	usl_opt.purge_delay_ms = 0; /* every free purges */
	for (uintptr_t i = 0; i < CONC_THREADS; i++)
		CHECK(pthread_create(&th[i], NULL, conc_worker, (void *)i) == 0, "thread");
	for (int i = 0; i < CONC_THREADS; i++) {
		void *n;

		pthread_join(th[i], &n);
		test_checks += (uintptr_t)n;
	}
	usl_opt.purge_delay_ms = delay;
	os_purge();
	CHECK(os_dirty_bytes() == 0, "nothing left");
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(test_alignment_and_lookup);
	RUN(test_memory_returned);
	RUN(test_arena_release);
	RUN(test_purge_delay);
	RUN(test_purge_bounded_steps);
	RUN(test_retain_budget);
	RUN(test_purge_everything);
	RUN(test_concurrent_purge);
	return 0;
}
