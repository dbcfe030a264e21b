// SPDX-License-Identifier: MIT
/*
 * bench_pair.c - P1: a warm alloc+free pair of one object, the fast path
 * of every allocator.
 *
 *	pair-<peer> [SIZE [ITERS [REPS [BATCH]]]]	(defaults 256 20000000 7 1)
 *
 * Each repetition times ITERS pairs with rdtsc; the median repetition is
 * reported as cycles and ns per pair. The peers' calls are bench/peer.h's:
 * uslab's alloc and free are inline (<uslab/fastpath.h>), uslab-call
 * calls the exported functions instead.
 *
 * Instructions: bench/run also runs it under callgrind with
 * --toggle-collect=run_pairs, REPS 1, at ITERS = 2n and at n: the
 * difference of the counts inside run_pairs(), over n, is the count per
 * pair, start-up and the first slow paths cancelled, the loop's own 3
 * instructions (increment, compare, branch) included.
 *
 * BENCH_WRITE=first4 (bench.h): the object's first 4 bytes are written
 * between the alloc and the free, as a program sets the first field of
 * what it allocated (struct conn { int fd; ... }; variant "<peer>-w4");
 * unset, nothing is written.
 *
 * BATCH > 1, "cold" (parameter "SIZE-coldBATCH"): each round allocates
 * BATCH objects (each written under BENCH_WRITE=first4), then frees them
 * in the order they were allocated, so every object is freed after BATCH
 * - 1 others were allocated and written: its write is long done and its
 * line may have left L1, as in a program that keeps what it allocates for
 * a while. ITERS pairs in ITERS / BATCH rounds.
 */
#include "bench.h"
#include "peer.h"

__attribute__((noinline)) void run_pairs(size_t size, unsigned long iters);

static bool w4;
static size_t batch = 1;
static void **objs;

/* The loop, specialised for @write at compile time: no test in it. */
static inline __attribute__((always_inline)) void pairs(size_t size, unsigned long iters,
							bool write)
{
	for (unsigned long i = 0; i < iters; i++) {
		void *p = peer_alloc(size);

		if (write)
			write_first4(p, (uint32_t)i);
		escape(p);
		peer_free(p, size);
	}
}

static inline __attribute__((always_inline)) void batches(size_t size, unsigned long iters,
							  bool write)
{
	for (unsigned long r = 0; r < iters / batch; r++) {
		for (size_t i = 0; i < batch; i++) {
			void *p = peer_alloc(size);

			if (write)
				write_first4(p, (uint32_t)i);
			objs[i] = p;
		}
		escape(objs);
		for (size_t i = 0; i < batch; i++)
			peer_free(objs[i], size);
	}
}

static inline __attribute__((always_inline)) void loop(size_t size, unsigned long iters)
{
	if (batch > 1) {
		if (w4)
			batches(size, iters, true);
		else
			batches(size, iters, false);
	} else if (w4) {
		pairs(size, iters, true);
	} else {
		pairs(size, iters, false);
	}
}

__attribute__((noinline)) void run_pairs(size_t size, unsigned long iters)
{
	loop(size, iters);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	unsigned long iters = argc > 2 ? strtoul(argv[2], NULL, 0) : 20000000;
	int reps = argc > 3 ? atoi(argv[3]) : 7;
	double *cyc = calloc((size_t)reps, sizeof(double));
	char param[48], name[32];

	batch = argc > 4 ? strtoul(argv[4], NULL, 0) : 1;
	if (reps < 1 || batch < 1 || iters < batch) {
		fprintf(stderr, "usage: %s [SIZE [ITERS [REPS [BATCH (<= ITERS)]]]]\n", argv[0]);
		return 2;
	}
	w4 = bench_w4();
	objs = calloc(batch, sizeof(*objs));
	pin_to_cpu(0);
	peer_init(size);
	/* Warm up: the first allocations fill caches and fault pages in. */
	for (int i = 0; i < 100000; i++) {
		void *p = peer_alloc(size);

		escape(p);
		peer_free(p, size);
	}
	for (int k = 0; k < 4 && batch > 1; k++) {
		for (size_t i = 0; i < batch; i++)
			objs[i] = peer_alloc(size);
		escape(objs);
		for (size_t i = 0; i < batch; i++)
			peer_free(objs[i], size);
	}
	for (int r = 0; r < reps; r++) {
		uint64_t t0 = tsc_now();

		run_pairs(size, iters);
		cyc[r] = (double)(tsc_now() - t0) / (double)(iters / batch * batch);
	}
	if (batch > 1)
		snprintf(param, sizeof(param), "%zu-cold%zu", size, batch);
	else
		snprintf(param, sizeof(param), "%zu", size);
	report_cycles("pair", write_name(name, sizeof(name), PEER_NAME), param,
		      median(cyc, (size_t)reps));
	free(cyc);
	free(objs);
	peer_report();
	return 0;
}
