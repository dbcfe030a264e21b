// SPDX-License-Identifier: MIT
/*
 * uslab_mempool.c - a DPDK mempool driver ("mempool ops") named "uslab":
 * an rte_mempool whose free objects are kept by a USLAB_POOL_EXTERNAL
 * cache instead of a ring.
 *
 * DPDK still lays the objects out (rte_mempool_populate_*: header, element,
 * trailer in its own memory) and hands every one in through enqueue; the
 * driver keeps the pointers in uslab's per-thread sheaves and the cache's
 * barn, and never touches an object (uslab does not write into the objects
 * of an external pool). What changes for the application:
 *
 *   - threads without a DPDK lcore cache (non-EAL threads, or any thread of
 *     a mempool created with cache size 0) get one anyway: their own
 *     sheaves, created on first use, no lock on the common path;
 *   - EAL threads with a cache keep it; uslab only serves its refills and
 *     flushes (bursts of cache size + n);
 *   - like objects in DPDK's lcore caches, objects in another thread's
 *     sheaves are out of reach until its sheaves fill (full ones go to the
 *     barn), it exits or it calls uslab_thread_flush(): a dequeue fails
 *     with -ENOENT while they sit there. A pool of N objects lends each thread at most two sheaves
 *     (capacity chosen below: at most N / 16 each).
 *
 * An unmodified DPDK program selects it with `-d librte_mempool_uslab.so`
 * (EAL) and `--mbuf-pool-ops-name=uslab` (or rte_mempool_set_ops_byname(mp,
 * "uslab", NULL) before populating). README.md and doc/api.md ("DPDK
 * mempool driver") say more.
 *
 * ops (rte_mempool.h, struct rte_mempool_ops, DPDK 22.11):
 *   alloc      the cache, on first populate (mp->size is known then)
 *   free       uslab_cache_destroy (the memory is DPDK's; pointers dropped)
 *   enqueue    uslab_pool_put_bulk, never fails
 *   dequeue    uslab_pool_get_bulk, all or nothing; -ENOBUFS -> -ENOENT
 *   get_count  uslab_pool_avail: every thread's sheaves, the barn, the loose
 *              array (exact while the pool is quiet)
 * calc_mem_size, populate and get_info are DPDK's defaults.
 *
 * NUMA: the cache's node is mp->socket_id (uslab_cache_args.node), and
 * with NUMA on each socket's threads share their own barn (uslab.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_mempool.h>

#include <uslab.h>

/* The sheaf capacities uslab accepts (uslab_cache_args.sheaf_capacity). */
static const unsigned int capacities[] = { 254, 126, 62, 30, 14, 6, 2 };

/*
 * Objects per sheaf for a pool of @n objects: the largest capacity that
 * is at most n / 16, so that the sheaves of a few threads cannot strand
 * much of a small pool. uslab's default derives the capacity from the
 * object size (32 KiB of objects per sheaf: 14 for an mbuf), which is
 * about the memory the objects occupy; here the objects are DPDK's and
 * stay where they are, a sheaf is only pointers, so the count alone
 * matters.
 */
static unsigned int sheaf_capacity(unsigned int n)
{
	for (size_t i = 0; i < sizeof(capacities) / sizeof(capacities[0]); i++)
		if (capacities[i] <= n / 16)
			return capacities[i];
	return 2;
}

static int uslab_mp_alloc(struct rte_mempool *mp)
{
	struct uslab_cache_args args = { 0 };
	size_t size = (size_t)mp->header_size + mp->elt_size + mp->trailer_size;
	char name[USLAB_NAME_MAX + 1];
	struct uslab_cache *c;

	/*
	 * The cache's size is the whole DPDK object (header, element,
	 * trailer), what one occupies in memory: uslab only reports it, never
	 * touches the memory. Names need not be unique in uslab; mempool
	 * names are unique in a process anyway, and shorter than ours.
	 */
	if (size == 0)
		size = 1;
	if (size > USLAB_MAX_OBJECT_SIZE)
		size = USLAB_MAX_OBJECT_SIZE;
	snprintf(name, sizeof(name), "mempool-%s", mp->name);
	args.sheaf_capacity = sheaf_capacity(mp->size);
	args.reserve = mp->size; /* room for every pointer: none is ever dropped */
	/*
	 * The pool's socket is its NUMA node (DPDK's socket ids are the
	 * kernel's node ids): uslab keeps the pointers there, and each thread
	 * trades sheaves at the barn of the node it runs on, one per socket
	 * (SOCKET_ID_ANY: the creating thread's node). Node 0 is named with
	 * USLAB_NODE_STRICT (a zero node field means "the caller's"), which
	 * an external pool never fails on: DPDK placed its objects already.
	 */
	if (mp->socket_id != SOCKET_ID_ANY)
		args.node = mp->socket_id | USLAB_NODE_STRICT;
	c = uslab_cache_create(name, size, &args, USLAB_POOL_EXTERNAL);
	if (!c) {
		int err = errno ? errno : ENOMEM;

		RTE_LOG(ERR, MEMPOOL, "uslab: cannot create the cache of mempool %s: %s\n",
			mp->name, strerror(err));
		rte_errno = err;
		return -err;
	}
	mp->pool_data = c;
	return 0;
}

static void uslab_mp_free(struct rte_mempool *mp)
{
	/* The objects are DPDK's memory: destroying drops the pointers. */
	uslab_cache_destroy(mp->pool_data);
	mp->pool_data = NULL;
}

static int uslab_mp_enqueue(struct rte_mempool *mp, void *const *obj_table, unsigned int n)
{
	uslab_pool_put_bulk(mp->pool_data, n, obj_table);
	return 0;
}

static int uslab_mp_dequeue(struct rte_mempool *mp, void **obj_table, unsigned int n)
{
	int ret = uslab_pool_get_bulk(mp->pool_data, n, obj_table);

	/* DPDK's "not enough objects, none taken" is -ENOENT. */
	return ret == -ENOBUFS ? -ENOENT : ret;
}

static unsigned int uslab_mp_get_count(const struct rte_mempool *mp)
{
	return (unsigned int)uslab_pool_avail(mp->pool_data);
}

static struct rte_mempool_ops uslab_mempool_ops = {
	.name = "uslab",
	.alloc = uslab_mp_alloc,
	.free = uslab_mp_free,
	.enqueue = uslab_mp_enqueue,
	.dequeue = uslab_mp_dequeue,
	.get_count = uslab_mp_get_count,
};

RTE_MEMPOOL_REGISTER_OPS(uslab_mempool_ops);
