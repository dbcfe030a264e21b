// SPDX-License-Identifier: MIT
/*
 * bench_guard.c - the sampling guard's detection rate (issue 26): TRIALS
 * planted bugs in sampled objects, each in a child process run with
 * USLAB_GUARD=1 (every allocation slow path sampled: the child's first
 * allocation of a cache or class is a sampled one). Kinds, in turn: a use
 * after free (write, then read) and a one-byte overflow past the usable
 * size (then the free, which checks the bytes an alignment leaves after
 * the object), of a cache object of a size from 1 to 4096 bytes and of a
 * kmalloc object of a random size. A trial counts as reported when the
 * child dies by SIGABRT with the guard's "uslab: BUG" line and both call
 * sites ("allocated by", "freed by"/"not freed").
 *
 *	guard TRIALS
 *	CSV,guard,<kind>,planted,reported,<n>   (and planted,<n>)
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uslab.h>

enum { UAF_WRITE, UAF_READ, OVERFLOW, NR_KINDS };
static const char *const kind_names[NR_KINDS] = { "uaf-write", "uaf-read", "overflow" };

static volatile char sink;

static void plant(int kind, bool kmalloc, size_t size)
{
	struct uslab_cache *c = NULL;
	char *p;
	size_t n;

	if (kmalloc) {
		p = uslab_kmalloc(size);
	} else {
		c = uslab_cache_create("planted", size, NULL, 0);
		p = c ? uslab_cache_alloc(c) : NULL;
	}
	if (!p)
		_exit(2);
	n = kmalloc ? uslab_ksize(p) : size;
	memset(p, 1, n);
	switch (kind) {
	case UAF_WRITE:
	case UAF_READ:
		if (kmalloc)
			uslab_kfree(p);
		else
			uslab_cache_free(c, p);
		if (kind == UAF_WRITE)
			p[n / 2] = 2;
		else
			sink = p[n - 1];
		break;
	case OVERFLOW:
		p[n] = 2;
		/* Within the alignment's rounding it faults not: the free checks it. */
		if (kmalloc)
			uslab_kfree(p);
		else
			uslab_cache_free(c, p);
		break;
	}
	_exit(0); /* not reported */
}

static bool reported(int kind, bool kmalloc, size_t size)
{
	char buf[4096];
	size_t len = 0;
	int pfd[2], status;
	ssize_t r;
	pid_t pid;

	if (pipe(pfd))
		exit(1);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], 2);
		close(pfd[0]);
		plant(kind, kmalloc, size);
	}
	close(pfd[1]);
	while (len < sizeof(buf) - 1 && (r = read(pfd[0], buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = 0;
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "uslab: BUG") &&
	       strstr(buf, "(sampling guard)") && strstr(buf, "allocated by") &&
	       (strstr(buf, "freed by") || strstr(buf, "not freed"));
}

int main(int argc, char **argv)
{
	unsigned long trials = argc > 1 ? strtoul(argv[1], NULL, 0) : 600;
	unsigned long planted[2][NR_KINDS] = { { 0 } }, found[2][NR_KINDS] = { { 0 } };
	unsigned long all = 0, all_found = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;

	if (!getenv("USLAB_GUARD") || strcmp(getenv("USLAB_GUARD"), "1")) {
		fprintf(stderr, "guard: run with USLAB_GUARD=1\n");
		return 1;
	}
	for (unsigned long i = 0; i < trials; i++) {
		int kind = (int)(i % NR_KINDS);
		bool km = (i / NR_KINDS) % 2;
		size_t size;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size = 1 + x % 4096;
		planted[km][kind]++;
		if (reported(kind, km, size))
			found[km][kind]++;
		else
			fprintf(stderr, "guard: not reported: %s of a %zu-byte %s object\n",
				kind_names[kind], size, km ? "kmalloc" : "cache");
	}
	for (int km = 0; km < 2; km++) {
		for (int k = 0; k < NR_KINDS; k++) {
			printf("%s %s: %lu of %lu planted reported\n", km ? "kmalloc" : "cache",
			       kind_names[k], found[km][k], planted[km][k]);
			printf("CSV,guard,%s-%s,planted,reported,%lu\n", km ? "kmalloc" : "cache",
			       kind_names[k], found[km][k]);
			printf("CSV,guard,%s-%s,planted,planted,%lu\n", km ? "kmalloc" : "cache",
			       kind_names[k], planted[km][k]);
			all += planted[km][k];
			all_found += found[km][k];
		}
	}
	printf("CSV,guard,all,planted,reported,%lu\n", all_found);
	printf("CSV,guard,all,planted,planted,%lu\n", all);
	return 0;
}
