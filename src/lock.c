// SPDX-License-Identifier: MIT
/*
 * lock.c - contended path of the futex mutex in lock.h.
 */
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
