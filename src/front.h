/* SPDX-License-Identifier: MIT */
/*
 * front.h - layers 8 to 14, the front ends and what wires them: bulk
 * calls (bulk.c, pool.c, node_alloc.c), kfree_rcu (rcu.c), magazines (magazine.c), lifecycle.c,
 * kmalloc.c, export.c, init.c.
 */
#ifndef USLAB_FRONT_H
#define USLAB_FRONT_H

#include "perthread.h"

/* ------------------------------------------------------------- bulk.c */

/*
 * Whether @objs[0..n) holds a NULL: four entries per step, branch-free, so
 * a bulk push without holes can be a memcpy (magazine.c).
 */
static inline bool ptrs_any_null(void *const *objs, size_t n)
{
	size_t i = 0;
	bool z = false;

	for (; i + 4 <= n; i += 4)
		z |= !objs[i] | !objs[i + 1] | !objs[i + 2] | !objs[i + 3];
	for (; i < n; i++)
		z |= !objs[i];
	return z;
}

/* -------------------------------------------------------- node_alloc.c */

INTERNAL int node_request(int node, int *req);

/* ------------------------------------------------------------- rcu.c */

INTERNAL void rcu_init(void);
INTERNAL void rcu_fork_prepare(void);
INTERNAL void rcu_fork_parent(void);
INTERNAL void rcu_fork_child(void);
#ifdef USLAB_TESTING
INTERNAL extern int rcu_fault_inject; /* test hook: uslab_testing only */
#endif

/* -------------------------------------------------------- lifecycle.c */

INTERNAL struct uslab_cache *lifecycle_create(const char *name, size_t size,
					      const struct uslab_cache_args *args,
					      unsigned int flags, const struct cache_shape *shape);
INTERNAL void lifecycle_stats(const struct uslab_cache *c, struct uslab_cache_stats *st);
INTERNAL void lifecycle_node_stats(struct uslab_cache *c, unsigned int nid,
				   struct uslab_node_stats *st);
INTERNAL void lifecycle_heap_stats(struct uslab_heap_stats *st);

/* ---------------------------------------------------------- kmalloc.c */

/* Slab order limit of the classes: every class wastes at most 1/8 of a slab. */
#define KMALLOC_MAX_ORDER 6

INTERNAL int kmalloc_bootstrap(void);

/* ---------------------------------------------------------- export.c */

INTERNAL void export_init(void);
INTERNAL void export_fork_child(void);

#endif /* USLAB_FRONT_H */
