// SPDX-License-Identifier: MIT
/*
 * bench_counter.c - uslab_counter_add against one shared atomic counter,
 * on 1 and 2 threads (issue 14's goal: <= 2 ns uncontended, unchanged on
 * two threads), and uslab_idgen_next against a shared atomic ID.
 *
 *	counter [ADDS [REPS]]	(defaults 100000000 5; BENCH_QUICK=1: ADDS / 10)
 *
 * ns per add (per ID) on each thread, the median of REPS: "1T" one thread
 * (CPU 0), "2T" two threads at once on CPUs 0 and 1 (the mean of the two).
 * uslab_counter's batch is the library's: USLAB_COUNTER_BATCH (default
 * max(32, 2 * CPUs)).
 */
#include "bench.h"

#include <pthread.h>
#include <stdatomic.h>
#include <uslab.h>

static struct uslab_counter counter;
static struct uslab_idgen idgen;
static _Atomic int64_t shared_count;
static _Atomic uint64_t shared_id;
static unsigned long adds;
static pthread_barrier_t start;

enum kind { K_COUNTER, K_ATOMIC, K_IDGEN, K_ATOMIC_ID };
static const char *const kind_names[] = { "uslab_counter", "atomic", "uslab_idgen", "atomic_id" };

struct run {
	enum kind k;
	int cpu;
	double ns;
};

__attribute__((noinline)) void run_adds(enum kind k, unsigned long n);
__attribute__((noinline)) void run_adds(enum kind k, unsigned long n)
{
	uint64_t sink = 0;

	switch (k) {
	case K_COUNTER:
		for (unsigned long i = 0; i < n; i++)
			uslab_counter_add(&counter, 1);
		break;
	case K_ATOMIC:
		for (unsigned long i = 0; i < n; i++)
			atomic_fetch_add_explicit(&shared_count, 1, memory_order_relaxed);
		break;
	case K_IDGEN:
		for (unsigned long i = 0; i < n; i++)
			sink += uslab_idgen_next(&idgen);
		break;
	case K_ATOMIC_ID:
		for (unsigned long i = 0; i < n; i++)
			sink += atomic_fetch_add_explicit(&shared_id, 1, memory_order_relaxed);
		break;
	}
	escape((void *)(uintptr_t)sink);
}

static void *thread_main(void *arg)
{
	struct run *r = arg;
	uint64_t t0;

	pin_to_cpu(r->cpu);
	pthread_barrier_wait(&start);
	t0 = tsc_now();
	run_adds(r->k, adds);
	r->ns = (double)(tsc_now() - t0) / tsc_per_ns() / (double)adds;
	return NULL;
}

int main(int argc, char **argv)
{
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	double *v = calloc((size_t)reps, sizeof(double));

	adds = argc > 1 ? strtoul(argv[1], NULL, 0) : 100000000;
	if (bench_quick())
		adds /= 10;
	uslab_counter_init(&counter, 0);
	uslab_idgen_init(&idgen, 0);
	for (int k = 0; k < 4; k++) {
		for (int threads = 1; threads <= 2; threads++) {
			char param[16];

			for (int r = 0; r < reps; r++) {
				struct run run[2] = { { (enum kind)k, 0, 0 },
						      { (enum kind)k, 1, 0 } };
				pthread_t t[2];

				pthread_barrier_init(&start, NULL, (unsigned int)threads);
				for (int i = 0; i < threads; i++)
					pthread_create(&t[i], NULL, thread_main, &run[i]);
				for (int i = 0; i < threads; i++)
					pthread_join(t[i], NULL);
				pthread_barrier_destroy(&start);
				v[r] = threads == 1 ? run[0].ns : (run[0].ns + run[1].ns) / 2;
			}
			snprintf(param, sizeof(param), "%dT", threads);
			report_cycles("counter", kind_names[k], param,
				      median(v, (size_t)reps) * tsc_per_ns());
		}
	}
	free(v);
	return 0;
}
