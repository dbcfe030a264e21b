// SPDX-License-Identifier: MIT
/*
 * os.c - the page heap's buddy arenas: pages for slabs of every order and
 * kmalloc's large objects, their descriptors, huge objects mapped apart.
 * The page allocator of uslab. Its mappings and the address registry are
 * os_map.c's, purges and the decay thread os_decay.c's (os_heap.h is what
 * the three share); the contract below is the three files'.
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
 * (the inline kfree's arithmetic, <uslab/inline/priv.h>); a slab's other pages
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
 * Huge objects (above HEAP_MAX_BYTES): a mapping of their own, granules
 * rounded, with a one-descriptor table whose registry entries all point
 * at it (shift ARENA_SHIFT); resized by mremap; unmapped when freed.
 *
 * Lock: os_lock (LOCK_OS in src/lock.h) protects every
 * arena's bitmaps, counts and the lists here. It is taken once per slab
 * or large object, never per object, and no system call is made under
 * it: purges carve their runs under it, drop it for the madvise calls and
 * take it again to give the pages back. Nor is work per page done under
 * it (a free of any cache that gives a slab back waits for whatever it
 * covers): a slab's or large object's tail descriptors, one cache line
 * per page, are written after the take and cleared before the give,
 * while the pages are the caller's alone; purges scan the bitmaps a word
 * at a time (os_decay.c). USLAB_CHECKS builds assert each transition;
 * check level 2 (os_check) recounts every bitmap.
 */
#define _GNU_SOURCE /* mremap */
#include <string.h>
#include <sys/mman.h>

#include "os.h"
#include "os_heap.h"
#include "uslab/stats.h"

struct ulock os_lock = ULOCK_INIT_RANK(LOCK_OS);
struct arena *os_arenas;	/* heap arenas, by address */
static struct arena *heap_pool; /* heap arena descriptors without memory */
static struct arena *huge_pool; /* huge descriptors without memory */
struct os_figures os_fig;

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
		USLAB_ASSERT(a->ndirty >= d && os_fig.retained >= d * PAGE_SIZE);
		a->ndirty -= d;
		os_fig.retained -= d * PAGE_SIZE;
	}
	return d;
}

/*
 * heap_carve - take free pages [i, i + n) of @a out of the free blocks:
 * each block that holds some of them is split around them. Under os_lock.
 * Return: how many of them were dirty.
 */
size_t heap_carve(struct arena *a, size_t i, size_t n)
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
void heap_give(struct arena *a, size_t i, size_t n, bool dirty)
{
	USLAB_ASSERT_HELD(&os_lock);
	USLAB_ASSERT(i + n <= ARENA_PAGES && !bits_count(a->freemap, i, n));
	bits_assign(a->freemap, i, n, true);
	if (dirty) {
		bits_assign(a->dirty, i, n, true);
		bits_assign(a->young, i, n, true);
		a->ndirty += n;
		os_fig.retained += n * PAGE_SIZE;
	}
	buddy_put_range(a, i, n);
}

/*
 * A new heap arena (a descriptor from the pool, or a new one), all its
 * pages free and clean. Outside os_lock; nobody sees it until
 * heap_install(). NULL if mmap fails.
 */
static struct arena *heap_create(struct arena *a, unsigned int node)
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
	a->node = node;
	numa_place(mem, ARENA_GRANULE, node); /* before any page is touched */
	bits_assign(a->freemap, 0, ARENA_PAGES, true);
	blk_add(a, 0, HEAP_ORDER_MAX);
	return a;
}

/* Make a created arena live: the heap (in address order) and the registry. Under os_lock. */
static void heap_install(struct arena *a)
{
	struct arena **pp = &os_arenas;

	USLAB_ASSERT_HELD(&os_lock);
	while (*pp && (*pp)->base < a->base)
		pp = &(*pp)->next;
	a->next = *pp;
	*pp = a;
	os_fig.narenas++;
	os_fig.mapped += a->size;
	map_set(a, a->base, a->size, a);
}

/*
 * If @a is all free and clean, nothing being purged, and not the only
 * arena, take it out of the registry and the heap and push it on *@rel
 * for arenas_unmap(). Under os_lock.
 */
void heap_check_idle(struct arena *a, struct arena **rel)
{
	struct arena **pp = &os_arenas;

	USLAB_ASSERT_HELD(&os_lock);
	if (a->used || a->ndirty || a->npurging || os_fig.narenas < 2)
		return;
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	os_fig.narenas--;
	os_fig.mapped -= a->size;
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
size_t arenas_unmap(struct arena *rel)
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
	os_fig.munmap_calls += calls;
	os_fig.purged += bytes;
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
	s->node = a->node & (NUMA_MAX_NODES - 1);
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
		d->node = s->node; /* (every page of an arena is its node's: read from any page) */
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
static struct slab *heap_take(size_t n, unsigned int align_order, unsigned int node)
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
		for (a = os_arenas; a; a = a->next)
			if (a->free_orders >> k && a->node == node)
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
		fresh = heap_create(desc, node);
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
	os_fig.used += n * PAGE_SIZE;
	os_fig.taken += n;
	s = desc_head(a, i, !d);
	ulock_unlock(&os_lock);
	/* The pages are ours: their tails are written unlocked (one line per page). */
	tails_set(s, 1, n);
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

struct slab *os_slab_alloc(unsigned int order, unsigned int node)
{
	struct slab *s;

	USLAB_ASSERT(order <= SLAB_MAX_ORDER && numa_node_ok(node));
	s = heap_take(1ul << order, order, node);
	if (s) {
		s->order = (uint8_t)order;
		tsan_forget(s, s->base, PAGE_SIZE << order);
	}
	return s;
}

/* A huge object: a mapping of its own, @bytes rounded up to granules. */
static struct slab *huge_alloc(size_t bytes, unsigned int node)
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
	a->node = node;
	numa_place(mem, size, node);
	a->base = (uintptr_t)mem;
	a->size = size;
	s = &a->slabs[0];
	ulock_lock(&os_lock);
	s->cache = NULL;
	s = desc_head(a, 0, true);
	os_fig.nhuge++;
	os_fig.mapped += size;
	os_fig.used += bytes;
	os_fig.huge += bytes;
	map_set(a, a->base, a->size, a);
	ulock_unlock(&os_lock);
	return s;
}

struct slab *os_large_alloc(size_t bytes, size_t align, unsigned int node)
{
	struct slab *s;

	USLAB_ASSERT(bytes && !(bytes & (PAGE_SIZE - 1)) && align >= PAGE_SIZE &&
		     align <= ARENA_GRANULE && !(align & (align - 1)) && numa_node_ok(node));
	if (bytes > HEAP_MAX_BYTES || align > HEAP_MAX_BYTES)
		s = huge_alloc(bytes, node);
	else if ((s = heap_take(bytes >> PAGE_SHIFT,
				(unsigned int)__builtin_ctzl(align) - PAGE_SHIFT, node)))
		tsan_forget(s, s->base, bytes);
	if (s) {
		s->large = 1;
		s->large_size = bytes;
	}
	return s;
}

/* ------------------------------------------------------------------ free */

/* A huge object's mapping goes. */
static void huge_free(struct slab *s)
{
	struct arena *a = arena_of(s->base);

	USLAB_ASSERT(a && a->huge && s == &a->slabs[0]);
	ulock_lock(&os_lock);
	s->state = SLAB_FREE;
	os_fig.nhuge--;
	os_fig.mapped -= a->size;
	os_fig.used -= s->large_size;
	os_fig.huge -= s->large_size;
	a->used = s->large_size >> PAGE_SHIFT; /* (what arenas_unmap counts as given back) */
	map_set(a, a->base, a->size, NULL);
	a->next = NULL;
	ulock_unlock(&os_lock);
	arenas_unmap(a);
}

void os_slab_free(struct slab *s)
{
	struct arena *a = arena_of(s->base);
	enum decay_todo todo;
	size_t n, i;

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
	/* Still the caller's until heap_give(): the tails are cleared unlocked (one line per page). */
	tails_clear(s, 1, n);
	s->freelist = NULL;
	s->nfree = s->bump = s->objects = 0;
	ulock_lock(&os_lock);
	USLAB_ASSERT(a->used >= n && os_fig.used >= n * PAGE_SIZE);
	a->used -= n;
	os_fig.used -= n * PAGE_SIZE;
	heap_give(a, i, n, !s->moved);
	s->large = 0;
	s->moved = 0;
	s->state = SLAB_FREE;
	todo = decay_freed_locked();
	ulock_unlock(&os_lock);
	decay_after_free(todo);
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
		return false; /* (small enough for the os_arenas: moved there) */
	if (size < old) {
		ulock_lock(&os_lock);
		map_set(a, base + size, old - size, NULL);
		a->size = size;
		os_fig.mapped -= old - size;
		os_fig.used += bytes - s->large_size;
		os_fig.huge += bytes - s->large_size;
		os_fig.munmap_calls++;
		os_fig.purged += s->large_size > size ? s->large_size - size : 0;
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
		os_fig.mapped += size - old;
		os_fig.mremap_calls++;
		os_fig.used += bytes - s->large_size;
		os_fig.huge += bytes - s->large_size;
		ulock_unlock(&os_lock);
		return true;
	}
	ulock_lock(&os_lock);
	os_fig.used += bytes - s->large_size;
	os_fig.huge += bytes - s->large_size;
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
	/* The pages past @m are free (dirty) once given; lookups there now read free pages. */
	if (m < n)
		tails_clear(s, m, n); /* (the owner's still: unlocked) */
	ulock_lock(&os_lock);
	if (m < n) {
		a->used -= n - m;
		os_fig.used -= (n - m) * PAGE_SIZE;
		heap_give(a, i + m, n - m, true);
		decay_dirty_locked();
	} else if (m > n && i + m <= ARENA_PAGES && bits_count(a->freemap, i + n, m - n) == m - n) {
		heap_carve(a, i + n, m - n);
		a->used += m - n;
		os_fig.used += (m - n) * PAGE_SIZE;
		os_fig.taken += m - n;
		os_fig.grown_in_place++;
	} else if (m > n) {
		ok = false;
	}
	ulock_unlock(&os_lock);
	if (ok && m > n) {
		tails_set(s, n, m); /* (taken: ours, written unlocked) */
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
	os_fig.mremap_calls++;
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
	for (struct pbatch *b = os_inflight; b; b = b->next)
		for (unsigned int r = 0; r < b->n; r++)
			purging += b->r[r].n;
	for (struct arena *a = os_arenas; a; a = a->next) {
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
	USLAB_ASSERT_EXPENSIVE(retained * PAGE_SIZE == os_fig.retained &&
			       narenas == os_fig.narenas);
	(void)used;
#endif
}

size_t os_dirty_bytes(void)
{
	size_t n;

	ulock_lock(&os_lock);
	os_check();
	n = os_fig.retained;
	ulock_unlock(&os_lock);
	return n;
}

size_t os_arena_count(void)
{
	size_t n;

	ulock_lock(&os_lock);
	os_check();
	n = os_fig.narenas;
	ulock_unlock(&os_lock);
	return n;
}

void os_heap_stats(struct uslab_heap_stats *st)
{
	ulock_lock(&os_lock);
	os_check();
	memset(st, 0, sizeof(*st));
	st->mapped_bytes = os_fig.mapped;
	st->used_bytes = os_fig.used;
	st->retained_bytes = os_fig.retained;
	st->purged_bytes = os_fig.purged;
	st->madvise_calls = os_fig.madvise_calls;
	st->munmap_calls = os_fig.munmap_calls;
	st->mremap_calls = os_fig.mremap_calls;
	st->grown_in_place = os_fig.grown_in_place;
	st->arenas = os_fig.narenas;
	st->huge_objects = os_fig.nhuge;
	st->huge_bytes = os_fig.huge;
	ulock_unlock(&os_lock);
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
	decay_fork_child();
	ulock_init(&os_lock);
}
