// SPDX-License-Identifier: MIT
/*
 * cache.c - the cache: a struct uslab_cache descriptor (laid out by
 * slab_geometry.c), its nodes of slabs (per NUMA node: the partial list
 * and its counts; one node with NUMA off),
 * and objects taken from and returned to those slabs in batches: SLUB's
 * core. The descriptors' table and the list of caches are
 * cache_registry.c's, a pool's loose array loose.c's (cache_core.h is
 * what the three share). Creating, destroying and shrinking a cache is
 * lifecycle.c's (above every layer); sheaves and their ids belong to the
 * per-thread layer (barn.c, thread_sheaves.c, thread.c), large objects to kmalloc.c.
 *
 * Lock (its rank in src/lock.h, the one copy of the lock order):
 *
 *   node->lock   (LOCK_NODE) - a cache's partial list, every slab
 *                freelist and bump index of slabs on a list, and the node
 *                counters. Never held with the barn lock: a sheaf leaves
 *                the barn before it is flushed.
 *
 * Slab states (struct slab.state, enum slab_state in os.h):
 *
 *   state    on list      free objects           who may touch it
 *   FREE     os free, or  -                      os.c under os_lock; a
 *            a release                           release chain: its owner
 *            chain
 *   NEW      none         all                    the one thread creating it
 *   PARTIAL  partial      some or all (empty)    anyone under node->lock
 *   FULL     none         none                   anyone under node->lock
 *
 *   FREE -> NEW      os_slab_alloc() gave it (os.c has the slot states)
 *   NEW -> PARTIAL   refill carved part of a new slab into a sheaf
 *   NEW -> FULL      refill carved all of it
 *   PARTIAL -> FULL  refill took its whole freelist and the rest of its bump
 *   FULL -> PARTIAL  objects came back (flush, bulk free)
 *   NEW -> FULL      a one-object slab (kmalloc's large objects) published
 *   FULL -> FREE     a one-object slab whose object was freed
 *   PARTIAL -> FREE  it became empty while min_partial other slabs are on
 *                    the partial list, or on shrink or destroy; it goes on
 *                    a release chain (linked by ->next) to os_slab_free(),
 *                    after a grace period for TYPESAFE_BY_RCU caches
 *
 * Invariants: nfree <= bump <= objects in every slab; an empty PARTIAL
 * slab is counted in nr_empty, so nr_empty <= nr_partial <= nr_slabs, and
 * nr_free <= nr_objects. USLAB_CHECKS builds assert the transitions and
 * these counts where they change (USLAB_ASSERT).
 *
 * Objects come back to slabs only in batches: a sheaf flush or a bulk free
 * builds detached freelists (one per slab, outside any lock) and hands up
 * to FREE_GROUPS of them over under one acquisition of the node lock.
 * Refill detaches whole slab freelists under the lock (O(1) each) and walks
 * them after dropping it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <x86intrin.h>

#include "cache.h"
#include "cache_core.h"
#include "gp.h" /* gp_defer_slabs(): an exception in base.h */

#define FREE_GROUPS 32
#define FREE_AHEAD 16 /* slab descriptors prefetched ahead of a free batch */
#define REFILL_LISTS 16

/* -------------------------------------------------------- descriptor */

/* The caches of OFFSLAB index arrays: blocks of 16 << i bytes, i < OFFSLAB_CACHES. */
#define OFFSLAB_CACHES 9
_Static_assert(OFFSLAB_MIN_BYTES << (OFFSLAB_CACHES - 1) == OFFSLAB_MAX_BYTES,
	       "one cache per OFFSLAB array block size");
static struct uslab_cache offslab_caches[OFFSLAB_CACHES];

/* min_partial from struct cache_shape's @keep_bytes: whole slabs of 2^@order pages, 1 to 5. */
static unsigned int keep_min_partial(size_t keep_bytes, unsigned int order)
{
	size_t n = keep_bytes >> (PAGE_SHIFT + order);

	return n < 1 ? 1 : n > 5 ? 5 : (unsigned int)n;
}

static unsigned int default_min_partial(unsigned int size)
{
	unsigned int mp = (fls_uint(size) - 1) / 2;

	return mp < 5 ? 5 : mp > 10 ? 10 : mp;
}

static uintptr_t random_secret(void)
{
	int old = usl_nocancel(); /* getrandom() is a cancellation point */
	uintptr_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uintptr_t)__rdtsc() * 0x9e3779b97f4a7c15ull ^ (uintptr_t)&v;
	usl_cancel_restore(old);
	return v | 1;
}

/*
 * The free key (<uslab/inline/priv.h>, doc/design.md "Free checks"): one random
 * word for the process, bit 63 set (never 0, never a user address); each
 * cache with a key has a copy (c->hot.free_key).
 */
static uintptr_t free_key;
/* A cache got the key: stale keys may be in memory that goes back to the page heap. */
static bool free_key_used;

/* Whether a cache of @flags (@ctor: it has one, @debug: the debug tier) has the key with sheaves. */
static bool may_key(unsigned int flags, bool ctor, bool debug)
{
	if (ctor || debug || usl_opt.free_key == FREE_KEY_OFF ||
	    (flags & (USLAB_TYPESAFE_BY_RCU | USLAB_POOL | USLAB_POOL_EXTERNAL | USLAB_NO_FREE_KEY |
		      CACHE_INTERNAL)))
		return false;
	return (flags & USLAB_FREE_KEY) || usl_opt.free_key == FREE_KEY_ALL;
}

/*
 * cache_free_key - the free key of @c, which is getting sheaves: the key
 * for a cache created with USLAB_FREE_KEY (the malloc drop-in's classes
 * are: kmalloc.c) or for every cache with USLAB_FREE_KEY=1; 0 for the
 * others (the default: no free object is read or written), with
 * USLAB_FREE_KEY=0, and where a free object's first word is not uslab's
 * (a constructor, TYPESAFE_BY_RCU, the debug tier: bound; pools: the
 * caller's), the creator said USLAB_NO_FREE_KEY, or no free object ever
 * waits in a sheaf (uslab's own caches). A cache without sheaves has
 * none: its objects go to their slabs, written by nothing but the layout.
 */
uintptr_t cache_free_key(const struct uslab_cache *c)
{
	if (!may_key(c->flags, c->ctor != NULL, c->debug != 0))
		return 0;
	__atomic_store_n(&free_key_used, true, __ATOMIC_RELAXED);
	return free_key;
}

/*
 * cache_clear_stale_key - memory about to be handed out that no keyed
 * cache's path cleared (a large object: its pages may have been a slab
 * whose objects went back to it marked) leaves with no key in its first
 * word, so that no copy of it (krealloc) can carry one into a keyed
 * object and make its free look like a double free (doc/design.md, "Free
 * checks": the hand-out invariant). A load, and nothing more while no
 * cache has the key.
 */
NO_SANITIZE_ADDRESS void cache_clear_stale_key(void *mem)
{
	uintptr_t *w = mem;

	if (__atomic_load_n(&free_key_used, __ATOMIC_RELAXED) &&
	    __atomic_load_n(w, __ATOMIC_RELAXED) == free_key)
		__atomic_store_n(w, 0, __ATOMIC_RELAXED);
	USLAB_ASSERT_EXPENSIVE(!cache_carries_key(mem));
}

/* Whether @mem's first word is the free key (the hand-out invariant's assertions). */
NO_SANITIZE_ADDRESS bool cache_carries_key(const void *mem)
{
	return free_key && __atomic_load_n((const uintptr_t *)mem, __ATOMIC_RELAXED) == free_key;
}

/*
 * uslab_priv_double_free - a free found the free key in @obj's first word:
 * it is free already (in a sheaf, the barn, a magazine or a CPU's sheaf).
 * @c is NULL from the inline kfree.
 */
void uslab_priv_double_free(struct uslab_cache *c, const void *obj)
{
	if (!c)
		c = uslab_cache_of(obj);
	usl_bug(c, obj, "double free (the object carries the free key: it is free already)");
}

/* The mapping of nodes 1 .. @nr - 1: their lists, then their barns. */
static size_t nodes_bytes(unsigned int nr)
{
	_Static_assert(sizeof(struct node) % _Alignof(struct barn) == 0,
		       "barns aligned after nodes");
	return ALIGN_UP((nr - 1) * (sizeof(struct node) + sizeof(struct barn)), PAGE_SIZE);
}

static void node_init(struct uslab_cache *c, struct node *n, unsigned int id)
{
	ulock_setup(&n->lock, LOCK_NODE);
	list_init(&n->partial);
	list_init(&n->full);
	n->cache = c;
	n->id = id;
}

/*
 * cache_nodes_setup - @c's node lists: node 0's in the descriptor, and
 * with NUMA on one more per node beside it (one mapping, given back by
 * cache_nodes_release() when the cache goes). Return: 0, or -ENOMEM.
 */
static int cache_nodes_setup(struct uslab_cache *c)
{
	unsigned int nr = numa_topo.nr_nodes;

	node_init(c, &c->node, 0);
	c->nr_nodes = 1;
	c->node_more = NULL;
	c->barn_more = NULL;
	if (nr > 1) {
		c->node_more = os_mmap(nodes_bytes(nr));
		if (!c->node_more)
			return -ENOMEM;
		c->barn_more = (struct barn *)(void *)(c->node_more + (nr - 1));
		for (unsigned int i = 1; i < nr; i++)
			node_init(c, &c->node_more[i - 1], i);
		c->nr_nodes = nr;
	}
	return 0;
}

/* The node lists and barns beyond node 0 go (cache_delete: every slab given back). */
void cache_nodes_release(struct uslab_cache *c)
{
	if (c->node_more)
		os_munmap(c->node_more, nodes_bytes(c->nr_nodes));
	c->node_more = NULL;
	c->barn_more = NULL;
	c->nr_nodes = 1;
}

/*
 * cache_setup - lay out @c (the alignment its flags and the debug tier
 * ask for, then slab_geometry_init()) and initialise its descriptor.
 * Return: 0, -EINVAL when no layout can serve it, or -ENOMEM (the node
 * lists of a NUMA machine could not be mapped).
 */
int cache_setup(struct uslab_cache *c, const char *name, size_t size, size_t align,
		void (*ctor)(void *), unsigned int flags, unsigned int min_partial,
		unsigned int layout, const struct cache_shape *shape)
{
	size_t sz = ALIGN_UP(size, sizeof(void *));
	size_t a = align > sizeof(void *) ? align : sizeof(void *);
	bool bound = ctor || (flags & USLAB_TYPESAFE_BY_RCU);
	/* An external pool has no slab to check (uslab_cache_create() refuses the flags). */
	unsigned int debug =
		(flags & USLAB_POOL_EXTERNAL) ? 0 : slab_debug_flags(name, flags, bound);
	struct slab_geometry_req r;

	if (flags & USLAB_HWCACHE_ALIGN) {
		size_t ralign = CACHELINE;

		while (size <= ralign / 2)
			ralign /= 2;
		if (ralign > a)
			a = ralign;
	}
	if (debug) {
		/*
		 * Red zones and metadata around every object (slab_debug.c); no
		 * byte of a free object is the allocator's, as with a constructor.
		 * The objects keep the alignment they have without the tier (a
		 * power-of-two size: that size, up to kmalloc's largest class,
		 * 32 KiB; kmalloc promises it, and malloc's 16 bytes rest on
		 * it: CACHE_NATURAL_ALIGN_MAX). Slabs are aligned to their size, and slab_debug_layout()
		 * rounds the left red zone up to it: a Z slot of the 32 KiB
		 * class is 96 KiB.
		 */
		size_t natural = (size_t)size & -(size_t)size;

		if (natural > CACHE_NATURAL_ALIGN_MAX)
			natural = CACHE_NATURAL_ALIGN_MAX;
		if (natural > a)
			a = natural;
		c->debug = debug;
		c->object_size = (unsigned int)size;
		c->align = (unsigned int)a;
		sz = slab_debug_layout(c);
		bound = true;
	}
	r = (struct slab_geometry_req){
		.object_size = (unsigned int)size,
		.slot = sz,
		.align = a,
		.obj_off = c->obj_off,
		.max_order = shape && shape->max_order > usl_opt.max_order ? shape->max_order :
									     usl_opt.max_order,
		.layout = layout,
		.bound = bound,
		.internal = flags & CACHE_INTERNAL,
		/* OBJFREELIST's array then leaves the holder's first word, the key's, alone. */
		.keep_first_word = may_key(flags, ctor != NULL, debug != 0),
	};
	if (slab_geometry_init(&c->geo, &r))
		return -EINVAL;

	snprintf(c->name, sizeof(c->name), "%s", name);
	c->flags = flags;
	c->ctor = ctor;
	c->object_size = (unsigned int)size;
	c->align = (unsigned int)a;
	/* OFFSLAB: the arrays' cache, of blocks of 16 << i bytes. */
	if (c->offslab_bytes)
		c->offslab = &offslab_caches[__builtin_ctz(c->offslab_bytes / OFFSLAB_MIN_BYTES)];
	c->secret = random_secret();
	c->min_partial = min_partial;
	if (!c->min_partial)
		c->min_partial = usl_opt.min_partial;
	if (!c->min_partial)
		c->min_partial = shape && shape->keep_bytes ?
					 keep_min_partial(shape->keep_bytes, c->order) :
					 default_min_partial(c->size);
	c->id = -1;
	c->hot.pcs_off = c->pcs_lib = 0;
	c->magic = CACHE_MAGIC_LIVE;
	return cache_nodes_setup(c);
}

int cache_bootstrap(void)
{
	int err = 0;

	free_key = random_secret() | (1ul << 63);

	for (unsigned int i = 0; !err && i < OFFSLAB_CACHES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "uslab_offslab-%u", 16u << i);
		err = cache_init_internal(&offslab_caches[i], name, 16u << i);
		/* Never OFFSLAB themselves (AUTO never makes uslab's own caches OFFSLAB). */
		USLAB_ASSERT(offslab_caches[i].layout != USLAB_LAYOUT_OFFSLAB);
	}
	return err;
}

/* ------------------------------------------------------ node lists */

static inline bool slab_is_empty(const struct slab *s)
{
	return s->nfree == s->bump;
}

/* The counts of a slab: nfree <= bump <= objects. */
#define slab_assert_counts(s) USLAB_ASSERT((s)->nfree <= (s)->bump && (s)->bump <= (s)->objects)

/*
 * Check level 2: the node's counters are its lists' (each slab on the
 * partial list PARTIAL, its empty ones nr_empty, their free objects
 * nr_free; a debug cache's full list FULL, and every slab on a list).
 */
static void node_check(struct node *n)
{
#if USLAB_EXPENSIVE
	struct uslab_cache *c = n->cache;
	unsigned long np = 0, ne = 0, nf = 0, nfree = 0, nobj = 0;
	struct slab *s;

	list_for_each_entry(s, &n->partial, list) {
		USLAB_ASSERT_EXPENSIVE(s->state == SLAB_PARTIAL && s->cache == c &&
				       s->node == n->id);
		USLAB_ASSERT_EXPENSIVE(s->nfree <= s->bump && s->bump <= s->objects);
		np++;
		ne += slab_is_empty(s);
		nfree += s->nfree + s->objects - s->bump;
		nobj += s->objects;
	}
	list_for_each_entry(s, &n->full, list) {
		USLAB_ASSERT_EXPENSIVE(s->state == SLAB_FULL && s->cache == c && c->debug);
		nf++;
		nobj += s->objects;
	}
	USLAB_ASSERT_EXPENSIVE(np == n->nr_partial && ne == n->nr_empty && nfree == n->nr_free);
	USLAB_ASSERT_EXPENSIVE(c->debug ? np + nf == n->nr_slabs : np <= n->nr_slabs);
	USLAB_ASSERT_EXPENSIVE(c->debug ? nobj == n->nr_objects : nobj <= n->nr_objects);
#else
	(void)n;
#endif
}

/*
 * The node's counters after a change, under its lock: none went below
 * zero (an unsigned underflow breaks one of these); the barn lock is not
 * held with it (the file comment).
 */
#define node_assert_counts(n)                                   \
	do {                                                    \
		USLAB_ASSERT_HELD(&(n)->lock);                  \
		USLAB_ASSERT(!lockdep_held(LOCK_BARN));         \
		USLAB_ASSERT((n)->nr_free <= (n)->nr_objects);  \
		USLAB_ASSERT((n)->nr_empty <= (n)->nr_partial); \
		USLAB_ASSERT((n)->nr_partial <= (n)->nr_slabs); \
		node_check(n);                                  \
	} while (0)

/*
 * NEW -> PARTIAL or FULL -> PARTIAL: put @s on the partial list, at the
 * tail (partly used slabs are used first) or at the head. Under the lock.
 */
static void partial_add(struct node *n, struct slab *s, bool tail)
{
	USLAB_ASSERT_HELD(&n->lock);
	USLAB_ASSERT(s->state == SLAB_NEW || s->state == SLAB_FULL);
	USLAB_ASSERT(s->nfree || s->bump < s->objects); /* some object is free */
	if (s->state == SLAB_FULL && s->cache->debug)
		list_del(&s->list); /* off the full list */
	s->state = SLAB_PARTIAL;
	if (tail)
		list_add_tail(&s->list, &n->partial);
	else
		list_add(&s->list, &n->partial);
	n->nr_partial++;
}

/*
 * NEW or PARTIAL (off its list) -> FULL; a debug cache lists its full
 * slabs (validate and the leak report walk them). Under the lock.
 */
static void full_add(struct node *n, struct slab *s)
{
	USLAB_ASSERT_HELD(&n->lock);
	USLAB_ASSERT(!s->nfree && s->bump == s->objects);
	s->state = SLAB_FULL;
	if (s->cache->debug)
		list_add(&s->list, &n->full);
}

/* Take @s, PARTIAL, off the partial list; the caller sets its new state. */
static void partial_del(struct node *n, struct slab *s)
{
	USLAB_ASSERT_HELD(&n->lock);
	USLAB_ASSERT(s->state == SLAB_PARTIAL && n->nr_partial);
	list_del(&s->list);
	n->nr_partial--;
}

/*
 * Give a list of slabs (linked by ->next, already off the node) to os.c;
 * those of USLAB_TYPESAFE_BY_RCU caches after a grace period (rcu.c).
 */
static void release_slabs(struct slab *s)
{
	struct slab *deferred = NULL, *now = NULL;

	while (s) {
		struct slab *next = s->next;
		struct slab **to = s->cache->flags & USLAB_TYPESAFE_BY_RCU ? &deferred : &now;

		USLAB_ASSERT(s->state == SLAB_FREE);
		s->next = *to; /* (a kfree_bulk list may mix caches) */
		*to = s;
		if (to == &deferred)
			__atomic_add_fetch(&s->cache->nr_deferred, 1, __ATOMIC_RELAXED);
		s = next;
	}
	cache_release_slabs_now(now);
	if (deferred)
		gp_defer_slabs(deferred); /* lock-free: any lock may be held */
}

/*
 * The objects of @s, a slab of keyed @c leaving it, keep no key: its pages
 * may become another cache's objects or a large allocation, handed out
 * unwritten (doc/design.md, "Free checks": the hand-out invariant). A
 * load per object ever used, at the rate slabs are given back.
 */
static NO_SANITIZE_ADDRESS void slab_clear_keys(const struct uslab_cache *c, struct slab *s)
{
	uintptr_t key = c->hot.free_key;
	char *o = slab_first_object(c, s);

	for (unsigned int i = 0; i < s->bump; i++, o += c->size)
		if (*(uintptr_t *)(void *)o == key)
			*(uintptr_t *)(void *)o = 0;
}

/* Give a list of slabs to os.c now (rcu.c: after their grace period). Return: how many. */
unsigned long cache_release_slabs_now(struct slab *s)
{
	unsigned long k = 0;

	while (s) {
		struct slab *next = s->next;
		struct uslab_cache *c = s->cache;

		USLAB_ASSERT(s->state == SLAB_FREE && c);
		if (c->offslab)
			cache_free_direct(c->offslab, s->freelist);
		if (c->flags & USLAB_TYPESAFE_BY_RCU)
			__atomic_sub_fetch(&c->nr_deferred, 1, __ATOMIC_RELEASE);
		if (c->hot.free_key)
			slab_clear_keys(c, s);
		PROBE(slab_free, c->name, s->base, (unsigned int)s->objects, (unsigned int)s->node);
		__atomic_store_n(&s->cache, NULL, __ATOMIC_RELEASE);
		os_slab_free(s);
		s = next;
		k++;
	}
	return k;
}

/*
 * PARTIAL -> FREE: remove an empty slab from the node for release (the
 * caller has taken it out of nr_empty if it was counted). Under node->lock.
 */
static void slab_discard(struct uslab_cache *c, struct slab *s, struct slab **release)
{
	struct node *n = cache_node(c, s->node);

	USLAB_ASSERT_HELD(&n->lock);
	USLAB_ASSERT(s->cache == c && slab_is_empty(s));
	partial_del(n, s);
	USLAB_ASSERT(n->nr_slabs && n->nr_objects >= s->objects && n->nr_free >= s->objects);
	n->nr_slabs--;
	n->nr_objects -= s->objects;
	n->nr_free -= s->objects;
	node_assert_counts(n);
	node_stat(n, USLAB_STAT_SLAB_FREE);
	s->state = SLAB_FREE;
	s->pcs_id = 0; /* a kfree of one of its objects now goes to the checks */
	os_slab_publish(s);
	s->next = *release;
	*release = s;
}

/*
 * slab_put_group - hand one detached freelist back to its slab.
 * Under the node lock of df->slab->cache. Slabs that become empty beyond
 * min_partial are queued on @release, to be freed after the lock is dropped.
 */
static void slab_put_group(struct uslab_cache *c, struct detached_freelist *df,
			   struct slab **release)
{
	struct slab *s = df->slab;
	struct node *n = cache_node(c, s->node);
	unsigned int inuse = s->bump - s->nfree;

	USLAB_ASSERT_HELD(&n->lock);
	USLAB_ASSERT(s->cache == c);
	slab_assert_counts(s);
	if (unlikely(df->cnt > inuse))
		usl_bug(c, df->head, "double free: %u objects freed to slab %p with %u in use",
			df->cnt, (void *)s->base, inuse);
	/* Objects are handed out only after their slab is on the node. */
	USLAB_ASSERT(s->state == SLAB_PARTIAL || s->state == SLAB_FULL);
	if (c->layout == USLAB_LAYOUT_FREEPTR) {
		if (unlikely(s->freelist && df->tail == s->freelist))
			usl_bug(c, df->tail, "double free");
		fp_set(c, df->tail, s->freelist);
		s->freelist = df->head;
		s->nfree += df->cnt;
	} else {
		slab_push_indices(c, s, df);
	}
	n->nr_free += df->cnt;
	slab_assert_counts(s);
	node_stat(n, USLAB_STAT_FREE_GROUP);
	if (s->state == SLAB_FULL)
		partial_add(n, s, true);
	if (inuse == df->cnt) {
		if (n->nr_partial > c->min_partial) {
			slab_discard(c, s, release);
		} else {
			/* Keep it, at the tail: partly used slabs are used first. */
			n->nr_empty++;
			list_move_tail(&s->list, &n->partial);
		}
	}
	node_assert_counts(n);
}

/*
 * Hand @df[0..nd) to their slabs, one lock acquisition per cache and node
 * among them (a kfree_bulk() array may mix caches, a consumer's frees
 * nodes): first the loads of every slab's array are started, then the
 * groups are put (the misses overlap instead of following each other).
 */
_Static_assert(FREE_GROUPS <= 32, "one bit per group");
static void node_put_groups(struct detached_freelist *df, unsigned int nd, struct slab **release)
{
	uint32_t left = nd >= 32 ? ~0u : (1u << nd) - 1;

	while (left) {
		unsigned int i = (unsigned int)__builtin_ctz(left);
		struct uslab_cache *c = df[i].slab->cache;
		unsigned int nid = df[i].slab->node;
		struct node *n = cache_node(c, nid);
		uint32_t run = 0;

		for (unsigned int j = i; j < nd; j++)
			if ((left >> j & 1) && df[j].slab->cache == c && df[j].slab->node == nid)
				run |= 1u << j;
		left &= ~run;
		ulock_lock(&n->lock);
		for (uint32_t r = run; r; r &= r - 1)
			slab_prefetch_push(c, df[__builtin_ctz(r)].slab);
		for (uint32_t r = run; r; r &= r - 1)
			slab_put_group(c, &df[__builtin_ctz(r)], release);
		ulock_unlock(&n->lock);
	}
}

/*
 * The debug tier's check of each object freed to a debug cache (@c, or
 * with @c NULL each object's own), at the call: one that must not be
 * freed (reported) is dropped from @p.
 */
static void debug_free_objects(struct uslab_cache *c, void **p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct uslab_cache *oc = c;

		if (obj_is_hole(p[i]))
			continue;
		if (!oc)
			oc = uslab_cache_of(p[i]);
		if (oc && oc->debug && !slab_debug_free(c, p[i]))
			p[i] = NULL;
	}
}

/* node_free_objects() after the debug tier's checks (or without them: cache_free_checked). */
static void node_put_objects(struct uslab_cache *c, void **p, size_t n, unsigned int lookahead)
{
	struct detached_freelist df[FREE_GROUPS];
	struct slab *release = NULL;
	unsigned int nd = 0;
	size_t i = 0;

	size_t ahead = 0;

	while (i < n) {
		/* Keep the next FREE_AHEAD objects' slab descriptors loading. */
		for (; ahead < n && ahead < i + FREE_AHEAD; ahead++)
			os_slab_prefetch(p[ahead]);
		i = build_detached_freelist(c, n, p, i, lookahead, &df[nd]);
		if (unlikely(df[nd].slab && (df[nd].slab->cache->flags & CACHE_LARGE))) {
			cache_slab_drop_single(df[nd].slab); /* one object, its own slab */
			continue;
		}
		if (df[nd].slab && ++nd == FREE_GROUPS) {
			node_put_groups(df, nd, &release);
			nd = 0;
		}
	}
	if (nd)
		node_put_groups(df, nd, &release);
	release_slabs(release);
}

/*
 * node_free_objects - return objects to their slabs (cache_free_objects()
 * without the pools' loose array: its arguments and context).
 */
void node_free_objects(struct uslab_cache *c, void **p, size_t n, unsigned int lookahead)
{
	if (unlikely(__atomic_load_n(&slab_debug_on, __ATOMIC_ACQUIRE)))
		debug_free_objects(c, p, n);
	node_put_objects(c, p, n, lookahead);
}

/*
 * cache_free_checked - return @p[0..n) of debug cache @c to their slabs
 * without the debug tier's checks: objects of its sheaves, checked and
 * made free at the call that put them there (thread_sheaves.c).
 */
void cache_free_checked(struct uslab_cache *c, void **p, size_t n)
{
	USLAB_ASSERT(c->debug && !(c->flags & USLAB_POOL));
	node_put_objects(c, p, n, usl_opt.lookahead);
}

/*
 * node_take - take free objects of @n's partial slabs into @dst[@got..@want).
 *
 * Under the node lock each slab's whole freelist is detached in O(1)
 * (split only if it holds more than is wanted) and its never-used objects
 * are carved, up to REFILL_LISTS slabs; the detached lists are walked
 * after the lock is dropped. *@exhausted: the partial list is empty now.
 * Return: @got plus the objects taken.
 */
static unsigned int node_take(struct uslab_cache *c, struct node *n, void **dst, unsigned int got,
			      unsigned int want, bool *exhausted)
{
	struct {
		struct slab *s;
		void *head;
		unsigned int cnt, off;
	} lists[REFILL_LISTS];
	unsigned int nl = 0;

	ulock_lock(&n->lock);
	while (got < want && nl < REFILL_LISTS && !list_empty(&n->partial)) {
		struct slab *s = list_first_entry(&n->partial, struct slab, list);
		unsigned int room = want - got, took;
		bool was_empty = slab_is_empty(s);

		USLAB_ASSERT(s->state == SLAB_PARTIAL && s->cache == c && s->node == n->id);
		slab_assert_counts(s);

		if (c->layout != USLAB_LAYOUT_FREEPTR) {
			/* An index stack: no object to read, take them here. */
			took = s->nfree < room ? s->nfree : room;
			slab_pop_indices(c, s, dst + got, took);
		} else if (s->nfree <= room) {
			if (s->nfree) {
				lists[nl].s = s;
				lists[nl].head = s->freelist;
				lists[nl].cnt = s->nfree;
				lists[nl].off = got;
				nl++;
			}
			took = s->nfree;
			s->freelist = NULL;
			s->nfree = 0;
		} else {
			/* More free objects than room: split here. */
			s->freelist = slab_walk(c, s, s->freelist, room, dst + got);
			s->nfree -= room;
			took = room;
		}
		got += took;
		if (got < want) {
			unsigned int k = slab_carve(c, s, dst + got, want - got);
			got += k;
			took += k;
		}
		slab_assert_counts(s);
		USLAB_ASSERT(n->nr_free >= took && (!was_empty || !took || n->nr_empty));
		n->nr_free -= took;
		if (was_empty && took)
			n->nr_empty--;
		if (!s->nfree && s->bump == s->objects) {
			/* PARTIAL -> FULL */
			partial_del(n, s);
			full_add(n, s);
		}
		node_assert_counts(n);
	}
	*exhausted = list_empty(&n->partial);
	ulock_unlock(&n->lock);

	for (unsigned int i = 0; i < nl; i++) {
		void *rest =
			slab_walk(c, lists[i].s, lists[i].head, lists[i].cnt, dst + lists[i].off);

		if (unlikely(rest))
			usl_bug(c, rest, "freelist of slab %p longer than its count %u",
				(void *)lists[i].s->base, lists[i].cnt);
	}
	return got;
}

/*
 * node_grow - a new slab of @c on node @n->id, carved into @dst[@got..@want)
 * without any lock, published with its leftover on the partial list.
 * Return: @got plus the objects carved; @got (errno ENOMEM) if the OS
 * refused memory.
 */
static unsigned int node_grow(struct uslab_cache *c, struct node *n, void **dst, unsigned int got,
			      unsigned int want)
{
	void *arr = NULL;
	struct slab *s;

	if (c->offslab && !(arr = cache_alloc_direct(c->offslab)))
		return got;
	s = os_slab_alloc(c->order, n->id);
	if (!s) {
		if (arr)
			cache_free_direct(c->offslab, arr);
		return got;
	}
	slab_setup(c, s, arr);
	PROBE(slab_new, c->name, s->base, (unsigned int)s->objects, n->id, (unsigned int)c->order);
	got += slab_carve(c, s, dst + got, want - got);
	USLAB_ASSERT(s->state == SLAB_NEW && !s->nfree && s->bump && s->node == n->id);
	ulock_lock(&n->lock);
	n->nr_slabs++;
	n->nr_objects += s->objects;
	node_stat(n, USLAB_STAT_SLAB_NEW);
	if (s->bump < s->objects) {
		/* NEW -> PARTIAL, at the head: its pages are warm */
		n->nr_free += s->objects - s->bump;
		partial_add(n, s, false);
	} else {
		/* NEW -> FULL */
		full_add(n, s);
	}
	node_assert_counts(n);
	ulock_unlock(&n->lock);
	return got;
}

/*
 * node_refill - take up to @want free objects of @c's slabs into @dst.
 * @hand_out: the debug tier checks and marks them as handed out.
 * @req:      the node: USLAB_NUMA_NO_NODE (the caller's), or a node with
 *            memory, USLAB_NODE_STRICT or'd in for that node or nothing.
 *
 * The node's partial slabs first (node_take), then new slabs on that node
 * (node_grow). Only when the OS refuses a new slab, and the request is
 * not strict, the other nodes' partial slabs, nearest first: a slab is
 * never taken from another node while its own can grow, as SLUB's
 * get_any_partial() is rarely reached.
 *
 * Return: objects stored in @dst (poisoned for ASan); fewer than @want,
 * and errno ENOMEM, only when the OS refused memory (or the strict node
 * has none).
 */
unsigned int node_refill(struct uslab_cache *c, void **dst, unsigned int want, bool hand_out,
			 int req)
{
	unsigned int nid = req < 0 ? numa_node_self() : NODE_ID(req);
	struct node *n = cache_node(c, nid);
	unsigned int got = 0, was;
	bool exhausted;

	while (got < want) {
		got = node_take(c, n, dst, got, want, &exhausted);
		if (got == want || !exhausted)
			continue;
		was = got;
		got = node_grow(c, n, dst, got, want);
		if (got == was)
			break;
	}
	if (unlikely(got < want) && c->nr_nodes > 1 && !NODE_STRICT(req)) {
		/*
		 * No memory for a slab on @nid: the others' partial slabs, then
		 * a new slab on one of them (its arenas may have free pages
		 * where a new mapping for @nid could not be had), nearest first.
		 */
		for (unsigned int k = 0; k < numa_topo.nr_order[nid] && got < want; k++) {
			struct node *o = cache_node(c, numa_topo.order[nid][k]);

			if (o == n)
				continue;
			was = got;
			do
				got = node_take(c, o, dst, got, want, &exhausted);
			while (got < want && !exhausted);
			for (unsigned int before = ~0u; got < want && got != before;) {
				before = got;
				got = node_grow(c, o, dst, got, want);
			}
			if (got > was)
				cache_node_event(c, nid, USLAB_STAT_NUMA_FALLBACK, 1);
		}
	}
	if (unlikely(c->debug) && got && hand_out)
		slab_debug_alloc(c, dst, got); /* checked and marked as they are handed out */
	if (got < want)
		errno = ENOMEM;
	return got;
}

/*
 * cache_free_objects - return objects to their slabs; a pool's to its
 * loose array (above).
 * @c:         their cache, or NULL when each object names its own.
 * @p:         the objects; every entry is NULL on return, NULL entries
 *             are skipped.
 * @n:         entries in @p.
 * @lookahead: see build_detached_freelist().
 *
 * Context: objects owned by the caller, poisoned for ASan already.
 * Takes the node lock once per FREE_GROUPS detached freelists.
 */
void cache_free_objects(struct uslab_cache *c, void **p, size_t n, unsigned int lookahead)
{
	if (c && (c->flags & USLAB_POOL))
		loose_put(c, p, n);
	else
		node_free_objects(c, p, n, lookahead);
}

/*
 * cache_refill - take up to @want free objects of @c into @dst: a pool's
 * from its loose array first, then (not an external pool) from its slabs
 * (node_refill).
 * Return: objects stored in @dst (poisoned for ASan); fewer than @want only
 * with errno ENOMEM (the OS refused memory) or ENOBUFS (an external pool
 * has no more).
 */
unsigned int cache_refill(struct uslab_cache *c, void **dst, unsigned int want)
{
	return cache_refill_node(c, dst, want, USLAB_NUMA_NO_NODE);
}

/*
 * cache_refill_node - cache_refill() from node request @req (node_refill()
 * has its forms; a pool's loose array serves any node first).
 */
unsigned int cache_refill_node(struct uslab_cache *c, void **dst, unsigned int want, int req)
{
	unsigned int got = 0;

	/* (A pool's loose array holds any node's objects: not for a strict request.) */
	if ((c->flags & USLAB_POOL) && !NODE_STRICT(req)) {
		got = loose_take(c, dst, want);
		if (got < want && (c->flags & USLAB_POOL_EXTERNAL)) {
			errno = ENOBUFS;
			return got;
		}
	}
	return got + node_refill(c, dst + got, want - got, true, req);
}

/*
 * cache_refill_free - cache_refill() for a debug cache's sheaf: the objects
 * stay free (OBJ_FREE), to be checked and marked when a call takes one
 * (thread_sheaves.c). Debug caches have no pool.
 */
unsigned int cache_refill_free(struct uslab_cache *c, void **dst, unsigned int want)
{
	USLAB_ASSERT(c->debug && !(c->flags & USLAB_POOL));
	return node_refill(c, dst, want, false, USLAB_NUMA_NO_NODE);
}

/* One object without sheaves: uslab's metadata and sheaf-less caches. */
void *cache_alloc_direct(struct uslab_cache *c)
{
	void *obj;

	if (cache_refill(c, &obj, 1) != 1)
		return NULL;
	objs_hand_out(c, &obj, 1); /* (a slab's object may carry a stale key) */
	return obj;
}

void cache_free_direct(struct uslab_cache *c, void *obj)
{
	obj_poison(c, obj);
	cache_free_objects(c, &obj, 1, 0);
}

/*
 * Give every empty slab of node @n of @c back to the OS, ignoring
 * min_partial. They are counted (nr_empty, at most min_partial) and were
 * moved to the tail when they emptied: the walk starts there and stops at
 * the last one, with no step when there is none, rather than walking every
 * partly used slab under the lock a free of @c takes to flush its sheaf.
 */
static void node_shrink(struct uslab_cache *c, struct node *n)
{
	struct slab *release = NULL;
	struct list_node *pos, *tmp;

	ulock_lock(&n->lock);
	list_for_each_prev_safe(pos, tmp, &n->partial)
	{
		struct slab *s = list_entry(pos, struct slab, list);

		if (!n->nr_empty)
			break;
		if (slab_is_empty(s)) {
			USLAB_ASSERT(n->nr_empty); /* every empty PARTIAL slab is counted */
			n->nr_empty--;
			slab_discard(c, s, &release);
		}
	}
	USLAB_ASSERT(!n->nr_empty);
	ulock_unlock(&n->lock);
	release_slabs(release);
}

/* Give every empty slab of @c back to the OS, ignoring min_partial. */
void cache_shrink_node(struct uslab_cache *c)
{
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
		node_shrink(c, cache_node(c, nid));
}

/* Count @n events @item on node @nid of @c (under its lock: the counters' rule). */
void cache_node_event(struct uslab_cache *c, unsigned int nid, enum uslab_stat_item item,
		      uint64_t n)
{
#if USLAB_STATS
	struct node *nd = cache_node(c, nid);

	ulock_lock(&nd->lock);
	node_stat_n(nd, item, n);
	ulock_unlock(&nd->lock);
#else
	(void)c, (void)nid, (void)item, (void)n;
#endif
}

/* Fold a thread's event counters into the node (the thread drains). */
void cache_add_events(struct uslab_cache *c, const uint64_t *ev)
{
#if USLAB_STATS
	ulock_lock(&c->node.lock);
	for (int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
		c->node.ev[i] += ev[i];
	ulock_unlock(&c->node.lock);
#else
	(void)c, (void)ev;
#endif
}

/* Room for the lines of validate and of a leak report (100 lines of up to 512 bytes). */
#define HELD_LINES_BYTES (64 * 1024)

/* One problem found by validate: a line on stderr, counted. */
#define bad(c, fmt, ...) (usl_warn("validate %s: " fmt, (c)->name, __VA_ARGS__), errors++)

/*
 * cache_validate_node - check every partial slab's freelist and counts and
 * the node's counters, under the node lock; @held (sorted) are the objects
 * the caller found in sheaves. Each problem is one line on stderr.
 * Return: the number found.
 */
static unsigned long node_validate(struct uslab_cache *c, struct node *n, uint64_t *seen,
				   void *const *held, size_t nheld);

unsigned long cache_validate_node(struct uslab_cache *c, void *const *held, size_t nheld)
{
	size_t bytes = ALIGN_UP(ALIGN_UP((size_t)c->objects, 64) / 8, PAGE_SIZE);
	uint64_t *seen = os_mmap(bytes + HELD_LINES_BYTES);
	unsigned long errors = 0;
	struct usl_lines lines;

	if (!seen) {
		usl_warn("validate %s: no memory for the check", c->name);
		return 1;
	}
	usl_lines_hold(&lines, (char *)seen + bytes, HELD_LINES_BYTES); /* written unlocked */
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
		errors += node_validate(c, cache_node(c, nid), seen, held, nheld);
	usl_lines_release(&lines);
	os_munmap(seen, bytes + HELD_LINES_BYTES);
	return errors;
}

/* cache_validate_node()'s check of node @n of @c. Return: the problems found. */
static unsigned long node_validate(struct uslab_cache *c, struct node *n, uint64_t *seen,
				   void *const *held, size_t nheld)
{
	unsigned long errors = 0, partial = 0, empty = 0, nfree = 0;
	struct slab *s;

	ulock_lock(&n->lock);
	list_for_each_entry(s, &n->partial, list) {
		if (s->state != SLAB_PARTIAL || s->cache != c || s->objects != c->objects ||
		    s->node != n->id || s->nfree > s->bump || s->bump > s->objects) {
			bad(c, "slab %p: state %u, counts %u <= %u <= %u broken", (void *)s->base,
			    (unsigned int)s->state, s->nfree, s->bump, (unsigned int)s->objects);
			continue;
		}
		errors += slab_validate(c, s, seen, held, nheld);
		if (c->debug)
			errors += slab_debug_check_slab(c, s);
		partial++;
		empty += s->nfree == s->bump;
		nfree += s->nfree + (s->objects - s->bump);
	}
	list_for_each_entry(s, &n->full, list) {
		errors += slab_debug_check_slab(c, s); /* (debug caches only list them) */
	}
	if (partial != n->nr_partial || empty != n->nr_empty || nfree != n->nr_free ||
	    n->nr_partial > n->nr_slabs)
		bad(c,
		    "node %u counters: %lu partial (%lu counted), %lu empty (%lu), %lu free (%lu)",
		    n->id, n->nr_partial, partial, n->nr_empty, empty, n->nr_free, nfree);
	ulock_unlock(&n->lock);
	return errors;
}

/*
 * The nodes' part of uslab_cache_stats(): slab counts and events, summed
 * over @c's nodes (each read under its lock).
 * Return: the usable bytes of its one-object slabs' objects (read with the counts).
 */
uint64_t cache_node_stats(struct uslab_cache *c, struct uslab_cache_stats *st)
{
	uint64_t single = 0;

	st->num_slabs = st->num_objs = st->active_objs = st->active_slabs = st->partial_slabs = 0;
	for (int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
		st->events[i] = 0;
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
		struct node *n = cache_node(c, nid);

		ulock_lock(&n->lock);
		st->num_slabs += n->nr_slabs;
		st->num_objs += n->nr_objects;
		st->active_objs += n->nr_objects - n->nr_free;
		st->active_slabs += n->nr_slabs - n->nr_empty;
		st->partial_slabs += n->nr_partial;
		for (int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
			st->events[i] += n->ev[i];
		single += n->single_bytes;
		ulock_unlock(&n->lock);
	}
	return single;
}

/* Node @nid's slab counts of @c (uslab_cache_node_stats()); @nid < c->nr_nodes. */
void cache_node_counts(struct uslab_cache *c, unsigned int nid, struct uslab_node_stats *st)
{
	struct node *n = cache_node(c, nid);

	ulock_lock(&n->lock);
	st->num_slabs = n->nr_slabs;
	st->num_objs = n->nr_objects;
	st->active_objs = n->nr_objects - n->nr_free;
	st->active_slabs = n->nr_slabs - n->nr_empty;
	st->partial_slabs = n->nr_partial;
	st->remote_frees = n->ev[USLAB_STAT_NUMA_REMOTE_FREE];
	st->fallbacks = n->ev[USLAB_STAT_NUMA_FALLBACK];
	ulock_unlock(&n->lock);
}

/* ------------------------------------------------ one-object slabs */

/*
 * A slab of one object that is never free (kmalloc's large objects,
 * kmalloc.c): counted by its cache's node (nr_slabs = nr_objects = such
 * objects live), published FULL, and given back to os.c as soon as its
 * object is freed.
 *
 *   NEW -> FULL   cache_slab_add_single
 *   FULL -> FREE  cache_slab_drop_single, then os_slab_free
 *
 * The node sums their objects' usable bytes (s->large_size) in
 * single_bytes, for the statistics (lifecycle.c).
 */

/* Count @s (NEW, its one object handed out) in @c's node and publish it FULL. */
void cache_slab_add_single(struct uslab_cache *c, struct slab *s)
{
	struct node *n = cache_node(c, s->node);

	USLAB_ASSERT(s->state == SLAB_NEW && !s->cache && s->objects == 1);
	ulock_lock(&n->lock);
	n->nr_slabs++;
	n->nr_objects++;
	n->single_bytes += s->large_size;
	node_stat(n, USLAB_STAT_SLAB_NEW);
	ulock_unlock(&n->lock);
	/* NEW -> FULL */
	s->state = SLAB_FULL;
	__atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
}

/* Give a one-object slab back to os.c, its object freed (FULL -> FREE). */
void cache_slab_drop_single(struct slab *s)
{
	struct node *n = cache_node(s->cache, s->node);

	/* A large object, perhaps a sample of the heap profile: its record goes (profile.c). */
	if (unlikely(__atomic_load_n(&profile_enabled, __ATOMIC_RELAXED)))
		profile_drop(s->base);

	USLAB_ASSERT(s->cache->objects == 1 && s->state == SLAB_FULL);
	ulock_lock(&n->lock);
	USLAB_ASSERT(n->nr_slabs && n->nr_objects);
	n->nr_slabs--;
	n->nr_objects--;
	USLAB_ASSERT(n->single_bytes >= s->large_size);
	n->single_bytes -= s->large_size;
	node_stat(n, USLAB_STAT_SLAB_FREE);
	ulock_unlock(&n->lock);
	s->state = SLAB_FREE;
	if (s->cache->hot.free_key)
		slab_clear_keys(s->cache, s);
	__atomic_store_n(&s->cache, NULL, __ATOMIC_RELEASE);
	os_slab_free(s);
}

/* A one-object slab's object now has @bytes usable (krealloc in place): counted. */
void cache_slab_resize_single(struct slab *s, uint64_t bytes)
{
	struct node *n = cache_node(s->cache, s->node);

	USLAB_ASSERT(s->cache->objects == 1 && s->state == SLAB_FULL);
	ulock_lock(&n->lock);
	USLAB_ASSERT(n->single_bytes >= s->large_size);
	n->single_bytes += bytes - s->large_size;
	s->large_size = bytes;
	ulock_unlock(&n->lock);
}

/*
 * cache_guard_alloc - an object of @c from the sampling guard (guard.c),
 * constructed; NULL when the guard has no slot, or @c's objects may not
 * come from it: the debug tier's (which checks them itself), those of
 * TYPESAFE_BY_RCU (readers may read a freed one: its page must not go
 * away), pools' (their free objects are the pool's) and uslab's own
 * caches, objects larger than a page.
 */
void *cache_guard_alloc(struct uslab_cache *c)
{
	void *obj;

	if (c->debug || c->object_size > PAGE_SIZE ||
	    (c->flags & (USLAB_TYPESAFE_BY_RCU | USLAB_POOL | USLAB_POOL_EXTERNAL | CACHE_INTERNAL |
			 CACHE_LARGE)))
		return NULL;
	obj = guard_alloc(c, c->object_size, c->align);
	if (!obj)
		return NULL;
	/*
	 * Its slot's last object may have waited in a keyed per-CPU sheaf
	 * (marked by the inline push, which does not know the guard's).
	 */
	if (c->object_size >= sizeof(uintptr_t))
		cache_clear_stale_key(obj);
	if (c->ctor)
		c->ctor(obj);
	return obj;
}

/*
 * cache_release_all - give every slab of @c back (TYPESAFE_BY_RCU: after
 * a grace period) if no object is allocated.
 * Return: 0, or the number of objects still allocated (nothing done).
 */
unsigned long cache_release_all(struct uslab_cache *c)
{
	struct slab *release = NULL;
	unsigned long live = 0;
	unsigned int nid;

	/* Every node's lock, in id order, so that no object moves between the count and the release. */
	for (nid = 0; nid < c->nr_nodes; nid++) {
		struct node *n = cache_node(c, nid);

		ulock_lock(&n->lock);
		live += n->nr_objects - n->nr_free;
	}
	while (nid--) {
		struct node *n = cache_node(c, nid);

		if (!live) {
			/* Nothing is allocated, so every slab is on the partial list, empty. */
			USLAB_ASSERT(n->nr_empty == n->nr_partial && n->nr_partial == n->nr_slabs);
			while (!list_empty(&n->partial)) {
				n->nr_empty--;
				slab_discard(c, list_first_entry(&n->partial, struct slab, list),
					     &release);
			}
		}
		ulock_unlock(&n->lock);
	}
	release_slabs(release);
	return live;
}

/* The leak report of a debug cache's destroy: every live object, a line each (up to 100). */
void cache_list_live(struct uslab_cache *c)
{
	unsigned long budget = 100, live = 0;
	char *buf = os_mmap(HELD_LINES_BYTES); /* NULL: the lines go out at once */
	struct usl_lines lines;
	struct slab *s;

	usl_lines_hold(&lines, buf, HELD_LINES_BYTES); /* written unlocked */
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
		struct node *n = cache_node(c, nid);
		struct list_node *lists[2] = { &n->partial, &n->full };

		ulock_lock(&n->lock);
		for (int i = 0; i < 2; i++) {
			list_for_each_entry(s, lists[i], list) {
				live += slab_debug_list_live(c, s, &budget);
			}
		}
		ulock_unlock(&n->lock);
	}
	usl_lines_release(&lines);
	if (buf)
		os_munmap(buf, HELD_LINES_BYTES);
	if (live > 100)
		usl_warn("cache %s: ... and %lu more", c->name, live - 100);
}
