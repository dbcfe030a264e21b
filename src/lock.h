/* SPDX-License-Identifier: MIT */
/*
 * lock.h - the one lock type uslab uses: a small futex mutex.
 *
 * Every lock in uslab is a slow-path lock (cache list, thread list, thread
 * state, barn, node list, os arenas); none is taken on the sheaf fast path.
 * Critical sections are short, so the lock spins briefly before it sleeps
 * in the kernel (the machine may be oversubscribed: a preempted holder must
 * not make the others burn their quantum).
 *
 * States: 0 unlocked, 1 locked, 2 locked and someone may sleep on it
 * (Drepper, "Futexes Are Tricky", mutex 3). Acquire/release atomics make
 * the lock visible to ThreadSanitizer as a synchronisation object.
 *
 * Fork: init.c takes every lock before fork() in the documented lock order
 * and re-initialises them in the child (ulock_init), see doc/design.md.
 */
#ifndef USLAB_LOCK_H
#define USLAB_LOCK_H

#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ulock {
	uint32_t v;
};

#define ULOCK_INIT \
	{          \
		0  \
	}
#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif
#define ULOCK_SPIN 64

static inline void ulock_init(struct ulock *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);
}

static inline void ulock_futex(uint32_t *addr, int op, uint32_t val)
{
	syscall(SYS_futex, addr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

void ulock_lock_slow(struct ulock *l);

static inline void ulock_lock(struct ulock *l)
{
	uint32_t expect = 0;

	if (__builtin_expect(__atomic_compare_exchange_n(&l->v, &expect, 1, 0, __ATOMIC_ACQUIRE,
							 __ATOMIC_RELAXED),
			     1))
		return;
	ulock_lock_slow(l);
}

static inline int ulock_trylock(struct ulock *l)
{
	uint32_t expect = 0;

	return __atomic_compare_exchange_n(&l->v, &expect, 1, 0, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED);
}

static inline void ulock_unlock(struct ulock *l)
{
	if (__builtin_expect(__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) == 2, 0))
		ulock_futex(&l->v, FUTEX_WAKE, 1);
}

/* For assertions only: true when somebody holds the lock. */
static inline int ulock_held(struct ulock *l)
{
	return __atomic_load_n(&l->v, __ATOMIC_RELAXED) != 0;
}

#endif /* USLAB_LOCK_H */
