/* SPDX-License-Identifier: MIT */
/*
 * uslab/fastpath.h - the inline fast paths of uslab_cache_alloc() and
 * uslab_cache_free(). Included by <uslab.h>; never include it directly.
 *
 * A call into a shared library costs more than the fast path itself (a
 * pop or a push of the thread's main sheaf), so, like DPDK's mempool, the
 * fast path is compiled into the caller: uslab_cache_alloc(c),
 * uslab_cache_free(c, p), their _bulk forms and uslab_pool_get_bulk(),
 * uslab_pool_put_bulk() (up to 64 objects) are function-like macros for
 * the inline versions below, which call into the library only when the
 * main sheaf cannot serve the whole request.
 * The real functions remain exported under the same names, so taking their
 * address, (uslab_cache_alloc)(c), dlsym() and other languages' bindings
 * work unchanged.
 *
 * Define USLAB_NO_INLINE before including <uslab.h> to always call the
 * library. The inline paths are also off under AddressSanitizer and
 * ThreadSanitizer, so the library's checked paths run.
 *
 * Everything named uslab_priv_* is an implementation detail, declared in
 * <uslab/inline/priv.h> (the private ABI of libuslab.so.0, in one header).
 */
#ifndef USLAB_FASTPATH_H
#define USLAB_FASTPATH_H

#ifndef USLAB_H
#error "include <uslab.h>, not <uslab/fastpath.h>"
#endif

#include <uslab/inline/priv.h>

/*
 * Both paths read the thread's table before they test the cache for NULL:
 * read after the test, in a conditional block, its TLS offset is reloaded
 * from the GOT on every call of a loop (gcc 12 -O2: 2 instructions more per
 * pair, scripts/fastpath-insns). The NULL tests are what <uslab.h> promises
 * (a report; the object's own cache in a free): a test and a branch in
 * each path (the free tests the cache and the object at once), the
 * alloc's none when the handle stays in a register (gcc tests it before
 * the loop).
 * The counts below leave out the load of the handle.
 */

/*
 * Main cannot serve (@top is NULL: the thread holds no sheaf of @c, so a
 * per-CPU cache's calls come here): the CPU's sheaf in an rseq section;
 * a cache with the free key (its pcs_off is the always-empty entry): the
 * library's fast path, which finds its sheaves and marks; else the
 * library's slow path. About 14 instructions and the slot's and sheaf's
 * lines.
 */
static __attribute__((__noinline__, __unused__)) void *uslab_priv_alloc_miss(struct uslab_cache *c,
									     void **top)
{
#ifdef USLAB_PRIV_RSEQ
	const struct uslab_priv_cache *h = (const struct uslab_priv_cache *)(const void *)c;
	struct uslab_priv_pcpu *slots = h->pcpu;

	if (slots && !top) {
		void *obj = uslab_priv_pcpu_pop(slots, h->pcpu_nr);

		if (__builtin_expect(obj != (void *)0, 1)) {
			if (h->free_key)
				uslab_priv_free_unmark(obj);
			return obj;
		}
	}
#else
	(void)top;
#endif
	if (!top && ((const struct uslab_priv_cache *)(const void *)c)->free_key)
		return (uslab_cache_alloc)(c);
	return uslab_priv_alloc_slow(c);
}

static __attribute__((__noinline__, __unused__)) void uslab_priv_free_miss(struct uslab_cache *c,
									   void *obj, void **top)
{
#ifdef USLAB_PRIV_RSEQ
	const struct uslab_priv_cache *h = (const struct uslab_priv_cache *)(const void *)c;
	struct uslab_priv_pcpu *slots = h->pcpu;

	if (slots && !top) {
		/* Marked before the push makes it another thread's to take. */
		if (h->free_key)
			uslab_priv_free_mark(c, obj, h->free_key);
		if (__builtin_expect(uslab_priv_pcpu_push(slots, h->pcpu_nr, obj), 1))
			return;
		if (h->free_key)
			uslab_priv_free_unmark(obj); /* the library marks it */
	}
#else
	(void)top;
#endif
	if (!top && ((const struct uslab_priv_cache *)(const void *)c)->free_key) {
		(uslab_cache_free)(c, obj); /* (checked at the call: slab, cache, start) */
		return;
	}
	uslab_priv_free_slow(c, obj);
}

/*
 * Pop the main sheaf: two branches (a NULL cache goes to the report; the
 * pair's instruction budget is scripts/fastpath-insns'). No object is read or written: a cache with the free key
 * (USLAB_FREE_KEY) shows these paths the always-empty entry, so its calls
 * reach the library, which marks.
 */
static inline __attribute__((__always_inline__)) void *
uslab_cache_alloc_inline(struct uslab_cache *c)
{
	char *table = uslab_priv_pcs_table;
	struct uslab_priv_pcs *p;
	void **top, *obj;

	if (__builtin_expect(!c, 0))
		return uslab_priv_alloc_slow(c);
	p = uslab_priv_pcs_at(table, c);
	top = p->top;
	if (__builtin_expect(top == p->bottom, 0))
		return uslab_priv_alloc_miss(c, top);
	p->top = --top;
	obj = *top;
	return obj;
}

/*
 * Push the main sheaf: two branches (a NULL object or a NULL cache: the
 * library, which does nothing or frees to the object's own cache). The
 * object is not read or written. The top moves by a read-modify-write
 * (uslab_priv_top_add), one instruction less. The pop could too, but with
 * both the pair took 5% more cycles (bench_pair, first 4 bytes written:
 * 3.2 against 3.06 cycles on this project's EPYC VM); either alone costs
 * nothing.
 */
static inline __attribute__((__always_inline__)) void uslab_cache_free_inline(struct uslab_cache *c,
									      void *obj)
{
	char *table = uslab_priv_pcs_table;
	struct uslab_priv_pcs *p;
	void **top;

	/*
	 * One test for both NULLs: the AND of two user-space addresses is
	 * almost never 0, and when it is the library does the same work.
	 */
	if (__builtin_expect(!((__UINTPTR_TYPE__)c & (__UINTPTR_TYPE__)obj), 0)) {
		(uslab_cache_free)(c, obj);
		return;
	}
	p = uslab_priv_pcs_at(table, c);
	top = p->top;
	if (__builtin_expect(top == p->limit, 0)) {
		uslab_priv_free_miss(c, obj, top);
		return;
	}
	*top = obj;
	uslab_priv_top_add(&p->top, 1);
}

/*
 * Copy n objects off the main sheaf when it holds them: a compare and a
 * copy, a vector at a time from USLAB_PRIV_BULK_VECTOR objects.
 */
static inline __attribute__((__always_inline__)) size_t
uslab_cache_alloc_bulk_inline(struct uslab_cache *c, size_t n, void **objs)
{
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(n > USLAB_PRIV_CACHE_BULK_INLINE || !c || !objs, 0))
		return (uslab_cache_alloc_bulk)(c, n, objs);
	p = uslab_priv_pcs_of(c);
	top = p->top;
	/*
	 * n - 1 >= avail: n > avail, or n == 0, which must not store into the
	 * zero table shared by threads that have not started.
	 */
	if (__builtin_expect(n - 1 >= (size_t)(top - p->bottom), 0))
		return uslab_priv_alloc_bulk_slow(c, n, objs);
	top -= n;
	if (__builtin_expect(n < USLAB_PRIV_BULK_VECTOR, 1)) {
		for (size_t i = 0; i < n; i++)
			objs[i] = top[i];
	} else {
		uslab_priv_copy_ptrs(objs, top, n);
	}
	p->top = top;
	return n;
}

/*
 * Push n objects (skipping holes: NULL and USLAB_ZERO_SIZE_PTR; clearing
 * the array) when main has room; from USLAB_PRIV_BULK_VECTOR objects a
 * vector at a time: all of them, holes tested on the way, then squeezed
 * out if there were any. A NULL
 * array goes to the library (which does nothing).
 */
static inline __attribute__((__always_inline__)) void
uslab_cache_free_bulk_inline(struct uslab_cache *c, size_t n, void **objs)
{
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(!c || !objs || n > USLAB_PRIV_CACHE_BULK_INLINE, 0)) {
		(uslab_cache_free_bulk)(c, n, objs);
		return;
	}
	p = uslab_priv_pcs_of(c);
	top = p->top;
	if (__builtin_expect(n - 1 >= (size_t)(p->limit - top), 0)) { /* n == 0 too */
		uslab_priv_free_bulk_slow(c, n, objs);
		return;
	}
	if (__builtin_expect(n < USLAB_PRIV_BULK_VECTOR, 1)) {
		for (size_t i = 0; i < n; i++) {
			void *o = objs[i];

			objs[i] = (void *)0;
			if (!uslab_priv_is_hole(o))
				*top++ = o;
		}
		p->top = top;
		return;
	}
	if (__builtin_expect(uslab_priv_move_ptrs(top, objs, n) != 0, 0))
		n = uslab_priv_squeeze(top, n); /* a hole (or an entry at or above 2^63) */
	p->top = top + n;
}

/*
 * uslab_pool_get_bulk() when main holds n objects: a copy, 0 returned. Any
 * other case (n 0, NULL, more than main holds) calls the library.
 */
static inline __attribute__((__always_inline__)) int
uslab_pool_get_bulk_inline(struct uslab_cache *c, size_t n, void **objs)
{
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(n > USLAB_PRIV_POOL_BULK_INLINE || !c || !objs, 0))
		return (uslab_pool_get_bulk)(c, n, objs);
	p = uslab_priv_pcs_of(c);
	top = p->top;
	if (__builtin_expect(n - 1 >= (size_t)(top - p->bottom), 0)) /* n == 0 too */
		return (uslab_pool_get_bulk)(c, n, objs);
	top -= n;
	uslab_priv_copy_ptrs(objs, top, n);
	p->top = top;
	return 0;
}

/* uslab_pool_put_bulk() when main has room for n: a copy (the array is not written). */
static inline __attribute__((__always_inline__)) void
uslab_pool_put_bulk_inline(struct uslab_cache *c, size_t n, void *const *objs)
{
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(n > USLAB_PRIV_POOL_BULK_INLINE || !c || !objs, 0)) {
		(uslab_pool_put_bulk)(c, n, objs);
		return;
	}
	p = uslab_priv_pcs_of(c);
	top = p->top;
	if (__builtin_expect(n - 1 >= (size_t)(p->limit - top), 0)) { /* n == 0 too */
		(uslab_pool_put_bulk)(c, n, objs);
		return;
	}
	uslab_priv_copy_ptrs(top, objs, n);
	p->top = top + n;
}

#ifdef USLAB_PRIV_INLINE
#define uslab_pool_get_bulk(c, n, p) uslab_pool_get_bulk_inline((c), (n), (p))
#define uslab_pool_put_bulk(c, n, p) uslab_pool_put_bulk_inline((c), (n), (p))
#define uslab_cache_alloc(c) uslab_cache_alloc_inline(c)
#define uslab_cache_free(c, obj) uslab_cache_free_inline((c), (obj))
#define uslab_cache_alloc_bulk(c, n, p) uslab_cache_alloc_bulk_inline((c), (n), (p))
#define uslab_cache_free_bulk(c, n, p) uslab_cache_free_bulk_inline((c), (n), (p))
#endif

#endif /* USLAB_FASTPATH_H */
