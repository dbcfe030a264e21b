/* SPDX-License-Identifier: MIT */
/*
 * internal.h - declarations shared between uslab's layers, grouped by the
 * file that owns them, in layer order.
 *
 * THE LAYERING RULE. A file calls only functions of its own layer and of
 * the layers listed before it. Layers, bottom up:
 *
 *   1  os         os.c        arenas, the address registry, memory to the OS
 *   2  slab       slab.c      one slab: free pointers, carving, freelists
 *      geometry   slab_geometry.c the shape of a cache's slabs: order,
 *                             layout, colours (struct slab_geometry)
 *      debug      slab_debug.c the debug tier: per-object state, red
 *                             zones, poison, tracks (slab.c,
 *                             slab_geometry.c and slab_debug.c are one
 *                             layer)
 *   3  cache      cache.c     struct uslab_cache, its node partial list,
 *                             refill and flush in batches, list of caches
 *   4  gp         gp.c        grace-period engine: the monitor thread,
 *                             slabs released after a grace period
 *   5  sheaf      sheaf.c     the sheaf object: alloc, free, flush
 *   6  barn       barn.c      a cache's depot of full and empty sheaves
 *   7  pcs        pcs.c       per-thread sheaves: fast paths, slow paths
 *      thread     thread.c    per-thread tables, cache ids, thread exit,
 *                             draining (pcs.c and thread.c are one layer)
 *   8  bulk       bulk.c      arrays of objects in and out
 *   9  rcu        rcu.c       kfree_rcu front end: blocks of pointers
 *  10  magazine   magazine.c  caller-owned caches and free batches
 *  11  lifecycle  lifecycle.c create, destroy, shrink, stats: orchestrates
 *  12  kmalloc    kmalloc.c   size classes (caches it creates through
 *                             lifecycle.c) and large objects
 *  13  export     export.c    the statistics a running program shows:
 *                             uslab_stats_print, USLAB_STATS's snapshot
 *      format     export_format.c the tables (shared with uslab-stat)
 *  14  init       init.c      start-up, fork handlers: wires every layer
 *
 * libuslab-malloc.so (malloc.c) sits above all of them and uses only the
 * public API (<uslab.h>), as any program does.
 *
 * Services any layer may call: counter.c (the counters and ID batches of
 * <uslab/counter.h>, for programs), debug.c (usl_bug, usl_warn, assertions),
 * options.c (usl_opt), failslab.c (fault injection), stats.c (counter
 * names), lock.c (the lock and its order check, src/lock.h); and usl_init(), the lazy start-up that the
 * first slow path of any layer may trigger (with usl_starting_self()).
 *
 * Exceptions, each the one way a lower layer reaches a higher one:
 *   cache.c -> gp.c    gp_defer_slabs(): the lock-free hand-off of
 *                      TYPESAFE_BY_RCU slabs (any lock may be held)
 *   gp.c -> rcu.c      the hooks of struct gp_client, registered by rcu.c
 *                      at start-up (called through pointers)
 *   cache.c            its fork handlers lock and reset the barn lock of
 *                      every cache (the list of caches is cache.c's)
 * scripts/check-layers checks the rule on the built objects (nm): run it
 * after `make build`; `make test` runs it.
 *
 * doc/design.md has the picture. The lock order is in src/lock.h (one
 * copy; USLAB_CHECKS builds check it at every acquisition).
 */
#ifndef USLAB_INTERNAL_H
#define USLAB_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"
#include "lock.h"
/* The library defines the real uslab_cache_alloc/free: no inline macros. */
#define USLAB_NO_INLINE 1
/* Its definitions do read around the pointers that callers only pass. */
#define USLAB_NO_ACCESS(n)
#include "uslab.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define INTERNAL __attribute__((visibility("hidden")))
#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a)-1))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CACHELINE 64
#define CACHELINE_ALIGNED __attribute__((aligned(CACHELINE)))

/* Slow-path event counters (CMake option USLAB_STATS, stats.c). */
#ifndef USLAB_STATS
#define USLAB_STATS 1
#endif

/*
 * USLAB_ASSERT - an invariant stated in a comment, checked in USLAB_CHECKS
 * builds (Debug, ASan, TSan) and compiled away in release builds.
 */
#ifdef USLAB_CHECKS
#define USLAB_ASSERT(cond)                                                                   \
	do {                                                                                 \
		if (unlikely(!(cond)))                                                       \
			usl_bug(NULL, NULL, "assertion failed: %s (%s:%d)", #cond, __FILE__, \
				__LINE__);                                                   \
	} while (0)
#else
#define USLAB_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

/*
 * NO_TAIL_CALL(v) - keep the call that produced @v from becoming a jump:
 * the exported function stays on the stack, so the debug tier's
 * backtraces of a statically linked program find its caller after the
 * outermost uslab_* frame (slab_debug.c).
 */
#define NO_TAIL_CALL(v) __asm__ volatile("" : "+r"(v))

/* The position of the highest bit set, 1-based; 0 for 0 (Linux's fls()). */
static inline unsigned int fls_uint(unsigned int x)
{
	return x ? 32 - __builtin_clz(x) : 0;
}

#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ---------------------------------------------------------------- os.c */

#define PAGE_SHIFT 12
#define PAGE_SIZE (1ul << PAGE_SHIFT)
/* Arenas are naturally aligned multiples of 2^ARENA_SHIFT bytes. */
#define ARENA_SHIFT 26
/* Slabs of caches go up to 2^SLAB_MAX_ORDER pages (32 MiB). */
#define SLAB_MAX_ORDER 13
/* Huge slabs (kmalloc's large objects) up to 2^OS_MAX_ORDER pages (64 TiB). */
#define OS_MAX_ORDER 34

/*
 * The state of a slab (struct slab.state). The transitions are tabled at
 * the top of cache.c (the cache's) and of os.c (the slots'), and checked
 * with USLAB_ASSERT where they happen.
 */
enum slab_state {
	SLAB_FREE = 0, /* slot of an arena, owned by os.c; or off its node on
			  a release chain, on its way back to os.c */
	SLAB_NEW,      /* just taken by a cache, not yet on any list */
	SLAB_PARTIAL,  /* on the node partial list: some objects free */
	SLAB_FULL,     /* no free object in the slab; on no list */
	SLAB_DIRTY,    /* free slot of an arena, pages still resident (os.c) */
	SLAB_PURGING,  /* free slot being given back outside os_lock (os.c) */
};

/* An os call purges at most this many retained slabs (and about 256 KiB). */
#define OS_PURGE_BATCH 4

/*
 * struct slab - descriptor of one slab. Lives in its arena's descriptor
 * table, never inside the slab, so object -> slab is arithmetic.
 * Fields other than @cache, @base, @objects are protected by the owning
 * cache's node lock once the slab is on a list (state PARTIAL or FULL).
 * Always nfree <= bump <= objects.
 *
 * A slab is on at most one list at a time, so one pointer pair serves
 * them all: @list links the doubly linked lists (src/list.h), @next the
 * singly linked chains, and the two overlay (@next is @list.next).
 */
struct slab {
	struct uslab_cache *cache; /* owner; NULL while the slot is free */
	/* FREEPTR: the first free object, chain encoded. Index layouts: the
	   index array (OBJFREELIST: the free object holding it, NULL while
	   no index is free) */
	void *freelist;
	uint32_t nfree; /* free objects on @freelist */
	uint32_t bump;	/* objects [bump, objects) never used */
	/* @objects and @colour are set before the slab is published and do
	   not change while it is owned (read without the lock) */
	uint32_t objects : 28; /* objects in the slab */
	uint32_t colour : 4;   /* first object at base + colour * cache->colour_off */
	uint8_t : 0; /* (C11: a separate memory location from @state, written under the lock) */
	uint8_t state : 7;  /* enum slab_state */
	uint8_t zeroed : 1; /* os.c gave it reading as zeros */
	uint8_t order;	    /* the slab is 2^order pages */
	/* The cache's id while its objects may be freed to sheaves, else 0:
	   the inline kfree's pcs (uslab/kmalloc.h) */
	uint16_t pcs_id;
	union {
		/* PARTIAL: the node partial list; DIRTY, PURGING: os.c's lists */
		struct list_node list;
		/* FREE: a release chain (cache.c, gp.c) or an arena's free slots */
		struct slab *next;
	};
	char *base; /* first byte of the slab */
	union {
		uint64_t freed_ms;   /* DIRTY: when os.c got it back */
		uint64_t large_size; /* a large object's slab: its usable bytes */
	};
};

_Static_assert(sizeof(struct slab) == CACHELINE, "a slab descriptor is one cache line");
_Static_assert(offsetof(struct slab, pcs_id) == USLAB_PRIV_SLAB_PCS_ID, "uslab/kmalloc.h");
_Static_assert(USLAB_MAX_CACHES < 65536, "a cache id fits struct slab.pcs_id");
_Static_assert(offsetof(struct slab, next) == offsetof(struct slab, list.next),
	       "@next is @list.next");

INTERNAL struct slab *os_slab_alloc(unsigned int order);
INTERNAL void os_slab_free(struct slab *s);
INTERNAL void os_slab_prefetch(const void *p);

/* User addresses are below 2^VA_BITS; the registry has one entry per 2^ARENA_SHIFT bytes. */
#define VA_BITS 47
#define ARENA_GRANULE (1ul << ARENA_SHIFT)

/*
 * os_slab_lookup - the descriptor of the live slab holding @p, or NULL
 * (not in a slab owned by a cache) in O(1) without a lock: one load of
 * the slab registry (uslab_priv_slab_map, os.c's), a shift, the
 * descriptor's owner. Descriptors are never unmapped, so a lookup racing
 * with an arena's release reads a free slot. Inline: the library's free
 * checks every pointer with it.
 */
static inline struct slab *os_slab_lookup(const void *p)
{
	uintptr_t a = (uintptr_t)p, e;
	struct slab *s;

	if (unlikely(a >> VA_BITS))
		return NULL;
	e = __atomic_load_n(&uslab_priv_slab_map[a >> ARENA_SHIFT], __ATOMIC_ACQUIRE);
	if (!e)
		return NULL;
	/* Arenas cover whole granules: the index stays inside the arena's slots. */
	s = (struct slab *)(e & ~(uintptr_t)(CACHELINE - 1)) +
	    ((a & (ARENA_GRANULE - 1)) >> (e & (CACHELINE - 1)));
	if (!__atomic_load_n(&s->cache, __ATOMIC_ACQUIRE))
		return NULL;
	return s;
}
INTERNAL void *os_mmap(size_t size);
INTERNAL void os_munmap(void *p, size_t size);
INTERNAL void os_fork_prepare(void);
INTERNAL void os_fork_parent(void);
INTERNAL void os_fork_child(void);
INTERNAL size_t os_arena_count(void);
INTERNAL void os_purge(void);
INTERNAL size_t os_dirty_bytes(void);

/* ------------------------------------------------------------- slab.c */

/*
 * struct detached_freelist - objects of one slab linked through their free
 * pointers by a thread that owns them, not yet visible to anyone (seed:
 * "slub: optimize bulk slowpath free by detached freelist").
 */
#define DF_IDX_MAX 64
struct detached_freelist {
	struct slab *slab;
	void *head; /* FREEPTR: the chain; index layouts: the first object */
	void *tail;
	unsigned int cnt;
	uint16_t idx[DF_IDX_MAX]; /* index layouts: the objects' indices */
};

/*
 * struct slab_geometry - the shape of a cache's slabs (slab_geometry.c),
 * fixed at creation. struct uslab_cache embeds it twice over in a union,
 * as Linux's struct_group(): its members are the cache's own (c->size),
 * and the whole is c->geo. SLAB_GEOMETRY_MEMBERS is the one list of them.
 */
#define SLAB_GEOMETRY_MEMBERS                                                       \
	unsigned int size;	    /* stride between objects */                    \
	unsigned int order;	    /* slabs are 2^order pages */                   \
	unsigned int objects;	    /* per slab */                                  \
	unsigned int fp_offset;	    /* FREEPTR: free pointer offset in an object */ \
	unsigned int colour_off;    /* bytes between two colours */                 \
	unsigned int meta_off;	    /* ONSLAB: the array's offset in a slab */      \
	unsigned int meta_bytes;    /* uslab_cache_stats.meta_bytes */              \
	unsigned int offslab_bytes; /* OFFSLAB: each slab's array block */          \
	unsigned int leftover;	    /* bytes of a slab no object uses */            \
	unsigned char layout;	    /* enum uslab_layout, never AUTO */             \
	unsigned char idx_size;	    /* index layouts: bytes per index (1, 2) */     \
	unsigned char colours;	    /* first-object offsets used in turn (>= 1) */  \
	uint64_t recip;		    /* 2^64 / size, rounded up */

struct slab_geometry {
	SLAB_GEOMETRY_MEMBERS
};

/* OFFSLAB index arrays come in blocks of 16 << i bytes, up to 4 KiB (larger: refused). */
#define OFFSLAB_MIN_BYTES 16u
#define OFFSLAB_MAX_BYTES 4096u
/* Slab colouring uses at most this many first-object offsets (struct slab.colour). */
#define SLAB_MAX_COLOURS 16

/*
 * What slab_geometry_init() lays out: @object_size bytes asked for, @slot
 * bytes per object before alignment (rounded up to a word; with the debug
 * tier's red zones and metadata), @align, @obj_off (the object's offset in
 * its slot), slabs up to 2^@max_order pages, @layout (enum uslab_layout,
 * AUTO: chosen), @bound (a constructor or TYPESAFE_BY_RCU: no byte of a
 * free object may be written), @internal (uslab's own caches: never
 * OFFSLAB, USLAB_LAYOUT not applied).
 */
struct slab_geometry_req {
	unsigned int object_size;
	size_t slot;
	size_t align;
	unsigned int obj_off;
	unsigned int max_order;
	unsigned int layout;
	bool bound;
	bool internal;
};

INTERNAL int slab_geometry_init(struct slab_geometry *g, const struct slab_geometry_req *r);
INTERNAL unsigned int get_order(size_t size);

INTERNAL void *fp_get(const struct uslab_cache *c, const void *obj);
INTERNAL void fp_set(const struct uslab_cache *c, void *obj, void *next);
INTERNAL void slab_setup(struct uslab_cache *c, struct slab *s, void *offslab);
INTERNAL void slab_push_indices(struct uslab_cache *c, struct slab *s,
				const struct detached_freelist *df);
INTERNAL void slab_pop_indices(struct uslab_cache *c, struct slab *s, void **dst, unsigned int k);
INTERNAL void *slab_first_object(const struct uslab_cache *c, const struct slab *s);
INTERNAL void slab_prefetch_push(const struct uslab_cache *c, const struct slab *s);
INTERNAL unsigned int slab_carve(struct uslab_cache *c, struct slab *s, void **dst,
				 unsigned int max);
INTERNAL void *slab_walk(struct uslab_cache *c, struct slab *s, void *head, unsigned int cnt,
			 void **dst);
INTERNAL struct slab *slab_of_object(struct uslab_cache *c, const void *obj);
INTERNAL struct slab *slab_check_object(struct uslab_cache *c, const void *obj, const char **what);
INTERNAL unsigned int slab_object_index(const struct uslab_cache *c, const struct slab *s,
					const void *obj);
INTERNAL unsigned int slab_index_at(const struct uslab_cache *c, const struct slab *s,
				    unsigned int i);
INTERNAL void *slab_object_at(const struct slab *s, const void *p);
INTERNAL size_t build_detached_freelist(struct uslab_cache *c, size_t n, void **p, size_t start,
					unsigned int lookahead, struct detached_freelist *df);

/* ------------------------------------------------------- slab_debug.c */

INTERNAL extern bool slab_debug_on; /* some cache is in the debug tier */
INTERNAL unsigned int slab_debug_flags(const char *name, unsigned int flags, bool bound);
INTERNAL size_t slab_debug_layout(struct uslab_cache *c);
INTERNAL void slab_debug_setup_slab(struct uslab_cache *c, struct slab *s);
INTERNAL void slab_debug_alloc(struct uslab_cache *c, void **objs, size_t n);
INTERNAL bool slab_debug_free(struct uslab_cache *c, void *obj);
INTERNAL bool slab_debug_free_rcu(void *obj);
INTERNAL void slab_debug_rcu_done(void *const *objs, size_t n);
INTERNAL void slab_debug_set_size(struct uslab_cache *c, void *obj, size_t size);
INTERNAL size_t slab_debug_size(const struct uslab_cache *c, const void *obj);
INTERNAL bool slab_debug_allocated(const struct uslab_cache *c, const void *obj, const char *call);
INTERNAL void slab_debug_fork_child(void);
INTERNAL unsigned long slab_debug_check_slab(struct uslab_cache *c, struct slab *s);
INTERNAL unsigned long slab_debug_list_live(struct uslab_cache *c, struct slab *s,
					    unsigned long *budget);

/* ------------------------------------------------------------ cache.c */

/* The node: a cache's slab lists (one node: the machine is not NUMA). */
struct node {
	struct ulock lock;
	struct list_node partial; /* PARTIAL slabs (struct slab.list) */
	struct list_node full;	  /* debug caches: FULL slabs (struct slab.list) */
	unsigned long nr_partial; /* slabs on the partial list */
	unsigned long nr_empty;	  /* of those, slabs with no object in use */
	unsigned long nr_slabs;	  /* slabs owned */
	unsigned long nr_objects; /* objects those slabs hold */
	unsigned long nr_free;	  /* free objects in slabs (lists and bump) */
	/* Events counted under the lock, and those of threads that exited. */
	uint64_t ev[USLAB_STAT_NR_ITEMS];
};

struct barn {
	struct ulock lock;
	struct sheaf *full;  /* stack of full sheaves */
	struct sheaf *empty; /* stack of empty sheaves */
	unsigned int nr_full;
	unsigned int nr_empty;
	unsigned int max_full;
	unsigned int max_empty;
};

/* Flags a cache keeps internally, above the public ones. */
#define CACHE_INTERNAL 0x80000000u /* uslab's own metadata cache */
#define CACHE_KMALLOC 0x40000000u  /* a kmalloc size class (kmalloc.c) */
#define CACHE_LARGE 0x20000000u	   /* owns kmalloc's large objects */
#define CACHE_FAILSLAB 0x10000000u /* USLAB_FAILSLAB selects it (failslab.c) */
/* Slab order limit of kmalloc classes: every class wastes at most 1/8 of a slab. */
#define KMALLOC_MAX_ORDER 6
/* The debug tier's flags (slab_debug.c). */
#define DEBUG_FLAGS (USLAB_CONSISTENCY_CHECKS | USLAB_RED_ZONE | USLAB_POISON | USLAB_STORE_USER)
/* struct uslab_cache.debug: running on valgrind, objects told to memcheck (no public flag). */
#define DEBUG_VALGRIND 0x1u
#define CACHE_PUBLIC_FLAGS (USLAB_HWCACHE_ALIGN | USLAB_TYPESAFE_BY_RCU | DEBUG_FLAGS)

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
	unsigned int sheaf_capacity; /* 0: no sheaves */
	unsigned int min_partial;
	unsigned long nr_deferred; /* TYPESAFE_BY_RCU slabs waiting for gp.c */
	int id;			   /* index of pcs; -1 without sheaves */
	uintptr_t secret;	   /* free pointer encoding key */
	void (*ctor)(void *obj);

	struct list_node list; /* on the list of all caches (cache.c) */
	char name[USLAB_NAME_MAX + 1];

	struct barn barn CACHELINE_ALIGNED;
	struct node node CACHELINE_ALIGNED;
};

INTERNAL extern struct ulock caches_lock;
INTERNAL unsigned int cache_refill(struct uslab_cache *c, void **dst, unsigned int want);
INTERNAL void cache_free_objects(struct uslab_cache *c, void **p, size_t n, unsigned int lookahead);
INTERNAL void *cache_alloc_direct(struct uslab_cache *c);
INTERNAL void cache_free_direct(struct uslab_cache *c, void *obj);
INTERNAL int cache_bootstrap(void);
INTERNAL int cache_init_internal(struct uslab_cache *c, const char *name, size_t size);
INTERNAL void cache_fork_prepare(void);
INTERNAL void cache_fork_parent(void);
INTERNAL void cache_fork_child(void);
INTERNAL void cache_shrink_node(struct uslab_cache *c);
INTERNAL unsigned long cache_release_slabs_now(struct slab *s);
INTERNAL struct uslab_cache *cache_new(const char *name, size_t size, size_t align,
				       void (*ctor)(void *), unsigned int flags,
				       unsigned int min_partial, unsigned int layout);
INTERNAL void cache_delete(struct uslab_cache *c);
INTERNAL void cache_check_live(const struct uslab_cache *c, const char *call);
INTERNAL unsigned long cache_validate_node(struct uslab_cache *c, void *const *held, size_t nheld);
INTERNAL void cache_register(struct uslab_cache *c);
INTERNAL void cache_unregister_locked(struct uslab_cache *c);
INTERNAL unsigned long cache_release_all(struct uslab_cache *c);
INTERNAL void cache_list_live(struct uslab_cache *c);
INTERNAL void cache_for_each(void (*fn)(struct uslab_cache *c, void *arg), void *arg);
INTERNAL void cache_add_events(struct uslab_cache *c, const uint64_t *ev);
INTERNAL void cache_node_stats(struct uslab_cache *c, struct uslab_cache_stats *st);
INTERNAL void cache_slab_add_single(struct uslab_cache *c, struct slab *s);
INTERNAL void cache_slab_drop_single(struct slab *s);

/* Count one event of the node, under its lock; nothing without USLAB_STATS. */
#if USLAB_STATS
#define node_stat(n, item) ((n)->ev[item]++)
#else
#define node_stat(n, item) ((void)(n), (void)(item))
#endif

/* -------------------------------------------------------------- gp.c */

struct rcu_flavor_struct;

/*
 * struct gp_client - what the kfree_rcu front end (rcu.c) does in each
 * round of the monitor; all called by the monitor (or by gp_barrier()'s
 * caller without one) under round_lock, with no other lock held.
 * @gather:        take what is queued (@scan: partly filled blocks too;
 *                 @all: however recent). Return: a batch, NULL if none.
 * @drain:         free a batch after its grace period.
 * @idle:          work between rounds (the spare pool).
 * @after_barrier: after a barrier round (flush what the round freed).
 */
struct gp_client {
	void *(*gather)(bool scan, bool all);
	void (*drain)(void *batch);
	void (*idle)(void);
	void (*after_barrier)(void);
};

INTERNAL const struct rcu_flavor_struct *gp_flavor(void);
INTERNAL int gp_set_flavor(const struct rcu_flavor_struct *f);
INTERNAL void gp_set_client(const struct gp_client *client);
INTERNAL bool gp_read_ongoing(void);
INTERNAL void gp_synchronize(void);
INTERNAL void gp_wake(void);
INTERNAL int gp_start(void);
INTERNAL int gp_prestart(void);
INTERNAL void gp_kick(void);
INTERNAL void gp_need_start(void);
INTERNAL bool gp_used(void);
INTERNAL void gp_defer_slabs(struct slab *list);
INTERNAL void gp_barrier(void);
INTERNAL void gp_wait_until(bool (*cond)(void));
INTERNAL void gp_stats(uint64_t *deferred, uint64_t *released);
INTERNAL void gp_fork_prepare(void);
INTERNAL void gp_fork_prepare_late(void);
INTERNAL void gp_fork_parent(void);
INTERNAL void gp_fork_parent_early(void);
INTERNAL void gp_fork_child(void);

/* ------------------------------------------------------------ sheaf.c */

struct pcs;

struct sheaf {
	struct sheaf *next;	  /* barn stack link */
	const struct pcs *filler; /* who put it in the barn full */
	uint32_t size;		  /* objects held, when not a thread's main */
	uint32_t capacity;
	void *objs[];
};

/* Sheaf sizes: 16-byte header plus a power-of-two-minus-header array. */
#define SHEAF_CLASSES 7
INTERNAL extern const unsigned int sheaf_caps[SHEAF_CLASSES];
INTERNAL extern struct uslab_cache *sheaf_caches[SHEAF_CLASSES];
INTERNAL int sheaf_bootstrap(void);
INTERNAL unsigned int sheaf_capacity_for(unsigned int size, unsigned int requested);
INTERNAL struct sheaf *sheaf_alloc(struct uslab_cache *c);
INTERNAL void sheaf_free(struct uslab_cache *c, struct sheaf *sh);
INTERNAL void sheaf_flush(struct uslab_cache *c, struct sheaf *sh);
INTERNAL void sheaf_prefetch(struct sheaf *sh);

/* ------------------------------------------------------------- barn.c */

INTERNAL void barn_init(struct barn *b, unsigned int max_full, unsigned int max_empty);
INTERNAL struct sheaf *barn_replace_empty(struct barn *b, struct sheaf **empty);
INTERNAL struct sheaf *barn_replace_full(struct barn *b, struct sheaf *full, bool *taken);
INTERNAL struct sheaf *barn_get_empty(struct barn *b);
INTERNAL bool barn_put_empty(struct barn *b, struct sheaf *empty);
INTERNAL bool barn_put_full(struct barn *b, struct sheaf *full);
INTERNAL void barn_drain(struct uslab_cache *c);
INTERNAL void barn_counts(struct barn *b, unsigned long *full, unsigned long *empty);
INTERNAL size_t barn_gather(struct barn *b, void **dst, size_t max);

/* ---------------------------------------------------- pcs.c, thread.c */

/*
 * struct pcs - one thread's sheaves for one cache: two cache lines in the
 * thread's table at offset cache->hot.pcs_off, the fast paths touching the
 * first only. The main sheaf is described by three pointers so the fast
 * path is a compare and a load or store: objects are [bottom, top), room
 * up to limit. All NULL (the state of every entry of a thread that has not
 * started, and of caches without sheaves) sends both fast paths to their
 * slow paths.
 */
struct pcs {
	/* First line: the fast paths (uslab/fastpath.h) and bulk counters. */
	struct uslab_priv_pcs hot;
	struct sheaf *main;
	/* Second line: the slow paths. */
	struct sheaf *spare;	   /* NULL, or an empty or full sheaf */
	struct uslab_cache *cache; /* owner of the sheaves, NULL if unused */
	struct pcs_events *events; /* slow-path counters, lazily allocated */
} CACHELINE_ALIGNED;

_Static_assert(sizeof(struct uslab_priv_pcs) + sizeof(void *) == CACHELINE,
	       "the fast path's fields fill the first cache line of a pcs");
_Static_assert(sizeof(struct pcs) == 2 * CACHELINE, "a pcs is two cache lines");
_Static_assert(sizeof(struct pcs) == 1u << USLAB_PRIV_PCS_SHIFT, "uslab/kmalloc.h: pcs of id");

struct pcs_events {
	uint64_t ev[USLAB_STAT_NR_ITEMS];
};

/*
 * pcs_of - the calling thread's pcs of @c: in its own table, or in the
 * zero table shared by threads without state, where both fast paths see
 * no room and go to their slow paths. Never write through it before
 * pcs_self() or a slow path has started the thread.
 */
static inline struct pcs *pcs_of(const struct uslab_cache *c)
{
	return (struct pcs *)(void *)(uslab_priv_pcs_table + c->hot.pcs_off);
}

INTERNAL extern struct uslab_cache *events_cache;
INTERNAL int pcs_bootstrap(void);
INTERNAL struct pcs *pcs_self(const struct uslab_cache *c);
INTERNAL bool pcs_refill_main(struct uslab_cache *c, struct pcs *p, bool from_slabs);
INTERNAL bool pcs_make_room(struct uslab_cache *c, struct pcs *p, bool may_flush);
INTERNAL void pcs_drain(struct pcs *p);
INTERNAL void pcs_flush_self(struct uslab_cache *c);
INTERNAL void pcs_push(struct uslab_cache *c, void *obj);
INTERNAL size_t pcs_gather_self(struct uslab_cache *c, void **dst, size_t max);
INTERNAL void pcs_stat(struct pcs *p, enum uslab_stat_item item, uint64_t n);
INTERNAL void pcs_events_sum(const struct pcs *p, uint64_t *ev);

INTERNAL int thread_start_self(void);
INTERNAL bool thread_started(void);
INTERNAL void thread_note_id(int id);
INTERNAL int thread_id_attach(struct uslab_cache *c, unsigned int sheaf_capacity);
INTERNAL void thread_id_detach_locked(struct uslab_cache *c);
INTERNAL void thread_lock_self(void);
INTERNAL void thread_unlock_self(void);
INTERNAL void thread_drain_cache(struct uslab_cache *c);
INTERNAL void thread_sum_events(const struct uslab_cache *c, uint64_t *ev);
INTERNAL uint64_t thread_sum_sheaved(const struct uslab_cache *c);
INTERNAL int thread_init(void);
INTERNAL void thread_fork_prepare(void);
INTERNAL void thread_fork_parent(void);
INTERNAL void thread_fork_child(void);

/* ------------------------------------------------------------- bulk.c */

/*
 * Whether @objs[0..n) holds a NULL: four entries per step, branch-free, so
 * a bulk push without holes can be a memcpy (magazine.c).
 */
static inline bool ptrs_any_null(void *const *objs, size_t n)
{
	size_t i = 0;
	bool z = false;

	for (; i + 4 <= n; i += 4)
		z |= !objs[i] | !objs[i + 1] | !objs[i + 2] | !objs[i + 3];
	for (; i < n; i++)
		z |= !objs[i];
	return z;
}

/* ------------------------------------------------------------- rcu.c */

INTERNAL void rcu_init(void);
INTERNAL void rcu_fork_prepare(void);
INTERNAL void rcu_fork_parent(void);
INTERNAL void rcu_fork_child(void);
#ifdef USLAB_TESTING
INTERNAL extern int rcu_fault_inject; /* test hook: uslab_testing only */
#endif

/* -------------------------------------------------------- lifecycle.c */

INTERNAL struct uslab_cache *lifecycle_create(const char *name, size_t size,
					      const struct uslab_cache_args *args,
					      unsigned int flags);

/* ---------------------------------------------------------- kmalloc.c */

INTERNAL int kmalloc_bootstrap(void);

/* ---------------------------------------------------------- export.c */

INTERNAL void export_init(void);
INTERNAL void export_fork_child(void);

/* ------------------------------------------------------------ init.c */

INTERNAL int usl_init(void);
INTERNAL bool usl_starting_self(void);

/* ---------------------------------------------------------- options.c */

struct uslab_options {
	unsigned int min_objects;      /* USLAB_MIN_OBJECTS */
	unsigned int min_order;	       /* USLAB_MIN_ORDER */
	unsigned int max_order;	       /* USLAB_MAX_ORDER */
	unsigned int min_partial;      /* USLAB_MIN_PARTIAL */
	unsigned int sheaf_capacity;   /* USLAB_SHEAF_CAPACITY */
	unsigned int sheaf_bytes;      /* USLAB_SHEAF_BYTES */
	unsigned int barn_max_full;    /* USLAB_BARN_MAX_FULL */
	unsigned int barn_max_empty;   /* USLAB_BARN_MAX_EMPTY */
	unsigned int lookahead;	       /* USLAB_LOOKAHEAD */
	unsigned int purge_delay_ms;   /* USLAB_PURGE_DELAY_MS */
	unsigned int retain_kb;	       /* USLAB_RETAIN_KB */
	unsigned int prefetch;	       /* USLAB_PREFETCH */
	unsigned int rcu_drain_ms;     /* USLAB_RCU_DRAIN_MS */
	unsigned int rcu_batch_blocks; /* USLAB_RCU_BATCH_BLOCKS */
	unsigned int rcu_max_inflight; /* USLAB_RCU_MAX_INFLIGHT */
	unsigned int layout;	       /* USLAB_LAYOUT */
	unsigned int colour;	       /* USLAB_COLOUR */
	unsigned int on_bug;	       /* USLAB_ON_BUG: enum on_bug */
	unsigned int stats;	       /* USLAB_STATS: enum stats_mode */
	unsigned int stats_ms;	       /* USLAB_STATS_MS */
	unsigned int counter_batch;    /* USLAB_COUNTER_BATCH */
	unsigned int idgen_batch;      /* USLAB_IDGEN_BATCH */
	unsigned int nr_cpus;
};

INTERNAL extern struct uslab_options usl_opt;
INTERNAL extern const char *const usl_layout_names[USLAB_LAYOUT_NR + 1];
enum on_bug { ON_BUG_DEFAULT, ON_BUG_ABORT, ON_BUG_REPORT };
INTERNAL extern const char *const usl_on_bug_names[];
enum stats_mode { STATS_OFF, STATS_ON, STATS_EXIT };
INTERNAL extern const char *const usl_stats_names[];
INTERNAL void options_init(void);
INTERNAL void options_print(FILE *f);

/* --------------------------------------------------------- failslab.c */

INTERNAL int failslab_parse(const char *s);
INTERNAL bool failslab_selects(const char *name, unsigned int flags);
INTERNAL bool failslab_hit(void);

/* ------------------------------------------------------------ debug.c */

INTERNAL __attribute__((noreturn, format(printf, 3, 4))) void
usl_bug(const struct uslab_cache *c, const void *addr, const char *fmt, ...);
INTERNAL __attribute__((format(printf, 1, 2))) void usl_warn(const char *fmt, ...);
INTERNAL __attribute__((format(printf, 5, 6))) bool usl_report(const struct uslab_cache *c,
							       const void *addr, const void *site,
							       const void *key, const char *fmt,
							       ...);
INTERNAL __attribute__((format(printf, 1, 2))) void usl_report_line(const char *fmt, ...);
INTERNAL void usl_report_end(const struct uslab_cache *c);
INTERNAL int debug_parse(const char *s);
INTERNAL unsigned int debug_selects(const char *name);

/*
 * A racy read that is meant to be racy (a statistic summed from words
 * their owners write without atomics on the fast path): not reported by TSan.
 */
#ifdef USLAB_PRIV_TSAN
#define NO_SANITIZE_THREAD __attribute__((no_sanitize_thread))
#else
#define NO_SANITIZE_THREAD
#endif

#ifdef USLAB_PRIV_ASAN /* <uslab/fastpath.h> detects sanitizers */
#define USLAB_ASAN 1
#endif

#ifdef USLAB_ASAN
#include <sanitizer/asan_interface.h>
#define asan_poison(p, n) __asan_poison_memory_region((p), (n))
#define asan_unpoison(p, n) __asan_unpoison_memory_region((p), (n))
#define NO_SANITIZE_ADDRESS __attribute__((no_sanitize_address))
#else
#define asan_poison(p, n) ((void)(p), (void)(n))
#define asan_unpoison(p, n) ((void)(p), (void)(n))
#define NO_SANITIZE_ADDRESS
#endif
/*
 * A free object is poisoned, except in TYPESAFE_BY_RCU caches (RCU readers
 * may read it) and in debug caches (the debug tier checks them itself).
 */
#define obj_poison(c, obj)                                                \
	do {                                                              \
		if (!((c)->flags & USLAB_TYPESAFE_BY_RCU) && !(c)->debug) \
			asan_poison((obj), (c)->size);                    \
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

#endif /* USLAB_INTERNAL_H */
