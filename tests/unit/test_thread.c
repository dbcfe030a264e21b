// SPDX-License-Identifier: MIT
/*
 * test_thread.c - thread.c: per-thread states, thread exit, draining other
 * threads' sheaves, summing their counters, fork.
 *
 *   start_self      a new thread has no state and the shared zero table;
 *                   thread_start_self() gives it its own table, once; after
 *                   its exit handler has run the thread gets none (-1) and
 *                   allocates from slabs.
 *   exit_drains     a thread's exit returns the sheaves of every cache it
 *                   used: active_objs falls to what others hold (plus full
 *                   sheaves parked in the barn where it keeps them), and
 *                   its counters are folded into the cache, not lost.
 *   sum_events      thread_sum_events() adds the counters of every live
 *                   thread using the cache (exact bulk counts), and nothing
 *                   for threads that exited (the node has them then).
 *   recycled        states go back to a pool: threads started one after
 *                   another reuse the same table, and thousands of them do
 *                   not grow the address space (VmSize).
 *   drain_other     thread_drain_cache() empties another live thread's
 *                   sheaves (active_objs 0); that thread then works on;
 *                   destroy succeeds while it holds cached objects, and a
 *                   cache reusing the id is seen clean by it.
 *   fork_drains     in a child after fork the other threads' sheaves are
 *                   back in their caches (active_objs exact, before any
 *                   flush), their counters kept; the child allocates,
 *                   writes and frees as any process, gives every slab back
 *                   and can destroy; the parent's other thread keeps its
 *                   own. (The one fork scenario of the cache contract;
 *                   api_faults forks beside lock holders.)
 */
#include <pthread.h>

#include "internal.h"
#include "../test.h"

/* Objects in the calling thread's sheaves of @c. */
static size_t own_cached(struct uslab_cache *c)
{
	struct pcs *p = pcs_of(c);

	return (size_t)(p->hot.top - p->hot.bottom) + (p->spare ? p->spare->size : 0);
}

/* A cache with sheaves of 14 whose barn keeps @max_full full sheaves. */
static struct uslab_cache *create(const char *name, unsigned int max_full)
{
	struct uslab_cache_args a = { .sheaf_capacity = 14 };
	unsigned int saved = usl_opt.barn_max_full;
	struct uslab_cache *c;

	usl_opt.barn_max_full = max_full; /* read at creation */
	c = uslab_cache_create(name, 64, &a, 0);
	usl_opt.barn_max_full = saved;
	CHECK(c && c->sheaf_capacity == 14 && c->barn.max_full == max_full, "create %s", name);
	return c;
}

/*
 * Whether the counters threads keep (all but those the node counts itself
 * as slabs change: a drain flushes sheaves) are equal in @a and @b.
 */
static bool thread_counters_equal(const uint64_t *a, const uint64_t *b)
{
	for (int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
		if (i != USLAB_STAT_SLAB_NEW && i != USLAB_STAT_SLAB_FREE &&
		    i != USLAB_STAT_FREE_GROUP && a[i] != b[i])
			return false;
	return true;
}

static void destroy(struct uslab_cache *c)
{
	uslab_cache_shrink(c);
	CHECK(cache_active(c) == 0, "%s: nothing lost: active %lu", c->name, cache_active(c));
	CHECK(uslab_cache_destroy(c) == 0, "destroy %s", c->name);
}

static pthread_barrier_t barrier;
static struct uslab_cache *cache, *cache2;

static void run(void *(*fn)(void *), void *arg, void **ret)
{
	pthread_t t;

	CHECK(!pthread_create(&t, NULL, fn, arg), "pthread_create");
	CHECK(!pthread_join(t, ret), "pthread_join");
}

/* ------------------------------------------------------- start_self */

static pthread_key_t late_key;
static struct {
	int rounds, started_before, start_ret, started_after;
	void *obj;
	struct uslab_cache *obj_cache;
} late;

/*
 * A destructor of a key created after uslab's: runs after uslab's exit
 * handler (glibc runs them in key order; if not, it re-arms itself for the
 * next round, when uslab's has run).
 */
static void late_dtor(void *arg)
{
	late.rounds++;
	if (thread_started() && late.rounds < 3) {
		pthread_setspecific(late_key, arg);
		return;
	}
	late.started_before = thread_started();
	late.start_ret = thread_start_self();
	late.started_after = thread_started();
	late.obj = uslab_cache_alloc(cache);
	late.obj_cache = late.obj ? uslab_cache_of(late.obj) : NULL;
	uslab_cache_free(cache, late.obj);
}

struct start_result {
	bool started0, started1, started2;
	int ret1, ret2;
	char *table0, *table1, *table2;
	struct pcs p0;
	struct uslab_cache *owner;
};

static void *starter(void *arg)
{
	struct start_result *r = arg;

	r->started0 = thread_started();
	r->table0 = uslab_priv_pcs_table;
	r->p0 = *pcs_of(cache);
	r->ret1 = thread_start_self();
	r->started1 = thread_started();
	r->table1 = uslab_priv_pcs_table;
	r->ret2 = thread_start_self();
	r->started2 = thread_started();
	r->table2 = uslab_priv_pcs_table;
	uslab_cache_free(cache, uslab_cache_alloc(cache));
	r->owner = pcs_of(cache)->cache;
	pthread_setspecific(late_key, (void *)1);
	return NULL;
}

static void start_self(void)
{
	struct start_result r;
	struct pcs zero;

	memset(&zero, 0, sizeof(zero));
	cache = create("thread-start", 10);
	CHECK(thread_start_self() == 0 && thread_started(), "main thread started");
	CHECK(!pthread_key_create(&late_key, late_dtor), "key");
	memset(&r, 0, sizeof(r));
	run(starter, &r, NULL);
	CHECK(!r.started0, "a new thread has no state");
	CHECK(!memcmp(&r.p0, &zero, sizeof(zero)), "its pcs entries are the zero table's");
	CHECK(r.table0 != uslab_priv_pcs_table, "the zero table is not the main thread's");
	CHECK(r.ret1 == 0 && r.started1 && r.table1 != r.table0, "started: a table of its own");
	CHECK(r.ret2 == 0 && r.started2 && r.table2 == r.table1, "a second start changes nothing");
	CHECK(r.owner == cache, "its pcs serves the cache after a slow path");
	CHECK(late.rounds >= 1, "the late destructor ran");
	CHECK(!late.started_before, "no state once the exit handler ran");
	CHECK(late.start_ret == -1 && !late.started_after, "and none can be started then");
	CHECK(late.obj && late.obj_cache == cache, "allocation still works (from slabs)");
	printf("   late destructor ran in round %d\n", late.rounds);
	pthread_key_delete(late_key);
	uslab_thread_flush();
	destroy(cache);
}

/* ------------------------------------------------------ exit_drains */

enum { EXIT_N = 100, EXIT_KEEP = 40 };
static void *kept[2][EXIT_KEEP];

static void *use_two(void *arg)
{
	struct uslab_cache **c = arg;
	void *p[EXIT_N];

	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < EXIT_N; i++)
			p[i] = uslab_cache_alloc(c[k]);
		for (int i = EXIT_KEEP; i < EXIT_N; i++)
			uslab_cache_free(c[k], p[i]);
		memcpy(kept[k], p, sizeof(kept[k]));
	}
	pthread_barrier_wait(&barrier); /* sheaves hold objects */
	pthread_barrier_wait(&barrier); /* main has looked: exit */
	return NULL;
}

static void exit_drains(void)
{
	struct uslab_cache *c[2] = { create("exit-noparking", 0), create("exit-barn", 10) };
	uint64_t ev0[2][USLAB_STAT_NR_ITEMS];
	struct uslab_cache_stats st;
	pthread_t t;

	pthread_barrier_init(&barrier, NULL, 2);
	CHECK(!pthread_create(&t, NULL, use_two, c), "thread");
	pthread_barrier_wait(&barrier);
	for (int k = 0; k < 2; k++) {
		st = cache_stats(c[k]);
		CHECK(st.active_objs > EXIT_KEEP, "%s: the thread's sheaves hold %lu objects",
		      c[k]->name, st.active_objs - EXIT_KEEP);
		CHECK(st.events[USLAB_STAT_ALLOC_SLOWPATH] > 0 &&
			      st.events[USLAB_STAT_FREE_SLOWPATH] > 0,
		      "the live thread's counters are seen");
		memcpy(ev0[k], st.events, sizeof(ev0[k]));
	}
	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	for (int k = 0; k < 2; k++) {
		st = cache_stats(c[k]);
		CHECK(st.active_objs == EXIT_KEEP + st.barn_full * 14,
		      "%s: active %lu = the %d held elsewhere + %lu full sheaves in the barn",
		      c[k]->name, st.active_objs, EXIT_KEEP, st.barn_full);
		CHECK(thread_counters_equal(ev0[k], st.events),
		      "%s: the exited thread's counters folded into the cache once", c[k]->name);
	}
	CHECK(cache_stats(c[0]).active_objs == EXIT_KEEP, "no parking: exactly the objects held");
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < EXIT_KEEP; i++)
			uslab_cache_free(c[k], kept[k][i]);
		destroy(c[k]);
	}
	pthread_barrier_destroy(&barrier);
}

/* ------------------------------------------------------- sum_events */

static void *bulk_calls(void *arg)
{
	int calls = (int)(intptr_t)arg;
	void *p[3];

	void *ret = NULL;

	for (int i = 0; i < calls; i++) {
		if (uslab_priv_alloc_bulk_slow(cache, 3, p) != 3)
			ret = (void *)1;
		uslab_priv_free_bulk_slow(cache, 3, p);
	}
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	return ret;
}

static void sum_events(void)
{
	uint64_t ev[USLAB_STAT_NR_ITEMS];
	struct uslab_cache_stats st;
	pthread_t t[2];

	cache = create("sum-events", 10);
	pthread_barrier_init(&barrier, NULL, 3);
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&t[i], NULL, bulk_calls, (void *)(intptr_t)(2 + i)),
		      "thread");
	pthread_barrier_wait(&barrier);
	memset(ev, 0, sizeof(ev));
	thread_sum_events(cache, ev);
	CHECK(ev[USLAB_STAT_ALLOC_BULK] == 5 && ev[USLAB_STAT_ALLOC_BULK_OBJS] == 15,
	      "two live threads: 2 + 3 bulk allocations, 15 objects (%llu, %llu)",
	      (unsigned long long)ev[USLAB_STAT_ALLOC_BULK],
	      (unsigned long long)ev[USLAB_STAT_ALLOC_BULK_OBJS]);
	CHECK(ev[USLAB_STAT_FREE_BULK] == 5 && ev[USLAB_STAT_FREE_BULK_OBJS] == 15,
	      "and 5 bulk frees");
	CHECK(ev[USLAB_STAT_SHEAF_REFILL] >= 2, "their slow-path blocks too");
	st = cache_stats(cache);
	CHECK(st.events[USLAB_STAT_ALLOC_BULK] == 5, "uslab_cache_stats: the same");
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < 2; i++) {
		void *ret;

		pthread_join(t[i], &ret);
		CHECK(!ret, "thread %d: bulk allocations", i);
	}
	memset(ev, 0, sizeof(ev));
	thread_sum_events(cache, ev);
	CHECK(!ev[USLAB_STAT_ALLOC_BULK] && !ev[USLAB_STAT_SHEAF_REFILL],
	      "no live thread uses the cache: nothing");
	st = cache_stats(cache);
	CHECK(st.events[USLAB_STAT_ALLOC_BULK] == 5 && st.events[USLAB_STAT_FREE_BULK_OBJS] == 15,
	      "the node has them: %llu", (unsigned long long)st.events[USLAB_STAT_ALLOC_BULK]);
	memset(ev, 0, sizeof(ev));
	thread_sum_events(sheaf_caches[0], ev); /* a cache without sheaves (id 0) */
	for (int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
		CHECK(!ev[i], "no thread counters for a cache without sheaves");
	pthread_barrier_destroy(&barrier);
	destroy(cache);
}

/* --------------------------------------------------------- recycled */

static long vm_size_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void *one_use(void *arg)
{
	(void)arg;
	uslab_cache_free(cache, uslab_cache_alloc(cache));
	return uslab_priv_pcs_table;
}

static void recycled(void)
{
	const int threads = TEST_SANITIZED ? 300 : 2000;
	void *tables[2], *ret;
	int distinct = 0;
	long vm0, vm1;

	cache = create("recycle", 10);
	for (int i = 0; i < 20; i++) /* warm up: stacks, sanitizer state */
		run(one_use, NULL, NULL);
	vm0 = vm_size_kb();
	for (int i = 0; i < threads; i++) {
		int k;

		run(one_use, NULL, &ret);
		for (k = 0; k < distinct && tables[k] != ret; k++)
			;
		if (k == distinct) {
			CHECK(distinct < 2, "thread %d: a new table %p (%d seen before)", i, ret,
			      distinct);
			tables[distinct++] = ret;
		}
	}
	vm1 = vm_size_kb();
	CHECK(vm0 > 0 && vm1 > 0, "VmSize");
	printf("   %d threads in sequence: %d table(s), VmSize %ld -> %ld kB "
	       "(a state is %zu kB)\n",
	       threads, distinct, vm0, vm1,
	       (size_t)(USLAB_MAX_CACHES + 1) * sizeof(struct pcs) >> 10);
	CHECK(vm1 - vm0 < 4096, "the address space grew by %ld kB", vm1 - vm0);
	CHECK(cache_active(cache) == cache_stats(cache).barn_full * 14,
	      "every thread drained at exit");
	destroy(cache);
}

/* ------------------------------------------------------ drain_other */

static struct {
	bool reset, own_again, new_cache_clean;
} other;

static void *hold(void *arg)
{
	void *p[30];

	(void)arg;
	for (int i = 0; i < 30; i++)
		p[i] = uslab_cache_alloc(cache);
	for (int i = 0; i < 30; i++)
		uslab_cache_free(cache, p[i]);
	pthread_barrier_wait(&barrier); /* 1: sheaves full of objects */
	pthread_barrier_wait(&barrier); /* 2: main drained them */
	other.reset = !pcs_of(cache)->main && !pcs_of(cache)->spare && !pcs_of(cache)->cache;
	for (int i = 0; i < 30; i++)
		p[i] = uslab_cache_alloc(cache);
	other.own_again = true;
	for (int i = 0; i < 30; i++)
		other.own_again &= uslab_cache_of(p[i]) == cache;
	for (int i = 0; i < 30; i++)
		uslab_cache_free(cache, p[i]);
	pthread_barrier_wait(&barrier); /* 3: cached again */
	pthread_barrier_wait(&barrier); /* 4: destroyed, cache2 created */
	other.new_cache_clean = !pcs_of(cache2)->main && !pcs_of(cache2)->cache;
	void *o = uslab_cache_alloc(cache2);

	other.new_cache_clean &= uslab_cache_of(o) == cache2 && pcs_of(cache2)->cache == cache2;
	uslab_cache_free(cache2, o);
	pthread_barrier_wait(&barrier); /* 5 */
	return NULL;
}

static void drain_other(void)
{
	pthread_t t;
	int id;

	cache = create("drain-other", 0);
	id = cache->id;
	pthread_barrier_init(&barrier, NULL, 2);
	CHECK(!pthread_create(&t, NULL, hold, NULL), "thread");
	pthread_barrier_wait(&barrier); /* 1 */
	CHECK(cache_active(cache) > 0, "the other thread caches %lu objects", cache_active(cache));
	ulock_lock(&caches_lock); /* as destroy calls it */
	thread_drain_cache(cache);
	ulock_unlock(&caches_lock);
	CHECK(cache_active(cache) == 0, "drained from here: active %lu", cache_active(cache));
	pthread_barrier_wait(&barrier); /* 2 */
	pthread_barrier_wait(&barrier); /* 3 */
	CHECK(other.reset, "its pcs was reset");
	CHECK(other.own_again, "it allocates from the cache again");
	CHECK(cache_active(cache) > 0, "and caches objects again (%lu)", cache_active(cache));
	CHECK(uslab_cache_destroy(cache) == 0, "destroy while it holds cached objects");
	cache2 = create("drain-other2", 0);
	printf("   ids: destroyed %d, new %d\n", id, cache2->id);
	pthread_barrier_wait(&barrier); /* 4 */
	pthread_barrier_wait(&barrier); /* 5 */
	CHECK(other.new_cache_clean, "the next cache on its pcs entry starts clean");
	pthread_join(t, NULL);
	pthread_barrier_destroy(&barrier);
	destroy(cache2);
}

/* ------------------------------------------------------ fork_drains */

enum { FORK_HELD = 5, FORK_OBJS = 1000 };
static void *held[FORK_HELD];
static uint64_t fork_ev[USLAB_STAT_NR_ITEMS];
static size_t fork_own;

static void *fill_wait(void *arg)
{
	void *p[100];

	(void)arg;
	for (int i = 0; i < 100; i++)
		p[i] = uslab_cache_alloc(cache);
	for (int i = 0; i < 100; i++)
		uslab_cache_free(cache, p[i]);
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	return NULL;
}

/* In the child: exit 0 when every check held; the exit code names the one that failed. */
static void fork_child(void *arg)
{
	struct uslab_cache_stats st = cache_stats(cache);
	void *p[FORK_OBJS];

	(void)arg;
	if (st.active_objs != FORK_HELD + fork_own) {
		fprintf(stderr, "child: active %lu, want %d held + %zu in own sheaves\n",
			st.active_objs, FORK_HELD, fork_own);
		_exit(10);
	}
	if (!thread_counters_equal(st.events, fork_ev)) {
		fprintf(stderr, "child: counters changed across fork\n");
		_exit(11);
	}
	/* The thread that cached objects does not exist here. */
	for (int i = 0; i < FORK_OBJS; i++) {
		p[i] = uslab_cache_alloc(cache);
		if (!p[i])
			_exit(14);
		memset(p[i], 0x11, 64);
	}
	for (int i = 0; i < FORK_OBJS; i++)
		uslab_cache_free(cache, p[i]);
	for (int i = 0; i < FORK_HELD; i++)
		uslab_cache_free(cache, held[i]);
	uslab_thread_flush();
	uslab_cache_shrink(cache);
	st = cache_stats(cache);
	if (st.active_objs || st.num_slabs) {
		fprintf(stderr, "child: active %lu, slabs %lu after shrink\n", st.active_objs,
			st.num_slabs);
		_exit(12);
	}
	_exit(uslab_cache_destroy(cache) == 0 ? 0 : 13);
}

static void fork_drains(void)
{
	char err[4096];
	pthread_t t;
	int status;

	cache = create("fork-drain", 0);
	pthread_barrier_init(&barrier, NULL, 2);
	for (int i = 0; i < FORK_HELD; i++)
		held[i] = uslab_cache_alloc(cache);
	fork_own = own_cached(cache);
	CHECK(!pthread_create(&t, NULL, fill_wait, NULL), "thread");
	pthread_barrier_wait(&barrier);
	CHECK(cache_active(cache) > FORK_HELD + fork_own, "the other thread caches objects");
	memcpy(fork_ev, cache_stats(cache).events, sizeof(fork_ev));
	status = run_child(fork_child, NULL, err, sizeof(err));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %#x (exit %d) %s",
	      status, WEXITSTATUS(status), err);
	CHECK(cache_active(cache) > FORK_HELD + fork_own,
	      "the parent's other thread keeps its own");
	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	CHECK(cache_active(cache) == FORK_HELD + fork_own, "and returns them at exit");
	for (int i = 0; i < FORK_HELD; i++)
		uslab_cache_free(cache, held[i]);
	pthread_barrier_destroy(&barrier);
	destroy(cache);
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(start_self);
	RUN(exit_drains);
	RUN(sum_events);
	RUN(recycled);
	RUN(drain_other);
	RUN(fork_drains);
	return 0;
}
