// SPDX-License-Identifier: MIT
/*
 * test_bgthreads.c - uslab's background threads (the page heap's decay,
 * the barns' monitor, the grace-period monitor) carry a "uslab-..." name
 * and run on the CPUs the process started with, not on the one CPU of
 * the pinned thread that happened to start them: a DPDK lcore or a
 * benchmark's worker would otherwise be preempted by every tick (issue 35
 * item 9's remaining ~100 us). Skips with fewer than two CPUs. And a
 * thread with a cancel pending that starts them (a thread's creation,
 * under gp_lock for the grace-period monitor; each names itself) returns
 * from uslab and is cancelled at its own next cancellation point, with no
 * uslab lock left held.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <uslab.h>

#include "../test.h"

/* The "Cpus_allowed_list:" line of /proc/self/task/@tid/status (or /proc/self/status). */
static void cpus_list(const char *tid, char *out, size_t len)
{
	char path[300], line[512];
	FILE *f;

	snprintf(path, sizeof(path), tid ? "/proc/self/task/%s/status" : "/proc/self/status", tid);
	out[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "Cpus_allowed_list:", 18)) {
			snprintf(out, len, "%s", line + 18 + strspn(line + 18, " \t"));
			out[strcspn(out, "\n")] = 0;
		}
	fclose(f);
}

static void test_started_on_process_cpus(void)
{
	char start[256], pinned[256], name[64], cpus[256], path[300];
	bool decay = false, rcu = false;
	struct dirent *e;
	cpu_set_t set;
	int first = -1, n;
	DIR *d;

	CHECK(!sched_getaffinity(0, sizeof(set), &set), "sched_getaffinity");
	n = CPU_COUNT(&set);
	if (n < 2) {
		printf("  skipped: %d CPU allowed\n", n);
		return;
	}
	cpus_list(NULL, start, sizeof(start));
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &set))
			first = c;
	/* This thread pinned to one CPU, then it starts every background thread. */
	CPU_ZERO(&set);
	CPU_SET(first, &set);
	CHECK(!pthread_setaffinity_np(pthread_self(), sizeof(set), &set), "pin");
	cpus_list(NULL, pinned, sizeof(pinned));
	CHECK(strcmp(start, pinned), "pinned: %s (was %s)", pinned, start);
	for (int i = 0; i < 64; i++) /* large objects freed: the decay thread */
		uslab_kfree(uslab_kmalloc(1u << 20));
	uslab_free_rcu(uslab_kmalloc(64)); /* the grace-period monitor */
	uslab_rcu_barrier();
	usleep(100 * 1000);

	d = opendir("/proc/self/task");
	CHECK(d, "opendir");
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(name, sizeof(name), f))
			name[0] = 0;
		fclose(f);
		name[strcspn(name, "\n")] = 0;
		if (strncmp(name, "uslab-", 6))
			continue;
		cpus_list(e->d_name, cpus, sizeof(cpus));
		printf("  %s (task %s): CPUs %s\n", name, e->d_name, cpus);
		CHECK(!strcmp(cpus, start), "%s runs on CPUs %s, the process started on %s", name,
		      cpus, start);
		decay |= !strcmp(name, "uslab-decay");
		rcu |= !strcmp(name, "uslab-rcu");
	}
	closedir(d);
	CHECK(decay, "a thread named uslab-decay");
	CHECK(rcu, "a thread named uslab-rcu");
}

static volatile int returned;

static void *cancel_pending(void *arg)
{
	(void)arg;
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
	pthread_cancel(pthread_self());
	/* The first deferred free starts the grace-period monitor (under gp_lock). */
	uslab_free_rcu(uslab_kmalloc(64));
	returned = 1;
	pthread_testcancel();
	return NULL;
}

/* Run first: no background thread exists yet. */
static void test_started_with_cancel_pending(void)
{
	pthread_t t;
	void *res;

	CHECK(!pthread_create(&t, NULL, cancel_pending, NULL), "thread");
	CHECK(!pthread_join(t, &res), "join");
	CHECK(returned, "uslab_free_rcu returned to the cancelled thread");
	CHECK(res == PTHREAD_CANCELED, "cancelled at its own cancellation point");
	uslab_rcu_barrier(); /* gp_lock free again: no hang */
}

int main(void)
{
	RUN(test_started_with_cancel_pending);
	RUN(test_started_on_process_cpus);
	return 0;
}
