// SPDX-License-Identifier: MIT
/*
 * rcu.c - freeing after an RCU grace period (kfree_rcu with bulk drain, seed
 * "rcu: Support kfree_bulk() interface in kfree_rcu()"), and the deferred
 * release of USLAB_TYPESAFE_BY_RCU slabs. Grace periods come from liburcu.
 *
 * Blocks. A freeing thread appends pointers to its current block, a
 * 4 KiB page: a small header and RCU_BLOCK_CAP (509) pointers. The append
 * is the fast path: a store of the pointer and a release store of the
 * count (plain moves on x86), no lock, no atomic read-modify-write. A full
 * block is pushed on a global lock-free queue (one CAS per 509 frees) and
 * the thread takes another from the spare pool.
 *
 * Batches. One background thread, the monitor, takes everything queued
 * and asks liburcu for ONE grace period for all of it (the flavor's
 * synchronize_rcu), then frees every block with uslab_cache_free_bulk(NULL,
 * ...) - detached freelists, mixed caches - and puts the blocks back in the
 * spare pool (bounded: RCU_POOL_MAX). Objects queued meanwhile make the
 * next batch: under load the monitor runs grace period after grace period,
 * each covering everything freed during the previous one. It is woken when
 * USLAB_RCU_BATCH_BLOCKS blocks are queued, and every USLAB_RCU_DRAIN_MS.
 * Why not call_rcu per batch: liburcu's call_rcu worker sleeps 10 ms after
 * every round of callbacks, so memory waiting for a grace period grows
 * with 10 ms worth of frees (measured in doc/design.md). No thread needs
 * to be registered with liburcu for this: neither the freeing threads nor
 * the monitor (synchronize_rcu may be called by any thread outside a
 * read-side critical section).
 *
 * Partly filled blocks. A thread that frees a few objects and then stops
 * must not hold them for ever: every period the monitor looks at each
 * thread's current block, and when entries it saw there one period ago are
 * still not handed over, it copies the published entries [taken, n) into a
 * block of its own and claims them with a CAS on block->taken. The owner,
 * when the block fills, claims the rest with an exchange of ->taken (once
 * per block). Either the monitor's CAS or the owner's exchange wins for
 * each entry, so no entry is freed twice and none is lost. Blocks are only
 * recycled by the monitor itself, after its scan: the monitor never looks
 * at a recycled block.
 *
 * Emergency path. uslab_free_rcu_head() never allocates: without room in
 * a block or a spare block, it links the object through its rcu_head onto
 * a global list (hq_lock) that the monitor attaches to the next batch.
 * uslab_free_rcu() allocates a block when the pool is empty; if that
 * fails it waits for a grace period itself and frees at once, or, inside a
 * read-side critical section, takes a block from the reserve (the last
 * RCU_RESERVE blocks of the pool); beyond that it leaks with a warning.
 *
 * Backpressure: more than USLAB_RCU_MAX_INFLIGHT blocks between queueing
 * and freeing make uslab_free_rcu() wait, outside read-side sections.
 *
 * Barrier: uslab_rcu_barrier() asks the monitor for a sweep (every
 * thread's partial block, regardless of age; blocks of exited threads were
 * queued at their exit), a grace period and the drain; the monitor then
 * flushes its own sheaves, so nothing freed stays cached in it.
 *
 * Locks (see internal.h for the whole order): rcu_lock (a mutex, with the
 * monitor's and waiters' condition variables) protects the list of
 * threads, the monitor's start and the barrier generations; it comes after
 * gp_lock and caches_lock and before every other lock. pool_lock protects the spare
 * blocks; hq_lock the emergency list; both are leaves except that
 * pool_lock may be held while allocating a block (node lock, os_lock).
 * gp_lock is held by the monitor across a grace period and its drain; fork
 * takes it first, so no grace period of ours is in progress at fork.
 * The monitor makes no liburcu call while holding any other lock.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <urcu/urcu-memb.h>

#include "internal.h"

#define RCU_BLOCK_SIZE 4096
#define TAKEN_ALL UINT32_MAX
#define RCU_POOL_MAX 256 /* spare blocks kept after a batch is freed */
#define RCU_POOL_FILL 64 /* the monitor keeps the pool at least this full */
#define RCU_RESERVE 8	 /* of which only read-side emergencies take the last */

struct rcu_block {
	struct rcu_block *next; /* chain of a batch, of the queue, of the pool */
	uint32_t n;		/* entries written; owner stores with release */
	uint32_t taken;		/* [0, taken) claimed by the monitor; TAKEN_ALL */
	uint32_t start;		/* entries [start, n) belong to the batch */
	uint32_t pad;
	void *ptrs[];
};

#define RCU_BLOCK_CAP ((RCU_BLOCK_SIZE - sizeof(struct rcu_block)) / sizeof(void *))
_Static_assert(sizeof(struct rcu_block) == 24, "block header: 509 pointers");

/* Per thread. The monitor reads @cur of every listed thread. */
struct rcu_tls {
	struct rcu_block *cur;	     /* block being filled; owner writes */
	bool listed;		     /* on the list of threads */
	struct rcu_tls *next, *prev; /* under rcu_lock */
	struct rcu_block *seen;	     /* monitor: cur at its last scan */
	uint32_t seen_n;	     /* monitor: its n then */
};

static __thread struct rcu_tls rt __attribute__((tls_model("initial-exec")));

static struct {
	const struct rcu_flavor_struct *flavor;
	pthread_mutex_t lock;	 /* rcu_lock */
	pthread_cond_t wake;	 /* the monitor waits here */
	pthread_cond_t done;	 /* barrier and throttled threads wait here */
	pthread_mutex_t gp_lock; /* the monitor, across a grace period + drain */
	struct rcu_tls *threads;
	bool started, start_failed, used;
	pthread_t monitor;
	pthread_key_t key;
	uint64_t barrier_req, barrier_done;
	unsigned int throttled_waiters;

	_Atomic(struct rcu_block *) queue; /* full blocks, lock-free push */
	_Atomic(struct slab *) slabq;	   /* slabs waiting for a batch */
	atomic_ulong queued_blocks;
	atomic_ulong inflight; /* blocks from queueing to freeing */
	atomic_int sleeping;
	atomic_int pool_low; /* a thread found the pool empty: refill it */

	struct ulock pool_lock;
	struct rcu_block *pool;
	unsigned int npool;

	struct ulock hq_lock;
	struct rcu_head *hq; /* emergency list */
	unsigned long nhq;

} R = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
	.gp_lock = PTHREAD_MUTEX_INITIALIZER,
	.pool_lock = ULOCK_INIT,
	.hq_lock = ULOCK_INIT,
};

static pthread_once_t rcu_once = PTHREAD_ONCE_INIT;
static struct uslab_cache block_cache;
static bool block_cache_ok;

/* Test hook (tests/unit): nonzero makes block allocation and the pool
 * above the reserve look empty. */
int rcu_fault_inject;

/* Counters: relaxed atomics, bumped once per slow path or per batch. */
static struct {
	atomic_ulong queued, freed, batches, blocks, emergency, sync, reserve, leaked, throttled,
		slabs_deferred, slabs_released;
} S;
#define bump(f, v) atomic_fetch_add_explicit(&S.f, (v), memory_order_relaxed)

static const struct rcu_flavor_struct *flavor(void)
{
	const struct rcu_flavor_struct *f = __atomic_load_n(&R.flavor, __ATOMIC_ACQUIRE);

	return f ? f : &urcu_memb_flavor;
}

/* ------------------------------------------------------------ blocks */

static void block_cache_init(void)
{
	block_cache_ok = !cache_init_internal(&block_cache, "uslab_rcu_block", RCU_BLOCK_SIZE);
}

static struct rcu_block *block_new(void)
{
	if (READ_ONCE(rcu_fault_inject) || !block_cache_ok)
		return NULL;
	return cache_alloc_direct(&block_cache);
}

static void block_init(struct rcu_block *b)
{
	b->next = NULL;
	b->start = 0;
	__atomic_store_n(&b->taken, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->n, 0, __ATOMIC_RELAXED);
}

static void monitor_wake(void);

enum block_src {
	FROM_POOL,	  /* spare blocks above the reserve only */
	FROM_POOL_OR_NEW, /* then a new block */
	FROM_RESERVE,	  /* any spare block */
};

static struct rcu_block *block_get(enum block_src src)
{
	unsigned int floor = src == FROM_RESERVE ? 0 : RCU_RESERVE;
	struct rcu_block *b = NULL;

	if (READ_ONCE(rcu_fault_inject) && src != FROM_RESERVE)
		floor = UINT32_MAX;
	ulock_lock(&R.pool_lock);
	if (R.npool > floor && R.npool != 0) {
		b = R.pool;
		R.pool = b->next;
		R.npool--;
	}
	ulock_unlock(&R.pool_lock);
	if (!b && src == FROM_POOL && !atomic_exchange(&R.pool_low, 1))
		monitor_wake(); /* uslab_free_rcu_head() allocates nothing: ask */
	if (!b && src == FROM_POOL_OR_NEW)
		b = block_new();
	if (b)
		block_init(b);
	return b;
}

static void block_put(struct rcu_block *b)
{
	ulock_lock(&R.pool_lock);
	if (R.npool < RCU_POOL_MAX) {
		b->next = R.pool;
		R.pool = b;
		R.npool++;
		b = NULL;
	}
	ulock_unlock(&R.pool_lock);
	if (b)
		cache_free_direct(&block_cache, b);
}

/* The monitor keeps a few spare blocks ready for uslab_free_rcu_head(). */
static void pool_fill(void)
{
	for (;;) {
		struct rcu_block *b;

		ulock_lock(&R.pool_lock);
		b = R.npool < RCU_POOL_FILL ? block_new() : NULL;
		if (b) {
			b->next = R.pool;
			R.pool = b;
			R.npool++;
		}
		ulock_unlock(&R.pool_lock);
		if (!b)
			break;
	}
}

/* ------------------------------------------------------ the monitor */

static void monitor_wake(void)
{
	if (atomic_load(&R.sleeping)) {
		pthread_mutex_lock(&R.lock);
		pthread_cond_signal(&R.wake);
		pthread_mutex_unlock(&R.lock);
	}
}

/* Owner: hand a block it filled (or leaves, at exit) to the monitor. */
static void block_publish(struct rcu_block *b)
{
	uint32_t old = __atomic_exchange_n(&b->taken, TAKEN_ALL, __ATOMIC_ACQ_REL);
	struct rcu_block *head = atomic_load_explicit(&R.queue, memory_order_relaxed);

	b->start = old;
	bump(queued, __atomic_load_n(&b->n, __ATOMIC_RELAXED) - old);
	/* Counted before it is visible: the monitor may free it before we return. */
	atomic_fetch_add_explicit(&R.inflight, 1, memory_order_relaxed);
	do
		b->next = head;
	while (!atomic_compare_exchange_weak_explicit(&R.queue, &head, b, memory_order_release,
						      memory_order_relaxed));
	if (atomic_fetch_add(&R.queued_blocks, 1) + 1 >= uslab_opt.rcu_batch_blocks)
		monitor_wake();
}

/* The object an rcu_head lies in (NULL if it is in no slab). */
static void *head_object(const void *h)
{
	struct slab *s = os_slab_lookup(h);

	return s ? slab_object_at(s, h) : NULL;
}

/* Free the objects of an emergency list (linked through their rcu_heads). */
static void drain_heads(struct rcu_head *h)
{
	void *objs[64];
	size_t n = 0;

	while (h) {
		struct rcu_head *next = (struct rcu_head *)h->next.next;

		objs[n++] = head_object(h);
		if (n == ARRAY_SIZE(objs)) {
			uslab_cache_free_bulk(NULL, n, objs);
			bump(freed, n);
			n = 0;
		}
		h = next;
	}
	uslab_cache_free_bulk(NULL, n, objs);
	bump(freed, n);
}

/* After the grace period: free every object of a batch, recycle its blocks. */
static void drain_batch(struct rcu_block *batch, unsigned long nb)
{
	for (struct rcu_block *b = batch, *next; b; b = next) {
		uint32_t n = __atomic_load_n(&b->n, __ATOMIC_ACQUIRE);

		next = b->next;
		uslab_cache_free_bulk(NULL, n - b->start, b->ptrs + b->start);
		bump(freed, n - b->start);
		block_put(b);
	}
	if (nb && atomic_fetch_sub(&R.inflight, nb) - nb < uslab_opt.rcu_max_inflight &&
	    __atomic_load_n(&R.throttled_waiters, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&R.lock);
		pthread_cond_broadcast(&R.done);
		pthread_mutex_unlock(&R.lock);
	}
}

/*
 * Steal the published entries [taken, n) of @t's block: copy them into a
 * block of the monitor's and claim them with a CAS. Under rcu_lock.
 * @all: also entries that arrived since the last scan (barrier).
 */
static struct rcu_block *steal(struct rcu_tls *t, bool all)
{
	struct rcu_block *b = __atomic_load_n(&t->cur, __ATOMIC_ACQUIRE), *dst;
	uint32_t tk, n;

	if (!b)
		return NULL;
	tk = __atomic_load_n(&b->taken, __ATOMIC_ACQUIRE);
	n = __atomic_load_n(&b->n, __ATOMIC_ACQUIRE);
	if (tk == TAKEN_ALL || n == tk)
		return NULL;
	if (!all && !(t->seen == b && t->seen_n > tk)) {
		t->seen = b; /* look again next period */
		t->seen_n = n;
		return NULL;
	}
	dst = block_get(FROM_POOL_OR_NEW);
	if (!dst)
		return NULL; /* next period, or the owner's own publish */
	memcpy(dst->ptrs, b->ptrs + tk, (n - tk) * sizeof(void *));
	if (!__atomic_compare_exchange_n(&b->taken, &tk, n, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		block_put(dst); /* the owner published the block meanwhile */
		return NULL;
	}
	__atomic_store_n(&dst->n, n - tk, __ATOMIC_RELAXED);
	bump(queued, n - tk);
	t->seen = NULL;
	atomic_fetch_add_explicit(&R.inflight, 1, memory_order_relaxed);
	return dst;
}

/* One pass of the monitor: gather a batch, wait for a grace period, free it. */
static void monitor_round(bool scan, bool all)
{
	struct rcu_block *batch, *b;
	struct rcu_head *heads;
	struct slab *slabs;
	unsigned long nb = 0, nq;

	batch = atomic_exchange(&R.queue, NULL);
	for (b = batch; b; b = b->next)
		nb++;
	nq = nb;
	if (scan) {
		pthread_mutex_lock(&R.lock);
		for (struct rcu_tls *t = R.threads; t; t = t->next) {
			b = steal(t, all);
			if (b) {
				b->next = batch;
				batch = b;
				nb++;
			}
		}
		pthread_mutex_unlock(&R.lock);
	}
	ulock_lock(&R.hq_lock);
	heads = R.hq;
	R.hq = NULL;
	R.nhq = 0;
	ulock_unlock(&R.hq_lock);
	slabs = atomic_exchange(&R.slabq, NULL);
	if (nq)
		atomic_fetch_sub(&R.queued_blocks, nq);
	if (!batch && !heads && !slabs)
		return;
	bump(blocks, nb);
	bump(batches, 1);
	/* One grace period for all of it, then free it here. */
	flavor()->update_synchronize_rcu();
	drain_batch(batch, nb);
	drain_heads(heads);
	bump(slabs_released, cache_release_slabs_now(slabs));
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *monitor_main(void *arg)
{
	uint64_t next_scan = now_ms() + uslab_opt.rcu_drain_ms;

	(void)arg;
	pool_fill();
	for (;;) {
		uint64_t target, now;
		bool barrier, scan;

		pthread_mutex_lock(&R.lock);
		for (;;) {
			now = now_ms();
			unsigned long q = atomic_load(&R.queued_blocks);

			/* A throttled thread waits for what is queued: hand it over now. */
			if (R.barrier_req != R.barrier_done || now >= next_scan ||
			    q >= uslab_opt.rcu_batch_blocks || (q && R.throttled_waiters) ||
			    atomic_load(&R.pool_low))
				break;
			struct timespec ts;
			uint64_t wait = next_scan - now;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(wait / 1000);
			ts.tv_nsec += (long)(wait % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			atomic_store(&R.sleeping, 1);
			if (atomic_load(&R.queued_blocks) < uslab_opt.rcu_batch_blocks)
				pthread_cond_timedwait(&R.wake, &R.lock, &ts);
			atomic_store(&R.sleeping, 0);
		}
		target = R.barrier_req;
		barrier = target != R.barrier_done;
		pthread_mutex_unlock(&R.lock);

		scan = barrier || now >= next_scan;
		if (scan)
			next_scan = now + uslab_opt.rcu_drain_ms;
		pthread_mutex_lock(&R.gp_lock);
		monitor_round(scan, barrier);
		if (barrier)
			uslab_thread_flush(); /* what we freed: nothing stays cached here */
		pthread_mutex_unlock(&R.gp_lock);
		atomic_store(&R.pool_low, 0);
		pool_fill();
		if (barrier) {
			pthread_mutex_lock(&R.lock);
			R.barrier_done = target;
			pthread_cond_broadcast(&R.done);
			pthread_mutex_unlock(&R.lock);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------ threads */

static void rcu_thread_exit(void *arg)
{
	struct rcu_tls *t = arg;
	struct rcu_block *b;

	/* Off the list first: the monitor no longer looks at our block. */
	pthread_mutex_lock(&R.lock);
	if (t->listed) {
		if (t->prev)
			t->prev->next = t->next;
		else
			R.threads = t->next;
		if (t->next)
			t->next->prev = t->prev;
		t->listed = false;
	}
	b = t->cur;
	__atomic_store_n(&t->cur, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&R.lock);
	if (b)
		block_publish(b);
}

static void rcu_init_once(void)
{
	block_cache_init();
	if (pthread_key_create(&R.key, rcu_thread_exit))
		R.start_failed = true;
}

/* Start deferred freeing for this thread (and the monitor). 0 or -1. */
static int rcu_thread_start(void)
{
	int err = 0;

	if (uslab_init())
		return -1;
	pthread_once(&rcu_once, rcu_init_once);
	pthread_mutex_lock(&R.lock);
	R.used = true;
	if (!R.started && !R.start_failed) {
		pthread_attr_t attr;
		sigset_t all, old;

		/* The monitor takes no signal meant for the program. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&R.monitor, &attr, monitor_main, NULL))
			R.start_failed = true;
		else
			R.started = true;
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (!R.started) {
		err = -1;
	} else if (!rt.listed) {
		if (pthread_setspecific(R.key, &rt)) {
			err = -1;
		} else {
			rt.prev = NULL;
			rt.next = R.threads;
			if (R.threads)
				R.threads->prev = &rt;
			R.threads = &rt;
			rt.listed = true;
		}
	}
	pthread_mutex_unlock(&R.lock);
	return err;
}

/* Wait while too many blocks are in flight (outside read-side sections). */
static void throttle(void)
{
	if (likely(atomic_load_explicit(&R.inflight, memory_order_relaxed) <
		   uslab_opt.rcu_max_inflight) ||
	    flavor()->read_ongoing())
		return;
	bump(throttled, 1);
	pthread_mutex_lock(&R.lock);
	__atomic_add_fetch(&R.throttled_waiters, 1, __ATOMIC_RELAXED);
	while (atomic_load(&R.inflight) >= uslab_opt.rcu_max_inflight) {
		pthread_cond_signal(&R.wake);
		pthread_cond_wait(&R.done, &R.lock);
	}
	__atomic_sub_fetch(&R.throttled_waiters, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&R.lock);
}

/* ------------------------------------------------------------ public */

/*
 * Slow path of both calls: start the thread, or publish the full block
 * and take another. @head: the emergency link of uslab_free_rcu_head(),
 * NULL for uslab_free_rcu().
 */
static __attribute__((noinline)) void free_rcu_slow(void *obj, struct rcu_head *head)
{
	struct rcu_block *b = rt.cur;

	if (unlikely(!rt.listed) && rcu_thread_start()) {
		b = NULL;
		goto no_block;
	}
	if (b) {
		__atomic_store_n(&rt.cur, NULL, __ATOMIC_RELEASE);
		block_publish(b);
		if (!head)
			throttle();
	}
	b = block_get(head ? FROM_POOL : FROM_POOL_OR_NEW);
	if (!b && !head && flavor()->read_ongoing()) {
		b = block_get(FROM_RESERVE);
		if (b)
			bump(reserve, 1);
	}
	if (b) {
		b->ptrs[0] = obj;
		__atomic_store_n(&b->n, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&rt.cur, b, __ATOMIC_RELEASE);
		return;
	}
no_block:
	if (head) {
		/* Emergency path: link through the object's rcu_head. */
		bool wake;

		if (unlikely(head_object(head) != obj))
			uslab_bug(NULL, head,
				  "uslab_free_rcu_head: rcu_head %p is not inside object %p",
				  (void *)head, obj);
		ulock_lock(&R.hq_lock);
		head->next.next = (struct cds_wfcq_node *)R.hq;
		R.hq = head;
		wake = ++R.nhq % RCU_BLOCK_CAP == 0;
		ulock_unlock(&R.hq_lock);
		if (wake)
			monitor_wake(); /* a block's worth: do not wait for the period */
		bump(emergency, 1);
		bump(queued, 1);
		return;
	}
	if (!flavor()->read_ongoing()) {
		/* Like the kernel's single-argument kvfree_rcu(): wait, then free. */
		flavor()->update_synchronize_rcu();
		uslab_cache_free_bulk(NULL, 1, &obj);
		bump(sync, 1);
		bump(queued, 1);
		bump(freed, 1);
		return;
	}
	bump(leaked, 1);
	bump(queued, 1);
	uslab_warn("uslab_free_rcu: no memory for a block inside a read-side critical "
		   "section: %p leaked",
		   obj);
}

/*
 * Fast path, both calls: one TLS load, a compare, two stores (the pointer,
 * then the count with release: plain moves on x86). No lock, no atomic
 * read-modify-write. Everything else is free_rcu_slow(), once per block.
 */
static inline void free_rcu_fast(void *obj, struct rcu_head *head)
{
	struct rcu_block *b = rt.cur;

	if (likely(b)) {
		uint32_t n = __atomic_load_n(&b->n, __ATOMIC_RELAXED);

		if (likely(n < RCU_BLOCK_CAP)) {
			b->ptrs[n] = obj;
			__atomic_store_n(&b->n, n + 1, __ATOMIC_RELEASE);
			return;
		}
	}
	free_rcu_slow(obj, head);
}

void uslab_free_rcu(void *obj)
{
	if (unlikely(!obj))
		return;
	free_rcu_fast(obj, NULL);
}

void uslab_free_rcu_head(void *obj, struct rcu_head *head)
{
	if (unlikely(!obj))
		return;
	free_rcu_fast(obj, head);
}

void uslab_rcu_barrier(void)
{
	uint64_t my;
	bool used;

	pthread_mutex_lock(&R.lock);
	used = R.used;
	pthread_mutex_unlock(&R.lock);
	if (!used)
		return; /* nothing was ever deferred */
	if (flavor()->read_ongoing()) {
		uslab_warn("uslab_rcu_barrier() called inside a read-side critical section");
		return;
	}
	if (rcu_thread_start())
		return; /* no monitor: nothing can have been deferred */
	if (rt.cur) {
		struct rcu_block *b = rt.cur;

		__atomic_store_n(&rt.cur, NULL, __ATOMIC_RELEASE);
		block_publish(b);
	}
	pthread_mutex_lock(&R.lock);
	my = ++R.barrier_req;
	pthread_cond_signal(&R.wake);
	while (R.barrier_done < my)
		pthread_cond_wait(&R.done, &R.lock);
	pthread_mutex_unlock(&R.lock);
}

int uslab_rcu_set_flavor(const struct rcu_flavor_struct *f)
{
	int ret = 0;

	if (!f)
		return -EINVAL;
	pthread_mutex_lock(&R.lock);
	if (R.used && flavor() != f)
		ret = -EBUSY;
	else
		__atomic_store_n(&R.flavor, f, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&R.lock);
	return ret;
}

int uslab_rcu_stats(struct uslab_rcu_stats *st)
{
	if (!st)
		return -EINVAL;
	st->queued = atomic_load(&S.queued);
	st->freed = atomic_load(&S.freed);
	st->batches = atomic_load(&S.batches);
	st->blocks = atomic_load(&S.blocks);
	st->emergency = atomic_load(&S.emergency);
	st->sync = atomic_load(&S.sync);
	st->reserve = atomic_load(&S.reserve);
	st->leaked = atomic_load(&S.leaked);
	st->throttled = atomic_load(&S.throttled);
	st->slabs_deferred = atomic_load(&S.slabs_deferred);
	st->slabs_released = atomic_load(&S.slabs_released);
	return 0;
}

/*
 * rcu_defer_slabs - release slabs of USLAB_TYPESAFE_BY_RCU caches (linked
 * by ->next, state FREE, ->cache still set so lookups still answer) to
 * os.c after a grace period. Never blocks; any thread, any context that
 * may free objects.
 */
void rcu_defer_slabs(struct slab *list)
{
	struct slab *tail = list, *head;
	unsigned long k = 1;

	while (tail->next) {
		tail = tail->next;
		k++;
	}
	bump(slabs_deferred, k);
	if (!rt.listed && rcu_thread_start()) {
		/* No monitor: the caller cannot wait safely; the slabs stay. */
		return;
	}
	head = atomic_load_explicit(&R.slabq, memory_order_relaxed);
	do
		tail->next = head;
	while (!atomic_compare_exchange_weak_explicit(&R.slabq, &head, list, memory_order_release,
						      memory_order_relaxed));
	monitor_wake();
}

/* ------------------------------------------------------------ fork */

/* Before caches_lock: waits for the monitor's grace period and drain. */
void rcu_fork_prepare(void)
{
	pthread_mutex_lock(&R.gp_lock);
}

/* After caches_lock. */
void rcu_fork_prepare_late(void)
{
	pthread_mutex_lock(&R.lock);
	ulock_lock(&R.pool_lock);
	ulock_lock(&R.hq_lock);
}

void rcu_fork_parent(void)
{
	ulock_unlock(&R.hq_lock);
	ulock_unlock(&R.pool_lock);
	pthread_mutex_unlock(&R.lock);
}

void rcu_fork_parent_early(void)
{
	pthread_mutex_unlock(&R.gp_lock);
}

/*
 * Fork: rcu_fork_prepare() took gp_lock, so no grace period of ours is in
 * progress. The child has no monitor: every block not yet freed - queued,
 * or the current block of any thread of the parent - is queued again and
 * freed by a new monitor started by the child's next deferred free or
 * barrier. uslab registers no thread with liburcu, so it leaves no stale
 * reader in the child's liburcu registry.
 */
void rcu_fork_child(void)
{
	unsigned long nq = 0;

	atomic_store(&R.sleeping, 0);
	pthread_mutex_init(&R.lock, NULL);
	pthread_cond_init(&R.wake, NULL);
	pthread_cond_init(&R.done, NULL);
	pthread_mutex_init(&R.gp_lock, NULL);
	ulock_init(&R.pool_lock);
	ulock_init(&R.hq_lock);
	/* Every block to the queue, ours too: our next free starts a monitor. */
	for (struct rcu_tls *t = R.threads, *next; t; t = next) {
		next = t->next;
		if (t->cur)
			block_publish(t->cur);
		t->cur = NULL;
		t->listed = false;
	}
	R.threads = NULL;
	for (struct rcu_block *b = atomic_load(&R.queue); b; b = b->next)
		nq++;
	atomic_store(&R.queued_blocks, nq);
	atomic_store(&R.inflight, nq);
	R.started = false;

	R.barrier_done = R.barrier_req;
	__atomic_store_n(&R.throttled_waiters, 0, __ATOMIC_RELAXED);
}
