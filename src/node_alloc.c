// SPDX-License-Identifier: MIT
/*
 * node_alloc.c - allocation from a chosen NUMA node: uslab_cache_alloc_node()
 * and uslab_cache_alloc_bulk_node() (the kernel's kmem_cache_alloc_node()),
 * and uslab_node_of(). With bulk.c and pool.c one layer (8).
 *
 * A request for the caller's own node (USLAB_NUMA_NO_NODE, or the node it
 * runs on) is an ordinary allocation: the thread's sheaves hold that
 * node's objects (thread_sheaves.c, "NUMA"). A request for another node
 * bypasses the sheaves, as Linux's does when the node is not
 * numa_mem_id(): objects straight from that node's slabs (a new slab
 * placed on it if none is partial), and, not strict, from the nearest
 * other node's when the OS refuses memory; strict (USLAB_NODE_STRICT, the
 * kernel's __GFP_THISNODE) fails with ENOMEM instead, and always takes the
 * node's slabs (never a sheaf's objects). A node id the
 * machine does not have is a node without memory: served by the caller's
 * node, or ENOMEM if strict; with NUMA off every request is node 0's.
 */
#include "front.h"

/*
 * node_request - check @node (a _node call's argument) and make it a
 * request for cache_refill_node() in *@req: -1 for the caller's node.
 * Return: 0; EINVAL (not a node id, USLAB_NUMA_NO_NODE, or an id with
 * USLAB_NODE_STRICT); ENOMEM (strict, and the node has no memory).
 */
int node_request(int node, int *req)
{
	unsigned int id;

	if (node == USLAB_NUMA_NO_NODE) {
		*req = -1;
		return 0;
	}
	if (node < 0 || (node & ~(0xffff | USLAB_NODE_STRICT)))
		return EINVAL;
	id = NODE_ID(node);
	if (!numa_node_ok(id)) {
		if (node & USLAB_NODE_STRICT)
			return ENOMEM;
		*req = -1; /* no memory there: the caller's node (nearest to it with memory) */
		return 0;
	}
	*req = (int)id | (node & USLAB_NODE_STRICT);
	return 0;
}

/*
 * Whether request @req is served by the caller's sheaves: its own node, not
 * strict (a refill may have fallen back to another node under memory
 * pressure: a strict request takes the node's slabs, exactly).
 */
static bool req_local(int req)
{
	return req < 0 || (!NODE_STRICT(req) && NODE_ID(req) == numa_node_self());
}

void *uslab_cache_alloc_node(struct uslab_cache *c, int node)
{
	void *obj;
	int req, err;

	cache_check_live(c, "allocation");
	err = node_request(node, &req);
	if (err) {
		errno = err;
		return NULL;
	}
	if (req_local(req))
		return uslab_cache_alloc(c);
	if (!alloc_pre_hook(c, "allocation", false))
		return NULL;
	if (cache_refill_node(c, &obj, 1, req) != 1)
		return NULL; /* errno ENOMEM (or ENOBUFS: an external pool) */
	objs_hand_out(c, &obj, 1);
	return obj;
}

size_t uslab_cache_alloc_bulk_node(struct uslab_cache *c, int node, size_t n, void **p)
{
	size_t got = 0;
	int req, err;

	if (!n)
		return 0;
	cache_check_live(c, "bulk allocation");
	err = node_request(node, &req);
	if (err) {
		errno = err;
		return 0;
	}
	if (req_local(req))
		return uslab_cache_alloc_bulk(c, n, p);
	if (!alloc_pre_hook(c, "bulk allocation", !p))
		return 0;
	while (got < n) {
		unsigned int want = n - got > UINT32_MAX ? UINT32_MAX : (unsigned int)(n - got);
		unsigned int k = cache_refill_node(c, p + got, want, req);

		got += k;
		if (k < want) {
			/* All or nothing: what came goes back to its slabs. */
			err = errno;
			cache_free_objects(c, p, got, usl_opt.lookahead);
			errno = err;
			return 0;
		}
	}
	objs_hand_out(c, p, n);
	return n;
}

int uslab_node_of(const void *p)
{
	const struct slab *s = os_slab_lookup(p);

	return s ? (int)s->node : -1;
}
