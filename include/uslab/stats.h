/* SPDX-License-Identifier: MIT */
/*
 * uslab/stats.h - what uslab_cache_stats() reports.
 *
 * Included by <uslab.h>; a program never needs to include it directly.
 */
#ifndef USLAB_STATS_H
#define USLAB_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * enum uslab_stat_item - slow-path event counters of a cache.
 *
 * Counted per thread without atomics and summed by uslab_cache_stats(),
 * so reading them is approximate while other threads are running. The
 * fast path (a pop from or a push to the thread's main sheaf) is not
 * counted: it is exactly what is not worth a counter. The bulk counters
 * (USLAB_STAT_*_BULK*) count calls that reach the library: every call of
 * code built with USLAB_NO_INLINE (and uslab's own callers), but not the
 * calls an inline fast path serves from the main sheaf.
 */
enum uslab_stat_item {
	USLAB_STAT_ALLOC_SLOWPATH = 0, /* alloc found the main sheaf empty */
	USLAB_STAT_FREE_SLOWPATH,      /* free found the main sheaf full */
	USLAB_STAT_SHEAF_SWAP,	       /* main and spare sheaf exchanged */
	USLAB_STAT_BARN_GET,	       /* an empty sheaf traded for a full one */
	USLAB_STAT_BARN_GET_FAIL,      /* barn had no full sheaf */
	USLAB_STAT_BARN_PUT,	       /* a full sheaf traded for an empty one */
	USLAB_STAT_BARN_PUT_FAIL,      /* barn had no room for a full sheaf */
	USLAB_STAT_SHEAF_REFILL,       /* a sheaf refilled from slabs */
	USLAB_STAT_SHEAF_FLUSH,	       /* a sheaf flushed to slabs */
	USLAB_STAT_SHEAF_ALLOC,	       /* a new empty sheaf allocated */
	USLAB_STAT_SLAB_NEW,	       /* a slab taken from the OS layer */
	USLAB_STAT_SLAB_FREE,	       /* an empty slab given back to the OS layer */
	USLAB_STAT_ALLOC_BULK,	       /* uslab_cache_alloc_bulk() calls (see above) */
	USLAB_STAT_ALLOC_BULK_OBJS,    /* objects they returned */
	USLAB_STAT_FREE_BULK,	       /* calls to uslab_cache_free_bulk() */
	USLAB_STAT_FREE_BULK_OBJS,     /* objects they freed */
	USLAB_STAT_FREE_GROUP,	       /* detached freelists handed to slabs */
	USLAB_STAT_SHEAF_GROW,	       /* the sheaf capacity went one class up */
	USLAB_STAT_SHEAF_SHRINK,       /* ... or one class down */
	USLAB_STAT_BARN_GROW,	       /* the barn's depth went one full sheaf up */
	USLAB_STAT_BARN_SHRINK,	       /* ... or was halved towards USLAB_BARN_MAX_FULL */
	USLAB_STAT_NUMA_REMOTE_FREE,   /* NUMA: objects freed on another node's CPU, sent home */
	USLAB_STAT_NUMA_REMOTE_BATCH,  /* ... in this many batches (one node lock or trade each) */
	USLAB_STAT_NUMA_FALLBACK,      /* NUMA: a refill took another node's slabs (no memory) */
	USLAB_STAT_NUMA_MOVED, /* NUMA: a thread's sheaves flushed: it moved to another node */
	USLAB_STAT_NR_ITEMS
};

/** USLAB_STAT_SLOTS - room reserved in struct uslab_cache_stats. */
#define USLAB_STAT_SLOTS 32

/**
 * struct uslab_cache_stats - a snapshot of one cache.
 * @active_objs:  objects handed out of slabs: held by the program, or
 *                resting in a thread's sheaf or in the barn
 *                (/proc/slabinfo semantics).
 * @num_objs:     objects the cache's slabs can hold.
 * @objsize:      bytes between two objects in a slab (object, padding and
 *                an out-of-object free pointer).
 * @objperslab:   objects per slab.
 * @pagesperslab: 4 KiB pages per slab.
 * @active_slabs: slabs holding at least one active object.
 * @num_slabs:    slabs owned by the cache.
 * @object_size:  the size the cache was created with.
 * @align:        the object alignment in effect.
 * @order:        slab size is 2^order pages.
 * @sheaf_capacity: objects per sheaf handed out now (0: the cache has no
 *                sheaves); it adapts between @sheaf_capacity_min and
 *                @sheaf_capacity_max to the barn trades (equal: pinned).
 * @min_partial:  empty slabs kept before slabs go back to the OS.
 * @partial_slabs: slabs on the partial list (including kept empty ones).
 * @barn_full:    full sheaves in the barn.
 * @barn_empty:   empty sheaves in the barn.
 * @events:       slow-path counters, indexed by enum uslab_stat_item
 *                (all zero when the library is built without statistics).
 * @layout:       the slab layout in effect (enum uslab_layout, never AUTO).
 * @meta_bytes:   bytes per slab spent on tracking free objects outside what
 *                the objects themselves hold: the 64-byte slab descriptor,
 *                an index array reserved in the slab or allocated apart from
 *                it, and out-of-object free pointers (8 bytes per object).
 * @colours:      distinct offsets of the first object from slab to slab
 *                (slab colouring; 1: none).
 * @sheaf_capacity_min: the base capacity, chosen at creation.
 * @sheaf_capacity_max: the largest the capacity may grow to.
 * @percpu:       1 if the cache's sheaves are per CPU now (USLAB_PERCPU).
 * @percpu_cpus:  CPUs with a slot of sheaves (per-CPU caches; else 0).
 * @percpu_objects: objects resting in the CPUs' sheaves (main and spare).
 * @percpu_sheaves: sheaves the CPUs hold (main and spare, full or not).
 */
struct uslab_cache_stats {
	unsigned long active_objs;
	unsigned long num_objs;
	unsigned int objsize;
	unsigned int objperslab;
	unsigned int pagesperslab;
	unsigned long active_slabs;
	unsigned long num_slabs;

	unsigned int object_size;
	unsigned int align;
	unsigned int order;
	unsigned int sheaf_capacity;
	unsigned int min_partial;
	unsigned long partial_slabs;
	unsigned long barn_full;
	unsigned long barn_empty;
	uint64_t events[USLAB_STAT_SLOTS];
	unsigned int layout;
	unsigned int meta_bytes;
	unsigned int colours;
	unsigned int sheaf_capacity_min;
	unsigned int sheaf_capacity_max;
	unsigned int percpu;
	unsigned int percpu_cpus;
	unsigned long percpu_objects;
	unsigned long percpu_sheaves;
};

/**
 * struct uslab_node_stats - one NUMA node's part of a cache
 * (uslab_cache_node_stats()): its slabs, whose pages are on that node.
 * @num_slabs:     slabs of the node.
 * @num_objs:      objects they can hold.
 * @active_objs:   of those, handed out of the slabs (as in struct uslab_cache_stats).
 * @active_slabs:  slabs holding at least one active object.
 * @partial_slabs: slabs on the node's partial list.
 * @remote_frees:  objects of the node that threads running on another
 *                 node freed, sent back to it (USLAB_STAT_NUMA_REMOTE_FREE).
 * @fallbacks:     refills of the node's callers served by other nodes'
 *                 slabs, its own having no memory (USLAB_STAT_NUMA_FALLBACK).
 * @pool_objs:     a pool's free objects kept on the node: in the node's
 *                 barn (full sheaves traded there by threads running on
 *                 the node) and, on the pool's node (uslab_cache_args.node),
 *                 in its loose array; 0 for a cache that is not a pool.
 *                 Objects in threads' sheaves are in no node's count.
 */
struct uslab_node_stats {
	unsigned long num_slabs;
	unsigned long num_objs;
	unsigned long active_objs;
	unsigned long active_slabs;
	unsigned long partial_slabs;
	uint64_t remote_frees;
	uint64_t fallbacks;
	unsigned long pool_objs;
};

/**
 * struct uslab_heap_stats - the page heap (uslab_heap_stats()). Bytes
 * unless named otherwise; "cumulative" figures count since start-up.
 * @mapped_bytes:   address space mapped for slabs and large objects (64 MiB
 *                  arenas, and huge objects' own mappings).
 * @used_bytes:     pages given to slabs and large objects now.
 * @retained_bytes: free pages still resident, waiting for the decay to
 *                  purge them (or to be taken again first).
 * @purged_bytes:   cumulative: bytes given back with madvise or munmap.
 * @madvise_calls:  cumulative: madvise(MADV_DONTNEED) calls that purged.
 * @munmap_calls:   cumulative: arenas and huge objects unmapped (whole or
 *                  their tails).
 * @mremap_calls:   cumulative: huge objects grown without copying.
 * @grown_in_place: cumulative: large objects grown into the free pages
 *                  after them.
 * @arenas:         heap arenas mapped now.
 * @huge_objects:   objects above 32 MiB (own mappings) now.
 * @huge_bytes:     the usable bytes of those objects (part of @used_bytes).
 * @object_bytes:   bytes of the objects handed out now: each cache's
 *                  active objects (those resting in threads' sheaves, the
 *                  barns and pools included, as /proc/slabinfo counts them)
 *                  times its object stride, plus large and huge objects'
 *                  usable bytes. The rest of @used_bytes is free slots in
 *                  slabs and the slabs' own bookkeeping. Objects the
 *                  sampling guard holds in its own pages are not counted.
 *                  Summed cache by cache, a moment before the page heap's
 *                  figures are read: not one atomic snapshot.
 */
struct uslab_heap_stats {
	uint64_t mapped_bytes;
	uint64_t used_bytes;
	uint64_t retained_bytes;
	uint64_t purged_bytes;
	uint64_t madvise_calls;
	uint64_t munmap_calls;
	uint64_t mremap_calls;
	uint64_t grown_in_place;
	uint64_t arenas;
	uint64_t huge_objects;
	uint64_t huge_bytes;
	uint64_t object_bytes;
	uint64_t reserved[4];
};

#ifdef __cplusplus
}
#endif

#endif /* USLAB_STATS_H */
