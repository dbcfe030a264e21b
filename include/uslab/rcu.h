/* SPDX-License-Identifier: MIT */
/*
 * uslab/rcu.h - freeing objects after an RCU grace period (kfree_rcu), and
 * caches whose slabs outlive their objects by a grace period
 * (USLAB_TYPESAFE_BY_RCU). Included by <uslab.h>; may be included alone.
 *
 * Grace periods come from liburcu (https://liburcu.org), default flavor
 * urcu-memb. What the program must do (doc/api.md has the details):
 *   - readers use the flavor's rcu_read_lock()/rcu_read_unlock() and are
 *     registered with it (rcu_register_thread()), as liburcu requires;
 *   - threads that only free need not be registered;
 *   - another flavor is chosen with uslab_rcu_set_flavor() before the
 *     first deferred free.
 * uslab runs one background thread (the monitor, started on first use, not
 * registered with liburcu) that waits for one grace period per batch with
 * the flavor's synchronize_rcu and frees the batch. No function here is a
 * cancellation point (waits run with cancellation disabled).
 */
#ifndef USLAB_RCU_H
#define USLAB_RCU_H

#include <stdint.h>
#include <uslab.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rcu_head;	  /* <urcu/call-rcu.h> */
struct rcu_flavor_struct; /* <urcu/flavor.h> */

/**
 * USLAB_TYPESAFE_BY_RCU - cache flag (the kernel's SLAB_TYPESAFE_BY_RCU):
 * a freed object may be handed out again at once, for a new object of the
 * same cache, but its memory stays a valid object of this cache until a
 * grace period has passed: a reader inside rcu_read_lock() may still look
 * at it (and must check that it is still the object it wanted; see
 * doc/api.md). The allocator never writes into such objects.
 */
#define USLAB_TYPESAFE_BY_RCU 0x00080000u

/**
 * uslab_free_rcu - free an object after a grace period (single-argument
 * kvfree_rcu()).
 * @obj: an object of any uslab cache or from uslab_kmalloc(), or NULL or
 *       USLAB_ZERO_SIZE_PTR (nothing is done).
 *
 * The pointer is appended to a per-thread page-sized block (no lock, no
 * atomic instruction); full blocks go to the monitor, which waits for one
 * grace period for everything queued (a batch) and frees the batch through
 * uslab_cache_free_bulk(). A partly filled block is handed over by the
 * monitor within two USLAB_RCU_DRAIN_MS periods (default 20 ms).
 *
 * May block in two rare cases, and only outside a read-side critical
 * section: (1) more than USLAB_RCU_MAX_INFLIGHT blocks are waiting for
 * their grace period: the caller waits until some are freed; (2) no block
 * can be obtained (out of memory): the caller waits for a grace period
 * itself (synchronize_rcu) and frees @obj at once. Inside a read-side
 * critical section it never waits: case (2) takes a block from a small
 * reserve; if even that is empty the object is leaked and counted
 * (uslab_rcu_stats(), leaked) with a one-line warning.
 *
 * Context: any thread, inside or outside a read-side critical section.
 */
USLAB_API void uslab_free_rcu(void *obj);

/**
 * uslab_free_rcu_head - free an object after a grace period, with a
 * struct rcu_head inside it (two-argument kfree_rcu()).
 * @obj:  an object of any uslab cache, or NULL (nothing is done).
 * @head: a struct rcu_head that lies inside @obj; uslab may use it.
 *
 * Never allocates and never waits for a grace period or for memory (it
 * takes short internal locks: per spare block, per object on the emergency
 * path, once per thread to make it known): the pointer goes into the thread's
 * block if it has room or a spare block exists; otherwise (the emergency
 * path) @head links @obj into a list handed over by the monitor. A @head
 * outside @obj is a BUG (detected on the emergency path).
 *
 * Context: any thread, inside or outside a read-side critical section.
 */
USLAB_API void uslab_free_rcu_head(void *obj, struct rcu_head *head);

/**
 * uslab_rcu_barrier - wait until every deferred free has been done.
 *
 * When it returns, every object passed to uslab_free_rcu() or
 * uslab_free_rcu_head() before the call began, by any thread (including
 * threads that have exited since), has been freed, and every slab of a
 * USLAB_TYPESAFE_BY_RCU cache released before the call began has gone back
 * to the OS layer. Waits for at least one grace period.
 *
 * Without the background thread (it could not be started: no memory for a
 * thread), the caller does its work itself. Not a cancellation point.
 *
 * Context: any thread, outside a read-side critical section (inside one it
 * would wait for itself: it writes a warning and returns at once).
 */
USLAB_API void uslab_rcu_barrier(void);

/**
 * uslab_rcu_set_flavor - choose the liburcu flavor of grace periods.
 * @flavor: a flavor such as &urcu_qsbr_flavor (from <urcu/urcu-qsbr.h>);
 *          the default is &urcu_memb_flavor.
 *
 * Readers of objects freed through uslab must use this flavor's read-side
 * primitives; uslab calls only its synchronize_rcu and read_ongoing.
 *
 * Context: any thread, before the first deferred free or release of a
 * USLAB_TYPESAFE_BY_RCU slab.
 * Return: 0 - set; -EINVAL - @flavor is NULL; -EBUSY - deferred freeing
 * has already started with another flavor (nothing changed).
 */
USLAB_API int uslab_rcu_set_flavor(const struct rcu_flavor_struct *flavor);

/**
 * struct uslab_rcu_stats - counters of deferred freeing since start-up.
 * @queued:     objects passed to uslab_free_rcu() or uslab_free_rcu_head().
 * @freed:      objects freed after their grace period (or at once by the
 *              synchronous fallback).
 * @batches:    grace periods waited for, one per batch of objects.
 * @blocks:     blocks of pointers handed over (full or partly filled).
 * @emergency:  objects that went through the rcu_head list (no block).
 * @sync:       objects freed by the synchronous fallback (no block).
 * @reserve:    blocks taken from the reserve inside a read-side section.
 * @leaked:     objects never freed (no block, no reserve, inside a
 *              read-side critical section).
 * @throttled:  times a freeing thread waited for blocks in flight.
 * @slabs_deferred: slabs of USLAB_TYPESAFE_BY_RCU caches waiting for, or
 *              past, a grace period before going back to the OS layer.
 * @slabs_released: of those, slabs released after their grace period.
 */
struct uslab_rcu_stats {
	uint64_t queued;
	uint64_t freed;
	uint64_t batches;
	uint64_t blocks;
	uint64_t emergency;
	uint64_t sync;
	uint64_t reserve;
	uint64_t leaked;
	uint64_t throttled;
	uint64_t slabs_deferred;
	uint64_t slabs_released;
};

/**
 * uslab_rcu_stats - take a snapshot of the deferred-freeing counters.
 * @st: filled in.
 *
 * Counters are updated without stopping other threads: exact only when no
 * deferred free is in progress (for example after uslab_rcu_barrier()).
 *
 * Context: any thread.
 * Return: 0 - @st filled in; -EINVAL - @st is NULL.
 */
USLAB_API int uslab_rcu_stats(struct uslab_rcu_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* USLAB_RCU_H */
