// SPDX-License-Identifier: MIT
/*
 * loose.c - the pools' loose array (uslab.h, USLAB_POOL).
 *
 * A pool (USLAB_POOL) keeps its free objects as pointers: what its sheaves
 * and barn cannot hold goes to the node's loose array instead of the slabs,
 * and allocations take from it before the slabs. An external pool
 * (USLAB_POOL_EXTERNAL) has no slabs at all: the loose array is where its
 * objects live when no sheaf holds them, and an allocation it cannot serve
 * fails with ENOBUFS. Only uslab_cache_shrink() and uslab_cache_destroy()
 * (cache_pool_release) give a pool's objects back to its slabs.
 *
 * The array belongs to the pool's node, c->home (uslab_cache_args.node:
 * the creating thread's, or the one asked for; 0 with NUMA off): that
 * node's lock guards it, its memory holds it (numa_place), and a slab
 * pool's reserve comes from that node's slabs. It is mapped with os_mmap
 * and grows by doubling, under the node lock (os_mmap takes no lock). An external pool's array is sized at
 * creation for the objects the caller said it will hand in (reserve), so
 * it never has to grow to keep one of them.
 *
 * Invariant: nr_loose <= loose_cap, loose NULL only with loose_cap 0.
 *
 * Lock: the node lock (cache.c's LOCK_NODE) protects the array and its
 * counts; nr_loose is also read without it, to skip an empty array.
 */
#include <string.h>

#include "cache.h"
#include "cache_core.h"

/* The node that keeps @c's loose array. */
static inline struct node *loose_node(struct uslab_cache *c)
{
	return cache_node(c, c->home);
}

/* Room for @want pointers in @n's loose array. Node lock held (or the cache unpublished). */
static bool loose_reserve(struct node *n, size_t want)
{
	size_t cap = n->loose_cap ? n->loose_cap : PAGE_SIZE / sizeof(void *);
	void **a;

	if (want <= n->loose_cap)
		return true;
	if (want > (SIZE_MAX / sizeof(void *)) / 2)
		return false; /* (no such mapping; and cap would wrap below) */
	while (cap < want)
		cap *= 2;
	a = os_mmap(cap * sizeof(void *));
	if (!a)
		return false;
	if (numa_on())
		numa_place(a, cap * sizeof(void *), n->id);
	if (n->nr_loose)
		memcpy(a, n->loose, n->nr_loose * sizeof(void *));
	if (n->loose)
		os_munmap(n->loose, n->loose_cap * sizeof(void *));
	n->loose = a;
	n->loose_cap = cap;
	return true;
}

/*
 * Keep @p[0..n) (NULL entries skipped, every entry NULL on return) in the
 * loose array. What finds no room (the OS refused memory): a slab pool's
 * goes to its slabs; an external pool's is dropped, with a line on stderr
 * (it was handed in beyond the reserve declared at creation).
 */
void loose_put(struct uslab_cache *c, void **p, size_t n)
{
	struct node *nd = loose_node(c);
	size_t kept, i;

	ulock_lock(&nd->lock);
	USLAB_ASSERT(nd->nr_loose <= nd->loose_cap);
	loose_reserve(nd, nd->nr_loose + n); /* (on failure, what room there is) */
	for (i = 0; i < n; i++) {
		if (!p[i])
			continue;
		if (nd->nr_loose == nd->loose_cap)
			break;
		nd->loose[nd->nr_loose] = p[i];
		WRITE_ONCE(nd->nr_loose, nd->nr_loose + 1); /* (read unlocked by loose_take) */
		p[i] = NULL;
	}
	kept = i;
	ulock_unlock(&nd->lock);
	if (kept == n)
		return;
	if (!(c->flags & USLAB_POOL_EXTERNAL)) {
		node_free_objects(c, p + kept, n - kept, usl_opt.lookahead);
		return;
	}
	usl_warn("pool %s: no memory to keep %zu more objects (beyond its reserve); dropped",
		 c->name, n - kept);
	memset(p + kept, 0, (n - kept) * sizeof(void *));
}

/* Take up to @want objects off the loose array into @dst. Return: how many. */
unsigned int loose_take(struct uslab_cache *c, void **dst, unsigned int want)
{
	struct node *nd = loose_node(c);
	unsigned int k;

	if (!READ_ONCE(nd->nr_loose))
		return 0;
	ulock_lock(&nd->lock);
	k = nd->nr_loose < want ? (unsigned int)nd->nr_loose : want;
	/* (0: a shrink on another thread released the array since the look above) */
	if (k) {
		WRITE_ONCE(nd->nr_loose, nd->nr_loose - k);
		memcpy(dst, nd->loose + nd->nr_loose, k * sizeof(void *));
	}
	ulock_unlock(&nd->lock);
	return k;
}

/*
 * cache_pool_setup - give a new pool its node, its loose array and its
 * reserve: a slab pool's @reserve objects are allocated from the slabs of
 * node request @req (cache_refill_node(); USLAB_NUMA_NO_NODE: the creating
 * thread's node) into the array; an external pool's array gets room for
 * @reserve pointers.
 * Return: 0, or -ENOMEM (what was allocated is given back).
 */
int cache_pool_setup(struct uslab_cache *c, size_t reserve, int req)
{
	struct node *n;
	size_t got = 0;

	USLAB_ASSERT(c->flags & USLAB_POOL);
	c->home = numa_on() ? (req < 0 ? numa_node_self() : NODE_ID(req)) : 0;
	USLAB_ASSERT(c->home < c->nr_nodes); /* (node_request() checked the id) */
	n = loose_node(c);
	if (!reserve)
		return 0;
	if (!loose_reserve(n, reserve))
		return -ENOMEM;
	if (c->flags & USLAB_POOL_EXTERNAL)
		return 0;
	while (got < reserve) {
		unsigned int want =
			reserve - got > UINT32_MAX ? UINT32_MAX : (unsigned int)(reserve - got);
		unsigned int k =
			node_refill(c, n->loose + got, want, true,
				    (int)c->home | (NODE_STRICT(req) ? USLAB_NODE_STRICT : 0));

		got += k;
		if (k < want) {
			node_free_objects(c, n->loose, got, usl_opt.lookahead);
			return -ENOMEM;
		}
	}
	WRITE_ONCE(n->nr_loose, got); /* (the cache is not published yet: no lock needed) */
	return 0;
}

/*
 * cache_pool_release - give a slab pool's loose objects back to its slabs
 * (shrink, destroy). An external pool keeps them: they have no slab, and
 * cache_delete() forgets them with the array.
 */
void cache_pool_release(struct uslab_cache *c)
{
	struct node *n;
	size_t nr, cap;
	void **objs;

	if ((c->flags & (USLAB_POOL | USLAB_POOL_EXTERNAL)) != USLAB_POOL)
		return;
	n = loose_node(c);
	ulock_lock(&n->lock);
	objs = n->loose;
	nr = n->nr_loose;
	cap = n->loose_cap;
	/* Out of the node, so the frees below run unlocked; the next free maps another. */
	n->loose = NULL;
	WRITE_ONCE(n->nr_loose, 0);
	n->loose_cap = 0;
	ulock_unlock(&n->lock);
	if (nr)
		node_free_objects(c, objs, nr, usl_opt.lookahead);
	if (objs)
		os_munmap(objs, cap * sizeof(void *));
}

/* Objects in @c's loose array (0 for a cache that is not a pool). */
size_t cache_pool_count(struct uslab_cache *c)
{
	struct node *nd;
	size_t n;

	if (!(c->flags & USLAB_POOL))
		return 0;
	nd = loose_node(c);
	ulock_lock(&nd->lock);
	n = nd->nr_loose;
	ulock_unlock(&nd->lock);
	return n;
}

/* Copy the loose objects into @dst (at most @max; validate). Return: how many there are. */
size_t cache_pool_gather(struct uslab_cache *c, void **dst, size_t max)
{
	struct node *nd;
	size_t n;

	if (!(c->flags & USLAB_POOL))
		return 0;
	nd = loose_node(c);
	ulock_lock(&nd->lock);
	n = nd->nr_loose;
	if (dst && n) /* (no array after a shrink: memcpy from NULL is undefined) */
		memcpy(dst, nd->loose, (n < max ? n : max) * sizeof(void *));
	ulock_unlock(&nd->lock);
	return n;
}

/*
 * Forget @c's loose array (cache_delete: an external pool's objects have no
 * slab to go to). A cache whose setup failed may have no node lists yet.
 */
void loose_forget(struct uslab_cache *c)
{
	struct node *n;

	if (!(c->flags & USLAB_POOL) || c->home >= c->nr_nodes)
		return;
	n = loose_node(c);
	if (!n->loose)
		return;
	os_munmap(n->loose, n->loose_cap * sizeof(void *));
	n->loose = NULL;
	n->loose_cap = n->nr_loose = 0;
}
