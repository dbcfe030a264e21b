// SPDX-License-Identifier: MIT
/*
 * bench_threads.c - N threads, each allocating and freeing its own objects
 * independently: bursts of 64 allocations (first word written), then 64
 * frees in reverse order. Scaling from one thread to two shows whether
 * threads share anything on their fast paths.
 *
 *	threads-<peer> NTHREADS [SIZE [OPS [REPS]]]	(defaults 1 256 20000000 5)
 *
 * OPS is alloc+free pairs per thread. Reports the median total throughput
 * in million pairs per second.
 */
#include "bench.h"
#include "peer.h"

#define BURST 64

static size_t size;
static unsigned long ops;
static pthread_barrier_t go;

/*
 * Each worker times itself; the run lasts from the first start to the last
 * end. (The main thread may be scheduled late after the barrier on a
 * 2-core machine, which would make the run look shorter than it was.)
 */
struct worker {
	pthread_t thread;
	int cpu;
	double start, end;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	void *p[BURST];

	pin_to_cpu(w->cpu);
	peer_thread_init();
	pthread_barrier_wait(&go);
	w->start = wall_ns();
	for (unsigned long done = 0; done < ops; done += BURST) {
		for (int i = 0; i < BURST; i++) {
			p[i] = peer_alloc(size);
			*(uint64_t *)p[i] = done + (unsigned long)i;
		}
		for (int i = BURST - 1; i >= 0; i--)
			peer_free(p[i], size);
	}
	w->end = wall_ns();
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 1;
	int reps = argc > 4 ? atoi(argv[4]) : 5;
	double *mops = calloc((size_t)reps, sizeof(double));
	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char param[32];

	size = argc > 2 ? strtoul(argv[2], NULL, 0) : 256;
	ops = argc > 3 ? strtoul(argv[3], NULL, 0) : 20000000;
	peer_init(size);
	for (int r = 0; r < reps; r++) {
		double t0 = 0, t1 = 0;

		pthread_barrier_init(&go, NULL, (unsigned int)nthreads);
		for (int i = 0; i < nthreads; i++) {
			w[i].cpu = (int)(i % ncpu);
			pthread_create(&w[i].thread, NULL, worker, &w[i]);
		}
		for (int i = 0; i < nthreads; i++) {
			pthread_join(w[i].thread, NULL);
			if (i == 0 || w[i].start < t0)
				t0 = w[i].start;
			if (i == 0 || w[i].end > t1)
				t1 = w[i].end;
		}
		pthread_barrier_destroy(&go);
		mops[r] = (double)ops * nthreads / (t1 - t0) * 1e3;
	}
	snprintf(param, sizeof(param), "%dT", nthreads);
	report_value("threads", PEER_NAME, param, "mops", median(mops, (size_t)reps));
	peer_report();
	return 0;
}
