// SPDX-License-Identifier: MIT
/*
 * bgthread.c - uslab's background threads: how they start (a service any
 * layer may call; base.h declares usl_thread_start).
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
#define _GNU_SOURCE /* sched_getaffinity, pthread_attr_setaffinity_np, pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "base.h"

/*
 * The CPUs the process started with, read before main() (or by the thread
 * that loads the library): the background threads run there, not on the
 * CPU of the thread that happened to start them (usl_thread_start).
 */
static cpu_set_t start_cpus;
static bool start_cpus_ok;

__attribute__((constructor)) static void start_cpus_read(void)
{
	start_cpus_ok = !sched_getaffinity(0, sizeof(start_cpus), &start_cpus);
}

static void thread_attr_cpus(pthread_attr_t *attr)
{
	if (start_cpus_ok)
		pthread_attr_setaffinity_np(attr, sizeof(start_cpus), &start_cpus);
}

int usl_thread_start(void *(*fn)(void *), const char *name, pthread_t *tid)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
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
	if (!tid)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	thread_attr_cpus(&attr);
	err = pthread_create(&t, &attr, fn, NULL);
	if (err == EINVAL) {
		/* The start CPUs are no longer allowed (a cpuset changed): inherit. */
		pthread_attr_destroy(&attr);
		pthread_attr_init(&attr);
		if (!tid)
			pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = pthread_create(&t, &attr, fn, NULL);
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return err;
	/* @t is valid: uslab's background threads run until the process ends. */
	pthread_setname_np(t, name);
	if (tid)
		*tid = t;
	return 0;
}
