// SPDX-License-Identifier: MIT
/*
 * lock.c - contended path of the futex mutex in lock.h, and the lock-order
 * check of USLAB_CHECKS builds.
 */
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
/* Locks of each rank this thread holds. */
static __thread unsigned char held[LOCK_NR_RANKS];

void lockdep_acquire(unsigned int rank)
{
	char msg[128];
	int len;

	if (rank == LOCK_UNRANKED)
		return;
	for (unsigned int r = rank + 1; r < LOCK_NR_RANKS; r++) {
		if (held[r]) {
			/* Not usl_bug(): lock.c sits below debug.c. */
			len = snprintf(msg, sizeof(msg),
				       "uslab: BUG -: lock of rank %u taken while holding rank %u "
				       "(src/lock.h has the order)\n",
				       rank, r);
			if (write(STDERR_FILENO, msg, (size_t)len) < 0)
				abort();
			abort();
		}
	}
	held[rank]++;
}

void lockdep_release(unsigned int rank)
{
	if (rank != LOCK_UNRANKED)
		held[rank]--;
}

int lockdep_held(unsigned int rank)
{
	return held[rank];
}

/* The child re-initialised every lock the forking thread took. */
void lockdep_fork_child(void)
{
	for (unsigned int r = 0; r < LOCK_NR_RANKS; r++)
		held[r] = 0;
}
#endif
