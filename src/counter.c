// SPDX-License-Identifier: MIT
/*
 * counter.c - per-thread-batched counters and ID batches
 * (<uslab/counter.h>): a service of the library for programs, independent
 * of the allocator's layers.
 *
 * Every counter or generator owns an index into every thread's table of
 * slots (struct uslab_priv_cslot) and a generation number; a slot belongs
 * to it while the slot's generation equals its own. Indices of destroyed
 * objects are reused; their stale slots are told apart by the generation.
 * A thread's table is created on its first slow path, grown as indices
 * grow (by the thread itself, under reg_lock, so a sum never reads a table
 * being replaced) and folded in and freed at thread exit.
 *
 * Misuse: a destroyed object gets index UINT32_MAX and generation 0, and
 * a slot never used has generation UINT64_MAX, so an add or an ID from a
 * destroyed or never initialized object (generation 0) always reaches a
 * slow path, which reports it with a "uslab: BUG" line; so does destroying
 * an object twice (the registry keeps each index's generation). A copy of
 * an object taken before its destroy keeps the old index and generation:
 * destroy marks the index's slot unused in every thread's table, so the
 * copy's adds reach the slow path too, and a slow path takes a slot over
 * (zeroing it) only after checking the registry under reg_lock, so the
 * copy is reported, never handed the slot of the object that reuses its
 * index (whose delta it would wipe). A sum checks the registry as well.
 *
 * Lock: reg_lock (a plain mutex) guards the registry of tables, the index
 * allocator and the table of owners; the fast paths take nothing. It is a
 * leaf: its holder calls nothing that takes a lock, not even malloc or
 * free (with the malloc drop-in they take the allocator's locks), so any
 * lock's holder may take it (a constructor that initializes a counter runs
 * under its thread's state lock). Fork takes it last, after every lock of
 * the allocator, and the child re-initialises it (counter_fork_*, called by
 * init.c's handlers).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

/* A thread's table, on the registry while the thread lives. */
struct ctable {
	struct list_node link;
	struct uslab_priv_cslot *slots;
	uint32_t n;
};

__thread struct uslab_priv_cslot *uslab_priv_cslots;
__thread uint32_t uslab_priv_ncslots;
static __thread struct ctable *tls_table;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct list_node tables = LIST_HEAD_INIT(tables);
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static uint64_t next_gen = 1;

/* The owner of each index (a counter, or NULL: a generator or free), and its generation (0: free). */
static struct uslab_counter **owners;
static uint64_t *gens;
static uint32_t nidx;

#define SLOT_UNUSED UINT64_MAX /* generation of a slot no object has used */

/* Fold this thread's counter deltas in and free its table (thread exit). */
static void table_exit(void *arg)
{
	struct ctable *t = arg;

	pthread_mutex_lock(&reg_lock);
	for (uint32_t i = 0; i < t->n && i < nidx; i++) {
		struct uslab_counter *c = owners[i];

		if (c && t->slots[i].gen == c->gen && t->slots[i].a)
			__atomic_add_fetch(&c->count, (int64_t)t->slots[i].a, __ATOMIC_RELAXED);
	}
	list_del(&t->link);
	pthread_mutex_unlock(&reg_lock);
	if (tls_table == t) {
		uslab_priv_cslots = NULL;
		uslab_priv_ncslots = 0;
		tls_table = NULL;
	}
	free(t->slots);
	free(t);
}

static void make_key(void)
{
	if (pthread_key_create(&exit_key, table_exit))
		abort(); /* no key left: the process cannot keep counters */
}

/*
 * This thread's table with room for index @idx (created, or grown under
 * reg_lock). Return: the slot, or NULL with no memory.
 */
static struct uslab_priv_cslot *slot_of(uint32_t idx)
{
	struct ctable *t = tls_table;
	struct uslab_priv_cslot *s, *old;
	uint32_t n;

	if (t && idx < t->n)
		return &t->slots[idx];
	pthread_once(&key_once, make_key);
	n = t ? t->n : 0;
	while (n <= idx)
		n = n ? 2 * n : 16;
	s = calloc(n, sizeof(*s));
	if (!s)
		return NULL;
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t) {
			free(s);
			return NULL;
		}
		pthread_setspecific(exit_key, t);
	}
	for (uint32_t i = t->n; i < n; i++)
		s[i].gen = SLOT_UNUSED;
	old = t->slots;
	pthread_mutex_lock(&reg_lock);
	if (old)
		memcpy(s, old, t->n * sizeof(*s));
	else
		list_add(&t->link, &tables);
	t->slots = s;
	t->n = n;
	pthread_mutex_unlock(&reg_lock);
	free(old); /* (not under reg_lock: a leaf) */
	tls_table = t;
	uslab_priv_cslots = s;
	uslab_priv_ncslots = n;
	return &s[idx];
}

/*
 * An index and a generation for a new object (@c: a counter, NULL: a
 * generator). The tables grow by arrays allocated before reg_lock is taken
 * and freed after it is dropped (reg_lock is a leaf).
 */
static int idx_alloc(struct uslab_counter *c, uint32_t *idx, uint64_t *gen)
{
	struct uslab_counter **o = NULL, **old_o = NULL;
	uint64_t *g = NULL, *old_g = NULL;
	uint32_t i, n = 0;

	pthread_mutex_lock(&reg_lock);
	for (;;) {
		for (i = 0; i < nidx && gens[i]; i++)
			;
		if (i < nidx)
			break;
		if (n != (nidx ? 2 * nidx : 64)) {
			/* Arrays of the size the tables need now, then look again. */
			n = nidx ? 2 * nidx : 64;
			pthread_mutex_unlock(&reg_lock);
			free(o);
			free(g);
			o = calloc(n, sizeof(*o));
			g = calloc(n, sizeof(*g));
			if (!o || !g) {
				free(o);
				free(g);
				return -ENOMEM;
			}
			pthread_mutex_lock(&reg_lock);
			continue;
		}
		if (nidx) {
			memcpy(o, owners, nidx * sizeof(*o));
			memcpy(g, gens, nidx * sizeof(*g));
		}
		old_o = owners;
		old_g = gens;
		owners = o;
		gens = g;
		o = NULL;
		g = NULL;
		__atomic_store_n(&nidx, n, __ATOMIC_RELEASE);
	}
	owners[i] = c;
	gens[i] = *gen = next_gen++;
	*idx = i;
	pthread_mutex_unlock(&reg_lock);
	free(o);
	free(g);
	free(old_o);
	free(old_g);
	return 0;
}

/* Report a use of @obj (a @what) that was never initialized or is destroyed. */
static __attribute__((noreturn)) void not_live(const void *obj, const char *what, const char *call)
{
	usl_bug(NULL, obj, "%s: %s never initialized, or destroyed", call, what);
	__builtin_unreachable();
}

/*
 * Give back the index of a live object (its @idx and @gen checked); its slot
 * in every thread's table is marked unused, so a stale copy's add or ID
 * reaches the slow path (concurrent calls have ended: the contract).
 */
static void idx_free(const void *obj, uint32_t idx, uint64_t gen, const char *what,
		     const char *call)
{
	struct ctable *t;

	pthread_mutex_lock(&reg_lock);
	if (!gen || idx >= nidx || gens[idx] != gen) {
		pthread_mutex_unlock(&reg_lock);
		not_live(obj, what, call);
	}
	list_for_each_entry(t, &tables, link) {
		if (idx < t->n)
			__atomic_store_n(&t->slots[idx].gen, SLOT_UNUSED, __ATOMIC_RELAXED);
	}
	gens[idx] = 0;
	owners[idx] = NULL;
	pthread_mutex_unlock(&reg_lock);
}

/* A slow path's check of an object's index: generation 0 is a destroyed or zeroed object. */
static void check_live(const void *obj, uint32_t idx, uint64_t gen, const char *what,
		       const char *call)
{
	if (unlikely(!gen || idx >= __atomic_load_n(&nidx, __ATOMIC_ACQUIRE)))
		not_live(obj, what, call);
}

/*
 * A slow path's check before it takes a slot over (zeroing it): @gen is
 * the registry's generation of @idx, not a stale copy's of a destroyed
 * object whose index another one now uses (reg_lock: the registry's
 * arrays may be replaced). Once per thread and object.
 */
static void check_registered(const void *obj, uint32_t idx, uint64_t gen, const char *what,
			     const char *call)
{
	bool ok;

	pthread_mutex_lock(&reg_lock);
	ok = idx < nidx && gens[idx] == gen;
	pthread_mutex_unlock(&reg_lock);
	if (unlikely(!ok))
		not_live(obj, what, call);
}

/* ---------------------------------------------------------- counters */

int uslab_counter_init(struct uslab_counter *c, int64_t initial)
{
	if (!c)
		return -EINVAL;
	if (usl_init())
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	c->count = initial;
	c->batch = usl_opt.counter_batch ? usl_opt.counter_batch :
					   (usl_opt.nr_cpus * 2 > 32 ? usl_opt.nr_cpus * 2 : 32);
	return idx_alloc(c, &c->idx, &c->gen);
}

void uslab_counter_destroy(struct uslab_counter *c)
{
	if (!c)
		return;
	idx_free(c, c->idx, c->gen, "counter", "uslab_counter_destroy");
	c->idx = UINT32_MAX; /* later adds reach the slow path, which reports them */
	c->gen = 0;
}

int64_t uslab_counter_read(const struct uslab_counter *c)
{
	if (!c)
		not_live(c, "counter", "uslab_counter_read");
	return __atomic_load_n(&c->count, __ATOMIC_RELAXED);
}

int64_t uslab_counter_sum(const struct uslab_counter *c)
{
	struct ctable *t;
	int64_t sum;

	if (!c)
		not_live(c, "counter", "uslab_counter_sum");
	pthread_mutex_lock(&reg_lock);
	if (!c->gen || c->idx >= nidx || gens[c->idx] != c->gen) {
		/* Destroyed, or a stale copy of a destroyed one (its index may be reused). */
		pthread_mutex_unlock(&reg_lock);
		not_live(c, "counter", "uslab_counter_sum");
	}
	sum = __atomic_load_n(&c->count, __ATOMIC_RELAXED);
	list_for_each_entry(t, &tables, link) {
		const struct uslab_priv_cslot *s = c->idx < t->n ? &t->slots[c->idx] : NULL;

		if (s && __atomic_load_n(&s->gen, __ATOMIC_RELAXED) == c->gen)
			sum += (int64_t)__atomic_load_n(&s->a, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&reg_lock);
	return sum;
}

/*
 * The slow path of an add: this thread's slot made (or taken over from a
 * destroyed counter), or its delta folded into the shared count.
 */
void uslab_priv_counter_add_slow(struct uslab_counter *c, int64_t delta)
{
	struct uslab_priv_cslot *s;
	int64_t v;

	check_live(c, c->idx, c->gen, "counter", "uslab_counter_add");
	s = slot_of(c->idx);
	if (!s || s->gen != c->gen)
		check_registered(c, c->idx, c->gen, "counter", "uslab_counter_add");
	if (!s) {
		__atomic_add_fetch(&c->count, delta, __ATOMIC_RELAXED); /* no memory: shared */
		return;
	}
	if (s->gen != c->gen) {
		__atomic_store_n(&s->a, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->gen, c->gen, __ATOMIC_RELAXED);
	}
	v = (int64_t)s->a + delta;
	if (v < c->batch && v > -c->batch) {
		__atomic_store_n(&s->a, (uint64_t)v, __ATOMIC_RELAXED);
		return;
	}
	/* (A sum between these two may count v twice: exact only when no add runs.) */
	__atomic_add_fetch(&c->count, v, __ATOMIC_RELAXED);
	__atomic_store_n(&s->a, 0, __ATOMIC_RELAXED);
}

void(uslab_counter_add)(struct uslab_counter *c, int64_t delta)
{
	uslab_counter_add_inline(c, delta);
}

/* -------------------------------------------------------- generators */

int uslab_idgen_init(struct uslab_idgen *g, uint64_t first)
{
	if (!g)
		return -EINVAL;
	if (usl_init())
		return -ENOMEM;
	memset(g, 0, sizeof(*g));
	g->next = first;
	g->batch = usl_opt.idgen_batch;
	return idx_alloc(NULL, &g->idx, &g->gen);
}

void uslab_idgen_destroy(struct uslab_idgen *g)
{
	if (!g)
		return;
	idx_free(g, g->idx, g->gen, "ID generator", "uslab_idgen_destroy");
	g->idx = UINT32_MAX;
	g->gen = 0;
}

/* A new batch for this thread (or, with no memory, one ID straight from the shared atomic). */
uint64_t uslab_priv_idgen_next_slow(struct uslab_idgen *g)
{
	struct uslab_priv_cslot *s;
	uint64_t start;

	check_live(g, g->idx, g->gen, "ID generator", "uslab_idgen_next");
	s = slot_of(g->idx);
	if (!s || s->gen != g->gen)
		check_registered(g, g->idx, g->gen, "ID generator", "uslab_idgen_next");
	if (!s)
		return __atomic_fetch_add(&g->next, 1, __ATOMIC_RELAXED);
	if (s->gen == g->gen && s->a < s->b)
		return s->a++;
	start = __atomic_fetch_add(&g->next, g->batch, __ATOMIC_RELAXED);
	s->gen = g->gen;
	s->a = start + 1;
	s->b = start + g->batch; /* (wraps past 2^64 as the shared word does) */
	return start;
}

uint64_t(uslab_idgen_next)(struct uslab_idgen *g)
{
	return uslab_idgen_next_inline(g);
}

/* ------------------------------------------------------------- fork */

/*
 * init.c's fork handlers: reg_lock is taken after every lock of the
 * allocator (it is a leaf, see the top of this file), released first. In
 * the child the tables of the parent's other threads stay on the registry
 * (their deltas still count in sums; nothing frees them: those threads do
 * not exist here).
 */
void counter_fork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

void counter_fork_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

void counter_fork_child(void)
{
	pthread_mutex_unlock(&reg_lock); /* the forking thread's, from counter_fork_prepare() */
}
