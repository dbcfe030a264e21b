// SPDX-License-Identifier: MIT
/*
 * bench_prodcons.c - P6: producer -> consumer on two threads. The producer
 * allocates objects, writes their first word and passes them through a
 * single-producer single-consumer ring of 1024 slots; the consumer checks
 * the word and frees them. Every free is a free of an object another
 * thread allocated.
 *
 *	prodcons-<peer> [SIZE [COUNT [REPS]]]	(defaults 256 10000000 5)
 *
 * BENCH_WRITE=first4 (bench.h): the word is a 4-byte field at offset 0
 * instead of 8 bytes (variant "<peer>-w4").
 *
 * Reports the median throughput (objects per second, million) and the
 * p50/p99/p999 latency in cycles of one call in 16, sampled with rdtsc on
 * both sides (rdtsc's own cost, about 20 cycles, is included for every
 * peer alike).
 */
#include <stdatomic.h>

#include "bench.h"
#include "peer.h"

#define RING 1024
#define SAMPLE 16

struct ring {
	_Alignas(64) _Atomic size_t head; /* written by the producer */
	_Alignas(64) _Atomic size_t tail; /* written by the consumer */
	_Alignas(64) void *slot[RING];
};

static struct ring ring;
static size_t size;
static unsigned long count;
static uint64_t *alloc_lat, *free_lat;
static pthread_barrier_t go;
/*
 * The interval is taken by the workers themselves: from the producer's
 * first allocation to the consumer's last free. (The main thread may be
 * scheduled late after the barrier on a 2-core machine, which would make
 * the run look shorter than it was.)
 */
static double t_start, t_end;
static bool w4; /* BENCH_WRITE=first4 */

static void *producer(void *arg)
{
	size_t head = 0, tail_seen = 0, ns = 0;

	(void)arg;
	pin_to_cpu(0);
	peer_thread_init();
	pthread_barrier_wait(&go);
	t_start = wall_ns();
	for (unsigned long i = 0; i < count; i++) {
		uint64_t *p;

		if (i % SAMPLE == 0) {
			uint64_t t = tsc_now();

			p = peer_alloc(size);
			alloc_lat[ns++] = tsc_now() - t;
		} else {
			p = peer_alloc(size);
		}
		if (w4)
			write_first4(p, (uint32_t)i);
		else
			*p = i;
		while (head - tail_seen == RING)
			tail_seen = atomic_load_explicit(&ring.tail, memory_order_acquire);
		ring.slot[head % RING] = p;
		atomic_store_explicit(&ring.head, ++head, memory_order_release);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	size_t tail = 0, head_seen = 0, ns = 0;

	(void)arg;
	pin_to_cpu(1);
	peer_thread_init();
	pthread_barrier_wait(&go);
	for (unsigned long i = 0; i < count; i++) {
		uint64_t *p;

		while (tail == head_seen)
			head_seen = atomic_load_explicit(&ring.head, memory_order_acquire);
		p = ring.slot[tail % RING];
		atomic_store_explicit(&ring.tail, ++tail, memory_order_release);
		if (w4 ? *(uint32_t *)p != (uint32_t)i : *p != i)
			abort();
		if (i % SAMPLE == 0) {
			uint64_t t = tsc_now();

			peer_free(p, size);
			free_lat[ns++] = tsc_now() - t;
		} else {
			peer_free(p, size);
		}
	}
	t_end = wall_ns();
	return NULL;
}

int main(int argc, char **argv)
{
	int reps;
	double *mops;
	size_t nsamples;
	uint64_t *all_alloc, *all_free;
	char param[32], name[32];

	w4 = bench_w4();
	write_name(name, sizeof(name), PEER_NAME);
	size = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	count = argc > 2 ? strtoul(argv[2], NULL, 0) : 10000000;
	reps = argc > 3 ? atoi(argv[3]) : 5;
	mops = calloc((size_t)reps, sizeof(double));
	nsamples = (count + SAMPLE - 1) / SAMPLE;
	all_alloc = calloc(nsamples * (size_t)reps, sizeof(uint64_t));
	all_free = calloc(nsamples * (size_t)reps, sizeof(uint64_t));
	peer_init(size);
	for (int r = 0; r < reps; r++) {
		pthread_t pt, ct;

		alloc_lat = all_alloc + (size_t)r * nsamples;
		free_lat = all_free + (size_t)r * nsamples;
		atomic_store(&ring.head, 0);
		atomic_store(&ring.tail, 0);
		pthread_barrier_init(&go, NULL, 2);
		pthread_create(&pt, NULL, producer, NULL);
		pthread_create(&ct, NULL, consumer, NULL);
		pthread_join(pt, NULL);
		pthread_join(ct, NULL);
		pthread_barrier_destroy(&go);
		mops[r] = (double)count / (t_end - t_start) * 1e3;
	}
	snprintf(param, sizeof(param), "%zu", size);
	report_value("prodcons", name, param, "mops", median(mops, (size_t)reps));
	size_t n = nsamples * (size_t)reps;
	report_value("prodcons", name, param, "alloc_p50", (double)quantile(all_alloc, n, 0.5));
	report_value("prodcons", name, param, "alloc_p99", (double)quantile(all_alloc, n, 0.99));
	report_value("prodcons", name, param, "alloc_p999", (double)quantile(all_alloc, n, 0.999));
	report_value("prodcons", name, param, "free_p50", (double)quantile(all_free, n, 0.5));
	report_value("prodcons", name, param, "free_p99", (double)quantile(all_free, n, 0.99));
	report_value("prodcons", name, param, "free_p999", (double)quantile(all_free, n, 0.999));
	peer_report();
	return 0;
}
