/* SPDX-License-Identifier: MIT */
/*
 * cache.h - layer 3, cache.c: struct uslab_cache, its nodes of slabs, its
 * flags; objects poisoned for ASan while they are free.
 */
#ifndef USLAB_CACHE_H
#define USLAB_CACHE_H

#include "slab.h"

/* ------------------------------------------------------------ cache.c */

/*
 * The node: a cache's slab lists on one NUMA node. A cache has one per
 * node (cache_node()): node 0's in its descriptor, the others beside it
 * when NUMA is on (numa.c). Each slab is on the lists of its own node
 * (struct slab.node); a pool's loose array is node 0's.
 */
struct node {
	struct ulock lock;
	struct uslab_cache *cache; /* whose (the checks) */
	unsigned int id;	   /* its NUMA node */
	struct list_node partial;  /* PARTIAL slabs (struct slab.list) */
	struct list_node full;	   /* debug caches: FULL slabs (struct slab.list) */
	unsigned long nr_partial;  /* slabs on the partial list */
	unsigned long nr_empty;	   /* of those, slabs with no object in use */
	unsigned long nr_slabs;	   /* slabs owned */
	unsigned long nr_objects;  /* objects those slabs hold */
	unsigned long nr_free;	   /* free objects in slabs (lists and bump) */
	uint64_t single_bytes;	   /* one-object slabs: their objects' usable bytes */
	/* Pools (USLAB_POOL): free objects kept as pointers, before the slabs. */
	void **loose;	  /* os_mmap'd array of loose_cap pointers, or NULL */
	size_t nr_loose;  /* objects in it */
	size_t loose_cap; /* its room */
	/* Events counted under the lock, and those of threads that exited. */
	uint64_t ev[USLAB_STAT_NR_ITEMS];
};

struct barn {
	struct ulock lock;
	struct uslab_cache *cache; /* whose (barn_init); its node: cache_barn()'s index */
	struct sheaf *full;	   /* stack of full sheaves */
	struct sheaf *empty;	   /* stack of empty sheaves */
	unsigned int nr_full;
	unsigned int nr_empty;
	unsigned int max_full; /* the depth: also read without the lock */
	unsigned int max_empty;
	/* The adaptive depth (barn.c): under the lock; refused_ns and refused_run are atomics. */
	unsigned int full_min;	   /* the base depth; equal to max_full: no growth */
	unsigned int full_grows;   /* depth steps up (one sheaf each) */
	unsigned int full_shrinks; /* depth halvings */
	uint64_t full_bytes;	   /* objects' bytes the full sheaves may hold at the most depth */
	uint64_t refused_ns;	   /* a full sheaf was last refused at (0: not lately) */
	unsigned int refused_run;  /* sheaves refused since a thread last missed (atomic) */
	uintptr_t refused_by;	   /* the thread refused last (barn_self(); atomic) */
	bool regrow; /* the last run of refusals was a barn's depth or more (also read unlocked) */
	uint64_t deep_ns; /* the depth last grew or halved at */
	/* The adaptive sheaf capacity (barn.c): under the lock; capacity is also read without. */
	unsigned int capacity;	       /* of the sheaves handed out now (0: a bare barn) */
	unsigned int cap_min, cap_max; /* equal: pinned */
	unsigned int trades;	       /* since window */
	uint64_t window;	       /* ns (CLOCK_MONOTONIC) */
	uint64_t grows, shrinks;       /* capacity steps up and down */
};

/* Flags a cache keeps internally, above the public ones. */
#define CACHE_INTERNAL 0x80000000u    /* uslab's own metadata cache */
#define CACHE_KMALLOC 0x40000000u     /* a kmalloc size class (kmalloc.c) */
#define CACHE_LARGE 0x20000000u	      /* owns kmalloc's large objects */
#define CACHE_FAILSLAB 0x10000000u    /* USLAB_FAILSLAB selects it (failslab.c) */
#define CACHE_RESERVED_ID 0x08000000u /* takes an id thread_reserve_ids() kept (thread.c) */
#define CACHE_DROPIN 0x04000000u      /* a size class serving the malloc drop-in (kmalloc.c) */

/*
 * struct cache_shape - what a layer above asks of a cache's slabs beyond
 * struct uslab_cache_args (kmalloc.c's classes; NULL: the defaults).
 * @max_order:  the largest slab order the min_objects rule may choose,
 *              when above USLAB_MAX_ORDER (large objects waste less of a
 *              larger slab).
 * @keep_bytes: empty slabs kept (min_partial) counted in bytes: as many
 *              slabs as fit, 1 to 5 (0: SLUB's 5 to 10 by object size).
 */
struct cache_shape {
	unsigned int max_order;
	size_t keep_bytes;
};
/*
 * The debug tier keeps the natural alignment of a power-of-two size up to
 * this (kmalloc's classes promise it: kmalloc.c asserts its largest fits).
 */
#define CACHE_NATURAL_ALIGN_MAX (32u << 10)
/* The debug tier's flags (slab_debug.c). */
#define DEBUG_FLAGS (USLAB_CONSISTENCY_CHECKS | USLAB_RED_ZONE | USLAB_POISON | USLAB_STORE_USER)
/* struct uslab_cache.debug: running on valgrind, objects told to memcheck (no public flag). */
#define DEBUG_VALGRIND 0x1u
#define CACHE_PUBLIC_FLAGS                                                        \
	(USLAB_HWCACHE_ALIGN | USLAB_TYPESAFE_BY_RCU | DEBUG_FLAGS | USLAB_POOL | \
	 USLAB_POOL_EXTERNAL | USLAB_PERCPU | USLAB_NO_FREE_KEY | USLAB_FREE_KEY)
/* Sheaf capacity a pool gets when it asks for none: pointers are all it holds. */
#define POOL_SHEAF_CAPACITY 254
_Static_assert(!((CACHE_INTERNAL | CACHE_KMALLOC | CACHE_LARGE | CACHE_FAILSLAB |
		  CACHE_RESERVED_ID | CACHE_DROPIN) &
		 CACHE_PUBLIC_FLAGS),
	       "the internal flags are not public ones");

/* struct uslab_cache.magic: a live cache, and one destroyed (cache_delete). */
#define CACHE_MAGIC_LIVE 0x424c5355u /* "USLB" */
#define CACHE_MAGIC_DEAD 0xdeadc0deu

struct uslab_cache {
	/* Read by the fast path: one line, written only at creation. */
	struct uslab_priv_cache hot; /* pcs_off: this cache's pcs in a table */
	unsigned int magic;	     /* CACHE_MAGIC_LIVE while the cache exists */
	unsigned int flags;
	unsigned int object_size; /* size asked for */
	unsigned int align;
	/* The slabs' shape (slab_geometry.c): c->size, c->order, ... and c->geo. */
	union {
		struct {
			SLAB_GEOMETRY_MEMBERS
		};
		struct slab_geometry geo;
	};
	unsigned char colour_next;   /* the next slab's colour (racy: a hint) */
	unsigned int debug;	     /* DEBUG_FLAGS in force (slab_debug.c), 0: none */
	unsigned int obj_off;	     /* debug: an object's offset in its slot (left red zone) */
	unsigned int dbg_off;	     /* debug: struct obj_debug at object + dbg_off */
	struct uslab_cache *offslab; /* OFFSLAB: the cache of the arrays */
	struct node *node_more;	     /* nodes 1 .. nr_nodes - 1 (NUMA on), else NULL */
	struct barn *barn_more;	     /* their barns (in the same mapping) */
	unsigned int nr_nodes;	     /* its nodes: 1, or numa_topo.nr_nodes */
	unsigned int home;	     /* a pool's node: its reserve's and loose array's (loose.c) */
	unsigned int sheaf_capacity; /* 0: no sheaves */
	unsigned int pcpu_users;     /* threads holding per-thread sheaves of it (cpu_sheaves.c) */
	unsigned int min_partial;
	unsigned long nr_deferred; /* TYPESAFE_BY_RCU slabs waiting for gp.c */
	int id;			   /* index of pcs; -1 without sheaves */
	size_t pcs_own;		   /* id's pcs in a table (a debug cache's hot.pcs_off is 0) */
	size_t pcs_lib;		   /* the library's fast paths' (pcs_of()): 0 for a debug cache */
	bool retired;		   /* cache_delete() ran: under caches_lock (its slot's page) */
	uintptr_t secret;	   /* free pointer encoding key */
	void (*ctor)(void *obj);

	struct list_node list; /* on the list of all caches (cache.c) */
	char name[USLAB_NAME_MAX + 1];

	struct barn barn CACHELINE_ALIGNED;
	struct node node CACHELINE_ALIGNED; /* node 0's lists: all of them with NUMA off */
};

/* The lists of @c on NUMA node @nid (< c->nr_nodes). */
static inline struct node *cache_node(struct uslab_cache *c, unsigned int nid)
{
	USLAB_ASSERT(nid < c->nr_nodes);
	return __builtin_expect(!nid, 1) ? &c->node : &c->node_more[nid - 1];
}

/*
 * Whether @c's sheaves keep to one NUMA node (thread_sheaves.c, "NUMA"):
 * NUMA on, and objects that have a node (an external pool's are in no slab).
 */
static inline bool cache_numa(const struct uslab_cache *c)
{
	return numa_on() && !(c->flags & USLAB_POOL_EXTERNAL);
}

/* The barn of @c's NUMA node @nid (< c->nr_nodes): full sheaves of that node's objects. */
static inline struct barn *cache_barn(struct uslab_cache *c, unsigned int nid)
{
	USLAB_ASSERT(nid < c->nr_nodes);
	return __builtin_expect(!nid, 1) ? &c->barn : &c->barn_more[nid - 1];
}

/*
 * A node request of the _node calls (<uslab.h>): USLAB_NUMA_NO_NODE (the
 * caller's node), or a node id, with USLAB_NODE_STRICT or'd in for that
 * node's memory or nothing.
 */
#define NODE_ID(req) ((unsigned int)(req)&0xffffu)
#define NODE_STRICT(req) ((req) >= 0 && ((req)&USLAB_NODE_STRICT))

/*
 * The descriptor table (cache.c): every cache created with cache_new() has
 * a DESC_SLOT-byte slot in one of its regions, never reused.
 */
#define DESC_SHIFT 10
#define DESC_SLOT (1u << DESC_SHIFT)
#define DESC_REGIONS 32
struct desc_table {
	uintptr_t base[DESC_REGIONS];
	size_t slots[DESC_REGIONS]; /* its size in slots, 0: not mapped yet */
	unsigned int nr;	    /* regions mapped */
};
INTERNAL extern struct desc_table desc_table;
INTERNAL bool cache_is_descriptor_slow(uintptr_t a);

/*
 * cache_is_descriptor - whether @p is the start of a descriptor slot (a
 * cache, live or destroyed), read without reading @p. NULL is not.
 * cache_is_descriptor_near() tests the first region only (inline: two
 * loads and a compare), cache_is_descriptor_slow() all of them.
 */
static inline bool cache_is_descriptor_near(const void *p)
{
	size_t slots = __atomic_load_n(&desc_table.slots[0], __ATOMIC_ACQUIRE);
	uintptr_t off = (uintptr_t)p - __atomic_load_n(&desc_table.base[0], __ATOMIC_RELAXED);

	/* Rotated, an offset off a slot's start has high bits set: one compare for both. */
	return ((off >> DESC_SHIFT) | (off << (64 - DESC_SHIFT))) < slots;
}

static inline bool cache_is_descriptor(const void *p)
{
	return likely(cache_is_descriptor_near(p)) || cache_is_descriptor_slow((uintptr_t)p);
}

/* The name a probe gives @c (probes.h): "?" for what is not a live cache. */
static inline const char *cache_probe_name(const struct uslab_cache *c)
{
	return c && cache_is_descriptor(c) && READ_ONCE(c->magic) == CACHE_MAGIC_LIVE ? c->name :
											"?";
}

INTERNAL extern struct ulock caches_lock;
INTERNAL unsigned int cache_refill(struct uslab_cache *c, void **dst, unsigned int want);
INTERNAL unsigned int cache_refill_node(struct uslab_cache *c, void **dst, unsigned int want,
					int req);
INTERNAL unsigned int cache_refill_free(struct uslab_cache *c, void **dst, unsigned int want);
INTERNAL void cache_free_checked(struct uslab_cache *c, void **p, size_t n);
INTERNAL void cache_free_objects(struct uslab_cache *c, void **p, size_t n, unsigned int lookahead);
INTERNAL void *cache_alloc_direct(struct uslab_cache *c);
INTERNAL uintptr_t cache_free_key(const struct uslab_cache *c);
INTERNAL void cache_clear_stale_key(void *mem);
INTERNAL bool cache_carries_key(const void *mem);
INTERNAL void cache_free_direct(struct uslab_cache *c, void *obj);
INTERNAL int cache_bootstrap(void);
INTERNAL int cache_init_internal(struct uslab_cache *c, const char *name, size_t size);
INTERNAL void cache_fork_prepare(void);
INTERNAL void cache_fork_parent(void);
INTERNAL void cache_fork_child(void);
INTERNAL void cache_shrink_node(struct uslab_cache *c);
INTERNAL int cache_pool_setup(struct uslab_cache *c, size_t reserve, int req);
INTERNAL void cache_pool_release(struct uslab_cache *c);
INTERNAL size_t cache_pool_count(struct uslab_cache *c);
INTERNAL size_t cache_pool_gather(struct uslab_cache *c, void **dst, size_t max);
INTERNAL unsigned long cache_release_slabs_now(struct slab *s);
INTERNAL struct uslab_cache *cache_new(const char *name, size_t size, size_t align,
				       void (*ctor)(void *), unsigned int flags,
				       unsigned int min_partial, unsigned int layout,
				       const struct cache_shape *shape);
INTERNAL void cache_delete(struct uslab_cache *c);
INTERNAL void cache_check_live_slow(const struct uslab_cache *c, const char *call);

/*
 * cache_check_live - stop the program when @c, passed to @call, is NULL or
 * not a live cache (cache.c). Inline: every call of a debug cache makes it.
 */
static inline void cache_check_live(const struct uslab_cache *c, const char *call)
{
	if (unlikely(!c || !cache_is_descriptor_near(c) ||
		     __atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != CACHE_MAGIC_LIVE))
		cache_check_live_slow(c, call);
}
INTERNAL unsigned long cache_validate_node(struct uslab_cache *c, void *const *held, size_t nheld);
INTERNAL void cache_register(struct uslab_cache *c);
INTERNAL void cache_unregister_locked(struct uslab_cache *c);
INTERNAL unsigned long cache_release_all(struct uslab_cache *c);
INTERNAL void cache_list_live(struct uslab_cache *c);
INTERNAL void cache_for_each(void (*fn)(struct uslab_cache *c, void *arg), void *arg);
INTERNAL void cache_add_events(struct uslab_cache *c, const uint64_t *ev);
INTERNAL void cache_node_event(struct uslab_cache *c, unsigned int nid, enum uslab_stat_item item,
			       uint64_t n);
INTERNAL uint64_t cache_node_stats(struct uslab_cache *c, struct uslab_cache_stats *st);
INTERNAL void cache_node_counts(struct uslab_cache *c, unsigned int nid,
				struct uslab_node_stats *st);
INTERNAL void cache_slab_add_single(struct uslab_cache *c, struct slab *s);
INTERNAL void cache_slab_drop_single(struct slab *s);
INTERNAL void cache_slab_resize_single(struct slab *s, uint64_t bytes);
INTERNAL void *cache_guard_alloc(struct uslab_cache *c);

/* Count one event of the node, under its lock; nothing without USLAB_STATS. */
#define node_stat(n, item) stat_event((n)->ev[item], 1)
#define node_stat_n(n, item, k) stat_event((n)->ev[item], (k))

/*
 * A free object is poisoned, except in TYPESAFE_BY_RCU caches (RCU readers
 * may read it), in debug caches (the debug tier checks them itself) and in
 * external pools (the caller's memory: poison left behind would outlive it).
 */
#define obj_poison(c, obj)                                                                        \
	do {                                                                                      \
		if (!((c)->flags & (USLAB_TYPESAFE_BY_RCU | USLAB_POOL_EXTERNAL)) && !(c)->debug) \
			asan_poison((obj), (c)->size);                                            \
	} while (0)

/*
 * objs_poison - poison @objs[0..n), each for its own cache (a free array
 * may mix caches); NULL entries and foreign pointers are left alone (the
 * free path reports the latter). objs_unpoison - unpoison @objs[0..n) of
 * @c as they are handed out. Nothing without ASan.
 */
static inline void objs_poison(void *const *objs, size_t n)
{
#ifdef USLAB_ASAN
	for (size_t i = 0; i < n; i++) {
		struct uslab_cache *oc = objs[i] ? uslab_cache_of(objs[i]) : NULL;

		if (oc)
			obj_poison(oc, objs[i]);
	}
#else
	(void)objs, (void)n;
#endif
}

static inline void objs_unpoison(const struct uslab_cache *c, void *const *objs, size_t n)
{
#ifdef USLAB_ASAN
	for (size_t i = 0; i < n; i++)
		asan_unpoison(objs[i], c->object_size);
#else
	(void)c, (void)objs, (void)n;
#endif
}

/*
 * The free key (<uslab/inline/priv.h>, doc/design.md "Free checks"), for the
 * library's paths: obj_mark_free() checks and marks an object of @c (one
 * with a key) going into a sheaf or a magazine, obj_unmark() clears the
 * mark of one leaving them. They read and write one word of a free object,
 * poisoned for ASan or not, as relaxed atomics (plain moves on x86-64): an
 * object freed after a grace period (uslab_free_rcu) was read by RCU
 * readers until then, an order ThreadSanitizer cannot see in liburcu.
 */
NO_SANITIZE_ADDRESS static inline void obj_mark_free(struct uslab_cache *c, void *obj)
{
	uintptr_t *w = obj;
	const uint32_t *half = (const uint32_t *)(const void *)w;
	const int hi = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

	USLAB_ASSERT(c->hot.free_key);
	/* The high half first: no stall behind a narrow store (uslab_priv_free_mark()). */
	if (unlikely(__atomic_load_n(&half[hi], __ATOMIC_RELAXED) ==
			     (uint32_t)(c->hot.free_key >> 32) &&
		     __atomic_load_n(&half[!hi], __ATOMIC_RELAXED) == (uint32_t)c->hot.free_key))
		uslab_priv_double_free(c, obj);
	__atomic_store_n(w, c->hot.free_key, __ATOMIC_RELAXED);
}

NO_SANITIZE_ADDRESS static inline void obj_unmark(void *obj)
{
	__atomic_store_n((uintptr_t *)obj, 0, __ATOMIC_RELAXED);
}

/* obj_mark_free() on @objs[0..n) of @c (holes skipped), if @c has a key. */
static inline void objs_mark_free(struct uslab_cache *c, void *const *objs, size_t n)
{
	if (c->hot.free_key)
		for (size_t i = 0; i < n; i++)
			if (!uslab_priv_is_hole(objs[i]))
				obj_mark_free(c, objs[i]);
}

/*
 * The free and hand-out hooks, the pair every library path runs on the
 * objects it takes from or gives to a program (SLUB's slab_free_hook() and
 * slab_post_alloc_hook()), so that the checks are written once:
 *
 * obj_free_hook - @obj of @c comes back: checked at the call when @check
 * (in a live slab of @c, on an object boundary: a bad pointer stops the
 * program here, not at a later flush; false where a slab check follows
 * anyway, or for an external pool's object, which has no slab), marked
 * free in a cache with the free key, poisoned for ASan.
 */
static inline void obj_free_hook(struct uslab_cache *c, void *obj, bool check)
{
	if (check)
		slab_of_object(c, obj);
	if (c->hot.free_key)
		obj_mark_free(c, obj);
	obj_poison(c, obj);
}

/* objs_free_hook - obj_free_hook() on @objs[0..n) of @c, unchecked (holes skipped). */
static inline void objs_free_hook(struct uslab_cache *c, void *const *objs, size_t n)
{
	objs_mark_free(c, objs, n); /* a double free stops here, at the call */
	objs_poison(objs, n);
}

/*
 * objs_hand_out - @objs[0..n) of @c leave uslab for the caller: unpoisoned
 * for ASan, their free key cleared where they carry it.
 */
static inline void objs_hand_out(const struct uslab_cache *c, void *const *objs, size_t n)
{
	objs_unpoison(c, objs, n);
	/*
	 * The hand-out invariant (doc/design.md, "Free checks"): the key
	 * cleared, whether the object carries it or not (one from a slab),
	 * without reading it first. A read of a slab's page the program never
	 * touched maps the kernel's zero page, and the program's first store
	 * then faults a second time: under the malloc drop-in, lua took 27,000
	 * page faults where mimalloc took 13,000, 6,900 of them such reads
	 * (bpftrace on exceptions:page_fault_user). A keyed cache has no
	 * constructor and no index array in an object's first word, so the
	 * word is the program's to have. NULL: nothing (a magazine two threads
	 * race on can hand out a slot never written).
	 */
	if (c->hot.free_key)
		for (size_t i = 0; i < n; i++)
			if (objs[i])
				obj_unmark(objs[i]);
}

#endif /* USLAB_CACHE_H */
