// SPDX-License-Identifier: MIT
/*
 * barn.c - a cache's depot of full and empty sheaves (Bonwick's magazine
 * depot; the per-node barn of Linux 6.18).
 *
 * A cache has one barn per NUMA node (cache_barn(); one with NUMA off),
 * each holding sheaves of that node's objects and adapting its capacity and
 * depth to that node's traffic (doc/design.md, "NUMA").
 *
 * Threads trade whole sheaves here: an allocating thread whose sheaves are
 * empty gives an empty sheaf and takes a full one; a freeing thread whose
 * sheaves are full gives a full one and takes an empty one. One lock
 * acquisition moves a whole sheaf of objects between threads, which is what
 * makes producer -> consumer traffic cheap.
 *
 * Bounds: at most max_full full and max_empty empty sheaves (tunables
 * USLAB_BARN_MAX_FULL, USLAB_BARN_MAX_EMPTY). A full sheaf refused for lack
 * of room is flushed to slabs by the caller; an empty one is freed.
 *
 * The adaptive depth. max_full starts at full_min (USLAB_BARN_MAX_FULL)
 * and grows by one sheaf each time a thread finds no full sheaf within
 * USLAB_SHEAF_DECAY_MS of the barn refusing that thread a run of sheaves
 * as long as its depth (barn_refused(), barn_missed(): objects it just
 * flushed to slabs are read back), while the
 * full sheaves at that depth hold at most full_bytes (USLAB_BARN_MAX_MB;
 * USLAB_MALLOC_BARN_MAX_MB, 0 by default, for the drop-in's classes) of
 * objects. Once it has not grown for an interval, what it has above
 * full_min halves per interval (shallow_locked(), from the trades'
 * judgement or the decay monitor), the oldest full sheaves past it going
 * to slabs. doc/design.md, "The barn's depth".
 *
 * Lock: barn->lock (LOCK_BARN in src/lock.h) protects both
 * stacks and the counts. It is never held together with the node lock;
 * flushing happens after the sheaf has left the barn. The counts are also
 * read without the lock, to skip a trip to an empty barn: they are written
 * with WRITE_ONCE.
 *
 * The adaptive capacity. The barn also decides the capacity of the sheaves
 * its cache hands out (sheaf_alloc() reads b->capacity), from cap_min (the
 * cache's base, c->sheaf_capacity) up to cap_max (sheaf_capacity_max();
 * equal when pinned: no adaptation), as tcmalloc sizes its per-CPU caches
 * by their misses. Each trade (a full sheaf for an empty one, or back) is
 * counted under the lock, which the trade holds anyway; every ADAPT_TRADES
 * trades the clock is read (CLOCK_MONOTONIC, once per 32 sheaves moved):
 *
 *   - 32 trades within 32 / USLAB_SHEAF_GROW_RATE seconds, 1 ms at the
 *     default rate of 32000 a second: the capacity doubles (the next
 *     class, up to cap_max). A steady flow thus settles where it trades
 *     about USLAB_SHEAF_GROW_RATE times a second or less;
 *   - the window lasted USLAB_SHEAF_DECAY_MS (100 ms) or more: it halves,
 *     once per USLAB_SHEAF_DECAY_MS elapsed, down to cap_min.
 *
 * Traffic that stops makes no trade, so barn_decay() applies the second
 * rule from the decay monitor: a thread started when a cache first grows
 * (barn_kick(), holding no lock: at the entry of every slow path,
 * pcs_self(), and after the unlock of those that trade), which
 * every USLAB_SHEAF_DECAY_MS calls barn_decay() on each grown cache and
 * exits once none is grown. A grown capacity is thus back at its base
 * within about (halvings + 1) * USLAB_SHEAF_DECAY_MS of the last trade:
 * 1022 -> 126 is three halvings, 300-400 ms by default. barn_decay() also
 * runs when a thread drains its sheaves (exit), and barn_drain()
 * (uslab_cache_shrink(), destroy) drops the capacity to cap_min at once.
 * When the capacity changes, the empty sheaves in the barn (all of the old
 * capacity) are freed; when it shrinks, full sheaves beyond max_full * capacity objects
 * are flushed to slabs (a pool cache, USLAB_POOL, flushes none); sheaves
 * of the old capacity that threads hold stay in use until they come back:
 * full ones are kept as any full sheaf, empty ones are refused (freed by
 * the caller) -- a thread trading thus replaces its sheaves of a stale
 * capacity. A bare barn (capacity 0: unit tests) takes sheaves of any
 * capacity and never adapts.
 *
 * Invariants (barn_check): nr_full <= max_full, nr_empty <= max_empty, and
 * each count is the length of its stack (that one at check level 2);
 * cap_min <= capacity <= cap_max; every empty sheaf is of the current
 * capacity (check level 2).
 */
#include <stddef.h>
#include <time.h>

#include "perthread.h"

/* Trades between two readings of the clock (the adaptive capacity). */
#define ADAPT_TRADES 32u
/* The most full sheaves a grown depth holds (below USLAB_BARN_MAX_FULL's "unbounded"). */
#define DEPTH_MOST 65536u

/* The invariants of the file comment. Lock held. */
static void barn_check(struct barn *b)
{
	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(b->nr_full <= b->max_full && b->nr_empty <= b->max_empty);
	USLAB_ASSERT(!b->capacity || (b->cap_min <= b->capacity && b->capacity <= b->cap_max));
#if USLAB_EXPENSIVE
	unsigned int nf = 0, ne = 0;

	for (struct sheaf *s = b->full; s; s = s->next)
		nf++;
	for (struct sheaf *s = b->empty; s; s = s->next) {
		USLAB_ASSERT_EXPENSIVE(!b->capacity || s->capacity == b->capacity);
		ne++;
	}
	USLAB_ASSERT_EXPENSIVE(nf == b->nr_full && ne == b->nr_empty);
#endif
}

/* Take the barn lock: never with a node lock held (the file comment). */
static void barn_lock(struct barn *b)
{
	USLAB_ASSERT(!lockdep_held(LOCK_NODE));
	ulock_lock(&b->lock);
	barn_check(b);
}

static void barn_unlock(struct barn *b)
{
	barn_check(b);
	ulock_unlock(&b->lock);
}

void barn_init(struct barn *b, struct uslab_cache *c, unsigned int max_full, unsigned int max_empty)
{
	ulock_setup(&b->lock, LOCK_BARN);
	b->cache = c;
	b->full = b->empty = NULL;
	b->nr_full = b->nr_empty = 0;
	b->max_full = max_full;
	b->max_empty = max_empty;
	b->capacity = b->cap_min = b->cap_max = 0;
	b->trades = 0;
	b->window = 0;
	b->grows = b->shrinks = 0;
	b->full_min = max_full;
	b->full_grows = b->full_shrinks = 0;
	b->full_bytes = 0; /* no growth until barn_adapt_init() */
	b->refused_ns = b->deep_ns = 0;
	b->refused_run = 0;
	WRITE_ONCE(b->regrow, false);
}

static struct sheaf *pop_locked(struct barn *b, struct sheaf **stack, unsigned int *nr);

bool barn_monitor_need; /* a cache grew: the decay monitor should run */

/* ------------------------------------------------- adaptive capacity */

uint64_t barn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The decay interval, USLAB_SHEAF_DECAY_MS, in ns. */
static uint64_t decay_ns(void)
{
	return (uint64_t)usl_opt.sheaf_decay_ms * 1000000u;
}

/* The cache of @b (only for barns that adapt: those are in caches). */
static struct uslab_cache *barn_cache(struct barn *b)
{
	return b->cache;
}

/* The NUMA node of @b, its index in cache_barn() (for the probes). */
static inline unsigned int barn_node(struct barn *b)
{
	struct uslab_cache *c = b->cache;

	return b == &c->barn ? 0 : (unsigned int)(b - c->barn_more) + 1;
}

static bool adaptive(const struct barn *b)
{
	return b->cap_max > b->cap_min;
}

/* Whether the barn keeps @s as an empty sheaf: of the current capacity. */
static bool current(const struct barn *b, const struct sheaf *s)
{
	return !b->capacity || s->capacity == b->capacity;
}

/* Whether @b's full sheaves stay pointers whatever their number (pool mode). */
static bool keeps_all(struct barn *b)
{
	if (barn_cache(b)->flags & USLAB_POOL)
		return true;	      /* (pools do not adapt either: lifecycle.c) */
	return b->full_min >= 100000; /* USLAB_BARN_MAX_FULL's maximum: unbounded */
}

/* barn_adapt_init() of one node's barn @b. */
static void adapt_init(struct barn *b, struct uslab_cache *c, unsigned int requested,
		       unsigned int grow_mb)
{
	ulock_lock(&b->lock);
	b->cap_min = c->sheaf_capacity;
	b->cap_max = sheaf_capacity_max(c->size, requested, c->sheaf_capacity);
	WRITE_ONCE(b->capacity, b->cap_min);
	b->trades = 0;
	b->window = b->deep_ns = barn_now_ns();
	/* The depth grows from a base of at least one sheaf, up to @grow_mb MiB of objects. */
	if (!keeps_all(b) && b->full_min)
		b->full_bytes = (uint64_t)grow_mb << 20;
	ulock_unlock(&b->lock);
}

/*
 * barn_adapt_init - the adaptive capacity and depth of @c, just given its
 * base capacity c->sheaf_capacity (lifecycle_create); @requested:
 * uslab_cache_args.sheaf_capacity (non-zero pins the capacity); @grow_mb:
 * MiB of objects each barn's full sheaves may hold when its depth grows
 * (USLAB_BARN_MAX_MB, or USLAB_MALLOC_BARN_MAX_MB for the drop-in's
 * classes; 0: the depth stays at its base).
 */
void barn_adapt_init(struct uslab_cache *c, unsigned int requested, unsigned int grow_mb)
{
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
		adapt_init(cache_barn(c, nid), c, requested, grow_mb);
}

/*
 * Set the capacity to @cap. Under the lock. The empty sheaves, of the old
 * capacity, go to @out to be freed; shrinking, so do the full sheaves past
 * max_full * @cap objects (to be flushed first). Stack order is kept.
 */
static void resize_locked(struct barn *b, unsigned int cap, struct sheaf **out)
{
	struct sheaf *s;

	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(b->cap_min <= cap && cap <= b->cap_max);
	if (cap == b->capacity)
		return;
	PROBE(capacity, b->cache->name, barn_node(b), b->capacity, cap);
	for (unsigned int c = b->capacity; c != cap; c = sheaf_class_step(c, cap > c)) {
		if (cap > c)
			b->grows++;
		else
			b->shrinks++;
	}
	if (b->capacity == b->cap_min)
		__atomic_store_n(&barn_monitor_need, true, __ATOMIC_RELAXED); /* grown: decay it */
	while ((s = pop_locked(b, &b->empty, &b->nr_empty))) {
		s->next = *out;
		*out = s;
	}
	if (cap < b->capacity && !keeps_all(b)) {
		uint64_t budget = (uint64_t)b->max_full * cap, kept = 0;
		struct sheaf **link = &b->full;

		while ((s = *link)) {
			if (kept + s->size <= budget) {
				kept += s->size;
				link = &s->next;
				continue;
			}
			*link = s->next;
			WRITE_ONCE(b->nr_full, b->nr_full - 1);
			s->next = *out;
			*out = s;
		}
	}
	WRITE_ONCE(b->capacity, cap);
}

static void shallow_locked(struct barn *b, uint64_t now, struct sheaf **out);

/*
 * Judge the trade rate since the window opened, at @now (the file
 * comment): double, or halve once per USLAB_SHEAF_DECAY_MS, then open a new
 * window. Under the lock.
 */
static void judge_locked(struct barn *b, uint64_t now, struct sheaf **out)
{
	uint64_t dt = now > b->window ? now - b->window : 0;
	uint64_t grow_ns = (uint64_t)ADAPT_TRADES * 1000000000u / usl_opt.sheaf_grow_rate;
	uint64_t decay = decay_ns();
	unsigned int cap = b->capacity;

	if (b->trades >= ADAPT_TRADES && dt <= grow_ns) {
		if (cap < b->cap_max)
			cap = sheaf_class_step(cap, true);
	} else if (dt >= decay) {
		for (uint64_t steps = dt / decay; steps-- && cap > b->cap_min;)
			cap = sheaf_class_step(cap, false);
	}
	b->trades = 0;
	b->window = now;
	resize_locked(b, cap, out);
	shallow_locked(b, now, out);
}

/* Whether the capacity or the depth is above its base (the decay monitor's work). */
static bool grown(const struct barn *b)
{
	return (adaptive(b) && READ_ONCE(b->capacity) != b->cap_min) ||
	       READ_ONCE(b->max_full) != b->full_min;
}

/* Count a trade. Under the lock. */
static inline void trade_locked(struct barn *b, struct sheaf **out)
{
	if ((adaptive(b) || b->max_full != b->full_min) && ++b->trades >= ADAPT_TRADES)
		judge_locked(b, barn_now_ns(), out);
}

/* ---------------------------------------------------- adaptive depth */

/* The calling thread, as the depth tells threads apart (an address of its own). */
static uintptr_t barn_self(void)
{
	static __thread char self;

	return (uintptr_t)&self;
}

/*
 * A full sheaf was refused for lack of room (the caller flushes it to
 * slabs): remember when, for barn_missed(). No lock (a racy store of a
 * time is harmless).
 */
static void barn_refused(struct barn *b)
{
	if (b->full_bytes) {
		__atomic_store_n(&b->refused_ns, barn_now_ns(), __ATOMIC_RELAXED);
		__atomic_store_n(&b->refused_by, barn_self(), __ATOMIC_RELAXED);
		__atomic_fetch_add(&b->refused_run, 1, __ATOMIC_RELAXED);
	}
}

/*
 * A thread found no full sheaf and refills from slabs. If the barn last
 * refused this thread a run of full sheaves as long as its depth or
 * longer (a freed set of twice what it holds, flushed to slabs) within the
 * last USLAB_SHEAF_DECAY_MS, the objects it now reads back from slabs
 * could have stayed in sheaves: one more sheaf of depth per such miss
 * until the barn refuses again, while its objects fit in
 * USLAB_BARN_MAX_MB. Short runs (two threads trading through a barn now
 * full, now empty) grow nothing, nor do another thread's refusals: a
 * consumer's frees (or the deferred frees' monitor, in bulk after a grace
 * period) come back to a producer through slabs in slab order, which
 * measured faster than through a deep barn (doc/design.md). No lock held.
 */
static void barn_missed(struct barn *b)
{
	uint64_t refused = __atomic_load_n(&b->refused_ns, __ATOMIC_RELAXED), now, bytes;
	unsigned int run;

	if (!refused)
		return;
	now = barn_now_ns();
	if (now > refused && now - refused > decay_ns()) {
		__atomic_store_n(&b->refused_ns, 0, __ATOMIC_RELAXED); /* not lately */
		return;
	}
	run = __atomic_exchange_n(&b->refused_run, 0, __ATOMIC_RELAXED);
	if (!run && !READ_ONCE(b->regrow))
		return; /* (the common miss after a short run: no lock) */
	barn_lock(b);
	/* A new run of refusals since the last miss: long enough, and this thread's own? */
	if (run)
		WRITE_ONCE(b->regrow, run >= b->max_full &&
					      __atomic_load_n(&b->refused_by, __ATOMIC_RELAXED) ==
						      barn_self());
	bytes = (uint64_t)(b->max_full + 1) * b->capacity * barn_cache(b)->size;
	if (b->regrow && bytes <= b->full_bytes && b->max_full < DEPTH_MOST) {
		if (b->max_full == b->full_min)
			__atomic_store_n(&barn_monitor_need, true, __ATOMIC_RELAXED); /* decay it */
		WRITE_ONCE(b->max_full, b->max_full + 1);
		b->full_grows++;
		b->deep_ns = now;
	}
	barn_unlock(b);
}

/*
 * The depth did not grow for USLAB_SHEAF_DECAY_MS or more: halve what it
 * has above its base once per interval elapsed; full sheaves past the new
 * depth (the oldest, at the bottom of the stack) go to @out to be flushed.
 * Under the lock.
 */
static void shallow_locked(struct barn *b, uint64_t now, struct sheaf **out)
{
	unsigned int depth = b->max_full, kept = 0;
	struct sheaf **link = &b->full, *s;

	USLAB_ASSERT_HELD(&b->lock);
	if (depth == b->full_min || now < b->deep_ns + decay_ns())
		return;
	for (uint64_t steps = (now - b->deep_ns) / decay_ns(); steps-- && depth > b->full_min;) {
		depth = b->full_min + (depth - b->full_min) / 2;
		b->full_shrinks++;
	}
	WRITE_ONCE(b->max_full, depth);
	b->deep_ns = now;
	while (*link && kept < depth) {
		link = &(*link)->next;
		kept++;
	}
	while ((s = *link)) {
		*link = s->next;
		WRITE_ONCE(b->nr_full, b->nr_full - 1);
		s->next = *out;
		*out = s;
	}
}

static void release(struct barn *b, struct sheaf *out);

/*
 * barn_note_bulk - a bulk call of @n objects on @c did not fit the
 * caller's sheaf (a consumer whose burst is larger than a sheaf, as DPDK
 * sizes its mempool cache by the burst): counted as a trade, so that such
 * calls at the grow rate raise the capacity, one class per judgement,
 * while it is below @n. No lock taken when @n is above what the capacity
 * may grow to. Return: whether the capacity handed out now holds @n.
 */
bool barn_note_bulk(struct uslab_cache *c, size_t n, unsigned int nid)
{
	struct barn *b = cache_barn(c, nid);
	struct sheaf *out = NULL;

	if (!adaptive(b) || n > b->cap_max)
		return false;
	if (READ_ONCE(b->capacity) < n) {
		barn_lock(b);
		trade_locked(b, &out);
		barn_unlock(b);
		release(b, out);
	}
	return READ_ONCE(b->capacity) >= n;
}

/*
 * Flush and free the sheaves a resize took out of the barn. No barn lock
 * held. The decay monitor calls it under caches_lock (cache_for_each), so
 * destroy never finds objects in transit here; a concurrent shrink or
 * statistics may (they arrive in their slabs when this returns).
 */
static void release(struct barn *b, struct sheaf *out)
{
	struct sheaf *next;

	for (; out; out = next) {
		next = out->next;
		if (out->size)
			sheaf_flush(barn_cache(b), out);
		sheaf_free(barn_cache(b), out);
	}
}

/*
 * barn_decay - the traffic of @c may have stopped: halve its capacity once
 * per USLAB_SHEAF_DECAY_MS since the last judgement (@now_ns from
 * barn_now_ns()). Any context where the barn lock may be taken.
 */
void barn_decay(struct uslab_cache *c, uint64_t now_ns)
{
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
		struct barn *b = cache_barn(c, nid);
		struct sheaf *out = NULL;

		if (!grown(b))
			continue;
		barn_lock(b);
		if (now_ns > b->window && now_ns - b->window >= decay_ns())
			judge_locked(b, now_ns, &out);
		barn_unlock(b);
		release(b, out);
	}
}

/* Whether a barn of @c is grown (capacity or depth above its base). */
static bool cache_grown(struct uslab_cache *c)
{
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
		if (grown(cache_barn(c, nid)))
			return true;
	return false;
}

/* ------------------------------------------------------ decay monitor */

static struct {
	pthread_mutex_t lock; /* running, retry_ns; a leaf: no uslab lock taken under it */
	bool running;	      /* also read without the lock (barn_kick) */
	uint64_t retry_ns;    /* a start that failed is retried after */
} monitor = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* One cache of the monitor's pass (under caches_lock): decay it; count it if still grown. */
static void decay_one(struct uslab_cache *c, void *arg)
{
	if (!cache_grown(c))
		return;
	barn_decay(c, barn_now_ns());
	if (cache_grown(c))
		(*(unsigned long *)arg)++;
}

static void *monitor_main(void *arg)
{
	(void)arg;
	for (;;) {
		unsigned int ms = usl_opt.sheaf_decay_ms;
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
		unsigned long grown = 0;

		nanosleep(&ts, NULL);
		cache_for_each(decay_one, &grown);
		gp_kick(); /* a flush may have deferred slabs (TYPESAFE_BY_RCU) */
		if (grown)
			continue;
		pthread_mutex_lock(&monitor.lock);
		if (!__atomic_exchange_n(&barn_monitor_need, false, __ATOMIC_RELAXED)) {
			__atomic_store_n(&monitor.running, false, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&monitor.lock);
			return NULL;
		}
		pthread_mutex_unlock(&monitor.lock); /* a cache grew meanwhile */
	}
}

static const struct usl_bgthread monitor_thread = { monitor_main, "uslab-barn" };

/*
 * The child of fork has no monitor, and starts none for the caches it
 * inherited grown (a child that only calls exec or _exit should not get a
 * thread; TSan refuses threads after a multi-threaded fork): those decay at
 * their next trade, a thread's exit or shrink; a cache that grows in the
 * child starts one.
 */
void barn_monitor_fork_child(void)
{
	pthread_mutex_unlock(&monitor.lock); /* the forking thread's, from the prepare below */
	__atomic_store_n(&barn_monitor_need, false, __ATOMIC_RELAXED);
	monitor.running = false;
	monitor.retry_ns = 0;
}

/* A leaf: init.c's fork handler takes it last, after every ranked lock. */
void barn_monitor_fork_prepare(void)
{
	pthread_mutex_lock(&monitor.lock);
}

void barn_monitor_fork_parent(void)
{
	pthread_mutex_unlock(&monitor.lock);
}

/*
 * barn_monitor_start - start the decay monitor (barn_kick() saw a cache grow
 * without one). Context: no uslab lock held (thread creation may allocate,
 * through uslab when it is the malloc: need is cleared first, so such a
 * nested slow path does not come back here).
 */
void barn_monitor_start(void)
{
	uint64_t now = barn_now_ns();
	int err;

	pthread_mutex_lock(&monitor.lock);
	if (monitor.running || now < monitor.retry_ns ||
	    !__atomic_exchange_n(&barn_monitor_need, false, __ATOMIC_RELAXED)) {
		pthread_mutex_unlock(&monitor.lock);
		return;
	}
	__atomic_store_n(&monitor.running, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&monitor.lock);

	err = usl_thread_detached(&monitor_thread);
	if (err) {
		pthread_mutex_lock(&monitor.lock);
		__atomic_store_n(&monitor.running, false, __ATOMIC_RELAXED);
		__atomic_store_n(&barn_monitor_need, true, __ATOMIC_RELAXED);
		monitor.retry_ns = now + 100000000u; /* 100 ms */
		pthread_mutex_unlock(&monitor.lock);
	}
}

/* Whether the decay monitor runs (tests). */
bool barn_monitor_running(void)
{
	return __atomic_load_n(&monitor.running, __ATOMIC_ACQUIRE);
}

/*
 * barn_stats - the barn's part of uslab_cache_stats(): its sheaves, the
 * capacity handed out now and the largest it may grow to, and the steps.
 */
void barn_stats(struct uslab_cache *c, struct uslab_cache_stats *st)
{
	st->barn_full = st->barn_empty = 0;
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
		struct barn *b = cache_barn(c, nid);

		barn_lock(b);
		st->barn_full += b->nr_full;
		st->barn_empty += b->nr_empty;
		/* The capacity: the largest of the nodes' (each barn adapts to its node's traffic). */
		if (b->capacity) {
			if (!nid || b->capacity > st->sheaf_capacity)
				st->sheaf_capacity = b->capacity;
			st->sheaf_capacity_min = b->cap_min;
			st->sheaf_capacity_max = b->cap_max;
		} else if (!nid) {
			st->sheaf_capacity_min = st->sheaf_capacity_max = st->sheaf_capacity;
		}
		st->events[USLAB_STAT_SHEAF_GROW] += b->grows;
		st->events[USLAB_STAT_SHEAF_SHRINK] += b->shrinks;
		st->events[USLAB_STAT_BARN_GROW] += b->full_grows;
		st->events[USLAB_STAT_BARN_SHRINK] += b->full_shrinks;
		barn_unlock(b);
	}
}

/* Pop a sheaf off one of the barn's stacks. Lock held. */
static struct sheaf *pop_locked(struct barn *b, struct sheaf **stack, unsigned int *nr)
{
	struct sheaf *s = *stack;

	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(!s == !*nr); /* an empty stack counts 0 */
	if (s) {
		*stack = s->next;
		WRITE_ONCE(*nr, *nr - 1);
	}
	return s;
}

/* Push @s onto one of the barn's stacks if it has room. Lock held. */
static bool push_locked(struct barn *b, struct sheaf **stack, unsigned int *nr, unsigned int max,
			struct sheaf *s)
{
	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(s && s->size <= s->capacity);
	if (*nr >= max)
		return false;
	s->next = *stack;
	*stack = s;
	WRITE_ONCE(*nr, *nr + 1);
	return true;
}

/*
 * barn_replace_empty - trade an empty sheaf for a full one.
 * @empty: in: an empty sheaf or NULL; out: NULL if the barn kept it, else
 *         unchanged (the caller still owns it).
 * Return: a full sheaf, or NULL if the barn has none (@empty untouched).
 */
struct sheaf *barn_replace_empty(struct barn *b, struct sheaf **empty)
{
	struct sheaf *full, *out = NULL;

	if (!READ_ONCE(b->nr_full)) {
		barn_missed(b);
		PROBE(barn_get, b->cache->name, barn_node(b), 0);
		return NULL;
	}
	barn_lock(b);
	full = pop_locked(b, &b->full, &b->nr_full);
	if (full) {
		/* (An empty sheaf of a stale capacity is refused: the caller frees it.) */
		if (*empty && current(b, *empty) &&
		    push_locked(b, &b->empty, &b->nr_empty, b->max_empty, *empty))
			*empty = NULL;
		trade_locked(b, &out);
	}
	barn_unlock(b);
	release(b, out);
	PROBE(barn_get, b->cache->name, barn_node(b), full ? full->size : 0);
	return full;
}

/*
 * barn_replace_full - trade a full sheaf for an empty one.
 * @taken: set to whether the barn kept @full (false: no room).
 * Return: an empty sheaf if the barn kept @full and had one, else NULL.
 */
struct sheaf *barn_replace_full(struct barn *b, struct sheaf *full, bool *taken)
{
	struct sheaf *empty = NULL, *out = NULL;

	*taken = false;
	if (READ_ONCE(b->nr_full) >= READ_ONCE(b->max_full)) {
		barn_refused(b);
		PROBE(barn_put, b->cache->name, barn_node(b), full->size, 0);
		return NULL;
	}
	barn_lock(b);
	if (push_locked(b, &b->full, &b->nr_full, b->max_full, full)) {
		*taken = true;
		/* (After the count: a resize frees the barn's empty sheaves.) */
		trade_locked(b, &out);
		empty = pop_locked(b, &b->empty, &b->nr_empty);
	}
	barn_unlock(b);
	release(b, out);
	if (!*taken)
		barn_refused(b);
	PROBE(barn_put, b->cache->name, barn_node(b), full->size, *taken);
	return empty;
}

/* An empty sheaf from the barn, or NULL. */
struct sheaf *barn_get_empty(struct barn *b)
{
	struct sheaf *empty;

	if (!READ_ONCE(b->nr_empty))
		return NULL;
	barn_lock(b);
	empty = pop_locked(b, &b->empty, &b->nr_empty);
	barn_unlock(b);
	return empty;
}

/*
 * Keep an empty sheaf if there is room and it is of the current capacity.
 * Return: whether it was kept.
 */
bool barn_put_empty(struct barn *b, struct sheaf *empty)
{
	bool kept;

	barn_lock(b);
	kept = current(b, empty) && push_locked(b, &b->empty, &b->nr_empty, b->max_empty, empty);
	barn_unlock(b);
	return kept;
}

/* Keep a full sheaf if there is room. Return: whether it was kept. */
bool barn_put_full(struct barn *b, struct sheaf *full)
{
	bool kept;

	barn_lock(b);
	kept = push_locked(b, &b->full, &b->nr_full, b->max_full, full);
	barn_unlock(b);
	return kept;
}

/*
 * Flush every full sheaf of @c's barn to slabs and free all its sheaves;
 * the capacity goes back to its base (shrink, destroy).
 */
static void drain_one(struct uslab_cache *c, struct barn *b);

void barn_drain(struct uslab_cache *c)
{
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
		drain_one(c, cache_barn(c, nid));
}

/* barn_drain() of one node's barn @b. */
static void drain_one(struct uslab_cache *c, struct barn *b)
{
	struct sheaf *full, *empty, *next;

	barn_lock(b);
	full = b->full;
	empty = b->empty;
	b->full = b->empty = NULL;
	WRITE_ONCE(b->nr_full, 0);
	WRITE_ONCE(b->nr_empty, 0);
	if (b->capacity) {
		resize_locked(b, b->cap_min, &empty); /* (nothing left to take out) */
		b->trades = 0;
		b->window = b->deep_ns = barn_now_ns();
	}
	WRITE_ONCE(b->max_full, b->full_min);
	__atomic_store_n(&b->refused_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->refused_run, 0, __ATOMIC_RELAXED);
	WRITE_ONCE(b->regrow, false);
	barn_unlock(b);

	for (; full; full = next) {
		next = full->next;
		sheaf_flush(c, full);
		sheaf_free(c, full);
	}
	for (; empty; empty = next) {
		next = empty->next;
		sheaf_free(c, empty);
	}
}

/*
 * barn_gather - copy the objects of @c's barns' full sheaves into @dst (at
 * most @max; validate). Return: how many there are (may exceed @max).
 */
size_t barn_gather(struct uslab_cache *c, void **dst, size_t max)
{
	size_t n = 0;

	for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
		struct barn *b = cache_barn(c, nid);

		barn_lock(b);
		for (struct sheaf *sh = b->full; sh; sh = sh->next) {
			for (uint32_t i = 0; i < sh->size; i++, n++)
				if (n < max)
					dst[n] = sh->objs[i];
		}
		barn_unlock(b);
	}
	return n;
}

/* The objects of @b's full sheaves. */
size_t barn_objects(struct barn *b)
{
	size_t n = 0;

	barn_lock(b);
	for (struct sheaf *sh = b->full; sh; sh = sh->next)
		n += sh->size;
	barn_unlock(b);
	return n;
}

void barn_counts(struct barn *b, unsigned long *full, unsigned long *empty)
{
	barn_lock(b);
	*full = b->nr_full;
	*empty = b->nr_empty;
	barn_unlock(b);
}
