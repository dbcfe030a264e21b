// SPDX-License-Identifier: MIT
/*
 * test_slab_geometry.c - slab_geometry.c on its own, without a cache: the
 * order rule, each layout's arithmetic, AUTO's choice, the free pointer's
 * offset, colours and the reciprocal, for the requests cache.c makes.
 */
#include "internal.h"
#include "../test.h"

#define LA USLAB_LAYOUT_AUTO
#define LF USLAB_LAYOUT_FREEPTR
#define LO USLAB_LAYOUT_OBJFREELIST
#define LN USLAB_LAYOUT_ONSLAB
#define LX USLAB_LAYOUT_OFFSLAB

/* The geometry of @size-byte objects, word-aligned, as cache.c asks for it. */
static int lay(struct slab_geometry *g, size_t size, unsigned int layout, bool bound)
{
	struct slab_geometry_req r = {
		.object_size = (unsigned int)size,
		.slot = ALIGN_UP(size, sizeof(void *)),
		.align = sizeof(void *),
		.max_order = usl_opt.max_order,
		.layout = layout,
		.bound = bound,
	};

	return slab_geometry_init(g, &r);
}

/* What every geometry must satisfy, whatever the layout. */
static void check_invariants(const struct slab_geometry *g, size_t size, bool bound)
{
	size_t slab = PAGE_SIZE << g->order;
	size_t arr = (size_t)g->objects * g->idx_size;

	CHECK(g->objects >= 1 && g->size >= size && g->size % sizeof(void *) == 0,
	      "size %zu: %u objects of %u bytes", size, g->objects, g->size);
	CHECK((size_t)g->objects * g->size + g->leftover <= slab, "size %zu: objects fit the slab",
	      size);
	CHECK(g->recip == UINT64_MAX / g->size + 1, "size %zu: reciprocal of the stride", size);
	CHECK(g->colours == 1, "size %zu: no colours without USLAB_COLOUR", size);
	switch (g->layout) {
	case LF:
		CHECK(g->idx_size == 0 && g->fp_offset + sizeof(void *) <= g->size,
		      "size %zu: the free pointer lies within the stride", size);
		CHECK(bound ? g->fp_offset >= size : g->fp_offset + sizeof(void *) <= size,
		      "size %zu: free pointer %s the object", size, bound ? "after" : "inside");
		break;
	case LO:
		CHECK(!bound && arr <= size, "size %zu: OBJFREELIST's array fits one object", size);
		break;
	case LN:
		CHECK(g->meta_off + arr <= slab &&
			      g->meta_off == (size_t)g->objects * g->size + g->leftover,
		      "size %zu: ONSLAB's array after the objects, at %u", size, g->meta_off);
		break;
	case LX:
		CHECK(g->offslab_bytes >= arr && g->offslab_bytes >= OFFSLAB_MIN_BYTES &&
			      g->offslab_bytes <= OFFSLAB_MAX_BYTES &&
			      !(g->offslab_bytes & (g->offslab_bytes - 1)) &&
			      (g->offslab_bytes == OFFSLAB_MIN_BYTES || g->offslab_bytes / 2 < arr),
		      "size %zu: OFFSLAB block %u for an array of %zu", size, g->offslab_bytes,
		      arr);
		break;
	default:
		CHECK(0, "size %zu: layout %u", size, g->layout);
	}
	if (g->layout != LF)
		CHECK(g->idx_size == (g->objects <= 256 ? 1 : 2), "size %zu: %u-byte indices", size,
		      g->idx_size);
}

/* SLUB's order rule for 2 CPUs (min_objects 12), orders from 0 (slub_min_order). */
static void test_order_rule(void)
{
	static const struct {
		size_t size;
		unsigned int order, objects;
	} t[] = {
		{ 8, 0, 512 },	 { 64, 0, 64 },	    { 100, 0, 39 },  { 256, 0, 16 },
		{ 512, 1, 16 },	 { 1024, 2, 16 },   { 2048, 3, 16 }, { 4096, 3, 8 },
		{ 65536, 4, 1 }, { 1 << 20, 8, 1 },
	};
	struct slab_geometry g;

	usl_opt.min_order = 0;
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		CHECK(!lay(&g, t[i].size, LF, false), "size %zu: laid out", t[i].size);
		CHECK(g.order == t[i].order && g.objects == t[i].objects,
		      "size %zu: order %u objects %u, want %u/%u", t[i].size, g.order, g.objects,
		      t[i].order, t[i].objects);
	}
	usl_opt.min_order = 2;
	CHECK(!lay(&g, 256, LF, false) && g.order == 2 && g.objects == 64,
	      "USLAB_MIN_ORDER 2: 256 B in 16 KiB slabs");
	/* Beyond 2^SLAB_MAX_ORDER pages no order fits. */
	CHECK(lay(&g, (PAGE_SIZE << SLAB_MAX_ORDER) + 8, LF, false) == -EINVAL,
	      "an object larger than the largest slab");
	CHECK(lay(&g, 64, USLAB_LAYOUT_NR, false) == -EINVAL, "a layout that does not exist");
}

/* The free pointer: in the middle of a free object, or after it when bound. */
static void test_free_pointer(void)
{
	struct slab_geometry g;

	CHECK(!lay(&g, 100, LF, false) && g.size == 104 && g.fp_offset == 48,
	      "100 B: stride 104, free pointer at 48");
	CHECK(!lay(&g, 100, LF, true) && g.size == 112 && g.fp_offset == 104,
	      "100 B, constructor: stride 112, free pointer at 104, after the object");
	CHECK(g.meta_bytes == sizeof(struct slab) + g.objects * sizeof(void *),
	      "bound FREEPTR: the pointers after the objects counted as metadata");
}

/* Each layout where it can and cannot serve, and the invariants on a sweep of sizes. */
static void test_layouts(void)
{
	struct slab_geometry g;
	unsigned long laid = 0;

	CHECK(lay(&g, 128, LO, true) == -EINVAL, "OBJFREELIST: not with a constructor");
	CHECK(lay(&g, 8, LO, false) == -EINVAL, "OBJFREELIST: the array must fit one object");
	CHECK(!lay(&g, 128, LO, false) && g.layout == LO, "OBJFREELIST: 128 B");
	/* 4 KiB objects fill their slab: ONSLAB takes room from the objects. */
	CHECK(!lay(&g, 4096, LN, true) && g.objects == 7 && g.meta_off >= 7 * 4096,
	      "ONSLAB, no leftover: %u objects, array at %u", g.objects, g.meta_off);
	CHECK(!lay(&g, 200, LN, true) && g.objects == 81 && g.meta_off == 16384 - 82,
	      "ONSLAB in the leftover: %u objects, array at %u", g.objects, g.meta_off);
	CHECK(!lay(&g, 256, LX, false) && g.offslab_bytes == 64 &&
		      g.meta_bytes == sizeof(struct slab) + 64,
	      "OFFSLAB: 64 indices in a 64-byte block");
	for (size_t size = 8; size <= 16384; size += size < 512 ? 8 : 264) {
		for (unsigned int l = LF; l < USLAB_LAYOUT_NR; l++) {
			for (int bound = 0; bound < 2; bound++) {
				if (lay(&g, size, l, bound))
					continue;
				CHECK(g.layout == l, "size %zu: layout %u kept", size, l);
				check_invariants(&g, size, bound);
				laid++;
			}
		}
	}
	CHECK(laid > 800, "%lu geometries checked", laid);
}

/* AUTO's rules (doc/design.md, "Slab layouts"), and USLAB_LAYOUT. */
static void test_auto(void)
{
	static const struct {
		size_t size;
		bool bound;
		unsigned int want;
	} t[] = {
		{ 8, false, LF },   { 100, false, LF }, /* 4: the free pointer costs nothing */
		{ 128, false, LO }, { 192, false, LO }, /* 2: the array in an object */
		{ 256, false, LX }, { 4096, true, LX }, /* 1: OFFSLAB within 1% */
		{ 200, true, LN },			/* 3: the array in the leftover */
		{ 96, true, LX },			/* 5: least memory */
	};
	struct slab_geometry_req r = { .align = 8, .max_order = 3, .layout = LA };
	struct slab_geometry g;

	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		CHECK(!lay(&g, t[i].size, LA, t[i].bound) && g.layout == t[i].want,
		      "AUTO, %zu B%s: layout %u, want %u", t[i].size, t[i].bound ? ", bound" : "",
		      g.layout, t[i].want);
	}
	r.object_size = 256;
	r.slot = 256;
	r.internal = true;
	CHECK(!slab_geometry_init(&g, &r) && g.layout == LO,
	      "uslab's own caches: never OFFSLAB (layout %u)", g.layout);
	usl_opt.layout = LN;
	CHECK(!lay(&g, 100, LA, false) && g.layout == LN, "USLAB_LAYOUT=onslab stands for AUTO");
	CHECK(!slab_geometry_init(&g, &r) && g.layout == LO, "... but not in uslab's own caches");
	usl_opt.layout = LO;
	CHECK(!lay(&g, 200, LA, true) && g.layout == LN, "... nor where it cannot serve");
	usl_opt.layout = 0;
}

/* Colours: first-object offsets within the leftover, in steps of a line or the alignment. */
static void test_colours(void)
{
	struct slab_geometry g;

	usl_opt.colour = 1;
	CHECK(!lay(&g, 100, LF, false) && g.colour_off == CACHELINE &&
		      g.colours == g.leftover / CACHELINE + 1,
	      "100 B: %u colours of 64 bytes in %u leftover", g.colours, g.leftover);
	CHECK(!lay(&g, 3072, LF, false) && g.colour_off == 1024 && g.leftover == 2048 &&
		      g.colours == 3,
	      "3 KiB: steps of its natural alignment (%u), %u colours", g.colour_off, g.colours);
	CHECK(!lay(&g, 3000, LF, false) && g.leftover == 2768 && g.colours == SLAB_MAX_COLOURS,
	      "3000 B: 2768 leftover bytes, SLAB_MAX_COLOURS colours (%u)", g.colours);
	CHECK(!lay(&g, 65536, LF, false) && g.objects == 1 && g.colours == 1,
	      "one object per slab: no colours");
	usl_opt.colour = 0;
}

int main(void)
{
	options_init();
	CHECK(usl_opt.min_objects == 0 && usl_opt.max_order == 3 && usl_opt.min_order == 2 &&
		      !usl_opt.layout && !usl_opt.colour,
	      "default tunables (run without USLAB_* in the environment)");
	usl_opt.nr_cpus = 2; /* the expectations are SLUB's for 2 CPUs, on any machine */
	RUN(test_order_rule);
	RUN(test_free_pointer);
	RUN(test_layouts);
	RUN(test_auto);
	RUN(test_colours);
	return 0;
}
