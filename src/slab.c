// SPDX-License-Identifier: MIT
/*
 * slab.c - one slab: 2^order pages holding objects of one cache.
 *
 * A slab's free objects are either on its freelist (linked through a free
 * pointer stored in each free object) or never used yet (the index range
 * [bump, objects): carved by address arithmetic, so a new slab's pages
 * are touched only as objects are handed out). The descriptor lives in
 * the arena's table (os.c), never inside the slab.
 *
 * Free pointer: stored at cache->fp_offset, in the middle of the object
 * (like SLUB, so a small overflow from the previous object does not hit
 * it), or just past the object for caches with a constructor, whose
 * objects the allocator must never write. The stored value is
 *
 *	next ^ cache->secret ^ bswap64(address of the stored value)
 *
 * (SLAB_FREELIST_HARDENED): a leaked stored value tells nothing about the
 * heap and an overwritten one decodes to garbage that fails the checks.
 *
 * Locking: none here. Callers hold the cache's node lock for a slab on a
 * list (PARTIAL or FULL) and nothing for a NEW slab or for objects they
 * own (detached freelists are built in objects the caller owns).
 */
#include <string.h>

#include "internal.h"

static inline uintptr_t fp_key(const struct uslab_cache *c, const void *slot)
{
	return c->secret ^ __builtin_bswap64((uintptr_t)slot);
}

NO_SANITIZE_ADDRESS void *fp_get(const struct uslab_cache *c, const void *obj)
{
	void *const *slot = (void *const *)((const char *)obj + c->fp_offset);

	return (void *)((uintptr_t)*slot ^ fp_key(c, slot));
}

NO_SANITIZE_ADDRESS void fp_set(const struct uslab_cache *c, void *obj, void *next)
{
	void **slot = (void **)((char *)obj + c->fp_offset);

	*slot = (void *)((uintptr_t)next ^ fp_key(c, slot));
}

/* Make a slab fresh from os.c (NEW, no owner) belong to @c; construct its objects. */
void slab_setup(struct uslab_cache *c, struct slab *s)
{
	USLAB_ASSERT(s->state == SLAB_NEW && !s->cache && s->order == c->order);
	s->freelist = NULL;
	s->nfree = 0;
	s->bump = 0;
	s->objects = c->objects;
	if (c->ctor) {
		for (unsigned int i = 0; i < c->objects; i++)
			c->ctor(s->base + (size_t)i * c->size);
	}
	asan_poison(s->base, PAGE_SIZE << c->order);
	s->pcs_id = c->id > 0 ? (uint16_t)c->id : 0;
	__atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
}

/* Hand out up to @max never-used objects of @s into @dst. */
unsigned int slab_carve(struct uslab_cache *c, struct slab *s, void **dst, unsigned int max)
{
	unsigned int k = s->objects - s->bump;
	char *obj = s->base + (size_t)s->bump * c->size;

	if (k > max)
		k = max;
	USLAB_ASSERT(s->bump <= s->objects);
	for (unsigned int i = 0; i < k; i++, obj += c->size)
		dst[i] = obj;
	s->bump += k;
	return k;
}

/*
 * slab_walk - follow @cnt objects of a freelist of @s from @head into @dst.
 * Return: the rest of the chain (what the last object taken pointed to).
 * A pointer leading out of the slab means the list was corrupted (a write
 * after free, or a double free that slipped through): that is a BUG.
 */
void *slab_walk(struct uslab_cache *c, struct slab *s, void *head, unsigned int cnt, void **dst)
{
	uintptr_t base = (uintptr_t)s->base;
	size_t span = PAGE_SIZE << c->order;
	void *obj = head;

	for (unsigned int i = 0; i < cnt; i++) {
		if (unlikely((uintptr_t)obj - base >= span))
			usl_bug(c, obj, "freelist corrupted in slab %p (object %u of %u)",
				(void *)s->base, i, cnt);
		dst[i] = obj;
		obj = fp_get(c, obj);
	}
	return obj;
}

/* @off / @c->size by a multiplication; may be one too large (recip rounds up). */
static inline uint64_t off_index(const struct uslab_cache *c, uint64_t off)
{
	return (uint64_t)(((unsigned __int128)off * c->recip) >> 64);
}

/* Index of @obj in its slab, or UINT32_MAX when it is not on a boundary. */
static inline unsigned int obj_index(const struct uslab_cache *c, const struct slab *s,
				     const void *obj)
{
	uint64_t off = (uintptr_t)obj - (uintptr_t)s->base;
	uint64_t idx = off_index(c, off);

	if (unlikely(idx * c->size != off || idx >= s->objects))
		return UINT32_MAX;
	return (unsigned int)idx;
}

/* The start of the object slot of live slab @s that contains address @p. */
void *slab_object_at(const struct slab *s, const void *p)
{
	const struct uslab_cache *c = s->cache;
	uint64_t off = (uintptr_t)p - (uintptr_t)s->base;
	uint64_t idx;

	if (s->objects == 1)
		return s->base; /* a large object spans its slab */
	idx = off_index(c, off);
	if (idx * c->size > off)
		idx--;
	return s->base + idx * c->size;
}

/*
 * slab_of_object - the slab of an object being freed, after the tier-1
 * sanity checks: it is in a live slab, of cache @c (if @c is given), on an
 * object boundary. Any failure is a bug in the caller and stops the program.
 */
struct slab *slab_of_object(struct uslab_cache *c, const void *obj)
{
	struct slab *s = os_slab_lookup(obj);
	struct uslab_cache *owner;

	if (unlikely(!s))
		usl_bug(c, obj, "free of a pointer uslab did not hand out");
	owner = s->cache;
	if (unlikely(c && owner != c))
		usl_bug(c, obj, "object of cache %s freed to this cache", owner->name);
	if (unlikely(obj_index(owner, s, obj) == UINT32_MAX))
		usl_bug(owner, obj, "free of a pointer inside an object");
	return s;
}

/*
 * build_detached_freelist - link objects of one slab found in p[start..n)
 * into a freelist that only the caller can see (seed: "slub: build
 * detached freelist with look-ahead").
 * @c:         the cache, or NULL to take each object's own cache.
 * @lookahead: the scan stops at the lookahead-th object of another slab
 *             (0 and 1: at the first, the simple version of the seed's
 *             patch 2; the seed settled on 3).
 * @df:        filled in; df->slab is NULL when p[start..n) held only NULLs.
 *
 * Every object taken is set to NULL in @p. Writing into the objects needs
 * no synchronisation: the caller owns them until the list is handed over.
 * Return: the index where the next call should start.
 */
size_t build_detached_freelist(struct uslab_cache *c, size_t n, void **p, size_t start,
			       unsigned int lookahead, struct detached_freelist *df)
{
	unsigned int missed = 0;
	uintptr_t mask, base;
	void *obj = NULL;

	df->slab = NULL;
	while (start < n) {
		obj = p[start];
		p[start++] = NULL;
		/* NULL and USLAB_ZERO_SIZE_PTR (a 0-byte kmalloc) free nothing. */
		if (!USLAB_ZERO_OR_NULL_PTR(obj)) {
			df->slab = slab_of_object(c, obj);
			break;
		}
	}
	if (!df->slab)
		return start;
	c = df->slab->cache;
	fp_set(c, obj, NULL);
	df->head = df->tail = obj;
	df->cnt = 1;

	base = (uintptr_t)df->slab->base;
	mask = ~((PAGE_SIZE << c->order) - 1);
	if (lookahead == 0)
		lookahead = 1;
	for (size_t i = start; i < n; i++) {
		obj = p[i];
		if (USLAB_ZERO_OR_NULL_PTR(obj)) {
			p[i] = NULL;
			if (!missed)
				start++;
			continue;
		}
		/* Slabs are naturally aligned: same slab <=> same masked address. */
		if (((uintptr_t)obj & mask) == base) {
			if (unlikely(obj == df->head))
				usl_bug(c, obj, "double free");
			if (unlikely(obj_index(c, df->slab, obj) == UINT32_MAX))
				usl_bug(c, obj, "free of a pointer inside an object");
			fp_set(c, obj, df->head);
			df->head = obj;
			df->cnt++;
			p[i] = NULL;
			if (!missed)
				start++;
		} else if (++missed >= lookahead) {
			break;
		}
	}
	return start;
}
