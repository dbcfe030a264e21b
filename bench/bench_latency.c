// SPDX-License-Identifier: MIT
/*
 * bench_latency.c - the latency of single frees while another thread makes
 * the OS layer work (issue 9 §7: one free stalled 5.7 ms on os_lock while
 * another thread purged under it).
 *
 *	latency [N [BATCH [BIG [LABEL [SIZE]]]]]	(defaults 600000 20000 256 uslab 4096)
 *
 * Thread A allocates BATCH 8-byte objects (untimed), then frees them one by
 * one, timing each uslab_cache_free() with rdtsc, until N frees are timed.
 * A batch is larger than the sheaves and the barn hold, so some frees flush
 * a sheaf to its slabs and empty slabs go back to the OS layer. Thread B
 * meanwhile allocates BIG objects of SIZE bytes (4 KiB), writes the first
 * byte of each, frees them and calls uslab_cache_shrink() (which purges
 * every retained slab), in a loop, until A is done (BIG = 0: no thread B,
 * the noise floor). A and B are pinned to CPUs 0 and 1.
 *
 * A large population (issue 35 item 9): `latency 600000 20000 64 pop
 * 4194304`, B's 64 objects of 4 MiB (a slab of 1024 pages each), 256 MiB
 * freed and shrunk per round. The page heap's work per page under os_lock
 * (a slab's tail descriptors, the purge's scan page by page) made A's frees
 * that give a slab back wait for it.
 *
 * Reports p50, p99, p999 and the maximum of A's frees as "N cycles(tsc)
 * X.XXX ns" (rdtsc's own cost included), the number above 200 us, B's
 * rounds, and A's voluntary and involuntary context switches during its
 * loop (a_vcsw: sleeps, a contended lock; a_ivcsw: preemptions, a busy
 * CPU 0). LABEL names the variant in the CSV lines (before/after builds).
 */
#include "bench.h"

#include <stdatomic.h>
#include <sys/resource.h>
#include "uslab.h"

static struct uslab_cache *small, *big;
static atomic_int done;
static size_t big_objs;
static unsigned long rounds_b;

static void *thread_b(void *arg)
{
	void **p = calloc(big_objs, sizeof(void *));

	(void)arg;
	pin_to_cpu(1);
	while (!atomic_load_explicit(&done, memory_order_relaxed)) {
		for (size_t i = 0; i < big_objs; i++) {
			p[i] = uslab_cache_alloc(big);
			*(volatile char *)p[i] = 1;
		}
		for (size_t i = 0; i < big_objs; i++)
			uslab_cache_free(big, p[i]);
		uslab_cache_shrink(big);
		rounds_b++;
	}
	free(p);
	return NULL;
}

static void line(const char *label, const char *what, uint64_t cycles)
{
	printf("latency    %-12s %-10s: %llu cycles(tsc) %.3f ns\n", label, what,
	       (unsigned long long)cycles, (double)cycles / tsc_per_ns());
	printf("CSV,latency,%s,free8,%s_cycles,%llu\n", label, what, (unsigned long long)cycles);
	printf("CSV,latency,%s,free8,%s_ns,%.3f\n", label, what, (double)cycles / tsc_per_ns());
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 600000;
	size_t batch = argc > 2 ? strtoul(argv[2], NULL, 0) : 20000;
	const char *label = argc > 4 ? argv[4] : "uslab";
	uint64_t *t = malloc(n * sizeof(*t));
	void **p = malloc(batch * sizeof(void *));
	uint64_t limit, over = 0, sum = 0;
	size_t k = 0;
	pthread_t tb;
	struct rusage ru0, ru1;

	size_t big_size = argc > 5 ? strtoul(argv[5], NULL, 0) : 4096;

	big_objs = argc > 3 ? strtoul(argv[3], NULL, 0) : 256;
	if (!t || !p || !n || !batch || !big_size) {
		fprintf(stderr, "usage: latency [N [BATCH [BIG [LABEL [SIZE]]]]]\n");
		return 2;
	}
	small = uslab_cache_create("lat8", 8, NULL, 0);
	big = uslab_cache_create("latbig", big_size, NULL, 0);
	if (!small || !big)
		return 1;
	limit = (uint64_t)(200e3 * tsc_per_ns());
	pin_to_cpu(0);
	getrusage(RUSAGE_THREAD, &ru0);
	if (big_objs)
		pthread_create(&tb, NULL, thread_b, NULL);
	while (k < n) {
		size_t m = n - k < batch ? n - k : batch;

		for (size_t i = 0; i < m; i++)
			p[i] = uslab_cache_alloc(small);
		for (size_t i = 0; i < m; i++) {
			uint64_t t0 = tsc_now();

			uslab_cache_free(small, p[i]);
			t[k++] = tsc_now() - t0;
		}
	}
	getrusage(RUSAGE_THREAD, &ru1);
	atomic_store(&done, 1);
	if (big_objs)
		pthread_join(tb, NULL);

	for (size_t i = 0; i < n; i++) {
		over += t[i] > limit;
		sum += t[i];
	}
	printf("latency    %-12s %-10s: %.1f cycles(tsc) mean over %zu frees, batch %zu\n", label,
	       "mean", (double)sum / (double)n, n, batch);
	line(label, "p50", quantile(t, n, 0.50));
	line(label, "p99", quantile(t, n, 0.99));
	line(label, "p999", quantile(t, n, 0.999));
	line(label, "max", t[n - 1]);
	report_value("latency", label, "free8", "over200us", (double)over);
	report_value("latency", label, "free8", "b_rounds", (double)rounds_b);
	/* A's sleeps (a contended lock) and preemptions (a busy CPU 0) while timed. */
	report_value("latency", label, "free8", "a_vcsw", (double)(ru1.ru_nvcsw - ru0.ru_nvcsw));
	report_value("latency", label, "free8", "a_ivcsw", (double)(ru1.ru_nivcsw - ru0.ru_nivcsw));
	uslab_cache_destroy(small);
	uslab_cache_destroy(big);
	return 0;
}
