// SPDX-License-Identifier: MIT
/*
 * malloc.c - libuslab-malloc.so: the C library's allocation functions on
 * uslab's kmalloc layer, for LD_PRELOAD or for linking.
 *
 *   LD_PRELOAD=/usr/local/lib/libuslab-malloc.so program
 *
 * This file is a program of uslab like any other: it uses only <uslab.h>
 * (the inline kmalloc and kfree fast paths included) and links
 * libuslab.so, so a process has one uslab, whether it also calls the
 * uslab API itself or not. glibc documents which functions a replacement
 * must provide ("Replacing malloc"): malloc, free, calloc, realloc, and
 * aligned_alloc, malloc_usable_size, memalign, posix_memalign, pvalloc,
 * valloc; reallocarray, malloc_trim (uslab_trim) and mallinfo2 and
 * mallinfo (uslab_heap_stats) are here too, and C++'s plain operator new
 * and delete (the other forms reach malloc and free through the C++
 * library).
 *
 * Alignments as the glibc it replaces: memalign takes any alignment (not a
 * power of two: rounded up to one; above SIZE_MAX / 2 + 1: EINVAL), and so
 * does aligned_alloc before glibc 2.38 (an alias of memalign there); from
 * 2.38 aligned_alloc refuses 0 and non-powers of two with EINVAL (C17).
 *
 * Sizes: a request of n bytes takes the kmalloc class of n rounded up to
 * 16, so every object of 16 bytes or more is 16-byte aligned as glibc's
 * are (gcc assumes it of malloc on x86-64: MALLOC_ABI_ALIGNMENT); malloc(0)
 * returns a unique 16-byte object, as glibc does. Above 32 KiB an object is
 * a large object (pages); every uslab tunable applies (USLAB_PURGE_DELAY_MS
 * and USLAB_RETAIN_KB decide how soon freed memory goes back to the OS;
 * malloc_trim gives it back at once).
 *
 * Compiled with -fno-builtin: gcc must not turn the code below into calls
 * of the functions it defines (malloc + memset into calloc, say).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <uslab.h>

#include "probes.h"
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#endif

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define MALLOC_ALIGN 16ul
#define PAGE 4096ul

/* The prototypes, as <stdlib.h> and <malloc.h> give them (not included: -fno-builtin clashes). */
EXPORT void *malloc(size_t size);
EXPORT void free(void *p);
EXPORT void *calloc(size_t n, size_t size);
EXPORT void *realloc(void *p, size_t size);
EXPORT void *reallocarray(void *p, size_t n, size_t size);
EXPORT int posix_memalign(void **res, size_t align, size_t size);
EXPORT void *aligned_alloc(size_t align, size_t size);
EXPORT void *memalign(size_t align, size_t size);
EXPORT void *valloc(size_t size);
EXPORT void *pvalloc(size_t size);
EXPORT size_t malloc_usable_size(void *p);
EXPORT int malloc_trim(size_t pad);
void abort(void) __attribute__((__noreturn__));

/*
 * C++'s plain operator new and delete by their Itanium C++ ABI names (those
 * of libstdc++ and libc++ alike) where size_t is unsigned long (LP64, "m"):
 * new(size_t), new[](size_t), delete(void *), delete[](void *), and the
 * sized deletes (C++14). Elsewhere the C++ library's call malloc and free.
 */
#if __SIZEOF_LONG__ == 8 && __SIZEOF_POINTER__ == 8
#define MALLOC_CXX 1
EXPORT void *_Znwm(size_t size);
EXPORT void *_Znam(size_t size);
EXPORT void _ZdlPv(void *p);
EXPORT void _ZdaPv(void *p);
EXPORT void _ZdlPvm(void *p, size_t size);
EXPORT void _ZdaPvm(void *p, size_t size);
#endif

/* <malloc.h>'s, field for field (glibc 2.33 and later; mallinfo: every version). */
struct mallinfo2 {
	size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks,
		keepcost;
};
struct mallinfo {
	int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
EXPORT struct mallinfo2 mallinfo2(void);
EXPORT struct mallinfo mallinfo(void);

/*
 * The library's kmalloc classes see this (a weak reference, kmalloc.c):
 * the process's malloc is uslab's, so they keep glibc-level free checks
 * (the free key) on.
 */
EXPORT extern const char uslab_priv_malloc_dropin;
const char uslab_priv_malloc_dropin = 1;

/*
 * The drop-in's static probes (probes.h: malloc, calloc, realloc,
 * memalign, free), each fired once per call of the program with its call
 * site; the functions below call each other through the _plain forms.
 */
MALLOC_PROBE_LIST(PROBE_SEMAPHORE_DEFINE)

/* A request beyond the classes, or 0 bytes. */
static __attribute__((noinline)) void *malloc_slow(size_t size)
{
	return uslab_kmalloc(size ? size : MALLOC_ALIGN);
}

/* The class of size rounded up to 16, inline: about 14 instructions. */
static inline void *malloc_plain(size_t size)
{
	if (likely(size - 1 < USLAB_KMALLOC_MAX_CACHE_SIZE))
		return uslab_kmalloc((size + MALLOC_ALIGN - 1) & ~(MALLOC_ALIGN - 1));
	return malloc_slow(size);
}

static __attribute__((noinline)) void *malloc_traced(size_t size, const void *site)
{
	void *p = malloc_plain(size);

	PROBE(malloc, site, p, size);
	return p;
}

/*
 * malloc()'s body (operator new's too), always inline: the probe's site is
 * the return address of the function it is inlined into, read only when
 * the probe is on (as an argument, gcc loaded it on every call).
 */
static inline __attribute__((always_inline)) void *malloc_inline(size_t size)
{
	if (unlikely(probe_on(malloc)))
		return malloc_traced(size, __builtin_return_address(0));
	return malloc_plain(size);
}

void *malloc(size_t size)
{
	return malloc_inline(size);
}

static __attribute__((noinline)) void free_traced(void *p, const void *site)
{
	PROBE(free, site, p); /* (first: @p is still the program's) */
	uslab_kfree(p);
}

/*
 * free()'s body (operator delete's too), always inline as malloc_inline().
 * free(NULL) is common (gawk: 45% of its frees): here two instructions;
 * through the inline kfree it is a registry miss and two calls (about 30).
 */
static inline __attribute__((always_inline)) void free_inline(void *p)
{
	if (unlikely(probe_on(free))) {
		free_traced(p, __builtin_return_address(0));
		return;
	}
	if (!p)
		return;
	uslab_kfree(p);
}

void free(void *p)
{
	free_inline(p);
}

/* The probes fired after their call (@site, the result, the arguments). */
static __attribute__((noinline, cold)) void calloc_probe(const void *site, void *p, size_t n,
							 size_t size)
{
	PROBE(calloc, site, p, n, size);
}

static __attribute__((noinline, cold)) void realloc_probe(const void *site, void *old, void *p,
							  size_t size)
{
	PROBE(realloc, site, old, p, size);
}

static __attribute__((noinline, cold)) void memalign_probe(const void *site, void *p, size_t align,
							   size_t size)
{
	PROBE(memalign, site, p, align, size);
}

static inline void *calloc_plain(size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (unlikely(__builtin_mul_overflow(n, size, &bytes))) {
		errno = ENOMEM;
		return NULL;
	}
	if (bytes > USLAB_KMALLOC_MAX_CACHE_SIZE)
		return uslab_kzalloc(bytes); /* pages fresh from the OS are not cleared again */
	p = malloc_plain(bytes);
	if (p)
		memset(p, 0, bytes);
	return p;
}

void *calloc(size_t n, size_t size)
{
	void *p = calloc_plain(n, size);

	if (unlikely(probe_on(calloc)))
		calloc_probe(__builtin_return_address(0), p, n, size);
	return p;
}

static inline void *realloc_plain(void *p, size_t size)
{
	if (!p)
		return malloc_plain(size);
	if (!size) {
		/* glibc: the memory is freed and NULL returned. */
		uslab_kfree(p);
		return NULL;
	}
	if (size <= USLAB_KMALLOC_MAX_CACHE_SIZE)
		size = (size + MALLOC_ALIGN - 1) & ~(MALLOC_ALIGN - 1);
	return uslab_krealloc(p, size);
}

void *realloc(void *p, size_t size)
{
	void *q = realloc_plain(p, size);

	if (unlikely(probe_on(realloc)))
		realloc_probe(__builtin_return_address(0), p, q, size);
	return q;
}

void *reallocarray(void *p, size_t n, size_t size)
{
	size_t bytes;
	void *q;

	if (unlikely(__builtin_mul_overflow(n, size, &bytes))) {
		errno = ENOMEM;
		return NULL;
	}
	q = realloc_plain(p, bytes);
	if (unlikely(probe_on(realloc)))
		realloc_probe(__builtin_return_address(0), p, q, bytes);
	return q;
}

/* @align a power of two; NULL with errno EINVAL or ENOMEM. */
static void *alloc_aligned_plain(size_t align, size_t size)
{
	if (align <= MALLOC_ALIGN)
		return malloc_plain(size);
	if (align > USLAB_KMALLOC_MAX_ALIGN) {
		errno = ENOMEM; /* a power of two, but more than uslab can align to */
		return NULL;
	}
	return uslab_kmalloc_aligned(size ? size : 1, align);
}

/* alloc_aligned_plain() for the program's call at @site: the memalign probe. */
static void *alloc_aligned(size_t align, size_t size, const void *site)
{
	void *p = alloc_aligned_plain(align, size);

	if (unlikely(probe_on(memalign)))
		memalign_probe(site, p, align, size);
	return p;
}

int posix_memalign(void **res, size_t align, size_t size)
{
	int saved = errno;
	void *p;

	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	p = alloc_aligned(align, size, __builtin_return_address(0));
	if (!p) {
		int err = errno;

		errno = saved; /* posix_memalign reports through its result only */
		return err;
	}
	*res = p;
	return 0;
}

/* Whether the C library refuses aligned_alloc's invalid alignments (glibc 2.38 and later, C17). */
static bool aligned_alloc_strict(void)
{
	static int strict = -1; /* not known yet (a race only computes it twice) */
	int s = __atomic_load_n(&strict, __ATOMIC_RELAXED);

	if (s < 0) {
#ifdef __GLIBC__
		unsigned int major = 0, minor = 0;
		const char *v = gnu_get_libc_version();

		while (*v >= '0' && *v <= '9')
			major = major * 10 + (unsigned int)(*v++ - '0');
		if (*v == '.')
			v++;
		while (*v >= '0' && *v <= '9')
			minor = minor * 10 + (unsigned int)(*v++ - '0');
		s = major > 2 || (major == 2 && minor >= 38);
#else
		s = 1;
#endif
		__atomic_store_n(&strict, s, __ATOMIC_RELAXED);
	}
	return s;
}

static void *memalign_at(size_t align, size_t size, const void *site);

void *aligned_alloc(size_t align, size_t size)
{
	if (!align || (align & (align - 1))) {
		if (aligned_alloc_strict()) {
			errno = EINVAL;
			return NULL;
		}
		return memalign_at(align, size, __builtin_return_address(0)); /* glibc < 2.38 */
	}
	return alloc_aligned(align, size, __builtin_return_address(0));
}

/* glibc's memalign takes any alignment: not a power of two, it rounds up. */
static void *memalign_at(size_t align, size_t size, const void *site)
{
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL; /* glibc: no power of two is that large */
		return NULL;
	}
	if (align > USLAB_KMALLOC_MAX_ALIGN) {
		errno = ENOMEM; /* as alloc_aligned(): more than uslab can align to */
		return NULL;
	}
	while (align & (align - 1))
		align += align & -align;
	return alloc_aligned(align ? align : 1, size, site);
}

void *memalign(size_t align, size_t size)
{
	return memalign_at(align, size, __builtin_return_address(0));
}

void *valloc(size_t size)
{
	return alloc_aligned(PAGE, size, __builtin_return_address(0));
}

/* Page-aligned, the size rounded up to whole pages (0 bytes: one page). */
void *pvalloc(size_t size)
{
	if (size > USLAB_KMALLOC_MAX_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	return alloc_aligned(PAGE, size ? (size + PAGE - 1) & ~(PAGE - 1) : PAGE,
			     __builtin_return_address(0));
}

size_t malloc_usable_size(void *p)
{
	return uslab_ksize(p);
}

/* glibc's contract: 1 if memory was given back to the OS, else 0. @pad: nothing is kept at a heap top here. */
int malloc_trim(size_t pad)
{
	(void)pad;
	return uslab_trim() != 0;
}

/* ------------------------------------------------------- C++ new, delete */
#ifdef MALLOC_CXX

/*
 * The plain operator new and delete, straight to the class paths as
 * malloc() and free() are, the way mimalloc, tcmalloc and jemalloc provide
 * them: without them the C++ library's operators call malloc and free, a
 * call and a check more on each side of every object (the C++ churn of
 * bench/workloads/churn.cpp: 5.2 million of each). Each fires the malloc
 * or free probe with the program's call site.
 *
 * A request that fails is handed to the next definition in the lookup
 * order (the C++ library's, found once with dlsym(RTLD_NEXT)), which calls
 * the new_handler and throws std::bad_alloc as the standard requires: its
 * malloc is this file's, so it fails or succeeds as a retry here would.
 * This file throws nothing itself; it is built with -fexceptions so that
 * the exception unwinds through it. The nothrow and aligned forms stay the
 * C++ library's, on this file's malloc, free and aligned_alloc. A program
 * that defines its own operators keeps them (an executable's symbols come
 * first in the lookup order).
 */
typedef void *(*new_fn)(size_t);

static __attribute__((noinline, cold)) void *new_next(size_t size, bool array)
{
	static new_fn next[2];
	new_fn f = __atomic_load_n(&next[array], __ATOMIC_ACQUIRE);

	if (!f) {
		static const char msg[] = "uslab: BUG: operator new failed and no C++ library "
					  "defines it after libuslab-malloc.so\n";

		f = (new_fn)dlsym(RTLD_NEXT, array ? "_Znam" : "_Znwm");
		if (!f) {
			ssize_t r = write(2, msg, sizeof(msg) - 1);

			(void)r;
			abort();
		}
		__atomic_store_n(&next[array], f, __ATOMIC_RELEASE);
	}
	return f(size);
}

void *_Znwm(size_t size)
{
	void *p = malloc_inline(size);

	if (likely(p))
		return p;
	return new_next(size, false);
}

void *_Znam(size_t size)
{
	void *p = malloc_inline(size);

	if (likely(p))
		return p;
	return new_next(size, true);
}

void _ZdlPv(void *p)
{
	free_inline(p);
}

void _ZdaPv(void *p)
{
	free_inline(p);
}

/* The sized deletes: the size is not needed (the registry knows the class). */
void _ZdlPvm(void *p, size_t size)
{
	(void)size;
	free_inline(p);
}

void _ZdaPvm(void *p, size_t size)
{
	(void)size;
	free_inline(p);
}
#endif /* MALLOC_CXX */

/*
 * glibc's figures from uslab_heap_stats() (doc/api.md, "mallinfo2"): the
 * heap (arena) is the page heap's pages in use and retained; huge objects
 * (own mappings) are glibc's mmapped chunks (hblks, hblkhd), outside it.
 * Every uslab cache counts, not only malloc's classes.
 */
struct mallinfo2 mallinfo2(void)
{
	struct mallinfo2 mi = { 0 };
	struct uslab_heap_stats h;
	uint64_t objects;

	if (uslab_heap_stats(&h))
		return mi;
	mi.arena = h.used_bytes - h.huge_bytes + h.retained_bytes;
	/* (object_bytes is summed just before the heap's figures: clamped) */
	objects = h.object_bytes > h.huge_bytes ? h.object_bytes - h.huge_bytes : 0;
	mi.uordblks = objects < mi.arena ? objects : mi.arena;
	mi.fordblks = mi.arena - mi.uordblks;
	mi.hblks = h.huge_objects;
	mi.hblkhd = h.huge_bytes;
	mi.keepcost = h.retained_bytes;
	return mi;
}

/* The same in int fields, truncated as glibc's are. */
struct mallinfo mallinfo(void)
{
	struct mallinfo2 m = mallinfo2();
	struct mallinfo mi = {
		.arena = (int)m.arena,
		.ordblks = (int)m.ordblks,
		.smblks = (int)m.smblks,
		.hblks = (int)m.hblks,
		.hblkhd = (int)m.hblkhd,
		.usmblks = (int)m.usmblks,
		.fsmblks = (int)m.fsmblks,
		.uordblks = (int)m.uordblks,
		.fordblks = (int)m.fordblks,
		.keepcost = (int)m.keepcost,
	};

	return mi;
}
