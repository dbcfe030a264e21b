// SPDX-License-Identifier: MIT
/*
 * test_mempool_numa.c - the "uslab" mempool driver honours mp->socket_id:
 * a pool of socket 1 is uslab's pool of node 1, and each node's threads
 * trade at their own node's barn. Run under a fake two-node topology
 * (ctest sets USLAB_NUMA_FAKE=0:0,1:1: CPU 0 on node 0, CPU 1 on node 1).
 *
 *   test_mempool_numa DRIVER.so
 *
 * This DPDK (--no-huge) has socket 0's memory only: it refuses to populate
 * a pool of socket 1 (rte_mempool_get_page_size() finds no heap). So the
 * pool has socket 1 while DPDK calls the driver's alloc, which reads the
 * field and creates the uslab pool on node 1, and socket 0 again for the
 * memory DPDK then lays the objects out in. Checked:
 *
 *   1. after populate (on CPU 0, node 0) the pool's loose objects are kept
 *      on node 1 (struct uslab_node_stats.pool_objs), its full sheaves in
 *      node 0's barn;
 *   2. a thread pinned to CPU 0 gets every object (each once, the pool's)
 *      and puts them back;
 *   3. a thread pinned to CPU 1 gets every object too: its own node's barn
 *      has none, and a get takes node 0's full sheaves rather than fail
 *      with -ENOENT; put back, node 1 keeps every one (its barn and the
 *      loose array), node 0 none; avail == size.
 *
 * Prints what it checked; exits 1 at the first failure. Without CPUs 0
 * and 1, or without the fake topology, it says that it skipped (exit 0).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mempool.h>

#include <uslab.h>
#include <uslab/stats.h>

#define NOBJS 2047u
#define ELT_SIZE 64u
#define BURST 32u

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			exit(1);                                             \
		}                                                            \
	} while (0)

static struct rte_mempool *mp;
static void *objs_sorted[NOBJS];
static void *got[NOBJS];

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

/* uslab's count of pool objects kept on @node. */
static unsigned long kept_on(int node)
{
	struct uslab_node_stats st;

	CHECK(uslab_cache_node_stats(mp->pool_data, node, &st) == 0, "node stats of node %d", node);
	return st.pool_objs;
}

/* Get every object in bursts (each once, all the pool's), put them back, flush. */
static void *everything(void *arg)
{
	int cpu = (int)(intptr_t)arg;
	cpu_set_t set;
	unsigned int n = 0;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK(pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0, "pin to CPU %d", cpu);
	CHECK(uslab_numa_node() == cpu, "CPU %d is on fake node %d", cpu, uslab_numa_node());
	while (n < NOBJS) {
		unsigned int k = NOBJS - n < BURST ? NOBJS - n : BURST;
		int ret = rte_mempool_get_bulk(mp, got + n, k);

		CHECK(ret == 0, "CPU %d: get of %u after %u objects: %d", cpu, k, n, ret);
		n += k;
	}
	CHECK(rte_mempool_get(mp, &got[0]) == -ENOENT, "CPU %d: one more than the pool has", cpu);
	qsort(got, NOBJS, sizeof(void *), cmp_ptr);
	CHECK(memcmp(got, objs_sorted, sizeof(got)) == 0,
	      "CPU %d: not every object of the pool once", cpu);
	rte_mempool_put_bulk(mp, got, NOBJS);
	uslab_thread_flush();
	return NULL;
}

static void on_cpu(int cpu)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, everything, (void *)(intptr_t)cpu) == 0, "thread");
	CHECK(pthread_join(t, NULL) == 0, "join");
}

int main(int argc, char **argv)
{
	char *eal[] = { argv[0],       "--no-huge", "--no-pci", "--no-shconf",
			"-l",	       "0",	    "-m",	"64",
			"--log-level", "*:warning", "-d",	argc > 1 ? argv[1] : "",
			NULL };
	unsigned long n0, n1;
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: %s DRIVER.so\n", argv[0]);
		return 2;
	}
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || uslab_numa_nodes() != 2) {
		printf("skipped: needs CPUs 0 and 1 and USLAB_NUMA_FAKE=0:0,1:1 (ctest sets it)\n");
		return 0;
	}
	ret = rte_eal_init((int)(sizeof(eal) / sizeof(eal[0]) - 1), eal);
	CHECK(ret >= 0, "rte_eal_init: %s", rte_strerror(rte_errno));

	mp = rte_mempool_create_empty("uslab_numa", NOBJS, ELT_SIZE, 0, 0, SOCKET_ID_ANY, 0);
	CHECK(mp, "rte_mempool_create_empty: %s", rte_strerror(rte_errno));
	CHECK(rte_mempool_set_ops_byname(mp, "uslab", NULL) == 0, "no mempool ops \"uslab\"");
	/*
	 * The driver's alloc with socket 1 (see the file comment): a populate
	 * of no room runs mempool_ops_alloc_once(), which calls it, and stops
	 * before DPDK asks for socket 1's pages; the real populate follows on
	 * socket 0, whose memory this DPDK has.
	 */
	mp->socket_id = 1;
	ret = rte_mempool_populate_iova(mp, (char *)objs_sorted + 1, RTE_BAD_IOVA, 0, NULL, NULL);
	CHECK(ret == 0 && mp->pool_data, "the driver's alloc on socket 1: %d (%s)", ret,
	      rte_strerror(ret < 0 ? -ret : rte_errno));
	mp->socket_id = 0;
	ret = rte_mempool_populate_default(mp);
	CHECK(ret == (int)NOBJS, "rte_mempool_populate_default: %d", ret);
	uslab_thread_flush(); /* (populate put them through this thread's sheaves) */
	CHECK(rte_mempool_obj_iter(mp, collect, NULL) == NOBJS, "rte_mempool_obj_iter");
	qsort(objs_sorted, NOBJS, sizeof(void *), cmp_ptr);

	/*
	 * 1. The pool's node is 1: populate put every object through this
	 * thread (EAL's main lcore, CPU 0: node 0), whose full sheaves went
	 * to node 0's barn; what the flush gave back, the part of a sheaf,
	 * is in the pool's loose array, kept on node 1 (node 0's with
	 * SOCKET_ID_ANY).
	 */
	n0 = kept_on(0);
	n1 = kept_on(1);
	CHECK(n0 + n1 == NOBJS && n1 > 0 && n1 < NOBJS,
	      "after populate on node 0: node 0 keeps %lu, node 1 %lu of %u", n0, n1, NOBJS);
	printf("ok a pool of socket 1 is uslab's pool of node 1: %lu loose objects kept there, "
	       "%lu in node 0's barn (populated on node 0)\n",
	       n1, n0);

	/* 2. A thread of node 0: everything, from node 0's barn and node 1's loose array. */
	on_cpu(0);
	n0 = kept_on(0);
	n1 = kept_on(1);
	CHECK(n0 + n1 == NOBJS && n0 > 0, "after node 0's thread: node 0 keeps %lu, node 1 %lu", n0,
	      n1);
	printf("ok node 0's thread got every object and gave them back (node 0 keeps %lu)\n", n0);

	/*
	 * 3. A thread of node 1: its own node's barn is empty, so a get takes
	 * node 0's full sheaves rather than fail; its sheaves go back to node
	 * 1's barn, none to node 0's.
	 */
	on_cpu(1);
	n0 = kept_on(0);
	n1 = kept_on(1);
	CHECK(n0 == 0 && n1 == NOBJS, "after node 1's thread: node 0 keeps %lu, node 1 %lu", n0,
	      n1);
	CHECK(rte_mempool_avail_count(mp) == NOBJS, "avail %u", rte_mempool_avail_count(mp));
	printf("ok node 1's thread got every object, node 0's barn included; node 1 keeps all "
	       "%lu\n",
	       n1);

	rte_mempool_free(mp);
	rte_eal_cleanup();
	printf("ok mempool freed\n");
	return 0;
}
