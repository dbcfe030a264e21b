// SPDX-License-Identifier: MIT
/*
 * pool.c - the DPDK-shaped calls: uslab_pool_get_bulk(),
 * uslab_pool_put_bulk() and uslab_pool_avail(), rte_mempool_get_bulk(),
 * rte_mempool_put_bulk() and rte_mempool_ops_get_count() on a cache. They
 * serve any cache; pool mode itself (USLAB_POOL, USLAB_POOL_EXTERNAL: free
 * objects kept as pointers, in sheaves, the barn and the node's loose
 * array) lives where the objects go: the barn keeps every full sheaf of a
 * pool (lifecycle.c), and the node keeps the rest (cache.c, "pools").
 *
 * put differs from uslab_cache_free_bulk() in what DPDK's callers expect:
 * every entry is an object, and the array is const (DPDK passes its own
 * cache's array): a copy into the main sheaf, no NULL test, no clearing,
 * and no look at the objects: one put twice is handed out twice, as by
 * DPDK without RTE_LIBRTE_MEMPOOL_DEBUG. A debug cache's puts are frees
 * checked at the call (USLAB_DEBUG=F: a double put is reported there).
 *
 *   put: room in main for all -> one memcpy, no lock (the fast path: about
 *        10 instructions and the copy);
 *        else, under the thread's lock, fill main, make room (spare, barn:
 *        a pool's barn takes every full sheaf), repeat; what finds no
 *        sheaf goes to cache_free_objects() (a pool's loose array).
 *   get: uslab_cache_alloc_bulk() (bulk.c), its result as DPDK returns it.
 */
#include <string.h>

#include "front.h"

int uslab_pool_get_bulk(struct uslab_cache *c, size_t n, void **p)
{
	if (!n)
		return 0;
	if (!p)
		return -EINVAL;
	if (uslab_cache_alloc_bulk(c, n, p) == n)
		return 0;
	return errno == ENOBUFS ? -ENOBUFS : errno == EINVAL ? -EINVAL : -ENOMEM;
}

/* What no sheaf took: to the slabs or a pool's loose array, a chunk at a time. */
static void put_rest(struct uslab_cache *c, size_t n, void *const *p)
{
	void *chunk[64];

	while (n) {
		size_t k = n < 64 ? n : 64;

		memcpy(chunk, p, k * sizeof(void *));
		cache_free_objects(c, chunk, k, usl_opt.lookahead);
		p += k;
		n -= k;
	}
}

/* Copy up to @n of @p onto main. Return: how many. */
static size_t put_main(struct pcs *p, size_t n, void *const *objs)
{
	size_t room = (size_t)(p->hot.limit - p->hot.top);
	size_t k = n < room ? n : room;

	if (k) {
		memcpy(p->hot.top, objs, k * sizeof(void *));
		p->hot.top += k;
	}
	return k;
}

static void put_slow(struct uslab_cache *c, size_t n, void *const *objs)
{
	struct pcs *p;
	size_t i = 0;

	cache_check_live(c, "pool put");
	USLAB_ASSERT_EXPENSIVE(!ptrs_any_null(objs, n));
	if (!c->sheaf_capacity || !(p = pcs_self(c))) {
		put_rest(c, n, objs);
		gp_kick();
		return;
	}
	if (cache_numa(c)) {
		/* Each object to main or on its way home (thread_sheaves.c, "NUMA"). */
		for (; i < n; i++)
			pcs_numa_put(c, p, objs[i], os_slab_lookup(objs[i]));
		return;
	}
	thread_lock_self();
	pcs_swap_for(p, n, false); /* the spare may have room for all of them */
	for (;;) {
		i += put_main(p, n - i, objs + i);
		if (i == n || !pcs_make_room(c, p, true))
			break;
	}
	if (i < n)
		put_rest(c, n - i, objs + i); /* no sheaf to be had */
	thread_unlock_self();
	barn_kick(); /* a trade above may have grown the capacity */
	gp_kick();   /* a flush may have deferred slabs with no monitor running */
}

void uslab_pool_put_bulk(struct uslab_cache *c, size_t n, void *const *objs)
{
	struct pcs *p;

	if (!n)
		return;
	if (unlikely(!cache_is_descriptor(c) || !objs)) {
		cache_check_live(c, "pool put"); /* reports a bad handle */
		usl_bug(c, NULL, "pool put of a NULL array of %zu objects", n);
	}
	if (unlikely(c->debug)) {
		/*
		 * Each object checked at the call, as a free (a pool put twice,
		 * a foreign pointer: reported here), on its way to the debug
		 * tier's sheaves (thread_sheaves.c), which pool_put's copy would bypass.
		 */
		for (size_t i = 0; i < n; i++)
			pcs_debug_free(c, objs[i], __builtin_return_address(0));
		return;
	}
	objs_mark_free(c, objs, n); /* (a pool has no key: a cache's objects put) */
	objs_poison(objs, n);
	p = pcs_of(c);
	if (n - 1 < (size_t)(p->hot.limit - p->hot.top)) {
		memcpy(p->hot.top, objs, n * sizeof(void *));
		p->hot.top += n;
		return;
	}
	put_slow(c, n, objs);
}

size_t uslab_pool_avail(const struct uslab_cache *c)
{
	struct uslab_cache *cc = (struct uslab_cache *)c;

	if (!c)
		return 0;
	cache_check_live(c, "pool avail");
	return (size_t)thread_sum_sheaved(c) + barn_gather(cc, NULL, 0) + cache_pool_count(cc);
}
