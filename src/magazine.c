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
 * bulk calls are counted in uslab_cache_stats() like anyone's. No lock;
 * ownership is the caller's business, and the one atomic exchange and CAS
 * per slow path only catch a caller who breaks it (mag_enter() below).
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
#include <limits.h>
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
	m->uslab_priv_free_key = c->hot.free_key; /* 0 for a debug cache */
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

/*
 * Two threads at once (a contract violation), caught on the slow paths.
 * Every slow path runs between mag_enter() and mag_leave(): enter swaps
 * the count for MAG_BUSY with one atomic exchange, leave puts the new count
 * back with one compare-and-swap. The slow path works on the count it
 * swapped out (checked against the capacity), never on m->count, so no
 * array access can overflow whatever another thread writes meanwhile.
 * MAG_BUSY is above every capacity, so another thread's inline alloc, free
 * or bulk call during the slow path misses and reaches a slow path, whose
 * exchange finds MAG_BUSY; a count another thread's inline path stored
 * meanwhile makes leave's swap fail; a count above the capacity (left by
 * two inline paths racing) is caught by the next enter. Each is reported
 * before the array or the cache is touched. The inline paths pay nothing
 * (the alloc_bulk one a compare of the count against the capacity); a
 * slow path, once per refill or half flush, pays an exchange and a CAS.
 * Two threads that only ever take inline paths (a magazine that never
 * runs empty or full) are not seen.
 */
#define MAG_BUSY UINT_MAX

static __attribute__((noreturn, noinline)) void two_threads(const struct uslab_magazine *m,
							    unsigned int n, const char *what)
{
	usl_bug(m->cache, m, "magazine used by two threads at once (%s; count %u, capacity %u)",
		what, n, mag_size(m));
	__builtin_unreachable();
}

/* Start a slow path of @m. Return: its count, which the slow path works on. */
static unsigned int mag_enter(struct uslab_magazine *m)
{
	unsigned int n = __atomic_exchange_n(&m->count, MAG_BUSY, __ATOMIC_ACQUIRE);

	if (unlikely(n == MAG_BUSY))
		two_threads(m, n, "another thread is in its slow path");
	if (unlikely(n > mag_size(m)))
		two_threads(m, n, "a count above the capacity");
	return n;
}

/* End a slow path of @m with count @n. */
static void mag_leave(struct uslab_magazine *m, unsigned int n)
{
	unsigned int busy = MAG_BUSY;

	if (unlikely(!__atomic_compare_exchange_n(&m->count, &busy, n, false, __ATOMIC_RELEASE,
						  __ATOMIC_RELAXED)))
		two_threads(m, busy, "the count changed during a slow path");
}

/* Allocate @n objects onto the top of @m (count *@k) with one bulk call; 0 or -ENOMEM. */
static int push_new(struct uslab_magazine *m, unsigned int *k, size_t n)
{
	if (!n)
		return 0;
	USLAB_ASSERT(*k + n <= mag_size(m));
	if (uslab_cache_alloc_bulk(m->cache, n, m->objs + *k) != n)
		return -ENOMEM;
	objs_poison(m->objs + *k, n);
	*k += (unsigned int)n;
	m->refills++;
	return 0;
}

int uslab_magazine_fill(struct uslab_magazine *m, unsigned int n)
{
	unsigned int k;
	int ret = 0;

	if (!m || n > mag_size(m))
		return -EINVAL;
	k = mag_enter(m);
	if (k < n)
		ret = push_new(m, &k, n - k);
	mag_leave(m, k);
	return ret;
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

/* Give the bottom @n of the *@k objects back with one bulk free; slide the rest down. */
static void flush_bottom(struct uslab_magazine *m, unsigned int *k, size_t n)
{
	if (!n)
		return;
	USLAB_ASSERT(n <= *k);
	/* Marked by the magazine's frees: the cache's bulk free checks and marks them again. */
	if (m->uslab_priv_free_key)
		for (size_t i = 0; i < n; i++)
			if (m->objs[i]) /* (NULL only after two threads raced on it) */
				obj_unmark(m->objs[i]);
	uslab_cache_free_bulk(m->cache, n, m->objs); /* poisoned: they stay so */
	memmove(m->objs, m->objs + n, (*k - n) * sizeof(void *));
	*k -= (unsigned int)n;
	m->flushes++;
}

/* Objects a full magazine gives back: the older half, at least one. */
static size_t half(const struct uslab_magazine *m)
{
	return m->capacity > 1 ? m->capacity / 2 : 1;
}

/* Refill an empty magazine. Return: the new count; 0 if the cache had none. */
unsigned int uslab_priv_magazine_refill(struct uslab_magazine *m)
{
	unsigned int k = mag_enter(m);

	if (!k && !mag_debug(m)) /* (a debug one: its reserve, or the slow path) */
		push_new(m, &k, m->refill);
	mag_leave(m, k);
	return k;
}

/* Give a full magazine's older half back. Return: the new count. */
unsigned int uslab_priv_magazine_make_room(struct uslab_magazine *m)
{
	unsigned int k = mag_enter(m);

	if (k == m->capacity && !mag_debug(m))
		flush_bottom(m, &k, half(m));
	mag_leave(m, k);
	return k;
}

/*
 * Make room for @obj in a full magazine (its older half goes back).
 * Return: the new count, where the caller stores @obj; ~0u when @m is a
 * debug cache's magazine and @obj went to the cache (checked at the call).
 */
unsigned int uslab_priv_magazine_free_slow(struct uslab_magazine *m, void *obj)
{
	if (mag_debug(m)) {
		mag_leave(m, mag_enter(m));
		uslab_cache_free(m->cache, obj);
		return ~0u;
	}
	return uslab_priv_magazine_make_room(m);
}

/* Take one object, refilling an empty magazine (or one object straight). */
void *uslab_priv_magazine_alloc_slow(struct uslab_magazine *m)
{
	unsigned int k = mag_enter(m);
	void *obj;

	if (!k && (mag_debug(m) || push_new(m, &k, m->refill))) {
		/* A debug cache's, or not a whole refill to be had: one object. */
		mag_leave(m, k);
		obj = uslab_cache_alloc(m->cache);
		if (!obj)
			errno = ENOMEM;
		return obj;
	}
	obj = m->objs[--k];
	mag_leave(m, k);
	objs_hand_out(m->cache, &obj, 1);
	return obj;
}

/* ------------------------------------------- the exported fast paths */

void *uslab_magazine_alloc(struct uslab_magazine *m)
{
	void *obj;

	if (unlikely(m->count - 1 >= m->capacity)) /* empty, or reported */
		return uslab_priv_magazine_alloc_slow(m);
	obj = m->objs[--m->count];
	objs_hand_out(m->cache, &obj, 1);
	return obj;
}

void uslab_magazine_free(struct uslab_magazine *m, void *obj)
{
	unsigned int n = m->count;

	if (unlikely(!obj))
		return;
	if (unlikely(n >= m->capacity)) {
		n = uslab_priv_magazine_free_slow(m, obj);
		if (n == ~0u)
			return;
	}
	if (m->uslab_priv_free_key)
		obj_mark_free(m->cache, obj);
	objs_poison(&obj, 1);
	m->objs[n] = obj;
	m->count = n + 1;
}

unsigned int uslab_magazine_count(const struct uslab_magazine *m)
{
	return m->count;
}

/* The body of uslab_magazine_alloc_bulk(), on the count *@k mag_enter() gave. */
static size_t alloc_bulk(struct uslab_magazine *m, unsigned int *k, size_t n, void **p)
{
	size_t have = *k, take = n;

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

			if (push_new(m, k, more) && push_new(m, k, need)) {
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
	*k -= (unsigned int)take;
	memcpy(p, m->objs + *k, take * sizeof(void *));
	objs_hand_out(m->cache, p, take);
	return n;
}

size_t uslab_magazine_alloc_bulk(struct uslab_magazine *m, size_t n, void **p)
{
	unsigned int k;

	if (!n)
		return 0;
	k = mag_enter(m);
	n = alloc_bulk(m, &k, n, p);
	mag_leave(m, k);
	return n;
}

/*
 * Push p[0..n) (skipping NULLs, clearing entries) onto the *@k objects;
 * the caller made room. Without holes: a memcpy and a memset.
 */
static void push_objs(struct uslab_magazine *m, unsigned int *k, size_t n, void **p)
{
	USLAB_ASSERT(*k + n <= m->capacity);
	objs_mark_free(m->cache, p, n);
	if (!ptrs_any_null(p, n)) {
		objs_poison(p, n);
		memcpy(m->objs + *k, p, n * sizeof(void *));
		memset(p, 0, n * sizeof(void *));
		*k += (unsigned int)n;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		void *o = p[i];

		p[i] = NULL;
		if (o) {
			objs_poison(&o, 1);
			m->objs[(*k)++] = o;
		}
	}
}

void uslab_magazine_free_bulk(struct uslab_magazine *m, size_t n, void **p)
{
	unsigned int k;
	size_t room, flush;

	if (!n || !p)
		return;
	k = mag_enter(m);
	if (mag_debug(m)) {
		mag_leave(m, k);
		uslab_cache_free_bulk(m->cache, n, p); /* checked at the call */
		return;
	}
	room = m->capacity - k;
	flush = k < half(m) ? k : half(m);
	if (n > room) {
		if (n <= room + flush) {
			/* The usual overflow: the older half goes back first. */
			flush_bottom(m, &k, flush);
		} else {
			/* More than fits even then: the excess goes straight back. */
			uslab_cache_free_bulk(m->cache, n - room, p);
			m->flushes++;
			p += n - room;
			n = room;
		}
	}
	push_objs(m, &k, n, p);
	mag_leave(m, k);
}

void uslab_magazine_flush(struct uslab_magazine *m)
{
	unsigned int k;

	if (!m)
		return;
	k = mag_enter(m);
	flush_bottom(m, &k, k);
	mag_leave(m, k);
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
