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
	ulock_lock(&caches); /* rank 2 while holding rank 10 */
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
			   "uslab: BUG -: lock of rank 2 taken while holding rank 10"),
	      "inversion reported");
#else
	printf("   (order check compiled out: USLAB_CHECKS is off in this build)\n");
#endif
}

int main(void)
{
	RUN(mutual_exclusion);
	RUN(order_checked);
	return 0;
}
