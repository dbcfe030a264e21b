// SPDX-License-Identifier: MIT
/*
 * thread.c - per-thread state: the table of sheaves (one struct pcs per
 * cache id), thread exit, and draining other threads' sheaves for destroy
 * and fork.
 *
 * A thread that has never entered a slow path points uslab_priv_pcs_table
 * (exported for the inline fast path, uslab/fastpath.h) at a table of
 * zeros shared by all such threads, so both fast paths take their slow
 * path, which starts the thread (thread_start_self). Entry 0 of every
 * table stays zero for ever: caches without sheaves use it.
 *
 * States are mmap'ed once and recycled through a pool when threads exit,
 * so thread churn costs no system call. A state is a one-line header and a
 * table of one struct pcs (two cache lines) per cache id 0..USLAB_MAX_CACHES:
 * 64 + 4097 * 128 bytes, 516 KiB of address space once rounded up to pages
 * (asserted below), of which a thread touches the two lines of each cache
 * it uses (its fast path only the first).
 *
 * Locks: threads_lock (LOCK_THREADS in src/lock.h) protects the
 * list of live states and the pool; tstate->lock (LOCK_TSTATE)
 * protects a state's table as a whole. The owner takes its own lock in
 * slow paths only; the fast path does not (other threads touch a table
 * only to drain a cache that the program promised not to use
 * concurrently, or after fork).
 *
 * Invariants: a state is on the live list or in the pool, never both;
 * max_id <= USLAB_MAX_CACHES and no entry above max_id is attached to a
 * cache; entry 0 and the shared table stay zero (at check level 2 the
 * whole shared table is compared with zeros whenever a thread starts).
 */
#include <pthread.h>
#include <string.h>

#include "perthread.h"
#include "list.h"

#define PCS_ENTRIES (USLAB_MAX_CACHES + 1)

struct tstate {
	struct ulock lock;
	unsigned int max_id;	  /* highest cache id used */
	struct list_node link;	  /* on the live list (threads) */
	struct tstate *pool_next; /* on the pool */
	struct pcs table[PCS_ENTRIES] CACHELINE_ALIGNED;
};

/* What the top comment says a state costs (update it with USLAB_MAX_CACHES). */
_Static_assert(sizeof(struct tstate) == CACHELINE + PCS_ENTRIES * sizeof(struct pcs),
	       "a state is a one-line header and its table");
_Static_assert(ALIGN_UP(sizeof(struct tstate), PAGE_SIZE) == 516 << 10,
	       "a state is 516 KiB of address space");

static struct pcs dummy_table[PCS_ENTRIES] CACHELINE_ALIGNED;
__thread char *uslab_priv_pcs_table __attribute__((tls_model("initial-exec"))) =
	(char *)dummy_table;
static __thread struct tstate *tls_state __attribute__((tls_model("initial-exec")));
static __thread bool tls_exited __attribute__((tls_model("initial-exec")));
static __thread bool tls_starting __attribute__((tls_model("initial-exec")));

static struct ulock threads_lock = ULOCK_INIT_RANK(LOCK_THREADS);
static struct list_node threads = LIST_HEAD_INIT(threads); /* live states (link) */
static struct tstate *pool; /* states of exited threads (pool_next) */
static pthread_key_t exit_key;

/* Put @st in the pool. Under threads_lock. */
static void pool_put(struct tstate *st)
{
	USLAB_ASSERT_HELD(&threads_lock);
	USLAB_ASSERT(!st->link.next); /* off the live list (list_del clears it) */
	st->pool_next = pool;
	pool = st;
}

/* Entries [from, PCS_ENTRIES) of table @t are all zeros (check level 2). */
static bool table_zero(const struct pcs *t, unsigned int from)
{
	static const struct pcs zero;

	for (unsigned int id = from; id < PCS_ENTRIES; id++)
		if (memcmp(&t[id], &zero, sizeof(zero)))
			return false;
	return true;
}

/* Drain every cache of @st. Called with st->lock held. */
static void tstate_drain(struct tstate *st)
{
	USLAB_ASSERT_HELD(&st->lock);
	USLAB_ASSERT(st->max_id <= USLAB_MAX_CACHES);
	for (unsigned int id = 1; id <= st->max_id; id++) {
		pcs_drain(&st->table[id]);
		USLAB_ASSERT(!st->table[id].cache && !st->table[id].main);
	}
	USLAB_ASSERT_EXPENSIVE(!memcmp(&st->table[0], &dummy_table[0], sizeof(struct pcs)));
	st->max_id = 0;
}

static void thread_exit(void *arg)
{
	struct tstate *st = arg;

	ulock_lock(&st->lock);
	tstate_drain(st);
	ulock_unlock(&st->lock);

	uslab_priv_pcs_table = (char *)dummy_table;
	tls_state = NULL;
	/*
	 * A later destructor (the program's, a C++ thread_local, glibc's own
	 * teardown) may still allocate and free: this thread then uses the
	 * slabs directly. A new state now would never be drained.
	 */
	tls_exited = true;
	usl_thread_exiting = true;
	ulock_lock(&threads_lock);
	list_del(&st->link);
	pool_put(st);
	ulock_unlock(&threads_lock);
	gp_kick();
}

/* Give the calling thread a state (from the pool, or new) and install it. */
static struct tstate *thread_install(void)
{
	struct tstate *st;

	ulock_lock(&threads_lock);
	st = pool;
	if (st)
		pool = st->pool_next;
	ulock_unlock(&threads_lock);
	if (!st) {
		st = os_mmap(sizeof(*st));
		if (!st)
			return NULL;
	}
	ulock_setup(&st->lock, LOCK_TSTATE);
	/* New, or drained in the pool: every entry zero, and the shared table's. */
	USLAB_ASSERT(!st->max_id);
	USLAB_ASSERT_EXPENSIVE(table_zero(st->table, 0) && table_zero(dummy_table, 0));
	st->max_id = 0;
	if (pthread_setspecific(exit_key, st)) {
		ulock_lock(&threads_lock);
		pool_put(st);
		ulock_unlock(&threads_lock);
		return NULL;
	}
	ulock_lock(&threads_lock);
	list_add(&st->link, &threads);
	ulock_unlock(&threads_lock);
	tls_state = st;
	uslab_priv_pcs_table = (char *)st->table;
	return st;
}

static struct pcs *thread_start(void)
{
	struct tstate *st;

	/*
	 * pthread_setspecific() may call calloc (keys beyond the first 32),
	 * which with libuslab-malloc.so comes back here: that nested call
	 * goes to the slabs directly instead.
	 */
	if (tls_exited || tls_starting || usl_init())
		return NULL;
	tls_starting = true;
	st = thread_install();
	tls_starting = false;
	return st ? st->table : NULL;
}

/*
 * thread_start_self - give the calling thread its state if it has none:
 * uslab_priv_pcs_table then points at its own table (pcs_of()).
 * Return: 0, or -1 when it cannot (no memory, or the thread is exiting:
 * its exit handler has run).
 */
int thread_start_self(void)
{
	return tls_state || thread_start() ? 0 : -1;
}

/* Whether the calling thread has a state (its own table). */
bool thread_started(void)
{
	return tls_state != NULL;
}

void thread_note_id(int id)
{
	/* Under the thread's own lock (pcs_attach); id 0 is never attached. */
	USLAB_ASSERT(tls_state && ulock_owned(&tls_state->lock));
	USLAB_ASSERT(id > 0 && id <= USLAB_MAX_CACHES);
	if ((unsigned int)id > tls_state->max_id)
		tls_state->max_id = (unsigned int)id;
}

/* Slow paths only, of a thread with a state (thread_start_self). */
void thread_lock_self(void)
{
	USLAB_ASSERT(tls_state && uslab_priv_pcs_table == (char *)tls_state->table);
	ulock_lock(&tls_state->lock);
}

void thread_unlock_self(void)
{
	ulock_unlock(&tls_state->lock);
}

/* Drain cache @c from every thread (destroy). Under caches_lock. */
void thread_drain_cache(struct uslab_cache *c)
{
	struct tstate *st;

	USLAB_ASSERT_HELD(&caches_lock);
	USLAB_ASSERT(c->id > 0);
	ulock_lock(&threads_lock);
	list_for_each_entry(st, &threads, link) {
		ulock_lock(&st->lock);
		if (st->table[c->id].cache == c)
			pcs_drain(&st->table[c->id]);
		ulock_unlock(&st->lock);
	}
	ulock_unlock(&threads_lock);
}

/* Add the live threads' event counters of @c to @ev. */
void thread_sum_events(const struct uslab_cache *c, uint64_t *ev)
{
	struct tstate *st;

	if (c->id <= 0)
		return;
	ulock_lock(&threads_lock);
	list_for_each_entry(st, &threads, link) {
		ulock_lock(&st->lock);
		if (st->table[c->id].cache == c)
			pcs_events_sum(&st->table[c->id], ev);
		ulock_unlock(&st->lock);
	}
	ulock_unlock(&threads_lock);
}

/*
 * Objects the live threads hold in their sheaves of @c: each thread's under
 * its lock, which its fast paths do not take, so the count is as of some
 * moment during the read (a statistic).
 */
NO_SANITIZE_THREAD uint64_t thread_sum_sheaved(const struct uslab_cache *c)
{
	struct tstate *st;
	uint64_t n = 0;

	if (c->id <= 0)
		return 0;
	ulock_lock(&threads_lock);
	list_for_each_entry(st, &threads, link) {
		const struct pcs *p = &st->table[c->id];

		ulock_lock(&st->lock);
		if (p->cache == c) {
			n += (uint64_t)(p->hot.top - p->hot.bottom);
			if (p->spare)
				n += p->spare->size;
			if (p->remote)
				n += p->remote->size;
		}
		ulock_unlock(&st->lock);
	}
	ulock_unlock(&threads_lock);
	return n;
}

void uslab_thread_flush(void)
{
	struct tstate *st = tls_state;

	if (!st)
		return;
	ulock_lock(&st->lock);
	tstate_drain(st);
	ulock_unlock(&st->lock);
	gp_kick();
}

int thread_init(void)
{
	return -pthread_key_create(&exit_key, thread_exit);
}

void thread_fork_prepare(void)
{
	struct tstate *st;

	ulock_lock(&threads_lock);
	list_for_each_entry(st, &threads, link) {
		ulock_lock(&st->lock);
	}
}

void thread_fork_parent(void)
{
	struct tstate *st;

	list_for_each_entry(st, &threads, link) {
		ulock_unlock(&st->lock);
	}
	ulock_unlock(&threads_lock);
}

/*
 * In the child only the forking thread exists: the objects other threads
 * cached go back to their caches and their states to the pool.
 * Runs after os_fork_child() and cache_fork_child().
 */
void thread_fork_child(void)
{
	struct list_node *pos, *tmp;
	struct tstate *st;

	ulock_init(&threads_lock);
	list_for_each_entry(st, &threads, link) {
		ulock_init(&st->lock);
	}
	/* Alone now: the locks only keep the assertions of the drain true. */
	ulock_lock(&threads_lock);
	list_for_each_safe(pos, tmp, &threads) {
		st = list_entry(pos, struct tstate, link);
		if (st == tls_state)
			continue;
		ulock_lock(&st->lock);
		tstate_drain(st);
		ulock_unlock(&st->lock);
		list_del(&st->link);
		pool_put(st);
	}
	ulock_unlock(&threads_lock);
}

/* ------------------------------------------------------------ cache ids */

/*
 * A cache with sheaves has an id: its entry in every thread's table, at
 * pcs_off = id * sizeof(struct pcs) (struct uslab_cache.hot, read by the
 * inline fast paths). Ids start at 1: entry 0 stays empty in every thread
 * (caches without sheaves, and caches not yet created that a layer above
 * stands in for, use it). Ids 1..id_reserved are kept for the caches
 * created with CACHE_RESERVED_ID (kmalloc's classes, created lazily at the
 * first kmalloc: kmalloc.c reserves them at start-up with
 * thread_reserve_ids()): other caches take the rest, so USLAB_MAX_CACHES
 * - id_reserved of them with sheaves can exist (doc/api.md); a reserved
 * cache may take any id (two copies of a class exist for a moment when
 * threads race to create it, kmalloc.c). The bitmap and id_reserved are
 * protected by caches_lock (cache_registry.c), held across create and
 * destroy.
 */
static unsigned int id_reserved;
static uint64_t id_map[(USLAB_MAX_CACHES + 1 + 63) / 64];

/*
 * thread_reserve_ids - keep ids 1..@n for caches created with
 * CACHE_RESERVED_ID. At start-up (usl_init), before any cache takes an id.
 */
void thread_reserve_ids(unsigned int n)
{
	USLAB_ASSERT(n < USLAB_MAX_CACHES);
	ulock_lock(&caches_lock);
	for (unsigned int i = 1; i <= n; i++)
		USLAB_ASSERT(!(id_map[i / 64] & (1ull << (i % 64))));
	id_reserved = n;
	ulock_unlock(&caches_lock);
}

/*
 * The objects' places in the slabs of the cache with each id, and its free
 * key (<uslab/inline/priv.h>): the inline kfree's checks. Zero for id 0 and for a
 * debug cache (its objects freed by kfree take the library's path).
 */
struct uslab_priv_objgeo uslab_priv_objgeo[USLAB_MAX_CACHES + 1];

static int id_alloc(bool reserved)
{
	for (int i = reserved ? 1 : (int)id_reserved + 1; i <= USLAB_MAX_CACHES; i++) {
		if (!(id_map[i / 64] & (1ull << (i % 64)))) {
			id_map[i / 64] |= 1ull << (i % 64);
			return i;
		}
	}
	return -1;
}

static void id_free(int id)
{
	id_map[id / 64] &= ~(1ull << (id % 64));
}

/*
 * thread_id_attach - give @c an id (its pcs entry in every thread's table)
 * and its sheaves' capacity, before it goes on the list of caches.
 * Return: 0, or -ENOSPC when all ids @c may take are taken.
 */
int thread_id_attach(struct uslab_cache *c, unsigned int sheaf_capacity)
{
	int id;

	USLAB_ASSERT(sheaf_capacity && c->id < 0);
	ulock_lock(&caches_lock);
	id = id_alloc(c->flags & CACHE_RESERVED_ID);
	ulock_unlock(&caches_lock);
	if (id < 0)
		return -ENOSPC;
	c->id = id;
	c->pcs_own = (size_t)id * sizeof(struct pcs);
	c->sheaf_capacity = sheaf_capacity;
	c->hot.free_key = cache_free_key(c);
	/*
	 * A debug cache's paths, inline and the library's, find the
	 * always-empty entry: every call reaches its checks (thread_sheaves.c). A cache
	 * with the free key: its inline paths do (they never write an
	 * object), the library's pop and push find its sheaves and mark.
	 * With NUMA on, both do: the slow paths' NUMA branch keeps each
	 * thread's sheaves to one node (thread_sheaves.c, "NUMA").
	 */
	c->pcs_lib = c->debug || cache_numa(c) ? 0 : c->pcs_own;
	c->hot.pcs_off = c->debug || c->hot.free_key || cache_numa(c) ? 0 : c->pcs_own;
	/*
	 * The inline kfree serves the objects of every cache with sheaves,
	 * keyed or not (pushed as uslab_cache_free() pushes them, marked
	 * where the cache has the key); a debug cache's go to the library
	 * (span 0), which checks them.
	 */
	if (!c->debug)
		uslab_priv_objgeo[id] = (struct uslab_priv_objgeo){
			.recip = c->recip,
			.span = (uint64_t)c->objects * c->size,
			.free_key = c->hot.free_key,
		};
	return 0;
}

/* Free @c's id (destroy, its sheaves drained). Under caches_lock. */
void thread_id_detach_locked(struct uslab_cache *c)
{
	USLAB_ASSERT_HELD(&caches_lock);
	if (c->id > 0) {
		uslab_priv_objgeo[c->id] = (struct uslab_priv_objgeo){ 0 };
		id_free(c->id);
	}
}
