// SPDX-License-Identifier: MIT
/*
 * bench_kmalloc.c - objects of random sizes (issue 10): kmalloc + kfree
 * through each peer's malloc-like interface (peer_kmalloc / peer_kfree),
 * on one thread or on several independent ones.
 *
 *	kmalloc-<peer> MODE [NTHREADS [ITERS [REPS [WINDOW [MIN [MAX]]]]]]
 *		(defaults pair 1 20000000 7 1024 8 4096; BENCH_QUICK=1: ITERS 2000000)
 *
 * MODE pair:   allocate one object and free it at once, ITERS times; the
 *              object is not touched (as bench_pair), so this is the fast
 *              path with a size-class lookup on both sides.
 * MODE window: keep WINDOW objects live: step i allocates object i, writes
 *              its first word and frees object i - WINDOW, so objects do
 *              not come back in LIFO order and the working set is
 *              WINDOW x the mean size.
 *
 * The peers' calls (bench/peer.h): uslab uslab_kmalloc / uslab_kfree
 * inline (uslab-call: the exported functions); glibc __libc_malloc /
 * __libc_free; mimalloc mi_malloc / mi_free; jemalloc malloc / free;
 * tcmalloc tc_malloc / tc_free.
 *
 * BENCH_WRITE=first4 (bench.h; variant "<peer>-w4"): pair writes the
 * object's first 4 bytes between the alloc and the free; window writes a
 * 4-byte first field instead of its 8-byte word.
 *
 * Sizes are uniform in [MIN, MAX] (MIN >= 8), drawn before timing from a
 * deterministic xorshift seed into a ring of 4096 per thread (16 KiB, L1),
 * so the generator is not timed; each thread has its own ring and runs its
 * own loop. Each repetition times ITERS steps per thread with rdtsc, from
 * the first thread's start to the last one's end; the median repetition is
 * reported as cycles and ns per step (per pair in one thread's loop) and
 * as million pairs per second over all threads, with the peak RSS of the
 * process (VmHWM). A warm-up of 65536 steps per thread (RING * 16) comes
 * first, untimed.
 *
 * run_steps() is a function of its own so callgrind can count it
 * (--toggle-collect=run_steps): bench/run divides its count by the steps
 * it ran, ITERS plus the warm-up's, so the loop's own few instructions
 * are included.
 */
#include <stdbool.h>

#include "bench.h"
#include "peer.h"

#ifndef PEER_HAS_KMALLOC
#error "this peer has no peer_kmalloc"
#endif

#define RING 4096 /* sizes per thread, a power of two */
#define SEED 0x9e3779b97f4a7c15ull

struct slot {
	void *p;
	size_t size;
};

struct worker {
	pthread_t thread;
	int cpu;
	uint32_t *sizes;
	struct slot *win;
	uint64_t *start, *end; /* per repetition */
};

static bool window_mode, w4;
static unsigned long iters, window;
static int reps;
static pthread_barrier_t go;

__attribute__((noinline)) void run_steps(const uint32_t *sizes, struct slot *win, unsigned long n);

/* The loops, specialised for @write at compile time: no test in them. */
static inline __attribute__((always_inline)) void steps(const uint32_t *sizes, struct slot *win,
							unsigned long n, bool write)
{
	if (!window_mode) {
		for (unsigned long i = 0; i < n; i++) {
			size_t s = sizes[i & (RING - 1)];
			void *p = peer_kmalloc(s);

			if (write)
				write_first4(p, (uint32_t)i);
			escape(p);
			peer_kfree(p, s);
		}
		return;
	}
	for (unsigned long i = 0, j = 0; i < n; i++) {
		size_t s = sizes[i & (RING - 1)];
		uint64_t *p = peer_kmalloc(s);
		struct slot old = win[j];

		if (write)
			write_first4(p, (uint32_t)i);
		else
			*p = i;
		win[j].p = p;
		win[j].size = s;
		if (++j == window)
			j = 0;
		peer_kfree(old.p, old.size);
	}
}

__attribute__((noinline)) void run_steps(const uint32_t *sizes, struct slot *win, unsigned long n)
{
	if (w4)
		steps(sizes, win, n, true);
	else
		steps(sizes, win, n, false);
}

static void *worker(void *arg)
{
	struct worker *w = arg;

	pin_to_cpu(w->cpu);
	if (window_mode)
		for (unsigned long j = 0; j < window; j++) {
			w->win[j].size = w->sizes[j & (RING - 1)];
			w->win[j].p = peer_kmalloc(w->win[j].size);
		}
	/* Warm up: classes created, caches filled, pages faulted in. */
	run_steps(w->sizes, w->win, RING * 16);
	for (int r = 0; r < reps; r++) {
		pthread_barrier_wait(&go);
		w->start[r] = tsc_now();
		run_steps(w->sizes, w->win, iters);
		w->end[r] = tsc_now();
	}
	if (window_mode)
		for (unsigned long j = 0; j < window; j++)
			peer_kfree(w->win[j].p, w->win[j].size);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "pair";
	int nthreads = argc > 2 ? atoi(argv[2]) : 1;
	bool quick = bench_quick();
	size_t lo, hi;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct worker *w;
	double *cyc, *mops;
	char param[48], name[32];

	iters = argc > 3 ? strtoul(argv[3], NULL, 0) : quick ? 2000000 : 20000000;
	reps = argc > 4 ? atoi(argv[4]) : 7;
	window = argc > 5 ? strtoul(argv[5], NULL, 0) : 1024;
	lo = argc > 6 ? strtoul(argv[6], NULL, 0) : 8;
	hi = argc > 7 ? strtoul(argv[7], NULL, 0) : 4096;
	window_mode = !strcmp(mode, "window");
	w4 = bench_w4();
	if ((!window_mode && strcmp(mode, "pair")) || nthreads < 1 || reps < 1 || !iters ||
	    (window_mode && !window) || lo < 8 || hi < lo || hi > UINT32_MAX) {
		fprintf(stderr,
			"usage: %s pair|window [NTHREADS [ITERS [REPS [WINDOW [MIN [MAX]]]]]] "
			"(MIN >= 8)\n",
			argv[0]);
		return 2;
	}
	peer_kinit();
	w = calloc((size_t)nthreads, sizeof(*w));
	cyc = calloc((size_t)reps, sizeof(double));
	mops = calloc((size_t)reps, sizeof(double));
	for (int t = 0; t < nthreads; t++) {
		uint64_t seed = SEED + (uint64_t)t;

		w[t].cpu = (int)(t % ncpu);
		w[t].sizes = calloc(RING, sizeof(uint32_t));
		w[t].win = window_mode ? calloc(window, sizeof(struct slot)) : NULL;
		w[t].start = calloc((size_t)reps, sizeof(uint64_t));
		w[t].end = calloc((size_t)reps, sizeof(uint64_t));
		for (int i = 0; i < RING; i++)
			w[t].sizes[i] = (uint32_t)(lo + rnd(&seed) % (hi - lo + 1));
	}
	pthread_barrier_init(&go, NULL, (unsigned int)nthreads);
	for (int t = 0; t < nthreads; t++)
		pthread_create(&w[t].thread, NULL, worker, &w[t]);
	for (int t = 0; t < nthreads; t++)
		pthread_join(w[t].thread, NULL);
	pthread_barrier_destroy(&go);
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = w[0].start[r], t1 = w[0].end[r];

		for (int t = 1; t < nthreads; t++) {
			if (w[t].start[r] < t0)
				t0 = w[t].start[r];
			if (w[t].end[r] > t1)
				t1 = w[t].end[r];
		}
		cyc[r] = (double)(t1 - t0) / (double)iters;
		mops[r] = (double)iters * nthreads / ((double)(t1 - t0) / tsc_per_ns()) * 1e3;
	}
	if (window_mode)
		snprintf(param, sizeof(param), "win%lu-%dT", window, nthreads);
	else
		snprintf(param, sizeof(param), "pair-%dT", nthreads);
	write_name(name, sizeof(name), PEER_NAME);
	report_cycles("kmalloc", name, param, median(cyc, (size_t)reps));
	report_value("kmalloc", name, param, "mops", median(mops, (size_t)reps));
	report_value("kmalloc", name, param, "peak_rss_mb", proc_status_mb("VmHWM:"));
	peer_kreport();
	return 0;
}
