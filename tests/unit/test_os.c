// SPDX-License-Identifier: MIT
/*
 * test_os.c - os.c: slabs are naturally aligned, the registry maps every
 * byte of a live slab to its descriptor and nothing else, memory goes back
 * to the OS on free, arenas of an order are released when empty.
 */
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "../test.h"

static struct uslab_cache fake; /* only its address is used */

static void test_alignment_and_lookup(void)
{
	for (unsigned int order = 0; order <= SLAB_MAX_ORDER; order += 3) {
		size_t size = PAGE_SIZE << order;
		struct slab *s = os_slab_alloc(order), *t = os_slab_alloc(order);

		CHECK(s && t && s != t, "two slabs of order %u", order);
		CHECK((uintptr_t)s->base % size == 0, "order %u naturally aligned", order);
		CHECK(s->order == order && s->state == SLAB_NEW, "descriptor initialised");
		CHECK(os_slab_lookup(s->base) == NULL, "not live before a cache owns it");
		s->cache = &fake;
		CHECK(os_slab_lookup(s->base) == s, "first byte");
		CHECK(os_slab_lookup(s->base + size - 1) == s, "last byte");
		CHECK(os_slab_lookup(s->base + size / 2) == s, "middle");
		CHECK(os_slab_lookup(s->base - 1) != s, "byte before");
		s->base[0] = 1;
		s->base[size - 1] = 2;
		s->cache = NULL;
		os_slab_free(s);
		CHECK(os_slab_lookup(t->base) == NULL, "free slot of t is not live");
		os_slab_free(t);
	}
	CHECK(os_slab_lookup(NULL) == NULL && os_slab_lookup((void *)-1) == NULL,
	      "NULL and the top of the address space");
}

/* Pages of [base, base + len) resident in memory, by mincore(2). */
static size_t resident_pages(const void *base, size_t len)
{
	unsigned char vec[len / PAGE_SIZE];
	size_t n = 0;

	if (mincore((void *)base, len, vec) != 0)
		return 0; /* unmapped: nothing resident */
	for (size_t i = 0; i < len / PAGE_SIZE; i++)
		n += vec[i] & 1;
	return n;
}

/*
 * ASan poisons a freed slab, which makes its shadow (1/8 of its size)
 * resident; the process's RSS then cannot fall by the whole slab.
 */
#ifdef __SANITIZE_ADDRESS__
#define SHADOW_ALLOWANCE(len) ((long)(len) / 8)
#else
#define SHADOW_ALLOWANCE(len) 0l
#endif

static void test_memory_returned(void)
{
	struct slab *s = os_slab_alloc(10); /* 4 MiB */
	char *base;
	long r0, r1, r2;

	CHECK(s, "alloc order 10");
	r0 = rss_bytes();
	memset(s->base, 0x77, PAGE_SIZE << 10);
	r1 = rss_bytes();
	os_slab_free(s);
	CHECK(os_dirty_bytes() >= 4ul << 20, "a freed slab's pages are retained for reuse");
	CHECK(rss_bytes() >= r1 - (64 << 10), "still resident");
	s = os_slab_alloc(10);
	CHECK(s->base[0] == 0x77, "the retained slab comes back first, warm");
	base = s->base;
	CHECK(resident_pages(base, PAGE_SIZE << 10) == 1024, "all 1024 pages resident");
	os_slab_free(s);
	os_purge();
	CHECK(os_dirty_bytes() == 0, "purge returns everything");
	CHECK(resident_pages(base, PAGE_SIZE << 10) == 0, "no page of the slab resident");
	r2 = rss_bytes();
	/* (sanitizer runtimes allocate meanwhile: allow them 64 KiB) */
	CHECK(r1 - r0 >= (4l << 20) - (64 << 10), "touching 4 MiB is resident: %ld", r1 - r0);
	CHECK(r1 - r2 >= (4l << 20) - (64 << 10) - SHADOW_ALLOWANCE(4l << 20),
	      "purge gives it back: %ld", r1 - r2);
	s = os_slab_alloc(10);
	CHECK(s->base[0] == 0 && s->base[12345] == 0, "reused memory reads as zero");
	os_slab_free(s);
}

static void test_arena_release(void)
{
	/* Order 12 slabs are 16 MiB: four per 64 MiB arena. */
	struct slab *s[9];
	size_t before = os_arena_count();

	for (int i = 0; i < 9; i++) {
		s[i] = os_slab_alloc(12);
		CHECK(s[i], "alloc %d", i);
	}
	CHECK(os_arena_count() >= before + 2, "9 slabs need 3 arenas");
	for (int i = 0; i < 9; i++)
		os_slab_free(s[i]);
	os_purge();
	CHECK(os_arena_count() <= before + 1, "empty arenas unmapped but one: %zu -> %zu", before,
	      os_arena_count());
	/* A slab from a released arena's address is no longer ours. */
	CHECK(os_slab_lookup(s[0]->base) == NULL, "lookup after release");
}

/* Retained pages go back after USLAB_PURGE_DELAY_MS, on a later os call. */
static void test_purge_delay(void)
{
	struct slab *s = os_slab_alloc(4), *t;
	struct timespec ts = { 0, 30 * 1000 * 1000 };

	os_slab_free(s);
	CHECK(os_dirty_bytes() == PAGE_SIZE << 4, "retained");
	nanosleep(&ts, NULL); /* the delay is 10 ms */
	t = os_slab_alloc(5); /* any os call purges what is old */
	os_slab_free(t);
	CHECK(os_dirty_bytes() == PAGE_SIZE << 5, "the old one purged, the new one retained");
	os_purge();
}

int main(void)
{
	CHECK(uslab_init() == 0, "init");
	RUN(test_alignment_and_lookup);
	RUN(test_memory_returned);
	RUN(test_arena_release);
	RUN(test_purge_delay);
	return 0;
}
