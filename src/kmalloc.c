// SPDX-License-Identifier: MIT
/*
 * kmalloc.c - memory of any size (the kernel's kmalloc): 80 size classes,
 * each an ordinary cache named kmalloc-<size>, and large objects, each a
 * slab of its own from os.c (large_cache, below). The classes and their
 * waste are in <uslab/kmalloc.h> and doc/design.md.
 *
 * Fast paths (inline in the caller, <uslab/inline/kmalloc.h>; the same code below
 * for USLAB_NO_INLINE and sanitizer builds):
 *
 *   kmalloc: class = uslab_priv_kmalloc_index(size) (a compare, a clz, two
 *            shifts: folded for a constant size), then uslab_cache_alloc's
 *            pop of that class's main sheaf. About 12 instructions.
 *   kfree:   the arena registry gives the object's slab descriptor and its
 *            cache (four dependent loads), then uslab_cache_free's push.
 *            About 18 instructions.
 *
 * Everything else is a slow path: the first call (the classes are created
 * then, see create_classes()), sheaf refills and flushes (thread_sheaves.c), large
 * objects (os.c's retain and purge policy applies to their slabs), and
 * NULL, USLAB_ZERO_SIZE_PTR or foreign pointers.
 *
 * Start-up recursion. The classes are created lazily, and the start-up of
 * the library may call into the C library, which may call malloc: with
 * libuslab-malloc.so that is uslab_kmalloc() again, on the same thread,
 * inside pthread_once() or the class creation. Such a nested request is
 * served from a small static boot heap (never freed; uslab_kfree() ignores
 * its pointers), so start-up cannot deadlock on itself.
 *
 * Layer: above lifecycle.c (it creates its caches with lifecycle_create(),
 * as create_kmalloc_caches() uses the common create path); below it only
 * the layers' public calls, and cache.c's one-object slabs for large objects.
 */
#include <stdio.h>
#include <string.h>

#include "front.h"

/* The class caches, and their ids for the inline path (0: not created, always empty). */
static struct uslab_cache *classes[USLAB_KMALLOC_CLASSES];
unsigned short uslab_priv_kmalloc_ids[USLAB_KMALLOC_CLASSES];

static bool classes_ready;
static __thread bool tls_creating; /* this thread creates classes */

/* ------------------------------------------------------------ classes */

/* The size of class @idx (see uslab_priv_kmalloc_index()). */
static size_t class_size(unsigned int idx)
{
	unsigned int j, k;

	if (idx < 8)
		return (size_t)(idx + 1) * 8;
	j = idx - 8;
	k = 6 + j / 8;
	return (1ul << k) + (size_t)(j % 8 + 1) * (1ul << (k - 3));
}

/*
 * Defined by libuslab-malloc.so (malloc.c), which every allocation of the
 * process then reaches: a weak reference, resolved when the drop-in is
 * loaded (LD_PRELOAD or linked), NULL otherwise.
 */
extern const char uslab_priv_malloc_dropin __attribute__((weak, visibility("default")));

/*
 * The classes' flags: the free key where the process's malloc is uslab's
 * (glibc's contract: a double free stops the program at the call, and
 * USLAB_FREE_KEY=0 turns it off); without the drop-in, uslab_kmalloc()
 * follows the kernel's kmalloc (no free object written; doc/design.md,
 * "Free checks", has the measurements behind both). CACHE_DROPIN: their
 * barns' depth grows by USLAB_MALLOC_BARN_MAX_MB instead of
 * USLAB_BARN_MAX_MB (lifecycle.c; doc/tuning.md has the measurements).
 */
static unsigned int class_flags(void)
{
	return CACHE_KMALLOC | CACHE_RESERVED_ID |
	       (&uslab_priv_malloc_dropin ? USLAB_FREE_KEY | CACHE_DROPIN : 0);
}

/*
 * The classes' slabs: the large classes need larger slabs to waste little
 * (every class wastes at most 1/8 of a slab; doc/design.md), and a class
 * keeps at most 64 KiB of empty slabs (1 to 5): under the malloc drop-in
 * 80 classes with SLUB's 5..10 slabs of up to 256 KiB each could pin tens
 * of MiB the program freed.
 */
static const struct cache_shape class_shape = { .max_order = KMALLOC_MAX_ORDER,
						.keep_bytes = 64u << 10 };
_Static_assert(USLAB_KMALLOC_MAX_CACHE_SIZE <= CACHE_NATURAL_ALIGN_MAX,
	       "the debug tier keeps every class's natural alignment");

/*
 * Create the classes not created yet. Lock-free: threads that race at the
 * first request each create what they find missing and install it with a
 * CAS; a loser destroys its copy (empty, never used). A failure (no
 * memory) leaves the classes made so far and is retried by the next
 * request, so it is never permanent.
 */
static bool create_classes(void)
{
	struct uslab_cache_args args = { 0 };
	char name[USLAB_NAME_MAX + 1];
	bool ok = true;

	if (usl_init())
		return false;
	tls_creating = true;
	for (unsigned int i = 0; i < USLAB_KMALLOC_CLASSES && ok; i++) {
		struct uslab_cache *none = NULL, *c;
		size_t size = class_size(i);

		if (__atomic_load_n(&classes[i], __ATOMIC_ACQUIRE))
			continue;
		USLAB_ASSERT(uslab_priv_kmalloc_index(size) == i);
		snprintf(name, sizeof(name), "kmalloc-%zu", size);
		c = lifecycle_create(name, size, &args, class_flags(), &class_shape);
		if (!c) {
			ok = false;
		} else if (__atomic_compare_exchange_n(&classes[i], &none, c, false,
						       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			/*
			 * Every class has sheaves, an id > 0 (uslab_priv_pcs_of_id),
			 * except those USLAB_FAILSLAB selects; those USLAB_DEBUG
			 * selects have sheaves the library keeps (thread_sheaves.c) and show
			 * the inline paths id 0 too: the pcs entry that is always
			 * empty sends them to the library. So does every class with
			 * NUMA on: the library keeps each thread's sheaves to its node.
			 */
			USLAB_ASSERT(!c->sheaf_capacity ?
					     c->id < 0 :
					     c->id > 0 &&
						     c->pcs_own == (size_t)c->id
									   << USLAB_PRIV_PCS_SHIFT);
			__atomic_store_n(&uslab_priv_kmalloc_ids[i],
					 (unsigned short)(c->id > 0 && !c->debug && !cache_numa(c) ?
								  c->id :
								  0),
					 __ATOMIC_RELEASE);
		} else {
			c->flags &= ~CACHE_KMALLOC; /* nobody saw it: destroy may have it */
			uslab_cache_destroy(c);
		}
	}
	tls_creating = false;
	if (ok)
		__atomic_store_n(&classes_ready, true, __ATOMIC_RELEASE);
	return ok;
}

/* The cache of a class size, once the classes exist (acquire: it was installed by a CAS). */
static inline struct uslab_cache *class_of(size_t size)
{
	return __atomic_load_n(&classes[uslab_priv_kmalloc_index(size)], __ATOMIC_ACQUIRE);
}

/* Whether the classes exist, creating them on first use. errno ENOMEM if not. */
static bool classes_init(void)
{
	if (likely(__atomic_load_n(&classes_ready, __ATOMIC_ACQUIRE)))
		return true;
	if (create_classes())
		return true;
	errno = ENOMEM;
	return false;
}

/* ---------------------------------------------------------- boot heap */

/*
 * A request made on the thread that is starting the library (the start-up
 * called the C library, which called malloc): 16-byte aligned chunks from
 * a static heap, each after a 16-byte header holding its size, never freed.
 */
#define BOOT_HEAP_SIZE (256u << 10)
static char boot_heap[BOOT_HEAP_SIZE] __attribute__((aligned(PAGE_SIZE)));
static size_t boot_used;

/*
 * Whether this thread is starting the library or creating the classes (a
 * request then comes from the C library, called by the start-up): such a
 * request is served from the boot heap. Only before the classes exist.
 */
static bool booting(void)
{
	return unlikely(!__atomic_load_n(&classes_ready, __ATOMIC_ACQUIRE)) &&
	       (tls_creating || usl_starting_self());
}

static bool in_boot_heap(const void *p)
{
	return (uintptr_t)p - (uintptr_t)boot_heap < BOOT_HEAP_SIZE;
}

static void *boot_alloc(size_t size, size_t align)
{
	size_t start, end, old = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);

	if (align < 16)
		align = 16;
	do {
		/* Aligned as an address (the heap itself is only page-aligned). */
		start = ALIGN_UP((uintptr_t)boot_heap + old + 16, align) - (uintptr_t)boot_heap;
		end = start + ALIGN_UP(size, 16);
		if (size > BOOT_HEAP_SIZE || end > BOOT_HEAP_SIZE) {
			errno = ENOMEM;
			return NULL;
		}
	} while (!__atomic_compare_exchange_n(&boot_used, &old, end, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	*(size_t *)(void *)(boot_heap + start - 16) = ALIGN_UP(size, 16);
	return boot_heap + start;
}

static size_t boot_size(const void *p)
{
	return *(const size_t *)(const void *)((const char *)p - 16);
}

/* ------------------------------------------------------------- large */

/*
 * Large objects (above the largest class) are slabs of one object owned by
 * large_cache, which has no sheaves: 2^order pages from os.c, the object
 * at the slab's base, its usable size in s->large_size. Its node counts
 * them (cache.c's one-object slabs: nr_slabs = nr_objects = large objects
 * live); free objects do not exist: a freed one goes straight back to
 * os.c (cache_slab_drop_single(), also from a kfree_bulk array).
 */
static struct uslab_cache large_cache;

/* Start-up (init.c): the large objects' cache, after cache_bootstrap(). */
int kmalloc_bootstrap(void)
{
	int err = cache_init_internal(&large_cache, "kmalloc-large", PAGE_SIZE);

	thread_reserve_ids(USLAB_KMALLOC_CLASSES); /* the classes' ids, 1..USLAB_KMALLOC_CLASSES */
	if (!err) {
		/* One object per slab, at its base; order 0 for the free path's page mask. */
		large_cache.flags |= CACHE_LARGE;
		large_cache.order = 0;
		large_cache.objects = 1;
		large_cache.layout = USLAB_LAYOUT_FREEPTR;
		large_cache.colours = 1;
	}
	return err;
}

/*
 * large_slab_alloc - a large object of @size bytes (usable: rounded up
 * to a page), aligned to @align (a power of two up to ARENA_GRANULE).
 * @zeroed: set when the object reads as zeros (fresh or purged pages).
 * Return: its slab (the object at s->base); NULL with errno ENOMEM.
 */
static struct slab *large_slab_alloc(size_t size, size_t align, bool *zeroed, int req)
{
	size_t bytes = ALIGN_UP(size, PAGE_SIZE);
	struct slab *s;

	USLAB_ASSERT(size && size <= USLAB_KMALLOC_MAX_SIZE && align <= (1ul << ARENA_SHIFT));
	s = os_large_alloc(bytes, align, req < 0 ? numa_node_self() : NODE_ID(req));
	if (!s)
		return NULL;
	USLAB_ASSERT(s->state == SLAB_NEW && !s->cache && s->large && s->large_size == bytes);
	s->freelist = NULL;
	s->nfree = 0;
	s->bump = s->objects = 1;
	s->colour = 0;
	s->pcs_id = 0; /* no sheaves: kfree goes to the slow path */
	*zeroed = s->zeroed;
	cache_slab_add_single(&large_cache, s); /* NEW -> FULL */
	os_slab_publish(s);			/* its pages' descriptors name it */
	return s;
}

static void *large_alloc_one(size_t size, size_t align, bool zero, int req);

/*
 * A large object of @size bytes (large_alloc_one), counted by the heap
 * profile (profile.c) and recorded as a sample when the count runs out.
 */
static void *large_alloc(size_t size, size_t align, bool zero, int req)
{
	void *p = large_alloc_one(size, align, zero, req);

	if (unlikely(__atomic_load_n(&profile_enabled, __ATOMIC_RELAXED)) && p) {
		profile_count(ALIGN_UP(size, PAGE_SIZE));
		if (profile_due)
			profile_record(p, size, ALIGN_UP(size, PAGE_SIZE));
	}
	return p;
}

static void *large_alloc_one(size_t size, size_t align, bool zero, int req)
{
	struct slab *s;
	bool zeroed;

	if (unlikely(size > USLAB_KMALLOC_MAX_SIZE)) {
		errno = ENOMEM;
		return NULL;
	}
	/* The first request of a program may be a large one: start uslab (large_cache). */
	if (unlikely(usl_init()))
		return NULL;
	/*
	 * A huge object: refused where the C library's malloc would be, by the
	 * kernel's overcommit policy on its bytes (uslab's own mappings are
	 * MAP_NORESERVE, which the heuristic policy never refuses).
	 */
	if (size > HEAP_MAX_BYTES && !os_may_commit(ALIGN_UP(size, PAGE_SIZE))) {
		errno = ENOMEM;
		return NULL;
	}
	s = large_slab_alloc(size, align < PAGE_SIZE ? PAGE_SIZE : align, &zeroed, req);
	if (!s)
		return NULL;
	if (zero && !zeroed)
		memset(s->base, 0, s->large_size);
	else if (!zeroed)
		cache_clear_stale_key(s->base); /* (its pages may have been a slab's) */
	return s->base;
}

/*
 * The slab of memory uslab handed out, checked: in a live slab, at an
 * object's start. Anything else is a bug of the caller.
 */
static struct slab *object_slab(const void *p, const char *what)
{
	struct slab *s = os_slab_lookup(p);
	struct uslab_cache *c = s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;

	if (unlikely(!c))
		usl_bug(NULL, p, "%s of a pointer uslab did not hand out", what);
	if (unlikely(slab_object_at(s, p) != p))
		usl_bug(c, p, "%s of a pointer inside an object", what);
	return s;
}

/* ------------------------------------------------------------- alloc */

/*
 * The heap profile's count ran out at the sheaf refill that served @p, an
 * object of class @c for a request of @size bytes (profile.c): the request
 * gets a sampled object instead (a large object of its own pages, whose
 * free drops its record), and @p goes back. Return: the object to hand
 * out; @p when there is no sample (no object to replace, no memory).
 */
static __attribute__((noinline, cold)) void *profile_sample(struct uslab_cache *c, void *p,
							    size_t size)
{
	void *q;

	if (!p) {
		profile_due = false; /* the allocation failed: no sample */
		return p;
	}
	q = large_alloc_one(size, PAGE_SIZE, false, USLAB_NUMA_NO_NODE);
	if (!q) {
		profile_record(NULL, 0, 0); /* no sample */
		return p;
	}
	uslab_cache_free(c, p);
	profile_record(q, size, c->object_size);
	return q;
}

/*
 * An object of class @c for a request of @size bytes: in the debug tier
 * the bytes past @size are red zone (slab_debug.c), and @site (the
 * caller's return address) is the allocation's call site.
 */
static inline void *class_alloc(struct uslab_cache *c, size_t size, const void *site)
{
	void *p;

	if (likely(!c->debug)) {
		p = uslab_cache_alloc(c);
		/*
		 * The heap profile's count ran out at the sheaf refill of this
		 * allocation (profile.c): it is served by a sampled object.
		 */
		if (unlikely(profile_due))
			p = profile_sample(c, p, size);
		return p;
	}
	p = pcs_debug_alloc(c, site);
	if (p)
		slab_debug_set_size(c, p, size);
	return p;
}

/*
 * A request that missed the inline path: the first one (classes not yet
 * created), an empty sheaf, a large or 0-byte request.
 */
void *uslab_priv_kmalloc_slow(size_t size)
{
	if (likely(size - 1 < USLAB_KMALLOC_MAX_CACHE_SIZE)) {
		if (booting())
			return boot_alloc(size, 8);
		if (!classes_init())
			return NULL;
		return class_alloc(class_of(size), size, __builtin_return_address(0));
	}
	if (!size)
		return USLAB_ZERO_SIZE_PTR;
	if (booting())
		return boot_alloc(size, 8);
	return large_alloc(size, PAGE_SIZE, false, USLAB_NUMA_NO_NODE);
}

/*
 * The probes kmalloc and kfree (probes.h): every exported allocation and
 * free of this file fires one, with its caller's @site (calls between
 * them pass it on: kmalloc_at(), kfree_at()).
 */
static __attribute__((noinline, cold)) void kmalloc_probe(const void *site, const void *p,
							  size_t size)
{
	const struct slab *s = USLAB_ZERO_OR_NULL_PTR(p) ? NULL : os_slab_lookup(p);

	PROBE(kmalloc, site, p, size, USLAB_ZERO_OR_NULL_PTR(p) ? 0 : uslab_ksize(p),
	      s ? s->cache->name : "-");
}

/* @p, allocated for @size at @site: the kmalloc probe fired if traced. */
static inline void *kmalloc_done(void *p, size_t size, const void *site)
{
	if (unlikely(probe_on(kmalloc)))
		kmalloc_probe(site, p, size);
	return p;
}

/* uslab_kmalloc() for @site. */
static inline void *kmalloc_at(size_t size, const void *site)
{
	void *p;

	if (likely(size - 1 < USLAB_KMALLOC_MAX_CACHE_SIZE &&
		   __atomic_load_n(&classes_ready, __ATOMIC_ACQUIRE)))
		p = class_alloc(class_of(size), size, site);
	else
		p = uslab_priv_kmalloc_slow(size);
	return kmalloc_done(p, size, site);
}

void *uslab_kmalloc(size_t size)
{
	return kmalloc_at(size, __builtin_return_address(0));
}

static void *kmalloc_node_at(size_t size, int node, const void *site)
{
	struct uslab_cache *c;
	int req, err;

	if (node == USLAB_NUMA_NO_NODE)
		return kmalloc_at(size, site);
	err = node_request(node, &req);
	if (err) {
		errno = err;
		return NULL;
	}
	if (size - 1 < USLAB_KMALLOC_MAX_CACHE_SIZE && !booting() && classes_init()) {
		void *p;

		c = class_of(size);
		if (!c->debug)
			return kmalloc_done(uslab_cache_alloc_node(c, node), size, site);
		/* The debug tier: its own paths for the caller's node, the node's slabs (checked) else. */
		if (req < 0 || (!NODE_STRICT(req) && NODE_ID(req) == numa_node_self()))
			return kmalloc_done(class_alloc(c, size, site), size, site);
		p = uslab_cache_alloc_node(c, node);
		if (p)
			slab_debug_set_size(c, p, size);
		return kmalloc_done(p, size, site);
	}
	if (size > USLAB_KMALLOC_MAX_CACHE_SIZE && size <= USLAB_KMALLOC_MAX_SIZE && !booting())
		return kmalloc_done(large_alloc(size, PAGE_SIZE, false, req), size, site);
	return kmalloc_at(size, site); /* 0 bytes, too large, or while uslab starts */
}

void *uslab_kmalloc_node(size_t size, int node)
{
	return kmalloc_node_at(size, node, __builtin_return_address(0));
}

void *uslab_kzalloc_node(size_t size, int node)
{
	void *p = kmalloc_node_at(size, node, __builtin_return_address(0));

	if (p && p != USLAB_ZERO_SIZE_PTR)
		memset(p, 0, uslab_ksize(p));
	return p;
}

static void *kzalloc_at(size_t size, const void *site)
{
	void *p;

	if (size > USLAB_KMALLOC_MAX_CACHE_SIZE && size <= USLAB_KMALLOC_MAX_SIZE && !booting())
		return kmalloc_done(large_alloc(size, PAGE_SIZE, true, USLAB_NUMA_NO_NODE), size,
				    site); /* fresh pages need no memset */
	p = kmalloc_at(size, site);
	if (p && p != USLAB_ZERO_SIZE_PTR)
		memset(p, 0, uslab_ksize(p));
	return p;
}

void *uslab_kzalloc(size_t size)
{
	return kzalloc_at(size, __builtin_return_address(0));
}

void *uslab_kcalloc(size_t n, size_t size)
{
	size_t bytes;

	if (unlikely(__builtin_mul_overflow(n, size, &bytes))) {
		errno = ENOMEM;
		return NULL;
	}
	return kzalloc_at(bytes, __builtin_return_address(0));
}

void *uslab_kmalloc_aligned(size_t size, size_t align)
{
	const void *site = __builtin_return_address(0);
	size_t padded;
	void *p;

	if (unlikely(!align || (align & (align - 1)) || align > USLAB_KMALLOC_MAX_ALIGN)) {
		errno = EINVAL;
		return NULL;
	}
	if (align <= 8 || !size)
		return kmalloc_at(size, site);
	if (booting())
		return boot_alloc(size, align);
	/*
	 * Up to a page: the class of size rounded up to @align is a multiple
	 * of @align (a power of two at most its class's step, or a divisor of
	 * that rounded size), and slabs are aligned to at least a page.
	 */
	padded = ALIGN_UP(size, align);
	if (align <= PAGE_SIZE && padded >= size && padded <= USLAB_KMALLOC_MAX_CACHE_SIZE) {
		p = kmalloc_at(padded, site);
		USLAB_ASSERT(!p || ((uintptr_t)p & (align - 1)) == 0);
		return p;
	}
	return kmalloc_done(large_alloc(size, align, false, USLAB_NUMA_NO_NODE), size, site);
}

/* -------------------------------------------------------------- free */

void uslab_priv_kfree_slow(const void *p)
{
	struct slab *s;

	if (USLAB_ZERO_OR_NULL_PTR(p) || unlikely(in_boot_heap(p)))
		return;
	s = os_slab_lookup(p);
	if (unlikely(!s && guard_owns(p))) {
		guard_free(NULL, p, true); /* a sampled object */
		return;
	}
	if (s && unlikely(s->cache->debug)) {
		/* Its checks report, then go on or stop. */
		pcs_debug_free(s->cache, (void *)p, __builtin_return_address(0));
		return;
	}
	if (s && percpu_slots(s->cache) && slab_at_object(&s->cache->geo, s, p)) {
		/* A per-CPU class: as uslab_kfree(), the slab's own cache needs no check. */
		pcs_push(s->cache, (void *)p);
		return;
	}
	s = object_slab(p, "kfree");
	if (s->cache->flags & CACHE_LARGE) {
		cache_slab_drop_single(s);
		os_kick(); /* its pages wait for the decay */
	} else
		uslab_cache_free(s->cache, (void *)p);
}

/* The kfree probe: @p freed at @site (before the free: @p is still the caller's). */
static __attribute__((noinline, cold)) void kfree_probe(const void *site, const void *p)
{
	PROBE(kfree, site, p);
}

static inline void kfree_plain(const void *p);

/* uslab_kfree() for @site. */
static inline void kfree_at(const void *p, const void *site)
{
	if (unlikely(probe_on(kfree)))
		kfree_probe(site, p);
	kfree_plain(p);
}

void uslab_kfree(const void *p)
{
	kfree_at(p, __builtin_return_address(0));
}

static inline void kfree_plain(const void *p)
{
	struct slab *s = os_slab_lookup(p);

	if (likely(s)) {
		struct uslab_cache *c = __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE);

		/* Its cache is the slab's; a pointer inside an object: the slow path reports. */
		if (likely(c && !(c->flags & CACHE_LARGE) && slab_at_object(&c->geo, s, p))) {
			pcs_push(c, (void *)p);
			return;
		}
	}
	uslab_priv_kfree_slow(p);
}

size_t uslab_ksize(const void *p)
{
	struct slab *s;

	if (USLAB_ZERO_OR_NULL_PTR(p))
		return 0;
	if (unlikely(in_boot_heap(p)))
		return boot_size(p);
	if (unlikely(guard_owns(p))) {
		size_t size;

		guard_object_of(p, "ksize", &size); /* a sampled object (else reported) */
		return size;
	}
	s = object_slab(p, "ksize");
	if (s->cache->flags & CACHE_LARGE)
		return s->large_size;
	/* A debug cache: the bytes asked for (beyond them is red zone); 0 if freed (reported). */
	if (unlikely(s->cache->debug))
		return slab_debug_allocated(s->cache, p, "ksize") ? slab_debug_size(s->cache, p) :
								    0;
	return s->cache->object_size;
}

void uslab_kfree_sensitive(const void *p)
{
	size_t n = uslab_ksize(p);

	if (n) {
		memset((void *)p, 0, n);
		/* The memset must happen although the memory is freed next. */
		__asm__ __volatile__("" : : "r"(p) : "memory");
	}
	kfree_at(p, __builtin_return_address(0));
}

/* ------------------------------------------------------------ resize */

/*
 * A large object resized without copying (os_large_resize: into the free
 * pages after it, its tail given back, or a huge one by mremap) when
 * @size is still large. Return: whether it was (s->base may have moved).
 */
static bool large_resize(struct slab *s, size_t size)
{
	size_t bytes = ALIGN_UP(size, PAGE_SIZE);

	if (size <= USLAB_KMALLOC_MAX_CACHE_SIZE || size > USLAB_KMALLOC_MAX_SIZE)
		return false;
	if (bytes == s->large_size)
		return true;
	/* A huge object grows by what the C library's malloc would be refused. */
	if (bytes > HEAP_MAX_BYTES && bytes > s->large_size &&
	    !os_may_commit(bytes - s->large_size))
		return false;
	if (!os_large_resize(s, bytes))
		return false;
	cache_slab_resize_single(s, bytes); /* s->large_size, and its node's sum */
	os_kick();			    /* a shrink's pages wait for the decay */
	return true;
}

/*
 * krealloc_class - uslab_krealloc()'s common case: @p, the start of an
 * object of a kmalloc class without the debug tier, resized to @size
 * (1..USLAB_KMALLOC_MAX_CACHE_SIZE). The same class keeps @p; another
 * takes an object of its class, @p's bytes and @p's free, each by its
 * cache path (no check that found @p needs repeating: the registry gave
 * its slab, the slab its class, the geometry its start). perl's string
 * growth measured 300 instructions a call on the general path, of which
 * object_slab()'s checks, an out-of-line alloc and free and the stale-key
 * call are not needed here.
 *
 * Return, with *@done true: the resized object; @p itself when its class
 * fits or when a shrink finds no memory; NULL when a growth finds none
 * (@p kept). *@done false when @p is not such an object (NULL returned):
 * the general path resizes it, or reports what is wrong with it.
 */
static inline void *krealloc_class(const void *p, size_t size, const void *site, bool *done)
{
	struct slab *s = os_slab_lookup(p);
	struct uslab_cache *c, *n;
	void *q;

	*done = false;
	if (unlikely(!s))
		return NULL; /* the boot heap, a sampled object, or not uslab's */
	c = __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE);
	if (unlikely(!c || (c->flags & (CACHE_KMALLOC | CACHE_LARGE)) != CACHE_KMALLOC ||
		     c->debug || !slab_at_object(&c->geo, s, p)))
		return NULL;
	n = class_of(size);
	USLAB_ASSERT(n); /* an object of a class: classes_init() created them all */
	*done = true;
	if (n == c)
		return (void *)p;
	q = kmalloc_done(class_alloc(n, size, site), size, site);
	if (unlikely(!q))
		return size <= c->object_size ? (void *)p : NULL; /* a failed shrink keeps @p */
	memcpy(q, p, size < c->object_size ? size : c->object_size);
	/* A keyed class handed @p out without the key; else it may carry a stale one. */
	if (!c->hot.free_key)
		cache_clear_stale_key(q);
	/* kfree_at() with its lookup done: */
	if (unlikely(probe_on(kfree)))
		kfree_probe(site, p);
	pcs_push(c, (void *)p);
	return q;
}

void *uslab_krealloc(const void *p, size_t size)
{
	const void *site = __builtin_return_address(0);
	struct slab *s = NULL;
	size_t old;
	bool done;
	void *q;

	if (USLAB_ZERO_OR_NULL_PTR(p))
		return kmalloc_at(size, site);
	if (!size) {
		kfree_at(p, site);
		return USLAB_ZERO_SIZE_PTR;
	}
	if (likely(size <= USLAB_KMALLOC_MAX_CACHE_SIZE)) {
		q = krealloc_class(p, size, site, &done);
		if (likely(done))
			return q;
	}
	if (unlikely(in_boot_heap(p))) {
		old = boot_size(p);
		if (size <= old)
			return (void *)p;
	} else if (unlikely(guard_owns(p))) {
		/* A sampled object: as one of its cache below (else reported). */
		const struct uslab_cache *c = guard_object_of(p, "krealloc", &old);

		if (size <= old &&
		    (!(c->flags & CACHE_KMALLOC) || uslab_kmalloc_class_size(size) == old))
			return (void *)p;
	} else {
		s = object_slab(p, "krealloc");
		if (s->cache->flags & CACHE_LARGE) {
			/* (A sample of the heap profile is copied: its record is by address.) */
			if (!(unlikely(__atomic_load_n(&profile_enabled, __ATOMIC_RELAXED)) &&
			      profile_has(p)) &&
			    large_resize(s, size))
				return s->base; /* (a huge object may have moved) */
			old = s->large_size;
		} else {
			struct uslab_cache *c = s->cache;

			if (unlikely(c->debug) && !slab_debug_allocated(c, p, "krealloc")) {
				errno = EINVAL; /* a use after free, reported: nothing done */
				return NULL;
			}
			old = c->object_size;
			/* Its class still fits (any object of another cache: it fits). */
			if (size <= old && (!(c->flags & CACHE_KMALLOC) ||
					    uslab_kmalloc_class_size(size) == old)) {
				if (unlikely(c->debug) && (c->flags & CACHE_KMALLOC))
					slab_debug_set_size(c, (void *)p,
							    size); /* the zone moves */
				return (void *)p;
			}
			/* (A debug cache: only the bytes asked for are the caller's.) */
			if (unlikely(c->debug))
				old = slab_debug_size(c, p);
		}
	}
	q = kmalloc_at(size, site);
	if (!q)
		return size <= old ? (void *)p : NULL; /* a failed shrink keeps @p */
	/*
	 * A large object into a larger one: its pages move (mremap), else
	 * copied. (A large object may be smaller than a class: one aligned
	 * beyond a page, grown into a class, is copied.)
	 */
	if (!(s && (s->cache->flags & CACHE_LARGE) && size > old &&
	      size > USLAB_KMALLOC_MAX_CACHE_SIZE && os_large_move(os_slab_lookup(q), s))) {
		memcpy(q, p, old < size ? old : size);
		/*
		 * @p was live: a key in its first word is a stale one it was
		 * handed out with (an object of a cache without the key, on
		 * pages a keyed cache gave back), not the program's; in @q,
		 * a keyed object, its free would report a double free.
		 */
		cache_clear_stale_key(q);
	}
	kfree_at(p, site);
	return q;
}

/* ------------------------------------------------------------- query */

struct uslab_cache *uslab_kmalloc_cache(size_t size)
{
	if (!size || size > USLAB_KMALLOC_MAX_CACHE_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	if (!classes_init())
		return NULL;
	return class_of(size);
}

size_t uslab_kmalloc_class_size(size_t size)
{
	if (!size || size > USLAB_KMALLOC_MAX_SIZE)
		return 0;
	if (size <= USLAB_KMALLOC_MAX_CACHE_SIZE)
		return class_size(uslab_priv_kmalloc_index(size));
	return ALIGN_UP(size, PAGE_SIZE);
}
