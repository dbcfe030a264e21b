// SPDX-License-Identifier: MIT
/*
 * bench_manythreads.c - many more threads than cores (issue 10), each
 * allocating and freeing its own small objects of random sizes with a
 * window of live ones: the per-thread caches of every allocator are
 * multiplied by the thread count, and threads are preempted in the middle
 * of their fast paths. Objects come from each peer's malloc-like interface
 * (peer_kmalloc / peer_kfree, as in bench_kmalloc.c).
 *
 *	manythreads-<peer> NTHREADS [OPS [REPS [WINDOW [MIN [MAX]]]]]
 *		(defaults 16 20000000 3 256 8 256; BENCH_QUICK=1: OPS 2000000)
 *
 * OPS is the number of steps over all threads (each does OPS / NTHREADS),
 * so runs with different thread counts do the same work. A step allocates
 * an object, writes its first word and frees the one allocated WINDOW
 * steps before. Thread i runs on CPU i mod ncpu; the threads are created
 * for every repetition, fill their windows, wait at a barrier, are timed
 * by themselves, and free their windows after the timed part. Sizes are
 * uniform in [MIN, MAX] (MIN >= 8), from one ring of 4096 precomputed with
 * a deterministic xorshift seed that every thread walks from its own
 * offset.
 *
 * Reports the median throughput (million steps per second over all
 * threads, first start to last end) and the peak resident memory of the
 * process (VmHWM, MB). BENCH_WRITE=first4 (bench.h): the first word is a
 * 4-byte field at offset 0 instead of 8 bytes (variant "<peer>-w4").
 */
#include <stdbool.h>

#include "bench.h"
#include "peer.h"

#ifndef PEER_HAS_KMALLOC
#error "this peer has no peer_kmalloc"
#endif

#define SIZES 4096
#define SEED 0xda942042e4dd58b5ull

struct slot {
	uint64_t *p;
	size_t size;
};

struct worker {
	pthread_t thread;
	int cpu;
	unsigned long pos; /* in the ring of sizes */
	struct slot *win;
	double start, end;
};

static uint32_t sizes[SIZES];
static unsigned long ops_per_thread, window;
static pthread_barrier_t go;
static bool w4; /* BENCH_WRITE=first4 */

/* What the thread writes into an object it allocated. */
static inline void write_obj(uint64_t *p, unsigned long v)
{
	if (w4)
		write_first4(p, (uint32_t)v);
	else
		*p = v;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	unsigned long pos = w->pos;

	pin_to_cpu(w->cpu);
	for (unsigned long j = 0; j < window; j++) {
		w->win[j].size = sizes[pos++ & (SIZES - 1)];
		w->win[j].p = peer_kmalloc(w->win[j].size);
		write_obj(w->win[j].p, j);
	}
	pthread_barrier_wait(&go);
	w->start = wall_ns();
	for (unsigned long i = 0, j = 0; i < ops_per_thread; i++) {
		size_t s = sizes[pos++ & (SIZES - 1)];
		uint64_t *p = peer_kmalloc(s);
		struct slot old = w->win[j];

		write_obj(p, i);
		w->win[j].p = p;
		w->win[j].size = s;
		if (++j == window)
			j = 0;
		peer_kfree(old.p, old.size);
	}
	w->end = wall_ns();
	for (unsigned long j = 0; j < window; j++)
		peer_kfree(w->win[j].p, w->win[j].size);
	return NULL;
}

int main(int argc, char **argv)
{
	bool quick = bench_quick();
	int nthreads = argc > 1 ? atoi(argv[1]) : 16;
	unsigned long ops = argc > 2 ? strtoul(argv[2], NULL, 0) : quick ? 2000000 : 20000000;
	int reps = argc > 3 ? atoi(argv[3]) : 3;
	size_t lo, hi;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct worker *w;
	double *mops;
	uint64_t seed = SEED;
	char param[32], name[32];

	w4 = bench_w4();
	write_name(name, sizeof(name), PEER_NAME);
	window = argc > 4 ? strtoul(argv[4], NULL, 0) : 256;
	lo = argc > 5 ? strtoul(argv[5], NULL, 0) : 8;
	hi = argc > 6 ? strtoul(argv[6], NULL, 0) : 256;
	if (nthreads < 1 || reps < 1 || ops < (unsigned long)nthreads || !window || lo < 8 ||
	    hi < lo || hi > UINT32_MAX) {
		fprintf(stderr,
			"usage: %s NTHREADS [OPS [REPS [WINDOW [MIN [MAX]]]]] (MIN >= 8, OPS >= "
			"NTHREADS)\n",
			argv[0]);
		return 2;
	}
	ops_per_thread = ops / (unsigned long)nthreads;
	peer_kinit();
	for (int i = 0; i < SIZES; i++)
		sizes[i] = (uint32_t)(lo + rnd(&seed) % (hi - lo + 1));
	w = calloc((size_t)nthreads, sizeof(*w));
	mops = calloc((size_t)reps, sizeof(double));
	for (int t = 0; t < nthreads; t++) {
		w[t].cpu = (int)(t % ncpu);
		w[t].pos = (unsigned long)t * 61;
		w[t].win = calloc(window, sizeof(struct slot));
	}
	for (int r = 0; r < reps; r++) {
		double t0 = 0, t1 = 0;

		pthread_barrier_init(&go, NULL, (unsigned int)nthreads);
		for (int t = 0; t < nthreads; t++)
			if (pthread_create(&w[t].thread, NULL, worker, &w[t]))
				abort();
		for (int t = 0; t < nthreads; t++) {
			pthread_join(w[t].thread, NULL);
			if (t == 0 || w[t].start < t0)
				t0 = w[t].start;
			if (t == 0 || w[t].end > t1)
				t1 = w[t].end;
		}
		pthread_barrier_destroy(&go);
		mops[r] = (double)ops_per_thread * nthreads / (t1 - t0) * 1e3;
	}
	snprintf(param, sizeof(param), "%dT", nthreads);
	report_value("manythreads", name, param, "mops", median(mops, (size_t)reps));
	report_value("manythreads", name, param, "peak_rss_mb", proc_status_mb("VmHWM:"));
	peer_kreport();
	return 0;
}
