// SPDX-License-Identifier: MIT
/*
 * packet_pipeline.c - a packet pipeline on a uslab pool, the way a DPDK
 * application runs one on rte_mempool: an RX thread takes bursts of packet
 * buffers from the pool and fills them, a worker thread reads and rewrites
 * each, a TX thread "transmits" them and gives them back to the pool a
 * burst at a time. Two single-producer single-consumer rings connect the
 * three. At the end it prints the rate and the pool's counts, and checks
 * that every packet arrived once, in order, intact, and that every buffer
 * is back in the pool.
 *
 *	packet_pipeline [PACKETS]	(default 2000000)
 *
 * Build: cc -O2 packet_pipeline.c -luslab -pthread
 * (installed with uslab as share/doc/uslab/examples/packet_pipeline.c).
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uslab.h>

#define BURST 32
#define RING 1024 /* slots of each ring, a power of two */
#define POOL_OBJS 4096

/* A packet buffer: a small header, then the payload. */
struct pkt {
	uint64_t seq;	   /* RX's sequence number */
	uint32_t len;	   /* payload bytes */
	uint32_t csum;	   /* the worker's checksum of the payload */
	uint8_t data[240]; /* the payload */
};

/* A single-producer single-consumer ring of packet pointers. */
struct ring {
	_Alignas(64) atomic_size_t head; /* written by the producer */
	_Alignas(64) atomic_size_t tail; /* written by the consumer */
	struct pkt *slot[RING];
};

static struct uslab_cache *pool;
static struct ring rx_to_work, work_to_tx;
static uint64_t npkts;
static atomic_int failed;

/* Put @n packets on @r, waiting while it is full. */
static void ring_put(struct ring *r, struct pkt **p, size_t n)
{
	size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	while (head + n - atomic_load_explicit(&r->tail, memory_order_acquire) > RING)
		sched_yield(); /* (a pipeline with a core per thread would just poll) */
	for (size_t i = 0; i < n; i++)
		r->slot[(head + i) % RING] = p[i];
	atomic_store_explicit(&r->head, head + n, memory_order_release);
}

/* Take up to @max packets from @r into @p; returns how many. */
static size_t ring_get(struct ring *r, struct pkt **p, size_t max)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	size_t n = atomic_load_explicit(&r->head, memory_order_acquire) - tail;

	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++)
		p[i] = r->slot[(tail + i) % RING];
	atomic_store_explicit(&r->tail, tail + n, memory_order_release);
	return n;
}

static uint32_t checksum(const struct pkt *p)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i < p->len; i++)
		s = s * 31 + p->data[i];
	return s;
}

/* RX: bursts from the pool, filled like received frames. */
static void *rx(void *arg)
{
	struct pkt *b[BURST];

	(void)arg;
	for (uint64_t seq = 0; seq < npkts; seq += BURST) {
		size_t n = npkts - seq < BURST ? npkts - seq : BURST;

		/* rte_mempool_get_bulk()'s way: all or nothing. */
		while (uslab_pool_get_bulk(pool, n, (void **)b) != 0)
			; /* (cannot happen with a pool that grows; a fixed one waits) */
		for (size_t i = 0; i < n; i++) {
			b[i]->seq = seq + i;
			b[i]->len = 64 + (uint32_t)((seq + i) % 176);
			memset(b[i]->data, (int)((seq + i) & 0xff), b[i]->len);
		}
		ring_put(&rx_to_work, b, n);
	}
	return NULL;
}

/* The worker: a checksum over each payload, written into the header. */
static void *work(void *arg)
{
	struct pkt *b[BURST];
	uint64_t done = 0;

	(void)arg;
	while (done < npkts) {
		size_t n = ring_get(&rx_to_work, b, BURST);

		if (!n) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < n; i++)
			b[i]->csum = checksum(b[i]);
		ring_put(&work_to_tx, b, n);
		done += n;
	}
	return NULL;
}

/* TX: check each packet (in order, payload intact), then the burst back to the pool. */
static void *tx(void *arg)
{
	struct pkt *b[BURST];
	uint64_t next = 0;

	(void)arg;
	while (next < npkts) {
		size_t n = ring_get(&work_to_tx, b, BURST);

		if (!n) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < n; i++, next++) {
			if (b[i]->seq != next ||
			    b[i]->data[b[i]->len - 1] != (uint8_t)(next & 0xff) ||
			    b[i]->csum != checksum(b[i])) {
				fprintf(stderr,
					"packet %" PRIu64 ": got seq %" PRIu64 ", damaged\n", next,
					b[i]->seq);
				atomic_store(&failed, 1);
			}
		}
		/* rte_mempool_put_bulk()'s way: no NULL entry, the array not cleared. */
		uslab_pool_put_bulk(pool, n, (void *const *)b);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct uslab_cache_args args = { .reserve = POOL_OBJS };
	pthread_t t[3];
	struct timespec t0, t1;
	double s;
	size_t avail;

	npkts = argc > 1 ? strtoull(argv[1], NULL, 0) : 2000000;
	/* A pool: free buffers stay pointers (sheaves, barn), POOL_OBJS made now. */
	pool = uslab_cache_create("pkt", sizeof(struct pkt), &args,
				  USLAB_POOL | USLAB_HWCACHE_ALIGN);
	if (!pool) {
		perror("uslab_cache_create");
		return 1;
	}
	printf("pool: %zu buffers of %zu bytes ready\n", uslab_pool_avail(pool),
	       sizeof(struct pkt));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&t[0], NULL, rx, NULL);
	pthread_create(&t[1], NULL, work, NULL);
	pthread_create(&t[2], NULL, tx, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* The threads have exited: their sheaves went back to the pool's barn. */
	avail = uslab_pool_avail(pool);
	printf("%" PRIu64 " packets in %.3f s: %.2f Mpps\n", npkts, s, (double)npkts / s / 1e6);
	printf("pool: %zu buffers free after the run (at least the %d made at creation)\n", avail,
	       POOL_OBJS);
	if (avail < POOL_OBJS)
		atomic_store(&failed, 1);
	if (uslab_cache_destroy(pool) != 0)
		atomic_store(&failed, 1); /* a buffer still out: uslab says which cache on stderr */
	puts(atomic_load(&failed) ? "FAILED" : "ok: every packet once, in order, intact");
	return atomic_load(&failed);
}
