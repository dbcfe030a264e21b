// SPDX-License-Identifier: MIT
/*
 * os_map.c - the page heap's mappings and the address registry: memory
 * from mmap (aligned arenas, metadata, the commit probe) and, per 64 MiB
 * granule of the address space, which arena holds it (arena_map) and
 * where its page descriptors are (uslab_priv_slab_map, the table the
 * inline kfree reads: <uslab/inline/priv.h>). The lookups on it: os_slab_lookup()
 * (os.h), os_slab_prefetch(), uslab_owns(), uslab_slab_of().
 *
 * Lock: the registry is written under os_lock (os.c's: map_set) and read
 * without it (acquire loads of entries published with release stores).
 * Descriptors are never unmapped, so a lookup racing with an arena's
 * release reads a free slot. No system call is made under os_lock.
 */
#include <sys/mman.h>

#include "os.h"
#include "os_heap.h"

struct arena *arena_map[MAP_ENTRIES];
/*
 * The slab registry, exported for the inline kfree (uslab/inline/kmalloc.h): per
 * 64 MiB granule, the descriptor of the granule's first page (64-byte
 * aligned) ORed with the shift: PAGE_SHIFT for a heap arena, ARENA_SHIFT
 * for a huge object (every address to its one descriptor); 0 for none.
 */
uintptr_t uslab_priv_slab_map[MAP_ENTRIES];
#define slab_map uslab_priv_slab_map
static uintptr_t mmap_hint; /* where the next arena would follow the last (racy hint) */

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
void *mmap_aligned(size_t size, size_t align)
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
void map_set(struct arena *a, uintptr_t base, size_t size, struct arena *val)
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

/* ------------------------------------------------------------- lookups */

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
