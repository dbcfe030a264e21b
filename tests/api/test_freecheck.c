// SPDX-License-Identifier: MIT
/*
 * test_freecheck.c - every misuse of a free, each in a child process, and
 * where it is caught: at the call (the child stops inside the bad free,
 * before it prints its next line), later (when its objects reach their
 * slabs: shrink), or not at all. Each kind runs against a cache created
 * with USLAB_FREE_KEY (doc/design.md, "Free checks"), whose free key must
 * catch every double free at the call, and against a default cache, which
 * writes no free object: the library's naive check catches an immediate
 * double free at its call, the slabs the rest later (or nothing, where an
 * object freed twice is handed out twice: the kernel's and DPDK's default
 * contract). The kmalloc kinds follow USLAB_FREE_KEY in the environment
 * (1: keyed; unset: the kernel's kmalloc, as without the malloc drop-in).
 * The interior-pointer check catches interior frees at the call in both.
 * The debug tier (USLAB_DEBUG=F, the run named "F") catches every kind at
 * the call.
 *
 *	api_freecheck [TIER]	TIER: "default" (the default) or "F"; the
 *				table of outcomes goes to stdout
 *
 * Built inline and with USLAB_NO_INLINE (api_freecheck_noinline), and run
 * with USLAB_PERCPU=1 (per-CPU sheaves) and USLAB_FREE_KEY=1 too.
 */
#include <uslab.h>
#include <pthread.h>
#include <stdbool.h>
#include <uslab/magazine.h>

#include "../test.h"

/* cache: the one a kind uses (keyed, then plain); other: another cache. */
static struct uslab_cache *cache, *keyed, *plain, *other, *nokey;
static bool all_keyed; /* USLAB_FREE_KEY=1: plain and the kmalloc classes have the key too */

#define AFTER "-- after the call --"

/* The rest of every trial: the marker, then whatever frees reach the slabs. */
static void later(void)
{
	fprintf(stderr, "%s\n", AFTER);
	fflush(stderr);
	uslab_cache_shrink(cache);
	uslab_cache_shrink(other);
	for (size_t size = 8; size <= 256; size += 8)
		uslab_cache_shrink(uslab_kmalloc_cache(size));
}

static void immediate(void *arg)
{
	void *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_cache_free(cache, p);
	uslab_cache_free(cache, p);
	later();
}

/* free(p); free(q); free(p), with @arg objects freed in between (one: the case). */
static void delayed(void *arg)
{
	size_t k = (size_t)(uintptr_t)arg;
	void **q = malloc((k + 1) * sizeof(*q));
	void *p = uslab_cache_alloc(cache);

	for (size_t i = 0; i < k; i++)
		q[i] = uslab_cache_alloc(cache);
	uslab_cache_free(cache, p);
	for (size_t i = 0; i < k; i++)
		uslab_cache_free(cache, q[i]);
	uslab_cache_free(cache, p);
	later();
}

static void *free_it(void *p)
{
	uslab_cache_free(cache, p);
	return NULL;
}

/* Freed by one thread, then by another. */
static void cross_thread(void *arg)
{
	void *p = uslab_cache_alloc(cache);
	pthread_t t;

	(void)arg;
	pthread_create(&t, NULL, free_it, p);
	pthread_join(t, NULL);
	uslab_cache_free(cache, p);
	later();
}

/* One bulk free holding the object twice. */
static void bulk_twice(void *arg)
{
	void *p[4];

	(void)arg;
	for (int i = 0; i < 3; i++)
		p[i] = uslab_cache_alloc(cache);
	p[3] = p[1];
	uslab_cache_free_bulk(cache, 4, p);
	later();
}

/* A single free, then a bulk free (of 40: the library's path) with it again. */
static void bulk_after_free(void *arg)
{
	void *p[40];

	(void)arg;
	for (int i = 0; i < 40; i++)
		p[i] = uslab_cache_alloc(cache);
	uslab_cache_free(cache, p[17]);
	uslab_cache_free_bulk(cache, 40, p);
	later();
}

static void magazine_twice(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(cache, 0, 0);
	void *p = uslab_magazine_alloc(m);

	(void)arg;
	uslab_magazine_free(m, p);
	uslab_magazine_free(m, p);
	later();
}

/* Freed to the cache, then to a magazine. */
static void magazine_after_free(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(cache, 0, 0);
	void *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_cache_free(cache, p);
	uslab_magazine_free(m, p);
	later();
}

/* A free batch holding the object twice: caught when the batch is flushed. */
static void batch_twice(void *arg)
{
	struct uslab_free_batch b;
	void *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_free_batch_init(&b, cache);
	uslab_free_batch_add(&b, p);
	uslab_free_batch_add(&b, p);
	uslab_free_batch_flush(&b);
	later();
}

static void interior(void *arg)
{
	char *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_cache_free(cache, p + 8);
	later();
}

static void wrong_cache(void *arg)
{
	(void)arg;
	uslab_cache_free(other, uslab_cache_alloc(cache));
	later();
}

static void foreign(void *arg)
{
	static char not_ours[256] __attribute__((aligned(64)));

	(void)arg;
	uslab_cache_free(cache, not_ours);
	later();
}

static void kfree_immediate(void *arg)
{
	void *p = uslab_kmalloc(200);

	(void)arg;
	uslab_kfree(p);
	uslab_kfree(p);
	later();
}

static void kfree_delayed(void *arg)
{
	void *p = uslab_kmalloc(200), *q = uslab_kmalloc(200);

	(void)arg;
	uslab_kfree(p);
	uslab_kfree(q);
	uslab_kfree(p);
	later();
}

/* @arg: the offset into the object (every 8th byte of a 192-byte class). */
static void kfree_interior(void *arg)
{
	char *p = uslab_kmalloc(192);

	uslab_kfree(p + (size_t)(uintptr_t)arg);
	later();
}

/* A cache created with USLAB_NO_FREE_KEY: its double frees are found at the slab. */
static void nokey_immediate(void *arg)
{
	void *p = uslab_cache_alloc(nokey);

	(void)arg;
	uslab_cache_free(nokey, p);
	uslab_cache_free(nokey, p);
	fprintf(stderr, "%s\n", AFTER);
	uslab_cache_shrink(nokey);
}

/*
 * A free object's first word: the free key's while it waits (cleared when
 * handed out again) in a keyed cache, the program's own in a default or a
 * USLAB_NO_FREE_KEY cache.
 */
static void test_first_word(void)
{
	const uint64_t mark = 0x1122334455667788ull;

	for (int k = 0; k < 3; k++) {
		bool with_key = k == 1 || (k == 0 && all_keyed);
		struct uslab_cache *c = k == 0 ? plain : k == 1 ? keyed : nokey;
		uint64_t *o = uslab_cache_alloc(c), *again;
		int same = 0;

		/* Another CPU's sheaf after a migration (USLAB_PERCPU=1): tried again. */
		for (int tries = 0; tries < 100 && !same; tries++) {
			*o = mark;
			uslab_cache_free(c, o);
			again = uslab_cache_alloc(c);
			same = again == o;
			if (same)
				CHECK(*again == (with_key ? 0 : mark),
				      "%s: first word %#llx after a free and an alloc",
				      k == 0 ? "default" :
				      k == 1 ? "with the key" :
					       "USLAB_NO_FREE_KEY",
				      (unsigned long long)*again);
			o = again;
		}
		CHECK(same, "the object freed last comes back first");
		uslab_cache_free(c, o);
	}
}

static void kfree_bulk_twice(void *arg)
{
	void *p[3] = { uslab_kmalloc(64), uslab_kmalloc(64), NULL };

	(void)arg;
	p[2] = p[0];
	uslab_cache_free_bulk(NULL, 3, p); /* kfree_bulk() */
	later();
}

/*
 * A keyed cache's object freed twice after its first free reached its
 * slab, where the slab's own bookkeeping sits in free objects: @arg 0, an
 * OBJFREELIST cache of 256-byte objects whose first free object holds the
 * slab's index array (its first word keeps the key: the array goes after
 * it); 1, a FREEPTR cache of 8-byte objects (the free pointer goes after
 * the object, not over the key).
 */
static void slab_bookkeeping(void *arg)
{
	enum { N = 2000 };
	bool tiny = arg != NULL;
	struct uslab_cache_args a = { .layout = tiny ? USLAB_LAYOUT_FREEPTR :
						       USLAB_LAYOUT_OBJFREELIST };
	struct uslab_cache *c =
		uslab_cache_create("bookkeeping", tiny ? 8 : 256, &a, USLAB_FREE_KEY);
	static void *objs[N];
	struct uslab_cache_stats st;
	void *p = NULL;

	if (!c) /* the debug tier: no layout that writes free objects (EINVAL) */
		c = uslab_cache_create("bookkeeping", tiny ? 8 : 256, NULL, USLAB_FREE_KEY);
	CHECK(c, "create (errno %d)", errno);
	for (int i = 0; i < N; i++)
		objs[i] = uslab_cache_alloc(c);
	uslab_cache_shrink(c); /* the sheaves' spare objects back to their slabs */
	uslab_cache_stats(c, &st);
	/* An object of a slab all of whose objects the program holds. */
	for (int i = 0; i < N && !p; i++) {
		unsigned int same = 0;

		for (int j = 0; j < N; j++)
			same += uslab_slab_of(objs[j]) == uslab_slab_of(objs[i]);
		if (same == st.objperslab)
			p = objs[i];
	}
	CHECK(p, "a full slab");
	uslab_cache_free(c, p);
	uslab_cache_shrink(c); /* p to its slab: the array's holder, or a free pointer set */
	cache = c;
	uslab_cache_free(c, p);
	later();
}

enum where { AT_CALL, LATER, MISSED };
static const char *const where_name[] = { "at the call", "later", "missed" };

/* Run @fn(@arg) in a child: where its "uslab: BUG" line came. */
static enum where trial(void (*fn)(void *), void *arg, char *buf, size_t size)
{
	int status = run_child(fn, arg, buf, size);
	const char *bug = strstr(buf, "uslab: BUG"), *after = strstr(buf, AFTER);

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT || !bug)
		return MISSED;
	return !after || bug < after ? AT_CALL : LATER;
}

struct kind {
	const char *name;
	void (*fn)(void *);
	void *arg;
	/* where the default tier must catch it with the key: inline paths, library functions */
	enum where inline_tier, library_tier;
	/* and without (a default cache, or kmalloc without USLAB_FREE_KEY=1) */
	enum where inline_plain, library_plain;
	/* PER_CACHE: run with each cache; KMALLOC: once, keyed as the environment says; OWN: once */
	enum { PER_CACHE, KMALLOC, OWN } scope;
};

#ifdef USLAB_NO_INLINE
#define LIB 1
#else
#define LIB 0
#endif

/*
 * Without the key, a double free into a magazine is missed: the object is
 * handed out twice, as by DPDK's mempool cache (the debug tier catches it).
 */
static const struct kind kinds[] = {
	{ "immediate double free", immediate, NULL, AT_CALL, AT_CALL, LATER, AT_CALL, PER_CACHE },
	{ "free(p) free(q) free(p)", delayed, (void *)1, AT_CALL, AT_CALL, LATER, LATER,
	  PER_CACHE },
	{ "double free, 100 frees apart (past a sheaf)", delayed, (void *)100, AT_CALL, AT_CALL,
	  LATER, LATER, PER_CACHE },
	{ "double free, 5000 frees apart (the barn)", delayed, (void *)5000, AT_CALL, AT_CALL,
	  LATER, LATER, PER_CACHE },
	{ "double free across threads", cross_thread, NULL, AT_CALL, AT_CALL, LATER, LATER,
	  PER_CACHE },
	{ "double free inside one bulk free", bulk_twice, NULL, AT_CALL, AT_CALL, LATER, LATER,
	  PER_CACHE },
	{ "free, then a bulk free with it", bulk_after_free, NULL, AT_CALL, AT_CALL, LATER, LATER,
	  PER_CACHE },
	{ "double free into a magazine", magazine_twice, NULL, AT_CALL, AT_CALL, MISSED, MISSED,
	  PER_CACHE },
	{ "free to the cache, then to a magazine", magazine_after_free, NULL, AT_CALL, AT_CALL,
	  MISSED, MISSED, PER_CACHE },
	{ "double add to a free batch (caught at its flush)", batch_twice, NULL, AT_CALL, AT_CALL,
	  LATER, LATER, PER_CACHE },
	/* The inline cache free looks nothing up: its interior free is found at the slab. */
	{ "free of p + 8", interior, NULL, LATER, AT_CALL, LATER, AT_CALL, PER_CACHE },
	{ "free to the wrong cache", wrong_cache, NULL, LATER, AT_CALL, LATER, AT_CALL, PER_CACHE },
	{ "free of a pointer uslab did not hand out", foreign, NULL, LATER, AT_CALL, LATER, AT_CALL,
	  PER_CACHE },
	{ "kfree twice", kfree_immediate, NULL, AT_CALL, AT_CALL, LATER, AT_CALL, KMALLOC },
	{ "kfree(p) kfree(q) kfree(p)", kfree_delayed, NULL, AT_CALL, AT_CALL, LATER, LATER,
	  KMALLOC },
	{ "kfree of p + 8", kfree_interior, (void *)8, AT_CALL, AT_CALL, AT_CALL, AT_CALL,
	  KMALLOC },
	{ "kfree_bulk with an object twice", kfree_bulk_twice, NULL, AT_CALL, AT_CALL, LATER, LATER,
	  KMALLOC },
	{ "double free of OBJFREELIST's array holder", slab_bookkeeping, NULL, AT_CALL, AT_CALL,
	  AT_CALL, AT_CALL, OWN },
	{ "double free of an 8-byte object back in its slab", slab_bookkeeping, (void *)1, AT_CALL,
	  AT_CALL, AT_CALL, AT_CALL, OWN },
	/* Switched off: the naive check of a library push at best, else the slab. */
	{ "double free, USLAB_NO_FREE_KEY cache", nokey_immediate, NULL, LATER, LATER, LATER, LATER,
	  OWN },
};

int main(int argc, char **argv)
{
	const char *tier = argc > 1 ? argv[1] : "default";
	bool debug = strcmp(tier, "default") != 0;
	static char buf[1 << 16];
	unsigned int caught = 0, n = 0;

	const char *env_key = getenv("USLAB_FREE_KEY");

	all_keyed = env_key && strcmp(env_key, "1") == 0;
	setvbuf(stdout, NULL, _IONBF, 0);
	keyed = uslab_cache_create("victim", 256, NULL, USLAB_FREE_KEY);
	plain = uslab_cache_create("plain", 256, NULL, 0);
	other = uslab_cache_create("other", 256, NULL, 0);
	nokey = uslab_cache_create("nokey", 256, NULL, USLAB_NO_FREE_KEY);
	CHECK(keyed && plain && other && nokey, "create");
	CHECK(!uslab_cache_create("both", 256, NULL, USLAB_FREE_KEY | USLAB_NO_FREE_KEY) &&
		      errno == EINVAL,
	      "USLAB_FREE_KEY with USLAB_NO_FREE_KEY: EINVAL");
	if (!debug)
		test_first_word(); /* (the debug tier poisons and checks free objects) */
	printf("| misuse (%s tier, %s) | cache | caught |\n|---|---|---|\n", tier,
	       LIB ? "library functions" : "inline paths");
	for (int pass = 0; pass < 2; pass++) {
		cache = pass ? keyed : plain;
		for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
			const struct kind *k = &kinds[i];
			bool key = all_keyed || (k->scope != KMALLOC && pass == 1);
			enum where want = debug ? AT_CALL :
					  key	? (LIB ? k->library_tier : k->inline_tier) :
						  (LIB ? k->library_plain : k->inline_plain);
			enum where got;

			if (k->scope != PER_CACHE && pass == 0)
				continue; /* (once: they use no cache of the pass) */
			got = trial(k->fn, k->arg, buf, sizeof(buf));
			printf("| %s | %s | %s |\n", k->name,
			       k->scope == KMALLOC ? (key ? "kmalloc, keyed" : "kmalloc") :
			       pass == 0 && key	   ? "default, keyed" :
			       k->scope == OWN	   ? "its own" :
			       pass		   ? "USLAB_FREE_KEY" :
						     "default",
			       where_name[got]);
			n++;
			caught += got == AT_CALL;
			/* Caught at least where promised: earlier is fine, never later. */
			CHECK(got <= want, "%s (%s): caught %s, want %s; stderr:\n%s", k->name,
			      pass ? "keyed" : "default", where_name[got], where_name[want], buf);
		}
	}
	cache = keyed;
	/* Every offset inside an object of a kmalloc class, freed: each at the call. */
	for (uintptr_t off = 8; off < 192; off += 8) {
		enum where got = trial(kfree_interior, (void *)off, buf, sizeof(buf));

		CHECK(got == AT_CALL, "kfree of p + %lu: caught %s; stderr:\n%s",
		      (unsigned long)off, where_name[got], buf);
	}
	/* Delayed double frees at 1..300 frees apart: every one at the call. */
	for (uintptr_t k = 1; k <= 300; k += 13) {
		enum where got = trial(delayed, (void *)k, buf, sizeof(buf));

		CHECK(got == AT_CALL, "double free %lu frees apart: caught %s; stderr:\n%s",
		      (unsigned long)k, where_name[got], buf);
	}
	printf("%u of %u kinds caught at the call (%lu checks)\n", caught, n, test_checks);
	return 0;
}
