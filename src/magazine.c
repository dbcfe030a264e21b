// SPDX-License-Identifier: MIT
/*
 * magazine.c - caller-owned recycling caches and on-stack free batches (the
 * NAPI skb cache and the seed's dev_free_waitlist).
 *
 * A magazine is a stack of object pointers, objs[0 .. count), that belongs to
 * one context. The inline fast paths (uslab/magazine.h) pop and push it;
 * this file holds its slow paths and the exported versions of everything:
 *
 *   empty: refill with one uslab_cache_alloc_bulk() of m->refill objects
 *          (NAPI: 16); if the cache cannot give that many, one object.
 *   full:  the bottom half (the objects freed longest ago, whose cache
 *          lines are the likeliest to be gone) goes back with one
 *          uslab_cache_free_bulk(); the upper half slides down. The hot
 *          objects stay. (NAPI frees the upper half instead, which saves
 *          the slide but sends back the warmest objects.)
 *
 * The magazine sits on top of the cache's public bulk calls, so what it
 * returns goes into the calling thread's sheaves and on from there, and its
 * bulk calls are counted in uslab_cache_stats() like anyone's. No lock and
 * no atomic anywhere in this file: ownership is the caller's business.
 *
 * Under AddressSanitizer the inline paths are off and the exported ones
 * below poison every object resting in a magazine and unpoison it when it
 * is handed out, so a use after uslab_magazine_free() is reported.
 *
 * A magazine of a debug cache (slab_debug.c) caches nothing: its capacity
 * reads 0, so every inline call reaches the functions below, which pass
 * each free straight to the cache (checked at the call) and each
 * allocation to the cache, or to the reserve uslab_magazine_fill() and
 * _prefill() put in (objects allocated from the cache, array size in
 * uslab_priv_capacity).
 */
#include <stdlib.h>
#include <string.h>

#include "front.h"

/* ------------------------------------------------------------ create */

struct uslab_magazine *uslab_magazine_create(struct uslab_cache *c, unsigned int capacity,
					     unsigned int refill)
{
	struct uslab_magazine *m;
	void *mem;

	if (!c || capacity > USLAB_MAGAZINE_MAX_CAPACITY) {
		errno = EINVAL;
		return NULL;
	}
	if (!capacity)
		capacity = USLAB_MAGAZINE_CAPACITY;
	if (!refill)
		refill = capacity < USLAB_MAGAZINE_REFILL ? capacity : USLAB_MAGAZINE_REFILL;
	if (refill > capacity) {
		errno = EINVAL;
		return NULL;
	}
	/* The header on its own cache line, the array right after it (src/abi.c). */
	if (posix_memalign(&mem, CACHELINE, sizeof(*m) + (size_t)capacity * sizeof(void *))) {
		errno = ENOMEM;
		return NULL;
	}
	m = mem;
	memset(m, 0, sizeof(*m));
	m->cache = c;
	m->capacity = capacity;
	m->refill = refill;
	if (c->debug) {
		m->capacity = 0; /* every call reaches the library, which passes it through */
		m->uslab_priv_capacity = capacity;
	}
	return m;
}

/* Whether @m passes its calls through to a debug cache (see the top of the file). */
static inline bool mag_debug(const struct uslab_magazine *m)
{
	return unlikely(!m->capacity);
}

/* Objects @m's array can hold. */
static inline unsigned int mag_size(const struct uslab_magazine *m)
{
	return mag_debug(m) ? m->uslab_priv_capacity : m->capacity;
}

/* Allocate @n objects onto the top of @m with one bulk call; 0 or -ENOMEM. */
static int push_new(struct uslab_magazine *m, size_t n)
{
	if (!n)
		return 0;
	if (uslab_cache_alloc_bulk(m->cache, n, m->objs + m->count) != n)
		return -ENOMEM;
	objs_poison(m->objs + m->count, n);
	m->count += (unsigned int)n;
	m->refills++;
	return 0;
}

int uslab_magazine_fill(struct uslab_magazine *m, unsigned int n)
{
	if (!m || n > mag_size(m))
		return -EINVAL;
	return m->count >= n ? 0 : push_new(m, n - m->count);
}

struct uslab_magazine *uslab_magazine_prefill(struct uslab_cache *c, unsigned int n)
{
	struct uslab_magazine *m;
	unsigned int capacity = USLAB_MAGAZINE_CAPACITY;

	if (n > USLAB_MAGAZINE_MAX_CAPACITY / 2) {
		errno = EINVAL;
		return NULL;
	}
	if (2 * n > capacity)
		capacity = 2 * n;
	m = uslab_magazine_create(c, capacity, 0);
	if (!m)
		return NULL;
	if (uslab_magazine_fill(m, n)) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	return m;
}

/* ------------------------------------------------------- slow paths */

/* Give the bottom @n objects back with one bulk free; slide the rest down. */
static void flush_bottom(struct uslab_magazine *m, size_t n)
{
	if (!n)
		return;
	uslab_cache_free_bulk(m->cache, n, m->objs); /* poisoned: they stay so */
	memmove(m->objs, m->objs + n, (m->count - n) * sizeof(void *));
	m->count -= (unsigned int)n;
	m->flushes++;
}

/* Objects a full magazine gives back: the older half, at least one. */
static size_t half(const struct uslab_magazine *m)
{
	return m->capacity > 1 ? m->capacity / 2 : 1;
}

/*
 * A count above the capacity is possible only if two threads used the
 * magazine at once (a contract violation): stop before the array overflows.
 */
static void check_count(const struct uslab_magazine *m)
{
	if (unlikely(m->count > mag_size(m)))
		usl_bug(m->cache, m,
			"magazine count %u above its capacity %u (used by two threads at once?)",
			m->count, mag_size(m));
}

/* Refill an empty magazine. Return: the new count; 0 if the cache had none. */
unsigned int uslab_priv_magazine_refill(struct uslab_magazine *m)
{
	check_count(m);
	if (!m->count && !mag_debug(m)) /* (a debug one: its reserve, or the slow path) */
		push_new(m, m->refill);
	return m->count;
}

/* Give a full magazine's older half back. Return: the new count. */
unsigned int uslab_priv_magazine_make_room(struct uslab_magazine *m)
{
	check_count(m);
	if (m->count == m->capacity && !mag_debug(m))
		flush_bottom(m, half(m));
	return m->count;
}

/*
 * Make room for @obj in a full magazine (its older half goes back).
 * Return: the new count, where the caller stores @obj; ~0u when @m is a
 * debug cache's magazine and @obj went to the cache (checked at the call).
 */
unsigned int uslab_priv_magazine_free_slow(struct uslab_magazine *m, void *obj)
{
	if (mag_debug(m)) {
		uslab_cache_free(m->cache, obj);
		return ~0u;
	}
	return uslab_priv_magazine_make_room(m);
}

/* Take one object, refilling an empty magazine (or one object straight). */
void *uslab_priv_magazine_alloc_slow(struct uslab_magazine *m)
{
	void *obj;

	check_count(m);
	if (mag_debug(m) && !m->count)
		return uslab_cache_alloc(m->cache); /* (errno ENOMEM set by the cache) */
	if (!m->count && push_new(m, m->refill)) {
		/* Not a whole refill to be had: try for one object. */
		obj = uslab_cache_alloc(m->cache);
		if (!obj)
			errno = ENOMEM;
		return obj;
	}
	obj = m->objs[--m->count];
	objs_unpoison(m->cache, &obj, 1);
	return obj;
}

/* ------------------------------------------- the exported fast paths */

void *uslab_magazine_alloc(struct uslab_magazine *m)
{
	void *obj;

	if (unlikely(m->count - 1 >= m->capacity)) /* empty, or reported */
		return uslab_priv_magazine_alloc_slow(m);
	obj = m->objs[--m->count];
	objs_unpoison(m->cache, &obj, 1);
	return obj;
}

void uslab_magazine_free(struct uslab_magazine *m, void *obj)
{
	if (unlikely(!obj))
		return;
	if (unlikely(m->count >= m->capacity) && uslab_priv_magazine_free_slow(m, obj) == ~0u)
		return;
	objs_poison(&obj, 1);
	m->objs[m->count++] = obj;
}

unsigned int uslab_magazine_count(const struct uslab_magazine *m)
{
	return m->count;
}

size_t uslab_magazine_alloc_bulk(struct uslab_magazine *m, size_t n, void **p)
{
	size_t have = m->count, take = n;

	if (!n)
		return 0;
	if (mag_debug(m) && n > have) {
		/* The cache's part first (all or nothing), then the reserve's. */
		if (uslab_cache_alloc_bulk(m->cache, n - have, p + have) != n - have)
			return 0;
		take = have;
	} else if (n > have) {
		size_t need = n - have, room = m->capacity - have;

		if (need < m->refill && need <= room) {
			/* A small shortfall and a refill onto the magazine, one call. */
			size_t more = need + m->refill < room ? need + m->refill : room;

			if (push_new(m, more) && push_new(m, need)) {
				errno = ENOMEM;
				return 0;
			}
		} else {
			/*
			 * A refill's worth or more: straight into @p, one call,
			 * instead of a copy through the magazine.
			 */
			if (uslab_cache_alloc_bulk(m->cache, need, p + have) != need) {
				errno = ENOMEM;
				return 0;
			}
			m->refills++;
			take = have;
		}
	}
	m->count -= (unsigned int)take;
	memcpy(p, m->objs + m->count, take * sizeof(void *));
	objs_unpoison(m->cache, p, take);
	return n;
}

/*
 * Push p[0..n) (skipping NULLs, clearing entries); the caller made room.
 * Without holes: a memcpy and a memset.
 */
static void push_objs(struct uslab_magazine *m, size_t n, void **p)
{
	if (!ptrs_any_null(p, n)) {
		objs_poison(p, n);
		memcpy(m->objs + m->count, p, n * sizeof(void *));
		memset(p, 0, n * sizeof(void *));
		m->count += (unsigned int)n;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		void *o = p[i];

		p[i] = NULL;
		if (o) {
			objs_poison(&o, 1);
			m->objs[m->count++] = o;
		}
	}
}

void uslab_magazine_free_bulk(struct uslab_magazine *m, size_t n, void **p)
{
	size_t have = m->count, room = m->capacity - have;
	size_t flush = have < half(m) ? have : half(m);

	if (!n || !p)
		return;
	if (mag_debug(m)) {
		uslab_cache_free_bulk(m->cache, n, p); /* checked at the call */
		return;
	}
	if (n > room) {
		if (n <= room + flush) {
			/* The usual overflow: the older half goes back first. */
			flush_bottom(m, flush);
		} else {
			/* More than fits even then: the excess goes straight back. */
			uslab_cache_free_bulk(m->cache, n - room, p);
			m->flushes++;
			p += n - room;
			n = room;
		}
	}
	push_objs(m, n, p);
}

void uslab_magazine_flush(struct uslab_magazine *m)
{
	if (m)
		flush_bottom(m, m->count);
}

void uslab_magazine_destroy(struct uslab_magazine *m)
{
	if (!m)
		return;
	uslab_magazine_flush(m);
	free(m);
}

/* ------------------------------------------------------- free batch */

void uslab_free_batch_init(struct uslab_free_batch *b, struct uslab_cache *c)
{
	b->cache = c;
	b->n = 0;
}

void uslab_free_batch_flush(struct uslab_free_batch *b)
{
	if (b->n) {
		uslab_cache_free_bulk(b->cache, b->n, b->objs);
		b->n = 0;
	}
}

void uslab_free_batch_add(struct uslab_free_batch *b, void *obj)
{
	if (unlikely(!obj))
		return;
	objs_poison(&obj, 1); /* given up: poisoned now */
	b->objs[b->n++] = obj;
	if (unlikely(b->n == USLAB_FREE_BATCH_SIZE))
		uslab_free_batch_flush(b);
}
