/* SPDX-License-Identifier: MIT */
/*
 * uslab/magazine.h - caller-owned recycling caches (magazines) and on-stack
 * free batches. Included by <uslab.h>; may also be included on its own.
 *
 * A magazine (struct uslab_magazine) is a stack of free objects of one
 * cache that belongs to one context at a time: a packet-processing loop, a
 * NAPI-style poll, a connection's worker. Nothing else touches it, so its
 * fast paths take no lock, execute no atomic instruction and do not even
 * look up the thread's sheaves: a compare and a load or a store on the
 * magazine itself. When it runs empty it refills with one
 * uslab_cache_alloc_bulk(); when it runs full, the colder half (the bottom
 * of the stack, the objects freed longest ago) goes back with one
 * uslab_cache_free_bulk() - the policy of Linux's NAPI skb cache, jemalloc's
 * tcache and DPDK's mempool cache. It can be used for allocation and for
 * freeing alike; in a producer/consumer pipeline an RX context may only
 * allocate from its magazine and a TX-completion context only free into its
 * own.
 *
 * A free batch (struct uslab_free_batch) is what the Linux NAPI skb-head
 * bulking patches call a free waitlist (dev_free_waitlist): an
 * array on the caller's stack that a loop adds objects to (a walk over a
 * completion ring) and that is handed to uslab_cache_free_bulk() whenever
 * it is full and once at the end.
 *
 * As in <uslab/fastpath.h>, the fast paths are inline: uslab_magazine_alloc,
 * uslab_magazine_free, their _bulk forms, uslab_magazine_count and
 * uslab_free_batch_add are function-like macros for the inline versions
 * below; the exported functions of the same names remain. USLAB_NO_INLINE,
 * AddressSanitizer and ThreadSanitizer turn the macros off (the library's
 * versions poison resting objects for ASan).
 *
 * The two structures are visible so the fast paths can be inline; their
 * layout is part of the ABI of libuslab.so.0. A program reads the counters
 * (refills, flushes) and never writes any field.
 */
#ifndef USLAB_MAGAZINE_H
#define USLAB_MAGAZINE_H

#include <uslab.h>

#ifdef __cplusplus
extern "C" {
#endif

/** USLAB_MAGAZINE_CAPACITY - objects a magazine holds by default (NAPI's 64). */
#define USLAB_MAGAZINE_CAPACITY 64
/** USLAB_MAGAZINE_REFILL - objects an empty magazine takes by default (NAPI's 16). */
#define USLAB_MAGAZINE_REFILL 16
/** USLAB_MAGAZINE_MAX_CAPACITY - the largest capacity a magazine may have. */
#define USLAB_MAGAZINE_MAX_CAPACITY (1u << 20)
/** USLAB_FREE_BATCH_SIZE - objects a free batch holds before it flushes. */
#define USLAB_FREE_BATCH_SIZE 64

/**
 * struct uslab_magazine - a caller-owned stack of free objects of one cache.
 * @count:    objects the magazine holds.
 * @capacity: objects it can hold; 0 in a magazine of a debug cache, which
 *            caches nothing (every free goes to the cache, checked) but
 *            keeps the reserve uslab_magazine_fill() and _prefill() put in:
 *            there @count may exceed @capacity.
 * @cache:    the cache the objects belong to.
 * @refill:   objects one refill asks the cache for.
 * @refills:  bulk allocations the magazine made from its cache.
 * @flushes:  bulk frees the magazine made to its cache (half flushes when
 *            full, and uslab_magazine_flush() or _destroy() of a non-empty
 *            magazine).
 * @objs:     the stack: objs[0] is the oldest object, objs[count - 1] the
 *            newest (the next one handed out); @capacity entries, from the
 *            second cache line of the allocation on.
 *
 * The first cache line holds everything the fast paths and the counters
 * use. The fill level is an integer, not a pointer, and the array is part
 * of the structure, not pointed to: a caller's loop that stores the objects
 * it takes into an array of pointers (a ring of packets) cannot alias
 * either, so the compiler neither reloads a pointer nor waits for one after
 * every store.
 */
struct uslab_magazine {
	unsigned int count;
	unsigned int capacity;
	struct uslab_cache *cache;
	unsigned int refill;
	unsigned int uslab_priv_capacity; /* the library's: a debug cache's array size */
	unsigned long refills;
	unsigned long flushes;
	uintptr_t uslab_priv_free_key; /* the cache's free key (<uslab/inline/priv.h>) */
	unsigned long reserved[2];
#if defined(__cplusplus) && defined(__clang__)
	/* C++ has no flexible array member: clang's extension, not a -pedantic error. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#endif
	__extension__ void *objs[];
#if defined(__cplusplus) && defined(__clang__)
#pragma clang diagnostic pop
#endif
};

/**
 * struct uslab_free_batch - objects waiting for one bulk free; lives on the
 * caller's stack, set up by uslab_free_batch_init().
 * @cache: the cache of every object, or NULL: each object's cache is found
 *         from its address, so one batch may mix caches (kfree_bulk()).
 * @n:     objects waiting.
 * @objs:  the objects.
 */
struct uslab_free_batch {
	struct uslab_cache *cache;
	unsigned int n;
	void *objs[USLAB_FREE_BATCH_SIZE];
};

/**
 * uslab_magazine_create - create an empty magazine for objects of @c.
 * @c:        the cache.
 * @capacity: objects the magazine holds, 1..USLAB_MAGAZINE_MAX_CAPACITY;
 *            0 means USLAB_MAGAZINE_CAPACITY (64).
 * @refill:   objects an empty magazine takes with one bulk allocation,
 *            1..@capacity; 0 means USLAB_MAGAZINE_REFILL (16), or @capacity
 *            if that is smaller.
 *
 * The magazine starts empty; its first allocation refills it. When a free
 * finds it full, capacity / 2 objects (at least one), the oldest, go back to
 * @c with one bulk free.
 *
 * Context: any thread. The magazine then belongs to the caller, who may
 * hand it to another thread (through a join, a lock or a queue: anything
 * that orders the two threads' accesses). Two threads at once is reported
 * ("uslab: BUG <cache>: magazine used by two threads at once", abort) by
 * the first slow path that sees it, before its array or cache is touched.
 * Return: the magazine; or NULL with errno set:
 *   EINVAL - @c is NULL, @capacity above USLAB_MAGAZINE_MAX_CAPACITY, or
 *            @refill above the capacity;
 *   ENOMEM - no memory for the magazine.
 */
USLAB_API struct uslab_magazine *uslab_magazine_create(struct uslab_cache *c, unsigned int capacity,
						       unsigned int refill);

/**
 * uslab_magazine_prefill - create a magazine holding at least @n objects.
 * @c: the cache.
 * @n: objects guaranteed, 0..USLAB_MAGAZINE_MAX_CAPACITY / 2.
 *
 * A reserve for a caller that must not fail midway (Linux 6.18's
 * kmem_cache_prefill_sheaf): borrow the worst case, take objects with
 * uslab_magazine_alloc() (the first @n cannot fail and make no library
 * call), and give the rest back with uslab_magazine_destroy(). The capacity
 * is max(2 * @n, USLAB_MAGAZINE_CAPACITY), so frees into the reserve do not
 * flush at once; the refill is the default.
 *
 * Context: any thread; the magazine belongs to the caller.
 * Return: the magazine, holding at least @n objects; or NULL with errno set:
 *   EINVAL - @c is NULL or @n above USLAB_MAGAZINE_MAX_CAPACITY / 2;
 *   ENOMEM - no memory for the magazine or the objects (nothing is kept).
 */
USLAB_API struct uslab_magazine *uslab_magazine_prefill(struct uslab_cache *c, unsigned int n);

/**
 * uslab_magazine_fill - top a magazine up to at least @n objects.
 * @m: the magazine.
 * @n: objects wanted, up to the magazine's capacity.
 *
 * One bulk allocation of what is missing, all or nothing.
 *
 * Context: owner of @m.
 * Return: 0 - @m holds at least @n objects (nothing was done if it did);
 *         -EINVAL - @m is NULL or @n exceeds its capacity;
 *         -ENOMEM - the objects could not be allocated; @m is unchanged.
 */
USLAB_API int uslab_magazine_fill(struct uslab_magazine *m, unsigned int n);

/**
 * uslab_magazine_alloc - take one object from a magazine.
 * @m: the magazine.
 *
 * Pops the stack (inline: a compare, a decrement, a load). An empty
 * magazine first refills with one uslab_cache_alloc_bulk() of @m->refill
 * objects; if that fails, one uslab_cache_alloc() is tried.
 *
 * Context: owner of @m.
 * Return: an object of @m's cache (contents as uslab_cache_alloc()'s); or
 * NULL with errno ENOMEM when the magazine was empty and no memory could be
 * obtained.
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_magazine_alloc(struct uslab_magazine *m);

/**
 * uslab_magazine_free - put one object into a magazine.
 * @m:   the magazine.
 * @obj: an object of @m's cache (allocated from it by any means: the
 *       magazine, the cache, another magazine), or NULL (nothing is done).
 *
 * Pushes the stack (inline: two compares and a store). A full magazine
 * first returns its older half to the cache with one uslab_cache_free_bulk().
 * The object rests in the magazine and is handed out again by it. An
 * object freed twice (to the magazine or to the cache, in either order) is
 * caught at the call by the free key, as for uslab_cache_free(); a foreign
 * pointer only when the object reaches its slab.
 *
 * Context: owner of @m.
 */
USLAB_API void uslab_magazine_free(struct uslab_magazine *m, void *obj);

/**
 * uslab_magazine_alloc_bulk - take @n objects from a magazine.
 * @m: the magazine.
 * @n: objects wanted, any number.
 * @p: an array of at least @n entries.
 *
 * All or nothing. What the magazine holds is copied out (inline for up to
 * 16 objects it holds, by the library's memcpy above). A shortfall smaller than @m->refill is allocated onto the
 * magazine with one bulk allocation of the shortfall plus @m->refill
 * (capped by the capacity); a larger one goes straight into @p with one
 * bulk allocation, and the magazine is left empty.
 *
 * Context: owner of @m.
 * Return: @n - p[0..n) filled;
 *         0  - nothing taken: @n was 0, or errno is ENOMEM (the magazine is
 *              as it was).
 */
USLAB_API size_t uslab_magazine_alloc_bulk(struct uslab_magazine *m, size_t n, void **p);

/**
 * uslab_magazine_free_bulk - put an array of objects into a magazine.
 * @m: the magazine.
 * @n: entries in @p.
 * @p: objects of @m's cache; NULL entries are skipped. Every entry is NULL
 *     on return, as with uslab_cache_free_bulk().
 *
 * Pushes what fits (inline for up to 16 objects that fit, by memcpy in the
 * library above, if @p has no hole); when the magazine runs
 * full its older half goes back with one bulk free; objects beyond what a
 * half-empty magazine could take go straight to the cache with one bulk
 * free.
 *
 * Context: owner of @m.
 */
USLAB_API void uslab_magazine_free_bulk(struct uslab_magazine *m, size_t n, void **p);

/**
 * uslab_magazine_count - objects resting in a magazine.
 * @m: the magazine.
 *
 * Context: owner of @m.
 * Return: the number of objects @m holds, 0..capacity.
 */
USLAB_API unsigned int uslab_magazine_count(const struct uslab_magazine *m);

/**
 * uslab_magazine_flush - return every object of a magazine to its cache.
 * @m: the magazine, or NULL (nothing is done).
 *
 * One uslab_cache_free_bulk() of everything @m holds, into the calling
 * thread's sheaves and from there to the slabs as usual. The magazine stays
 * usable (empty).
 *
 * Context: owner of @m.
 */
USLAB_API void uslab_magazine_flush(struct uslab_magazine *m);

/**
 * uslab_magazine_destroy - return every object of a magazine and free it.
 * @m: the magazine, or NULL (nothing is done).
 *
 * uslab_magazine_flush(), then the magazine's own memory is freed. Must be
 * called before the cache is destroyed: objects resting in a magazine are
 * live as far as the cache can tell (uslab_cache_destroy() returns -EBUSY).
 *
 * Context: owner of @m; @m is invalid afterwards.
 */
USLAB_API void uslab_magazine_destroy(struct uslab_magazine *m);

/**
 * uslab_free_batch_init - prepare an empty free batch.
 * @b: the batch (usually on the caller's stack).
 * @c: the cache of every object to be added, or NULL for objects of any
 *     caches (each is freed to its own).
 *
 * Context: owner of @b.
 */
USLAB_API void uslab_free_batch_init(struct uslab_free_batch *b, struct uslab_cache *c);

/**
 * uslab_free_batch_add - add an object to a free batch.
 * @b:   the batch.
 * @obj: the object, or NULL (nothing is done). The caller gives it up: it
 *       is freed by the batch, now or at the latest at the next
 *       uslab_free_batch_flush().
 *
 * Stores the pointer (inline: a store, an increment and a compare); the
 * USLAB_FREE_BATCH_SIZE-th object flushes the batch with one
 * uslab_cache_free_bulk().
 *
 * Context: owner of @b; the calling thread's sheaves take the objects.
 */
USLAB_API void uslab_free_batch_add(struct uslab_free_batch *b, void *obj);

/**
 * uslab_free_batch_flush - free every object waiting in a batch.
 * @b: the batch.
 *
 * One uslab_cache_free_bulk() of the objects waiting, if any; the batch is
 * empty and usable afterwards. Call it when the loop that fills the batch
 * ends: objects left in a batch that goes out of scope leak.
 *
 * Context: owner of @b.
 */
USLAB_API void uslab_free_batch_flush(struct uslab_free_batch *b);

/* ------------------------------------------------------ inline fast paths */

/* The uslab_priv_* names below: the private ABI, <uslab/inline/priv.h> (the slow paths' returns). */
#include <uslab/inline/priv.h>

/*
 * Pop: about 9 instructions and two branches (empty; the free key, which
 * only a cache created with USLAB_FREE_KEY has), no lock, no atomic, no
 * TLS access: the magazine's first line and the array slot (and, with the
 * key, the object's first word, cleared). The slow path (a refill) runs
 * once per @refill objects at most.
 */
static inline __attribute__((__always_inline__)) void *
uslab_magazine_alloc_inline(struct uslab_magazine *m)
{
	unsigned int n = m->count;
	void *obj;

	/* n - 1 >= capacity: empty, or a count no single owner leaves (reported: magazine.c). */
	if (__builtin_expect(n - 1 >= m->capacity, 0)) {
		n = uslab_priv_magazine_refill(m);
		if (__builtin_expect(!n, 0))
			return uslab_priv_magazine_alloc_slow(m);
	}
	m->count = --n;
	obj = m->objs[n];
	/* (NULL only from a slot never written, after two threads raced on @m) */
	if (__builtin_expect(m->uslab_priv_free_key != 0, 0) &&
	    __builtin_expect(obj != (void *)0, 1))
		uslab_priv_free_unmark(obj);
	return obj;
}

/*
 * Push: about 10 instructions and three branches (NULL, full, the free key:
 * with it, an object free already is a double free); the slow path (a half
 * flush) runs once per capacity / 2 objects at most.
 */
static inline __attribute__((__always_inline__)) void
uslab_magazine_free_inline(struct uslab_magazine *m, void *obj)
{
	unsigned int n = m->count;

	if (__builtin_expect(!obj, 0))
		return;
	if (__builtin_expect(n >= m->capacity, 0)) { /* >=: see uslab_priv_magazine_make_room */
		n = uslab_priv_magazine_free_slow(m, obj);
		if (__builtin_expect(n == ~0u, 0))
			return; /* a debug cache's magazine: freed to the cache, checked */
	}
	if (__builtin_expect(m->uslab_priv_free_key != 0, 0))
		uslab_priv_free_mark(m->cache, obj, m->uslab_priv_free_key);
	m->objs[n] = obj;
	m->count = n + 1;
}

/*
 * Bulk calls of up to USLAB_PRIV_BULK_INLINE (16) objects are served inline
 * when the magazine can; larger ones call the library, whose copies run at
 * memcpy speed (an inline loop moves about one pointer per cycle).
 */

/* Copy n objects off the magazine when it holds them: a compare and a copy. */
static inline __attribute__((__always_inline__)) size_t
uslab_magazine_alloc_bulk_inline(struct uslab_magazine *m, size_t n, void **p)
{
	unsigned int k = m->count;
	void **top;

	/* k > capacity: a slow path of another thread (reported there) or a debug cache's. */
	if (__builtin_expect(n > k || !n || n > USLAB_PRIV_BULK_INLINE || k > m->capacity, 0))
		return (uslab_magazine_alloc_bulk)(m, n, p);
	k -= (unsigned int)n;
	top = m->objs + k;
	for (size_t i = 0; i < n; i++)
		p[i] = top[i];
	m->count = k;
	if (__builtin_expect(m->uslab_priv_free_key != 0, 0))
		for (size_t i = 0; i < n; i++)
			if (__builtin_expect(p[i] != (void *)0, 1)) /* (as in the pop) */
				uslab_priv_free_unmark(p[i]);
	return n;
}

/* Push n objects (skipping NULLs, clearing the array) when they fit. */
static inline __attribute__((__always_inline__)) void
uslab_magazine_free_bulk_inline(struct uslab_magazine *m, size_t n, void **p)
{
	unsigned int k = m->count;
	void **objs = m->objs;

	if (__builtin_expect(n > USLAB_PRIV_BULK_INLINE || k + n > m->capacity, 0)) {
		(uslab_magazine_free_bulk)(m, n, p);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		void *o = p[i];

		p[i] = (void *)0;
		if (o) {
			if (__builtin_expect(m->uslab_priv_free_key != 0, 0))
				uslab_priv_free_mark(m->cache, o, m->uslab_priv_free_key);
			objs[k++] = o;
		}
	}
	m->count = k;
}

static inline __attribute__((__always_inline__)) unsigned int
uslab_magazine_count_inline(const struct uslab_magazine *m)
{
	return m->count;
}

/* A store, an increment, a compare; one bulk free per USLAB_FREE_BATCH_SIZE. */
static inline __attribute__((__always_inline__)) void
uslab_free_batch_add_inline(struct uslab_free_batch *b, void *obj)
{
	if (__builtin_expect(!obj, 0))
		return;
	b->objs[b->n++] = obj;
	if (__builtin_expect(b->n == USLAB_FREE_BATCH_SIZE, 0))
		uslab_free_batch_flush(b);
}

#ifdef USLAB_PRIV_INLINE /* <uslab/fastpath.h> */
#define uslab_magazine_alloc(m) uslab_magazine_alloc_inline(m)
#define uslab_magazine_free(m, obj) uslab_magazine_free_inline((m), (obj))
#define uslab_magazine_alloc_bulk(m, n, p) uslab_magazine_alloc_bulk_inline((m), (n), (p))
#define uslab_magazine_free_bulk(m, n, p) uslab_magazine_free_bulk_inline((m), (n), (p))
#define uslab_magazine_count(m) uslab_magazine_count_inline(m)
#define uslab_free_batch_add(b, obj) uslab_free_batch_add_inline((b), (obj))
#endif

#ifdef __cplusplus
}
#endif

#endif /* USLAB_MAGAZINE_H */
