// SPDX-License-Identifier: MIT
/*
 * test_rcu.c (unit) - the emergency paths of rcu.c, with block allocation
 * made to fail (rcu_fault_inject): uslab_free_rcu_head() links objects
 * through their rcu_head, uslab_free_rcu() waits for a grace period itself
 * outside a read-side section and takes a reserve block inside one; every
 * object is freed in the end, none leaked.
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

int main(void)
{
	RUN(emergency);
	return 0;
}
