// SPDX-License-Identifier: MIT
/*
 * test_numa.c - NUMA: objects from the caller's node, frees sent home in
 * batches, the _node calls, migrations, fork, shrink, destroy, per-node
 * statistics. Run under a fake topology (ctest sets USLAB_NUMA_FAKE):
 *
 *	api_numa NODES [SEED]
 *
 * NODES: the node count the environment gives (2 or 4); CPU 0 is expected
 * on node 0 and CPU 1 on node 1 (USLAB_NUMA_FAKE=0:0,1:1, or a count). On
 * a machine of fewer than two CPUs it says so and skips. One test runs
 * only on a real NUMA machine (two nodes with memory, no USLAB_NUMA_FAKE):
 * move_pages() must report that each object's page is on the node uslab
 * placed it; elsewhere it says that it skipped.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include "../test.h"
#include <uslab/kmem.h>

#define OBJ 128
#define N 20000
#define RING 4096

static unsigned int nodes;
static uint64_t seed = 1;
/* Checks made on worker threads (CHECK's counter is the main thread's): folded in at join. */
static __thread unsigned long tchecks;
static _Atomic unsigned long worker_checks;
#define TCHECK(cond, ...) CHECK_COUNTED(tchecks, cond, __VA_ARGS__)

/*
 * Whether @p is of another node than @node. An object the sampling guard
 * handed out (USLAB_GUARD, one slow path in many: its slots are one mapping,
 * no node's) counts as local.
 */
static bool elsewhere(const void *p, int node)
{
	int n = uslab_node_of(p);

	return n >= 0 && n != node;
}

static void join(pthread_t t)
{
	pthread_join(t, NULL);
	test_checks += atomic_exchange(&worker_checks, 0);
}

/* A worker's last step: its checks counted. */
static void *worker_done(void)
{
	atomic_fetch_add(&worker_checks, tchecks);
	return NULL;
}

/* Pin the calling thread to @cpu; its node is then uslab_numa_node(). */
static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	TCHECK(!pthread_setaffinity_np(pthread_self(), sizeof(set), &set), "pin to CPU %d", cpu);
	sched_yield();
	TCHECK(sched_getcpu() == cpu, "running on CPU %d", cpu);
}

static struct uslab_cache *make_cache(const char *name)
{
	struct uslab_cache *c = uslab_cache_create(name, OBJ, NULL, 0);

	CHECK(c, "create %s", name);
	return c;
}

static void stamp(void *p, uint64_t v)
{
	uint64_t *w = p;

	for (size_t i = 0; i < OBJ / 8; i++)
		w[i] = v + i;
}

static void check_stamp(const void *p, uint64_t v)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < OBJ / 8; i++)
		TCHECK(w[i] == v + i, "object %p word %zu: %#llx, want %#llx", p, i,
		       (unsigned long long)w[i], (unsigned long long)(v + i));
}

/* The topology the environment asked for. */
static void test_topology(void)
{
	CHECK(uslab_numa_nodes() == (int)nodes, "nodes %d, want %u", uslab_numa_nodes(), nodes);
	pin(1);
	CHECK(uslab_numa_node() == 1, "CPU 1 on node %d", uslab_numa_node());
	pin(0);
	CHECK(uslab_numa_node() == 0, "CPU 0 on node %d", uslab_numa_node());
	for (unsigned int n = 0; n < nodes; n++)
		CHECK(uslab_numa_node_has_memory((int)n), "node %u has memory", n);
	CHECK(!uslab_numa_node_has_memory((int)nodes) && !uslab_numa_node_has_memory(-1),
	      "no node beyond");
}

/* Each of two threads, pinned one per node, allocates only its node's objects. */
struct loop_arg {
	struct uslab_cache *c;
	int cpu;
	unsigned long remote;
};

static void *loop_main(void *arg)
{
	struct loop_arg *a = arg;
	static __thread void *objs[N];
	int node;

	pin(a->cpu);
	node = uslab_numa_node();
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			objs[i] = uslab_cache_alloc(a->c);
			TCHECK(objs[i], "alloc");
			a->remote += elsewhere(objs[i], node);
			stamp(objs[i], (uint64_t)a->cpu << 32 | (uint64_t)i);
		}
		for (int i = 0; i < N; i++) {
			check_stamp(objs[i], (uint64_t)a->cpu << 32 | (uint64_t)i);
			uslab_cache_free(a->c, objs[i]);
		}
	}
	return worker_done();
}

static void test_local_loops(void)
{
	struct uslab_cache *c = make_cache("numa-loops");
	struct loop_arg a[2] = { { c, 0, 0 }, { c, 1, 0 } };
	pthread_t t[2];
	struct uslab_node_stats ns[2];
	struct uslab_cache_stats st = cache_stats(c);

	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, loop_main, &a[i]), "thread");
	for (int i = 0; i < 2; i++)
		join(t[i]);
	CHECK(a[0].remote == 0 && a[1].remote == 0, "objects of another node: %lu, %lu",
	      a[0].remote, a[1].remote);
	st = cache_stats(c);
	for (int n = 0; n < 2; n++) {
		CHECK(!uslab_cache_node_stats(c, n, &ns[n]), "node stats");
		CHECK(ns[n].num_slabs > 0, "node %d has slabs", n);
	}
	CHECK(ns[0].num_slabs + ns[1].num_slabs <= st.num_slabs, "per-node slabs add up");
	CHECK(uslab_cache_node_stats(c, (int)nodes, &ns[0]) == -EINVAL, "no such node");
	CHECK(uslab_cache_validate(c) == 0, "validate");
	CHECK(uslab_cache_destroy(c) == 0, "destroy: every object back");
}

/* Producer on node 0, consumer on node 1: the producer's objects are all node 0's. */
struct ring {
	void *slot[RING];
	_Atomic unsigned long head, tail;
	struct uslab_cache *c;
	unsigned long count, remote, own_remote;
};

static void *producer(void *arg)
{
	struct ring *r = arg;

	pin(0);
	for (unsigned long i = 0; i < r->count; i++) {
		void *p = uslab_cache_alloc(r->c);

		TCHECK(p, "alloc");
		r->remote += elsewhere(p, 0);
		stamp(p, i);
		while (atomic_load(&r->head) - atomic_load(&r->tail) == RING)
			sched_yield();
		r->slot[atomic_load(&r->head) % RING] = p;
		atomic_fetch_add(&r->head, 1);
	}
	return worker_done();
}

static void *consumer(void *arg)
{
	struct ring *r = arg;
	void *own[64];

	pin(1);
	for (unsigned long i = 0; i < r->count; i++) {
		void *p;

		while (atomic_load(&r->tail) == atomic_load(&r->head))
			sched_yield();
		p = r->slot[atomic_load(&r->tail) % RING];
		atomic_fetch_add(&r->tail, 1);
		check_stamp(p, i);
		uslab_cache_free(r->c, p);
		if (i % 1000 == 0) {
			/* Its own allocations: node 1's, never the node 0 objects it freed. */
			for (int k = 0; k < 64; k++) {
				own[k] = uslab_cache_alloc(r->c);
				TCHECK(own[k], "alloc");
				r->own_remote += elsewhere(own[k], 1);
			}
			for (int k = 0; k < 64; k++)
				uslab_cache_free(r->c, own[k]);
		}
	}
	return worker_done();
}

static void test_producer_consumer(void)
{
	struct ring *r = calloc(1, sizeof(*r));
	pthread_t tp, tc;
	struct uslab_cache_stats st;

	CHECK(r, "ring");
	r->c = make_cache("numa-prodcons");
	r->count = 200000;
	CHECK(!pthread_create(&tp, NULL, producer, r) && !pthread_create(&tc, NULL, consumer, r),
	      "threads");
	join(tp);
	join(tc);
	CHECK(r->remote == 0, "producer got %lu objects of node 1", r->remote);
	CHECK(r->own_remote == 0, "consumer got %lu objects of node 0", r->own_remote);
	st = cache_stats(r->c);
	CHECK(st.events[USLAB_STAT_NUMA_REMOTE_FREE] >= r->count - 2 * 1024,
	      "remote frees %llu of %lu",
	      (unsigned long long)st.events[USLAB_STAT_NUMA_REMOTE_FREE], r->count);
	/* Batched: at least 32 objects per node lock or barn trade. */
	CHECK(st.events[USLAB_STAT_NUMA_REMOTE_BATCH] * 32 <=
		      st.events[USLAB_STAT_NUMA_REMOTE_FREE],
	      "remote frees %llu in %llu batches",
	      (unsigned long long)st.events[USLAB_STAT_NUMA_REMOTE_FREE],
	      (unsigned long long)st.events[USLAB_STAT_NUMA_REMOTE_BATCH]);
	CHECK(uslab_cache_validate(r->c) == 0, "validate");
	CHECK(uslab_cache_destroy(r->c) == 0, "destroy");
	free(r);
}

/* The _node calls, from a thread on node 0. */
static void test_node_calls(void)
{
	struct uslab_cache *c = make_cache("numa-node-calls");
	void *objs[500], *p;
	int far = (int)nodes - 1;

	pin(0);
	for (int i = 0; i < 200; i++) {
		p = uslab_cache_alloc_node(c, far);
		CHECK(p && uslab_node_of(p) == far, "alloc_node(%d): node %d", far,
		      uslab_node_of(p));
		stamp(p, (uint64_t)i);
		objs[i] = p;
	}
	for (int i = 0; i < 200; i++) {
		check_stamp(objs[i], (uint64_t)i);
		uslab_cache_free(c, objs[i]);
	}
	p = uslab_cache_alloc_node(c, far | USLAB_NODE_STRICT);
	CHECK(p && uslab_node_of(p) == far, "strict");
	uslab_cache_free(c, p);
	p = uslab_cache_alloc_node(c, USLAB_NUMA_NO_NODE);
	CHECK(p && uslab_node_of(p) == 0, "no node: the caller's");
	uslab_cache_free(c, p);
	CHECK(uslab_cache_alloc_bulk_node(c, far, 500, objs) == 500, "bulk_node");
	for (int i = 0; i < 500; i++)
		CHECK(uslab_node_of(objs[i]) == far, "bulk_node object %d on node %d", i,
		      uslab_node_of(objs[i]));
	uslab_cache_free_bulk(c, 500, objs);
	CHECK(uslab_cache_alloc_bulk_node(c, 0, 500, objs) == 500, "bulk_node local");
	uslab_cache_free_bulk(c, 500, objs);

	errno = 0;
	CHECK(!uslab_cache_alloc_node(c, -5) && errno == EINVAL, "node -5: EINVAL");
	errno = 0;
	CHECK(!uslab_cache_alloc_node(c, 1 << 20) && errno == EINVAL, "node 2^20: EINVAL");
	errno = 0;
	CHECK(!uslab_cache_alloc_bulk_node(c, -7, 4, objs) && errno == EINVAL, "bulk: EINVAL");
	/* A node the machine does not have: the caller's, or ENOMEM if strict. */
	p = uslab_cache_alloc_node(c, 9);
	CHECK(p && uslab_node_of(p) == 0, "node 9: the caller's");
	uslab_cache_free(c, p);
	errno = 0;
	CHECK(!uslab_cache_alloc_node(c, 9 | USLAB_NODE_STRICT) && errno == ENOMEM,
	      "node 9 strict: ENOMEM");

	/* kmalloc_node: a class, and a large object. */
	size_t sizes[] = { 8, 64, 3000, 40000, 300000 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *k = uslab_kmalloc_node(sizes[i], far);

		CHECK(k && uslab_node_of(k) == far, "kmalloc_node(%zu): node %d", sizes[i],
		      uslab_node_of(k));
		memset(k, 0x5a, sizes[i]);
		uslab_kfree(k);
		k = uslab_kzalloc_node(sizes[i], far | USLAB_NODE_STRICT);
		CHECK(k && uslab_node_of(k) == far, "kzalloc_node(%zu)", sizes[i]);
		for (size_t b = 0; b < sizes[i]; b++)
			CHECK(!k[b], "kzalloc_node byte %zu", b);
		uslab_kfree(k);
	}
	errno = 0;
	CHECK(!uslab_kmalloc_node(64, -3) && errno == EINVAL, "kmalloc_node(-3): EINVAL");

	/* <uslab/kmem.h>. */
	p = kmem_cache_alloc_node(c, GFP_KERNEL | __GFP_THISNODE | __GFP_ZERO, far);
	CHECK(p && uslab_node_of(p) == far && !((char *)p)[OBJ - 1], "kmem_cache_alloc_node");
	kmem_cache_free(c, p);
	p = kmalloc_node(100, GFP_KERNEL, NUMA_NO_NODE);
	CHECK(p && uslab_node_of(p) == numa_mem_id(), "kmalloc_node(NUMA_NO_NODE)");
	kfree(p);
	p = kzalloc_node(100, GFP_KERNEL, far);
	CHECK(p && uslab_node_of(p) == far, "kzalloc_node");
	kfree(p);
	CHECK(uslab_node_of(&p) == -1, "not uslab's: -1");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/*
 * uslab_cache_args.node: a pool's reserve from the node named (0: the
 * creating thread's; node 0 from elsewhere with USLAB_NODE_STRICT), its
 * loose objects counted there; bad values refused.
 */
static struct uslab_cache *make_pool(int node, size_t reserve, unsigned int flags)
{
	struct uslab_cache_args a = { .reserve = reserve, .node = node };

	return uslab_cache_create("numa-pool", OBJ, &a, flags);
}

static void check_pool_node(int node, int want)
{
	enum { R = 1000 };
	struct uslab_cache *c = make_pool(node, R, USLAB_POOL);
	struct uslab_node_stats st;
	void *objs[R];

	CHECK(c, "pool with node %#x: errno %d", node, errno);
	CHECK(uslab_cache_node_stats(c, want, &st) == 0 && st.pool_objs == R,
	      "node %#x: %lu of the reserve kept on node %d", node, st.pool_objs, want);
	/* From a thread of another node too: the reserve first (loose, any node's). */
	CHECK(uslab_cache_alloc_bulk(c, R, objs) == R, "the reserve");
	for (int i = 0; i < R; i++)
		CHECK(uslab_node_of(objs[i]) == want, "node %#x: reserve object %d on node %d",
		      node, i, uslab_node_of(objs[i]));
	uslab_cache_free_bulk(c, R, objs);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

static void test_pool_node(void)
{
	int far = (int)nodes - 1;
	struct uslab_cache *c;

	pin(0);
	check_pool_node(far, far);
	check_pool_node(far | USLAB_NODE_STRICT, far);
	check_pool_node(0, 0); /* the creating thread's */
	check_pool_node(USLAB_NUMA_NO_NODE, 0);
	check_pool_node(9, 0); /* no such node: the nearest with memory, the caller's */
	pin(1);
	check_pool_node(0, 1);
	check_pool_node(0 | USLAB_NODE_STRICT, 0);
	pin(0);

	errno = 0;
	CHECK(!make_pool(9 | USLAB_NODE_STRICT, 10, USLAB_POOL) && errno == ENOMEM,
	      "strict, no such node: ENOMEM");
	errno = 0;
	CHECK(!make_pool(-5, 10, USLAB_POOL) && errno == EINVAL, "node -5: EINVAL");
	errno = 0;
	CHECK(!make_pool(1 << 20, 10, 0) && errno == EINVAL, "node 2^20, not a pool: EINVAL");
	/* Another cache: checked, ignored. */
	c = make_pool(far, 0, 0);
	CHECK(c, "a cache with a node");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	/* An external pool: the node named, strict or not; nothing to allocate. */
	c = make_pool(far | USLAB_NODE_STRICT, 64, USLAB_POOL_EXTERNAL);
	CHECK(c, "external pool of node %d", far);
	{
		static char objs[64][OBJ];
		void *p[64];
		struct uslab_node_stats st;

		for (int i = 0; i < 64; i++)
			p[i] = objs[i];
		uslab_pool_put_bulk(c, 64, p);
		uslab_thread_flush();
		CHECK(uslab_cache_node_stats(c, far, &st) == 0 && st.pool_objs == 64,
		      "external pool: %lu of 64 kept on node %d", st.pool_objs, far);
		CHECK(uslab_pool_get_bulk(c, 64, p) == 0, "external pool: all 64 back");
	}
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/*
 * A thread that moves: what it allocates follows it, what it holds from
 * before goes home when freed, and nothing is handed out twice.
 */
static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void test_migration(void)
{
	struct uslab_cache *c = make_cache("numa-migrate");
	enum { M = 3000, MOVES = 8 };
	void **held = calloc(M * MOVES, sizeof(void *));
	unsigned long wrong = 0;
	struct uslab_cache_stats st;

	CHECK(held, "array");
	for (int m = 0; m < MOVES; m++) {
		int cpu = m & 1;

		pin(cpu);
		for (int i = 0; i < M; i++) {
			void *p = uslab_cache_alloc(c);

			CHECK(p, "alloc");
			wrong += elsewhere(p, cpu);
			stamp(p, (uint64_t)(m * M + i));
			held[m * M + i] = p;
		}
		/* Free half of what an earlier move took (remote frees now and then). */
		if (m >= 1)
			for (int i = 0; i < M / 2; i++) {
				void **q = &held[(m - 1) * M + 2 * i];

				check_stamp(*q, (uint64_t)((m - 1) * M + 2 * i));
				uslab_cache_free(c, *q);
				*q = NULL;
			}
	}
	CHECK(wrong == 0, "%lu objects of the other node after a move", wrong);
	qsort(held, M * MOVES, sizeof(void *), cmp_ptr);
	for (int i = 1; i < M * MOVES; i++)
		CHECK(!held[i] || held[i] != held[i - 1], "object handed out twice: %p", held[i]);
	for (int i = 0; i < M * MOVES; i++)
		uslab_cache_free(c, held[i]);
	st = cache_stats(c);
	CHECK(st.events[USLAB_STAT_NUMA_MOVED] >= 1, "moves counted: %llu",
	      (unsigned long long)st.events[USLAB_STAT_NUMA_MOVED]);
	CHECK(uslab_cache_validate(c) == 0, "validate");
	uslab_thread_flush();
	CHECK(uslab_cache_shrink(c) == 0, "shrink");
	CHECK(cache_active(c) == 0, "active after flush and shrink: %lu", cache_active(c));
	for (int n = 0; n < (int)nodes; n++) {
		struct uslab_node_stats ns;

		CHECK(!uslab_cache_node_stats(c, n, &ns) && ns.active_objs == 0, "node %d active",
		      n);
	}
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	free(held);
}

/* Mixed kmalloc sizes in both nodes' threads: each gets its node's memory. */
static void *kmalloc_main(void *arg)
{
	int cpu = (int)(intptr_t)arg;
	uint64_t s = seed + (uint64_t)cpu;
	unsigned long wrong = 0;
	void *p[256];

	pin(cpu);
	for (int round = 0; round < 200; round++) {
		for (int i = 0; i < 256; i++) {
			size_t size = 1 + rnd_next(&s) % 9000;

			p[i] = uslab_kmalloc(size);
			TCHECK(p[i], "kmalloc");
			memset(p[i], cpu, size < 16 ? size : 16);
			wrong += elsewhere(p[i], cpu);
		}
		for (int i = 0; i < 256; i++)
			uslab_kfree(p[i]);
	}
	TCHECK(wrong == 0, "kmalloc on CPU %d: %lu objects of another node", cpu, wrong);
	return worker_done();
}

static void test_kmalloc_mixed(void)
{
	pthread_t t[2];

	for (intptr_t i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, kmalloc_main, (void *)i), "thread");
	for (int i = 0; i < 2; i++)
		join(t[i]);
}

/* A fork: the child allocates and frees on its node and exits cleanly. */
static void test_fork(void)
{
	struct uslab_cache *c = make_cache("numa-fork");
	void *keep = uslab_cache_alloc(c);
	pid_t pid;
	int status;

	pin(1);
	pid = fork();
	if (pid == 0) {
		void *p[1000];
		int bad = 0;

		for (int i = 0; i < 1000; i++) {
			p[i] = uslab_cache_alloc(c);
			bad |= !p[i] || elsewhere(p[i], 1);
		}
		for (int i = 0; i < 1000; i++)
			uslab_cache_free(c, p[i]);
		uslab_cache_free(c, keep); /* (node 0's, freed on node 1) */
		_exit(bad || uslab_cache_validate(c) != 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	uslab_cache_free(c, keep);
	pin(0);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* Only on a real NUMA machine: the kernel placed each node's objects on it. */
static void test_real_placement(void)
{
	struct uslab_cache *c;

	if (getenv("USLAB_NUMA_FAKE") || uslab_numa_nodes() < 2) {
		printf("skipped test_real_placement: not a NUMA machine (or a fake topology)\n");
		return;
	}
	c = make_cache("numa-real");
	for (int n = 0; n < uslab_numa_nodes(); n++) {
		void *p;
		int status = -1;

		if (!uslab_numa_node_has_memory(n))
			continue;
		p = uslab_cache_alloc_node(c, n | USLAB_NODE_STRICT);
		CHECK(p, "alloc on node %d", n);
		memset(p, 1, OBJ); /* placed at the first touch */
		CHECK(syscall(SYS_move_pages, 0, 1UL, &p, NULL, &status, 0) == 0, "move_pages");
		CHECK(status == n, "object of node %d is on node %d", n, status);
		uslab_cache_free(c, p);
	}
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

int main(int argc, char **argv)
{
	nodes = argc > 1 ? (unsigned int)atoi(argv[1]) : 2;
	if (argc > 2)
		seed = strtoull(argv[2], NULL, 0);
	RUN(test_real_placement);
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		printf("skipped: fewer than two CPUs, no thread can be pinned to node 1\n");
		return 0;
	}
	if (!getenv("USLAB_NUMA_FAKE")) {
		printf("skipped: USLAB_NUMA_FAKE unset (ctest sets it)\n");
		return 0;
	}
	RUN(test_topology);
	RUN(test_node_calls);
	RUN(test_pool_node);
	RUN(test_local_loops);
	RUN(test_producer_consumer);
	RUN(test_migration);
	RUN(test_kmalloc_mixed);
	RUN(test_fork);
	return 0;
}
