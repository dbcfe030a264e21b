// SPDX-License-Identifier: MIT
/*
 * os.c - memory from the OS: arenas of slabs, the address registry, and
 * memory given back with madvise/munmap. The page allocator of uslab.
 *
 * Contract (what the layers above may rely on):
 *   - os_slab_alloc(order) returns a slab descriptor for 2^order pages of
 *     zero-filled (or never touched) memory at s->base, aligned to the slab
 *     size. pre: order <= SLAB_MAX_ORDER. NULL with errno ENOMEM when mmap
 *     fails.
 *   - os_slab_alloc(order) may return a slab freed earlier whose pages are
 *     still resident (dirty): its contents are undefined.
 *   - os_slab_free(s) takes the slab back. Its pages stay resident for
 *     USLAB_PURGE_DELAY_MS (default 10 ms), up to USLAB_RETAIN_KB in all,
 *     so a slab freed and needed again soon costs no system call and no
 *     page fault; then they are returned with MADV_DONTNEED. Purging is
 *     done by later os calls (no background thread). pre: s->cache == NULL.
 *   - os_purge() returns every retained page at once (shrink, destroy).
 *   - os_slab_lookup(p) maps any address to its slab descriptor in O(1)
 *     without a lock: two dependent loads and a shift. NULL if p is not in
 *     a slab currently owned by a cache. Descriptors are never unmapped,
 *     so a lookup racing with an arena's release reads a free slot.
 *   - os_mmap/os_munmap: page-granular metadata memory (thread tables).
 *
 * Arenas: every arena holds slabs of one order only, at naturally aligned
 * slots, so slot = (p - base) >> shift. An arena is 64 MiB, or four slabs
 * when slabs are larger, and is itself aligned to 64 MiB; the registry
 * arena_map has one entry per 64 MiB of address space (user addresses are
 * below 2^47), pointing to the arena that covers it.
 *
 * Slot states: fresh (never used: beyond a->nfresh), used (cache != NULL),
 * dirty (free, pages resident, on its order's dirty list, newest first:
 * reused first, purged last), free (on a->free; pages returned with
 * MADV_DONTNEED). When an arena has no used slot and another arena of its
 * order exists, its memory is unmapped and its descriptor table kept for
 * reuse by the next arena of the same order.
 *
 * Lock: os_lock (last in the lock order) protects the per-order lists and
 * all slot bookkeeping. It is taken once per slab, never per object.
 */
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"

#define ARENA_GRANULE (1ul << ARENA_SHIFT)
#define VA_BITS 47
#define MAP_ENTRIES (1ul << (VA_BITS - ARENA_SHIFT))

struct arena {
	uintptr_t base;
	size_t size;
	unsigned int order;
	unsigned int shift; /* PAGE_SHIFT + order */
	unsigned int nslots;
	unsigned int nused;  /* slots owned by caches */
	unsigned int ndirty; /* free slots with resident pages */
	unsigned int nfresh; /* slots [nfresh, nslots) never used */
	struct slab *free;   /* free slots, memory returned */
	struct arena *next;  /* per-order list */
	size_t desc_size;    /* bytes of this descriptor */
	struct slab slabs[];
};

struct os_order {
	struct arena *arenas; /* live arenas of this order */
	struct arena *pool;   /* descriptors without memory */
	unsigned int narenas;
	struct slab dirty; /* dirty slots, newest first (next/prev) */
};

static struct ulock os_lock = ULOCK_INIT_RANK(LOCK_OS);
static struct os_order orders[SLAB_MAX_ORDER + 1];
static struct arena *arena_map[MAP_ENTRIES];
static size_t live_arenas;
static size_t dirty_bytes;
static uintptr_t mmap_hint; /* where the next arena would follow the last */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void dirty_init(void)
{
	for (unsigned int i = 0; i <= SLAB_MAX_ORDER; i++) {
		struct slab *d = &orders[i].dirty;

		if (!d->next)
			d->next = d->prev = d;
	}
}

void *os_mmap(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

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

/*
 * mmap @size bytes aligned to @align (both multiples of the page size).
 * First ask for exactly @size right after the previous arena (usually
 * free and aligned); else map @size + @align and trim both ends.
 */
static void *mmap_aligned(size_t size, size_t align)
{
	char *p;
	uintptr_t start, end;

	if (mmap_hint) {
		p = mmap((void *)mmap_hint, size, PROT_READ | PROT_WRITE,
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
	for (uintptr_t g = a->base; g < a->base + a->size; g += ARENA_GRANULE)
		__atomic_store_n(&arena_map[g >> ARENA_SHIFT], val, __ATOMIC_RELEASE);
}

static struct arena *arena_new(unsigned int order)
{
	size_t slab_size = PAGE_SIZE << order;
	size_t size = slab_size * 4 > ARENA_GRANULE ? slab_size * 4 : ARENA_GRANULE;
	struct os_order *o = &orders[order];
	struct arena *a = o->pool;
	void *mem;

	mem = mmap_aligned(size, ARENA_GRANULE);
	if (!mem)
		return NULL;
	if ((uintptr_t)mem + size > (1ul << VA_BITS)) {
		munmap(mem, size);
		errno = ENOMEM;
		return NULL;
	}
	if (a) {
		o->pool = a->next;
	} else {
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
	a->base = (uintptr_t)mem;
	a->size = size;
	a->order = order;
	a->shift = PAGE_SHIFT + order;
	a->nused = 0;
	a->ndirty = 0;
	a->nfresh = 0;
	a->free = NULL;
	mmap_hint = a->base + size;
	a->next = o->arenas;
	o->arenas = a;
	o->narenas++;
	live_arenas++;
	map_set(a, a);
	return a;
}

static void dirty_del(struct slab *s)
{
	s->prev->next = s->next;
	s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

/* The arena has no used slot and is not the last of its order. */
static void arena_release(struct arena *a)
{
	struct os_order *o = &orders[a->order];
	struct arena **pp = &o->arenas;

	for (unsigned int i = 0; a->ndirty && i < a->nfresh; i++) {
		if (a->slabs[i].state == SLAB_DIRTY) {
			dirty_del(&a->slabs[i]);
			dirty_bytes -= PAGE_SIZE << a->order;
			a->ndirty--;
		}
	}
	while (*pp != a)
		pp = &(*pp)->next;
	*pp = a->next;
	o->narenas--;
	live_arenas--;
	map_set(a, NULL);
	munmap((void *)a->base, a->size);
	/* Zero the slot descriptors (and give their pages back). */
	madvise(a->slabs, a->desc_size - offsetof(struct arena, slabs), MADV_DONTNEED);
	a->next = o->pool;
	o->pool = a;
}

static struct arena *arena_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	if (unlikely(a >> VA_BITS))
		return NULL;
	return __atomic_load_n(&arena_map[a >> ARENA_SHIFT], __ATOMIC_ACQUIRE);
}

/* Return a dirty slot's pages to the kernel and make it a free slot. */
static void purge_slot(struct slab *s)
{
	struct arena *a = arena_of(s->base);

	dirty_del(s);
	dirty_bytes -= PAGE_SIZE << s->order;
	a->ndirty--;
	madvise(s->base, PAGE_SIZE << s->order, MADV_DONTNEED);
	s->state = SLAB_FREE;
	s->next = a->free;
	a->free = s;
}

/*
 * Purge dirty slots freed before @deadline (ms), and the oldest ones while
 * more than @keep bytes are retained. Under os_lock.
 */
static void purge_locked(uint64_t deadline, size_t keep)
{
	for (;;) {
		struct slab *oldest = NULL;

		for (unsigned int i = 0; i <= SLAB_MAX_ORDER; i++) {
			struct slab *t = orders[i].dirty.prev;

			if (t != &orders[i].dirty && (!oldest || t->freed_ms < oldest->freed_ms))
				oldest = t;
		}
		if (!oldest || (oldest->freed_ms >= deadline && dirty_bytes <= keep))
			return;
		purge_slot(oldest);
	}
}

void os_purge(void)
{
	ulock_lock(&os_lock);
	dirty_init();
	purge_locked(UINT64_MAX, 0);
	ulock_unlock(&os_lock);
}

struct slab *os_slab_alloc(unsigned int order)
{
	struct os_order *o = &orders[order];
	struct arena *a;
	struct slab *s = NULL;

	ulock_lock(&os_lock);
	dirty_init();
	if (o->dirty.next != &o->dirty) {
		/* The most recently freed slab: its pages are still warm. */
		s = o->dirty.next;
		dirty_del(s);
		dirty_bytes -= PAGE_SIZE << order;
		a = arena_of(s->base);
		a->ndirty--;
	} else {
		for (a = o->arenas; a; a = a->next)
			if (a->free || a->nfresh < a->nslots)
				break;
		if (!a)
			a = arena_new(order);
		if (a && a->free) {
			s = a->free;
			a->free = s->next;
		} else if (a) {
			unsigned int idx = a->nfresh++;

			s = &a->slabs[idx];
			s->base = (char *)(a->base + ((uintptr_t)idx << a->shift));
			s->order = order;
		}
	}
	if (s) {
		a->nused++;
		s->next = s->prev = NULL;
		s->state = SLAB_NEW;
	}
	ulock_unlock(&os_lock);
	return s;
}

void os_slab_free(struct slab *s)
{
	size_t size = PAGE_SIZE << s->order;
	struct arena *a = arena_of(s->base);
	struct os_order *o = &orders[s->order];
	uint64_t now = now_ms();

	asan_unpoison(s->base, size);
	ulock_lock(&os_lock);
	s->freelist = NULL;
	s->nfree = s->bump = s->objects = 0;
	/* Retained, newest first; purged when old or beyond the budget. */
	s->state = SLAB_DIRTY;
	s->freed_ms = now;
	s->prev = &o->dirty;
	s->next = o->dirty.next;
	o->dirty.next->prev = s;
	o->dirty.next = s;
	dirty_bytes += size;
	a->ndirty++;
	purge_locked(now - uslab_opt.purge_delay_ms, (size_t)uslab_opt.retain_kb << 10);
	if (--a->nused == 0 && o->narenas > 1)
		arena_release(a);
	ulock_unlock(&os_lock);
}

size_t os_dirty_bytes(void)
{
	size_t n;

	ulock_lock(&os_lock);
	n = dirty_bytes;
	ulock_unlock(&os_lock);
	return n;
}

struct slab *os_slab_lookup(const void *p)
{
	struct arena *a = arena_of(p);
	struct slab *s;
	size_t idx;

	if (!a)
		return NULL;
	idx = ((uintptr_t)p - a->base) >> a->shift;
	if (unlikely(idx >= a->nslots))
		return NULL;
	s = &a->slabs[idx];
	if (!__atomic_load_n(&s->cache, __ATOMIC_ACQUIRE))
		return NULL;
	return s;
}

size_t os_arena_count(void)
{
	size_t n;

	ulock_lock(&os_lock);
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
	ulock_init(&os_lock);
}

int uslab_owns(const void *p)
{
	return os_slab_lookup(p) != NULL;
}

struct uslab_cache *uslab_cache_of(const void *p)
{
	struct slab *s = os_slab_lookup(p);

	return s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;
}
