// SPDX-License-Identifier: MIT
/*
 * os.c - the page heap: memory from the OS for slabs of every order and
 * kmalloc's large objects, the address registry, and memory given back
 * by decay off the callers' path. The page allocator of uslab.
 *
 * Contract (what the layers above may rely on):
 *   - os_slab_alloc(order) returns the descriptor of a slab of 2^order
 *     pages at s->base, aligned to its size (natural alignment; order <=
 *     SLAB_MAX_ORDER). Its pages read as zeros when s->zeroed is 1, else
 *     their contents are undefined (pages freed earlier, still resident).
 *     NULL with errno ENOMEM when mmap fails.
 *   - os_large_alloc(bytes, align) returns a large object's descriptor:
 *     @bytes (whole pages) at s->base, aligned to @align (a power of two,
 *     PAGE_SIZE..ARENA_GRANULE), s->large set and s->large_size = @bytes.
 *     Up to HEAP_MAX_BYTES from the heap, exactly the pages asked for;
 *     larger (or aligned beyond it) a huge object: a mapping of its own.
 *   - os_large_resize(s, bytes) gives a large object @bytes (whole pages)
 *     without copying: from the free pages after it (heap) or by mremap
 *     (huge; s->base may change). False if it cannot: the caller moves it.
 *     The caller then sets s->large_size (cache_slab_resize_single).
 *   - os_large_move(to, from) moves the pages of large object @from (1 MiB
 *     or more) to the start of the larger large object @to with mremap:
 *     no byte is copied and @from's old pages are not resident any more.
 *     False if it did not (smaller, or the kernel refused): the caller
 *     copies. @from is then freed as usual.
 *   - os_slab_publish(s) copies s->cache and s->pcs_id into the slab's
 *     tail descriptors; the owner calls it after setting either.
 *   - os_slab_free(s) takes the pages back (s->cache == NULL; a slab or
 *     large object os gave and not freed since). They stay resident
 *     ("retained", "dirty") and are purged later by the decay thread: see
 *     "Decay" below. No free waits for a purge, except past the retention
 *     cap (USLAB_RETAIN_KB: a bounded batch) or with USLAB_PURGE_DELAY_MS=0
 *     (purged at once: a test and debugging mode).
 *   - os_purge() returns every retained page now and unmaps idle arenas
 *     (shrink, destroy, uslab_trim). Return: bytes given back.
 *   - os_slab_lookup(p) maps any address to its slab descriptor in O(1)
 *     without a lock (os.h). Descriptors are never unmapped, so a lookup
 *     racing with a release reads a free descriptor.
 *   - os_mmap/os_munmap: page-granular metadata memory (thread tables).
 *   - os_may_commit(size): whether the kernel would map @size bytes of
 *     private writable memory as the C library's malloc asks for it: with
 *     commit accounting, so vm.overcommit_memory's policy (and RLIMIT_AS)
 *     decides. uslab maps with MAP_NORESERVE, which the heuristic policy
 *     never refuses: kmalloc.c asks this of a huge object first.
 *
 * The heap: arenas of 64 MiB (ARENA_GRANULE), each aligned to its size,
 * each a binary buddy allocator over its 2^14 pages. A buddy allocator,
 * not extents: slabs must be naturally aligned (the free paths find a
 * slab's base with a mask), which buddy blocks are by construction; split
 * and merge are a bit test per order; and a large object of any page count
 * takes the block that fits it and gives the rest back at once as the
 * aligned blocks it decomposes into (as the kernel's alloc_pages_exact),
 * so nothing is rounded to a power of two. Free blocks are bitmaps, one
 * per order; allocation takes the lowest-addressed block of the smallest
 * order that fits, in the lowest arena that has one: memory in use packs
 * towards low addresses, so high arenas empty out (and are unmapped) and
 * 2 MiB regions stay whole for transparent huge pages.
 *
 * Descriptors: one per page, in the arena's descriptor table (1 MiB per
 * 64 MiB, touched only where pages are used; 1.6% like the kernel's
 * struct page). The registry entry of a granule points at the table with
 * shift PAGE_SHIFT, so object -> descriptor is one load and a shift
 * (the inline kfree's arithmetic, <uslab/priv.h>); a slab's other pages
 * are tails pointing at the first (os.h, struct slab).
 *
 * Per page, three bitmaps besides the blocks: free (in a free block),
 * dirty (free and maybe resident: freed since its last purge) and young
 * (dirty since the decay's last tick). Always young <= dirty <= free.
 * A page taken from the heap reads as zeros unless it was dirty.
 *
 * Page states (a page of an arena):
 *   free clean    in a free block, not resident (never touched, or purged)
 *   free dirty    in a free block, resident; young until the next tick
 *   used          a slab's or a large object's (its descriptor, or a tail)
 *   purging       carved out of the free blocks by a purge, being given
 *                 back outside os_lock (on the in-flight list; counted in
 *                 a->npurging: the arena is not unmapped meanwhile)
 *
 *   free -> used          heap_take, heap_carve (a large object grows)
 *   used -> free dirty    heap_give (os_slab_free, a large object shrinks)
 *   free dirty -> purging purge_pick (carved with the clean pages between)
 *   purging -> free clean purge_done, after its madvise(MADV_DONTNEED)
 *   purging -> free dirty os_fork_child: a purge the fork interrupted
 *
 * Decay: a thread of os.c (started by os_kick() from where no lock is held,
 * when freed pages appear; it exits once nothing has been retained for 2 s) ticks every
 * USLAB_PURGE_DELAY_MS. Where it cannot run (its start failed; the child
 * of a fork under ThreadSanitizer) the frees run the due ticks themselves,
 * a bounded batch (about 256 KiB) each. Each tick purges the dirty pages
 * that are not young (freed at least one tick ago) beyond the recent
 * demand (as many pages as the heap handed out in its busiest tick of the
 * last DEMAND_TICKS: memory likely to be asked for again is kept, the
 * lowest addresses first, which are taken first), then ages the young. So an unused freed page lives between one and two
 * ticks; contiguous dirty runs go back in one madvise each. With
 * USLAB_HUGEPAGES=1 arenas are marked MADV_HUGEPAGE and the decay purges
 * only whole free 2 MiB regions (os_purge still returns everything).
 *
 * Huge objects (above HEAP_MAX_BYTES): a mapping of their own, granules
 * rounded, with a one-descriptor table whose registry entries all point
 * at it (shift ARENA_SHIFT); resized by mremap; unmapped when freed.
 *
 * Lock: os_lock (LOCK_OS in src/lock.h) protects every
 * arena's bitmaps, counts and the lists here. It is taken once per slab
 * or large object, never per object, and no system call is made under
 * it: purges carve their runs under it, drop it for the madvise calls and
 * take it again to give the pages back. USLAB_CHECKS builds assert each
 * transition; check level 2 (os_check) recounts every bitmap.
 */
#define _GNU_SOURCE /* mremap */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "os.h"
#include "uslab/stats.h"

#define MAP_ENTRIES (1ul << (VA_BITS - ARENA_SHIFT))
#define WORDS (ARENA_PAGES / 64)
/* Words of order 0's block bitmap; an order's bitmap is at least one word. */
#define ORDER0_LOG 8
_Static_assert(WORDS == 1ul << ORDER0_LOG, "order 0's bitmap is 2^ORDER0_LOG words");
#define BLOCK_WORDS (2 * WORDS - 2 + (HEAP_ORDER_MAX - ORDER0_LOG) + 1)
/* Pages per 2 MiB (a transparent huge page). */
#define HUGE_PAGES 512
/* Runs a purge carves before it drops the lock for their madvise calls. */
#define PURGE_RUNS 32
/*
 * The decay keeps as many old dirty pages as the heap handed out in its
 * busiest tick of the last DEMAND_WINDOW_MS: demand_ticks() ticks, at most
 * DEMAND_TICKS (a tick shorter than DEMAND_WINDOW_MS / DEMAND_TICKS looks
 * back over fewer milliseconds).
 */
#define DEMAND_WINDOW_MS 2000u
#define DEMAND_TICKS 128
/* A free past the retention cap purges about this much itself. */
#define PURGE_BATCH_PAGES (256 * 1024 / PAGE_SIZE)

struct arena {
	uintptr_t base;
	size_t size;	       /* ARENA_GRANULE; a huge object's: its mapping */
	struct arena *next;    /* the heap (by address), pool, or a release list */
	size_t desc_size;      /* bytes of this descriptor */
	bool huge;	       /* a huge object's (slabs[0] only; no bitmaps used) */
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

/* What <uslab/priv.h> reads: slab descriptors, 64-byte aligned (the rest in src/abi.c). */
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

static struct ulock os_lock = ULOCK_INIT_RANK(LOCK_OS);
static struct arena *heap;	/* heap arenas, by address */
static struct arena *heap_pool; /* heap arena descriptors without memory */
static struct arena *huge_pool; /* huge descriptors without memory */
static struct pbatch *inflight; /* purges outside the lock */
static struct arena *arena_map[MAP_ENTRIES];
/*
 * The slab registry, exported for the inline kfree (uslab/kmalloc.h): per
 * 64 MiB granule, the descriptor of the granule's first page (64-byte
 * aligned) ORed with the shift: PAGE_SHIFT for a heap arena, ARENA_SHIFT
 * for a huge object (every address to its one descriptor); 0 for none.
 */
uintptr_t uslab_priv_slab_map[MAP_ENTRIES];
#define slab_map uslab_priv_slab_map
static uintptr_t mmap_hint; /* where the next arena would follow the last (racy hint) */

/* The figures of uslab_heap_stats (under os_lock). */
static struct {
	size_t narenas, nhuge;
	size_t mapped, used, retained; /* bytes */
	size_t huge;		       /* bytes of huge objects (part of @used) */
	uint64_t purged, madvise_calls, munmap_calls, mremap_calls, grown_in_place;
	uint64_t taken;	     /* pages handed out, ever (the decay's demand) */
	uint64_t taken_tick; /* @taken at the decay's last tick */
	/* Pages handed out in each of the last DEMAND_TICKS ticks (a ring). */
	uint64_t demand[DEMAND_TICKS];
	unsigned int demand_at;
} H;

bool os_decay_need; /* dirty pages and no decay thread: os_kick() starts one */
static struct {
	bool running;	   /* under os_lock (read without it by os_decay_running) */
	bool no_thread;	   /* a child of fork under TSan: never starts one (decays inline) */
	bool inline_decay; /* no thread (a child, or a start failed): frees run the ticks */
	uint64_t retry_ms; /* a start that failed is retried after */
	uint64_t next_ms;  /* inline_decay: the next tick is due */
} D;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ mappings */

void *os_mmap(size_t size)
{
	void *p;

	USLAB_ASSERT(!ulock_owned(&os_lock)); /* no system call under it */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);

	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	return p;
}

void os_munmap(void *p, size_t size)
{
	if (p)
		munmap(p, size);
}

bool os_may_commit(size_t size)
{
	void *p;

	USLAB_ASSERT(!ulock_owned(&os_lock));
	/* Mapped with accounting and unmapped at once: never touched, no page faults. */
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	munmap(p, size);
	return true;
}

/*
 * mmap @size bytes aligned to @align (both multiples of the page size).
 * First ask for exactly @size right after the previous arena (usually
 * free and aligned); else map @size + @align and trim both ends. Refuses
 * memory above 2^VA_BITS (5-level paging). Outside os_lock.
 */
static void *mmap_aligned(size_t size, size_t align)
{
	uintptr_t hint = READ_ONCE(mmap_hint);
	char *p;
	uintptr_t start, end;

	USLAB_ASSERT(!ulock_owned(&os_lock));
	if (hint) {
		p = mmap((void *)hint, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED) {
			if (((uintptr_t)p & (align - 1)) == 0 &&
			    (uintptr_t)p + size <= 1ul << VA_BITS)
				goto out;
			munmap(p, size);
		}
	}
	p = os_mmap(size + align);
	if (!p)
		return NULL;
	start = ALIGN_UP((uintptr_t)p, align);
	end = start + size;
	if (start != (uintptr_t)p)
		munmap(p, start - (uintptr_t)p);
	if (end != (uintptr_t)p + size + align)
		munmap((void *)end, (uintptr_t)p + size + align - end);
	p = (char *)start;
	if (end > 1ul << VA_BITS) {
		munmap(p, size);
		errno = ENOMEM;
		return NULL;
	}
out:
	WRITE_ONCE(mmap_hint, (uintptr_t)p + size);
	return p;
}

/* Point the registry's granules of [base, base + size) at @a (NULL: clear them). Under os_lock. */
static void map_set(struct arena *a, uintptr_t base, size_t size, struct arena *val)
{
	unsigned int shift = a->huge ? ARENA_SHIFT : PAGE_SHIFT;

	USLAB_ASSERT_HELD(&os_lock);
	for (uintptr_t g = base; g < base + size; g += ARENA_GRANULE) {
		uintptr_t e = 0;

		/* Installed over nothing, cleared from itself: granules never overlap. */
		USLAB_ASSERT(arena_map[g >> ARENA_SHIFT] == (val ? NULL : a));
		if (val)
			e = (uintptr_t)&a->slabs[a->huge ? 0 : (g - base) >> PAGE_SHIFT] | shift;
		__atomic_store_n(&arena_map[g >> ARENA_SHIFT], val, __ATOMIC_RELEASE);
		__atomic_store_n(&slab_map[g >> ARENA_SHIFT], e, __ATOMIC_RELEASE);
	}
}

static struct arena *arena_of(const void *p)
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
static void bits_assign(uint64_t *m, size_t i, size_t n, bool on)
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
static size_t bits_count(const uint64_t *m, size_t i, size_t n)
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

/* ---------------------------------------------------------------- buddy */

/* Order @k's bitmap: one bit per aligned block of 2^k pages. */
static inline uint64_t *blk_map(struct arena *a, unsigned int k)
{
	size_t off =
		k <= ORDER0_LOG ? 2 * WORDS - (2 * WORDS >> k) : 2 * WORDS - 2 + (k - ORDER0_LOG);

	return a->blocks + off;
}

static inline size_t blk_words(unsigned int k)
{
	return k <= ORDER0_LOG ? WORDS >> k : 1;
}

/* Make block @i (page index) of order @k free, with no merge. */
static void blk_add(struct arena *a, size_t i, unsigned int k)
{
	uint64_t *m = blk_map(a, k);
	size_t b = i >> k;

	USLAB_ASSERT((i & ((1ul << k) - 1)) == 0 && !bit_test(m, b));
	m[b / 64] |= 1ull << (b % 64);
	a->nfree[k]++;
	a->free_orders |= 1u << k;
	if (b / 64 < a->hint[k])
		a->hint[k] = (uint32_t)(b / 64);
}

static void blk_del(struct arena *a, size_t i, unsigned int k)
{
	uint64_t *m = blk_map(a, k);
	size_t b = i >> k;

	USLAB_ASSERT(bit_test(m, b) && a->nfree[k]);
	m[b / 64] &= ~(1ull << (b % 64));
	if (!--a->nfree[k])
		a->free_orders &= ~(1u << k);
}

/* Free block (@i, @k), merged with its free buddies. */
static void buddy_put(struct arena *a, size_t i, unsigned int k)
{
	while (k < HEAP_ORDER_MAX) {
		size_t buddy = i ^ (1ul << k);

		if (!bit_test(blk_map(a, k), buddy >> k))
			break;
		blk_del(a, buddy, k);
		i &= ~(1ul << k);
		k++;
	}
	blk_add(a, i, k);
}

/* Free pages [i, i + n) as the aligned blocks they decompose into. */
static void buddy_put_range(struct arena *a, size_t i, size_t n)
{
	while (n) {
		unsigned int k = i ? (unsigned int)__builtin_ctzl(i) : HEAP_ORDER_MAX;

		if (k > HEAP_ORDER_MAX)
			k = HEAP_ORDER_MAX;
		while ((1ul << k) > n)
			k--;
		buddy_put(a, i, k);
		i += 1ul << k;
		n -= 1ul << k;
	}
}

/* Take the lowest free block of the smallest order >= @k (one exists), split to @k. */
static size_t buddy_take(struct arena *a, unsigned int k)
{
	unsigned int j = (unsigned int)__builtin_ctz(a->free_orders >> k) + k;
	uint64_t *m = blk_map(a, j);
	size_t w = a->hint[j], i;

	while (!m[w]) {
		w++;
		USLAB_ASSERT(w < blk_words(j));
	}
	a->hint[j] = (uint32_t)w;
	i = (w * 64 + (size_t)__builtin_ctzll(m[w])) << j;
	blk_del(a, i, j);
	while (j > k) {
		j--;
		blk_add(a, i + (1ul << j), j); /* the upper half: its buddy is taken */
	}
	return i;
}

/* The order of the free block holding page @p (free). */
static unsigned int buddy_block_of(struct arena *a, size_t p)
{
	for (unsigned int k = 0; k <= HEAP_ORDER_MAX; k++)
		if (bit_test(blk_map(a, k), p >> k))
			return k;
	USLAB_ASSERT(!"a free page in no free block");
	return 0;
}

/* ------------------------------------------------------------ page runs */

/* Pages [i, i + n) of @a leave the free pages: their dirty ones counted out. Return: how many were dirty. */
static size_t pages_unfree(struct arena *a, size_t i, size_t n)
{
	size_t d = bits_count(a->dirty, i, n);

	USLAB_ASSERT(bits_count(a->freemap, i, n) == n);
	bits_assign(a->freemap, i, n, false);
	if (d) {
		bits_assign(a->dirty, i, n, false);
		bits_assign(a->young, i, n, false);
		USLAB_ASSERT(a->ndirty >= d && H.retained >= d * PAGE_SIZE);
		a->ndirty -= d;
		H.retained -= d * PAGE_SIZE;
	}
	return d;
}

/*
 * heap_carve - take free pages [i, i + n) of @a out of the free blocks:
 * each block that holds some of them is split around them. Under os_lock.
 * Return: how many of them were dirty.
 */
static size_t heap_carve(struct arena *a, size_t i, size_t n)
{
	size_t p = i, end = i + n;

	USLAB_ASSERT_HELD(&os_lock);
	while (p < end) {
		unsigned int k = buddy_block_of(a, p);
		size_t b = p & ~((1ul << k) - 1), bend = b + (1ul << k);

		blk_del(a, b, k);
		/* The block's pages outside the run stay free (their buddies are in the block). */
		if (b < i)
			buddy_put_range(a, b, i - b);
		if (bend > end)
			buddy_put_range(a, end, bend - end);
		p = bend;
	}
	return pages_unfree(a, i, n);
}

/*
 * heap_give - pages [i, i + n) of @a are free again: dirty (resident) or
 * clean (just purged). Under os_lock.
 */
static void heap_give(struct arena *a, size_t i, size_t n, bool dirty)
{
	USLAB_ASSERT_HELD(&os_lock);
	USLAB_ASSERT(i + n <= ARENA_PAGES && !bits_count(a->freemap, i, n));
	bits_assign(a->freemap, i, n, true);
	if (dirty) {
		bits_assign(a->dirty, i, n, true);
		bits_assign(a->young, i, n, true);
		a->ndirty += n;
		H.retained += n * PAGE_SIZE;
	}
	buddy_put_range(a, i, n);
}

/*
 * A new heap arena (a descriptor from the pool, or a new one), all its
 * pages free and clean. Outside os_lock; nobody sees it until
 * heap_install(). NULL if mmap fails.
 */
static struct arena *heap_create(struct arena *a)
{
	size_t dsize = ALIGN_UP(sizeof(*a) + ARENA_PAGES * sizeof(struct slab), PAGE_SIZE);
	void *mem = mmap_aligned(ARENA_GRANULE, ARENA_GRANULE);

	if (!mem)
		return NULL;
	if (usl_opt.hugepages)
		madvise(mem, ARENA_GRANULE, MADV_HUGEPAGE);
	if (!a) {
		a = os_mmap(dsize);
		if (!a) {
			munmap(mem, ARENA_GRANULE);
			return NULL;
		}
	} else {
		/* A pooled descriptor: its tables were given back (zeros); its header is reset here. */
		memset(a, 0, offsetof(struct arena, slabs));
	}
	a->desc_size = dsize;
	a->base = (uintptr_t)mem;
	a->size = ARENA_GRANULE;
	bits_assign(a->freemap, 0, ARENA_PAGES, true);
	blk_add(a, 0, HEAP_ORDER_MAX);
	return a;
}

/* Make a created arena live: the heap (in address order) and the registry. Under os_lock. */
static void heap_install(struct arena *a)
{
	struct arena **pp = &heap;

	USLAB_ASSERT_HELD(&os_lock);
	while (*pp && (*pp)->base < a->base)
		pp = &(*pp)->next;
	a->next = *pp;
	*pp = a;
	H.narenas++;
	H.mapped += a->size;
	map_set(a, a->base, a->size, a);
}

/*
 * If @a is all free and clean, nothing being purged, and not the only
 * arena, take it out of the registry and the heap and push it on *@rel
 * for arenas_unmap(). Under os_lock.
 */
static void heap_check_idle(struct arena *a, struct arena **rel)
{
	struct arena **pp = &heap;

	USLAB_ASSERT_HELD(&os_lock);
	if (a->used || a->ndirty || a->npurging || H.narenas < 2)
		return;
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	H.narenas--;
	H.mapped -= a->size;
	map_set(a, a->base, a->size, NULL);
	a->next = *rel;
	*rel = a;
}

/*
 * Unmap the arenas (heap or huge) detached onto @rel, give their
 * descriptor tables' pages back (the first page, the header, stays) and
 * pool the descriptors. The system calls are made outside os_lock: nobody
 * else can reach a detached arena. A heap arena is unmapped only when all
 * its pages are free and purged: nothing resident goes with it. A huge
 * object's bytes (a->used pages) are counted as given back.
 * Return: bytes given back.
 */
static size_t arenas_unmap(struct arena *rel)
{
	struct arena *a;
	size_t bytes = 0;
	uint64_t calls = 0;

	if (!rel)
		return 0;
	USLAB_ASSERT(!ulock_owned(&os_lock));
	for (a = rel; a; a = a->next) {
		uintptr_t from = ALIGN_UP((uintptr_t)a->slabs, PAGE_SIZE);
		uintptr_t to = (uintptr_t)a + a->desc_size;

		size_t table = (a->huge ? 1 : ARENA_PAGES) * sizeof(struct slab);
		size_t first = from - (uintptr_t)a->slabs;

		munmap((void *)a->base, a->size);
		if (a->huge)
			bytes += a->used << PAGE_SHIFT;
		calls++;
		if (to > from)
			madvise((void *)from, to - from, MADV_DONTNEED);
		/* The descriptors sharing the header's page: cleared by hand. */
		memset(a->slabs, 0, first < table ? first : table);
	}
	ulock_lock(&os_lock);
	H.munmap_calls += calls;
	H.purged += bytes;
	while (rel) {
		struct arena **pool;

		a = rel;
		rel = a->next;
		pool = a->huge ? &huge_pool : &heap_pool;
		a->next = *pool;
		*pool = a;
	}
	ulock_unlock(&os_lock);
	return bytes;
}

/* ----------------------------------------------------- descriptors, tails */

/* The pages of a used slab or large object in the heap. */
static inline size_t slab_pages(const struct slab *s)
{
	return s->large ? s->large_size >> PAGE_SHIFT : 1ul << s->order;
}

/* Descriptor of page @i of @a, a slab's first: NEW, no owner. */
static struct slab *desc_head(struct arena *a, size_t i, bool zeroed)
{
	struct slab *s = &a->slabs[i];

	USLAB_ASSERT(!s->cache);
	s->list.next = s->list.prev = NULL;
	s->zeroed = zeroed;
	s->large = 0;
	s->moved = 0;
	s->order = 0;
	s->pcs_id = 0;
	s->large_size = 0;
	s->freelist = NULL;
	s->nfree = s->bump = s->objects = 0;
	s->state = SLAB_NEW;
	__atomic_store_n(&s->base, (char *)(a->base + (i << PAGE_SHIFT)), __ATOMIC_RELAXED);
	return s;
}

/* Tails [from, to) of @s: point at it, no owner yet (os_slab_publish gives them one). */
static void tails_set(struct slab *s, size_t from, size_t to)
{
	for (size_t t = from; t < to; t++) {
		struct slab *d = s + t;

		USLAB_ASSERT(!d->cache);
		d->pcs_id = 0;
		d->state = SLAB_TAIL;
		__atomic_store_n(&d->base, NULL, __ATOMIC_RELAXED);
		__atomic_store_n(&d->head, s, __ATOMIC_RELAXED);
	}
}

/* Tails [from, to) of @s freed: no owner, lookups read a free page. */
static void tails_clear(struct slab *s, size_t from, size_t to)
{
	for (size_t t = from; t < to; t++) {
		struct slab *d = s + t;

		USLAB_ASSERT(d->state == SLAB_TAIL && d->head == s);
		__atomic_store_n(&d->cache, NULL, __ATOMIC_RELEASE);
		d->pcs_id = 0;
		d->state = SLAB_FREE;
	}
}

/* Tails [from, to) of @s take its owner and cache id. */
static void tails_publish(struct slab *s, size_t from, size_t to)
{
	for (size_t t = from; t < to; t++) {
		struct slab *d = s + t;

		USLAB_ASSERT(d->state == SLAB_TAIL && d->head == s);
		d->pcs_id = s->pcs_id;
		d->first_neg = s->first_neg; /* (a large object's size: read from the head only) */
		__atomic_store_n(&d->cache, s->cache, __ATOMIC_RELEASE);
	}
}

void os_slab_publish(struct slab *s)
{
	if (s->large && arena_of(s->base)->huge)
		return; /* one descriptor for every page */
	tails_publish(s, 1, slab_pages(s));
}

/* ------------------------------------------------------------- take, give */

/*
 * heap_take - @n pages (1..2^SLAB_MAX_ORDER) aligned to 2^@align_order
 * pages: the first descriptor, NEW, with its tails. From the lowest arena
 * with a block that fits; a new arena if none has. NULL with errno ENOMEM.
 */
static struct slab *heap_take(size_t n, unsigned int align_order)
{
	unsigned int k = align_order;
	struct arena *a, *fresh = NULL, *desc;
	struct slab *s;
	size_t i, d;

	while ((1ul << k) < n)
		k++;
	USLAB_ASSERT(k <= HEAP_ORDER_MAX);
	ulock_lock(&os_lock);
	for (;;) {
		for (a = heap; a; a = a->next)
			if (a->free_orders >> k)
				break;
		if (a)
			break;
		if (fresh) {
			heap_install(fresh);
			a = fresh;
			fresh = NULL;
			break;
		}
		/* Map one unlocked (a descriptor from the pool); another thread may free meanwhile. */
		desc = heap_pool;
		if (desc)
			heap_pool = desc->next;
		ulock_unlock(&os_lock);
		fresh = heap_create(desc);
		ulock_lock(&os_lock);
		if (!fresh) {
			if (desc) {
				desc->next = heap_pool;
				heap_pool = desc;
			}
			ulock_unlock(&os_lock);
			errno = ENOMEM;
			return NULL;
		}
	}
	i = buddy_take(a, k);
	if (n < 1ul << k)
		buddy_put_range(a, i + n, (1ul << k) - n); /* the rest, at once */
	d = pages_unfree(a, i, n);
	a->used += n;
	H.used += n * PAGE_SIZE;
	H.taken += n;
	s = desc_head(a, i, !d);
	tails_set(s, 1, n);
	ulock_unlock(&os_lock);
	if (fresh) {
		/* Mapped for nothing: someone else's free filled the gap. Keep it. */
		ulock_lock(&os_lock);
		heap_install(fresh);
		ulock_unlock(&os_lock);
	}
	return s;
}

/*
 * tsan_forget - under ThreadSanitizer, map fresh pages over [p, p + n)
 * before they serve a new owner: TSan cannot see a grace period (liburcu
 * is not instrumented), so a reader's access to an object freed by RCU
 * would race with the next owner's first write to the same page, now that
 * a page may serve any cache. Its mmap interceptor makes the range look
 * written by this thread. A test build's cost; nothing otherwise.
 */
static void tsan_forget(struct slab *s, char *p, size_t n)
{
#if defined(__SANITIZE_THREAD__)
	if (mmap(p, n, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED &&
	    p == s->base)
		s->zeroed = 1;
#else
	(void)s, (void)p, (void)n;
#endif
}

struct slab *os_slab_alloc(unsigned int order)
{
	struct slab *s;

	USLAB_ASSERT(order <= SLAB_MAX_ORDER);
	s = heap_take(1ul << order, order);
	if (s) {
		s->order = (uint8_t)order;
		tsan_forget(s, s->base, PAGE_SIZE << order);
	}
	return s;
}

/* A huge object: a mapping of its own, @bytes rounded up to granules. */
static struct slab *huge_alloc(size_t bytes)
{
	size_t size = ALIGN_UP(bytes, ARENA_GRANULE);
	size_t dsize = ALIGN_UP(sizeof(struct arena) + sizeof(struct slab), PAGE_SIZE);
	struct arena *a;
	struct slab *s;
	void *mem;

	if (size < bytes) { /* overflow */
		errno = ENOMEM;
		return NULL;
	}
	ulock_lock(&os_lock);
	a = huge_pool;
	if (a)
		huge_pool = a->next;
	ulock_unlock(&os_lock);
	mem = mmap_aligned(size, ARENA_GRANULE);
	if (mem && !a) {
		a = os_mmap(dsize);
		if (!a)
			munmap(mem, size);
	}
	if (!mem || !a) {
		if (a) {
			ulock_lock(&os_lock);
			a->next = huge_pool;
			huge_pool = a;
			ulock_unlock(&os_lock);
		}
		errno = ENOMEM;
		return NULL;
	}
	memset(a, 0, offsetof(struct arena, slabs));
	a->desc_size = dsize;
	a->huge = true;
	a->base = (uintptr_t)mem;
	a->size = size;
	s = &a->slabs[0];
	ulock_lock(&os_lock);
	s->cache = NULL;
	s = desc_head(a, 0, true);
	H.nhuge++;
	H.mapped += size;
	H.used += bytes;
	H.huge += bytes;
	map_set(a, a->base, a->size, a);
	ulock_unlock(&os_lock);
	return s;
}

struct slab *os_large_alloc(size_t bytes, size_t align)
{
	struct slab *s;

	USLAB_ASSERT(bytes && !(bytes & (PAGE_SIZE - 1)) && align >= PAGE_SIZE &&
		     align <= ARENA_GRANULE && !(align & (align - 1)));
	if (bytes > HEAP_MAX_BYTES || align > HEAP_MAX_BYTES)
		s = huge_alloc(bytes);
	else if ((s = heap_take(bytes >> PAGE_SHIFT,
				(unsigned int)__builtin_ctzl(align) - PAGE_SHIFT)))
		tsan_forget(s, s->base, bytes);
	if (s) {
		s->large = 1;
		s->large_size = bytes;
	}
	return s;
}

/* ----------------------------------------------------------------- purge */

/* Under os_lock: the candidate pages of word @w of @a: dirty, and old unless @all. */
static inline uint64_t purge_word(const struct arena *a, size_t w, bool all)
{
	return all ? a->dirty[w] : a->dirty[w] & ~a->young[w];
}

/*
 * purge_pick - carve up to PURGE_RUNS runs of dirty pages (all of them
 * with @all, else those older than a tick, the first @keep of them
 * skipped: lowest addresses, which are taken first), at most *@budget
 * pages, into @b, on the in-flight list. With USLAB_HUGEPAGES (not @all)
 * only whole free 2 MiB regions. Under os_lock. Return: runs picked.
 */
static unsigned int purge_pick(struct pbatch *b, bool all, size_t keep, size_t *budget)
{
	/*
	 * Each call scans from the start again: the pages kept stay dirty and
	 * old, so skipping @keep of them again keeps the same ones (pages
	 * freed meanwhile are young, not candidates).
	 */
	b->n = 0;
	USLAB_ASSERT_HELD(&os_lock);
	for (struct arena *a = heap; a && b->n < PURGE_RUNS && *budget; a = a->next) {
		size_t i = 0;

		if (!a->ndirty)
			continue;
		while (i < ARENA_PAGES && b->n < PURGE_RUNS && *budget) {
			size_t w = i / 64, start, n, lim, limit = ARENA_PAGES;
			uint64_t m = purge_word(a, w, all) & (~0ull << (i % 64));

			if (usl_opt.hugepages && !all) {
				/* Only a 2 MiB region all free: a huge page is not split. */
				size_t c = w / (HUGE_PAGES / 64) * (HUGE_PAGES / 64);
				bool whole = true;

				for (size_t x = c; x < c + HUGE_PAGES / 64; x++)
					whole &= a->freemap[x] == ~0ull;
				limit = (c + HUGE_PAGES / 64) * 64;
				if (!whole) {
					i = limit;
					continue;
				}
			}
			if (!m) {
				i = (w + 1) * 64;
				continue;
			}
			start = w * 64 + (size_t)__builtin_ctzll(m);
			/* The run: candidates from @start on, across words (@keep + *@budget, saturated). */
			lim = *budget > SIZE_MAX - keep ? SIZE_MAX : keep + *budget;
			n = 0;
			while (start + n < limit && bit_test(a->dirty, start + n) &&
			       (all || !bit_test(a->young, start + n)) && n < lim)
				n++;
			i = start + n;
			if (keep) {
				size_t k = keep < n ? keep : n;

				keep -= k;
				start += k;
				n -= k;
				if (!n)
					continue;
			}
			heap_carve(a, start, n);
			a->npurging++;
			*budget -= n;
			b->r[b->n++] = (struct prun){ a, (uint32_t)start, (uint32_t)n };
		}
	}
	if (b->n) {
		b->next = inflight;
		inflight = b;
	}
	return b->n;
}

/* Give the picked runs' pages back to the kernel. Outside os_lock. */
static void purge_madvise(const struct pbatch *b)
{
	USLAB_ASSERT(!ulock_owned(&os_lock));
	for (unsigned int r = 0; r < b->n; r++)
		madvise((void *)(b->r[r].a->base + ((uintptr_t)b->r[r].idx << PAGE_SHIFT)),
			(size_t)b->r[r].n << PAGE_SHIFT, MADV_DONTNEED);
}

/* The runs are free and clean; arenas left idle detached onto *@rel. Under os_lock. Return: bytes. */
static size_t purge_done(struct pbatch *b, struct arena **rel)
{
	struct pbatch **pp = &inflight;
	size_t bytes = 0;

	USLAB_ASSERT_HELD(&os_lock);
	while (*pp != b)
		pp = &(*pp)->next;
	*pp = b->next;
	for (unsigned int r = 0; r < b->n; r++) {
		struct arena *a = b->r[r].a;

		USLAB_ASSERT(a->npurging);
		heap_give(a, b->r[r].idx, b->r[r].n, false);
		a->npurging--;
		bytes += (size_t)b->r[r].n << PAGE_SHIFT;
		heap_check_idle(a, rel);
	}
	H.madvise_calls += b->n;
	H.purged += bytes;
	return bytes;
}

/*
 * purge_pass - purge dirty pages (see purge_pick) in batches, dropping
 * os_lock for the system calls, up to @budget pages; then unmap arenas
 * left idle. Called without os_lock. Return: bytes given back.
 */
static size_t purge_pass(bool all, size_t keep, size_t budget)
{
	struct pbatch b;
	struct arena *rel = NULL;
	size_t bytes = 0;

	ulock_lock(&os_lock);
	if (all) {
		/* Idle clean arenas too (an arena emptied with no purge to do). */
		for (struct arena *a = heap, *next; a; a = next) {
			next = a->next;
			heap_check_idle(a, &rel);
		}
	}
	while (budget && purge_pick(&b, all, keep, &budget)) {
		ulock_unlock(&os_lock);
		purge_madvise(&b);
		ulock_lock(&os_lock);
		bytes += purge_done(&b, &rel);
	}
	ulock_unlock(&os_lock);
	return bytes + arenas_unmap(rel);
}

size_t os_purge(void)
{
	return purge_pass(true, 0, SIZE_MAX);
}

/* ----------------------------------------------------------------- decay */

/* Ticks in DEMAND_WINDOW_MS at USLAB_PURGE_DELAY_MS: 1 to DEMAND_TICKS. */
static unsigned int demand_ticks(void)
{
	unsigned int ms = usl_opt.purge_delay_ms ? usl_opt.purge_delay_ms : 1;
	unsigned int t = DEMAND_WINDOW_MS / ms;

	return t < 1 ? 1 : t > DEMAND_TICKS ? DEMAND_TICKS : t;
}

/*
 * os_decay_step - one tick: purge what is old beyond the recent demand
 * (at most @budget pages), then age the young. Without os_lock. The decay
 * thread's, the frees' when it cannot run, and unit_os's.
 * Return: whether anything stays retained.
 */
bool os_decay_step(size_t budget)
{
	size_t keep;
	bool more;

	unsigned int ticks = demand_ticks();

	ulock_lock(&os_lock);
	H.demand[H.demand_at++ % ticks] = H.taken - H.taken_tick;
	H.taken_tick = H.taken;
	keep = 0;
	for (unsigned int t = 0; t < ticks; t++)
		keep = H.demand[t] > keep ? (size_t)H.demand[t] : keep;
	ulock_unlock(&os_lock);
	purge_pass(false, keep, budget);
	ulock_lock(&os_lock);
	for (struct arena *a = heap; a; a = a->next)
		if (a->ndirty)
			memset(a->young, 0, sizeof(a->young));
	more = H.retained != 0;
	ulock_unlock(&os_lock);
	return more;
}

/*
 * The decay thread. It lingers for a demand window's worth of idle ticks
 * (DEMAND_WINDOW_MS) before it exits: at a 20 ms tick a program that frees
 * in bursts would otherwise start and stop a thread several times a
 * second, and a start from a thread that is itself exiting (a key
 * destructor that frees) is what AddressSanitizer's thread bookkeeping
 * handles worst.
 */
static void *decay_main(void *arg)
{
	unsigned int idle = 0;

	(void)arg;
	for (;;) {
		unsigned int ms = usl_opt.purge_delay_ms ? usl_opt.purge_delay_ms : 1;
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
		if (os_decay_step(SIZE_MAX)) {
			idle = 0;
			continue;
		}
		if (++idle < demand_ticks())
			continue;
		/* Nothing retained: stop, unless a free came since (it saw the thread running). */
		ulock_lock(&os_lock);
		if (!H.retained) {
			__atomic_store_n(&D.running, false, __ATOMIC_RELEASE);
			WRITE_ONCE(os_decay_need, false);
			ulock_unlock(&os_lock);
			return NULL;
		}
		ulock_unlock(&os_lock);
	}
}

void os_decay_start(void)
{
	uint64_t now = now_ms();
	int err;

	ulock_lock(&os_lock);
	if (D.running || D.no_thread || now < D.retry_ms || !os_decay_need) {
		ulock_unlock(&os_lock);
		return;
	}
	__atomic_store_n(&D.running, true, __ATOMIC_RELAXED);
	WRITE_ONCE(os_decay_need, false);
	ulock_unlock(&os_lock);

	err = usl_thread_detached(decay_main);
	ulock_lock(&os_lock);
	if (err) {
		/* Frees run the ticks themselves meanwhile, a bounded batch each. */
		__atomic_store_n(&D.running, false, __ATOMIC_RELAXED);
		WRITE_ONCE(os_decay_need, true);
		D.retry_ms = now + 100;
		D.inline_decay = true;
	} else {
		D.inline_decay = false;
	}
	ulock_unlock(&os_lock);
}

bool os_decay_running(void)
{
	return __atomic_load_n(&D.running, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ free */

/* A huge object's mapping goes. */
static void huge_free(struct slab *s)
{
	struct arena *a = arena_of(s->base);

	USLAB_ASSERT(a && a->huge && s == &a->slabs[0]);
	ulock_lock(&os_lock);
	s->state = SLAB_FREE;
	H.nhuge--;
	H.mapped -= a->size;
	H.used -= s->large_size;
	H.huge -= s->large_size;
	a->used = s->large_size >> PAGE_SHIFT; /* (what arenas_unmap counts as given back) */
	map_set(a, a->base, a->size, NULL);
	a->next = NULL;
	ulock_unlock(&os_lock);
	arenas_unmap(a);
}

void os_slab_free(struct slab *s)
{
	struct arena *a = arena_of(s->base);
	size_t n, i;
	bool over, now, step = false;

	/* A slab os gave (NEW), or its cache let go of (FREE): not twice. */
	USLAB_ASSERT(!s->cache && (s->state == SLAB_NEW || s->state == SLAB_FREE));
	USLAB_ASSERT(a && s->base);
	if (a->huge) {
		asan_unpoison(s->base, s->large_size);
		huge_free(s);
		return;
	}
	n = slab_pages(s);
	i = (size_t)(s - a->slabs);
	asan_unpoison(s->base, n << PAGE_SHIFT);
	ulock_lock(&os_lock);
	tails_clear(s, 1, n);
	s->freelist = NULL;
	s->nfree = s->bump = s->objects = 0;
	USLAB_ASSERT(a->used >= n && H.used >= n * PAGE_SIZE);
	a->used -= n;
	H.used -= n * PAGE_SIZE;
	heap_give(a, i, n, !s->moved);
	s->large = 0;
	s->moved = 0;
	s->state = SLAB_FREE;
	now = !usl_opt.purge_delay_ms; /* purged below: no thread needed */
	if (!D.running && !D.no_thread && !now)
		WRITE_ONCE(os_decay_need, true);
	if (unlikely(D.inline_decay)) {
		/* No decay thread: this free runs a due tick (a bounded batch). */
		uint64_t t = now_ms();

		if (t >= D.next_ms) {
			D.next_ms = t + usl_opt.purge_delay_ms;
			step = true;
		}
	}
	over = H.retained > (size_t)usl_opt.retain_kb << 10;
	ulock_unlock(&os_lock);
	if (unlikely(now))
		purge_pass(true, 0, SIZE_MAX);
	else if (unlikely(over))
		purge_pass(true, 0, PURGE_BATCH_PAGES);
	else if (unlikely(step))
		os_decay_step(PURGE_BATCH_PAGES);
}

/* ---------------------------------------------------------------- resize */

/* A huge object resized by mremap (moved to an aligned range if it cannot grow where it is). */
static bool huge_resize(struct slab *s, size_t bytes)
{
	struct arena *a = arena_of(s->base);
	size_t size = ALIGN_UP(bytes, ARENA_GRANULE), old = a->size;
	uintptr_t base = a->base;
	void *q;

	if (size < bytes || bytes <= HEAP_MAX_BYTES)
		return false; /* (small enough for the heap: moved there) */
	if (size < old) {
		ulock_lock(&os_lock);
		map_set(a, base + size, old - size, NULL);
		a->size = size;
		H.mapped -= old - size;
		H.used += bytes - s->large_size;
		H.huge += bytes - s->large_size;
		H.munmap_calls++;
		H.purged += s->large_size > size ? s->large_size - size : 0;
		ulock_unlock(&os_lock);
		munmap((void *)(base + size), old - size);
		return true;
	}
	if (size > old) {
		q = mremap((void *)base, old, size, 0);
		if (q == MAP_FAILED) {
			void *to = mmap_aligned(size, ARENA_GRANULE);

			if (!to)
				return false;
			q = mremap((void *)base, old, size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
			if (q == MAP_FAILED) {
				munmap(to, size);
				return false;
			}
		}
		ulock_lock(&os_lock);
		map_set(a, base, old, NULL);
		a->base = (uintptr_t)q;
		a->size = size;
		__atomic_store_n(&s->base, (char *)q, __ATOMIC_RELAXED);
		map_set(a, a->base, size, a);
		H.mapped += size - old;
		H.mremap_calls++;
		H.used += bytes - s->large_size;
		H.huge += bytes - s->large_size;
		ulock_unlock(&os_lock);
		return true;
	}
	ulock_lock(&os_lock);
	H.used += bytes - s->large_size;
	H.huge += bytes - s->large_size;
	ulock_unlock(&os_lock);
	return true;
}

bool os_large_resize(struct slab *s, size_t bytes)
{
	struct arena *a = arena_of(s->base);
	size_t n, m, i;
	bool ok = true;

	USLAB_ASSERT(s->large && s->cache && bytes && !(bytes & (PAGE_SIZE - 1)));
	if (a->huge)
		return huge_resize(s, bytes);
	n = s->large_size >> PAGE_SHIFT;
	m = bytes >> PAGE_SHIFT;
	i = (size_t)(s - a->slabs);
	if (bytes > HEAP_MAX_BYTES)
		return false;
	ulock_lock(&os_lock);
	if (m < n) {
		/* The pages past @m are free (dirty); lookups there now read free pages. */
		tails_clear(s, m, n);
		a->used -= n - m;
		H.used -= (n - m) * PAGE_SIZE;
		heap_give(a, i + m, n - m, true);
		if (!D.running && !D.no_thread)
			WRITE_ONCE(os_decay_need, true);
	} else if (m > n && i + m <= ARENA_PAGES && bits_count(a->freemap, i + n, m - n) == m - n) {
		heap_carve(a, i + n, m - n);
		a->used += m - n;
		H.used += (m - n) * PAGE_SIZE;
		H.taken += m - n;
		H.grown_in_place++;
		tails_set(s, n, m);
	} else if (m > n) {
		ok = false;
	}
	ulock_unlock(&os_lock);
	if (ok && m > n) {
		tsan_forget(s, s->base + (n << PAGE_SHIFT), (m - n) << PAGE_SHIFT);
		tails_publish(s, n, m); /* the new tails' owner: the object's */
	}
	return ok;
}

/* Below this, copying a large object costs less than the two system calls of a move. */
#define MOVE_MIN (1ul << 20)

/*
 * os_large_move - see the contract at the top. The move leaves a hole in
 * @from's mapping, refilled at once with fresh pages (its arena, or huge
 * mapping, stays whole); if that fails, the pages move back. Each move may
 * split a mapping in the kernel (a VMA per moved range: at most 64 per
 * arena, as moves are 1 MiB or more). Outside os_lock: both objects are
 * the caller's.
 */
bool os_large_move(struct slab *to, struct slab *from)
{
	size_t n = from->large_size;
	void *src = from->base, *dst = to->base;

	USLAB_ASSERT(to->large && from->large && to->large_size >= n && dst != src);
	if (n < MOVE_MIN)
		return false;
	if (mremap(src, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == MAP_FAILED)
		return false;
	if (mmap(src, n, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
		/* No room for a mapping: the pages go back (and @to's range gets fresh ones). */
		if (mremap(dst, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, src) == MAP_FAILED ||
		    mmap(dst, n, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
			 0) == MAP_FAILED)
			usl_bug(NULL, src,
				"the kernel refused to map a moved large object's pages back");
		return false;
	}
	ulock_lock(&os_lock);
	H.mremap_calls++;
	from->moved = 1; /* its pages are fresh: freed clean */
	ulock_unlock(&os_lock);
	return true;
}

/* ------------------------------------------------------- checks, figures */

/*
 * Check level 2, under os_lock: every bitmap of every heap arena against
 * its counts (young <= dirty <= free; each free block's pages free and
 * the free pages exactly those of the free blocks; used + free + purging
 * = the arena), and the sums of uslab_heap_stats.
 */
static void os_check(void)
{
#if USLAB_EXPENSIVE
	size_t retained = 0, used = 0, narenas = 0, purging = 0;

	USLAB_ASSERT_HELD(&os_lock);
	for (struct pbatch *b = inflight; b; b = b->next)
		for (unsigned int r = 0; r < b->n; r++)
			purging += b->r[r].n;
	for (struct arena *a = heap; a; a = a->next) {
		size_t nfree = 0, nblk = 0;

		USLAB_ASSERT_EXPENSIVE(!a->huge && arena_of((void *)a->base) == a);
		USLAB_ASSERT_EXPENSIVE(!a->next || a->next->base > a->base);
		for (size_t w = 0; w < WORDS; w++) {
			USLAB_ASSERT_EXPENSIVE(!(a->young[w] & ~a->dirty[w]) &&
					       !(a->dirty[w] & ~a->freemap[w]));
			nfree += (size_t)__builtin_popcountll(a->freemap[w]);
		}
		USLAB_ASSERT_EXPENSIVE(bits_count(a->dirty, 0, ARENA_PAGES) == a->ndirty);
		for (unsigned int k = 0; k <= HEAP_ORDER_MAX; k++) {
			size_t cnt = bits_count(blk_map(a, k), 0, ARENA_PAGES >> k);

			USLAB_ASSERT_EXPENSIVE(cnt == a->nfree[k] &&
					       !!cnt == !!(a->free_orders & (1u << k)));
			nblk += cnt << k;
		}
		USLAB_ASSERT_EXPENSIVE(nblk == nfree);
		retained += a->ndirty;
		used += a->used;
		narenas++;
		(void)purging;
	}
	USLAB_ASSERT_EXPENSIVE(retained * PAGE_SIZE == H.retained && narenas == H.narenas);
	(void)used;
#endif
}

size_t os_dirty_bytes(void)
{
	size_t n;

	ulock_lock(&os_lock);
	os_check();
	n = H.retained;
	ulock_unlock(&os_lock);
	return n;
}

size_t os_arena_count(void)
{
	size_t n;

	ulock_lock(&os_lock);
	os_check();
	n = H.narenas;
	ulock_unlock(&os_lock);
	return n;
}

void os_heap_stats(struct uslab_heap_stats *st)
{
	ulock_lock(&os_lock);
	os_check();
	memset(st, 0, sizeof(*st));
	st->mapped_bytes = H.mapped;
	st->used_bytes = H.used;
	st->retained_bytes = H.retained;
	st->purged_bytes = H.purged;
	st->madvise_calls = H.madvise_calls;
	st->munmap_calls = H.munmap_calls;
	st->mremap_calls = H.mremap_calls;
	st->grown_in_place = H.grown_in_place;
	st->arenas = H.narenas;
	st->huge_objects = H.nhuge;
	st->huge_bytes = H.huge;
	ulock_unlock(&os_lock);
}

/*
 * os_slab_prefetch - start loading the descriptor of the page holding @p
 * (a hint: nothing is read but the registry, nothing checked).
 */
void os_slab_prefetch(const void *p)
{
	uintptr_t a = (uintptr_t)p, e;

	if (unlikely(a >> VA_BITS))
		return;
	e = __atomic_load_n(&slab_map[a >> ARENA_SHIFT], __ATOMIC_RELAXED);
	if (e)
		__builtin_prefetch(slab_desc(a, e), 1);
}

/* ------------------------------------------------------------------ fork */

void os_fork_prepare(void)
{
	ulock_lock(&os_lock);
}

void os_fork_parent(void)
{
	ulock_unlock(&os_lock);
}

void os_fork_child(void)
{
	/*
	 * Purges other threads had in flight never finish here, and their
	 * madvise may not have happened before the fork: free and dirty again.
	 */
	while (inflight) {
		struct pbatch *b = inflight;

		inflight = b->next;
		for (unsigned int r = 0; r < b->n; r++) {
			USLAB_ASSERT(b->r[r].a->npurging);
			heap_give(b->r[r].a, b->r[r].idx, b->r[r].n, true);
			b->r[r].a->npurging--;
		}
	}
	/*
	 * No decay thread here. The child starts its own at its first
	 * os_kick() with pages retained, as a new process does (a child that
	 * only calls exec or _exit makes no such call; a daemon that forks
	 * once at start-up gets one). Under ThreadSanitizer it starts none (TSan
	 * refuses threads after a threaded fork): its frees run the ticks, a
	 * bounded batch each, as when a thread cannot start.
	 */
	D.running = false;
#if defined(__SANITIZE_THREAD__)
	D.no_thread = true;
#endif
	D.inline_decay = D.no_thread;
	D.next_ms = 0;
	D.retry_ms = 0;
	WRITE_ONCE(os_decay_need, !D.no_thread && H.retained != 0);
	ulock_init(&os_lock);
}

/* ---------------------------------------------------------------- public */

int uslab_owns(const void *p)
{
	return os_slab_lookup(p) != NULL || (guard_owns(p) && guard_object(p, NULL, NULL));
}

void *uslab_slab_of(const void *p)
{
	struct slab *s = os_slab_lookup(p);
	void *obj;

	if (unlikely(!s && guard_owns(p))) /* a sampled object: its page */
		return guard_object(p, &obj, NULL) ? (void *)ALIGN_DOWN((uintptr_t)obj, PAGE_SIZE) :
						     NULL;
	return s ? s->base : NULL;
}
