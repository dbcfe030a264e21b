// SPDX-License-Identifier: MIT
/*
 * test_debug.c - the debug tier (USLAB_CONSISTENCY_CHECKS, USLAB_RED_ZONE,
 * USLAB_POISON, USLAB_STORE_USER; USLAB_DEBUG), modelled on the cases of
 * Linux's lib/slub_kunit.c, with exact error counts, and the trials of the
 * issue: every double free and every foreign free caught at the call.
 *
 *   test_debug kunit    red zones, poison, leaks, deferred frees (counts)
 *   test_debug kmalloc  kmalloc's red zone, krealloc (USLAB_DEBUG=ZP,kmalloc-64)
 *   test_debug align    power-of-two kmalloc classes aligned to their size
 *                       under every combination of the letters FZPU
 *   test_debug trials   10,000 trials of each double-free and foreign-pointer
 *                       kind (USLAB_ON_BUG=report: each must count one bug)
 *   test_debug abort    the default for F: abort, with the report naming
 *                       the caller
 *   test_debug corrupt [N] N (100,000) random one-byte corruptions of free
 *                       objects in forked children: no allocation returns
 *                       an address that is not an object of that cache
 */
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <uslab.h>
#include <uslab/kmem.h>

#include "../test.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#else
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#define TRIALS 10000

/* Bugs counted across a statement: exactly @n. */
#define EXPECT_BUGS(n, stmt)                                                              \
	do {                                                                              \
		unsigned long before_ = uslab_bug_count();                                \
		stmt;                                                                     \
		CHECK(uslab_bug_count() - before_ == (n), "%s: %lu bugs, want %d", #stmt, \
		      uslab_bug_count() - before_, (n));                                  \
	} while (0)

static struct uslab_cache *create(const char *name, size_t size, unsigned int flags)
{
	struct uslab_cache *c = uslab_cache_create(name, size, NULL, flags);

	CHECK(c, "create %s: %s", name, strerror(errno));
	return c;
}

/* ------------------------------------------------------------ kunit */

/* A write one byte past the object: validate finds it, the free reports it. */
static void test_clobber_zone(void)
{
	struct uslab_cache *c = create("TestSlub_RZ_alloc", 64, USLAB_RED_ZONE);
	unsigned char *p = uslab_cache_alloc(c);

	p[64] = 0x12;
	CHECK(uslab_cache_validate(c) == 1, "validate after the clobber");
	EXPECT_BUGS(1, uslab_cache_free(c, p));
	CHECK(uslab_cache_validate(c) == 0, "restored by the free's report");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* The byte before the object (the left red zone). */
static void test_clobber_left_zone(void)
{
	struct uslab_cache *c = create("TestSlub_RZ_left", 64, USLAB_RED_ZONE);
	unsigned char *p = uslab_cache_alloc(c);

	p[-1] = 0x12;
	CHECK(uslab_cache_validate(c) == 1, "validate after the clobber");
	EXPECT_BUGS(1, uslab_cache_free(c, p));
	CHECK(uslab_cache_validate(c) == 0, "validate");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* A write to a free object's first word: validate, then the next allocation of it. */
static void test_first_word(void)
{
	struct uslab_cache *c = create("TestSlub_1th_word_free", 64, USLAB_POISON);
	uint64_t *p = uslab_cache_alloc(c);
	void *q;

	uslab_cache_free(c, p);
	*p = 0x78;
	CHECK(uslab_cache_validate(c) == 1, "validate after the write after free");
	EXPECT_BUGS(1, q = uslab_cache_alloc(c));
	CHECK(q == p, "the poisoned object is the one handed out next (%p, %p)", q, (void *)p);
	CHECK(uslab_cache_validate(c) == 0, "validate");
	uslab_cache_free(c, q);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* ... and to its 50th byte. */
static void test_clobber_50th_byte(void)
{
	struct uslab_cache *c = create("TestSlub_50th_word_free", 64, USLAB_POISON);
	unsigned char *p = uslab_cache_alloc(c);
	void *q;

	uslab_cache_free(c, p);
	p[50] = 0x9a;
	CHECK(uslab_cache_validate(c) == 1, "validate after the write after free");
	EXPECT_BUGS(1, q = uslab_cache_alloc(c));
	CHECK(uslab_cache_validate(c) == 0, "validate");
	uslab_cache_free(c, q);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* A write past a free object: its red zone is the inactive one. */
static void test_clobber_redzone_free(void)
{
	struct uslab_cache *c = create("TestSlub_RZ_free", 64, USLAB_RED_ZONE);
	unsigned char *p = uslab_cache_alloc(c);
	void *q;

	uslab_cache_free(c, p);
	p[64] = 0xab;
	CHECK(uslab_cache_validate(c) == 1, "validate");
	EXPECT_BUGS(1, q = uslab_cache_alloc(c));
	CHECK(uslab_cache_validate(c) == 0, "validate");
	uslab_cache_free(c, q);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/*
 * An overflow past the right red zone onto the object's state: reported,
 * and the object is freed all the same (report mode loses nothing).
 */
static void test_overflow_onto_state(void)
{
	struct uslab_cache *c = create("TestSlub_state", 64, USLAB_RED_ZONE);
	struct uslab_cache_stats st;
	unsigned char *p = uslab_cache_alloc(c);

	memset(p + 64, 0x55, 12);		/* the 8-byte red zone, then 4 bytes of state */
	EXPECT_BUGS(2, uslab_cache_free(c, p)); /* the state, the red zone */
	uslab_cache_shrink(c);			/* (out of this thread's sheaf, to its slab) */
	CHECK(uslab_cache_stats(c, &st) == 0 && st.active_objs == 0, "freed: %lu",
	      (unsigned long)st.active_objs);
	CHECK(uslab_cache_validate(c) == 0, "restored");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* Pointers inside objects: of this cache, of another debug cache, to uslab_free_rcu. */
static void test_inside_pointers(void)
{
	struct uslab_cache *a = create("TestSlub_in_a", 64, USLAB_STORE_USER);
	struct uslab_cache *b = create("TestSlub_in_b", 64, USLAB_STORE_USER);
	char *p = uslab_cache_alloc(a);

	EXPECT_BUGS(1, uslab_cache_free(a, p + 8));
	EXPECT_BUGS(1, uslab_cache_free(b, p + 8));
	EXPECT_BUGS(1, uslab_free_rcu(p + 8));
	EXPECT_BUGS(1, uslab_cache_free(b, p));
	uslab_cache_free(a, p);
	uslab_rcu_barrier();
	CHECK(uslab_cache_destroy(a) == 0 && uslab_cache_destroy(b) == 0, "nothing lost");
}

/* All four tiers together, an object used correctly: no report at all. */
static void test_clean_use(void)
{
	struct uslab_cache *c =
		create("TestSlub_clean", 200,
		       USLAB_CONSISTENCY_CHECKS | USLAB_RED_ZONE | USLAB_POISON | USLAB_STORE_USER);
	void *p[300];

	EXPECT_BUGS(
		0, for (int r = 0; r < 3; r++) {
			CHECK(uslab_cache_alloc_bulk(c, 300, p) == 300, "bulk");
			for (int i = 0; i < 300; i++)
				memset(p[i], i, 200);
			CHECK(uslab_cache_validate(c) == 0, "validate, all allocated");
			uslab_cache_free_bulk(c, 150, p);
			for (int i = 150; i < 300; i++)
				uslab_cache_free(c, p[i]);
			CHECK(uslab_cache_validate(c) == 0, "validate, all free");
		});
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* Destroy with live objects: -EBUSY, and each listed with its allocation's caller. */
static struct uslab_cache *leaky;
static void *leaked[3];

/* (Not static: -rdynamic exports it, so reports can name it.) */
__attribute__((noinline)) void leak_allocator(void);
__attribute__((noinline)) void leak_allocator(void)
{
	for (int i = 0; i < 3; i++)
		leaked[i] = uslab_cache_alloc(leaky);
}

static void destroy_leaky(void *arg)
{
	(void)arg;
	uslab_cache_free(leaky, leaked[1]);
	fprintf(stderr, "destroy: %d\n", uslab_cache_destroy(leaky));
}

static void test_leak_at_destroy(void)
{
	char buf[8192], line[128];
	int status;

	leaky = create("TestSlub_leak", 48, USLAB_STORE_USER);
	leak_allocator();
	status = run_child(destroy_leaky, NULL, buf, sizeof(buf));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	CHECK(strstr(buf, "2 objects still allocated"), "the count: %s", buf);
	CHECK(strstr(buf, "destroy: -16"), "-EBUSY: %s", buf);
	for (int i = 0; i < 3; i += 2) {
		snprintf(line, sizeof(line), "object %p still allocated, by thread", leaked[i]);
		CHECK(strstr(buf, line), "object %d listed: %s", i, buf);
	}
	CHECK(strstr(buf, "leak_allocator"), "the caller named: %s", buf);
	snprintf(line, sizeof(line), "object %p still", leaked[1]);
	CHECK(!strstr(buf, line), "the freed one not listed: %s", buf);
	for (int i = 0; i < 3; i++)
		uslab_cache_free(leaky, leaked[i]);
	CHECK(uslab_cache_destroy(leaky) == 0, "destroy once all are freed");
}

/* A deferred free with a double free in it: caught at the call, freed once. */
static void test_deferred_double_free(void)
{
	struct uslab_cache *c = create("TestSlub_rcu", 64, USLAB_CONSISTENCY_CHECKS);
	void *p = uslab_cache_alloc(c), *q = uslab_cache_alloc(c);
	struct uslab_cache_stats st;

	uslab_free_rcu(p);
	EXPECT_BUGS(1, uslab_free_rcu(p));
	EXPECT_BUGS(1, uslab_cache_free(c, p));
	uslab_free_rcu(q);
	uslab_rcu_barrier();
	EXPECT_BUGS(1, uslab_free_rcu(q)); /* freed after its grace period */
	uslab_cache_shrink(c);		   /* (this thread's sheaf back to the slabs) */
	CHECK(uslab_cache_stats(c, &st) == 0 && st.active_objs == 0, "both freed once: %lu",
	      (unsigned long)st.active_objs);
	CHECK(uslab_cache_validate(c) == 0, "validate");
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/*
 * USLAB_DEBUG selects caches by name, with letters: the selected one's
 * slots carry the tier's metadata, the other's do not; both have sheaves
 * (the debug cache's only the library's checked paths use).
 */
static void test_env_selection(void)
{
	struct uslab_cache *a = create("dbg_env_selected", 64, 0);
	struct uslab_cache *b = create("dbg_env_other", 64, 0);
	struct uslab_cache_stats sa, sb;
	void *p = uslab_cache_alloc(a);

	uslab_cache_stats(a, &sa);
	uslab_cache_stats(b, &sb);
	CHECK(sa.objsize > sb.objsize && sb.objsize == 64, "selected: slots of %u and %u bytes",
	      sa.objsize, sb.objsize);
	CHECK(sa.sheaf_capacity > 0 && sb.sheaf_capacity > 0, "sheaves: %u, %u", sa.sheaf_capacity,
	      sb.sheaf_capacity);
	uslab_cache_free(a, p);
	EXPECT_BUGS(1,
		    uslab_cache_free(a, p)); /* at the call: the inline free reached the library */
	CHECK(uslab_cache_destroy(a) == 0 && uslab_cache_destroy(b) == 0, "destroy");
}

/* ------------------------------------------------------------ sheaves */

/*
 * A debug cache has sheaves, and every call is still checked at the call:
 * a free object waiting in this thread's sheaf is free to every check (an
 * immediate or delayed double free, validate's poison check, the check
 * when it is handed out again), an interior free is caught before it gets
 * there, and sheaves that fill and empty through the barn and the slabs
 * lose nothing.
 */
static void test_sheaf_checks(void)
{
	struct uslab_cache *c =
		create("TestSheaf", 64,
		       USLAB_CONSISTENCY_CHECKS | USLAB_RED_ZONE | USLAB_POISON | USLAB_STORE_USER);
	struct uslab_cache_stats st;
	unsigned char *p = uslab_cache_alloc(c), *q = uslab_cache_alloc(c), *r;
	void *many[600];

	CHECK(uslab_cache_stats(c, &st) == 0 && st.sheaf_capacity > 0, "sheaves: %u",
	      st.sheaf_capacity);
	uslab_cache_free(c, p);
	EXPECT_BUGS(1, uslab_cache_free(c, p)); /* immediate: on top of the sheaf */
	uslab_cache_free(c, q);
	EXPECT_BUGS(1, uslab_cache_free(c, p)); /* delayed: below another in the sheaf */
	CHECK(uslab_cache_validate(c) == 0, "validate: the sheaf's objects are free");
	q[10] = 0x42; /* a write after free to the object on top of the sheaf */
	CHECK(uslab_cache_validate(c) == 1, "validate finds the write in a sheaf's object");
	EXPECT_BUGS(1, r = uslab_cache_alloc(c)); /* and so does handing it out */
	CHECK(r == q, "LIFO: %p, %p", (void *)r, (void *)q);
	r = uslab_cache_alloc(c);
	CHECK(r == p, "then the other one");
	EXPECT_BUGS(1, uslab_cache_free(c, r + 8)); /* interior: not into the sheaf */
	r[64] = 0x1;				    /* an overflow into the red zone */
	EXPECT_BUGS(1, uslab_cache_free(c, r));	    /* found at the free, not at a flush */
	uslab_cache_free(c, q);
	EXPECT_BUGS(0, {
		for (int i = 0; i < 600; i++)
			many[i] = uslab_cache_alloc(c);
		for (int i = 0; i < 600; i++)
			uslab_cache_free(c, many[i]);
	});
	CHECK(uslab_cache_validate(c) == 0, "validate after sheaves went through the barn");
	EXPECT_BUGS(1, uslab_cache_free(c, many[300])); /* in a sheaf of the barn, or a slab */
	CHECK(uslab_cache_destroy(c) == 0, "destroy: nothing lost");
}

/*
 * Two threads free one object at once, many times: the state's
 * compare-and-swap lets exactly one through, the other is reported.
 */
static struct uslab_cache *race_cache;
static pthread_barrier_t race_barrier;

static void *race_free(void *p)
{
	pthread_barrier_wait(&race_barrier);
	uslab_cache_free(race_cache, p);
	return NULL;
}

static void test_cross_thread_double_free(void)
{
	race_cache = create("TestSheaf_race", 64, USLAB_CONSISTENCY_CHECKS);
	for (int t = 0; t < 500; t++) {
		void *p = uslab_cache_alloc(race_cache);
		pthread_t th[2];

		pthread_barrier_init(&race_barrier, NULL, 2);
		EXPECT_BUGS(1, {
			for (int i = 0; i < 2; i++)
				CHECK(!pthread_create(&th[i], NULL, race_free, p), "thread");
			for (int i = 0; i < 2; i++)
				pthread_join(th[i], NULL);
		});
		pthread_barrier_destroy(&race_barrier);
		/* Freed by another thread into its sheaf, then again here. */
		p = uslab_cache_alloc(race_cache);
		pthread_barrier_init(&race_barrier, NULL, 1);
		CHECK(!pthread_create(&th[0], NULL, race_free, p), "thread");
		pthread_join(th[0], NULL);
		pthread_barrier_destroy(&race_barrier);
		EXPECT_BUGS(1, uslab_cache_free(race_cache, p));
	}
	CHECK(uslab_cache_validate(race_cache) == 0, "validate");
	CHECK(uslab_cache_destroy(race_cache) == 0, "destroy: each freed once");
}

/* ------------------------------------------------------------ kmalloc */

static void test_kmalloc_redzone(void)
{
	struct uslab_cache *k64 = uslab_kmalloc_cache(64);
	unsigned char *p = kmalloc(60, GFP_KERNEL);

	CHECK(uslab_ksize(p) == 60, "ksize is the size asked for: %zu", uslab_ksize(p));
	p[60] = 0x1; /* one byte past the request, inside the class */
	CHECK(uslab_cache_validate(k64) == 1, "validate finds the overrun");
	EXPECT_BUGS(1, kfree(p));
	CHECK(uslab_cache_validate(k64) == 0, "validate");
}

static void test_krealloc_redzone(void)
{
	struct uslab_cache *k64 = uslab_kmalloc_cache(64);
	unsigned char *p = kmalloc(64, GFP_KERNEL), *q;

	memset(p, 0xff, 64);
	q = krealloc(p, 57, GFP_KERNEL); /* shrink within the class: in place */
	CHECK(q == p && uslab_ksize(p) == 57, "in place, %zu", uslab_ksize(p));
	CHECK(uslab_cache_validate(k64) == 0, "bytes 57.. are red zone now");
	p[58] = 0x2;
	CHECK(uslab_cache_validate(k64) == 1, "a write there is found");
	q = krealloc(p, 62, GFP_KERNEL | __GFP_ZERO); /* grow within the class */
	CHECK(q == p && uslab_ksize(p) == 62, "in place, %zu", uslab_ksize(p));
	for (int i = 57; i < 62; i++)
		CHECK(p[i] == 0, "byte %d zeroed: %#x", i, p[i]);
	for (int i = 0; i < 57; i++)
		CHECK(p[i] == 0xff, "byte %d kept", i);
	CHECK(uslab_cache_validate(k64) == 0, "validate");
	EXPECT_BUGS(0, kfree(p));
}

/* The tier keeps kmalloc's alignment; a freed object is not resized or measured. */
static void test_kmalloc_freed(void)
{
	unsigned char *p = kmalloc(64, GFP_KERNEL), *q;

	for (int i = 0; i < 100; i++) {
		void *a = kmalloc(64, GFP_KERNEL), *b = uslab_kmalloc_aligned(50, 64);

		CHECK(((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0, "aligned: %p %p", a, b);
		kfree(a);
		kfree(b);
	}
	kfree(p);
	EXPECT_BUGS(1, CHECK(uslab_ksize(p) == 0, "ksize of a freed object"));
	errno = 0;
	EXPECT_BUGS(1, q = krealloc(p, 60, GFP_KERNEL));
	CHECK(!q && errno == EINVAL, "krealloc of a freed object: NULL, EINVAL");
	CHECK(uslab_cache_validate(uslab_kmalloc_cache(64)) == 0, "nothing written into it");
}

/* ------------------------------------------------------------ trials */

static struct uslab_cache *tc, *tc2;

static void *trial_thread(void *p)
{
	uslab_cache_free(tc, p);
	return NULL;
}

/* Each kind, TRIALS times: one bug counted per trial, at the call. */
static void test_double_free_trials(void)
{
	uint64_t seed = 12345;
	void *keep[64];
	unsigned long before;

	tc = create("trials", 96, USLAB_CONSISTENCY_CHECKS);
	for (int i = 0; i < 64; i++)
		keep[i] = uslab_cache_alloc(tc);
	for (int t = 0; t < TRIALS; t++) {
		void *p = uslab_cache_alloc(tc), *arr[4];
		struct uslab_magazine *m;
		struct uslab_free_batch b;
		pthread_t th;
		int k = (int)(rnd_next(&seed) % 7), n;

		before = uslab_bug_count();
		switch (k) {
		case 0: /* immediate */
			uslab_cache_free(tc, p);
			uslab_cache_free(tc, p);
			break;
		case 1: /* delayed: other objects freed in between */
			uslab_cache_free(tc, p);
			n = (int)(rnd_next(&seed) % 64);
			for (int i = 0; i < n; i++)
				uslab_cache_free(tc, keep[i]);
			uslab_cache_free(tc, p);
			for (int i = 0; i < n; i++)
				keep[i] = uslab_cache_alloc(tc);
			break;
		case 2: /* cross-thread: the second free by another thread */
			uslab_cache_free(tc, p);
			CHECK(!pthread_create(&th, NULL, trial_thread, p), "thread");
			pthread_join(th, NULL);
			break;
		case 3: /* bulk: twice in one array, and again */
			arr[0] = p;
			arr[1] = uslab_cache_alloc(tc);
			arr[2] = p;
			uslab_cache_free_bulk(tc, 3, arr);
			CHECK(uslab_bug_count() - before == 1, "bulk: one of the two");
			before = uslab_bug_count();
			arr[0] = p;
			uslab_cache_free_bulk(tc, 1, arr);
			break;
		case 4: /* magazine */
			m = uslab_magazine_create(tc, 0, 0);
			uslab_magazine_free(m, p);
			uslab_magazine_free(m, p);
			uslab_magazine_destroy(m);
			break;
		case 5: /* free batch: found when the batch is freed */
			uslab_free_batch_init(&b, tc);
			uslab_free_batch_add(&b, p);
			uslab_free_batch_add(&b, p);
			uslab_free_batch_flush(&b);
			break;
		case 6: /* deferred */
			uslab_free_rcu(p);
			uslab_free_rcu(p);
			break;
		}
		CHECK(uslab_bug_count() - before == 1, "double free kind %d, trial %d: %lu bugs", k,
		      t, uslab_bug_count() - before);
	}
	uslab_rcu_barrier();
	for (int i = 0; i < 64; i++)
		uslab_cache_free(tc, keep[i]);
	CHECK(uslab_cache_validate(tc) == 0, "sound after %d trials", TRIALS);
	CHECK(uslab_cache_destroy(tc) == 0, "nothing lost, nothing freed twice");
}

static void test_foreign_trials(void)
{
	uint64_t seed = 777;
	char stack_buf[256];

	tc = create("trials_a", 128, USLAB_CONSISTENCY_CHECKS);
	tc2 = create("trials_b", 128, USLAB_CONSISTENCY_CHECKS);
	for (int t = 0; t < TRIALS; t++) {
		int k = (int)(rnd_next(&seed) % 5);
		unsigned long before = uslab_bug_count();
		char *mine = uslab_cache_alloc(tc), *other = uslab_cache_alloc(tc2);
		void *bad = NULL, *heap = NULL;

		switch (k) {
		case 0:
			bad = heap = malloc(1 + rnd_next(&seed) % 512);
			break;
		case 1:
			bad = stack_buf + rnd_next(&seed) % 256;
			break;
		case 2: /* wild: any user address */
			bad = (void *)(uintptr_t)((rnd_next(&seed) & ((1ull << 47) - 1)) | 8);
			break;
		case 3: /* interior: 1..127 bytes in */
			bad = mine + 1 + rnd_next(&seed) % 127;
			break;
		case 4: /* another cache's object */
			bad = other;
			break;
		}
		uslab_cache_free(tc, bad);
		CHECK(uslab_bug_count() - before == 1, "foreign kind %d, trial %d", k, t);
		uslab_cache_free(tc, mine);
		uslab_cache_free(tc2, other);
		free(heap);
		CHECK(uslab_bug_count() - before == 1, "the real frees are fine");
	}
	CHECK(uslab_cache_validate(tc) == 0 && uslab_cache_validate(tc2) == 0, "validate");
	CHECK(uslab_cache_destroy(tc) == 0 && uslab_cache_destroy(tc2) == 0, "destroy");
}

/* ------------------------------------------------------------ abort */

__attribute__((noinline)) void double_free_here(void *arg);
__attribute__((noinline)) void double_free_here(void *arg)
{
	void *p;

	tc = arg;
	p = uslab_cache_alloc(tc);
	uslab_cache_free(tc, p);
	uslab_cache_free(tc, p);
	fprintf(stderr, "not stopped\n");
}

static void wrong_cache_here(void *arg)
{
	(void)arg;
	uslab_cache_free(tc2, uslab_cache_alloc(tc));
}

static void test_abort(void)
{
	char buf[16384];
	int status;
	struct uslab_cache *u = create("victim", 80, USLAB_CONSISTENCY_CHECKS | USLAB_STORE_USER);

	tc = create("abort_a", 80, USLAB_CONSISTENCY_CHECKS);
	tc2 = create("abort_b", 80, USLAB_CONSISTENCY_CHECKS);
	CHECK(expect_death(double_free_here, tc, "uslab: BUG abort_a: double free at 0x"),
	      "double free stops the program at the call");
	CHECK(expect_death(wrong_cache_here, NULL,
			   "uslab: BUG abort_b: object of cache abort_a freed to this cache"),
	      "wrong cache");
	status = run_child(double_free_here, u, buf, sizeof(buf));
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "abort");
	CHECK(strstr(buf, "uslab: BUG victim: double free at"), "%s", buf);
	CHECK(strstr(buf, "this call, by thread"), "%s", buf);
	CHECK(strstr(buf, "allocated by thread") && strstr(buf, "last freed by thread"),
	      "U: the history: %s", buf);
	CHECK(strstr(buf, "double_free_here+0x"), "the caller named: %s", buf);
}

/*
 * U keeps one return address per allocation and free (no backtrace): the
 * report of a double free names the function that allocated the object,
 * the one that freed it, and (unwound at the report) the one freeing it
 * again. (Not static: -rdynamic exports them, so reports can name them.)
 */
static struct uslab_cache *site_cache;
static void *site_obj;

__attribute__((noinline)) void site_allocator(void);
__attribute__((noinline)) void site_allocator(void)
{
	site_obj = uslab_cache_alloc(site_cache);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void site_freer(void);
__attribute__((noinline)) void site_freer(void)
{
	uslab_cache_free(site_cache, site_obj);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void site_double_freer(void *arg);
__attribute__((noinline)) void site_double_freer(void *arg)
{
	(void)arg;
	site_allocator();
	site_freer();
	uslab_cache_free(site_cache, site_obj);
	__asm__ volatile("" ::: "memory");
}

/* The lines of @buf's section headed @head (up to the next line with two spaces' indent). */
static void section(const char *buf, const char *head, char *out, size_t size)
{
	const char *a = strstr(buf, head), *b;

	out[0] = 0;
	if (!a)
		return;
	b = strstr(a + 1, "\n  ");
	while (b && b[3] == ' ') /* (a frame line: four spaces) */
		b = strstr(b + 1, "\n  ");
	snprintf(out, size, "%.*s", (int)(b ? b - a : (long)strlen(a)), a);
}

static void test_call_sites(void)
{
	char buf[16384], part[2048];
	int status;

	site_cache = create("sites", 64, USLAB_CONSISTENCY_CHECKS | USLAB_STORE_USER);
	status = run_child(site_double_freer, NULL, buf, sizeof(buf));
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "abort: %s", buf);
	CHECK(strstr(buf, "uslab: BUG sites: double free at"), "%s", buf);
	section(buf, "allocated by thread", part, sizeof(part));
	CHECK(strstr(part, "#0 ") && strstr(part, "site_allocator+0x"), "the allocation's site: %s",
	      buf);
	CHECK(!strstr(part, "#1 "), "one address, no backtrace: %s", part);
	section(buf, "last freed by thread", part, sizeof(part));
	CHECK(strstr(part, "site_freer+0x") && !strstr(part, "#1 "), "the free's site: %s", buf);
	section(buf, "this call, by thread", part, sizeof(part));
	CHECK(strstr(part, "site_double_freer+0x"), "the double free's caller: %s", buf);
}

/* ---------------------------------------------------------- corrupt */

/* Shared with the children: corruptions made, and allocations checked. */
static unsigned long *shared;

/* The children's loop: corrupt a byte of a free object, then allocate and check. */
static void corrupt_child(void *arg)
{
	struct uslab_cache *c = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	size_t size = uslab_cache_size(c);
	struct uslab_cache_stats st;
	unsigned long before;
	size_t off;
	bool debug;
	void *p[32];

	uslab_cache_stats(c, &st);
	debug = st.objsize > size + 8; /* red zones and metadata in its stride */

	for (;;) {
		unsigned char *victim;

		if (uslab_cache_alloc_bulk(c, 32, p) != 32)
			_exit(3);
		victim = p[rnd_next(&seed) % 32];
		uslab_cache_free_bulk(c, 32, p);
		off = rnd_next(&seed) % size;
		/* (Under ASan the free object is poisoned: this write is on purpose.) */
		ASAN_UNPOISON_MEMORY_REGION(victim + off, 1);
		victim[off] ^= (unsigned char)(1 + rnd_next(&seed) % 255);
		__atomic_add_fetch(&shared[0], 1, __ATOMIC_RELAXED);
		before = uslab_bug_count();
		for (int i = 0; i < 32; i++) {
			char *o = uslab_cache_alloc(c);

			if (!o)
				_exit(3);
			/* An object of this cache, at an object's start: anything else is a failure. */
			if (uslab_cache_of(o) != c ||
			    uslab_slab_of(o) != uslab_slab_of(o + size - 1))
				_exit(4);
			/*
			 * Handed out twice: a flipped free pointer may name another
			 * object of the slab, which the default tier cannot tell
			 * (nor can SLUB's hardened freelist); the debug tier must.
			 */
			for (int j = 0; j < i; j++)
				if (p[j] == o && debug)
					_exit(5);
			p[i] = o;
		}
		uslab_cache_free_bulk(c, 32, p);
		/* The debug tier finds every one of them (poison) when it is handed out. */
		if (debug && uslab_bug_count() - before != 1)
			_exit(6);
		if (__atomic_load_n(&shared[0], __ATOMIC_RELAXED) >= shared[1])
			_exit(0);
	}
}

static void corrupt_run(const char *name, unsigned int flags, unsigned int layout)
{
	struct uslab_cache_args args = { .sheaf_capacity = 1, .layout = layout };
	struct uslab_cache *c = uslab_cache_create(name, 256, &args, flags);
	char buf[4096];
	unsigned long children = 0, aborted = 0, goal = shared[1];

	CHECK(c, "create %s", name);
	shared[0] = 0;
	while (shared[0] < goal) {
		int status = run_child(corrupt_child, c, buf, sizeof(buf));

		children++;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "uslab: BUG"))
			aborted++; /* detected */
		else
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "%s: a child ended with status %#x after %lu corruptions: %s", name,
			      status, shared[0], buf);
	}
	printf("   %s: %lu corruptions in %lu children, %lu stopped by uslab: BUG\n", name,
	       shared[0], children, aborted);
	uslab_cache_destroy(c);
}

static void test_corruptions(unsigned long n)
{
	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shared != MAP_FAILED, "mmap");
	shared[1] = n / 4;
	corrupt_run("corrupt_freeptr", 0, USLAB_LAYOUT_FREEPTR);
	corrupt_run("corrupt_objfreelist", 0, USLAB_LAYOUT_OBJFREELIST);
	corrupt_run("corrupt_onslab", 0, USLAB_LAYOUT_ONSLAB);
	/* Z and P without F: each corruption reported (counted), the child goes on. */
	corrupt_run("corrupt_debug", USLAB_RED_ZONE | USLAB_POISON, USLAB_LAYOUT_AUTO);
}

/*
 * Power-of-two kmalloc classes stay aligned to their size under every
 * combination of the debug letters (issue 22 item 8: the 8, 16 and 32 KiB
 * classes were only page-aligned). Each combination in a child, whose
 * first uslab call reads USLAB_DEBUG.
 */
static void align_child(void *arg)
{
	enum { N = 40 };
	void *p[N];

	setenv("USLAB_DEBUG", arg, 1);
	for (size_t size = 8; size <= USLAB_KMALLOC_MAX_CACHE_SIZE; size *= 2) {
		unsigned long bad = 0;

		for (int i = 0; i < N; i++) {
			p[i] = uslab_kmalloc(size);
			CHECK(p[i], "kmalloc(%zu)", size);
			bad += ((uintptr_t)p[i] & (size - 1)) != 0;
		}
		CHECK(!bad,
		      "USLAB_DEBUG=%s: %lu of %d objects of kmalloc-%zu not aligned to %zu (%p)",
		      (char *)arg, bad, N, size, size, p[0]);
		for (int i = 0; i < N; i++)
			uslab_kfree(p[i]);
	}
}

static void test_debug_alignment(void)
{
	static const char letters[] = "FZPU";
	char err[4096];

	for (unsigned int mask = 1; mask < 16; mask++) {
		char combo[8];
		int n = 0, status;

		for (int i = 0; i < 4; i++) {
			if (mask & (1u << i))
				combo[n++] = letters[i];
		}
		combo[n] = 0;
		status = run_child(align_child, combo, err, sizeof(err));
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "USLAB_DEBUG=%s: status %#x %s", combo, status, err);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "kunit";

	if (!strcmp(mode, "kunit")) {
		RUN(test_clobber_zone);
		RUN(test_clobber_left_zone);
		RUN(test_first_word);
		RUN(test_clobber_50th_byte);
		RUN(test_clobber_redzone_free);
		RUN(test_overflow_onto_state);
		RUN(test_inside_pointers);
		RUN(test_clean_use);
		RUN(test_leak_at_destroy);
		RUN(test_deferred_double_free);
		RUN(test_env_selection);
		RUN(test_sheaf_checks);
		RUN(test_cross_thread_double_free);
	} else if (!strcmp(mode, "kmalloc")) {
		RUN(test_kmalloc_redzone);
		RUN(test_krealloc_redzone);
		RUN(test_kmalloc_freed);
	} else if (!strcmp(mode, "align")) {
		RUN(test_debug_alignment);
	} else if (!strcmp(mode, "trials")) {
		RUN(test_double_free_trials);
		RUN(test_foreign_trials);
	} else if (!strcmp(mode, "abort")) {
		RUN(test_abort);
		RUN(test_call_sites);
	} else if (!strcmp(mode, "corrupt")) {
		unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 0) : 100000;

		test_corruptions(n);
		printf("ok test_corruptions (%lu)\n", n);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
