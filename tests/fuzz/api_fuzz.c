// SPDX-License-Identifier: MIT
/*
 * api_fuzz.c - a model-based fuzzer of uslab's public API (issue 35, "Tests
 * that hold every promise").
 *
 * One interpreter turns a stream of bytes into calls: caches of every layout,
 * of 8 B to 64 KiB, with a constructor, USLAB_TYPESAFE_BY_RCU, USLAB_POOL,
 * USLAB_POOL_EXTERNAL (the program's memory), USLAB_FREE_KEY,
 * USLAB_NO_FREE_KEY, USLAB_PERCPU, USLAB_HWCACHE_ALIGN, an alignment, the
 * debug tier; single and bulk calls, inline and through the library's
 * functions; pools' get and put; magazines; free batches; uslab_free_rcu and
 * uslab_free_rcu_head; the kmalloc family (krealloc in every direction,
 * aligned forms, kfree_bulk); shrink, flush, trim, destroy; a second thread
 * that frees what this one allocated and allocates for it; threads that
 * exit; fork; and, with libuslab-malloc.so preloaded, malloc, calloc,
 * realloc, the aligned forms, free and malloc_trim.
 *
 * A model of what is live (address -> kind, cache, usable size, stamp) is
 * checked at every step:
 *   - no address is handed out while it is live;
 *   - every object keeps its stamp (offset 0, the last byte and spans
 *     between) until it is freed, and across krealloc/realloc's copy;
 *   - no object is handed out with the free key in its first word (the
 *     key is read once from a keyed cache's magazine: white-box, for this
 *     check only), whatever path handed it out;
 *   - where uslab promises not to write a free object (the index layouts,
 *     with USLAB_FREE_KEY: but its first 8 bytes; constructor and
 *     TYPESAFE_BY_RCU caches; external pools), an object handed out again
 *     still holds the stamp it was freed with (OBJFREELIST: but the array
 *     at the start of one object per slab; a constructor's cache: or its
 *     constructed state);
 *   - every contract checked where it is exact (sizes, alignments, return
 *     values, errno, arrays cleared or left alone, magazine counts);
 *   - memory comes back: before a cache is destroyed, with its objects freed
 *     and the sheaves flushed, it has no active object and no slab,
 *     validate finds nothing, destroy returns 0; uslab_trim leaves no page
 *     retained; and no "uslab: BUG", no abort, no debug-tier report.
 * Misuse steps run in a forked child each, which must die by SIGABRT with a
 * "uslab: BUG" line: a double free in a USLAB_FREE_KEY cache, uslab_kfree
 * of p + 8, a free to the wrong cache through the library (and, preloaded,
 * free(p + 8) and a double free()).
 *
 *	api_fuzz SEED [STEPS]		one run, the bytes from a PRNG
 *	api_fuzz FIRST-LAST [STEPS]	a run per seed (STEPS: 2000)
 *	api_fuzz --dump SEED STEPS FILE	write the bytes a run read (a corpus file)
 *	api_fuzz FILE...		run inputs of the libFuzzer target
 *
 * Built with API_FUZZ_LIBFUZZER, the same interpreter is
 * LLVMFuzzerTestOneInput (tests/fuzz/CMakeLists.txt, USLAB_FUZZ=ON).
 * Every run ends with everything freed and every cache destroyed, so runs
 * are independent (libFuzzer runs many in one process).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <uslab.h>
#include <uslab/magazine.h>
#include <uslab/rcu.h>

#include "../test.h"

/* ------------------------------------------------------------- limits */

#define NCACHES 6     /* caches alive at once */
#define NMAGS 4	      /* magazines alive at once */
#define MAX_LIVE 4096 /* objects the model holds */
#define LIVE_BITS 13  /* its hash: 2^13 slots */
#define FREED_BITS 15 /* records of freed objects: 2^15 slots */
#define FREED_MAX (3u << (FREED_BITS - 2))
#define EXT_MAX 512   /* objects of an external pool */
#define BULK_MAX 160  /* objects of one bulk call */
#define PEER_RING 16  /* commands queued to the peer thread */
#define PEER_BATCH 32 /* objects per command */
#define PEER_BACK 256 /* objects the peer allocated, not yet collected */
#define LOG_LEN 4096  /* steps kept for the report of a failed check */
#define CTOR_MAGIC 0xc7043c7043c70431ull

/* ------------------------------------------------------------ the input */

/*
 * The bytes that drive a run: libFuzzer's input, or a PRNG's output (then
 * optionally recorded, for --dump). When an input runs out it reads zeros
 * and the run ends at the next step.
 */
struct src {
	const uint8_t *data;
	size_t len, pos;
	uint64_t rng;
	FILE *rec;
};

static uint8_t src_byte(struct src *s)
{
	uint8_t b;

	if (s->data) {
		b = s->pos < s->len ? s->data[s->pos] : 0;
	} else {
		b = (uint8_t)(rnd_next(&s->rng) >> 56);
		if (s->rec)
			fputc(b, s->rec);
	}
	s->pos++;
	return b;
}

static bool src_done(const struct src *s)
{
	return s->data && s->pos >= s->len;
}

/* A value in [0, n), from as few bytes as n needs. */
static uint32_t pick(struct src *s, uint32_t n)
{
	uint32_t v = 0;

	if (n <= 1)
		return 0;
	for (uint32_t m = n - 1; m; m >>= 8)
		v = v << 8 | src_byte(s);
	return v % n;
}

static bool chance(struct src *s, unsigned int percent)
{
	return pick(s, 100) < percent;
}

static uint64_t src_u64(struct src *s)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | src_byte(s);
	return v;
}

/* A size in [lo, hi], log-uniform, sometimes on a power of two or next to one. */
static size_t pick_size(struct src *s, size_t lo, size_t hi)
{
	unsigned int blo = 63 - (unsigned int)__builtin_clzl(lo);
	unsigned int bhi = 63 - (unsigned int)__builtin_clzl(hi);
	unsigned int b = blo + pick(s, bhi - blo + 1);
	size_t v = (size_t)1 << b;

	switch (pick(s, 4)) {
	case 0:
		break;
	case 1:
		v += pick(s, 3) - 1; /* 2^b - 1, 2^b, 2^b + 1 */
		break;
	default:
		v += pick(s, (uint32_t)(v < (1u << 24) ? v : (1u << 24)));
	}
	return v < lo ? lo : v > hi ? hi : v;
}

/* ------------------------------------------------------------ the model */

enum kind { K_CACHE, K_KMALLOC, K_MALLOC };
static const char *const kind_name[] = { "cache", "kmalloc", "malloc" };

/* A live object: its address, the bytes stamped, and the stamp's tag. */
struct obj {
	unsigned char *p;
	size_t size;	 /* usable bytes, all stamped */
	uint64_t tag;	 /* the stamp: pat(tag, offset) at each stamped offset */
	uint8_t kind;	 /* enum kind */
	int8_t ci;	 /* K_CACHE: the cache's slot */
	uint8_t nofirst; /* its first 8 bytes left as handed out (the stale-key case) */
	uint8_t large;	 /* K_KMALLOC: a large object (a slab of its own, no cache) */
};

/* A cache of the run, in one of NCACHES slots. */
struct fcache {
	struct uslab_cache *c; /* NULL: the slot is free */
	char name[32];
	size_t size;
	unsigned int flags;
	struct uslab_cache_args args;
	unsigned int layout; /* in effect (uslab_cache_stats) */
	unsigned int objperslab;
	unsigned int align;	 /* in effect */
	bool keyed;		 /* the free key writes its objects' first word */
	unsigned int holder_off; /* OBJFREELIST: the array's offset in its holder */
	bool ctor, typesafe, pool, external, debug;
	bool track;	    /* free objects are checked when handed out again */
	bool lost;	    /* some of its freed objects were not recorded */
	bool shared;	    /* another thread may hold some of its objects (sheaves) */
	uint32_t gen;	    /* bumped at each create: records name the cache they were made in */
	uint32_t epoch;	    /* bumped when its slabs may have gone back (shrink, trim, EBUSY) */
	unsigned long live; /* model objects */
	unsigned long rcu_pending; /* freed with uslab_free_rcu*, maybe not yet */
	/* USLAB_POOL_EXTERNAL: the program's memory, its objects and their state */
	unsigned char *ext;
	size_t ext_len, stride;
	unsigned int ext_n, ext_free;
	uint8_t ext_live[EXT_MAX];
	uint64_t ext_tag[EXT_MAX];
};

/* A freed object, for the check when its address is handed out again. */
struct freed {
	unsigned char *p;
	uint64_t tag;
	size_t size;
	uint32_t gen, epoch;
	uint16_t hole; /* 0, or 8 + the offset of an rcu_head uslab may write (16 bytes) */
	int8_t ci;
	uint8_t nofirst;
};

struct fmag {
	struct uslab_magazine *m;
	int ci;
	unsigned int guaranteed; /* allocations left that a prefill promised without a refill */
	unsigned long refills;	 /* m->refills when it was promised */
};

static struct {
	struct fcache caches[NCACHES];
	struct fmag mags[NMAGS];
	struct obj live[MAX_LIVE];
	unsigned int nlive;
	uint32_t hash[1u << LIVE_BITS]; /* index + 1 into live[], 0: empty */
	struct freed freed[1u << FREED_BITS];
	unsigned int nfreed;
	uint64_t tags; /* the next stamp's counter */
	uint32_t gens;
	unsigned long step;
	uint64_t seed;
	bool child;		 /* in a forked child: no peer, no fork, no thread */
	bool child_synced;	 /* ... forked with no command pending: destroy allowed */
	bool rcu_any;		 /* a deferred free since the last barrier */
	unsigned long tolerated; /* OBJFREELIST array holders handed out */
	unsigned long guarded;	 /* objects like the sampling guard's, not checked */
	unsigned long forks;	 /* children forked in this run */
	unsigned long reused;	 /* freed objects handed out again and checked */
	unsigned long ops[64];
} M;

/* Set once per process. */
static uintptr_t free_key;	     /* the process's free key (0: none seen) */
static bool dropin;		     /* malloc is libuslab-malloc.so's */
static bool env_all_keyed;	     /* USLAB_FREE_KEY=1 */
static bool env_debug;		     /* USLAB_DEBUG set: any cache may be in the debug tier */
static bool verbose;		     /* API_FUZZ_VERBOSE: each op's count at the end */
static bool trace;		     /* API_FUZZ_TRACE: every step on stderr as it runs */
static unsigned long log_steps = 48; /* API_FUZZ_LOG=N: steps printed when a check fails */
/* API_FUZZ_MAX_FORKS=N: forked children (fork and misuse steps) per run; libFuzzer: 1 */
static unsigned long max_forks = ULONG_MAX;

/* ---------------------------------------------------------- reporting */

static struct {
	unsigned long step;
	char what[96];
} oplog[LOG_LEN];

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	if (M.child && !trace)
		return;
	oplog[M.step % LOG_LEN].step = M.step;
	va_start(ap, fmt);
	vsnprintf(oplog[M.step % LOG_LEN].what, sizeof(oplog[0].what), fmt, ap);
	va_end(ap);
	if (trace)
		fprintf(stderr, "  %6lu %s%s\n", M.step, M.child ? "(child) " : "",
			oplog[M.step % LOG_LEN].what);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "api_fuzz: FAIL seed %llu step %lu%s: ", (unsigned long long)M.seed, M.step,
		M.child ? " (in a forked child)" : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (!M.child) {
		fprintf(stderr, "the last steps:\n");
		for (unsigned long s = M.step >= log_steps ? M.step - log_steps + 1 : 0;
		     s <= M.step; s++)
			if (oplog[s % LOG_LEN].step == s && oplog[s % LOG_LEN].what[0])
				fprintf(stderr, "  %6lu %s\n", s, oplog[s % LOG_LEN].what);
	}
	fflush(stderr);
	abort();
}

/* Checks of the peer thread: no log (it is the main thread's). */
static void peer_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void peer_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "api_fuzz: FAIL (another thread) seed %llu: ", (unsigned long long)M.seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#define ENSURE(cond, ...)                         \
	do {                                      \
		test_checks++;                    \
		if (__builtin_expect(!(cond), 0)) \
			fail(__VA_ARGS__);        \
	} while (0)

/* ------------------------------------------------------------- stamps */

static inline uint8_t pat(uint64_t tag, size_t off)
{
	return (uint8_t)(((tag + off) * 0x9E3779B97F4A7C15ull) >> 56);
}

/* The tag of memory uslab_kfree_sensitive() cleared: every byte 0. */
#define ZERO_TAG 0

static inline uint8_t want_byte(uint64_t tag, size_t off)
{
	return tag == ZERO_TAG ? 0 : pat(tag, off);
}

/*
 * The stamped bytes of an object of @size: all of a small one; of a larger
 * one its first and last 256 bytes and 64 at every stride (4 KiB up to
 * 64 KiB, about 16 spans beyond), so offset 0 and the last byte always.
 */
static size_t span_next(size_t size, size_t off, size_t *len)
{
	size_t stride = 4096 * (1 + size / 65536);

	if (size <= 1024) {
		*len = off ? 0 : size;
		return 0;
	}
	if (off == 0) {
		*len = 256;
		return 0;
	}
	if (off < 256)
		off = 0;
	off = (off / stride + 1) * stride;
	if (off + 64 <= size - 256) {
		*len = 64;
		return off;
	}
	if (off - stride + 64 > size - 256 || off >= size) {
		*len = 0;
		return size;
	}
	*len = 256;
	return size - 256;
}

#define for_each_span(size, off, len) \
	for (off = span_next(size, 0, &len); len; off = span_next(size, off + len, &len))

/* @from: the first offset stamped (8: the first word left alone). */
static void stamp_from(unsigned char *p, size_t size, uint64_t tag, size_t from)
{
	size_t off, len;

	for_each_span(size, off, len)
	{
		for (size_t i = off < from ? from : off; i < off + len; i++)
			p[i] = pat(tag, i);
		if (off + len >= size)
			break;
	}
}

/* The first offset in [from, limit) whose byte is not the stamp's, or SIZE_MAX. */
static size_t stamp_bad(const unsigned char *p, size_t size, uint64_t tag, size_t from,
			size_t limit, size_t hole)
{
	size_t off, len;

	for_each_span(size, off, len)
	{
		for (size_t i = off < from ? from : off; i < off + len && i < limit; i++)
			if (p[i] != want_byte(tag, i) && !(hole && i >= hole - 8 && i < hole + 8))
				return i;
		if (off + len >= size)
			break;
	}
	return SIZE_MAX;
}

static void stamp(struct obj *o)
{
	stamp_from(o->p, o->size, o->tag, o->nofirst ? 8 : 0);
}

static const char *obj_what(const struct obj *o)
{
	static __thread char buf[96];

	if (o->kind == K_CACHE)
		snprintf(buf, sizeof(buf), "object %p of %s (%zu bytes)", (void *)o->p,
			 M.caches[o->ci].name, o->size);
	else
		snprintf(buf, sizeof(buf), "%s object %p (%zu usable bytes)", kind_name[o->kind],
			 (void *)o->p, o->size);
	return buf;
}

/* The stamp whole, or stop (@peer: from another thread). */
static void verify(const struct obj *o, bool peer)
{
	size_t bad = stamp_bad(o->p, o->size, o->tag, o->nofirst ? 8 : 0, SIZE_MAX, 0);

	if (!peer)
		test_checks++; /* (the main thread's counter) */
	if (bad == SIZE_MAX)
		return;
	if (peer)
		peer_fail("%s: byte %zu changed while it was live (%#x, want %#x)", obj_what(o),
			  bad, o->p[bad], pat(o->tag, bad));
	fail("%s: byte %zu changed while it was live (%#x, want %#x)", obj_what(o), bad, o->p[bad],
	     pat(o->tag, bad));
}

static uint64_t new_tag(void)
{
	uint64_t x = M.seed * 0x9E3779B97F4A7C15ull + ++M.tags;

	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 29;
	return x == ZERO_TAG ? 1 : x;
}

/*
 * Before an object is used: no free key in its first word, whatever handed
 * it out (doc/design.md, "Free checks": the hand-out invariant).
 */
static bool has_key(const void *p, size_t size)
{
	uintptr_t w;

	if (!free_key || size < sizeof(w))
		return false;
	memcpy(&w, p, sizeof(w));
	return w == free_key;
}

/* ------------------------------------------------------ the live table */

static uint32_t hash_of(const void *p, unsigned int bits)
{
	return (uint32_t)(((uintptr_t)p * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

static int live_find(const void *p)
{
	uint32_t mask = (1u << LIVE_BITS) - 1;

	for (uint32_t h = hash_of(p, LIVE_BITS);; h = (h + 1) & mask) {
		uint32_t i = M.hash[h];

		if (!i)
			return -1;
		if (M.live[i - 1].p == p)
			return (int)(i - 1);
	}
}

static void hash_set(const void *p, uint32_t v)
{
	uint32_t mask = (1u << LIVE_BITS) - 1, h = hash_of(p, LIVE_BITS);

	while (M.hash[h] && M.live[M.hash[h] - 1].p != p)
		h = (h + 1) & mask;
	M.hash[h] = v;
}

/* Linear probing's deletion: shift back what the hole would cut off. */
static void hash_del(const void *p)
{
	uint32_t mask = (1u << LIVE_BITS) - 1, h = hash_of(p, LIVE_BITS);

	while (M.live[M.hash[h] - 1].p != p)
		h = (h + 1) & mask;
	M.hash[h] = 0;
	for (uint32_t j = (h + 1) & mask; M.hash[j]; j = (j + 1) & mask) {
		uint32_t want = hash_of(M.live[M.hash[j] - 1].p, LIVE_BITS);

		if (((j - want) & mask) >= ((j - h) & mask)) {
			M.hash[h] = M.hash[j];
			M.hash[j] = 0;
			h = j;
		}
	}
}

static bool live_full(void)
{
	return M.nlive >= MAX_LIVE - BULK_MAX - PEER_BACK;
}

static void live_add(const struct obj *o)
{
	int i = live_find(o->p);

	ENSURE(i < 0, "%s handed out while it is live (as %s)", obj_what(o), obj_what(&M.live[i]));
	ENSURE(M.nlive < MAX_LIVE, "model full");
	M.live[M.nlive] = *o;
	hash_set(o->p, ++M.nlive);
	if (o->kind == K_CACHE)
		M.caches[o->ci].live++;
}

/* Take live[i] out of the model (the caller frees it). */
static struct obj live_take(unsigned int i)
{
	struct obj o = M.live[i];

	hash_del(o.p);
	if (i != --M.nlive) {
		M.live[i] = M.live[M.nlive];
		hash_set(M.live[i].p, i + 1);
	}
	if (o.kind == K_CACHE)
		M.caches[o.ci].live--;
	return o;
}

/* ----------------------------------------------------- freed objects */

static int freed_slot(const void *p)
{
	uint32_t mask = (1u << FREED_BITS) - 1;

	for (uint32_t h = hash_of(p, FREED_BITS);; h = (h + 1) & mask)
		if (!M.freed[h].p || M.freed[h].p == p)
			return (int)h;
}

static bool freed_take(const void *p, struct freed *out)
{
	uint32_t mask = (1u << FREED_BITS) - 1, h = (uint32_t)freed_slot(p);

	if (!M.freed[h].p)
		return false;
	*out = M.freed[h];
	M.freed[h].p = NULL;
	M.nfreed--;
	for (uint32_t j = (h + 1) & mask; M.freed[j].p; j = (j + 1) & mask) {
		uint32_t want = hash_of(M.freed[j].p, FREED_BITS);

		if (((j - want) & mask) >= ((j - h) & mask)) {
			M.freed[h] = M.freed[j];
			M.freed[j].p = NULL;
			h = j;
		}
	}
	return true;
}

/*
 * An object leaves the model: it is being freed (now, by another thread,
 * or after a grace period). Remember its stamp where uslab promises not to
 * write it. @hole: 8 + the offset of an rcu_head uslab may use, or 0.
 */
static void note_free(const struct obj *o, size_t hole, bool zeroed)
{
	struct fcache *c;
	struct freed *f;
	int h;

	if (o->kind != K_CACHE)
		return;
	c = &M.caches[o->ci];
	if (c->external) {
		unsigned int i = (unsigned int)((size_t)(o->p - c->ext) / c->stride);

		c->ext_live[i] = 0;
		c->ext_tag[i] = o->tag;
		c->ext_free++;
		return;
	}
	if (!c->track)
		return;
	if (M.nfreed >= FREED_MAX) {
		c->lost = true;
		return;
	}
	h = freed_slot(o->p);
	f = &M.freed[h];
	M.nfreed += !f->p;
	*f = (struct freed){ .p = o->p,
			     .tag = o->tag,
			     .size = o->size,
			     .gen = c->gen,
			     .epoch = c->epoch,
			     .hole = (uint16_t)hole,
			     .ci = o->ci,
			     .nofirst = o->nofirst && !zeroed };
	if (zeroed)
		f->tag = ZERO_TAG;
}

/*
 * Whether @p may be an object of the sampling guard (doc/api.md): alone
 * in a page, right-aligned in it (as far down as the alignment asks).
 * Another cache's object may have used that slot between two of this
 * cache's: like a slab gone back and carved again, not checkable.
 */
static bool like_guard(const struct fcache *c, const unsigned char *p)
{
	uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095, end = (uintptr_t)p + c->size;

	return c->size <= 4096 && (uintptr_t)uslab_slab_of(p) == page && end <= page + 4096 &&
	       page + 4096 - end < c->align;
}

/*
 * A freed object of a tracked cache handed out again: the bytes uslab
 * promised not to write still hold its stamp.
 */
static void check_reused(struct fcache *c, unsigned char *p, bool zeroed)
{
	struct freed f;
	bool have = freed_take(p, &f) && f.ci == (int)(c - M.caches) && f.gen == c->gen;
	size_t from = have && f.nofirst ? 8 : 0, bad;
	bool word_ok = true;
	uint64_t w = 0;

	if (!c->track || zeroed)
		return;
	if (c->ctor) {
		/* Constructed (a new slab, or its first word left alone), or as freed. */
		memcpy(&w, p, sizeof(w));
		if (w == (CTOR_MAGIC ^ (uintptr_t)p))
			return;
		ENSURE(have || c->lost,
		       "%s: object %p handed out neither constructed nor as it was freed "
		       "(first word %#llx)",
		       c->name, (void *)p, (unsigned long long)w);
		if (!have)
			return;
	} else if (!have || f.epoch != c->epoch) {
		return; /* never freed here, or its slab may have gone back since */
	}
	if (c->keyed) {
		/* The key's word: cleared at hand-out, or as freed (it went to a slab). */
		memcpy(&w, p, sizeof(w));
		word_ok = f.nofirst || !w || stamp_bad(p, f.size, f.tag, 0, 8, 0) == SIZE_MAX;
		from = 8;
	}
	M.reused++;
	bad = stamp_bad(p, f.size, f.tag, from, SIZE_MAX, f.hole);
	if (bad == SIZE_MAX && word_ok)
		return;
	if (like_guard(c, p)) {
		/* A slot of the guard, used by another cache since: as a new slab. */
		M.guarded++;
		return;
	}
	if (c->layout == USLAB_LAYOUT_OBJFREELIST) {
		/*
		 * The array's holder: objperslab indices, 1 or 2 bytes each, from
		 * its first byte, or its second word in a cache that may have the
		 * key (which stays in the first).
		 */
		size_t arr = (size_t)c->objperslab * (c->objperslab > 256 ? 2 : 1);
		size_t end = c->holder_off + arr;

		if (stamp_bad(p, f.size, f.tag, from, c->holder_off, f.hole) == SIZE_MAX &&
		    stamp_bad(p, f.size, f.tag, end > from ? end : from, SIZE_MAX, f.hole) ==
			    SIZE_MAX) {
			M.tolerated++;
			return;
		}
	}
	if (!word_ok)
		fail("%s: object %p handed out with %#llx in its first word (freed with its stamp; "
		     "the key clears it to 0)",
		     c->name, (void *)p, (unsigned long long)w);
	fail("%s (%s layout%s): object %p freed and handed out again with byte %zu changed "
	     "(%#x, want %#x): uslab wrote a free object",
	     c->name, uslab_layout_name(c->layout), c->keyed ? ", keyed" : "", (void *)p, bad,
	     p[bad], want_byte(f.tag, bad));
}

/* An object of an external pool handed out: one of its objects, free, as freed. */
static void check_external(struct fcache *c, unsigned char *p, bool zeroed)
{
	size_t off = (size_t)(p - c->ext), bad;
	unsigned int i = (unsigned int)(off / c->stride);

	ENSURE(p >= c->ext && off % c->stride == 0 && i < c->ext_n,
	       "%s: %p handed out is none of the pool's objects (%p, %u of %zu bytes)", c->name,
	       (void *)p, (void *)c->ext, c->ext_n, c->stride);
	ENSURE(!c->ext_live[i], "%s: object %u (%p) handed out while it is live", c->name, i,
	       (void *)p);
	bad = zeroed ? SIZE_MAX : stamp_bad(p, c->size, c->ext_tag[i], 0, SIZE_MAX, 0);
	ENSURE(bad == SIZE_MAX,
	       "%s: external object %p changed while free (byte %zu %#x, want %#x): uslab "
	       "wrote the program's memory",
	       c->name, (void *)p, bad, bad == SIZE_MAX ? 0 : p[bad],
	       bad == SIZE_MAX ? 0 : pat(c->ext_tag[i], bad));
	c->ext_live[i] = 1;
	c->ext_free--;
	M.reused++;
}

/*
 * An object of cache slot @ci handed out to this thread: checked, stamped
 * (@nofirst: all but its first word), into the model.
 */
static struct obj *adopt_cache(int ci, void *p, bool nofirst, bool zeroed)
{
	struct fcache *c = &M.caches[ci];
	struct obj o = {
		.p = p, .size = c->size, .tag = new_tag(), .kind = K_CACHE, .ci = (int8_t)ci
	};

	ENSURE(p, "%s: allocation failed (errno %d)", c->name, errno);
	ENSURE(((uintptr_t)p & ((c->args.align ? c->args.align : 8) - 1)) == 0,
	       "%s: %p not aligned to %zu", c->name, p, c->args.align ? c->args.align : 8);
	ENSURE(!has_key(p, c->size), "%s: object %p handed out with the free key in its first word",
	       c->name, p);
	if (c->external)
		check_external(c, p, zeroed);
	else
		check_reused(c, p, zeroed);
	o.nofirst = nofirst && !c->ctor && !c->external; /* (their stamps are whole) */
	stamp(&o);
	live_add(&o);
	return &M.live[M.nlive - 1];
}

/* Memory of @kind with @size usable bytes handed out. */
static struct obj *adopt_mem(enum kind kind, void *p, size_t size, bool nofirst)
{
	struct obj o = { .p = p, .size = size, .tag = new_tag(), .kind = (uint8_t)kind, .ci = -1 };
	struct freed f;

	ENSURE(!has_key(p, size),
	       "%s object %p (%zu bytes) handed out with the free key in its first word",
	       kind_name[kind], p, size);
	freed_take(p, &f); /* (a cache's record: its slab went back and came to kmalloc) */
	o.nofirst = nofirst;
	o.large = kind == K_KMALLOC && !uslab_cache_of(p);
	stamp(&o);
	live_add(&o);
	return &M.live[M.nlive - 1];
}

/* Objects another thread allocated and stamped (it checked the key). */
static void adopt_stamped(const struct obj *o)
{
	struct freed f;

	freed_take(o->p, &f);
	if (o->kind == K_CACHE && M.caches[o->ci].external) {
		struct fcache *c = &M.caches[o->ci];
		unsigned int i = (unsigned int)((size_t)(o->p - c->ext) / c->stride);

		ENSURE(o->p >= c->ext && i < c->ext_n && !c->ext_live[i],
		       "%s: %p from another thread is not a free object of the pool", c->name,
		       (void *)o->p);
		c->ext_live[i] = 1;
		c->ext_free--;
	}
	live_add(o);
}

/* ------------------------------------------------------------- choice */

static int pick_cache(struct src *s)
{
	int n = 0, idx[NCACHES];

	for (int i = 0; i < NCACHES; i++)
		if (M.caches[i].c)
			idx[n++] = i;
	return n ? idx[pick(s, (uint32_t)n)] : -1;
}

/* A live object, matching @want (NULL: any), or -1. Tries a few. */
static int pick_live(struct src *s, bool (*want)(const struct obj *o, int arg), int arg)
{
	if (!M.nlive)
		return -1;
	for (int tries = 0; tries < 12; tries++) {
		unsigned int i = pick(s, M.nlive);

		if (!want || want(&M.live[i], arg))
			return (int)i;
	}
	return -1;
}

static bool of_cache(const struct obj *o, int ci)
{
	return o->kind == K_CACHE && o->ci == ci;
}

/* Objects kfree, kfree_bulk, uslab_cache_free(NULL) and the deferred frees take. */
static bool kfreeable(const struct obj *o, int arg)
{
	(void)arg;
	return o->kind == K_KMALLOC || (o->kind == K_CACHE && !M.caches[o->ci].external);
}

static bool is_malloc(const struct obj *o, int arg)
{
	(void)arg;
	return o->kind == K_MALLOC;
}

static int mag_of_cache(int ci)
{
	for (int i = 0; i < NMAGS; i++)
		if (M.mags[i].m && M.mags[i].ci == ci)
			return i;
	return -1;
}

/* Objects of an external pool resting in a magazine or another thread's sheaves are out of reach. */
static bool reach_unsure(int ci)
{
	return M.caches[ci].shared || mag_of_cache(ci) >= 0;
}

/* ------------------------------------------------------------- caches */

static void fz_ctor(void *obj)
{
	uint64_t w = CTOR_MAGIC ^ (uintptr_t)obj;

	memcpy(obj, &w, sizeof(w));
}

static struct uslab_cache_stats stats_of(struct fcache *c)
{
	struct uslab_cache_stats st;

	ENSURE(!uslab_cache_stats(c->c, &st), "%s: stats", c->name);
	return st;
}

static const unsigned int debug_flag_sets[] = {
	USLAB_CONSISTENCY_CHECKS,
	USLAB_STORE_USER,
	USLAB_RED_ZONE | USLAB_CONSISTENCY_CHECKS,
	USLAB_POISON | USLAB_RED_ZONE | USLAB_CONSISTENCY_CHECKS | USLAB_STORE_USER,
};

/* Hand a new external pool its objects: all, stamped, in one of three ways. */
static void external_fill(struct src *s, struct fcache *c)
{
	void *arr[EXT_MAX];
	unsigned int how = pick(s, 3);

	for (unsigned int i = 0; i < c->ext_n; i++) {
		arr[i] = c->ext + (size_t)i * c->stride;
		c->ext_tag[i] = new_tag();
		stamp_from(arr[i], c->size, c->ext_tag[i], 0);
		c->ext_live[i] = 0;
	}
	c->ext_free = c->ext_n;
	if (how == 0) {
		uslab_pool_put_bulk(c->c, c->ext_n, arr);
	} else if (how == 1) {
		for (unsigned int i = 0; i < c->ext_n; i++)
			uslab_cache_free(c->c, arr[i]);
	} else {
		uslab_cache_free_bulk(c->c, c->ext_n, arr);
		for (unsigned int i = 0; i < c->ext_n; i++)
			ENSURE(!arr[i], "free_bulk left entry %u", i);
	}
	ENSURE(uslab_pool_avail(c->c) == c->ext_n, "%s: %zu objects available after %u put",
	       c->name, uslab_pool_avail(c->c), c->ext_n);
}

static void op_create(struct src *s)
{
	static const unsigned int caps[] = { 0, 0, 0, 1, 2, 6, 30, 254, 500 };
	int ci = -1;
	struct fcache *c;
	struct uslab_cache_args a = { 0 };
	unsigned int flags = 0, kind = pick(s, 16);
	bool invalid = false, layout_may_fail;
	size_t size = pick_size(s, 8, 65536);
	int err;

	for (int i = 0; i < NCACHES; i++)
		if (!M.caches[i].c)
			ci = i;
	if (ci < 0)
		return;
	c = &M.caches[ci];
	a.layout = pick(s, 3) ? pick(s, USLAB_LAYOUT_NR) : USLAB_LAYOUT_AUTO;
	a.sheaf_capacity = caps[pick(s, sizeof(caps) / sizeof(caps[0]))];
	a.min_partial = chance(s, 60) ? 1000 : chance(s, 50) ? 1 : 0;
	if (chance(s, 25))
		a.align = (size_t)1 << (3 + pick(s, 10));
	if (chance(s, 10))
		flags |= USLAB_HWCACHE_ALIGN;
	switch (kind) {
	case 0:
	case 1:
		a.ctor = fz_ctor;
		break;
	case 2:
		flags |= USLAB_TYPESAFE_BY_RCU;
		break;
	case 3:
	case 4:
		flags |= USLAB_POOL;
		a.reserve = pick(s, 300);
		break;
	case 5:
	case 6:
		flags |= USLAB_POOL_EXTERNAL;
		a.align = 0;
		flags &= ~USLAB_HWCACHE_ALIGN;
		size = pick_size(s, 8, 8192);
		break;
	case 7:
	case 8:
		flags |= USLAB_FREE_KEY;
		break;
	case 9:
		flags |= USLAB_NO_FREE_KEY;
		break;
	case 10:
	case 11:
		flags |= USLAB_PERCPU | (chance(s, 30) ? USLAB_FREE_KEY : 0);
		break;
	case 12:
		flags |= debug_flag_sets[pick(s, 4)];
		break;
	}
	/* Now and then a combination the contract refuses: EINVAL, nothing created. */
	if (chance(s, 4)) {
		switch (pick(s, 4)) {
		case 0:
			flags |= USLAB_FREE_KEY | USLAB_NO_FREE_KEY;
			break;
		case 1:
			flags |= USLAB_POOL;
			a.ctor = fz_ctor;
			break;
		case 2:
			flags |= USLAB_POOL;
			a.sheaf_capacity = 1;
			break;
		default:
			a.ctor = fz_ctor;
			a.layout = USLAB_LAYOUT_OBJFREELIST;
			break;
		}
	}
	if ((flags & (USLAB_FREE_KEY | USLAB_NO_FREE_KEY)) ==
		    (USLAB_FREE_KEY | USLAB_NO_FREE_KEY) ||
	    ((flags & (USLAB_POOL | USLAB_POOL_EXTERNAL)) &&
	     (a.ctor || (flags & USLAB_TYPESAFE_BY_RCU) || a.sheaf_capacity == 1)) ||
	    ((a.ctor || (flags & USLAB_TYPESAFE_BY_RCU)) && a.layout == USLAB_LAYOUT_OBJFREELIST))
		invalid = true;
	/* An index layout may be unable to serve a size and alignment: EINVAL too. */
	layout_may_fail = a.layout > USLAB_LAYOUT_FREEPTR;
	if (flags & USLAB_POOL_EXTERNAL) {
		size_t stride = (size + 7) & ~(size_t)7;
		unsigned int n = 8 + pick(s, EXT_MAX - 8);

		while (n > 8 && (size_t)n * stride > (2u << 20))
			n /= 2;
		a.reserve = n;
		c->stride = stride;
		c->ext_n = n;
		c->ext_len = (n * stride + 4095) & ~(size_t)4095;
	}
	memset(c->name, 0, sizeof(c->name));
	snprintf(c->name, sizeof(c->name), "fz%d-%u", ci, M.gens + 1);
	errno = 0;
	c->c = uslab_cache_create(c->name, size, &a, flags);
	err = errno;
	note("create %s size %zu flags %#x layout %u cap %u partial %u align %zu%s -> %p", c->name,
	     size, flags, a.layout, a.sheaf_capacity, a.min_partial, a.align, a.ctor ? " ctor" : "",
	     (void *)c->c);
	if (invalid) {
		ENSURE(!c->c && err == EINVAL,
		       "create with flags %#x layout %u%s: %p errno %d, want EINVAL", flags,
		       a.layout, a.ctor ? " ctor" : "", (void *)c->c, err);
		return;
	}
	if (!c->c) {
		ENSURE(layout_may_fail && err == EINVAL,
		       "create %s size %zu flags %#x layout %u: errno %d", c->name, size, flags,
		       a.layout, err);
		return;
	}
	c->size = size;
	c->flags = flags;
	c->args = a;
	c->gen = ++M.gens;
	c->epoch++;
	c->live = c->rcu_pending = 0;
	c->ctor = a.ctor != NULL;
	c->typesafe = flags & USLAB_TYPESAFE_BY_RCU;
	c->external = flags & USLAB_POOL_EXTERNAL;
	c->pool = flags & (USLAB_POOL | USLAB_POOL_EXTERNAL);
	c->debug = (flags & (USLAB_CONSISTENCY_CHECKS | USLAB_RED_ZONE | USLAB_POISON |
			     USLAB_STORE_USER)) ||
		   env_debug;
	/* OBJFREELIST's array after the first word where the key may go, sheaves or not */
	c->holder_off = !c->ctor && !c->typesafe && !c->pool && !c->debug &&
					((flags & USLAB_FREE_KEY) ||
					 (env_all_keyed && !(flags & USLAB_NO_FREE_KEY))) ?
				8 :
				0;
	c->keyed = c->holder_off && a.sheaf_capacity != 1;
	c->lost = c->shared = false;
	{
		struct uslab_cache_stats st = stats_of(c);

		c->layout = st.layout;
		c->objperslab = st.objperslab;
		c->align = st.align;
		ENSURE(a.layout == USLAB_LAYOUT_AUTO || st.layout == a.layout,
		       "%s: layout %u asked, %u in effect", c->name, a.layout, st.layout);
		ENSURE(st.object_size == size && uslab_cache_size(c->c) == size, "%s: size %u",
		       c->name, st.object_size);
		ENSURE(st.align >= (a.align ? a.align : 8), "%s: align %u, asked %zu", c->name,
		       st.align, a.align);
		ENSURE(st.active_objs == 0 || c->pool, "%s: %lu active objects at creation",
		       c->name, st.active_objs);
		if ((flags & USLAB_PERCPU) && !c->pool && !c->debug && a.sheaf_capacity != 1 &&
		    uslab_percpu_supported())
			ENSURE(uslab_cache_percpu(c->c), "%s: USLAB_PERCPU, supported, not per CPU",
			       c->name);
		if (!uslab_percpu_supported())
			ENSURE(!uslab_cache_percpu(c->c), "%s: per CPU, unsupported", c->name);
	}
	ENSURE(!strcmp(uslab_cache_name(c->c), c->name), "name");
	/*
	 * The promise not to write free objects: index layouts (with the key:
	 * but its word), a constructor, TYPESAFE_BY_RCU (their slabs must stay:
	 * many empty ones kept), external pools (always).
	 */
	c->track = !c->debug && !c->external &&
		   (c->ctor ||
		    (a.min_partial >= 1000 && (c->typesafe || c->layout != USLAB_LAYOUT_FREEPTR)));
	if (c->external) {
		c->ext = mmap(NULL, c->ext_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		ENSURE(c->ext != MAP_FAILED, "mmap");
		external_fill(s, c);
	}
}

/* ----------------------------------------------------------- freeing */

/* Free a model object by one of the ways that take it. */
enum fway { F_CACHE, F_CACHE_LIB, F_CACHE_NULL, F_KFREE, F_KFREE_LIB, F_SENSITIVE, F_NWAYS };

static void free_one(struct src *s, unsigned int i)
{
	struct obj o = live_take(i);
	unsigned int way = pick(s, F_NWAYS);

	verify(&o, false);
	if (o.kind == K_MALLOC) {
		note("free %p", (void *)o.p);
		note_free(&o, 0, false);
		free(o.p);
		return;
	}
	if (o.kind == K_KMALLOC && way < F_CACHE_NULL)
		way = F_KFREE;
	if (o.kind == K_CACHE && M.caches[o.ci].external && way > F_CACHE_LIB)
		way = F_CACHE;
	/* (large kmalloc objects: uslab_cache_free(NULL) only for objects of a cache) */
	if (o.kind == K_KMALLOC && way == F_CACHE_NULL && o.large)
		way = F_KFREE;
	note("free %s way %u", obj_what(&o), way);
	note_free(&o, 0, way == F_SENSITIVE);
	switch (way) {
	case F_CACHE:
		uslab_cache_free(M.caches[o.ci].c, o.p);
		break;
	case F_CACHE_LIB:
		(uslab_cache_free)(M.caches[o.ci].c, o.p);
		break;
	case F_CACHE_NULL:
		uslab_cache_free(NULL, o.p);
		break;
	case F_KFREE:
		uslab_kfree(o.p);
		break;
	case F_KFREE_LIB:
		(uslab_kfree)(o.p);
		break;
	default:
		uslab_kfree_sensitive(o.p);
	}
}

static void op_free(struct src *s)
{
	int i = pick_live(s, NULL, 0);

	if (i >= 0)
		free_one(s, (unsigned int)i);
}

/* Live entry @i out of the model for a bulk free, checked: its pointer. */
static void *take_to_free(unsigned int i)
{
	struct obj o = live_take(i);

	verify(&o, false);
	note_free(&o, 0, false);
	return o.p;
}

/* ------------------------------------------------------ object caches */

static void op_alloc(struct src *s)
{
	int ci = pick_cache(s);
	struct fcache *c;
	unsigned int way;
	void *p;

	if (ci < 0 || live_full())
		return;
	c = &M.caches[ci];
	way = pick(s, 4);
	errno = 0;
	p = way == 0 ? uslab_cache_alloc(c->c) :
	    way == 1 ? (uslab_cache_alloc)(c->c) :
	    way == 2 ? uslab_cache_zalloc(c->c) :
		       (uslab_cache_zalloc)(c->c);
	note("alloc %s way %u -> %p", c->name, way, p);
	if (!p && c->external) {
		ENSURE(errno == ENOBUFS, "%s: exhausted: errno %d, want ENOBUFS", c->name, errno);
		ENSURE(reach_unsure(ci) || !c->ext_free, "%s: alloc failed with %u objects free",
		       c->name, c->ext_free);
		return;
	}
	if (p && way >= 2) {
		for (size_t off = 0; off < c->size; off += 1 + off / 8)
			ENSURE(!((unsigned char *)p)[off], "%s: zalloc: byte %zu of %p is %#x",
			       c->name, off, p, ((unsigned char *)p)[off]);
		ENSURE(!((unsigned char *)p)[c->size - 1], "zalloc: last byte");
	}
	adopt_cache(ci, p, chance(s, 30), way >= 2);
}

static void op_alloc_bulk(struct src *s)
{
	int ci = pick_cache(s);
	struct fcache *c;
	void *arr[BULK_MAX];
	size_t n, got;
	unsigned int way;
	int r = 0;

	if (ci < 0 || live_full())
		return;
	c = &M.caches[ci];
	n = pick(s, 4) ? pick(s, 20) : pick(s, BULK_MAX + 1);
	way = pick(s, 3);
	errno = 0;
	if (way == 2) {
		r = uslab_pool_get_bulk(c->c, n, arr);
		got = r ? 0 : n;
	} else {
		got = way ? (uslab_cache_alloc_bulk)(c->c, n, arr) :
			    uslab_cache_alloc_bulk(c->c, n, arr);
	}
	note("alloc_bulk %s n %zu way %u -> %zu (%d)", c->name, n, way, got, r);
	if (got != n) {
		ENSURE(c->external && (way == 2 ? r == -ENOBUFS : errno == ENOBUFS && !got),
		       "%s: bulk of %zu: %zu (ret %d errno %d)", c->name, n, got, r, errno);
		ENSURE(reach_unsure(ci) || c->ext_free < n,
		       "%s: a bulk of %zu failed with %u objects free", c->name, n, c->ext_free);
		return;
	}
	if (!n && way < 2)
		ENSURE(got == 0, "bulk of 0");
	for (size_t i = 0; i < n; i++)
		adopt_cache(ci, arr[i], chance(s, 20), false);
}

static void op_free_bulk(struct src *s)
{
	int ci = pick_cache(s);
	void *arr[BULK_MAX];
	size_t n = 0, want;
	unsigned int way;

	if (ci < 0)
		return;
	want = pick(s, 4) ? pick(s, 24) : pick(s, BULK_MAX);
	way = pick(s, 3);
	for (size_t k = 0; k < want && n < BULK_MAX; k++) {
		int i = pick_live(s, of_cache, ci);

		if (way < 2 && chance(s, 10)) {
			arr[n++] = chance(s, 50) ? NULL : USLAB_ZERO_SIZE_PTR;
			continue;
		}
		if (i < 0)
			break;
		arr[n++] = take_to_free((unsigned int)i);
	}
	note("free_bulk %s n %zu way %u", M.caches[ci].name, n, way);
	if (way == 2) {
		void *copy[BULK_MAX];

		memcpy(copy, arr, n * sizeof(arr[0]));
		uslab_pool_put_bulk(M.caches[ci].c, n, arr);
		ENSURE(!memcmp(copy, arr, n * sizeof(arr[0])), "pool_put_bulk wrote its array");
		return;
	}
	if (way)
		(uslab_cache_free_bulk)(M.caches[ci].c, n, arr);
	else
		uslab_cache_free_bulk(M.caches[ci].c, n, arr);
	for (size_t i = 0; i < n; i++)
		ENSURE(!arr[i], "free_bulk left entry %zu of %zu: %p", i, n, arr[i]);
}

/* kfree_bulk: uslab_cache_free_bulk(NULL, ...), objects of any cache and kmalloc. */
static void op_kfree_bulk(struct src *s)
{
	void *arr[BULK_MAX];
	size_t n = 0, want = pick(s, 40);

	for (size_t k = 0; k < want; k++) {
		int i = pick_live(s, kfreeable, 0);

		if (chance(s, 10)) {
			arr[n++] = chance(s, 50) ? NULL : USLAB_ZERO_SIZE_PTR;
			continue;
		}
		if (i < 0)
			break;
		arr[n++] = take_to_free((unsigned int)i);
	}
	note("kfree_bulk n %zu", n);
	if (chance(s, 50))
		uslab_cache_free_bulk(NULL, n, arr);
	else
		(uslab_cache_free_bulk)(NULL, n, arr);
	for (size_t i = 0; i < n; i++)
		ENSURE(!arr[i], "kfree_bulk left entry %zu: %p", i, arr[i]);
}

/* --------------------------------------------------------------- kmalloc */

static size_t pick_kmalloc_size(struct src *s)
{
	unsigned int r = pick(s, 1000);

	if (r < 700)
		return pick_size(s, 1, USLAB_KMALLOC_MAX_CACHE_SIZE);
	if (r < 960)
		return pick_size(s, USLAB_KMALLOC_MAX_CACHE_SIZE - 64, 1u << 20);
	if (r < 998)
		return pick(s, 3);		    /* 0, 1, 2 */
	return (32u << 20) + 1 + pick(s, 1u << 20); /* huge: its own mapping */
}

/* The checks of memory from the kmalloc family, then the model takes it. */
static struct obj *adopt_kmalloc(void *p, size_t size, size_t align, bool zero, bool nofirst)
{
	size_t usable;

	if (!size) {
		ENSURE(p == USLAB_ZERO_SIZE_PTR, "kmalloc(0): %p", p);
		ENSURE(uslab_ksize(p) == 0, "ksize(ZERO_SIZE_PTR)");
		return NULL;
	}
	ENSURE(p && p != USLAB_ZERO_SIZE_PTR, "kmalloc of %zu: %p (errno %d)", size, p, errno);
	usable = uslab_ksize(p);
	ENSURE(usable >= size, "ksize %zu of a %zu-byte allocation", usable, size);
	ENSURE(((uintptr_t)p & ((align ? align : 8) - 1)) == 0, "kmalloc %p not aligned to %zu", p,
	       align ? align : 8);
	if (!align && !env_debug) {
		ENSURE(usable == uslab_kmalloc_class_size(size), "ksize %zu, class size %zu of %zu",
		       usable, uslab_kmalloc_class_size(size), size);
		if (usable <= USLAB_KMALLOC_MAX_CACHE_SIZE && !(usable & (usable - 1)))
			ENSURE(((uintptr_t)p & (usable - 1)) == 0,
			       "kmalloc object %p of power-of-two class %zu not aligned to it", p,
			       usable);
	}
	/* Large: above the classes, or aligned beyond a page. */
	if (usable > USLAB_KMALLOC_MAX_CACHE_SIZE || align > 4096) {
		ENSURE(usable <= USLAB_KMALLOC_MAX_CACHE_SIZE || !uslab_cache_of(p),
		       "large object %p has a cache", p);
		if (!uslab_cache_of(p))
			ENSURE(uslab_slab_of(p) == p, "large object %p: its slab is %p", p,
			       uslab_slab_of(p));
	} else {
		ENSURE(uslab_cache_of(p), "kmalloc object %p has no cache", p);
	}
	if (zero) {
		size_t off, len;

		for_each_span(usable, off, len)
		{
			for (size_t i = off; i < off + len; i++)
				ENSURE(!((unsigned char *)p)[i], "kzalloc: byte %zu of %p is %#x",
				       i, p, ((unsigned char *)p)[i]);
			if (off + len >= usable)
				break;
		}
	}
	return adopt_mem(K_KMALLOC, p, usable, nofirst);
}

static void op_kmalloc(struct src *s)
{
	size_t size = pick_kmalloc_size(s), align = 0, n = 1;
	unsigned int way = pick(s, 6);
	bool zero = false;
	void *p;

	if (live_full())
		return;
	errno = 0;
	switch (way) {
	case 0:
		p = uslab_kmalloc(size);
		break;
	case 1:
		p = (uslab_kmalloc)(size);
		break;
	case 2:
		p = uslab_kzalloc(size);
		zero = true;
		break;
	case 3:
		n = 1 + pick(s, 8);
		size = size / n;
		if (chance(s, 5)) {
			/* n * size overflows: NULL, ENOMEM */
			p = uslab_kcalloc(SIZE_MAX / 2 + 1, 2 + pick(s, 8));
			note("kcalloc overflow -> %p", p);
			ENSURE(!p && errno == ENOMEM, "kcalloc overflow: %p errno %d", p, errno);
			return;
		}
		p = uslab_kcalloc(n, size);
		size *= n;
		zero = true;
		break;
	default:
		align = (size_t)1 << pick(s, 18); /* 1 B .. 128 KiB */
		if (chance(s, 4)) {
			size_t bad =
				chance(s, 50) ? 3u << pick(s, 10) : USLAB_KMALLOC_MAX_ALIGN << 1;

			p = uslab_kmalloc_aligned(size ? size : 1, bad);
			note("kmalloc_aligned bad align %zu -> %p", bad, p);
			ENSURE(!p && errno == EINVAL, "kmalloc_aligned align %zu: %p errno %d", bad,
			       p, errno);
			return;
		}
		p = uslab_kmalloc_aligned(size, align);
	}
	note("kmalloc way %u size %zu align %zu -> %p", way, size, align, p);
	adopt_kmalloc(p, size, align, zero, chance(s, 30));
}

/* Memory of the kmalloc family or of a cache (non-external), resized. */
static bool reallocable(const struct obj *o, int arg)
{
	(void)arg;
	return o->kind == K_KMALLOC ||
	       (o->kind == K_CACHE && !M.caches[o->ci].external && !M.caches[o->ci].debug);
}

static void op_krealloc(struct src *s)
{
	int i = pick_live(s, reallocable, 0);
	size_t size, keep, usable;
	struct obj o;
	void *q;
	bool lib = chance(s, 50);

	if (i < 0 || live_full()) {
		/* From NULL or ZERO_SIZE_PTR: a kmalloc. */
		size = pick_kmalloc_size(s);
		q = uslab_krealloc(chance(s, 50) ? NULL : USLAB_ZERO_SIZE_PTR, size);
		note("krealloc(NULL/ZERO, %zu) -> %p", size, q);
		if (live_full() && q && q != USLAB_ZERO_SIZE_PTR) {
			uslab_kfree(q);
			return;
		}
		adopt_kmalloc(q, size, 0, false, false);
		return;
	}
	o = M.live[i];
	verify(&o, false);
	switch (pick(s, 6)) {
	case 0: /* within its usable size */
		size = 1 + pick(s, (uint32_t)o.size);
		break;
	case 1: /* 0: freed */
		size = 0;
		break;
	case 2: /* a little more */
		size = o.size + 1 + pick(s, 64);
		break;
	default:
		size = pick_kmalloc_size(s);
	}
	errno = 0;
	q = lib ? (uslab_krealloc)(o.p, size) : uslab_krealloc(o.p, size);
	note("krealloc %s to %zu -> %p", obj_what(&o), size, q);
	if (!size) {
		ENSURE(q == USLAB_ZERO_SIZE_PTR, "krealloc(p, 0): %p", q);
		o = live_take((unsigned int)i);
		note_free(&o, 0, false);
		return;
	}
	ENSURE(q, "krealloc of %s to %zu failed (errno %d)", obj_what(&o), size, errno);
	/* In place when it still fits: its class, or its cache's object. */
	if (o.kind == K_CACHE && size <= o.size)
		ENSURE(q == o.p, "krealloc of %s to %zu moved it to %p", obj_what(&o), size, q);
	if (o.kind == K_KMALLOC && !env_debug && !o.large && size <= USLAB_KMALLOC_MAX_CACHE_SIZE &&
	    uslab_kmalloc_class_size(size) == o.size)
		ENSURE(q == o.p, "krealloc of %s to %zu (same class) moved it to %p", obj_what(&o),
		       size, q);
	keep = o.size < size ? o.size : size;
	usable = q == o.p && o.kind == K_CACHE ? o.size : uslab_ksize(q);
	ENSURE(usable >= size, "krealloc to %zu: ksize %zu", size, usable);
	{
		size_t bad = stamp_bad(q, o.size, o.tag, o.nofirst ? 8 : 0, keep, 0);

		ENSURE(bad == SIZE_MAX,
		       "krealloc of %s to %zu (%p): byte %zu not kept (%#x, want %#x)",
		       obj_what(&o), size, q, bad, bad == SIZE_MAX ? 0 : ((unsigned char *)q)[bad],
		       bad == SIZE_MAX ? 0 : pat(o.tag, bad));
	}
	o = live_take((unsigned int)i);
	if (q == o.p) {
		/* Resized in place: the same object, its new usable size stamped. */
		if (o.kind == K_KMALLOC) {
			o.size = usable;
			o.large = !uslab_cache_of(o.p);
		}
		o.tag = new_tag();
		stamp(&o);
		live_add(&o);
		return;
	}
	note_free(&o, 0, false);
	ENSURE(!has_key(q, usable), "krealloc: %p handed out with the free key", q);
	{
		struct freed f;
		struct obj n = {
			.p = q, .size = usable, .tag = new_tag(), .kind = K_KMALLOC, .ci = -1
		};

		freed_take(q, &f);
		n.large = !uslab_cache_of(q);
		/* The stale-key case: the copied first word kept as it came. */
		n.nofirst = o.nofirst;
		stamp(&n);
		live_add(&n);
	}
}

/* Where the usable size is checkable too: ksize of live objects, their cache. */
static void op_query(struct src *s)
{
	int i = pick_live(s, NULL, 0);
	const struct obj *o;

	if (i < 0)
		return;
	o = &M.live[i];
	verify(o, false);
	if (o->kind == K_MALLOC) {
		ENSURE(malloc_usable_size(o->p) >= o->size, "malloc_usable_size %zu < %zu",
		       malloc_usable_size(o->p), o->size);
		return;
	}
	if (o->kind == K_KMALLOC) {
		ENSURE(uslab_ksize(o->p) == o->size, "ksize %zu of %s", uslab_ksize(o->p),
		       obj_what(o));
		ENSURE(uslab_owns(o->p), "uslab_owns(%p)", (void *)o->p);
		return;
	}
	if (M.caches[o->ci].external) {
		ENSURE(!uslab_owns(o->p) && !uslab_cache_of(o->p),
		       "an external object %p is uslab's", (void *)o->p);
		return;
	}
	ENSURE(uslab_cache_of(o->p) == M.caches[o->ci].c, "uslab_cache_of(%s): %p", obj_what(o),
	       (void *)uslab_cache_of(o->p));
	ENSURE(uslab_owns(o->p) && uslab_slab_of(o->p), "%s: not in a slab", obj_what(o));
	if (!M.caches[o->ci].debug)
		ENSURE(uslab_ksize(o->p) == o->size, "ksize %zu of %s", uslab_ksize(o->p),
		       obj_what(o));
}

/* ------------------------------------------------------------ magazines */

static void mag_destroy(int mi)
{
	struct fmag *g = &M.mags[mi];

	note("magazine %d destroy (%u objects)", mi, uslab_magazine_count(g->m));
	uslab_magazine_destroy(g->m);
	g->m = NULL;
}

static void mag_create(struct src *s, int mi)
{
	struct fmag *g = &M.mags[mi];
	int ci = pick_cache(s);
	struct fcache *c;

	if (ci < 0)
		return;
	c = &M.caches[ci];
	g->guaranteed = 0;
	if (chance(s, 30)) {
		unsigned int n = pick(s, 80);

		errno = 0;
		g->m = uslab_magazine_prefill(c->c, n);
		note("magazine %d prefill %s %u -> %p", mi, c->name, n, (void *)g->m);
		if (!g->m) {
			ENSURE(c->external && (reach_unsure(ci) || c->ext_free < n),
			       "prefill %s %u: errno %d", c->name, n, errno);
			return;
		}
		ENSURE(uslab_magazine_count(g->m) >= n, "prefill %u: count %u", n,
		       uslab_magazine_count(g->m));
		/* (a debug cache's magazine caches nothing: its capacity reads 0, api.md) */
		ENSURE(g->m->capacity == (c->debug ? 0 :
					  2 * n > USLAB_MAGAZINE_CAPACITY ?
						     2 * n :
						     USLAB_MAGAZINE_CAPACITY),
		       "prefill %u: capacity %u", n, g->m->capacity);
		g->guaranteed = n;
		g->refills = g->m->refills;
	} else {
		unsigned int cap = chance(s, 30) ? 0 : 1 + pick(s, 200);
		unsigned int eff = cap ? cap : USLAB_MAGAZINE_CAPACITY;
		unsigned int refill = pick(s, eff + 1);

		if (chance(s, 3)) {
			errno = 0;
			ENSURE(!uslab_magazine_create(c->c, eff, eff + 1) && errno == EINVAL,
			       "magazine refill above capacity: errno %d", errno);
		}
		g->m = uslab_magazine_create(c->c, cap, refill);
		note("magazine %d create %s cap %u refill %u -> %p", mi, c->name, cap, refill,
		     (void *)g->m);
		ENSURE(g->m, "magazine_create: errno %d", errno);
		ENSURE(g->m->capacity == (c->debug ? 0 : eff), "capacity %u, want %u",
		       g->m->capacity, eff);
		ENSURE(g->m->refill == (refill			    ? refill :
					eff < USLAB_MAGAZINE_REFILL ? eff :
								      USLAB_MAGAZINE_REFILL),
		       "refill %u (asked %u, capacity %u)", g->m->refill, refill, eff);
		ENSURE(!uslab_magazine_count(g->m), "a new magazine holds %u",
		       uslab_magazine_count(g->m));
	}
	g->ci = ci;
}

static void op_magazine(struct src *s)
{
	int mi = (int)pick(s, NMAGS);
	struct fmag *g = &M.mags[mi];
	struct fcache *c;
	bool lib = chance(s, 40);
	unsigned int op;

	if (!g->m) {
		mag_create(s, mi);
		return;
	}
	c = &M.caches[g->ci];
	op = pick(s, 16);
	if (op > 1 || lib)
		g->guaranteed = 0;
	switch (op) {
	case 0:
	case 1:
	case 2:
	case 3: { /* alloc */
		void *p;

		if (live_full())
			break;
		errno = 0;
		p = lib ? (uslab_magazine_alloc)(g->m) : uslab_magazine_alloc(g->m);
		note("magazine %d alloc %s -> %p", mi, c->name, p);
		if (!p) {
			ENSURE(c->external, "magazine alloc %s: errno %d", c->name, errno);
			break;
		}
		if (g->guaranteed) {
			ENSURE(g->m->refills == g->refills,
			       "a prefilled magazine refilled (%lu refills)",
			       g->m->refills - g->refills);
			g->guaranteed--;
		}
		adopt_cache(g->ci, p, chance(s, 20), false);
		break;
	}
	case 4:
	case 5:
	case 6:
	case 7: { /* free */
		int i = pick_live(s, of_cache, g->ci);
		struct obj o;

		if (i < 0)
			break;
		o = live_take((unsigned int)i);
		verify(&o, false);
		note("magazine %d free %s", mi, obj_what(&o));
		note_free(&o, 0, false);
		if (lib)
			(uslab_magazine_free)(g->m, o.p);
		else
			uslab_magazine_free(g->m, o.p);
		break;
	}
	case 8:
	case 9: { /* alloc_bulk */
		void *arr[BULK_MAX];
		size_t n = pick(s, 4) ? pick(s, 17) : pick(s, BULK_MAX), got;

		if (live_full())
			break;
		errno = 0;
		got = lib ? (uslab_magazine_alloc_bulk)(g->m, n, arr) :
			    uslab_magazine_alloc_bulk(g->m, n, arr);
		note("magazine %d alloc_bulk %s %zu -> %zu", mi, c->name, n, got);
		if (got != n) {
			ENSURE(!got && c->external, "magazine alloc_bulk %zu: %zu (errno %d)", n,
			       got, errno);
			break;
		}
		for (size_t k = 0; k < n; k++)
			adopt_cache(g->ci, arr[k], chance(s, 20), false);
		break;
	}
	case 10:
	case 11: { /* free_bulk */
		void *arr[BULK_MAX];
		size_t n = 0, want = pick(s, 4) ? pick(s, 17) : pick(s, BULK_MAX);

		for (size_t k = 0; k < want; k++) {
			int i = pick_live(s, of_cache, g->ci);
			struct obj o;

			if (chance(s, 8)) {
				arr[n++] = NULL;
				continue;
			}
			if (i < 0)
				break;
			o = live_take((unsigned int)i);
			verify(&o, false);
			note_free(&o, 0, false);
			arr[n++] = o.p;
		}
		note("magazine %d free_bulk %s %zu", mi, c->name, n);
		if (lib)
			(uslab_magazine_free_bulk)(g->m, n, arr);
		else
			uslab_magazine_free_bulk(g->m, n, arr);
		for (size_t k = 0; k < n; k++)
			ENSURE(!arr[k], "magazine free_bulk left entry %zu", k);
		break;
	}
	case 12: { /* fill */
		unsigned int cap = c->debug ? g->m->uslab_priv_capacity : g->m->capacity;
		unsigned int n = pick(s, cap + 2);
		int r = uslab_magazine_fill(g->m, n);

		note("magazine %d fill %u -> %d", mi, n, r);
		if (n > cap) {
			ENSURE(r == -EINVAL, "fill %u above capacity %u: %d", n, g->m->capacity, r);
			break;
		}
		if (r) {
			ENSURE(c->external && r == -ENOMEM, "fill %u: %d", n, r);
			break;
		}
		ENSURE(uslab_magazine_count(g->m) >= n, "fill %u: count %u", n,
		       uslab_magazine_count(g->m));
		break;
	}
	case 13:
		note("magazine %d flush", mi);
		uslab_magazine_flush(g->m);
		ENSURE(!uslab_magazine_count(g->m), "flushed magazine holds %u",
		       uslab_magazine_count(g->m));
		break;
	case 14:
		mag_destroy(mi);
		return;
	default:
		break;
	}
	/* (a debug cache's magazine keeps a reserve beyond its capacity of 0) */
	ENSURE(uslab_magazine_count(g->m) <= g->m->capacity || c->debug,
	       "magazine count %u, capacity %u", uslab_magazine_count(g->m), g->m->capacity);
}

/* ---------------------------------------------------------- free batches */

static void op_batch(struct src *s)
{
	struct uslab_free_batch b;
	int ci = chance(s, 40) ? -1 : pick_cache(s);
	size_t want = pick(s, 4) ? pick(s, 70) : pick(s, 200), n = 0;
	bool lib = chance(s, 40);

	uslab_free_batch_init(&b, ci < 0 ? NULL : M.caches[ci].c);
	for (size_t k = 0; k < want; k++) {
		int i = ci < 0 ? pick_live(s, kfreeable, 0) : pick_live(s, of_cache, ci);
		struct obj o;

		if (i < 0)
			break;
		o = live_take((unsigned int)i);
		verify(&o, false);
		note_free(&o, 0, false);
		if (lib)
			(uslab_free_batch_add)(&b, o.p);
		else
			uslab_free_batch_add(&b, o.p);
		n++;
		ENSURE(b.n == n % USLAB_FREE_BATCH_SIZE, "batch holds %u after %zu adds", b.n, n);
	}
	if (chance(s, 20))
		uslab_free_batch_add(&b, NULL);
	note("free batch %s: %zu objects", ci < 0 ? "(any cache)" : M.caches[ci].name, n);
	uslab_free_batch_flush(&b);
	ENSURE(!b.n, "a flushed batch holds %u", b.n);
}

/* --------------------------------------------------------------- rcu */

static void peer_sync(void);

static void rcu_barrier_all(void)
{
	struct uslab_rcu_stats st;

	peer_sync(); /* (its deferred frees are made before the barrier begins) */
	uslab_rcu_barrier();
	for (int i = 0; i < NCACHES; i++)
		M.caches[i].rcu_pending = 0;
	M.rcu_any = false;
	ENSURE(!uslab_rcu_stats(&st), "rcu_stats");
	ENSURE(!st.leaked, "%llu deferred frees leaked", (unsigned long long)st.leaked);
}

static bool rcu_freeable(const struct obj *o, int arg)
{
	(void)arg;
	return kfreeable(o, 0);
}

static void op_rcu(struct src *s)
{
	int i = pick_live(s, rcu_freeable, 0);
	struct obj o;

	if (i < 0)
		return;
	o = live_take((unsigned int)i);
	verify(&o, false);
	if (o.kind == K_CACHE)
		M.caches[o.ci].rcu_pending++;
	M.rcu_any = true;
	/* The two-argument form: a head inside the object (not over a constructor's word). */
	if (o.size >= 32 && !o.large && chance(s, 30)) {
		size_t off = 8 * (1 + pick(s, (uint32_t)((o.size - 24) / 8)));

		note("free_rcu_head %s head at %zu", obj_what(&o), off);
		note_free(&o, 8 + off, false);
		uslab_free_rcu_head(o.p, (struct rcu_head *)(void *)(o.p + off));
		return;
	}
	note("free_rcu %s", obj_what(&o));
	note_free(&o, 0, false);
	uslab_free_rcu(o.p);
}

/* ------------------------------------------------------ the peer thread */

/*
 * Another thread, fed through a queue: it frees what this one allocated
 * (checking the stamps first) and allocates for it (stamped there, checked
 * for the key there, taken into the model at the next sync). While it
 * works, this thread goes on.
 */
enum { P_FREE, P_ALLOC, P_FLUSH };
enum {
	PF_CACHE,
	PF_CACHE_LIB,
	PF_CACHE_NULL,
	PF_KFREE,
	PF_BULK,
	PF_KFREE_BULK,
	PF_RCU,
	PF_PUT,
	PF_MAGAZINE,
	PF_BATCH,
	PF_NWAYS,
	PF_FREE = PF_NWAYS
};
enum { PA_CACHE, PA_CACHE_LIB, PA_BULK, PA_MAGAZINE, PA_KMALLOC, PA_NWAYS, PA_MALLOC = PA_NWAYS };

struct peer_cmd {
	int op, way, ci;
	struct uslab_cache *c;
	size_t size; /* P_ALLOC: the cache's object size, or kmalloc's request */
	unsigned int n;
	uint64_t tag0;
	bool nofirst;
	bool may_fail; /* an external pool's allocation: ENOBUFS */
	bool whole;    /* a constructor's or an external pool's object: stamped whole */
	bool keyed;    /* objects handed out with no key (a keyed cache or kmalloc class) */
	struct obj objs[PEER_BATCH];
};

static struct {
	pthread_t t;
	bool running, exit;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned long head, tail;
	struct peer_cmd ring[PEER_RING];
	struct obj back[PEER_BACK];
	unsigned int nback;
	unsigned int outstanding; /* (main's) objects asked for, not yet collected */
} P = { .lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* Run one command (the peer's, or an exiting thread's); allocations go to @got. */
static unsigned int peer_exec(const struct peer_cmd *cmd, struct obj *got)
{
	void *arr[PEER_BATCH];
	unsigned int n = cmd->n, k = 0;

	if (cmd->op == P_FLUSH) {
		uslab_thread_flush();
		return 0;
	}
	if (cmd->op == P_FREE) {
		for (unsigned int i = 0; i < n; i++) {
			verify(&cmd->objs[i], true);
			arr[i] = cmd->objs[i].p;
		}
		switch (cmd->way) {
		case PF_CACHE:
			for (unsigned int i = 0; i < n; i++)
				uslab_cache_free(cmd->c, arr[i]);
			break;
		case PF_CACHE_LIB:
			for (unsigned int i = 0; i < n; i++)
				(uslab_cache_free)(cmd->c, arr[i]);
			break;
		case PF_CACHE_NULL:
			for (unsigned int i = 0; i < n; i++)
				uslab_cache_free(NULL, arr[i]);
			break;
		case PF_KFREE:
			for (unsigned int i = 0; i < n; i++)
				uslab_kfree(arr[i]);
			break;
		case PF_BULK:
			uslab_cache_free_bulk(cmd->c, n, arr);
			break;
		case PF_KFREE_BULK:
			uslab_cache_free_bulk(NULL, n, arr);
			break;
		case PF_RCU:
			for (unsigned int i = 0; i < n; i++)
				uslab_free_rcu(arr[i]);
			break;
		case PF_PUT:
			uslab_pool_put_bulk(cmd->c, n, arr);
			break;
		case PF_MAGAZINE: {
			struct uslab_magazine *m = uslab_magazine_create(cmd->c, 1 + n / 2, 0);

			if (!m)
				peer_fail("magazine_create: errno %d", errno);
			for (unsigned int i = 0; i < n; i++)
				uslab_magazine_free(m, arr[i]);
			uslab_magazine_destroy(m);
			break;
		}
		case PF_BATCH: {
			struct uslab_free_batch b;

			uslab_free_batch_init(&b, cmd->c);
			for (unsigned int i = 0; i < n; i++)
				uslab_free_batch_add(&b, arr[i]);
			uslab_free_batch_flush(&b);
			break;
		}
		default:
			for (unsigned int i = 0; i < n; i++)
				free(arr[i]);
		}
		return 0;
	}
	/* P_ALLOC */
	switch (cmd->way) {
	case PA_CACHE:
	case PA_CACHE_LIB:
		for (k = 0; k < n; k++) {
			arr[k] = cmd->way == PA_CACHE ? uslab_cache_alloc(cmd->c) :
							(uslab_cache_alloc)(cmd->c);
			if (!arr[k])
				break;
		}
		break;
	case PA_BULK:
		k = uslab_cache_alloc_bulk(cmd->c, n, arr) == n ? n : 0;
		break;
	case PA_MAGAZINE: {
		struct uslab_magazine *m = uslab_magazine_create(cmd->c, 0, 1 + n / 3);

		if (!m)
			peer_fail("magazine_create: errno %d", errno);
		for (k = 0; k < n; k++)
			if (!(arr[k] = uslab_magazine_alloc(m)))
				break;
		uslab_magazine_destroy(m);
		break;
	}
	case PA_KMALLOC:
		for (k = 0; k < n; k++)
			if (!(arr[k] = uslab_kmalloc(cmd->size)))
				break;
		break;
	default:
		for (k = 0; k < n; k++)
			if (!(arr[k] = malloc(cmd->size)))
				break;
	}
	if (k < n && !cmd->may_fail)
		peer_fail("allocation %u of %u (way %d) failed: errno %d", k, n, cmd->way, errno);
	for (unsigned int i = 0; i < k; i++) {
		struct obj *o = &got[i];

		o->p = arr[i];
		o->kind = cmd->way == PA_MALLOC	 ? K_MALLOC :
			  cmd->way == PA_KMALLOC ? K_KMALLOC :
						   K_CACHE;
		o->ci = (int8_t)(o->kind == K_CACHE ? cmd->ci : -1);
		o->large = o->kind == K_KMALLOC && !uslab_cache_of(o->p);
		o->size = o->kind == K_CACHE   ? cmd->size :
			  o->kind == K_KMALLOC ? uslab_ksize(o->p) :
						 malloc_usable_size(o->p);
		if (has_key(o->p, o->size))
			peer_fail("%p (%zu bytes, way %d) handed out with the free key",
				  (void *)o->p, o->size, cmd->way);
		o->tag = cmd->tag0 ^ (0x9E3779B97F4A7C15ull * (i + 1));
		o->nofirst = cmd->nofirst && !cmd->whole;
		stamp(o);
	}
	return k;
}

static void *peer_main(void *arg)
{
	struct obj got[PEER_BATCH];

	(void)arg;
	pthread_mutex_lock(&P.lock);
	for (;;) {
		const struct peer_cmd *cmd;
		unsigned int k;

		while (P.head == P.tail && !P.exit)
			pthread_cond_wait(&P.cv, &P.lock);
		if (P.head == P.tail)
			break;
		cmd = &P.ring[P.head % PEER_RING];
		pthread_mutex_unlock(&P.lock);
		k = peer_exec(cmd, got);
		pthread_mutex_lock(&P.lock);
		if (P.nback + k > PEER_BACK)
			peer_fail("the back list overflows");
		memcpy(P.back + P.nback, got, k * sizeof(got[0]));
		P.nback += k;
		P.head++;
		pthread_cond_broadcast(&P.cv);
	}
	pthread_mutex_unlock(&P.lock);
	return NULL;
}

/* Wait until the peer has run every command; take what it allocated. */
static void peer_sync(void)
{
	if (!P.running || M.child)
		return;
	pthread_mutex_lock(&P.lock);
	while (P.head != P.tail)
		pthread_cond_wait(&P.cv, &P.lock);
	for (unsigned int i = 0; i < P.nback; i++)
		adopt_stamped(&P.back[i]);
	P.nback = 0;
	P.outstanding = 0;
	pthread_mutex_unlock(&P.lock);
}

static void peer_send(const struct peer_cmd *cmd)
{
	if (!P.running) {
		P.head = P.tail = 0;
		P.exit = false;
		ENSURE(!pthread_create(&P.t, NULL, peer_main, NULL), "pthread_create");
		P.running = true;
	}
	if (cmd->op == P_ALLOC) {
		if (P.outstanding + cmd->n > PEER_BACK)
			peer_sync();
		P.outstanding += cmd->n;
	}
	pthread_mutex_lock(&P.lock);
	while (P.tail - P.head == PEER_RING)
		pthread_cond_wait(&P.cv, &P.lock);
	P.ring[P.tail % PEER_RING] = *cmd;
	P.tail++;
	pthread_cond_broadcast(&P.cv);
	pthread_mutex_unlock(&P.lock);
}

/* The peer exits (its sheaves go back); the caches are this thread's alone again. */
static void peer_stop(void)
{
	if (!P.running || M.child)
		return;
	peer_sync();
	pthread_mutex_lock(&P.lock);
	P.exit = true;
	pthread_cond_broadcast(&P.cv);
	pthread_mutex_unlock(&P.lock);
	ENSURE(!pthread_join(P.t, NULL), "pthread_join");
	P.running = false;
	for (int i = 0; i < NCACHES; i++)
		M.caches[i].shared = false;
}

static void peer_flush(void)
{
	struct peer_cmd cmd = { .op = P_FLUSH };

	if (!P.running || M.child)
		return;
	peer_send(&cmd);
	peer_sync();
	for (int i = 0; i < NCACHES; i++)
		M.caches[i].shared = false;
}

/* Objects for another thread to free, all by one way: taken out of the model now. */
static bool fill_free_cmd(struct src *s, struct peer_cmd *cmd)
{
	unsigned int want = 1 + pick(s, PEER_BATCH);
	int ci = pick_cache(s);

	cmd->op = P_FREE;
	cmd->way = (int)pick(s, PF_NWAYS + dropin);
	cmd->ci = -1;
	if (cmd->way == PF_FREE || cmd->way == PF_KFREE || cmd->way == PF_KFREE_BULK ||
	    cmd->way == PF_RCU) {
		/* (any objects those take: malloc's, or kmalloc's and caches' but external ones) */
	} else if (ci < 0) {
		cmd->way = PF_KFREE;
	} else {
		cmd->ci = ci;
		cmd->c = M.caches[ci].c;
		if (cmd->way == PF_CACHE_NULL && M.caches[ci].external)
			cmd->way = PF_CACHE; /* (no address lookup finds an external pool's) */
	}
	cmd->n = 0;
	for (unsigned int k = 0; k < want; k++) {
		int i = cmd->way == PF_FREE ? pick_live(s, is_malloc, 0) :
			cmd->ci >= 0	    ? pick_live(s, of_cache, cmd->ci) :
					      pick_live(s, kfreeable, 0);
		struct obj o;

		if (i < 0)
			break;
		o = live_take((unsigned int)i);
		note_free(&o, 0, false);
		if (o.kind == K_CACHE) {
			M.caches[o.ci].shared = true;
			if (cmd->way == PF_RCU)
				M.caches[o.ci].rcu_pending++;
		}
		cmd->objs[cmd->n++] = o;
	}
	if (cmd->way == PF_RCU && cmd->n)
		M.rcu_any = true;
	return cmd->n != 0;
}

static void op_peer_free(struct src *s)
{
	struct peer_cmd cmd = { 0 };

	if (M.child || !fill_free_cmd(s, &cmd))
		return;
	note("peer free %u objects way %d%s%s", cmd.n, cmd.way, cmd.ci >= 0 ? " of " : "",
	     cmd.ci >= 0 ? M.caches[cmd.ci].name : "");
	peer_send(&cmd);
}

static bool fill_alloc_cmd(struct src *s, struct peer_cmd *cmd)
{
	int ci = pick_cache(s);

	cmd->op = P_ALLOC;
	cmd->way = (int)pick(s, PA_NWAYS + dropin);
	cmd->n = 1 + pick(s, PEER_BATCH);
	cmd->tag0 = new_tag();
	cmd->nofirst = chance(s, 25);
	if (cmd->way == PA_KMALLOC || cmd->way == PA_MALLOC || ci < 0) {
		if (cmd->way != PA_MALLOC)
			cmd->way = PA_KMALLOC;
		cmd->ci = -1;
		cmd->c = NULL;
		cmd->size = 1 + pick_size(s, 1, chance(s, 90) ? 4096 : 200000);
		cmd->keyed = env_all_keyed || dropin;
		return true;
	}
	cmd->ci = ci;
	cmd->c = M.caches[ci].c;
	cmd->size = M.caches[ci].size;
	cmd->may_fail = M.caches[ci].external;
	cmd->whole = M.caches[ci].ctor || M.caches[ci].external;
	cmd->keyed = M.caches[ci].keyed;
	M.caches[ci].shared = true;
	return true;
}

static void op_peer_alloc(struct src *s)
{
	struct peer_cmd cmd = { 0 };

	if (M.child || live_full() || !fill_alloc_cmd(s, &cmd))
		return;
	note("peer alloc %u way %d%s%s", cmd.n, cmd.way, cmd.ci >= 0 ? " of " : "",
	     cmd.ci >= 0 ? M.caches[cmd.ci].name : "");
	peer_send(&cmd);
}

static void op_peer_ctl(struct src *s)
{
	unsigned int what = pick(s, 10);

	if (M.child || !P.running)
		return;
	note("peer %s", what < 6 ? "sync" : what < 9 ? "flush" : "exit");
	if (what < 6)
		peer_sync();
	else if (what < 9)
		peer_flush();
	else
		peer_stop();
}

/* ---------------------------------------------------- a thread that exits */

/*
 * A thread runs a free and an allocation command and exits (its sheaves go
 * back at exit); or runs them from a pthread_key destructor, after uslab's
 * own exit handler may have run (then straight to the slabs).
 */
struct tjob {
	struct peer_cmd cmd[2];
	bool flush, in_destructor;
	struct obj got[PEER_BATCH];
	unsigned int ngot;
};

static pthread_key_t tjob_key;

static void tjob_run(struct tjob *j)
{
	peer_exec(&j->cmd[0], j->got);
	if (j->flush)
		uslab_thread_flush();
	j->ngot = peer_exec(&j->cmd[1], j->got);
}

static void tjob_destructor(void *arg)
{
	tjob_run(arg);
}

static void *tjob_main(void *arg)
{
	struct tjob *j = arg;

	if (j->in_destructor)
		pthread_setspecific(tjob_key, j);
	else
		tjob_run(j);
	return NULL;
}

static void op_thread(struct src *s)
{
	static struct tjob j;
	pthread_t t;
	bool shared[NCACHES];

	if (M.child || live_full())
		return;
	/* (what it freed or allocated sits in no thread's sheaves after its exit) */
	for (int i = 0; i < NCACHES; i++)
		shared[i] = M.caches[i].shared;
	memset(&j, 0, sizeof(j));
	fill_free_cmd(s, &j.cmd[0]);
	fill_alloc_cmd(s, &j.cmd[1]);
	j.flush = chance(s, 30);
	j.in_destructor = chance(s, 30);
	note("thread: free %u way %d %s, alloc %u way %d %s%s%s", j.cmd[0].n, j.cmd[0].way,
	     j.cmd[0].ci >= 0 ? M.caches[j.cmd[0].ci].name : "", j.cmd[1].n, j.cmd[1].way,
	     j.cmd[1].ci >= 0 ? M.caches[j.cmd[1].ci].name : "", j.flush ? ", flush" : "",
	     j.in_destructor ? ", in a key destructor" : "");
	ENSURE(!pthread_create(&t, NULL, tjob_main, &j), "pthread_create");
	ENSURE(!pthread_join(t, NULL), "pthread_join");
	for (unsigned int i = 0; i < j.ngot; i++)
		adopt_stamped(&j.got[i]);
	for (int i = 0; i < NCACHES; i++)
		M.caches[i].shared = shared[i];
}

/* --------------------------------------------------------------- malloc */

static void op_malloc(struct src *s)
{
	size_t size = pick_kmalloc_size(s), align = 0, usable;
	unsigned int way = pick(s, 9);
	bool zero = false;
	void *p = NULL;
	int r;

	if (!dropin) {
		op_kmalloc(s); /* (malloc is not uslab's) */
		return;
	}
	if (live_full())
		return;
	errno = 0;
	switch (way) {
	case 0:
	case 1:
		p = malloc(size);
		break;
	case 2: {
		size_t n = 1 + pick(s, 8);

		if (chance(s, 5)) {
			volatile size_t big =
				SIZE_MAX / 4; /* (no warning: it overflows on purpose) */

			p = calloc(big, 8 + n);
			note("calloc overflow -> %p", p);
			ENSURE(!p && errno == ENOMEM, "calloc overflow: %p errno %d", p, errno);
			return;
		}
		size /= n;
		p = calloc(n, size);
		size *= n;
		zero = true;
		break;
	}
	case 3:
	case 4: { /* realloc: of a live malloc object (grow, shrink, to 0), or of NULL */
		int i = pick_live(s, is_malloc, 0);
		char what[96]; /* said before the realloc: no use of the old pointer after it */
		struct obj o;
		void *q;

		if (i < 0) {
			p = realloc(NULL, size);
			break;
		}
		o = M.live[i];
		verify(&o, false);
		if (chance(s, 10))
			size = 0;
		else if (chance(s, 30))
			size = 1 + pick(s, (uint32_t)o.size);
		snprintf(what, sizeof(what), "%s", obj_what(&o));
		q = realloc(o.p, size);
		note("realloc %s to %zu -> %p", what, size, q);
		if (!size) {
			ENSURE(!q, "realloc(p, 0): %p, want NULL (p freed)", q);
			o = live_take((unsigned int)i);
			note_free(&o, 0, false);
			return;
		}
		ENSURE(q, "realloc to %zu failed: errno %d", size, errno);
		{
			size_t keep = o.size < size ? o.size : size;
			size_t bad = stamp_bad(q, o.size, o.tag, o.nofirst ? 8 : 0, keep, 0);

			ENSURE(bad == SIZE_MAX, "realloc of %s to %zu: byte %zu not kept", what,
			       size, bad);
		}
		o = live_take((unsigned int)i);
		if (q != o.p)
			note_free(&o, 0, false);
		usable = malloc_usable_size(q);
		ENSURE(usable >= size, "realloc to %zu: usable %zu", size, usable);
		adopt_mem(K_MALLOC, q, usable, o.nofirst);
		return;
	}
	case 5:
		align = (size_t)1 << pick(s, 17);
		p = aligned_alloc(align, size);
		break;
	case 6:
		align = (size_t)1 << pick(s, 17);
		if (chance(s, 10)) {
			/* below sizeof(void *), or not a power of two: EINVAL */
			size_t bad = align < 8 ? align : align == 8 ? 24 : align + 8;

			p = (void *)0x1;
			r = posix_memalign(&p, bad, size);
			note("posix_memalign bad align %zu -> %d", bad, r);
			ENSURE(r == EINVAL && p == (void *)0x1, "posix_memalign(%zu): %d, %p", bad,
			       r, p);
			return;
		}
		if (align < sizeof(void *))
			align = sizeof(void *);
		r = posix_memalign(&p, align, size);
		ENSURE(!r, "posix_memalign(%zu, %zu): %d", align, size, r);
		break;
	case 7:
		if (chance(s, 50)) {
			align = 4096;
			p = valloc(size);
		} else {
			align = (size_t)1 << pick(s, 13);
			p = memalign(align, size);
		}
		break;
	default: {
		int t = malloc_trim(0);

		note("malloc_trim -> %d", t);
		ENSURE(t == 0 || t == 1, "malloc_trim: %d", t);
		for (int i = 0; i < NCACHES; i++)
			M.caches[i].epoch++;
		return;
	}
	}
	note("malloc way %u size %zu align %zu -> %p", way, size, align, p);
	ENSURE(p, "malloc way %u of %zu (align %zu): errno %d", way, size, align, errno);
	usable = malloc_usable_size(p);
	ENSURE(usable >= size, "malloc_usable_size %zu < %zu", usable, size);
	ENSURE(((uintptr_t)p & ((align	    ? align :
				 size >= 16 ? 16 :
					      8) -
				1)) == 0,
	       "malloc way %u of %zu: %p not aligned to %zu", way, size, p,
	       align	  ? align :
	       size >= 16 ? 16 :
			    8);
	if (zero)
		for (size_t i = 0; i < size; i += 1 + i / 16)
			ENSURE(!((unsigned char *)p)[i], "calloc: byte %zu is %#x", i,
			       ((unsigned char *)p)[i]);
	adopt_mem(K_MALLOC, p, usable, chance(s, 20));
}

/* ----------------------------------------------------- shrink, flush, trim */

static void op_shrink(struct src *s)
{
	int ci = pick_cache(s);

	if (ci < 0)
		return;
	note("shrink %s", M.caches[ci].name);
	ENSURE(uslab_cache_shrink(M.caches[ci].c) == 0, "shrink");
	M.caches[ci].epoch++;
}

static void op_flush(struct src *s)
{
	(void)s;
	note("thread_flush");
	uslab_thread_flush();
}

/* Every free page back: nothing retained while no other thread frees. */
static void trim_check(void)
{
	struct uslab_heap_stats hs;
	size_t got = uslab_trim();

	for (int i = 0; i < NCACHES; i++)
		M.caches[i].epoch++;
	ENSURE(!uslab_heap_stats(&hs), "heap_stats");
	note("trim: %zu bytes back, %llu retained", got, (unsigned long long)hs.retained_bytes);
	if (!P.running && !M.rcu_any)
		ENSURE(hs.retained_bytes == 0, "after uslab_trim %llu bytes retained",
		       (unsigned long long)hs.retained_bytes);
}

static void op_trim(struct src *s)
{
	if (chance(s, 50))
		peer_stop();
	trim_check();
}

static void op_rcu_barrier(struct src *s)
{
	(void)s;
	note("rcu_barrier");
	rcu_barrier_all();
}

/* validate: nothing wrong with a cache no other thread is using. */
static void op_validate(struct src *s)
{
	int ci = pick_cache(s);
	long r;

	if (ci < 0 || M.caches[ci].rcu_pending)
		return;
	peer_sync();
	r = uslab_cache_validate(M.caches[ci].c);
	note("validate %s -> %ld", M.caches[ci].name, r);
	ENSURE(r == 0, "validate %s: %ld problems", M.caches[ci].name, r);
}

static void op_verify(struct src *s)
{
	(void)s;
	for (unsigned int i = 0; i < M.nlive; i++)
		verify(&M.live[i], false);
}

/* ------------------------------------------------------------- lifecycle */

/*
 * Destroy a cache the program holds nothing of: after the sheaves are
 * flushed and the cache shrunk, no object is active and no slab is left;
 * validate finds nothing; destroy returns 0.
 */
static void destroy_checked(struct src *s, int ci)
{
	struct fcache *c = &M.caches[ci];
	int r;

	peer_sync();
	ENSURE(!c->live || c->external, "destroy with %lu live", c->live);
	for (int i = 0; i < NMAGS; i++)
		if (M.mags[i].m && M.mags[i].ci == ci)
			mag_destroy(i);
	if (c->rcu_pending)
		rcu_barrier_all();
	if (c->shared && chance(s, 50))
		peer_flush();
	if (chance(s, 50))
		uslab_thread_flush();
	ENSURE(uslab_cache_shrink(c->c) == 0, "shrink");
	if (!c->external && !c->shared) {
		struct uslab_cache_stats st = stats_of(c);

		ENSURE(st.active_objs == 0,
		       "%s (flags %#x, %s, sheaf capacity %u): %lu objects active with none held, "
		       "sheaves flushed (barn %lu full, %lu per CPU; %lu slabs)",
		       c->name, c->flags, uslab_layout_name(c->layout), st.sheaf_capacity,
		       st.active_objs, st.barn_full, st.percpu_objects, st.num_slabs);
		if (!c->typesafe)
			ENSURE(st.num_slabs == 0,
			       "%s: %lu slabs left after shrink with none active", c->name,
			       st.num_slabs);
	}
	if (!c->external) {
		long v = uslab_cache_validate(c->c);

		ENSURE(v == 0, "validate %s: %ld problems", c->name, v);
	}
	r = uslab_cache_destroy(c->c);
	note("destroy %s -> %d", c->name, r);
	if (r) {
		struct uslab_cache_stats st = stats_of(c);

		fail("destroy %s (flags %#x, %s, sheaf capacity %u%s): %d with none held "
		     "(%lu active, barn %lu full, %lu per CPU, %lu slabs)",
		     c->name, c->flags, uslab_layout_name(c->layout), c->args.sheaf_capacity,
		     c->shared ? ", used by the other thread" : "", r, st.active_objs, st.barn_full,
		     st.percpu_objects, st.num_slabs);
	}
	if (c->external) {
		for (unsigned int i = 0; i < c->ext_n; i++) {
			size_t bad;

			if (c->ext_live[i])
				continue;
			bad = stamp_bad(c->ext + (size_t)i * c->stride, c->size, c->ext_tag[i], 0,
					SIZE_MAX, 0);
			ENSURE(bad == SIZE_MAX, "%s: free external object %u changed (byte %zu)",
			       c->name, i, bad);
		}
		munmap(c->ext, c->ext_len);
		c->ext = NULL;
	}
	c->c = NULL;
	c->epoch++;
}

/* Free every model object of slot @ci, each by one of its ways. */
static void free_all_of(struct src *s, int ci)
{
	for (unsigned int i = M.nlive; i-- > 0;)
		if (i < M.nlive && M.live[i].kind == K_CACHE && M.live[i].ci == ci)
			free_one(s, i);
}

static void op_destroy(struct src *s)
{
	int ci = pick_cache(s);
	struct fcache *c;

	/* (a child forked with commands pending: their objects are live, unknown) */
	if (ci < 0 || (M.child && !M.child_synced))
		return;
	c = &M.caches[ci];
	peer_sync(); /* (what it allocated is the model's now, to be freed) */
	note("destroy %s (%lu live)", c->name, c->live);
	if (c->external && c->live && chance(s, 50)) {
		/* Destroyed with objects out: 0, the pointers forgotten; they are the program's again. */
		for (unsigned int i = M.nlive; i-- > 0;)
			if (i < M.nlive && M.live[i].kind == K_CACHE && M.live[i].ci == ci) {
				struct obj o = live_take(i);

				verify(&o, false);
				c->ext_tag[(size_t)(o.p - c->ext) / c->stride] = o.tag;
				c->ext_live[(size_t)(o.p - c->ext) / c->stride] = 0;
			}
	} else {
		free_all_of(s, ci);
	}
	destroy_checked(s, ci);
}

/* Destroy while objects are held: -EBUSY, and the cache goes on. */
static void op_busy(struct src *s)
{
	int ci = pick_cache(s);
	struct fcache *c;
	int r;

	if (ci < 0)
		return;
	c = &M.caches[ci];
	if (c->external || c->debug || !c->live)
		return;
	peer_sync(); /* (its deferred frees are made before destroy's barrier) */
	r = uslab_cache_destroy(c->c);
	note("destroy %s with %lu live -> %d", c->name, c->live, r);
	ENSURE(r == -EBUSY, "destroy %s with %lu live: %d", c->name, c->live, r);
	if (M.rcu_any) { /* destroy waited for every deferred free (<uslab.h>) */
		for (int i = 0; i < NCACHES; i++)
			M.caches[i].rcu_pending = 0;
		M.rcu_any = false;
	}
	c->epoch++;
	for (unsigned int i = 0; i < M.nlive; i++)
		if (M.live[i].kind == K_CACHE && M.live[i].ci == ci)
			verify(&M.live[i], false);
	adopt_cache(ci, uslab_cache_alloc(c->c), false, false);
}

/* ------------------------------------------------------ fork and misuse */

static void one_op(struct src *s);
static void teardown(struct src *s, bool full);

static void op_fork(struct src *s)
{
	bool synced = chance(s, 60);
	unsigned int nops = 4 + pick(s, 40);
	uint64_t seed = src_u64(s);
	int status;
	pid_t pid;

	if (M.child || M.forks++ >= max_forks)
		return;
	if (synced)
		peer_sync();
	synced = synced && !M.rcu_any;
	note("fork: %u steps in the child%s", nops, synced ? ", then its teardown" : "");
	fflush(NULL);
	pid = fork();
	ENSURE(pid >= 0, "fork");
	if (pid == 0) {
		struct src cs = { .rng = seed | 1 };

		M.child = true;
		M.child_synced = synced;
		for (unsigned int i = 0; i < nops; i++)
			one_op(&cs);
		op_verify(&cs);
		if (synced)
			teardown(&cs, true);
		fflush(NULL);
		_exit(0);
	}
	ENSURE(waitpid(pid, &status, 0) == pid, "waitpid");
	ENSURE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "the forked child failed (status %#x; its report above)", status);
}

struct misuse {
	int kind;
	struct uslab_cache *c, *other;
	unsigned char *p;
	unsigned int between;
	bool lib;
};

/* The first word of a free object, past ASan's poison (a diagnostic). */
__attribute__((no_sanitize("address"))) static uintptr_t peek_word(const void *p)
{
	return *(const volatile uintptr_t *)p;
}

static void misuse_child(void *arg)
{
	const struct misuse *m = arg;
	struct rlimit no_core = { 0, 0 };
	/* (called through a pointer: the compiler may not see, and warn about, the misuse) */
	void (*volatile free_fn)(void *) = free;
	void *q[320];

	setrlimit(RLIMIT_CORE, &no_core);
	signal(SIGABRT, SIG_DFL); /* (libFuzzer's handler would report the abort as a crash) */
	switch (m->kind) {
	case 0: { /* a double free in a keyed cache, @between frees apart */
		void *p = uslab_cache_alloc(m->c);
		unsigned int n = m->between;

		n = (unsigned int)uslab_cache_alloc_bulk(m->c, n, q);
		uslab_cache_free(m->c, p);
		for (unsigned int i = 0; i < n; i++)
			uslab_cache_free(m->c, q[i]);
		{
			uintptr_t w0 = peek_word(p); /* (free: poisoned for ASan) */

			fprintf(stderr,
				"(before the second free: first word %#lx, key %#lx, per CPU %d, n %u)\n",
				(unsigned long)w0, (unsigned long)free_key,
				uslab_cache_percpu(m->c), n);
		}
		if (m->lib)
			(uslab_cache_free)(m->c, p);
		else
			uslab_cache_free(m->c, p);
		break;
	}
	case 1: /* kfree of p + 8 */
		if (m->lib)
			(uslab_kfree)(m->p + 8);
		else
			uslab_kfree(m->p + 8);
		break;
	case 2: /* a free to the wrong cache, through the library */
		(uslab_cache_free)(m->other, m->p);
		break;
	case 3: /* free(p + 8), the drop-in */
		free_fn(m->p + 8);
		break;
	default: { /* free twice, the drop-in */
		void *p = malloc(m->between + 1);

		free_fn(p);
		for (unsigned int i = 0; i < m->between % 100; i++)
			free_fn(malloc(m->between + 1));
		free_fn(p);
	}
	}
	fprintf(stderr, "api_fuzz: the misuse returned\n");
}

static bool misuse_cache_ok(const struct obj *o, int arg)
{
	(void)arg;
	return o->size >= 16 &&
	       (o->kind == K_KMALLOC ||
		(o->kind == K_CACHE && !M.caches[o->ci].external && !M.caches[o->ci].debug));
}

static bool any_obj(const struct obj *o, int arg)
{
	(void)arg;
	return o->kind != K_MALLOC && (o->kind != K_CACHE || !M.caches[o->ci].debug);
}

static void op_misuse(struct src *s)
{
	struct misuse m = { .kind = (int)pick(s, dropin ? 5 : 3), .lib = chance(s, 50) };
	static const char *const names[] = { "double free in a keyed cache", "kfree(p + 8)",
					     "free to the wrong cache", "free(p + 8)",
					     "free() twice" };
	struct uslab_cache *own = NULL;
	char buf[8192];
	int status, i;

	if (M.child || env_debug || M.forks++ >= max_forks)
		return;
	switch (m.kind) {
	case 0: {
		int ci = pick_cache(s);

		if (ci >= 0 && M.caches[ci].keyed) {
			m.c = M.caches[ci].c;
		} else {
			struct uslab_cache_args a = { .layout = pick(s, USLAB_LAYOUT_NR) };

			size_t size = pick_size(s, 8, 4096);

			own = uslab_cache_create("fz-keyed", size, &a, USLAB_FREE_KEY);
			if (!own) /* (a layout unfit for the size: EINVAL) */
				own = uslab_cache_create("fz-keyed", size, NULL, USLAB_FREE_KEY);
			ENSURE(own, "create a keyed cache: errno %d", errno);
			m.c = own;
		}
		m.between = pick(s, 4) ? pick(s, 8) : pick(s, 300);
		break;
	}
	case 1:
	case 3:
		i = pick_live(s, m.kind == 1 ? misuse_cache_ok : is_malloc, 0);
		if (i < 0 || M.live[i].size < 16)
			return;
		m.p = M.live[i].p;
		break;
	case 2: {
		int ci = pick_cache(s);

		i = pick_live(s, any_obj, 0);
		if (i < 0 || ci < 0 || M.caches[ci].external || M.caches[ci].debug ||
		    (M.live[i].kind == K_CACHE && M.live[i].ci == ci))
			return;
		m.p = M.live[i].p;
		m.other = M.caches[ci].c;
		break;
	}
	default:
		m.between = pick(s, 200);
	}
	note("misuse in a child: %s%s (%s, %u between)", names[m.kind], m.lib ? " (library)" : "",
	     m.c     ? uslab_cache_name(m.c) :
	     m.other ? uslab_cache_name(m.other) :
		       "",
	     m.between);
	status = run_child(misuse_child, &m, buf, sizeof(buf));
	ENSURE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "uslab: BUG"),
	       "misuse \"%s\" (%s%p%s%s, %u between) not stopped with a report: status %#x, "
	       "stderr:\n%s",
	       names[m.kind], m.c ? uslab_cache_name(m.c) : "", (void *)m.p, m.other ? " to " : "",
	       m.other ? uslab_cache_name(m.other) : "", m.between, status, buf);
	if (own)
		ENSURE(uslab_cache_destroy(own) == 0, "destroy");
}

/* ----------------------------------------------------------------- runs */

struct op {
	const char *name;
	void (*fn)(struct src *s);
	unsigned int weight;
};

static const struct op ops[] = {
	{ "create", op_create, 25 },
	{ "destroy", op_destroy, 12 },
	{ "busy", op_busy, 2 },
	{ "alloc", op_alloc, 120 },
	{ "free", op_free, 110 },
	{ "alloc_bulk", op_alloc_bulk, 40 },
	{ "free_bulk", op_free_bulk, 40 },
	{ "kfree_bulk", op_kfree_bulk, 15 },
	{ "kmalloc", op_kmalloc, 80 },
	{ "krealloc", op_krealloc, 50 },
	{ "query", op_query, 25 },
	{ "magazine", op_magazine, 80 },
	{ "batch", op_batch, 20 },
	{ "rcu", op_rcu, 20 },
	{ "rcu_barrier", op_rcu_barrier, 3 },
	{ "shrink", op_shrink, 10 },
	{ "flush", op_flush, 10 },
	{ "trim", op_trim, 2 },
	{ "validate", op_validate, 5 },
	{ "peer_free", op_peer_free, 40 },
	{ "peer_alloc", op_peer_alloc, 25 },
	{ "peer_ctl", op_peer_ctl, 20 },
	{ "thread", op_thread, 5 },
	{ "fork", op_fork, 2 },
	{ "misuse", op_misuse, 2 },
	{ "malloc", op_malloc, 80 },
	{ "verify", op_verify, 3 },
};

static void one_op(struct src *s)
{
	static unsigned int total;
	unsigned int r;

	if (!total)
		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
			total += ops[i].weight;
	r = pick(s, total);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (r < ops[i].weight) {
			if (!M.child)
				M.ops[i]++;
			ops[i].fn(s);
			return;
		}
		r -= ops[i].weight;
	}
}

/*
 * The end of every run: everything freed and destroyed with the checks of
 * destroy_checked(); no report of the debug tier; nothing retained after
 * uslab_trim().
 */
static void teardown(struct src *s, bool full)
{
	peer_stop();
	for (int i = 0; i < NMAGS; i++)
		if (M.mags[i].m)
			mag_destroy(i);
	while (M.nlive)
		free_one(s, M.nlive - 1);
	if (M.rcu_any)
		rcu_barrier_all();
	if (!full)
		return;
	if (chance(s, 50))
		uslab_thread_flush();
	for (int i = 0; i < NCACHES; i++)
		if (M.caches[i].c)
			destroy_checked(s, i);
	ENSURE(uslab_bug_count() == 0, "the debug tier reported %lu problems", uslab_bug_count());
	trim_check();
}

static void run(struct src *s, unsigned long steps)
{
	uint64_t seed = M.seed;
	uint32_t gens = M.gens;

	memset(&M, 0, sizeof(M));
	M.seed = seed;
	M.gens = gens;
	for (M.step = 0; M.step < steps && !src_done(s); M.step++)
		one_op(s);
	teardown(s, true);
}

static void init_once(void)
{
	static bool done;
	const char *e;
	struct uslab_cache *c;
	struct uslab_magazine *m;
	void *p;

	if (done)
		return;
	done = true;
	e = getenv("USLAB_FREE_KEY");
	env_all_keyed = e && !strcmp(e, "1");
	env_debug = getenv("USLAB_DEBUG") && *getenv("USLAB_DEBUG");
	verbose = getenv("API_FUZZ_VERBOSE") != NULL;
	trace = getenv("API_FUZZ_TRACE") != NULL;
	if (getenv("API_FUZZ_LOG"))
		log_steps = strtoul(getenv("API_FUZZ_LOG"), NULL, 0);
#ifdef API_FUZZ_LIBFUZZER
	max_forks = 1; /* (a fork of a fuzzing process costs tens of milliseconds) */
#endif
	if (getenv("API_FUZZ_MAX_FORKS"))
		max_forks = strtoul(getenv("API_FUZZ_MAX_FORKS"), NULL, 0);
	if (log_steps > LOG_LEN)
		log_steps = LOG_LEN;
	/* The process's free key, from a keyed cache's magazine (white-box, for the check). */
	c = uslab_cache_create("fz-key", 64, NULL, USLAB_FREE_KEY);
	m = c ? uslab_magazine_create(c, 0, 0) : NULL;
	if (!m) {
		fprintf(stderr, "api_fuzz: cannot create a keyed cache and its magazine\n");
		exit(1);
	}
	free_key = m->uslab_priv_free_key;
	uslab_magazine_destroy(m);
	uslab_cache_destroy(c);
	if (pthread_key_create(&tjob_key, tjob_destructor)) {
		fprintf(stderr, "api_fuzz: pthread_key_create\n");
		exit(1);
	}
	/* libuslab-malloc.so preloaded: malloc's memory is uslab's. */
	p = malloc(24);
	dropin = uslab_owns(p);
	free(p);
}

#ifdef API_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct src s = { .data = data, .len = size };

	init_once();
	M.seed = 0;
	run(&s, SIZE_MAX);
	return 0;
}
#else
static void usage(void)
{
	fprintf(stderr,
		"usage: api_fuzz SEED [STEPS] | FIRST-LAST [STEPS] | --dump SEED STEPS FILE "
		"| FILE...\n");
	exit(2);
}

static void summary(const char *what, double secs)
{
	printf("ok %s: %lu steps, %lu checks, %lu freed objects checked when reused "
	       "(%lu OBJFREELIST array holders, %lu guard slots), %.1f s%s%s\n",
	       what, M.step, test_checks, M.reused, M.tolerated, M.guarded, secs,
	       dropin ? ", malloc: libuslab-malloc.so" : "", free_key ? "" : ", no free key");
	if (verbose)
		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
			printf("   %-12s %lu\n", ops[i].name, M.ops[i]);
	fflush(stdout);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run a file as libFuzzer would (reproducing its findings in any build). */
static void run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	static uint8_t buf[1 << 20];
	struct src s = { .data = buf };
	double t0 = now();

	if (!f) {
		perror(path);
		exit(2);
	}
	s.len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	M.seed = 0;
	run(&s, SIZE_MAX);
	summary(path, now() - t0);
}

int main(int argc, char **argv)
{
	unsigned long first, last, steps = 2000;
	char *end;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2)
		usage();
	init_once();
	if (!strcmp(argv[1], "--dump")) {
		struct src s;

		if (argc != 5)
			usage();
		s = (struct src){ .rng = strtoull(argv[2], NULL, 0) * 2 + 1,
				  .rec = fopen(argv[4], "wb") };
		if (!s.rec) {
			perror(argv[4]);
			return 2;
		}
		M.seed = strtoull(argv[2], NULL, 0);
		run(&s, strtoul(argv[3], NULL, 0));
		fclose(s.rec);
		printf("wrote %zu bytes to %s\n", s.pos, argv[4]);
		return 0;
	}
	first = strtoul(argv[1], &end, 0);
	if (end == argv[1] || (*end && *end != '-')) {
		for (int i = 1; i < argc; i++)
			run_file(argv[i]);
		return 0;
	}
	last = *end == '-' ? strtoul(end + 1, NULL, 0) : first;
	if (argc > 2)
		steps = strtoul(argv[2], NULL, 0);
	for (unsigned long seed = first; seed <= last; seed++) {
		struct src s = { .rng = seed * 2 + 1 };
		char what[32];
		double t0 = now();

		M.seed = seed;
		test_checks = 0;
		run(&s, steps);
		snprintf(what, sizeof(what), "seed %lu", seed);
		summary(what, now() - t0);
	}
	return 0;
}
#endif
