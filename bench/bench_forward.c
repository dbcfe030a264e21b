// SPDX-License-Identifier: MIT
/*
 * bench_forward.c - P5: a packet-forwarding simulation (the NAPI skb cache
 * pattern of the seed "skbuff: introduce skbuff_heads bulking and reusing").
 *
 *	forward-<peer> VARIANT THREADS [PACKETS [REPS [CAPACITY REFILL]]]
 *		(defaults: 1, 20000000 packets, 5 repetitions)
 *
 * RX allocates bursts of 64 256-byte "skb heads" and writes their first
 * cache line; they wait in a TX ring; once 1024 packets wait, TX completion
 * frees the oldest 64. THREADS 1: RX and TX completion alternate on one
 * thread (the ring holds 1024 packets). THREADS 2: RX on CPU 0 and TX
 * completion on CPU 1, the ring a single-producer single-consumer ring of
 * 2048 slots; TX completes the oldest 64 while at least 1024 wait, RX waits
 * while the ring is full.
 *
 * Variants (uslab; the other peers have the one their API offers):
 *   single    uslab_cache_alloc / uslab_cache_free per packet (inline)
 *   bulk      one uslab_cache_alloc_bulk and one uslab_cache_free_bulk of 64
 *   batch     RX as bulk; TX completion adds each packet to an on-stack
 *             uslab_free_batch while it walks the ring, flushed at the end
 *   magazine  uslab_magazine_alloc per packet on RX, uslab_magazine_free per
 *             packet on TX completion; one magazine on one thread, one per
 *             side on two (default capacity and refill 64/16 on one thread,
 *             CAPACITY/REFILL to change them; on two threads the RX side
 *             refills 64 at a time and the TX side holds 128)
 *   magbulk   the same magazines, used a burst at a time:
 *             uslab_magazine_alloc_bulk / _free_bulk of 64
 *   dpdk:     rte_mempool_generic_get / _put of 64 through the per-lcore
 *             cache (512 objects)
 *   mimalloc, glibc: single malloc / free per packet
 *
 * Timing is taken by the workers themselves (rdtsc, invariant across
 * cores): from RX's first packet after a warm-up of a tenth of the run to
 * the later of the two threads' ends. Reported: the median over REPS of
 * Mpps and ns per packet (one alloc + one free + the RX write + the ring).
 */
#include <stdatomic.h>

#include "bench.h"
#include "peer.h"

#define BURST 64
#define DEPTH 1024 /* packets waiting before TX completion frees the oldest */
#define RING 2048  /* slots of the two-thread ring */
#define SIZE 256

enum variant { V_SINGLE, V_BULK, V_BATCH, V_MAGAZINE, V_MAGBULK };
static const char *const vnames[] = { "single", "bulk", "batch", "magazine", "magbulk" };

static enum variant variant;
static unsigned long packets, warm;
static unsigned int mag_capacity, mag_refill;

static struct {
	_Alignas(64) _Atomic unsigned long head; /* written by RX */
	_Alignas(64) _Atomic unsigned long tail; /* written by TX completion */
	_Alignas(64) void *slot[RING];
} ring;

static uint64_t t_start, t_end[2];
static pthread_barrier_t go;

/*
 * A waiting side spins; after a while it yields the CPU, so a third process
 * on its core (the machine is shared) runs there instead of on the other.
 */
static inline void wait_a_little(unsigned int *spins)
{
	if (++*spins % 1024 == 0)
		sched_yield();
	else
		_mm_pause();
}

static inline void write_line(void *p, unsigned long seq)
{
	uint64_t *w = p;

	for (int i = 0; i < 8; i++)
		w[i] = seq + (uint64_t)i;
}

/* ------------------------------------------------------ the two sides */

#if defined(PEER_USLAB)
struct side {
	struct uslab_magazine *mag;
};

static void side_init(struct side *s, int rx, int threads)
{
	s->mag = NULL;
	if (variant != V_MAGAZINE && variant != V_MAGBULK)
		return;
	if (mag_capacity || mag_refill || threads == 1)
		s->mag = uslab_magazine_create(peer_cache, mag_capacity, mag_refill);
	else if (rx)
		/* RX only allocates: one refill of 64 serves a burst. */
		s->mag = uslab_magazine_create(peer_cache, 64, 64);
	else
		/* TX only frees: 128 held, 64 back per flush. */
		s->mag = uslab_magazine_create(peer_cache, 128, 0);
	if (!s->mag)
		abort();
}

static void side_fini(struct side *s)
{
	uslab_magazine_destroy(s->mag);
}
#else
struct side {
	int unused;
};
static void side_init(struct side *s, int rx, int threads)
{
	(void)s, (void)rx, (void)threads;
}
static void side_fini(struct side *s)
{
	(void)s;
}
#endif

/* RX: a burst of 64 new packets into slot[0..64), first line written. */
static inline void rx_burst(struct side *s, void **slot, unsigned long seq)
{
	(void)s;
#if defined(PEER_USLAB)
	switch (variant) {
	case V_SINGLE:
		for (int i = 0; i < BURST; i++)
			slot[i] = uslab_cache_alloc(peer_cache);
		break;
	case V_BULK:
	case V_BATCH:
		if (uslab_cache_alloc_bulk(peer_cache, BURST, slot) != BURST)
			abort();
		break;
	case V_MAGAZINE: {
		struct uslab_magazine *m = s->mag;

		for (int i = 0; i < BURST; i++)
			slot[i] = uslab_magazine_alloc(m);
		break;
	}
	case V_MAGBULK:
		if (uslab_magazine_alloc_bulk(s->mag, BURST, slot) != BURST)
			abort();
		break;
	}
#elif defined(PEER_DPDK)
	if (peer_alloc_bulk(SIZE, BURST, slot) != BURST)
		abort();
#else
	for (int i = 0; i < BURST; i++)
		slot[i] = peer_alloc(SIZE);
#endif
	for (int i = 0; i < BURST; i++) {
		if (!slot[i])
			abort();
		write_line(slot[i], seq + (unsigned long)i);
	}
}

/* TX completion: free the 64 packets in slot[0..64). */
static inline void tx_complete(struct side *s, void **slot)
{
	(void)s;
#if defined(PEER_USLAB)
	struct uslab_free_batch b;

	switch (variant) {
	case V_SINGLE:
		for (int i = 0; i < BURST; i++)
			uslab_cache_free(peer_cache, slot[i]);
		break;
	case V_BULK:
		uslab_cache_free_bulk(peer_cache, BURST, slot);
		break;
	case V_BATCH:
		uslab_free_batch_init(&b, peer_cache);
		for (int i = 0; i < BURST; i++)
			uslab_free_batch_add(&b, slot[i]);
		uslab_free_batch_flush(&b);
		break;
	case V_MAGAZINE: {
		struct uslab_magazine *m = s->mag;

		for (int i = 0; i < BURST; i++)
			uslab_magazine_free(m, slot[i]);
		break;
	}
	case V_MAGBULK:
		uslab_magazine_free_bulk(s->mag, BURST, slot);
		break;
	}
#elif defined(PEER_DPDK)
	peer_free_bulk(SIZE, BURST, slot);
#else
	for (int i = 0; i < BURST; i++)
		peer_free(slot[i], SIZE);
#endif
}

/* ------------------------------------------------------- one thread */

static double run_one_thread(void)
{
	static void *tx[DEPTH];
	struct side s;
	unsigned long head = 0, tail = 0;
	uint64_t t0 = 0;

	side_init(&s, 1, 1);
	for (unsigned long seq = 0; seq < packets; seq += BURST) {
		if (seq == warm)
			t0 = tsc_now();
		rx_burst(&s, &tx[head % DEPTH], seq);
		head += BURST;
		if (head - tail == DEPTH) {
			tx_complete(&s, &tx[tail % DEPTH]);
			tail += BURST;
		}
	}
	t_start = t0;
	t_end[0] = t_end[1] = tsc_now();
	while (tail != head) {
		tx_complete(&s, &tx[tail % DEPTH]);
		tail += BURST;
	}
	side_fini(&s);
	return (double)(packets - warm);
}

/* ------------------------------------------------------- two threads */

static void *rx_thread(void *arg)
{
	struct side s;
	unsigned long head = 0, tail_seen = 0;
	unsigned int spins = 0;

	(void)arg;
	pin_to_cpu(0);
	peer_thread_init();
	side_init(&s, 1, 2);
	pthread_barrier_wait(&go);
	for (unsigned long seq = 0; seq < packets; seq += BURST) {
		if (seq == warm)
			t_start = tsc_now();
		while (head + BURST - tail_seen > RING) {
			wait_a_little(&spins);
			tail_seen = atomic_load_explicit(&ring.tail, memory_order_acquire);
		}
		rx_burst(&s, &ring.slot[head % RING], seq);
		head += BURST;
		atomic_store_explicit(&ring.head, head, memory_order_release);
	}
	t_end[0] = tsc_now();
	pthread_barrier_wait(&go); /* TX completion has stopped */
	side_fini(&s);
	return NULL;
}

static void *tx_thread(void *arg)
{
	struct side s;
	unsigned long tail = 0, head_seen = 0, last = packets - DEPTH;
	unsigned int spins = 0;

	(void)arg;
	pin_to_cpu(1);
	peer_thread_init();
	side_init(&s, 0, 2);
	pthread_barrier_wait(&go);
	while (tail < last) {
		while (head_seen - tail < DEPTH + BURST) {
			wait_a_little(&spins);
			head_seen = atomic_load_explicit(&ring.head, memory_order_acquire);
		}
		tx_complete(&s, &ring.slot[tail % RING]);
		tail += BURST;
		atomic_store_explicit(&ring.tail, tail, memory_order_release);
	}
	t_end[1] = tsc_now();
	/* The last DEPTH packets are completed untimed, after RX is done. */
	while (atomic_load_explicit(&ring.head, memory_order_acquire) != packets)
		wait_a_little(&spins);
	while (tail < packets) {
		tx_complete(&s, &ring.slot[tail % RING]);
		tail += BURST;
	}
	pthread_barrier_wait(&go);
	side_fini(&s);
	return NULL;
}

static double run_two_threads(void)
{
	pthread_t r, t;

	atomic_store(&ring.head, 0);
	atomic_store(&ring.tail, 0);
	pthread_barrier_init(&go, NULL, 2);
	pthread_create(&r, NULL, rx_thread, NULL);
	pthread_create(&t, NULL, tx_thread, NULL);
	pthread_join(r, NULL);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&go);
	/* TX completion's last timed burst ends DEPTH packets before RX's. */
	return (double)(packets - warm - DEPTH);
}

int main(int argc, char **argv)
{
	const char *vname = argc > 1 ? argv[1] : "single";
	int threads = argc > 2 ? atoi(argv[2]) : 1, reps;
	double *mpps, *ns;
	char name[64], param[16];

	packets = argc > 3 ? strtoul(argv[3], NULL, 0) : 20000000;
	reps = argc > 4 ? atoi(argv[4]) : 5;
	mag_capacity = argc > 5 ? (unsigned int)atoi(argv[5]) : 0;
	mag_refill = argc > 6 ? (unsigned int)atoi(argv[6]) : 0;
	for (variant = V_SINGLE; variant <= V_MAGBULK; variant++)
		if (!strcmp(vname, vnames[variant]))
			break;
	if (variant > V_MAGBULK || (threads != 1 && threads != 2) || reps < 1) {
		fprintf(stderr,
			"usage: %s single|bulk|batch|magazine|magbulk 1|2 [PACKETS [REPS [CAP REFILL]]]\n",
			argv[0]);
		return 2;
	}
	packets = (packets + BURST - 1) / BURST * BURST;
	if (packets < 4 * RING)
		packets = 4 * RING;
	warm = packets / 10 / BURST * BURST;
	mpps = calloc((size_t)reps, sizeof(double));
	ns = calloc((size_t)reps, sizeof(double));
	if (threads == 1)
		pin_to_cpu(0);
	peer_init(SIZE);
	for (int r = 0; r < reps; r++) {
		double n = threads == 1 ? run_one_thread() : run_two_threads();
		uint64_t end = t_end[0] > t_end[1] ? t_end[0] : t_end[1];
		double elapsed_ns = (double)(end - t_start) / tsc_per_ns();

		ns[r] = elapsed_ns / n;
		mpps[r] = n / elapsed_ns * 1e3;
	}
#if defined(PEER_USLAB)
	snprintf(name, sizeof(name), "%s-%s", PEER_NAME, vnames[variant]);
	if (mag_capacity || mag_refill)
		snprintf(name, sizeof(name), "%s-%s%u.%u", PEER_NAME, vnames[variant], mag_capacity,
			 mag_refill);
#else
	snprintf(name, sizeof(name), "%s", PEER_NAME);
#endif
	snprintf(param, sizeof(param), "%dT", threads);
	report_value("forward", name, param, "mpps", median(mpps, (size_t)reps));
	report_value("forward", name, param, "ns", median(ns, (size_t)reps));
	peer_report();
	return 0;
}
