// SPDX-License-Identifier: MIT
/*
 * test_faults.c - faults that must lose nothing and hang nothing (none of
 * them is misuse). Each scenario runs in a child process under alarm(), so
 * a deadlock fails the test with its name instead of hanging CTest.
 *
 *   fork_typesafe_flush  300 forks while two threads fill, free, flush and
 *                        shrink a USLAB_TYPESAFE_BY_RCU cache: a sheaf flush
 *                        that empties a slab defers it to the grace-period
 *                        engine while its thread holds its own state lock;
 *                        the fork handler takes the locks in order.
 *   fork_counters        300 forks while three threads create, use and
 *                        destroy counters and ID generators (the registry
 *                        lock is held by one of them at most forks), and a
 *                        fourth fills new slabs of a cache whose
 *                        constructor creates a counter (the registry lock
 *                        taken under the thread's state lock: fork must
 *                        take it after the allocator's locks); every child
 *                        initializes, adds to, sums, draws from and
 *                        destroys its own within 10 s: the number of
 *                        children that hung is reported.
 *   exit_destructor      2,000 threads free and allocate from a pthread_key
 *                        destructor in every destructor round, the last one
 *                        included: every object comes back (no sheaf
 *                        stranded with a dead thread), the address space
 *                        does not grow with the number of threads.
 *   exit_destructor_rcu  the same with uslab_free_rcu() in the destructor,
 *                        while new threads reuse the exited threads'
 *                        storage: nothing hangs, every object is freed.
 *   cancel_barrier       a thread cancelled while it waits in
 *                        uslab_rcu_barrier() (and one throttled in
 *                        uslab_free_rcu()) leaves no lock held: join, later
 *                        barriers, deferred frees and fork all work.
 *   monitor_start_fails  the background thread cannot start (address space
 *                        exhausted): deferred frees still complete, the
 *                        start is retried once memory is back, and
 *                        destroying a TYPESAFE_BY_RCU cache whose slabs wait
 *                        for a grace period is safe.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <urcu/urcu-memb.h>
#include <uslab.h>
#include <uslab/kmem.h>

#include "../test.h"

static unsigned int alarm_secs;

/* A check in a child process, any thread: message on stderr and exit 1. */
static __thread unsigned long child_checks;
#define EXPECT(cond, ...) CHECK_COUNTED(child_checks, cond, __VA_ARGS__)

/*
 * in_child - run @fn in a child process, which must exit 0 within @secs
 * seconds (SIGALRM: it hung).
 */
static void in_child(void (*fn)(void *), unsigned int secs, const char *what)
{
	char err[8192];
	int status;

	alarm_secs = secs;
	status = run_child(fn, NULL, err, sizeof(err));
	CHECK(!(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM), "%s: hung for %u s: %s", what,
	      secs, err);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x (exit %d): %s", what,
	      status, WEXITSTATUS(status), err);
}

/* ------------------------------------------------ fork_typesafe_flush */

enum { CHURN_OBJS = 4096, FORKS = 300 };

static struct uslab_cache *tcache;
static atomic_bool stop;

static void *churn(void *arg)
{
	void **objs = calloc(CHURN_OBJS, sizeof(void *));
	uint64_t seed = (uintptr_t)arg;

	EXPECT(objs, "calloc");
	while (!atomic_load(&stop)) {
		for (int i = 0; i < CHURN_OBJS; i++) {
			objs[i] = uslab_cache_alloc(tcache);
			EXPECT(objs[i], "alloc %d", i);
			*(uint64_t *)objs[i] = rnd_next(&seed);
		}
		for (int i = 0; i < CHURN_OBJS; i++)
			uslab_cache_free(tcache, objs[i]);
		uslab_thread_flush();
		uslab_cache_shrink(tcache);
	}
	free(objs);
	return NULL;
}

static void fork_typesafe_flush_child(void *arg)
{
	pthread_t t[2];
	int status;

	(void)arg;
	alarm(alarm_secs);
	tcache = uslab_cache_create("faults_typesafe", 256, NULL, USLAB_TYPESAFE_BY_RCU);
	EXPECT(tcache, "create");
	for (uintptr_t i = 0; i < 2; i++)
		EXPECT(!pthread_create(&t[i], NULL, churn, (void *)(i + 1)), "thread");
	for (int i = 0; i < FORKS; i++) {
		pid_t pid = fork();

		EXPECT(pid >= 0, "fork %d", i);
		if (pid == 0) {
			void *o = uslab_cache_alloc(tcache);

			if (!o)
				_exit(2);
			uslab_cache_free(tcache, o);
			_exit(0);
		}
		EXPECT(waitpid(pid, &status, 0) == pid, "wait");
		EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork %d: child status %#x",
		       i, status);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	uslab_rcu_barrier();
	EXPECT(uslab_cache_destroy(tcache) == 0, "destroy");
	exit(0);
}

static void fork_typesafe_flush(void)
{
	in_child(fork_typesafe_flush_child, 60, "300 forks against TYPESAFE_BY_RCU flushes");
}

/* ------------------------------------------------------ fork_counters */

enum { COUNTER_CHILD_SECS = 10 };

/* Create, use and destroy counters and generators until stopped. */
static void *counter_churn(void *arg)
{
	uint64_t seed = (uintptr_t)arg;

	while (!atomic_load(&stop)) {
		struct uslab_counter c[4];
		struct uslab_idgen g[4];

		for (int i = 0; i < 4; i++) {
			EXPECT(uslab_counter_init(&c[i], i) == 0, "counter init");
			EXPECT(uslab_idgen_init(&g[i], 1000) == 0, "idgen init");
		}
		for (int i = 0; i < 4; i++) {
			uslab_counter_add(&c[i], (int64_t)(rnd_next(&seed) % 100));
			EXPECT(uslab_idgen_next(&g[i]) >= 1000, "id");
			EXPECT(uslab_counter_sum(&c[i]) >= i, "sum");
		}
		for (int i = 0; i < 4; i++) {
			uslab_counter_destroy(&c[i]);
			uslab_idgen_destroy(&g[i]);
		}
	}
	return NULL;
}

/* Objects that embed a counter, made by their constructor. */
struct counted {
	struct uslab_counter c;
	char pad[192];
};

static void counted_ctor(void *obj)
{
	struct counted *o = obj;

	EXPECT(uslab_counter_init(&o->c, 0) == 0, "counter init in a constructor");
	uslab_counter_destroy(&o->c); /* (not leaked: index given back) */
}

/* New slabs over and over: the constructor runs under this thread's state lock. */
static void *ctor_churn(void *arg)
{
	struct uslab_cache_args a = { .ctor = counted_ctor };
	struct uslab_cache *c = uslab_cache_create("faults_counted", sizeof(struct counted), &a, 0);
	void *objs[256];

	(void)arg;
	EXPECT(c, "create");
	while (!atomic_load(&stop)) {
		for (int i = 0; i < 256; i++)
			EXPECT((objs[i] = uslab_cache_alloc(c)), "alloc");
		for (int i = 0; i < 256; i++)
			uslab_cache_free(c, objs[i]);
		uslab_cache_shrink(c);
	}
	EXPECT(uslab_cache_destroy(c) == 0, "destroy");
	return NULL;
}

/* A forked child: its own counter and generator, every call; exit 0, or the failed step. */
static void counter_child(void)
{
	struct uslab_counter c;
	struct uslab_idgen g;
	uint64_t a, b;

	alarm(COUNTER_CHILD_SECS);
	if (uslab_counter_init(&c, 7))
		_exit(2);
	for (int i = 0; i < 100; i++)
		uslab_counter_add(&c, 3);
	if (uslab_counter_sum(&c) != 307)
		_exit(3);
	if (uslab_idgen_init(&g, 50))
		_exit(4);
	a = uslab_idgen_next(&g);
	b = uslab_idgen_next(&g);
	if (a != 50 || b != 51)
		_exit(5);
	uslab_idgen_destroy(&g);
	uslab_counter_destroy(&c);
	_exit(0);
}

static void fork_counters_child(void *arg)
{
	static pid_t pids[FORKS];
	unsigned int hung = 0, failed = 0, last_status = 0;
	pthread_t t[4];
	int status;

	(void)arg;
	alarm(alarm_secs);
	for (uintptr_t i = 0; i < 3; i++)
		EXPECT(!pthread_create(&t[i], NULL, counter_churn, (void *)(i + 1)), "thread");
	EXPECT(!pthread_create(&t[3], NULL, ctor_churn, NULL), "thread");
	/* Children run while the next ones are forked; each has its own time limit. */
	for (int i = 0; i < FORKS; i++) {
		pids[i] = fork();
		EXPECT(pids[i] >= 0, "fork %d", i);
		if (pids[i] == 0)
			counter_child();
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < FORKS; i++) {
		EXPECT(waitpid(pids[i], &status, 0) == pids[i], "wait");
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
			hung++;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			failed++;
			last_status = (unsigned int)status;
		}
	}
	EXPECT(!hung, "%u of %d children forked beside counter creation hung (> %d s)", hung, FORKS,
	       COUNTER_CHILD_SECS);
	EXPECT(!failed, "%u of %d children failed (last status %#x)", failed, FORKS, last_status);
	exit(0);
}

static void fork_counters(void)
{
#ifdef __SANITIZE_ADDRESS__
	/*
	 * gcc 12's ASan allocator takes no lock around fork: a child forked while
	 * another thread is inside calloc hangs in its own first calloc (seen in
	 * uslab_counter_init's table, ASan's SizeClassAllocator64 mutex). That is
	 * ASan's, not uslab's; the release and TSan builds run the test.
	 */
	printf("skip fork_counters (ASan's allocator is not fork-safe)\n");
	return;
#endif
	in_child(fork_counters_child, 60, "300 forks against counter and ID generator creation");
}

/* ----------------------------------------------------- exit_destructor */

enum { EXIT_THREADS = 2000, EXIT_BATCH = 8 };

struct dobj {
	uint64_t stamp;
	uint64_t pad[7];
};

static struct uslab_cache *dcache;
static pthread_key_t dkey;
static bool dtor_rcu;
static atomic_ulong dtor_calls, dtor_last_round, dtor_frees;
static __thread unsigned int dtor_round;

static struct dobj *dobj_new(void)
{
	struct dobj *o = uslab_cache_alloc(dcache);

	EXPECT(o, "alloc in a destructor");
	o->stamp = (uintptr_t)o ^ 0x5eedull;
	return o;
}

static void dobj_free(struct dobj *o)
{
	EXPECT(o->stamp == ((uintptr_t)o ^ 0x5eedull), "stamp of %p", (void *)o);
	atomic_fetch_add(&dtor_frees, 1);
	if (dtor_rcu)
		uslab_free_rcu(o);
	else
		uslab_cache_free(dcache, o);
}

/*
 * Every round: free the object, allocate another and ask for one more
 * round with it. In the last round (PTHREAD_DESTRUCTOR_ITERATIONS) the
 * new object is freed at once: glibc calls no destructor after that.
 */
static void dtor(void *v)
{
	struct dobj *o;

	atomic_fetch_add(&dtor_calls, 1);
	dobj_free(v);
	o = dobj_new();
	if (++dtor_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
		EXPECT(!pthread_setspecific(dkey, o), "setspecific");
	} else {
		/* The first thread here frees a burst: more than a block's worth. */
		int extra = atomic_fetch_add(&dtor_last_round, 1) ? 1 : 1500;

		dobj_free(o);
		/* And more from scratch, as C++ thread_local teardown may. */
		for (int i = 0; i < extra; i++)
			dobj_free(dobj_new());
	}
}

static void *exiter(void *arg)
{
	(void)arg;
	/* The thread uses the cache, so uslab's own exit handler runs too. */
	dobj_free(dobj_new());
	EXPECT(!pthread_setspecific(dkey, dobj_new()), "setspecific");
	return NULL;
}

static long vm_size_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static void exit_destructor_run(void)
{
	struct uslab_cache_stats cs;
	struct uslab_rcu_stats r0, r;
	long vm0 = 0, vm1;
	pthread_t t[EXIT_BATCH];

	alarm(alarm_secs);
	dcache = uslab_cache_create(dtor_rcu ? "faults_dtor_rcu" : "faults_dtor",
				    sizeof(struct dobj), NULL, 0);
	EXPECT(dcache, "create");
	EXPECT(!pthread_key_create(&dkey, dtor), "key");
	uslab_rcu_stats(&r0);
	for (int i = 0; i < EXIT_THREADS; i += EXIT_BATCH) {
		for (int j = 0; j < EXIT_BATCH; j++)
			EXPECT(!pthread_create(&t[j], NULL, exiter, NULL), "thread");
		for (int j = 0; j < EXIT_BATCH; j++)
			pthread_join(t[j], NULL);
		if (i == 10 * EXIT_BATCH)
			vm0 = vm_size_kb(); /* thread stacks and states pooled by now */
	}
	vm1 = vm_size_kb();
	EXPECT(atomic_load(&dtor_last_round) == EXIT_THREADS, "last destructor round ran %lu of %d",
	       atomic_load(&dtor_last_round), EXIT_THREADS);
	if (dtor_rcu) {
		uslab_rcu_barrier();
		uslab_rcu_stats(&r);
		EXPECT(r.queued - r0.queued == atomic_load(&dtor_frees) &&
			       r.freed - r0.freed == atomic_load(&dtor_frees) &&
			       r.leaked == r0.leaked,
		       "deferred: %lu frees, queued %lu freed %lu leaked %lu",
		       atomic_load(&dtor_frees), (unsigned long)(r.queued - r0.queued),
		       (unsigned long)(r.freed - r0.freed), (unsigned long)(r.leaked - r0.leaked));
	}
	/* This thread never used the cache: only the barn may hold objects. */
	uslab_cache_shrink(dcache);
	EXPECT(!uslab_cache_stats(dcache, &cs) && cs.active_objs == 0,
	       "%lu objects stranded by %d exited threads", cs.active_objs, EXIT_THREADS);
	EXPECT(vm1 - vm0 < 64 * 1024, "address space grew by %ld KiB over %d threads", vm1 - vm0,
	       EXIT_THREADS - 11 * EXIT_BATCH);
	EXPECT(uslab_cache_destroy(dcache) == 0, "destroy");
	printf("   %d threads, %lu destructor calls, address space %+ld KiB\n", EXIT_THREADS,
	       atomic_load(&dtor_calls), vm1 - vm0);
	exit(0);
}

static void exit_destructor_child(void *arg)
{
	(void)arg;
	dtor_rcu = false;
	exit_destructor_run();
}

static void exit_destructor_rcu_child(void *arg)
{
	(void)arg;
	dtor_rcu = true;
	exit_destructor_run();
}

/*
 * ThreadSanitizer finalises a thread's state in its own key destructor; a
 * destructor running after it in the last round crashes inside TSan.
 */
static bool tsan_skip(void)
{
#ifdef __SANITIZE_THREAD__
	printf("   (skipped under TSan: it tears a thread down before the last round)\n");
	return true;
#else
	return false;
#endif
}

static void exit_destructor(void)
{
	if (tsan_skip())
		return;
	in_child(exit_destructor_child, 120, "frees in the last destructor round");
}

static void exit_destructor_rcu(void)
{
	if (tsan_skip())
		return;
	in_child(exit_destructor_rcu_child, 120, "uslab_free_rcu in the last destructor round");
}

/* ------------------------------------------------------ cancel_barrier */

static atomic_bool reading, release_reader;

/* Holds a read-side critical section until told: grace periods wait. */
static void *reader(void *arg)
{
	(void)arg;
	urcu_memb_register_thread();
	urcu_memb_read_lock();
	atomic_store(&reading, true);
	while (!atomic_load(&release_reader))
		usleep(1000);
	urcu_memb_read_unlock();
	urcu_memb_unregister_thread();
	return NULL;
}

static struct uslab_cache *ccache;
static atomic_ulong cancel_freed;

static void *barrier_waiter(void *arg)
{
	(void)arg;
	for (;;) {
		uslab_free_rcu(uslab_cache_alloc(ccache));
		uslab_rcu_barrier();
		pthread_testcancel();
	}
	return NULL;
}

/* Frees until throttled (more than USLAB_RCU_MAX_INFLIGHT blocks wait). */
static void *throttled(void *arg)
{
	(void)arg;
	for (;;) {
		void *o = uslab_cache_alloc(ccache);

		EXPECT(o, "alloc");
		uslab_free_rcu(o);
		atomic_fetch_add(&cancel_freed, 1);
		pthread_testcancel();
	}
	return NULL;
}

static void cancel_barrier_child(void *arg)
{
	struct uslab_rcu_stats r0, r;
	pthread_t rd, w[2];
	int status;
	pid_t pid;

	(void)arg;
	alarm(alarm_secs);
	ccache = uslab_cache_create("faults_cancel", 64, NULL, 0);
	EXPECT(ccache, "create");
	uslab_rcu_barrier();
	uslab_rcu_stats(&r0);
	EXPECT(!pthread_create(&rd, NULL, reader, NULL), "reader");
	while (!atomic_load(&reading))
		usleep(1000);
	EXPECT(!pthread_create(&w[0], NULL, barrier_waiter, NULL), "waiter");
	EXPECT(!pthread_create(&w[1], NULL, throttled, NULL), "throttled");
	usleep(200 * 1000); /* both are blocked behind the reader by now */
	uslab_rcu_stats(&r);
	EXPECT(r.throttled > r0.throttled, "the freeing thread was never throttled");
	pthread_cancel(w[0]);
	pthread_cancel(w[1]);
	atomic_store(&release_reader, true);
	pthread_join(rd, NULL);
	pthread_join(w[0], NULL);
	pthread_join(w[1], NULL);
	/* Everything still works: barrier, deferred frees, fork. */
	for (int i = 0; i < 1000; i++)
		uslab_free_rcu(uslab_cache_alloc(ccache));
	uslab_rcu_barrier();
	uslab_rcu_stats(&r);
	EXPECT(r.freed - r0.freed == r.queued - r0.queued && r.leaked == r0.leaked,
	       "queued %lu, freed %lu", (unsigned long)(r.queued - r0.queued),
	       (unsigned long)(r.freed - r0.freed));
	pid = fork();
	EXPECT(pid >= 0, "fork");
	if (pid == 0) {
		uslab_free_rcu(uslab_cache_alloc(ccache));
		uslab_rcu_barrier();
		_exit(0);
	}
	EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	       "child after cancellation: status %#x", status);
	uslab_cache_shrink(ccache);
	EXPECT(uslab_cache_destroy(ccache) == 0, "destroy");
	exit(0);
}

static void cancel_barrier(void)
{
	in_child(cancel_barrier_child, 60, "cancelled in uslab_rcu_barrier and the throttle");
}

/* ------------------------------------------------- monitor_start_fails */

/* Leave @slack_kb of address space: no new thread stack (8 MiB) fits. */
static void limit_as(long slack_kb)
{
	struct rlimit rl;

	getrlimit(RLIMIT_AS, &rl);
	rl.rlim_cur = slack_kb < 0 ? rl.rlim_max : (rlim_t)(vm_size_kb() + slack_kb) * 1024;
	EXPECT(!setrlimit(RLIMIT_AS, &rl), "setrlimit: %s", strerror(errno));
}

static void monitor_start_fails_child(void *arg)
{
	enum { N = 20000 };
	static void *objs[N];
	struct uslab_cache_stats cs;
	struct uslab_rcu_stats r;
	struct uslab_cache *c1, *c2;
	pthread_t t;

	(void)arg;
	alarm(alarm_secs);
	c1 = uslab_cache_create("faults_nomon1", 256, NULL, USLAB_TYPESAFE_BY_RCU);
	c2 = uslab_cache_create("faults_nomon2", 256, NULL, USLAB_TYPESAFE_BY_RCU);
	EXPECT(c1 && c2, "create");
	EXPECT(uslab_cache_alloc_bulk(c1, N, objs) == N, "alloc c1");

	limit_as(2048);
	EXPECT(pthread_create(&t, NULL, reader, NULL) != 0, "the limit lets a thread start");
	/* Deferred frees complete without the background thread. */
	for (int i = 0; i < 100; i++)
		uslab_free_rcu(objs[i]);
	uslab_cache_free_bulk(c1, N - 100, objs + 100);
	uslab_cache_shrink(c1); /* empties slabs: released after a grace period */
	uslab_rcu_barrier();
	/* The deferred frees ended in slabs the first shrink saw in use (when a
	   block for them could be had): those go now. */
	uslab_cache_shrink(c1);
	uslab_rcu_barrier();
	uslab_rcu_stats(&r);
	EXPECT(r.queued == r.freed && !r.leaked, "queued %lu, freed %lu, leaked %lu",
	       (unsigned long)r.queued, (unsigned long)r.freed, (unsigned long)r.leaked);
	EXPECT(r.slabs_deferred > 0 && r.slabs_deferred == r.slabs_released,
	       "slabs deferred %lu, released %lu", (unsigned long)r.slabs_deferred,
	       (unsigned long)r.slabs_released);
	EXPECT(!uslab_cache_stats(c1, &cs) && cs.num_slabs == 0,
	       "c1 keeps %lu slabs (%lu objects in use)", cs.num_slabs, cs.active_objs);
	EXPECT(uslab_cache_destroy(c1) == 0, "destroy c1 without the background thread");

	/* Memory is back: the next deferred work starts the thread. */
	limit_as(-1);
	EXPECT(uslab_cache_alloc_bulk(c2, N, objs) == N, "alloc c2");
	uslab_cache_free_bulk(c2, N, objs);
	uslab_cache_shrink(c2);
	uslab_rcu_barrier();
	uslab_rcu_stats(&r);
	EXPECT(r.slabs_deferred == r.slabs_released, "slabs deferred %lu, released %lu",
	       (unsigned long)r.slabs_deferred, (unsigned long)r.slabs_released);
	EXPECT(uslab_cache_destroy(c2) == 0, "destroy c2");
	exit(0);
}

static void monitor_start_fails(void)
{
	if (TEST_SANITIZED) {
		printf("   (skipped: sanitizers reserve the address space)\n");
		return;
	}
	in_child(monitor_start_fails_child, 60, "background thread cannot start");
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "fork_typesafe_flush", fork_typesafe_flush },
	{ "fork_counters", fork_counters },
	{ "exit_destructor", exit_destructor },
	{ "exit_destructor_rcu", exit_destructor_rcu },
	{ "cancel_barrier", cancel_barrier },
	{ "monitor_start_fails", monitor_start_fails },
};

/* api_faults [NAME...]: the named scenarios, or all of them. */
int main(int argc, char **argv)
{
	/* Few blocks in flight, so cancel_barrier's writer is throttled quickly. */
	setenv("USLAB_RCU_MAX_INFLIGHT", "16", 1);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		bool run = argc < 2;

		for (int j = 1; j < argc; j++)
			run |= !strcmp(argv[j], tests[i].name);
		if (run) {
			unsigned long before = test_checks;

			tests[i].fn();
			printf("ok %-40s (%lu checks)\n", tests[i].name, test_checks - before);
			fflush(stdout);
		}
	}
	return 0;
}
