// SPDX-License-Identifier: MIT
/*
 * trace_probes.c - a program whose calls fire uslab's static probes a known
 * number of times (tests/trace/test_bpftrace.sh counts them with
 * bpftrace). Built with USLAB_NO_INLINE and linked with libuslab.so: every
 * call reaches the probed library functions.
 *
 *   trace_probes lib      a cache "trace-c" of 200-byte objects: 1000
 *                         alloc + free, 10 bulk allocs and frees of 64,
 *                         500 uslab_kmalloc(777) + uslab_kfree, destroy
 *   trace_probes malloc   (under LD_PRELOAD=libuslab-malloc.so) 300
 *                         malloc(12345) + free, 200 calloc(3, 4321) +
 *                         free, 100 realloc to 23456 bytes + free
 *
 * Every object is written and checked, so the calls cannot be elided.
 * Exit status 0, or 1 with a line on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uslab.h>

#define die(...) (fprintf(stderr, "trace_probes: " __VA_ARGS__), fputc('\n', stderr), exit(1))

static void *volatile sink;

static void lib(void)
{
	struct uslab_cache *c = uslab_cache_create("trace-c", 200, NULL, 0);
	static void *objs[1000];

	if (!c)
		die("cache");
	for (int i = 0; i < 1000; i++) {
		if (!(objs[i] = uslab_cache_alloc(c)))
			die("alloc %d", i);
		memset(objs[i], i & 0xff, 4);
	}
	for (int i = 0; i < 1000; i++) {
		if (*(unsigned char *)objs[i] != (i & 0xff))
			die("object %d overwritten", i);
		uslab_cache_free(c, objs[i]);
	}
	for (int r = 0; r < 10; r++) {
		if (uslab_cache_alloc_bulk(c, 64, objs) != 64)
			die("bulk %d", r);
		uslab_cache_free_bulk(c, 64, objs);
	}
	for (int i = 0; i < 500; i++) {
		char *p = uslab_kmalloc(777);

		if (!p)
			die("kmalloc %d", i);
		p[776] = 1;
		sink = p;
		uslab_kfree(p);
	}
	if (uslab_cache_destroy(c))
		die("destroy");
}

static void dropin(void)
{
	for (int i = 0; i < 300; i++) {
		char *p = malloc(12345);

		if (!p)
			die("malloc %d", i);
		p[12344] = 1;
		sink = p;
		free(p);
	}
	for (int i = 0; i < 200; i++) {
		char *p = calloc(3, 4321);

		if (!p || p[3 * 4321 - 1])
			die("calloc %d", i);
		sink = p;
		free(p);
	}
	for (int i = 0; i < 100; i++) {
		char *p = malloc(100), *q;

		if (!p)
			die("malloc %d", i);
		p[0] = 7;
		q = realloc(p, 23456);
		if (!q || q[0] != 7)
			die("realloc %d", i);
		sink = q;
		free(q);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "lib") && strcmp(argv[1], "malloc"))) {
		fprintf(stderr, "usage: %s lib|malloc\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "lib"))
		lib();
	else
		dropin();
	return 0;
}
