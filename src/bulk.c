// SPDX-License-Identifier: MIT
/*
 * bulk.c - uslab_cache_alloc_bulk() and uslab_cache_free_bulk(): arrays of
 * objects in and out (kmem_cache_{alloc,free}_bulk, kfree_bulk).
 *
 * The inline paths (uslab/fastpath.h) serve a request the main sheaf can
 * take whole: a copy of n pointers. These slow paths serve the rest:
 *
 *   alloc: copy what main holds, then what the spare and the barn's full
 *          sheaves hold; a remainder smaller than a sheaf refills main from
 *          slabs, a larger one comes straight from slabs, whole slab
 *          freelists at a time. All or nothing: on failure every object
 *          taken goes back and 0 is returned.
 *   free:  push into main, then into the spare and empty sheaves traded at
 *          the barn while it takes full ones; a remainder smaller than a
 *          sheaf may flush main, a larger one goes straight to slabs as
 *          detached freelists, one per slab, handed over under one node
 *          lock per 32 slabs. Without a cache (kfree_bulk, the deferred
 *          frees' drain) each run of objects of one cache takes that
 *          cache's way; large objects go to their slabs.
 *
 * Locks: the thread's own tstate lock while sheaves change, node locks
 * inside cache.c. No per-object lock or atomic.
 */
#include <string.h>

#include "front.h"

/* The owner counts its bulk calls; uslab_cache_stats() reads them racily. */
static void count(unsigned long *calls, unsigned long *objs, size_t n)
{
	stat_event(*calls, 1);
	stat_event(*objs, n);
}

/*
 * The copies of the bulk paths: <uslab/inline/priv.h>'s, 16 bytes a vector in
 * this generic x86-64 build, and AVX2 versions of them, 32 bytes a vector,
 * which an ifunc picks on CPUs that have it. Halving the stores is what
 * counts: a free stores every pointer twice. (A 32-byte vector type in the
 * generic build is lowered through the stack by gcc 12: slower than either.)
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
typedef uintptr_t ptrv4 __attribute__((vector_size(32), aligned(8), may_alias));

/* uslab_priv_copy_ptrs() four pointers a vector. */
static __attribute__((target("avx2"))) void copy_ptrs_avx2(void **dst, void *const *src, size_t n)
{
	size_t i = 0;

	for (; i + 4 <= n; i += 4)
		*(ptrv4 *)(void *)(dst + i) = *(const ptrv4 *)(const void *)(src + i);
	for (; i < n; i++)
		dst[i] = src[i];
}

/* uslab_priv_move_ptrs() four pointers a vector. */
static __attribute__((target("avx2"))) unsigned int move_ptrs_avx2(void **dst, void **src, size_t n)
{
	const ptrv4 zero = { 0 };
	ptrv4 acc = zero;
	uintptr_t z;
	size_t i = 0;

	for (; i + 4 <= n; i += 4) {
		ptrv4 v = *(const ptrv4 *)(const void *)(src + i);

		*(ptrv4 *)(void *)(dst + i) = v;
		*(ptrv4 *)(void *)(src + i) = zero;
		acc |= v - (USLAB_PRIV_HOLE_MAX + 1);
	}
	z = acc[0] | acc[1] | acc[2] | acc[3];
	for (; i < n; i++) {
		z |= (uintptr_t)src[i] - (USLAB_PRIV_HOLE_MAX + 1);
		dst[i] = src[i];
		src[i] = NULL;
	}
	return (unsigned int)(z >> 63);
}
#endif

static void copy_ptrs_generic(void **dst, void *const *src, size_t n)
{
	uslab_priv_copy_ptrs(dst, src, n);
}

static unsigned int move_ptrs_generic(void **dst, void **src, size_t n)
{
	return (unsigned int)uslab_priv_move_ptrs(dst, src, n);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/*
 * The resolvers run while the dynamic linker relocates, before constructors
 * (__builtin_cpu_init() first) and before a sanitizer's run-time is set up
 * (not instrumented: an ASan build's first load of __cpu_model crashed).
 */
#define RESOLVER __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined))

static RESOLVER void (*resolve_copy_ptrs(void))(void **, void *const *, size_t)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") ? copy_ptrs_avx2 : copy_ptrs_generic;
}

static RESOLVER unsigned int (*resolve_move_ptrs(void))(void **, void **, size_t)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") ? move_ptrs_avx2 : move_ptrs_generic;
}

/* Copy @src[0..n) to @dst (not overlapping). */
static void copy_ptrs(void **dst, void *const *src, size_t n)
	__attribute__((ifunc("resolve_copy_ptrs")));
/* Copy @src[0..n) to @dst (not overlapping), clear @src; nonzero if a hole may be among them. */
static unsigned int move_ptrs(void **dst, void **src, size_t n)
	__attribute__((ifunc("resolve_move_ptrs")));
#else
#define copy_ptrs copy_ptrs_generic
#define move_ptrs move_ptrs_generic
#endif

/* Squeeze the holes out of @p[0..n) (a free's, moved into main). Return: what is left. */
static size_t squeeze(void **p, size_t n)
{
	return uslab_priv_squeeze(p, n);
}

/*
 * For check level 2. all_of_cache: every entry of @objs[0..n) is an object
 * in a slab of @c (or NULL, if @holes); all_null: every entry is NULL.
 */
static bool all_of_cache(const struct uslab_cache *c, void *const *objs, size_t n, bool holes)
{
	if (c->flags & USLAB_POOL_EXTERNAL)
		return true; /* (no slab to ask) */
	for (size_t i = 0; i < n; i++) {
		const struct slab *s = objs[i] ? os_slab_lookup(objs[i]) : NULL;

		if (!s && objs[i] && guard_owns(objs[i]) && guard_object(objs[i], NULL, NULL) == c)
			continue; /* a sampled object */
		if ((objs[i] || !holes) && (!s || READ_ONCE(s->cache) != c))
			return false;
	}
	return true;
}

static bool all_null(void *const *objs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (objs[i])
			return false;
	return true;
}

/* Take up to @n objects off main into @objs. Return: how many. */
static size_t take_main(struct pcs *p, size_t n, void **objs)
{
	size_t k = (size_t)(p->hot.top - p->hot.bottom);

	if (k > n)
		k = n;
	if (!k)
		return 0; /* main may be absent: top is NULL */
	USLAB_ASSERT(p->main && p->hot.bottom <= p->hot.top - k);
	p->hot.top -= k;
	copy_ptrs(objs, p->hot.top, k);
	return k;
}

/*
 * Push @objs[0..n) onto main while it has room, skipping NULL entries and
 * clearing the ones consumed: one pass moves a run (holes are squeezed
 * out of what it copied), until main is full or @objs is consumed.
 * Return: entries consumed.
 */
static size_t push_main(struct pcs *p, size_t n, void **objs)
{
	size_t i = 0;

	/* main may be absent: top and limit are NULL, no room. */
	while (i < n && p->hot.top < p->hot.limit) {
		size_t k = (size_t)(p->hot.limit - p->hot.top);
		void **top = p->hot.top;

		if (k > n - i)
			k = n - i;
		p->hot.top = top + (unlikely(move_ptrs(top, objs + i, k)) ? squeeze(top, k) : k);
		i += k;
	}
	while (i < n && !objs[i])
		i++; /* holes left when main is full: consumed, no swap for them */
	/* All consumed, or main full (or absent: top and limit NULL). */
	USLAB_ASSERT(i == n || p->hot.top == p->hot.limit);
	USLAB_ASSERT(p->hot.top <= p->hot.limit);
	return i;
}

/* All or nothing from slabs: fill @objs[0..n) or give them back. */
static bool alloc_from_slabs(struct uslab_cache *c, size_t n, void **objs)
{
	size_t got = 0;
	int err;

	while (got < n) {
		unsigned int want = n - got > UINT32_MAX ? UINT32_MAX : (unsigned int)(n - got);
		unsigned int k = cache_refill(c, objs + got, want);

		got += k;
		if (k < want)
			break;
	}
	USLAB_ASSERT(got <= n);
	if (got == n)
		return true;
	err = errno; /* ENOMEM, or ENOBUFS: an external pool ran out (cache_refill) */
	cache_free_objects(c, objs, got, usl_opt.lookahead);
	errno = err;
	return false;
}

size_t uslab_priv_alloc_bulk_slow(struct uslab_cache *c, size_t n, void **objs)
{
	struct percpu_slot *slots;
	struct pcs *p;
	size_t k = 0;

	if (!n)
		return 0;
	if (!alloc_pre_hook(c, "bulk allocation", !objs))
		return 0;
	if ((slots = pcs_yield_to_percpu(c))) {
		k = percpu_alloc_bulk(c, slots, n, objs);
		if (k < n && !alloc_from_slabs(c, n - k, objs + k)) {
			/* All or nothing, as below: what the CPU's sheaves gave goes back there. */
			int err = errno;
			size_t back = percpu_free_bulk(c, slots, k, objs);

			cache_free_objects(c, objs + back, k - back, usl_opt.lookahead);
			errno = err;
			return 0;
		}
		if ((p = pcs_counters(c)))
			count(&p->alloc_bulk, &p->alloc_bulk_objs, n);
		objs_hand_out(c, objs, n);
		return n;
	}
	if (!c->sheaf_capacity || c->debug || !(p = pcs_self(c)))
		goto direct; /* (a debug cache: checked on the way out of its slabs) */
	if (cache_numa(c))
		pcs_numa_sync(c, p); /* main serves the node this thread runs on */

	thread_lock_self();
	pcs_fit_bulk(c, p, n);	  /* a request larger than a sheaf: grow them */
	pcs_swap_for(p, n, true); /* the spare may hold the whole request */
	k = take_main(p, n, objs);
	/*
	 * More from the spare and the barn's full sheaves; refill a sheaf
	 * from slabs only for a remainder smaller than a sheaf (it leaves
	 * the rest for the next call), else go to the slabs directly.
	 */
	while (k < n && pcs_refill_main(c, p, n - k < c->sheaf_capacity))
		k += take_main(p, n - k, objs + k);
	if (k < n && !alloc_from_slabs(c, n - k, objs + k)) {
		/* All or nothing: what came from sheaves goes back too. */
		int err = errno; /* ENOMEM or ENOBUFS, whatever the return costs */

		cache_free_objects(c, objs, k, usl_opt.lookahead);
		thread_unlock_self();
		errno = err;
		return 0;
	}
	USLAB_ASSERT(k <= n);
	USLAB_ASSERT_EXPENSIVE(all_of_cache(c, objs, n, false));
	count(&p->alloc_bulk, &p->alloc_bulk_objs, n);
	thread_unlock_self();
	barn_kick(); /* a trade above may have grown the capacity */
	objs_hand_out(c, objs, n);
	return n;

direct:
	if (!alloc_from_slabs(c, n, objs))
		return 0;
	USLAB_ASSERT_EXPENSIVE(all_of_cache(c, objs, n, false));
	objs_hand_out(c, objs, n);
	return n;
}

/*
 * Free @objs[0..n) (poisoned already) of @c: into the thread's sheaves of
 * @c, the rest to slabs.
 */
static void free_to_cache(struct uslab_cache *c, size_t n, void **objs)
{
	struct percpu_slot *slots;
	struct pcs *p;
	size_t i = 0;

	if ((slots = pcs_yield_to_percpu(c))) {
		/* NUMA: other nodes' objects home, each (cpu_sheaves.c); holes left. */
		if (cache_numa(c))
			for (size_t k = 0; k < n; k++)
				if (objs[k] && percpu_free_remote(c, objs[k]))
					objs[k] = NULL;
		/* The holes out first: the CPU's sheaf takes a run of objects. */
		size_t m = squeeze(objs, n);

		memset(objs + m, 0, (n - m) * sizeof(void *));
		i = percpu_free_bulk(c, slots, m, objs);
		memset(objs, 0, i * sizeof(void *));
		if (i < m)
			cache_free_objects(c, objs + i, m - i, usl_opt.lookahead);
		if ((p = pcs_counters(c)))
			count(&p->free_bulk, &p->free_bulk_objs, n);
		return;
	}
	if (!c->sheaf_capacity || c->debug || !(p = pcs_self(c))) {
		cache_free_objects(c, objs, n, usl_opt.lookahead); /* (checks a debug cache's) */
		return;
	}
	if (cache_numa(c)) {
		/* Other nodes' objects on their way home (thread_sheaves.c, "NUMA"); holes left. */
		unsigned int nid = pcs_numa_sync(c, p);

		for (size_t k = 0; k < n; k++) {
			const struct slab *s = objs[k] ? os_slab_lookup(objs[k]) : NULL;
			/* (No slab: not uslab's, reported where the slab path meets it.) */
			unsigned int on = s ? s->node : nid;

			if (on != nid) {
				pcs_numa_remote(c, p, objs[k], on);
				objs[k] = NULL;
			}
		}
	}
	thread_lock_self();
	pcs_fit_bulk(c, p, n);	   /* a request larger than a sheaf: grow them */
	pcs_swap_for(p, n, false); /* the spare may have room for all of them */
	for (;;) {
		i += push_main(p, n - i, objs + i);
		/* Room from the spare or the barn; a flush only for a small rest. */
		if (i == n || !pcs_make_room(c, p, n - i < c->sheaf_capacity))
			break;
	}
	USLAB_ASSERT(i <= n);
	if (i < n)
		cache_free_objects(c, objs + i, n - i, usl_opt.lookahead);
	count(&p->free_bulk, &p->free_bulk_objs, n);
	thread_unlock_self();
	barn_kick(); /* a trade above may have grown the capacity */
}

/* The cache of @obj if it has sheaves; NULL for large objects and anything else. */
static struct uslab_cache *sheaf_cache_of(const void *obj)
{
	struct slab *s = os_slab_lookup(obj);
	struct uslab_cache *c = s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;

	/* The large objects' cache has no sheaves. */
	USLAB_ASSERT(!c || !(c->flags & CACHE_LARGE) || !c->sheaf_capacity);
	return c && c->sheaf_capacity ? c : NULL;
}

/*
 * kfree_bulk: objects of any caches. Each run of objects of one cache with
 * sheaves goes through that cache's sheaves, as uslab_cache_free_bulk(c)
 * would take it (runs of one cache are the common case); each run of
 * other objects (large, of caches without sheaves, or not uslab's: the
 * slab path reports those) goes to its slabs.
 */
static void free_any(size_t n, void **objs)
{
	size_t i = 0;

	while (i < n) {
		struct uslab_cache *c;
		uintptr_t mask, base;
		size_t j;

		if (obj_is_hole(objs[i])) {
			objs[i++] = NULL;
			continue;
		}
		c = sheaf_cache_of(objs[i]);
		/* Objects of the slab of the last one looked up need no lookup. */
		mask = c ? ~((PAGE_SIZE << c->order) - 1) : 0;
		base = c ? (uintptr_t)objs[i] & mask : 1; /* (1: no object matches) */
		for (j = i + 1; j < n; j++) {
			if (obj_is_hole(objs[j])) {
				objs[j] = NULL; /* (a hole in the run: skipped by both paths) */
			} else if (((uintptr_t)objs[j] & mask) != base) {
				if (sheaf_cache_of(objs[j]) != c)
					break;
				base = c ? (uintptr_t)objs[j] & mask : 1;
			}
		}
		/* A run of one cache (of none: large or not uslab's, each checked on its way). */
		USLAB_ASSERT_EXPENSIVE(!c || all_of_cache(c, objs + i, j - i, true));
		if (c) {
			/* As the cache's own bulk free: into main without a lock when it fits. */
			uslab_cache_free_bulk(c, j - i, objs + i);
		} else {
			objs_poison(objs + i, j - i);
			cache_free_objects(NULL, objs + i, j - i, usl_opt.lookahead);
			gp_kick();
		}
		i = j;
	}
}

void uslab_priv_free_bulk_slow(struct uslab_cache *c, size_t n, void **objs)
{
	if (!n || !objs)
		return;
	if (!c) {
		free_any(n, objs);
		return;
	}
	cache_check_live(c, "bulk free");
	for (size_t i = 0; i < n; i++)
		if (unlikely(obj_is_hole(objs[i])))
			objs[i] = NULL; /* the paths below know NULL holes only */
	objs_free_hook(c, objs, n);
	free_to_cache(c, n, objs);
	USLAB_ASSERT_EXPENSIVE(all_null(objs, n)); /* every entry consumed */
	gp_kick();
}

static size_t alloc_bulk_lib(struct uslab_cache *c, size_t n, void **objs);
static void free_bulk_lib(struct uslab_cache *c, size_t n, void **objs);

/* The exported functions, with their probes (probes.h): the caller's site, the cache, n, got. */
static __attribute__((noinline)) size_t alloc_bulk_traced(struct uslab_cache *c, size_t n,
							  void **objs, const void *site)
{
	size_t got = alloc_bulk_lib(c, n, objs);

	PROBE(alloc_bulk, site, cache_probe_name(c), n, got, objs);
	return got;
}

static __attribute__((noinline)) void free_bulk_traced(struct uslab_cache *c, size_t n, void **objs,
						       const void *site)
{
	/* (Fired first: the array is the caller's until the free consumes it.) */
	PROBE(free_bulk, site, cache_probe_name(c), n, objs);
	free_bulk_lib(c, n, objs);
}

size_t uslab_cache_alloc_bulk(struct uslab_cache *c, size_t n, void **objs)
{
	if (unlikely(probe_on(alloc_bulk)))
		return alloc_bulk_traced(c, n, objs, __builtin_return_address(0));
	return alloc_bulk_lib(c, n, objs);
}

void uslab_cache_free_bulk(struct uslab_cache *c, size_t n, void **objs)
{
	if (unlikely(probe_on(free_bulk))) {
		free_bulk_traced(c, n, objs, __builtin_return_address(0));
		return;
	}
	free_bulk_lib(c, n, objs);
}

/* The same as the inline paths, then the slow paths. */
static inline size_t alloc_bulk_lib(struct uslab_cache *c, size_t n, void **objs)
{
	struct pcs *p;

	if (unlikely(!cache_is_descriptor(c) || !objs))
		return uslab_priv_alloc_bulk_slow(c, n, objs); /* reports or EINVAL */
	p = pcs_of(c);
	/* n - 1: n == 0 goes to the slow path, which stores nothing. */
	if (n - 1 < (size_t)(p->hot.top - p->hot.bottom)) {
		p->hot.top -= n;
		copy_ptrs(objs, p->hot.top, n);
		count(&p->alloc_bulk, &p->alloc_bulk_objs, n);
		objs_hand_out(c, objs, n);
		return n;
	}
	return uslab_priv_alloc_bulk_slow(c, n, objs);
}

static inline void free_bulk_lib(struct uslab_cache *c, size_t n, void **objs)
{
	struct pcs *p;
	void **top;

	if (cache_is_descriptor(c) && objs) { /* else reported (NULL: the objects' caches) */
		p = pcs_of(c);
		top = p->hot.top;
		if (n - 1 < (size_t)(p->hot.limit - top)) {
			/* push_main()'s move in one pass: main has room for all. */
			objs_free_hook(c, objs, n);
			p->hot.top =
				top + (unlikely(move_ptrs(top, objs, n)) ? squeeze(top, n) : n);
			count(&p->free_bulk, &p->free_bulk_objs, n);
			return;
		}
	}
	uslab_priv_free_bulk_slow(c, n, objs);
}
