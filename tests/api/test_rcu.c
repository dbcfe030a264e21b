// SPDX-License-Identifier: MIT
/*
 * test_rcu.c - deferred freeing after a grace period and TYPESAFE_BY_RCU
 * caches, through the public API and liburcu (urcu-memb).
 *
 *   readers        readers under rcu_read_lock() hold objects a writer
 *                  replaces and frees with uslab_free_rcu() and
 *                  kfree_rcu(); any change seen inside a read-side section
 *                  is an early free. argv[1]: frees (10^6 in release).
 *   thread_exit    a thread exits with frees pending; after
 *                  uslab_rcu_barrier() every object is back in its slabs.
 *   drain_delay    a thread frees a few objects and idles: the monitor
 *                  hands them over by itself within USLAB_RCU_DRAIN_MS.
 *   steal_race     threads free in bursts while the monitor claims their
 *                  partly filled blocks: every object freed exactly once.
 *   typesafe       readers validate identity while a writer frees and
 *                  reuses objects of a USLAB_TYPESAFE_BY_RCU cache and
 *                  empties its slabs; a slab a reader still looks at is
 *                  never released (uslab_cache_of, mincore).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <urcu/urcu-memb.h>
#include <uslab.h>
#include <uslab/kmem.h>

#include "../test.h"

#define LIVE 0x11fe11fe11fe11feull

struct obj {
	uint64_t magic;
	uint64_t id;
	uint64_t pad[4];
	struct rcu_head rh;
	uint64_t id2; /* ~id */
};

enum { SLOTS = 64, READERS = 2 };

static unsigned long nfrees = 1000000;
static struct uslab_cache *cache;
static _Atomic(struct obj *) slots[SLOTS];
static atomic_bool stop;
static atomic_ulong early, reads;

/*
 * Readers that have completed a read: the writer starts only when all
 * have, so on a loaded machine the test cannot finish before any reader
 * was scheduled (which would make "readers ran" fail, and the test vacuous).
 */
static atomic_uint readers_live;

static void reader_live_once(unsigned long done)
{
	if (done == 1)
		atomic_fetch_add(&readers_live, 1);
}

static void wait_readers(unsigned int n)
{
	while (atomic_load(&readers_live) < n)
		sched_yield();
	atomic_store(&readers_live, 0);
}

static bool obj_ok(const struct obj *o, uint64_t id)
{
	return __atomic_load_n(&o->magic, __ATOMIC_RELAXED) == LIVE &&
	       __atomic_load_n(&o->id, __ATOMIC_RELAXED) == id &&
	       __atomic_load_n(&o->id2, __ATOMIC_RELAXED) == ~id;
}

static void *reader(void *arg)
{
	uint64_t seed = (uintptr_t)arg + 1;
	unsigned long bad = 0, n = 0;

	urcu_memb_register_thread();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		urcu_memb_read_lock();
		struct obj *o =
			atomic_load_explicit(&slots[rnd_next(&seed) % SLOTS], memory_order_acquire);
		uint64_t id = __atomic_load_n(&o->id, __ATOMIC_RELAXED);

		/* Hold it for a while: a free before the grace period shows. */
		for (int k = 0; k < 64; k++)
			if (!obj_ok(o, id))
				bad++;
		urcu_memb_read_unlock();
		reader_live_once(++n);
	}
	urcu_memb_unregister_thread();
	atomic_fetch_add(&early, bad);
	atomic_fetch_add(&reads, n);
	return NULL;
}

static struct obj *new_obj(uint64_t id)
{
	struct obj *o = uslab_cache_alloc(cache);

	__atomic_store_n(&o->magic, LIVE, __ATOMIC_RELAXED);
	__atomic_store_n(&o->id, id, __ATOMIC_RELAXED);
	__atomic_store_n(&o->id2, ~id, __ATOMIC_RELAXED);
	return o;
}

static void readers(void)
{
	pthread_t r[READERS];
	struct uslab_rcu_stats st0, st;
	struct uslab_cache_stats cs;
	uint64_t seed = 42;

	cache = uslab_cache_create("rcu_readers", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	CHECK(!uslab_rcu_stats(&st0), "stats");
	for (int i = 0; i < SLOTS; i++)
		slots[i] = new_obj((uint64_t)i);
	atomic_store(&stop, false);
	for (uintptr_t i = 0; i < READERS; i++)
		CHECK(!pthread_create(&r[i], NULL, reader, (void *)i), "reader");
	wait_readers(READERS);
	for (unsigned long i = 0; i < nfrees; i++) {
		unsigned int s = (unsigned int)(rnd_next(&seed) % SLOTS);
		struct obj *old = atomic_exchange(&slots[s], new_obj(SLOTS + i));

		if (i & 1)
			kfree_rcu(old, rh);
		else
			uslab_free_rcu(old);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	for (int i = 0; i < SLOTS; i++)
		uslab_free_rcu(atomic_exchange(&slots[i], NULL));
	uslab_rcu_barrier();
	CHECK(!uslab_rcu_stats(&st), "stats");
	printf("  %lu frees, %lu reads, %lu early, %lu batches, %lu blocks\n", nfrees,
	       atomic_load(&reads), atomic_load(&early), (unsigned long)(st.batches - st0.batches),
	       (unsigned long)(st.blocks - st0.blocks));
	CHECK(atomic_load(&early) == 0, "%lu reads saw an object change inside a read-side section",
	      atomic_load(&early));
	CHECK(atomic_load(&reads) > 0, "readers ran");
	CHECK(st.queued - st0.queued == nfrees + SLOTS, "queued %lu",
	      (unsigned long)(st.queued - st0.queued));
	CHECK(st.freed - st0.freed == nfrees + SLOTS, "freed %lu",
	      (unsigned long)(st.freed - st0.freed));
	CHECK(st.batches > st0.batches && st.batches - st0.batches < nfrees / 100,
	      "one call_rcu per batch, not per object: %lu",
	      (unsigned long)(st.batches - st0.batches));
	CHECK(st.leaked == 0, "leaked");
	uslab_cache_shrink(cache);
	CHECK(!uslab_cache_stats(cache, &cs) && cs.active_objs == 0, "active_objs %lu",
	      cs.active_objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

static void *exiting(void *arg)
{
	struct obj **objs = arg;

	for (int i = 0; i < 3000; i++)
		objs[i] = new_obj((uint64_t)i);
	for (int i = 0; i < 3000; i++) {
		if (i % 3)
			uslab_free_rcu(objs[i]);
		else
			kfree_rcu(objs[i], rh);
	}
	return NULL; /* exits with a partly filled block */
}

static void thread_exit(void)
{
	static struct obj *objs[3000];
	struct uslab_cache_stats cs;
	struct uslab_rcu_stats st0, st;
	pthread_t t;

	cache = uslab_cache_create("rcu_exit", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	uslab_rcu_stats(&st0);
	CHECK(!pthread_create(&t, NULL, exiting, objs), "thread");
	pthread_join(t, NULL);
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	CHECK(st.freed - st0.freed == 3000, "freed %lu of 3000",
	      (unsigned long)(st.freed - st0.freed));
	uslab_cache_shrink(cache);
	CHECK(!uslab_cache_stats(cache, &cs) && cs.active_objs == 0, "active_objs %lu",
	      cs.active_objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

static atomic_bool idle_done;

static void *idler(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++)
		uslab_free_rcu(new_obj((uint64_t)i));
	while (!atomic_load(&idle_done))
		usleep(1000);
	return NULL;
}

static void drain_delay(void)
{
	struct uslab_rcu_stats st0, st;
	pthread_t t;
	int ms = 0;

	cache = uslab_cache_create("rcu_idle", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	uslab_rcu_stats(&st0);
	atomic_store(&idle_done, false);
	CHECK(!pthread_create(&t, NULL, idler, NULL), "thread");
	do {
		usleep(5000);
		ms += 5;
		uslab_rcu_stats(&st);
	} while (st.freed - st0.freed < 10 && ms < 5000);
	printf("  10 objects of an idle thread freed after %d ms\n", ms);
	CHECK(st.freed - st0.freed == 10, "freed %lu of 10 without a barrier",
	      (unsigned long)(st.freed - st0.freed));
	atomic_store(&idle_done, true);
	pthread_join(t, NULL);
	uslab_rcu_barrier();
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

/*
 * Steal race: threads free in bursts and pause, so the monitor keeps
 * claiming the published part of blocks that their owners go on filling
 * and then hand over. The counts must add up exactly: an entry freed by
 * both (or by neither) shows. With USLAB_RCU_DRAIN_MS=1 (tests/CMakeLists.txt)
 * about one block in six is claimed partly; the few-instruction window
 * between the monitor's read and its CAS is hit only by chance.
 */
enum { STEAL_THREADS = 4 };

static void *burster(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 7919 + 3;
	unsigned long left = nfrees / 10 / STEAL_THREADS;

	while (left) {
		unsigned long n = 1 + rnd_next(&seed) % 700;

		if (n > left)
			n = left;
		for (unsigned long i = 0; i < n; i++) {
			struct obj *o = new_obj(i);

			if (i & 1)
				uslab_free_rcu(o);
			else
				kfree_rcu(o, rh);
		}
		left -= n;
		if (rnd_next(&seed) % 4 == 0)
			usleep((useconds_t)(rnd_next(&seed) % 3000));
	}
	return NULL;
}

static void steal_race(void)
{
	struct uslab_rcu_stats st0, st;
	struct uslab_cache_stats cs;
	pthread_t t[STEAL_THREADS];
	unsigned long total = nfrees / 10 / STEAL_THREADS * STEAL_THREADS;

	cache = uslab_cache_create("rcu_steal", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	uslab_rcu_stats(&st0);
	for (uintptr_t i = 0; i < STEAL_THREADS; i++)
		CHECK(!pthread_create(&t[i], NULL, burster, (void *)i), "thread");
	for (int i = 0; i < STEAL_THREADS; i++)
		pthread_join(t[i], NULL);
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	printf("  %lu objects by %d threads in bursts: %lu blocks, %lu grace periods\n", total,
	       STEAL_THREADS, (unsigned long)(st.blocks - st0.blocks),
	       (unsigned long)(st.batches - st0.batches));
	CHECK(st.queued - st0.queued == total, "queued %lu of %lu",
	      (unsigned long)(st.queued - st0.queued), total);
	CHECK(st.freed - st0.freed == total, "freed %lu of %lu",
	      (unsigned long)(st.freed - st0.freed), total);
	uslab_cache_shrink(cache);
	CHECK(!uslab_cache_stats(cache, &cs) && cs.active_objs == 0, "active_objs %lu",
	      cs.active_objs);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

/* ------------------------------------------------------------ typesafe */

struct tobj {
	_Atomic uint64_t key; /* slot << 32 | generation; 0 while free */
	uint64_t payload[5];
};

static _Atomic(struct tobj *) tslots[SLOTS];
static atomic_ulong accepted, rejected, wrong, unmapped;
static long page_size;

static void *treader(void *arg)
{
	uint64_t seed = (uintptr_t)arg + 7;
	unsigned long acc = 0, rej = 0, bad = 0, gone = 0;
	unsigned char vec;

	urcu_memb_register_thread();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned int i = (unsigned int)(rnd_next(&seed) % SLOTS);

		urcu_memb_read_lock();
		struct tobj *o = atomic_load_explicit(&tslots[i], memory_order_acquire);
		uint64_t k = atomic_load_explicit(&o->key, memory_order_acquire);

		/* The slab stays ours while we are inside the section. */
		for (int n = 0; n < 16; n++)
			if (uslab_cache_of(o) != cache ||
			    mincore((void *)((uintptr_t)o & ~(uintptr_t)(page_size - 1)), 1, &vec))
				gone++;
		/* Identity: still the object of slot i, still the same key. */
		if (atomic_load_explicit(&tslots[i], memory_order_acquire) == o &&
		    atomic_load_explicit(&o->key, memory_order_acquire) == k && k) {
			reader_live_once(++acc);
			if (k >> 32 != i)
				bad++;
		} else {
			rej++;
		}
		urcu_memb_read_unlock();
	}
	urcu_memb_unregister_thread();
	atomic_fetch_add(&accepted, acc);
	atomic_fetch_add(&rejected, rej);
	atomic_fetch_add(&wrong, bad);
	atomic_fetch_add(&unmapped, gone);
	return NULL;
}

static struct tobj *tnew(unsigned int slot, uint64_t gen)
{
	struct tobj *o = uslab_cache_alloc(cache);

	CHECK(o, "alloc");
	atomic_store_explicit(&o->key, (uint64_t)slot << 32 | (gen & 0xffffffffu),
			      memory_order_release);
	return o;
}

static void typesafe(void)
{
	/* No sheaves, one empty slab kept: frees empty slabs at once. */
	struct uslab_cache_args args = { .sheaf_capacity = 1, .min_partial = 1 };
	struct uslab_rcu_stats st0, st;
	static struct tobj *burst[4096];
	pthread_t r[READERS];
	uint64_t gen = 1, seed = 9;
	unsigned long rounds = nfrees / 20;

	page_size = sysconf(_SC_PAGESIZE);
	cache = uslab_cache_create("rcu_typesafe", sizeof(struct tobj), &args,
				   USLAB_TYPESAFE_BY_RCU);
	CHECK(cache, "create");
	uslab_rcu_stats(&st0);
	for (unsigned int i = 0; i < SLOTS; i++)
		tslots[i] = tnew(i, gen++);
	atomic_store(&stop, false);
	for (uintptr_t i = 0; i < READERS; i++)
		CHECK(!pthread_create(&r[i], NULL, treader, (void *)i), "reader");
	wait_readers(READERS);
	for (unsigned long n = 0; n < rounds; n++) {
		unsigned int i = (unsigned int)(rnd_next(&seed) % SLOTS);
		struct tobj *old = atomic_exchange(&tslots[i], tnew(i, gen++));

		/* Unpublished: mark it dead, free it; it may be reused at once. */
		atomic_store_explicit(&old->key, 0, memory_order_release);
		uslab_cache_free(cache, old);
		if (n % 2000 == 0) {
			/*
			 * New slabs; publish a few objects of each, free the rest:
			 * when the published ones are replaced, their slab is empty
			 * while readers may still hold them.
			 */
			for (int k = 0; k < 4096; k++)
				burst[k] = tnew(SLOTS + 1, 0);
			for (unsigned int j = 0; j < SLOTS; j++) {
				struct tobj *o = burst[j * 64];

				atomic_store_explicit(&o->key,
						      (uint64_t)j << 32 | (gen++ & 0xffffffffu),
						      memory_order_release);
				burst[j * 64] = atomic_exchange(&tslots[j], o);
			}
			for (int k = 0; k < 4096; k++) {
				atomic_store_explicit(&burst[k]->key, 0, memory_order_release);
				uslab_cache_free(cache, burst[k]);
			}
		}
	}
	atomic_store(&stop, true);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	for (unsigned int i = 0; i < SLOTS; i++) {
		struct tobj *o = atomic_exchange(&tslots[i], NULL);

		atomic_store(&o->key, 0);
		uslab_cache_free(cache, o);
	}
	uslab_rcu_barrier();
	uslab_rcu_stats(&st);
	printf("  %lu frees; reads: %lu accepted, %lu rejected, %lu wrong, %lu on released "
	       "slabs; %lu slabs deferred\n",
	       rounds, atomic_load(&accepted), atomic_load(&rejected), atomic_load(&wrong),
	       atomic_load(&unmapped), (unsigned long)(st.slabs_deferred - st0.slabs_deferred));
	CHECK(atomic_load(&wrong) == 0, "unvalidated reads accepted");
	CHECK(atomic_load(&unmapped) == 0, "a reader's slab was released under it");
	CHECK(atomic_load(&accepted) > 0, "readers ran");
	CHECK(st.slabs_deferred > st0.slabs_deferred, "slab releases were deferred");
	CHECK(st.slabs_released == st.slabs_deferred,
	      "every deferred slab released by the barrier");
	CHECK(uslab_cache_destroy(cache) == 0, "destroy");
}

/*
 * Fork with frees pending, after the monitor ran: the child does not
 * deadlock, and frees its own deferred objects (doc/api.md).
 */
static void fork_child(void)
{
	struct uslab_rcu_stats st0, st;
	int status;
	pid_t pid;

	cache = uslab_cache_create("rcu_fork", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	for (int i = 0; i < 1000; i++)
		uslab_free_rcu(new_obj((uint64_t)i)); /* pending in this thread's block */
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		alarm(20); /* a deadlock fails the test */
		uslab_rcu_stats(&st0);
		for (int i = 0; i < 3000; i++)
			uslab_free_rcu(new_obj((uint64_t)i));
		uslab_rcu_barrier();
		uslab_rcu_stats(&st);
		/* Its own 3000 and what the parent had not handed over at fork. */
		_exit(st.freed - st0.freed >= 3000 && st.leaked == st0.leaked ? 0 : 3);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "wait");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	uslab_rcu_barrier();
	uslab_cache_shrink(cache);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy in the parent");
}

/*
 * Fork before uslab's grace-period monitor ever ran: the child's first
 * deferred free starts it, under the locks the forking thread held at the
 * fork (released in the child; re-initialised while held, ThreadSanitizer
 * reported the monitor's lock as a double lock and races under it).
 */
static void fork_cold(void)
{
	int status;
	pid_t pid;

	cache = uslab_cache_create("rcu_fork_cold", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct uslab_rcu_stats st;

		alarm(20);
		for (int i = 0; i < 3000; i++)
			uslab_free_rcu(new_obj((uint64_t)i));
		uslab_rcu_barrier();
		uslab_rcu_stats(&st);
		_exit(st.freed >= 3000 && !st.leaked ? 0 : 3);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "wait");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy in the parent");
}

/*
 * Destroy right after the last objects went to uslab_free_rcu(), no
 * barrier: destroy waits for them (<uslab.h>), as kmem_cache_destroy()
 * waits for kfree_rcu(); with one object held, -EBUSY, the cache intact.
 */
static void destroy_pending(void)
{
	struct obj *held;

	cache = uslab_cache_create("rcu_destroy", sizeof(struct obj), NULL, 0);
	CHECK(cache, "create");
	held = new_obj(7);
	for (int i = 0; i < 5000; i++)
		uslab_free_rcu(new_obj((uint64_t)i));
	CHECK(uslab_cache_destroy(cache) == -EBUSY, "destroy with one object held: -EBUSY");
	CHECK(held->id == 7 && held->id2 == ~(uint64_t)7, "the held object intact");
	for (int i = 0; i < 5000; i++)
		uslab_free_rcu(new_obj((uint64_t)i));
	uslab_free_rcu(held);
	CHECK(uslab_cache_destroy(cache) == 0, "destroy with every object deferred: 0");
}

static void bad_input(void)
{
	static const struct rcu_flavor_struct other; /* never called: refused */

	uslab_free_rcu(NULL);
	uslab_free_rcu_head(NULL, NULL);
	CHECK(uslab_rcu_stats(NULL) == -EINVAL, "stats NULL");
	CHECK(uslab_rcu_set_flavor(NULL) == -EINVAL, "flavor NULL");
	CHECK(uslab_rcu_set_flavor(&urcu_memb_flavor) == 0, "same flavor again");
	CHECK(uslab_rcu_set_flavor(&other) == -EBUSY, "after first use");
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "fork-cold")) {
		RUN(fork_cold); /* (before any other test starts the monitor) */
		return 0;
	}
	if (argc > 1)
		nfrees = strtoul(argv[1], NULL, 0);
	RUN(readers);
	RUN(thread_exit);
	RUN(drain_delay);
	RUN(steal_race);
	RUN(typesafe);
	RUN(fork_child);
	RUN(destroy_pending);
	RUN(bad_input);
	return 0;
}
