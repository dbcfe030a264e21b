// SPDX-License-Identifier: MIT
/*
 * test_mempool.c - an rte_mempool on the "uslab" ops (dpdk/uslab_mempool.c),
 * loaded the way an application loads it (EAL -d), from EAL and non-EAL
 * threads.
 *
 *   test_mempool DRIVER.so CACHE_SIZE [ROUNDS]
 *
 * The pool: 4095 objects of 200 bytes, CACHE_SIZE objects per lcore cache
 * (0: every get and put goes to the ops; 256: EAL threads go through
 * DPDK's cache, non-EAL threads never have one). Checked:
 *
 *   1. the mempool uses the ops "uslab"; counts right after populate;
 *   2. the main lcore gets every object (all distinct, all of the pool's),
 *      one more fails with -ENOENT and takes nothing, a failed burst bigger
 *      than what is left takes nothing either; everything put back;
 *   3. the same from EAL lcore 1 (rte_eal_remote_launch), after the main
 *      lcore flushed its caches (DPDK's and uslab's: objects in another
 *      thread's cache are out of reach, with any ops);
 *   4. lcore 1 and two plain pthreads (not registered with EAL: no lcore
 *      id, no DPDK cache, the ops called directly) at once, ROUNDS rounds
 *      each of random bursts: never the same object held twice, every
 *      object's contents as its last holder stamped them (uslab never
 *      writes into them), objects moved between the three threads through
 *      a shared queue and put back by another thread than the one that got
 *      them;
 *   5. quiet again: rte_mempool_avail_count() == size, in_use 0 while
 *      lcore 1 still caches objects (uslab_pool_avail counts every
 *      thread's sheaves, DPDK every lcore cache), then, caches flushed,
 *      all objects got and checked once more; the mempool freed.
 *
 * Prints what it checked; exits 1 at the first failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

#include <uslab.h>

#define NOBJS 4095u
#define ELT_SIZE 200u
#define MAX_BURST 64u
#define HOLD 512u /* at most this many objects held by one thread */
#define MAGIC_FREE 0x66726565u
#define MAGIC_HELD 0x68656c64u

#define FAIL(...)                                                    \
	do {                                                         \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                        \
		fprintf(stderr, "\n");                               \
		exit(1);                                             \
	} while (0)
#define CHECK(cond, ...)                   \
	do {                               \
		if (!(cond))               \
			FAIL(__VA_ARGS__); \
	} while (0)

/* What a free object holds: its own address, then a fill byte to the end. */
struct stamp {
	uint32_t magic;
	uint32_t idx;
	void *self;
	uint64_t puts; /* how often it was put back */
	unsigned char fill[ELT_SIZE - 24];
};
_Static_assert(sizeof(struct stamp) == ELT_SIZE, "stamp fills the element");

static struct rte_mempool *mp;
static void *objs_sorted[NOBJS]; /* every object of the pool, by address */
static atomic_uint held[NOBJS];	 /* 1 while a thread holds object i */
static int stamped;		 /* objects carry a stamp (after step 2) */
static unsigned int rounds = 2000;

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

static void collect(struct rte_mempool *m, void *arg, void *obj, unsigned int i)
{
	(void)m;
	(void)arg;
	objs_sorted[i] = obj;
}

static unsigned int index_of(void *obj)
{
	void **p = bsearch(&obj, objs_sorted, NOBJS, sizeof(void *), cmp_ptr);

	CHECK(p, "%p is not an object of the pool", obj);
	return (unsigned int)(p - objs_sorted);
}

/* An object just got: the pool's, not held by anyone, contents intact. */
static void took(void *obj)
{
	struct stamp *s = obj;
	unsigned int i = index_of(obj);

	CHECK(atomic_exchange(&held[i], 1) == 0, "object %u (%p) handed out twice", i, obj);
	if (stamped) {
		CHECK(s->magic == MAGIC_FREE && s->self == obj && s->idx == i,
		      "object %u (%p): stamp overwritten (magic %#x self %p idx %u)", i, obj,
		      s->magic, s->self, s->idx);
		for (size_t k = 0; k < sizeof(s->fill); k++)
			CHECK(s->fill[k] == (unsigned char)(i + s->puts),
			      "object %u: byte %zu overwritten while free", i, k);
	}
	s->magic = MAGIC_HELD;
}

/* An object about to be put back: stamped, released. */
static void giving(void *obj)
{
	struct stamp *s = obj;
	unsigned int i = index_of(obj);

	CHECK(s->magic == MAGIC_HELD, "object %u put back twice", i);
	s->idx = i;
	s->self = obj;
	s->puts++;
	if (!stamped)
		s->puts = 0;
	memset(s->fill, (unsigned char)(i + s->puts), sizeof(s->fill));
	s->magic = MAGIC_FREE;
	CHECK(atomic_exchange(&held[i], 0) == 1, "object %u released but not held", i);
}

static void put_all(void **v, unsigned int n)
{
	for (unsigned int done = 0; done < n;) {
		unsigned int b = n - done < 32 ? n - done : 32;

		for (unsigned int k = 0; k < b; k++)
			giving(v[done + k]);
		rte_mempool_put_bulk(mp, v + done, b);
		done += b;
	}
}

/* This thread's caches back to the pool: DPDK's lcore cache, uslab's sheaves. */
static void flush_mine(void)
{
	struct rte_mempool_cache *c = rte_mempool_default_cache(mp, rte_lcore_id());

	if (c)
		rte_mempool_cache_flush(c, mp);
	uslab_thread_flush();
}

/*
 * Get every object in bursts of 32 then of 1, check the pool is empty and
 * that failed gets take nothing; put all back.
 */
static void get_everything(const char *who)
{
	static void *v[NOBJS + 1];
	unsigned int n = 0;
	int ret;

	while (n + 32 <= NOBJS && rte_mempool_get_bulk(mp, v + n, 32) == 0) {
		for (unsigned int k = 0; k < 32; k++)
			took(v[n + k]);
		n += 32;
	}
	while (n < NOBJS && rte_mempool_get(mp, &v[n]) == 0)
		took(v[n++]);
	CHECK(n == NOBJS, "%s: got %u of %u objects", who, n, NOBJS);
	ret = rte_mempool_get(mp, &v[n]);
	CHECK(ret == -ENOENT, "%s: get from an empty pool returned %d, not -ENOENT", who, ret);
	CHECK(rte_mempool_avail_count(mp) == 0 && rte_mempool_in_use_count(mp) == NOBJS,
	      "%s: all held: avail %u in use %u", who, rte_mempool_avail_count(mp),
	      rte_mempool_in_use_count(mp));
	/* 10 back, a burst of 11 fails and takes nothing, then 10 come back. */
	put_all(v + NOBJS - 10, 10);
	ret = rte_mempool_get_bulk(mp, v + NOBJS - 10, 11);
	CHECK(ret == -ENOENT, "%s: get 11 of 10 returned %d, not -ENOENT", who, ret);
	CHECK(rte_mempool_avail_count(mp) == 10, "%s: a failed get took objects: avail %u", who,
	      rte_mempool_avail_count(mp));
	CHECK(rte_mempool_get_bulk(mp, v + NOBJS - 10, 10) == 0, "%s: the 10 are gone", who);
	for (unsigned int k = NOBJS - 10; k < NOBJS; k++)
		took(v[k]);
	put_all(v, NOBJS);
	printf("ok %s: got all %u objects (distinct, the pool's%s), -ENOENT beyond, nothing "
	       "lost by failed gets\n",
	       who, NOBJS, stamped ? ", contents intact" : "");
}

static int lcore_everything(void *arg)
{
	(void)arg;
	CHECK(rte_lcore_id() == 1, "not on lcore 1");
	get_everything("EAL lcore 1");
	flush_mine();
	return 0;
}

/* Step 4: objects handed between threads through this queue. */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static void *queue[NOBJS];
static unsigned int q_len;
static atomic_uint moved; /* objects put back by another thread than their getter */
static pthread_barrier_t start;

static void mixed(unsigned int seed, const char *who)
{
	void *mine[HOLD];
	unsigned int n = 0, fails = 0;

	pthread_barrier_wait(&start);
	for (unsigned int r = 0; r < rounds; r++) {
		unsigned int b;

		seed = seed * 1103515245u + 12345u;
		b = 1 + (seed >> 16) % MAX_BURST;
		if (n + b <= HOLD && (seed >> 8) % 3) {
			if (rte_mempool_get_bulk(mp, mine + n, b) == 0) {
				for (unsigned int k = 0; k < b; k++)
					took(mine[n + k]);
				n += b;
			} else {
				fails++; /* the others hold the rest for now */
			}
		}
		/* Hand some to the queue, take some from it, put some back. */
		b = (seed >> 4) % 8;
		if (b > n)
			b = n;
		pthread_mutex_lock(&q_lock);
		for (unsigned int k = 0; k < b; k++)
			queue[q_len++] = mine[--n];
		b = (seed >> 12) % 8;
		while (b-- && q_len && n < HOLD) {
			mine[n++] = queue[--q_len];
			atomic_fetch_add(&moved, 1);
		}
		pthread_mutex_unlock(&q_lock);
		b = (seed >> 20) % MAX_BURST;
		if (b > n)
			b = n;
		put_all(mine + n - b, b);
		n -= b;
	}
	put_all(mine, n);
	printf("ok %s: %u rounds of random bursts (%u gets found the pool short)\n", who, rounds,
	       fails);
}

static int lcore_mixed(void *arg)
{
	(void)arg;
	mixed(1, "EAL lcore 1 (DPDK cache if any, then uslab)");
	return 0; /* its caches keep what they hold: counted all the same */
}

static int lcore_flush(void *arg)
{
	(void)arg;
	flush_mine();
	return 0;
}

static void *pthread_mixed(void *arg)
{
	unsigned int id = (unsigned int)(uintptr_t)arg;
	char who[80];

	CHECK(rte_lcore_id() == LCORE_ID_ANY, "the pthread has an lcore id");
	CHECK(rte_mempool_default_cache(mp, rte_lcore_id()) == NULL,
	      "a non-EAL thread has a DPDK cache");
	snprintf(who, sizeof(who), "non-EAL pthread %u (no DPDK cache: uslab's sheaves)", id);
	mixed(id + 2, who);
	return NULL; /* thread exit flushes its sheaves */
}

int main(int argc, char **argv)
{
	char *eal[] = { argv[0],
			"--no-huge",
			"--no-pci",
			"--no-shconf",
			"--no-telemetry",
			"-l",
			"0-1",
			"-m",
			"256",
			"--log-level",
			"*:warning",
			"-d",
			argc > 1 ? argv[1] : "",
			NULL };
	unsigned int cache_size;
	const char *ops;
	pthread_t t[2];
	int ret;

	if (argc < 3) {
		fprintf(stderr, "usage: %s DRIVER.so CACHE_SIZE [ROUNDS]\n", argv[0]);
		return 2;
	}
	cache_size = (unsigned int)strtoul(argv[2], NULL, 0);
	if (argc > 3)
		rounds = (unsigned int)strtoul(argv[3], NULL, 0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ret = rte_eal_init((int)(sizeof(eal) / sizeof(eal[0]) - 1), eal);
	CHECK(ret >= 0, "rte_eal_init: %s", rte_strerror(rte_errno));
	CHECK(rte_lcore_count() >= 2, "need lcores 0 and 1");

	/* 1. The pool, on the uslab ops. */
	mp = rte_mempool_create_empty("uslab_test", NOBJS, ELT_SIZE, cache_size, 0, SOCKET_ID_ANY,
				      0);
	CHECK(mp, "rte_mempool_create_empty: %s", rte_strerror(rte_errno));
	ret = rte_mempool_set_ops_byname(mp, "uslab", NULL);
	CHECK(ret == 0, "no mempool ops \"uslab\" (%d): was %s loaded?", ret, argv[1]);
	ret = rte_mempool_populate_default(mp);
	CHECK(ret == (int)NOBJS, "rte_mempool_populate_default: %d", ret);
	ops = rte_mempool_get_ops(mp->ops_index)->name;
	CHECK(strcmp(ops, "uslab") == 0, "ops %s", ops);
	CHECK(rte_mempool_avail_count(mp) == NOBJS && rte_mempool_in_use_count(mp) == 0,
	      "after populate: avail %u in use %u", rte_mempool_avail_count(mp),
	      rte_mempool_in_use_count(mp));
	CHECK(rte_mempool_obj_iter(mp, collect, NULL) == NOBJS, "rte_mempool_obj_iter");
	qsort(objs_sorted, NOBJS, sizeof(void *), cmp_ptr);
	printf("ok mempool of %u objects of %u bytes, cache %u, ops %s: avail %u, in use 0\n",
	       NOBJS, ELT_SIZE, cache_size, ops, NOBJS);

	/* 2. Everything from the main lcore; from here on objects are stamped. */
	get_everything("main lcore 0 (first use)");
	stamped = 1;
	get_everything("main lcore 0");
	flush_mine();

	/* 3. Everything from EAL lcore 1. */
	CHECK(rte_eal_remote_launch(lcore_everything, NULL, 1) == 0, "remote launch");
	CHECK(rte_eal_wait_lcore(1) == 0, "lcore 1 failed");

	/* 4. lcore 1 and two non-EAL pthreads at once. */
	pthread_barrier_init(&start, NULL, 3);
	for (unsigned int i = 0; i < 2; i++) {
		pthread_attr_t attr;
		cpu_set_t cpus;

		/* Any CPU, not the main lcore's only (EAL pinned this thread). */
		CPU_ZERO(&cpus);
		for (long c = 0; c < sysconf(_SC_NPROCESSORS_ONLN) && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, &cpus);
		pthread_attr_init(&attr);
		pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
		CHECK(pthread_create(&t[i], &attr, pthread_mixed, (void *)(uintptr_t)i) == 0,
		      "pthread_create");
		pthread_attr_destroy(&attr);
	}
	CHECK(rte_eal_remote_launch(lcore_mixed, NULL, 1) == 0, "remote launch");
	for (unsigned int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(rte_eal_wait_lcore(1) == 0, "lcore 1 failed");
	pthread_mutex_lock(&q_lock);
	put_all(queue, q_len);
	q_len = 0;
	pthread_mutex_unlock(&q_lock);
	CHECK(atomic_load(&moved) > 0, "no object moved between threads");
	printf("ok %u objects moved between threads through the queue\n", atomic_load(&moved));

	/* 5. Quiet: counts, then everything once more. */
	CHECK(rte_mempool_avail_count(mp) == NOBJS && rte_mempool_in_use_count(mp) == 0,
	      "quiet: avail %u in use %u", rte_mempool_avail_count(mp),
	      rte_mempool_in_use_count(mp));
	printf("ok quiet: avail %u, in use 0 (lcore 1's caches counted)\n", NOBJS);
	CHECK(rte_eal_remote_launch(lcore_flush, NULL, 1) == 0, "remote launch");
	CHECK(rte_eal_wait_lcore(1) == 0, "lcore 1 failed");
	flush_mine();
	get_everything("main lcore 0 (after the threads)");
	rte_mempool_free(mp);
	printf("ok mempool freed\n");
	rte_eal_cleanup();
	return 0;
}
