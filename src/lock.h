/* SPDX-License-Identifier: MIT */
/*
 * lock.h - uslab's lock type: a small futex mutex (struct ulock).
 *
 * Every lock of the allocator is one (cache list, thread list, thread
 * state, barn, node list, os arenas, rcu.c's lists) but three pthread
 * mutexes: gp.c's round_lock and gp_lock (waiters sleep on condition
 * variables with them) and counter.c's reg_lock (the counter registry, a
 * service's). All are slow-path locks; none is taken on the sheaf fast
 * path.
 * Critical sections are short, so the lock spins briefly before it sleeps
 * in the kernel (the machine may be oversubscribed: a preempted holder must
 * not make the others burn their quantum).
 *
 * States: 0 unlocked, 1 locked, 2 locked and someone may sleep on it
 * (Drepper, "Futexes Are Tricky", mutex 3). Acquire/release atomics make
 * the lock visible to ThreadSanitizer as a synchronisation object.
 *
 * Fork: init.c takes every lock before fork() in the lock order and
 * re-initialises them in the child (ulock_init), see doc/design.md.
 *
 * The lock order. Every lock has a rank, its place in the order below (the
 * one copy of it: doc/design.md and the files that own the locks point
 * here). A thread holding a lock takes only locks of a higher rank, or of
 * the same rank where the owner says so (fork takes every barn, node and
 * thread state; cache_release_all() a cache's node locks, in node id
 * order; nothing else nests two locks of one rank).
 *
 *  1 LOCK_GP_ROUND  gp.c      the monitor, across a grace period + release;
 *                             fork takes it first
 *  2 LOCK_CACHES    cache.c   list of caches, cache ids
 *  3 LOCK_GP        gp.c      monitor start, barrier generations, waiters
 *  4 LOCK_RCU_LIST  rcu.c     threads with blocks of deferred frees
 *  5 LOCK_RCU_HQ    rcu.c     emergency list, orphan block
 *  6 LOCK_RCU_POOL  rcu.c     spare blocks
 *  7 LOCK_THREADS   thread.c  list of thread states
 *  8 LOCK_TSTATE    thread.c  one thread's sheaves, as a whole
 *  9 LOCK_PERCPU    cpu_sheaves.c  draining the CPUs' sheaves (one drainer)
 * 10 LOCK_BARN      barn.c    a cache's barn
 * 11 LOCK_NODE      cache.c   a cache's slab lists and slab freelists
 * 12 LOCK_OS        os.c      arenas and free slab slots
 * 13 LOCK_GUARD     guard.c   the sampling guard's slots (a leaf)
 * 14 LOCK_PROFILE   profile.c the heap profile's records (a leaf)
 *
 * LOCK_BARN and LOCK_NODE are never held together (a sheaf leaves the barn
 * before it is flushed). In builds with USLAB_CHECKS (Debug and the
 * sanitizer builds) every acquisition checks the order: a lock taken while
 * one of a higher rank is held is a BUG, reported before it can deadlock.
 * Those builds also know which lock instances each thread holds, so a
 * function that must be called with a lock held asserts it: ulock_owned()
 * (this thread holds it), not ulock_held() (somebody does).
 */
#ifndef USLAB_LOCK_H
#define USLAB_LOCK_H

#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

enum lock_rank {
	LOCK_UNRANKED, /* not checked (none in the library) */
	LOCK_GP_ROUND,
	LOCK_CACHES,
	LOCK_GP,
	LOCK_RCU_LIST,
	LOCK_RCU_HQ,
	LOCK_RCU_POOL,
	LOCK_THREADS,
	LOCK_TSTATE,
	LOCK_PERCPU,
	LOCK_BARN,
	LOCK_NODE,
	LOCK_OS,
	LOCK_GUARD,
	LOCK_PROFILE,
	LOCK_NR_RANKS
};

struct ulock {
	uint32_t v;
	uint32_t rank; /* enum lock_rank */
};

#define ULOCK_INIT_RANK(r) \
	{                  \
		0, (r)     \
	}
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif
#define ULOCK_SPIN 64

/* Make @l an unlocked lock of rank @rank. */
static inline void ulock_setup(struct ulock *l, enum lock_rank rank)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);
	l->rank = rank;
}

/* Unlock @l by force (the child after fork); its rank stays. */
static inline void ulock_init(struct ulock *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);
}

/*
 * Lockdep (USLAB_CHECKS builds; empty inline functions otherwise, so a
 * release build's lock is the two words above and does no more work).
 * Each thread keeps the count of locks of each rank it holds and a stack of
 * the instances (LOCKDEP_DEPTH deep: fork takes every lock, whose instances
 * beyond that are only counted). lockdep_acquire() checks the order before
 * the lock is taken; lockdep_release() of a lock the thread does not hold
 * is a BUG.
 */
#define LOCKDEP_DEPTH 32
#ifdef USLAB_CHECKS
void lockdep_acquire(const void *lock, unsigned int rank);
void lockdep_release(const void *lock, unsigned int rank);
void lockdep_fork_child(void);
#else
static inline void lockdep_acquire(const void *lock, unsigned int rank)
{
	(void)lock, (void)rank;
}
static inline void lockdep_release(const void *lock, unsigned int rank)
{
	(void)lock, (void)rank;
}
static inline void lockdep_fork_child(void)
{
}
#endif
/*
 * For assertions only (USLAB_ASSERT): defined in USLAB_CHECKS builds only,
 * so a use outside an assertion fails to link in a release build.
 * lockdep_held - how many locks of @rank the calling thread holds.
 * lockdep_depth - how many locks the calling thread holds.
 * lockdep_owned - whether the calling thread holds the lock at @lock, of
 *                 @rank (deeper than LOCKDEP_DEPTH, only that one of @rank
 *                 is held and the lock word says held: fork's case).
 */
int lockdep_held(unsigned int rank);
unsigned int lockdep_depth(void);
int lockdep_owned(const void *lock, unsigned int rank, int word_held);

static inline void ulock_futex(uint32_t *addr, int op, uint32_t val)
{
	syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

void ulock_lock_slow(struct ulock *l);

static inline void ulock_lock(struct ulock *l)
{
	uint32_t expect = 0;

	lockdep_acquire(l, l->rank);
	if (__builtin_expect(__atomic_compare_exchange_n(&l->v, &expect, 1, 0, __ATOMIC_ACQUIRE,
							 __ATOMIC_RELAXED),
			     1))
		return;
	ulock_lock_slow(l);
}

static inline void ulock_unlock(struct ulock *l)
{
	lockdep_release(l, l->rank);
	if (__builtin_expect(__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) == 2, 0))
		ulock_futex(&l->v, FUTEX_WAKE, 1);
}

/*
 * For tests and assertions: true when somebody holds the lock (not
 * necessarily the caller: for "I hold it", ulock_owned).
 */
static inline int ulock_held(const struct ulock *l)
{
	return __atomic_load_n(&l->v, __ATOMIC_RELAXED) != 0;
}

/* For assertions only (USLAB_CHECKS builds): true when the calling thread holds @l. */
#define ulock_owned(l) lockdep_owned((l), (l)->rank, ulock_held(l))

/* The same order for the two pthread mutexes of gp.c. */
static inline void mutex_lock_ranked(pthread_mutex_t *m, enum lock_rank rank)
{
	lockdep_acquire(m, rank);
	pthread_mutex_lock(m);
}

static inline void mutex_unlock_ranked(pthread_mutex_t *m, enum lock_rank rank)
{
	lockdep_release(m, rank);
	pthread_mutex_unlock(m);
}

/* For assertions only: true when the calling thread holds @m, taken with mutex_lock_ranked. */
#define mutex_owned(m, rank) lockdep_owned((m), (rank), 1)

#endif /* USLAB_LOCK_H */
