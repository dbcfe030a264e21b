// SPDX-License-Identifier: MIT
/*
 * malloc_api.c - libuslab-malloc.so as the process's malloc: run under
 * LD_PRELOAD=libuslab-malloc.so (tests/preload/CMakeLists.txt). First
 * that the preload is active (uslab_owns() is found and owns what malloc
 * returns), then every function it replaces with its documented outcomes
 * and errors, the C library's own callers of malloc, threads that exit
 * while others still use their objects, pthread_key destructors, fork from
 * a multi-threaded program and allocation before main().
 *
 * Not linked with uslab: it reaches uslab only through the preload.
 * Compiled with -fno-builtin, so gcc keeps every call as written.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "../test.h"

#define PAGE 4096ul
#define MiB (1ul << 20)

static int (*owns)(const void *p);

/* Sizes the compiler cannot see (no folding, no -Walloc-size-larger-than). */
static volatile size_t vsize_max = SIZE_MAX;
static volatile size_t vhalf = SIZE_MAX / 2 + 1;

/* The byte at offset @i of an object filled from @seed. */
static inline unsigned char pat(uint64_t seed, size_t i)
{
	return (unsigned char)(seed * 0x9E3779B97F4A7C15ull >> 56) ^
	       (unsigned char)(seed + i * 7 + (i >> 8));
}

static void fill(void *p, size_t n, uint64_t seed)
{
	unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = pat(seed, i);
}

/* The offset of the first byte of @p[from, to) that does not match, or SIZE_MAX. */
static size_t mismatch(const void *p, size_t from, size_t to, uint64_t seed)
{
	const unsigned char *b = p;

	for (size_t i = from; i < to; i++)
		if (b[i] != pat(seed, i))
			return i;
	return SIZE_MAX;
}

/* mismatch() on the first and last 64 KiB of @p[0, n) and every 4093rd byte. */
static size_t sampled_mismatch(const void *p, size_t n, uint64_t seed)
{
	const unsigned char *b = p;
	size_t bad = mismatch(p, 0, 65536, seed);

	if (bad == SIZE_MAX)
		bad = mismatch(p, n - 65536, n, seed);
	for (size_t i = 0; bad == SIZE_MAX && i < n; i += 4093)
		if (b[i] != pat(seed, i))
			bad = i;
	return bad;
}

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* ------------------------------------------------- allocation before main */

static char *early;
static size_t early_size;
static int early_owned = -1;

__attribute__((constructor)) static void early_alloc(void)
{
	void *(*volatile m)(size_t) = malloc;

	early_size = 1000;
	early = m(early_size);
	if (early) {
		fill(early, early_size, 77);
		/* uslab_owns, if the preload is there: recorded, checked in main. */
		int (*o)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "uslab_owns");

		early_owned = o ? o(early) : -1;
	}
}

static void test_before_main(void)
{
	CHECK(early != NULL, "malloc in a constructor returned NULL");
	CHECK(early_owned == 1, "constructor's object not uslab's (%d)", early_owned);
	CHECK(mismatch(early, 0, early_size, 77) == SIZE_MAX, "constructor's object changed");
	early = realloc(early, 100000);
	CHECK(early && owns(early), "realloc of the constructor's object");
	CHECK(mismatch(early, 0, early_size, 77) == SIZE_MAX, "constructor's object after realloc");
	free(early);
}

/* ------------------------------------------------------------- the preload */

static void test_preload_active(void)
{
	Dl_info info;
	void *p;
	int local;

	owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "uslab_owns");
	CHECK(owns != NULL, "uslab_owns not found: run under LD_PRELOAD=libuslab-malloc.so");
	CHECK(dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) && info.dli_fname &&
		      strstr(info.dli_fname, "libuslab-malloc"),
	      "malloc resolves to %s, not libuslab-malloc", info.dli_fname);
	p = malloc(100);
	CHECK(p && owns(p) == 1, "malloc(100) = %p not uslab's", p);
	CHECK(owns(&local) == 0, "uslab_owns(stack) is 1");
	free(p);
	p = malloc(1000000);
	CHECK(p && owns(p) == 1, "malloc(1000000) = %p not uslab's", p);
	free(p);
}

/* --------------------------------------------------------- malloc and free */

static void test_malloc_free(void)
{
	void *zero[200];
	uint64_t s = 1;

	free(NULL);
	for (int i = 0; i < 200; i++) {
		zero[i] = malloc(0);
		CHECK(zero[i] != NULL, "malloc(0) #%d is NULL", i);
		CHECK((uintptr_t)zero[i] > PAGE, "malloc(0) #%d = %p", i, zero[i]);
		CHECK(owns(zero[i]), "malloc(0) %p not uslab's", zero[i]);
		for (int j = 0; j < i; j++)
			CHECK(zero[j] != zero[i], "malloc(0) #%d == #%d = %p", i, j, zero[i]);
	}
	for (int i = 0; i < 200; i++)
		free(zero[i]);

	/* Every size up to 2 KiB, then sampled up to 1 MiB: filled, kept, checked, freed. */
	enum { N = 600 };
	static void *obj[N];
	static size_t sz[N];
	for (int round = 0; round < 6; round++) {
		int n = round < 5 ? N : 64;

		for (int i = 0; i < n; i++) {
			sz[i] = round < 4 ? (size_t)(round * N + i) % 2049 + 1 :
					    rnd_next(&s) % (round == 4 ? 40000 : MiB) + 1;
			obj[i] = malloc(sz[i]);
			CHECK(obj[i] != NULL, "malloc(%zu)", sz[i]);
			fill(obj[i], sz[i], (uint64_t)i);
		}
		for (int i = 0; i < n; i++) {
			CHECK(mismatch(obj[i], 0, sz[i], (uint64_t)i) == SIZE_MAX,
			      "malloc(%zu) contents overwritten", sz[i]);
			free(obj[i]);
		}
	}
}

/* ------------------------------------------------------------------ calloc */

static void test_calloc(void)
{
	static const size_t sizes[] = { 1, 7, 16, 100, 1000, 4096, 32768, 32769, 70000, 1 << 20 };
	void *p;

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		/* Dirty memory of the size first, so calloc may be handed it back. */
		for (int k = 0; k < 4; k++) {
			void *d = malloc(n);

			CHECK(d, "malloc(%zu)", n);
			memset(d, 0xa5, n);
			free(d);
			p = calloc(1, n);
			CHECK(p && all_zero(p, n), "calloc(1, %zu) not zeroed", n);
			memset(p, 0x5a, n);
			free(p);
			p = calloc(n, 1);
			CHECK(p && all_zero(p, n), "calloc(%zu, 1) not zeroed", n);
			free(p);
		}
	}
	p = calloc(1000, 33);
	CHECK(p && all_zero(p, 33000), "calloc(1000, 33)");
	free(p);
	p = calloc(0, 0);
	CHECK(p != NULL, "calloc(0, 0) is NULL");
	free(p);
	p = calloc(0, 100);
	CHECK(p != NULL, "calloc(0, 100) is NULL");
	free(p);

	errno = 0;
	p = calloc(vhalf, 2);
	CHECK(p == NULL && errno == ENOMEM, "calloc(2^63, 2) = %p errno %d", p, errno);
	errno = 0;
	p = calloc(vsize_max / 3 + 1, 3);
	CHECK(p == NULL && errno == ENOMEM, "calloc overflow (3) = %p errno %d", p, errno);
	errno = 0;
	p = calloc(65536, 65536ul * 65536 + 1);
	CHECK(p == NULL && errno == ENOMEM, "calloc overflow (2^16 x 2^32+1) = %p errno %d", p,
	      errno);
}

/* ----------------------------------------------------------------- realloc */

/* Grow from 1 byte to 64 MiB by @num/@den, checking the bytes kept; then shrink. */
static void realloc_growth(unsigned int num, unsigned int den, uint64_t seed)
{
	size_t size = 1, steps = 0;
	unsigned char *p = malloc(size);

	CHECK(p, "malloc(1)");
	fill(p, size, seed);
	while (size < 64 * MiB) {
		size_t next = size * num / den;

		if (next <= size)
			next = size + 1;
		if (next > 64 * MiB)
			next = 64 * MiB;
		p = realloc(p, next);
		CHECK(p, "realloc(%zu -> %zu)", size, next);
		/* The bytes kept: all of them below 1 MiB, then the ends and a sample. */
		size_t bad =
			size <= MiB ? mismatch(p, 0, size, seed) : sampled_mismatch(p, size, seed);
		CHECK(bad == SIZE_MAX, "realloc(%zu -> %zu) lost byte %zu", size, next, bad);
		if (next >= 16)
			CHECK((uintptr_t)p % 16 == 0, "realloc(%zu) = %p", next, (void *)p);
		for (size_t i = size; i < next; i++)
			p[i] = pat(seed, i);
		size = next;
		steps++;
	}
	CHECK(mismatch(p, 0, size, seed) == SIZE_MAX, "64 MiB object after growth");
	/* And down again, by halves. */
	while (size > 1) {
		size /= 2;
		p = realloc(p, size);
		CHECK(p, "realloc shrink to %zu", size);
		CHECK(p[0] == pat(seed, 0) && p[size - 1] == pat(seed, size - 1) &&
			      (size < 4096 || mismatch(p, size - 4096, size, seed) == SIZE_MAX),
		      "shrink to %zu lost bytes", size);
	}
	free(p);
	CHECK(steps > 10, "%zu steps", steps);
}

static void test_realloc(void)
{
	void *p, *q;

	realloc_growth(2, 1, 3);
	realloc_growth(3, 2, 5);

	/* realloc(NULL, n) is malloc(n). */
	p = realloc(NULL, 100);
	CHECK(p && owns(p), "realloc(NULL, 100) = %p", p);
	fill(p, 100, 9);
	/* Failure leaves the object as it was. */
	errno = 0;
	q = realloc(p, vsize_max);
	CHECK(q == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX) = %p errno %d", q, errno);
	errno = 0;
	q = realloc(p, vhalf);
	CHECK(q == NULL && errno == ENOMEM, "realloc(p, 2^63) = %p errno %d", q, errno);
	CHECK(mismatch(p, 0, 100, 9) == SIZE_MAX, "failed realloc changed the object");
	/* realloc(p, 0) frees p and returns NULL (glibc). */
	q = realloc(p, 0);
	CHECK(q == NULL, "realloc(p, 0) = %p", q);
	p = realloc(NULL, 0);
	CHECK(p != NULL, "realloc(NULL, 0) is NULL");
	free(p);
	/* Sizes across the class boundaries and into large objects. */
	p = NULL;
	for (size_t n = 1, prev = 0; n < 300000; prev = n, n = n * 5 / 4 + 3) {
		p = realloc(p, n);
		CHECK(p, "realloc %zu", n);
		CHECK(mismatch(p, 0, prev, 11) == SIZE_MAX, "realloc to %zu", n);
		fill(p, n, 11);
	}
	free(p);
}

static void test_reallocarray(void)
{
	uint32_t *p = NULL, *q;

	for (size_t n = 1; n <= 100000; n *= 3) {
		p = reallocarray(p, n, sizeof(*p));
		CHECK(p, "reallocarray(%zu, 4)", n);
		for (size_t i = n / 3; i < n; i++)
			p[i] = (uint32_t)(i * 2654435761u);
		for (size_t i = 0; i < n; i++)
			CHECK(p[i] == (uint32_t)(i * 2654435761u), "reallocarray lost element %zu",
			      i);
	}
	errno = 0;
	q = reallocarray(p, vhalf, 2);
	CHECK(q == NULL && errno == ENOMEM, "reallocarray overflow = %p errno %d", (void *)q,
	      errno);
	errno = 0;
	q = reallocarray(p, vsize_max / 4 + 1, 4);
	CHECK(q == NULL && errno == ENOMEM, "reallocarray overflow = %p errno %d", (void *)q,
	      errno);
	CHECK(p[100] == (uint32_t)(100 * 2654435761u), "reallocarray failure changed the array");
	errno = 0;
	q = reallocarray(NULL, vhalf, 2);
	CHECK(q == NULL && errno == ENOMEM, "reallocarray(NULL) overflow = %p", (void *)q);
	free(p);
}

/* ---------------------------------------------------------- aligned memory */

static void check_aligned(void *p, size_t align, size_t size, const char *fn)
{
	CHECK(p != NULL, "%s(%zu, %zu) is NULL (errno %d)", fn, align, size, errno);
	CHECK((uintptr_t)p % align == 0, "%s(%zu, %zu) = %p misaligned", fn, align, size, p);
	CHECK(owns(p), "%s(%zu, %zu) = %p not uslab's", fn, align, size, p);
	CHECK(malloc_usable_size(p) >= size, "%s(%zu, %zu): usable %zu", fn, align, size,
	      malloc_usable_size(p));
	fill(p, size, align + size);
}

static void test_posix_memalign(void)
{
	static const size_t bad[] = { 0, 1, 2, 3, 4, 12, 24, 48, 96, 4097, 3ul << 20 };
	void *const sentinel = (void *)0x1234;
	void *p;
	int err;

	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = sentinel;
		err = posix_memalign(&p, bad[i], 64);
		CHECK(err == EINVAL, "posix_memalign(%zu) = %d, not EINVAL", bad[i], err);
		CHECK(p == sentinel, "posix_memalign(%zu) error changed *res to %p", bad[i], p);
	}
	for (size_t align = 8; align <= (1ul << 22); align *= 2) {
		const size_t sizes[] = { 0, 1, align - 1, align, align + 1, 3 * align, 100 };
		void *keep[7];

		for (unsigned int i = 0; i < 7; i++) {
			p = sentinel;
			err = posix_memalign(&p, align, sizes[i]);
			CHECK(err == 0, "posix_memalign(%zu, %zu) = %d", align, sizes[i], err);
			check_aligned(p, align, sizes[i], "posix_memalign");
			keep[i] = p;
		}
		for (unsigned int i = 0; i < 7; i++) {
			CHECK(mismatch(keep[i], 0, sizes[i], align + sizes[i]) == SIZE_MAX,
			      "posix_memalign(%zu, %zu) contents", align, sizes[i]);
			free(keep[i]);
		}
	}
	/* Out of memory: ENOMEM through the result, *res untouched. */
	p = sentinel;
	err = posix_memalign(&p, 64, vsize_max);
	CHECK(err == ENOMEM && p == sentinel, "posix_memalign(64, SIZE_MAX) = %d, %p", err, p);
	p = sentinel;
	err = posix_memalign(&p, 4096, vhalf);
	CHECK(err == ENOMEM && p == sentinel, "posix_memalign(4096, 2^63) = %d, %p", err, p);
}

static void test_aligned_alloc(void)
{
	void *p;

	for (size_t align = 1; align <= (1ul << 22); align *= 2) {
		for (size_t k = 1; k <= 3; k++) {
			p = aligned_alloc(align, k * align);
			check_aligned(p, align, k * align, "aligned_alloc");
			free(p);
		}
		/* C17: the size need not be a multiple of the alignment. */
		p = aligned_alloc(align, 10);
		check_aligned(p, align, 10, "aligned_alloc");
		free(p);
	}
	/* (0 and alignments that are not powers of two: as glibc, test_like_glibc) */
	errno = 0;
	p = aligned_alloc(64, vsize_max);
	CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(64, SIZE_MAX) = %p errno %d", p, errno);
}

static void test_memalign(void)
{
	/* Any alignment: one that is not a power of two is rounded up to one. */
	static const size_t aligns[][2] = { { 0, 1 },
					    { 1, 1 },
					    { 3, 4 },
					    { 5, 8 },
					    { 24, 32 },
					    { 48, 64 },
					    { 100, 128 },
					    { 1000, 1024 },
					    { 4095, 4096 },
					    { 4097, 8192 },
					    { 65536, 65536 },
					    { 100000, 131072 },
					    { 1 << 22, 1 << 22 },
					    { (1 << 22) + 1, 1 << 23 } };
	void *p;

	for (unsigned int i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		for (size_t size = 1; size <= 3 * aligns[i][1] + 100; size = size * 7 + 1) {
			p = memalign(aligns[i][0], size);
			check_aligned(p, aligns[i][1], size, "memalign");
			free(p);
		}
	}
	errno = 0;
	p = memalign(64, vsize_max);
	CHECK(p == NULL && errno == ENOMEM, "memalign(64, SIZE_MAX) = %p errno %d", p, errno);
}

static void test_valloc_pvalloc(void)
{
	static const size_t sizes[] = {
		0, 1, 100, 4095, 4096, 4097, 10000, 32768, 100000, 1 << 22
	};
	void *p;

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], rounded = n ? (n + PAGE - 1) & ~(PAGE - 1) : PAGE;

		p = valloc(n);
		check_aligned(p, PAGE, n, "valloc");
		free(p);
		p = pvalloc(n);
		/* The whole rounded size is usable: written to its last byte. */
		check_aligned(p, PAGE, rounded, "pvalloc");
		free(p);
	}
	errno = 0;
	p = valloc(vsize_max);
	CHECK(p == NULL && errno == ENOMEM, "valloc(SIZE_MAX) = %p errno %d", p, errno);
	errno = 0;
	p = pvalloc(vsize_max);
	CHECK(p == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX) = %p errno %d", p, errno);
}

/* ---------------------------------------------------- usable size, alignment */

static void test_usable_size(void)
{
	CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu",
	      malloc_usable_size(NULL));
	for (size_t n = 1; n < 200000; n += n < 4096 ? 1 : n / 16) {
		unsigned char *a = malloc(n), *b = malloc(n);
		size_t ua = malloc_usable_size(a), ub = malloc_usable_size(b);

		CHECK(a && b, "malloc(%zu)", n);
		CHECK(ua >= n && ub >= n, "malloc_usable_size(malloc(%zu)) = %zu", n, ua);
		CHECK(ua < 2 * n + 16, "malloc_usable_size(malloc(%zu)) = %zu: too much", n, ua);
		/* The whole usable size is the caller's: filling it spares the neighbour. */
		fill(b, ub, n);
		memset(a, 0xee, ua);
		CHECK(mismatch(b, 0, ub, n) == SIZE_MAX, "filling usable size of %zu hit another",
		      n);
		free(a);
		free(b);
	}
}

static void test_alignment16(void)
{
	enum { N = 64 };
	void *p[N];

	for (size_t n = 16; n < 300000; n += n < 2048 ? 1 : n / 8 + 1) {
		int k = n < 2048 ? 4 : N;

		for (int i = 0; i < k; i++) {
			p[i] = malloc(n);
			CHECK(p[i] && (uintptr_t)p[i] % 16 == 0, "malloc(%zu) = %p", n, p[i]);
		}
		for (int i = 0; i < k; i++)
			free(p[i]);
		void *c = calloc(1, n), *r = realloc(NULL, n);
		CHECK(c && (uintptr_t)c % 16 == 0, "calloc(1, %zu) = %p", n, c);
		CHECK(r && (uintptr_t)r % 16 == 0, "realloc(NULL, %zu) = %p", n, r);
		free(c);
		free(r);
	}
}

/* ------------------------------------------------------------ huge requests */

static void test_huge(void)
{
	void *p;

	errno = 0;
	p = malloc(vsize_max);
	CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX) = %p errno %d", p, errno);
	errno = 0;
	p = malloc(vhalf);
	CHECK(p == NULL && errno == ENOMEM, "malloc(2^63) = %p errno %d", p, errno);
	errno = 0;
	p = malloc(vsize_max - 4095);
	CHECK(p == NULL && errno == ENOMEM, "malloc(SIZE_MAX - 4095) = %p errno %d", p, errno);

	size_t n = 100 * MiB;
	unsigned char *b = malloc(n);

	CHECK(b && owns(b), "malloc(100 MiB) = %p", (void *)b);
	CHECK(malloc_usable_size(b) >= n, "usable %zu", malloc_usable_size(b));
	memset(b, 0x3c, n);
	for (size_t i = 0; i < n; i += PAGE)
		CHECK(b[i] == 0x3c && b[i + PAGE - 1] == 0x3c, "100 MiB page %zu", i / PAGE);
	free(b);
	b = calloc(100, MiB);
	CHECK(b && all_zero(b, n), "calloc(100, 1 MiB) not zeroed");
	free(b);
}

/*
 * Issue 35 item 7: aligned_alloc, memalign and posix_memalign answer every
 * alignment up to 64 MiB, and those beyond SIZE_MAX / 2, as glibc's own
 * functions in this process do (the glibc the drop-in replaces: before
 * 2.38 aligned_alloc is memalign and takes any alignment; from 2.38 it
 * refuses 0 and non-powers of two with EINVAL): the same success or
 * failure, the same errno, and an address aligned as glibc's contract
 * says (the alignment rounded up to a power of two).
 */
static void like_glibc_aligned(void *libc)
{
	static const size_t aligns[] = { 0,
					 1,
					 2,
					 3,
					 5,
					 8,
					 12,
					 16,
					 24,
					 48,
					 100,
					 1000,
					 4095,
					 4096,
					 4097,
					 100000,
					 (1ul << 26) - 1,
					 1ul << 26,
					 SIZE_MAX / 2 + 1,
					 SIZE_MAX / 2 + 2,
					 SIZE_MAX - 1,
					 SIZE_MAX };
	const size_t sizes[] = { 1, 64, 100000, vsize_max };
	void *(*g_aligned_alloc)(size_t, size_t), *(*g_memalign)(size_t, size_t);
	int (*g_posix_memalign)(void **, size_t, size_t);
	void (*g_free)(void *);

	*(void **)&g_aligned_alloc = dlsym(libc, "aligned_alloc");
	*(void **)&g_memalign = dlsym(libc, "memalign");
	*(void **)&g_posix_memalign = dlsym(libc, "posix_memalign");
	*(void **)&g_free = dlsym(libc, "free");
	CHECK(g_aligned_alloc && g_memalign && g_posix_memalign && g_free &&
		      g_aligned_alloc != aligned_alloc,
	      "glibc's aligned functions not found");
	for (unsigned int i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		size_t align = aligns[i], pow2 = 1;

		while (pow2 < align && pow2 < SIZE_MAX / 2 + 1)
			pow2 *= 2;
		for (unsigned int k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t size = sizes[k];
			int err, gerr;
			void *p, *q;

			for (int fn = 0; fn < 2; fn++) {
				const char *name = fn ? "memalign" : "aligned_alloc";

				errno = 0;
				q = fn ? g_memalign(align, size) : g_aligned_alloc(align, size);
				gerr = errno;
				g_free(q);
				errno = 0;
				p = fn ? memalign(align, size) : aligned_alloc(align, size);
				err = errno;
				CHECK(!p == !q && (q || err == gerr),
				      "%s(%zu, %zu): %p errno %d, glibc's %p errno %d", name, align,
				      size, p, err, q, gerr);
				CHECK(!p || (owns(p) && (uintptr_t)p % pow2 == 0 &&
					     malloc_usable_size(p) >= size),
				      "%s(%zu, %zu) = %p", name, align, size, p);
				free(p);
			}
			q = p = (void *)0x1234;
			gerr = g_posix_memalign(&q, align, size);
			if (!gerr)
				g_free(q);
			err = posix_memalign(&p, align, size);
			CHECK(err == gerr && (err ? p == (void *)0x1234 : owns(p)),
			      "posix_memalign(%zu, %zu): %d, glibc's %d", align, size, err, gerr);
			if (!err)
				free(p);
		}
	}
}

/*
 * Issue 22 item 13: where a request is more memory than the system has,
 * the drop-in answers as glibc does on the same machine (both ask the
 * kernel, whose vm.overcommit_memory policy decides); glibc's own
 * functions are called from libc.so.6 itself. Alignments above 64 MiB
 * are a documented difference: ENOMEM (README, doc/api.md).
 */
static void test_like_glibc(void)
{
	static const size_t sizes[] = { 1ul << 46, 1ul << 44, 1ul << 40,
					1ul << 36, 1ul << 30, 100 * MiB };
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	void *(*g_malloc)(size_t), *(*g_calloc)(size_t, size_t);
	void (*g_free)(void *);
	void *p, *q;
	int err, gerr;
	bool fits;

	CHECK(libc, "dlopen libc.so.6: %s", dlerror());
	g_malloc = (void *(*)(size_t))dlsym(libc, "malloc");
	g_calloc = (void *(*)(size_t, size_t))dlsym(libc, "calloc");
	g_free = (void (*)(void *))dlsym(libc, "free");
	CHECK(g_malloc && g_calloc && g_free && g_malloc != malloc, "glibc's malloc not found");
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		errno = 0;
		q = g_malloc(n);
		gerr = errno;
		fits = q != NULL;
		g_free(q);
		errno = 0;
		p = malloc(n);
		err = errno;
		CHECK(!p == !q && (q || err == gerr),
		      "malloc(%zu): %p errno %d, glibc's %p errno %d", n, p, err, q, gerr);
		CHECK(!p || owns(p), "malloc(%zu) = %p not uslab's", n, p);
		free(p);
		errno = 0;
		q = g_calloc(1, n);
		gerr = errno;
		g_free(q);
		errno = 0;
		p = calloc(1, n);
		err = errno;
		CHECK(!p == !q && (q || err == gerr),
		      "calloc(1, %zu): %p errno %d, glibc's %p errno %d", n, p, err, q, gerr);
		free(p);
		p = malloc(64);
		errno = 0;
		q = realloc(p, n);
		err = errno;
		CHECK(!q == !fits && (fits || err == ENOMEM), "realloc(p, %zu): %p errno %d", n, q,
		      err);
		free(q ? q : p);
	}
	/* Beyond uslab's largest alignment: ENOMEM, as documented. */
	p = NULL;
	err = posix_memalign(&p, 1ul << 27, 1);
	CHECK(err == ENOMEM && !p, "posix_memalign(128 MiB, 1) = %d, %p", err, p);
	errno = 0;
	p = memalign(1ul << 27, 1);
	CHECK(!p && errno == ENOMEM, "memalign(128 MiB, 1) = %p errno %d", p, errno);
	errno = 0;
	p = aligned_alloc(1ul << 27, 1);
	CHECK(!p && errno == ENOMEM, "aligned_alloc(128 MiB, 1) = %p errno %d", p, errno);
	like_glibc_aligned(libc);
	dlclose(libc);
}

/* ----------------------------------------------------- mallinfo2, mallinfo */

/* The figures' own identities: the heap is what is in use and what is free in it. */
static void check_mallinfo2(const struct mallinfo2 *m, const char *when)
{
	CHECK(m->arena > 0 && m->uordblks > 0 && m->uordblks + m->fordblks == m->arena &&
		      m->keepcost <= m->fordblks,
	      "mallinfo2 %s: arena %zu uordblks %zu fordblks %zu keepcost %zu", when, m->arena,
	      m->uordblks, m->fordblks, m->keepcost);
	CHECK(!m->hblks == !m->hblkhd && m->hblkhd >= m->hblks * (32ul << 20),
	      "mallinfo2 %s: hblks %zu hblkhd %zu", when, m->hblks, m->hblkhd);
	CHECK(!m->ordblks && !m->smblks && !m->usmblks && !m->fsmblks,
	      "mallinfo2 %s: a field documented as 0 is not", when);
}

/*
 * Issue 35 item 7: the drop-in's mallinfo2() (and mallinfo()) are uslab's
 * figures, not glibc's zeros: objects in use counted in uordblks, freed
 * and trimmed ones out of it, large objects in the heap, huge ones in
 * hblks and hblkhd.
 */
static void test_mallinfo(void)
{
	enum { N = 20000, SIZE = 200 };
	static void *obj[N];
	struct mallinfo2 m0, m1, m2, m3;
	Dl_info info;
	void *big, *huge;

	CHECK(dladdr(dlsym(RTLD_DEFAULT, "mallinfo2"), &info) && info.dli_fname &&
		      strstr(info.dli_fname, "libuslab-malloc"),
	      "mallinfo2 resolves to %s, not libuslab-malloc", info.dli_fname);
	malloc_trim(0);
	m0 = mallinfo2();
	check_mallinfo2(&m0, "at start");
	CHECK(m0.keepcost < (1ul << 20), "mallinfo2 after malloc_trim: keepcost %zu", m0.keepcost);

	/* 20000 objects of 200 bytes (class 208) in use. */
	for (int i = 0; i < N; i++) {
		obj[i] = malloc(SIZE);
		CHECK(obj[i], "malloc(%d)", SIZE);
		memset(obj[i], 1, SIZE);
	}
	m1 = mallinfo2();
	check_mallinfo2(&m1, "with 20000 objects");
	CHECK(m1.uordblks >= m0.uordblks + (size_t)N * SIZE - (1ul << 20) &&
		      m1.uordblks <= m0.uordblks + (size_t)N * 256 + (1ul << 20),
	      "uordblks %zu -> %zu with %d objects of %d bytes", m0.uordblks, m1.uordblks, N, SIZE);
	CHECK(m1.arena >= m0.arena + (size_t)N * SIZE - (1ul << 20), "arena %zu -> %zu", m0.arena,
	      m1.arena);
	CHECK(m1.hblks == m0.hblks && m1.hblkhd == m0.hblkhd, "hblks changed by small objects");

	/* A large object (pages of the heap) and a huge one (a mapping of its own). */
	big = malloc(3ul << 20);
	huge = malloc(100ul << 20);
	CHECK(big && huge, "malloc(3 MiB), malloc(100 MiB)");
	m2 = mallinfo2();
	check_mallinfo2(&m2, "with a large and a huge object");
	CHECK(m2.uordblks >= m1.uordblks + (3ul << 20) && m2.uordblks <= m1.uordblks + (4ul << 20),
	      "uordblks %zu -> %zu with a 3 MiB object", m1.uordblks, m2.uordblks);
	CHECK(m2.hblks == m1.hblks + 1 && m2.hblkhd >= m1.hblkhd + (100ul << 20) &&
		      m2.hblkhd <= m1.hblkhd + (101ul << 20),
	      "hblks %zu -> %zu, hblkhd %zu -> %zu with a 100 MiB object", m1.hblks, m2.hblks,
	      m1.hblkhd, m2.hblkhd);
	/* mallinfo(): the same figures in ints (nothing allocated in between). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	struct mallinfo mi = mallinfo();
#pragma GCC diagnostic pop
	m3 = mallinfo2();
	CHECK((size_t)mi.uordblks == m3.uordblks && (size_t)mi.hblkhd == m3.hblkhd &&
		      (size_t)mi.hblks == m3.hblks && mi.arena > 0,
	      "mallinfo: uordblks %d hblkhd %d hblks %d, mallinfo2's %zu %zu %zu", mi.uordblks,
	      mi.hblkhd, mi.hblks, m3.uordblks, m3.hblkhd, m3.hblks);

	/* Freed and trimmed: back where it started, the freed pages given back. */
	free(big);
	free(huge);
	for (int i = 0; i < N; i++)
		free(obj[i]);
	malloc_trim(0);
	m3 = mallinfo2();
	check_mallinfo2(&m3, "after free and malloc_trim");
	CHECK(m3.uordblks <= m0.uordblks + (256ul << 10), "uordblks %zu at start, %zu after free",
	      m0.uordblks, m3.uordblks);
	CHECK(m3.hblks == m0.hblks && m3.hblkhd == m0.hblkhd, "hblks %zu -> %zu after free",
	      m0.hblks, m3.hblks);
	CHECK(m3.keepcost < (1ul << 20) && m3.arena < m1.arena - (size_t)N * SIZE / 2,
	      "after malloc_trim: keepcost %zu, arena %zu (%zu with the objects)", m3.keepcost,
	      m3.arena, m1.arena);
}

/* ----------------------------------------------- the C library's own mallocs */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static void test_libc(void)
{
	char path[] = "/tmp/uslab-preload-XXXXXX", *line = NULL, *s;
	size_t cap = 0, total = 0;
	uint64_t seed = 5;
	ssize_t len;
	FILE *f;
	int fd;

	s = strdup("uslab malloc drop-in");
	CHECK(s && owns(s) && !strcmp(s, "uslab malloc drop-in"), "strdup");
	free(s);
	s = strndup("0123456789", 4);
	CHECK(s && owns(s) && !strcmp(s, "0123"), "strndup");
	free(s);
	CHECK(asprintf(&s, "%d-%s-%.3f", 42, "x", 1.5) > 0 && owns(s) && !strcmp(s, "42-x-1.500"),
	      "asprintf");
	free(s);

	/* A file of lines up to 200 KB, through fopen/fprintf and getline. */
	fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	f = fdopen(fd, "w");
	CHECK(f, "fdopen");
	for (int i = 0; i < 60; i++) {
		size_t n = (size_t)i * i * 55;

		fprintf(f, "%d:", i);
		for (size_t j = 0; j < n; j++)
			fputc('a' + (int)((i + j) % 26), f);
		fputc('\n', f);
		total += n;
	}
	CHECK(fclose(f) == 0, "fclose");
	f = fopen(path, "r");
	CHECK(f, "fopen %s", path);
	for (int i = 0; (len = getline(&line, &cap, f)) >= 0; i++) {
		size_t n = (size_t)i * i * 55;
		char *body = strchr(line, ':');

		CHECK(owns(line), "getline's buffer not uslab's");
		CHECK(atoi(line) == i && body && (size_t)len == (size_t)(body - line) + n + 2,
		      "line %d: %zd bytes", i, len);
		for (size_t j = 0; j < n; j++)
			CHECK(body[1 + j] == 'a' + (int)((i + j) % 26), "line %d byte %zu", i, j);
		total -= n;
	}
	CHECK(total == 0, "getline: %zu bytes missing", total);
	free(line);
	fclose(f);
	unlink(path);

	/* open_memstream grows its buffer with realloc. */
	char *buf;
	size_t size;
	f = open_memstream(&buf, &size);
	CHECK(f, "open_memstream");
	for (int i = 0; i < 20000; i++)
		fprintf(f, "%05d,", i);
	fclose(f);
	CHECK(size == 120000 && owns(buf) && !strncmp(buf + 6 * 12345, "12345,", 6),
	      "open_memstream: %zu bytes", size);
	free(buf);

	/* qsort takes a temporary array from malloc for large inputs. */
	enum { N = 1 << 20 };
	uint32_t *a = malloc(N * sizeof(*a));
	uint64_t sum = 0, sum2 = 0;
	CHECK(a, "malloc");
	for (int i = 0; i < N; i++) {
		a[i] = (uint32_t)rnd_next(&seed);
		sum += a[i];
	}
	qsort(a, N, sizeof(*a), cmp_u32);
	for (int i = 0; i < N; i++) {
		CHECK(i == 0 || a[i - 1] <= a[i], "qsort order at %d", i);
		sum2 += a[i];
	}
	CHECK(sum == sum2, "qsort lost elements");
	free(a);
}

/* ---------------------------- threads that exit while others use their objects */

struct hobj {
	struct hobj *next;
	uint64_t seed;
	size_t size;
	unsigned char data[];
};

#define HAND_WAVES 12
#define HAND_PRODUCERS 3
#define HAND_OBJS 1500
#define HAND_BACKLOG 2048

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct hobj *head;
	unsigned long pushed, consumed, freed_outliving;
	atomic_int live_producers;
} hq = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void *producer(void *arg)
{
	uint64_t id = (uintptr_t)arg, s = id + 1;
	struct hobj *batch = NULL;
	unsigned long n = 0, checks = 0;
	void *churn[64] = { 0 };

	for (int i = 0; i < HAND_OBJS; i++) {
		uint64_t r = rnd_next(&s);
		size_t size = r % 128 == 0 ? 32769 + r % 150000 : 1 + r % 1500;
		struct hobj *o = malloc(sizeof(*o) + size);

		CHECK_COUNTED(checks, o, "producer malloc(%zu)", size);
		o->seed = id * 100000 + (uint64_t)i;
		o->size = size;
		fill(o->data, size, o->seed);
		o->next = batch;
		batch = o;
		n++;
		/* Objects of its own, some still cached when it exits. */
		int k = (int)((r >> 32) % 64);
		free(churn[k]);
		churn[k] = malloc(r % 700 + 1);
		if (n % 50 == 0 || i == HAND_OBJS - 1) {
			pthread_mutex_lock(&hq.lock);
			struct hobj *last = batch;
			while (last->next)
				last = last->next;
			last->next = hq.head;
			hq.head = batch;
			hq.pushed += n;
			pthread_cond_signal(&hq.cond);
			pthread_mutex_unlock(&hq.lock);
			batch = NULL;
			n = 0;
		}
	}
	for (int k = 0; k < 32; k++)
		free(churn[k]);
	/* The other half leaks to the survivor: freed there after this thread is gone. */
	pthread_mutex_lock(&hq.lock);
	for (int k = 32; k < 64; k++) {
		if (churn[k]) {
			struct hobj *o = realloc(churn[k], sizeof(*o) + 8);

			CHECK_COUNTED(checks, o, "realloc");
			o->seed = id * 100000 + 99999;
			o->size = 8;
			fill(o->data, 8, o->seed);
			o->next = hq.head;
			hq.head = o;
			hq.pushed++;
		}
	}
	atomic_fetch_sub(&hq.live_producers, 1);
	pthread_cond_signal(&hq.cond);
	pthread_mutex_unlock(&hq.lock);
	return NULL;
}

/* The survivor: checks and frees every object, holding a backlog of them. */
static void *survivor(void *arg)
{
	static struct hobj *backlog[HAND_BACKLOG];
	unsigned long consumed = 0, checks = 0, slot = 0;
	(void)arg;

	pthread_mutex_lock(&hq.lock);
	for (;;) {
		while (!hq.head && atomic_load(&hq.live_producers) > 0)
			pthread_cond_wait(&hq.cond, &hq.lock);
		struct hobj *list = hq.head;
		hq.head = NULL;
		if (!list && atomic_load(&hq.live_producers) == 0)
			break;
		pthread_mutex_unlock(&hq.lock);
		while (list) {
			struct hobj *o = list, *old = backlog[slot % HAND_BACKLOG];

			list = o->next;
			backlog[slot++ % HAND_BACKLOG] = o;
			if (old) {
				size_t bad = mismatch(old->data, 0, old->size, old->seed);

				CHECK_COUNTED(checks, bad == SIZE_MAX,
					      "object %llu (%zu bytes) byte %zu changed",
					      (unsigned long long)old->seed, old->size, bad);
				free(old);
				consumed++;
			}
		}
		pthread_mutex_lock(&hq.lock);
	}
	pthread_mutex_unlock(&hq.lock);
	/* The backlog outlived every producer. */
	for (unsigned long i = 0; i < HAND_BACKLOG; i++) {
		struct hobj *o = backlog[i];

		if (o) {
			CHECK_COUNTED(checks, mismatch(o->data, 0, o->size, o->seed) == SIZE_MAX,
				      "object %llu outliving its thread changed",
				      (unsigned long long)o->seed);
			free(o);
			consumed++;
		}
	}
	hq.consumed = consumed;
	return (void *)(uintptr_t)checks;
}

static void test_exiting_threads(void)
{
	pthread_t surv, prod[HAND_PRODUCERS];
	void *checks;

	/* All producers of all waves count as live until each exits. */
	atomic_store(&hq.live_producers, HAND_WAVES * HAND_PRODUCERS);
	CHECK(pthread_create(&surv, NULL, survivor, NULL) == 0, "pthread_create");
	for (int w = 0; w < HAND_WAVES; w++) {
		for (int t = 0; t < HAND_PRODUCERS; t++)
			CHECK(pthread_create(&prod[t], NULL, producer,
					     (void *)(uintptr_t)(w * HAND_PRODUCERS + t)) == 0,
			      "pthread_create");
		for (int t = 0; t < HAND_PRODUCERS; t++)
			pthread_join(prod[t], NULL);
	}
	pthread_join(surv, &checks);
	test_checks += (uintptr_t)checks;
	CHECK(hq.consumed == hq.pushed && hq.pushed >= HAND_WAVES * HAND_PRODUCERS * HAND_OBJS,
	      "pushed %lu, consumed %lu", hq.pushed, hq.consumed);
}

/* ------------------------------------------- pthread_key destructors, exit */

struct kval {
	int round;
	size_t size;
	unsigned char data[];
};

static pthread_key_t key_early, key_late;
static atomic_int dtor_calls, dtor_bad;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kval *kept[64];
static int nkept;

static struct kval *kval_new(int round, size_t size)
{
	struct kval *v = malloc(sizeof(*v) + size);

	if (v) {
		v->round = round;
		v->size = size;
		fill(v->data, size, (uint64_t)round * 1000 + size);
	}
	return v;
}

static bool kval_ok(const struct kval *v)
{
	return mismatch(v->data, 0, v->size, (uint64_t)v->round * 1000 + v->size) == SIZE_MAX;
}

/* Checks and frees its value, allocates and frees, sets a new value twice. */
static void key_dtor(void *arg, pthread_key_t key)
{
	struct kval *v = arg;
	void *tmp[50];

	atomic_fetch_add(&dtor_calls, 1);
	if (!kval_ok(v))
		atomic_fetch_add(&dtor_bad, 1);
	for (int i = 0; i < 50; i++) {
		tmp[i] = malloc((size_t)i * 97 + 1);
		if (!tmp[i])
			atomic_fetch_add(&dtor_bad, 1);
		else
			memset(tmp[i], i, (size_t)i * 97 + 1);
	}
	for (int i = 0; i < 50; i++)
		free(tmp[i]);
	if (v->round < 2) {
		/* Another destructor round, with a value allocated now. */
		struct kval *n = kval_new(v->round + 1, v->size * 3 + 40000 * (v->round == 0));

		if (!n || pthread_setspecific(key, n))
			atomic_fetch_add(&dtor_bad, 1);
	} else {
		/* One object allocated in the destructor outlives the thread. */
		struct kval *k = kval_new(7, 777);

		pthread_mutex_lock(&kept_lock);
		if (k && nkept < 64)
			kept[nkept++] = k;
		else
			atomic_fetch_add(&dtor_bad, 1);
		pthread_mutex_unlock(&kept_lock);
	}
	v = realloc(v, v->size + 10);
	free(v);
}

static void dtor_early(void *v)
{
	key_dtor(v, key_early);
}

static void dtor_late(void *v)
{
	key_dtor(v, key_late);
}

static void *key_thread(void *arg)
{
	size_t size = (uintptr_t)arg;

	pthread_setspecific(key_early, kval_new(0, size));
	pthread_setspecific(key_late, kval_new(0, size + 1));
	for (int i = 0; i < 1000; i++)
		free(malloc((size_t)i % 300 + 1));
	return NULL;
}

static void test_key_destructors(void)
{
	enum { T = 16 };
	pthread_t t[T];

	/* Two keys, both created after uslab's own (library start-up). */
	CHECK(pthread_key_create(&key_early, dtor_early) == 0, "pthread_key_create");
	CHECK(pthread_key_create(&key_late, dtor_late) == 0, "pthread_key_create");
	for (int i = 0; i < T; i++)
		CHECK(pthread_create(&t[i], NULL, key_thread, (void *)(uintptr_t)(i * 13 + 1)) == 0,
		      "pthread_create");
	for (int i = 0; i < T; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&dtor_bad) == 0, "%d destructor failures", atomic_load(&dtor_bad));
	CHECK(atomic_load(&dtor_calls) == T * 2 * 3, "%d destructor calls, not %d",
	      atomic_load(&dtor_calls), T * 2 * 3);
	CHECK(nkept == T * 2, "%d objects kept", nkept);
	for (int i = 0; i < nkept; i++) {
		CHECK(owns(kept[i]) && kval_ok(kept[i]), "object from a destructor changed");
		free(kept[i]);
	}
	pthread_key_delete(key_early);
	pthread_key_delete(key_late);
}

/* ----------------------------------------------- fork, threads allocating */

#define FORKS 100
#define FORK_THREADS 2

static atomic_bool fork_stop;
static void *pre_fork[256]; /* the parent's, checked and half freed by each child */
#define PRE_FORK_SIZE(i) ((size_t)(i)*5 + 1)

static void *fork_worker(void *arg)
{
	uint64_t s = (uintptr_t)arg + 1;
	void *slot[128] = { 0 };
	unsigned long checks = 0;

	for (unsigned long n = 0; !atomic_load(&fork_stop); n++) {
		uint64_t r = rnd_next(&s);
		int k = (int)(r % 128);
		size_t size = (r >> 8) % 64 == 0 ? 40000 + (r >> 16) % 100000 : (r >> 8) % 2000 + 8;

		if (slot[k]) {
			CHECK_COUNTED(checks, *(uint64_t *)slot[k] == (uint64_t)(uintptr_t)slot[k],
				      "fork worker object changed");
			free(slot[k]);
		}
		slot[k] = malloc(size);
		CHECK_COUNTED(checks, slot[k], "malloc(%zu)", size);
		*(uint64_t *)slot[k] = (uint64_t)(uintptr_t)slot[k];
		if (n % 64 == 0)
			usleep(100); /* leave the two CPUs to the forks */
	}
	for (int k = 0; k < 128; k++)
		free(slot[k]);
	return NULL;
}

static void *child_thread(void *arg)
{
	void *p[100];

	for (int i = 0; i < 100; i++) {
		p[i] = malloc((size_t)i * 50 + 1);
		if (!p[i])
			return arg;
		memset(p[i], i, (size_t)i * 50 + 1);
	}
	for (int i = 0; i < 100; i++)
		free(p[i]);
	return NULL;
}

/* The child: every object of the parent it inherited, malloc, free, a thread. */
static int fork_child(int round)
{
	pthread_t t;
	void *ret = (void *)1;

	alarm(20); /* a hang in the child kills it */
	for (int i = 0; i < 256; i++) {
		if (mismatch(pre_fork[i], 0, PRE_FORK_SIZE(i), (uint64_t)i) != SIZE_MAX)
			return 2;
		if (i % 2 == round % 2)
			free(pre_fork[i]);
	}
	for (int i = 0; i < 200; i++) {
		size_t n = (size_t)(i * 131 + round) % 5000 + 1;
		char *p = malloc(n);

		if (!p || !owns(p))
			return 3;
		memset(p, 'c', n);
		p = realloc(p, n * 2);
		if (!p || p[n - 1] != 'c')
			return 4;
		free(p);
	}
	if (pthread_create(&t, NULL, child_thread, NULL) || pthread_join(t, &ret) || ret)
		return 5;
	return 0;
}

static void test_fork(void)
{
	pthread_t t[FORK_THREADS];

	for (int i = 0; i < 256; i++) {
		pre_fork[i] = malloc(PRE_FORK_SIZE(i));
		CHECK(pre_fork[i], "malloc");
		fill(pre_fork[i], PRE_FORK_SIZE(i), (uint64_t)i);
	}
	for (int i = 0; i < FORK_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, fork_worker, (void *)(uintptr_t)i) == 0,
		      "pthread_create");
	fflush(NULL);
	for (int round = 0; round < FORKS; round++) {
		int status;
		pid_t pid = fork();

		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			exit(fork_child(round)); /* exit(): atexit handlers and all */
		CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "fork %d: child status %#x (exit %d, signal %d)", round, status,
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		/* The parent goes on allocating between forks. */
		free(malloc((size_t)round * 1000 + 1));
	}
	atomic_store(&fork_stop, true);
	for (int i = 0; i < FORK_THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 256; i++) {
		CHECK(mismatch(pre_fork[i], 0, PRE_FORK_SIZE(i), (uint64_t)i) == SIZE_MAX,
		      "parent's object %d changed by the children", i);
		free(pre_fork[i]);
	}
}

int main(void)
{
	RUN(test_preload_active);
	RUN(test_before_main);
	/* First: forks of a small process are quicker (exit frees less). */
	RUN(test_fork);
	RUN(test_malloc_free);
	RUN(test_calloc);
	RUN(test_realloc);
	RUN(test_reallocarray);
	RUN(test_posix_memalign);
	RUN(test_aligned_alloc);
	RUN(test_memalign);
	RUN(test_valloc_pvalloc);
	RUN(test_usable_size);
	RUN(test_alignment16);
	RUN(test_huge);
	RUN(test_like_glibc);
	RUN(test_mallinfo);
	RUN(test_libc);
	RUN(test_exiting_threads);
	RUN(test_key_destructors);
	return 0;
}
