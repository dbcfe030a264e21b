/* SPDX-License-Identifier: MIT */
/*
 * cache_core.h - what the cache layer's three files share: cache.c (the
 * node of slabs), cache_registry.c (descriptors, the list of caches) and
 * loose.c (the pools' loose array). The layers above see cache.h.
 */
#ifndef USLAB_CACHE_CORE_H
#define USLAB_CACHE_CORE_H

/* cache.c */
INTERNAL int cache_setup(struct uslab_cache *c, const char *name, size_t size, size_t align,
			 void (*ctor)(void *), unsigned int flags, unsigned int min_partial,
			 unsigned int layout, const struct cache_shape *shape);
INTERNAL void node_free_objects(struct uslab_cache *c, void **p, size_t n, unsigned int lookahead);
INTERNAL unsigned int node_refill(struct uslab_cache *c, void **dst, unsigned int want,
				  bool hand_out, int req);
INTERNAL void cache_nodes_release(struct uslab_cache *c);

/* loose.c */
INTERNAL void loose_put(struct uslab_cache *c, void **p, size_t n);
INTERNAL unsigned int loose_take(struct uslab_cache *c, void **dst, unsigned int want);
INTERNAL void loose_forget(struct uslab_cache *c);

#endif /* USLAB_CACHE_CORE_H */
