// SPDX-License-Identifier: MIT
/*
 * test_rcu.c (unit) - the emergency paths of rcu.c, with block allocation
 * made to fail (rcu_fault_inject): uslab_free_rcu_head() links objects
 * through their rcu_head, uslab_free_rcu() waits for a grace period itself
 * outside a read-side section and takes a reserve block inside one; every
 * object is freed in the end, none leaked. A live thread's emergency
 * objects are freed by a barrier, and while threads link objects onto the
 * emergency list as barriers take it, nothing is lost or freed twice.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <urcu/urcu-memb.h>

#include "internal.h"
#include "../test.h"

struct obj {
	uint64_t a[3];
	struct rcu_head rh;
	uint64_t b;
};

enum { HEADS = 2000, SYNCS = 200, INSIDE = 600 };

static struct uslab_cache *cache;

static void *worker(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	/* A fresh thread has no block: every call takes the slow path. */
	for (int i = 0; i < HEADS; i++) {
		struct obj *o = uslab_cache_alloc(cache);

		uslab_free_rcu_head(o, &o->rh);
	}
	for (int i = 0; i < SYNCS; i++)
		uslab_free_rcu(uslab_cache_alloc(cache));
	urcu_memb_read_lock();
	for (int i = 0; i < INSIDE; i++)
		uslab_free_rcu(uslab_cache_alloc(cache));
	urcu_memb_read_unlock();
	urcu_memb_unregister_thread();
	return NULL;
}

static void emergency(void)
{
	struct uslab_rcu_stats st0, st;
	struct uslab_cache_stats cs;
	pthread_t t;

	cache = uslab_cache_create("rcu_emergency", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	/* Start the monitor and let it fill the pool (the reserve) first. */
	uslab_free_rcu(uslab_cache_alloc(cache));
	uslab_rcu_barrier();
	usleep(50000);
	uslab_rcu_stats(&st0);

	__atomic_store_n(&rcu_fault_inject, 1, __ATOMIC_RELAXED);
	CHECK(!pthread_create(&t, NULL, worker, NULL), "thread");
	pthread_join(t, NULL);
	uslab_rcu_stats(&st);
	printf("  injected: %lu via rcu_head list, %lu synchronous, %lu reserve blocks, "
	       "%lu leaked\n",
	       (unsigned long)(st.emergency - st0.emergency), (unsigned long)(st.sync - st0.sync),
	       (unsigned long)(st.reserve - st0.reserve), (unsigned long)(st.leaked - st0.leaked));
	CHECK(st.emergency - st0.emergency == HEADS, "rcu_head list used for every object");
	CHECK(st.sync - st0.sync == SYNCS, "synchronous fallback outside read-side sections");
	CHECK(st.reserve - st0.reserve >= 1, "reserve blocks inside a read-side section");
	CHECK(st.leaked == st0.leaked, "nothing leaked");
	uslab_rcu_barrier(); /* still injected: containers come from the reserve or sync */
	__atomic_store_n(&rcu_fault_inject, 0, __ATOMIC_RELAXED);
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	CHECK(st.freed - st0.freed == HEADS + SYNCS + INSIDE, "freed %lu of %d",
	      (unsigned long)(st.freed - st0.freed), HEADS + SYNCS + INSIDE);
	uslab_cache_shrink(cache);
	CHECK(!uslab_cache_stats(cache, &cs) && cs.active_objs == 0, "active_objs %lu",
	      cs.active_objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

/* ------------------------------- emergency objects of live threads */

enum { LIVE = 300, RACE_THREADS = 2, RACE_OBJS = 20000 };

static pthread_barrier_t live_bar;
static _Atomic int race_done;

static void *live_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < LIVE; i++) { /* under a block's worth: no wake of the monitor */
		struct obj *o = uslab_cache_alloc(cache);

		o->b = 0x5a5a5a5a5a5a5a5aull;
		uslab_free_rcu_head(o, &o->rh);
	}
	pthread_barrier_wait(&live_bar); /* freed */
	pthread_barrier_wait(&live_bar); /* main's barrier done: exit */
	return NULL;
}

/* A barrier while the owner lives frees its emergency objects. */
static void live_emergency(void)
{
	struct uslab_rcu_stats st0, st;
	pthread_t t;

	cache = uslab_cache_create("rcu_live_emergency", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	uslab_free_rcu(uslab_cache_alloc(cache));
	uslab_rcu_barrier();
	uslab_rcu_stats(&st0);
	pthread_barrier_init(&live_bar, NULL, 2);
	__atomic_store_n(&rcu_fault_inject, 1, __ATOMIC_RELAXED);
	CHECK(!pthread_create(&t, NULL, live_worker, NULL), "thread");
	pthread_barrier_wait(&live_bar);
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	CHECK(st.freed - st0.freed == LIVE,
	      "a live thread's emergency objects freed by the barrier: %lu of %d",
	      (unsigned long)(st.freed - st0.freed), LIVE);
	CHECK(st.emergency - st0.emergency == LIVE, "counted: %lu",
	      (unsigned long)(st.emergency - st0.emergency));
	pthread_barrier_wait(&live_bar);
	pthread_join(t, NULL);
	__atomic_store_n(&rcu_fault_inject, 0, __ATOMIC_RELAXED);
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	CHECK(st.freed - st0.freed == LIVE, "nothing more after the exit: %lu",
	      (unsigned long)(st.freed - st0.freed));
	pthread_barrier_destroy(&live_bar);
	uslab_cache_shrink(cache);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

static void *race_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < RACE_OBJS; i++) {
		struct obj *o = uslab_cache_alloc(cache);

		if (!o)
			abort(); /* (CHECK's counter is the main thread's) */
		uslab_free_rcu_head(o, &o->rh);
	}
	return NULL;
}

static void *race_barriers(void *arg)
{
	unsigned long *n = arg;

	while (!__atomic_load_n(&race_done, __ATOMIC_ACQUIRE)) {
		uslab_rcu_barrier(); /* takes the emergency list as it grows */
		++*n;
	}
	return NULL;
}

/* Threads link emergency objects while barriers take them: every object freed once. */
static void emergency_race(void)
{
	struct uslab_rcu_stats st0, st;
	struct uslab_cache_stats cs;
	pthread_t t[RACE_THREADS], b;
	unsigned long barriers = 0;

	cache = uslab_cache_create("rcu_emergency_race", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	uslab_free_rcu(uslab_cache_alloc(cache));
	uslab_rcu_barrier();
	uslab_rcu_stats(&st0);
	__atomic_store_n(&rcu_fault_inject, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&race_done, 0, __ATOMIC_RELAXED);
	CHECK(!pthread_create(&b, NULL, race_barriers, &barriers), "barrier thread");
	for (int i = 0; i < RACE_THREADS; i++)
		CHECK(!pthread_create(&t[i], NULL, race_worker, NULL), "thread");
	for (int i = 0; i < RACE_THREADS; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&race_done, 1, __ATOMIC_RELEASE);
	pthread_join(b, NULL);
	__atomic_store_n(&rcu_fault_inject, 0, __ATOMIC_RELAXED);
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	printf("  %d objects on the emergency path, %lu barriers meanwhile\n",
	       RACE_THREADS * RACE_OBJS, barriers);
	CHECK(st.freed - st0.freed == RACE_THREADS * RACE_OBJS, "freed %lu of %d",
	      (unsigned long)(st.freed - st0.freed), RACE_THREADS * RACE_OBJS);
	CHECK(st.emergency - st0.emergency == RACE_THREADS * RACE_OBJS, "emergency %lu",
	      (unsigned long)(st.emergency - st0.emergency));
	uslab_cache_shrink(cache);
	CHECK(!uslab_cache_stats(cache, &cs) && cs.active_objs == 0, "active_objs %lu",
	      cs.active_objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

int main(void)
{
	RUN(emergency);
	RUN(live_emergency);
	RUN(emergency_race);
	return 0;
}
