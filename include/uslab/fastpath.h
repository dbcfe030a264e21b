/* SPDX-License-Identifier: MIT */
/*
 * uslab/fastpath.h - the inline fast paths of uslab_cache_alloc() and
 * uslab_cache_free(). Included by <uslab.h>; never include it directly.
 *
 * A call into a shared library costs more than the fast path itself (a
 * pop or a push of the thread's main sheaf), so, like DPDK's mempool, the
 * fast path is compiled into the caller: uslab_cache_alloc(c),
 * uslab_cache_free(c, p) and their _bulk forms are function-like macros for
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
 * Everything named uslab_priv_* is an implementation detail: the two
 * structures are the first bytes of the library's own, and their layout is
 * part of the ABI of libuslab.so.0.
 */
#ifndef USLAB_FASTPATH_H
#define USLAB_FASTPATH_H

#ifndef USLAB_H
#error "include <uslab.h>, not <uslab/fastpath.h>"
#endif

/*
 * The one condition for the inline paths (here and in <uslab/magazine.h>):
 * not asked off with USLAB_NO_INLINE, and no sanitizer, detected as gcc
 * and clang announce them. src/internal.h derives its ASan switch from
 * USLAB_PRIV_ASAN.
 */
#if defined(__SANITIZE_ADDRESS__)
#define USLAB_PRIV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define USLAB_PRIV_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define USLAB_PRIV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define USLAB_PRIV_TSAN 1
#endif
#endif
#if !defined(USLAB_NO_INLINE) && !defined(USLAB_PRIV_ASAN) && !defined(USLAB_PRIV_TSAN)
#define USLAB_PRIV_INLINE 1
#endif

/*
 * The hot part of a thread's sheaves of one cache: objects are [bottom,
 * top), room up to limit; bulk calls that reach the library, counted by the
 * owner (read by uslab_cache_stats()). One cache line. The inline paths
 * below do not count: a counter there cost 20% at n = 1 (bench_bulk test01).
 */
struct uslab_priv_pcs {
	void **top;
	void **bottom;
	void **limit;
	unsigned long alloc_bulk, alloc_bulk_objs;
	unsigned long free_bulk, free_bulk_objs;
};

/* The hot part of a cache: where its sheaves are in a thread's table. */
struct uslab_priv_cache {
	size_t pcs_off;
};

/* This thread's table of sheaves (all zero until its first slow path). */
extern USLAB_API __thread char *uslab_priv_pcs_table __attribute__((tls_model("initial-exec")));

USLAB_API void *uslab_priv_alloc_slow(struct uslab_cache *c);
USLAB_API void uslab_priv_free_slow(struct uslab_cache *c, void *obj);
USLAB_API size_t uslab_priv_alloc_bulk_slow(struct uslab_cache *c, size_t n, void **p);
USLAB_API void uslab_priv_free_bulk_slow(struct uslab_cache *c, size_t n, void **p);

static inline struct uslab_priv_pcs *uslab_priv_pcs_of(const struct uslab_cache *c)
{
	const struct uslab_priv_cache *h = (const struct uslab_priv_cache *)(const void *)c;

	return (struct uslab_priv_pcs *)(void *)(uslab_priv_pcs_table + h->pcs_off);
}

/*
 * Both paths read the thread's table before they test the cache for NULL:
 * read after the test, in a conditional block, its TLS offset is reloaded
 * from the GOT on every call of a loop (gcc 12 -O2: 2 instructions more per
 * pair, scripts/fastpath-insns). The NULL tests are what <uslab.h> promises
 * (a report; the object's own cache in a free): a test and a branch each,
 * none when the handle stays in a register (gcc tests it before the loop).
 * The counts below leave out the load of the handle.
 */

/* Pop the main sheaf: 10 instructions, two branches (a NULL cache goes to the report). */
static inline __attribute__((always_inline)) void *uslab_cache_alloc_inline(struct uslab_cache *c)
{
	char *table = uslab_priv_pcs_table;
	const struct uslab_priv_cache *h = (const struct uslab_priv_cache *)(const void *)c;
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(!c, 0))
		return uslab_priv_alloc_slow(c);
	p = (struct uslab_priv_pcs *)(void *)(table + h->pcs_off);
	top = p->top;
	if (__builtin_expect(top == p->bottom, 0))
		return uslab_priv_alloc_slow(c);
	p->top = --top;
	return *top;
}

/* Push the main sheaf: 12 instructions, three branches (a NULL cache: the library). */
static inline __attribute__((always_inline)) void uslab_cache_free_inline(struct uslab_cache *c,
									  void *obj)
{
	char *table = uslab_priv_pcs_table;
	const struct uslab_priv_cache *h = (const struct uslab_priv_cache *)(const void *)c;
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(!obj, 0))
		return;
	if (__builtin_expect(!c, 0)) {
		uslab_priv_free_slow(c, obj);
		return;
	}
	p = (struct uslab_priv_pcs *)(void *)(table + h->pcs_off);
	top = p->top;
	if (__builtin_expect(top == p->limit, 0)) {
		uslab_priv_free_slow(c, obj);
		return;
	}
	*top = obj;
	p->top = top + 1;
}

/*
 * Bulk calls of up to this many objects are served inline; larger ones
 * call the library, whose copies run at memcpy speed (the inline loops
 * move about one pointer per cycle, a call costs a few ns).
 */
#define USLAB_PRIV_BULK_INLINE 16

/* Copy n objects off the main sheaf when it holds them: a compare and a copy. */
static inline __attribute__((always_inline)) size_t
uslab_cache_alloc_bulk_inline(struct uslab_cache *c, size_t n, void **objs)
{
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(n > USLAB_PRIV_BULK_INLINE || !c || !objs, 0))
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
	for (size_t i = 0; i < n; i++)
		objs[i] = top[i];
	p->top = top;
	return n;
}

/* Push n objects (skipping NULLs, clearing the array) when main has room. */
static inline __attribute__((always_inline)) void
uslab_cache_free_bulk_inline(struct uslab_cache *c, size_t n, void **objs)
{
	struct uslab_priv_pcs *p;
	void **top;

	if (__builtin_expect(!c || n > USLAB_PRIV_BULK_INLINE, 0)) {
		(uslab_cache_free_bulk)(c, n, objs);
		return;
	}
	p = uslab_priv_pcs_of(c);
	top = p->top;
	if (__builtin_expect(n - 1 >= (size_t)(p->limit - top), 0)) { /* n == 0 too */
		uslab_priv_free_bulk_slow(c, n, objs);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		void *o = objs[i];

		objs[i] = (void *)0;
		if (o)
			*top++ = o;
	}
	p->top = top;
}

#ifdef USLAB_PRIV_INLINE
#define uslab_cache_alloc(c) uslab_cache_alloc_inline(c)
#define uslab_cache_free(c, obj) uslab_cache_free_inline((c), (obj))
#define uslab_cache_alloc_bulk(c, n, p) uslab_cache_alloc_bulk_inline((c), (n), (p))
#define uslab_cache_free_bulk(c, n, p) uslab_cache_free_bulk_inline((c), (n), (p))
#endif

#endif /* USLAB_FASTPATH_H */
