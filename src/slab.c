// SPDX-License-Identifier: MIT
/*
 * slab.c - one slab: 2^order pages holding objects of one cache; its
 * objects carved, its freelist pushed, popped, walked and validated.
 *
 * A slab's free objects are either on its freelist or never used yet (the
 * index range [bump, objects): carved by address arithmetic, so a new
 * slab's pages are touched only as objects are handed out). The
 * descriptor lives in the arena's table (os.c), never inside the slab.
 * The first object sits at base + colour * cache->colour_off (+ the left
 * red zone in a debug cache, slab_debug.c): slab colouring spreads the
 * slabs' first objects over cache sets.
 *
 * The freelist takes one of four forms, the cache's layout (enum
 * uslab_layout, chosen in cache.c):
 *
 *   FREEPTR      a chain through a free pointer stored in each free
 *                object (SLUB). s->freelist is the first free object.
 *   OBJFREELIST  an array of object indices (a stack, 1 or 2 bytes per
 *   ONSLAB       index) at s->freelist: inside the first object freed
 *   OFFSLAB      since the stack was last empty (OBJFREELIST, after its
 *                first word in a cache that may have the key; that object
 *                is at the stack's bottom, so it is handed out last, when
 *                the array is no longer needed), at the slab's end
 *                (ONSLAB), or in a block of another cache (OFFSLAB). No
 *                other object byte is read or written.
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
 * An index read from an array is checked against the slab's object count.
 *
 * Locking: none here. Callers hold the cache's node lock for a slab on a
 * list (PARTIAL or FULL) and nothing for a NEW slab or for objects they
 * own (detached freelists are built in objects the caller owns).
 */
#include <string.h>

#include "cache.h" /* the cache descriptor they read: an exception in base.h */

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

/* The first object of @s (in a debug cache: after its left red zone). */
void *slab_first_object(const struct uslab_cache *c, const struct slab *s)
{
	return s->base + (size_t)s->colour * c->colour_off + c->obj_off;
}

/*
 * Make a slab fresh from os.c (NEW, no owner) belong to @c; construct its
 * objects. @offslab: the OFFSLAB index array the caller allocated for it.
 */
void slab_setup(struct uslab_cache *c, struct slab *s, void *offslab)
{
	char *first;

	USLAB_ASSERT(s->state == SLAB_NEW && !s->cache && s->order == c->order);
	USLAB_ASSERT(!offslab == (c->layout != USLAB_LAYOUT_OFFSLAB));
	s->colour = 0;
	if (c->colours > 1)
		s->colour = __atomic_fetch_add(&c->colour_next, 1, __ATOMIC_RELAXED) % c->colours;
	first = slab_first_object(c, s);
	s->freelist = c->layout == USLAB_LAYOUT_ONSLAB ? s->base + c->meta_off : offslab;
	s->nfree = 0;
	s->bump = 0;
	s->objects = c->objects;
	if (c->ctor) {
		for (unsigned int i = 0; i < c->objects; i++)
			c->ctor(first + (size_t)i * c->size);
	}
	if (c->debug) {
		asan_unpoison(s->base, PAGE_SIZE << c->order); /* the debug tier checks instead */
		slab_debug_setup_slab(c, s);
	} else {
		asan_poison(s->base, PAGE_SIZE << c->order);
	}
	s->first_neg = -(uintptr_t)first; /* the interior-pointer check (<uslab/inline/priv.h>) */
	/* (A debug cache's objects, and with NUMA on every cache's, go to the library.) */
	s->pcs_id = c->id > 0 && !c->debug && !numa_on() ? (uint16_t)c->id : 0;
	__atomic_store_n(&s->cache, c, __ATOMIC_RELEASE);
	os_slab_publish(s); /* its other pages' descriptors name it too */
}

/* Hand out up to @max never-used objects of @s into @dst. */
unsigned int slab_carve(struct uslab_cache *c, struct slab *s, void **dst, unsigned int max)
{
	unsigned int k = s->objects - s->bump;
	char *obj = (char *)slab_first_object(c, s) + (size_t)s->bump * c->size;

	if (k > max)
		k = max;
	USLAB_ASSERT(s->bump <= s->objects);
	for (unsigned int i = 0; i < k; i++, obj += c->size)
		dst[i] = obj;
	s->bump += k;
	return k;
}

/*
 * slab_push_indices - put the objects of @df (a batch of indices of @s)
 * on @s's index stack. Under the node lock; the caller has checked that
 * they are no more than the objects in use, so the stack has room. The
 * naive double-free check: the first pushed is not the one on top.
 */
NO_SANITIZE_ADDRESS void slab_push_indices(struct uslab_cache *c, struct slab *s,
					   const struct detached_freelist *df)
{
	unsigned int n = s->nfree, cnt = df->cnt;

	USLAB_ASSERT(c->layout != USLAB_LAYOUT_FREEPTR && n + cnt <= s->bump);
	if (!n && c->layout == USLAB_LAYOUT_OBJFREELIST) {
		/* The first object freed holds the array, at its bottom (after its key's word). */
		s->freelist = (char *)slab_first_object(c, s) + (size_t)df->idx[0] * c->size +
			      c->meta_off;
	}
	if (c->idx_size == 1) {
		uint8_t *arr = s->freelist;

		if (unlikely(n && arr[n - 1] == df->idx[0]))
			usl_bug(c, df->tail, "double free");
		for (unsigned int i = 0; i < cnt; i++)
			arr[n + i] = (uint8_t)df->idx[i];
	} else {
		uint16_t *arr = s->freelist;

		if (unlikely(n && arr[n - 1] == df->idx[0]))
			usl_bug(c, df->tail, "double free");
		/* (A loop, not memcpy: ASan intercepts memcpy into the poisoned array.) */
		for (unsigned int i = 0; i < cnt; i++)
			arr[n + i] = df->idx[i];
	}
	s->nfree = n + cnt;
}

/* Start loading where slab_push_indices() will write (under the node lock). */
void slab_prefetch_push(const struct uslab_cache *c, const struct slab *s)
{
	if (c->layout == USLAB_LAYOUT_FREEPTR)
		return; /* the build wrote the objects; the slab's head is not read */
	if (s->freelist)
		__builtin_prefetch((char *)s->freelist + s->nfree * c->idx_size, 1);
}

/* The @i-th entry of @s's index stack (validate: no check, no ASan report). */
NO_SANITIZE_ADDRESS unsigned int slab_index_at(const struct uslab_cache *c, const struct slab *s,
					       unsigned int i)
{
	return c->idx_size == 1 ? ((const uint8_t *)s->freelist)[i] :
				  ((const uint16_t *)s->freelist)[i];
}

/* A corrupted index array: an index beyond the slab (a write after free). */
static __attribute__((noreturn, noinline)) void bad_index(struct uslab_cache *c,
							  const struct slab *s, unsigned int idx)
{
	usl_bug(c, s->freelist, "index array of slab %p corrupted (index %u of %u objects)",
		(void *)s->base, idx, s->objects);
}

/*
 * slab_pop_indices - take @k (<= s->nfree) objects off @s's index stack
 * into @dst, newest first; every index is checked against the slab's
 * object count. Under the node lock.
 */
NO_SANITIZE_ADDRESS void slab_pop_indices(struct uslab_cache *c, struct slab *s, void **dst,
					  unsigned int k)
{
	char *first = slab_first_object(c, s);
	unsigned int n = s->nfree, objects = s->objects;
	size_t size = c->size;

	USLAB_ASSERT(c->layout != USLAB_LAYOUT_FREEPTR && k <= n);
	if (c->idx_size == 1) {
		const uint8_t *arr = s->freelist;

		for (unsigned int i = 0; i < k; i++) {
			unsigned int idx = arr[--n];

			if (unlikely(idx >= objects))
				bad_index(c, s, idx);
			dst[i] = first + idx * size;
		}
	} else {
		const uint16_t *arr = s->freelist;

		for (unsigned int i = 0; i < k; i++) {
			unsigned int idx = arr[--n];

			if (unlikely(idx >= objects))
				bad_index(c, s, idx);
			dst[i] = first + idx * size;
		}
	}
	s->nfree = n;
	if (!n && c->layout == USLAB_LAYOUT_OBJFREELIST)
		s->freelist = NULL; /* its holder was the last one taken */
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
	uint64_t off = (uintptr_t)obj - (uintptr_t)slab_first_object(c, s);
	uint64_t idx = off_index(c, off);

	if (unlikely(idx * c->size != off || idx >= s->objects))
		return UINT32_MAX;
	return (unsigned int)idx;
}

/*
 * slab_walk - follow @cnt objects of a freelist of @s from @head into @dst.
 * Return: the rest of the chain (what the last object taken pointed to).
 * A pointer leading out of the slab or off an object boundary means the
 * list was corrupted (a write after free, or a double free that slipped
 * through): that is a BUG.
 */
void *slab_walk(struct uslab_cache *c, struct slab *s, void *head, unsigned int cnt, void **dst)
{
	void *obj = head;

	for (unsigned int i = 0; i < cnt; i++) {
		/* In the slab and on an object boundary: no interior object handed out. */
		if (unlikely(obj_index(c, s, obj) == UINT32_MAX))
			usl_bug(c, obj, "freelist corrupted in slab %p (object %u of %u)",
				(void *)s->base, i, cnt);
		dst[i] = obj;
		obj = fp_get(c, obj);
	}
	return obj;
}

/*
 * The start of the object slot of live slab @s that contains address @p;
 * NULL when @p lies before the first object or after the last.
 */
void *slab_object_at(const struct slab *s, const void *p)
{
	const struct uslab_cache *c = s->cache;
	char *first;
	uint64_t off, idx;

	first = slab_first_object(c, s);
	if (s->objects == 1)
		return first; /* a large object spans its slab */
	off = (uintptr_t)p - (uintptr_t)first;
	idx = off_index(c, off);
	if (idx * c->size > off)
		idx--;
	return idx < s->objects ? first + idx * c->size : NULL;
}

/*
 * slab_check_object - slab_of_object() without stopping: the slab of @obj,
 * or NULL with *@what saying why it is not an object of @c.
 */
struct slab *slab_check_object(struct uslab_cache *c, const void *obj, const char **what)
{
	struct slab *s = os_slab_lookup(obj);

	*what = NULL;
	if (!s)
		*what = "a pointer uslab did not hand out";
	else if (s->cache != c)
		*what = "an object of another cache";
	else if (obj_index(c, s, obj) == UINT32_MAX)
		*what = "a pointer inside an object";
	return *what ? NULL : s;
}

/*
 * slab_object_index - the index of @obj in @s, UINT32_MAX when it is not
 * on an object boundary of @s (validate).
 */
unsigned int slab_object_index(const struct uslab_cache *c, const struct slab *s, const void *obj)
{
	return obj_index(c, s, obj);
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
 * build_detached_freelist - gather objects of one slab found in p[start..n)
 * into a batch only the caller can see (seed: "slub: build detached
 * freelist with look-ahead"): FREEPTR links them through their free
 * pointers; the index layouts list their indices in df->idx (at most
 * DF_IDX_MAX: a longer run of one slab makes several batches).
 * @c:         the cache, or NULL to take each object's own cache.
 * @lookahead: the scan stops at the lookahead-th object of another slab
 *             (0 and 1: at the first, the simple version of the seed's
 *             patch 2; the seed settled on 3).
 * @df:        filled in; df->slab is NULL when p[start..n) held only NULLs.
 *             df->head is the object gathered last, df->tail the first.
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
	bool chain;

	df->slab = NULL;
	while (start < n) {
		obj = p[start];
		p[start++] = NULL;
		/* Holes (NULL, a 0-byte allocation's pointer) free nothing. */
		if (!obj_is_hole(obj)) {
			/* A sampled object (a sheaf flushed): to the guard, held back. */
			if (unlikely(guard_owns(obj))) {
				guard_free(c, obj, false); /* (marked in its sheaf) */
				continue;
			}
			df->slab = slab_of_object(c, obj);
			break;
		}
	}
	if (!df->slab)
		return start;
	c = df->slab->cache;
	chain = c->layout == USLAB_LAYOUT_FREEPTR;
	if (chain)
		fp_set(c, obj, NULL);
	else
		df->idx[0] = (uint16_t)obj_index(c, df->slab, obj);
	df->head = df->tail = obj;
	df->cnt = 1;

	base = (uintptr_t)df->slab->base;
	mask = ~((PAGE_SIZE << c->order) - 1);
	if (lookahead == 0)
		lookahead = 1;
	for (size_t i = start; i < n; i++) {
		obj = p[i];
		if (obj_is_hole(obj)) {
			p[i] = NULL;
			if (!missed)
				start++;
			continue;
		}
		/* Slabs are naturally aligned: same slab <=> same masked address. */
		if (((uintptr_t)obj & mask) == base) {
			unsigned int idx = obj_index(c, df->slab, obj);

			if (unlikely(obj == df->head))
				usl_bug(c, obj, "double free");
			if (unlikely(idx == UINT32_MAX))
				usl_bug(c, obj, "free of a pointer inside an object");
			if (chain) {
				fp_set(c, obj, df->head);
			} else {
				if (df->cnt == DF_IDX_MAX)
					break; /* the next batch starts here (or before) */
				df->idx[df->cnt] = (uint16_t)idx;
			}
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

/* ------------------------------------------------------------ validate */

/* Whether @obj is among @held[0..n), sorted by address. */
static bool held_has(void *const *held, size_t n, const void *obj)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (held[mid] == obj)
			return true;
		if ((uintptr_t)held[mid] < (uintptr_t)obj)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* One problem found by validate: a line on stderr, counted. */
#define bad(c, fmt, ...) (usl_warn("validate %s: " fmt, (c)->name, __VA_ARGS__), errors++)

/*
 * slab_validate - the free objects of partial slab @s (node lock held),
 * checked: each in the used range on
 * an object boundary, listed once, not also in a sheaf (@held, sorted).
 * @seen: a bitmap of c->objects bits, cleared here. Return: errors found.
 */
unsigned long slab_validate(struct uslab_cache *c, struct slab *s, uint64_t *seen,
			    void *const *held, size_t nheld)
{
	char *first = slab_first_object(c, s);
	unsigned long errors = 0;
	void *obj = s->freelist;

	memset(seen, 0, ALIGN_UP((unsigned int)s->objects, 64u) / 8);
	for (unsigned int i = 0; i < s->nfree; i++) {
		unsigned int idx;

		if (c->layout == USLAB_LAYOUT_FREEPTR) {
			idx = slab_object_index(c, s, obj);
		} else {
			idx = slab_index_at(c, s, i);
			obj = first + (size_t)idx * c->size;
		}
		if (idx >= s->bump) {
			bad(c,
			    "slab %p: free object %u of %u is %p, not one of its objects handed out",
			    (void *)s->base, i, s->nfree, obj);
			break; /* a broken chain cannot be followed */
		}
		if (seen[idx / 64] & (1ull << (idx % 64))) {
			bad(c, "slab %p: object %p is free twice (double free)", (void *)s->base,
			    obj);
			break; /* (a FREEPTR chain loops here) */
		}
		seen[idx / 64] |= 1ull << (idx % 64);
		if (held_has(held, nheld, obj))
			bad(c, "object %p is free in slab %p and in a sheaf (double free)", obj,
			    (void *)s->base);
		if (c->layout == USLAB_LAYOUT_FREEPTR)
			obj = fp_get(c, obj);
	}
	if (c->layout == USLAB_LAYOUT_FREEPTR && !errors && obj)
		bad(c, "slab %p: freelist longer than its count %u", (void *)s->base, s->nfree);
	return errors;
}
