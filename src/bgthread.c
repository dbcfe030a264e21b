// SPDX-License-Identifier: MIT
/*
 * bgthread.c - uslab's background threads: how they start (a service any
 * layer may call; base.h declares usl_thread_detached).
 *
 * The page heap's decay (os_decay.c), the barns' monitor (barn.c), the
 * grace-period monitor (gp.c) and the statistics exporter (export.c) are
 * started on first need by whichever thread needs them, often a program's
 * thread deep in a slow path. They must not take on that thread's
 * properties: its signals (every signal is blocked in them), nor its CPU
 * when it is pinned (a DPDK lcore, a benchmark's worker): a decay tick
 * would then preempt the very thread it serves (issue 35 item 9: 8 to 32
 * us per tick). They run on the CPUs the process started with, read when
 * the library is loaded, and carry a name ("uslab-decay", ...).
 */
#define _GNU_SOURCE /* sched_getaffinity, sched_setaffinity, pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "base.h"

/*
 * The CPUs the process started with, read before main() (or by the thread
 * that loads the library): the background threads run there, not on the
 * CPU of the thread that happened to start them (usl_thread_detached).
 */
static cpu_set_t start_cpus;
static bool start_cpus_ok;

__attribute__((constructor)) static void start_cpus_read(void)
{
	start_cpus_ok = !sched_getaffinity(0, sizeof(start_cpus), &start_cpus);
}

/*
 * The thread's own first steps: onto the start CPUs (when known; if they
 * are no longer allowed, a cpuset changed, it keeps the starter's), then
 * its name. Both here, by the thread itself: pthread_attr_setaffinity_np
 * allocates the attribute's CPU set with calloc (a start from the child of
 * a fork then waited for ever on an allocator lock a parent thread held at
 * the fork under GCC 12's AddressSanitizer, whose allocator has no fork
 * handlers: api_heap's fork test hung so, once in a while), and the
 * starter naming the new thread would name one that may already have
 * ended (the decay and barn monitors end when idle).
 */
static void *bg_start(void *arg)
{
	const struct usl_bgthread *t = arg;

	if (start_cpus_ok)
		sched_setaffinity(0, sizeof(start_cpus), &start_cpus);
	pthread_setname_np(pthread_self(), t->name);
	return t->fn(NULL);
}

int usl_thread_detached(const struct usl_bgthread *t)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int err;

	/*
	 * Not from a thread in its key destructors (a program's destructor
	 * that frees after uslab's exit handler): AddressSanitizer's thread
	 * bookkeeping crashed when such a thread's child exited (api_fuzz
	 * under libFuzzer); the callers treat it as a start that failed and
	 * retry from the next live thread.
	 */
	if (usl_thread_exiting)
		return EAGAIN;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&tid, &attr, bg_start, (void *)t);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}
