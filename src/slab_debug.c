// SPDX-License-Identifier: MIT
/*
 * slab_debug.c - the debug tier (the kernel's slab_debug=FZPU): exact
 * per-object state, red zones, poison and the last alloc and free of every
 * object of the caches in the tier. With slab.c one layer: slab.c lays out
 * and links objects, this file checks them.
 *
 * A cache enters the tier by its creation flags (USLAB_CONSISTENCY_CHECKS,
 * USLAB_RED_ZONE, USLAB_POISON, USLAB_STORE_USER) or by USLAB_DEBUG
 * (letters FZPU, optionally followed by cache names). Its fast paths
 * always miss, so every call reaches the library: a single allocation or
 * free is checked at the call by thread_sheaves.c's debug paths
 * (slab_debug_alloc_one() as an object leaves the thread's sheaf,
 * slab_debug_free_one() before one goes in: a sheaf holds free objects
 * only); bulk calls and the other paths reach cache_refill() and
 * cache_free_objects(), where cache.c calls slab_debug_alloc() on the
 * objects handed out and slab_debug_free() on each object freed, before it
 * is linked anywhere.
 *
 * An object slot of a debug cache, from the slot's start (the first slot
 * of a slab at base + colour * colour_off):
 *
 *   [padding, left red zone: obj_off bytes]   Z (and memcheck): the zone
 *                                             is the last RZ_LEFT bytes
 *   [object: object_size bytes]               <- the pointer handed out
 *   [right red zone, up to dbg_off]           Z: at least 8 bytes
 *   [struct obj_debug: state, orig_size]      always
 *   [struct track alloc, free]                U only
 *   [free pointer]                            FREEPTR layout only
 *
 * The allocator writes no byte of the object itself except poison (P):
 * debug caches lay out as caches with a constructor do (cache.c).
 *
 *   state  OBJ_FREE -> OBJ_BUSY -> OBJ_ALLOC   handed out (slab_debug_alloc)
 *          OBJ_ALLOC -> OBJ_BUSY -> OBJ_FREE   freed (slab_debug_free)
 *          OBJ_ALLOC -> OBJ_RCU       queued by uslab_free_rcu (rcu.c)
 *          OBJ_RCU -> OBJ_ALLOC       its grace period over, just before
 *                                     the deferred free
 * A transition starts with a compare-and-swap: of two threads freeing one
 * object at once, exactly one succeeds and the other is reported. While
 * an object is OBJ_BUSY its zones, poison and tracks are being checked and
 * rewritten by one thread; validate skips it.
 *
 *   red zones  RZ_ACTIVE while allocated, RZ_INACTIVE while free; a
 *              kmalloc object's bytes between the requested size and the
 *              class size are RZ_ACTIVE too.
 *   poison     a free object reads POISON_FREE, its last byte POISON_END.
 *
 * Under valgrind's memcheck (asked when a cache is created) every cache
 * of the program is in the tier with DEBUG_VALGRIND at least: handed out
 * and freed objects are told to memcheck as heap blocks (MALLOCLIKE and
 * FREELIKE client requests), so it reports reads of uninitialised object
 * bytes, use after free, and objects leaked; this file's own accesses to
 * free objects are hidden from it.
 *
 * Reports go through debug.c: "uslab: BUG <cache>: <what> at <address>",
 * the details, then abort() or, with USLAB_ON_BUG=report, the program goes
 * on (a bad free is ignored, clobbered bytes are restored).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h" /* the cache descriptor they read: an exception in base.h */

#if USLAB_VALGRIND
#include <valgrind/memcheck.h>
#else
#define RUNNING_ON_VALGRIND 0
#define VALGRIND_MALLOCLIKE_BLOCK(a, n, rz, z) ((void)(a))
#define VALGRIND_FREELIKE_BLOCK(a, rz) ((void)(a))
#define VALGRIND_RESIZEINPLACE_BLOCK(a, o, n, rz) ((void)(a))
#define VALGRIND_DISABLE_ERROR_REPORTING ((void)0)
#define VALGRIND_ENABLE_ERROR_REPORTING ((void)0)
#endif

#define OBJ_FREE 0xf4eef4eeu
#define OBJ_ALLOC 0xa110ca7eu
#define OBJ_RCU 0x2c0f2ee0u
#define OBJ_BUSY 0xb5b5b5b5u

#define RZ_ACTIVE 0xcc
#define RZ_INACTIVE 0xbb
#define POISON_FREE 0x6b
#define POISON_END 0xa5

/* Frames of a backtrace at most (USLAB_DEBUG_FRAMES, and a report's own call). */
#define TRACK_DEPTH 16
/* The left red zone: the bytes just before an object (the rest of obj_off, alignment padding). */
#define RZ_LEFT 16u

/*
 * Who allocated or freed an object last (U): as SLUB's SLAB_STORE_USER, the
 * caller's call site (one return address, no unwinding), the thread and
 * the time; with USLAB_DEBUG_FRAMES=N > 1 a DWARF backtrace of N frames.
 */
struct track {
	uint64_t when_ns; /* CLOCK_MONOTONIC_COARSE */
	uint32_t tid;
	uint32_t depth;
	void *addrs[]; /* track_frames() return addresses, innermost first */
};

struct obj_debug {
	uint32_t state;
	uint32_t orig_size; /* bytes asked for (kmalloc), else object_size */
	uint64_t tracks[];  /* U: two struct track, the last alloc, the last free */
};

/* Frames a track keeps (read at start-up: every cache lays out with one value). */
static inline unsigned int track_frames(void)
{
	return usl_opt.debug_frames ? usl_opt.debug_frames : 1;
}

static inline size_t track_size(void)
{
	return sizeof(struct track) + track_frames() * sizeof(void *);
}

bool slab_debug_on;

/*
 * Under memcheck (on_memcheck()): the client requests below cost a few
 * instructions each even without valgrind, so they are made only then.
 */
static bool memcheck;
#define MEMCHECK(req)                   \
	do {                            \
		if (unlikely(memcheck)) \
			req;            \
	} while (0)

/*
 * The program's call site of the check running on this thread (the
 * alloc or free of one object): a report's backtrace starts there.
 */
static __thread const void *report_site;

/* ---------------------------------------------------------- selection */

/*
 * Whether the program runs under valgrind's memcheck (other tools, such as
 * callgrind measuring the fast paths, must see the caches as they are):
 * only memcheck answers its own client requests (the default answer is 0).
 */
static bool on_memcheck(void)
{
#if USLAB_VALGRIND
	static int known; /* 0: not asked yet, 1: no, 2: yes */

	if (!known) {
		char a = 0, v;

		known = RUNNING_ON_VALGRIND && VALGRIND_GET_VBITS(&a, &v, 1) == 1 ? 2 : 1;
	}
	return known == 2;
#else
	return false;
#endif
}

/*
 * slab_debug_flags - the debug flags of a new cache @name created with
 * @flags (its own, and USLAB_DEBUG's if it selects the cache). uslab's own
 * caches and large kmalloc objects are never in the tier. Poison is dropped
 * where the allocator may not write a free object (constructor, RCU).
 */
unsigned int slab_debug_flags(const char *name, unsigned int flags, bool bound)
{
	unsigned int d = flags & DEBUG_FLAGS;

	if (flags & (CACHE_INTERNAL | CACHE_LARGE))
		return 0;
	d |= debug_selects(name);
	if (on_memcheck()) {
		d |= DEBUG_VALGRIND;
		memcheck = true;
	}
	if (bound)
		d &= ~USLAB_POISON;
	if (d && !__atomic_load_n(&slab_debug_on, __ATOMIC_RELAXED)) {
		usl_backtrace_init();
		__atomic_store_n(&slab_debug_on, true, __ATOMIC_RELEASE);
	}
	return d;
}

/*
 * slab_debug_layout - the debug fields of @c (c->debug, c->object_size and
 * c->align set): red zones and metadata around each object.
 * Return: the bytes of a slot before any free pointer, from its start.
 */
size_t slab_debug_layout(struct uslab_cache *c)
{
	size_t meta = sizeof(struct obj_debug);

	if (c->debug & USLAB_STORE_USER)
		meta += 2 * track_size();
	c->obj_off = 0;
	c->dbg_off = (unsigned int)ALIGN_UP((size_t)c->object_size, 8);
	/*
	 * A left red zone; under valgrind too, so that no object starts at its
	 * slab's base, which the slab descriptor holds (memcheck would find
	 * every leaked first object still reachable through it).
	 */
	if (c->debug & (USLAB_RED_ZONE | DEBUG_VALGRIND))
		c->obj_off = (unsigned int)ALIGN_UP((size_t)RZ_LEFT, (size_t)c->align);
	if (c->debug & USLAB_RED_ZONE)
		c->dbg_off = (unsigned int)ALIGN_UP((size_t)c->object_size + 8, 8);
	return c->obj_off + c->dbg_off + meta;
}

/* ------------------------------------------------------------ helpers */

static inline struct obj_debug *dbg(const struct uslab_cache *c, const void *obj)
{
	return (struct obj_debug *)(void *)((char *)obj + c->dbg_off);
}

/* @obj's track @which (0: the last alloc, 1: the last free). */
static inline struct track *track_of(const struct uslab_cache *c, const void *obj, int which)
{
	return (struct track *)(void *)((char *)dbg(c, obj)->tracks + (size_t)which * track_size());
}

/*
 * Fill and check bytes of objects: free objects are the allocator's, so
 * memcheck is told to look away (debug caches are never ASan-poisoned).
 * A word at a time: poisoning and checking a 256-byte object were most of
 * P's cost byte by byte.
 */
static inline void fill(void *p, int v, size_t n)
{
	MEMCHECK(VALGRIND_DISABLE_ERROR_REPORTING);
	memset(p, v, n);
	MEMCHECK(VALGRIND_ENABLE_ERROR_REPORTING);
}

/* 16 bytes (SSE2 on x86-64, any target through gcc's vector extension). */
typedef uint64_t vec16 __attribute__((vector_size(16)));

/*
 * Whether [b, b + n) reads @pat (a byte repeated), 32 bytes a step and no
 * branch inside a step: the whole of a 256-byte object is 8 steps.
 */
static inline bool all_equal(const unsigned char *b, uint64_t pat, size_t n)
{
	vec16 want = { pat, pat }, acc = { 0, 0 }, x, y;
	uint64_t w, tail = 0;
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		memcpy(&x, b + i, 16);
		memcpy(&y, b + i + 16, 16);
		acc |= (x ^ want) | (y ^ want);
	}
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, b + i, 8);
		tail |= w ^ pat;
	}
	for (; i < n; i++)
		tail |= b[i] ^ (pat & 0xff);
	return !(acc[0] | acc[1] | tail);
}

/* The first byte of [p, p + n) that is not @v, or NULL. */
static inline const unsigned char *first_not(const void *p, int v, size_t n)
{
	const unsigned char *b = p;
	uint64_t pat = 0x0101010101010101ull * (unsigned char)v;
	bool same;
	size_t i = 0;

	MEMCHECK(VALGRIND_DISABLE_ERROR_REPORTING);
	same = all_equal(b, pat, n);
	MEMCHECK(VALGRIND_ENABLE_ERROR_REPORTING);
	if (likely(same))
		return NULL;
	MEMCHECK(VALGRIND_DISABLE_ERROR_REPORTING);
	while (i < n && b[i] == (unsigned char)v)
		i++;
	MEMCHECK(VALGRIND_ENABLE_ERROR_REPORTING);
	return i < n ? b + i : NULL;
}

/*
 * The time of a track: the coarse clock (the kernel's tick, a few ms, as
 * SLUB's jiffies) costs a few loads; CLOCK_MONOTONIC was a fifth of the
 * pair with U (doc/design.md).
 */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The program's call site of the current call by a DWARF unwind: for the
 * paths that pass none (bulk, magazines, deferred frees), once per call.
 */
static void *unwind_site(void)
{
	void *addrs[TRACK_DEPTH];
	unsigned int n = usl_backtrace(addrs, usl_backtrace_skips() ? 1 : TRACK_DEPTH);

	return n ? addrs[usl_first_caller(addrs, n)] : NULL;
}

/* Record the call at @site (NULL, or inside the library: unwound) in @obj's track @which. */
static void track_set(const struct uslab_cache *c, void *obj, int which, const void *site)
{
	struct track *t;

	if (!(c->debug & USLAB_STORE_USER))
		return;
	t = track_of(c, obj, which);
	if (unlikely(track_frames() > 1)) {
		t->depth = usl_backtrace(t->addrs, track_frames());
	} else {
		t->addrs[0] = usl_site_ok(site) ? (void *)site : unwind_site();
		t->depth = t->addrs[0] != NULL;
	}
	t->when_ns = now_ns();
	t->tid = usl_tid();
}

/* @now: one time for the whole report, so the two ages compare. */
static void print_track(const struct uslab_cache *c, const void *obj, int which, uint64_t now)
{
	const struct track *t = track_of(c, obj, which);

	if (!t->when_ns) {
		usl_report_line("  %s: never", which ? "last freed" : "allocated");
		return;
	}
	usl_report_line("  %s by thread %u, %.6f s ago:", which ? "last freed" : "allocated",
			t->tid, (double)(now - t->when_ns) / 1e9);
	usl_print_backtrace(t->addrs, t->depth, UINT_MAX);
}

/* Up to 64 bytes from @from (rounded down to 16) in hex, as offsets into the object. */
static void hex_dump(const char *obj, const char *from, const char *lo, const char *hi)
{
	const char *p = obj + ALIGN_DOWN(from - obj, 16);

	if (p < lo)
		p = lo;
	for (int line = 0; line < 4 && p < hi; line++) {
		char buf[16 * 3 + 1];
		int len = 0;

		for (int i = 0; i < 16 && p + i < hi; i++)
			len += snprintf(buf + len, sizeof(buf) - (size_t)len, " %02x",
					(unsigned char)p[i]);
		usl_report_line("  %s0x%04lx:%s", p < obj ? "object-" : "object+",
				(unsigned long)(p < obj ? obj - p : p - obj), buf);
		p += 16;
	}
}

static const char *state_name(uint32_t state)
{
	switch (state) {
	case OBJ_FREE:
		return "free";
	case OBJ_ALLOC:
		return "allocated";
	case OBJ_RCU:
		return "queued by uslab_free_rcu";
	case OBJ_BUSY:
		return "being allocated or freed";
	}
	return "corrupted";
}

/*
 * Start a report of problem @key (a constant string: with the caller, what
 * report mode reports once): its first line, and the call's backtrace.
 * Return: false when details are not wanted (reported before).
 */
static bool report_key(const struct uslab_cache *c, const void *addr, const char *key,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static bool report_key(const struct uslab_cache *c, const void *addr, const char *key,
		       const char *fmt, ...)
{
	void *addrs[TRACK_DEPTH];
	unsigned int n = usl_backtrace(addrs, TRACK_DEPTH), first;
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	first = n ? usl_first_caller(addrs, n) : 0;
	for (unsigned int i = 0; report_site && i < n; i++)
		if (addrs[i] == report_site)
			first = i; /* (a tail call may have left no uslab_* frame to find it by) */
	if (!usl_report(c, addr, n ? addrs[first] : NULL, key, "%s", line))
		return false;
	usl_report_line("  this call, by thread %u:", usl_tid());
	usl_print_backtrace(addrs + first, n - first, UINT_MAX);
	return true;
}

#define report(c, addr, ...) report_key((c), (addr), "", __VA_ARGS__)

/* The object's history and end of the report (abort, or go on). */
static void report_object(const struct uslab_cache *c, const void *obj, bool details)
{
	if (details) {
		usl_report_line("  object %p of %u bytes (%s), cache %s", obj, c->object_size,
				state_name(__atomic_load_n(&dbg(c, obj)->state, __ATOMIC_ACQUIRE)),
				c->name);
		if (c->debug & USLAB_STORE_USER) {
			uint64_t now = now_ns();

			print_track(c, obj, 0, now);
			print_track(c, obj, 1, now);
		}
	}
	usl_report_end(c);
}

/* ------------------------------------------------------------ checks */

/* check_bytes() found [p, p + n) clobbered: the report, and the bytes restored. */
static __attribute__((noinline, cold)) bool bytes_clobbered(const struct uslab_cache *c,
							    const char *obj, const char *p,
							    size_t n, int v, const char *what,
							    const char *detail)
{
	const unsigned char *bad = first_not(p, v, n);

	if (report_key(c, obj, what, "%s%s (byte %+ld of the object reads 0x%02x, not 0x%02x)",
		       what, detail, (long)((const char *)bad - obj), *bad, v)) {
		hex_dump(obj, (const char *)bad, p, p + n);
		report_object(c, obj, true);
	} else {
		usl_report_end(c);
	}
	fill((void *)p, v, n);
	return false;
}

/*
 * Check that [p, p + n) of @obj reads @v; if not report @what (@detail
 * after it) with the first bad byte and a dump, and restore the bytes.
 * Return: whether they were intact.
 */
static inline bool check_bytes(const struct uslab_cache *c, const char *obj, const char *p,
			       size_t n, int v, const char *what, const char *detail)
{
	if (likely(!first_not(p, v, n)))
		return true;
	return bytes_clobbered(c, obj, p, n, v, what, detail);
}

/* Check the red zones of @obj against @v (RZ_ACTIVE or RZ_INACTIVE; @when: a detail). */
static inline void check_red_zones(const struct uslab_cache *c, char *obj, int v, const char *when)
{
	uint32_t orig = dbg(c, obj)->orig_size;

	if (!(c->debug & USLAB_RED_ZONE))
		return;
	check_bytes(c, obj, obj - RZ_LEFT, RZ_LEFT, v, "red zone before the object overwritten",
		    when);
	check_bytes(c, obj, obj + c->object_size, c->dbg_off - c->object_size, v,
		    "red zone after the object overwritten", when);
	if (v == RZ_ACTIVE && orig < c->object_size)
		check_bytes(c, obj, obj + orig, c->object_size - orig, v,
			    "kmalloc red zone overwritten", ", past the size asked for");
}

static inline void check_poison(const struct uslab_cache *c, char *obj)
{
	if (!(c->debug & USLAB_POISON))
		return;
	check_bytes(c, obj, obj, c->object_size - 1, POISON_FREE,
		    "use after free: poison overwritten", "");
	check_bytes(c, obj, obj + c->object_size - 1, 1, POISON_END,
		    "use after free: poison overwritten", "");
}

static inline void poison(const struct uslab_cache *c, char *obj)
{
	if (c->debug & USLAB_POISON) {
		fill(obj, POISON_FREE, c->object_size - 1);
		fill(obj + c->object_size - 1, POISON_END, 1);
	}
}

static inline void set_red_zones(const struct uslab_cache *c, char *obj, int v)
{
	if (c->debug & USLAB_RED_ZONE) {
		fill(obj - RZ_LEFT, v, RZ_LEFT);
		fill(obj + c->object_size, v, c->dbg_off - c->object_size);
	}
}

static inline bool state_move(struct obj_debug *d, uint32_t *from, uint32_t to)
{
	return __atomic_compare_exchange_n(&d->state, from, to, false, __ATOMIC_ACQ_REL,
					   __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------- hooks */

/* Every object of a new slab of @c, before it is published: free, zones, poison. */
void slab_debug_setup_slab(struct uslab_cache *c, struct slab *s)
{
	char *obj = slab_first_object(c, s);

	for (unsigned int i = 0; i < s->objects; i++, obj += c->size) {
		struct obj_debug *d = dbg(c, obj);

		d->state = OBJ_FREE;
		d->orig_size = c->object_size;
		if (c->debug & USLAB_STORE_USER)
			memset(d->tracks, 0, 2 * track_size());
		set_red_zones(c, obj, RZ_INACTIVE);
		poison(c, obj);
	}
}

/*
 * The report of a bad state @st found where @want was expected, keyed by
 * its kind (report mode prints each kind once per call site).
 */
static bool report_state(const struct uslab_cache *c, const void *obj, const char *call,
			 uint32_t st)
{
	const char *what =
		st == OBJ_FREE	? "double free" :
		st == OBJ_RCU	? "object queued by uslab_free_rcu" :
		st == OBJ_BUSY	? "double free (another thread is freeing it)" :
		st == OBJ_ALLOC ? "freelist corrupted: an allocated object on it" :
				  "object's state overwritten (an overflow or a wild write)";

	return report_key(c, obj, what, "%s%s%s", call, *call ? ": " : "", what);
}

/* The report of report_state(), with the object's history: out of the checks' way. */
static __attribute__((noinline, cold)) void report_bad_state(const struct uslab_cache *c,
							     const void *obj, uint32_t st)
{
	report_object(c, obj, report_state(c, obj, "", st));
}

/*
 * The byte checks and marks of Z, P and U, out of line: a cache in F alone
 * takes none of them, and its checks then need no call (alloc_one and
 * free_one are about a third cheaper without the registers the calls kept).
 * Each is called when the cache has one of the flags its body acts on.
 */
#define ALLOC_CHECK_FLAGS (USLAB_RED_ZONE | USLAB_POISON)
#define ALLOC_MARK_FLAGS (USLAB_RED_ZONE | USLAB_STORE_USER)
#define FREE_CHECK_MARK_FLAGS (USLAB_RED_ZONE | USLAB_STORE_USER | USLAB_POISON)

static __attribute__((noinline)) void alloc_check_bytes(const struct uslab_cache *c, char *obj)
{
	check_red_zones(c, obj, RZ_INACTIVE, " while the object was free");
	check_poison(c, obj);
}

static __attribute__((noinline)) void alloc_mark(const struct uslab_cache *c, char *obj,
						 const void *site)
{
	set_red_zones(c, obj, RZ_ACTIVE);
	track_set(c, obj, 0, site);
}

static __attribute__((noinline)) void free_check_mark(const struct uslab_cache *c, char *obj,
						      const void *site)
{
	check_red_zones(c, obj, RZ_ACTIVE, "");
	track_set(c, obj, 1, site);
	set_red_zones(c, obj, RZ_INACTIVE);
	poison(c, obj);
}

/*
 * slab_debug_alloc_one - check and mark @obj of @c as it is handed out to
 * the call at @site (NULL: found by unwinding): it was free, its red zones
 * and poison intact (a write after free is reported with the object's
 * history), then it is allocated. The object is this thread's (taken from
 * its sheaf, or under the node lock); validate skips it while it is
 * OBJ_BUSY.
 */
static inline __attribute__((always_inline)) void alloc_one(struct uslab_cache *c, void *p,
							    const void *site)
{
	char *obj = p;
	struct obj_debug *d = dbg(c, obj);
	uint32_t st = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);

	/*
	 * No compare-and-swap: the object is this thread's alone (a free of it
	 * by another thread meanwhile finds it OBJ_FREE or OBJ_BUSY, fails its
	 * own and is reported). OBJ_BUSY is stored before any byte is
	 * rewritten: validate, which reads the bytes then the state again,
	 * sees it (x86 keeps stores in order, as validate's loads: a compiler
	 * barrier suffices, as in slab_debug_check_slab()).
	 */
	__atomic_store_n(&d->state, OBJ_BUSY, __ATOMIC_RELAXED);
	__asm__ volatile("" ::: "memory");
	if (unlikely(st != OBJ_FREE))
		/* The freelist or sheaf named an object that is not free: corrupted. */
		report_bad_state(c, obj, st);
	else if (c->debug & ALLOC_CHECK_FLAGS)
		alloc_check_bytes(c, obj);
	d->orig_size = c->object_size;
	if (c->debug & ALLOC_MARK_FLAGS)
		alloc_mark(c, obj, site);
	__atomic_store_n(&d->state, OBJ_ALLOC, __ATOMIC_RELEASE);
	/* Undefined bytes, unless a constructor set them. */
	MEMCHECK(VALGRIND_MALLOCLIKE_BLOCK(obj, c->object_size, 0, c->ctor != NULL));
}

/* The call site for the tracks of a batch (U with one frame): unwound once. */
static const void *batch_site(const struct uslab_cache *c)
{
	return (c->debug & USLAB_STORE_USER) && track_frames() == 1 ? unwind_site() : NULL;
}

/* slab_debug_alloc - slab_debug_alloc_one() of @objs[0..n), handed out from slabs. */
void slab_debug_alloc(struct uslab_cache *c, void **objs, size_t n)
{
	const void *site = batch_site(c);

	for (size_t i = 0; i < n; i++)
		slab_debug_alloc_one(c, objs[i], site);
}

/* The cache owning the slab @p is in (large objects' included), or NULL. */
static struct uslab_cache *owner_of(const void *p)
{
	struct slab *s = os_slab_lookup(p);

	return s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;
}

/*
 * The object of debug cache @c at @p, checked as freed by @call: in a
 * live slab of @c, at an object's start. Return: @p; NULL when it is not
 * one (reported).
 */
static __attribute__((noinline, cold)) char *pointer_bad(struct uslab_cache *c, void *p,
							 const char *call)
{
	struct slab *s = os_slab_lookup(p);
	struct uslab_cache *owner = s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;
	char *start;

	if (unlikely(!owner || (owner->flags & CACHE_LARGE))) {
		report_key(c, p, "foreign", "%s of a pointer uslab did not hand out", call);
		usl_report_end(c);
		return NULL;
	}
	start = slab_object_at(s, p);
	if (unlikely(owner != c)) {
		/* (The history only of an object's start in a debug cache.) */
		if (report_key(c, p, "wrong cache", "%s%sobject of cache %s freed to this cache",
			       strcmp(call, "free") ? call : "", strcmp(call, "free") ? ": " : "",
			       owner->name) &&
		    owner->debug && start == p)
			report_object(owner, p, true);
		else
			usl_report_end(c);
		return NULL;
	}
	if (unlikely(start != p)) {
		if (report_key(c, p, "inside",
			       "%s of a pointer inside an object (%ld bytes into %p)", call,
			       start ? (long)((char *)p - start) : 0L, (void *)start) &&
		    start)
			report_object(c, start, true);
		else
			usl_report_end(c);
		return NULL;
	}
	return p;
}

/* check_pointer()'s test: in a live slab of @c (not a large object), at an object's start. */
static inline char *check_pointer(struct uslab_cache *c, void *p, const char *call)
{
	struct slab *s = os_slab_lookup(p);

	if (likely(s) && likely(__atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) == c) &&
	    likely(!(c->flags & CACHE_LARGE)) && likely(slab_at_object(&c->geo, s, p)))
		return p;
	return pointer_bad(c, p, call);
}

/*
 * A free that found @obj of @c in state @st, not OBJ_ALLOC: reported. Return:
 * whether to free it all the same (its state was overwritten: it was the
 * caller's), then OBJ_BUSY.
 */
static __attribute__((noinline, cold)) bool free_bad_state(struct uslab_cache *c, char *obj,
							   struct obj_debug *d, uint32_t st)
{
	bool lost = st != OBJ_FREE && st != OBJ_RCU && st != OBJ_BUSY;

	if (st == OBJ_FREE)
		VALGRIND_FREELIKE_BLOCK(obj, 0); /* memcheck: "Invalid free()", with its stacks */
	report_bad_state(c, obj, st);
	return lost && state_move(d, &st, OBJ_BUSY);
}

/*
 * slab_debug_free - check one object freed to debug cache @c (NULL: the
 * object's own cache; it is in the debug tier), at the call: in a live
 * slab of @c, at an object's start, allocated (a double free, or the free
 * of an object queued by uslab_free_rcu, is caught here however the
 * object came: single, bulk, magazine, free batch, deferred), red zones
 * intact. Then it is free: red zones inactive, poisoned, the free recorded.
 * An object whose state was overwritten (an overflow past its red zone) is
 * reported and freed all the same: it was the caller's.
 * @site: the call's return address (NULL: found by unwinding), for U.
 * Return: true to free it; false when it must not be (reported).
 */
static inline __attribute__((always_inline)) bool free_one(struct uslab_cache *c, void *p,
							   const void *site)
{
	struct obj_debug *d;
	char *obj;
	uint32_t st = OBJ_ALLOC;

	if (!c)
		c = owner_of(p);
	obj = check_pointer(c, p, "free");
	if (unlikely(!obj))
		return false;
	d = dbg(c, obj);
	/* Two frees racing: one moves it to OBJ_BUSY, the other is reported. */
	if (unlikely(!state_move(d, &st, OBJ_BUSY)) && !free_bad_state(c, obj, d, st))
		return false;
	if (c->debug & FREE_CHECK_MARK_FLAGS)
		free_check_mark(c, obj, site);
	__atomic_store_n(&d->state, OBJ_FREE, __ATOMIC_RELEASE);
	MEMCHECK(VALGRIND_FREELIKE_BLOCK(obj, 0));
	return true;
}

/* The two above with the call's site known to a report (report_key()). */
void slab_debug_alloc_one(struct uslab_cache *c, void *p, const void *site)
{
	report_site = site;
	alloc_one(c, p, site);
	report_site = NULL;
}

bool slab_debug_free_one(struct uslab_cache *c, void *p, const void *site)
{
	bool ok;

	report_site = site;
	ok = free_one(c, p, site);
	report_site = NULL;
	return ok;
}

/* slab_debug_free_one() for the frees that pass no call site (arrays, deferred frees). */
bool slab_debug_free(struct uslab_cache *c, void *p)
{
	return slab_debug_free_one(c, p, NULL);
}

/*
 * slab_debug_free_rcu - uslab_free_rcu() of @obj (any pointer): when it is
 * in a slab of a debug cache, check it as a free, at the call, and mark it
 * queued. Return: false when it must not be queued (reported).
 */
bool slab_debug_free_rcu(void *obj)
{
	struct uslab_cache *c = owner_of(obj);
	uint32_t st = OBJ_ALLOC;

	if (!c || !c->debug)
		return true; /* not the debug tier's: the drain checks it */
	if (!check_pointer(c, obj, "uslab_free_rcu"))
		return false;
	if (unlikely(!state_move(dbg(c, obj), &st, OBJ_RCU))) {
		report_object(c, obj, report_state(c, obj, "uslab_free_rcu", st));
		return false;
	}
	check_red_zones(c, obj, RZ_ACTIVE, "");
	track_set(c, obj, 1, NULL);
	return true;
}

/* The grace period of @objs[0..n) is over: those of debug caches are allocated again, to be freed. */
void slab_debug_rcu_done(void *const *objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct slab *s = objs[i] ? os_slab_lookup(objs[i]) : NULL;
		struct uslab_cache *c = s ? __atomic_load_n(&s->cache, __ATOMIC_ACQUIRE) : NULL;
		uint32_t st = OBJ_RCU;

		if (c && c->debug && slab_object_index(c, s, objs[i]) != UINT32_MAX)
			state_move(dbg(c, objs[i]), &st, OBJ_ALLOC);
	}
}

/*
 * slab_debug_allocated - whether @obj, an object's start in debug cache
 * @c, is allocated, for @call (krealloc, ksize): else a use after free,
 * reported.
 */
bool slab_debug_allocated(const struct uslab_cache *c, const void *obj, const char *call)
{
	uint32_t st = __atomic_load_n(&dbg(c, obj)->state, __ATOMIC_ACQUIRE);

	if (likely(st == OBJ_ALLOC))
		return true;
	report_object(c, obj,
		      report_key(c, obj, call, "%s of an object that is not allocated (%s)", call,
				 state_name(st)));
	return false;
}

/* kmalloc: @obj of debug class @c was asked for @size bytes; the rest is red zone (Z). */
void slab_debug_set_size(struct uslab_cache *c, void *obj, size_t size)
{
	struct obj_debug *d = dbg(c, obj);

	USLAB_ASSERT(size && size <= c->object_size);
	VALGRIND_RESIZEINPLACE_BLOCK(obj, d->orig_size, size, 0);
	/* The zone first, then its bound: validate reads the bound, then the zone. */
	if (c->debug & USLAB_RED_ZONE)
		fill((char *)obj + size, RZ_ACTIVE, c->object_size - size);
	__atomic_store_n(&d->orig_size, (uint32_t)size, __ATOMIC_RELEASE);
}

/* The bytes @obj of debug cache @c was asked for (kmalloc: its usable size). */
size_t slab_debug_size(const struct uslab_cache *c, const void *obj)
{
	return __atomic_load_n(&dbg(c, obj)->orig_size, __ATOMIC_ACQUIRE);
}

/*
 * slab_debug_check_slab - validate: every object of @s handed out so far
 * has a known state, its red zones match it, a free one its poison. Each
 * problem is one line (nothing is repaired). Under the node lock, which
 * keeps free objects free; an allocated one may be freed (or resized by
 * krealloc) by its owner meanwhile: a problem counts only if the object's
 * state and size read the same after the bytes were read.
 * Return: problems found.
 */
unsigned long slab_debug_check_slab(struct uslab_cache *c, struct slab *s)
{
	char *obj = slab_first_object(c, s);
	unsigned long errors = 0;

	for (unsigned int i = 0; i < s->bump; i++, obj += c->size) {
		struct obj_debug *d = dbg(c, obj);
		uint32_t st = __atomic_load_n(&d->state, __ATOMIC_ACQUIRE);
		uint32_t orig = __atomic_load_n(&d->orig_size, __ATOMIC_ACQUIRE);
		int rz = st == OBJ_FREE ? RZ_INACTIVE : RZ_ACTIVE;
		const unsigned char *bad = NULL;
		const char *what = "red zone overwritten";

		if (st == OBJ_BUSY)
			continue; /* its owner is rewriting it */
		if (st != OBJ_FREE && st != OBJ_ALLOC && st != OBJ_RCU) {
			usl_warn("validate %s: object %p: state overwritten (0x%08x)", c->name, obj,
				 st);
			errors++;
			continue;
		}
		if (c->debug & USLAB_RED_ZONE) {
			if (!(bad = first_not(obj - RZ_LEFT, rz, RZ_LEFT)) &&
			    !(bad = first_not(obj + c->object_size, rz,
					      c->dbg_off - c->object_size)) &&
			    st != OBJ_FREE && orig < c->object_size)
				bad = first_not(obj + orig, rz, c->object_size - orig);
		}
		if (!bad && (c->debug & USLAB_POISON) && st == OBJ_FREE) {
			what = "poison overwritten (a use after free)";
			if (!(bad = first_not(obj, POISON_FREE, c->object_size - 1)))
				bad = first_not(obj + c->object_size - 1, POISON_END, 1);
		}
		if (!bad)
			continue;
		/* (The bytes were read before the state again: x86 keeps loads in order.) */
		__asm__ volatile("" ::: "memory");
		if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) != st ||
		    __atomic_load_n(&d->orig_size, __ATOMIC_ACQUIRE) != orig)
			continue; /* freed or resized while it was read */
		usl_warn("validate %s: object %p (%s): %s at byte %+ld (0x%02x)", c->name, obj,
			 state_name(st), what, (long)((const char *)bad - obj), *bad);
		errors++;
	}
	return errors;
}

/*
 * slab_debug_list_live - a leak report at destroy: each allocated object of
 * @s, with its allocation's caller (U), while *@budget lines remain.
 * Under the node lock. Return: objects allocated in @s.
 */
unsigned long slab_debug_list_live(struct uslab_cache *c, struct slab *s, unsigned long *budget)
{
	char *obj = slab_first_object(c, s);
	unsigned long live = 0;

	for (unsigned int i = 0; i < s->bump; i++, obj += c->size) {
		const struct obj_debug *d = dbg(c, obj);
		const struct track *t = track_of(c, obj, 0);
		char buf[320];

		if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == OBJ_FREE)
			continue;
		live++;
		if (!*budget)
			continue;
		(*budget)--;
		if (!(c->debug & USLAB_STORE_USER) || !t->depth)
			usl_warn("cache %s: object %p still allocated", c->name, obj);
		else
			usl_warn("cache %s: object %p still allocated, by thread %u at %s", c->name,
				 obj, t->tid,
				 usl_symbolise(t->addrs[usl_first_caller(t->addrs, t->depth)], buf,
					       sizeof(buf)));
	}
	return live;
}
