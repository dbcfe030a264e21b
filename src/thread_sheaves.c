// SPDX-License-Identifier: MIT
/*
 * thread_sheaves.c - per-thread sheaves: the fast path of uslab_cache_alloc() and
 * uslab_cache_free(), and their slow paths (Linux 6.18 per-CPU sheaves,
 * per thread here). With thread.c one layer: thread.c owns the table of
 * pcs entries and its lifetime, this file what one entry does.
 *
 * Every thread has, per cache, a main sheaf and a spare one (struct pcs,
 * two cache lines in the thread's table, the fast paths touching the
 * first). The fast paths pop or push the main sheaf:
 *
 *   alloc: load the thread table, add cache->pcs_off, compare top with
 *          bottom, decrement top, load the object.
 *   free:  the same with top against limit, store the object.
 *
 * Budget: the instructions per alloc+free pair, inline (uslab/fastpath.h)
 * and through the exported functions below (USLAB_NO_INLINE, sanitizer
 * builds, calls through a pointer), are declared once, in
 * scripts/fastpath-insns (BUDGET), which the ctest fastpath_budget runs.
 * No lock, no atomic read-modify-write, one thread-local cache line plus
 * the array slot. Everything else below is the slow path, entered once per
 * sheaf of objects at most:
 *
 *   alloc slow: swap with a non-empty spare -> trade the empty main for a
 *               full sheaf at the barn -> refill main from slabs.
 *   free slow:  swap with a spare that has room -> park the full main as
 *               spare behind a new empty one -> trade it for an empty sheaf
 *               at the barn -> flush main to slabs.
 *
 * The spare may be partly filled: a bulk call that main cannot serve whole
 * but the spare can swaps first (pcs_swap_for), so that bursts of n
 * against sheaves of 2n or less settle in one sheaf instead of swapping on
 * every alloc and every free (bench_forward's one thread: two swaps per
 * burst of 64 with sheaves of 126, none with this rule).
 *
 * Invariants (pcs_check, in USLAB_CHECKS builds): bottom <= top <= limit
 * and all three describe main, or all are NULL with no main; spare is NULL
 * or holds 0..capacity objects, and is only present with a main; both are sheaves of the
 * cache the entry is attached to (sheaf_ok: of one of its capacities, which
 * may differ from the one it hands out now, sheaf.c; at check level 2: every
 * object they hold is in a slab of that cache); main->size is stale while
 * main is installed
 * (top - bottom is the truth). Sheaves from the barn are full or empty.
 * The thread's own tstate lock is held in the slow paths, so destroy (which
 * drains other threads' sheaves under that lock) and fork see whole states.
 */
#include <string.h>

#include "perthread.h"

struct uslab_cache *events_cache;
static struct uslab_cache events_cache_store;

int pcs_bootstrap(void)
{
	if (cache_init_internal(&events_cache_store, "uslab_events", sizeof(struct pcs_events)))
		return -EINVAL;
	events_cache = &events_cache_store;
	return 0;
}

/* Every object of @objs[0..n) is in a slab of @c (check level 2; an external pool has none). */
static bool objs_of_cache(const struct uslab_cache *c, void *const *objs, size_t n)
{
	if (c->flags & USLAB_POOL_EXTERNAL)
		return true;
	for (size_t i = 0; i < n; i++) {
		const struct slab *s = os_slab_lookup(objs[i]);

		if (!s && guard_owns(objs[i]) && guard_object(objs[i], NULL, NULL) == c)
			continue; /* a sampled object */
		if (!s || READ_ONCE(s->cache) != c)
			return false;
	}
	return true;
}

/* The invariants of the file comment. */
static inline void pcs_check(const struct pcs *p)
{
	const struct uslab_cache *c = p->cache;

	if (p->main) {
		USLAB_ASSERT(c && sheaf_ok(c, p->main));
		USLAB_ASSERT(p->hot.span == uslab_priv_objgeo[c->id].span &&
			     p->hot.recip == uslab_priv_objgeo[c->id].recip &&
			     p->hot.free_key == uslab_priv_objgeo[c->id].free_key);
		USLAB_ASSERT(p->hot.bottom == p->main->objs && p->hot.bottom <= p->hot.top);
		USLAB_ASSERT(p->hot.top <= p->hot.limit &&
			     p->hot.limit == p->main->objs + p->main->capacity);
		USLAB_ASSERT_EXPENSIVE(
			objs_of_cache(c, p->hot.bottom, (size_t)(p->hot.top - p->hot.bottom)));
	} else {
		USLAB_ASSERT(!p->hot.top && !p->hot.bottom && !p->hot.limit && !p->spare);
		USLAB_ASSERT(!p->hot.recip && !p->hot.span && !p->hot.free_key);
	}
	if (p->spare) {
		USLAB_ASSERT(p->spare->size <= p->spare->capacity);
		USLAB_ASSERT(sheaf_ok(c, p->spare));
		USLAB_ASSERT_EXPENSIVE(objs_of_cache(c, p->spare->objs, p->spare->size));
	}
}

/*
 * Install @sh as main, and beside it the copy of the cache's objgeo entry
 * (<uslab/inline/priv.h>) the inline kfree reads while main is there.
 */
static void pcs_set_main(struct pcs *p, struct sheaf *sh)
{
	const struct uslab_priv_objgeo *g = &uslab_priv_objgeo[p->cache->id];

	p->hot.recip = g->recip;
	p->hot.span = g->span;
	p->hot.free_key = g->free_key;
	p->main = sh;
	p->hot.bottom = sh->objs;
	p->hot.top = sh->objs + sh->size;
	p->hot.limit = sh->objs + sh->capacity;
}

static struct sheaf *pcs_detach_main(struct pcs *p)
{
	struct sheaf *sh = p->main;

	if (sh)
		sh->size = (uint32_t)(p->hot.top - p->hot.bottom);
	p->main = NULL;
	p->hot.top = p->hot.bottom = p->hot.limit = NULL;
	/* (A drained entry is all zeros: thread_install() asserts it.) */
	p->hot.recip = p->hot.span = p->hot.free_key = 0;
	return sh;
}

static void pcs_swap(struct pcs *p)
{
	struct sheaf *old = pcs_detach_main(p);

	pcs_set_main(p, p->spare);
	p->spare = old;
}

/* @sh's objects moved into a new sheaf of the capacity handed out now; @sh freed. */
static struct sheaf *regrow(struct uslab_cache *c, unsigned int nid, struct sheaf *sh)
{
	struct sheaf *big = sheaf_alloc(c, nid);

	if (!big)
		return sh; /* (no memory: the old one serves on) */
	USLAB_ASSERT(big->capacity > sh->capacity);
	memcpy(big->objs, sh->objs, sh->size * sizeof(void *));
	big->size = sh->size;
	sheaf_free(c, sh);
	return big;
}

/*
 * pcs_fit_bulk - before a bulk call of @n objects larger than main's
 * capacity: tell the barn (barn_note_bulk), and once the capacity handed
 * out holds @n, move main's and the spare's objects into sheaves of that
 * capacity, so that the next calls of @n fit main. A thread's own sheaves
 * are otherwise replaced only when it trades them at the barn, which a
 * loop of bulk calls that main and the spare serve between them never
 * does (every call then took the slow path: bulk n = 128 at 1.4x DPDK's
 * per object, 126-object sheaves). Under the thread's lock.
 */
void pcs_fit_bulk(struct uslab_cache *c, struct pcs *p, size_t n)
{
	USLAB_ASSERT(lockdep_held(LOCK_TSTATE));
	if (!p->main || n <= p->main->capacity || !barn_note_bulk(c, n, p->node))
		return;
	pcs_set_main(p, regrow(c, p->node, pcs_detach_main(p)));
	if (p->spare && p->spare->capacity < sheaf_capacity_now(c, p->node))
		p->spare = regrow(c, p->node, p->spare);
	pcs_check(p);
}

/*
 * pcs_swap_for - before a bulk call of @n objects (@alloc: taken, else
 * put) that main cannot serve whole: swap main and spare when the spare
 * can. Under the thread's lock. Return: whether it swapped.
 */
bool pcs_swap_for(struct pcs *p, size_t n, bool alloc)
{
	const struct sheaf *s = p->spare;
	size_t in_main = (size_t)(p->hot.top - p->hot.bottom);

	USLAB_ASSERT(lockdep_held(LOCK_TSTATE));
	if (!s || !p->main)
		return false;
	if (alloc ? in_main >= n || s->size < n :
		    (size_t)(p->hot.limit - p->hot.top) >= n || s->capacity - s->size < n)
		return false;
	pcs_swap(p);
	pcs_stat(p, USLAB_STAT_SHEAF_SWAP, 1);
	return true;
}

/*
 * main_push, sheaf_append - @obj onto main, onto @sh, without the thread's
 * lock: the slot first, then the top or size (a release store), so that a
 * fork's child, which drains this thread's sheaves, never reads a slot the
 * top covers before it was written (a stale pointer there would be freed
 * twice). The inline push stores in the same order.
 */
static inline void main_push(struct pcs *p, void *obj)
{
	void **top = p->hot.top;

	*top = obj;
	__atomic_store_n(&p->hot.top, top + 1, __ATOMIC_RELEASE);
}

static inline void sheaf_append(struct sheaf *sh, void *obj)
{
	sh->objs[sh->size] = obj;
	__atomic_store_n(&sh->size, sh->size + 1, __ATOMIC_RELEASE);
}

void pcs_stat(struct pcs *p, enum uslab_stat_item item, uint64_t n)
{
#if USLAB_STATS
	struct pcs_events *e = __atomic_load_n(&p->events, __ATOMIC_RELAXED);

	if (unlikely(!e)) {
		e = cache_alloc_direct(events_cache);
		if (!e)
			return;
		memset(e, 0, sizeof(*e));
		__atomic_store_n(&p->events, e, __ATOMIC_RELEASE);
	}
	stat_add(e->ev[item], n);
#else
	(void)p, (void)item, (void)n;
#endif
}

/*
 * The calling thread's pcs for @c, its state started if needed. NULL when
 * it cannot be (no memory, or the thread is exiting). The entry of every
 * slow path (here, bulk.c), before the thread's lock: where the decay
 * monitor of grown caches is started (barn.c). Context: no uslab lock held.
 */
struct pcs *pcs_self(const struct uslab_cache *c)
{
	barn_kick();
	return thread_start_self() ? NULL : pcs_own(c);
}

static void pcs_attach(struct uslab_cache *c, struct pcs *p)
{
	if (unlikely(p->cache != c)) {
		p->cache = c;
		thread_note_id(c->id);
		percpu_note_user(c, 1); /* USLAB_PERCPU=auto counts the threads */
	}
}

/*
 * pcs_counters - the calling thread's entry of a per-CPU cache @c, attached
 * for its bulk call counters only (it holds no sheaf of @c, so the fast
 * paths still miss): NULL if the thread cannot start. The lock only the
 * first time.
 */
struct pcs *pcs_counters(struct uslab_cache *c)
{
	struct pcs *p = pcs_self(c);

	if (p && unlikely(p->cache != c)) {
		thread_lock_self();
		pcs_attach(c, p);
		thread_unlock_self();
	}
	return p;
}

/*
 * pcs_yield_to_percpu - the slow paths' door to per-CPU sheaves: @c's
 * slots, or NULL while @c is per thread. Not a getter: a thread that still
 * holds per-thread sheaves of a cache that switched yields them first
 * (flushed; its calls reach the library once its main is empty or full).
 */
struct percpu_slot *pcs_yield_to_percpu(struct uslab_cache *c)
{
	struct percpu_slot *slots = percpu_slots(c);

	/* (A NUMA cache's library entry is the empty one: its sheaves are at pcs_own().) */
	if (unlikely(slots) && unlikely((cache_numa(c) ? pcs_own(c) : pcs_of(c))->main))
		pcs_flush_self(c);
	return slots;
}

/*
 * An external pool's sheaves hold the caller's objects, of no node uslab
 * knows: with NUMA on its threads trade at the barn of the node they run
 * on now (one barn per socket for a DPDK pool used from several sockets:
 * no barn line bounced between them), and nothing goes home when a thread
 * moves. Other caches' p->node changes only in pcs_numa_sync().
 */
static inline void pool_follow(struct uslab_cache *c, struct pcs *p)
{
	if (unlikely(c->flags & USLAB_POOL_EXTERNAL) && numa_on())
		p->node = (uint16_t)numa_node_self();
}

/*
 * An external pool's full sheaf from another node's barn, @p's own having
 * none: its objects are anywhere, and a get must not fail with ENOBUFS
 * while some sit in a barn. @empty as barn_replace_empty()'s.
 */
static struct sheaf *pool_barn_elsewhere(struct uslab_cache *c, struct pcs *p, struct sheaf **empty)
{
	struct sheaf *full = NULL;

	if (!(c->flags & USLAB_POOL_EXTERNAL))
		return NULL;
	for (unsigned int nid = 0; nid < c->nr_nodes && !full; nid++)
		if (nid != p->node)
			full = barn_replace_empty(cache_barn(c, nid), empty);
	return full;
}

/* An empty sheaf for @c: from the barn, else a new one. NULL if no memory. */
static struct sheaf *pcs_get_empty(struct uslab_cache *c, struct pcs *p)
{
	struct sheaf *sh = barn_get_empty(cache_barn(c, p->node));

	USLAB_ASSERT(!sh || (!sh->size && sheaf_ok(c, sh)));
	if (!sh) {
		sh = sheaf_alloc(c, p->node);
		if (sh)
			pcs_stat(p, USLAB_STAT_SHEAF_ALLOC, 1);
	}
	return sh;
}

/*
 * pcs_refill_main - give an empty (or absent) main sheaf objects: swap in
 * a full spare, else trade main for a full sheaf at the barn, else (if
 * @from_slabs) refill main from slabs. Under the thread's lock.
 * Return: true when main holds objects; false when the sheaves and the barn
 * had none and @from_slabs is false, or no memory could be had (errno
 * ENOMEM).
 */
bool pcs_refill_main(struct uslab_cache *c, struct pcs *p, bool from_slabs)
{
	struct sheaf *full, *empty;
	unsigned int n;
	uint64_t t0;

	USLAB_ASSERT(lockdep_held(LOCK_TSTATE));   /* the thread's own (thread.c) */
	USLAB_ASSERT(p->hot.top == p->hot.bottom); /* main empty or absent */
	pcs_attach(c, p);
	pcs_check(p);
	if (p->spare && p->spare->size) {
		pcs_swap(p);
		pcs_stat(p, USLAB_STAT_SHEAF_SWAP, 1);
		return true;
	}

	pool_follow(c, p);
	empty = pcs_detach_main(p);
	full = barn_replace_empty(cache_barn(c, p->node), &empty);
	if (!full && c->nr_nodes > 1)
		full = pool_barn_elsewhere(c, p, &empty);
	if (full) {
		USLAB_ASSERT(full->size == full->capacity && sheaf_ok(c, full));
		pcs_stat(p, USLAB_STAT_BARN_GET, 1);
		if (empty)
			sheaf_free(c, empty);
		/* Objects this thread freed itself are in its own cache. */
		if (full->filler != p)
			sheaf_prefetch(full);
		pcs_set_main(p, full);
		return true;
	}
	pcs_stat(p, USLAB_STAT_BARN_GET_FAIL, 1);

	if (!from_slabs) {
		if (empty)
			pcs_set_main(p, empty);
		return false;
	}
	if (empty && empty->capacity != sheaf_capacity_now(c, p->node)) {
		/* Refilled from slabs at the capacity handed out now. */
		sheaf_free(c, empty);
		empty = NULL;
	}
	if (!empty) {
		empty = sheaf_alloc(c, p->node);
		if (!empty) {
			/* Keep the invariant: no spare without a main. */
			if (p->spare) {
				pcs_set_main(p, p->spare);
				p->spare = NULL;
			}
			return false;
		}
		pcs_stat(p, USLAB_STAT_SHEAF_ALLOC, 1);
	}
	/* (Traced: the refill's time, for the probe.) */
	t0 = probe_on(sheaf_refill) ? barn_now_ns() : 0;
	/* (A debug cache's objects stay free in its sheaves: checked when taken.) */
	/* (With NUMA on, from p->node's slabs: the node the sheaves serve.) */
	n = unlikely(c->debug) ?
		    cache_refill_free(c, empty->objs, empty->capacity) :
		    cache_refill_node(c, empty->objs, empty->capacity,
				      cache_numa(c) ? (int)p->node : USLAB_NUMA_NO_NODE);
	pcs_stat(p, USLAB_STAT_SHEAF_REFILL, 1);
	PROBE(sheaf_refill, c->name, n, empty->capacity, p->node, t0 ? barn_now_ns() - t0 : 0);
	empty->size = n;
	pcs_set_main(p, empty);
	return n > 0;
}

/*
 * pcs_make_room - give a full (or absent) main sheaf room: swap in a spare
 * with room, else park main as the spare behind an empty sheaf, else trade it
 * for an empty one at the barn, else (if @may_flush) flush it to slabs.
 * Under the thread's lock.
 * Return: true when main has room; false when there is no main and no sheaf
 * could be allocated, or only a flush would make room and @may_flush is
 * false.
 */
bool pcs_make_room(struct uslab_cache *c, struct pcs *p, bool may_flush)
{
	struct sheaf *sh, *full;
	bool taken;

	USLAB_ASSERT(lockdep_held(LOCK_TSTATE));  /* the thread's own (thread.c) */
	USLAB_ASSERT(p->hot.top == p->hot.limit); /* main full or absent */
	pcs_attach(c, p);
	pcs_check(p);
	pool_follow(c, p);
	if (!p->main) {
		sh = pcs_get_empty(c, p);
		if (!sh)
			return false;
		pcs_set_main(p, sh);
		return true;
	}
	if (p->spare && p->spare->size < p->spare->capacity) {
		pcs_swap(p);
		pcs_stat(p, USLAB_STAT_SHEAF_SWAP, 1);
		return true;
	}
	if (!p->spare) {
		sh = pcs_get_empty(c, p);
		if (sh) {
			p->spare = pcs_detach_main(p);
			pcs_set_main(p, sh);
			return true;
		}
	} else {
		/* Main and spare are full: trade main at the barn. */
		USLAB_ASSERT(p->spare->size == p->spare->capacity);
		full = pcs_detach_main(p);
		USLAB_ASSERT(full->size == full->capacity);
		full->filler = p;
		sh = barn_replace_full(cache_barn(c, p->node), full, &taken);
		USLAB_ASSERT(!sh || (taken && !sh->size && sheaf_ok(c, sh)));
		if (taken) {
			pcs_stat(p, USLAB_STAT_BARN_PUT, 1);
			if (!sh)
				sh = sheaf_alloc(c, p->node);
			if (!sh) {
				/* The barn kept main; flush the spare into a main. */
				sh = p->spare;
				p->spare = NULL;
				sheaf_flush(c, sh);
				pcs_stat(p, USLAB_STAT_SHEAF_FLUSH, 1);
			}
			pcs_set_main(p, sh);
			return true;
		}
		pcs_stat(p, USLAB_STAT_BARN_PUT_FAIL, 1);
		pcs_set_main(p, full);
	}
	if (!may_flush)
		return false;
	/* Nowhere to park a full sheaf: return main's objects to slabs. */
	sh = pcs_detach_main(p);
	sheaf_flush(c, sh);
	pcs_stat(p, USLAB_STAT_SHEAF_FLUSH, 1);
	pcs_set_main(p, sh);
	return true;
}

/*
 * The debug tier's sheaves. A debug cache's fast paths (inline, and the
 * library's) see the always-empty pcs entry, so every call of it comes
 * here; its sheaves are at its own entry (pcs_own), popped and pushed by
 * the two functions below without a lock, as the fast paths do, and
 * refilled, traded and flushed by the slow paths above (the thread's lock
 * taken once per sheaf, the node lock once per slab's worth). Every object
 * in them is free (OBJ_FREE, red zones inactive, poisoned): checked and
 * marked at the call that put it there (slab_debug_free) and again at the
 * call that takes it (slab_debug_alloc), so validate and the reports see
 * it as free, and a double free of it is caught at the call, in any
 * thread (the state's compare-and-swap).
 * @site: the caller's call site, for the object's track (U).
 */
static inline void *debug_alloc(struct uslab_cache *c, const void *site)
{
	struct pcs *p = pcs_own(c); /* (a thread not started: the zero table, empty) */
	void *obj;

	if (unlikely(p->hot.top == p->hot.bottom)) {
		bool ok;

		if (!(p = pcs_self(c)))
			return cache_alloc_direct(c); /* (checked in cache_refill) */
		thread_lock_self();
		pcs_stat(p, USLAB_STAT_ALLOC_SLOWPATH, 1);
		ok = pcs_refill_main(c, p, true);
		pcs_check(p);
		thread_unlock_self();
		barn_kick();
		if (!ok)
			return cache_alloc_direct(c);
	}
	obj = *--p->hot.top;
	*p->hot.top = NULL; /* (memcheck: a leaked object is not reachable from its sheaf) */
	slab_debug_alloc_one(c, obj, site);
	return obj;
}

static inline void debug_free(struct uslab_cache *c, void *obj, const void *site)
{
	struct pcs *p;

	if (!slab_debug_free_one(c, obj, site))
		return; /* reported: not freed */
	p = pcs_own(c);
	if (unlikely(p->hot.top == p->hot.limit)) {
		bool ok;

		if (!(p = pcs_self(c))) {
			cache_free_checked(c, &obj, 1);
			return;
		}
		thread_lock_self();
		pcs_stat(p, USLAB_STAT_FREE_SLOWPATH, 1);
		ok = pcs_make_room(c, p, true);
		if (ok)
			*p->hot.top++ = obj;
		pcs_check(p);
		thread_unlock_self();
		barn_kick();
		if (!ok)
			cache_free_checked(c, &obj, 1);
		gp_kick();
		return;
	}
	main_push(p, obj);
}

/*
 * pcs_debug_alloc, pcs_debug_free - an allocation from (a free to) debug
 * cache @c for the call at @site (kmalloc.c: its own callers' sites).
 */
void *pcs_debug_alloc(struct uslab_cache *c, const void *site)
{
	USLAB_ASSERT(c->debug);
	if (unlikely(!c->sheaf_capacity))
		return uslab_priv_alloc_slow(c); /* (USLAB_FAILSLAB: checked in cache_refill) */
	return debug_alloc(c, site);
}

void pcs_debug_free(struct uslab_cache *c, void *obj, const void *site)
{
	USLAB_ASSERT(c->debug);
	if (unlikely(!c->sheaf_capacity)) {
		uslab_priv_free_slow(c, obj);
		return;
	}
	debug_free(c, obj, site);
}

/*
 * SLUB's naive check: @obj is not the object freed last to this thread's
 * main sheaf (an immediate double free). In the library's frees of caches
 * without the free key (which finds every double free: pools, caches with
 * a constructor or TYPESAFE_BY_RCU).
 */
static inline void check_top(const struct uslab_cache *c, const struct pcs *p, const void *obj)
{
	void **top = p->hot.top;

	if (unlikely(top && top != p->hot.bottom && top[-1] == obj))
		usl_bug(c, obj, "double free (the object is on top of this thread's sheaf)");
}

/*
 * push_slow - @obj (checked, made free) onto the calling thread's main
 * sheaf of @c (entry @p), which is full or absent: room made (a spare, the
 * barn, a flush), else to its slab. Takes the thread's lock.
 */
static void push_slow(struct uslab_cache *c, struct pcs *p, void *obj)
{
	thread_lock_self();
	pcs_stat(p, USLAB_STAT_FREE_SLOWPATH, 1);
	if (pcs_make_room(c, p, true))
		*p->hot.top++ = obj;
	else
		cache_free_objects(c, &obj, 1, 0);
	pcs_check(p);
	thread_unlock_self();
	barn_kick(); /* a trade above may have grown the capacity */
}

/* ------------------------------------------------------------- NUMA */

/*
 * With NUMA on (numa.c: two nodes or more), a thread's sheaves of a cache
 * hold objects of one node only, p->node, the node of the CPU it runs on
 * when it last took them (Linux's can_free_to_pcs(): a per-CPU sheaf holds
 * its CPU's node's objects). The inline paths and the library's pop and
 * push cannot tell an object's node, so a NUMA cache shows them the
 * always-empty entry (thread.c) and every call comes here, to the slow
 * paths' NUMA branch:
 *
 *   alloc: the thread still on p->node: pop main; else its sheaves go
 *          home first (pcs_numa_sync). A refill takes p->node's barn,
 *          then p->node's slabs (cache_refill_node()).
 *   free:  an object of p->node: push main, as ever. Another node's goes
 *          on the thread's remote sheaf (p->remote); a full remote sheaf
 *          of one node's objects is traded at that node's barn for an
 *          empty one (the consumer on node 1 of a producer on node 0: one
 *          barn lock per sheaf, and the producer takes it whole), a mixed
 *          one is freed to slabs in detached freelists (one node lock per
 *          node and up to 32 slabs). No lock per object.
 *
 * With NUMA off none of this runs: numa_on() is false and p->node is 0.
 */

/* An object of @node goes on @p's remote sheaf: the sheaf's node, kept as they come. */
static inline void remote_note(struct pcs *p, unsigned int node)
{
	if (!p->remote_node)
		p->remote_node = (uint16_t)(node + 1);
	else if (p->remote_node != node + 1)
		p->remote_node = PCS_REMOTE_MIXED;
}

/*
 * Count the objects of @sh coming home on their nodes (struct
 * uslab_node_stats.remote_frees): all on @nid, or (-1) each on its own,
 * one node lock per node (the scan only for a sheaf of mixed nodes).
 */
static void remote_count(struct uslab_cache *c, const struct sheaf *sh, int nid)
{
	uint32_t per[NUMA_MAX_NODES] = { 0 };

	if (nid >= 0) {
		cache_node_event(c, (unsigned int)nid, USLAB_STAT_NUMA_REMOTE_FREE, sh->size);
		return;
	}
	for (uint32_t i = 0; i < sh->size; i++)
		per[os_slab_lookup(sh->objs[i])->node]++;
	for (unsigned int k = 0; k < c->nr_nodes; k++)
		if (per[k])
			cache_node_event(c, k, USLAB_STAT_NUMA_REMOTE_FREE, per[k]);
}

/*
 * Send the remote sheaf home (full, or draining): traded whole at its
 * node's barn if its objects are of one node, else freed to their slabs.
 * Under the thread's lock; the sheaf stays the thread's unless traded.
 */
static void remote_flush(struct uslab_cache *c, struct pcs *p)
{
	struct sheaf *sh = p->remote;
	int nid;
	bool taken;

	USLAB_ASSERT(lockdep_held(LOCK_TSTATE));
	nid = p->remote_node && p->remote_node <= NUMA_MAX_NODES && sh && sh->size == sh->capacity ?
		      (int)p->remote_node - 1 :
		      -1;
	p->remote_node = 0;
	if (!sh || !sh->size)
		return;
	remote_count(c, sh, nid);
	pcs_stat(p, USLAB_STAT_NUMA_REMOTE_BATCH, 1);
	if (nid >= 0) {
		sh->filler = NULL; /* cold for whoever takes it */
		p->remote = barn_replace_full(cache_barn(c, (unsigned int)nid), sh, &taken);
		if (taken) {
			pcs_stat(p, USLAB_STAT_BARN_PUT, 1);
			return;
		}
		p->remote = sh;
	}
	sheaf_flush(c, sh);
	pcs_stat(p, USLAB_STAT_SHEAF_FLUSH, 1);
}

/*
 * pcs_release_sheaves - give back every sheaf @p holds of @c: the remote
 * one's objects home, full sheaves to the barn of p->node while it has
 * room, other objects to slabs, empty sheaves to the barn or freed. Under
 * the owner's lock (held by it, by destroy or by fork).
 */
static void pcs_release_sheaves(struct uslab_cache *c, struct pcs *p)
{
	struct sheaf *sh[3];

	remote_flush(c, p);
	sh[0] = pcs_detach_main(p);
	sh[1] = p->spare;
	sh[2] = p->remote;
	p->spare = p->remote = NULL;
	for (int i = 0; i < 3; i++) {
		if (!sh[i])
			continue;
		sh[i]->filler = NULL; /* whoever takes it has it cold */
		if (sh[i]->size == sh[i]->capacity && barn_put_full(cache_barn(c, p->node), sh[i]))
			continue;
		if (sh[i]->size)
			sheaf_flush(c, sh[i]);
		if (!barn_put_empty(cache_barn(c, p->node), sh[i]))
			sheaf_free(c, sh[i]);
	}
}

/*
 * pcs_numa_remote - @obj (checked, poisoned) of @node, another node than
 * p->node, freed by this thread: onto the remote sheaf, sent home once
 * full. No lock held.
 */
void pcs_numa_remote(struct uslab_cache *c, struct pcs *p, void *obj, unsigned int node)
{
	struct sheaf *sh = p->remote;

	if (likely(sh && sh->size < sh->capacity - 1)) {
		remote_note(p, node);
		sheaf_append(sh, obj);
		return;
	}
	thread_lock_self();
	pcs_attach(c, p); /* (its drain at exit finds the remote sheaf) */
	if (!p->remote && (p->remote = sheaf_alloc(c, p->node)))
		pcs_stat(p, USLAB_STAT_SHEAF_ALLOC, 1);
	sh = p->remote;
	if (!sh) {
		/* No memory for a sheaf: home at once. */
		cache_node_event(c, node, USLAB_STAT_NUMA_REMOTE_FREE, 1);
		pcs_stat(p, USLAB_STAT_NUMA_REMOTE_BATCH, 1);
		cache_free_objects(c, &obj, 1, 0);
	} else {
		remote_note(p, node);
		sh->objs[sh->size++] = obj;
		if (sh->size == sh->capacity)
			remote_flush(c, p);
	}
	thread_unlock_self();
}

/*
 * pcs_numa_sync - the calling thread's sheaves of @c serve the node it
 * runs on now: if it moved since it took them, they go home first (full
 * ones to their node's barn, the rest to slabs) and p->node follows it.
 * Before anything else on a NUMA path. Return: that node.
 */
unsigned int pcs_numa_sync(struct uslab_cache *c, struct pcs *p)
{
	unsigned int nid = numa_node_self();

	if (likely(p->node == nid))
		return nid;
	thread_lock_self();
	if (p->main || p->spare || p->remote) {
		pcs_stat(p, USLAB_STAT_NUMA_MOVED, 1);
		pcs_release_sheaves(c, p);
	}
	p->node = nid;
	thread_unlock_self();
	return nid;
}

/*
 * The NUMA fast paths: the library's entries of a NUMA cache reach the
 * slow paths (its table entry is the empty one), whose first step is this
 * pop or push of the thread's own main sheaf while it serves the node the
 * thread runs on: about 20 and 35 instructions (the thread's node, and for
 * the push the slab lookup of uslab_cache_free() and its node). Anything
 * else (no main, a full or empty one, another node's object, a thread
 * that moved, a bad pointer) returns false and takes the whole path.
 */
static inline bool numa_pop_fast(struct uslab_cache *c, void **objp)
{
	struct pcs *p = pcs_own(c);
	void **top = p->hot.top;

	if (top == p->hot.bottom || p->node != numa_node_self())
		return false;
	p->hot.top = --top;
	objs_hand_out(c, top, 1);
	*objp = *top;
	return true;
}

static inline bool numa_push_fast(struct uslab_cache *c, void *obj)
{
	uintptr_t a = (uintptr_t)obj, e;
	const struct slab *s;
	struct pcs *p;

	if ((a >> VA_BITS) || !(e = READ_ONCE(uslab_priv_slab_map[a >> ARENA_SHIFT])))
		return false;
	s = slab_desc(a, e); /* (a tail names the cache, the first object and the node too) */
	/* A slab of @c: @c is a live cache (read only now: a junk handle is no slab's). */
	if (!c || READ_ONCE(s->cache) != c || !cache_numa(c) || c->debug ||
	    !slab_at_object(&c->geo, s, obj))
		return false;
	p = pcs_own(c);
	if (p->node != numa_node_self())
		return false;
	if (s->node == p->node) {
		if (p->hot.top == p->hot.limit)
			return false;
		if (c->hot.free_key)
			obj_mark_free(c, obj);
		else
			check_top(c, p, obj);
		obj_poison(c, obj);
		main_push(p, obj);
		return true;
	}
	/* Another node's: on the remote sheaf while it has room for more than this one. */
	if (!p->remote || p->remote->size >= p->remote->capacity - 1)
		return false;
	if (c->hot.free_key)
		obj_mark_free(c, obj);
	obj_poison(c, obj);
	remote_note(p, s->node);
	sheaf_append(p->remote, obj);
	return true;
}

/*
 * pcs_numa_put - @obj of NUMA cache @c, in slab @s, checked and made free
 * (marked, poisoned) by the caller: onto the calling thread's main if of
 * its node (entry @p), else on its way home. No lock held. @s NULL (an
 * unchecked bulk or pool pointer in no slab): as this node's, reported
 * when it reaches the slabs, as without NUMA.
 */
void pcs_numa_put(struct uslab_cache *c, struct pcs *p, void *obj, const struct slab *s)
{
	unsigned int nid = pcs_numa_sync(c, p);

	if (s && s->node != nid) {
		pcs_numa_remote(c, p, obj, s->node);
		return;
	}
	if (!c->hot.free_key)
		check_top(c, p, obj);
	if (likely(p->hot.top != p->hot.limit)) {
		main_push(p, obj);
		return;
	}
	push_slow(c, p, obj);
}

/* uslab_cache_free() of @obj to NUMA cache @c from thread entry @p: checked, then main or home. */
static void numa_free(struct uslab_cache *c, struct pcs *p, void *obj)
{
	const struct slab *s = slab_of_object(c, obj); /* (a bad pointer stops here) */

	if (c->hot.free_key)
		obj_mark_free(c, obj);
	obj_poison(c, obj);
	pcs_numa_put(c, p, obj, s);
}

void *uslab_priv_alloc_slow(struct uslab_cache *c)
{
	struct percpu_slot *slots;
	struct pcs *p;
	void *obj;

	if (numa_on()) {
		cache_check_live(c, "allocation"); /* (before @c is read) */
		if (cache_numa(c) && !c->debug && numa_pop_fast(c, &obj))
			return obj;
	}

	/* (A cache failslab selects has no sheaves: never the debug path below.) */
	if (!alloc_pre_hook(c, "allocation", false))
		return NULL;
	if (unlikely(c->debug) && c->sheaf_capacity) {
		obj = debug_alloc(c, __builtin_return_address(0));
		NO_TAIL_CALL(obj);
		return obj;
	}
	if ((slots = pcs_yield_to_percpu(c))) {
		obj = percpu_alloc(c, slots);
		if (obj && c->hot.free_key)
			obj_unmark(obj);
		NO_TAIL_CALL(obj);
		return obj;
	}
	if (!c->sheaf_capacity || !(p = pcs_self(c))) {
		obj = cache_alloc_direct(c);
		NO_TAIL_CALL(obj);
		return obj;
	}
	if (cache_numa(c)) {
		/* Its sheaves serve the node it runs on (a thread that moved sends them home). */
		pcs_numa_sync(c, p);
		if (numa_pop_fast(c, &obj))
			return obj;
	}
	/* One sheaf miss in USLAB_GUARD: the object from the sampling guard (guard.c). */
	if (unlikely(guard_sample()) && (obj = cache_guard_alloc(c)))
		return obj;
	thread_lock_self();
	pcs_stat(p, USLAB_STAT_ALLOC_SLOWPATH, 1);
	if (pcs_refill_main(c, p, true)) {
		/* The heap profile counts a class's sheaf by its bytes (profile.c). */
		if (c->flags & CACHE_KMALLOC)
			profile_count((uint64_t)(p->hot.top - p->hot.bottom) * c->object_size);
		obj = *--p->hot.top;
		objs_hand_out(c, &obj, 1);
	} else {
		/* No sheaf to be had: one object straight from a slab. */
		obj = cache_alloc_direct(c);
	}
	pcs_check(p);
	thread_unlock_self();
	barn_kick(); /* a trade above may have grown the capacity */
	return obj;
}

void uslab_priv_free_slow(struct uslab_cache *c, void *obj)
{
	struct percpu_slot *slots;
	struct pcs *p;

	if (numa_on() && numa_push_fast(c, obj))
		return;

	if (unlikely(guard_owns(obj))) {
		if (c)
			cache_check_live(c, "free");
		guard_free(c, obj, true); /* a sampled object: held back (its own checks) */
		return;
	}
	if (!c) {
		/* Documented: the object's own cache, as kfree() finds it. */
		c = uslab_cache_of(obj);
		if (c)
			uslab_cache_free(c, obj); /* main may have room: the fast path first */
		else
			cache_free_objects(NULL, &obj, 1, 0); /* large, or not uslab's: reported */
		return;
	}
	cache_check_live(c, "free");
	if (unlikely(c->debug) && c->sheaf_capacity) {
		debug_free(c, obj, __builtin_return_address(0));
		NO_TAIL_CALL(c);
		return;
	}
	p = pcs_of(c);
	if ((c->flags & USLAB_POOL_EXTERNAL) && p->hot.top != p->hot.limit) {
		/* In no slab, so uslab_cache_free() sent it here: the push, unchecked. */
		pcs_push(c, obj);
		return;
	}
	if ((slots = pcs_yield_to_percpu(c))) {
		obj_free_hook(c, obj, true); /* (the inline paths leave it unmarked) */
		percpu_free(c, slots, obj);
	} else if (cache_numa(c) && c->sheaf_capacity && (p = pcs_self(c))) {
		numa_free(c, p, obj);
	} else if (!c->sheaf_capacity || !(p = pcs_self(c))) {
		/* (A thread that cannot start: to its slab, which checks it on the way.) */
		obj_free_hook(c, obj, false);
		cache_free_objects(c, &obj, 1, 0);
	} else {
		/* Into a sheaf: checked here, at the call; an external pool has no slab. */
		obj_free_hook(c, obj, !(c->flags & USLAB_POOL_EXTERNAL));
		if (!c->hot.free_key)
			check_top(c, p, obj); /* (main is full: its top is the last freed) */
		push_slow(c, p, obj);
	}
	gp_kick(); /* a flush may have deferred slabs with no monitor running */
}

/*
 * pcs_events_sum - add @p's event counters to @ev: its slow-path block and
 * the bulk counters of its first line. Read racily by other threads
 * (uslab_cache_stats()): each counter has one writer.
 */
void pcs_events_sum(const struct pcs *p, uint64_t *ev)
{
	const struct pcs_events *e = __atomic_load_n(&p->events, __ATOMIC_ACQUIRE);

	for (int i = 0; e && i < USLAB_STAT_NR_ITEMS; i++)
		ev[i] += READ_ONCE(e->ev[i]);
	ev[USLAB_STAT_ALLOC_BULK] += READ_ONCE(p->alloc_bulk);
	ev[USLAB_STAT_ALLOC_BULK_OBJS] += READ_ONCE(p->alloc_bulk_objs);
	ev[USLAB_STAT_FREE_BULK] += READ_ONCE(p->free_bulk);
	ev[USLAB_STAT_FREE_BULK_OBJS] += READ_ONCE(p->free_bulk_objs);
}

/*
 * pcs_drain - return everything @p holds: full sheaves to the barn while it
 * has room, other objects to slabs, sheaves to the barn or freed; fold the
 * thread's event counters into the cache. Called with the lock of the
 * thread owning @p held (by that thread, or by destroy or fork).
 */
void pcs_drain(struct pcs *p)
{
	struct uslab_cache *c = p->cache;
	uint64_t ev[USLAB_STAT_NR_ITEMS] = { 0 };
	struct pcs_events *e;

	/* The owner's lock, held by it, by destroy or by fork (thread.c). */
	USLAB_ASSERT(lockdep_held(LOCK_TSTATE));
	if (!c)
		return;
	pcs_check(p);
	pcs_release_sheaves(c, p);
	p->node = 0;
	/* The last trip of this thread: the traffic may have stopped (barn.c). */
	barn_decay(c, barn_now_ns());
	e = p->events;
	pcs_events_sum(p, ev);
	cache_add_events(c, ev);
	WRITE_ONCE(p->alloc_bulk, 0);
	WRITE_ONCE(p->alloc_bulk_objs, 0);
	WRITE_ONCE(p->free_bulk, 0);
	WRITE_ONCE(p->free_bulk_objs, 0);
	if (e) {
		__atomic_store_n(&p->events, NULL, __ATOMIC_RELAXED);
		cache_free_direct(events_cache, e);
	}
	p->cache = NULL;
	percpu_note_user(c, -1);
	pcs_check(p);
}

/*
 * pcs_gather_self - copy the objects in the calling thread's sheaves of @c
 * into @dst (at most @max; validate). Return: how many there are.
 */
size_t pcs_gather_self(struct uslab_cache *c, void **dst, size_t max)
{
	struct pcs *p;
	size_t n = 0;

	if (!c->sheaf_capacity || !thread_started())
		return 0;
	thread_lock_self();
	p = pcs_own(c);
	for (void **o = p->hot.bottom; o && o < p->hot.top; o++, n++)
		if (n < max)
			dst[n] = *o;
	for (int k = 0; k < 2; k++) {
		const struct sheaf *sh = k ? p->remote : p->spare;

		for (uint32_t i = 0; sh && i < sh->size; i++, n++)
			if (n < max)
				dst[n] = sh->objs[i];
	}
	thread_unlock_self();
	return n;
}

/* Drain the calling thread's sheaves of @c. */
void pcs_flush_self(struct uslab_cache *c)
{
	if (!thread_started())
		return;
	thread_lock_self();
	pcs_drain(pcs_own(c));
	thread_unlock_self();
}

/* ------------------------------------------------------- fast path */

/*
 * The out-of-line fast paths: the same pop and push as uslab/fastpath.h,
 * plus ASan poisoning in sanitizer builds. ~9 instructions, one branch
 * taken once per sheaf (capacity objects) at most.
 */
static inline void *alloc_pop(struct uslab_cache *c)
{
	struct pcs *p = pcs_of(c);
	void **top = p->hot.top;

	if (unlikely(top == p->hot.bottom))
		return uslab_priv_alloc_slow(c);
	p->hot.top = --top;
	objs_hand_out(c, top, 1);
	return *top;
}

/* A handle outside the descriptor table's first region (a tail call: no frame above). */
static __attribute__((noinline)) void *alloc_far(struct uslab_cache *c)
{
	if (!cache_is_descriptor_slow((uintptr_t)c))
		return uslab_priv_alloc_slow(c); /* reports it (NULL, not a cache) */
	return alloc_pop(c);
}

static inline void *alloc_lib(struct uslab_cache *c)
{
	/* The handle is checked before it is read (5 instructions: a pair is 67, not 60). */
	if (unlikely(!cache_is_descriptor_near(c)))
		return alloc_far(c);
	return alloc_pop(c);
}

/* uslab_cache_alloc() with its probe (probes.h) attached: @site is the caller's. */
static __attribute__((noinline)) void *alloc_traced(struct uslab_cache *c, const void *site)
{
	void *obj = alloc_lib(c);

	if (obj)
		PROBE(alloc, site, obj, c->object_size, c->size, c->name);
	return obj;
}

void *uslab_cache_alloc(struct uslab_cache *c)
{
	if (unlikely(probe_on(alloc)))
		return alloc_traced(c, __builtin_return_address(0));
	return alloc_lib(c);
}

/*
 * pcs_push - the push of the library's frees (uslab_cache_free, and
 * uslab_kfree once it found the cache): SLUB's naive double-free check,
 * then onto main, or the slow path when main is full.
 */
void pcs_push(struct uslab_cache *c, void *obj)
{
	struct pcs *p = pcs_of(c);
	void **top = p->hot.top;
	struct percpu_slot *slots;

	if (unlikely(top == p->hot.limit)) {
		/* A per-CPU cache (the thread holds none of its sheaves): @obj is checked already. */
		if (!top && (slots = percpu_slots(c))) {
			if (c->hot.free_key)
				obj_mark_free(c, obj);
			obj_poison(c, obj);
			percpu_free(c, slots, obj);
			return;
		}
		if (unlikely(c->debug)) {
			/* Its caller's site (uslab_cache_free, uslab_kfree, or their caller). */
			pcs_debug_free(c, obj, __builtin_return_address(0));
			return;
		}
		uslab_priv_free_slow(c, obj);
		return;
	}
	/* The free key finds any double free; without one, the naive check. */
	if (c->hot.free_key)
		obj_mark_free(c, obj);
	else
		check_top(c, p, obj);
	obj_poison(c, obj);
	*top = obj;
	p->hot.top = top + 1;
}

/*
 * About 28 instructions, seven branches (NULL object, NULL cache, the
 * object in a live slab of @c: three, full, the object on top: an immediate
 * double free), two loads for the slab check (the registry, the
 * descriptor), no lock, no atomic. A pointer outside every slab or of another cache goes to the
 * slow path, which reports it.
 */
static inline void free_lib(struct uslab_cache *c, void *obj)
{
	uintptr_t a = (uintptr_t)obj, e;
	const struct slab *s;

	if (unlikely(!obj))
		return;
	/* os_slab_lookup() without its NULL owner test: @c is compared instead. */
	if (unlikely(!c || (a >> VA_BITS) ||
		     !(e = READ_ONCE(uslab_priv_slab_map[a >> ARENA_SHIFT]))))
		goto slow;
	/* (a multi-page slab's tail names the cache and the first object too) */
	s = slab_desc(a, e);
	/* Of @c, at an object's start (a pointer inside one: reported by the slow path). */
	if (unlikely(READ_ONCE(s->cache) != c || !slab_at_object(&c->geo, s, obj)))
		goto slow;
	pcs_push(c, obj);
	return;
slow:
	/* Reports what is not an object of @c (an external pool's objects are in no slab). */
	uslab_priv_free_slow(c, obj);
}

/* uslab_cache_free() with its probe attached: fired first, while @obj is the caller's. */
static __attribute__((noinline)) void free_traced(struct uslab_cache *c, void *obj,
						  const void *site)
{
	if (obj)
		PROBE(free, site, obj, cache_probe_name(c));
	free_lib(c, obj);
}

void uslab_cache_free(struct uslab_cache *c, void *obj)
{
	if (unlikely(probe_on(free))) {
		free_traced(c, obj, __builtin_return_address(0));
		return;
	}
	free_lib(c, obj);
}

void *uslab_cache_zalloc(struct uslab_cache *c)
{
	void *obj = uslab_cache_alloc(c);

	if (obj)
		memset(obj, 0, c->object_size);
	return obj;
}
