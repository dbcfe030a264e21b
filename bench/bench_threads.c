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
 * in million pairs per second; the p50, p99 and p999 of one alloc and of
 * one free (one of each timed in one burst out of every 64, at a position
 * in the burst that moves from one timed burst to the next, with rdtsc,
 * lfence first, its own cost included: the smallest readings here are
 * 40-60 cycles; all threads' samples together); and, with many threads,
 * what per-thread caching holds: the resident memory the process gained
 * from before the threads start to when every thread is done with its
 * loop but has not exited (rss_mb; thread stacks included),
 * and for uslab the memory in objects its cache has handed out then
 * (held_kb): the program holds none, so that is what the threads' sheaves
 * and the barn keep. BENCH_WRITE=first4 (bench.h): the first word is a
 * 4-byte field at offset 0 instead of 8 bytes (variant "<peer>-w4").
 */
#include "bench.h"
#include "peer.h"

#define BURST 64
#define SAMPLE_EVERY 64 /* bursts: one alloc and one free timed in 64 bursts */

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
	uint64_t lat_alloc[HBUCKETS], lat_free[HBUCKETS];
};

static pthread_barrier_t done, release;
static bool w4; /* BENCH_WRITE=first4 */

/* What the thread writes into an object it allocated. */
static inline void write_obj(void *p, unsigned long v)
{
	if (w4)
		write_first4(p, (uint32_t)v);
	else
		*(uint64_t *)p = v;
}

/* One burst with its @k-th alloc and @k-th free (in freeing order) timed. */
static void burst_timed(struct worker *w, void **p, unsigned long n, int k)
{
	uint64_t t0;

	for (int i = 0; i < BURST; i++) {
		t0 = i == k ? tsc_now() : 0;
		p[i] = peer_alloc(size);
		if (i == k)
			hist_add(w->lat_alloc, tsc_now() - t0);
		write_obj(p[i], n + (unsigned long)i);
	}
	for (int i = BURST - 1; i >= 0; i--) {
		t0 = i == BURST - 1 - k ? tsc_now() : 0;
		peer_free(p[i], size);
		if (i == BURST - 1 - k)
			hist_add(w->lat_free, tsc_now() - t0);
	}
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	void *p[BURST];

	pin_to_cpu(w->cpu);
	peer_thread_init();
	pthread_barrier_wait(&go);
	w->start = wall_ns();
	for (unsigned long n = 0; n < ops; n += BURST) {
		unsigned long burst = n / BURST;

		/* Not the first burst: it holds the thread's first slow paths. */
		if (burst % SAMPLE_EVERY == SAMPLE_EVERY - 1) {
			/* A different position each time: slow paths fall anywhere. */
			int k = (int)(burst / SAMPLE_EVERY % BURST);

			burst_timed(w, p, n, k);
			continue;
		}
		for (int i = 0; i < BURST; i++) {
			p[i] = peer_alloc(size);
			write_obj(p[i], n + (unsigned long)i);
		}
		for (int i = BURST - 1; i >= 0; i--)
			peer_free(p[i], size);
	}
	w->end = wall_ns();
	pthread_barrier_wait(&done); /* main reads what the threads keep cached */
	pthread_barrier_wait(&release);
	return NULL;
}

/* Median over the repetitions of a quantile of each repetition's samples, in ns. */
static double quantile_ns(uint64_t (*h)[HBUCKETS], int reps, double q)
{
	double v[reps];

	for (int r = 0; r < reps; r++) {
		uint64_t n = 0;

		for (int b = 0; b < HBUCKETS; b++)
			n += h[r][b];
		v[r] = (double)hist_quantile(h[r], n, q);
	}
	return median(v, (size_t)reps) / tsc_per_ns();
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 1;
	int reps = argc > 4 ? atoi(argv[4]) : 5;
	double *mops = calloc((size_t)reps, sizeof(double));
	double *rss = calloc((size_t)reps, sizeof(double));
	double *held = calloc((size_t)reps, sizeof(double));
	uint64_t(*lat_alloc)[HBUCKETS] = calloc((size_t)reps, sizeof(*lat_alloc));
	uint64_t(*lat_free)[HBUCKETS] = calloc((size_t)reps, sizeof(*lat_free));
	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char param[32], name[32];

	w4 = bench_w4();
	write_name(name, sizeof(name), PEER_NAME);
	if (nthreads < 1 || reps < 1 || !mops || !rss || !held || !lat_alloc || !lat_free || !w) {
		fprintf(stderr, "usage: %s NTHREADS [SIZE [OPS [REPS]]]\n", argv[0]);
		return 2;
	}
	size = argc > 2 ? strtoul(argv[2], NULL, 0) : 256;
	ops = argc > 3 ? strtoul(argv[3], NULL, 0) : 20000000;
	peer_init(size);
	for (int r = 0; r < reps; r++) {
		double t0 = 0, t1 = 0, rss0;

		pthread_barrier_init(&go, NULL, (unsigned int)nthreads);
		pthread_barrier_init(&done, NULL, (unsigned int)nthreads + 1);
		pthread_barrier_init(&release, NULL, (unsigned int)nthreads + 1);
		for (int i = 0; i < nthreads; i++) {
			memset(w[i].lat_alloc, 0, sizeof(w[i].lat_alloc));
			memset(w[i].lat_free, 0, sizeof(w[i].lat_free));
			w[i].cpu = (int)(i % ncpu);
		}
		rss0 = proc_status_mb("VmRSS:");
		for (int i = 0; i < nthreads; i++) {
			if (pthread_create(&w[i].thread, NULL, worker, &w[i])) {
				perror("threads: pthread_create");
				return 1;
			}
		}
		pthread_barrier_wait(&done);
		rss[r] = proc_status_mb("VmRSS:") - rss0;
		held[r] = peer_held_bytes() / 1024;
		pthread_barrier_wait(&release);
		for (int i = 0; i < nthreads; i++) {
			pthread_join(w[i].thread, NULL);
			if (i == 0 || w[i].start < t0)
				t0 = w[i].start;
			if (i == 0 || w[i].end > t1)
				t1 = w[i].end;
			for (int b = 0; b < HBUCKETS; b++) {
				lat_alloc[r][b] += w[i].lat_alloc[b];
				lat_free[r][b] += w[i].lat_free[b];
			}
		}
		pthread_barrier_destroy(&go);
		pthread_barrier_destroy(&done);
		pthread_barrier_destroy(&release);
		mops[r] = (double)ops * nthreads / (t1 - t0) * 1e3;
	}
	snprintf(param, sizeof(param), "%dT", nthreads);
	report_value("threads", name, param, "mops", median(mops, (size_t)reps));
	report_value("threads", name, param, "alloc_p50_ns", quantile_ns(lat_alloc, reps, 0.5));
	report_value("threads", name, param, "alloc_p99_ns", quantile_ns(lat_alloc, reps, 0.99));
	report_value("threads", name, param, "alloc_p999_ns", quantile_ns(lat_alloc, reps, 0.999));
	report_value("threads", name, param, "free_p50_ns", quantile_ns(lat_free, reps, 0.5));
	report_value("threads", name, param, "free_p99_ns", quantile_ns(lat_free, reps, 0.99));
	report_value("threads", name, param, "free_p999_ns", quantile_ns(lat_free, reps, 0.999));
	report_value("threads", name, param, "rss_mb", median(rss, (size_t)reps));
	if (peer_held_bytes() >= 0)
		report_value("threads", name, param, "held_kb", median(held, (size_t)reps));
	peer_report();
	return 0;
}
