// SPDX-License-Identifier: MIT
/*
 * test_heap.c - the page heap under the slabs (issue 24): one scenario per
 * run, each in a fresh process, named by the first argument (the CTest
 * tests api_heap_<mode>, tests/CMakeLists.txt, give each its environment).
 *
 *   reuse    pages freed by a cache serve slabs of every other order and
 *            kmalloc's large objects: 48 MiB of slabs of one order filled,
 *            freed and shrunk, then 48 MiB of another order (four caches
 *            of four orders, large objects of 100 KiB and 1 MiB, the first
 *            cache again): the heap's mapped bytes never grow by more than
 *            one 64 MiB arena over what the first fill mapped. A heap
 *            keeping pages per order would need a new arena for each of
 *            the six later fills (at least +128 MiB by the third).
 *   rss      ~256 MiB in caches, large and huge objects, touched, freed,
 *            caches shrunk and destroyed, uslab_trim(): the resident set
 *            back within 5% of the start (+ RSS_SLACK), no page retained,
 *            purged bytes and madvise calls grown, a second trim finds
 *            nothing.
 *   decay    (USLAB_PURGE_DELAY_MS=50) freed pages are retained for the
 *            delay, then given back by the heap with no call of the
 *            program (no shrink either: it purges): retained bytes fall
 *            to 0 within 10 s.
 *   fork     40 forks while two threads allocate, free (and purge: the
 *            delay is 1 ms or 0) and trim; every child checks what it
 *            inherited, allocates, frees and trims (nothing retained
 *            after) and exits 0; the parent's objects intact.
 *   rlimit   under RLIMIT_AS (in a child; skipped under sanitizers):
 *            large, huge and cache allocations and a krealloc fail with
 *            ENOMEM and leave everything intact; after free-all and
 *            uslab_trim() the address space is back (a 128 MiB object
 *            fits); with the limit lifted 512 MiB fit.
 *   threads  64 threads allocate, free and hand objects to the main
 *            thread, then exit; after the main thread frees them and
 *            trims, the resident set is back within 5% (+ RSS_SLACK).
 *   grow     (first thing in the process: the object's neighbours are
 *            free) one object grown by krealloc from 40 KiB to 300 MiB (150
 *            under TSan) in steps of 1/4, its contents checked at every
 *            step, then shrunk back: grown in place at least once below
 *            32 MiB, with mremap at every growth step above it, and its
 *            tail given back (mremap or munmap) shrinking above it.
 *
 *	api_heap MODE [MiB]	(MiB: the size of the rss and threads workloads,
 *				 default 256; grow goes to MiB * 300 / 256)
 *
 * Contents are stamped with words that depend on an object's id and the
 * word's index, not its address (a purged page reads as zeros; a moved
 * object keeps its stamps), and checked before every free. Seeds are fixed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <uslab.h>

#include "../test.h"

#define KiB (1ul << 10)
#define MiB (1ul << 20)
#define PAGE 4096ul
/* The heap's arenas: the granule of its mapped bytes. */
#define ARENA (64 * MiB)
/* Objects above this have their own mapping (mremap). */
#define HUGE_MIN (32 * MiB)
/*
 * What the resident set may keep after everything is freed and trimmed,
 * beyond 5% of the start: the page heap's own metadata for the arenas it
 * mapped at the peak (a 64-byte descriptor per 4 KiB page is 1/64 of the
 * memory: 4 MiB for 256 MiB; uslab's slab descriptors are never unmapped),
 * the registry pages touched, and the per-thread tables. Small next to what
 * a missed purge leaves: a single retained arena is 64 MiB.
 */
#define RSS_SLACK (4 * MiB)

static size_t total_mib = 256;

/* ----------------------------------------------------------------- helpers */

static struct uslab_heap_stats heap(void)
{
	struct uslab_heap_stats h;

	memset(&h, 0xff, sizeof(h));
	CHECK(uslab_heap_stats(&h) == 0, "uslab_heap_stats: %s", strerror(errno));
	return h;
}

static void print_heap(const char *when, const struct uslab_heap_stats *h)
{
	printf("   %-22s mapped %llu MiB, used %llu KiB, retained %llu KiB, purged %llu MiB, "
	       "madvise %llu, munmap %llu, mremap %llu, grown in place %llu, arenas %llu, "
	       "huge %llu\n",
	       when, (unsigned long long)h->mapped_bytes >> 20,
	       (unsigned long long)h->used_bytes >> 10, (unsigned long long)h->retained_bytes >> 10,
	       (unsigned long long)h->purged_bytes >> 20, (unsigned long long)h->madvise_calls,
	       (unsigned long long)h->munmap_calls, (unsigned long long)h->mremap_calls,
	       (unsigned long long)h->grown_in_place, (unsigned long long)h->arenas,
	       (unsigned long long)h->huge_objects);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Address space of the process in bytes (first field of /proc/self/statm). */
static long vm_bytes(void)
{
	long pages = -1;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &pages) != 1)
		pages = -1;
	fclose(f);
	return pages * sysconf(_SC_PAGESIZE);
}

/* The mappings with more than 128 KiB resident (/proc/self/smaps): where RSS stayed. */
static void print_resident_maps(void)
{
	char line[512], map[512] = "";
	FILE *f = fopen("/proc/self/smaps", "r");
	unsigned long from, to, nsmall = 0;
	long kb, small = 0;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &from, &to) == 2) {
			snprintf(map, sizeof(map), "%s", line);
		} else if (sscanf(line, "Rss: %ld kB", &kb) == 1 && kb > 128) {
			fprintf(stderr, "   resident %6ld KiB: %s", kb, map);
		} else if (sscanf(line, "Rss: %ld kB", &kb) == 1 && kb) {
			small += kb;
			nsmall++;
		}
	}
	fprintf(stderr, "   resident %6ld KiB in %lu mappings of 128 KiB or less\n", small, nsmall);
	fclose(f);
}

/*
 * The resident set after a trim, against @limit: re-read for up to 2 s
 * while it is above (seen twice in ~30 runs of the 64-thread scenario
 * beside other tests, 6 and 13 MiB above; cause not found: the mappings
 * and the heap's figures are printed when it happens).
 */
static long rss_settled(long limit, const struct uslab_heap_stats *after_trim)
{
	long rss = rss_bytes();
	double t0 = now_ms();

	if (rss <= limit)
		return rss;
	print_resident_maps();
	while (rss > limit && now_ms() - t0 < 2000) {
		usleep(20000);
		rss = rss_bytes();
	}
	fprintf(stderr,
		"   RSS above %ld KiB after uslab_trim returned: %ld KiB %.0f ms later; the heap purged "
		"%llu KiB meanwhile\n",
		limit >> 10, rss >> 10, now_ms() - t0,
		(unsigned long long)(heap().purged_bytes - after_trim->purged_bytes) >> 10);
	return rss;
}

/* The test's own bookkeeping, outside both uslab and the C library's heap. */
static void *xmap(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap(%zu): %s", bytes, strerror(errno));
	return p;
}

static void xunmap(void *p, size_t bytes)
{
	CHECK(munmap(p, bytes) == 0, "munmap");
}

/* Word @i of object @id. */
static inline uint64_t stamp_word(uint64_t id, size_t i)
{
	uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xD6E8FEB86659FD93ull;

	return x ^ x >> 29;
}

/*
 * Step in words between the stamped words of an object of @bytes: every word
 * up to 64 KiB, then the first and last word of every 64-byte line up to
 * 1 MiB, of every 512-byte block above (every page has 16 of them; a
 * page-aligned end is a block's last word).
 */
static inline size_t stride_of(size_t bytes)
{
	return bytes <= 64 * KiB ? 1 : bytes <= MiB ? 8 : 64;
}

/* Stamp words [@from, @to) of @p (object @id, @bytes in all). */
static void stamp_range(void *p, size_t bytes, uint64_t id, size_t from, size_t to)
{
	uint64_t *w = p;
	size_t st = stride_of(bytes);

	for (size_t i = from / st * st; i < to; i += st) {
		if (i >= from)
			w[i] = stamp_word(id, i);
		if (st > 1 && i + st - 1 >= from && i + st - 1 < to)
			w[i + st - 1] = stamp_word(id, i + st - 1);
	}
	if (to > from)
		w[to - 1] = stamp_word(id, to - 1);
}

static void stamp(void *p, size_t bytes, uint64_t id)
{
	stamp_range(p, bytes, id, 0, bytes / 8);
}

/*
 * The first word of @p[0, @words) that lost its stamp (object @id, stamped
 * as an object of @bytes), or SIZE_MAX.
 */
static size_t bad_word(const void *p, size_t bytes, uint64_t id, size_t words)
{
	const uint64_t *w = p;
	size_t st = stride_of(bytes);

	for (size_t i = 0; i < words; i += st) {
		if (w[i] != stamp_word(id, i))
			return i;
		if (st > 1 && i + st - 1 < words && w[i + st - 1] != stamp_word(id, i + st - 1))
			return i + st - 1;
	}
	if (words && w[words - 1] != stamp_word(id, words - 1))
		return words - 1;
	return SIZE_MAX;
}

#define CHECK_STAMP(p, bytes, id, words, what)                                                     \
	do {                                                                                       \
		size_t bad_ = bad_word(p, bytes, id, words);                                       \
		CHECK(bad_ == SIZE_MAX,                                                            \
		      "%s: object %llu (%p, %zu B): word %zu is %#llx, not %#llx", what,           \
		      (unsigned long long)(id), (const void *)(p), (size_t)(bytes), bad_,          \
		      bad_ == SIZE_MAX ? 0ull : (unsigned long long)((const uint64_t *)(p))[bad_], \
		      bad_ == SIZE_MAX ? 0ull : (unsigned long long)stamp_word(id, bad_));         \
	} while (0)

/*
 * A batch of stamped objects of one cache, or of uslab_kmalloc() when
 * @c is NULL; its pointer array outside uslab and the C library's heap.
 */
struct batch {
	struct uslab_cache *c;
	size_t size, n;
	uint64_t id0;
	void **p;
};

static void batch_fill(struct batch *b, struct uslab_cache *c, size_t size, size_t n, uint64_t id0)
{
	b->c = c;
	b->size = size;
	b->n = n;
	b->id0 = id0;
	b->p = xmap(n * sizeof(void *) + 1);
	for (size_t i = 0; i < n; i++) {
		b->p[i] = c ? uslab_cache_alloc(c) : uslab_kmalloc(size);
		CHECK(b->p[i], "alloc %zu of %zu objects of %zu B: %s", i, n, size,
		      strerror(errno));
		stamp(b->p[i], size, id0 + i);
	}
}

static void batch_free(struct batch *b)
{
	if (!b->p)
		return;
	for (size_t i = 0; i < b->n; i++) {
		CHECK_STAMP(b->p[i], b->size, b->id0 + i, b->size / 8, "before its free");
		if (b->c)
			uslab_cache_free(b->c, b->p[i]);
		else
			uslab_kfree(b->p[i]);
	}
	xunmap(b->p, b->n * sizeof(void *) + 1);
	b->p = NULL;
}

/* Bytes of slabs of @c (whole slabs). */
static size_t slab_bytes(struct uslab_cache *c)
{
	struct uslab_cache_stats st = cache_stats(c);

	return st.num_slabs * st.pagesperslab * PAGE;
}

/* Objects of @c that fill @bytes of its slabs exactly. */
static size_t objs_for(struct uslab_cache *c, size_t bytes)
{
	struct uslab_cache_stats st = cache_stats(c);
	size_t slab = (size_t)st.pagesperslab * PAGE;

	return bytes / slab * st.objperslab;
}

static void shrink_all(struct uslab_cache *c)
{
	CHECK(uslab_cache_shrink(c) == 0, "shrink %s", uslab_cache_name(c));
	CHECK(cache_stats(c).num_slabs == 0, "%s: every slab back after shrink (%lu)",
	      uslab_cache_name(c), cache_stats(c).num_slabs);
}

/* Small objects kept for a whole scenario: one arena is never idle. */
static void *keep[16];

static void warm_up(void)
{
	struct uslab_cache *c = uslab_cache_create("warm-up", 200, NULL, 0);
	void *o;

	CHECK(c, "create");
	for (int i = 0; i < 16; i++) {
		keep[i] = uslab_kmalloc(64);
		CHECK(keep[i], "kmalloc");
		stamp(keep[i], 64, 1000000 + (uint64_t)i);
	}
	o = uslab_cache_alloc(c);
	CHECK(o, "alloc");
	uslab_cache_free(c, o);
	o = uslab_kmalloc(100 * KiB);
	CHECK(o, "kmalloc");
	memset(o, 1, 100 * KiB);
	uslab_kfree(o);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	uslab_trim();
}

static void warm_down(void)
{
	for (int i = 0; i < 16; i++) {
		CHECK_STAMP(keep[i], 64, 1000000 + (uint64_t)i, 8, "kept object");
		uslab_kfree(keep[i]);
	}
}

/* ------------------------------------------------------------------ reuse */

#define FILL (48 * MiB)

static void test_reuse(void)
{
	static const size_t sizes[] = { 64, 3000, 60000, 100000 };
	enum { NC = sizeof(sizes) / sizeof(sizes[0]) };
	/* The later fills: caches 1..3, large objects of 100 KiB and 1 MiB, cache 0 again. */
	static const struct {
		int cache;
		size_t large;
	} steps[] = { { 1, 0 }, { 2, 0 }, { 3, 0 }, { -1, 100 * KiB }, { -1, MiB }, { 0, 0 } };
	struct uslab_cache *c[NC];
	struct uslab_heap_stats h0, h1, h;
	struct batch b;
	uint64_t peak;

	CHECK(uslab_heap_stats(NULL) == -EINVAL, "uslab_heap_stats(NULL): -EINVAL");
	for (int i = 0; i < NC; i++) {
		c[i] = uslab_cache_create("heap-reuse", sizes[i], NULL, 0);
		CHECK(c[i], "create %zu B: %s", sizes[i], strerror(errno));
		for (int j = 0; j < i; j++)
			CHECK(cache_stats(c[i]).order != cache_stats(c[j]).order,
			      "caches of %zu B and %zu B have slabs of the same order %u", sizes[i],
			      sizes[j], cache_stats(c[i]).order);
	}
	h0 = heap();
	print_heap("start", &h0);
	batch_fill(&b, c[0], sizes[0], objs_for(c[0], FILL), 0);
	CHECK(slab_bytes(c[0]) >= FILL, "%zu B of slabs", slab_bytes(c[0]));
	h1 = heap();
	print_heap("first fill", &h1);
	CHECK(h1.used_bytes + MiB >= h0.used_bytes + FILL,
	      "used %llu -> %llu: the slabs are the heap's", (unsigned long long)h0.used_bytes,
	      (unsigned long long)h1.used_bytes);
	CHECK(h1.mapped_bytes >= h1.used_bytes && h1.arenas >= 1, "mapped %llu, used %llu",
	      (unsigned long long)h1.mapped_bytes, (unsigned long long)h1.used_bytes);
	batch_free(&b);
	shrink_all(c[0]);
	h = heap();
	CHECK(h.used_bytes <= h0.used_bytes + MiB, "used back: %llu -> %llu",
	      (unsigned long long)h0.used_bytes, (unsigned long long)h.used_bytes);
	peak = h1.mapped_bytes;
	for (unsigned int s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		char what[64];

		if (steps[s].cache >= 0) {
			struct uslab_cache *k = c[steps[s].cache];

			batch_fill(&b, k, sizes[steps[s].cache], objs_for(k, FILL),
				   (s + 1) * 10000000ull);
			CHECK(slab_bytes(k) >= FILL, "%zu B of slabs", slab_bytes(k));
			snprintf(what, sizeof(what), "fill of order %u", cache_stats(k).order);
		} else {
			batch_fill(&b, NULL, steps[s].large,
				   (FILL + steps[s].large - 1) / steps[s].large,
				   (s + 1) * 10000000ull);
			snprintf(what, sizeof(what), "fill of %zu KiB objects",
				 steps[s].large >> 10);
		}
		h = heap();
		print_heap(what, &h);
		CHECK(h.used_bytes + MiB >= h0.used_bytes + FILL, "%s: used %llu", what,
		      (unsigned long long)h.used_bytes);
		if (h.mapped_bytes > peak)
			peak = h.mapped_bytes;
		CHECK(h.mapped_bytes <= h1.mapped_bytes + ARENA,
		      "%s: mapped %llu MiB, the first fill mapped %llu MiB: freed pages not reused",
		      what, (unsigned long long)h.mapped_bytes >> 20,
		      (unsigned long long)h1.mapped_bytes >> 20);
		CHECK(h.arenas <= h1.arenas + 1, "%s: %llu arenas, the first fill %llu", what,
		      (unsigned long long)h.arenas, (unsigned long long)h1.arenas);
		batch_free(&b);
		if (steps[s].cache >= 0)
			shrink_all(c[steps[s].cache]);
		h = heap();
		CHECK(h.used_bytes <= h0.used_bytes + MiB, "%s: used back: %llu -> %llu", what,
		      (unsigned long long)h0.used_bytes, (unsigned long long)h.used_bytes);
	}
	printf("   7 fills of 48 MiB, 6 kinds: mapped at most %llu MiB (first fill %llu MiB)\n",
	       (unsigned long long)peak >> 20, (unsigned long long)h1.mapped_bytes >> 20);
	for (int i = 0; i < NC; i++)
		CHECK(uslab_cache_destroy(c[i]) == 0, "destroy");
}

/* -------------------------------------------------------------------- rss */

static void test_rss(void)
{
	static const size_t sizes[] = { 64, 3000, 60000, 100000 };
	enum { NC = sizeof(sizes) / sizeof(sizes[0]) };
	struct uslab_cache *c[NC];
	struct batch b[NC], large[64], huge;
	struct uslab_heap_stats h0, hpeak, hfreed, h1;
	size_t total = total_mib * MiB, in_caches = total * 5 / 8, in_large = 0, nlarge = 0;
	size_t huge_size = 40 * MiB, got, again;
	uint64_t s = 42;
	long rss0, rss_peak, rss1;

	warm_up();
	rss0 = rss_bytes();
	h0 = heap();
	print_heap("start", &h0);
	for (int i = 0; i < NC; i++) {
		c[i] = uslab_cache_create("heap-rss", sizes[i], NULL, 0);
		CHECK(c[i], "create");
		batch_fill(&b[i], c[i], sizes[i], objs_for(c[i], in_caches / NC),
			   (uint64_t)i * 10000000);
	}
	/* Large objects of 40 KiB..4 MiB, a few of each size, and one huge object. */
	while (in_large + huge_size < total - in_caches && nlarge < 64) {
		size_t size = 40 * KiB + (rnd_next(&s) % (4 * MiB - 40 * KiB)) / 8 * 8;
		size_t n = 1 + rnd_next(&s) % 4;

		batch_fill(&large[nlarge], NULL, size, n, 100000000 + nlarge * 10ull);
		in_large += size * n;
		nlarge++;
	}
	batch_fill(&huge, NULL, huge_size, 1, 200000000);
	hpeak = heap();
	rss_peak = rss_bytes();
	print_heap("all allocated", &hpeak);
	CHECK(hpeak.used_bytes >= h0.used_bytes + total * 9 / 10, "used %llu MiB",
	      (unsigned long long)hpeak.used_bytes >> 20);
	CHECK(hpeak.huge_objects == h0.huge_objects + 1, "one huge object: %llu",
	      (unsigned long long)hpeak.huge_objects);
	CHECK(rss_peak >= rss0 + (long)(total * 3 / 4), "touched: RSS %ld -> %ld KiB", rss0 >> 10,
	      rss_peak >> 10);

	for (int i = 0; i < NC; i++) {
		batch_free(&b[i]);
		shrink_all(c[i]);
		CHECK(uslab_cache_destroy(c[i]) == 0, "destroy");
	}
	for (size_t i = 0; i < nlarge; i++)
		batch_free(&large[i]);
	batch_free(&huge);
	hfreed = heap();
	print_heap("freed", &hfreed);
	got = uslab_trim();
	h1 = heap();
	rss1 = rss_bytes();
	print_heap("trimmed", &h1);
	CHECK(h1.retained_bytes == 0, "after uslab_trim: %llu bytes retained",
	      (unsigned long long)h1.retained_bytes);
	CHECK(h1.used_bytes <= h0.used_bytes + MiB, "used back: %llu -> %llu",
	      (unsigned long long)h0.used_bytes, (unsigned long long)h1.used_bytes);
	CHECK(h1.huge_objects == h0.huge_objects, "huge objects %llu",
	      (unsigned long long)h1.huge_objects);
	CHECK(h1.purged_bytes - h0.purged_bytes >= (hpeak.used_bytes - h1.used_bytes) * 9 / 10,
	      "purged %llu MiB of the %llu MiB freed",
	      (unsigned long long)(h1.purged_bytes - h0.purged_bytes) >> 20,
	      (unsigned long long)(hpeak.used_bytes - h1.used_bytes) >> 20);
	CHECK(h1.madvise_calls > h0.madvise_calls, "madvise calls %llu -> %llu",
	      (unsigned long long)h0.madvise_calls, (unsigned long long)h1.madvise_calls);
	CHECK(got <= h1.purged_bytes - hfreed.purged_bytes,
	      "uslab_trim returned %zu, the heap purged %llu meanwhile", got,
	      (unsigned long long)(h1.purged_bytes - hfreed.purged_bytes));
	/*
	 * What trim can give back is what was resident and free: the pages
	 * retained when it was called (every cache is destroyed). Address space
	 * whose pages were purged already is not memory given back.
	 */
	CHECK(got <= hfreed.retained_bytes + MiB,
	      "uslab_trim returned %zu KiB with %llu KiB retained: counted pages purged before "
	      "(unmapped arenas counted whole?)",
	      got >> 10, (unsigned long long)hfreed.retained_bytes >> 10);
	CHECK(h1.purged_bytes - h0.purged_bytes <= hpeak.used_bytes - h1.used_bytes + MiB,
	      "purged %llu MiB, but only %llu MiB were freed: pages counted twice",
	      (unsigned long long)(h1.purged_bytes - h0.purged_bytes) >> 20,
	      (unsigned long long)(hpeak.used_bytes - h1.used_bytes) >> 20);
	again = uslab_trim();
	CHECK(again == 0, "a second uslab_trim with nothing freed returned %zu", again);
	printf("   RSS %ld KiB -> %ld KiB -> %ld KiB; uslab_trim returned %zu KiB; %.1f madvise "
	       "calls per GiB purged\n",
	       rss0 >> 10, rss_peak >> 10, rss1 >> 10, got >> 10,
	       (double)(h1.madvise_calls - h0.madvise_calls) * (double)(1ul << 30) /
		       (double)(h1.purged_bytes - h0.purged_bytes + 1));
	if (TEST_SANITIZED) {
		printf("   (RSS check skipped: sanitizers keep their shadow memory)\n");
	} else {
		rss1 = rss_settled(rss0 + rss0 / 20 + (long)RSS_SLACK, &h1);
		CHECK(rss1 <= rss0 + rss0 / 20 + (long)RSS_SLACK,
		      "RSS not back: %ld KiB at the start, %ld KiB after free-all and trim",
		      rss0 >> 10, rss1 >> 10);
	}
	warm_down();
}

/* ------------------------------------------------------------------ decay */

static void test_decay(void)
{
	struct uslab_cache *c = uslab_cache_create("heap-decay", 3000, NULL, 0);
	struct batch large, small;
	struct uslab_heap_stats h0, h, hf;
	double t_free, waited, t0;

	CHECK(c, "create");
	warm_up();
	h0 = heap();
	batch_fill(&large, NULL, MiB, 80, 0);
	batch_fill(&small, c, 3000, objs_for(c, 16 * MiB), 1000);
	/* Checked first, then freed in a tight loop: the first free's age is known. */
	for (size_t i = 0; i < large.n; i++)
		CHECK_STAMP(large.p[i], MiB, i, MiB / 8, "before its free");
	t_free = now_ms();
	for (size_t i = 0; i < large.n; i++)
		uslab_kfree(large.p[i]);
	h = heap();
	waited = now_ms() - t_free;
	xunmap(large.p, large.n * sizeof(void *) + 1);
	print_heap("large objects freed", &h);
	/* A page freed is purged after between the delay (50 ms) and twice it. */
	if (waited < 25)
		CHECK(h.retained_bytes >= 64 * MiB,
		      "%.1f ms after the first of 80 MiB was freed, %llu KiB retained: purged "
		      "before the delay",
		      waited, (unsigned long long)h.retained_bytes >> 10);
	else
		printf("   (retention not checked: %.1f ms passed from the first free to the "
		       "statistics)\n",
		       waited);
	/* (No uslab_cache_shrink: it purges the whole heap. The slabs emptied go back as they may.) */
	batch_free(&small);
	hf = heap();
	t0 = now_ms();
	/*
	 * Nothing but polling: the decay must purge without any call of the
	 * program. (Pages it is purging count neither as retained nor as purged
	 * until their madvise returns: the purged bytes are waited for too.)
	 */
	for (;;) {
		h = heap();
		if ((h.retained_bytes == 0 && h.purged_bytes - h0.purged_bytes >= 80 * MiB) ||
		    now_ms() - t0 > 10000)
			break;
		usleep(10000);
	}
	print_heap("after the decay", &h);
	CHECK(h.retained_bytes == 0, "%llu KiB still retained 10 s after the last free",
	      (unsigned long long)h.retained_bytes >> 10);
	CHECK(h.purged_bytes - h0.purged_bytes >= 80 * MiB, "purged %llu MiB, freed 80 and more",
	      (unsigned long long)(h.purged_bytes - h0.purged_bytes) >> 20);
	CHECK(h.madvise_calls > h0.madvise_calls, "no madvise call");
	printf("   retained %llu KiB after the frees, 0 after %.0f ms\n",
	       (unsigned long long)hf.retained_bytes >> 10, now_ms() - t0);
	shrink_all(c);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	warm_down();
}

/* ------------------------------------------------------------------- fork */

#ifdef __SANITIZE_THREAD__
#define FORKS 10 /* (a fork costs TSan a second or more) */
#else
#define FORKS 40
#endif
#define FORK_WORKERS 2
#define PRE_FORK 64

static atomic_bool fork_stop;
static struct uslab_cache *fork_cache[2];
static const size_t fork_sizes[2] = { 3000, 60000 };
static struct batch pre_large, pre_small;

/* Allocates, stamps, checks, frees (and so purges), trims now and then. No libc malloc. */
static void *fork_worker(void *arg)
{
	uint64_t s = (uintptr_t)arg + 7, id = ((uintptr_t)arg + 1) << 40;
	enum { N = 32 };
	void *p[N];
	size_t sz[N];
	unsigned long checks = 0;

	for (unsigned long round = 0; !atomic_load(&fork_stop); round++) {
		for (int i = 0; i < N; i++) {
			uint64_t r = rnd_next(&s);

			if (r % 3 == 0) {
				sz[i] = 33 * KiB + r % (512 * KiB) / 8 * 8;
				p[i] = uslab_kmalloc(sz[i]);
			} else {
				sz[i] = fork_sizes[r % 2];
				p[i] = uslab_cache_alloc(fork_cache[r % 2]);
			}
			CHECK_COUNTED(checks, p[i], "worker alloc %zu", sz[i]);
			stamp(p[i], sz[i], id + (uint64_t)i);
		}
		for (int i = 0; i < N; i++) {
			CHECK_COUNTED(checks,
				      bad_word(p[i], sz[i], id + (uint64_t)i, sz[i] / 8) ==
					      SIZE_MAX,
				      "worker object changed");
			uslab_kfree(p[i]);
		}
		id += N;
		if (round % 8 == 0)
			uslab_trim();
		if (round % 4 == 0)
			usleep(200); /* leave some of the two CPUs to the forks */
	}
	uslab_thread_flush();
	return NULL;
}

/* The child: what it inherited, its own objects, a trim. Exit status: 0 or the failed step. */
static int fork_child(int round)
{
	struct uslab_heap_stats h;
	void *p[64];
	size_t sz[64];
	uint64_t s = (uint64_t)round + 99;

	alarm(30); /* a hang in the child kills it */
	for (size_t i = 0; i < pre_large.n; i++)
		if (bad_word(pre_large.p[i], pre_large.size, pre_large.id0 + i,
			     pre_large.size / 8) != SIZE_MAX)
			return 2;
	for (size_t i = 0; i < pre_small.n; i++)
		if (bad_word(pre_small.p[i], pre_small.size, pre_small.id0 + i,
			     pre_small.size / 8) != SIZE_MAX)
			return 3;
	for (size_t i = round % 2; i < pre_large.n; i += 2)
		uslab_kfree(pre_large.p[i]);
	for (int rep = 0; rep < 2; rep++) {
		for (int i = 0; i < 64; i++) {
			uint64_t r = rnd_next(&s);

			sz[i] = i % 4 == 0			      ? 40 * KiB + r % MiB / 8 * 8 :
				i == 63 && rep == 0 && round % 4 == 0 ? 33 * MiB :
									fork_sizes[r % 2];
			p[i] = sz[i] == fork_sizes[r % 2] ? uslab_cache_alloc(fork_cache[r % 2]) :
							    uslab_kmalloc(sz[i]);
			if (!p[i])
				return 4;
			stamp(p[i], sz[i], 5000 + (uint64_t)i);
		}
		for (int i = 0; i < 64; i++) {
			if (bad_word(p[i], sz[i], 5000 + (uint64_t)i, sz[i] / 8) != SIZE_MAX)
				return 5;
			uslab_kfree(p[i]);
		}
	}
	uslab_trim();
	if (uslab_heap_stats(&h) || h.retained_bytes)
		return 6;
	return 0;
}

static void test_fork(void)
{
	pthread_t t[FORK_WORKERS];
	struct uslab_heap_stats h;

	for (int i = 0; i < 2; i++) {
		fork_cache[i] = uslab_cache_create("heap-fork", fork_sizes[i], NULL, 0);
		CHECK(fork_cache[i], "create");
	}
	batch_fill(&pre_large, NULL, 300 * KiB, PRE_FORK, 0);
	batch_fill(&pre_small, fork_cache[0], fork_sizes[0], PRE_FORK, 1000);
	for (int i = 0; i < FORK_WORKERS; i++)
		CHECK(pthread_create(&t[i], NULL, fork_worker, (void *)(uintptr_t)i) == 0,
		      "pthread_create");
	fflush(NULL);
	for (int round = 0; round < FORKS; round++) {
		int status;
		pid_t pid;

		usleep(2000 + 500 * (unsigned int)(round % 7)); /* let the workers be anywhere */
		pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0)
			_exit(fork_child(
				round)); /* (not exit: LeakSanitizer would run in the child) */
		CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "fork %d: child status %#x (exit %d: 2/3 inherited objects changed, 4 alloc "
		      "failed, 5 own objects changed, 6 pages retained after trim; signal %d)",
		      round, status, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	atomic_store(&fork_stop, true);
	for (int i = 0; i < FORK_WORKERS; i++)
		pthread_join(t[i], NULL);
	batch_free(&pre_large);
	batch_free(&pre_small);
	for (int i = 0; i < 2; i++) {
		shrink_all(fork_cache[i]);
		CHECK(uslab_cache_destroy(fork_cache[i]) == 0, "destroy");
	}
	uslab_trim();
	h = heap();
	print_heap("after the forks", &h);
	CHECK(h.retained_bytes == 0, "retained %llu after trim",
	      (unsigned long long)h.retained_bytes);
}

/* ----------------------------------------------------------------- rlimit */

static void rlimit_child(void *arg)
{
	enum { MAXN = 4096 };
	struct rlimit old, lim;
	struct uslab_cache *c = uslab_cache_create("heap-rlimit", 100000, NULL, 0);
	void **p = xmap(MAXN * sizeof(void *)), **q = xmap(MAXN * sizeof(void *));
	size_t n = 0, nc = 0, big = 4 * MiB;
	void *o, *keep1;
	struct uslab_heap_stats h;
	(void)arg;

	CHECK(c, "create");
	warm_up();
	CHECK(getrlimit(RLIMIT_AS, &old) == 0, "getrlimit");
	lim = old;
	lim.rlim_cur = (rlim_t)vm_bytes() + 256 * MiB;
	CHECK(setrlimit(RLIMIT_AS, &lim) == 0, "setrlimit: %s", strerror(errno));

	/* Large objects until the address space runs out: NULL with ENOMEM. */
	keep1 = uslab_kmalloc(MiB);
	CHECK(keep1, "kmalloc 1 MiB");
	stamp(keep1, MiB, 77);
	for (n = 0; n < MAXN; n++) {
		errno = 0;
		p[n] = uslab_kmalloc(big);
		if (!p[n])
			break;
		stamp(p[n], big, n);
	}
	CHECK(n > 0 && n < MAXN && errno == ENOMEM, "%zu objects of 4 MiB, then errno %d", n,
	      errno);
	/* Then slabs of a cache (order 5), and a huge object. */
	for (nc = 0; nc < MAXN; nc++) {
		errno = 0;
		q[nc] = uslab_cache_alloc(c);
		if (!q[nc])
			break;
		stamp(q[nc], 100000, 100000 + nc);
	}
	CHECK(nc < MAXN && errno == ENOMEM, "%zu cache objects, then errno %d", nc, errno);
	errno = 0;
	o = uslab_kmalloc(100 * MiB);
	CHECK(!o && errno == ENOMEM, "kmalloc(100 MiB) under the limit: %p errno %d", o, errno);
	errno = 0;
	o = uslab_krealloc(keep1, 200 * MiB);
	CHECK(!o && errno == ENOMEM, "krealloc to 200 MiB under the limit: %p errno %d", o, errno);
	CHECK_STAMP(keep1, MiB, 77, MiB / 8, "the object krealloc failed to grow");
	o = uslab_kmalloc(64);
	CHECK(o, "kmalloc(64) after the failures (a slab kept partial)");
	uslab_kfree(o);
	/* Everything back, and trimmed: the address space serves again. */
	for (size_t i = 0; i < n; i++) {
		CHECK_STAMP(p[i], big, i, big / 8, "large object under the limit");
		uslab_kfree(p[i]);
	}
	for (size_t i = 0; i < nc; i++) {
		CHECK_STAMP(q[i], 100000, 100000 + i, 100000 / 8, "cache object under the limit");
		uslab_cache_free(c, q[i]);
	}
	shrink_all(c);
	uslab_trim();
	h = heap();
	print_heap("freed and trimmed", &h);
	CHECK(h.retained_bytes == 0, "retained %llu", (unsigned long long)h.retained_bytes);
	o = uslab_kmalloc(128 * MiB);
	CHECK(o, "kmalloc(128 MiB) after free-all and trim, under the limit: %s (mapped %llu MiB)",
	      strerror(errno), (unsigned long long)h.mapped_bytes >> 20);
	stamp(o, 128 * MiB, 5);
	CHECK_STAMP(o, 128 * MiB, 5, 128 * MiB / 8, "huge object");
	uslab_kfree(o);
	for (size_t i = 0; i < n; i++) {
		p[i] = uslab_kmalloc(big);
		CHECK(p[i], "4 MiB object %zu of %zu again after trim", i, n);
	}
	for (size_t i = 0; i < n; i++)
		uslab_kfree(p[i]);
	uslab_trim();
	/* The limit lifted. */
	CHECK(setrlimit(RLIMIT_AS, &old) == 0, "setrlimit back");
	o = uslab_kmalloc(512 * MiB);
	CHECK(o, "kmalloc(512 MiB) with the limit lifted");
	memset(o, 3, MiB);
	uslab_kfree(o);
	CHECK_STAMP(keep1, MiB, 77, MiB / 8, "kept object");
	uslab_kfree(keep1);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
	warm_down();
	printf("   %zu objects of 4 MiB and %zu of 100000 B fit under the limit\n", n, nc);
}

static void test_rlimit(void)
{
	check_oom_child(rlimit_child, "allocations under RLIMIT_AS");
}

/* ---------------------------------------------------------------- threads */

#define NTHREADS 64
#define PER_THREAD 96

static struct uslab_cache *thr_cache[3];
static const size_t thr_sizes[3] = { 64, 3000, 60000 };
static pthread_barrier_t thr_barrier;
/* Each thread's objects left to the main thread. */
static struct thr_out {
	void *p[PER_THREAD];
	size_t sz[PER_THREAD];
	int n;
	unsigned long checks;
} thr_out[NTHREADS];
static size_t thr_large; /* the largest large object: sized from total_mib */

static void *thr_main(void *arg)
{
	uintptr_t me = (uintptr_t)arg;
	struct thr_out *out = &thr_out[me % NTHREADS];
	uint64_t s = me + 1, id = (uint64_t)me << 32;
	void *p[PER_THREAD];
	size_t sz[PER_THREAD];

	pthread_barrier_wait(&thr_barrier); /* all 64 live at once */
	for (int i = 0; i < PER_THREAD; i++) {
		uint64_t r = rnd_next(&s);
		int k = (int)(r % 4);

		sz[i] = k < 3 ? thr_sizes[k] : 33 * KiB + (r >> 8) % thr_large;
		p[i] = k < 3 ? uslab_cache_alloc(thr_cache[k]) : uslab_kmalloc(sz[i]);
		CHECK_COUNTED(out->checks, p[i], "alloc %zu in thread %lu", sz[i],
			      (unsigned long)me);
		stamp(p[i], sz[i], id + (uint64_t)i);
	}
	pthread_barrier_wait(&thr_barrier);
	out->n = 0;
	for (int i = 0; i < PER_THREAD; i++) {
		CHECK_COUNTED(out->checks,
			      bad_word(p[i], sz[i], id + (uint64_t)i, sz[i] / 8) == SIZE_MAX,
			      "object changed in its thread");
		if (i % 2) {
			uslab_kfree(p[i]);
		} else {
			out->p[out->n] = p[i];
			out->sz[out->n++] = sz[i];
		}
	}
	return NULL; /* exits with objects in its sheaves */
}

static void thr_round(uintptr_t round)
{
	pthread_t t[NTHREADS];

	for (int i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&t[i], NULL, thr_main, (void *)(round * NTHREADS + i)) == 0,
		      "pthread_create %d", i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	for (uintptr_t i = 0; i < NTHREADS; i++) {
		struct thr_out *out = &thr_out[i];
		uint64_t id = (uint64_t)(round * NTHREADS + i) << 32;

		test_checks += out->checks;
		out->checks = 0;
		for (int j = 0; j < out->n; j++) {
			CHECK_STAMP(out->p[j], out->sz[j], id + 2 * (uint64_t)j, out->sz[j] / 8,
				    "object outliving its thread");
			uslab_kfree(out->p[j]);
		}
		out->n = 0;
	}
}

static void test_threads(void)
{
	struct uslab_heap_stats h0, h1;
	long rss0, rss1;
	size_t got;

	/* 64 threads x 24 large objects x (33 KiB + thr_large / 2): about total_mib in all. */
	thr_large = total_mib * MiB / (NTHREADS * PER_THREAD / 4) * 2;
	for (int i = 0; i < 3; i++) {
		thr_cache[i] = uslab_cache_create("heap-threads", thr_sizes[i], NULL, 0);
		CHECK(thr_cache[i], "create");
	}
	pthread_barrier_init(&thr_barrier, NULL, NTHREADS);
	warm_up();
	/* A first round at 1/64 of the size: the C library's stack cache and uslab's thread tables. */
	{
		size_t full = thr_large;

		thr_large = 64 * KiB;
		thr_round(0);
		thr_large = full;
	}
	for (int i = 0; i < 3; i++)
		shrink_all(thr_cache[i]);
	uslab_trim();
	rss0 = rss_bytes();
	h0 = heap();
	thr_round(1);
	for (int i = 0; i < 3; i++) {
		shrink_all(thr_cache[i]);
		CHECK(cache_active(thr_cache[i]) == 0, "every object back");
	}
	got = uslab_trim();
	h1 = heap();
	rss1 = rss_bytes();
	print_heap("trimmed", &h1);
	CHECK(h1.retained_bytes == 0, "retained %llu", (unsigned long long)h1.retained_bytes);
	CHECK(h1.used_bytes <= h0.used_bytes + MiB, "used %llu -> %llu",
	      (unsigned long long)h0.used_bytes, (unsigned long long)h1.used_bytes);
	printf("   64 threads: RSS %ld KiB -> %ld KiB after trim (which returned %zu KiB)\n",
	       rss0 >> 10, rss1 >> 10, got >> 10);
	if (TEST_SANITIZED) {
		printf("   (RSS check skipped: sanitizers keep their shadow memory)\n");
	} else {
		rss1 = rss_settled(rss0 + rss0 / 20 + (long)RSS_SLACK, &h1);
		CHECK(rss1 <= rss0 + rss0 / 20 + (long)RSS_SLACK,
		      "RSS not back after 64 threads: %ld KiB -> %ld KiB", rss0 >> 10, rss1 >> 10);
	}
	for (int i = 0; i < 3; i++)
		CHECK(uslab_cache_destroy(thr_cache[i]) == 0, "destroy");
	warm_down();
}

/* ------------------------------------------------------------------- grow */

static void test_grow(void)
{
	struct uslab_heap_stats h0, h, hb;
	size_t size = 40 * KiB, max = total_mib * 300 / 256 * MiB, steps = 0, moved = 0;
	uint64_t in_place = 0, remaps_above = 0, steps_above = 0;
	char *p;

	/* First: the heap is empty, so the pages after this object are free. */
	h0 = heap();
	p = uslab_kmalloc(size);
	CHECK(p, "kmalloc(40 KiB)");
	CHECK(uslab_ksize(p) >= size, "ksize %zu", uslab_ksize(p));
	stamp_range(p, max, 1, 0, size / 8);
	while (size < max) {
		size_t next = size + size / 4;
		char *q;

		next = (next + PAGE - 1) / PAGE * PAGE;
		if (next > max)
			next = max;
		hb = heap();
		q = uslab_krealloc(p, next);
		h = heap();
		CHECK(q, "krealloc %zu -> %zu: %s", size, next, strerror(errno));
		CHECK(uslab_ksize(q) >= next, "ksize %zu < %zu", uslab_ksize(q), next);
		/* Stamped as one object of max bytes: same words wherever it lives. */
		CHECK_STAMP(q, max, 1, size / 8, "grown");
		stamp_range(q, max, 1, size / 8, next / 8);
		if (q != p)
			moved++;
		in_place += h.grown_in_place - hb.grown_in_place;
		if (size > HUGE_MIN) {
			/* Within its mapping (64 MiB granules) in place; beyond it by mremap. */
			steps_above++;
			remaps_above += h.mremap_calls > hb.mremap_calls;
			CHECK(q == p || h.mremap_calls > hb.mremap_calls,
			      "huge object grown %zu -> %zu MiB: moved without mremap (copied)",
			      size >> 20, next >> 20);
		}
		CHECK(h.huge_objects - h0.huge_objects == (next > HUGE_MIN),
		      "%zu MiB: %llu huge objects", next >> 20,
		      (unsigned long long)(h.huge_objects - h0.huge_objects));
		p = q;
		size = next;
		steps++;
	}
	h = heap();
	print_heap("grown", &h);
	printf("   %zu steps, %zu moved, %llu grown in place, %llu of %llu steps above 32 MiB with "
	       "mremap\n",
	       steps, moved, (unsigned long long)in_place, (unsigned long long)remaps_above,
	       (unsigned long long)steps_above);
	CHECK(in_place >= 1, "a lone large object with free pages after it never grew in place");
	CHECK(h.grown_in_place > h0.grown_in_place, "grown_in_place");
	CHECK(h.mremap_calls > h0.mremap_calls, "mremap_calls");
	/* Back down the same way. */
	hb = heap();
	uint64_t remaps_down = 0;
	while (size > 40 * KiB) {
		size_t next = size - size / 5;
		struct uslab_heap_stats a, b;
		char *q;

		next = (next + PAGE - 1) / PAGE * PAGE;
		if (next < 40 * KiB)
			next = 40 * KiB;
		a = heap();
		q = uslab_krealloc(p, next);
		b = heap();
		CHECK(q, "krealloc %zu -> %zu: %s", size, next, strerror(errno));
		CHECK_STAMP(q, max, 1, next / 8, "shrunk");
		if (next > HUGE_MIN)
			remaps_down +=
				b.mremap_calls + b.munmap_calls > a.mremap_calls + a.munmap_calls;
		CHECK(b.huge_objects - h0.huge_objects == (next > HUGE_MIN),
		      "%zu KiB: %llu huge objects", next >> 10,
		      (unsigned long long)(b.huge_objects - h0.huge_objects));
		p = q;
		size = next;
	}
	CHECK(remaps_down >= 1, "a huge object shrunk without mremap or munmap of its tail");
	uslab_kfree(p);
	uslab_trim();
	h = heap();
	print_heap("freed", &h);
	CHECK(h.used_bytes <= h0.used_bytes, "used %llu -> %llu", (unsigned long long)h0.used_bytes,
	      (unsigned long long)h.used_bytes);
	CHECK(h.huge_objects == h0.huge_objects && h.retained_bytes == 0, "all back");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} modes[] = { { "reuse", test_reuse },	 { "rss", test_rss },
		      { "decay", test_decay },	 { "fork", test_fork },
		      { "rlimit", test_rlimit }, { "threads", test_threads },
		      { "grow", test_grow } };

	if (argc > 2)
		total_mib = (size_t)atol(argv[2]);
	for (unsigned int i = 0; argc > 1 && i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (!strcmp(argv[1], modes[i].name)) {
			unsigned long before = test_checks;

			modes[i].fn();
			printf("ok heap %-34s (%lu checks)\n", modes[i].name, test_checks - before);
			return 0;
		}
	}
	fprintf(stderr, "usage: %s reuse|rss|decay|fork|rlimit|threads|grow [MiB]\n", argv[0]);
	return 2;
}
