/* SPDX-License-Identifier: MIT */
/*
 * os.h - layer 1, os.c: pages, arenas and the slab registry; struct slab,
 * the descriptor of a slab, which every layer above reads.
 */
#ifndef USLAB_OS_H
#define USLAB_OS_H

#include "base.h"

/* ---------------------------------------------------------------- os.c */

#define PAGE_SHIFT 12
#define PAGE_SIZE (1ul << PAGE_SHIFT)
/* Arenas are naturally aligned multiples of 2^ARENA_SHIFT bytes. */
#define ARENA_SHIFT 26
/* Slabs of caches go up to 2^SLAB_MAX_ORDER pages (32 MiB). */
#define SLAB_MAX_ORDER 13
/* Pages of the page heap's arenas: one 2^ARENA_SHIFT arena holds 2^HEAP_ORDER_MAX pages. */
#define HEAP_ORDER_MAX (ARENA_SHIFT - PAGE_SHIFT)
#define ARENA_PAGES (1ul << HEAP_ORDER_MAX)
/* Large objects above this many bytes are huge: a mapping of their own (os.c). */
#define HEAP_MAX_BYTES (PAGE_SIZE << SLAB_MAX_ORDER)

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
	SLAB_TAIL,     /* a page of a slab after its first: os_slab_lookup()
			  goes to the slab's descriptor, @head (os.c) */
};

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
 *
 * The page heap (os.c) has one descriptor per page. A slab's is its
 * first page's; the descriptors of its other pages are tails (state
 * SLAB_TAIL, @base NULL, @head its descriptor) that mirror @cache and
 * @pcs_id (os_slab_publish), so the inline kfree reads the right cache id
 * from any page and os_slab_lookup() goes to the slab in one more load.
 */
struct slab {
	struct uslab_cache *cache; /* owner; NULL while the slot is free */
	union {
		/* FREEPTR: the first free object, chain encoded. Index layouts:
		   the index array (OBJFREELIST: the free object holding it, NULL
		   while no index is free) */
		void *freelist;
		struct slab *head; /* SLAB_TAIL: the slab's descriptor */
	};
	uint32_t nfree; /* free objects on @freelist */
	uint32_t bump;	/* objects [bump, objects) never used */
	/* @objects and @colour are set before the slab is published and do
	   not change while it is owned (read without the lock) */
	uint32_t objects : 28; /* objects in the slab */
	uint32_t colour : 4;   /* first object at base + colour * cache->colour_off */
	uint8_t : 0; /* (C11: a separate memory location from @state, written under the lock) */
	uint8_t state : 5;  /* enum slab_state */
	uint8_t zeroed : 1; /* os.c gave it reading as zeros */
	uint8_t large : 1;  /* a large object's: large_size bytes (os_large_alloc) */
	uint8_t moved : 1;  /* a large object whose pages os_large_move() took away */
	uint8_t : 0;	    /* (order and node: set before the slab is published, read unlocked) */
	uint8_t order : 4;  /* a cache's slab is 2^order pages */
	uint8_t node : 4;   /* the NUMA node of its pages (its arena's; 0 with NUMA off) */
	/* The cache's id while its objects may be freed to sheaves, else 0:
	   the inline kfree's pcs (uslab/inline/kmalloc.h) */
	uint16_t pcs_id;
	union {
		/* PARTIAL: the node partial list */
		struct list_node list;
		/* FREE: a release chain (cache.c, gp.c) */
		struct slab *next;
	};
	char *base; /* first byte of the slab; NULL in a tail */
	union {
		uint64_t large_size; /* a large object's slab: its usable bytes, whole pages */
		/* a cache's slab: minus the address of its first object (the inline
		   kfree's check), negated so that no scan for pointers (valgrind's
		   leak check) finds the object through it */
		uintptr_t first_neg;
	};
};

_Static_assert(sizeof(struct slab) == CACHELINE, "a slab descriptor is one cache line");
_Static_assert(SLAB_MAX_ORDER < 16 && NUMA_MAX_NODES <= 16, "order and node fit their 4 bits");
_Static_assert(offsetof(struct slab, next) == offsetof(struct slab, list.next),
	       "@next is @list.next");

INTERNAL struct slab *os_slab_alloc(unsigned int order, unsigned int node);
INTERNAL struct slab *os_large_alloc(size_t bytes, size_t align, unsigned int node);
INTERNAL bool os_large_resize(struct slab *s, size_t bytes);
INTERNAL bool os_large_move(struct slab *to, struct slab *from);
INTERNAL void os_slab_publish(struct slab *s);
INTERNAL void os_slab_free(struct slab *s);
INTERNAL void os_slab_prefetch(const void *p);

/* User addresses are below 2^VA_BITS; the registry has one entry per 2^ARENA_SHIFT bytes. */
#define VA_BITS 47
#define ARENA_GRANULE (1ul << ARENA_SHIFT)

/*
 * slab_desc - the descriptor of address @a from @e, the non-zero registry
 * entry of its granule: <uslab/inline/priv.h>'s arithmetic, the one copy, which
 * the inline kfree runs too (src/abi.c pins the constants it uses).
 */
#define slab_desc(a, e) ((struct slab *)(uintptr_t)uslab_priv_slab_desc((a), (e)))

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
	s = slab_desc(a, e);
	if (!__atomic_load_n(&s->cache, __ATOMIC_ACQUIRE))
		return NULL;
	if (unlikely(!__atomic_load_n(&s->base, __ATOMIC_RELAXED))) {
		/* A tail: its slab's descriptor, published before the tail's @cache. */
		s = __atomic_load_n(&s->head, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&s->cache, __ATOMIC_ACQUIRE))
			return NULL;
	}
	return s;
}
INTERNAL void *os_mmap(size_t size);
INTERNAL void os_munmap(void *p, size_t size);
INTERNAL bool os_may_commit(size_t size);
INTERNAL void os_fork_prepare(void);
INTERNAL void os_fork_parent(void);
INTERNAL void os_fork_child(void);
INTERNAL size_t os_arena_count(void);
INTERNAL size_t os_purge(void);
INTERNAL size_t os_dirty_bytes(void);
struct uslab_heap_stats;
INTERNAL void os_heap_stats(struct uslab_heap_stats *st);

/*
 * os_kick - start the page heap's decay thread if freed pages wait for
 * one (os_decay_need). Call only where no uslab lock is held: starting a
 * thread may allocate, through uslab when it is the malloc.
 */
INTERNAL extern bool os_decay_need;
INTERNAL void os_decay_start(void);
INTERNAL bool os_decay_step(size_t budget);
INTERNAL bool os_decay_running(void);
static inline void os_kick(void)
{
	if (unlikely(__atomic_load_n(&os_decay_need, __ATOMIC_RELAXED)))
		os_decay_start();
}

/* ------------------------------------------------------------- guard.c */

/*
 * The sampling guard (guard.c has the design): guard_owns() - whether @p
 * is in its region (false before it exists): a load, a subtraction and a
 * compare, asked where a registry lookup missed. guard_sample() - whether
 * this slow path's allocation is sampled (a thread-local countdown).
 */
INTERNAL extern uintptr_t guard_base;
INTERNAL extern size_t guard_bytes;
INTERNAL extern __thread unsigned int guard_countdown __attribute__((tls_model("initial-exec")));
INTERNAL bool guard_sample_slow(void);

static inline bool guard_owns(const void *p)
{
	size_t bytes = __atomic_load_n(&guard_bytes, __ATOMIC_ACQUIRE);

	return (uintptr_t)p - __atomic_load_n(&guard_base, __ATOMIC_RELAXED) < bytes;
}

static inline bool guard_sample(void)
{
	if (likely(guard_countdown > 1)) {
		guard_countdown--;
		return false;
	}
	return guard_sample_slow();
}

/*
 * guard_alloc - an object of @size bytes (at most a page) aligned to
 * @align in a slot for cache @c, or NULL (no slot free, no memory).
 * guard_free - free @p, a guarded object, to @c (NULL: its own cache);
 * misuse (double free, another cache, a pointer inside it, its canary
 * overwritten; @at_call, the program's own free: the free key in a live
 * object, which is in a sheaf already) is reported and stops the program.
 * guard_object - the cache of the live guarded object holding @p (and
 * its start, usable size), or NULL. guard_object_of - the cache of the
 * live guarded object starting at @p, its usable size in *@size; anything
 * else is reported for @call (ksize, krealloc) and stops the program.
 * guard_live - live guarded objects of @c. guard_forget - @c is
 * destroyed: its freed slots are released.
 */
INTERNAL void *guard_alloc(const struct uslab_cache *c, size_t size, size_t align);
INTERNAL void guard_free(const struct uslab_cache *c, const void *p, bool at_call);
INTERNAL const struct uslab_cache *guard_object(const void *p, void **obj, size_t *size);
INTERNAL const struct uslab_cache *guard_object_of(const void *p, const char *call, size_t *size);
INTERNAL unsigned long guard_live(const struct uslab_cache *c);
INTERNAL void guard_forget(const struct uslab_cache *c);
INTERNAL void guard_fork_prepare(void);
INTERNAL void guard_fork_parent(void);
INTERNAL void guard_fork_child(void);

#endif /* USLAB_OS_H */
