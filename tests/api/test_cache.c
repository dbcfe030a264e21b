// SPDX-License-Identifier: MIT
/*
 * test_cache.c - the object cache contract of uslab.h, single-threaded:
 * argument errors, sizes from 1 byte to 16 MiB, alignment, constructors,
 * contents, destroy with live objects, shrink giving memory back, stats.
 */
#define _GNU_SOURCE /* sched_getcpu, CPU_SET */
#include <sched.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <uslab.h>

#include "../test.h"

static void test_create_errors(void)
{
	struct uslab_cache_args a = { 0 };
	char longname[USLAB_NAME_MAX + 2];

	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;

	errno = 0;
	CHECK(!uslab_cache_create(NULL, 64, NULL, 0) && errno == EINVAL, "NULL name");
	errno = 0;
	CHECK(!uslab_cache_create(longname, 64, NULL, 0) && errno == EINVAL, "long name");
	errno = 0;
	CHECK(!uslab_cache_create("t", 0, NULL, 0) && errno == EINVAL, "size 0");
	errno = 0;
	CHECK(!uslab_cache_create("t", USLAB_MAX_OBJECT_SIZE + 1, NULL, 0) && errno == EINVAL,
	      "size above max");
	errno = 0;
	CHECK(!uslab_cache_create("t", (size_t)-1, NULL, 0) && errno == EINVAL, "absurd size");
	a.align = 24;
	errno = 0;
	CHECK(!uslab_cache_create("t", 64, &a, 0) && errno == EINVAL, "align 24");
	a.align = USLAB_MAX_ALIGN * 2;
	errno = 0;
	CHECK(!uslab_cache_create("t", 64, &a, 0) && errno == EINVAL, "align too big");
	errno = 0;
	CHECK(!uslab_cache_create("t", 64, NULL, 0x1) && errno == EINVAL, "unknown flag");

	longname[USLAB_NAME_MAX] = 0; /* exactly the maximum is fine */
	struct uslab_cache *c = uslab_cache_create(longname, 64, NULL, 0);

	CHECK(c != NULL, "name of USLAB_NAME_MAX bytes: errno %d", errno);
	CHECK(strcmp(uslab_cache_name(c), longname) == 0, "name copied");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");

	CHECK(uslab_cache_destroy(NULL) == 0, "destroy(NULL)");
	CHECK(uslab_cache_shrink(NULL) == -EINVAL, "shrink(NULL)");
	struct uslab_cache_stats st;

	CHECK(uslab_cache_stats(NULL, &st) == -EINVAL, "stats(NULL)");
	CHECK(uslab_cache_name(NULL) == NULL, "name(NULL)");
	CHECK(uslab_stat_name(0) && !strcmp(uslab_stat_name(0), "alloc_slowpath"), "stat name 0");
	CHECK(uslab_stat_name(USLAB_STAT_NR_ITEMS) == NULL, "stat name out of range");
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* Fill and check an object with a pattern derived from its address. */
static void stamp(void *obj, size_t size)
{
	unsigned char *p = obj;

	for (size_t i = 0; i < size; i++)
		p[i] = (unsigned char)(((uintptr_t)obj >> 4) + i * 7);
}

static bool stamped(const void *obj, size_t size)
{
	const unsigned char *p = obj;

	for (size_t i = 0; i < size; i++)
		if (p[i] != (unsigned char)(((uintptr_t)obj >> 4) + i * 7))
			return false;
	return true;
}

/* Objects of many sizes: aligned, disjoint, contents intact, all returned. */
static void test_sizes(void)
{
	static const size_t sizes[] = { 1,    7,     8,	      9,       16,
					24,   100,   256,     1000,    4096,
					4097, 65536, 1 << 20, 3 << 20, USLAB_MAX_OBJECT_SIZE };

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k];
		struct uslab_cache *c = uslab_cache_create("sizes", size, NULL, 0);
		struct uslab_cache_stats st;
		size_t n;
		void **objs;

		CHECK(c, "create size %zu: errno %d", size, errno);
		CHECK(uslab_cache_stats(c, &st) == 0, "stats");
		CHECK(st.object_size == size && st.objsize >= size, "objsize %u for %zu",
		      st.objsize, size);
		n = size >= (1 << 20) ? 3 : 3 * st.objperslab + 1;
		objs = calloc(n, sizeof(void *));
		for (size_t i = 0; i < n; i++) {
			objs[i] = uslab_cache_alloc(c);
			CHECK(objs[i], "alloc %zu of size %zu", i, size);
			CHECK((uintptr_t)objs[i] % 8 == 0, "8-byte aligned");
			CHECK(uslab_cache_of(objs[i]) == c, "cache_of");
			stamp(objs[i], size);
		}
		qsort(objs, n, sizeof(void *), cmp_ptr);
		for (size_t i = 1; i < n; i++)
			CHECK((uintptr_t)objs[i] - (uintptr_t)objs[i - 1] >= size,
			      "objects overlap (size %zu)", size);
		for (size_t i = 0; i < n; i++) {
			CHECK(stamped(objs[i], size), "contents of size %zu survive", size);
			uslab_cache_free(c, objs[i]);
		}
		free(objs);
		CHECK(uslab_cache_destroy(c) == 0, "destroy size %zu", size);
	}
}

static void test_alignment(void)
{
	struct uslab_cache_args a = { .align = 256 };
	struct uslab_cache *c = uslab_cache_create("align256", 100, &a, 0);
	struct uslab_cache *h = uslab_cache_create("hw100", 100, NULL, USLAB_HWCACHE_ALIGN);
	struct uslab_cache *s = uslab_cache_create("hw20", 20, NULL, USLAB_HWCACHE_ALIGN);
	struct uslab_cache_stats st;
	void *p[100];

	CHECK(c && h && s, "create");
	for (int i = 0; i < 100; i++) {
		p[i] = uslab_cache_alloc(c);
		CHECK((uintptr_t)p[i] % 256 == 0, "align 256: %p", p[i]);
	}
	for (int i = 0; i < 100; i++)
		uslab_cache_free(c, p[i]);
	for (int i = 0; i < 100; i++) {
		p[i] = uslab_cache_alloc(h);
		CHECK((uintptr_t)p[i] % 64 == 0, "HWCACHE_ALIGN 100 bytes: %p", p[i]);
	}
	for (int i = 0; i < 100; i++)
		uslab_cache_free(h, p[i]);
	uslab_cache_stats(s, &st);
	CHECK(st.align == 32 && st.objsize == 32,
	      "HWCACHE_ALIGN halves for 20 bytes: align %u size %u", st.align, st.objsize);
	CHECK(uslab_cache_destroy(c) == 0 && uslab_cache_destroy(h) == 0 &&
		      uslab_cache_destroy(s) == 0,
	      "destroy");
}

static _Atomic unsigned long ctor_calls;

static void ctor(void *obj)
{
	uint64_t *w = obj;

	ctor_calls++;
	for (int i = 0; i < 8; i++)
		w[i] = 0xc0ffee00 + (uint64_t)i;
}

/*
 * A constructed object is never written by the allocator, in every layout
 * that can serve a cache with a constructor (OBJFREELIST cannot: EINVAL).
 */
static void test_ctor(void)
{
	for (unsigned int layout = 0; layout < USLAB_LAYOUT_NR; layout++) {
		struct uslab_cache_args a = { .ctor = ctor, .layout = layout };
		struct uslab_cache *c = uslab_cache_create("ctor", 64, &a, 0);
		struct uslab_cache_stats st;
		enum { N = 5000 };
		void **p;

		if (layout == USLAB_LAYOUT_OBJFREELIST) {
			CHECK(!c && errno == EINVAL, "objfreelist with a ctor: EINVAL");
			continue;
		}
		CHECK(c, "create (%s)", uslab_layout_name(layout));
		p = malloc(N * sizeof(void *));
		ctor_calls = 0;
		for (int round = 0; round < 3; round++) {
			for (int i = 0; i < N; i++) {
				uint64_t *w = uslab_cache_alloc(c);

				CHECK(w, "alloc");
				for (int j = 0; j < 8; j++)
					CHECK(w[j] == 0xc0ffee00 + (uint64_t)j,
					      "%s: constructed state intact (round %d word %d)",
					      uslab_layout_name(layout), round, j);
				p[i] = w;
			}
			/* Free in a scrambled order so objects travel through slabs. */
			for (int i = 0; i < N; i++)
				uslab_cache_free(c, p[(i * 7919) % N]);
			uslab_thread_flush();
		}
		uslab_cache_stats(c, &st);
		CHECK(ctor_calls == st.num_objs, "ctor once per object: %lu calls, %lu objects",
		      (unsigned long)ctor_calls, st.num_objs);
		if (st.layout == USLAB_LAYOUT_FREEPTR)
			CHECK(st.objsize >= 64 + sizeof(void *), "free pointer outside the object");
		else
			CHECK(st.objsize == 64, "index layouts: no free pointer (%u)", st.objsize);
		free(p);
		CHECK(uslab_cache_destroy(c) == 0, "destroy");
	}
}

/*
 * The index layouts never write an object to free it or hand it out: a
 * pattern survives free and allocation through the slabs (OBJFREELIST:
 * except the one object per slab that holds the array while it is free).
 */
static void test_contents_untouched(void)
{
	/*
	 * With NUMA on (the _numa variant), stay on one CPU: a thread that moved
	 * takes new slabs on its new node rather than its old node's partial
	 * ones, and the allocation back would not be the objects freed.
	 */
	if (uslab_numa_nodes() > 1) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(sched_getcpu(), &one);
		CHECK(!sched_setaffinity(0, sizeof(one), &one), "stay on one CPU");
	}
	for (unsigned int layout = USLAB_LAYOUT_OBJFREELIST; layout < USLAB_LAYOUT_NR; layout++) {
		/* No sheaves and no slab given back: every object goes to its slab and returns. */
		struct uslab_cache_args a = { .layout = layout,
					      .sheaf_capacity = 1,
					      .min_partial = 1000 };
		struct uslab_cache *c = uslab_cache_create("untouched", 256, &a, 0);
		struct uslab_cache_stats st;
		unsigned long changed = 0, seen = 0;
		uint64_t seed = 11;
		unsigned char **p;
		int N;

		CHECK(c, "create %s", uslab_layout_name(layout));
		/* Whole slabs: the allocation back takes exactly the objects freed. */
		uslab_cache_stats(c, &st);
		N = 40 * (int)st.objperslab;
		p = malloc((size_t)N * sizeof(*p));
		for (int i = 0; i < N; i++) {
			p[i] = uslab_cache_alloc(c);
			CHECK(p[i], "alloc");
		}
		for (int i = 0; i < N; i++)
			memset(p[i], (int)(((uintptr_t)p[i] >> 8) * 31 + 7), 256);
		for (int i = N - 1; i > 0; i--) {
			int j = (int)(rnd_next(&seed) % (uint64_t)(i + 1));
			unsigned char *t = p[i];

			p[i] = p[j];
			p[j] = t;
		}
		/* Half singly, half in bulk runs of 64. */
		for (int i = 0; i < N / 2; i++)
			uslab_cache_free(c, p[i]);
		for (int i = N / 2; i < N; i += 64)
			uslab_cache_free_bulk(c, N - i < 64 ? (size_t)(N - i) : 64, (void **)p + i);
		uslab_cache_stats(c, &st);
		CHECK(st.active_objs == 0 && st.layout == layout, "all back in their slabs");
		CHECK(uslab_cache_alloc_bulk(c, (size_t)N, (void **)p) == (size_t)N,
		      "all allocated again");
		for (int i = 0; i < N; i++) {
			unsigned char want = (unsigned char)(((uintptr_t)p[i] >> 8) * 31 + 7);

			for (int j = 0; j < 256; j++) {
				if (p[i][j] != want) {
					changed++;
					break;
				}
			}
			seen++;
		}
		if (layout == USLAB_LAYOUT_OBJFREELIST)
			CHECK(changed <= st.num_slabs,
			      "objfreelist: %lu objects written, %lu slabs", changed, st.num_slabs);
		else
			CHECK(changed == 0, "%s: %lu objects written", uslab_layout_name(layout),
			      changed);
		CHECK(seen == (unsigned long)N && st.num_slabs == 40, "seen");
		uslab_cache_free_bulk(c, (size_t)N, (void **)p);
		free(p);
		CHECK(uslab_cache_destroy(c) == 0, "destroy");
	}
	if (uslab_numa_nodes() > 1) {
		cpu_set_t all;

		CPU_ZERO(&all);
		for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
			CPU_SET(cpu, &all);
		sched_setaffinity(0, sizeof(all),
				  &all); /* (the CPUs the kernel has: the rest ignored) */
	}
}

static void test_zalloc_and_null(void)
{
	struct uslab_cache *c = uslab_cache_create("zalloc", 200, NULL, 0);
	unsigned char *p;

	p = uslab_cache_alloc(c);
	memset(p, 0xab, 200);
	uslab_cache_free(c, p);
	p = uslab_cache_zalloc(c);
	CHECK(p, "zalloc");
	for (int i = 0; i < 200; i++)
		CHECK(p[i] == 0, "byte %d zero", i);
	uslab_cache_free(c, p);
	uslab_cache_free(c, NULL); /* no-op */
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_destroy_busy(void)
{
	struct uslab_cache *c = uslab_cache_create("busy", 128, NULL, 0);
	void *p = uslab_cache_alloc(c), *q;

	CHECK(uslab_cache_destroy(c) == -EBUSY, "destroy with a live object");
	q = uslab_cache_alloc(c);
	CHECK(q && q != p, "cache still usable after -EBUSY");
	memset(q, 1, 128);
	uslab_cache_free(c, q);
	CHECK(uslab_cache_destroy(c) == -EBUSY, "still busy");
	uslab_cache_free(c, p);
	CHECK(uslab_cache_destroy(c) == 0, "destroy once everything is freed");
}

static void test_stats_and_shrink(void)
{
	struct uslab_cache *c = uslab_cache_create("stats", 256, NULL, 0);
	struct uslab_cache_stats st;
	enum { N = 64 << 20 >> 8 }; /* 64 MiB of 256-byte objects */
	void **p = malloc(N * sizeof(void *));
	long rss0, rss1, rss2;

	uslab_cache_stats(c, &st);
	CHECK(st.num_slabs == 0 && st.active_objs == 0, "new cache is empty");
	CHECK(st.objsize == 256 && st.pagesperslab == (1u << st.order), "slabinfo layout");
	rss0 = rss_bytes();
	for (int i = 0; i < N; i++) {
		p[i] = uslab_cache_alloc(c);
		memset(p[i], 0x5a, 256);
	}
	rss1 = rss_bytes();
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs >= N, "active_objs %lu >= %d", st.active_objs, N);
	CHECK(st.num_objs == st.num_slabs * st.objperslab, "num_objs = num_slabs * objperslab");
	CHECK(st.active_slabs <= st.num_slabs && st.active_slabs > 0, "active_slabs");
	/* ThreadSanitizer's shadow memory grows with every access: no RSS checks. */
	CHECK(TEST_SANITIZED || rss1 - rss0 >= 60l << 20, "RSS grew by %ld", rss1 - rss0);

	for (int i = 0; i < N; i++)
		uslab_cache_free(c, p[i]);
	uslab_cache_stats(c, &st);
	/*
	 * Main and spare: the thread's, or (USLAB_PERCPU=1) those of each CPU
	 * the loop ran on, a migration leaving both of the first one full; a
	 * barn of 10 per node, and with NUMA on the thread's remote sheaf.
	 */
	CHECK(st.active_objs <= (2 * (unsigned long)sysconf(_SC_NPROCESSORS_CONF) + 3 +
				 10 * (unsigned long)uslab_numa_nodes()) *
					st.sheaf_capacity,
	      "after free only sheaves and barn hold objects: %lu", st.active_objs);
	CHECK(uslab_cache_shrink(c) == 0, "shrink");
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs == 0 && st.num_slabs == 0 && st.barn_full == 0,
	      "after shrink: active %lu slabs %lu barn %lu", st.active_objs, st.num_slabs,
	      st.barn_full);
	rss2 = rss_bytes();
	CHECK(TEST_SANITIZED || rss1 - rss2 >= 60l << 20,
	      "memory back to the OS: RSS %ld -> %ld -> %ld", rss0, rss1, rss2);
	CHECK(st.events[USLAB_STAT_SLAB_NEW] == st.events[USLAB_STAT_SLAB_FREE],
	      "every slab taken was given back");
	free(p);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_min_partial(void)
{
	struct uslab_cache_args a = { .min_partial = 3 };
	struct uslab_cache *c = uslab_cache_create("minpartial", 512, &a, 0);
	struct uslab_cache_stats st;
	enum { N = 20000 };
	void **p = malloc(N * sizeof(void *));

	for (int i = 0; i < N; i++)
		p[i] = uslab_cache_alloc(c);
	for (int i = 0; i < N; i++)
		uslab_cache_free(c, p[i]);
	uslab_thread_flush();
	uslab_cache_stats(c, &st);
	CHECK(st.min_partial == 3, "min_partial taken from args");
	/* Only the barn's sheaves hold objects; slabs empty beyond 3 are gone. */
	CHECK(st.partial_slabs <= 3 + st.barn_full * st.sheaf_capacity, "partial slabs %lu",
	      st.partial_slabs);
	CHECK(uslab_cache_shrink(c) == 0, "shrink");
	uslab_cache_stats(c, &st);
	CHECK(st.num_slabs == 0, "shrink empties min_partial too");
	free(p);
	uslab_cache_destroy(c);
}

/* Caches without sheaves (sheaf_capacity = 1) take the node lock each time. */
static void test_no_sheaves(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 1 };
	struct uslab_cache *c = uslab_cache_create("nosheaf", 48, &a, 0);
	struct uslab_cache_stats st;
	void *p[100];

	for (int i = 0; i < 100; i++)
		p[i] = uslab_cache_alloc(c);
	uslab_cache_stats(c, &st);
	CHECK(st.sheaf_capacity == 0 && st.active_objs == 100, "exact count without sheaves");
	for (int i = 0; i < 100; i++)
		uslab_cache_free(c, p[i]);
	uslab_cache_stats(c, &st);
	CHECK(st.active_objs == 0, "freed straight to slabs");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_many_caches(void)
{
	struct uslab_cache **cs = calloc(USLAB_MAX_CACHES + 1, sizeof(*cs));
	struct uslab_cache_args nosheaf = { .sheaf_capacity = 1 };
	struct uslab_cache *extra;
	int n = 0;

	while (n <= USLAB_MAX_CACHES) {
		cs[n] = uslab_cache_create("many", 32, NULL, 0);
		if (!cs[n])
			break;
		n++;
	}
	CHECK(n <= USLAB_MAX_CACHES && errno == ENOSPC, "ENOSPC after %d caches (errno %d)", n,
	      errno);
	/* The kmalloc classes' ids are reserved (issue 22 item 9). */
	CHECK(n == USLAB_MAX_CACHES - USLAB_KMALLOC_CLASSES, "USLAB_MAX_CACHES - %d caches: %d",
	      USLAB_KMALLOC_CLASSES, n);
	extra = uslab_cache_create("extra", 32, &nosheaf, 0);
	CHECK(extra, "caches without sheaves need no id");
	/* Use a few, so ids are live in this thread's table when reused. */
	for (int i = 0; i < n; i += 97)
		uslab_cache_free(cs[i], uslab_cache_alloc(cs[i]));
	for (int i = 0; i < n; i++)
		CHECK(uslab_cache_destroy(cs[i]) == 0, "destroy %d", i);
	uslab_cache_destroy(extra);
	cs[0] = uslab_cache_create("again", 32, NULL, 0);
	CHECK(cs[0], "ids are reused");
	void *o = uslab_cache_alloc(cs[0]);

	CHECK(uslab_cache_of(o) == cs[0], "a reused id serves the new cache");
	uslab_cache_free(cs[0], o);
	uslab_cache_destroy(cs[0]);
	free(cs);
}

static void test_owns(void)
{
	struct uslab_cache *c = uslab_cache_create("owns", 40, NULL, 0);
	void *p = uslab_cache_alloc(c);
	int local;
	void *m = malloc(40);

	CHECK(uslab_owns(p) && uslab_cache_of(p) == c, "own object");
	CHECK(uslab_owns((char *)p + 39) && uslab_cache_of((char *)p + 39) == c, "inside");
	CHECK(!uslab_owns(&local) && !uslab_cache_of(&local), "stack address");
	CHECK(!uslab_owns(m), "malloc address");
	CHECK(!uslab_owns(NULL) && !uslab_owns((void *)~0ul), "NULL and ~0");
	free(m);
	uslab_cache_free(c, p);
	uslab_cache_destroy(c);
}

/* Out of address space: NULL + ENOMEM, nothing lost, usable afterwards. */
static void oom_child(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("oom", 1 << 20, NULL, 0);
	struct rlimit rl;
	enum { MAX = 4096 };
	void **p = calloc(MAX, sizeof(void *));
	int n = 0;
	FILE *f;
	unsigned long vm = 0;

	(void)arg;
	f = fopen("/proc/self/statm", "r");
	if (!f || fscanf(f, "%lu", &vm) != 1)
		_exit(2);
	fclose(f);
	rl.rlim_cur = rl.rlim_max = vm * 4096 + (512ul << 20);
	if (setrlimit(RLIMIT_AS, &rl))
		_exit(3);
	while (n < MAX && (p[n] = uslab_cache_alloc(c)) != NULL)
		n++;
	if (n == MAX || errno != ENOMEM)
		_exit(4);
	if (n < 10)
		_exit(5);
	for (int i = 0; i < n; i++)
		uslab_cache_free(c, p[i]);
	/* Give memory back, then the cache must work again. */
	uslab_cache_shrink(c);
	p[0] = uslab_cache_alloc(c);
	if (!p[0])
		_exit(6);
	memset(p[0], 1, 1 << 20);
	uslab_cache_free(c, p[0]);
	uslab_cache_shrink(c);
	_exit(uslab_cache_destroy(c) == 0 ? 0 : 7);
}

static void test_out_of_memory(void)
{
	check_oom_child(oom_child, "out-of-memory child");
}

int main(void)
{
	RUN(test_create_errors);
	RUN(test_sizes);
	RUN(test_alignment);
	RUN(test_ctor);
	RUN(test_contents_untouched);
	RUN(test_zalloc_and_null);
	RUN(test_destroy_busy);
	RUN(test_stats_and_shrink);
	RUN(test_min_partial);
	RUN(test_no_sheaves);
	RUN(test_many_caches);
	RUN(test_owns);
	RUN(test_out_of_memory);
	return 0;
}
