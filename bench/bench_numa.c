// SPDX-License-Identifier: MIT
/*
 * bench_numa.c - NUMA locality and its cost (issue 38): objects handed out
 * on the caller's node, producer -> consumer throughput with remote frees,
 * and a _node allocation of another node beside the local path.
 *
 *	numa [OBJS [REPS]]	(defaults 1000000 5)
 *
 * Needs two nodes with one CPU each: a NUMA machine, or a fake topology
 * (USLAB_NUMA_FAKE=0:0,1:1, which the suite sets); thread A runs on CPU 0
 * (node 0), thread B on CPU 1 (node 1). Without CPUs 0 and 1 (one CPU, or
 * a cpuset) every figure is printed as "skipped" and the status is 0. Run it with USLAB_NUMA=0 too: the
 * variant is "on" when uslab works with two nodes, else "off".
 *
 * Where an object is: with NUMA on, the node uslab placed its slab on
 * (uslab_node_of(); on a real machine mbind put the pages there). With it
 * off uslab has no nodes, so the program models the kernel's first-touch
 * placement, which a node-blind allocator gets: a page is on the node of
 * the first thread that got an object in it (and wrote it). "local" is the
 * share of objects handed out on the node of the thread that got them.
 *
 * Objects are 256 bytes; each is written (its first and last words) when
 * handed out and checked before it is freed. CSV lines, the median of REPS:
 *
 *   loops      local     two threads, one per node, each allocating and
 *                        freeing OBJS / 2 objects in rounds of 10,000
 *   prodcons   local     A allocates OBJS objects, B frees them (a ring of
 *                        4,096, bursts of 32): A's objects on node 0
 *   prodcons   mops      millions of objects through the ring per second
 *   prodcons   per_batch B's remote frees per batch sent home (on: the
 *                        statistics' numa_remote_free / numa_remote_batch)
 *   kmalloc    local     both threads, uslab_kmalloc of random sizes 8 B
 *                        to 4 KiB (seeded), rounds of 256
 *   node       local_ns  A: uslab_cache_alloc + uslab_cache_free, per pair
 *   node       remote_ns A: uslab_cache_alloc_node(c, 1) + uslab_cache_free
 *                        (the object goes home through A's remote sheaf)
 */
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <uslab.h>

#define SIZE 256
#define RING 4096
#define BURST 32
#define PAGES (1u << 22) /* first-touch map entries */

#define die(...) (fprintf(stderr, "numa: " __VA_ARGS__), fputc('\n', stderr), exit(1))

static struct uslab_cache *cache;
static unsigned long objs = 1000000;
static bool numa;
static pthread_barrier_t start;

/* First-touch model (NUMA off): page -> node of the first thread to get an object there. */
static _Atomic uintptr_t page_key[PAGES];
static _Atomic uint8_t
	page_node[PAGES]; /* (atomic: another thread waits for the claimer's store) */

static int where(const void *p, int me)
{
	uintptr_t page = (uintptr_t)p >> 12, h = (page * 0x9e3779b97f4a7c15ull) >> 42;

	if (numa)
		return uslab_node_of(p);
	for (;; h = (h + 1) & (PAGES - 1)) {
		uintptr_t k = atomic_load_explicit(&page_key[h], memory_order_acquire);

		if (k == page + 1) {
			uint8_t n;

			/* (its claimer is storing it; a plain load could be hoisted out of the loop) */
			while (!(n = atomic_load_explicit(&page_node[h], memory_order_acquire)))
				;
			return n - 1;
		}
		if (!k) {
			uintptr_t zero = 0;

			if (atomic_compare_exchange_strong(&page_key[h], &zero, page + 1)) {
				atomic_store_explicit(&page_node[h], (uint8_t)(me + 1),
						      memory_order_release);
				return me;
			}
			h = (h - 1) & (PAGES - 1); /* lost: look at this entry again */
		}
	}
}

static void pin(int cpu)
{
	pin_to_cpu(cpu);
	if (sched_getcpu() != cpu)
		die("cannot run on CPU %d", cpu);
}

/* Whether the calling thread may run on @cpu (the machine has it, no cpuset excludes it). */
static bool cpu_usable(int cpu)
{
	cpu_set_t set;

	return !sched_getaffinity(0, sizeof(set), &set) && CPU_ISSET(cpu, &set);
}

static void *get(int me, unsigned long *local)
{
	uint64_t *p = uslab_cache_alloc(cache);

	if (!p)
		die("alloc");
	*local += where(p, me) == me;
	p[0] = (uint64_t)(uintptr_t)p;
	p[SIZE / 8 - 1] = ~(uint64_t)(uintptr_t)p;
	return p;
}

static void put(void *obj)
{
	uint64_t *p = obj;

	if (p[0] != (uint64_t)(uintptr_t)p || p[SIZE / 8 - 1] != ~(uint64_t)(uintptr_t)p)
		die("object %p overwritten", obj);
	uslab_cache_free(cache, p);
}

/* ------------------------------------------------------------ loops */

struct loops {
	int cpu;
	unsigned long local, total;
};

static void *loops_main(void *arg)
{
	struct loops *l = arg;
	void **held = malloc(10000 * sizeof(void *));

	pin(l->cpu);
	pthread_barrier_wait(&start);
	for (unsigned long done = 0; done < objs / 2; done += 10000) {
		for (int i = 0; i < 10000; i++)
			held[i] = get(l->cpu, &l->local);
		for (int i = 0; i < 10000; i++)
			put(held[i]);
		l->total += 10000;
	}
	free(held);
	return NULL;
}

static double run_loops(void)
{
	struct loops l[2] = { { .cpu = 0 }, { .cpu = 1 } };
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, loops_main, &l[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 100.0 * (double)(l[0].local + l[1].local) / (double)(l[0].total + l[1].total);
}

/* --------------------------------------------------------- prodcons */

static struct {
	void *slot[RING];
	_Atomic unsigned long head, tail;
	unsigned long local;
	double t0, t1; /* the producer's start, the consumer's end (ns) */
} ring;

static void *producer(void *arg)
{
	(void)arg;
	pin(0);
	pthread_barrier_wait(&start);
	ring.t0 = wall_ns();
	for (unsigned long i = 0; i < objs; i += BURST) {
		unsigned long h = atomic_load_explicit(&ring.head, memory_order_relaxed);

		while (h + BURST - atomic_load_explicit(&ring.tail, memory_order_acquire) > RING)
			sched_yield();
		for (int k = 0; k < BURST; k++)
			ring.slot[(h + k) % RING] = get(0, &ring.local);
		atomic_store_explicit(&ring.head, h + BURST, memory_order_release);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	pin(1);
	pthread_barrier_wait(&start);
	for (unsigned long i = 0; i < objs; i += BURST) {
		unsigned long t = atomic_load_explicit(&ring.tail, memory_order_relaxed);

		while (atomic_load_explicit(&ring.head, memory_order_acquire) - t < BURST)
			sched_yield();
		for (int k = 0; k < BURST; k++)
			put(ring.slot[(t + k) % RING]);
		atomic_store_explicit(&ring.tail, t + BURST, memory_order_release);
	}
	ring.t1 = wall_ns();
	return NULL;
}

static void run_prodcons(double *local, double *mops, double *per_batch)
{
	struct uslab_cache_stats a, b;
	pthread_t t[2];

	atomic_store(&ring.head, 0);
	atomic_store(&ring.tail, 0);
	ring.local = 0;
	uslab_cache_stats(cache, &a);
	pthread_barrier_init(&start, NULL, 2);
	pthread_create(&t[0], NULL, producer, NULL);
	pthread_create(&t[1], NULL, consumer, NULL);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	*mops = (double)objs / (ring.t1 - ring.t0) * 1e3; /* objects per ns, times 1e3 */
	pthread_barrier_destroy(&start);
	uslab_cache_stats(cache, &b);
	*local = 100.0 * (double)ring.local / (double)objs;
	{
		uint64_t frees = b.events[USLAB_STAT_NUMA_REMOTE_FREE] -
				 a.events[USLAB_STAT_NUMA_REMOTE_FREE];
		uint64_t batches = b.events[USLAB_STAT_NUMA_REMOTE_BATCH] -
				   a.events[USLAB_STAT_NUMA_REMOTE_BATCH];

		*per_batch = batches ? (double)frees / (double)batches : 0;
	}
}

/* ---------------------------------------------------------- kmalloc */

struct km {
	int cpu;
	unsigned long local, total;
};

static void *km_main(void *arg)
{
	struct km *k = arg;
	uint64_t seed = 12345 + (uint64_t)k->cpu;
	void *held[256];

	pin(k->cpu);
	pthread_barrier_wait(&start);
	for (unsigned long done = 0; done < objs / 2; done += 256) {
		for (int i = 0; i < 256; i++) {
			size_t size = 8 + rnd(&seed) % 4089;

			held[i] = uslab_kmalloc(size);
			if (!held[i])
				die("kmalloc");
			memset(held[i], 1, 8);
			k->local += where(held[i], k->cpu) == k->cpu;
		}
		for (int i = 0; i < 256; i++)
			uslab_kfree(held[i]);
		k->total += 256;
	}
	return NULL;
}

static double run_kmalloc(void)
{
	struct km k[2] = { { .cpu = 0 }, { .cpu = 1 } };
	pthread_t t[2];

	pthread_barrier_init(&start, NULL, 2);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, km_main, &k[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	return 100.0 * (double)(k[0].local + k[1].local) / (double)(k[0].total + k[1].total);
}

/* ------------------------------------------------------------- node */

/* ns per alloc+free pair on CPU 0: the local path, or node 1's objects (NUMA on). */
static double run_node(bool remote)
{
	unsigned long n = objs;
	double t0;

	pin(0);
	t0 = wall_ns() / 1e9;
	for (unsigned long i = 0; i < n; i++) {
		uint64_t *p = remote ? uslab_cache_alloc_node(cache, 1) : uslab_cache_alloc(cache);

		if (!p)
			die("alloc");
		p[0] = i;
		__asm__ __volatile__("" : : "r"(p) : "memory");
		uslab_cache_free(cache, p);
	}
	return (wall_ns() / 1e9 - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv)
{
	int reps = 5;
	double v[8][16];
	const char *names[][2] = { { "loops", "local" },   { "prodcons", "local" },
				   { "prodcons", "mops" }, { "prodcons", "per_batch" },
				   { "kmalloc", "local" }, { "node", "local_ns" },
				   { "node", "remote_ns" } };

	if (argc > 1)
		objs = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		reps = atoi(argv[2]);
	if (reps < 1 || reps > 16 || objs < 10000)
		die("usage: numa [OBJS >= 10000 [REPS 1..16]]");
	if (!cpu_usable(0) || !cpu_usable(1)) {
		/* A one-CPU machine or cpuset: every figure "skipped" (not measured), status 0. */
		fprintf(stderr, "numa: needs CPUs 0 and 1: skipped\n");
		for (int m = 0; m < 7; m++)
			printf("CSV,numa,%s,%s,%s,skipped\n", uslab_numa_nodes() > 1 ? "on" : "off",
			       names[m][0], names[m][1]);
		return 0;
	}
	numa = uslab_numa_nodes() > 1;
	if (numa && (uslab_numa_nodes() != 2 || !uslab_numa_node_has_memory(1)))
		die("needs two nodes with memory (USLAB_NUMA_FAKE=0:0,1:1)");
	cache = uslab_cache_create("bench-numa", SIZE, NULL, 0);
	if (!cache)
		die("create");
	for (int r = 0; r < reps; r++) {
		pthread_barrier_init(&start, NULL, 2);
		v[0][r] = run_loops();
		pthread_barrier_destroy(&start);
		run_prodcons(&v[1][r], &v[2][r], &v[3][r]);
		v[4][r] = run_kmalloc();
		v[5][r] = run_node(false);
		v[6][r] = numa ? run_node(true) : v[5][r];
	}
	for (int m = 0; m < 7; m++)
		printf("CSV,numa,%s,%s,%s,%.4f\n", numa ? "on" : "off", names[m][0], names[m][1],
		       median(v[m], reps));
	uslab_thread_flush();
	return uslab_cache_destroy(cache) ? 1 : 0;
}
