// SPDX-License-Identifier: MIT
/*
 * test_cancel.c - no uslab call is a cancellation point (doc/api.md,
 * "Cancellation"). Each scenario runs in a child process forked from a
 * parent that never called uslab, so the child's first call starts the
 * library, under alarm(): a thread with a deferred cancel pending
 * (pthread_cancel(pthread_self())) makes one call that can reach a
 * cancellation point of the C library (getrandom(), write() of a warning
 * or report, open() and fprintf()), which must return; the cancel is then
 * acted on at the thread's pthread_testcancel(). Afterwards another
 * thread validates the cache and allocates and frees from it, creates and
 * destroys a cache and waits for a deferred free: a lock left held hangs
 * the child, which fails the scenario with its name.
 *
 *   startup         the first call of the process (uslab_cache_create)
 *   startup_stats   the same with USLAB_STATS=1 (the export's files)
 *   create          uslab_cache_create after start-up
 *   free_rcu        a thread's first uslab_free_rcu()
 *   destroy_live    uslab_cache_destroy with live objects (a warning)
 *   destroy_debug   the same on a debug cache (U): each object's line
 *   validate        uslab_cache_validate finding a broken red zone
 *   report          a debug-tier report that goes on (USLAB_ON_BUG=report)
 *   stats_print     uslab_stats_print()
 *   options_print   uslab_options_print()
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <uslab.h>

#include "../test.h"

/* A check in a child process, any thread: message on stderr and exit 1. */
static __thread unsigned long child_checks;
#define EXPECT(cond, ...) CHECK_COUNTED(child_checks, cond, __VA_ARGS__)

enum { SECS = 30 };

static struct uslab_cache *cache; /* the scenario's cache */
static void *obj;		  /* an object of it, allocated by the setup */
static void (*call)(void);	  /* the call made with a cancel pending */
static volatile bool returned;	  /* it returned */

/* Made with a deferred cancel pending: @call must return, then the cancel acts. */
static void *cancelled(void *arg)
{
	(void)arg;
	pthread_cancel(pthread_self());
	call();
	returned = true;
	pthread_testcancel();
	return NULL;
}

/* Written past the checker's back: ASan poisons uslab's red zones. */
__attribute__((no_sanitize_address, noinline)) static void poke(void *p, size_t off)
{
	((volatile unsigned char *)p)[off] = 0x5a;
}

/* Run call() in a thread with a cancel pending, then check that @c still works. */
static void run_cancelled(const char *what)
{
	void *ret = NULL, *o;
	pthread_t t;

	returned = false;
	EXPECT(!pthread_create(&t, NULL, cancelled, NULL), "%s: pthread_create", what);
	EXPECT(!pthread_join(t, &ret), "%s: join", what);
	EXPECT(ret == PTHREAD_CANCELED, "%s: the cancel was lost", what);
	/* Everything still works, from this thread. */
	if (!cache)
		cache = uslab_cache_create("cancel_after", 64, NULL, 0);
	EXPECT(cache, "%s: no cache", what);
	uslab_cache_validate(cache);
	for (int i = 0; i < 1000; i++) {
		o = uslab_cache_alloc(cache);
		EXPECT(o, "%s: alloc after the cancel", what);
		uslab_cache_free(cache, o);
	}
	uslab_cache_shrink(cache);
	struct uslab_cache *c2 = uslab_cache_create("cancel_other", 32, NULL, 0);
	EXPECT(c2, "%s: create after the cancel", what);
	o = uslab_cache_alloc(c2);
	EXPECT(o, "%s: alloc", what);
	uslab_free_rcu(o);
	uslab_rcu_barrier();
	EXPECT(uslab_cache_destroy(c2) == 0, "%s: destroy after the cancel", what);
	/* (Last: a lock left held by the cancelled call hangs the checks above.) */
	EXPECT(returned, "%s: the call acted on the cancel (it never returned)", what);
	exit(0);
}

static void do_create(void)
{
	cache = uslab_cache_create("cancel_create", 64, NULL, 0);
	EXPECT(cache, "create");
}

static void do_free_rcu(void)
{
	uslab_free_rcu(obj);
}

static void do_destroy(void)
{
	EXPECT(uslab_cache_destroy(cache) == -EBUSY, "destroy with a live object");
}

static void do_validate(void)
{
	EXPECT(uslab_cache_validate(cache) > 0, "validate saw no broken red zone");
}

static void do_double_free(void)
{
	uslab_cache_free(cache, obj); /* reported, and the program goes on */
}

/* /dev/null, opened by the setup (fopen() is a cancellation point), unbuffered. */
static FILE *out;

static void do_stats_print(void)
{
	uslab_stats_print(out);
}

static void do_options_print(void)
{
	uslab_options_print(out);
}

static void startup(void *arg)
{
	(void)arg;
	alarm(SECS);
	call = do_create;
	run_cancelled("startup");
}

static void startup_stats(void *arg)
{
	(void)arg;
	alarm(SECS);
	setenv("USLAB_STATS", "1", 1);
	call = do_create;
	run_cancelled("startup with USLAB_STATS=1");
}

static void create(void *arg)
{
	(void)arg;
	alarm(SECS);
	EXPECT(uslab_cache_create("cancel_first", 64, NULL, 0), "create");
	call = do_create;
	run_cancelled("create");
}

static void free_rcu(void *arg)
{
	(void)arg;
	alarm(SECS);
	cache = uslab_cache_create("cancel_rcu", 64, NULL, 0);
	obj = uslab_cache_alloc(cache);
	EXPECT(obj, "alloc");
	call = do_free_rcu;
	run_cancelled("first uslab_free_rcu of a thread");
}

static void destroy_with(unsigned int flags, const char *what)
{
	alarm(SECS);
	cache = uslab_cache_create("cancel_destroy", 64, NULL, flags);
	EXPECT(cache, "create");
	for (int i = 0; i < 10; i++)
		EXPECT(uslab_cache_alloc(cache), "alloc");
	call = do_destroy;
	run_cancelled(what);
}

static void destroy_live(void *arg)
{
	(void)arg;
	destroy_with(0, "destroy with live objects");
}

static void destroy_debug(void *arg)
{
	(void)arg;
	destroy_with(USLAB_STORE_USER, "destroy of a debug cache with live objects");
}

static void validate(void *arg)
{
	(void)arg;
	alarm(SECS);
	cache = uslab_cache_create("cancel_validate", 64, NULL, USLAB_RED_ZONE);
	EXPECT(cache, "create");
	obj = uslab_cache_alloc(cache);
	EXPECT(obj, "alloc");
	EXPECT(uslab_cache_validate(cache) == 0, "validate before");
	poke(obj, 64); /* the right red zone */
	call = do_validate;
	run_cancelled("validate finding a broken red zone");
}

static void report(void *arg)
{
	(void)arg;
	alarm(SECS);
	setenv("USLAB_ON_BUG", "report", 1);
	cache = uslab_cache_create("cancel_report", 64, NULL, USLAB_CONSISTENCY_CHECKS);
	EXPECT(cache, "create");
	obj = uslab_cache_alloc(cache);
	EXPECT(obj, "alloc");
	uslab_cache_free(cache, obj);
	call = do_double_free;
	run_cancelled("a debug-tier report (double free)");
}

static void stats_print(void *arg)
{
	(void)arg;
	alarm(SECS);
	cache = uslab_cache_create("cancel_stats", 64, NULL, 0);
	out = fopen("/dev/null", "w");
	EXPECT(out, "fopen");
	setvbuf(out, NULL, _IONBF, 0); /* each fprintf() a write() */
	call = do_stats_print;
	run_cancelled("uslab_stats_print");
}

static void options_print(void *arg)
{
	(void)arg;
	alarm(SECS);
	cache = uslab_cache_create("cancel_options", 64, NULL, 0);
	out = fopen("/dev/null", "w");
	EXPECT(out, "fopen");
	setvbuf(out, NULL, _IONBF, 0); /* each fprintf() a write() */
	call = do_options_print;
	run_cancelled("uslab_options_print");
}

static const struct {
	const char *name;
	void (*fn)(void *);
} tests[] = {
	{ "startup", startup },
	{ "startup_stats", startup_stats },
	{ "create", create },
	{ "free_rcu", free_rcu },
	{ "destroy_live", destroy_live },
	{ "destroy_debug", destroy_debug },
	{ "validate", validate },
	{ "report", report },
	{ "stats_print", stats_print },
	{ "options_print", options_print },
};

/* api_cancel [NAME...]: the named scenarios, or all of them (the parent never calls uslab). */
int main(int argc, char **argv)
{
	int failed = 0;

	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		bool run = argc < 2;
		char err[8192];
		int status;

		for (int j = 1; j < argc; j++)
			run |= !strcmp(argv[j], tests[i].name);
		if (!run)
			continue;
		status = run_child(tests[i].fn, NULL, err, sizeof(err));
		test_checks++;
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
			printf("FAIL %s: hung for %d s: %s\n", tests[i].name, SECS, err);
			failed = 1;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("FAIL %s: status %#x: %s\n", tests[i].name, status, err);
			failed = 1;
		} else {
			printf("ok %-40s\n", tests[i].name);
		}
		fflush(stdout);
	}
	return failed;
}
