// SPDX-License-Identifier: MIT
/*
 * stat_child.c - the process test_stat.sh watches with uslab-stat: with
 * USLAB_STATS=1 it creates caches, has threads allocate and free across
 * each other, defers frees with uslab_free_rcu, then flushes every thread
 * and writes "ready" on stdout with what it holds, and waits for stdin to
 * close. The numbers it prints are exact: uslab-stat must show them. A
 * third cache's name holds a terminal escape sequence, which every view
 * must show escaped.
 *
 * The page heap (uslab-stat --heap): before "ready" it also writes and
 * frees LARGE_N large objects (LARGE_N * LARGE_BYTES resident bytes back
 * in the heap: retained, as test_stat.sh sets a long USLAB_PURGE_DELAY_MS)
 * and holds one huge object. A line "trim" on stdin calls uslab_trim() and
 * answers "trimmed" with the heap's figures then (uslab_heap_stats()),
 * which the next snapshot must show as they are: the process is idle.
 * A line "bug" frees an object of a debug cache (stat_bug, with
 * USLAB_CONSISTENCY_CHECKS) twice and answers "bugged reports=N" with
 * uslab_bug_count(): run with USLAB_ON_BUG=report, the second free is
 * reported and ignored, and the process goes on.
 *
 * stat_child exit: for USLAB_STATS=exit, a program that closes stderr in
 * its own exit handler (as coreutils' close_stdout does): the table must
 * still reach the stderr it started with.
 */
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uslab.h>

#define HELD_A 1000
#define HELD_B 300
#define LARGE_N 32
#define LARGE_BYTES (1u << 20)
#define HUGE_BYTES (40u << 20) /* above 32 MiB: a mapping of its own (not touched) */

static struct uslab_cache *a, *b;
static void *held_b[2][HELD_B];

static void *worker(void *arg)
{
	void **mine = held_b[(long)arg];
	void *tmp[500];

	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 500; i++)
			tmp[i] = uslab_cache_alloc(a);
		for (int i = 0; i < 500; i++)
			uslab_cache_free(a, tmp[i]);
	}
	for (int i = 0; i < HELD_B; i++)
		mine[i] = uslab_cache_alloc(b);
	uslab_thread_flush();
	return NULL;
}

/* One line of what uslab_heap_stats() says, after @what. */
static void print_heap(const char *what)
{
	struct uslab_heap_stats h;

	if (uslab_heap_stats(&h))
		exit(1);
	printf("%s mapped_bytes=%llu used_bytes=%llu retained_bytes=%llu purged_bytes=%llu "
	       "madvise_calls=%llu munmap_calls=%llu mremap_calls=%llu grown_in_place=%llu "
	       "arenas=%llu huge_objects=%llu huge_bytes=%llu object_bytes=%llu\n",
	       what, (unsigned long long)h.mapped_bytes, (unsigned long long)h.used_bytes,
	       (unsigned long long)h.retained_bytes, (unsigned long long)h.purged_bytes,
	       (unsigned long long)h.madvise_calls, (unsigned long long)h.munmap_calls,
	       (unsigned long long)h.mremap_calls, (unsigned long long)h.grown_in_place,
	       (unsigned long long)h.arenas, (unsigned long long)h.huge_objects,
	       (unsigned long long)h.huge_bytes, (unsigned long long)h.object_bytes);
	fflush(stdout);
}

static void close_stderr(void)
{
	close(STDERR_FILENO);
}

int main(int argc, char **argv)
{
	void *held_a[HELD_A], *large[LARGE_N], *huge;
	pthread_t t[2];
	char buf[16];

	if (argc > 1 && !strcmp(argv[1], "exit")) {
		struct uslab_cache *c = uslab_cache_create("stat_exit", 100, NULL, 0);

		if (!c || !uslab_cache_alloc(c))
			return 1;
		atexit(close_stderr); /* runs before uslab's handler, registered earlier */
		return 0;
	}
	a = uslab_cache_create("stat_a", 200, NULL, 0);
	b = uslab_cache_create("stat_b", 64, NULL, 0);
	if (!a || !b || !uslab_cache_create("evil\033[2J\033]0;x\007", 32, NULL, 0))
		return 1;
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < HELD_A; i++)
		held_a[i] = uslab_cache_alloc(a);
	for (int i = 0; i < 100; i++)
		uslab_free_rcu(uslab_cache_alloc(a));
	uslab_rcu_barrier();
	/* Large objects written (resident) and freed: their pages stay in the heap, retained. */
	for (int i = 0; i < LARGE_N; i++) {
		large[i] = uslab_kmalloc(LARGE_BYTES);
		if (!large[i])
			return 1;
		memset(large[i], 1, LARGE_BYTES);
	}
	for (int i = 0; i < LARGE_N; i++)
		uslab_kfree(large[i]);
	huge = uslab_kmalloc(HUGE_BYTES);
	if (!huge)
		return 1;
	uslab_thread_flush();
	printf("ready stat_a=%d stat_b=%d large_freed=%u\n", HELD_A, 2 * HELD_B,
	       LARGE_N * LARGE_BYTES);
	fflush(stdout);
	while (fgets(buf, sizeof(buf), stdin)) {
		if (!strcmp(buf, "trim\n")) {
			uslab_trim();
			print_heap("trimmed");
		} else if (!strcmp(buf, "bug\n")) {
			struct uslab_cache *c =
				uslab_cache_create("stat_bug", 48, NULL, USLAB_CONSISTENCY_CHECKS);
			void *p = c ? uslab_cache_alloc(c) : NULL;

			if (!p)
				return 1;
			uslab_cache_free(c, p);
			uslab_cache_free(c, p); /* reported */
			printf("bugged reports=%lu\n", uslab_bug_count());
			fflush(stdout);
		}
	}
	uslab_kfree(huge);
	for (int i = 0; i < HELD_A; i++)
		uslab_cache_free(a, held_a[i]);
	return 0;
}
