/* SPDX-License-Identifier: MIT */
/*
 * os_heap.h - what the page heap's three files share: os.c (the buddy
 * arenas: pages, descriptors, slabs and large objects), os_map.c (mappings
 * and the address registry) and os_decay.c (purge, the decay thread,
 * retention). The arena, os_lock, the list of arenas and the heap's
 * figures. Included after os.h, by those three files only: the layers
 * above see os.h.
 */
#ifndef USLAB_OS_HEAP_H
#define USLAB_OS_HEAP_H

#define MAP_ENTRIES (1ul << (VA_BITS - ARENA_SHIFT))
#define WORDS (ARENA_PAGES / 64)
/* Words of order 0's block bitmap; an order's bitmap is at least one word. */
#define ORDER0_LOG 8
_Static_assert(WORDS == 1ul << ORDER0_LOG, "order 0's bitmap is 2^ORDER0_LOG words");
#define BLOCK_WORDS (2 * WORDS - 2 + (HEAP_ORDER_MAX - ORDER0_LOG) + 1)
/* Runs a purge carves before it drops the lock for their madvise calls. */
#define PURGE_RUNS 32

struct arena {
	uintptr_t base;
	size_t size;	       /* ARENA_GRANULE; a huge object's: its mapping */
	struct arena *next;    /* the heap (by address), pool, or a release list */
	size_t desc_size;      /* bytes of this descriptor */
	bool huge;	       /* a huge object's (slabs[0] only; no bitmaps used) */
	unsigned int node;     /* the NUMA node its pages are placed on (numa.c) */
	unsigned int npurging; /* purge runs being given back outside os_lock */
	size_t used;	       /* pages used */
	size_t ndirty;	       /* pages dirty */
	uint32_t free_orders;  /* bit k: a free block of order k exists */
	uint32_t nfree[HEAP_ORDER_MAX + 1];
	uint32_t hint[HEAP_ORDER_MAX + 1]; /* no free block of order k in words below */
	uint64_t freemap[WORDS];
	uint64_t dirty[WORDS];
	uint64_t young[WORDS];
	uint64_t blocks[BLOCK_WORDS];
	struct slab slabs[] CACHELINE_ALIGNED;
};

/* What <uslab/inline/priv.h> reads: slab descriptors, 64-byte aligned (the rest in src/abi.c). */
_Static_assert(offsetof(struct arena, slabs) % CACHELINE == 0, "descriptors on cache lines");

/* A purge's carved runs, on the in-flight list while their madvise runs. */
struct prun {
	struct arena *a;
	uint32_t idx, n;
};
struct pbatch {
	struct pbatch *next;
	unsigned int n;
	struct prun r[PURGE_RUNS];
};

/* The figures of uslab_heap_stats, and the decay's demand (under os_lock). */
struct os_figures {
	size_t narenas, nhuge;
	size_t mapped, used, retained; /* bytes */
	size_t huge;		       /* bytes of huge objects (part of @used) */
	uint64_t purged, madvise_calls, munmap_calls, mremap_calls, grown_in_place;
	uint64_t taken; /* pages handed out, ever (the decay's demand) */
	/* Bitmap words purges examined under os_lock (tests: the scan is by words, not pages). */
	uint64_t pick_words;
};

INTERNAL extern struct ulock os_lock;
INTERNAL extern struct arena *os_arenas;	      /* heap arenas, by address (os.c) */
INTERNAL extern struct pbatch *os_inflight;	      /* purges outside the lock (os_decay.c) */
INTERNAL extern struct os_figures os_fig;	      /* (os.c) */
INTERNAL extern struct arena *arena_map[MAP_ENTRIES]; /* per granule (os_map.c) */

/* The arena (heap or huge) holding address @p, or NULL. No lock. */
static inline struct arena *arena_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	if (unlikely(a >> VA_BITS))
		return NULL;
	return __atomic_load_n(&arena_map[a >> ARENA_SHIFT], __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------- bitmaps */

static inline bool bit_test(const uint64_t *m, size_t i)
{
	return (m[i / 64] >> (i % 64)) & 1;
}

/* Set (@on) or clear bits [i, i + n) of @m. */
static inline void bits_assign(uint64_t *m, size_t i, size_t n, bool on)
{
	while (n) {
		size_t b = i % 64, k = n < 64 - b ? n : 64 - b;
		uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;

		if (on)
			m[i / 64] |= mask;
		else
			m[i / 64] &= ~mask;
		i += k;
		n -= k;
	}
}

/* How many of bits [i, i + n) of @m are set. */
static inline size_t bits_count(const uint64_t *m, size_t i, size_t n)
{
	size_t c = 0;

	while (n) {
		size_t b = i % 64, k = n < 64 - b ? n : 64 - b;
		uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;

		c += (size_t)__builtin_popcountll(m[i / 64] & mask);
		i += k;
		n -= k;
	}
	return c;
}

/* os_map.c */
INTERNAL void *mmap_aligned(size_t size, size_t align);
INTERNAL void map_set(struct arena *a, uintptr_t base, size_t size, struct arena *val);

/* os.c */
INTERNAL size_t heap_carve(struct arena *a, size_t i, size_t n);
INTERNAL void heap_give(struct arena *a, size_t i, size_t n, bool dirty);
INTERNAL void heap_check_idle(struct arena *a, struct arena **rel);
INTERNAL size_t arenas_unmap(struct arena *rel);

/* os_decay.c: what a free does about the pages it made dirty */
enum decay_todo {
	DECAY_NOTHING,
	DECAY_PURGE_ALL,   /* USLAB_PURGE_DELAY_MS=0: every free purges */
	DECAY_PURGE_BATCH, /* past USLAB_RETAIN_KB: a bounded batch */
	DECAY_STEP,	   /* no decay thread: this free runs the due tick */
};
INTERNAL void decay_dirty_locked(void);
INTERNAL enum decay_todo decay_freed_locked(void);
INTERNAL void decay_after_free(enum decay_todo todo);
INTERNAL void decay_fork_child(void);

#endif /* USLAB_OS_HEAP_H */
