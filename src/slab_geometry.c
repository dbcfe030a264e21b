// SPDX-License-Identifier: MIT
/*
 * slab_geometry.c - the shape of a cache's slabs, computed once when the
 * cache is created: the slab order (SLUB's rule), the stride between
 * objects, objects per slab, where the free objects are kept (the layout:
 * a free pointer inside each object, or an index array in an object, at
 * the slab's end or off the slab), the colours, the free pointer's offset.
 * Pure calculation on the object's size, alignment and options: no lock,
 * no memory, no cache. struct uslab_cache embeds the result (struct
 * slab_geometry) and slab.c reads it.
 *
 * Layer: slab (with slab.c and slab_debug.c); reads only the options.
 */
#include <string.h>

#include "slab.h"

unsigned int get_order(size_t size)
{
	unsigned int order = 0;

	while ((PAGE_SIZE << order) < size)
		order++;
	return order;
}

/* The smallest order from @min_order wasting at most 1/@fract of the slab. */
static unsigned int calc_slab_order(unsigned int size, unsigned int min_order,
				    unsigned int max_order, unsigned int fract)
{
	unsigned int order;

	for (order = min_order; order <= max_order; order++) {
		size_t slab_size = PAGE_SIZE << order;

		if (slab_size % size <= slab_size / fract)
			break;
	}
	return order;
}

/*
 * calculate_order - SLUB's rule: at least min_objects = 4 * (fls(nr_cpus) + 1)
 * objects per slab (tunable), the least waste first, orders up to max_order,
 * and beyond that the order that fits one object.
 */
static int calculate_order(unsigned int size, unsigned int max_order)
{
	unsigned int min_objects = usl_opt.min_objects;

	unsigned int max_objects, min_order, order;

	if (!min_objects)
		min_objects = 4 * (fls_uint(usl_opt.nr_cpus) + 1);
	max_objects = (PAGE_SIZE << max_order) / size;
	if (max_objects < 1)
		max_objects = 1;
	if (min_objects > max_objects)
		min_objects = max_objects;
	min_order = get_order((size_t)min_objects * size);
	if (min_order < usl_opt.min_order)
		min_order = usl_opt.min_order;
	for (unsigned int fract = 16; fract > 1; fract /= 2) {
		order = calc_slab_order(size, min_order, max_order, fract);
		if (order <= max_order)
			return order;
	}
	order = get_order(size);
	if (order < usl_opt.min_order)
		order = usl_opt.min_order;
	return order <= SLAB_MAX_ORDER ? (int)order : -EINVAL;
}

/* ------------------------------------------------------ slab layouts */

/* The largest object count an index (2 bytes) can name. */
#define IDX_MAX_OBJECTS 65536u

static unsigned int idx_size_for(unsigned int objects)
{
	return objects <= 256 ? 1 : 2;
}

/*
 * Whether FREEPTR's free pointer goes after the object: no byte of a free
 * object may be written (@r->bound), or the middle word of an object of
 * less than two words is its first, the free key's.
 */
static bool fp_after_object(const struct slab_geometry_req *r)
{
	return r->bound || (r->keep_first_word && r->object_size < 2 * sizeof(void *));
}

/*
 * geometry - lay out the cache @r describes with @layout. Return: 0, or
 * -EINVAL when @layout cannot serve the cache.
 */
static int geometry(unsigned int layout, const struct slab_geometry_req *r, struct slab_geometry *g)
{
	unsigned int osize = r->object_size;
	size_t sz = r->slot, align = r->align;
	bool bound = r->bound;
	bool fp_after = fp_after_object(r);
	size_t slab;
	unsigned int arr;
	int order;

	memset(g, 0, sizeof(*g));
	g->layout = (unsigned char)layout;
	if (layout == USLAB_LAYOUT_FREEPTR && fp_after)
		sz += sizeof(void *); /* the free pointer after the object */
	g->size = (unsigned int)ALIGN_UP(sz, align);
	order = calculate_order(g->size, r->max_order);
	if (order < 0)
		return -EINVAL;
	g->order = (unsigned int)order;
	slab = PAGE_SIZE << order;
	g->objects = (unsigned int)(slab / g->size);
	g->leftover = (unsigned int)(slab - (size_t)g->objects * g->size);
	g->meta_bytes = sizeof(struct slab);
	if (layout == USLAB_LAYOUT_FREEPTR) {
		if (fp_after)
			g->meta_bytes += g->objects * (unsigned int)sizeof(void *);
		return 0;
	}
	if (g->objects > IDX_MAX_OBJECTS)
		return -EINVAL;
	g->idx_size = (unsigned char)idx_size_for(g->objects);
	arr = g->objects * g->idx_size;
	switch (layout) {
	case USLAB_LAYOUT_OBJFREELIST:
		/*
		 * Seed rule 1: no constructor, and the array fits in one object
		 * (after its first word in a cache that may have the free key,
		 * which a free object keeps there: a second free of the holder
		 * is caught at its call too).
		 */
		g->meta_off = r->keep_first_word ? (unsigned int)sizeof(uintptr_t) : 0;
		if (bound || arr + g->meta_off > osize)
			return -EINVAL;
		return 0;
	case USLAB_LAYOUT_ONSLAB:
		if (ALIGN_UP(arr, 2) > g->leftover) {
			/* Reserve room at the slab's end: fewer objects. */
			g->objects = (unsigned int)(slab / (g->size + g->idx_size));
			g->idx_size = (unsigned char)idx_size_for(g->objects);
			while (g->objects && (size_t)g->objects * g->size +
							     ALIGN_UP(g->objects * g->idx_size, 2) >
						     slab)
				g->objects--;
			if (!g->objects)
				return -EINVAL;
			arr = g->objects * g->idx_size;
		}
		g->meta_off = (unsigned int)(slab - ALIGN_UP(arr, 2));
		g->leftover = g->meta_off - g->objects * g->size;
		g->meta_bytes += arr;
		return 0;
	case USLAB_LAYOUT_OFFSLAB:
		for (unsigned int bytes = OFFSLAB_MIN_BYTES; bytes <= OFFSLAB_MAX_BYTES;
		     bytes *= 2) {
			if (arr <= bytes) {
				g->offslab_bytes = bytes;
				g->meta_bytes += bytes;
				return 0;
			}
		}
		return -EINVAL;
	}
	return -EINVAL;
}

/* ONSLAB: the array took room from objects (fewer than fit in the slab). */
static bool onslab_reserved(const struct slab_geometry *g)
{
	return g->objects != (PAGE_SIZE << g->order) / g->size;
}

/* Slab memory per object of a layout (for AUTO's last rule). */
static double bytes_per_object(const struct slab_geometry *g)
{
	return (double)((PAGE_SIZE << g->order) + g->meta_bytes) / g->objects;
}

/* Rule 1's bound: OFFSLAB's metadata, descriptor included, at most 1/100 of the slab. */
#define OFFSLAB_AUTO_FRACTION 100

/*
 * choose_layout - AUTO, by SLAB's rules with SLUB's free pointer as a
 * fourth type, in the order measured best (doc/design.md, "Slab layouts"):
 *   1. OFFSLAB when its metadata (descriptor and array block) is at most
 *      1% of the slab: the arrays of many slabs share cache lines, so a
 *      free to a slab costs the least (objects of 256 bytes and more);
 *   2. OBJFREELIST when it can serve (no constructor, not TYPESAFE_BY_RCU,
 *      the index array fits in one object): no memory for metadata;
 *   3. ONSLAB when the array fits in the slab's leftover bytes;
 *   4. FREEPTR when a free object can hold its own free pointer (no
 *      constructor, not TYPESAFE_BY_RCU): an index array would cost
 *      memory, the free pointer costs none (small objects);
 *   5. else the least slab memory per object of ONSLAB with room
 *      reserved, OFFSLAB and FREEPTR (8 bytes after every object).
 */
static void choose_layout(const struct slab_geometry_req *r, struct slab_geometry *g)
{
	static const unsigned int last[] = { USLAB_LAYOUT_ONSLAB, USLAB_LAYOUT_OFFSLAB,
					     USLAB_LAYOUT_FREEPTR };
	struct slab_geometry t;

	/* (Not for uslab's own caches: the OFFSLAB arrays come from some of them.) */
	if (!r->internal && !geometry(USLAB_LAYOUT_OFFSLAB, r, g) &&
	    (size_t)g->meta_bytes * OFFSLAB_AUTO_FRACTION <= PAGE_SIZE << g->order)
		return;
	if (!geometry(USLAB_LAYOUT_OBJFREELIST, r, g))
		return;
	if (!geometry(USLAB_LAYOUT_ONSLAB, r, g) && !onslab_reserved(g))
		return;
	geometry(USLAB_LAYOUT_FREEPTR, r, g);
	if (!fp_after_object(r))
		return;
	for (unsigned int i = 0; i < ARRAY_SIZE(last); i++) {
		if (!geometry(last[i], r, &t) && bytes_per_object(&t) < bytes_per_object(g))
			*g = t;
	}
}

/*
 * slab_geometry_init - lay out slabs for the objects @r describes: the
 * layout @r->layout asks for, or AUTO's choice (USLAB_LAYOUT, where it can
 * serve, for every cache but uslab's own), then the free pointer's offset,
 * the colours within the leftover bytes and the reciprocal of the stride.
 * Return: 0, or -EINVAL when no slab order fits the object or the layout
 * asked for cannot serve it (@g is then undefined).
 */
int slab_geometry_init(struct slab_geometry *g, const struct slab_geometry_req *r)
{
	unsigned int layout = r->layout;
	unsigned int osize = r->object_size;
	size_t sz = r->slot;

	if (layout == USLAB_LAYOUT_AUTO && usl_opt.layout && !r->internal &&
	    !geometry(usl_opt.layout, r, g))
		layout = usl_opt.layout;
	if (layout == USLAB_LAYOUT_AUTO)
		choose_layout(r, g);
	else if (layout >= USLAB_LAYOUT_NR || geometry(layout, r, g))
		return -EINVAL;

	/* FREEPTR: in the middle of the object, or after it (never written). */
	g->fp_offset = fp_after_object(r) ? (unsigned int)sz - r->obj_off :
					    (unsigned int)ALIGN_DOWN(osize / 2, sizeof(void *));
	/*
	 * Colours: offsets of the first object, in steps of a cache line or of
	 * the objects' natural alignment (kmalloc's aligned requests rely on
	 * it), within the leftover bytes.
	 */
	g->colour_off = CACHELINE > (g->size & -g->size) ? CACHELINE : (g->size & -g->size);
	g->colours = 1;
	if (usl_opt.colour && g->objects > 1) {
		unsigned int n = g->leftover / g->colour_off + 1;

		g->colours = (unsigned char)(n < SLAB_MAX_COLOURS ? n : SLAB_MAX_COLOURS);
	}
	g->recip = UINT64_MAX / g->size + 1;
	return 0;
}
