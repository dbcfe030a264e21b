// SPDX-License-Identifier: MIT
/*
 * test_pool.c - pool mode (USLAB_POOL, USLAB_POOL_EXTERNAL) and the
 * DPDK-shaped calls (uslab_pool_get_bulk, _put_bulk, _avail): a reserve
 * allocated at creation and never given back to the slabs until shrink or
 * destroy; an external pool handing out exactly the objects put in, and
 * ENOBUFS when they are all out; objects moved between threads, stamped
 * and checked, none lost and none handed out twice, threads exiting with
 * objects in their sheaves; the arguments refused; misuse reported.
 */
#include <pthread.h>
#include <stdbool.h>
#include <uslab.h>

#include "../test.h"

#define SIZE 64

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* @p[0..n) distinct and at least @size apart. */
static void check_distinct(void **p, size_t n, size_t size)
{
	void **s = malloc(n * sizeof(void *));

	CHECK(s, "malloc");
	memcpy(s, p, n * sizeof(void *));
	qsort(s, n, sizeof(void *), cmp_ptr);
	for (size_t i = 0; i < n; i++)
		CHECK(s[i] && (!i || (uintptr_t)s[i] - (uintptr_t)s[i - 1] >= size),
		      "objects %zu and %zu repeat or overlap", i - 1, i);
	free(s);
}

/* Objects in @c's slabs that are free (not counting the pool's pointers). */
static unsigned long slab_free(struct uslab_cache *c)
{
	struct uslab_cache_stats st = cache_stats(c);

	return st.num_objs - st.active_objs;
}

static void test_reserve(void)
{
	struct uslab_cache_args a = { .reserve = 5000 };
	struct uslab_cache *c = uslab_cache_create("pool-reserve", SIZE, &a, USLAB_POOL);
	enum { N = 5000 };
	static void *p[N];
	unsigned long in_slabs;

	CHECK(c, "create: %s", strerror(errno));
	CHECK(uslab_pool_avail(c) == N, "the reserve is there: %zu", uslab_pool_avail(c));
	CHECK(cache_active(c) >= N, "the reserve is allocated from the slabs");
	in_slabs = slab_free(c);
	CHECK(uslab_pool_get_bulk(c, N, p) == 0, "get the whole reserve");
	check_distinct(p, N, SIZE);
	for (size_t i = 0; i < N; i++)
		memset(p[i], (int)(i & 0xff), SIZE);
	CHECK(slab_free(c) == in_slabs, "the reserve served it: no slab touched");
	CHECK(uslab_pool_avail(c) == 0, "nothing left as pointers");
	/* Back in every way: put_bulk, free_bulk, one by one. */
	uslab_pool_put_bulk(c, 2000, p);
	CHECK(p[0] && p[1999], "put_bulk leaves the array alone");
	uslab_cache_free_bulk(c, 2000, p + 2000);
	for (size_t i = 4000; i < N; i++)
		uslab_cache_free(c, p[i]);
	CHECK(uslab_pool_avail(c) == N, "every object is a pointer again: %zu",
	      uslab_pool_avail(c));
	CHECK(slab_free(c) == in_slabs, "and none went back to a slab");
	CHECK(uslab_cache_validate(c) == 0, "validate");
	/* Beyond the reserve a slab pool grows from its slabs. */
	CHECK(uslab_pool_get_bulk(c, N, p) == 0, "again");
	void *extra = uslab_cache_alloc(c);
	CHECK(extra, "one more than the reserve");
	uslab_cache_free(c, extra);
	uslab_pool_put_bulk(c, N, p);
	/* (The extra one came with a sheaf's worth from the slabs, all pointers now.) */
	CHECK(uslab_pool_avail(c) > N && uslab_pool_avail(c) == cache_active(c),
	      "every object allocated is a free pointer: %zu of %lu", uslab_pool_avail(c),
	      cache_active(c));
	/* Shrink gives them all back to the slabs, and the slabs to the OS. */
	CHECK(uslab_cache_shrink(c) == 0, "shrink");
	CHECK(uslab_pool_avail(c) == 0 && cache_active(c) == 0, "shrink emptied the pool");
	CHECK(cache_stats(c).num_slabs == 0, "and released every slab");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_destroy_busy(void)
{
	struct uslab_cache_args a = { .reserve = 100 };
	struct uslab_cache *c = uslab_cache_create("pool-busy", SIZE, &a, USLAB_POOL);
	void *o;

	CHECK(c, "create");
	o = uslab_cache_alloc(c);
	CHECK(o, "alloc");
	CHECK(uslab_cache_destroy(c) == -EBUSY, "one object out: EBUSY");
	uslab_cache_free(c, o);
	CHECK(uslab_cache_destroy(c) == 0, "destroyed once it is back");
}

/* The caller's memory: NOBJ slots of SIZE bytes. */
#define NOBJ 3000
static unsigned char *arena;

static bool in_arena(const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)arena;

	return a >= b && a < b + NOBJ * SIZE && (a - b) % SIZE == 0;
}

static void test_external(void)
{
	struct uslab_cache_args a = { .reserve = NOBJ };
	struct uslab_cache *c = uslab_cache_create("pool-ext", SIZE, &a, USLAB_POOL_EXTERNAL);
	static void *p[NOBJ + 1];
	void *q[NOBJ];

	CHECK(c, "create: %s", strerror(errno));
	CHECK(uslab_pool_avail(c) == 0, "starts empty");
	CHECK(uslab_cache_alloc(c) == NULL && errno == ENOBUFS, "empty: NULL, ENOBUFS");
	CHECK(uslab_pool_get_bulk(c, 1, p) == -ENOBUFS, "empty: get -ENOBUFS");
	arena = malloc(NOBJ * SIZE);
	CHECK(arena, "malloc");
	memset(arena, 0xa5, NOBJ * SIZE);
	for (size_t i = 0; i < NOBJ; i++)
		q[i] = arena + i * SIZE;
	uslab_pool_put_bulk(c, NOBJ, q); /* (how DPDK populates it, an object at a time there) */
	CHECK(uslab_pool_avail(c) == NOBJ, "all handed in: %zu", uslab_pool_avail(c));
	for (int round = 0; round < 3; round++) {
		size_t got = 0;

		while (got < NOBJ) {
			size_t k = NOBJ - got < 97 ? NOBJ - got : 97;

			CHECK(uslab_pool_get_bulk(c, k, p + got) == 0, "get %zu", k);
			got += k;
		}
		CHECK(uslab_pool_get_bulk(c, 1, p + NOBJ) == -ENOBUFS, "all out: -ENOBUFS");
		errno = 0;
		CHECK(!uslab_cache_alloc(c) && errno == ENOBUFS, "all out: NULL, ENOBUFS");
		CHECK(uslab_pool_get_bulk(c, 300, p + NOBJ - 300) == -ENOBUFS,
		      "all or nothing: -ENOBUFS");
		check_distinct(p, NOBJ, SIZE);
		for (size_t i = 0; i < NOBJ; i++)
			CHECK(in_arena(p[i]), "object %zu is one of the caller's", i);
		/* Back: a third each way. */
		for (size_t i = 0; i < NOBJ / 3; i++)
			uslab_cache_free(c, p[i]);
		uslab_cache_free_bulk(c, NOBJ / 3, p + NOBJ / 3);
		uslab_pool_put_bulk(c, NOBJ - 2 * (NOBJ / 3), p + 2 * (NOBJ / 3));
		CHECK(uslab_pool_avail(c) == NOBJ, "round %d: all back", round);
		CHECK(uslab_cache_validate(c) == 0, "validate");
		CHECK(uslab_cache_shrink(c) == 0, "shrink keeps an external pool's objects");
		CHECK(uslab_pool_avail(c) == NOBJ, "round %d: still all there", round);
	}
	for (size_t i = 0; i < NOBJ * SIZE; i++)
		CHECK(arena[i] == 0xa5, "uslab never wrote into the caller's objects (byte %zu)",
		      i);
	/* Outstanding objects do not stop the destroy of an external pool. */
	CHECK(uslab_pool_get_bulk(c, 10, p) == 0, "get 10");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	free(arena);
}

/*
 * Two threads move objects through a ring: the producer gets bursts, the
 * consumer puts them back (each way of freeing in turn); objects stamped
 * with a sequence number and checked. Then each thread exits with objects
 * in its sheaves, which must come back to the pool.
 */
#define RING 1024
#define BURST 32
#define ROUNDS 20000
struct ring {
	void *slot[RING];
	unsigned long head, tail; /* producer writes head, consumer tail */
	struct uslab_cache *c;
	unsigned long pchecks, cchecks; /* each thread its own */
};

static void *producer(void *arg)
{
	struct ring *r = arg;
	uint64_t seq = 0;
	void *b[BURST];

	for (int i = 0; i < ROUNDS; i++) {
		int err;

		while ((err = uslab_pool_get_bulk(r->c, BURST, b)) == -ENOBUFS)
			sched_yield(); /* all in the ring or the other's sheaves */
		CHECK_COUNTED(r->pchecks, err == 0, "get: %d", err);
		while (__atomic_load_n(&r->head, __ATOMIC_RELAXED) -
			       __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) >
		       RING - BURST)
			sched_yield();
		for (int k = 0; k < BURST; k++) {
			uint64_t *o = b[k];

			/* o[2]: 1 while handed out; finding it 1 is a double hand-out. */
			CHECK_COUNTED(r->pchecks, !__atomic_exchange_n(&o[2], 1, __ATOMIC_ACQ_REL),
				      "object %p handed out twice", (void *)o);
			o[0] = seq;
			o[1] = ~seq;
			seq++;
			r->slot[(r->head + k) % RING] = o;
		}
		__atomic_store_n(&r->head, r->head + BURST, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct ring *r = arg;
	uint64_t seq = 0;
	void *b[BURST];

	for (int i = 0; i < ROUNDS; i++) {
		while (__atomic_load_n(&r->head, __ATOMIC_ACQUIRE) == r->tail)
			sched_yield();
		for (int k = 0; k < BURST; k++) {
			uint64_t *o = r->slot[(r->tail + k) % RING];

			CHECK_COUNTED(r->cchecks, o[0] == seq && o[1] == ~seq,
				      "object %p: stamp %lu, expected %lu", (void *)o,
				      (unsigned long)o[0], (unsigned long)seq);
			seq++;
			__atomic_store_n(&o[2], 0, __ATOMIC_RELEASE);
			b[k] = o;
		}
		__atomic_store_n(&r->tail, r->tail + BURST, __ATOMIC_RELEASE);
		if (i % 3 == 0)
			uslab_pool_put_bulk(r->c, BURST, b);
		else if (i % 3 == 1)
			uslab_cache_free_bulk(r->c, BURST, b);
		else
			for (int k = 0; k < BURST; k++)
				uslab_cache_free(r->c, b[k]);
	}
	return NULL;
}

static void run_ring(struct uslab_cache *c, size_t total)
{
	static struct ring r;
	pthread_t a, b;

	memset(&r, 0, sizeof(r));
	r.c = c;
	CHECK(!pthread_create(&a, NULL, producer, &r), "producer");
	CHECK(!pthread_create(&b, NULL, consumer, &r), "consumer");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	test_checks += r.pchecks + r.cchecks;
	/* Both exited: their sheaves went to the barn or the loose array. */
	if (!total) /* a slab pool: every object it allocated */
		total = cache_active(c);
	CHECK(uslab_pool_avail(c) == total, "none lost across threads: %zu of %zu",
	      uslab_pool_avail(c), total);
	CHECK(uslab_cache_validate(c) == 0, "validate");
}

static void test_threads_external(void)
{
	/* Fewer objects than the two threads' sheaves and the ring can hold: ENOBUFS happens. */
	enum { N = 2000 };
	struct uslab_cache_args a = { .reserve = N, .sheaf_capacity = 126 };
	struct uslab_cache *c = uslab_cache_create("pool-ext-mt", 32, &a, USLAB_POOL_EXTERNAL);
	uint64_t *mem = calloc(N, 32);
	void *q[N];

	CHECK(c && mem, "create");
	for (size_t i = 0; i < N; i++)
		q[i] = mem + 4 * i;
	uslab_pool_put_bulk(c, N, q);
	run_ring(c, N);
	CHECK(uslab_pool_get_bulk(c, N, q) == 0, "all of them from this thread");
	check_distinct(q, N, 32);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	free(mem);
}

static void test_threads_slab(void)
{
	struct uslab_cache_args a = { .reserve = 4096 };
	struct uslab_cache *c = uslab_cache_create("pool-mt", SIZE, &a, USLAB_POOL);
	CHECK(c, "create");
	run_ring(c, 0); /* grown beyond its reserve or not: all pointers */
	CHECK(uslab_cache_destroy(c) == 0, "destroy: nothing outstanding");
}

static void test_args(void)
{
	struct uslab_cache_args a = { 0 };
	static void (*ctor)(void *) = NULL;

	a.ctor = (void (*)(void *))(uintptr_t)abort; /* any constructor */
	errno = 0;
	CHECK(!uslab_cache_create("p", 32, &a, USLAB_POOL) && errno == EINVAL, "ctor: EINVAL");
	a.ctor = ctor;
	CHECK(!uslab_cache_create("p", 32, &a, USLAB_POOL | USLAB_TYPESAFE_BY_RCU) &&
		      errno == EINVAL,
	      "TYPESAFE_BY_RCU: EINVAL");
	a.sheaf_capacity = 1;
	CHECK(!uslab_cache_create("p", 32, &a, USLAB_POOL_EXTERNAL) && errno == EINVAL,
	      "no sheaves: EINVAL");
	a.sheaf_capacity = 0;
	CHECK(!uslab_cache_create("p", 32, &a, USLAB_POOL_EXTERNAL | USLAB_CONSISTENCY_CHECKS) &&
		      errno == EINVAL,
	      "external with the debug tier: EINVAL");
	/* A reserve no mapping can hold: ENOMEM at once (it once looped forever). */
	a.reserve = ((size_t)1 << 63) + 1;
	errno = 0;
	CHECK(!uslab_cache_create("p", 32, &a, USLAB_POOL) && errno == ENOMEM, "huge reserve");
	CHECK(!uslab_cache_create("p", 32, &a, USLAB_POOL_EXTERNAL) && errno == ENOMEM,
	      "huge external reserve");
	a.reserve = 0;
	/* A debug slab pool is a plain debug cache (every free checked at its slab). */
	struct uslab_cache *c = uslab_cache_create("p", 32, &a, USLAB_POOL | USLAB_POISON);
	CHECK(c, "USLAB_POOL with the debug tier");
	void *o = uslab_cache_alloc(c);
	uslab_cache_free(c, o);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	/* The DPDK-shaped calls on a plain cache. */
	c = uslab_cache_create("plain", 32, NULL, 0);
	void *p[300];
	CHECK(uslab_pool_get_bulk(c, 300, p) == 0, "get on a plain cache");
	check_distinct(p, 300, 32);
	uslab_pool_put_bulk(c, 300, p);
	CHECK(uslab_pool_get_bulk(c, 0, NULL) == 0, "n = 0");
	CHECK(uslab_pool_get_bulk(c, 1, NULL) == -EINVAL, "NULL array");
	CHECK(uslab_pool_avail(NULL) == 0, "avail of NULL");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void ext_double_free(void *arg)
{
	static uint64_t mem[4];
	struct uslab_cache *c = uslab_cache_create("pool-df", 16, NULL, USLAB_POOL_EXTERNAL);

	(void)arg;
	(uslab_cache_free)(c, mem);
	(uslab_cache_free)(c, mem);
}

static void put_null_array(void *arg)
{
	struct uslab_cache *c = uslab_cache_create("pool-null", 16, NULL, USLAB_POOL_EXTERNAL);

	(void)arg;
	uslab_pool_put_bulk(c, 3, NULL);
}

/*
 * A pool object put back twice, with other puts and gets between: the debug
 * tier (F) reports it at the second put (at cc44a97 the put copied it into
 * the sheaves unchecked, and it was handed out twice).
 */
static void debug_double_put(void *arg)
{
	struct uslab_cache_args a = { .reserve = 64 };
	struct uslab_cache *c =
		uslab_cache_create("pool-dbg", 256, &a, USLAB_POOL | USLAB_CONSISTENCY_CHECKS);
	void *p[8];

	(void)arg;
	if (!c || uslab_pool_get_bulk(c, 8, p))
		abort();
	uslab_pool_put_bulk(c, 2, p);
	uslab_pool_put_bulk(c, 6, p + 2);
	if (uslab_pool_get_bulk(c, 3, p + 2))
		abort();
	uslab_pool_put_bulk(c, 1, p); /* p[0]: free already */
}

static void test_misuse(void)
{
	static const struct death t[] = {
		{ "immediate double free into an external pool", ext_double_free, "double free" },
		{ "put of a NULL array", put_null_array, "NULL array" },
		{ "a pool object put twice, debug tier", debug_double_put,
		  "uslab: BUG pool-dbg: double free at" },
	};

	EXPECT_DEATHS(t);
}

int main(void)
{
	RUN(test_reserve);
	RUN(test_destroy_busy);
	RUN(test_external);
	RUN(test_threads_external);
	RUN(test_threads_slab);
	RUN(test_args);
	RUN(test_misuse);
	return 0;
}
