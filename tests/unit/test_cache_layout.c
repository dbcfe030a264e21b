// SPDX-License-Identifier: MIT
/*
 * test_cache_layout.c - cache.c: SLUB's order rule, object layout, and the
 * node bookkeeping of refill and batched free.
 */
#include "internal.h"
#include "../test.h"

static unsigned int order_of(size_t size, unsigned int *objects)
{
	struct uslab_cache *c = uslab_cache_create("order", size, NULL, 0);
	unsigned int order = c->order;

	*objects = c->objects;
	uslab_cache_destroy(c);
	return order;
}

/*
 * min_objects = 4 * (fls(nr_cpus) + 1); the least waste within order 3.
 * The table is SLUB's (slub_min_order 0); uslab's default minimum order is
 * 2, checked after.
 */
static void test_order_rule(void)
{
	static const struct {
		size_t size;
		unsigned int order, objects;
	} want2[] = {
		/* expected with nr_cpus = 2 -> min_objects 12 */
		{ 8, 0, 512 },	 { 64, 0, 64 },	    { 100, 0, 39 },  { 256, 0, 16 },
		{ 512, 1, 16 },	 { 1024, 2, 16 },   { 2048, 3, 16 }, { 4096, 3, 8 },
		{ 65536, 4, 1 }, { 1 << 20, 8, 1 },
	};
	unsigned int objects, order, cpus = usl_opt.nr_cpus;

	/*
	 * The expectations are for 2 CPUs, on any machine: the rule reads
	 * usl_opt.nr_cpus when a cache is created; it is set meanwhile.
	 */
	CHECK(usl_opt.min_objects == 0 && usl_opt.max_order == 3 && usl_opt.min_order == 2,
	      "default tunables (run without USLAB_* in the environment)");
	printf("   (expectations for 2 CPUs; this machine has %u)\n", cpus);
	usl_opt.nr_cpus = 2;
	order = order_of(256, &objects);
	CHECK(order == 2 && objects == 64, "default: 256 B in 16 KiB slabs: order %u", order);
	order = order_of(2048, &objects);
	CHECK(order == 3 && objects == 16, "the min_objects rule still applies above it");
	usl_opt.min_order = 0;
	for (size_t i = 0; i < sizeof(want2) / sizeof(want2[0]); i++) {
		order = order_of(want2[i].size, &objects);
		CHECK(order == want2[i].order && objects == want2[i].objects,
		      "size %zu: order %u objects %u, want %u/%u", want2[i].size, order, objects,
		      want2[i].order, want2[i].objects);
	}
	/* 64 CPUs: min_objects 4 * (fls(64) + 1) = 32; 512 B needs order 2. */
	usl_opt.nr_cpus = 64;
	order = order_of(512, &objects);
	CHECK(order == 2 && objects == 32, "64 CPUs, 512 B: order %u objects %u, want 2/32", order,
	      objects);
	/* USLAB_MIN_OBJECTS overrides the CPU count: 12 is the 2-CPU value. */
	usl_opt.min_objects = 12;
	order = order_of(512, &objects);
	CHECK(order == 1 && objects == 16, "min_objects 12, 512 B: order %u objects %u, want 1/16",
	      order, objects);
	usl_opt.min_objects = 0;
	usl_opt.nr_cpus = cpus;
	usl_opt.min_order = 2;
}

static void ctor(void *p)
{
	(void)p;
}

static void test_layout(void)
{
	struct uslab_cache_args f = { .layout = USLAB_LAYOUT_FREEPTR };
	struct uslab_cache_args a = { .ctor = ctor, .layout = USLAB_LAYOUT_FREEPTR };
	struct uslab_cache *c = uslab_cache_create("layout", 100, &f, 0);
	struct uslab_cache *k = uslab_cache_create("layout-ctor", 100, &a, 0);

	CHECK(c->size == 104 && c->fp_offset == 48, "stride 104, free pointer at 48");
	CHECK(k->size == 112 && k->fp_offset == 104, "ctor: free pointer after the object");
	CHECK(c->recip == UINT64_MAX / 104 + 1, "reciprocal");
	CHECK(c->secret != k->secret, "per-cache secrets");
	uslab_cache_destroy(c);
	uslab_cache_destroy(k);
}

#define LF USLAB_LAYOUT_FREEPTR
#define LO USLAB_LAYOUT_OBJFREELIST
#define LN USLAB_LAYOUT_ONSLAB
#define LX USLAB_LAYOUT_OFFSLAB

/*
 * AUTO's rules (doc/design.md, "Slab layouts") on a table of sizes,
 * alignments and flags, with 2 CPUs and the default orders; and which
 * explicit layouts can serve each (EINVAL otherwise).
 */
static void test_layout_rules(void)
{
	static const struct {
		size_t size, align;
		unsigned int flags;
		bool ctor;
		unsigned int want;  /* AUTO's choice */
		unsigned int valid; /* bit per layout that can serve */
	} t[] = {
		/* rule 4: small objects keep their free pointer (the array would cost memory) */
		{ 8, 0, 0, false, LF, 1 << LF | 1 << LN | 1 << LX },
		{ 64, 0, 0, false, LF, 1 << LF | 1 << LN | 1 << LX },
		{ 100, 0, 0, false, LF, 1 << LF | 1 << LN | 1 << LX },
		{ 100, 0, USLAB_HWCACHE_ALIGN, false, LF, 1 << LF | 1 << LN | 1 << LX },
		/* rule 2: the array fits in one object, OFFSLAB's would cost over 1% */
		{ 128, 0, 0, false, LO, 1 << LF | 1 << LO | 1 << LN | 1 << LX },
		{ 192, 0, 0, false, LO, 1 << LF | 1 << LO | 1 << LN | 1 << LX },
		/* rule 1: OFFSLAB within 1% of the slab (64 + 64 bytes of 16 KiB) */
		{ 256, 0, 0, false, LX, 1 << LF | 1 << LO | 1 << LN | 1 << LX },
		{ 1000, 0, 0, false, LX, 1 << LF | 1 << LO | 1 << LN | 1 << LX },
		{ 4096, 0, 0, false, LX, 1 << LF | 1 << LO | 1 << LN | 1 << LX },
		{ 100, 4096, 0, false, LX, 1 << LF | 1 << LO | 1 << LN | 1 << LX },
		{ 1000, 0, 0, true, LX, 1 << LF | 1 << LN | 1 << LX },
		/* the seed's off-slab case: 8 x 4 KiB with a constructor, no leftover */
		{ 4096, 0, 0, true, LX, 1 << LF | 1 << LN | 1 << LX },
		{ 256, 0, 0, true, LX, 1 << LF | 1 << LN | 1 << LX },
		{ 256, 0, USLAB_TYPESAFE_BY_RCU, false, LX, 1 << LF | 1 << LN | 1 << LX },
		/* rule 3: a constructor, the array fits in the leftover, OFFSLAB over 1% */
		{ 200, 0, 0, true, LN, 1 << LF | 1 << LN | 1 << LX },
		/* rule 5: a constructor, least memory */
		{ 96, 0, 0, true, LX, 1 << LF | 1 << LN | 1 << LX },
	};
	unsigned int cpus = usl_opt.nr_cpus;

	usl_opt.nr_cpus = 2;
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		struct uslab_cache_stats st[USLAB_LAYOUT_NR];
		unsigned int valid = 0;

		for (unsigned int l = 0; l < USLAB_LAYOUT_NR; l++) {
			struct uslab_cache_args a = { .align = t[i].align,
						      .ctor = t[i].ctor ? ctor : NULL,
						      .layout = l };
			struct uslab_cache *c =
				uslab_cache_create("rules", t[i].size, &a, t[i].flags);

			if (!c) {
				CHECK(errno == EINVAL && l != USLAB_LAYOUT_AUTO, "only EINVAL");
				continue;
			}
			valid |= 1u << l;
			uslab_cache_stats(c, &st[l]);
			CHECK(st[l].layout != USLAB_LAYOUT_AUTO && (!l || st[l].layout == l),
			      "layout %u in effect", l);
			CHECK(st[l].meta_bytes >= sizeof(struct slab), "meta_bytes");
			uslab_cache_destroy(c);
		}
		CHECK(valid == (t[i].valid | 1),
		      "size %zu align %zu flags %#x ctor %d: valid %#x, want %#x", t[i].size,
		      t[i].align, t[i].flags, t[i].ctor, valid, t[i].valid | 1);
		CHECK(st[0].layout == t[i].want,
		      "size %zu align %zu flags %#x ctor %d: AUTO %s, want %s", t[i].size,
		      t[i].align, t[i].flags, t[i].ctor, uslab_layout_name(st[0].layout),
		      uslab_layout_name(t[i].want));
		/* Rules 1 and 5 pick the least slab memory per object among those valid. */
		if ((t[i].ctor || t[i].flags & USLAB_TYPESAFE_BY_RCU) && t[i].want != LN) {
			double best = (double)(st[0].pagesperslab * 4096ul + st[0].meta_bytes) /
				      st[0].objperslab;

			for (unsigned int l = 1; l < USLAB_LAYOUT_NR; l++) {
				if (valid & (1u << l))
					CHECK(best <= (double)(st[l].pagesperslab * 4096ul +
							       st[l].meta_bytes) /
							      st[l].objperslab,
					      "size %zu: AUTO is the least memory", t[i].size);
			}
		}
	}
	/* Index layouts name at most 65536 objects: 8 B in 2 MiB slabs cannot. */
	usl_opt.min_order = usl_opt.max_order = 9;
	for (unsigned int l = LO; l <= LX; l++) {
		struct uslab_cache_args a = { .layout = l };

		errno = 0;
		CHECK(!uslab_cache_create("many", 8, &a, 0) && errno == EINVAL,
		      "%s with 262144 objects: EINVAL", uslab_layout_name(l));
	}
	struct uslab_cache *c = uslab_cache_create("many", 8, NULL, 0);

	CHECK(c && c->layout == LF && c->objects == 262144, "AUTO: freeptr");
	uslab_cache_destroy(c);
	/* OFFSLAB arrays of more than 4 KiB: 16 B objects in 64 KiB slabs (8 KiB). */
	usl_opt.min_order = usl_opt.max_order = 4;
	struct uslab_cache_args off = { .layout = LX };

	CHECK(!uslab_cache_create("big-array", 16, &off, 0) && errno == EINVAL,
	      "offslab array of 8 KiB: EINVAL");
	usl_opt.min_order = 2;
	usl_opt.max_order = 3;
	/* An unknown layout. */
	struct uslab_cache_args bad = { .layout = USLAB_LAYOUT_NR };

	CHECK(!uslab_cache_create("bad", 64, &bad, 0) && errno == EINVAL, "unknown layout");
	/* USLAB_LAYOUT stands for AUTO where it can serve, and only there. */
	usl_opt.layout = LX;
	c = uslab_cache_create("env", 256, NULL, 0);
	CHECK(c && c->layout == LX, "USLAB_LAYOUT=offslab");
	uslab_cache_destroy(c);
	usl_opt.layout = LO;
	struct uslab_cache_args k = { .ctor = ctor };

	c = uslab_cache_create("env", 4096, &k, 0);
	CHECK(c && c->layout == LX, "USLAB_LAYOUT=objfreelist cannot serve a ctor: AUTO's choice");
	uslab_cache_destroy(c);
	struct uslab_cache_args fp = { .layout = LF };

	c = uslab_cache_create("env", 256, &fp, 0);
	CHECK(c && c->layout == LF, "an explicit layout wins over USLAB_LAYOUT");
	uslab_cache_destroy(c);
	usl_opt.layout = 0;
	usl_opt.nr_cpus = cpus;
}

/* Colours: offsets in cache lines (or the objects' natural alignment) within the leftover. */
static void test_colour(void)
{
	struct uslab_cache *off = uslab_cache_create("colour-off", 1000, NULL, 0);

	CHECK(usl_opt.colour == 0 && off->colours == 1, "off by default (USLAB_COLOUR=0)");
	uslab_cache_destroy(off);
	usl_opt.colour = 1;

	/* 1000 B in 16 KiB: 16 objects, 384 bytes left: 7 colours of 64 B. */
	struct uslab_cache *c = uslab_cache_create("colour", 1000, NULL, 0);
	/* kmalloc-like 1024 B: 16 objects, no leftover: 1 colour. */
	struct uslab_cache *p2 = uslab_cache_create("colour-1k", 1024, NULL, 0);
	/* 3072 B: 10 objects in 32 KiB, 2048 left; natural alignment 1024: 3 colours. */
	struct uslab_cache *k3 = uslab_cache_create("colour-3k", 3072, NULL, 0);
	void *objs[64];
	unsigned int seen = 0;

	CHECK(c->colours == 7 && c->colour_off == 64, "1000 B: %u colours of %u", c->colours,
	      c->colour_off);
	CHECK(p2->colours == 1, "1024 B: no colour");
	CHECK(k3->colours == 3 && k3->colour_off == 1024, "3072 B: %u colours of %u", k3->colours,
	      k3->colour_off);
	/* Slabs made in turn take the colours in turn; objects stay inside. */
	CHECK(cache_refill(c, objs, 64) == 64, "refill four slabs");
	for (int i = 0; i < 4; i++) {
		struct slab *s = os_slab_lookup(objs[16 * i]);

		seen |= 1u << s->colour;
		CHECK((char *)objs[16 * i] == s->base + s->colour * 64u &&
			      (char *)objs[16 * i + 15] + 1000 <= s->base + (PAGE_SIZE << c->order),
		      "colour %u: first object offset, last inside", s->colour);
	}
	for (int j = 0; j < 64; j++)
		asan_poison(objs[j], c->size);
	cache_free_objects(c, objs, 64, 3);
	CHECK(__builtin_popcount(seen) >= 2, "several colours used (%#x)", seen);
	uslab_cache_destroy(c);
	uslab_cache_destroy(p2);
	uslab_cache_destroy(k3);
	usl_opt.colour = 0;
}

/*
 * uslab_cache_validate: 0 on a sound cache of every layout; a corrupted
 * free pointer, a corrupted index array and an object both free in its
 * slab and in a sheaf are each found, reported and counted, never followed
 * out of the slab.
 */
static void test_validate(void)
{
	for (unsigned int l = USLAB_LAYOUT_FREEPTR; l < USLAB_LAYOUT_NR; l++) {
		struct uslab_cache_args a = { .layout = l, .min_partial = 100 };
		struct uslab_cache *c = uslab_cache_create("validate", 256, &a, 0);
		enum { N = 2000 };
		void **p = calloc(N, sizeof(void *));

		for (int i = 0; i < N; i++)
			p[i] = uslab_cache_alloc(c);
		for (int i = 0; i < N; i += 3)
			uslab_cache_free(c, p[(i * 7) % N]), p[(i * 7) % N] = NULL;
		CHECK(uslab_cache_validate(c) == 0, "%s: sound with objects in sheaves",
		      uslab_layout_name(l));
		uslab_cache_shrink(c); /* this thread's sheaves and the barn to the slabs */
		CHECK(uslab_cache_validate(c) == 0, "%s: sound after shrink", uslab_layout_name(l));
		for (int i = 0; i < N; i++)
			uslab_cache_free(c, p[i]);
		free(p);
		uslab_cache_destroy(c);
	}
	CHECK(uslab_cache_validate(NULL) == -EINVAL, "NULL: -EINVAL");

	/* A free object's free pointer overwritten (FREEPTR): reported, not followed. */
	struct uslab_cache_args fa = { .layout = USLAB_LAYOUT_FREEPTR,
				       .sheaf_capacity = 1,
				       .min_partial = 100 };
	struct uslab_cache *c = uslab_cache_create("validate-fp", 256, &fa, 0);
	char *x = uslab_cache_alloc(c), *y = uslab_cache_alloc(c);

	uslab_cache_alloc(c); /* the slab stays partial */
	uslab_cache_free(c, x);
	uslab_cache_free(c, y);
	asan_unpoison(y, c->size);
	memset(y, 0x41, c->size); /* a write after free over its free pointer */
	CHECK(uslab_cache_validate(c) >= 1, "corrupted free pointer found");

	/* An index array overwritten (OBJFREELIST: the holder is a free object). */
	struct uslab_cache_args oa = { .layout = USLAB_LAYOUT_OBJFREELIST,
				       .sheaf_capacity = 1,
				       .min_partial = 100 };
	struct uslab_cache *o = uslab_cache_create("validate-idx", 256, &oa, 0);
	char *h = uslab_cache_alloc(o);

	uslab_cache_alloc(o);
	uslab_cache_free(o, h); /* h holds the array now */
	asan_unpoison(h, o->size);
	memset(h, 0xff, o->size);
	CHECK(uslab_cache_validate(o) >= 1, "corrupted index array found");

	/* An object free in its slab and in a sheaf: a double free not yet flushed. */
	struct uslab_cache *d = uslab_cache_create("validate-df", 256, NULL, 0);
	void *q = uslab_cache_alloc(d), *keep = uslab_cache_alloc(d);

	asan_poison(q, d->size);
	cache_free_objects(d, &(void *){ q }, 1, 0); /* to the slab */
	uslab_cache_free(d, q);			     /* and to the sheaf */
	CHECK(uslab_cache_validate(d) == 1, "double free across sheaf and slab found");
	(void)keep;
}

/* Refill takes whole freelists and carves; free_objects restores counts. */
static void test_refill_and_free(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 1, .min_partial = 2 };
	struct uslab_cache *c = uslab_cache_create("node", 256, &a, 0);
	struct node *n = &c->node;
	enum { N = 1000 };
	void **p = calloc(N, sizeof(void *));
	unsigned int got, per = c->objects;

	got = cache_refill(c, p, N);
	CHECK(got == N, "refill %u", got);
	CHECK(n->nr_slabs == (N + per - 1) / per, "slabs %lu", n->nr_slabs);
	CHECK(n->nr_objects - n->nr_free == N, "active %lu", n->nr_objects - n->nr_free);
	CHECK(n->nr_partial <= 1, "only the last slab is partial");
	/* Free every other object: every slab becomes partial, none empty. */
	for (int i = 0; i < N; i += 2) {
		asan_poison(p[i], c->size);
		cache_free_objects(c, &p[i], 1, 3);
		CHECK(p[i] == NULL, "entry cleared");
	}
	CHECK(n->nr_objects - n->nr_free == N / 2, "half active");
	CHECK(n->nr_partial == n->nr_slabs, "all slabs partial");
	/* Take them back: whole freelists, no new slab. */
	unsigned long slabs = n->nr_slabs;

	for (int i = 0; i < N; i += 2)
		CHECK(cache_refill(c, &p[i], 1) == 1, "refill one");
	CHECK(n->nr_slabs == slabs && n->nr_objects - n->nr_free == N, "no new slab");
	for (int i = 0; i < N; i++)
		asan_poison(p[i], c->size);
	cache_free_objects(c, p, N, 3);
	CHECK(n->nr_objects == n->nr_free, "all free");
	CHECK(n->nr_slabs == 2 && n->nr_empty == 2, "min_partial 2 kept: %lu slabs", n->nr_slabs);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	free(p);
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(test_order_rule);
	RUN(test_layout);
	RUN(test_layout_rules);
	RUN(test_colour);
	RUN(test_validate);
	RUN(test_refill_and_free);
	return 0;
}
