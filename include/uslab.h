/* SPDX-License-Identifier: MIT */
/*
 * uslab.h - the Linux kernel's slab allocator system, in userspace.
 *
 * An object cache (struct uslab_cache) hands out objects of one size.
 * Each thread keeps two small arrays of free objects per cache (sheaves);
 * allocating and freeing pop and push those arrays without a lock or an
 * atomic instruction. Sheaves are exchanged whole with a per-cache barn,
 * refilled from slabs and flushed back to them in batches.
 *
 * Contracts of every function are in doc/api.md as well as here.
 * "Context" says which threads may call a function:
 *   any thread - at any time, concurrently with anything, including
 *                from a thread other than the one that allocated;
 *   owner      - a caller who guarantees no concurrent use of the object
 *                named (for a cache: no concurrent allocation or free on it).
 * No uslab function may be called from a signal handler.
 */
#ifndef USLAB_H
#define USLAB_H

#include <stddef.h>
#include <stdio.h>
#include <uslab/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

#define USLAB_VERSION_MAJOR 0
#define USLAB_VERSION_MINOR 1

#if defined(__GNUC__)
#define USLAB_API __attribute__((__visibility__("default")))
#define USLAB_MALLOC_ATTR __attribute__((__malloc__))
#else
#define USLAB_API
#define USLAB_MALLOC_ATTR
#endif
/* The pointer argument @n is an address only: its bytes are not read (no uninitialised warning). */
#if defined(__has_attribute) && !defined(USLAB_NO_ACCESS)
#if __has_attribute(__access__)
#define USLAB_NO_ACCESS(n) __attribute__((__access__(__none__, n)))
#endif
#endif
#ifndef USLAB_NO_ACCESS
#define USLAB_NO_ACCESS(n)
#endif

/* Cache creation flags (values follow the kernel's SLAB_* flags). */
/** USLAB_HWCACHE_ALIGN - align objects on a cache line (halved for small objects, like SLAB_HWCACHE_ALIGN). */
#define USLAB_HWCACHE_ALIGN 0x00002000u
/*
 * The debug tier (doc/api.md, "Finding bugs"; USLAB_DEBUG turns it on for
 * caches by name without a rebuild). Every call of a cache with any of
 * these flags, inline ones included, takes the library's checked path
 * (its sheaves hold free objects only, checked when they go in and out).
 */
/** USLAB_CONSISTENCY_CHECKS - F: every free checked at the call (pointer, cache, boundary, state). */
#define USLAB_CONSISTENCY_CHECKS 0x00000100u
/** USLAB_RED_ZONE - Z: red zones around every object, checked on free and by validate. */
#define USLAB_RED_ZONE 0x00000400u
/** USLAB_POISON - P: free objects poisoned, checked when handed out again. */
#define USLAB_POISON 0x00000800u
/** USLAB_STORE_USER - U: call site, thread and time of each object's last alloc and free. */
#define USLAB_STORE_USER 0x00010000u

/*
 * Pool mode (the rte_mempool_create() shape; doc/api.md, "Pools").
 * USLAB_POOL - free objects stay pointers in the sheaves, the barn and the
 *   cache's loose array, never back in a slab until uslab_cache_shrink() or
 *   uslab_cache_destroy(); uslab_cache_args.reserve objects are allocated at
 *   creation. The debug tier ignores it (each free goes to its slab, checked).
 * USLAB_POOL_EXTERNAL - a pool without slabs: its objects are the caller's
 *   memory, handed in by freeing them (uslab_pool_put_bulk(),
 *   uslab_cache_free(), uslab_cache_free_bulk()); it implies USLAB_POOL.
 *   Allocation from an exhausted one fails with ENOBUFS. uslab never writes
 *   into its objects.
 */
#define USLAB_POOL 0x00100000u
#define USLAB_POOL_EXTERNAL 0x00200000u
/*
 * Per-CPU sheaves (doc/api.md, "Per-CPU sheaves"; doc/tuning.md,
 * USLAB_PERCPU). USLAB_PERCPU - the cache's sheaves are per CPU from the
 * start (committed with restartable sequences) instead of per thread, so
 * the memory they hold is bounded by the CPUs, not the threads; where rseq
 * or membarrier cannot serve (uslab_percpu_supported() returns 0), or the
 * environment says USLAB_PERCPU=0, the flag is ignored and the sheaves stay
 * per thread. Without the flag, USLAB_PERCPU=auto (the default) switches a
 * cache to per-CPU sheaves once more threads hold its sheaves than
 * USLAB_PERCPU_THREADS times the CPUs; USLAB_PERCPU=1 makes every cache
 * with sheaves per CPU.
 */
#define USLAB_PERCPU 0x00400000u
/*
 * The free key (doc/design.md, "Free checks"; doc/api.md, "Finding bugs").
 * USLAB_FREE_KEY - glibc-level double-free checks for this cache, opted
 *   into: uslab writes a random word into the first word of each object
 *   freed into a sheaf, a CPU's sheaf or a magazine and clears it when the
 *   object is handed out, so a free that finds it there stops the program
 *   at the call ("double free"). Every call of such a cache, inline ones
 *   included, takes the library's path (the inline paths never touch an
 *   object). Ignored where the first word is not uslab's to write: caches
 *   with a constructor, USLAB_TYPESAFE_BY_RCU, pools, the debug tier (which
 *   checks more). USLAB_FREE_KEY=1 in the environment gives it to every
 *   cache (doc/tuning.md). Without it (the default, as in Linux's sheaves
 *   and DPDK's mempool) no free object is read or written on the object
 *   cache paths, and a double free is found by the naive check (the object
 *   on top of the sheaf), when the object reaches its slab, by the sampling
 *   guard, or at the call in the debug tier.
 * USLAB_NO_FREE_KEY - never the key for this cache, whatever the
 *   environment says (the malloc drop-in's classes have it by default).
 */
#define USLAB_NO_FREE_KEY 0x01000000u
#define USLAB_FREE_KEY 0x02000000u

/** USLAB_MAX_OBJECT_SIZE - the largest object a cache may hold (16 MiB). */
#define USLAB_MAX_OBJECT_SIZE (16ul << 20)
/** USLAB_MAX_ALIGN - the largest alignment a cache may ask for (one page). */
#define USLAB_MAX_ALIGN 4096ul
/** USLAB_NAME_MAX - the longest cache name, not counting the terminating NUL. */
#define USLAB_NAME_MAX 63
/**
 * USLAB_MAX_CACHES - cache ids: caches with sheaves that may exist at the
 * same time, the kmalloc classes' 80 included (a program may create 4016).
 */
#define USLAB_MAX_CACHES 4096

struct uslab_cache;

/**
 * struct uslab_cache_args - optional arguments of uslab_cache_create().
 * @align:  minimum object alignment, a power of two up to USLAB_MAX_ALIGN;
 *          0 means 8 (every object is at least 8-byte aligned).
 * @ctor:   called once on every object when its slab is created, never
 *          again; the allocator never writes into an object of a cache
 *          with a constructor, so the constructed state survives
 *          free/alloc cycles. NULL: no constructor.
 * @sheaf_capacity: objects per sheaf; 0 chooses from the object size
 *          (see doc/tuning.md). Rounded down to one of 2, 6, 14, 30, 62,
 *          126, 254, 510, 1022. The value 1 asks for a cache without sheaves (every
 *          allocation takes the node lock; for rarely used caches).
 * @min_partial: empty slabs the cache keeps before it returns slabs to
 *          the OS; 0 chooses like SLUB (5..10 from the object size).
 * @layout: how a slab keeps track of its free objects, one of enum
 *          uslab_layout; 0 (USLAB_LAYOUT_AUTO) chooses by the rules in
 *          doc/design.md ("Slab layouts"), or takes the USLAB_LAYOUT
 *          environment variable when it is set.
 * @reserve: USLAB_POOL: objects allocated at creation and kept free, as
 *          pointers, for the first allocations; USLAB_POOL_EXTERNAL: how
 *          many objects the caller will hand in (room for that many
 *          pointers is reserved, so none is ever dropped); 0: none.
 *          Ignored without those flags.
 * @node:   a pool's NUMA node (USLAB_POOL, USLAB_POOL_EXTERNAL): where a
 *          pool's reserve is allocated and its loose pointers are kept,
 *          and the node uslab_cache_node_stats() counts them on (a DPDK
 *          pool's socket_id). 0 or USLAB_NUMA_NO_NODE: the creating
 *          thread's node; another node id: that node, or the nearest one
 *          with memory; USLAB_NODE_STRICT or'd in: that node's memory or
 *          ENOMEM (node 0 from another node: 0 | USLAB_NODE_STRICT). An
 *          external pool's objects are the caller's, on its node already:
 *          the node named, strict or not, memory or not. Ignored by other
 *          caches and with NUMA off (checked all the same: EINVAL).
 *
 * Zero-initialise the structure and set the fields you need: fields added
 * in later versions keep 0 as "default".
 */
struct uslab_cache_args {
	size_t align;
	void (*ctor)(void *obj);
	unsigned int sheaf_capacity;
	unsigned int min_partial;
	unsigned int layout;
	size_t reserve;
	int node;
};

/**
 * enum uslab_layout - where a slab keeps its free objects (SLUB's free
 * pointer, or one of SLAB's index-array management types).
 * @USLAB_LAYOUT_AUTO:        choose (USLAB_LAYOUT, else the rules of doc/design.md).
 * @USLAB_LAYOUT_FREEPTR:     a pointer stored in each free object links them
 *                            (after the object in caches with a constructor or
 *                            USLAB_TYPESAFE_BY_RCU, which costs 8 bytes each).
 * @USLAB_LAYOUT_OBJFREELIST: an array of object indices (1 or 2 bytes each),
 *                            kept inside one free object of the slab; needs no
 *                            constructor, no USLAB_TYPESAFE_BY_RCU and an object
 *                            at least as large as the array (8 bytes larger in
 *                            a cache with the free key, whose first word the
 *                            array leaves alone).
 * @USLAB_LAYOUT_ONSLAB:      the index array in the slab's leftover bytes, or in
 *                            room reserved at the slab's end.
 * @USLAB_LAYOUT_OFFSLAB:     the index array allocated apart from the slab (at
 *                            most 4 KiB of indices).
 *
 * With the three index layouts the allocator reads and writes no byte of an
 * object to free it or hand it out (OBJFREELIST: except the one object that
 * holds the array while it is free; a cache created with USLAB_FREE_KEY:
 * except the first 8 bytes, where the key goes), with sheaves, per-CPU
 * sheaves, bulk calls and magazines too. A layout that cannot serve a cache
 * (a constructor with OBJFREELIST, more than 65536 objects in a slab, an
 * array too large) makes uslab_cache_create() fail with EINVAL.
 */
enum uslab_layout {
	USLAB_LAYOUT_AUTO = 0,
	USLAB_LAYOUT_FREEPTR,
	USLAB_LAYOUT_OBJFREELIST,
	USLAB_LAYOUT_ONSLAB,
	USLAB_LAYOUT_OFFSLAB,
	USLAB_LAYOUT_NR
};

/**
 * uslab_layout_name - the name of a layout, as USLAB_LAYOUT accepts it:
 * "auto", "freeptr", "objfreelist", "onslab", "offslab".
 * @layout: an enum uslab_layout value.
 *
 * Context: any thread.
 * Return: the name (static storage), or NULL for a value out of range.
 */
USLAB_API const char *uslab_layout_name(unsigned int layout);

/**
 * uslab_cache_create - create a cache of objects of one size.
 * @name:  a name for reports and statistics, at most USLAB_NAME_MAX bytes;
 *         copied.
 * @size:  object size in bytes, 1..USLAB_MAX_OBJECT_SIZE.
 * @args:  optional arguments, or NULL for all defaults.
 * @flags: 0, or any of USLAB_HWCACHE_ALIGN, USLAB_TYPESAFE_BY_RCU
 *         (uslab/rcu.h) and the debug tier's USLAB_CONSISTENCY_CHECKS,
 *         USLAB_RED_ZONE, USLAB_POISON, USLAB_STORE_USER (every call of
 *         a debug cache is checked; USLAB_POISON is ignored in caches with a
 *         constructor or USLAB_TYPESAFE_BY_RCU, whose free objects the
 *         allocator may not write), USLAB_POOL or USLAB_POOL_EXTERNAL
 *         (not with a constructor, USLAB_TYPESAFE_BY_RCU or sheaf_capacity 1;
 *         USLAB_POOL_EXTERNAL not with the debug tier), USLAB_PERCPU
 *         (ignored where per-CPU sheaves cannot run, and by pools and
 *         caches without sheaves), USLAB_FREE_KEY or
 *         USLAB_NO_FREE_KEY (not both).
 *
 * Context: any thread.
 * Return: the new cache; or NULL with errno set:
 *   EINVAL - @name NULL or too long, @size 0 or above USLAB_MAX_OBJECT_SIZE,
 *            @args->align not a power of two or above USLAB_MAX_ALIGN,
 *            unknown bits in @flags, @args->layout unknown or unable to
 *            serve this size, alignment and flags, a pool flag with a
 *            constructor, USLAB_TYPESAFE_BY_RCU or no sheaves,
 *            USLAB_FREE_KEY with USLAB_NO_FREE_KEY, @args->node neither
 *            0, USLAB_NUMA_NO_NODE nor a node id (with USLAB_NODE_STRICT
 *            or not);
 *   ENOSPC - USLAB_MAX_CACHES caches with sheaves already exist (less
 *            the kmalloc classes' ids, kept for them: 4016 of the program's);
 *   ENOMEM - no memory for the cache descriptor, or for a pool's
 *            @args->reserve objects (with USLAB_NODE_STRICT in @args->node:
 *            on that node).
 */
USLAB_API struct uslab_cache *uslab_cache_create(const char *name, size_t size,
						 const struct uslab_cache_args *args,
						 unsigned int flags);

/**
 * uslab_cache_destroy - destroy a cache whose objects have all been freed.
 * @c: the cache, or NULL (nothing is done, 0 is returned).
 *
 * Objects that other threads keep in their sheaves and the barn's sheaves
 * are reclaimed first; they do not count as live. In a process that has
 * deferred a free (uslab_free_rcu(), a USLAB_TYPESAFE_BY_RCU slab), it
 * first waits for every deferred free (uslab_rcu_barrier(), as Linux's
 * kmem_cache_destroy() waits for kfree_rcu()): objects of @c passed to
 * uslab_free_rcu() before the call are freed, not live. If objects are still
 * held by the program, the cache is left intact and usable (with its
 * cached objects returned to its slabs), a one-line complaint is written
 * to stderr as kmem_cache_destroy() does, and -EBUSY is returned.
 *
 * Context: owner - no thread may allocate from or free to @c during the
 * call, and the program's last use of @c on every thread must happen
 * before the call (for example through a join, a lock or a queue). When it
 * waits for a grace period (above, and always for a USLAB_TYPESAFE_BY_RCU
 * cache): not inside a read-side critical section.
 * Return: 0 - destroyed, every slab given back to the OS;
 *         -EBUSY - objects are live, nothing destroyed;
 *         -EPERM - @c belongs to uslab (a kmalloc size class), nothing
 *                  destroyed (a one-line complaint on stderr).
 */
USLAB_API int uslab_cache_destroy(struct uslab_cache *c);

/**
 * uslab_cache_shrink - give this thread's and the barn's cached objects
 * back to the slabs and every empty slab back to the OS.
 * @c: the cache.
 *
 * Objects cached by other threads stay where they are (call
 * uslab_thread_flush() on those threads to return them); a per-CPU
 * cache's sheaves are every thread's, and all CPUs' come back.
 *
 * Context: any thread.
 * Return: 0 - done; -EINVAL - @c is NULL.
 */
USLAB_API int uslab_cache_shrink(struct uslab_cache *c);

/**
 * uslab_trim - give every free page back to the OS now.
 *
 * Flushes this thread's sheaves and shrinks every cache (as
 * uslab_cache_shrink() on each: the barns' and the empty slabs' memory goes
 * to the page heap), then purges every page the heap retains
 * (madvise(MADV_DONTNEED), one call per contiguous free run) and unmaps its
 * idle arenas. Objects other threads cache stay where they are (call
 * uslab_thread_flush() on those threads first). Pages freed later are
 * purged by the heap's decay as usual (doc/tuning.md: USLAB_PURGE_DELAY_MS).
 * The malloc drop-in's malloc_trim() calls it.
 *
 * Context: any thread; not from inside a uslab callback (a constructor, an
 * RCU callback). May take milliseconds: a system call per free run.
 * Return: the bytes given back to the OS by this call (0 if none).
 */
USLAB_API size_t uslab_trim(void);

/**
 * uslab_heap_stats - the page heap's figures: what it maps, uses and
 * retains, and what it has given back.
 * @st: filled in on success (struct uslab_heap_stats, <uslab/stats.h>).
 *
 * Context: any thread.
 * Return: 0 - @st filled in; -EINVAL - @st is NULL.
 */
USLAB_API int uslab_heap_stats(struct uslab_heap_stats *st);

/**
 * uslab_cache_alloc - allocate one object.
 * @c: the cache. NULL, or a cache already destroyed (while its descriptor
 *     is not reused), stops the program with "uslab: BUG -: allocation of
 *     a NULL cache" (or "... of a destroyed cache"); the same holds for
 *     every call below that takes a cache.
 *
 * The fast path pops the thread's main sheaf: no lock, no atomic
 * instruction; it is compiled inline into the caller (see
 * <uslab/fastpath.h>; USLAB_NO_INLINE turns that off). The object's
 * contents are undefined unless the cache has a constructor (then it is in
 * the state the program left it when freeing, or constructed).
 *
 * Context: any thread.
 * Return: the object, aligned as the cache promises; or NULL with errno
 * set to ENOMEM when no memory could be obtained from the OS.
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_cache_alloc(struct uslab_cache *c);

/**
 * uslab_cache_zalloc - allocate one object filled with zero bytes.
 * @c: the cache.
 *
 * Context: any thread.
 * Return: as uslab_cache_alloc().
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_cache_zalloc(struct uslab_cache *c);

/**
 * uslab_cache_free - free one object.
 * @c:   the cache @obj was allocated from; or NULL: the object's own cache
 *       is found from its address, as kfree() does.
 * @obj: the object, or NULL (nothing is done).
 *
 * Any thread may free an object, whichever thread allocated it. The fast
 * path pushes the thread's main sheaf, inline like uslab_cache_alloc's.
 * Freeing an object to the wrong
 * cache, twice, or a pointer that uslab did not hand out is a bug in the
 * program; uslab stops the program with "uslab: BUG <cache>: <what> at
 * <address>". An object freed twice is caught at the second call, however
 * many frees came between and whichever thread made them (the free key,
 * written into the first word of a free object: doc/design.md, "Free
 * checks"; not for caches with a constructor or TYPESAFE_BY_RCU, nor
 * pools). Everything is caught at the call in a debug cache (USLAB_DEBUG,
 * doc/api.md) and in the library's paths (USLAB_NO_INLINE); a foreign or
 * interior pointer, or one of another cache, freed inline is caught when
 * the object reaches its slab (doc/design.md, "What each tier catches").
 *
 * Context: any thread.
 */
USLAB_API void uslab_cache_free(struct uslab_cache *c, void *obj);

/**
 * uslab_cache_alloc_bulk - allocate @n objects at once.
 * @c: the cache.
 * @n: objects wanted, any number.
 * @p: an array of at least @n entries (NULL: 0 is returned, errno EINVAL).
 *
 * All or nothing, like kmem_cache_alloc_bulk() and rte_mempool_get_bulk():
 * either every entry of p[0..n) holds a new object, or no object was taken
 * (the entries are then undefined). A request the thread's main sheaf can
 * serve is a copy of pointers (inline); more comes from the sheaves, the
 * barn, and straight from slabs, whole slab freelists at a time.
 *
 * Context: any thread.
 * Return: @n - p[0..n) filled;
 *         0  - nothing taken: @n was 0, or errno is ENOMEM (the OS refused
 *              memory; the objects taken before the failure were returned),
 *              or EINVAL (@p NULL).
 */
USLAB_API size_t uslab_cache_alloc_bulk(struct uslab_cache *c, size_t n, void **p);

/**
 * uslab_cache_free_bulk - free an array of objects.
 * @c: the cache of every object; or NULL: each object's cache is found
 *     from its address, so one array may mix caches (this is kfree_bulk()).
 * @n: entries in @p.
 * @p: the objects; NULL entries (and USLAB_ZERO_SIZE_PTR) are skipped. Every entry is NULL on return,
 *     so no dangling pointer is left in the caller's array. NULL: nothing is done.
 *
 * What fits goes into the thread's sheaves; the rest goes straight to the
 * slabs: objects of one slab are linked into a detached freelist inside
 * the objects themselves and handed over together, one node lock for up to
 * 32 slabs. The look-ahead that decides how far to scan for more objects
 * of the same slab is USLAB_LOOKAHEAD (default 3, the value Linux's
 * "slub: build detached freelist with look-ahead" settled on).
 * Misuse (a double free, a foreign pointer) is reported like
 * uslab_cache_free()'s.
 *
 * Context: any thread.
 */
USLAB_API void uslab_cache_free_bulk(struct uslab_cache *c, size_t n, void **p);

/*
 * NUMA. On a machine with two nodes or more (or under USLAB_NUMA_FAKE),
 * each cache keeps its slabs per node: a thread's allocations come from
 * the node of the CPU it runs on, and a freed object goes back to its own
 * node (doc/api.md, "NUMA"). On one node all of it is off and costs
 * nothing. Node ids are the kernel's (numactl --hardware).
 */

/** USLAB_NUMA_NO_NODE - "the caller's node" for the _node calls (the kernel's NUMA_NO_NODE). */
#define USLAB_NUMA_NO_NODE (-1)
/**
 * USLAB_NODE_STRICT - or'd into a _node call's node: that node's memory or
 * nothing (the kernel's __GFP_THISNODE). Without it the node is a
 * preference: its slabs first, then the other nodes' by distance.
 */
#define USLAB_NODE_STRICT 0x10000

/**
 * uslab_numa_nodes - the nodes uslab works with.
 *
 * Return: the highest node id plus one, at least 1; 1 means NUMA off (one
 * node, USLAB_NUMA=0, or a node id uslab cannot tag: above 15).
 */
USLAB_API int uslab_numa_nodes(void);

/**
 * uslab_numa_node - the node whose memory serves the CPU the calling
 * thread runs on now (Linux's numa_mem_id(): a node without memory is
 * served by its nearest node that has some). The thread may move at once.
 *
 * Return: a node id; 0 with NUMA off.
 */
USLAB_API int uslab_numa_node(void);

/**
 * uslab_numa_node_has_memory - whether uslab places memory on @node.
 * @node: a node id.
 *
 * Return: 1 if @node has memory (and the program's own policy, MPOL_BIND,
 * allows it); 0 if not, or if @node is no node.
 */
USLAB_API int uslab_numa_node_has_memory(int node);

/**
 * uslab_cache_alloc_node - allocate one object from NUMA node @node (the
 * kernel's kmem_cache_alloc_node()).
 * @c:    the cache.
 * @node: USLAB_NUMA_NO_NODE (the caller's node), or a node id, with
 *        USLAB_NODE_STRICT or'd in for that node's memory or nothing.
 *
 * The caller's own node is served as uslab_cache_alloc() serves it, from
 * the thread's sheaves. Another node's object comes straight from that
 * node's slabs, past the sheaves (slower: a node lock per call; use the
 * bulk form for many); without USLAB_NODE_STRICT, from the nearest other
 * node's when the OS refuses memory on @node. A node without memory, or
 * one the machine does not have, is served by the caller's node unless
 * the request is strict. With NUMA off everything is node 0's.
 *
 * Context: any thread.
 * Return: the object; or NULL with errno EINVAL (@node is neither
 * USLAB_NUMA_NO_NODE nor a node id, possibly with USLAB_NODE_STRICT) or
 * ENOMEM (no memory; or strict and @node has none).
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_cache_alloc_node(struct uslab_cache *c, int node);

/**
 * uslab_cache_alloc_bulk_node - allocate @n objects from NUMA node @node.
 * @c:    the cache.
 * @node: as uslab_cache_alloc_node()'s.
 * @n:    objects wanted.
 * @p:    an array of at least @n entries.
 *
 * All or nothing, as uslab_cache_alloc_bulk(), which serves the caller's
 * own node; another node's objects come from its slabs, whole slab
 * freelists at a time (one node lock per up to 16 slabs).
 *
 * Context: any thread.
 * Return: @n, or 0 (nothing taken: @n was 0, or errno EINVAL or ENOMEM as
 * uslab_cache_alloc_node()'s, or EINVAL for a NULL @p).
 */
USLAB_API size_t uslab_cache_alloc_bulk_node(struct uslab_cache *c, int node, size_t n, void **p);

/**
 * uslab_node_of - the NUMA node of the uslab memory holding @p (the slab
 * or large object's pages: where uslab placed them; under USLAB_NUMA_FAKE
 * the fake node).
 * @p: any address.
 *
 * Context: any thread; no lock.
 * Return: the node id; -1 if @p is not in a slab or large object of uslab's.
 */
USLAB_API USLAB_NO_ACCESS(1) int uslab_node_of(const void *p);

/**
 * uslab_cache_node_stats - one node's slabs of a cache.
 * @c:    the cache.
 * @node: a node id, below uslab_numa_nodes().
 * @st:   filled in (struct uslab_node_stats, <uslab/stats.h>).
 *
 * With NUMA off node 0 has every slab. The cache-wide figures are
 * uslab_cache_stats()'s.
 *
 * Context: any thread.
 * Return: 0; -EINVAL if @c or @st is NULL or @node is no node.
 */
USLAB_API int uslab_cache_node_stats(const struct uslab_cache *c, int node,
				     struct uslab_node_stats *st);

/**
 * uslab_pool_get_bulk - allocate @n objects, rte_mempool_get_bulk()'s way.
 * @c: the cache (a pool or not).
 * @n: objects wanted.
 * @p: an array of at least @n entries.
 *
 * uslab_cache_alloc_bulk() with DPDK's return convention. All or nothing:
 * from this thread's sheaves, the barn, the loose array, then the slabs
 * (none for a USLAB_POOL_EXTERNAL pool: objects other threads hold in their
 * sheaves are not taken).
 *
 * Context: any thread.
 * Return: 0 - p[0..n) filled (also for @n 0);
 *         -ENOBUFS - a USLAB_POOL_EXTERNAL pool has fewer than @n objects
 *                    within reach, nothing taken;
 *         -ENOMEM - the OS refused memory, nothing taken;
 *         -EINVAL - @p NULL.
 */
USLAB_API int uslab_pool_get_bulk(struct uslab_cache *c, size_t n, void **p);

/**
 * uslab_pool_put_bulk - free @n objects, rte_mempool_put_bulk()'s way.
 * @c: the cache of every object (a pool or not).
 * @n: entries in @p.
 * @p: the objects, every entry one (no NULL); the array is not written.
 *
 * The objects go into this thread's sheaves, full sheaves to the barn; in
 * a pool, what the barn cannot take goes to the loose array, otherwise to
 * the slabs. The objects are not checked one by one (uslab_cache_free()
 * checks each in the library): a foreign pointer given to a pool is handed
 * out later. This is also how a USLAB_POOL_EXTERNAL pool is filled.
 *
 * Context: any thread.
 */
USLAB_API void uslab_pool_put_bulk(struct uslab_cache *c, size_t n, void *const *p);

/**
 * uslab_pool_avail - free objects a cache holds as pointers.
 * @c: the cache.
 *
 * Every thread's sheaves, the barn and (pools) the loose array: for a
 * pool, what uslab_pool_get_bulk() could hand out if every thread's
 * sheaves were flushed; rte_mempool_ops_get_count()'s figure. Read without
 * stopping other threads: exact only while they do not use @c.
 *
 * Context: any thread.
 * Return: the count; 0 for NULL.
 */
USLAB_API size_t uslab_pool_avail(const struct uslab_cache *c);

/**
 * uslab_cache_stats - take a snapshot of a cache's counters.
 * @c:  the cache.
 * @st: filled in on success.
 *
 * Slab counters are exact at the moment the node lock is held; event
 * counters are summed over threads without stopping them.
 *
 * Context: any thread.
 * Return: 0 - @st filled in; -EINVAL - @c or @st is NULL.
 */
USLAB_API int uslab_cache_stats(const struct uslab_cache *c, struct uslab_cache_stats *st);

/**
 * uslab_percpu_supported - whether per-CPU sheaves can run in this process:
 * the thread's rseq area registered by glibc (not disabled with
 * GLIBC_TUNABLES=glibc.pthread.rseq=0), membarrier's rseq fence registered,
 * an x86-64 build without ThreadSanitizer, and USLAB_PERCPU not 0.
 *
 * Context: any thread.
 * Return: 1 if they can, 0 if every cache keeps per-thread sheaves.
 */
USLAB_API int uslab_percpu_supported(void);

/**
 * uslab_cache_percpu - whether @c's sheaves are per CPU now (see
 * USLAB_PERCPU; a cache switches at most once, from per thread to per CPU).
 * @c: a cache, or NULL.
 *
 * Context: any thread.
 * Return: 1 if they are, 0 if they are per thread, the cache has no
 * sheaves, or @c is NULL.
 */
USLAB_API int uslab_cache_percpu(const struct uslab_cache *c);

/**
 * uslab_cache_name - the name a cache was created with.
 * @c: the cache.
 *
 * Context: any thread.
 * Return: the name (valid until the cache is destroyed), or NULL if @c is NULL.
 */
USLAB_API const char *uslab_cache_name(const struct uslab_cache *c);

/**
 * uslab_cache_size - the object size a cache was created with.
 * @c: the cache.
 *
 * Context: any thread.
 * Return: the size in bytes (what kmem_cache_size() returns), 0 if @c is NULL.
 */
USLAB_API size_t uslab_cache_size(const struct uslab_cache *c);

/**
 * uslab_stat_name - the name of a slow-path event counter.
 * @item: an enum uslab_stat_item value.
 *
 * Context: any thread.
 * Return: a static string such as "alloc_slowpath", or NULL if @item is
 * out of range.
 */
USLAB_API const char *uslab_stat_name(unsigned int item);

/**
 * uslab_thread_flush - return every object this thread caches.
 *
 * Full sheaves go to their cache's barn while it has room, everything
 * else goes back to the slabs; the thread's sheaves are freed. A thread
 * that is about to sleep for long may call it; thread exit does it
 * automatically. After a thread's exit handler has run (in a later
 * pthread_key or C++ thread_local destructor), the thread's allocations
 * and frees go straight to the slabs: nothing is cached for a dead thread.
 *
 * Context: any thread (acts on the calling thread only).
 */
USLAB_API void uslab_thread_flush(void);

/**
 * uslab_owns - is @p inside a slab that uslab handed to a cache?
 * @p: any address.
 *
 * Answers from the arena registry without a lock. An address inside a
 * live slab gives true whether or not the object at @p is allocated.
 *
 * Context: any thread.
 * Return: 1 if @p lies in a live slab, 0 otherwise.
 */
USLAB_API USLAB_NO_ACCESS(1) int uslab_owns(const void *p);

/**
 * uslab_cache_of - the cache an object belongs to.
 * @p: an object address (or any address inside a live slab).
 *
 * Context: any thread.
 * Return: the cache; NULL if @p is not inside a live slab, or is inside a
 * large kmalloc object (those belong to no cache: free them with
 * uslab_kfree()).
 */
USLAB_API USLAB_NO_ACCESS(1) struct uslab_cache *uslab_cache_of(const void *p);

/**
 * uslab_cache_validate - check a cache's free objects and counters (the
 * kernel's /sys/kernel/slab/<cache>/validate).
 * @c: the cache.
 *
 * Checks the objects in the calling thread's sheaves and in the barn (each
 * an object of @c, on an object boundary, held once), every partial slab's
 * freelist (each free object handed out before, listed once, not also in a
 * sheaf: a double free), and the node's counters; in a debug cache also
 * every object's state, red zones (USLAB_RED_ZONE) and the poison of free
 * objects (USLAB_POISON). Each problem found is
 * one line on stderr, "uslab: validate <cache>: <what>". Other threads'
 * sheaves, and a per-CPU cache's CPU sheaves, are not looked at
 * (uslab_thread_flush() on those threads, or uslab_cache_shrink(), first).
 * Nothing is repaired and the program goes on.
 *
 * Context: any thread, while no other thread allocates from or frees to
 * @c (a sheaf that goes from the barn to its slabs between the two
 * snapshots reads as a double free); the cache's node lock is held while
 * its slabs are walked (the walk is as long as the cache's free objects).
 * Return: the number of problems found (0: sound); -EINVAL - @c is NULL.
 * A destroyed cache stops the program ("uslab: BUG").
 */
USLAB_API long uslab_cache_validate(struct uslab_cache *c);

/**
 * uslab_failslab_count - allocations made to fail so far by fault
 * injection: USLAB_FAILSLAB=probability[,interval[,times[,cache]]] in the
 * environment (doc/tuning.md) makes allocations from the selected caches
 * (every cache and kmalloc class of the program, or the one named) fail
 * with ENOMEM, reproducibly for a program that allocates in the same order.
 *
 * Context: any thread.
 * Return: the number of allocation calls failed on purpose (0 without
 * USLAB_FAILSLAB).
 */
USLAB_API unsigned long uslab_failslab_count(void);

/**
 * uslab_bug_count - problems the debug tier has reported so far.
 *
 * With USLAB_ON_BUG=report (doc/tuning.md; the default for debug caches
 * without USLAB_CONSISTENCY_CHECKS) a problem found in a debug cache is
 * reported (once per call site and kind) and the program goes on: a bad
 * free is ignored, a clobbered red zone or poison restored. Each problem
 * found is counted here, reported or not. Problems found outside the debug
 * tier stop the program.
 *
 * Context: any thread.
 * Return: the count (0 without the debug tier).
 */
USLAB_API unsigned long uslab_bug_count(void);

/**
 * uslab_stats_print - print every cache of this process in /proc/slabinfo's
 * format (version 2.1: name, active and total objects, object size,
 * objects and pages per slab, "tunables" with the sheaf capacity as the
 * limit, "slabdata" with active and total slabs and the objects held in
 * threads' sheaves), then a totals line. USLAB_STATS=exit prints the same
 * on stderr at exit; USLAB_STATS=1 exports it for uslab-stat (doc/api.md).
 * @f: where to print (NULL: nothing).
 *
 * Context: any thread; takes each cache's locks in turn.
 */
USLAB_API void uslab_stats_print(FILE *f);

/**
 * uslab_options_print - print every USLAB_* environment variable: its
 * value in effect, default, range and a one-line meaning (doc/tuning.md
 * has the measurements behind the defaults).
 * @f: where to print (NULL: nothing).
 *
 * Context: any thread.
 */
USLAB_API void uslab_options_print(FILE *f);

#include <uslab/rcu.h>
#include <uslab/fastpath.h>
#include <uslab/kmalloc.h>
#include <uslab/magazine.h>
#include <uslab/counter.h>

#ifdef __cplusplus
}
#endif

#endif /* USLAB_H */
