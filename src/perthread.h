/* SPDX-License-Identifier: MIT */
/*
 * perthread.h - layers 5 to 7: sheaves (sheaf.c), the barn's functions
 * (barn.c; struct barn is in cache.h, the cache embeds it), each thread's
 * sheaves of each cache (thread_sheaves.c) and its table of them, cache ids (thread.c).
 */
#ifndef USLAB_PERTHREAD_H
#define USLAB_PERTHREAD_H

#include "gp.h"

/* One CPU's sheaves of a per-CPU cache (cpu_sheaves.c): the inline paths' struct. */
#define percpu_slot uslab_priv_pcpu

/* ------------------------------------------------------------ sheaf.c */

struct pcs;

struct sheaf {
	struct sheaf *next;	  /* barn stack link */
	const struct pcs *filler; /* who put it in the barn full */
	uint32_t size;		  /* objects held, when not a thread's main */
	uint32_t capacity;
	void *objs[];
};

/* Sheaf sizes: 16-byte header plus a power-of-two-minus-header array (32 B .. 8 KiB). */
#define SHEAF_CLASSES 9
#define SHEAF_CAP_MAX 1022
INTERNAL extern const unsigned int sheaf_caps[SHEAF_CLASSES];
INTERNAL extern struct uslab_cache *sheaf_caches[SHEAF_CLASSES];
INTERNAL int sheaf_bootstrap(void);
INTERNAL unsigned int sheaf_capacity_for(unsigned int size, unsigned int requested);
INTERNAL unsigned int sheaf_capacity_max(unsigned int size, unsigned int requested,
					 unsigned int base);
INTERNAL unsigned int sheaf_class_step(unsigned int cap, bool up);
INTERNAL unsigned int sheaf_capacity_now(struct uslab_cache *c, unsigned int nid);
INTERNAL bool sheaf_ok(const struct uslab_cache *c, const struct sheaf *sh);
INTERNAL struct sheaf *sheaf_alloc(struct uslab_cache *c, unsigned int nid);
INTERNAL void sheaf_free(struct uslab_cache *c, struct sheaf *sh);
INTERNAL void sheaf_flush(struct uslab_cache *c, struct sheaf *sh);
INTERNAL void sheaf_prefetch(struct sheaf *sh);

/* ------------------------------------------------------------- barn.c */

INTERNAL void barn_init(struct barn *b, struct uslab_cache *c, unsigned int max_full,
			unsigned int max_empty);
INTERNAL struct sheaf *barn_replace_empty(struct barn *b, struct sheaf **empty);
INTERNAL struct sheaf *barn_replace_full(struct barn *b, struct sheaf *full, bool *taken);
INTERNAL struct sheaf *barn_get_empty(struct barn *b);
INTERNAL bool barn_put_empty(struct barn *b, struct sheaf *empty);
INTERNAL bool barn_put_full(struct barn *b, struct sheaf *full);
INTERNAL void barn_drain(struct uslab_cache *c);
INTERNAL void barn_counts(struct barn *b, unsigned long *full, unsigned long *empty);
INTERNAL size_t barn_gather(struct uslab_cache *c, void **dst, size_t max);
INTERNAL size_t barn_objects(struct barn *b);
INTERNAL void barn_adapt_init(struct uslab_cache *c, unsigned int requested, unsigned int grow_mb);
INTERNAL void barn_decay(struct uslab_cache *c, uint64_t now_ns);
INTERNAL bool barn_note_bulk(struct uslab_cache *c, size_t n, unsigned int nid);
INTERNAL uint64_t barn_now_ns(void);
INTERNAL void barn_stats(struct uslab_cache *c, struct uslab_cache_stats *st);
INTERNAL extern bool barn_monitor_need;
INTERNAL void barn_monitor_start(void);
INTERNAL void barn_monitor_fork_prepare(void);
INTERNAL void barn_monitor_fork_parent(void);
INTERNAL void barn_monitor_fork_child(void);
INTERNAL bool barn_monitor_running(void);

/*
 * barn_kick - start the decay monitor if a cache grew without one running,
 * and the page heap's decay thread if freed pages wait without one
 * (os_kick). Two loads when nothing is to do. Context: no uslab lock held.
 */
static inline void barn_kick(void)
{
	if (unlikely(__atomic_load_n(&barn_monitor_need, __ATOMIC_RELAXED)) &&
	    !barn_monitor_running())
		barn_monitor_start();
	os_kick();
}

/* ---------------------------------------------------- thread_sheaves.c, thread.c */

/*
 * struct pcs - one thread's sheaves for one cache: two cache lines in the
 * thread's table at offset cache->hot.pcs_off, the fast paths touching the
 * first only. The main sheaf is described by three pointers so the fast
 * path is a compare and a load or store: objects are [bottom, top), room
 * up to limit. All NULL (the state of every entry of a thread that has not
 * started, and of caches without sheaves) sends both fast paths to their
 * slow paths.
 */
struct pcs {
	/* First line: the fast paths (uslab/fastpath.h, uslab/inline/kmalloc.h). */
	struct uslab_priv_pcs hot;
	struct sheaf *main;
	uint16_t
		node; /* NUMA: the node whose objects main and spare hold (0: off); an external pool's: whose barn */
	uint16_t remote_node; /* NUMA: 1 + the node of every object on remote; 0: none; or MIXED */
	/* Second line: the slow paths. */
	struct sheaf *spare;	   /* NULL, or an empty or full sheaf */
	struct sheaf *remote;	   /* NUMA: objects of other nodes freed here, on their way home */
	struct uslab_cache *cache; /* owner of the sheaves, NULL if unused */
	struct pcs_events *events; /* slow-path counters, lazily allocated */
	/* Bulk calls that reach the library, counted by the owner (read by
	   uslab_cache_stats()); the inline paths do not count: a counter
	   there cost 20% at n = 1 (bench_bulk test01). */
	unsigned long alloc_bulk, alloc_bulk_objs;
	unsigned long free_bulk, free_bulk_objs;
} CACHELINE_ALIGNED;

_Static_assert(sizeof(struct pcs) == 2 * CACHELINE, "a pcs is two cache lines");
/* struct pcs.remote_node: the remote sheaf holds objects of several nodes. */
#define PCS_REMOTE_MIXED 0xffffu

struct pcs_events {
	uint64_t ev[USLAB_STAT_NR_ITEMS];
};

/*
 * pcs_of - the calling thread's pcs of @c for the library's fast paths: in
 * its own table, or in the zero table shared by threads without state,
 * where both fast paths see no room and go to their slow paths; entry 0
 * (always empty) for a debug cache. Never write through it before
 * pcs_self() or a slow path has started the thread. The inline paths
 * read c->hot.pcs_off instead, 0 for a cache with the free key too.
 */
static inline struct pcs *pcs_of(const struct uslab_cache *c)
{
	return (struct pcs *)(void *)(uslab_priv_pcs_table + c->pcs_lib);
}

/*
 * pcs_own - the calling thread's pcs of @c that its sheaves are in: pcs_of()
 * but for a debug cache, whose fast paths see entry 0 (always empty) so
 * that every call reaches its checks, and whose sheaves the library's
 * debug paths keep at its id's entry (thread_sheaves.c).
 */
static inline struct pcs *pcs_own(const struct uslab_cache *c)
{
	return (struct pcs *)(void *)(uslab_priv_pcs_table + c->pcs_own);
}

INTERNAL extern struct uslab_cache *events_cache;
INTERNAL int pcs_bootstrap(void);
INTERNAL struct pcs *pcs_self(const struct uslab_cache *c);
INTERNAL bool pcs_refill_main(struct uslab_cache *c, struct pcs *p, bool from_slabs);
INTERNAL bool pcs_make_room(struct uslab_cache *c, struct pcs *p, bool may_flush);
INTERNAL bool pcs_swap_for(struct pcs *p, size_t n, bool alloc);
INTERNAL void pcs_fit_bulk(struct uslab_cache *c, struct pcs *p, size_t n);
INTERNAL void pcs_drain(struct pcs *p);
INTERNAL void pcs_flush_self(struct uslab_cache *c);
INTERNAL struct percpu_slot *pcs_yield_to_percpu(struct uslab_cache *c);
INTERNAL struct pcs *pcs_counters(struct uslab_cache *c);
INTERNAL void pcs_push(struct uslab_cache *c, void *obj);
INTERNAL void *pcs_debug_alloc(struct uslab_cache *c, const void *site);
INTERNAL void pcs_debug_free(struct uslab_cache *c, void *obj, const void *site);
INTERNAL size_t pcs_gather_self(struct uslab_cache *c, void **dst, size_t max);
INTERNAL void pcs_stat(struct pcs *p, enum uslab_stat_item item, uint64_t n);
INTERNAL unsigned int pcs_numa_sync(struct uslab_cache *c, struct pcs *p);
INTERNAL void pcs_numa_put(struct uslab_cache *c, struct pcs *p, void *obj, const struct slab *s);
INTERNAL void pcs_numa_remote(struct uslab_cache *c, struct pcs *p, void *obj, unsigned int node);
INTERNAL void pcs_events_sum(const struct pcs *p, uint64_t *ev);

INTERNAL int thread_start_self(void);
INTERNAL bool thread_started(void);
INTERNAL void thread_note_id(int id);
INTERNAL int thread_id_attach(struct uslab_cache *c, unsigned int sheaf_capacity);
INTERNAL void thread_reserve_ids(unsigned int n);

/*
 * alloc_pre_hook - what every allocation entry of the library checks first
 * (SLUB's slab_pre_alloc_hook(); thread_sheaves.c, bulk.c), in this order: @c is a
 * live cache (else the program stops with a report naming @call); a bulk
 * call has an array (@no_array: it has none); USLAB_FAILSLAB may fail the
 * call. Return: false with errno EINVAL (no array) or ENOMEM (failslab).
 */
static inline bool alloc_pre_hook(struct uslab_cache *c, const char *call, bool no_array)
{
	cache_check_live(c, call);
	if (unlikely(no_array)) {
		errno = EINVAL;
		return false;
	}
	if (unlikely(c->flags & CACHE_FAILSLAB) && failslab_hit()) {
		errno = ENOMEM;
		return false;
	}
	return true;
}
INTERNAL void thread_id_detach_locked(struct uslab_cache *c);
INTERNAL void thread_lock_self(void);
INTERNAL void thread_unlock_self(void);
INTERNAL void thread_drain_cache(struct uslab_cache *c);
INTERNAL void thread_sum_events(const struct uslab_cache *c, uint64_t *ev);
INTERNAL uint64_t thread_sum_sheaved(const struct uslab_cache *c);
INTERNAL int thread_init(void);
INTERNAL void thread_fork_prepare(void);
INTERNAL void thread_fork_parent(void);
INTERNAL void thread_fork_child(void);

/* ----------------------------------------------------------- cpu_sheaves.c */

/*
 * struct percpu_slot - one CPU's sheaves of a per-CPU cache, the inline
 * paths' struct uslab_priv_pcpu: main and spare (percpu_dead for none,
 * never NULL; one 16-byte store replaces both), the stop word of a drain
 * (cpu_sheaves.c has the protocol). One cache line.
 */
/* The library's view of a slot's sheaves. */
static inline struct sheaf *slot_sheaf(struct uslab_priv_sheaf *sh)
{
	return (struct sheaf *)(void *)sh;
}

INTERNAL extern bool percpu_supported;
INTERNAL extern unsigned int percpu_nr;
INTERNAL extern struct uslab_priv_sheaf percpu_dead;
INTERNAL void percpu_init(void);
INTERNAL bool percpu_enable(struct uslab_cache *c);
INTERNAL void percpu_note_user(struct uslab_cache *c, int delta);
INTERNAL void *percpu_alloc(struct uslab_cache *c, struct percpu_slot *slots);
INTERNAL void percpu_free(struct uslab_cache *c, struct percpu_slot *slots, void *obj);
INTERNAL bool percpu_free_remote(struct uslab_cache *c, void *obj);
INTERNAL size_t percpu_alloc_bulk(struct uslab_cache *c, struct percpu_slot *slots, size_t n,
				  void **objs);
INTERNAL size_t percpu_free_bulk(struct uslab_cache *c, struct percpu_slot *slots, size_t n,
				 void *const *objs);
INTERNAL void percpu_drain(struct uslab_cache *c);
INTERNAL void percpu_stats(struct uslab_cache *c, struct uslab_cache_stats *st);
INTERNAL void percpu_destroy(struct uslab_cache *c);
INTERNAL void percpu_fork_prepare(void);
INTERNAL void percpu_fork_parent(void);
INTERNAL void percpu_fork_child(void);

/* @c's per-CPU slots, or NULL while its sheaves are per thread. */
static inline struct percpu_slot *percpu_slots(const struct uslab_cache *c)
{
	return __atomic_load_n(&c->hot.pcpu, __ATOMIC_ACQUIRE);
}

#endif /* USLAB_PERTHREAD_H */
