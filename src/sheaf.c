// SPDX-License-Identifier: MIT
/*
 * sheaf.c - the sheaf: an array of free object pointers of one cache, with
 * a header (Linux 6.18 sheaves; Bonwick's magazines). Sheaves come in
 * SHEAF_CLASSES capacities, each from one of uslab's own metadata caches
 * (the largest, 1022 objects, takes 8256 bytes: header and slots rounded up
 * to whole cache lines). A cache's base capacity
 * is chosen at creation (sheaf_capacity_for) and is c->sheaf_capacity;
 * unless pinned, the capacity of the sheaves it hands out grows from there
 * up to sheaf_capacity_max() while its threads trade with the barn often,
 * and shrinks back when they stop (barn.c, the adaptive capacity), so
 * sheaves of several capacities of one cache coexist.
 * A sheaf is owned by one thread (its pcs, thread_sheaves.c) or by a barn (barn.c);
 * this file allocates and frees them, returns their objects to slabs
 * (sheaf_flush) and prefetches the objects of one taken from the barn.
 *
 * Invariant (sheaf_ok): 0 <= size <= capacity, and capacity is one of
 * sheaf_caps, at least the cache's base capacity and at most its maximum
 * (checked in USLAB_CHECKS builds where sheaves are allocated, flushed and
 * freed, traded and installed).
 */
#include <stdio.h>
#include <string.h>

#include "perthread.h"

const unsigned int sheaf_caps[SHEAF_CLASSES] = { 2, 6, 14, 30, 62, 126, 254, 510, 1022 };
struct uslab_cache *sheaf_caches[SHEAF_CLASSES];
static struct uslab_cache sheaf_cache_store[SHEAF_CLASSES];

int sheaf_bootstrap(void)
{
	char name[32];

	for (int i = 0; i < SHEAF_CLASSES; i++) {
		/*
		 * Whole cache lines: a per-CPU sheaf's header (its size) is
		 * written on every pop and push (cpu_sheaves.c), and sheaves packed at
		 * 8 bytes shared a line with the neighbour's last slots, another
		 * CPU's (measured: doc/design.md, "Decisions measured in code").
		 */
		size_t size =
			ALIGN_UP(sizeof(struct sheaf) + sheaf_caps[i] * sizeof(void *), CACHELINE);

		snprintf(name, sizeof(name), "uslab_sheaf-%zu", size);
		if (cache_init_internal(&sheaf_cache_store[i], name, size))
			return -EINVAL;
		sheaf_caches[i] = &sheaf_cache_store[i];
	}
	return 0;
}

/*
 * sheaf_capacity_for - objects per sheaf for objects of @size bytes.
 * @requested: uslab_cache_args.sheaf_capacity (0: choose, 1: no sheaves).
 * Return: a capacity class, or 0 for a cache without sheaves.
 */
unsigned int sheaf_capacity_for(unsigned int size, unsigned int requested)
{
	unsigned int want = requested ? requested : usl_opt.sheaf_capacity;

	if (want == 1)
		return 0;
	if (!want) {
		want = usl_opt.sheaf_bytes / size;
		if (want > 126)
			want = 126;
	}
	for (int i = SHEAF_CLASSES - 1; i > 0; i--)
		if (sheaf_caps[i] <= want)
			return sheaf_caps[i];
	return sheaf_caps[0];
}

/*
 * sheaf_capacity_max - the largest capacity a cache of objects of @size
 * bytes grows its sheaves to, from @base = sheaf_capacity_for(): @base
 * itself when the capacity is pinned (@requested, USLAB_SHEAF_CAPACITY),
 * else the largest class within USLAB_SHEAF_MAX objects and
 * USLAB_SHEAF_MAX_BYTES bytes, never below @base.
 */
unsigned int sheaf_capacity_max(unsigned int size, unsigned int requested, unsigned int base)
{
	unsigned int want;

	if (!base || requested || usl_opt.sheaf_capacity)
		return base;
	want = usl_opt.sheaf_max_bytes / (size ? size : 1);
	if (want > usl_opt.sheaf_max)
		want = usl_opt.sheaf_max;
	for (int i = SHEAF_CLASSES - 1; i > 0; i--)
		if (sheaf_caps[i] <= want)
			return sheaf_caps[i] > base ? sheaf_caps[i] : base;
	return base;
}

/* The next class above (@up) or below @cap. */
unsigned int sheaf_class_step(unsigned int cap, bool up)
{
	for (int i = 0; i < SHEAF_CLASSES; i++)
		if (sheaf_caps[i] == cap)
			return up ? sheaf_caps[i + 1 < SHEAF_CLASSES ? i + 1 : i] :
				    sheaf_caps[i ? i - 1 : 0];
	return cap;
}

/* The invariant of the file comment, for a sheaf of @c. */
bool sheaf_ok(const struct uslab_cache *c, const struct sheaf *sh)
{
	unsigned int max = READ_ONCE(c->barn.cap_max);
	bool class = false;

	for (int i = 0; i < SHEAF_CLASSES; i++)
		class |= sheaf_caps[i] == sh->capacity;
	return class && sh->size <= sh->capacity && sh->capacity >= c->sheaf_capacity &&
	       sh->capacity <= (max > c->sheaf_capacity ? max : c->sheaf_capacity);
}

static struct uslab_cache *sheaf_cache_of(unsigned int capacity)
{
	USLAB_ASSERT(capacity);
	for (int i = 0; i < SHEAF_CLASSES; i++)
		if (sheaf_caps[i] == capacity)
			return sheaf_caches[i];
	usl_bug(NULL, NULL, "no sheaf class of capacity %u", capacity);
}

/* The capacity @c hands out now on node @nid: its barn's adaptive one, else the base. */
unsigned int sheaf_capacity_now(struct uslab_cache *c, unsigned int nid)
{
	unsigned int cap = READ_ONCE(cache_barn(c, nid)->capacity);

	return cap ? cap : c->sheaf_capacity;
}

/* An empty sheaf of the capacity @c hands out now on node @nid. NULL if no memory. */
struct sheaf *sheaf_alloc(struct uslab_cache *c, unsigned int nid)
{
	unsigned int cap = sheaf_capacity_now(c, nid);
	struct sheaf *sh = cache_alloc_direct(sheaf_cache_of(cap));

	if (sh) {
		sh->next = NULL;
		sh->filler = NULL;
		sh->size = 0;
		sh->capacity = cap;
		USLAB_ASSERT(sheaf_ok(c, sh));
	}
	return sh;
}

void sheaf_free(struct uslab_cache *c, struct sheaf *sh)
{
	USLAB_ASSERT(sheaf_ok(c, sh));
	cache_free_direct(sheaf_cache_of(sh->capacity), sh);
}

/* Return every object of @sh to the slabs of @c. */
void sheaf_flush(struct uslab_cache *c, struct sheaf *sh)
{
	USLAB_ASSERT(sheaf_ok(c, sh));
	PROBE(sheaf_flush, c->name, sh->size, sh->capacity);
	if (unlikely(c->debug))
		cache_free_checked(c, sh->objs, sh->size); /* free already (thread_sheaves.c) */
	else
		cache_free_objects(c, sh->objs, sh->size, usl_opt.lookahead);
	sh->size = 0;
}

/*
 * A full sheaf from the barn was filled by another thread, which touched
 * its objects last: ask for their first cache lines now, for writing, so
 * the pops that follow find them on the way instead of each waiting for a
 * transfer from the other core.
 */
void sheaf_prefetch(struct sheaf *sh)
{
	/*
	 * In pop order (the top first), all of them by default: prefetching
	 * only the first 8..64, or bottom-up, left producer -> consumer at a
	 * third of the throughput or less (doc/tuning.md, USLAB_PREFETCH).
	 */
	uint32_t n = sh->size < usl_opt.prefetch ? sh->size : usl_opt.prefetch;

	USLAB_ASSERT(sh->size <= sh->capacity);

	for (uint32_t i = sh->size; i-- > sh->size - n;)
		__builtin_prefetch(sh->objs[i], 1, 3);
}
