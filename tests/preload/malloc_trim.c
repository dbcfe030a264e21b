// SPDX-License-Identifier: MIT
/*
 * malloc_trim.c - malloc_trim() of libuslab-malloc.so (issue 24): run under
 * LD_PRELOAD=libuslab-malloc.so with USLAB_PURGE_DELAY_MS=600000 (nothing
 * purged by the decay while the test runs: what is freed stays retained
 * until the trim; tests/preload/CMakeLists.txt). malloc_trim resolves to
 * the preload's (not the C library's, which has the same contract and
 * would answer too); after 32 MiB are freed malloc_trim(0) returns 1 and
 * the resident set falls by most of them; a second call with nothing
 * freed returns 0; the pad argument is accepted (glibc's contract: 1 if
 * memory was released, else 0); it works from a thread whose memory was
 * freed by another; and realloc grows one buffer from 1 KiB to 100 MiB
 * and back, its contents kept at every step, then trimmed.
 *
 * Not linked with uslab: it reaches uslab only through the preload.
 * Compiled with -fno-builtin, so gcc keeps every call as written.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../test.h"

#define KiB (1ul << 10)
#define MiB (1ul << 20)

static int (*owns)(const void *p);

/* Word @i of buffer @id. */
static inline uint64_t stamp_word(uint64_t id, size_t i)
{
	uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xD6E8FEB86659FD93ull;

	return x ^ x >> 29;
}

static void stamp(void *p, size_t from, size_t to, uint64_t id)
{
	uint64_t *w = p;

	for (size_t i = from; i < to; i++)
		w[i] = stamp_word(id, i);
}

/* The first word of @p[0, @words) that lost its stamp, or SIZE_MAX (one word in 8 checked). */
static size_t bad_word(const void *p, size_t words, uint64_t id)
{
	const uint64_t *w = p;

	for (size_t i = 0; i < words; i += i < 8192 ? 1 : 8)
		if (w[i] != stamp_word(id, i))
			return i;
	if (words && w[words - 1] != stamp_word(id, words - 1))
		return words - 1;
	return SIZE_MAX;
}

static void test_preload_active(void)
{
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "malloc_trim");
	void *p;

	owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "uslab_owns");
	CHECK(owns != NULL, "uslab_owns not found: run under LD_PRELOAD=libuslab-malloc.so");
	CHECK(sym && dladdr(sym, &info) && info.dli_fname &&
		      strstr(info.dli_fname, "libuslab-malloc"),
	      "malloc_trim resolves to %s, not libuslab-malloc", sym ? info.dli_fname : "nothing");
	CHECK(sym == (void *)malloc_trim, "the program's malloc_trim is the preload's");
	p = malloc(100);
	CHECK(p && owns(p) == 1, "malloc(100) = %p not uslab's", p);
	free(p);
}

/* 32 MiB in objects of 64 B..1 MiB, touched; freed; then trimmed. */
static void test_trim(void)
{
	enum { N = 4096 };
	static void *p[N];
	size_t total = 0, n = 0;
	uint64_t s = 24;
	long rss0, rss1, rss2;
	int r, r2;

	malloc_trim(0);
	rss0 = rss_bytes();
	while (total < 32 * MiB && n < N) {
		uint64_t x = rnd_next(&s);
		size_t size = x % 4 == 0 ? 33 * KiB + x % MiB : 64 + x % 8000;

		p[n] = malloc(size);
		CHECK(p[n], "malloc(%zu)", size);
		memset(p[n], (int)(n & 0xff) | 1, size);
		total += size;
		n++;
	}
	rss1 = rss_bytes();
	for (size_t i = 0; i < n; i++)
		free(p[i]);
	/* (Nothing between the two calls: stdio's fopen and printf allocate and free.) */
	r = malloc_trim(0);
	r2 = malloc_trim(0);
	rss2 = rss_bytes();
	printf("   %zu objects, %zu KiB: RSS %ld -> %ld -> %ld KiB, malloc_trim(0) = %d, again %d\n",
	       n, total >> 10, rss0 >> 10, rss1 >> 10, rss2 >> 10, r, r2);
	CHECK(r == 1, "malloc_trim(0) after 32 MiB freed (retained: the decay is 10 min) = %d", r);
	CHECK(rss1 - rss2 >= (long)(24 * MiB), "malloc_trim gave back only %ld KiB of RSS",
	      (rss1 - rss2) >> 10);
	CHECK(r2 == 0, "a second malloc_trim(0) with nothing freed = %d", r2);
	/* The pad argument: accepted, the same contract. */
	for (int i = 0; i < 64; i++)
		free(malloc(100 * KiB + (size_t)i * 4096));
	r = malloc_trim(1 << 20);
	CHECK(r == 0 || r == 1, "malloc_trim(1 MiB) = %d", r);
	r = malloc_trim((size_t)-1);
	CHECK(r == 0 || r == 1, "malloc_trim(SIZE_MAX) = %d", r);
	CHECK(malloc_trim(0) == 0, "nothing left to give back");
}

/* A thread allocates; the main thread frees; the thread trims. */
static void *trim_thread(void *arg)
{
	void **p = arg;
	int r;

	for (int i = 0; i < 256; i++) {
		void *q = malloc(64 * KiB + (size_t)i * 100);

		if (!q)
			return (void *)1;
		memset(q, 7, 64 * KiB);
		__atomic_store_n(&p[i], q, __ATOMIC_RELEASE);
	}
	/* Wait for the main thread to free them (it sets p[0] to NULL when done). */
	while (__atomic_load_n(&p[0], __ATOMIC_ACQUIRE))
		usleep(1000);
	r = malloc_trim(0);
	return (void *)(intptr_t)(r == 1 ? 0 : 2);
}

static void test_trim_thread(void)
{
	static void *p[256];
	pthread_t t;
	void *ret;

	malloc_trim(0);
	p[0] = (void *)1;
	CHECK(pthread_create(&t, NULL, trim_thread, p) == 0, "pthread_create");
	/* Wait until the thread has allocated all of them (p[255] set). */
	while (!__atomic_load_n(&p[255], __ATOMIC_ACQUIRE))
		usleep(1000);
	for (int i = 255; i >= 0; i--) {
		void *q = __atomic_load_n(&p[i], __ATOMIC_ACQUIRE);

		CHECK(q && owns(q), "thread's object %d", i);
		free(q);
		if (i)
			p[i] = NULL;
	}
	__atomic_store_n(&p[0], NULL, __ATOMIC_RELEASE);
	CHECK(pthread_join(t, &ret) == 0, "join");
	CHECK(ret == NULL, "thread: %s",
	      ret == (void *)1 ? "malloc failed" :
				 "malloc_trim(0) after 16 MiB freed by another thread returned 0");
}

/* realloc of one buffer from 1 KiB to 100 MiB and back: contents kept. */
static void test_realloc_growth(void)
{
	size_t size = KiB, max = 100 * MiB;
	char *p = malloc(size);
	int r;

	CHECK(p, "malloc");
	stamp(p, 0, size / 8, 3);
	while (size < max) {
		size_t next = size + size / 3 + 8;
		char *q;

		next = next > max ? max : next / 8 * 8;
		q = realloc(p, next);
		CHECK(q && owns(q), "realloc %zu -> %zu", size, next);
		CHECK(bad_word(q, size / 8, 3) == SIZE_MAX, "realloc %zu -> %zu: word %zu changed",
		      size, next, bad_word(q, size / 8, 3));
		stamp(q, size / 8, next / 8, 3);
		p = q;
		size = next;
	}
	while (size > KiB) {
		size_t next = size / 2 / 8 * 8;
		char *q;

		if (next < KiB)
			next = KiB;
		q = realloc(p, next);
		CHECK(q && owns(q), "realloc %zu -> %zu", size, next);
		CHECK(bad_word(q, next / 8, 3) == SIZE_MAX, "realloc %zu -> %zu: word %zu changed",
		      size, next, bad_word(q, next / 8, 3));
		p = q;
		size = next;
	}
	free(p);
	r = malloc_trim(0);
	CHECK(r == 0 || r == 1, "malloc_trim = %d", r);
}

int main(void)
{
	RUN(test_preload_active);
	RUN(test_trim);
	RUN(test_trim_thread);
	RUN(test_realloc_growth);
	return 0;
}
