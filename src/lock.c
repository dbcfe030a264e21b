// SPDX-License-Identifier: MIT
/*
 * lock.c - contended path of the futex mutex in lock.h, and the lock-order
 * check and the record of the locks each thread holds (lockdep) of
 * USLAB_CHECKS builds.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "lock.h"

void ulock_lock_slow(struct ulock *l)
{
	uint32_t c;

	/* A holder usually leaves within a few hundred cycles: spin first. */
	for (int i = 0; i < ULOCK_SPIN; i++) {
		cpu_relax();
		c = __atomic_load_n(&l->v, __ATOMIC_RELAXED);
		if (c == 0) {
			uint32_t expect = 0;

			if (__atomic_compare_exchange_n(&l->v, &expect, 1, 0, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				return;
		}
	}
	/* Announce a sleeper (state 2) and sleep until the word changes. */
	c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		ulock_futex(&l->v, FUTEX_WAIT, 2);
		c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
	}
}

#ifdef USLAB_CHECKS
/* Locks of each rank this thread holds, and the instances (lock.h). */
static __thread unsigned int held[LOCK_NR_RANKS]; /* fork: one per cache */
static __thread const void *held_locks[LOCKDEP_DEPTH];
static __thread unsigned int nheld;	/* entries of held_locks in use */
static __thread unsigned int untracked; /* held beyond LOCKDEP_DEPTH */

/* A lockdep report (not usl_bug(): lock.c sits below debug.c). */
static __attribute__((noreturn)) void lockdep_bug(const char *msg, int len)
{
	/* write() is a cancellation point: not while the locks are held. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	if (len > 0 && write(STDERR_FILENO, msg, (size_t)len) < 0)
		abort();
	abort();
}

void lockdep_acquire(const void *lock, unsigned int rank)
{
	char msg[128];

	for (unsigned int r = rank + 1; rank != LOCK_UNRANKED && r < LOCK_NR_RANKS; r++) {
		if (held[r])
			lockdep_bug(msg,
				    snprintf(msg, sizeof(msg),
					     "uslab: BUG -: lock of rank %u taken while holding "
					     "rank %u (src/lock.h has the order)\n",
					     rank, r));
	}
	held[rank]++;
	if (nheld < LOCKDEP_DEPTH)
		held_locks[nheld++] = lock;
	else
		untracked++;
}

void lockdep_release(const void *lock, unsigned int rank)
{
	char msg[128];
	unsigned int i = nheld;

	/* Usually the last one taken: search from the top. */
	while (i > 0 && held_locks[i - 1] != lock)
		i--;
	if (!held[rank] || (!i && !untracked))
		lockdep_bug(msg, snprintf(msg, sizeof(msg),
					  "uslab: BUG -: unlock of a lock of rank %u that this "
					  "thread does not hold\n",
					  rank));
	held[rank]--;
	if (i)
		held_locks[i - 1] = held_locks[--nheld];
	else
		untracked--;
}

int lockdep_held(unsigned int rank)
{
	return held[rank];
}

unsigned int lockdep_depth(void)
{
	return nheld + untracked;
}

int lockdep_owned(const void *lock, unsigned int rank, int word_held)
{
	for (unsigned int i = 0; i < nheld; i++)
		if (held_locks[i] == lock)
			return 1;
	/* Beyond the stack (fork holds every lock): as far as can be told. */
	return untracked && held[rank] && word_held;
}

/* The child re-initialised every lock the forking thread took. */
void lockdep_fork_child(void)
{
	for (unsigned int r = 0; r < LOCK_NR_RANKS; r++)
		held[r] = 0;
	nheld = untracked = 0;
}
#endif
