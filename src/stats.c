// SPDX-License-Identifier: MIT
/*
 * stats.c - uslab_cache_stats(): the /proc/slabinfo view of a cache and
 * its slow-path event counters.
 *
 * Slab counters come from the node under its lock. Event counters live in
 * three places, summed here: the node (events counted under its lock, and
 * the counters of threads that exited), and each live thread's own block
 * (struct pcs_events, written by its owner without atomics).
 */
#include <string.h>

#include "internal.h"

static const char *const stat_names[USLAB_STAT_NR_ITEMS] = {
	[USLAB_STAT_ALLOC_SLOWPATH] = "alloc_slowpath",
	[USLAB_STAT_FREE_SLOWPATH] = "free_slowpath",
	[USLAB_STAT_SHEAF_SWAP] = "sheaf_swap",
	[USLAB_STAT_BARN_GET] = "barn_get",
	[USLAB_STAT_BARN_GET_FAIL] = "barn_get_fail",
	[USLAB_STAT_BARN_PUT] = "barn_put",
	[USLAB_STAT_BARN_PUT_FAIL] = "barn_put_fail",
	[USLAB_STAT_SHEAF_REFILL] = "sheaf_refill",
	[USLAB_STAT_SHEAF_FLUSH] = "sheaf_flush",
	[USLAB_STAT_SHEAF_ALLOC] = "sheaf_alloc",
	[USLAB_STAT_SLAB_NEW] = "slab_new",
	[USLAB_STAT_SLAB_FREE] = "slab_free",
	[USLAB_STAT_ALLOC_BULK] = "alloc_bulk",
	[USLAB_STAT_ALLOC_BULK_OBJS] = "alloc_bulk_objs",
	[USLAB_STAT_FREE_BULK] = "free_bulk",
	[USLAB_STAT_FREE_BULK_OBJS] = "free_bulk_objs",
	[USLAB_STAT_FREE_GROUP] = "free_group",
};

const char *uslab_stat_name(unsigned int item)
{
	return item < USLAB_STAT_NR_ITEMS ? stat_names[item] : NULL;
}

int uslab_cache_stats(const struct uslab_cache *c, struct uslab_cache_stats *st)
{
	struct uslab_cache *cc = (struct uslab_cache *)c;
	struct node *n;

	if (!c || !st)
		return -EINVAL;
	n = &cc->node;
	memset(st, 0, sizeof(*st));
	st->objsize = c->size;
	st->objperslab = c->objects;
	st->pagesperslab = 1u << c->order;
	st->object_size = c->object_size;
	st->align = c->align;
	st->order = c->order;
	st->sheaf_capacity = c->sheaf_capacity;
	st->min_partial = c->min_partial;

	ulock_lock(&n->lock);
	st->num_slabs = n->nr_slabs;
	st->num_objs = n->nr_objects;
	st->active_objs = n->nr_objects - n->nr_free;
	st->active_slabs = n->nr_slabs - n->nr_empty;
	st->partial_slabs = n->nr_partial;
	for (int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
		st->events[i] = n->ev[i];
	ulock_unlock(&n->lock);

	barn_counts(&cc->barn, &st->barn_full, &st->barn_empty);
	thread_sum_events(c, st->events);
	return 0;
}
