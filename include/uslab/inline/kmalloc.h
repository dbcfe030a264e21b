/* SPDX-License-Identifier: MIT */
/*
 * uslab/inline/kmalloc.h - the inline fast paths of uslab_kmalloc() and
 * uslab_kfree(), included by <uslab/kmalloc.h> (whose contracts they
 * keep): the implementation, apart from the contracts, as liburcu keeps
 * its static/ headers. Never include it directly.
 */
#ifndef USLAB_INLINE_KMALLOC_H
#define USLAB_INLINE_KMALLOC_H

#ifndef USLAB_KMALLOC_H
#error "include <uslab.h>, not <uslab/inline/kmalloc.h>"
#endif

/* The uslab_priv_* names below: the private ABI, <uslab/inline/priv.h>. */
#include <uslab/inline/priv.h>

/*
 * The class lookup, then the sheaf pop of uslab_cache_alloc(): about 20
 * instructions, three dependent loads (the class's id, the sheaf top, the
 * object).
 */
/*
 * The inline paths' misses: the thread's sheaf of the class is empty (full),
 * or it holds none because the class is per CPU: then the CPU's sheaf, in an
 * rseq section (<uslab/inline/priv.h>), else the library. Out of line and cold (a
 * copy per program that uses them), so the per-thread paths above keep
 * their code: with the per-CPU branch inline, the random-size pair cost
 * 7.4 ns instead of 6.9 (kmalloc-uslab). They look the class up again.
 */
static __attribute__((__noinline__, __cold__, __unused__)) void *
uslab_priv_kmalloc_miss(size_t size)
{
#ifdef USLAB_PRIV_RSEQ
	if (size - 1 < USLAB_KMALLOC_MAX_CACHE_SIZE) {
		unsigned int id = uslab_priv_kmalloc_ids[uslab_priv_kmalloc_index(size)];
		struct uslab_priv_pcpu *slots = uslab_priv_pcpu_of_id[id];

		if (slots && !uslab_priv_pcs_of_id(id)->top) {
			void *obj = uslab_priv_pcpu_pop(slots, uslab_priv_pcpu_nr);

			if (obj) {
				if (uslab_priv_objgeo[id].free_key)
					uslab_priv_free_unmark(obj);
				return obj;
			}
		}
	}
#endif
	return uslab_priv_kmalloc_slow(size);
}

static __attribute__((__noinline__, __cold__, __unused__))
USLAB_NO_ACCESS(1) void uslab_priv_kfree_miss(const void *obj)
{
#ifdef USLAB_PRIV_RSEQ
	unsigned long a = (unsigned long)obj, e;

	if (!(a >> USLAB_PRIV_VA_BITS) &&
	    (e = uslab_priv_slab_map[a >> USLAB_PRIV_ARENA_SHIFT]) != 0) {
		const char *d = uslab_priv_slab_desc(a, e);
		unsigned int id = uslab_priv_desc_id(d);
		const struct uslab_priv_objgeo *g = &uslab_priv_objgeo[id];
		struct uslab_priv_pcpu *slots = uslab_priv_pcpu_of_id[id];

		if (slots && !uslab_priv_pcs_of_id(id)->top &&
		    uslab_priv_at_object(a, d, g->recip, g->span)) {
			/* Marked before the push makes it another thread's to take. */
			if (g->free_key)
				uslab_priv_free_mark((struct uslab_cache *)0, (void *)obj,
						     g->free_key);
			if (uslab_priv_pcpu_push(slots, uslab_priv_pcpu_nr, (void *)obj))
				return;
			if (g->free_key)
				uslab_priv_free_unmark((void *)obj); /* the library marks it */
		}
	}
#endif
	uslab_priv_kfree_slow(obj);
}

static inline __attribute__((__always_inline__)) void *uslab_kmalloc_inline(size_t size)
{
	if (__builtin_expect(size - 1 < USLAB_KMALLOC_MAX_CACHE_SIZE, 1)) {
		struct uslab_priv_pcs *p = uslab_priv_pcs_of_id(
			uslab_priv_kmalloc_ids[uslab_priv_kmalloc_index(size)]);
		void **top = p->top;

		if (__builtin_expect(top != p->bottom, 1)) {
			void *obj;

			p->top = --top;
			obj = *top;
			/* The malloc drop-in's classes have the free key (doc/design.md). */
			if (__builtin_expect(p->free_key != 0, 0))
				uslab_priv_free_unmark(obj);
			return obj;
		}
	}
	return uslab_priv_kmalloc_miss(size);
}

/*
 * The slab registry gives the object's slab descriptor and its cache id;
 * the descriptor and the thread's pcs of that id (its copy of the id's
 * struct uslab_priv_objgeo, on the line of the sheaf top) say whether the
 * address is an object's start (a pointer inside an object goes to the
 * library, which reports it); where the cache has the free key (the malloc
 * drop-in's classes, caches created with USLAB_FREE_KEY), the key says
 * whether it is free already; then the sheaf push of uslab_cache_free().
 * About 26 instructions, three dependent loads (registry, descriptor, the
 * pcs line) before the stores. NULL, USLAB_ZERO_SIZE_PTR, foreign
 * addresses, large objects, caches without sheaves and debug caches (id 0,
 * or span 0), free slabs and a full sheaf go to the library.
 */
static inline __attribute__((__always_inline__))
USLAB_NO_ACCESS(1) void uslab_kfree_inline(const void *obj)
{
	unsigned long a = (unsigned long)obj, e;

	if (__builtin_expect(!(a >> USLAB_PRIV_VA_BITS), 1) &&
	    (e = uslab_priv_slab_map[a >> USLAB_PRIV_ARENA_SHIFT]) != 0) {
		const char *d = uslab_priv_slab_desc(a, e);
		struct uslab_priv_pcs *p = uslab_priv_pcs_of_id(uslab_priv_desc_id(d));
		void **top = p->top;

		if (__builtin_expect(
			    uslab_priv_at_object(a, d, p->recip, p->span) && top != p->limit, 1)) {
			if (__builtin_expect(p->free_key != 0, 0))
				uslab_priv_free_mark((struct uslab_cache *)0, (void *)obj,
						     p->free_key);
			*top = (void *)obj;
			uslab_priv_top_add(&p->top, 1);
			return;
		}
	}
	uslab_priv_kfree_miss(obj);
}

#ifdef USLAB_PRIV_INLINE
#define uslab_kmalloc(size) uslab_kmalloc_inline(size)
#define uslab_kfree(p) uslab_kfree_inline(p)
#endif

#endif /* USLAB_INLINE_KMALLOC_H */
