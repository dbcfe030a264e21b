// SPDX-License-Identifier: MIT
/*
 * stats.c - the names of the slow-path event counters (a service: no
 * layer below). The counters are kept by their layers through the stat
 * helpers (node_stat() in src/cache.h, pcs_stat()), which compile away
 * without USLAB_STATS, and summed by uslab_cache_stats() (lifecycle.c).
 */
#include <string.h>

#include "base.h"

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
	[USLAB_STAT_SHEAF_GROW] = "sheaf_grow",
	[USLAB_STAT_SHEAF_SHRINK] = "sheaf_shrink",
	[USLAB_STAT_BARN_GROW] = "barn_grow",
	[USLAB_STAT_BARN_SHRINK] = "barn_shrink",
	[USLAB_STAT_NUMA_REMOTE_FREE] = "numa_remote_free",
	[USLAB_STAT_NUMA_REMOTE_BATCH] = "numa_remote_batch",
	[USLAB_STAT_NUMA_FALLBACK] = "numa_fallback",
	[USLAB_STAT_NUMA_MOVED] = "numa_moved",
};

const char *uslab_stat_name(unsigned int item)
{
	return item < USLAB_STAT_NR_ITEMS ? stat_names[item] : NULL;
}
