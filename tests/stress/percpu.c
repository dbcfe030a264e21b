// SPDX-License-Identifier: MIT
/*
 * cpu_sheaves.c - per-CPU sheaves (USLAB_PERCPU) under many threads, migration,
 * signals, fork, remote destroy and the automatic switch.
 *
 *	stress_percpu [THREADS [OPS [SEED]]]	(defaults 256 4000 1)
 *
 * Every object is stamped: word 0 a live marker (MAGIC_LIVE << 32 | the
 * allocating thread) written with an atomic exchange, which must not find
 * another live marker there (the object would be live twice); word 1 the
 * object's id (thread << 40 | sequence); word 2 its size in words; every
 * other word a hash of the id and the word's index. The stamps are checked
 * before every free, and the marker turned dead with a compare-and-swap
 * that fails if anyone wrote it meanwhile. One call in four goes to the
 * library's exported function instead of the inline fast path.
 *
 * test_threads_64, test_threads_many: 64 and THREADS workers (seeds SEED *
 * 1000 + thread) on a USLAB_PERCPU cache, OPS * 4 * 64 / threads operations
 * each: new objects into a shared slot array (an atomic exchange: the one
 * displaced is checked and freed, mostly another thread's), objects taken
 * out and freed, objects held a while, bulk allocations of 1, 16, 64 or 300
 * (freed with uslab_cache_free_bulk() through the cache or NULL, some
 * passed on through the slots). Meanwhile a migrator thread moves the
 * workers between the first two allowed CPUs and all of them with
 * sched_setaffinity() (the workers move themselves too now and then), a
 * signaller sends SIGUSR1 storms to random workers while ITIMER_REAL and
 * ITIMER_PROF (every 100 us of time and of CPU time) send them SIGALRM and
 * SIGPROF (the handler touches counters; SA_RESTART), a shrinker calls
 * uslab_cache_shrink() (which drains every CPU), uslab_cache_stats() and
 * now and then uslab_trim(), and the main thread forks (up to 3 times): each
 * child frees the objects of the slots, allocates and frees its own, and
 * checks that active_objs moved by exactly its own count. When the workers
 * are done (parked, holding objects) every live object is found, checked
 * and counted; one more child checks active_objs == the live objects after
 * its shrink, frees everything and destroys the cache; the parent's shrink
 * drains every CPU (active_objs == live, percpu_objects == 0) and the cache
 * validates. At the end allocated == freed; active_objs, num_slabs and
 * percpu_objects are 0; the cache destroys; no bug counted.
 *
 * test_api: the flag, uslab_cache_percpu() and the statistics' fields.
 * test_bulk: uslab_cache_alloc_bulk()/uslab_cache_free_bulk() of 1, 16,
 * 64, 300 on a per-CPU cache, the thread moving between the two.
 * test_destroy_*: one worker pinned on each allowed CPU (up to 8) fills its
 * CPU's sheaves; uslab_cache_destroy() from the main thread returns 0 with
 * the workers alive (they then use a new cache, which must hand out only
 * its own objects) or exited. test_auto_switch: a cache without the flag
 * used by 2 threads stays per thread; used by 64 (or 2 *
 * USLAB_PERCPU_THREADS * CPUs + 1, if more) holding objects and trading
 * them it becomes per CPU under USLAB_PERCPU=auto (the default).
 *
 * Where per-CPU sheaves cannot run (uslab_percpu_supported() == 0: TSan,
 * no rseq, or USLAB_PERCPU=0) everything runs on per-thread sheaves and
 * must hold the same; only the checks that need percpu == 1 are skipped.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <uslab.h>

#include "../test.h"

#define MAGIC_LIVE 0x5eedc0deull
#define MAGIC_DEAD 0xdeadf4eeull
#define NSLOTS 1024
#define HOLD 16
#define MAX_THREADS 1024
#define BULK_MAX 300
#define NFORKS 3

static unsigned int max_threads = 256;
static unsigned long ops = 4000;
static uint64_t seed0 = 1;
static int supported;		     /* uslab_percpu_supported() */
static int mode = -1;		     /* USLAB_PERCPU: 0, 1, or -1 (auto or unset) */
static int cpus[CPU_SETSIZE], ncpus; /* the CPUs this process may run on */
static cpu_set_t allowed;
static long ncpus_conf;
static bool in_child;
static unsigned long bugs0;

/* Exit from a failed check: a fork child leaves without exit handlers. */
static void die(void)
{
	fflush(NULL);
	if (in_child)
		_exit(1);
	exit(1);
}

/*
 * test.h's CHECK and RUN, for many threads: each counts its checks in its
 * own counter and adds it to checks_threads when it ends; a failure in a
 * fork child exits without the exit handlers (sanitizers' included).
 */
static __thread unsigned long tls_checks;
static _Atomic unsigned long checks_threads;

#undef CHECK
#define CHECK(cond, ...)                                                                       \
	do {                                                                                   \
		tls_checks++;                                                                  \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "FAIL%s %s:%d: %s: ", in_child ? " (fork child)" : "", \
				__FILE__, __LINE__, #cond);                                    \
			fprintf(stderr, __VA_ARGS__);                                          \
			fputc('\n', stderr);                                                   \
			die();                                                                 \
		}                                                                              \
	} while (0)

static unsigned long checks_total(void)
{
	return tls_checks + atomic_load(&checks_threads);
}

/* At the end of every thread but the main one. */
static void checks_done(void)
{
	atomic_fetch_add(&checks_threads, tls_checks);
}

#undef RUN
#define RUN(fn)                                                                   \
	do {                                                                      \
		unsigned long before_ = checks_total();                           \
		fn();                                                             \
		printf("ok %-40s (%lu checks)\n", #fn, checks_total() - before_); \
		fflush(stdout);                                                   \
	} while (0)

/* Statistics, zeroed first (fields the library does not fill read 0). */
static struct uslab_cache_stats stats_of(struct uslab_cache *c)
{
	struct uslab_cache_stats st;

	memset(&st, 0, sizeof(st));
	CHECK(uslab_cache_stats(c, &st) == 0, "uslab_cache_stats");
	return st;
}

/*
 * Whether @c must be per CPU once it is (flag, or switch): it must have
 * sheaves, and every cache has them unless USLAB_DEBUG puts the caches in
 * the debug tier, which has none.
 */
static int percpu_expected(struct uslab_cache *c)
{
	const char *debug = getenv("USLAB_DEBUG");

	return supported && (!debug || !*debug || stats_of(c).sheaf_capacity);
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, us % 1000000 * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ objects */

/* One thread's use of one cache. */
struct actor {
	struct uslab_cache *c;
	size_t words;
	uint32_t idx;
	uint64_t seed, seq;
	unsigned long alloc, freed, cross;
};

static inline uint64_t stamp_word(uint64_t id, size_t i)
{
	uint64_t x = (id + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xD6E8FEB86659FD93ull;

	return x ^ x >> 29;
}

static inline _Atomic uint64_t *marker_of(uint64_t *o)
{
	return (_Atomic uint64_t *)o;
}

/* Die with what is wrong with @o (checked by thread @who), or return its live marker. */
static uint64_t obj_check(uint64_t *o, size_t words, uint32_t who, const char *when)
{
	uint64_t m = atomic_load(marker_of(o)), id = o[1];

	if (m >> 32 != MAGIC_LIVE || o[2] != words || id >> 40 != (m & 0xffffffffu)) {
		fprintf(stderr,
			"FAIL %s: object %p (thread %u) header %#llx %#llx %#llx: not a live "
			"object of %zu words\n",
			when, (void *)o, who, (unsigned long long)m, (unsigned long long)id,
			(unsigned long long)o[2], words);
		die();
	}
	for (size_t i = 3; i < words; i++) {
		if (o[i] != stamp_word(id, i)) {
			fprintf(stderr,
				"FAIL %s: object %p (thread %u) id %#llx from thread %llu: word %zu "
				"is %#llx, not %#llx\n",
				when, (void *)o, who, (unsigned long long)id,
				(unsigned long long)(m & 0xffffffffu), i, (unsigned long long)o[i],
				(unsigned long long)stamp_word(id, i));
			die();
		}
	}
	return m;
}

/* Stamp a new object; its marker must not be a live one (handed out twice). */
static void obj_stamp(struct actor *a, uint64_t *o, const char *how)
{
	uint64_t id = (uint64_t)a->idx << 40 | a->seq++;
	uint64_t old = atomic_exchange(marker_of(o), MAGIC_LIVE << 32 | a->idx);

	if (old >> 32 == MAGIC_LIVE) {
		fprintf(stderr,
			"FAIL: %s gave thread %u object %p, live: marker %#llx (thread %llu), "
			"id %#llx\n",
			how, a->idx, (void *)o, (unsigned long long)old,
			(unsigned long long)(old & 0xffffffffu), (unsigned long long)o[1]);
		die();
	}
	o[1] = id;
	o[2] = a->words;
	for (size_t i = 3; i < a->words; i++)
		o[i] = stamp_word(id, i);
	a->alloc++;
}

/*
 * One call in four goes to the library's exported function (the macro
 * bypassed) instead of <uslab/fastpath.h>'s inline path: both have their
 * own critical sections.
 */
static uint64_t *obj_new(struct actor *a)
{
	uint64_t *o = rnd_next(&a->seed) % 4 ? uslab_cache_alloc(a->c) : (uslab_cache_alloc)(a->c);

	if (!o) {
		fprintf(stderr, "FAIL: thread %u: uslab_cache_alloc: %s\n", a->idx,
			strerror(errno));
		die();
	}
	obj_stamp(a, o, "uslab_cache_alloc");
	return o;
}

/* Check @o and mark it dead (before a free): nobody may have written it meanwhile. */
static void obj_kill(struct actor *a, uint64_t *o, const char *when)
{
	uint64_t m = obj_check(o, a->words, a->idx, when);

	if ((m & 0xffffffffu) != a->idx)
		a->cross++;
	if (!atomic_compare_exchange_strong(marker_of(o), &m, MAGIC_DEAD << 32 | a->idx)) {
		fprintf(stderr,
			"FAIL %s: object %p: marker changed under thread %u while it held it: "
			"%#llx\n",
			when, (void *)o, a->idx, (unsigned long long)m);
		die();
	}
	a->freed++;
}

static void obj_free(struct actor *a, uint64_t *o)
{
	if (!o)
		return;
	obj_kill(a, o, "before its free");
	if (rnd_next(&a->seed) % 4)
		uslab_cache_free(a->c, o);
	else
		(uslab_cache_free)(a->c, o);
}

static int cmp_ptr(const void *x, const void *y)
{
	uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;

	return a < b ? -1 : a > b;
}

/* Die if two of the @n pointers of @p are the same object. */
static void check_distinct(void **p, size_t n, const char *what)
{
	void **s = malloc(n * sizeof(*s) + 1);

	CHECK(s, "malloc");
	memcpy(s, p, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_ptr);
	for (size_t i = 1; i < n; i++)
		CHECK(s[i] != s[i - 1], "%s: object %p twice among %zu", what, s[i], n);
	free(s);
}

/* ------------------------------------------------------------ CPUs and signals */

static void set_mask_for(cpu_set_t *m, unsigned int choice)
{
	CPU_ZERO(m);
	if (choice % 3 == 2 || ncpus < 2) {
		*m = allowed;
		return;
	}
	CPU_SET(cpus[choice % 3 == 0 ? 0 : 1], m);
}

static void pin_self(int cpu)
{
	cpu_set_t m;

	CPU_ZERO(&m);
	CPU_SET(cpu, &m);
	CHECK(sched_setaffinity(0, sizeof(m), &m) == 0, "pin to CPU %d: %s", cpu, strerror(errno));
}

static _Atomic unsigned long n_signals;
static __thread volatile unsigned long tls_signals;

static void on_signal(int sig)
{
	(void)sig;
	tls_signals++;
	atomic_fetch_add_explicit(&n_signals, 1, memory_order_relaxed);
}

static void signals_block(int how)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	sigaddset(&s, SIGPROF);
	sigaddset(&s, SIGALRM);
	CHECK(pthread_sigmask(how, &s, NULL) == 0, "pthread_sigmask");
}

/* ------------------------------------------------------------ the threads phase */

struct worker {
	struct actor a;
	pthread_t thread;
	_Atomic pid_t tid;
	uint64_t *hold[HOLD];
	unsigned long bulk, moves, sigs;
	uint64_t cpus_seen;
	unsigned long nops;
};

static struct worker *workers;
static unsigned int nworkers;
static _Atomic(uint64_t *) slots[NSLOTS];
static pthread_barrier_t b_start, b_done, b_exit;
static _Atomic unsigned int finished;
static _Atomic bool stop_helpers;
static _Atomic unsigned long n_moves, n_kills, n_shrinks;
static struct uslab_cache *pc; /* the phase's cache */
static size_t pc_words;
static int expect_percpu; /* the phase's cache must be per CPU */

static void note_cpu(struct worker *w)
{
	int cpu = sched_getcpu();

	if (cpu >= 0 && cpu < 64)
		w->cpus_seen |= 1ull << cpu;
}

/* A bulk allocation of 1, 16, 64 or 300; a third passed on through the slots. */
static void worker_bulk(struct worker *w)
{
	static const size_t ns[] = { 1, 16, 64, BULK_MAX };
	void *p[BULK_MAX];
	size_t n = ns[rnd_next(&w->a.seed) % 4], m = 0;
	bool lib = rnd_next(&w->a.seed) % 4 == 0; /* the exported functions, not the inline */

	if ((lib ? (uslab_cache_alloc_bulk)(pc, n, p) : uslab_cache_alloc_bulk(pc, n, p)) != n) {
		fprintf(stderr, "FAIL: thread %u: alloc_bulk(%zu): %s\n", w->a.idx, n,
			strerror(errno));
		die();
	}
	for (size_t i = 0; i < n; i++) {
		CHECK(p[i], "alloc_bulk(%zu): entry %zu NULL", n, i);
		obj_stamp(&w->a, p[i], "uslab_cache_alloc_bulk");
	}
	if (rnd_next(&w->a.seed) % 4 == 0)
		note_cpu(w); /* (the free may go to another CPU's sheaf) */
	for (size_t i = 0; i < n; i++) {
		if (rnd_next(&w->a.seed) % 3 == 0) {
			size_t k = rnd_next(&w->a.seed) % NSLOTS;

			obj_free(&w->a, atomic_exchange(&slots[k], (uint64_t *)p[i]));
		} else {
			p[m++] = p[i];
		}
	}
	for (size_t i = 0; i < m; i++)
		obj_kill(&w->a, p[i], "before free_bulk");
	if (lib)
		(uslab_cache_free_bulk)(rnd_next(&w->a.seed) % 2 ? pc : NULL, m, p);
	else
		uslab_cache_free_bulk(rnd_next(&w->a.seed) % 2 ? pc : NULL, m, p);
	for (size_t i = 0; i < m; i++)
		CHECK(!p[i], "free_bulk left entry %zu of %zu", i, m);
	w->bulk++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct actor *a = &w->a;

	w->tid = (pid_t)syscall(SYS_gettid);
	signals_block(SIG_UNBLOCK);
	pthread_barrier_wait(&b_start);
	for (unsigned long n = 0; n < w->nops; n++) {
		uint64_t r = rnd_next(&a->seed) % 100;
		size_t k = rnd_next(&a->seed) % NSLOTS;

		if (r < 45) {
			obj_free(a, atomic_exchange(&slots[k], obj_new(a)));
		} else if (r < 55) {
			obj_free(a, atomic_exchange(&slots[k], NULL));
		} else if (r < 90) {
			size_t h = rnd_next(&a->seed) % HOLD;

			obj_free(a, w->hold[h]);
			w->hold[h] = obj_new(a);
		} else if (r < 93) {
			worker_bulk(w);
		} else if (r < 99) {
			note_cpu(w);
		} else if (rnd_next(&a->seed) % 8 == 0 && ncpus > 1) {
			/* Move itself: one CPU or all of them. */
			cpu_set_t m;

			set_mask_for(&m, (unsigned int)rnd_next(&a->seed));
			CHECK(sched_setaffinity(0, sizeof(m), &m) == 0,
			      "sched_setaffinity self: %s", strerror(errno));
			w->moves++;
		} else if (rnd_next(&a->seed) % 16 == 0) {
			uslab_thread_flush();
		}
	}
	note_cpu(w);
	w->sigs = tls_signals;
	atomic_fetch_add(&finished, 1);
	pthread_barrier_wait(&b_done);
	/* Parked while the main thread counts, forks and shrinks. */
	pthread_barrier_wait(&b_exit);
	signals_block(SIG_BLOCK);
	for (int h = 0; h < HOLD; h++) {
		obj_free(a, w->hold[h]);
		w->hold[h] = NULL;
	}
	checks_done();
	return NULL; /* exits with objects in its (or its CPU's) sheaves */
}

/* Moves the workers between CPU 0, CPU 1 and all the allowed CPUs. */
static void *migrator_main(void *arg)
{
	uint64_t s = seed0 * 1000 + 999;

	(void)arg;
	for (unsigned int i = 0; !atomic_load(&stop_helpers); i = (i + 1) % nworkers) {
		cpu_set_t m;
		pid_t tid = atomic_load(&workers[i].tid);

		set_mask_for(&m, (unsigned int)rnd_next(&s));
		CHECK(sched_setaffinity(tid, sizeof(m), &m) == 0, "sched_setaffinity(%d): %s",
		      (int)tid, strerror(errno));
		n_moves++;
		if (i % 4 == 3)
			sleep_us(50);
	}
	checks_done();
	return NULL;
}

/* SIGUSR1 storms on random workers. */
static void *signaller_main(void *arg)
{
	uint64_t s = seed0 * 1000 + 998;

	(void)arg;
	while (!atomic_load(&stop_helpers)) {
		for (int i = 0; i < 64; i++) {
			struct worker *w = &workers[rnd_next(&s) % nworkers];

			CHECK(pthread_kill(w->thread, SIGUSR1) == 0, "pthread_kill");
			n_kills++;
		}
		sleep_us(50);
	}
	checks_done();
	return NULL;
}

/* Shrinks the cache (draining every CPU) and reads its statistics while it is in use. */
static void *shrinker_main(void *arg)
{
	(void)arg;
	for (unsigned long n = 0; !atomic_load(&stop_helpers); n++) {
		struct uslab_cache_stats st;

		CHECK(uslab_cache_shrink(pc) == 0, "shrink");
		st = stats_of(pc);
		CHECK(st.percpu == (unsigned int)expect_percpu, "stats.percpu %u, expected %d",
		      st.percpu, expect_percpu);
		CHECK(st.percpu_cpus <= (unsigned long)ncpus_conf &&
			      (expect_percpu || !st.percpu_cpus),
		      "stats.percpu_cpus %u (CPUs %ld)", st.percpu_cpus, ncpus_conf);
		if (n % 16 == 15)
			uslab_trim();
		n_shrinks++;
		sleep_us(500);
	}
	checks_done();
	return NULL;
}

static unsigned long child_live; /* live objects at the quiescent fork */

/*
 * A child forked while the workers run: the objects other threads hold are
 * unknown, but active_objs must move by exactly what this child does.
 */
static void child_concurrent(void)
{
	struct actor a = { .c = pc, .words = pc_words, .idx = 0xfffe, .seed = seed0 };
	struct uslab_cache_stats st;
	unsigned long base, taken = 0;
	enum { K = 2000 };
	uint64_t **mine = malloc(K * sizeof(*mine));

	CHECK(mine, "malloc");
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.percpu_objects == 0, "after shrink: %lu objects in CPUs' sheaves",
	      st.percpu_objects);
	base = st.active_objs;
	for (size_t k = 0; k < NSLOTS; k++) {
		uint64_t *o = atomic_exchange(&slots[k], NULL);

		if (o) {
			obj_kill(&a, o, "fork child, before its free");
			uslab_cache_free(pc, o);
			taken++;
		}
	}
	for (size_t i = 0; i < K; i++)
		mine[i] = obj_new(&a);
	for (size_t i = 0; i < K; i += 2)
		obj_free(&a, mine[i]);
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.active_objs == base - taken + K / 2 && st.percpu_objects == 0,
	      "active %lu, expected %lu - %lu freed from the slots + %d held; percpu_objects %lu",
	      st.active_objs, base, taken, K / 2, st.percpu_objects);
	for (size_t i = 1; i < K; i += 2)
		obj_free(&a, mine[i]);
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	CHECK(stats_of(pc).active_objs == base - taken, "active %lu, expected %lu",
	      stats_of(pc).active_objs, base - taken);
	free(mine);
}

/* A child forked with the workers parked: every live object is known. */
static void child_quiescent(void)
{
	struct actor a = { .c = pc, .words = pc_words, .idx = 0xfffd, .seed = seed0 };
	struct uslab_cache_stats st;
	enum { K = 1000 };
	uint64_t **mine = malloc(K * sizeof(*mine));

	CHECK(mine, "malloc");
	CHECK(uslab_cache_validate(pc) == 0, "validate after fork");
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.active_objs == child_live && st.percpu_objects == 0,
	      "after fork and shrink: active %lu, the program holds %lu; percpu_objects %lu",
	      st.active_objs, child_live, st.percpu_objects);
	for (size_t i = 0; i < K; i++)
		mine[i] = obj_new(&a);
	for (size_t i = 0; i < K; i += 2)
		obj_free(&a, mine[i]);
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.active_objs == child_live + K / 2, "active %lu, expected %lu + %d", st.active_objs,
	      child_live, K / 2);
	for (size_t i = 1; i < K; i += 2)
		obj_free(&a, mine[i]);
	for (size_t k = 0; k < NSLOTS; k++) {
		uint64_t *o = atomic_exchange(&slots[k], NULL);

		if (o) {
			obj_kill(&a, o, "fork child, before its free");
			uslab_cache_free(pc, o);
		}
	}
	for (unsigned int i = 0; i < nworkers; i++) {
		for (int h = 0; h < HOLD; h++) {
			if (workers[i].hold[h]) {
				obj_kill(&a, workers[i].hold[h], "fork child, before its free");
				uslab_cache_free(pc, workers[i].hold[h]);
			}
		}
	}
	CHECK(uslab_cache_validate(pc) == 0, "validate before the last shrink");
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.active_objs == 0 && st.num_slabs == 0 && st.percpu_objects == 0,
	      "everything freed: active %lu, slabs %lu, percpu_objects %lu", st.active_objs,
	      st.num_slabs, st.percpu_objects);
	CHECK(uslab_cache_destroy(pc) == 0, "destroy in the child");
	CHECK(uslab_bug_count() == bugs0, "bugs counted: %lu", uslab_bug_count() - bugs0);
	free(mine);
}

/* Fork, run @fn in the child (which must exit 0 within its alarm), and wait. */
static void fork_check(void (*fn)(void), const char *what)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		in_child = true;
		signal(SIGALRM, SIG_DFL);
		signals_block(SIG_UNBLOCK);
		alarm(TEST_SANITIZED ? 120 : 30); /* a hang dies by SIGALRM */
		fn();
		fflush(NULL);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s child: status %#x (%s %d%s)", what,
	      status, WIFEXITED(status) ? "exit" : "signal",
	      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
	      WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? ": hung" : "");
}

static void run_phase(unsigned int nthreads, unsigned long nops, size_t size)
{
	pthread_t helpers[3];
	unsigned int nhelpers = 0, forks = 0, cpus_moved = 0;
	unsigned long alloc = 0, freed = 0, cross = 0, bulk = 0, moves = 0, sigs = 0, live;
	struct itimerval it = { { 0, TEST_SANITIZED ? 1000 : 100 },
				{ 0, TEST_SANITIZED ? 1000 : 100 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	struct uslab_cache_stats st;
	size_t nlive = 0;
	void **all;
	double t0 = now_s();

	pc = uslab_cache_create("percpu", size, NULL, USLAB_PERCPU);
	CHECK(pc, "create: %s", strerror(errno));
	pc_words = size / 8;
	expect_percpu = percpu_expected(pc);
	CHECK(uslab_cache_percpu(pc) == expect_percpu, "uslab_cache_percpu %d, supported %d",
	      uslab_cache_percpu(pc), supported);
	nworkers = nthreads;
	workers = calloc(nthreads, sizeof(*workers));
	CHECK(workers, "calloc");
	finished = 0;
	stop_helpers = false;
	n_moves = n_kills = n_shrinks = 0;
	n_signals = 0;
	pthread_barrier_init(&b_start, NULL, nthreads + 1);
	pthread_barrier_init(&b_done, NULL, nthreads + 1);
	pthread_barrier_init(&b_exit, NULL, nthreads + 1);
	for (unsigned int i = 0; i < nthreads; i++) {
		struct worker *w = &workers[i];

		w->a = (struct actor){
			.c = pc, .words = pc_words, .idx = i + 1, .seed = seed0 * 1000 + i
		};
		w->nops = nops;
		CHECK(pthread_create(&w->thread, NULL, worker_main, w) == 0, "pthread_create %u",
		      i);
	}
	/* Every worker's tid is known once they are all at the start. */
	for (unsigned int i = 0; i < nthreads; i++)
		while (!atomic_load(&workers[i].tid))
			sleep_us(100);
	if (ncpus > 1)
		CHECK(pthread_create(&helpers[nhelpers++], NULL, migrator_main, NULL) == 0,
		      "migrator");
	CHECK(pthread_create(&helpers[nhelpers++], NULL, signaller_main, NULL) == 0, "signaller");
	CHECK(pthread_create(&helpers[nhelpers++], NULL, shrinker_main, NULL) == 0, "shrinker");
	CHECK(setitimer(ITIMER_PROF, &it, NULL) == 0 && setitimer(ITIMER_REAL, &it, NULL) == 0,
	      "setitimer");
	pthread_barrier_wait(&b_start);
	/* Forks while the workers run: the first at once, so that one surely does. */
	do {
		if (forks < NFORKS) {
			fork_check(child_concurrent, "concurrent");
			forks++;
		}
		sleep_us(20000);
	} while (atomic_load(&finished) < nthreads);
	pthread_barrier_wait(&b_done);
	CHECK(setitimer(ITIMER_PROF, &off, NULL) == 0 && setitimer(ITIMER_REAL, &off, NULL) == 0,
	      "setitimer off");
	stop_helpers = true;
	for (unsigned int i = 0; i < nhelpers; i++)
		pthread_join(helpers[i], NULL);

	/* Quiescent: every live object is in a slot or held by a parked worker. */
	for (unsigned int i = 0; i < nthreads; i++) {
		struct worker *w = &workers[i];

		alloc += w->a.alloc;
		freed += w->a.freed;
		cross += w->a.cross;
		bulk += w->bulk;
		moves += w->moves;
		sigs += w->sigs;
		cpus_moved += __builtin_popcountll(w->cpus_seen) > 1;
	}
	live = alloc - freed;
	all = malloc((NSLOTS + (size_t)nthreads * HOLD) * sizeof(*all));
	CHECK(all, "malloc");
	for (size_t k = 0; k < NSLOTS; k++)
		if (slots[k])
			all[nlive++] = slots[k];
	for (unsigned int i = 0; i < nthreads; i++)
		for (int h = 0; h < HOLD; h++)
			if (workers[i].hold[h])
				all[nlive++] = workers[i].hold[h];
	CHECK(nlive == live, "live objects: %zu found, %lu allocated - %lu freed", nlive, alloc,
	      freed);
	check_distinct(all, nlive, "live objects");
	for (size_t i = 0; i < nlive; i++)
		obj_check(all[i], pc_words, 0, "parked");
	free(all);
	st = stats_of(pc);
	CHECK(st.percpu == (unsigned int)expect_percpu, "stats.percpu %u", st.percpu);
	CHECK(st.active_objs >= live + st.percpu_objects,
	      "active %lu < %lu live + %lu in CPUs' sheaves", st.active_objs, live,
	      st.percpu_objects);
	CHECK(!expect_percpu ||
		      (st.percpu_cpus >= 1 && st.percpu_cpus <= (unsigned long)ncpus_conf),
	      "percpu_cpus %u", st.percpu_cpus);
	child_live = live;
	fork_check(child_quiescent, "quiescent");
	forks++;
	/*
	 * The parent's shrink drains every CPU's sheaves (per thread: only its
	 * own). With NUMA on, each parked worker may also hold other nodes'
	 * objects on their way home (its remote sheaf, per thread).
	 */
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.percpu_objects == 0, "after shrink: %lu objects in CPUs' sheaves",
	      st.percpu_objects);
	CHECK(expect_percpu && uslab_numa_nodes() == 1 ? st.active_objs == live :
							 st.active_objs >= live,
	      "after shrink, workers parked: active %lu, live %lu (percpu %d)", st.active_objs,
	      live, expect_percpu);
	/* (Not while other threads trade: validate's snapshot of the barn would be stale.) */
	CHECK(uslab_cache_validate(pc) == 0, "validate, workers parked, barn empty");

	pthread_barrier_wait(&b_exit);
	for (unsigned int i = 0; i < nthreads; i++)
		pthread_join(workers[i].thread, NULL);
	/* The workers freed their holds after the count above: count again. */
	alloc = freed = 0;
	for (unsigned int i = 0; i < nthreads; i++) {
		alloc += workers[i].a.alloc;
		freed += workers[i].a.freed;
	}
	{
		struct actor a = { .c = pc, .words = pc_words, .idx = 0 };

		for (size_t k = 0; k < NSLOTS; k++)
			obj_free(&a, atomic_exchange(&slots[k], NULL));
		freed += a.freed;
	}
	CHECK(alloc == freed, "every object freed once: %lu allocated, %lu freed", alloc, freed);
	CHECK(nthreads == 1 || cross > 0, "freed by another thread: %lu of %lu", cross, freed);
	CHECK(n_signals > 0 && sigs > 0, "signals delivered: %lu, in the workers %lu",
	      (unsigned long)n_signals, sigs);
	CHECK(ncpus < 2 || (n_moves + moves > 0 && cpus_moved > 0),
	      "migrations: %lu, workers seen on two CPUs %u", (unsigned long)n_moves + moves,
	      cpus_moved);
	uslab_thread_flush();
	CHECK(uslab_cache_shrink(pc) == 0, "shrink");
	st = stats_of(pc);
	CHECK(st.active_objs == 0 && st.num_slabs == 0 && st.percpu_objects == 0,
	      "at the end: active %lu, slabs %lu, percpu_objects %lu", st.active_objs, st.num_slabs,
	      st.percpu_objects);
	CHECK(st.percpu == (unsigned int)expect_percpu, "stats.percpu %u", st.percpu);
	CHECK(uslab_cache_destroy(pc) == 0, "destroy");
	CHECK(uslab_bug_count() == bugs0, "bugs counted: %lu", uslab_bug_count() - bugs0);
	pthread_barrier_destroy(&b_start);
	pthread_barrier_destroy(&b_done);
	pthread_barrier_destroy(&b_exit);
	printf("   %u threads x %lu ops, %zu B: %lu objects, %lu freed by another thread, %lu bulk "
	       "calls; %lu migrations (%u workers seen on 2+ CPUs), %lu signals (%lu kills), %lu "
	       "shrinks, %u forks; %.1f s\n",
	       nthreads, nops, size, alloc, cross, bulk, (unsigned long)n_moves + moves, cpus_moved,
	       (unsigned long)n_signals, (unsigned long)n_kills, (unsigned long)n_shrinks, forks,
	       now_s() - t0);
	free(workers);
	workers = NULL;
}

static void test_threads_64(void)
{
	run_phase(64, ops * 4, 64);
}

static void test_threads_many(void)
{
	run_phase(max_threads, ops * 4 * 64 / max_threads, 200);
}

/* ------------------------------------------------------------ API, bulk */

static void test_api(void)
{
	struct uslab_cache_args noshv = { .sheaf_capacity = 1 };
	struct uslab_cache *c = uslab_cache_create("percpu-api", 40, NULL, USLAB_PERCPU);
	struct uslab_cache *n = uslab_cache_create("percpu-nosheaves", 40, &noshv, USLAB_PERCPU);
	struct uslab_cache_stats st;
	int exp;
	void *p;

	CHECK(c && n, "create: %s", strerror(errno));
	exp = percpu_expected(c);
	CHECK(uslab_cache_percpu(NULL) == 0, "uslab_cache_percpu(NULL)");
	CHECK(uslab_cache_percpu(c) == exp, "percpu %d, supported %d", uslab_cache_percpu(c),
	      supported);
	CHECK(uslab_cache_percpu(n) == 0, "a cache without sheaves is not per CPU");
	p = uslab_cache_alloc(c);
	CHECK(p, "alloc");
	st = stats_of(c);
	CHECK(st.percpu == (unsigned int)exp && st.active_objs >= 1, "percpu %u, active %lu",
	      st.percpu, st.active_objs);
	CHECK(!exp || (st.percpu_cpus >= 1 && st.percpu_sheaves >= 1),
	      "after an alloc: percpu_cpus %u, percpu_sheaves %lu", st.percpu_cpus,
	      st.percpu_sheaves);
	CHECK(exp || (st.percpu_cpus == 0 && st.percpu_objects == 0 && st.percpu_sheaves == 0),
	      "per thread: percpu_cpus %u, objects %lu, sheaves %lu", st.percpu_cpus,
	      st.percpu_objects, st.percpu_sheaves);
	uslab_cache_free(c, p);
	st = stats_of(c);
	CHECK(!exp || st.percpu_objects >= 1, "the free went to a CPU's sheaf: %lu",
	      st.percpu_objects);
	CHECK(uslab_cache_shrink(c) == 0, "shrink");
	st = stats_of(c);
	CHECK(st.active_objs == 0 && st.percpu_objects == 0, "after shrink: active %lu, percpu %lu",
	      st.active_objs, st.percpu_objects);
	p = uslab_cache_alloc(n);
	CHECK(p, "alloc without sheaves");
	uslab_cache_free(n, p);
	CHECK(stats_of(n).percpu == 0, "no sheaves: stats.percpu 0");
	CHECK(uslab_cache_destroy(c) == 0 && uslab_cache_destroy(n) == 0, "destroy");
}

/* Bulk calls of 1, 16, 64 and 300 on a per-CPU cache, the thread moving between them. */
static void test_bulk(void)
{
	static const size_t ns[] = { 1, 16, 64, BULK_MAX };
	struct actor a = { .words = 10, .idx = 0xfff0, .seed = seed0 };
	void *prev[BULK_MAX], *p[BULK_MAX];
	size_t nprev = 0, reps = TEST_SANITIZED ? 40 : 200;
	struct uslab_cache_stats st;
	unsigned int move = 0;

	a.c = uslab_cache_create("percpu-bulk", a.words * 8, NULL, USLAB_PERCPU);
	CHECK(a.c, "create");
	for (size_t t = 0; t < 4; t++) {
		size_t n = ns[t];

		for (size_t r = 0; r < reps; r++) {
			uint64_t *single = obj_new(&a);

			size_t got = r % 4 < 2 ? uslab_cache_alloc_bulk(a.c, n, p) :
						 (uslab_cache_alloc_bulk)(a.c, n, p);

			CHECK(got == n, "alloc_bulk(%zu): %zu, %s", n, got, strerror(errno));
			for (size_t i = 0; i < n; i++) {
				CHECK(p[i] && uslab_cache_of(p[i]) == a.c,
				      "alloc_bulk(%zu): entry %zu %p", n, i, p[i]);
				obj_stamp(&a, p[i], "uslab_cache_alloc_bulk");
			}
			check_distinct(p, n, "one bulk allocation");
			if (ncpus > 1) {
				cpu_set_t m;

				set_mask_for(&m, move++);
				CHECK(sched_setaffinity(0, sizeof(m), &m) == 0, "move");
			}
			/* The previous batch, still live during this one's allocation, goes now. */
			for (size_t i = 0; i < nprev; i++)
				obj_kill(&a, prev[i], "before free_bulk");
			if (r % 3)
				uslab_cache_free_bulk(r % 2 ? a.c : NULL, nprev, prev);
			else
				(uslab_cache_free_bulk)(r % 2 ? a.c : NULL, nprev, prev);
			for (size_t i = 0; i < nprev; i++)
				CHECK(!prev[i], "free_bulk left entry %zu", i);
			memcpy(prev, p, n * sizeof(*p));
			nprev = n;
			obj_free(&a, single);
		}
	}
	for (size_t i = 0; i < nprev; i++)
		obj_kill(&a, prev[i], "before free_bulk");
	uslab_cache_free_bulk(a.c, nprev, prev);
	sched_setaffinity(0, sizeof(allowed), &allowed);
	CHECK(a.alloc == a.freed, "allocated %lu, freed %lu", a.alloc, a.freed);
	st = stats_of(a.c);
	CHECK(st.percpu == (unsigned int)percpu_expected(a.c), "stats.percpu %u", st.percpu);
	CHECK(uslab_cache_shrink(a.c) == 0, "shrink");
	st = stats_of(a.c);
	CHECK(st.active_objs == 0 && st.percpu_objects == 0, "after shrink: active %lu, percpu %lu",
	      st.active_objs, st.percpu_objects);
	CHECK(uslab_cache_destroy(a.c) == 0, "destroy");
}

/* ------------------------------------------------------------ destroy with remote sheaves */

struct pinned {
	pthread_t thread;
	struct actor a;
	int cpu;
	bool stay; /* stays alive across the destroy, then uses the new cache */
};

static pthread_barrier_t b_filled, b_destroyed;
static struct uslab_cache *dc2; /* the cache created after the destroy */

static void *pinned_main(void *arg)
{
	struct pinned *p = arg;
	uint64_t *o[300];

	pin_self(p->cpu);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 300; i++)
			o[i] = obj_new(&p->a);
		for (int i = 0; i < 300; i++)
			obj_free(&p->a, o[i]);
	}
	/* A few more, so the CPU's sheaves surely hold some. */
	for (int i = 0; i < 5; i++)
		o[i] = obj_new(&p->a);
	for (int i = 0; i < 5; i++)
		obj_free(&p->a, o[i]);
	CHECK(sched_getcpu() == p->cpu, "pinned to CPU %d, on %d", p->cpu, sched_getcpu());
	pthread_barrier_wait(&b_filled);
	if (!p->stay) {
		checks_done();
		return NULL;
	}
	pthread_barrier_wait(&b_destroyed);
	/* The destroyed cache's slot may be the new cache's: only its own objects. */
	p->a.c = dc2;
	p->a.words = 16;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 300; i++) {
			o[i] = obj_new(&p->a);
			CHECK(uslab_cache_of(o[i]) == dc2,
			      "CPU %d: the new cache handed out %p of cache %p (%s)", p->cpu,
			      (void *)o[i], (void *)uslab_cache_of(o[i]),
			      uslab_cache_of(o[i]) ? uslab_cache_name(uslab_cache_of(o[i])) : "-");
		}
		for (int i = 0; i < 300; i++)
			obj_free(&p->a, o[i]);
	}
	checks_done();
	return NULL;
}

static void destroy_remote(bool stay)
{
	unsigned int n = ncpus < 8 ? (unsigned int)ncpus : 8;
	struct pinned *p = calloc(n, sizeof(*p));
	struct uslab_cache *c = uslab_cache_create("percpu-destroy", 96, NULL, USLAB_PERCPU);
	struct uslab_cache_stats st;
	unsigned long bugs;

	CHECK(p && c, "create");
	pthread_barrier_init(&b_filled, NULL, n + 1);
	pthread_barrier_init(&b_destroyed, NULL, n + 1);
	for (unsigned int i = 0; i < n; i++) {
		p[i].a = (struct actor){
			.c = c, .words = 12, .idx = 0x100 + i, .seed = seed0 * 1000 + 500 + i
		};
		p[i].cpu = cpus[i];
		p[i].stay = stay;
		CHECK(pthread_create(&p[i].thread, NULL, pinned_main, &p[i]) == 0,
		      "pthread_create");
	}
	pthread_barrier_wait(&b_filled);
	st = stats_of(c);
	CHECK(!percpu_expected(c) || (st.percpu_objects > 0 && st.percpu_cpus >= n),
	      "%u pinned threads freed into their CPUs' sheaves: percpu_objects %lu, cpus %u", n,
	      st.percpu_objects, st.percpu_cpus);
	if (!stay)
		for (unsigned int i = 0; i < n; i++)
			pthread_join(p[i].thread, NULL);
	bugs = uslab_bug_count();
	CHECK(uslab_cache_destroy(c) == 0, "destroy with objects in %u CPUs' sheaves (%s)", n,
	      stay ? "their threads alive" : "their threads exited");
	CHECK(uslab_bug_count() == bugs, "bugs counted by the destroy: %lu",
	      uslab_bug_count() - bugs);
	if (stay) {
		dc2 = uslab_cache_create("percpu-after", 128, NULL, USLAB_PERCPU);
		CHECK(dc2, "create");
		pthread_barrier_wait(&b_destroyed);
		for (unsigned int i = 0; i < n; i++)
			pthread_join(p[i].thread, NULL);
		CHECK(uslab_cache_shrink(dc2) == 0, "shrink");
		st = stats_of(dc2);
		CHECK(st.active_objs == 0 && st.percpu_objects == 0, "new cache: active %lu, %lu",
		      st.active_objs, st.percpu_objects);
		CHECK(uslab_cache_destroy(dc2) == 0, "destroy the new cache");
	}
	for (unsigned int i = 0; i < n; i++)
		CHECK(p[i].a.alloc == p[i].a.freed, "thread %u: %lu allocated, %lu freed", i,
		      p[i].a.alloc, p[i].a.freed);
	pthread_barrier_destroy(&b_filled);
	pthread_barrier_destroy(&b_destroyed);
	free(p);
	CHECK(uslab_bug_count() == bugs0, "bugs counted: %lu", uslab_bug_count() - bugs0);
}

static void test_destroy_threads_alive(void)
{
	destroy_remote(true);
}

static void test_destroy_threads_exited(void)
{
	destroy_remote(false);
}

/* ------------------------------------------------------------ USLAB_PERCPU=auto */

#define AUTO_ROUNDS 3
#define AUTO_KEEP 32
static pthread_barrier_t b_round;
static struct uslab_cache *ac;

struct auto_worker {
	pthread_t thread;
	struct actor a;
	uint64_t *keep[AUTO_KEEP]; /* held across the rounds (and the switch) */
};

static void *auto_main(void *arg)
{
	struct auto_worker *w = arg;
	uint64_t *o[200];

	for (int i = 0; i < AUTO_KEEP; i++)
		w->keep[i] = obj_new(&w->a);
	for (int round = 0; round < AUTO_ROUNDS; round++) {
		for (int i = 0; i < 200; i++)
			o[i] = obj_new(&w->a);
		for (int i = 0; i < 200; i++)
			obj_free(&w->a, o[i]);
		/* Trades: mostly another thread's object freed, maybe in the other mode. */
		for (int i = 0; i < 50; i++) {
			size_t k = rnd_next(&w->a.seed) % NSLOTS;

			obj_free(&w->a, atomic_exchange(&slots[k], obj_new(&w->a)));
		}
		/* Every thread holds the cache's sheaves at once. */
		pthread_barrier_wait(&b_round);
		pthread_barrier_wait(&b_round);
	}
	for (int i = 0; i < AUTO_KEEP; i++)
		obj_free(&w->a, w->keep[i]);
	checks_done();
	return NULL;
}

/* Run @n threads on a new cache without the flag; return uslab_cache_percpu() at the end. */
static int auto_run(unsigned int n, const char *name, int *first_switch)
{
	struct auto_worker *w = calloc(n, sizeof(*w));
	struct actor mine = { .words = 6, .idx = 0 };
	struct uslab_cache_stats st;
	unsigned long alloc = 0, freed = 0;
	int percpu = 0;

	ac = uslab_cache_create(name, 48, NULL, 0);
	CHECK(w && ac, "create");
	mine.c = ac;
	CHECK(uslab_cache_percpu(ac) == (supported && mode == 1),
	      "a new cache without the flag: percpu %d (USLAB_PERCPU=%d)", uslab_cache_percpu(ac),
	      mode);
	pthread_barrier_init(&b_round, NULL, n + 1);
	for (unsigned int i = 0; i < n; i++) {
		w[i].a = (struct actor){
			.c = ac, .words = 6, .idx = 0x200 + i, .seed = seed0 * 1000 + 700 + i
		};
		CHECK(pthread_create(&w[i].thread, NULL, auto_main, &w[i]) == 0, "pthread_create");
	}
	*first_switch = -1;
	for (int round = 0; round < AUTO_ROUNDS; round++) {
		unsigned long live = 0;

		pthread_barrier_wait(&b_round);
		percpu = uslab_cache_percpu(ac);
		CHECK(percpu || *first_switch < 0, "a cache switched back to per-thread sheaves");
		if (percpu && *first_switch < 0)
			*first_switch = round;
		/* The threads are parked: what they hold is known. */
		for (unsigned int i = 0; i < n; i++)
			live += w[i].a.alloc - w[i].a.freed;
		st = stats_of(ac);
		CHECK(st.active_objs >= live && st.percpu == (unsigned int)percpu,
		      "round %d: active %lu, live %lu; stats.percpu %u, percpu %d", round,
		      st.active_objs, live, st.percpu, percpu);
		CHECK(uslab_cache_shrink(ac) == 0, "shrink");
		st = stats_of(ac);
		CHECK(st.active_objs >= live && st.percpu_objects == 0,
		      "round %d, after shrink: active %lu, live %lu, percpu_objects %lu", round,
		      st.active_objs, live, st.percpu_objects);
		pthread_barrier_wait(&b_round);
	}
	for (unsigned int i = 0; i < n; i++) {
		pthread_join(w[i].thread, NULL);
		alloc += w[i].a.alloc;
		freed += w[i].a.freed;
	}
	for (size_t k = 0; k < NSLOTS; k++)
		obj_free(&mine, atomic_exchange(&slots[k], NULL));
	CHECK(alloc == freed + mine.freed, "allocated %lu, freed %lu", alloc, freed + mine.freed);
	uslab_thread_flush();
	CHECK(uslab_cache_shrink(ac) == 0, "shrink");
	st = stats_of(ac);
	CHECK(st.active_objs == 0 && st.num_slabs == 0 && st.percpu_objects == 0,
	      "%s: active %lu, slabs %lu, percpu_objects %lu", name, st.active_objs, st.num_slabs,
	      st.percpu_objects);
	CHECK(st.percpu == (unsigned int)percpu && uslab_cache_percpu(ac) == percpu,
	      "%s: stats.percpu %u, uslab_cache_percpu %d after %d", name, st.percpu,
	      uslab_cache_percpu(ac), percpu);
	CHECK(uslab_cache_destroy(ac) == 0, "destroy");
	pthread_barrier_destroy(&b_round);
	free(w);
	return percpu;
}

static void test_auto_switch(void)
{
	const char *e = getenv("USLAB_PERCPU_THREADS");
	long per = e && atol(e) > 0 ? atol(e) : 32; /* the default (doc/tuning.md) */
	long cpu_count = ncpus_conf > ncpus ? ncpus_conf : ncpus;
	long many = 2 * per * cpu_count + 1;
	int first = -1, two, lots;

	if (many < 64)
		many = 64;
	if (getenv("USLAB_DEBUG") && *getenv("USLAB_DEBUG")) {
		printf("   (auto switch skipped: USLAB_DEBUG, caches without sheaves)\n");
		return;
	}
	if (many > MAX_THREADS) {
		printf("   (auto switch skipped: %ld threads needed for %ld CPUs)\n", many,
		       cpu_count);
		return;
	}
	two = auto_run(2, "percpu-auto-2", &first);
	CHECK(two == (supported && mode == 1), "2 threads on %ld CPUs: percpu %d", cpu_count, two);
	lots = auto_run((unsigned int)many, "percpu-auto-many", &first);
	CHECK(lots == (supported && mode != 0),
	      "%ld threads on %ld CPUs (USLAB_PERCPU_THREADS %ld): percpu %d, supported %d", many,
	      cpu_count, per, lots, supported);
	printf("   2 threads: percpu %d; %ld threads: percpu %d (from round %d)\n", two, many, lots,
	       first);
}

int main(int argc, char **argv)
{
	const char *env = getenv("USLAB_PERCPU");
	struct sigaction sa;

	if (argc > 1)
		max_threads = (unsigned int)atoi(argv[1]);
	if (argc > 2)
		ops = strtoul(argv[2], NULL, 0);
	if (argc > 3)
		seed0 = strtoull(argv[3], NULL, 0);
	if (!max_threads || max_threads > MAX_THREADS || !ops) {
		fprintf(stderr, "usage: %s [THREADS (1..%d) [OPS [SEED]]]\n", argv[0], MAX_THREADS);
		return 2;
	}
	if (env && !strcmp(env, "0"))
		mode = 0;
	else if (env && !strcmp(env, "1"))
		mode = 1;
	supported = uslab_percpu_supported();
	CHECK(supported == 0 || supported == 1, "uslab_percpu_supported() %d", supported);
	CHECK(mode != 0 || !supported, "USLAB_PERCPU=0, yet uslab_percpu_supported() is 1");
	if (!supported)
		printf("   per-CPU sheaves not supported here (USLAB_PERCPU=%s%s): the caches keep "
		       "per-thread sheaves; the checks that need percpu == 1 are skipped\n",
		       env ? env : "unset", TEST_SANITIZED ? ", sanitizer build" : "");
	CHECK(sched_getaffinity(0, sizeof(allowed), &allowed) == 0, "sched_getaffinity");
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &allowed))
			cpus[ncpus++] = i;
	ncpus_conf = sysconf(_SC_NPROCESSORS_CONF);
	if (ncpus < 2)
		printf("   one CPU allowed: no migrations\n");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGUSR1, &sa, NULL) == 0 && sigaction(SIGPROF, &sa, NULL) == 0 &&
		      sigaction(SIGALRM, &sa, NULL) == 0,
	      "sigaction");
	signals_block(SIG_BLOCK); /* only the workers take them */
	bugs0 = uslab_bug_count();

	RUN(test_api);
	RUN(test_bulk);
	RUN(test_threads_64);
	RUN(test_threads_many);
	RUN(test_destroy_threads_alive);
	RUN(test_destroy_threads_exited);
	RUN(test_auto_switch);
	CHECK(uslab_bug_count() == bugs0, "bugs counted: %lu", uslab_bug_count() - bugs0);
	printf("ok stress_percpu threads=%u ops=%lu seed=%llu percpu=%d cpus=%d (%lu checks)\n",
	       max_threads, ops, (unsigned long long)seed0, supported, ncpus, checks_total());
	return 0;
}
