/* SPDX-License-Identifier: MIT */
/*
 * base.h - the lowest of uslab's internal headers: the layering rule (the
 * one copy of it), the macros every file uses, and the services any layer
 * may call. Each tier has one header, which includes the one below it:
 *
 *   base.h       tier 0: this rule, macros, services (below)
 *   sample_math.h tier 0: ln and expm1 without libm (the heap profile's
 *                sampling); includes no header of src/
 *   os.h         layer 1
 *   os_heap.h    layer 1, private to os.c os_map.c os_decay.c (the page
 *                heap's shared state; no other file includes it)
 *   slab.h       layer 2
 *   cache.h      layer 3
 *   cache_core.h layer 3, private to cache.c cache_registry.c loose.c (the
 *                cache layer's shared functions)
 *   gp.h         layer 4
 *   perthread.h  layers 5 to 7 (sheaf, barn, pcs, thread and percpu)
 *   front.h      layers 8 to 14 (bulk, pool and node, rcu, magazine, lifecycle, kmalloc,
 *                export, init)
 *
 * internal.h includes them all, for the white-box tests; no file of src/
 * includes it. list.h, lock.h and probes.h are base.h's (it includes
 * them; malloc.c includes probes.h too); export.h
 * is the export file's format, shared with tools/uslab-stat.c, and
 * includes no header of src/.
 *
 * THE LAYERING RULE. A file calls only functions of its own layer and of
 * the layers listed before it, and includes only the header of its tier
 * and those below. Layers, bottom up:
 *
 *   1  os         os.c        the buddy arenas: pages for slabs and large
 *                             objects, their descriptors, huge objects
 *      map        os_map.c    mappings and the address registry
 *      decay      os_decay.c  memory to the OS: purges, the decay thread,
 *                             retention
 *      guard      guard.c     the sampling guard: slots beside guard pages,
 *                             its fault handler (os.c, os_map.c,
 *                             os_decay.c and guard.c are one layer)
 *   2  slab       slab.c      one slab: free pointers, carving, freelists
 *      geometry   slab_geometry.c the shape of a cache's slabs: order,
 *                             layout, colours (struct slab_geometry)
 *      debug      slab_debug.c the debug tier: per-object state, red
 *                             zones, poison, tracks (slab.c,
 *                             slab_geometry.c and slab_debug.c are one
 *                             layer)
 *   3  cache      cache.c     struct uslab_cache, its node partial list,
 *                             refill and flush in batches
 *      registry   cache_registry.c the descriptor table, the list of
 *                             caches, their fork handlers
 *      loose      loose.c     the pools' loose array (cache.c,
 *                             cache_registry.c and loose.c are one layer)
 *   4  gp         gp.c        grace-period engine: the monitor thread,
 *                             slabs released after a grace period
 *   5  sheaf      sheaf.c     the sheaf object: alloc, free, flush
 *   6  barn       barn.c      a cache's depot of full and empty sheaves
 *   7  pcs        thread_sheaves.c each thread's sheaves of each cache
 *                             (struct pcs): fast paths, slow paths
 *      thread     thread.c    per-thread tables, cache ids, thread exit,
 *                             draining
 *      percpu     cpu_sheaves.c each CPU's sheaves of a per-CPU cache, in
 *                             rseq critical sections (thread_sheaves.c,
 *                             thread.c and cpu_sheaves.c are one layer)
 *   8  bulk       bulk.c      arrays of objects in and out
 *      pool       pool.c      the same, DPDK's way: get/put, count
 *      node       node_alloc.c allocation from a chosen NUMA node (bulk.c,
 *                             pool.c and node_alloc.c are one layer)
 *   9  rcu        rcu.c       kfree_rcu front end: blocks of pointers
 *  10  magazine   magazine.c  caller-owned caches and free batches
 *  11  lifecycle  lifecycle.c create, destroy, shrink, stats: orchestrates
 *  12  kmalloc    kmalloc.c   size classes (caches it creates through
 *                             lifecycle.c) and large objects
 *  13  export     export.c    the statistics a running program shows:
 *                             uslab_stats_print, USLAB_STATS's snapshot
 *      format     export_format.c the tables (shared with uslab-stat)
 *  14  init       init.c      start-up, fork handlers: wires every layer
 *      abi        abi.c       the _Static_asserts that pin <uslab/inline/priv.h>,
 *                             the inline paths' ABI, to the structures
 *                             (init.c and abi.c are one layer)
 *
 * libuslab-malloc.so (malloc.c) sits above all of them and uses only the
 * public API (<uslab.h>), as any program does.
 *
 * Services any layer may call: counter.c (the counters and ID batches of
 * <uslab/counter.h>, for programs), debug.c (usl_bug, usl_warn, assertions),
 * options.c (usl_opt), failslab.c (fault injection), stats.c (counter
 * names), lock.c (the lock and its order check, src/lock.h), numa.c (the
 * NUMA topology, the caller's node, placing memory), probes.c (the static
 * probes' semaphores, src/probes.h: PROBE() in any layer), profile.c (the
 * sampled heap profile's count and records), bgthread.c (starting a
 * background thread: usl_thread_detached); and usl_init(),
 * the lazy start-up that the first slow path of any layer may trigger (with
 * usl_starting_self()). Their declarations are in this header; a service's
 * own file may include the header of any tier (it reports on the types of
 * every layer), but calls no function of a layer.
 *
 * Exceptions, each the one way a lower layer reaches a higher one:
 *   cache.c -> gp.c    gp_defer_slabs(): the lock-free hand-off of
 *                      TYPESAFE_BY_RCU slabs (any lock may be held)
 *   gp.c -> rcu.c      the hooks of struct gp_client, registered by rcu.c
 *                      at start-up (called through pointers)
 *   cache.c            its fork handlers lock and reset the barn lock of
 *                      every cache (the list of caches is cache.c's); the
 *                      barn is embedded in the cache, so struct barn is
 *                      in cache.h, its functions in perthread.h
 *   guard.c -> cache.h       the name of a cache in a report (guard.c)
 *   slab.c -> cache.h        read the cache descriptor they are passed
 *   slab_debug.c -> cache.h  (struct uslab_cache: its geometry, ctor,
 *                            secret, debug tier offsets, id)
 * An exception "A.c -> B.c" lets A.c include B.c's header too.
 * scripts/check-layers checks the rule: the calls on the built objects
 * (nm), the #include lines of src/ in the sources. Run it after
 * `make build`; `make test` runs it.
 *
 * doc/design.md has the picture. The lock order is in src/lock.h (one
 * copy; USLAB_CHECKS builds check it at every acquisition).
 *
 * Errors: a function of src/ that can fail returns 0 or a negative errno
 * (the kernel's convention; a pthread call's positive result is negated
 * where it is passed on); errno is set only at the public API's edge, as
 * each exported function's contract says (and malloc.c's, as the C
 * library's functions do).
 */
#ifndef USLAB_BASE_H
#define USLAB_BASE_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"
#include "lock.h"
#include "probes.h"
/* The library defines the real uslab_cache_alloc/free: no inline macros. */
#define USLAB_NO_INLINE 1
/* Its definitions do read around the pointers that callers only pass. */
#define USLAB_NO_ACCESS(n)
#include "uslab.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define INTERNAL __attribute__((visibility("hidden")))
#define ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a)-1))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define CACHELINE 64
#define CACHELINE_ALIGNED __attribute__((aligned(CACHELINE)))

/* Slow-path event counters (CMake option USLAB_STATS, stats.c). */
#ifndef USLAB_STATS
#define USLAB_STATS 1
#endif

/*
 * Checks, by level (CMake option USLAB_CHECKS, doc/design.md "Check levels"):
 * USLAB_ASSERT - an invariant stated in a comment, O(1): level 1 and up
 *   (Debug, ASan, TSan builds), compiled away in release builds (level 0).
 * USLAB_ASSERT_HELD - the calling thread holds ulock @l (lock.h): level 1 and up.
 * USLAB_ASSERT_EXPENSIVE - a whole-structure check (a list walked, every
 *   object of a sheaf looked up): level 2 (Debug and ASan builds).
 * USLAB_EXPENSIVE - 1 at level 2, for code that only such checks need.
 */
#ifdef USLAB_CHECKS
#define USLAB_ASSERT(cond)                                                                   \
	do {                                                                                 \
		if (unlikely(!(cond)))                                                       \
			usl_bug(NULL, NULL, "assertion failed: %s (%s:%d)", #cond, __FILE__, \
				__LINE__);                                                   \
	} while (0)
#else
#define USLAB_ASSERT(cond) ((void)sizeof(!(cond)))
#endif
#define USLAB_ASSERT_HELD(l) USLAB_ASSERT(ulock_owned(l))
#if defined(USLAB_CHECKS) && USLAB_CHECKS >= 2
#define USLAB_EXPENSIVE 1
#define USLAB_ASSERT_EXPENSIVE(cond) USLAB_ASSERT(cond)
#else
#define USLAB_EXPENSIVE 0
#define USLAB_ASSERT_EXPENSIVE(cond) ((void)sizeof(!(cond)))
#endif

/*
 * NO_TAIL_CALL(v) - keep the call that produced @v from becoming a jump:
 * the exported function stays on the stack, so the debug tier's
 * backtraces of a statically linked program find its caller after the
 * outermost uslab_* frame (slab_debug.c).
 */
#define NO_TAIL_CALL(v) __asm__ volatile("" : "+r"(v))

/*
 * obj_is_hole - an entry of a free array that frees nothing: NULL, or the
 * pointer a 0-byte allocation returns (USLAB_ZERO_SIZE_PTR: every free of
 * <uslab.h> skips it). The lower layers know holes, not who makes them.
 */
#define obj_is_hole(p) uslab_priv_is_hole(p)

/* The position of the highest bit set, 1-based; 0 for 0 (Linux's fls()). */
static inline unsigned int fls_uint(unsigned int x)
{
	return x ? 32 - __builtin_clz(x) : 0;
}

/*
 * Atomics, one vocabulary: GCC's __atomic builtins on plain types, with
 * the memory order written at each use; READ_ONCE/WRITE_ONCE (as the
 * kernel's) for the relaxed load or store of a word another thread reads
 * or writes racily. No <stdatomic.h> in src/ (scripts/check-facts).
 */
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/*
 * Statistics, one helper each way:
 *   stat_add(x, n)        a counter one writer owns (a thread, or the
 *                         holder of a lock), read racily by the snapshot;
 *   stat_add_shared(x, n) a counter several threads bump at once.
 * Both count always; the slow-path event counters that exist only with
 * the CMake option USLAB_STATS (node_stat(), pcs_stat(), the bulk calls)
 * go through stat_event(), which is nothing without it.
 */
#define stat_add(x, n) WRITE_ONCE((x), READ_ONCE(x) + (n))
#define stat_add_shared(x, n) ((void)__atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED))
#if USLAB_STATS
#define stat_event(x, n) stat_add((x), (n))
#else
#define stat_event(x, n) ((void)sizeof((x) + (n)))
#endif

/*
 * A racy read that is meant to be racy (a statistic summed from words
 * their owners write without atomics on the fast path): not reported by TSan.
 */
#ifdef USLAB_PRIV_TSAN
#define NO_SANITIZE_THREAD __attribute__((no_sanitize_thread))
#else
#define NO_SANITIZE_THREAD
#endif

#ifdef USLAB_PRIV_ASAN /* <uslab/inline/priv.h> detects sanitizers */
#define USLAB_ASAN 1
#endif

#ifdef USLAB_ASAN
#include <sanitizer/asan_interface.h>
#define asan_poison(p, n) __asan_poison_memory_region((p), (n))
#define asan_unpoison(p, n) __asan_unpoison_memory_region((p), (n))
#define NO_SANITIZE_ADDRESS __attribute__((no_sanitize_address))
#else
#define asan_poison(p, n) ((void)(p), (void)(n))
#define asan_unpoison(p, n) ((void)(p), (void)(n))
#define NO_SANITIZE_ADDRESS
#endif

/* ------------------------------------------------------------ services */

/* ---------------------------------------------------------- options.c */

struct uslab_options {
	unsigned int min_objects;      /* USLAB_MIN_OBJECTS */
	unsigned int min_order;	       /* USLAB_MIN_ORDER */
	unsigned int max_order;	       /* USLAB_MAX_ORDER */
	unsigned int min_partial;      /* USLAB_MIN_PARTIAL */
	unsigned int sheaf_capacity;   /* USLAB_SHEAF_CAPACITY */
	unsigned int sheaf_bytes;      /* USLAB_SHEAF_BYTES */
	unsigned int sheaf_max;	       /* USLAB_SHEAF_MAX (barn.c: adaptive) */
	unsigned int sheaf_max_bytes;  /* USLAB_SHEAF_MAX_BYTES */
	unsigned int sheaf_grow_rate;  /* USLAB_SHEAF_GROW_RATE */
	unsigned int sheaf_decay_ms;   /* USLAB_SHEAF_DECAY_MS */
	unsigned int barn_max_full;    /* USLAB_BARN_MAX_FULL */
	unsigned int barn_max_empty;   /* USLAB_BARN_MAX_EMPTY */
	unsigned int barn_max_mb;      /* USLAB_BARN_MAX_MB */
	unsigned int dropin_barn_mb;   /* USLAB_MALLOC_BARN_MAX_MB */
	unsigned int lookahead;	       /* USLAB_LOOKAHEAD */
	unsigned int purge_delay_ms;   /* USLAB_PURGE_DELAY_MS */
	unsigned int retain_kb;	       /* USLAB_RETAIN_KB */
	unsigned int hugepages;	       /* USLAB_HUGEPAGES */
	unsigned int prefetch;	       /* USLAB_PREFETCH */
	unsigned int rcu_drain_ms;     /* USLAB_RCU_DRAIN_MS */
	unsigned int rcu_batch_blocks; /* USLAB_RCU_BATCH_BLOCKS */
	unsigned int rcu_max_inflight; /* USLAB_RCU_MAX_INFLIGHT */
	unsigned int layout;	       /* USLAB_LAYOUT */
	unsigned int colour;	       /* USLAB_COLOUR */
	unsigned int on_bug;	       /* USLAB_ON_BUG: enum on_bug */
	unsigned int debug_frames;     /* USLAB_DEBUG_FRAMES */
	unsigned int stats;	       /* USLAB_STATS: enum stats_mode */
	unsigned int stats_ms;	       /* USLAB_STATS_MS */
	unsigned int counter_batch;    /* USLAB_COUNTER_BATCH */
	unsigned int idgen_batch;      /* USLAB_IDGEN_BATCH */
	unsigned int percpu;	       /* USLAB_PERCPU: enum percpu_mode */
	unsigned int percpu_threads;   /* USLAB_PERCPU_THREADS */
	unsigned int guard;	       /* USLAB_GUARD */
	unsigned int guard_slots;      /* USLAB_GUARD_SLOTS */
	unsigned int free_key;	       /* USLAB_FREE_KEY: enum free_key_mode */
	unsigned int profile;	       /* USLAB_PROFILE: enum profile_mode */
	unsigned int profile_bytes;    /* USLAB_PROFILE_BYTES */
	unsigned int numa;	       /* USLAB_NUMA */
	unsigned int nr_cpus;
};

INTERNAL extern struct uslab_options usl_opt;
/*
 * usl_thread_exiting - the calling thread has run uslab's exit handler (its
 * key destructor: thread.c); what it does now runs from glibc's teardown of
 * its keys. Defined in options.c (a service), set by thread.c.
 */
INTERNAL extern __thread bool usl_thread_exiting __attribute__((tls_model("initial-exec")));
INTERNAL extern const char *const usl_layout_names[USLAB_LAYOUT_NR + 1];
enum on_bug { ON_BUG_DEFAULT, ON_BUG_ABORT, ON_BUG_REPORT };
INTERNAL extern const char *const usl_on_bug_names[];
enum stats_mode { STATS_OFF, STATS_ON, STATS_EXIT };
INTERNAL extern const char *const usl_stats_names[];
enum percpu_mode { PERCPU_OFF, PERCPU_ON, PERCPU_AUTO };
/* USLAB_FREE_KEY: no cache, every cache that can carry it, the malloc drop-in's classes. */
enum free_key_mode { FREE_KEY_OFF, FREE_KEY_ALL, FREE_KEY_MALLOC };
enum profile_mode { PROFILE_OFF, PROFILE_ON, PROFILE_EXIT };
INTERNAL extern const char *const usl_percpu_names[];
INTERNAL void options_init(void);
INTERNAL void options_print(FILE *f);

/* ------------------------------------------------------------- numa.c */

/*
 * The NUMA topology (numa.c has where it comes from). Node ids are the
 * kernel's, below NUMA_MAX_NODES (struct slab's tag is 4 bits); nr_nodes
 * 1 is NUMA off: numa_on() is one load, and every NUMA path tests it.
 */
#define NUMA_MAX_NODES 16
#define NUMA_MAX_CPUS 4096
struct numa_topology {
	unsigned int nr_nodes;	/* ids 0 .. nr_nodes - 1 (1: off) */
	unsigned int mem_nodes; /* of them, nodes with memory */
	uint32_t mem_mask;	/* bit n: node n has memory (and the program's policy allows it) */
	bool fake;		/* USLAB_NUMA_FAKE: tags only, memory on real node 0 */
	bool real;		/* read from sysfs */
	bool mbind;		/* arenas placed with mbind (the program binds nothing itself) */
	uint8_t nr_order[NUMA_MAX_NODES];
	/* order[n]: the nodes with memory by distance from n, nearest first (n first if it has) */
	uint8_t order[NUMA_MAX_NODES][NUMA_MAX_NODES];
	uint8_t distance[NUMA_MAX_NODES][NUMA_MAX_NODES]; /* sysfs's (10: local) */
	uint8_t cpu_mem[NUMA_MAX_CPUS];			  /* each CPU's memory node */
};
INTERNAL extern struct numa_topology numa_topo;
INTERNAL int numa_fake_parse(const char *s);
INTERNAL void numa_init(void);
INTERNAL unsigned int numa_node_self_slow(void);
INTERNAL unsigned int numa_node_of_cpu(unsigned int cpu);
/*
 * numa_place - ask the kernel to place [@p, @p + @len) on @node (MPOL_PREFERRED;
 * a fake node on real node 0); nothing with NUMA off or when the program
 * binds its memory itself. Best effort.
 */
INTERNAL void numa_place(void *p, size_t len, unsigned int node);

static inline bool numa_on(void)
{
	return __builtin_expect(numa_topo.nr_nodes > 1, 0);
}

/*
 * The memory node of the CPU the calling thread runs on now (0 with NUMA
 * off): rseq's cpu_id through the table, three loads; sched_getcpu() where
 * rseq is not registered (cpu_id negative).
 */
static inline unsigned int numa_node_self(void)
{
	if (!numa_on())
		return 0;
#ifdef USLAB_PRIV_RSEQ
	{
		const struct rseq *rs =
			(const struct rseq *)(const void *)((char *)__builtin_thread_pointer() +
							    __rseq_offset);
		unsigned int cpu = (unsigned int)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);

		if (likely(cpu < NUMA_MAX_CPUS))
			return numa_topo.cpu_mem[cpu];
	}
#endif
	return numa_node_self_slow();
}

/* Whether @node is one uslab can place memory on. */
static inline bool numa_node_ok(unsigned int node)
{
	return node < numa_topo.nr_nodes && (numa_topo.mem_mask >> node & 1);
}

/* --------------------------------------------------------- failslab.c */

INTERNAL int failslab_parse(const char *s);
INTERNAL bool failslab_selects(const char *name, unsigned int flags);
INTERNAL bool failslab_hit(void);

/* ---------------------------------------------------------- counter.c */

/* The registry lock around fork (init.c's handlers): taken last, released first. */
INTERNAL void counter_fork_prepare(void);
INTERNAL void counter_fork_parent(void);
INTERNAL void counter_fork_child(void);

/* ---------------------------------------------------------- profile.c */

/*
 * The sampled heap profile (profile.c). profile_count(): a kmalloc
 * class's sheaf given @bytes of objects, or a large allocation of @bytes
 * (slow paths only; nothing while off). profile_due: the count ran out in
 * this thread: the request being served is to be a sampled object, whose
 * profile_record() clears it; profile_drop() at its free.
 */
INTERNAL extern bool profile_enabled;
INTERNAL extern __thread bool profile_due __attribute__((tls_model("initial-exec")));
INTERNAL void profile_count_slow(uint64_t bytes);
static inline void profile_count(uint64_t bytes)
{
	if (unlikely(__atomic_load_n(&profile_enabled, __ATOMIC_RELAXED)))
		profile_count_slow(bytes);
}
INTERNAL void profile_record(const void *p, size_t size, size_t obj_size);
INTERNAL void profile_drop(const void *p);
INTERNAL bool profile_has(const void *p);
INTERNAL int profile_write(int fd, bool maps);
INTERNAL void profile_init(void);
INTERNAL void profile_fork_prepare(void);
INTERNAL void profile_fork_parent(void);
INTERNAL void profile_fork_child(void);

/* ------------------------------------------------------------ debug.c */

INTERNAL __attribute__((noreturn, format(printf, 3, 4))) void
usl_bug(const struct uslab_cache *c, const void *addr, const char *fmt, ...);
INTERNAL __attribute__((format(printf, 1, 2))) void usl_warn(const char *fmt, ...);
INTERNAL __attribute__((format(printf, 5, 6))) bool usl_report(const struct uslab_cache *c,
							       const void *addr, const void *site,
							       const void *key, const char *fmt,
							       ...);
INTERNAL __attribute__((format(printf, 1, 2))) void usl_report_line(const char *fmt, ...);
INTERNAL void usl_report_end(const struct uslab_cache *c);
INTERNAL const char *usl_symbolise(const void *addr, char *buf, size_t len);
INTERNAL void usl_code_range(uintptr_t *start, uintptr_t *end);
/* Backtraces of the program's calls (debug.c; the debug tier's and the guard's). */
INTERNAL void usl_backtrace_init(void);
INTERNAL bool usl_backtrace_skips(void);
INTERNAL unsigned int usl_backtrace(void **addrs, unsigned int max);
INTERNAL unsigned int usl_first_caller(void *const *addrs, unsigned int n);
INTERNAL bool usl_site_ok(const void *site);
INTERNAL void usl_print_backtrace(void *const *addrs, unsigned int n, unsigned int max);
INTERNAL uint32_t usl_tid(void);
INTERNAL void usl_tid_fork_child(void);

/*
 * Lines held back: a report made under a lock (validate, a debug cache's
 * leak report) is collected in @buf (@cap bytes, the caller's; NULL: none,
 * the lines are written at once) from usl_lines_hold() on, and written by
 * usl_lines_release() once the lock is dropped: no write() under a lock.
 * Lines beyond @cap are counted, and their number is reported instead.
 */
struct usl_lines {
	struct usl_lines *prev;
	char *buf;
	size_t len, cap;
	unsigned long dropped;
};
INTERNAL void usl_lines_hold(struct usl_lines *h, char *buf, size_t cap);
INTERNAL void usl_lines_release(struct usl_lines *h);

/*
 * Cancellation: no uslab call is a cancellation point (doc/design.md
 * "Cancellation"). A slow path that can reach one of the C library's
 * (write(), getrandom(), open(), fprintf(), a condition wait) runs between
 * usl_nocancel() and usl_cancel_restore(): a pending cancel is acted on at
 * the caller's next cancellation point, after the call returned. Never on
 * the inline fast paths.
 */
static inline int usl_nocancel(void)
{
	int old;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

static inline void usl_cancel_restore(int old)
{
	pthread_setcancelstate(old, NULL);
}

/* One of uslab's background threads: what it runs, and its name. */
struct usl_bgthread {
	void *(*fn)(void *); /* called with NULL; the thread ends when it returns */
	const char *name;    /* "uslab-...", at most 15 bytes: top -H, /proc/PID/task/TID/comm */
};

/*
 * usl_thread_detached - start @t->fn as a detached background thread of
 * uslab, which names itself @t->name, with every signal blocked (it takes
 * no signal meant for the program's threads), on the CPUs the process
 * started with (bgthread.c: a thread started from a pinned thread, a DPDK
 * lcore or a benchmark's worker, would otherwise inherit its one CPU and
 * preempt it at every tick). @t: static storage (the thread reads it).
 * Context: no uslab lock held (thread creation may allocate, through
 * uslab when it is the malloc). Return: 0; EAGAIN from a thread past its
 * exit handler (not started); or pthread_create's error.
 */
INTERNAL int usl_thread_detached(const struct usl_bgthread *t);

INTERNAL int debug_parse(const char *s);
INTERNAL unsigned int debug_selects(const char *name);

/* ------------------------------------------------------------ init.c */

INTERNAL int usl_init(void);
INTERNAL bool usl_starting_self(void);

#endif /* USLAB_BASE_H */
