// SPDX-License-Identifier: MIT
/*
 * bench_dpdk_noneal.c - get/put bursts on one rte_mempool from plain
 * pthreads that are not registered with EAL (non-EAL threads: no lcore
 * id, so no DPDK per-lcore cache: every get and put reaches the mempool
 * ops). The dpdk suite (bench/suites/dpdk.py) runs it per ops.
 *
 *   dpdk-noneal DRIVER.so OPS THREADS ITERS REPS
 *
 * DRIVER.so: the uslab driver (build/.../dpdk/librte_mempool_uslab.so),
 * loaded with EAL's -d in every run whatever OPS is, so that every variant
 * runs the same process image. OPS: uslab, ring_mp_mc, stack (Debian's
 * EAL loads the ring and stack drivers itself). A pool of 8191 objects of
 * 256 bytes, cache size 0; THREADS pthreads, thread i pinned to CPU i mod
 * the CPU count, each doing ITERS times rte_mempool_get_bulk(32) then
 * rte_mempool_put_bulk(32) of what it got; the objects are not touched.
 * Each worker times itself; a round lasts from the first start to the last
 * end. Prints the median over REPS timed rounds of
 *
 *   CSV,dpdk,noneal-<OPS>,<THREADS>T,mops,<million objects got and put back per second>
 *
 * (all threads together; a failed get, the pool short, counts nothing and
 * is reported on stderr). `bucket` is not offered: it crashes with non-EAL
 * threads (its per-lcore state is indexed by rte_lcore_id()).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>

#define BURST 32
#define NOBJS 8191u
#define MAX_THREADS 64

static struct rte_mempool *mp;
static unsigned long iters;
static pthread_barrier_t go;
static atomic_ulong fails;

/* One worker's round: when it started and ended (its own clock reads, so
 * that a main thread descheduled after the barrier skews nothing), and the
 * objects it got and put back. */
struct span {
	double t0, t1;
	unsigned long objs;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	struct span *sp = arg;
	void *objs[BURST];
	unsigned long done = 0;

	if (rte_lcore_id() != LCORE_ID_ANY || rte_mempool_default_cache(mp, rte_lcore_id())) {
		fprintf(stderr, "dpdk-noneal: a worker has an lcore id or a cache\n");
		abort();
	}
	pthread_barrier_wait(&go);
	sp->t0 = now();
	for (unsigned long i = 0; i < iters; i++) {
		if (rte_mempool_get_bulk(mp, objs, BURST))
			continue;
		rte_mempool_put_bulk(mp, objs, BURST);
		done++;
	}
	sp->t1 = now();
	sp->objs = done * BURST;
	atomic_fetch_add(&fails, iters - done);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	char *eal[] = { argv[0],
			"--no-huge",
			"--no-pci",
			"--no-shconf",
			"--no-telemetry",
			"-l",
			"0",
			"-m",
			"256",
			"--log-level",
			"*:error",
			"-d",
			argc > 1 ? argv[1] : "",
			NULL };
	unsigned int threads, reps;
	pthread_t t[MAX_THREADS];
	struct span sp[MAX_THREADS];
	double *mops;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	const char *ops;

	if (argc != 6) {
		fprintf(stderr, "usage: %s DRIVER.so OPS THREADS ITERS REPS\n", argv[0]);
		return 2;
	}
	ops = argv[2];
	threads = (unsigned int)atoi(argv[3]);
	iters = strtoul(argv[4], NULL, 0);
	reps = (unsigned int)atoi(argv[5]);
	if (threads < 1 || threads > MAX_THREADS || reps < 1 || iters < 1) {
		fprintf(stderr, "dpdk-noneal: bad arguments\n");
		return 2;
	}
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0]) - 1), eal) < 0) {
		fprintf(stderr, "dpdk-noneal: rte_eal_init: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	mp = rte_mempool_create_empty("noneal", NOBJS, 256, 0, 0, SOCKET_ID_ANY, 0);
	if (!mp || rte_mempool_set_ops_byname(mp, ops, NULL) ||
	    rte_mempool_populate_default(mp) != (int)NOBJS) {
		fprintf(stderr, "dpdk-noneal: mempool on ops %s: %s\n", ops,
			rte_strerror(rte_errno));
		return 1;
	}
	mops = calloc(reps, sizeof(*mops));
	pthread_barrier_init(&go, NULL, threads + 1); /* the workers and main */
	for (unsigned int r = 0; r < reps; r++) {
		double t0 = 0, t1 = 0, objs = 0;

		for (unsigned int i = 0; i < threads; i++) {
			pthread_attr_t attr;
			cpu_set_t cpus;

			/* Not the main thread's affinity (EAL pinned it to lcore 0). */
			CPU_ZERO(&cpus);
			CPU_SET(i % (unsigned int)(ncpu > 0 ? ncpu : 1), &cpus);
			pthread_attr_init(&attr);
			pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
			if (pthread_create(&t[i], &attr, worker, &sp[i])) {
				perror("pthread_create");
				return 1;
			}
			pthread_attr_destroy(&attr);
		}
		pthread_barrier_wait(&go);
		for (unsigned int i = 0; i < threads; i++) {
			pthread_join(t[i], NULL);
			if (!i || sp[i].t0 < t0)
				t0 = sp[i].t0;
			if (!i || sp[i].t1 > t1)
				t1 = sp[i].t1;
			objs += sp[i].objs;
		}
		mops[r] = objs / (t1 - t0) / 1e6;
		if (getenv("BENCH_DEBUG"))
			fprintf(stderr, "dpdk-noneal %s rep %u: %.1f M objects/s\n", ops, r,
				mops[r]);
	}
	if (atomic_load(&fails))
		fprintf(stderr, "dpdk-noneal %s: %lu gets failed (pool short)\n", ops,
			atomic_load(&fails));
	if (rte_mempool_avail_count(mp) != NOBJS) {
		fprintf(stderr, "dpdk-noneal %s: %u of %u objects back\n", ops,
			rte_mempool_avail_count(mp), NOBJS);
		return 1;
	}
	qsort(mops, reps, sizeof(*mops), cmp_double);
	printf("CSV,dpdk,noneal-%s,%uT,mops,%.2f\n", ops, threads,
	       reps % 2 ? mops[reps / 2] : (mops[reps / 2 - 1] + mops[reps / 2]) / 2);
	rte_mempool_free(mp);
	rte_eal_cleanup();
	return 0;
}
