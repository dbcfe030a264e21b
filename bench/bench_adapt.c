// SPDX-License-Identifier: MIT
/*
 * bench_adapt.c - what the adaptive sheaf capacity holds (issue 23, item 1):
 * memory at peak and after the traffic stops, and how long the capacity
 * takes to shrink back.
 *
 *	adapt [PACKETS [IDLE_MS]]	(defaults: 20000000 packets, 1500 ms)
 *
 * The two-thread forwarding pattern of bench_forward.c (RX allocates bursts
 * of 64 256-byte objects with uslab_cache_alloc_bulk, a 2048-slot SPSC ring,
 * TX completion frees the oldest 64 with uslab_cache_free_bulk while 1088
 * wait; RX and TX are not pinned). The capacity, by default (adaptive,
 * src/barn.c): 126 for these 256-byte objects (USLAB_SHEAF_BYTES), doubled
 * up to 1022 (USLAB_SHEAF_MAX) while the barn trades often, halved every
 * USLAB_SHEAF_DECAY_MS (100 ms) of few trades, by the decay monitor once
 * the traffic stops.
 *
 * The main thread samples uslab_cache_stats() every 5 ms: objects cached
 * (active_objs minus those in the ring or in a burst: what the threads'
 * sheaves and the barn hold) and the capacity. When the packets are done,
 * RX and TX stay alive and idle (their own sheaves stay theirs) and the
 * sampling goes on for IDLE_MS: the capacity falls back to its base by
 * the decay monitor alone; then both threads exit.
 *
 * Reported (CSV "adapt,uslab,<when>,<metric>"): the capacity and the
 * objects cached at peak ("peak"), at the end of the traffic ("stop"),
 * once the capacity is back at its base ("base", with "ms" since the
 * stop), at the end of IDLE_MS ("idle") and after the threads' exit
 * ("exit"); Mpps of the run and its barn trades per 1000 packets. Run
 * with USLAB_SHEAF_CAPACITY=126 for the pinned capacity of before
 * (bench/suites/adapt.py does both).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <uslab.h>

#include "bench.h"

#define BURST 64
#define RING 2048
#define LAG 1024
#define OBJ 256

static struct uslab_cache *c;
static void *ring[RING];
static size_t head, tail; /* atomics */
static size_t packets;
static bool done, quit; /* atomics */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *rx(void *arg)
{
	void *objs[BURST];

	(void)arg;
	for (size_t h = 0; h < packets; h += BURST) {
		while (h + BURST - __atomic_load_n(&tail, __ATOMIC_ACQUIRE) > RING)
			sched_yield();
		if (uslab_cache_alloc_bulk(c, BURST, objs) != BURST)
			abort();
		for (int i = 0; i < BURST; i++) {
			*(size_t *)objs[i] = h + (size_t)i;
			ring[(h + (size_t)i) % RING] = objs[i];
		}
		__atomic_store_n(&head, h + BURST, __ATOMIC_RELEASE);
	}
	while (!__atomic_load_n(&quit, __ATOMIC_ACQUIRE))
		usleep(1000);
	return NULL;
}

static void *tx(void *arg)
{
	void *objs[BURST];
	size_t t = 0;

	(void)arg;
	while (t < packets) {
		size_t h = __atomic_load_n(&head, __ATOMIC_ACQUIRE);

		if (h - t < LAG + BURST && h < packets) {
			sched_yield();
			continue;
		}
		if (h == t)
			continue;
		for (int i = 0; i < BURST; i++)
			objs[i] = ring[(t + (size_t)i) % RING];
		__atomic_store_n(&tail, t + BURST, __ATOMIC_RELEASE);
		uslab_cache_free_bulk(c, BURST, objs);
		t += BURST;
	}
	__atomic_store_n(&done, true, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&quit, __ATOMIC_ACQUIRE))
		usleep(1000);
	return NULL;
}

/* Objects the sheaves and the barn hold: active minus what the ring and two bursts may hold. */
static long cached(unsigned int *cap)
{
	struct uslab_cache_stats st;
	size_t h = __atomic_load_n(&head, __ATOMIC_ACQUIRE),
	       t = __atomic_load_n(&tail, __ATOMIC_ACQUIRE);
	long in_flight = (long)(h - t);

	uslab_cache_stats(c, &st);
	*cap = st.sheaf_capacity;
	if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		in_flight += 2 * BURST; /* (a burst being written, one being freed) */
	return (long)st.active_objs - in_flight > 0 ? (long)st.active_objs - in_flight : 0;
}

static void row(const char *when, unsigned int cap, long objs)
{
	printf("adapt %-5s: capacity %4u, %7ld objects cached (%.0f KiB)\n", when, cap, objs,
	       objs * OBJ / 1024.0);
	printf("CSV,adapt,uslab,%s,capacity,%u\n", when, cap);
	printf("CSV,adapt,uslab,%s,objs,%ld\n", when, objs);
	printf("CSV,adapt,uslab,%s,kib,%.1f\n", when, objs * OBJ / 1024.0);
}

int main(int argc, char **argv)
{
	unsigned int idle_ms = argc > 2 ? (unsigned int)atoi(argv[2]) : 1500, cap, base,
		     peak_cap = 0;
	long peak = 0, n;
	uint64_t t0, t_stop = 0, t_base = 0;
	pthread_t trx, ttx;
	struct uslab_cache_stats st;

	packets = argc > 1 ? (size_t)atoll(argv[1]) : (bench_quick() ? 2000000 : 20000000);
	packets -= packets % BURST;
	c = uslab_cache_create("adapt", OBJ, NULL, 0);
	if (!c || uslab_cache_stats(c, &st))
		return 1;
	base = st.sheaf_capacity_min;
	t0 = now_ns();
	pthread_create(&trx, NULL, rx, NULL);
	pthread_create(&ttx, NULL, tx, NULL);
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
		usleep(5000);
		n = cached(&cap);
		if (n > peak)
			peak = n;
		if (cap > peak_cap)
			peak_cap = cap;
	}
	t_stop = now_ns();
	report_value("adapt", "uslab", "run", "mpps", packets / ((t_stop - t0) / 1e3));
	uslab_cache_stats(c, &st);
	/* Barn trades (an empty sheaf for a full one, or back) per 1000 packets. */
	report_value("adapt", "uslab", "run", "trades_per_kpkt",
		     (st.events[USLAB_STAT_BARN_GET] + st.events[USLAB_STAT_BARN_PUT]) * 1000.0 /
			     (double)packets);
	row("peak", peak_cap, peak);
	n = cached(&cap);
	row("stop", cap, n);
	while (now_ns() - t_stop < (uint64_t)idle_ms * 1000000u) {
		usleep(5000);
		n = cached(&cap);
		if (!t_base && cap == base) {
			t_base = now_ns();
			row("base", cap, n);
			report_value("adapt", "uslab", "base", "ms", (t_base - t_stop) / 1e6);
		}
	}
	n = cached(&cap);
	row("idle", cap, n);
	__atomic_store_n(&quit, true, __ATOMIC_RELEASE);
	pthread_join(trx, NULL);
	pthread_join(ttx, NULL);
	n = cached(&cap);
	row("exit", cap, n);
	uslab_cache_shrink(c);
	return uslab_cache_destroy(c) ? 1 : 0;
}
