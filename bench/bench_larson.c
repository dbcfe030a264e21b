// SPDX-License-Identifier: MIT
/*
 * bench_larson.c - server churn after Larson and Krishnan's benchmark
 * (issue 10): threads that each own an array of live objects of random
 * sizes, free a random one and allocate a new one in its place, and every
 * so often hand the whole array to a new thread and exit, so objects
 * outlive the threads that allocated them. Objects come from each peer's
 * malloc-like interface (peer_kmalloc / peer_kfree, as in bench_kmalloc.c).
 *
 *	larson-<peer> [THREADS [STEPS [GENS [SLOTS [MIN [MAX [REPS]]]]]]]
 *		(defaults 2 20000 50 5000 16 1024 5; BENCH_QUICK=1: GENS 10)
 *
 * THREADS lineages run at once (lineage i starts on CPU i mod ncpu; its
 * descendants inherit that). A lineage is GENS threads in a row: each does
 * STEPS steps on the lineage's SLOTS objects (free a slot's object after
 * checking the stamp in its first word, allocate one of a new size there,
 * stamp it), then creates its successor, hands it the array and exits; the
 * successor joins it once done. The main thread allocates the arrays
 * before the first repetition (so every lineage starts by freeing another
 * thread's objects) and frees what is left at the end.
 *
 * Slots and sizes (uniform in [MIN, MAX], MIN >= 8) come from a ring of
 * 8192 precomputed steps (deterministic xorshift seed) that every lineage
 * walks from its own offset, so the generator is not timed.
 *
 * Reports the median throughput (million steps per second, one step = one
 * free + one allocation, over all lineages, thread creation and exit
 * included), the peak resident memory of the process (VmHWM) and the
 * resident memory once every object is freed (VmRSS), in MB.
 * BENCH_WRITE=first4 (bench.h): the stamp is a 4-byte field at offset 0
 * instead of 8 bytes (variant "<peer>-w4").
 */
#include <stdbool.h>

#include "bench.h" /* first: it defines _GNU_SOURCE */
#include "peer.h"

#include <semaphore.h>

#ifndef PEER_HAS_KMALLOC
#error "this peer has no peer_kmalloc"
#endif

#define RING 8192
#define SEED 0x2545f4914f6cdd1dull

struct step {
	uint32_t slot, size;
};

struct obj {
	uint64_t *p;
	size_t size;
};

struct lineage {
	struct obj *slots;
	unsigned long pos; /* in the ring of steps */
	int gen;
	pthread_t prev; /* the generation to join */
	pthread_t last; /* the final generation, for main */
	double end;
};

static struct step ring[RING];
static unsigned long steps, slots;
static int gens;
static sem_t done;
static bool w4; /* BENCH_WRITE=first4 */

/* The stamp in an object's first word, or in its first 4 bytes with BENCH_WRITE=first4. */
static inline void stamp(uint64_t *p, size_t v)
{
	if (w4)
		write_first4(p, (uint32_t)v);
	else
		*p = v;
}

static inline bool stamped(const uint64_t *p, size_t v)
{
	return w4 ? *(const uint32_t *)p == (uint32_t)v : *p == v;
}

static void *generation(void *arg)
{
	struct lineage *l = arg;
	pthread_t next;

	for (unsigned long i = 0; i < steps; i++) {
		const struct step *st = &ring[l->pos++ & (RING - 1)];
		struct obj *o = &l->slots[st->slot];

		if (!stamped(o->p, o->size))
			abort();
		peer_kfree(o->p, o->size);
		o->size = st->size;
		o->p = peer_kmalloc(o->size);
		stamp(o->p, o->size);
	}
	if (l->gen > 0)
		pthread_join(l->prev, NULL);
	if (++l->gen < gens) {
		l->prev = pthread_self();
		if (pthread_create(&next, NULL, generation, l))
			abort();
	} else {
		l->last = pthread_self();
		l->end = wall_ns();
		sem_post(&done);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	bool quick = bench_quick();
	int nthreads = argc > 1 ? atoi(argv[1]) : 2;
	size_t lo, hi;
	int reps;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct lineage *l;
	double *mops;
	uint64_t seed = SEED;
	char param[32], name[32];

	w4 = bench_w4();
	write_name(name, sizeof(name), PEER_NAME);
	steps = argc > 2 ? strtoul(argv[2], NULL, 0) : 20000;
	gens = argc > 3 ? atoi(argv[3]) : quick ? 10 : 50;
	slots = argc > 4 ? strtoul(argv[4], NULL, 0) : 5000;
	lo = argc > 5 ? strtoul(argv[5], NULL, 0) : 16;
	hi = argc > 6 ? strtoul(argv[6], NULL, 0) : 1024;
	reps = argc > 7 ? atoi(argv[7]) : 5;
	if (nthreads < 1 || !steps || gens < 1 || !slots || slots > UINT32_MAX || lo < 8 ||
	    hi < lo || hi > UINT32_MAX || reps < 1) {
		fprintf(stderr,
			"usage: %s [THREADS [STEPS [GENS [SLOTS [MIN [MAX [REPS]]]]]]] (MIN >= 8)\n",
			argv[0]);
		return 2;
	}
	peer_kinit();
	for (int i = 0; i < RING; i++) {
		ring[i].slot = (uint32_t)(rnd(&seed) % slots);
		ring[i].size = (uint32_t)(lo + rnd(&seed) % (hi - lo + 1));
	}
	l = calloc((size_t)nthreads, sizeof(*l));
	mops = calloc((size_t)reps, sizeof(double));
	for (int t = 0; t < nthreads; t++) {
		l[t].slots = calloc(slots, sizeof(struct obj));
		l[t].pos = (unsigned long)t * (RING / (unsigned long)nthreads);
		for (unsigned long i = 0; i < slots; i++) {
			struct obj *o = &l[t].slots[i];

			o->size = lo + rnd(&seed) % (hi - lo + 1);
			o->p = peer_kmalloc(o->size);
			stamp(o->p, o->size);
		}
	}
	sem_init(&done, 0, 0);
	for (int r = 0; r < reps; r++) {
		double t0 = wall_ns(), t1 = 0;

		for (int t = 0; t < nthreads; t++) {
			pthread_attr_t attr;
			cpu_set_t set;
			pthread_t th;

			/* The first generation's CPU; its successors inherit it. */
			CPU_ZERO(&set);
			CPU_SET(t % ncpu, &set);
			pthread_attr_init(&attr);
			pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
			l[t].gen = 0;
			if (pthread_create(&th, &attr, generation, &l[t]))
				abort();
			pthread_attr_destroy(&attr);
		}
		for (int t = 0; t < nthreads; t++)
			sem_wait(&done);
		for (int t = 0; t < nthreads; t++) {
			pthread_join(l[t].last, NULL);
			if (l[t].end > t1)
				t1 = l[t].end;
		}
		mops[r] = (double)steps * (double)gens * nthreads / (t1 - t0) * 1e3;
	}
	for (int t = 0; t < nthreads; t++)
		for (unsigned long i = 0; i < slots; i++)
			peer_kfree(l[t].slots[i].p, l[t].slots[i].size);
	snprintf(param, sizeof(param), "%dT", nthreads);
	report_value("larson", name, param, "mops", median(mops, (size_t)reps));
	report_value("larson", name, param, "peak_rss_mb", proc_status_mb("VmHWM:"));
	report_value("larson", name, param, "end_rss_mb", proc_status_mb("VmRSS:"));
	peer_kreport();
	return 0;
}
