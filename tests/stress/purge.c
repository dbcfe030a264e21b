// SPDX-License-Identifier: MIT
/*
 * purge.c - nothing the page heap gives back is in use: threads move
 * stamped objects between them while every free purges (run with
 * USLAB_PURGE_DELAY_MS=0: the heap returns a freed range at once,
 * synchronously) and one thread calls uslab_trim() now and then.
 *
 *	stress_purge [THREADS [OPS [SEED]]]	(defaults 4 100000 1)
 *
 * Objects come from six caches of slabs of four orders (24 B..100000 B),
 * from kmalloc's classes (up to 32 KiB), as large objects (33 KiB..1 MiB,
 * some of them grown and shrunk with uslab_krealloc() up to 8 MiB) and,
 * one in 20,000, as huge ones (above 32 MiB). Every object is stamped from its id and the
 * word's index (every word up to 64 KiB, then the first and last word of
 * each 64-byte line; a page purged under an object reads as zeros), put in
 * a shared slot array with an atomic exchange, and checked by whichever
 * thread takes it out: before every free, and when one thread resizes
 * another's object. Seeds: SEED * 1000 + thread.
 *
 * At the end every object is freed and every cache shrunk: the heap's used
 * bytes are back where they started, and with purging on every free no
 * page is retained even before the final uslab_trim().
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uslab.h>

#include "../test.h"

#define KiB (1ul << 10)
#define MiB (1ul << 20)
#define MAGIC 0x5eedc0de00000000ull

static const size_t sizes[] = { 24, 200, 1500, 5000, 40000, 100000 };
#define NCACHES (sizeof(sizes) / sizeof(sizes[0]))
enum { K_SMALL = NCACHES, K_LARGE, K_HUGE, K_NR };
#define NSLOTS 512
#define HOLD 32

static struct uslab_cache *caches[NCACHES];
static _Atomic(uint64_t *) slots[NSLOTS];
static unsigned int nthreads = 4;
static unsigned long ops = 100000;
static uint64_t seed0 = 1;
static _Atomic unsigned long n_alloc, n_free, n_cross, n_resize, n_huge, n_trim;
static pthread_barrier_t start;

/*
 * Header: word 0 MAGIC | kind << 24 | thread; word 1 the size in bytes;
 * word 2 the id. Then the stamps.
 */
static inline uint64_t stamp_word(uint64_t id, size_t i)
{
	uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xD6E8FEB86659FD93ull;

	return x ^ x >> 29;
}

static inline size_t stride_of(size_t bytes)
{
	return bytes <= 64 * KiB ? 1 : 8;
}

static void stamp_range(uint64_t *w, size_t bytes, uint64_t id, size_t from, size_t to)
{
	size_t st = stride_of(bytes);

	if (from < 3)
		from = 3;
	for (size_t i = from / st * st; i < to; i += st) {
		if (i >= from)
			w[i] = stamp_word(id, i);
		if (st > 1 && i + st - 1 >= from && i + st - 1 < to)
			w[i + st - 1] = stamp_word(id, i + st - 1);
	}
	if (to > from)
		w[to - 1] = stamp_word(id, to - 1);
}

/* Die with what is wrong with object @o (which @tid took out), or return its kind. */
static unsigned int check(const uint64_t *o, uintptr_t tid, const char *when)
{
	unsigned int kind = (unsigned int)(o[0] >> 24 & 0xff);
	size_t bytes = o[1], words = bytes / 8, st;
	uint64_t id = o[2];

	if ((o[0] & 0xffffffff00000000ull) != MAGIC || kind >= K_NR || bytes < 24 ||
	    (kind < NCACHES && bytes != sizes[kind] / 8 * 8) || bytes > 64 * MiB) {
		fprintf(stderr,
			"FAIL %s: object %p taken by thread %lu: header %#llx %#llx %#llx (a page "
			"purged under it reads as zeros)\n",
			when, (const void *)o, (unsigned long)tid, (unsigned long long)o[0],
			(unsigned long long)o[1], (unsigned long long)o[2]);
		exit(1);
	}
	st = stride_of(bytes);
	for (size_t i = 3; i < words; i++) {
		if (st > 1 && i % st != 0 && i % st != st - 1 && i != words - 1)
			continue;
		if (o[i] != stamp_word(id, i)) {
			fprintf(stderr,
				"FAIL %s: object %p (kind %u, %zu B, id %#llx, from thread %llu) word "
				"%zu (page +%zu) is %#llx, not %#llx\n",
				when, (const void *)o, kind, bytes, (unsigned long long)id,
				(unsigned long long)(o[0] & 0xffffff), i, i * 8 / 4096,
				(unsigned long long)o[i], (unsigned long long)stamp_word(id, i));
			exit(1);
		}
	}
	return kind;
}

static uint64_t *obj_new(uint64_t *s, uintptr_t tid, uint64_t id)
{
	uint64_t r = rnd_next(s) % 20000;
	unsigned int kind;
	size_t bytes;
	uint64_t *o;

	if (r < 12000) {
		kind = (unsigned int)(r % NCACHES);
		bytes = sizes[kind] / 8 * 8;
		o = uslab_cache_alloc(caches[kind]);
	} else if (r < 18800) {
		kind = K_SMALL;
		bytes = 24 + rnd_next(s) % (32 * KiB - 24) / 8 * 8;
		o = uslab_kmalloc(bytes);
	} else if (r < 19999) {
		/* (a multiple of 64 B: the last word is a stamped one after any resize) */
		kind = K_LARGE;
		bytes = 33 * KiB + rnd_next(s) % MiB / 64 * 64;
		o = uslab_kmalloc(bytes);
	} else {
		kind = K_HUGE;
		bytes = 32 * MiB + 4096 + rnd_next(s) % (4 * MiB) / 8 * 8;
		o = uslab_kmalloc(bytes);
		n_huge++;
	}
	if (!o) {
		fprintf(stderr, "FAIL: alloc of %zu B (kind %u): %s\n", bytes, kind,
			strerror(errno));
		exit(1);
	}
	o[0] = MAGIC | (uint64_t)kind << 24 | tid;
	o[1] = bytes;
	o[2] = id;
	stamp_range(o, bytes, id, 3, bytes / 8);
	n_alloc++;
	return o;
}

static void obj_free(uint64_t *o, uintptr_t tid)
{
	unsigned int kind;

	if (!o)
		return;
	kind = check(o, tid, "before its free");
	if ((o[0] & 0xffffff) != tid)
		n_cross++;
	n_free++;
	o[0] = 0; /* (a double free would fail the magic) */
	if (kind < NCACHES)
		uslab_cache_free(caches[kind], o);
	else
		uslab_kfree(o);
}

/* Resize a kmalloc'd large object another thread may have stamped: keep, check, restamp. */
static uint64_t *obj_resize(uint64_t *o, uint64_t *s, uintptr_t tid)
{
	size_t bytes = o[1], nb;
	uint64_t id = o[2];
	uint64_t *q;

	nb = rnd_next(s) % 2 ? bytes + bytes / 2 : bytes / 2;
	nb = nb < 33 * KiB ? 33 * KiB : nb > 8 * MiB ? 8 * MiB : nb / 64 * 64;
	/* Stamps depend on the size's stride: resize only within one stride class. */
	if (stride_of(nb) != stride_of(bytes))
		return o;
	q = uslab_krealloc(o, nb);
	if (!q) {
		fprintf(stderr, "FAIL: krealloc %zu -> %zu: %s\n", bytes, nb, strerror(errno));
		exit(1);
	}
	q[1] = nb < bytes ? nb : bytes;
	check(q, tid, "after krealloc (the part kept)");
	q[1] = nb;
	q[0] = MAGIC | (uint64_t)K_LARGE << 24 | tid;
	stamp_range(q, nb, id, bytes < nb ? bytes / 8 - 1 : nb / 8 - 1, nb / 8);
	n_resize++;
	return q;
}

static void *worker(void *arg)
{
	uintptr_t tid = (uintptr_t)arg;
	uint64_t s = seed0 * 1000 + tid, id = (uint64_t)tid << 40;
	uint64_t *hold[HOLD] = { 0 };

	pthread_barrier_wait(&start);
	for (unsigned long n = 0; n < ops; n++) {
		uint64_t r = rnd_next(&s) % 100;
		size_t k = rnd_next(&s) % NSLOTS;

		if (r < 70) {
			/* A new object into a slot; the one it displaces is freed here. */
			obj_free(atomic_exchange(&slots[k], obj_new(&s, tid, id++)), tid);
		} else if (r < 80) {
			/* Another thread's object taken out, checked, resized if large, put back. */
			uint64_t *o = atomic_exchange(&slots[k], NULL);

			if (o && check(o, tid, "taken out") == K_LARGE)
				o = obj_resize(o, &s, tid);
			obj_free(atomic_exchange(&slots[k], o), tid);
		} else if (r < 98) {
			/* Objects held a while by this thread. */
			size_t h = rnd_next(&s) % HOLD;

			obj_free(hold[h], tid);
			hold[h] = obj_new(&s, tid, id++);
		} else {
			uslab_thread_flush();
		}
		if (tid == 0 && n % 2000 == 1999) {
			uslab_trim();
			n_trim++;
		}
	}
	for (int h = 0; h < HOLD; h++)
		obj_free(hold[h], tid);
	return NULL; /* exits with objects in its sheaves */
}

int main(int argc, char **argv)
{
	struct uslab_heap_stats h0, h1, h2;
	struct uslab_cache_stats st;
	pthread_t *t;
	unsigned int orders = 0;

	if (argc > 1)
		nthreads = (unsigned int)atoi(argv[1]);
	if (argc > 2)
		ops = strtoul(argv[2], NULL, 0);
	if (argc > 3)
		seed0 = strtoull(argv[3], NULL, 0);
	if (!nthreads || !ops) {
		fprintf(stderr, "usage: %s [THREADS [OPS [SEED]]]\n", argv[0]);
		return 2;
	}
	CHECK(getenv("USLAB_PURGE_DELAY_MS") && !strcmp(getenv("USLAB_PURGE_DELAY_MS"), "0"),
	      "run with USLAB_PURGE_DELAY_MS=0 (purging on every free)");
	CHECK(uslab_heap_stats(&h0) == 0, "heap stats");
	for (size_t k = 0; k < NCACHES; k++) {
		caches[k] = uslab_cache_create("purge", sizes[k], NULL, 0);
		CHECK(caches[k], "create %zu B", sizes[k]);
		orders |= 1u << cache_stats(caches[k]).order;
	}
	CHECK(__builtin_popcount(orders) >= 4, "slabs of %d orders", __builtin_popcount(orders));
	pthread_barrier_init(&start, NULL, nthreads);
	t = calloc(nthreads, sizeof(*t));
	CHECK(t, "calloc");
	for (uintptr_t i = 0; i < nthreads; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create");
	for (unsigned int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	free(t);
	for (size_t k = 0; k < NSLOTS; k++)
		obj_free(atomic_exchange(&slots[k], NULL), UINTPTR_MAX >> 40);
	CHECK(n_alloc == n_free, "every object freed once: %lu allocated, %lu freed",
	      (unsigned long)n_alloc, (unsigned long)n_free);
	CHECK(nthreads == 1 || n_cross * 3 > n_free, "freed on another thread: %lu of %lu",
	      (unsigned long)n_cross, (unsigned long)n_free);
	uslab_thread_flush();
	for (size_t k = 0; k < NCACHES; k++) {
		CHECK(uslab_cache_shrink(caches[k]) == 0 && uslab_cache_stats(caches[k], &st) == 0,
		      "shrink");
		CHECK(st.active_objs == 0 && st.num_slabs == 0, "%zu B: active %lu, slabs %lu",
		      sizes[k], st.active_objs, st.num_slabs);
		CHECK(uslab_cache_destroy(caches[k]) == 0, "destroy");
	}
	for (size_t size = 1; size <= USLAB_KMALLOC_MAX_CACHE_SIZE;
	     size = uslab_kmalloc_class_size(size) + 1) {
		struct uslab_cache *c = uslab_kmalloc_cache(size);

		CHECK(uslab_cache_shrink(c) == 0 && uslab_cache_stats(c, &st) == 0, "stats");
		CHECK(st.active_objs == 0, "%s: active %lu", uslab_cache_name(c), st.active_objs);
	}
	CHECK(uslab_heap_stats(&h1) == 0, "heap stats");
	CHECK(h1.huge_objects == h0.huge_objects, "huge objects left: %llu",
	      (unsigned long long)h1.huge_objects);
	CHECK(h1.used_bytes <= h0.used_bytes + MiB, "used bytes %llu -> %llu",
	      (unsigned long long)h0.used_bytes, (unsigned long long)h1.used_bytes);
	CHECK(h1.retained_bytes == 0,
	      "USLAB_PURGE_DELAY_MS=0, every slab and object freed: %llu KiB retained",
	      (unsigned long long)h1.retained_bytes >> 10);
	CHECK(h1.madvise_calls > h0.madvise_calls && h1.purged_bytes > h0.purged_bytes,
	      "purged: madvise %llu, bytes %llu", (unsigned long long)h1.madvise_calls,
	      (unsigned long long)h1.purged_bytes);
	uslab_trim();
	CHECK(uslab_heap_stats(&h2) == 0 && h2.retained_bytes == 0, "after trim");
	printf("ok stress_purge threads=%u ops=%lu seed=%llu: %lu objects (%lu huge), %lu freed on "
	       "another thread, %lu resized, %lu trims; %llu madvise, %llu munmap, %llu MiB purged "
	       "(%lu checks)\n",
	       nthreads, ops, (unsigned long long)seed0, (unsigned long)n_alloc,
	       (unsigned long)n_huge, (unsigned long)n_cross, (unsigned long)n_resize,
	       (unsigned long)n_trim, (unsigned long long)(h2.madvise_calls - h0.madvise_calls),
	       (unsigned long long)(h2.munmap_calls - h0.munmap_calls),
	       (unsigned long long)(h2.purged_bytes - h0.purged_bytes) >> 20, test_checks);
	return 0;
}
