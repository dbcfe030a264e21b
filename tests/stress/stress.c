// SPDX-License-Identifier: MIT
/*
 * stress.c - multi-threaded, content-checking stress test in the style of
 * mimalloc's test-stress.
 *
 *	stress [THREADS [SCALE [ITER]]]	(defaults 4 50 10)
 *
 * Every round starts THREADS threads; each allocates objects from several
 * caches of different sizes (singly and in bulk bursts), stamps every word,
 * and swaps objects with the other threads through a shared slot array
 * with an atomic exchange; a
 * thread frees only objects another thread allocated (checked: over 90% of
 * frees; singly, or in bulk through a NULL cache as kfree_bulk does, or
 * through an on-stack free batch), and leaves what it holds at the end to
 * the next round's thread. Objects of the 64-byte cache are allocated from
 * and freed into a magazine each thread owns (uslab/magazine.h).
 * One object in five comes from uslab_kmalloc() with a random size (8 B
 * to 4.7 KiB, now and then a large object of up to 200 KiB) and is freed
 * with uslab_kfree(), or with the others in a kfree_bulk or a free batch.
 * Objects are verified word by word before every free. The threads exit at
 * the end of each round (their sheaves go back at exit) and new ones start
 * the next round; the caches live across rounds. Seeds are deterministic:
 * round * THREADS + thread.
 *
 * With USLAB_FAILSLAB set, an allocation that fails with ENOMEM (injected)
 * is retried; the accounting below must still hold.
 *
 * At the end every object is accounted for: after the slot array is freed,
 * uslab_thread_flush() and uslab_cache_shrink(), active_objs and num_slabs
 * are 0 for every cache and every kmalloc class, every cache destroys
 * cleanly, no large object is left, and (outside
 * sanitizers) the resident memory is back near where it started.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uslab.h>

#include "../test.h"

static const size_t sizes[] = { 8, 24, 64, 200, 512, 1500, 4096, 40000 };
#define NCACHES (sizeof(sizes) / sizeof(sizes[0]))
/* Header index of a kmalloc'd object: its size is in word 1. */
#define KM NCACHES

static struct uslab_cache *caches[NCACHES];
static unsigned int threads = 4, scale = 50, iter = 10;
static _Atomic(uint64_t *) *transfer;
static size_t ntransfer;
static _Atomic unsigned long allocs, frees, cross_frees;
static bool failslab; /* USLAB_FAILSLAB is set: ENOMEM is retried */

/* Word 0 names the cache and the size; every word depends on the address. */
static uint64_t word(const void *obj, size_t i)
{
	return ((uintptr_t)obj ^ 0x5bd1e995u) * 0x9e3779b97f4a7c15ull + i;
}

/* Each worker's magazine for caches[MAG_CACHE] (NULL outside workers). */
#define MAG_CACHE 2
static __thread struct uslab_magazine *mag;

static uint64_t *obj_alloc(uint64_t *seed, uintptr_t tid)
{
	uint64_t r = rnd_next(seed) % 1000;
	/* Mostly small objects, sometimes big ones (as mimalloc's test). */
	size_t k = r < 900 ? r % 4 : r < 990 ? 4 + r % 3 : 7, words, first = 1;
	uint64_t *o;

	if (rnd_next(seed) % 5 == 0) {
		/* kmalloc of a random size: 8 B..4.7 KiB, or a large object. */
		k = KM;
		words = r < 995 ? 2 + rnd_next(seed) % 600 : 5000 + rnd_next(seed) % 20000;
		o = uslab_kmalloc(words * 8);
		if (o && uslab_ksize(o) < words * 8) {
			fprintf(stderr, "FAIL: kmalloc(%zu): usable %zu\n", words * 8,
				uslab_ksize(o));
			exit(1);
		}
	} else {
		words = sizes[k] / 8;
		o = k == MAG_CACHE && mag ? uslab_magazine_alloc(mag) :
					    uslab_cache_alloc(caches[k]);
	}
	if (!o && errno == ENOMEM && failslab)
		return obj_alloc(seed, tid); /* a failure injected on purpose: again */
	if (!o) {
		fprintf(stderr, "FAIL: alloc from cache %zu: errno %d\n", k, errno);
		exit(1);
	}
	o[0] = k | (uint64_t)tid << 8;
	if (k == KM)
		o[first++] = words;
	for (size_t i = first; i < words; i++)
		o[i] = word(o, i);
	allocs++;
	return o;
}

/* Verify an object about to be freed; return its cache index. */
static size_t obj_check(uint64_t *o, uintptr_t tid)
{
	size_t k, words;

	k = o[0] & 0xff;
	frees++;
	if (o[0] >> 8 != tid)
		cross_frees++;
	if (k > KM || (k == KM && (o[1] < 2 || o[1] >= 25000))) {
		fprintf(stderr, "FAIL: object %p: header %#llx\n", (void *)o,
			(unsigned long long)k);
		exit(1);
	}
	words = k == KM ? o[1] : sizes[k] / 8;
	for (size_t i = k == KM ? 2 : 1; i < words; i++) {
		if (o[i] != word(o, i)) {
			fprintf(stderr, "FAIL: object %p of %zu bytes: word %zu is %#llx\n",
				(void *)o, words * 8, i, (unsigned long long)o[i]);
			exit(1);
		}
	}
	memset(o, 0xdd, words * 8); /* a later reader of a stale copy fails */
	return k;
}

static void obj_free(uint64_t *o, uintptr_t tid)
{
	size_t k;

	if (!o)
		return;
	k = obj_check(o, tid);
	if (k == KM)
		uslab_kfree(o);
	else if (k == MAG_CACHE && mag)
		uslab_magazine_free(mag, o);
	else
		uslab_cache_free(caches[k], o);
}

/* Stamp an object allocated by a bulk call. */
static uint64_t *obj_stamp(uint64_t *o, size_t k, uintptr_t tid)
{
	o[0] = k | (uint64_t)tid << 8;
	for (size_t i = 1; i < sizes[k] / 8; i++)
		o[i] = word(o, i);
	allocs++;
	return o;
}

static pthread_barrier_t start;
static uint64_t ***carry; /* per worker slot: objects left for the next round */
static size_t *carry_n;

static bool own(const uint64_t *o, uintptr_t tid)
{
	return o[0] >> 8 == tid;
}

/*
 * One thread of one round. It frees only objects another thread allocated:
 * its own go to the shared slots in exchange for whatever is there. What it
 * holds at the end is left to the thread of the next round in its position,
 * so objects also outlive the thread that allocated them.
 */
static void *worker(void *arg)
{
	uintptr_t tid = (uintptr_t)arg, me = tid % threads;
	uint64_t seed = tid * 0x9e3779b97f4a7c15ull + 0x1234567;
	size_t cap = 16 * scale + 16, n = carry_n[me];
	uint64_t **retained = carry[me];

	mag = uslab_magazine_create(caches[MAG_CACHE], 16 + (unsigned int)tid % 64, 0);
	if (!mag) {
		fprintf(stderr, "FAIL: magazine_create: errno %d\n", errno);
		exit(1);
	}
	pthread_barrier_wait(&start);
	for (unsigned long step = 0; step < 2000ul * scale; step++) {
		uint64_t r = rnd_next(&seed) % 100;
		size_t i = n ? rnd_next(&seed) % n : 0;
		size_t slot = rnd_next(&seed) % ntransfer;

		if (r < 45 && n < cap) {
			retained[n++] = obj_alloc(&seed, tid);
		} else if (r < 50 && n + 64 <= cap) {
			/* A burst from one cache with one bulk call. */
			size_t k = rnd_next(&seed) % 4, m = 1 + rnd_next(&seed) % 64;
			void *burst[64];

			size_t got;

			while ((got = uslab_cache_alloc_bulk(caches[k], m, burst)) == 0 &&
			       errno == ENOMEM && failslab)
				; /* injected: all or nothing, so again */
			if (got != m) {
				fprintf(stderr, "FAIL: alloc_bulk(%zu): errno %d\n", m, errno);
				exit(1);
			}
			for (size_t j = 0; j < m; j++)
				retained[n++] = obj_stamp(burst[j], k, tid);
		} else if (n == 0) {
			continue;
		} else if (r < 80 && !own(retained[i], tid)) {
			obj_free(retained[i], tid);
			retained[i] = retained[--n];
		} else if (r < 85 && step % 2) {
			/* The same through an on-stack free batch (mixed caches). */
			struct uslab_free_batch b;

			size_t m = 0;

			uslab_free_batch_init(&b, NULL);
			for (size_t j = 0; j < n && m < 100;) {
				if (!own(retained[j], tid)) {
					m++;
					obj_check(retained[j], tid);
					uslab_free_batch_add(&b, retained[j]);
					retained[j] = retained[--n];
				} else {
					j++;
				}
			}
			uslab_free_batch_flush(&b);
		} else if (r < 85) {
			/* Free other threads' objects of any cache in one kfree_bulk. */
			void *batch[16];
			size_t m = 0;

			for (size_t j = 0; j < n && m < 16;) {
				if (!own(retained[j], tid)) {
					obj_check(retained[j], tid);
					batch[m++] = retained[j];
					retained[j] = retained[--n];
				} else {
					j++;
				}
			}
			uslab_cache_free_bulk(NULL, m, batch);
		} else {
			/* Trade for what another thread left (maybe nothing). */
			uint64_t *theirs = atomic_exchange(&transfer[slot], retained[i]);

			if (theirs)
				retained[i] = theirs;
			else
				retained[i] = retained[--n];
		}
	}
	carry_n[me] = n;
	uslab_magazine_destroy(mag);
	mag = NULL;
	return NULL;
}

int main(int argc, char **argv)
{
	struct uslab_cache_stats st;
	long rss0, rss1;

	if (argc > 1)
		threads = (unsigned int)atoi(argv[1]);
	if (argc > 2)
		scale = (unsigned int)atoi(argv[2]);
	if (argc > 3)
		iter = (unsigned int)atoi(argv[3]);
	failslab = getenv("USLAB_FAILSLAB") != NULL;
	if (!threads || !scale || !iter) {
		fprintf(stderr, "usage: %s [THREADS [SCALE [ITER]]]\n", argv[0]);
		return 2;
	}
	ntransfer = 10 * scale;
	transfer = calloc(ntransfer, sizeof(*transfer));
	carry = calloc(threads, sizeof(*carry));
	carry_n = calloc(threads, sizeof(*carry_n));
	for (unsigned int i = 0; i < threads; i++)
		carry[i] = calloc(16 * scale + 16, sizeof(**carry));
	rss0 = rss_bytes();
	for (size_t k = 0; k < NCACHES; k++) {
		caches[k] = uslab_cache_create("stress", sizes[k], NULL, 0);
		CHECK(caches[k], "create cache of %zu bytes", sizes[k]);
	}

	pthread_barrier_init(&start, NULL, threads);
	for (unsigned int round = 0; round < iter; round++) {
		pthread_t *t = calloc(threads, sizeof(*t));

		for (unsigned int i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, worker,
				       (void *)(uintptr_t)(round * threads + i));
		for (unsigned int i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
		free(t);
	}

	for (size_t i = 0; i < ntransfer; i++)
		obj_free(atomic_exchange(&transfer[i], NULL), UINTPTR_MAX >> 8);
	for (unsigned int i = 0; i < threads; i++) {
		for (size_t j = 0; j < carry_n[i]; j++)
			obj_free(carry[i][j], UINTPTR_MAX >> 8);
		free(carry[i]);
	}
	uslab_thread_flush();
	for (size_t k = 0; k < NCACHES; k++) {
		CHECK(uslab_cache_shrink(caches[k]) == 0, "shrink");
		CHECK(uslab_cache_stats(caches[k], &st) == 0, "stats");
		printf("%s%zu B: %s%s", k ? ", " : "layouts: ", sizes[k],
		       uslab_layout_name(st.layout), k == NCACHES - 1 ? "\n" : "");
		CHECK(st.active_objs == 0 && st.num_slabs == 0,
		      "cache of %zu bytes: every object back (active %lu, slabs %lu)", sizes[k],
		      st.active_objs, st.num_slabs);
		CHECK(uslab_cache_destroy(caches[k]) == 0, "destroy cache of %zu bytes", sizes[k]);
	}
	if (failslab) {
		CHECK(uslab_failslab_count() > 0, "USLAB_FAILSLAB injected failures");
		printf("failslab: %lu allocations failed on purpose and were retried\n",
		       uslab_failslab_count());
	}
	for (size_t size = 1; size <= USLAB_KMALLOC_MAX_CACHE_SIZE;
	     size = uslab_kmalloc_class_size(size) + 1) {
		struct uslab_cache *c = uslab_kmalloc_cache(size);

		CHECK(uslab_cache_shrink(c) == 0 && uslab_cache_stats(c, &st) == 0, "stats");
		CHECK(st.active_objs == 0, "%s: every object back (active %lu)",
		      uslab_cache_name(c), st.active_objs);
	}
	CHECK(frees == allocs, "every object freed once: %lu allocated, %lu freed",
	      (unsigned long)allocs, (unsigned long)frees);
	CHECK(threads == 1 || cross_frees * 10 > frees * 9,
	      "most frees on another thread: %lu of %lu", (unsigned long)cross_frees,
	      (unsigned long)frees);
	rss1 = rss_bytes();
	if (!TEST_SANITIZED)
		CHECK(rss1 - rss0 < 16l << 20, "memory back with the OS: RSS %ld -> %ld KiB",
		      rss0 >> 10, rss1 >> 10);
	printf("ok stress threads=%u scale=%u iter=%u: %lu objects, %lu freed on another "
	       "thread, RSS %ld -> %ld KiB (%lu checks)\n",
	       threads, scale, iter, (unsigned long)allocs, (unsigned long)cross_frees, rss0 >> 10,
	       rss1 >> 10, test_checks);
	free(transfer);
	free(carry);
	free(carry_n);
	return 0;
}
