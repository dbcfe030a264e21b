// SPDX-License-Identifier: MIT
/*
 * lifecycle.c - create, destroy, shrink and the statistics of a cache: the
 * calls that orchestrate every layer from above (mm/slab_common.c to
 * mm/slub.c). Creating a cache lays it out (cache.c, slab_geometry.c),
 * gives it a barn, a sheaf capacity (barn.c, sheaf.c) and an id (thread.c);
 * destroying one drains every thread's sheaves of it (thread.c), its barn,
 * and waits for its deferred slabs (rcu.c, gp.c); shrinking drains the
 * caller's sheaves and the barn and returns empty slabs and retained pages
 * to the OS.
 *
 * Context: control path. These calls take caches_lock (create, destroy)
 * and the locks below it in the order of src/lock.h; destroy may wait for
 * a grace period.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"

/*
 * A pool asking for no capacity (and none set by USLAB_SHEAF_CAPACITY) gets
 * POOL_SHEAF_CAPACITY, pinned (below).
 */
static unsigned int pool_sheaf_capacity(const struct uslab_cache *c, unsigned int requested)
{
	if (requested || !(c->flags & USLAB_POOL) || usl_opt.sheaf_capacity)
		return requested;
	return POOL_SHEAF_CAPACITY;
}

/*
 * A new pool's reserve and loose array, on the node of @args->node (0 is
 * USLAB_NUMA_NO_NODE: the creating thread's; checked by uslab_cache_create).
 * An external pool's objects are on the node the caller names already
 * (DPDK placed them): that node, with memory of uslab's or not, strict or
 * not. Return: 0, or ENOMEM (no memory, or a strict request for a node
 * without).
 */
static int pool_setup(struct uslab_cache *c, const struct uslab_cache_args *args)
{
	int req = USLAB_NUMA_NO_NODE, err = 0;

	if (args->node && args->node != USLAB_NUMA_NO_NODE) {
		if (!(c->flags & USLAB_POOL_EXTERNAL))
			err = node_request(args->node, &req);
		else if (NODE_ID(args->node) < c->nr_nodes)
			req = (int)NODE_ID(args->node);
	}
	if (err)
		return err;
	return cache_pool_setup(c, args->reserve, req) ? ENOMEM : 0;
}

/*
 * lifecycle_create - uslab_cache_create() after its checks, with internal
 * @flags allowed and a @shape (NULL: the defaults): kmalloc.c creates its
 * classes with CACHE_KMALLOC, CACHE_RESERVED_ID and its shape.
 */
struct uslab_cache *lifecycle_create(const char *name, size_t size,
				     const struct uslab_cache_args *args, unsigned int flags,
				     const struct cache_shape *shape)
{
	struct uslab_cache *c;
	unsigned int cap;
	int err;

	/*
	 * A cache failslab selects has no sheaves: every allocation and free
	 * reaches the library. One in the debug tier has sheaves that only the
	 * library's debug paths use, checking every call (thread_sheaves.c).
	 */
	if (failslab_selects(name, flags))
		flags |= CACHE_FAILSLAB;
	if (flags & USLAB_POOL_EXTERNAL)
		flags |= USLAB_POOL;
	c = cache_new(name, size, args->align, args->ctor, flags, args->min_partial, args->layout,
		      shape);
	if (!c)
		return NULL;
	if (c->debug && (c->flags & USLAB_POOL)) {
		/* The debug tier checks every free at its slab: no pool (uslab.h). */
		USLAB_ASSERT(!(c->flags & USLAB_POOL_EXTERNAL));
		c->flags &= ~USLAB_POOL;
	}
	for (unsigned int nid = 0; nid < c->nr_nodes; nid++) {
		if (c->flags & USLAB_POOL) /* a pool keeps every full sheaf */
			barn_init(cache_barn(c, nid), c, UINT_MAX, UINT_MAX);
		else
			barn_init(cache_barn(c, nid), c, usl_opt.barn_max_full,
				  usl_opt.barn_max_empty);
	}
	cap = (flags & CACHE_FAILSLAB) ?
		      0 :
		      sheaf_capacity_for(c->size, pool_sheaf_capacity(c, args->sheaf_capacity));
	if ((c->flags & USLAB_POOL) && (err = pool_setup(c, args))) {
		cache_release_all(c);
		cache_delete(c);
		errno = err;
		return NULL;
	}
	if (cap && thread_id_attach(c, cap)) {
		cache_pool_release(c);
		cache_release_all(c);
		cache_delete(c);
		errno = ENOSPC;
		return NULL;
	}
	/*
	 * A pool's capacity is pinned: its barn keeps every full sheaf, so
	 * shrinking gives nothing back, and resizing only churns sheaves
	 * (measured: doc/design.md, "Decisions measured in code").
	 */
	if (cap)
		barn_adapt_init(c, pool_sheaf_capacity(c, args->sheaf_capacity),
				(flags & CACHE_DROPIN) ? usl_opt.dropin_barn_mb :
							 usl_opt.barn_max_mb);
	/* Per-CPU sheaves from the start: asked for, or USLAB_PERCPU=1 (else per thread). */
	if (cap && usl_opt.percpu != PERCPU_OFF &&
	    ((flags & USLAB_PERCPU) || usl_opt.percpu == PERCPU_ON))
		percpu_enable(c);
	cache_register(c);
	PROBE(cache_create, c, c->name, c->object_size, c->size, c->flags);
	if (flags & USLAB_TYPESAFE_BY_RCU)
		gp_prestart(); /* its slabs will need it; on failure gp_kick() retries */
	return c;
}

/* uslab_cache_args.node: 0, USLAB_NUMA_NO_NODE, or a node id with USLAB_NODE_STRICT or not. */
static bool node_arg_ok(int node)
{
	int req;

	return !node || node_request(node, &req) != EINVAL;
}

/*
 * A pool keeps pointers to free objects: not with a constructor or
 * TYPESAFE_BY_RCU (their free objects belong to their slabs' life), nor
 * without sheaves; an external one has no slab for the debug tier to check.
 */
static bool pool_args_ok(const struct uslab_cache_args *args, unsigned int flags)
{
	if (!(flags & (USLAB_POOL | USLAB_POOL_EXTERNAL)))
		return true;
	if (args->ctor || (flags & USLAB_TYPESAFE_BY_RCU) || args->sheaf_capacity == 1)
		return false;
	return !((flags & USLAB_POOL_EXTERNAL) && (flags & DEBUG_FLAGS));
}

struct uslab_cache *uslab_cache_create(const char *name, size_t size,
				       const struct uslab_cache_args *args, unsigned int flags)
{
	static const struct uslab_cache_args defaults;

	if (usl_init())
		return NULL;
	if (!args)
		args = &defaults;
	if (!name || strlen(name) > USLAB_NAME_MAX || !size || size > USLAB_MAX_OBJECT_SIZE ||
	    (flags & ~CACHE_PUBLIC_FLAGS) || (args->align & (args->align - 1)) ||
	    args->align > USLAB_MAX_ALIGN || !pool_args_ok(args, flags) ||
	    (flags & (USLAB_FREE_KEY | USLAB_NO_FREE_KEY)) ==
		    (USLAB_FREE_KEY | USLAB_NO_FREE_KEY) ||
	    !node_arg_ok(args->node)) {
		errno = EINVAL;
		return NULL;
	}
	return lifecycle_create(name, size, args, flags, NULL);
}

int uslab_cache_destroy(struct uslab_cache *c)
{
	unsigned long live;

	if (!c)
		return 0;
	cache_check_live(c, "destroy");
	if (c->flags & (CACHE_KMALLOC | CACHE_INTERNAL | CACHE_LARGE)) {
		usl_warn("cache %s belongs to uslab, not destroyed", c->name);
		return -EPERM;
	}
	/*
	 * Objects of it may wait for their grace period (uslab_free_rcu):
	 * freed first, as Linux's kmem_cache_destroy() waits for kfree_rcu()
	 * (kvfree_rcu_barrier()), so that they are not counted as held and
	 * the monitor does not free into the sheaves this drains. Only in a
	 * process that has deferred a free.
	 */
	if (gp_used())
		uslab_rcu_barrier();
	ulock_lock(&caches_lock);
	if (c->sheaf_capacity) {
		thread_drain_cache(c);
		percpu_drain(c);
		barn_drain(c);
	}
	cache_pool_release(c); /* a slab pool's free objects back to its slabs */
	live = cache_release_all(c);
	live += guard_live(c); /* sampled objects still allocated */
	if (live) {
		ulock_unlock(&caches_lock);
		usl_warn("cache %s: %lu objects still allocated, not destroyed", c->name, live);
		if (c->debug)
			cache_list_live(c); /* each, with its allocation's caller (U) */
		return -EBUSY;
	}
	guard_forget(c);   /* its sampled objects held back after free */
	percpu_destroy(c); /* (before the id goes: it clears the id's entry) */
	thread_id_detach_locked(c);
	cache_unregister_locked(c);
	ulock_unlock(&caches_lock);
	PROBE(cache_destroy, c, c->name);
	if (c->flags & USLAB_TYPESAFE_BY_RCU) {
		uslab_rcu_barrier(); /* its slabs still name it until released */
		if (__atomic_load_n(&c->nr_deferred, __ATOMIC_ACQUIRE)) {
			/* Inside a read-side section: the barrier could not wait. */
			usl_warn("cache %s: %lu slabs still wait for a grace period; its "
				 "descriptor is kept",
				 c->name, c->nr_deferred);
			return 0;
		}
	}
	cache_delete(c);
	os_purge();
	return 0;
}

/* Shrink's part per cache: this thread's sheaves, the barn, a pool's objects, empty slabs. */
static void shrink_one(struct uslab_cache *c, void *arg)
{
	(void)arg;
	if (c->sheaf_capacity) {
		pcs_flush_self(c);
		percpu_drain(c); /* every CPU's, from here */
		barn_drain(c);
	}
	cache_pool_release(c);
	cache_shrink_node(c);
}

int uslab_cache_shrink(struct uslab_cache *c)
{
	if (!c)
		return -EINVAL;
	cache_check_live(c, "shrink");
	shrink_one(c, NULL);
	os_purge();
	gp_kick();
	return 0;
}

size_t uslab_trim(void)
{
	cache_for_each(shrink_one, NULL);
	gp_kick(); /* slabs of TYPESAFE_BY_RCU caches: after their grace period */
	return os_purge();
}

/* One cache's objects handed out, in bytes (cache_for_each's callback: caches_lock held). */
static void object_bytes_one(struct uslab_cache *c, void *arg)
{
	struct uslab_cache_stats st;
	uint64_t single = cache_node_stats(c, &st);

	*(uint64_t *)arg += c->flags & CACHE_LARGE ? single : (uint64_t)st.active_objs * c->size;
}

/* uslab_heap_stats(): the page heap's figures and the bytes of the objects handed out (export.c too). */
void lifecycle_heap_stats(struct uslab_heap_stats *st)
{
	uint64_t objects = 0;

	cache_for_each(object_bytes_one, &objects);
	os_heap_stats(st);
	st->object_bytes = objects;
}

int uslab_heap_stats(struct uslab_heap_stats *st)
{
	if (!st)
		return -EINVAL;
	lifecycle_heap_stats(st);
	return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

/*
 * uslab_cache_validate - the kernel's /sys/kernel/slab/<cache>/validate:
 * the objects in the calling thread's sheaves and the barn are checked
 * (each an object of @c, held once), then every partial slab's freelist
 * and the node's counters (cache_validate_node()).
 */
long uslab_cache_validate(struct uslab_cache *c)
{
	unsigned long errors = 0;
	size_t n, cap = 0, bytes = 0;
	void **held = NULL;

	if (!c)
		return -EINVAL;
	cache_check_live(c, "validate");
	/* The sheaves' objects, sorted (gathered again if they grew meanwhile). */
	for (;;) {
		n = pcs_gather_self(c, held, cap);
		n += barn_gather(c, held ? held + (n < cap ? n : cap) : NULL,
				 n < cap ? cap - n : 0);
		n += cache_pool_gather(c, held ? held + (n < cap ? n : cap) : NULL,
				       n < cap ? cap - n : 0);
		if (n <= cap)
			break;
		if (held)
			os_munmap(held, bytes);
		cap = n + 64;
		bytes = ALIGN_UP(cap * sizeof(void *), PAGE_SIZE);
		held = os_mmap(bytes);
		if (!held) {
			usl_warn("validate %s: no memory for the check", c->name);
			return 1;
		}
	}
	if (n)
		qsort(held, n, sizeof(void *), cmp_ptr);
	for (size_t i = 0; i < n; i++) {
		const char *what;

		if (guard_owns(held[i]) && guard_object(held[i], NULL, NULL) == c) {
			/* A sampled object in a sheaf: guard.c checks it when it is freed. */
		} else if (!(c->flags & USLAB_POOL_EXTERNAL) &&
			   !slab_check_object(c, held[i], &what)) {
			usl_warn("validate %s: a sheaf holds %s: %p", c->name, what, held[i]);
			errors++;
		} else if (i && held[i] == held[i - 1]) {
			usl_warn("validate %s: object %p is in sheaves twice (double free)",
				 c->name, held[i]);
			errors++;
		}
	}
	errors += cache_validate_node(c, held, n);
	if (held)
		os_munmap(held, bytes);
	return (long)errors;
}

const char *uslab_layout_name(unsigned int layout)
{
	return layout < USLAB_LAYOUT_NR ? usl_layout_names[layout] : NULL;
}

const char *uslab_cache_name(const struct uslab_cache *c)
{
	return c ? c->name : NULL;
}

size_t uslab_cache_size(const struct uslab_cache *c)
{
	return c ? c->object_size : 0;
}

/*
 * kmalloc-large's row: its objects differ in size, so objsize (and
 * object_size) is their mean usable size in bytes and pagesperslab the
 * mean pages they hold, both rounded up (UINT_MAX at most): num_slabs x
 * pagesperslab pages are their @bytes to within a page per object, and
 * active_objs x objsize bytes are never below them. 0 and 0 with none.
 * order stays 0 (each object's slab is 2^order pages of address space,
 * the smallest power of two that holds it; the pages past its usable
 * size are not touched).
 */
static void large_stats(struct uslab_cache_stats *st, uint64_t bytes)
{
	uint64_t n = st->num_slabs;
	uint64_t mean = n ? (bytes + n - 1) / n : 0;
	uint64_t pages = n ? (bytes / PAGE_SIZE + n - 1) / n : 0;

	st->objsize = st->object_size = mean > UINT_MAX ? UINT_MAX : (unsigned int)mean;
	st->pagesperslab = pages > UINT_MAX ? UINT_MAX : (unsigned int)pages;
}

/*
 * uslab_cache_stats - the /proc/slabinfo view of a cache. Slab counters
 * come from the node under its lock. Event counters live in three places,
 * summed here: the node (events counted under its lock, and the counters
 * of threads that exited), and each live thread's own block (struct
 * pcs_events, written by its owner without atomics).
 */
int uslab_cache_stats(const struct uslab_cache *c, struct uslab_cache_stats *st)
{
	if (!c || !st)
		return -EINVAL;
	cache_check_live(c, "stats");
	lifecycle_stats(c, st);
	return 0;
}

int uslab_cache_node_stats(const struct uslab_cache *c, int node, struct uslab_node_stats *st)
{
	struct uslab_cache *cc = (struct uslab_cache *)c;
	if (!c || !st)
		return -EINVAL;
	cache_check_live(c, "stats");
	if (node < 0 || (unsigned int)node >= c->nr_nodes)
		return -EINVAL;
	lifecycle_node_stats(cc, (unsigned int)node, st);
	return 0;
}

/* uslab_cache_node_stats() of any cache, node @nid < c->nr_nodes: no check (export.c). */
void lifecycle_node_stats(struct uslab_cache *c, unsigned int nid, struct uslab_node_stats *st)
{
	memset(st, 0, sizeof(*st));
	cache_node_counts(c, nid, st);
	if (c->flags & USLAB_POOL)
		st->pool_objs = barn_objects(cache_barn(c, nid)) +
				(nid == c->home ? cache_pool_count(c) : 0);
}

/* uslab_cache_stats() of any cache, uslab's own (static) included: no check (export.c). */
void lifecycle_stats(const struct uslab_cache *c, struct uslab_cache_stats *st)
{
	struct uslab_cache *cc = (struct uslab_cache *)c;
	unsigned long live;
	uint64_t single;

	memset(st, 0, sizeof(*st));
	st->objsize = c->size;
	st->objperslab = c->objects;
	st->pagesperslab = 1u << c->order;
	st->object_size = c->object_size;
	st->align = c->align;
	st->order = c->order;
	st->sheaf_capacity = c->sheaf_capacity;
	st->min_partial = c->min_partial;
	st->layout = c->layout;
	st->meta_bytes = c->meta_bytes;
	st->colours = c->colours;
	single = cache_node_stats(cc, st);
	live = guard_live(c); /* sampled objects: allocated, in no slab (num_objs counts slabs') */
	st->active_objs += live;
	if (c->flags & CACHE_LARGE)
		large_stats(st, single);
	barn_stats(cc, st); /* its sheaves, the capacity now */
	percpu_stats(cc, st);
	thread_sum_events(c, st->events);
}
