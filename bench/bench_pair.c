// SPDX-License-Identifier: MIT
/*
 * bench_pair.c - P1: a warm alloc+free pair of one object, the fast path
 * of every allocator.
 *
 *	pair-<peer> [SIZE [ITERS [REPS]]]	(defaults 256 20000000 7)
 *
 * Each repetition times ITERS pairs with rdtsc; the median repetition is
 * reported as cycles and ns per pair. bench/run also runs it under
 * callgrind with --toggle-collect=run_pairs: instructions per pair are the
 * count inside run_pairs() divided by ITERS (the loop itself adds 3).
 */
#include "bench.h"
#include "peer.h"

__attribute__((noinline)) void run_pairs(size_t size, unsigned long iters);

__attribute__((noinline)) void run_pairs(size_t size, unsigned long iters)
{
	for (unsigned long i = 0; i < iters; i++) {
		void *p = peer_alloc(size);

		escape(p);
		peer_free(p, size);
	}
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	unsigned long iters = argc > 2 ? strtoul(argv[2], NULL, 0) : 20000000;
	int reps = argc > 3 ? atoi(argv[3]) : 7;
	double *cyc = calloc((size_t)reps, sizeof(double));
	char param[32];

	pin_to_cpu(0);
	peer_init(size);
	/* Warm up: the first allocations fill caches and fault pages in. */
	for (int i = 0; i < 100000; i++) {
		void *p = peer_alloc(size);

		escape(p);
		peer_free(p, size);
	}
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = tsc_now();

		run_pairs(size, iters);
		cyc[r] = (double)(tsc_now() - t0) / (double)iters;
	}
	snprintf(param, sizeof(param), "%zu", size);
	report_cycles("pair", PEER_NAME, param, median(cyc, (size_t)reps));
	free(cyc);
	peer_report();
	return 0;
}
