// SPDX-License-Identifier: MIT
/*
 * bench_xthread.c - objects of mixed sizes freed by another thread than
 * the one that allocated them (issue 10): a producer allocates objects of
 * random sizes, writes a stamp in their first and last words and passes
 * them through a single-producer single-consumer ring of 1024 slots; the
 * consumer checks both stamps and frees them. Objects come from each
 * peer's malloc-like interface (peer_kmalloc / peer_kfree, as in
 * bench_kmalloc.c).
 *
 *	xthread-<peer> MODE [COUNT [REPS [MIN [MAX]]]]
 *		(defaults 1to1 4000000 5 8 2048; BENCH_QUICK=1: COUNT 1000000)
 *
 * MODE 1to1: thread 0 (CPU 0) produces COUNT objects, thread 1 (CPU 1)
 *            consumes them.
 * MODE 2way: each thread produces COUNT objects for the other and consumes
 *            the other's, one of each in turn as the rings allow (a server
 *            whose requests and replies cross between two threads).
 *
 * Sizes are uniform in [MIN, MAX] (MIN >= 8), precomputed from a
 * deterministic xorshift seed into a ring of 4096 per producer. A thread
 * that found nothing to do 4096 times in a row yields its CPU (the machine
 * may be shared; the other thread is then likely descheduled). Reports
 * the median throughput (million objects per second, each allocated,
 * passed and freed once), timed by the workers themselves from the first
 * start to the last end, and the peak resident memory of the process
 * (VmHWM, MB). BENCH_WRITE=first4 (bench.h): the first stamp is a 4-byte
 * field at offset 0 instead of 8 bytes (variant "<peer>-w4").
 */
#include <stdatomic.h>
#include <stdbool.h>

#include "bench.h"
#include "peer.h"

#ifndef PEER_HAS_KMALLOC
#error "this peer has no peer_kmalloc"
#endif

#define RING 1024
#define SIZES 4096
#define SPIN 4096 /* idle polls before sched_yield() */
#define SEED 0x5851f42d4c957f2dull

struct ring {
	_Alignas(64) _Atomic size_t head; /* written by the producer */
	_Alignas(64) _Atomic size_t tail; /* written by the consumer */
	_Alignas(64) uint64_t *slot[RING];
};

struct worker {
	pthread_t thread;
	int cpu;
	struct ring *out, *in;	    /* either may be NULL */
	unsigned long nsend, nrecv; /* objects to produce, to consume */
	uint32_t *sizes;	    /* this thread's, as producer */
	const uint32_t *peer_sizes; /* the other thread's */
	double start, end;
};

static struct ring rings[2];
static pthread_barrier_t go;
static bool w4; /* BENCH_WRITE=first4 */

static void *worker(void *arg)
{
	struct worker *w = arg;
	unsigned long sent = 0, recvd = 0, idle = 0;
	size_t head = 0, tail_seen = 0, tail = 0, head_seen = 0;

	pin_to_cpu(w->cpu);
	pthread_barrier_wait(&go);
	w->start = wall_ns();
	while (sent < w->nsend || recvd < w->nrecv) {
		if (sent < w->nsend) {
			if (head - tail_seen == RING)
				tail_seen =
					atomic_load_explicit(&w->out->tail, memory_order_acquire);
			if (head - tail_seen < RING) {
				size_t s = w->sizes[sent & (SIZES - 1)];
				uint64_t *p = peer_kmalloc(s);

				if (w4)
					write_first4(p, (uint32_t)sent);
				else
					p[0] = sent;
				p[s / 8 - 1] = sent;
				w->out->slot[head % RING] = p;
				atomic_store_explicit(&w->out->head, ++head, memory_order_release);
				sent++;
				idle = 0;
			}
		}
		if (recvd < w->nrecv) {
			if (tail == head_seen)
				head_seen =
					atomic_load_explicit(&w->in->head, memory_order_acquire);
			if (tail != head_seen) {
				size_t s = w->peer_sizes[recvd & (SIZES - 1)];
				uint64_t *p = w->in->slot[tail % RING];

				atomic_store_explicit(&w->in->tail, ++tail, memory_order_release);
				if ((w4 ? *(uint32_t *)p != (uint32_t)recvd : p[0] != recvd) ||
				    p[s / 8 - 1] != recvd)
					abort();
				peer_kfree(p, s);
				recvd++;
				idle = 0;
			}
		}
		/* Waiting for the other thread: let it run if it shares our CPU. */
		if (++idle == SPIN) {
			sched_yield();
			idle = 0;
		}
	}
	w->end = wall_ns();
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "1to1";
	bool quick = bench_quick();
	unsigned long count = argc > 2 ? strtoul(argv[2], NULL, 0) : quick ? 1000000 : 4000000;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	size_t lo = argc > 4 ? strtoul(argv[4], NULL, 0) : 8;
	size_t hi = argc > 5 ? strtoul(argv[5], NULL, 0) : 2048;
	bool twoway = !strcmp(mode, "2way");
	struct worker w[2];
	double *mops;
	char name[32];

	w4 = bench_w4();
	write_name(name, sizeof(name), PEER_NAME);
	if ((!twoway && strcmp(mode, "1to1")) || !count || reps < 1 || lo < 8 || hi < lo ||
	    hi > UINT32_MAX) {
		fprintf(stderr, "usage: %s 1to1|2way [COUNT [REPS [MIN [MAX]]]] (MIN >= 8)\n",
			argv[0]);
		return 2;
	}
	peer_kinit();
	mops = calloc((size_t)reps, sizeof(double));
	memset(w, 0, sizeof(w));
	for (int t = 0; t < 2; t++) {
		uint64_t seed = SEED + (uint64_t)t;

		w[t].cpu = t;
		w[t].sizes = calloc(SIZES, sizeof(uint32_t));
		for (int i = 0; i < SIZES; i++)
			w[t].sizes[i] = (uint32_t)(lo + rnd(&seed) % (hi - lo + 1));
	}
	w[0].out = &rings[0];
	w[0].nsend = count;
	w[1].in = &rings[0];
	w[1].nrecv = count;
	w[1].peer_sizes = w[0].sizes;
	if (twoway) {
		w[1].out = &rings[1];
		w[1].nsend = count;
		w[0].in = &rings[1];
		w[0].nrecv = count;
		w[0].peer_sizes = w[1].sizes;
	}
	for (int r = 0; r < reps; r++) {
		for (int i = 0; i < 2; i++) {
			atomic_store(&rings[i].head, 0);
			atomic_store(&rings[i].tail, 0);
		}
		pthread_barrier_init(&go, NULL, 2);
		for (int t = 0; t < 2; t++)
			pthread_create(&w[t].thread, NULL, worker, &w[t]);
		for (int t = 0; t < 2; t++)
			pthread_join(w[t].thread, NULL);
		pthread_barrier_destroy(&go);
		mops[r] = (double)(w[0].nsend + w[1].nsend) /
			  ((w[0].end > w[1].end ? w[0].end : w[1].end) -
			   (w[0].start < w[1].start ? w[0].start : w[1].start)) *
			  1e3;
	}
	report_value("xthread", name, mode, "mops", median(mops, (size_t)reps));
	report_value("xthread", name, mode, "peak_rss_mb", proc_status_mb("VmHWM:"));
	peer_kreport();
	return 0;
}
