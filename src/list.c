// SPDX-License-Identifier: MIT
/*
 * list.c - freelist hand-off: uslab_cache_alloc_list() gives the caller
 * whole slab freelists and an iterator instead of an array.
 *
 * The seed's "Experiences with slub bulk use-case" thread observed that a
 * bulk alloc into an array walks each slab freelist inside the allocator:
 * one dependent cache miss per object, paid again when the caller first
 * writes the object if the array was large. Here cache.c detaches each
 * slab's freelist in O(1) under the node lock and the caller walks it:
 * uslab_list_pop() reads the popped object's free pointer (the caller is
 * about to touch that object anyway) and prefetches the next object, so
 * the next miss overlaps with the caller's work on this one.
 *
 * Cost of a pop: one decode and range check, one prefetch; no lock, no
 * atomic. The list is the caller's: no synchronisation.
 */
#include <string.h>

#include "internal.h"

size_t uslab_cache_alloc_list(struct uslab_cache *c, size_t n, struct uslab_list *l)
{
	size_t got;

	if (!l) {
		errno = EINVAL;
		return 0;
	}
	memset(l, 0, sizeof(*l));
	if (!c || !n) {
		errno = EINVAL;
		return 0;
	}
	l->cache = c;
	got = cache_detach_lists(c, n, l->segs, USLAB_LIST_SEGS, &l->nseg);
	l->count = got;
	if (got < n && l->nseg < USLAB_LIST_SEGS) {
		uslab_list_free(l); /* the OS refused: nothing is taken */
		errno = ENOMEM;
		return 0;
	}
	return got;
}

void *uslab_list_pop(struct uslab_list *l)
{
	struct uslab_cache *c = l->cache;
	struct uslab_list_seg *seg;
	void *obj;

	if (!l->count)
		return NULL;
	seg = &l->segs[l->seg];
	while (!seg->nfree && !seg->ncarve)
		seg = &l->segs[++l->seg];
	if (seg->nfree) {
		obj = seg->head;
		if (unlikely((uintptr_t)obj - (uintptr_t)seg->base >= (PAGE_SIZE << c->order)))
			uslab_bug(c, obj, "freelist corrupted in slab %p", (void *)seg->base);
		seg->head = --seg->nfree ? fp_get(c, obj) : NULL;
		if (seg->head)
			__builtin_prefetch(seg->head, 1);
	} else {
		obj = seg->carve;
		seg->carve += c->size;
		if (--seg->ncarve)
			__builtin_prefetch(seg->carve, 1);
	}
	l->count--;
	asan_unpoison(obj, c->object_size);
	return obj;
}

void uslab_list_free(struct uslab_list *l)
{
	void *batch[64];
	size_t k = 0;

	while (l->count) {
		struct uslab_list_seg *seg = &l->segs[l->seg];
		void *obj;

		if (!seg->nfree && !seg->ncarve) {
			l->seg++;
			continue;
		}
		if (seg->nfree) {
			obj = seg->head;
			seg->head = --seg->nfree ? fp_get(l->cache, obj) : NULL;
		} else {
			obj = seg->carve;
			seg->carve += l->cache->size;
			seg->ncarve--;
		}
		l->count--;
		batch[k++] = obj;
		if (k == 64 || !l->count) {
			cache_free_objects(l->cache, batch, k, uslab_opt.lookahead);
			k = 0;
		}
	}
	l->seg = l->nseg = 0;
}
