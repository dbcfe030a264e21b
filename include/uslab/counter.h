/* SPDX-License-Identifier: MIT */
/*
 * uslab/counter.h - per-thread-batched counters and ID batches (the
 * kernel's percpu_counter and get_next_ino, per thread here). Included by
 * <uslab.h>.
 *
 * A counter that many threads add to at a high rate makes every add a
 * shared write (a cache line bouncing between CPUs). Here each thread keeps
 * its own delta per counter and adds it to the shared count only when it
 * passes the batch; an ID generator hands each thread a batch of IDs from
 * one shared atomic.
 *
 * The fast paths are inline: a thread's slot for a counter or generator is
 * found by the object's index in the thread's table (grown by the library
 * on first use) and checked by a generation number, so objects may be
 * created and destroyed at any time, in any number; slots of destroyed
 * objects are reused. Everything named uslab_priv_* is an implementation
 * detail, part of the ABI of libuslab.so.0.
 */
#ifndef USLAB_COUNTER_H
#define USLAB_COUNTER_H

#include <stdint.h>

#ifndef USLAB_H
#error "include <uslab.h>, not <uslab/counter.h>"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** USLAB_IDGEN_BATCH - IDs a thread takes at once by default (get_next_ino's LAST_INO_BATCH). */
#define USLAB_IDGEN_BATCH 1024

/**
 * struct uslab_counter - a counter summed from per-thread deltas.
 * @batch: a thread folds its delta in when it reaches +/- @batch.
 * @idx, @gen: the counter's slot in every thread's table.
 * @count: the shared part (deltas folded in). Read it with the calls below.
 *
 * The fields every add reads come first; @count, written by every fold,
 * is at least a cache line further (the padding), so a fold on one thread
 * does not take the line the others read on every add.
 */
struct uslab_counter {
	int64_t batch;
	uint32_t idx;
	uint32_t reserved;
	uint64_t gen;
	char pad[64];
	int64_t count;
};

/**
 * struct uslab_idgen - unique IDs from per-thread batches.
 * @batch: IDs a thread takes at once.
 * @idx, @gen: the generator's slot in every thread's table.
 * @next:  the first ID no thread has taken (a line apart, as a counter's count).
 */
struct uslab_idgen {
	uint64_t batch;
	uint32_t idx;
	uint32_t reserved;
	uint64_t gen;
	char pad[64];
	uint64_t next;
};

/**
 * uslab_counter_init - set up a counter.
 * @c:       the counter (caller's memory).
 * @initial: its starting value.
 *
 * The batch is USLAB_COUNTER_BATCH (default: as the kernel's
 * percpu_counter_batch, max(32, 2 * CPUs)).
 *
 * Context: any thread.
 * Return: 0; -EINVAL if @c is NULL; -ENOMEM when no slot could be had (the
 * table of slots grows).
 */
USLAB_API int uslab_counter_init(struct uslab_counter *c, int64_t initial);

/**
 * uslab_counter_destroy - give the counter's slot back. Concurrent adds
 * must have ended (the caller orders them, e.g. by a join).
 * @c: the counter (NULL: nothing).
 *
 * Destroying a counter twice, or one never initialized, is reported with
 * a "uslab: BUG" line (abort); so is a later add to it.
 *
 * Context: any thread.
 */
USLAB_API void uslab_counter_destroy(struct uslab_counter *c);

/**
 * uslab_counter_read - the shared count, lock-free: approximate. It differs
 * from the exact sum by less than (live threads that added) * batch.
 * @c: the counter (NULL: a "uslab: BUG" line, abort).
 *
 * Context: any thread.
 * Return: the value.
 */
USLAB_API int64_t uslab_counter_read(const struct uslab_counter *c);

/**
 * uslab_counter_sum - the shared count plus every live thread's delta:
 * exact when no add runs concurrently (for statistics; takes a lock and
 * visits every thread).
 * @c: the counter (NULL: a "uslab: BUG" line, abort).
 *
 * Context: any thread.
 * Return: the value.
 */
USLAB_API int64_t uslab_counter_sum(const struct uslab_counter *c);

/**
 * uslab_counter_add - add @delta: a store to this thread's slot; a shared
 * atomic add once the thread's delta reaches +/- the batch. A thread's
 * delta is folded in when it exits. Inline (see the top of this file).
 * @c:     the counter: initialized and not destroyed (a destroyed or
 *         zero-filled one is reported with a "uslab: BUG" line; NULL is not
 *         checked).
 * @delta: any value.
 *
 * Context: any thread.
 */
USLAB_API void uslab_counter_add(struct uslab_counter *c, int64_t delta);

/**
 * uslab_idgen_init - set up an ID generator whose first ID is @first.
 * @g:     the generator (caller's memory).
 * @first: the first ID.
 *
 * The batch is USLAB_IDGEN_BATCH (tunable: USLAB_IDGEN_BATCH).
 *
 * Context: any thread.
 * Return: 0; -EINVAL if @g is NULL; -ENOMEM when no slot could be had.
 */
USLAB_API int uslab_idgen_init(struct uslab_idgen *g, uint64_t first);

/**
 * uslab_idgen_next - an ID no other call of @g returns. IDs increase
 * within a thread's batch; across threads they interleave by batch. The
 * IDs left in a thread's batch when it exits or @g is destroyed are never
 * handed out (at most the batch size minus one per thread: the gaps).
 * @g: the generator, as @c of uslab_counter_add().
 *
 * Context: any thread.
 * Return: the ID.
 */
USLAB_API uint64_t uslab_idgen_next(struct uslab_idgen *g);

/**
 * uslab_idgen_destroy - give the generator's slot back (concurrent calls
 * must have ended). @g: the generator (NULL: nothing; destroyed twice or
 * never initialized: a "uslab: BUG" line).
 *
 * Context: any thread.
 */
USLAB_API void uslab_idgen_destroy(struct uslab_idgen *g);

/* ------------------------------------------------------ inline fast paths */

/* The uslab_priv_* names below: the private ABI, <uslab/inline/priv.h>. */
#include <uslab/inline/priv.h>

/* About 10 instructions: the slot, its generation, the sum against the batch, a store. */
static inline __attribute__((__always_inline__)) void
uslab_counter_add_inline(struct uslab_counter *c, int64_t delta)
{
	if (__builtin_expect(c->idx < uslab_priv_ncslots, 1)) {
		struct uslab_priv_cslot *s = &uslab_priv_cslots[c->idx];
		int64_t v = (int64_t)s->a + delta;

		if (__builtin_expect(s->gen == c->gen && v < c->batch && v > -c->batch, 1)) {
			__atomic_store_n(&s->a, (uint64_t)v, __ATOMIC_RELAXED);
			return;
		}
	}
	uslab_priv_counter_add_slow(c, delta);
}

static inline __attribute__((__always_inline__)) uint64_t
uslab_idgen_next_inline(struct uslab_idgen *g)
{
	if (__builtin_expect(g->idx < uslab_priv_ncslots, 1)) {
		struct uslab_priv_cslot *s = &uslab_priv_cslots[g->idx];

		if (__builtin_expect(s->gen == g->gen && s->a < s->b, 1))
			return s->a++;
	}
	return uslab_priv_idgen_next_slow(g);
}

#ifdef USLAB_PRIV_INLINE /* <uslab/fastpath.h> */
#define uslab_counter_add(c, d) uslab_counter_add_inline((c), (d))
#define uslab_idgen_next(g) uslab_idgen_next_inline(g)
#endif

#ifdef __cplusplus
}
#endif

#endif /* USLAB_COUNTER_H */
