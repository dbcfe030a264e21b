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
 * Batches. The grace-period engine's background thread, the monitor
 * (gp.c), calls this front end's hooks: gather takes everything queued,
 * the monitor waits for ONE grace period for all of it (the flavor's
 * synchronize_rcu), then drain frees every block with
 * uslab_cache_free_bulk(NULL, ...) - detached freelists, mixed caches - and
 * puts the blocks back in the spare pool (bounded: RCU_POOL_MAX). Objects
 * queued meanwhile make the next batch: under load the monitor runs grace
 * period after grace period, each covering everything freed during the
 * previous one. It is woken when USLAB_RCU_BATCH_BLOCKS blocks are queued,
 * and every USLAB_RCU_DRAIN_MS.
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
 * Barrier: uslab_rcu_barrier() asks the engine for a barrier round
 * (gp_barrier): a sweep of every thread's partial block, regardless of
 * age (blocks of exited threads were queued at their exit), a grace period
 * and the drain; the monitor then flushes its own sheaves, so nothing
 * freed stays cached in it.
 *
 * Thread exit. A thread's block is handed over by its pthread key
 * destructor. A deferred free after that (a later destructor of the
 * program's, a C++ thread_local) appends to one shared orphan block under
 * hq_lock instead: the exited thread is never listed again.
 *
 * Locks (LOCK_RCU_LIST, _HQ, _POOL in src/lock.h, which has the order): list_lock
 * protects the list of threads the monitor scans. hq_lock protects the
 * emergency list and the orphan block, and may be held while a block is
 * taken from the pool; pool_lock protects the spare blocks and may be
 * held while a block is allocated (node lock, os_lock).
 */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <urcu/urcu-memb.h>

#include "front.h"
#include "list.h"

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
	struct rcu_block *cur;	/* block being filled; owner writes */
	struct list_node link;	/* on rcu_state.threads (under list_lock) */
	bool listed;		/* on it: owner reads, written under list_lock */
	bool exited;		/* its key destructor ran */
	struct rcu_block *seen; /* monitor: cur at its last scan */
	uint32_t seen_n;	/* monitor: its n then */
};

static __thread struct rcu_tls rt __attribute__((tls_model("initial-exec")));

static struct {
	struct ulock list_lock;
	struct list_node threads; /* struct rcu_tls, under list_lock */
	pthread_key_t key;
	bool key_ok;

	struct rcu_block *queue; /* full blocks, lock-free push */
	unsigned long queued_blocks;
	unsigned long inflight; /* blocks from queueing to freeing */
	int pool_low;		/* a thread found the pool empty: refill it */

	struct ulock pool_lock;
	struct rcu_block *pool;
	unsigned int npool;

	struct ulock hq_lock;
	struct rcu_head *hq; /* emergency list */
	unsigned long nhq;
	struct rcu_block *orphan; /* frees of exited threads */
} rcu_state = {
	.list_lock = ULOCK_INIT_RANK(LOCK_RCU_LIST),
	.threads = LIST_HEAD_INIT(rcu_state.threads),
	.pool_lock = ULOCK_INIT_RANK(LOCK_RCU_POOL),
	.hq_lock = ULOCK_INIT_RANK(LOCK_RCU_HQ),
};

static pthread_once_t rcu_once = PTHREAD_ONCE_INIT;
static struct uslab_cache block_cache;
static bool block_cache_ok;

#ifdef USLAB_TESTING
/* Test hook (tests/unit, built into uslab_testing only): nonzero makes
 * block allocation and the pool above the reserve look empty. */
int rcu_fault_inject;
#define fault_injected() READ_ONCE(rcu_fault_inject)
#else
#define fault_injected() 0
#endif

/* Counters: relaxed atomics, bumped once per slow path or per batch. */
static struct {
	unsigned long queued, freed, batches, blocks, emergency, sync, reserve, leaked, throttled;
} rcu_stats;
#define rstat(f, v) stat_add_shared(rcu_stats.f, (v))

/* ------------------------------------------------------------ blocks */

static void block_cache_init(void)
{
	block_cache_ok = !cache_init_internal(&block_cache, "uslab_rcu_block", RCU_BLOCK_SIZE);
}

static struct rcu_block *block_new(void)
{
	if (fault_injected() || !block_cache_ok)
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

enum block_src {
	FROM_POOL,	  /* spare blocks above the reserve only */
	FROM_POOL_OR_NEW, /* then a new block */
	FROM_RESERVE,	  /* any spare block */
};

/* The pool: npool blocks (the list walked at check level 2), at most RCU_POOL_MAX. */
static void pool_check(void)
{
	USLAB_ASSERT_HELD(&rcu_state.pool_lock);
	USLAB_ASSERT(rcu_state.npool <= RCU_POOL_MAX && !rcu_state.pool == !rcu_state.npool);
#if USLAB_EXPENSIVE
	unsigned int k = 0;

	for (struct rcu_block *b = rcu_state.pool; b; b = b->next)
		k++;
	USLAB_ASSERT_EXPENSIVE(k == rcu_state.npool);
#endif
}

static struct rcu_block *block_get(enum block_src src)
{
	unsigned int floor = src == FROM_RESERVE ? 0 : RCU_RESERVE;
	struct rcu_block *b = NULL;

	if (fault_injected() && src != FROM_RESERVE)
		floor = UINT32_MAX;
	ulock_lock(&rcu_state.pool_lock);
	pool_check();
	if (rcu_state.npool > floor && rcu_state.npool != 0) {
		b = rcu_state.pool;
		rcu_state.pool = b->next;
		rcu_state.npool--;
	}
	ulock_unlock(&rcu_state.pool_lock);
	if (!b && src == FROM_POOL &&
	    !__atomic_exchange_n(&rcu_state.pool_low, 1, __ATOMIC_SEQ_CST))
		gp_wake(); /* uslab_free_rcu_head() allocates nothing: ask */
	if (!b && src == FROM_POOL_OR_NEW)
		b = block_new();
	if (b)
		block_init(b);
	return b;
}

static void block_put(struct rcu_block *b)
{
	ulock_lock(&rcu_state.pool_lock);
	if (rcu_state.npool < RCU_POOL_MAX) {
		b->next = rcu_state.pool;
		rcu_state.pool = b;
		rcu_state.npool++;
		b = NULL;
	}
	pool_check();
	ulock_unlock(&rcu_state.pool_lock);
	if (b)
		cache_free_direct(&block_cache, b);
}

/* The monitor keeps a few spare blocks ready for uslab_free_rcu_head(). */
static void pool_fill(void)
{
	for (;;) {
		struct rcu_block *b;

		ulock_lock(&rcu_state.pool_lock);
		b = rcu_state.npool < RCU_POOL_FILL ? block_new() : NULL;
		if (b) {
			b->next = rcu_state.pool;
			rcu_state.pool = b;
			rcu_state.npool++;
		}
		pool_check();
		ulock_unlock(&rcu_state.pool_lock);
		if (!b)
			break;
	}
}

/* ------------------------------------------------------ hand-over */

/* Owner: hand a block it filled (or leaves, at exit) to the monitor. */
static void block_publish(struct rcu_block *b)
{
	uint32_t old = __atomic_exchange_n(&b->taken, TAKEN_ALL, __ATOMIC_ACQ_REL);
	struct rcu_block *head = __atomic_load_n(&rcu_state.queue, __ATOMIC_RELAXED);

	/* Published once; the monitor claimed [0, old) of its n entries. */
	USLAB_ASSERT(old != TAKEN_ALL && old <= __atomic_load_n(&b->n, __ATOMIC_RELAXED));
	USLAB_ASSERT(__atomic_load_n(&b->n, __ATOMIC_RELAXED) <= RCU_BLOCK_CAP);
	b->start = old;
	rstat(queued, __atomic_load_n(&b->n, __ATOMIC_RELAXED) - old);
	/* Counted before it is visible: the monitor may free it before we return. */
	__atomic_fetch_add(&rcu_state.inflight, 1, __ATOMIC_RELAXED);
	do
		b->next = head;
	while (!__atomic_compare_exchange_n(&rcu_state.queue, &head, b, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	if (__atomic_fetch_add(&rcu_state.queued_blocks, 1, __ATOMIC_SEQ_CST) + 1 >=
	    usl_opt.rcu_batch_blocks)
		gp_wake();
}

/* The object an rcu_head lies in (NULL if it is in no slab). */
static void *head_object(const void *h)
{
	struct slab *s = os_slab_lookup(h);
	void *obj = NULL;

	if (unlikely(!s && guard_owns(h))) /* a sampled object */
		return guard_object(h, &obj, NULL) ? obj : NULL;
	return s ? slab_object_at(s, h) : NULL;
}

/*
 * Free @objs[0..n) after their grace period. Those of debug caches were
 * marked queued at uslab_free_rcu(): allocated again, then freed (checked).
 */
static void free_after_gp(size_t n, void **objs)
{
	if (unlikely(__atomic_load_n(&slab_debug_on, __ATOMIC_ACQUIRE)))
		slab_debug_rcu_done(objs, n);
	uslab_cache_free_bulk(NULL, n, objs);
	rstat(freed, n);
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
			free_after_gp(n, objs);
			n = 0;
		}
		h = next;
	}
	free_after_gp(n, objs);
}

/* After the grace period: free every object of a batch, recycle its blocks. */
static void drain_batch(struct rcu_block *batch, unsigned long nb)
{
	unsigned long k = 0, was, objs = 0;

	for (struct rcu_block *b = batch, *next; b; b = next) {
		uint32_t n = __atomic_load_n(&b->n, __ATOMIC_ACQUIRE);

		USLAB_ASSERT(b->start <= n && n <= RCU_BLOCK_CAP);
		next = b->next;
		free_after_gp(n - b->start, b->ptrs + b->start);
		objs += n - b->start;
		block_put(b);
		k++;
	}
	PROBE(rcu_batch, objs, nb);
	/* Every block of the batch is counted in flight since it was queued. */
	USLAB_ASSERT(k == nb);
	was = __atomic_fetch_sub(&rcu_state.inflight, nb,
				 __ATOMIC_SEQ_CST); /* gp.c wakes throttled threads */
	USLAB_ASSERT(was >= nb);
	(void)was;
}

/*
 * Steal the published entries [taken, n) of @t's block: copy them into a
 * block of the monitor's and claim them with a CAS. Under list_lock.
 * @all: also entries that arrived since the last scan (barrier).
 */
static struct rcu_block *steal(struct rcu_tls *t, bool all)
{
	struct rcu_block *b = __atomic_load_n(&t->cur, __ATOMIC_ACQUIRE), *dst;
	uint32_t tk, n;

	USLAB_ASSERT_HELD(&rcu_state.list_lock);
	USLAB_ASSERT(t->listed && !t->exited);
	if (!b)
		return NULL;
	tk = __atomic_load_n(&b->taken, __ATOMIC_ACQUIRE);
	n = __atomic_load_n(&b->n, __ATOMIC_ACQUIRE);
	if (tk == TAKEN_ALL || n == tk)
		return NULL;
	USLAB_ASSERT(tk < n && n <= RCU_BLOCK_CAP);
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
	rstat(queued, n - tk);
	t->seen = NULL;
	__atomic_fetch_add(&rcu_state.inflight, 1, __ATOMIC_RELAXED);
	return dst;
}

/* What one round frees: the gp_client hooks below fill and drain it. */
static struct rcu_batch {
	struct rcu_block *blocks;
	unsigned long nb;
	struct rcu_head *heads;
} batch;

/*
 * gather (gp_client): take the queued blocks, the orphan block and the
 * emergency list; with @scan, also entries of threads' partly filled
 * blocks (@all: however recent). Monitor only, under gp.c's round_lock.
 * Return: the batch, or NULL when there is nothing to free.
 */
static void *rcu_gather(bool scan, bool all)
{
	struct rcu_block *b;
	unsigned long nq = 0;

	/* The monitor's round (or a barrier round run by its caller). */
	USLAB_ASSERT(lockdep_held(LOCK_GP_ROUND) && lockdep_depth() == 1);
	batch.blocks = __atomic_exchange_n(&rcu_state.queue, NULL, __ATOMIC_SEQ_CST);
	for (b = batch.blocks; b; b = b->next)
		nq++;
	batch.nb = nq;
	if (scan) {
		ulock_lock(&rcu_state.list_lock);
		struct list_node *pos;

		list_for_each(pos, &rcu_state.threads) {
			b = steal(list_entry(pos, struct rcu_tls, link), all);
			if (b) {
				b->next = batch.blocks;
				batch.blocks = b;
				batch.nb++;
			}
		}
		ulock_unlock(&rcu_state.list_lock);
	}
	ulock_lock(&rcu_state.hq_lock);
	batch.heads = rcu_state.hq;
	rcu_state.hq = NULL;
	rcu_state.nhq = 0;
	b = rcu_state.orphan;
	rcu_state.orphan = NULL;
	ulock_unlock(&rcu_state.hq_lock);
	if (b) {
		b->start = 0;
		rstat(queued, b->n);
		b->next = batch.blocks;
		batch.blocks = b;
		batch.nb++;
		__atomic_fetch_add(&rcu_state.inflight, 1, __ATOMIC_RELAXED);
	}
	if (nq)
		__atomic_fetch_sub(&rcu_state.queued_blocks, nq, __ATOMIC_SEQ_CST);
	if (!batch.blocks && !batch.heads)
		return NULL;
#if USLAB_EXPENSIVE
	nq = 0;
	for (b = batch.blocks; b; b = b->next)
		nq++;
	USLAB_ASSERT_EXPENSIVE(nq == batch.nb);
#endif
	rstat(blocks, batch.nb);
	rstat(batches, 1);
	return &batch;
}

/* drain (gp_client): after the grace period, free what gather took. */
static void rcu_drain(void *arg)
{
	struct rcu_batch *bt = arg;

	USLAB_ASSERT(bt == &batch && lockdep_held(LOCK_GP_ROUND));
	drain_batch(bt->blocks, bt->nb);
	drain_heads(bt->heads);
}

/* idle (gp_client): keep a few spare blocks for uslab_free_rcu_head(). */
static void rcu_idle(void)
{
	__atomic_store_n(&rcu_state.pool_low, 0, __ATOMIC_SEQ_CST);
	pool_fill();
}

static const struct gp_client rcu_client = {
	.gather = rcu_gather,
	.drain = rcu_drain,
	.idle = rcu_idle,
	.after_barrier = uslab_thread_flush, /* nothing freed stays cached here */
};

/* ------------------------------------------------------------ threads */

static void rcu_thread_exit(void *arg)
{
	struct rcu_tls *t = arg;
	struct rcu_block *b;

	/* Off the list first: the monitor no longer looks at our block. */
	ulock_lock(&rcu_state.list_lock);
	if (t->listed) {
		list_del(&t->link);
		__atomic_store_n(&t->listed, false, __ATOMIC_RELAXED);
	}
	b = t->cur;
	__atomic_store_n(&t->cur, NULL, __ATOMIC_RELEASE);
	t->exited = true; /* later frees of this thread go to the orphan block */
	ulock_unlock(&rcu_state.list_lock);
	if (b)
		block_publish(b);
}

static void rcu_init_once(void)
{
	block_cache_init();
	rcu_state.key_ok = !pthread_key_create(&rcu_state.key, rcu_thread_exit);
}

/*
 * Start deferred freeing for this thread (and the monitor). No lock held.
 * Return: 0, or -1 when the thread cannot keep a block (no monitor, no
 * key; or it has exited: its key destructor would not run again).
 */
static int rcu_thread_start_nocancel(void)
{
	USLAB_ASSERT(!lockdep_depth());
	if (usl_init())
		return -1;
	pthread_once(&rcu_once, rcu_init_once);
	if (rt.exited || !rcu_state.key_ok || gp_start())
		return -1;
	if (__atomic_load_n(&rt.listed, __ATOMIC_RELAXED))
		return 0;
	if (pthread_setspecific(rcu_state.key, &rt))
		return -1;
	ulock_lock(&rcu_state.list_lock);
	list_add(&rt.link, &rcu_state.threads);
	__atomic_store_n(&rt.listed, true, __ATOMIC_RELAXED);
	ulock_unlock(&rcu_state.list_lock);
	return 0;
}

/* Once a thread: the block cache's creation (getrandom()), the monitor's start. */
static int rcu_thread_start(void)
{
	int old = usl_nocancel();
	int ret = rcu_thread_start_nocancel();

	usl_cancel_restore(old);
	return ret;
}

static bool inflight_below_max(void)
{
	return __atomic_load_n(&rcu_state.inflight, __ATOMIC_SEQ_CST) < usl_opt.rcu_max_inflight;
}

/* Wait while too many blocks are in flight (outside read-side sections). */
static void throttle(void)
{
	if (likely(inflight_below_max()) || gp_read_ongoing())
		return;
	rstat(throttled, 1);
	gp_wait_until(inflight_below_max);
}

/*
 * A free by a thread whose key destructor ran: into the shared orphan
 * block, published when full. Return: false when no block could be had.
 */
static bool orphan_free(void *obj)
{
	struct rcu_block *full = NULL;
	bool ok = true;

	ulock_lock(&rcu_state.hq_lock);
	/* Only threads whose key destructor ran; a full orphan is published. */
	USLAB_ASSERT(rt.exited && (!rcu_state.orphan || rcu_state.orphan->n <= RCU_BLOCK_CAP));
	if (rcu_state.orphan && rcu_state.orphan->n == RCU_BLOCK_CAP) {
		full = rcu_state.orphan;
		rcu_state.orphan = NULL;
	}
	if (!rcu_state.orphan)
		rcu_state.orphan = block_get(FROM_POOL_OR_NEW);
	if (rcu_state.orphan)
		rcu_state.orphan->ptrs[rcu_state.orphan->n++] = obj;
	else
		ok = false;
	ulock_unlock(&rcu_state.hq_lock);
	if (full) {
		__atomic_store_n(&full->taken, 0, __ATOMIC_RELAXED);
		block_publish(full);
	}
	return ok;
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

	if (unlikely(!__atomic_load_n(&rt.listed, __ATOMIC_RELAXED)) && rcu_thread_start()) {
		if (rt.exited && gp_start() == 0 && orphan_free(obj))
			return; /* counted as queued when handed over, like a block */
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
	if (!b && !head && gp_read_ongoing()) {
		b = block_get(FROM_RESERVE);
		if (b)
			rstat(reserve, 1);
	}
	if (b) {
		b->ptrs[0] = obj;
		__atomic_store_n(&b->n, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&rt.cur, b, __ATOMIC_RELEASE);
		return;
	}
no_block:
	if (head && gp_start() == 0) {
		/* Emergency path: link through the object's rcu_head. */
		bool wake;

		if (unlikely(head_object(head) != obj))
			usl_bug(NULL, head,
				"uslab_free_rcu_head: rcu_head %p is not inside object %p",
				(void *)head, obj);
		ulock_lock(&rcu_state.hq_lock);
		head->next.next = (struct cds_wfcq_node *)rcu_state.hq;
		rcu_state.hq = head;
		wake = ++rcu_state.nhq % RCU_BLOCK_CAP == 0;
		ulock_unlock(&rcu_state.hq_lock);
		if (wake)
			gp_wake(); /* a block's worth: do not wait for the period */
		rstat(emergency, 1);
		rstat(queued, 1);
		return;
	}
	if (!gp_read_ongoing()) {
		/* Like the kernel's single-argument kvfree_rcu(): wait, then free. */
		gp_synchronize();
		free_after_gp(1, &obj);
		rstat(sync, 1);
		rstat(queued, 1);
		return;
	}
	rstat(leaked, 1);
	rstat(queued, 1);
	usl_warn("uslab_free_rcu: no memory for a block inside a read-side critical "
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

/* In the debug tier, an object is checked at the call and marked queued (slab_debug.c). */
#define debug_queue(obj) \
	(unlikely(__atomic_load_n(&slab_debug_on, __ATOMIC_RELAXED)) && !slab_debug_free_rcu(obj))

void uslab_free_rcu(void *obj)
{
	if (unlikely(obj_is_hole(obj)) || debug_queue(obj))
		return;
	free_rcu_fast(obj, NULL);
}

void uslab_free_rcu_head(void *obj, struct rcu_head *head)
{
	if (unlikely(!obj) || debug_queue(obj))
		return;
	free_rcu_fast(obj, head);
}

void uslab_rcu_barrier(void)
{
	struct rcu_block *b = rt.cur;

	if (!gp_used())
		return; /* nothing was ever deferred */
	if (gp_read_ongoing()) {
		usl_warn("uslab_rcu_barrier() called inside a read-side critical section");
		return;
	}
	if (b) {
		__atomic_store_n(&rt.cur, NULL, __ATOMIC_RELEASE);
		block_publish(b);
	}
	gp_barrier();
}

int uslab_rcu_set_flavor(const struct rcu_flavor_struct *f)
{
	return f ? gp_set_flavor(f) : -EINVAL;
}

int uslab_rcu_stats(struct uslab_rcu_stats *st)
{
	if (!st)
		return -EINVAL;
	st->queued = __atomic_load_n(&rcu_stats.queued, __ATOMIC_SEQ_CST);
	st->freed = __atomic_load_n(&rcu_stats.freed, __ATOMIC_SEQ_CST);
	st->batches = __atomic_load_n(&rcu_stats.batches, __ATOMIC_SEQ_CST);
	st->blocks = __atomic_load_n(&rcu_stats.blocks, __ATOMIC_SEQ_CST);
	st->emergency = __atomic_load_n(&rcu_stats.emergency, __ATOMIC_SEQ_CST);
	st->sync = __atomic_load_n(&rcu_stats.sync, __ATOMIC_SEQ_CST);
	st->reserve = __atomic_load_n(&rcu_stats.reserve, __ATOMIC_SEQ_CST);
	st->leaked = __atomic_load_n(&rcu_stats.leaked, __ATOMIC_SEQ_CST);
	st->throttled = __atomic_load_n(&rcu_stats.throttled, __ATOMIC_SEQ_CST);
	gp_stats(&st->slabs_deferred, &st->slabs_released);
	return 0;
}

/* At start-up: the grace-period engine calls this front end's hooks. */
void rcu_init(void)
{
	gp_set_client(&rcu_client);
}

/* ------------------------------------------------------------ fork */

/* After gp.c's gp_lock. */
void rcu_fork_prepare(void)
{
	ulock_lock(&rcu_state.list_lock);
	ulock_lock(&rcu_state.hq_lock);
	ulock_lock(&rcu_state.pool_lock);
}

void rcu_fork_parent(void)
{
	ulock_unlock(&rcu_state.pool_lock);
	ulock_unlock(&rcu_state.hq_lock);
	ulock_unlock(&rcu_state.list_lock);
}

/*
 * Fork: gp.c's round_lock is held, so no batch of ours is between gather
 * and drain. The child has no monitor: every block not yet freed - queued,
 * or the current block of any thread of the parent - is queued again and
 * freed by a monitor started by the child's next deferred free, barrier or
 * gp_kick().
 */
void rcu_fork_child(void)
{
	struct list_node *pos, *tmp;
	unsigned long nq = 0;

	ulock_init(&rcu_state.list_lock);
	ulock_init(&rcu_state.pool_lock);
	ulock_init(&rcu_state.hq_lock);
	/* Every block to the queue, ours too: our next free starts a monitor. */
	list_for_each_safe(pos, tmp, &rcu_state.threads) {
		struct rcu_tls *t = list_entry(pos, struct rcu_tls, link);

		if (t->cur)
			block_publish(t->cur);
		t->cur = NULL;
		t->listed = false;
		list_del(pos);
	}
	for (struct rcu_block *b = __atomic_load_n(&rcu_state.queue, __ATOMIC_SEQ_CST); b;
	     b = b->next)
		nq++;
	__atomic_store_n(&rcu_state.queued_blocks, nq, __ATOMIC_SEQ_CST);
	__atomic_store_n(&rcu_state.inflight, nq, __ATOMIC_SEQ_CST);
	if (nq || rcu_state.hq || rcu_state.orphan)
		gp_need_start();
}
