// SPDX-License-Identifier: MIT
/*
 * test_lock.c - the futex lock and the lock-order check of src/lock.h.
 *
 *   mutual_exclusion  two threads increment a counter under one ulock:
 *                     no increment is lost.
 *   order_checked     in USLAB_CHECKS builds, taking a lock of a lower
 *                     rank while holding a higher one is a BUG (before it
 *                     can deadlock); the same ranks in order, and the same
 *                     rank twice (fork takes every node lock), are not.
 *   owned             in USLAB_CHECKS builds, ulock_owned() is true for the
 *                     thread holding the lock and false for another thread
 *                     (for which ulock_held() is true), also beyond
 *                     LOCKDEP_DEPTH locks held; unlocking a lock the
 *                     thread does not hold is a BUG.
 */
#include <pthread.h>

#include "../test.h"
#include "lock.h"

static struct ulock counter_lock = ULOCK_INIT_RANK(LOCK_NODE);
static unsigned long counter;

static void *incr(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200000; i++) {
		ulock_lock(&counter_lock);
		counter++;
		ulock_unlock(&counter_lock);
	}
	return NULL;
}

static void mutual_exclusion(void)
{
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, incr, NULL), "thread");
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(counter == 400000, "counter %lu of 400000", counter);
}

static struct ulock caches = ULOCK_INIT_RANK(LOCK_CACHES);
static struct ulock node_a = ULOCK_INIT_RANK(LOCK_NODE);
static struct ulock node_b = ULOCK_INIT_RANK(LOCK_NODE);
static struct ulock os = ULOCK_INIT_RANK(LOCK_OS);

#ifdef USLAB_CHECKS
static void inverted(void *arg)
{
	(void)arg;
	ulock_lock(&node_a);
	ulock_lock(&caches); /* rank 2 while holding rank 11 */
	ulock_unlock(&caches);
	ulock_unlock(&node_a);
}
#endif

static void order_checked(void)
{
	/* In order, and one rank twice: allowed. */
	ulock_lock(&caches);
	ulock_lock(&node_a);
	ulock_lock(&node_b);
	ulock_lock(&os);
	ulock_unlock(&os);
	ulock_unlock(&node_b);
	ulock_unlock(&node_a);
	ulock_unlock(&caches);
#ifdef USLAB_CHECKS
	CHECK(!lockdep_held(LOCK_NODE) && !lockdep_held(LOCK_CACHES), "held counts back to 0");
	CHECK(expect_death(inverted, NULL,
			   "uslab: BUG -: lock of rank 2 taken while holding rank 11"),
	      "inversion reported");
#else
	printf("   (order check compiled out: USLAB_CHECKS is off in this build)\n");
#endif
}

#ifdef USLAB_CHECKS
#define NMANY (LOCKDEP_DEPTH + 8)
static struct ulock many[NMANY];

static void *other_thread(void *arg)
{
	struct ulock *l = arg;

	/* Somebody holds it, not this thread. */
	return (void *)(uintptr_t)(ulock_held(l) && !ulock_owned(l) && !lockdep_depth());
}

static void not_mine(void *arg)
{
	(void)arg;
	ulock_unlock(&node_b); /* never locked */
}
#endif

static void owned(void)
{
#ifdef USLAB_CHECKS
	pthread_t t;
	void *ok;

	CHECK(!ulock_owned(&node_a), "not held: not owned");
	ulock_lock(&node_a);
	CHECK(ulock_owned(&node_a) && !ulock_owned(&node_b), "held: owned, the other not");
	CHECK(!pthread_create(&t, NULL, other_thread, &node_a) && !pthread_join(t, &ok), "thread");
	CHECK(ok, "another thread sees it held, not owned");
	ulock_unlock(&node_a);
	CHECK(!ulock_owned(&node_a) && !lockdep_depth(), "released: not owned, depth 0");

	/* Deeper than the record (fork takes a lock per cache). */
	for (unsigned int i = 0; i < NMANY; i++) {
		ulock_setup(&many[i], LOCK_NODE);
		ulock_lock(&many[i]);
	}
	CHECK(lockdep_depth() == NMANY, "depth %u", lockdep_depth());
	for (unsigned int i = 0; i < NMANY; i++)
		CHECK(ulock_owned(&many[i]), "lock %u of %d owned", i, NMANY);
	CHECK(!ulock_owned(&node_a), "one not taken is not");
	for (unsigned int i = 0; i < NMANY; i++)
		ulock_unlock(&many[i]);
	CHECK(!lockdep_depth() && !lockdep_held(LOCK_NODE), "all released");

	CHECK(expect_death(
		      not_mine, NULL,
		      "uslab: BUG -: unlock of a lock of rank 11 that this thread does not hold"),
	      "unlock of a lock not held reported");
#else
	printf("   (lock records compiled out: USLAB_CHECKS is off in this build)\n");
#endif
}

int main(void)
{
	RUN(mutual_exclusion);
	RUN(order_checked);
	RUN(owned);
	return 0;
}
