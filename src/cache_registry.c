// SPDX-License-Identifier: MIT
/*
 * cache_registry.c - every cache uslab knows of: the table of cache
 * descriptors (a handle is a cache only if it starts a slot of it, so a
 * stale or foreign handle is reported, never followed), the list of
 * caches that the statistics, the decay monitor and fork walk, and the
 * fork handlers of every cache's locks. What a cache does with its slabs
 * is cache.c's.
 *
 * Lock (its rank in src/lock.h, the one copy of the lock order):
 *
 *   caches_lock  (LOCK_CACHES) - the list of caches, the descriptor table
 *                and the cache id bitmap (thread.c's); held across create
 *                and destroy.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "cache.h"
#include "cache_core.h"

struct ulock caches_lock = ULOCK_INIT_RANK(LOCK_CACHES);
static struct list_node caches = LIST_HEAD_INIT(caches); /* struct uslab_cache.list */

/* Link @c first into the list of caches. Called with caches_lock held. */
static void cache_list_add(struct uslab_cache *c)
{
	USLAB_ASSERT_HELD(&caches_lock);
	list_add(&c->list, &caches);
}

/*
 * cache_init_internal - set up one of uslab's own metadata caches (static
 * storage, no sheaves: every allocation takes the node lock).
 * Return: 0, -EINVAL or -ENOMEM (src/'s convention: a negative errno).
 */
int cache_init_internal(struct uslab_cache *c, const char *name, size_t size)
{
	int err;

	memset(c, 0, sizeof(*c));
	err = cache_setup(c, name, size, 0, NULL, CACHE_INTERNAL, 0, USLAB_LAYOUT_AUTO, NULL);
	if (err)
		return err;
	ulock_lock(&caches_lock);
	cache_list_add(c);
	ulock_unlock(&caches_lock);
	return 0;
}

struct uslab_cache *uslab_cache_of(const void *p)
{
	struct slab *s = os_slab_lookup(p);
	struct uslab_cache *c = s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;

	if (unlikely(!s && guard_owns(p)))
		return (struct uslab_cache *)guard_object(p, NULL, NULL);

	/* A large kmalloc object belongs to no cache a program may use. */
	return c && !(c->flags & CACHE_LARGE) ? c : NULL;
}

/* ------------------------------------------------ descriptor, list */

/*
 * The descriptor table: the descriptors of caches created by
 * cache_new(), in slots of DESC_SLOT bytes carved in order from regions
 * mapped as needed (DESC_REGION0 bytes, each next region twice the last),
 * never unmapped and never reused. A handle is a cache only if it is the
 * start of a slot (cache_is_descriptor(), a few instructions without a
 * lock); a destroyed cache's slot keeps reading CACHE_MAGIC_DEAD and a
 * pcs_off of 0 (the always-empty entry) however many caches come after
 * it, so a stale handle is reported by every library call and reaches one
 * from the inline paths too (cache_check_live()). A page whose slots are
 * all destroyed is given back (MADV_DONTNEED): it then reads as zeros,
 * still no cache, and costs only address space (1 KiB per cache created).
 * Written under caches_lock; desc_table.slots[i] is published (release)
 * after base[i], read (acquire) before it.
 */
_Static_assert(sizeof(struct uslab_cache) <= DESC_SLOT && PAGE_SIZE % DESC_SLOT == 0,
	       "a descriptor fits its slot, slots tile a page");
#define DESC_REGION0 (4ul << 20) /* 4096 slots */
struct desc_table desc_table;
static size_t desc_used; /* bytes carved from the last region */

bool cache_is_descriptor_slow(uintptr_t a)
{
	unsigned int n = __atomic_load_n(&desc_table.nr, __ATOMIC_ACQUIRE);

	for (unsigned int i = 0; i < n; i++) {
		size_t slots = __atomic_load_n(&desc_table.slots[i], __ATOMIC_ACQUIRE);

		if (a - __atomic_load_n(&desc_table.base[i], __ATOMIC_RELAXED) < slots * DESC_SLOT)
			return !(a & (DESC_SLOT - 1));
	}
	return false;
}

/* A slot for a new descriptor (zeros, not yet a cache); NULL with errno ENOMEM. */
static struct uslab_cache *desc_alloc(void)
{
	for (;;) {
		unsigned int n;
		size_t size;
		void *map;

		ulock_lock(&caches_lock);
		n = desc_table.nr;
		if (n && desc_used + DESC_SLOT <= desc_table.slots[n - 1] * DESC_SLOT) {
			struct uslab_cache *c = (void *)(desc_table.base[n - 1] + desc_used);

			desc_used += DESC_SLOT;
			ulock_unlock(&caches_lock);
			return c;
		}
		ulock_unlock(&caches_lock);
		if (n == DESC_REGIONS) {
			errno = ENOMEM;
			return NULL;
		}
		/* A new region, mapped outside the lock (fresh pages: zeros). */
		size = DESC_REGION0 << n;
		map = os_mmap(size);
		if (!map)
			return NULL;
		ulock_lock(&caches_lock);
		if (desc_table.nr == n) {
			__atomic_store_n(&desc_table.base[n], (uintptr_t)map, __ATOMIC_RELAXED);
			__atomic_store_n(&desc_table.slots[n], size / DESC_SLOT, __ATOMIC_RELEASE);
			__atomic_store_n(&desc_table.nr, n + 1, __ATOMIC_RELEASE);
			desc_used = 0;
			map = NULL;
		}
		ulock_unlock(&caches_lock);
		if (map)
			os_munmap(map, size); /* another thread mapped one first */
	}
}

/*
 * cache_new - a descriptor for a new cache, its layout computed. Not yet
 * on the list of caches, no sheaves (cache_register() gives them).
 * Return: the cache, or NULL with errno ENOMEM (no memory) or EINVAL (no
 * slab order fits the object, or @layout cannot serve it).
 */
struct uslab_cache *cache_new(const char *name, size_t size, size_t align, void (*ctor)(void *),
			      unsigned int flags, unsigned int min_partial, unsigned int layout,
			      const struct cache_shape *shape)
{
	struct uslab_cache *c = desc_alloc();
	int err;

	if (!c)
		return NULL;
	/* (Zeros: a slot is fresh memory, never reused.) */
	USLAB_ASSERT(!c->magic && !c->retired && !c->hot.pcs_off);
	err = cache_setup(c, name, size, align, ctor, flags, min_partial, layout, shape);
	if (err) {
		cache_delete(c);
		errno = -err;
		return NULL;
	}
	return c;
}

/*
 * Retire the descriptor of a cache that is on no list and owns no slab:
 * its slot stays dead for good; its page goes back to the OS once every
 * slot of the page is dead (slots are carved in order: all of them were
 * handed out when the last is).
 */
void cache_delete(struct uslab_cache *c)
{
	uintptr_t page = (uintptr_t)c & ~(uintptr_t)(PAGE_SIZE - 1);
	unsigned int n;
	bool dead = true;

	for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
		USLAB_ASSERT(!cache_node(c, nid)->nr_slabs);
	USLAB_ASSERT(!c->nr_deferred);
	USLAB_ASSERT(cache_is_descriptor(c));
	loose_forget(c);
	cache_nodes_release(c);
	/* A stale handle's fast paths miss, and reach the check. */
	c->hot.pcs_off = c->pcs_lib = 0;
	__atomic_store_n(&c->magic, CACHE_MAGIC_DEAD, __ATOMIC_RELEASE);
	ulock_lock(&caches_lock);
	n = desc_table.nr;
	if (page - desc_table.base[n - 1] < desc_table.slots[n - 1] * DESC_SLOT &&
	    page + PAGE_SIZE > desc_table.base[n - 1] + desc_used)
		dead = false; /* a slot of the page is not handed out yet */
	c->retired = true;
	for (uintptr_t a = page; dead && a < page + PAGE_SIZE; a += DESC_SLOT)
		dead = ((struct uslab_cache *)a)->retired;
	ulock_unlock(&caches_lock);
	if (dead)
		madvise((void *)page, PAGE_SIZE, MADV_DONTNEED);
}

/*
 * cache_check_live - stop the program when @c, passed to @call, is NULL
 * or not a live cache: not the start of a descriptor slot (not a cache at
 * all: read nowhere), or a slot destroyed (or never handed out).
 * (cache_check_live() in cache.h tests; this reports.)
 */
void cache_check_live_slow(const struct uslab_cache *c, const char *call)
{
	if (unlikely(!c))
		usl_bug(NULL, NULL, "%s of a NULL cache", call);
	if (unlikely(!cache_is_descriptor(c)))
		usl_bug(NULL, c, "%s of a handle that is not a cache", call);
	if (unlikely(__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != CACHE_MAGIC_LIVE))
		usl_bug(NULL, c, "%s of a destroyed cache (or not a cache)", call);
}

/* Put @c on the list of caches (its id, if it has sheaves, given already). */
void cache_register(struct uslab_cache *c)
{
	ulock_lock(&caches_lock);
	cache_list_add(c);
	ulock_unlock(&caches_lock);
}

/* Take @c off the list. Under caches_lock. */
void cache_unregister_locked(struct uslab_cache *c)
{
	USLAB_ASSERT_HELD(&caches_lock);
	list_del(&c->list);
}

/* Call @fn on every cache, under caches_lock (the statistics' snapshot, export.c). */
void cache_for_each(void (*fn)(struct uslab_cache *c, void *arg), void *arg)
{
	struct uslab_cache *c;

	ulock_lock(&caches_lock);
	list_for_each_entry(c, &caches, list) {
		fn(c, arg);
	}
	ulock_unlock(&caches_lock);
}

/* ------------------------------------------------------------ fork */

/* Called with caches_lock and every thread lock held (init.c). */
void cache_fork_prepare(void)
{
	struct uslab_cache *c;

	USLAB_ASSERT_HELD(&caches_lock);
	USLAB_ASSERT(lockdep_held(LOCK_THREADS));

	list_for_each_entry(c, &caches, list) {
		for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
			ulock_lock(&cache_barn(c, nid)->lock);
	}
	list_for_each_entry(c, &caches, list) {
		for (unsigned int nid = 0; nid < c->nr_nodes; nid++)
			ulock_lock(&cache_node(c, nid)->lock);
	}
}

void cache_fork_parent(void)
{
	struct uslab_cache *c;

	list_for_each_entry(c, &caches, list) {
		for (unsigned int nid = c->nr_nodes; nid--;)
			ulock_unlock(&cache_node(c, nid)->lock);
		for (unsigned int nid = c->nr_nodes; nid--;)
			ulock_unlock(&cache_barn(c, nid)->lock);
	}
}

void cache_fork_child(void)
{
	struct uslab_cache *c;

	list_for_each_entry(c, &caches, list) {
		for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
			ulock_init(&cache_node(c, nid)->lock);
			ulock_init(&cache_barn(c, nid)->lock);
		}
	}
}
