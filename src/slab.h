/* SPDX-License-Identifier: MIT */
/*
 * slab.h - layer 2: one slab's objects and free pointers (slab.c), the
 * shape of a cache's slabs (slab_geometry.c), the debug tier's per-object
 * state (slab_debug.c).
 */
#ifndef USLAB_SLAB_H
#define USLAB_SLAB_H

#include "os.h"

/* ------------------------------------------------------------- slab.c */

/*
 * struct detached_freelist - objects of one slab linked through their free
 * pointers by a thread that owns them, not yet visible to anyone (seed:
 * "slub: optimize bulk slowpath free by detached freelist").
 */
#define DF_IDX_MAX 64
struct detached_freelist {
	struct slab *slab;
	void *head; /* FREEPTR: the chain; index layouts: the first object */
	void *tail;
	unsigned int cnt;
	uint16_t idx[DF_IDX_MAX]; /* index layouts: the objects' indices */
};

/*
 * struct slab_geometry - the shape of a cache's slabs (slab_geometry.c),
 * fixed at creation. struct uslab_cache embeds it twice over in a union,
 * as Linux's struct_group(): its members are the cache's own (c->size),
 * and the whole is c->geo. SLAB_GEOMETRY_MEMBERS is the one list of them.
 */
#define SLAB_GEOMETRY_MEMBERS                                                                   \
	unsigned int size;	 /* stride between objects */                                   \
	unsigned int order;	 /* slabs are 2^order pages */                                  \
	unsigned int objects;	 /* per slab */                                                 \
	unsigned int fp_offset;	 /* FREEPTR: free pointer offset in an object */                \
	unsigned int colour_off; /* bytes between two colours */                                \
	unsigned int                                                                            \
		meta_off; /* the array's offset: ONSLAB in a slab, OBJFREELIST in its holder */ \
	unsigned int meta_bytes;    /* uslab_cache_stats.meta_bytes */                          \
	unsigned int offslab_bytes; /* OFFSLAB: each slab's array block */                      \
	unsigned int leftover;	    /* bytes of a slab no object uses */                        \
	unsigned char layout;	    /* enum uslab_layout, never AUTO */                         \
	unsigned char idx_size;	    /* index layouts: bytes per index (1, 2) */                 \
	unsigned char colours;	    /* first-object offsets used in turn (>= 1) */              \
	uint64_t recip;		    /* 2^64 / size, rounded up */

struct slab_geometry {
	SLAB_GEOMETRY_MEMBERS
};

/*
 * slab_at_object - whether @p, in the slab whose descriptor (head or tail)
 * is @s, of a cache with geometry @g (not a large object's), is an
 * object's start: the inline kfree's test (uslab_priv_at_object), a
 * multiply where slab_object_at() divides.
 */
static inline bool slab_at_object(const struct slab_geometry *g, const struct slab *s,
				  const void *p)
{
	uint64_t off = (uintptr_t)p + s->first_neg;

	return off < (uint64_t)g->objects * g->size && off * g->recip < g->recip;
}

/* OFFSLAB index arrays come in blocks of 16 << i bytes, up to 4 KiB (larger: refused). */
#define OFFSLAB_MIN_BYTES 16u
#define OFFSLAB_MAX_BYTES 4096u
/* Slab colouring uses at most this many first-object offsets (struct slab.colour). */
#define SLAB_MAX_COLOURS 16

/*
 * What slab_geometry_init() lays out: @object_size bytes asked for, @slot
 * bytes per object before alignment (rounded up to a word; with the debug
 * tier's red zones and metadata), @align, @obj_off (the object's offset in
 * its slot), slabs up to 2^@max_order pages, @layout (enum uslab_layout,
 * AUTO: chosen), @bound (a constructor or TYPESAFE_BY_RCU: no byte of a
 * free object may be written), @internal (uslab's own caches: never
 * OFFSLAB, USLAB_LAYOUT not applied), @keep_first_word (the cache may
 * carry the free key in a free object's first word: OBJFREELIST's array
 * goes after it, in objects large enough).
 */
struct slab_geometry_req {
	unsigned int object_size;
	size_t slot;
	size_t align;
	unsigned int obj_off;
	unsigned int max_order;
	unsigned int layout;
	bool bound;
	bool internal;
	bool keep_first_word;
};

INTERNAL int slab_geometry_init(struct slab_geometry *g, const struct slab_geometry_req *r);
INTERNAL unsigned int get_order(size_t size);

INTERNAL void *fp_get(const struct uslab_cache *c, const void *obj);
INTERNAL void fp_set(const struct uslab_cache *c, void *obj, void *next);
INTERNAL void slab_setup(struct uslab_cache *c, struct slab *s, void *offslab);
INTERNAL void slab_push_indices(struct uslab_cache *c, struct slab *s,
				const struct detached_freelist *df);
INTERNAL void slab_pop_indices(struct uslab_cache *c, struct slab *s, void **dst, unsigned int k);
INTERNAL void *slab_first_object(const struct uslab_cache *c, const struct slab *s);
INTERNAL void slab_prefetch_push(const struct uslab_cache *c, const struct slab *s);
INTERNAL unsigned int slab_carve(struct uslab_cache *c, struct slab *s, void **dst,
				 unsigned int max);
INTERNAL void *slab_walk(struct uslab_cache *c, struct slab *s, void *head, unsigned int cnt,
			 void **dst);
INTERNAL struct slab *slab_of_object(struct uslab_cache *c, const void *obj);
INTERNAL struct slab *slab_check_object(struct uslab_cache *c, const void *obj, const char **what);
INTERNAL unsigned int slab_object_index(const struct uslab_cache *c, const struct slab *s,
					const void *obj);
INTERNAL unsigned int slab_index_at(const struct uslab_cache *c, const struct slab *s,
				    unsigned int i);
INTERNAL void *slab_object_at(const struct slab *s, const void *p);
INTERNAL unsigned long slab_validate(struct uslab_cache *c, struct slab *s, uint64_t *seen,
				     void *const *held, size_t nheld);
INTERNAL size_t build_detached_freelist(struct uslab_cache *c, size_t n, void **p, size_t start,
					unsigned int lookahead, struct detached_freelist *df);

/* ------------------------------------------------------- slab_debug.c */

INTERNAL extern bool slab_debug_on; /* some cache is in the debug tier */
INTERNAL unsigned int slab_debug_flags(const char *name, unsigned int flags, bool bound);
INTERNAL size_t slab_debug_layout(struct uslab_cache *c);
INTERNAL void slab_debug_setup_slab(struct uslab_cache *c, struct slab *s);
INTERNAL void slab_debug_alloc(struct uslab_cache *c, void **objs, size_t n);
INTERNAL bool slab_debug_free(struct uslab_cache *c, void *obj);
INTERNAL void slab_debug_alloc_one(struct uslab_cache *c, void *obj, const void *site);
INTERNAL bool slab_debug_free_one(struct uslab_cache *c, void *obj, const void *site);
INTERNAL bool slab_debug_free_rcu(void *obj);
INTERNAL void slab_debug_rcu_done(void *const *objs, size_t n);
INTERNAL void slab_debug_set_size(struct uslab_cache *c, void *obj, size_t size);
INTERNAL size_t slab_debug_size(const struct uslab_cache *c, const void *obj);
INTERNAL bool slab_debug_allocated(const struct uslab_cache *c, const void *obj, const char *call);
INTERNAL unsigned long slab_debug_check_slab(struct uslab_cache *c, struct slab *s);
INTERNAL unsigned long slab_debug_list_live(struct uslab_cache *c, struct slab *s,
					    unsigned long *budget);

#endif /* USLAB_SLAB_H */
