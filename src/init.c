// SPDX-License-Identifier: MIT
/*
 * init.c - library start-up and fork.
 *
 * Start-up is lazy and happens once (pthread_once) on the first cache
 * creation or the first slow path of a thread: options from the
 * environment, uslab's own metadata caches, the thread-exit key, and the
 * fork handlers.
 *
 * Fork: before fork() the forking thread takes every lock in the lock order
 * of src/lock.h, then counter.c's reg_lock and barn.c's monitor lock, leaves
 * (fork_prepare() below), so no lock is held halfway through an update in
 * the child. The parent releases them; the child re-initialises them and
 * hands the sheaves of the threads that do not exist in the child back to
 * their caches. doc/design.md ("Fork") lists every lock and its handler.
 */
#include <pthread.h>

#include "front.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_error;
static __thread bool tls_starting; /* this thread runs do_init() */

static void do_init(void);

/*
 * A fork while another thread runs do_init() first waits for it to finish
 * (registering these handlers is do_init()'s first step): otherwise the
 * child would inherit the locks do_init() held, and glibc runs a
 * pthread_once() routine that was in progress at the fork again in the
 * child, where it blocked on them (api_faults fork_counters, under load:
 * a child hung in cache_init_internal() on caches_lock). A start-up that
 * failed leaves the handlers nothing to do.
 */
static void fork_prepare(void)
{
	pthread_once(&init_once, do_init);
	if (init_error)
		return;
	gp_fork_prepare();
	ulock_lock(&caches_lock);
	gp_fork_prepare_late();
	rcu_fork_prepare();
	thread_fork_prepare();
	percpu_fork_prepare();
	cache_fork_prepare();
	os_fork_prepare();
	guard_fork_prepare();
	profile_fork_prepare();	     /* a leaf */
	counter_fork_prepare();	     /* a leaf: last */
	barn_monitor_fork_prepare(); /* a leaf too (never held with reg_lock) */
}

static void fork_parent(void)
{
	if (init_error)
		return;
	barn_monitor_fork_parent();
	counter_fork_parent();
	profile_fork_parent();
	guard_fork_parent();
	os_fork_parent();
	cache_fork_parent();
	percpu_fork_parent();
	thread_fork_parent();
	rcu_fork_parent();
	gp_fork_parent();
	ulock_unlock(&caches_lock);
	gp_fork_parent_early();
}

static void fork_child(void)
{
	if (init_error)
		return;
	barn_monitor_fork_child();
	counter_fork_child();
	profile_fork_child();
	guard_fork_child();
	os_fork_child();
	usl_tid_fork_child();
	cache_fork_child();
	ulock_init(&caches_lock);
	lockdep_fork_child();
	percpu_fork_child();
	thread_fork_child();
	gp_fork_child();
	rcu_fork_child();
	export_fork_child();
}

static void do_init(void)
{
	int old = usl_nocancel(); /* getrandom(), the export's files */
	int err;

	tls_starting = true;
	/* First, before any lock is taken: see fork_prepare(). */
	err = -pthread_atfork(fork_prepare, fork_parent, fork_child);
	options_init();
	profile_init(); /* (USLAB_PROFILE: its records, before any allocation is counted) */
	numa_init();	/* before any memory is mapped: arenas are placed per node */
	percpu_init();	/* before the kmalloc classes: USLAB_PERCPU=1 makes them per CPU */
	if (!err)
		err = cache_bootstrap();
	if (!err)
		err = kmalloc_bootstrap();
	if (!err)
		err = sheaf_bootstrap();
	if (!err)
		err = pcs_bootstrap();
	if (!err)
		err = thread_init();
	if (!err)
		rcu_init();
	if (!err)
		export_init();
	init_error = err;
	tls_starting = false;
	usl_cancel_restore(old);
}

/*
 * Whether the calling thread is starting the library: a malloc the C
 * library makes meanwhile must not wait for the start-up (kmalloc.c).
 */
bool usl_starting_self(void)
{
	return tls_starting;
}

/* Return: 0, or -1 with errno set when the library cannot start. */
int usl_init(void)
{
	pthread_once(&init_once, do_init);
	if (unlikely(init_error)) {
		errno = -init_error; /* (each step returns 0 or a negative errno) */
		return -1;
	}
	return 0;
}
