// SPDX-License-Identifier: MIT
/*
 * os.c - memory from the OS: arenas of slabs, the address registry, and
 * memory given back with madvise/munmap. The page allocator of uslab.
 *
 * Contract (what the layers above may rely on):
 *   - os_slab_alloc(order) returns a slab descriptor for 2^order pages of
 *     zero-filled (or never touched) memory at s->base, aligned to the slab
 *     size up to 64 MiB (ARENA_GRANULE; larger slabs are aligned to that).
 *     pre: order <= OS_MAX_ORDER. NULL with errno ENOMEM when mmap fails.
 *   - os_slab_alloc(order) may return a slab freed earlier whose pages are
 *     still resident (dirty): its contents are undefined, and s->zeroed is
 *     0 (1 when the memory is known to read as zeros).
 *   - os_slab_free(s) takes the slab back. Its pages stay resident for
 *     USLAB_PURGE_DELAY_MS (default 250 ms), up to USLAB_RETAIN_KB in all,
 *     so a slab freed and needed again soon costs no system call and no
 *     page fault; then they are returned with MADV_DONTNEED. Purging is
 *     done by later os calls (no background thread), a bounded batch each:
 *     at most OS_PURGE_BATCH slabs (and about PURGE_BATCH_BYTES) per
 *     os_slab_alloc or os_slab_free, oldest first. So a slab stays resident
 *     longer than the delay until the next os call, and a backlog (or
 *     retained bytes beyond the budget) shrinks by a batch per call.
 *     pre: s->cache == NULL, and @s is a slab os_slab_alloc() returned
 *     and not freed since (state NEW, or FREE after its cache's use).
 *   - os_purge() returns every page retained when it was called, in
 *     batches (shrink, destroy).
 *   - os_slab_lookup(p) maps any address to its slab descriptor in O(1)
 *     without a lock: one load of the slab registry and a shift. NULL if p is not in
 *     a slab currently owned by a cache. Descriptors are never unmapped,
 *     so a lookup racing with an arena's release reads a free slot.
 *   - os_mmap/os_munmap: page-granular metadata memory (thread tables).
 *   - os_may_commit(size): whether the kernel would map @size bytes of
 *     private writable memory as the C library's malloc asks for it: with
 *     commit accounting, so vm.overcommit_memory's policy (and RLIMIT_AS)
 *     decides. uslab maps with MAP_NORESERVE, which the heuristic policy
 *     never refuses: kmalloc.c asks this of a huge object first.
 *
 * Arenas: every arena holds slabs of one order only, at naturally aligned
 * slots, so slot = (p - base) >> shift. An arena is 64 MiB, or four slabs
 * when slabs are larger, and is itself aligned to 64 MiB; the registry
 * arena_map has one entry per 64 MiB of address space (user addresses are
 * below 2^47), pointing to the arena that covers it. Slabs of an order
 * above SLAB_MAX_ORDER (huge: kmalloc's large objects beyond 32 MiB) get
 * an arena of their own, one slot, unmapped as soon as the slot is freed
 * (no retention: a huge slab is too big to keep for reuse).
 *
 * Two registries, one entry per granule: arena_map (the arena, for os.c's
 * bookkeeping) and uslab_priv_slab_map (the granule's first slab
 * descriptor and the shift, for lookups). The slab registry and a slab
 * descriptor's pcs_id are read without a lock by the inline kfree of
 * <uslab/kmalloc.h>: their layout is part of the ABI.
 *
 * Slot states: fresh (never used: beyond a->nfresh), used (cache != NULL),
 * dirty (free, pages resident, on its order's dirty list, newest first:
 * reused first, purged last), purging (taken off the dirty list by one
 * thread, which is returning its pages outside the lock: on the purging
 * list, counted in a->npurging, so nobody can allocate it and its arena is
 * not released meanwhile), free (on a->free; pages returned with
 * MADV_DONTNEED). As enum slab_state (cache.c has a used slab's states):
 *
 *   fresh, FREE -> NEW   os_slab_alloc: a free or fresh slot
 *   DIRTY -> NEW         os_slab_alloc: the newest dirty slot of the order
 *   NEW, FREE -> DIRTY   os_slab_free (cache == NULL)
 *   NEW, FREE -> FREE    os_slab_free of a huge slot (its arena is unmapped)
 *   DIRTY -> PURGING     purge_pick: the oldest due dirty slot
 *   PURGING -> FREE      purge_done, after its madvise
 *   PURGING -> DIRTY     os_fork_child: a purge the fork interrupted
 *
 * The doubly linked lists (dirty, purging) go through struct slab.list,
 * a->free through struct slab.next. USLAB_CHECKS builds assert each
 * transition and an arena's counts (nused + npurging + ndirty <= nfresh
 * <= nslots, arena_counts); check level 2 walks every list (os_check: each
 * slot's state, the counts, dirty_bytes, each dirty list newest first)
 * in os_purge() and the counters' readers. When an arena has no used, purging or dirty slot and
 * another arena of its order exists, it is detached (registry cleared),
 * then its memory is unmapped and its descriptor table put in
 * the pool for reuse by the next arena of the same order.
 *
 * Lock: os_lock (rank 11, LOCK_OS, the last in src/lock.h) protects the per-order lists and
 * all slot bookkeeping. It is taken once per slab, never per object, and
 * no system call is made under it: an os call takes it once, then again
 * after its madvise (purge) or mmap (new arena) calls to finish the
 * bookkeeping, and once more to pool the descriptors of arenas it
 * unmapped. A thread that forks in the middle of that leaves in the child
 * an arena mapped or unmapped with no owner (a leak, not an error) and
 * purging slots, which the child makes dirty again.
 */
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "os.h"

#define MAP_ENTRIES (1ul << (VA_BITS - ARENA_SHIFT))
/* An os call stops adding slabs to its purge batch beyond this many bytes. */
#define PURGE_BATCH_BYTES (256ul << 10)
/* os_purge's batches (the lock is dropped between them). */
#define PURGE_ALL_BATCH 64

struct arena {
	uintptr_t base;
	unsigned int order;
	unsigned int shift; /* PAGE_SHIFT + order */
	size_t size;
	unsigned int nslots;
	unsigned int nused;    /* slots owned by caches */
	unsigned int npurging; /* slots being purged outside os_lock */
	unsigned int ndirty;   /* free slots with resident pages */
	unsigned int nfresh;   /* slots [nfresh, nslots) never used */
	struct slab *free;     /* free slots, memory returned (chained by ->next) */
	struct arena *next;    /* per-order list, pool, or a caller's release list */
	size_t desc_size;      /* bytes of this descriptor */
	struct slab slabs[] CACHELINE_ALIGNED;
};

/* What <uslab/priv.h> reads: slab descriptors, 64-byte aligned (page-aligned tables; the rest in src/abi.c). */
_Static_assert(offsetof(struct arena, slabs) % CACHELINE == 0, "descriptors on cache lines");

struct os_order {
	struct arena *arenas; /* live arenas of this order */
	struct arena *pool;   /* descriptors without memory */
	unsigned int narenas;
	struct list_node dirty; /* dirty slots, newest first (struct slab.list) */
};

static struct ulock os_lock = ULOCK_INIT_RANK(LOCK_OS);
static struct os_order orders[OS_MAX_ORDER + 1];
/* Slots being purged, any order (struct slab.list). */
static struct list_node purging = LIST_HEAD_INIT(purging);
static struct arena *arena_map[MAP_ENTRIES];
/*
 * The slab registry, exported for the inline kfree (uslab/kmalloc.h): per
 * 64 MiB granule, the descriptor of the granule's first slab (64-byte
 * aligned) ORed with the arena's shift; 0 for no arena. The slab of p is
 * desc + ((p % 64 MiB) >> shift): one load, no arena header read.
 */
uintptr_t uslab_priv_slab_map[MAP_ENTRIES];
#define slab_map uslab_priv_slab_map
static size_t live_arenas;
static size_t dirty_bytes;
static uintptr_t mmap_hint; /* where the next arena would follow the last (racy hint) */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* An arena's counts: no slot counted twice, none beyond the arena. */
#define arena_counts(a)                                                         \
	USLAB_ASSERT((a)->nused + (a)->npurging + (a)->ndirty <= (a)->nfresh && \
		     (a)->nfresh <= (a)->nslots)

/* Under os_lock: make the dirty list heads point to themselves on first use. */
static void lists_init(void)
{
	USLAB_ASSERT_HELD(&os_lock);
	for (unsigned int i = 0; i <= OS_MAX_ORDER; i++) {
		struct list_node *d = &orders[i].dirty;

		if (!d->next)
			list_init(d);
	}
}

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
 * free and aligned); else map @size + @align and trim both ends.
 * Outside os_lock.
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
			if (((uintptr_t)p & (align - 1)) == 0)
				return p;
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
	return (void *)start;
}

static void map_set(struct arena *a, struct arena *val)
{
	USLAB_ASSERT_HELD(&os_lock);
	for (uintptr_t g = a->base; g < a->base + a->size; g += ARENA_GRANULE) {
		uintptr_t e = 0;

		/* Installed over nothing, cleared from itself: granules never overlap. */
		USLAB_ASSERT(arena_map[g >> ARENA_SHIFT] == (val ? NULL : a));
		if (val)
			e = (uintptr_t)&a->slabs[(g - a->base) >> a->shift] | a->shift;
		__atomic_store_n(&arena_map[g >> ARENA_SHIFT], val, __ATOMIC_RELEASE);
		__atomic_store_n(&slab_map[g >> ARENA_SHIFT], e, __ATOMIC_RELEASE);
	}
}

/*
 * Map a new arena of @order and set up its descriptor @a (one from the
 * pool, or NULL: map a new one). Outside os_lock; nobody else sees @a
 * until arena_install(). NULL if mmap fails (@a is then untouched).
 */
static struct arena *arena_create(unsigned int order, struct arena *a)
{
	size_t slab_size = PAGE_SIZE << order;
	size_t size = order > SLAB_MAX_ORDER	    ? slab_size :
		      slab_size * 4 > ARENA_GRANULE ? slab_size * 4 :
						      ARENA_GRANULE;
	void *mem;

	USLAB_ASSERT(order <= OS_MAX_ORDER && (!a || a->order == order));
	mem = mmap_aligned(size, ARENA_GRANULE);
	if (!mem)
		return NULL;
	if ((uintptr_t)mem + size > (1ul << VA_BITS)) {
		munmap(mem, size);
		return NULL;
	}
	if (!a) {
		unsigned int nslots = size / slab_size;
		size_t dsize = ALIGN_UP(sizeof(*a) + nslots * sizeof(struct slab), PAGE_SIZE);

		a = os_mmap(dsize);
		if (!a) {
			munmap(mem, size);
			return NULL;
		}
		a->desc_size = dsize;
		a->nslots = nslots;
	}
	WRITE_ONCE(mmap_hint, (uintptr_t)mem + size);
	a->base = (uintptr_t)mem;
	a->size = size;
	a->order = order;
	a->shift = PAGE_SHIFT + order;
	a->nused = 0;
	a->npurging = 0;
	a->ndirty = 0;
	a->nfresh = 0;
	a->free = NULL;
	return a;
}

/* Make a created arena live: its order's list and the registry. Under os_lock. */
static void arena_install(struct arena *a)
{
	struct os_order *o = &orders[a->order];

	USLAB_ASSERT_HELD(&os_lock);
	a->next = o->arenas;
	o->arenas = a;
	o->narenas++;
	live_arenas++;
	map_set(a, a);
}

/*
 * If @a has no used, purging or dirty slot and is not the last of its
 * order, take it out of the registry and its order's list and push it on
 * *@rel for arenas_unmap(). Under os_lock.
 */
static void arena_check(struct arena *a, struct arena **rel)
{
	struct os_order *o = &orders[a->order];
	struct arena **pp = &o->arenas;

	USLAB_ASSERT_HELD(&os_lock);
	arena_counts(a);
	/*
	 * The last arena of an order stays for the next slab, unless huge. An
	 * arena with retained slots stays until they are purged (purge_done()
	 * checks again): unmapping it would drop the retention's pages early
	 * and make the next slabs fault them back in.
	 */
	if (a->nused || a->npurging || a->ndirty || (o->narenas < 2 && a->order <= SLAB_MAX_ORDER))
		return;
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	o->narenas--;
	live_arenas--;
	map_set(a, NULL);
	a->next = *rel;
	*rel = a;
}

/*
 * Unmap the arenas arena_check() detached, then put their descriptors in
 * the pool. The system calls are made outside os_lock: nobody else can
 * reach a detached arena, and its address range cannot be reused by a new
 * arena before the munmap.
 */
static void arenas_unmap(struct arena *rel)
{
	struct arena *a;

	if (!rel)
		return;
	USLAB_ASSERT(!ulock_owned(&os_lock));
	for (a = rel; a; a = a->next) {
		/* Give the slot descriptors' pages back (the first page holds the header). */
		uintptr_t from = ALIGN_UP((uintptr_t)a->slabs, PAGE_SIZE);
		uintptr_t to = (uintptr_t)a + a->desc_size;

		munmap((void *)a->base, a->size);
		if (to > from)
			madvise((void *)from, to - from, MADV_DONTNEED);
	}
	ulock_lock(&os_lock);
	while (rel) {
		struct os_order *o;

		a = rel;
		rel = a->next;
		o = &orders[a->order];
		a->next = o->pool;
		o->pool = a;
	}
	ulock_unlock(&os_lock);
}

static struct arena *arena_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	if (unlikely(a >> VA_BITS))
		return NULL;
	return __atomic_load_n(&arena_map[a >> ARENA_SHIFT], __ATOMIC_ACQUIRE);
}

/*
 * purge_pick - take up to @max of the oldest dirty slots that are due
 * (freed before @deadline ms, or while more than @keep bytes are retained)
 * off the dirty lists and make them purging; stop once @max_bytes are
 * taken. Under os_lock. Return: how many, in @v[].
 */
static unsigned int purge_pick(struct slab **v, unsigned int max, size_t max_bytes,
			       uint64_t deadline, size_t keep)
{
	unsigned int n = 0;
	size_t bytes = 0;

	USLAB_ASSERT_HELD(&os_lock);
	while (n < max && bytes < max_bytes && dirty_bytes) {
		struct slab *oldest = NULL;
		struct arena *a;
		size_t size;

		for (unsigned int i = 0; i <= OS_MAX_ORDER; i++) {
			struct list_node *d = &orders[i].dirty;
			struct slab *t;

			if (list_empty(d))
				continue;
			t = list_last_entry(d, struct slab, list);
			if (!oldest || t->freed_ms < oldest->freed_ms)
				oldest = t;
		}
		if (!oldest || (oldest->freed_ms >= deadline && dirty_bytes <= keep))
			break;
		/* DIRTY -> PURGING */
		USLAB_ASSERT(oldest->state == SLAB_DIRTY && !oldest->cache);
		size = PAGE_SIZE << oldest->order;
		a = arena_of(oldest->base);
		USLAB_ASSERT(dirty_bytes >= size && a->ndirty);
		list_del(&oldest->list);
		dirty_bytes -= size;
		a->ndirty--;
		a->npurging++;
		oldest->state = SLAB_PURGING;
		list_add(&oldest->list, &purging);
		bytes += size;
		v[n++] = oldest;
	}
	return n;
}

/* What an os_slab_alloc/free call purges: a bounded batch of due slots. */
static unsigned int purge_due(struct slab **v, uint64_t now)
{
	uint64_t delay = usl_opt.purge_delay_ms;

	return purge_pick(v, OS_PURGE_BATCH, PURGE_BATCH_BYTES, now > delay ? now - delay : 0,
			  (size_t)usl_opt.retain_kb << 10);
}

/*
 * Return the pages of purging slots to the kernel. Outside os_lock: the
 * slots are this thread's until purge_done(), and their arenas stay mapped
 * while they are counted in npurging.
 */
static void purge_madvise(struct slab *const *v, unsigned int n)
{
	USLAB_ASSERT(!ulock_owned(&os_lock));
	for (unsigned int i = 0; i < n; i++)
		madvise(v[i]->base, PAGE_SIZE << v[i]->order, MADV_DONTNEED);
}

/* Make purged slots free; detach arenas left idle onto *@rel. Under os_lock. */
static void purge_done(struct slab *const *v, unsigned int n, struct arena **rel)
{
	USLAB_ASSERT_HELD(&os_lock);
	for (unsigned int i = 0; i < n; i++) {
		struct slab *s = v[i];
		struct arena *a = arena_of(s->base);

		/* PURGING -> FREE */
		USLAB_ASSERT(s->state == SLAB_PURGING && a->npurging);
		list_del(&s->list);
		s->state = SLAB_FREE;
		s->next = a->free;
		a->free = s;
		a->npurging--;
		arena_check(a, rel);
	}
}

/*
 * Check level 2, under os_lock: every list and count of the file comment.
 * Each live arena's slots are used, dirty, purging, free (on a->free) or
 * fresh, and its counts say how many; dirty_bytes is the size of the dirty
 * slots; each dirty list is newest first; the registry maps each arena.
 */
static void os_check(void)
{
#if USLAB_EXPENSIVE
	size_t dirty = 0, arenas = 0;
	unsigned long purging_n = 0, npurging = 0;
	struct slab *s;

	USLAB_ASSERT_HELD(&os_lock);
	list_for_each_entry(s, &purging, list) {
		USLAB_ASSERT_EXPENSIVE(s->state == SLAB_PURGING && !s->cache);
		purging_n++;
	}
	for (unsigned int i = 0; i <= OS_MAX_ORDER; i++) {
		uint64_t newer = UINT64_MAX;
		unsigned int narenas = 0;

		list_for_each_entry(s, &orders[i].dirty, list) {
			USLAB_ASSERT_EXPENSIVE(s->state == SLAB_DIRTY && !s->cache &&
					       s->order == i);
			USLAB_ASSERT_EXPENSIVE(s->freed_ms <= newer);
			newer = s->freed_ms;
			dirty += PAGE_SIZE << i;
		}
		for (struct arena *a = orders[i].arenas; a; a = a->next) {
			unsigned int nfree = 0;

			USLAB_ASSERT_EXPENSIVE(a->order == i && arena_of((void *)a->base) == a);
			arena_counts(a);
			for (s = a->free; s; s = s->next) {
				USLAB_ASSERT_EXPENSIVE(s->state == SLAB_FREE && !s->cache);
				nfree++;
			}
			USLAB_ASSERT_EXPENSIVE(nfree ==
					       a->nfresh - a->nused - a->npurging - a->ndirty);
			npurging += a->npurging;
			narenas++;
		}
		USLAB_ASSERT_EXPENSIVE(narenas == orders[i].narenas);
		arenas += narenas;
	}
	USLAB_ASSERT_EXPENSIVE(dirty == dirty_bytes && arenas == live_arenas);
	USLAB_ASSERT_EXPENSIVE(purging_n == npurging);
#endif
}

void os_purge(void)
{
	struct slab *v[PURGE_ALL_BATCH];
	struct arena *rel = NULL;
	unsigned int n = 0;
	uint64_t until;

	ulock_lock(&os_lock);
	lists_init();
	os_check();
	/* What was retained when called: others' frees meanwhile do not prolong it. */
	until = now_ms() + 1;
	for (;;) {
		purge_done(v, n, &rel);
		n = purge_pick(v, PURGE_ALL_BATCH, SIZE_MAX, until, SIZE_MAX);
		if (!n)
			break;
		ulock_unlock(&os_lock);
		purge_madvise(v, n);
		ulock_lock(&os_lock);
	}
	ulock_unlock(&os_lock);
	arenas_unmap(rel);
}

/* A slot of @a (free first, then fresh), now used. Under os_lock. */
static struct slab *slot_of_arena(struct arena *a)
{
	struct slab *s;

	USLAB_ASSERT_HELD(&os_lock);
	if (a->free) {
		s = a->free;
		USLAB_ASSERT(s->state == SLAB_FREE && !s->cache);
		a->free = s->next;
	} else {
		unsigned int idx = a->nfresh++;

		s = &a->slabs[idx];
		s->base = (char *)(a->base + ((uintptr_t)idx << a->shift));
		s->order = a->order;
	}
	a->nused++;
	arena_counts(a);
	s->list.next = s->list.prev = NULL;
	s->zeroed = 1; /* never used, or its pages went back with MADV_DONTNEED */
	/* FREE (or fresh) -> NEW */
	s->state = SLAB_NEW;
	return s;
}

/* A dirty, free or fresh slot of @order, or NULL if a new arena is needed. Under os_lock. */
static struct slab *slot_take(unsigned int order)
{
	struct os_order *o = &orders[order];
	struct arena *a;
	struct slab *s;

	USLAB_ASSERT_HELD(&os_lock);
	if (!list_empty(&o->dirty)) {
		/* The most recently freed slab: its pages are still warm. */
		s = list_first_entry(&o->dirty, struct slab, list);
		USLAB_ASSERT(s->state == SLAB_DIRTY && !s->cache && s->order == order);
		list_del(&s->list);
		dirty_bytes -= PAGE_SIZE << order;
		a = arena_of(s->base);
		USLAB_ASSERT(a->ndirty);
		a->ndirty--;
		a->nused++;
		arena_counts(a);
		s->zeroed = 0;
		/* DIRTY -> NEW */
		s->state = SLAB_NEW;
		return s;
	}
	for (a = o->arenas; a; a = a->next)
		if (a->free || a->nfresh < a->nslots)
			return slot_of_arena(a);
	return NULL;
}

struct slab *os_slab_alloc(unsigned int order)
{
	struct os_order *o = &orders[order];
	struct slab *v[OS_PURGE_BATCH];
	struct arena *a = NULL, *desc = NULL, *rel = NULL;
	struct slab *s;
	unsigned int n;

	USLAB_ASSERT(order <= OS_MAX_ORDER);
	ulock_lock(&os_lock);
	lists_init();
	s = slot_take(order);
	if (!s) {
		/* Reserve a pooled descriptor; map the memory unlocked. */
		desc = o->pool;
		if (desc)
			o->pool = desc->next;
	}
	n = purge_due(v, now_ms());
	ulock_unlock(&os_lock);
	if (s && !n)
		return s;

	purge_madvise(v, n);
	if (!s)
		a = arena_create(order, desc);
	ulock_lock(&os_lock);
	purge_done(v, n, &rel);
	if (!s && a) {
		arena_install(a);
		s = slot_of_arena(a);
	} else if (!s && desc) {
		desc->next = o->pool;
		o->pool = desc;
	}
	ulock_unlock(&os_lock);
	arenas_unmap(rel);
	if (!s)
		errno = ENOMEM;
	return s;
}

void os_slab_free(struct slab *s)
{
	size_t size = PAGE_SIZE << s->order;
	struct arena *a = arena_of(s->base);
	struct os_order *o = &orders[s->order];
	struct slab *v[OS_PURGE_BATCH];
	struct arena *rel = NULL;
	unsigned int n;
	uint64_t now;

	/* A slab os_slab_alloc() gave (NEW), or its cache let go of (FREE): not twice. */
	USLAB_ASSERT(!s->cache && (s->state == SLAB_NEW || s->state == SLAB_FREE));
	asan_unpoison(s->base, size);
	ulock_lock(&os_lock);
	/* Read under the lock, so every dirty list is in order of freed_ms. */
	now = now_ms();
	s->freelist = NULL;
	s->nfree = s->bump = s->objects = 0;
	if (s->order > SLAB_MAX_ORDER) {
		/* Huge: NEW or FREE -> FREE, its arena unmapped below. */
		s->state = SLAB_FREE;
		s->next = a->free;
		a->free = s;
	} else {
		/* Retained, newest first; purged when old or beyond the budget. */
		s->state = SLAB_DIRTY;
		s->freed_ms = now;
		list_add(&s->list, &o->dirty);
		dirty_bytes += size;
		a->ndirty++;
	}
	USLAB_ASSERT(a->nused);
	a->nused--;
	n = purge_due(v, now);
	arena_check(a, &rel);
	ulock_unlock(&os_lock);
	if (n) {
		purge_madvise(v, n);
		ulock_lock(&os_lock);
		purge_done(v, n, &rel);
		ulock_unlock(&os_lock);
	}
	arenas_unmap(rel);
}

size_t os_dirty_bytes(void)
{
	size_t n;

	ulock_lock(&os_lock);
	lists_init();
	os_check();
	n = dirty_bytes;
	ulock_unlock(&os_lock);
	return n;
}

/*
 * os_slab_prefetch - start loading the descriptor of the slab that would
 * hold @p (a hint: nothing is read but the registry, nothing checked).
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

size_t os_arena_count(void)
{
	size_t n;

	ulock_lock(&os_lock);
	lists_init();
	os_check();
	n = live_arenas;
	ulock_unlock(&os_lock);
	return n;
}

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
	 * madvise may not have happened before the fork: dirty again, oldest.
	 */
	while (!list_empty(&purging)) {
		struct slab *s = list_first_entry(&purging, struct slab, list);
		struct arena *a = arena_of(s->base);

		/* PURGING -> DIRTY, at the tail: the oldest */
		USLAB_ASSERT(s->state == SLAB_PURGING && a->npurging);
		list_move_tail(&s->list, &orders[s->order].dirty);
		s->state = SLAB_DIRTY;
		dirty_bytes += PAGE_SIZE << s->order;
		a->ndirty++;
		a->npurging--;
	}
	ulock_init(&os_lock);
}

int uslab_owns(const void *p)
{
	return os_slab_lookup(p) != NULL;
}

void *uslab_slab_of(const void *p)
{
	struct slab *s = os_slab_lookup(p);

	return s ? s->base : NULL;
}
