// SPDX-License-Identifier: MIT
/*
 * test_os.c - os.c, the page heap: slabs are naturally aligned, the
 * registry maps every byte of a live slab to its descriptor and nothing
 * else, freed pages are retained and serve slabs of any order and large
 * objects, the decay thread purges them with no further call, idle arenas
 * are released; large objects resize in place and huge ones by mremap;
 * frees beyond the retain budget purge a batch; os_purge() returns
 * everything; concurrent purges, arena releases and reuse never hand out
 * a page twice.
 */
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "os_heap.h" /* os_lock, os_fig */
#include "../test.h"

static struct uslab_cache fake; /* only its address is used */

/* Pages taken again are resident, unless TSan's build maps them afresh (os.c tsan_forget). */
#if defined(__SANITIZE_THREAD__)
#define REUSED_DIRTY(s) ((s)->zeroed)
#else
#define REUSED_DIRTY(s) (!(s)->zeroed)
#endif

static void test_alignment_and_lookup(void)
{
	for (unsigned int order = 0; order <= SLAB_MAX_ORDER; order += 3) {
		size_t size = PAGE_SIZE << order;
		struct slab *s = os_slab_alloc(order, 0), *t = os_slab_alloc(order, 0);

		CHECK(s && t && s != t, "two slabs of order %u", order);
		CHECK((uintptr_t)s->base % size == 0, "order %u naturally aligned", order);
		CHECK(s->order == order && s->state == SLAB_NEW, "descriptor initialised");
		CHECK(os_slab_lookup(s->base) == NULL, "not live before a cache owns it");
		s->cache = &fake;
		os_slab_publish(s);
		CHECK(os_slab_lookup(s->base) == s, "first byte");
		CHECK(os_slab_lookup(s->base + size - 1) == s, "last byte");
		CHECK(os_slab_lookup(s->base + size / 2) == s, "middle");
		CHECK(os_slab_lookup(s->base - 1) != s, "byte before");
		s->base[0] = 1;
		s->base[size - 1] = 2;
		s->cache = NULL;
		os_slab_free(s);
		CHECK(os_slab_lookup(s->base + size - 1) == NULL, "its pages are free");
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
	struct slab *s = os_slab_alloc(10, 0); /* 4 MiB */
	char *base;
	long r0, r1, r2;

	CHECK(s, "alloc order 10");
	r0 = rss_bytes();
	memset(s->base, 0x77, PAGE_SIZE << 10);
	r1 = rss_bytes();
	os_slab_free(s);
	CHECK(os_dirty_bytes() >= 4ul << 20, "a freed slab's pages are retained for reuse");
	CHECK(rss_bytes() >= r1 - (64 << 10), "still resident");
	s = os_slab_alloc(10, 0);
	base = s->base;
#if !defined(__SANITIZE_THREAD__) /* (TSan builds map fresh pages: os.c tsan_forget) */
	CHECK(s->base[0] == 0x77, "the retained slab comes back first, warm");
	CHECK(resident_pages(base, PAGE_SIZE << 10) == 1024, "all 1024 pages resident");
#endif
	os_slab_free(s);
	os_purge();
	CHECK(os_dirty_bytes() == 0, "purge returns everything");
	CHECK(resident_pages(base, PAGE_SIZE << 10) == 0, "no page of the slab resident");
	r2 = rss_bytes();
	/* (sanitizer runtimes allocate meanwhile: allow them 64 KiB) */
	CHECK(r1 - r0 >= (4l << 20) - (64 << 10), "touching 4 MiB is resident: %ld", r1 - r0);
	CHECK(r1 - r2 >= (4l << 20) - (64 << 10) - SHADOW_ALLOWANCE(4l << 20),
	      "purge gives it back: %ld", r1 - r2);
	s = os_slab_alloc(10, 0);
	CHECK(s->base[0] == 0 && s->base[12345] == 0, "reused memory reads as zero");
	os_slab_free(s);
}

static void test_arena_release(void)
{
	/* Order 12 slabs are 16 MiB: four per 64 MiB arena. */
	struct slab *s[9];
	size_t before = os_arena_count();

	for (int i = 0; i < 9; i++) {
		s[i] = os_slab_alloc(12, 0);
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

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* Retained pages go back by the decay thread, with no further call. */
static void test_decay_thread(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	struct slab *s;
	char *base;
	int waited = 0;

	os_purge();
	usl_opt.purge_delay_ms = 10;
	s = os_slab_alloc(4, 0);
	base = s->base;
	memset(base, 1, PAGE_SIZE << 4);
	os_slab_free(s);
	CHECK(os_dirty_bytes() == PAGE_SIZE << 4, "retained");
	/* Demand: the next ticks keep some pages (a kept run, then the rest once it ages out). */
	s = os_slab_alloc(0, 0);
	os_slab_free(s);
	os_kick();
	CHECK(os_decay_running(), "the decay thread started");
	while (os_dirty_bytes() && waited < 5000) {
		sleep_ms(5);
		waited += 5;
	}
	CHECK(os_dirty_bytes() == 0, "purged by the thread alone in %d ms", waited);
	CHECK(resident_pages(base, PAGE_SIZE << 4) == 0, "its pages went back");
	while (os_decay_running() && waited < 10000) {
		sleep_ms(5);
		waited += 5;
	}
	CHECK(!os_decay_running(), "the thread exits with nothing retained");
	usl_opt.purge_delay_ms = delay;
}

/*
 * The decay keeps the recent demand's worth of old pages (the lowest) and
 * purges the rest, across separate runs, in one step (a kept page skipped
 * again by every scan; a keep smaller than the runs once made it spin).
 */
#define KEEP_RUNS 6

static void test_decay_keep(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	struct slab *t[2 * KEEP_RUNS], *u;
	usl_opt.purge_delay_ms = 60000; /* no decay thread: the steps are this test's */
	os_purge();
	for (int i = 0; i < 2 * KEEP_RUNS; i++)
		t[i] = os_slab_alloc(0, 0);
	for (int i = 0; i < 10; i++)
		os_decay_step(SIZE_MAX); /* the demand of the allocations above ages out */
	for (int i = 0; i < 2 * KEEP_RUNS; i += 2)
		os_slab_free(t[i]); /* KEEP_RUNS runs of one page (the odd ones between) */
	CHECK(os_dirty_bytes() == KEEP_RUNS * PAGE_SIZE, "retained");
	os_decay_step(SIZE_MAX); /* young when picked: kept; aged */
	CHECK(os_dirty_bytes() == KEEP_RUNS * PAGE_SIZE, "young pages are not purged");
	u = os_slab_alloc(0,
			  0); /* a demand of one page: the lowest dirty one, freed again (young) */
	CHECK(u == t[0], "the lowest free page is taken first");
	os_slab_free(u);
	os_decay_step(SIZE_MAX);
	CHECK(os_dirty_bytes() == 2 * PAGE_SIZE,
	      "the young page and one kept page (the demand) stay: %zu bytes", os_dirty_bytes());
	for (int i = 0; i < 10; i++)
		os_decay_step(SIZE_MAX);
	CHECK(os_dirty_bytes() == 0, "all purged once the demand ages out");
	for (int i = 1; i < 2 * KEEP_RUNS; i += 2)
		os_slab_free(t[i]);
	os_purge();
	usl_opt.purge_delay_ms = delay;
}

/*
 * A decay tick scans the heap's bitmaps a word (64 pages) at a time under
 * os_lock, also where it keeps pages: a walk page by page held the lock
 * that every slab free and allocation takes in proportion to what is
 * retained, every tick (issue 35 item 9; design.md, "Nothing per page
 * under the lock"). Counted (the words examined), not timed.
 */
#define SCAN_PAGES (2ul << 12)

static void test_decay_scan_by_words(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	struct slab *big[2];
	uint64_t words = UINT64_MAX;

	/* A demand window of 20 ticks; no decay thread (nothing here kicks one): the steps are this test's. */
	usl_opt.purge_delay_ms = 100;
	os_purge();
	for (int i = 0; i < 2; i++)
		big[i] = os_slab_alloc(12, 0); /* 2 x 16 MiB: this tick's demand */
	CHECK(big[0] && big[1], "two slabs of order 12");
	for (int i = 0; i < 2; i++)
		os_slab_free(big[i]);
	os_decay_step(SIZE_MAX); /* young: kept, aged */
	/* Kept (the demand), old: the tick skips them all. A concurrent tick may add its own scan. */
	for (int round = 0; round < 3; round++) {
		uint64_t before, after;

		ulock_lock(&os_lock);
		before = os_fig.pick_words;
		ulock_unlock(&os_lock);
		os_decay_step(SIZE_MAX);
		ulock_lock(&os_lock);
		after = os_fig.pick_words;
		ulock_unlock(&os_lock);
		if (after - before < words)
			words = after - before;
	}
	CHECK(os_dirty_bytes() == SCAN_PAGES * PAGE_SIZE, "the demand's pages are kept: %zu bytes",
	      os_dirty_bytes());
	CHECK(words > 0 && words <= SCAN_PAGES / 8,
	      "a tick over %lu kept pages examined %llu words under os_lock", SCAN_PAGES,
	      (unsigned long long)words);
	os_purge();
	usl_opt.purge_delay_ms = delay;
}

/*
 * A large object's free clears its tail descriptors (one line per page)
 * before it takes os_lock: seen while this thread holds the lock and the
 * free waits for it (the futex word says a waiter sleeps). Not timed.
 */
struct tails_arg {
	struct slab *s;
};

static void *tails_free(void *arg)
{
	os_slab_free(((struct tails_arg *)arg)->s);
	return NULL;
}

static void test_tails_outside_lock(void)
{
	const size_t pages = 64;
	struct slab *s = os_large_alloc(pages * PAGE_SIZE, PAGE_SIZE, 0);
	struct tails_arg arg = { s };
	size_t set = 0;
	pthread_t th;

	CHECK(s && s->large_size == pages * PAGE_SIZE, "a large object of %zu pages", pages);
	__atomic_store_n(&s->cache, &fake, __ATOMIC_RELEASE);
	os_slab_publish(s);
	for (size_t t = 1; t < pages; t++)
		set += __atomic_load_n(&s[t].cache, __ATOMIC_ACQUIRE) == &fake;
	CHECK(set == pages - 1, "its tails name the owner");
	__atomic_store_n(&s->cache, NULL, __ATOMIC_RELEASE);
	ulock_lock(&os_lock);
	CHECK(pthread_create(&th, NULL, tails_free, &arg) == 0, "thread");
	while (__atomic_load_n(&os_lock.v, __ATOMIC_ACQUIRE) != 2)
		sched_yield(); /* until the free sleeps on the lock */
	set = 0;
	for (size_t t = 1; t < pages; t++)
		set += __atomic_load_n(&s[t].cache, __ATOMIC_ACQUIRE) != NULL;
	CHECK(set == 0, "%zu of %zu tails still named the owner when the free took os_lock", set,
	      pages - 1);
	ulock_unlock(&os_lock);
	pthread_join(th, NULL);
	CHECK(os_slab_lookup(s->base + PAGE_SIZE) == NULL, "its pages are free");
}

/* A freed slab's pages serve slabs of other orders and large objects. */
static void test_any_order(void)
{
	unsigned int delay = usl_opt.purge_delay_ms;
	struct uslab_heap_stats a, b;
	struct slab *big, *small[8], *large;
	char *lo, *hi;

	os_purge();
	usl_opt.purge_delay_ms = 60000; /* nothing purged meanwhile */
	big = os_slab_alloc(12, 0);	/* 16 MiB */
	CHECK(big, "order 12");
	lo = big->base;
	hi = lo + (PAGE_SIZE << 12);
	memset(lo, 0x5a, PAGE_SIZE << 12);
	os_slab_free(big);
	os_heap_stats(&a);
	for (int i = 0; i < 8; i++) {
		small[i] = os_slab_alloc(i % 4, 0);
		CHECK(small[i] && small[i]->base >= lo && small[i]->base < hi &&
			      REUSED_DIRTY(small[i]),
		      "order %d slab %d from the freed slab's pages, dirty", i % 4, i);
		CHECK((uintptr_t)small[i]->base % (PAGE_SIZE << (i % 4)) == 0, "aligned");
	}
	large = os_large_alloc(9 * PAGE_SIZE, PAGE_SIZE, 0);
	CHECK(large && large->base >= lo && large->base < hi && large->large_size == 9 * PAGE_SIZE,
	      "a large object of 9 pages from them too");
	os_heap_stats(&b);
	CHECK(b.mapped_bytes == a.mapped_bytes && b.arenas == a.arenas, "nothing new mapped");
	CHECK(b.used_bytes - a.used_bytes == (1 + 2 + 4 + 8) * 2 * PAGE_SIZE + 9 * PAGE_SIZE,
	      "exactly the pages asked for: %llu",
	      (unsigned long long)(b.used_bytes - a.used_bytes));
	for (int i = 0; i < 8; i++)
		os_slab_free(small[i]);
	os_slab_free(large);
	os_heap_stats(&a);
	CHECK(a.used_bytes == b.used_bytes - ((1 + 2 + 4 + 8) * 2 + 9) * PAGE_SIZE, "all back");
	usl_opt.purge_delay_ms = delay;
	os_purge();
	os_heap_stats(&a);
	CHECK(a.retained_bytes == 0, "purged");
}

/* Large objects grow into the free pages after them, shrink in place, and huge ones by mremap. */
static void test_large_resize(void)
{
	struct uslab_heap_stats a, b;
	struct slab *s, *t;
	char *base;

	os_purge();
	os_heap_stats(&a);
	s = os_large_alloc(10 * PAGE_SIZE, PAGE_SIZE, 0);
	CHECK(s, "large");
	s->cache = &fake;
	os_slab_publish(s);
	base = s->base;
	memset(base, 3, 10 * PAGE_SIZE);
	/* Grow while the pages after it are free (the lowest block of 16 was taken: 6 free after). */
	if (os_large_resize(s, 16 * PAGE_SIZE)) {
		s->large_size = 16 * PAGE_SIZE;
		CHECK(s->base == base && base[10 * PAGE_SIZE - 1] == 3, "in place, contents kept");
		CHECK(os_slab_lookup(base + 15 * PAGE_SIZE) == s, "its new pages are its own");
		os_heap_stats(&b);
		CHECK(b.grown_in_place == a.grown_in_place + 1, "counted");
	}
	t = os_slab_alloc(0, 0);
	CHECK(t, "a page");
	CHECK(os_large_resize(s, 4 * PAGE_SIZE), "a shrink is always in place");
	s->large_size = 4 * PAGE_SIZE;
	CHECK(os_slab_lookup(base + 3 * PAGE_SIZE) == s &&
		      os_slab_lookup(base + 4 * PAGE_SIZE) != s,
	      "its tail is not its own any more");
	s->cache = NULL;
	os_slab_free(s);
	os_slab_free(t);

	/* Huge: 40 MiB, grown to 200 MiB by mremap, contents kept. */
	s = os_large_alloc(40ul << 20, PAGE_SIZE, 0);
	CHECK(s, "huge");
	s->cache = &fake;
	os_slab_publish(s);
	memset(s->base, 7, 40ul << 20);
	CHECK(os_large_resize(s, 200ul << 20), "huge grows");
	s->large_size = 200ul << 20;
	CHECK(s->base[0] == 7 && s->base[(40ul << 20) - 1] == 7, "contents kept");
	CHECK(os_slab_lookup(s->base + (199ul << 20)) == s, "every granule maps to it");
	os_heap_stats(&b);
	CHECK(b.mremap_calls > a.mremap_calls && b.huge_objects == a.huge_objects + 1, "mremap");
	CHECK(os_large_resize(s, 50ul << 20), "huge shrinks");
	s->large_size = 50ul << 20;
	CHECK(s->base[(40ul << 20) - 1] == 7, "kept");
	base = s->base;
	s->cache = NULL;
	os_slab_free(s);
	CHECK(os_slab_lookup(base) == NULL, "unmapped");
	os_heap_stats(&b);
	CHECK(b.huge_objects == a.huge_objects && b.mapped_bytes <= a.mapped_bytes + (64ul << 20),
	      "gone");
}

#define NDIRTY 20

/* Beyond USLAB_RETAIN_KB the free itself purges a bounded batch. */
static void test_retain_budget(void)
{
	unsigned int delay = usl_opt.purge_delay_ms, retain = usl_opt.retain_kb;
	size_t slab = PAGE_SIZE << 2;
	struct slab *s[NDIRTY];

	os_purge();
	usl_opt.purge_delay_ms = 60000; /* only the budget purges */
	usl_opt.retain_kb = 4 * slab / 1024;
	for (int i = 0; i < NDIRTY; i++)
		s[i] = os_slab_alloc(2, 0);
	for (int i = 0; i < NDIRTY; i++) {
		os_slab_free(s[i]);
		CHECK(os_dirty_bytes() <= 4 * slab, "free %d: within the budget: %zu", i,
		      os_dirty_bytes());
	}
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
			s[i][j] = os_slab_alloc(ord[i], 0);
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
		struct slab *s = os_slab_alloc(order, 0);
		uintptr_t stamp = id << 32 | (uintptr_t)i;

		CHECK_COUNTED(checks, s && s->state == SLAB_NEW, "a new slab");
		__atomic_store_n(&s->cache, &fake, __ATOMIC_RELEASE);
		os_slab_publish(s);
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
	RUN(test_decay_thread);
	RUN(test_decay_keep);
	RUN(test_decay_scan_by_words);
	RUN(test_tails_outside_lock);
	RUN(test_any_order);
	RUN(test_large_resize);
	RUN(test_retain_budget);
	RUN(test_purge_everything);
	RUN(test_concurrent_purge);
	return 0;
}
