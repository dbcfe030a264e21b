// SPDX-License-Identifier: MIT
/*
 * bench_forward.c - P5: a packet-forwarding simulation (the NAPI skb cache
 * pattern of the seed "skbuff: introduce skbuff_heads bulking and reusing").
 *
 *	forward-<peer> VARIANT THREADS [PACKETS [REPS [CAPACITY REFILL]]]
 *		(defaults: 1, 20000000 packets, 5 repetitions)
 *
 * RX allocates bursts of 64 256-byte "skb heads" and writes their first
 * cache line; they wait in a TX ring; TX completion frees the oldest 64.
 * THREADS 1: RX and TX completion alternate on one thread; once 1024
 * packets wait, TX completion frees the oldest 64. THREADS 2: RX on CPU 0
 * and TX completion on CPU 1, a single-producer single-consumer ring of
 * BENCH_FW_RING slots between them (default 2048); TX completes the oldest
 * 64 while at least RING/2 + 64 wait (1024 + 64 by default; with
 * BENCH_FW_RING=64 each burst as soon as it is there), RX waits while the
 * ring is full.
 *
 * Variants (uslab; the other peers have the one their API offers):
 *   single    uslab_cache_alloc / uslab_cache_free per packet (inline)
 *   bulk      one uslab_cache_alloc_bulk and one uslab_cache_free_bulk of 64
 *   batch     RX as bulk; TX completion adds each packet to an on-stack
 *             uslab_free_batch while it walks the ring, flushed at the end
 *   magazine  uslab_magazine_alloc per packet on RX, uslab_magazine_free per
 *             packet on TX completion; one magazine on one thread, one per
 *             side on two (default capacity and refill 64/16 on one thread,
 *             CAPACITY/REFILL to change them; on two threads, unless they
 *             are given, the RX side's magazine holds 64 and refills 64 at
 *             a time, the TX side's holds 128 and flushes 64)
 *   magbulk   the same magazines, used a burst at a time:
 *             uslab_magazine_alloc_bulk / _free_bulk of 64
 *   dpdk:     rte_mempool_generic_get / _put of 64, each thread through its
 *             own cache of 512 (RX and TX are registered non-EAL lcores,
 *             rte_thread_register, each with its per-lcore default cache);
 *             the pool sized like DPDK's examples size theirs: 8191 objects
 *             (2^q - 1, at least what the ring and two caches hold)
 *   mimalloc, glibc: single malloc / free per packet
 * Each peer is used the way its documentation recommends: uslab's threads
 * allocate and free through their own sheaves (or their own magazines),
 * DPDK's through their own mempool caches.
 *
 * Timing is taken by the workers themselves (rdtsc, invariant across
 * cores): from RX's first packet after a warm-up of a tenth of the run to
 * the later of the two threads' ends. Reported: the median over REPS of
 * Mpps and ns per packet (one alloc + one free + the RX write + the ring),
 * with the parameter "1T", "2T" (the default ring) or "2T-r<slots>".
 *
 * Environment (the defaults are what bench/run measures; the others are
 * the harness choices the two-thread figure depends on):
 *   BENCH_FW_RING=N      ring slots, a multiple of 64 (default 2048)
 *   BENCH_FW_LAG=N       packets TX completion leaves waiting (default
 *                        RING/2 rounded down to 64; the parameter then
 *                        reads "2T-r<slots>-l<lag>")
 *   BENCH_DPDK_OBJS=N    DPDK pool size (default above)
 *   BENCH_FW_DPDK_CACHE  0 per-lcore caches (default), 1 TX thread not
 *                        registered (no cache: straight to the pool's
 *                        ring), 2 no cache on either side, 3 neither thread
 *                        registered, each with rte_mempool_cache_create
 *   BENCH_FW_TOUCH       0 nothing written, 1 RX writes the first line
 *                        (default), 2 and TX completion reads it
 *   BENCH_WRITE=first4   (bench.h) the line RX writes starts with a 4-byte
 *                        field: its first 8 bytes are two 4-byte stores
 *                        instead of one 8-byte store (variant "...-w4")
 *   BENCH_FW_PIN=0       threads not pinned (allowed on every CPU)
 *   BENCH_FW_SPIN=1      a waiting side only spins (default: pause, and
 *                        sched_yield every 1024 spins)
 *   BENCH_FW_DEBUG=1     every repetition's Mpps and each side's DPDK
 *                        lcore and cache on stderr
 *
 * What each choice does to the two-thread figures (2-core EPYC VM, shared
 * and noisy; pairs of runs default / changed back to back, 7 pairs,
 * `forward-<peer> VARIANT 2 6000000 3`, median of the pairs' ratios; in
 * brackets a second sweep of 5 alternations, 20000000 packets):
 *   DPDK pool 1048575 objects instead of 8191 (the earlier default): DPDK
 *     0.26x (1/3.8; [1/4.9]), uslab unaffected. The pool's ring is FIFO,
 *     so with a million objects every object RX gets has not been touched
 *     for a million packets: the RX write misses the cache on every
 *     packet (with BENCH_FW_TOUCH=0 that pool's DPDK ran 8.2x faster).
 *     With 1 thread the per-lcore cache recycles and the pool never
 *     matters. This is what held DPDK to 102 Mpps in the earlier README row.
 *   BENCH_FW_RING=64 (one burst in flight: RX and TX in lockstep): uslab
 *     bulk 0.47x [0.46x], magazine 0.46x [0.45x], DPDK (8191) 0.51x
 *     [0.42x]. A ring of 4096 with TX completing at once (lag 0): 0.80x
 *     to 0.93x for all; the default ring with lag 0: uslab 0.88x-0.92x,
 *     DPDK 1.3x-1.5x, not consistent across sweeps.
 *   BENCH_FW_TOUCH=2 (TX reads the line RX wrote): uslab bulk 0.58x,
 *     magazine 0.73x, DPDK (8191) 0.77x; TOUCH=0: uslab bulk 1.6x, DPDK
 *     (8191) 1.8x.
 *   BENCH_FW_DPDK_CACHE=1 or 3: DPDK 0.98x and 1.04x (the 64-object puts
 *     go to the pool's ring in bulk anyway); BENCH_FW_PIN=0 and
 *     BENCH_FW_SPIN=1: uslab 0.92x-1.01x, DPDK 0.66x-0.81x, with single
 *     pairs anywhere from 0.14x to 3.3x (noise).
 * So the separate program's figures (64-burst ring, pool of a few
 * thousand) against this program's earlier ones (ring 2048, pool of 2^20 -
 * 1): the ring depth moves uslab about 2x, the pool size moves DPDK about
 * 4x; neither pinning, waiting nor the per-thread cache does.
 */
#include <stdatomic.h>

#include "bench.h"
#include "peer.h"

#define BURST 64
#define DEPTH 1024 /* packets waiting before TX completion frees the oldest */
#define RING 2048  /* slots of the two-thread ring */
#define RING_MAX 65536
#define SIZE 256

enum variant { V_SINGLE, V_BULK, V_BATCH, V_MAGAZINE, V_MAGBULK };
static const char *const vnames[] = { "single", "bulk", "batch", "magazine", "magbulk" };

static enum variant variant;
static unsigned long packets, warm;
static unsigned int mag_capacity, mag_refill;

/* Experiment knobs (environment). */
static unsigned long ring_slots = RING, lag = DEPTH;
static int pin = 1, spin_only, touch = 1; /* touch: 0 none, 1 RX writes, 2 + TX reads */
static bool w4;				  /* BENCH_WRITE=first4 */
static int dpdk_cache;			  /* 0 lcore, 1 TX no cache, 2 both no cache, 3 created */
static int volatile sink;

static void pin_or_free(int cpu)
{
	cpu_set_t set;

	if (pin) {
		pin_to_cpu(cpu);
		return;
	}
	CPU_ZERO(&set);
	for (int c = 0; c < CPU_SETSIZE && c < sysconf(_SC_NPROCESSORS_ONLN); c++)
		CPU_SET(c, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static struct {
	_Alignas(64) _Atomic unsigned long head; /* written by RX */
	_Alignas(64) _Atomic unsigned long tail; /* written by TX completion */
	_Alignas(64) void *slot[RING_MAX];
} ring;

static uint64_t t_start, t_end[2];
static pthread_barrier_t go;

/*
 * A waiting side spins; after a while it yields the CPU, so a third process
 * on its core (the machine is shared) runs there instead of on the other.
 */
static inline void wait_a_little(unsigned int *spins)
{
	if (!spin_only && ++*spins % 1024 == 0)
		sched_yield();
	else
		_mm_pause();
}

static inline void write_line(void *p, unsigned long seq)
{
	uint64_t *w = p;

	if (w4) {
		/* A 4-byte first field (bench.h's BENCH_WRITE=first4), then another. */
		write_first4(p, (uint32_t)seq);
		((uint32_t *)p)[1] = (uint32_t)(seq >> 32);
	} else {
		w[0] = seq;
	}
	for (int i = 1; i < 8; i++)
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
#elif defined(PEER_DPDK)
struct side {
	struct rte_mempool_cache *cache;
	int created;
};
static void side_init(struct side *s, int rx, int threads)
{
	s->created = 0;
	if (threads == 1 || dpdk_cache == 0) {
		s->cache = peer_dpdk_cache();
	} else if (dpdk_cache == 1) {
		s->cache = rx ? peer_dpdk_cache() : NULL;
	} else if (dpdk_cache == 2) {
		s->cache = NULL;
	} else {
		s->cache = rte_mempool_cache_create(512, SOCKET_ID_ANY);
		s->created = 1;
		if (!s->cache)
			abort();
	}
	if (getenv("BENCH_FW_DEBUG"))
		fprintf(stderr, "side rx=%d lcore=%u cache=%p\n", rx, rte_lcore_id(),
			(void *)s->cache);
}
static void side_fini(struct side *s)
{
	if (s->created) {
		rte_mempool_cache_flush(s->cache, peer_pool);
		rte_mempool_cache_free(s->cache);
	}
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
	if (rte_mempool_generic_get(peer_pool, slot, BURST, s->cache))
		abort();
#else
	for (int i = 0; i < BURST; i++)
		slot[i] = peer_alloc(SIZE);
#endif
	if (touch)
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
	if (touch == 2) {
		uint64_t x = 0;

		for (int i = 0; i < BURST; i++)
			x += *(uint64_t *)slot[i];
		sink = (int)x;
	}
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
	rte_mempool_generic_put(peer_pool, slot, BURST, s->cache);
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
	pin_or_free(0);
	if (!(dpdk_cache == 3))
		peer_thread_init();
	side_init(&s, 1, 2);
	pthread_barrier_wait(&go);
	for (unsigned long seq = 0; seq < packets; seq += BURST) {
		if (seq == warm)
			t_start = tsc_now();
		while (head + BURST - tail_seen > ring_slots) {
			wait_a_little(&spins);
			tail_seen = atomic_load_explicit(&ring.tail, memory_order_acquire);
		}
		rx_burst(&s, &ring.slot[head % ring_slots], seq);
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
	unsigned long tail = 0, head_seen = 0, last = packets - lag;
	unsigned int spins = 0;

	(void)arg;
	pin_or_free(1);
	if (!(dpdk_cache == 3 || dpdk_cache == 1))
		peer_thread_init();
	side_init(&s, 0, 2);
	pthread_barrier_wait(&go);
	while (tail < last) {
		while (head_seen - tail < lag + BURST) {
			wait_a_little(&spins);
			head_seen = atomic_load_explicit(&ring.head, memory_order_acquire);
		}
		tx_complete(&s, &ring.slot[tail % ring_slots]);
		tail += BURST;
		atomic_store_explicit(&ring.tail, tail, memory_order_release);
	}
	t_end[1] = tsc_now();
	/* The last DEPTH packets are completed untimed, after RX is done. */
	while (atomic_load_explicit(&ring.head, memory_order_acquire) != packets)
		wait_a_little(&spins);
	while (tail < packets) {
		tx_complete(&s, &ring.slot[tail % ring_slots]);
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
	return (double)(packets - warm - lag);
}

#if defined(PEER_DPDK)
/*
 * The pool sized the way DPDK's examples size it (l3fwd: what the rings
 * hold, plus a cache and a burst per lcore, at least 8192), as 2^q - 1
 * objects (rte_mempool_create's documented optimum), unless
 * BENCH_DPDK_OBJS says otherwise.
 */
static void dpdk_size_pool(void)
{
	unsigned long need = ring_slots + 2 * (512 * 3 / 2 + BURST) + 512, objs = 8191;
	char buf[32];

	while (objs < need)
		objs = objs * 2 + 1;
	snprintf(buf, sizeof(buf), "%lu", objs);
	setenv("BENCH_DPDK_OBJS", buf, 0);
}
#endif

int main(int argc, char **argv)
{
	const char *vname = argc > 1 ? argv[1] : "single";
	int threads = argc > 2 ? atoi(argv[2]) : 1, reps;
	double *mpps, *ns;
	char name[64], param[32];

	packets = argc > 3 ? strtoul(argv[3], NULL, 0) : 20000000;
	reps = argc > 4 ? atoi(argv[4]) : 5;
	mag_capacity = argc > 5 ? (unsigned int)atoi(argv[5]) : 0;
	mag_refill = argc > 6 ? (unsigned int)atoi(argv[6]) : 0;
	if (getenv("BENCH_FW_RING"))
		ring_slots = strtoul(getenv("BENCH_FW_RING"), NULL, 0);
	lag = ring_slots / 2 / BURST * BURST;
	if (getenv("BENCH_FW_LAG"))
		lag = strtoul(getenv("BENCH_FW_LAG"), NULL, 0);
	if (getenv("BENCH_FW_PIN"))
		pin = atoi(getenv("BENCH_FW_PIN"));
	if (getenv("BENCH_FW_SPIN"))
		spin_only = atoi(getenv("BENCH_FW_SPIN"));
	if (getenv("BENCH_FW_TOUCH"))
		touch = atoi(getenv("BENCH_FW_TOUCH"));
	if (getenv("BENCH_FW_DPDK_CACHE"))
		dpdk_cache = atoi(getenv("BENCH_FW_DPDK_CACHE"));
	w4 = bench_w4();
	if (!ring_slots || ring_slots % BURST || ring_slots > RING_MAX || lag % BURST ||
	    lag + BURST > ring_slots || touch < 0 || touch > 2 || dpdk_cache < 0 ||
	    dpdk_cache > 3) {
		fprintf(stderr, "%s: bad BENCH_FW_* setting (ring %lu, lag %lu)\n", argv[0],
			ring_slots, lag);
		return 2;
	}
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
	if (packets < 4 * ring_slots)
		packets = 4 * ring_slots;
	warm = packets / 10 / BURST * BURST;
	mpps = calloc((size_t)reps, sizeof(double));
	ns = calloc((size_t)reps, sizeof(double));
	if (threads == 1 && pin)
		pin_to_cpu(0);
#if defined(PEER_DPDK)
	dpdk_size_pool();
#endif
	peer_init(SIZE);
	for (int r = 0; r < reps; r++) {
		double n = threads == 1 ? run_one_thread() : run_two_threads();
		uint64_t end = t_end[0] > t_end[1] ? t_end[0] : t_end[1];
		double elapsed_ns = (double)(end - t_start) / tsc_per_ns();

		ns[r] = elapsed_ns / n;
		mpps[r] = n / elapsed_ns * 1e3;
		if (getenv("BENCH_FW_DEBUG"))
			fprintf(stderr, "rep %d: %.1f Mpps\n", r, mpps[r]);
	}
#if defined(PEER_USLAB)
	snprintf(name, sizeof(name), "%s-%s%s", PEER_NAME, vnames[variant], w4 ? "-w4" : "");
	if (mag_capacity || mag_refill)
		snprintf(name, sizeof(name), "%s-%s%u.%u%s", PEER_NAME, vnames[variant],
			 mag_capacity, mag_refill, w4 ? "-w4" : "");
#else
	write_name(name, sizeof(name), PEER_NAME);
#endif
	/* "2T" is the default ring; another ring or lag is named in the parameter. */
	if (threads == 1 || (ring_slots == RING && lag == DEPTH))
		snprintf(param, sizeof(param), "%dT", threads);
	else if (lag == ring_slots / 2 / BURST * BURST)
		snprintf(param, sizeof(param), "2T-r%lu", ring_slots);
	else
		snprintf(param, sizeof(param), "2T-r%lu-l%lu", ring_slots, lag);
	report_value("forward", name, param, "mpps", median(mpps, (size_t)reps));
	report_value("forward", name, param, "ns", median(ns, (size_t)reps));
	peer_report();
	return 0;
}
