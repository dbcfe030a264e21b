// SPDX-License-Identifier: MIT
/*
 * test_bulk.c (unit) - bulk.c: the slow paths uslab_priv_alloc_bulk_slow()
 * and uslab_priv_free_bulk_slow(), and the exported calls in front of them,
 * seen through the calling thread's pcs and the cache's counters.
 *
 *   alloc_paths        a remainder smaller than a sheaf refills main from
 *                      slabs and leaves the rest there; a larger one comes
 *                      straight from slabs (no refill); the exported call
 *                      serves from main without the slow path when it can.
 *   alloc_oom          all or nothing under RLIMIT_AS (in a child): 0,
 *                      ENOMEM, no object left in the array or lost, the
 *                      objects main held given back, through the slow
 *                      path, the exported call and a cache without sheaves.
 *   free_holes         NULL entries are skipped (main gains exactly the
 *                      non-NULL ones) and every entry is zeroed, with and
 *                      without holes.
 *   every_n            the vector copies: for every n from 1 to 140, the
 *                      exported alloc (and the inline one, n <= 16) hands
 *                      out main's top n in order; the exported free (and
 *                      the inline one) pushes them back in order, with no
 *                      hole or one at the start, the middle or each of the
 *                      last five places, skips it and zeroes every entry.
 *   free_remainder     with no room left in the sheaves or the barn, a
 *                      remainder of a sheaf or more goes straight to slabs
 *                      (FREE_GROUP, no flush); a smaller one flushes main.
 *   free_mixed_null    c == NULL (kfree_bulk): objects of three caches (one
 *                      without sheaves) interleaved: runs of a cache with
 *                      sheaves go through them, the others straight to
 *                      their slabs; the array zeroed, none lost.
 *   n_zero             n == 0 stores nothing, frees nothing, counts nothing.
 *   counted            slow-path calls count calls and objects; calls
 *                      without sheaves are not counted.
 */
#include <sys/resource.h>

#include "internal.h"
#include "../test.h"

static uint64_t ev(struct uslab_cache *c, int item)
{
	return cache_stats(c).events[item];
}

static size_t main_count(struct uslab_cache *c)
{
	struct pcs *p = pcs_of(c);

	return (size_t)(p->hot.top - p->hot.bottom);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* @p[0..n) are distinct objects of @c; stamp each with its index. */
static void check_objects(struct uslab_cache *c, void **p, size_t n)
{
	void **s = malloc(n * sizeof(void *));

	memcpy(s, p, n * sizeof(void *));
	qsort(s, n, sizeof(void *), cmp_ptr);
	for (size_t i = 0; i < n; i++) {
		CHECK(s[i] && uslab_cache_of(s[i]) == c, "entry is an object of %s", c->name);
		CHECK(!i || s[i] != s[i - 1], "object %p handed out twice", s[i]);
	}
	for (size_t i = 0; i < n; i++)
		*(size_t *)p[i] = i;
	free(s);
}

static struct uslab_cache *create(const char *name, size_t size, unsigned int cap)
{
	struct uslab_cache_args a = { .sheaf_capacity = cap };
	struct uslab_cache *c = uslab_cache_create(name, size, &a, 0);

	CHECK(c, "create %s", name);
	return c;
}

static void destroy(struct uslab_cache *c)
{
	uslab_thread_flush();
	uslab_cache_shrink(c);
	CHECK(cache_active(c) == 0, "%s: nothing lost, active %lu", c->name, cache_active(c));
	CHECK(uslab_cache_destroy(c) == 0, "destroy %s", c->name);
}

static void alloc_paths(void)
{
	struct uslab_cache *c = create("bulk-alloc", 64, 14);
	void *p[200];
	uint64_t refills;

	uslab_thread_flush();
	CHECK(c->sheaf_capacity == 14, "capacity 14");
	/* 5 < 14: main refilled from slabs, 9 left in it. */
	CHECK(uslab_priv_alloc_bulk_slow(c, 5, p) == 5, "alloc 5");
	check_objects(c, p, 5);
	CHECK(ev(c, USLAB_STAT_SHEAF_REFILL) == 1 && main_count(c) == 9,
	      "small remainder: one refill, 9 left in main (%zu)", main_count(c));
	/* 100: 9 from main, the 91 left (more than a sheaf) straight from slabs. */
	CHECK(uslab_priv_alloc_bulk_slow(c, 100, p + 5) == 100, "alloc 100");
	check_objects(c, p, 105);
	CHECK(ev(c, USLAB_STAT_SHEAF_REFILL) == 1, "large remainder: no refill");
	CHECK(main_count(c) == 0, "main emptied first (%zu left)", main_count(c));
	CHECK(cache_active(c) == 105, "active %lu: exactly what was handed out", cache_active(c));
	/* Free 10 into main, then take 7 through the exported call: from main. */
	uslab_cache_free_bulk(c, 10, p + 95);
	CHECK(main_count(c) == 10, "10 freed into main");
	uint64_t slow = ev(c, USLAB_STAT_ALLOC_BULK);

	CHECK(uslab_cache_alloc_bulk(c, 7, p + 95) == 7 && main_count(c) == 3, "7 from main");
	CHECK(ev(c, USLAB_STAT_ALLOC_BULK) == slow + 1, "served by main, counted once");
	refills = ev(c, USLAB_STAT_SHEAF_REFILL);
	/* 8 > 3 in main: the slow path (3 from main, a refill for 5). */
	CHECK(uslab_cache_alloc_bulk(c, 8, p + 102) == 8, "8");
	check_objects(c, p, 110);
	CHECK(ev(c, USLAB_STAT_SHEAF_REFILL) == refills + 1 && main_count(c) == 9,
	      "main emptied then refilled: %zu left", main_count(c));
	uslab_cache_free_bulk(c, 110, p);
	destroy(c);
}

/* In a child under RLIMIT_AS: exit 0 when every check held (exit codes name them). */
static void oom_child(void *arg)
{
	struct uslab_cache *c = create("bulk-oom", 64 << 10, 2);
	struct uslab_cache *d = create("bulk-oom-direct", 64 << 10, 1);
	enum { N = 100000 };
	void **p = calloc(N, sizeof(void *)), *keep[3];
	unsigned long vm = 0, before;
	struct rlimit rl;
	FILE *f = fopen("/proc/self/statm", "r");

	(void)arg;
	if (!f || fscanf(f, "%lu", &vm) != 1 || !p)
		_exit(2);
	fclose(f);
	if (c->sheaf_capacity != 2 || d->sheaf_capacity)
		_exit(3);
	/* State to keep: objects the program holds, and one in main. */
	if (uslab_priv_alloc_bulk_slow(c, 1, keep) != 1 ||
	    uslab_priv_alloc_bulk_slow(c, 2, keep + 1) != 2 || main_count(c) != 1)
		_exit(4);
	for (int i = 0; i < 3; i++)
		memset(keep[i], i + 1, 64 << 10);
	rl.rlim_cur = rl.rlim_max = vm * 4096 + (256ul << 20);
	if (setrlimit(RLIMIT_AS, &rl))
		_exit(5);
	before = cache_active(c);
	/* 100000 x 64 KiB = 6 GiB: cannot fit under the limit. */
	for (int way = 0; way < 3; way++) {
		struct uslab_cache *x = way == 2 ? d : c;
		unsigned long b = way == 2 ? cache_active(d) : before;
		size_t got;

		for (size_t i = 0; i < N; i++)
			p[i] = (void *)1; /* not an object */
		errno = 0;
		got = way == 0 ? uslab_priv_alloc_bulk_slow(x, N, p) :
				 uslab_cache_alloc_bulk(x, N, p);
		if (got != 0 || errno != ENOMEM)
			_exit(10 + way);
		for (size_t i = 0; i < N; i++)
			if (p[i] && p[i] != (void *)1)
				_exit(20 + way); /* an object left to the caller */
		/* Every object taken went back: main's one too (way 0). */
		if (cache_active(x) != (way == 0 ? b - 1 : b))
			_exit(30 + way);
		if (x == c && main_count(c) != 0)
			_exit(40 + way);
		if (way == 0)
			before = cache_active(c);
	}
	for (int i = 0; i < 3; i++)
		for (size_t k = 0; k < (64 << 10); k += 4096)
			if (((unsigned char *)keep[i])[k] != i + 1)
				_exit(50 + i); /* the objects held were not touched */
	/* Still usable. */
	if (uslab_cache_alloc_bulk(c, 5, p) != 5 || uslab_cache_alloc_bulk(d, 5, p + 5) != 5)
		_exit(60);
	memset(p[9], 1, 64 << 10);
	uslab_cache_free_bulk(NULL, 10, p);
	uslab_cache_free_bulk(c, 3, keep);
	uslab_thread_flush();
	uslab_cache_shrink(c);
	if (cache_active(c) || cache_active(d))
		_exit(61);
	_exit(uslab_cache_destroy(c) || uslab_cache_destroy(d) ? 62 : 0);
}

static void alloc_oom(void)
{
	check_oom_child(oom_child, "bulk alloc out of memory: all or nothing");
}

/* Move @p[i] to @q[i] where i % 3 == 0, a hole in @p. Return: the objects left. */
static size_t make_holes(void **p, void **q, size_t n)
{
	size_t live = 0;

	for (size_t i = 0; i < n; i++) {
		q[i] = i % 3 == 0 ? p[i] : NULL;
		if (q[i])
			p[i] = NULL;
		else
			live++;
	}
	return live;
}

/* Objects in the calling thread's sheaves of @c and in its barn. */
static size_t cached(struct uslab_cache *c)
{
	struct pcs *p = pcs_of(c);

	return main_count(c) + (p->spare ? p->spare->size : 0) +
	       (size_t)c->barn.nr_full * c->sheaf_capacity;
}

static void check_zeroed(void **p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		CHECK(!p[i], "entry %zu zeroed", i);
}

static void free_holes(void)
{
	struct uslab_cache *c = create("bulk-holes", 64, 126);
	enum { N = 60, BIG = 300 };
	void *p[BIG], *q[BIG];
	size_t live, m;

	uslab_thread_flush();
	/* 60 < 126: main refilled, 66 left in it, room for 60. */
	CHECK(uslab_priv_alloc_bulk_slow(c, N, p) == N && main_count(c) == 66, "alloc");
	check_objects(c, p, N);
	live = make_holes(p, q, N);
	uslab_priv_free_bulk_slow(c, N, p);
	CHECK(main_count(c) == 66 + live, "holes: main gained exactly the %zu objects (%zu)", live,
	      main_count(c) - 66);
	check_zeroed(p, N);
	/* kfree_bulk (no cache): a run of one cache goes through its sheaves too. */
	uslab_priv_free_bulk_slow(NULL, N, q);
	check_zeroed(q, N);
	CHECK(main_count(c) == 66 + N, "the others into main as well (%zu)", main_count(c));

	/* Without holes: 60 from main, 60 back. */
	CHECK(uslab_priv_alloc_bulk_slow(c, N, p) == N, "alloc");
	m = main_count(c);
	uslab_priv_free_bulk_slow(c, N, p);
	CHECK(main_count(c) == m + N, "no holes: 60 pushed");
	check_zeroed(p, N);

	/* The exported call's inline push (room in main), with holes. */
	CHECK(uslab_cache_alloc_bulk(c, 20, p) == 20, "alloc");
	m = main_count(c);
	live = make_holes(p, q, 20);
	CHECK(126 - m >= 20, "room for 20 in main");
	uslab_cache_free_bulk(c, 20, p);
	CHECK(main_count(c) == m + live, "exported, holes: main gained %zu of %zu",
	      main_count(c) - m, live);
	check_zeroed(p, 20);
	uslab_cache_free_bulk(NULL, 20, q);

	/* More than main holds, with holes: across main, the spare, the barn. */
	CHECK(uslab_priv_alloc_bulk_slow(c, BIG, p) == BIG, "alloc %d", BIG);
	check_objects(c, p, BIG);
	live = make_holes(p, q, BIG);
	uslab_priv_free_bulk_slow(NULL, BIG, q);
	uslab_priv_free_bulk_slow(c, BIG, p);
	check_zeroed(p, BIG);
	CHECK(cache_active(c) == cached(c), "active %lu: all in sheaves (%zu)", cache_active(c),
	      cached(c));
	uslab_cache_shrink(c);
	CHECK(cache_active(c) == 0, "every object freed once: active %lu", cache_active(c));
	destroy(c);
}

static void every_n(void)
{
	struct uslab_cache *c = create("bulk-every-n", 32, 254);
	enum { MAX = 140 };
	void *p[MAX + 1], *want[MAX], *reserve[MAX];
	size_t nres = MAX;
	struct pcs *pc;

	uslab_thread_flush();
	CHECK(uslab_priv_alloc_bulk_slow(c, MAX, reserve) == MAX, "reserve");
	pc = pcs_of(c);
	for (size_t n = 1; n <= MAX; n++) {
		size_t holes[] = { SIZE_MAX, 0, n / 2, n - 1, n - 2, n - 3, n - 4, n - 5 };

		for (size_t h = 0; h < sizeof(holes) / sizeof(holes[0]); h++) {
			size_t hole = holes[h], m, k = 0;
			void *held = NULL;

			if (hole != SIZE_MAX && hole >= n)
				continue;
			/* Main holds n or more (room for them back is implied). */
			while (main_count(c) < n) {
				CHECK(nres, "reserve left");
				uslab_cache_free(c, reserve[--nres]);
			}
			m = main_count(c);
			CHECK(m >= n && m < 254, "n %zu: main %zu", n, m);
			memcpy(want, pc->hot.top - n, n * sizeof(void *));
			p[n] = (void *)0x1234; /* must stay */
			/* The library's copies; n <= 16 also the inline ones, every other time. */
			if (n <= 16 && h % 2)
				CHECK(uslab_cache_alloc_bulk(c, n, p) == n, "alloc_bulk %zu", n);
			else
				CHECK((uslab_cache_alloc_bulk)(c, n, p) == n, "alloc_bulk %zu", n);
			CHECK(main_count(c) == m - n, "n %zu: from main", n);
			CHECK(!memcmp(p, want, n * sizeof(void *)),
			      "n %zu: main's top %zu, in order", n, n);
			CHECK(p[n] == (void *)0x1234, "n %zu: nothing stored past the end", n);
			if (hole != SIZE_MAX) {
				held = p[hole];
				p[hole] = NULL;
			}
			if (n <= 16 && h % 2 == 0)
				uslab_cache_free_bulk(c, n, p);
			else
				(uslab_cache_free_bulk)(c, n, p);
			check_zeroed(p, n);
			CHECK(p[n] == (void *)0x1234, "n %zu: nothing cleared past the end", n);
			for (size_t i = 0; i < n; i++)
				if (i != hole)
					want[k++] = want[i];
			CHECK(main_count(c) == m - n + k, "n %zu hole %zu: main gained %zu", n,
			      hole, k);
			CHECK(!memcmp(pc->hot.top - k, want, k * sizeof(void *)),
			      "n %zu hole %zu: pushed in order", n, hole);
			if (held)
				uslab_cache_free(c, held);
		}
	}
	while (nres)
		uslab_cache_free(c, reserve[--nres]);
	destroy(c);
}

static void free_remainder(void)
{
	unsigned int max_full = usl_opt.barn_max_full;
	struct uslab_cache *c;
	enum { N = 100, R = 10 };
	void *p[N + R];
	uint64_t groups, flushes;
	struct pcs *pc;

	usl_opt.barn_max_full = 0; /* read at creation: a barn that keeps no full sheaf */
	c = create("bulk-rest", 64, 14);
	usl_opt.barn_max_full = max_full;
	CHECK(c->barn.max_full == 0, "barn takes no full sheaf");
	uslab_thread_flush();
	CHECK(uslab_priv_alloc_bulk_slow(c, N + R, p) == N + R, "alloc");
	check_objects(c, p, N + R);
	CHECK(cache_active(c) == N + R && main_count(c) == 0, "active %lu, main empty",
	      cache_active(c));
	groups = ev(c, USLAB_STAT_FREE_GROUP);
	flushes = ev(c, USLAB_STAT_SHEAF_FLUSH);

	/* 14 into main, 14 more after parking it as spare, 72 left: to slabs. */
	uslab_priv_free_bulk_slow(c, N, p);
	pc = pcs_of(c);
	check_zeroed(p, N);
	CHECK(main_count(c) == 14 && pc->spare && pc->spare->size == 14, "main and spare full");
	CHECK(cache_active(c) == 28 + R, "72 back in slabs at once: active %lu", cache_active(c));
	CHECK(ev(c, USLAB_STAT_FREE_GROUP) > groups, "as detached freelists (%llu)",
	      (unsigned long long)(ev(c, USLAB_STAT_FREE_GROUP) - groups));
	CHECK(ev(c, USLAB_STAT_SHEAF_FLUSH) == flushes, "no sheaf flushed for a large remainder");
	CHECK(ev(c, USLAB_STAT_BARN_PUT_FAIL) >= 1, "the barn refused main");

	/* Both sheaves full, a remainder of 10 < 14: main is flushed for it. */
	uslab_priv_free_bulk_slow(c, R, p + N);
	check_zeroed(p + N, R);
	CHECK(ev(c, USLAB_STAT_SHEAF_FLUSH) == flushes + 1, "small remainder: main flushed");
	CHECK(main_count(c) == R && pc->spare->size == 14, "the 10 in the flushed main: %zu",
	      main_count(c));
	CHECK(cache_active(c) == 14 + R, "active %lu: spare 14 + main 10", cache_active(c));
	destroy(c);
}

static void free_mixed_null(void)
{
	struct uslab_cache *c[3] = { create("mixed-a", 32, 30), create("mixed-b", 200, 0),
				     create("mixed-none", 512, 1) };
	enum { N = 3000 };
	void **p = calloc(N, sizeof(void *));
	size_t per[3] = { 0 }, m[3];
	unsigned long a0[3];
	uint64_t groups[3], seed = 12345;

	CHECK(!c[2]->sheaf_capacity, "one cache without sheaves");
	for (int i = 0; i < N; i++) {
		int k = (int)(rnd_next(&seed) % 4);

		if (k == 3) {
			p[i] = NULL; /* holes too */
			continue;
		}
		p[i] = uslab_cache_alloc(c[k]);
		CHECK(p[i], "alloc");
		*(int *)p[i] = i;
		per[k]++;
	}
	for (int k = 0; k < 3; k++) {
		a0[k] = cache_active(c[k]);
		groups[k] = ev(c[k], USLAB_STAT_FREE_GROUP);
		m[k] = c[k]->sheaf_capacity ? cached(c[k]) : 0;
	}
	uslab_priv_free_bulk_slow(NULL, N, p);
	for (int i = 0; i < N; i++)
		CHECK(!p[i], "entry %d zeroed", i);
	for (int k = 0; k < 3; k++) {
		if (c[k]->sheaf_capacity) {
			/* Runs of this cache went through its sheaves (and on to the barn). */
			CHECK(cached(c[k]) > 0, "%s: objects in the thread's sheaves", c[k]->name);
		} else {
			CHECK(cache_active(c[k]) == a0[k] - per[k],
			      "%s: no sheaves: the %zu objects went to slabs at once", c[k]->name,
			      per[k]);
			CHECK(ev(c[k], USLAB_STAT_FREE_GROUP) > groups[k],
			      "%s: as detached freelists", c[k]->name);
		}
		/* None lost: with the thread's sheaves and the barn drained, all are back. */
		uslab_cache_shrink(c[k]);
		CHECK(cache_active(c[k]) == a0[k] - per[k] - m[k], "%s: all %zu back after shrink",
		      c[k]->name, per[k]);
	}
	printf("   %zu + %zu + %zu objects of three caches, holes skipped\n", per[0], per[1],
	       per[2]);
	free(p);
	for (int k = 0; k < 3; k++)
		destroy(c[k]);
}

static void n_zero(void)
{
	struct uslab_cache *c = create("bulk-zero", 64, 14);
	void *p[4] = { (void *)1, (void *)2, (void *)3, (void *)4 }, *o;
	uint64_t calls;
	size_t m;

	o = uslab_cache_alloc(c); /* main has objects and room */
	m = main_count(c);
	calls = ev(c, USLAB_STAT_ALLOC_BULK) + ev(c, USLAB_STAT_FREE_BULK);
	CHECK(uslab_priv_alloc_bulk_slow(c, 0, p) == 0, "slow alloc of 0");
	CHECK(uslab_cache_alloc_bulk(c, 0, p) == 0, "alloc of 0 with objects in main");
	/* Entries that are not objects: freeing n == 0 must not look at them. */
	uslab_priv_free_bulk_slow(c, 0, p);
	uslab_cache_free_bulk(c, 0, p);
	uslab_cache_free_bulk(NULL, 0, p);
	uslab_cache_free_bulk(c, 4, NULL);
	CHECK(p[0] == (void *)1 && p[1] == (void *)2 && p[2] == (void *)3 && p[3] == (void *)4,
	      "array untouched");
	CHECK(main_count(c) == m, "main untouched");
	CHECK(ev(c, USLAB_STAT_ALLOC_BULK) + ev(c, USLAB_STAT_FREE_BULK) == calls, "not counted");
	uslab_cache_free(c, o);
	destroy(c);
}

static void counted(void)
{
	struct uslab_cache *c = create("bulk-count", 64, 14);
	struct uslab_cache *d = create("bulk-count-none", 64, 1);
	void *p[300];
	struct uslab_cache_stats s0, s1;

	s0 = cache_stats(c);
	CHECK(uslab_priv_alloc_bulk_slow(c, 300, p) == 300, "300");
	uslab_priv_free_bulk_slow(c, 300, p);
	CHECK(uslab_priv_alloc_bulk_slow(c, 20, p) == 20, "20");
	uslab_priv_free_bulk_slow(c, 20, p);
	s1 = cache_stats(c);
	CHECK(s1.events[USLAB_STAT_ALLOC_BULK] - s0.events[USLAB_STAT_ALLOC_BULK] == 2 &&
		      s1.events[USLAB_STAT_ALLOC_BULK_OBJS] -
				      s0.events[USLAB_STAT_ALLOC_BULK_OBJS] ==
			      320,
	      "alloc: 2 calls, 320 objects");
	CHECK(s1.events[USLAB_STAT_FREE_BULK] - s0.events[USLAB_STAT_FREE_BULK] == 2 &&
		      s1.events[USLAB_STAT_FREE_BULK_OBJS] - s0.events[USLAB_STAT_FREE_BULK_OBJS] ==
			      320,
	      "free: 2 calls, 320 objects");
	CHECK(uslab_priv_alloc_bulk_slow(d, 300, p) == 300, "no sheaves: 300");
	CHECK(cache_active(d) == 300, "from slabs");
	uslab_priv_free_bulk_slow(d, 300, p);
	CHECK(cache_active(d) == 0, "to slabs");
	s1 = cache_stats(d);
	CHECK(!s1.events[USLAB_STAT_ALLOC_BULK] && !s1.events[USLAB_STAT_FREE_BULK],
	      "no thread counters without sheaves");
	destroy(c);
	destroy(d);
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(alloc_paths);
	RUN(alloc_oom);
	RUN(free_holes);
	RUN(every_n);
	RUN(free_remainder);
	RUN(free_mixed_null);
	RUN(n_zero);
	RUN(counted);
	return 0;
}
