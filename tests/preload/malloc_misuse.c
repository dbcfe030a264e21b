// SPDX-License-Identifier: MIT
/*
 * malloc_misuse.c - the bad frees glibc aborts on (its tcache key, since
 * 2.34), under libuslab-malloc.so: each in a child, which must stop inside
 * the bad call with a "uslab: BUG" line, before it prints its next line.
 * Not linked with uslab: it reaches it only through LD_PRELOAD.
 */
#include <malloc.h>

#include "../test.h"

#define AFTER "-- after the call --"

static void *volatile sink; /* (gcc may not see through the frees) */

static void twice(void *arg)
{
	char *p = malloc(48);

	(void)arg;
	sink = p;
	free(p);
	free(p);
	fprintf(stderr, "%s\n", AFTER);
}

/* free(p); free(q); free(p), with @arg frees between. */
static void delayed(void *arg)
{
	size_t k = (size_t)(uintptr_t)arg;
	void **q = calloc(k + 1, sizeof(*q));
	char *p = malloc(100);

	for (size_t i = 0; i < k; i++)
		q[i] = malloc(100);
	free(p);
	for (size_t i = 0; i < k; i++)
		free(q[i]);
	free(p);
	fprintf(stderr, "%s\n", AFTER);
}

static void interior(void *arg)
{
	char *p = malloc(64);

	free(p + (size_t)(uintptr_t)arg);
	fprintf(stderr, "%s\n", AFTER);
}

/* realloc() of a freed pointer: a double free by another name. */
static void realloc_freed(void *arg)
{
	char *p = malloc(32);

	(void)arg;
	free(p);
	sink = realloc(p, 64);
	fprintf(stderr, "%s\n", AFTER);
}

static void at_the_call(const char *name, void (*fn)(void *), void *arg)
{
	char buf[8192];
	int status = run_child(fn, arg, buf, sizeof(buf));

	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, "uslab: BUG") &&
		      !strstr(buf, AFTER),
	      "%s: status %#x, stderr:\n%s", name, status, buf);
}

int main(void)
{
	CHECK(getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "uslab"), "under the preload");
	at_the_call("free(p); free(p)", twice, NULL);
	for (uintptr_t k = 1; k <= 300; k += 7)
		at_the_call("free(p); free(q...); free(p)", delayed, (void *)k);
	for (uintptr_t off = 8; off < 64; off += 8)
		at_the_call("free(p + off)", interior, (void *)off);
	at_the_call("realloc of a freed pointer", realloc_freed, NULL);
	printf("ok malloc_misuse (%lu checks)\n", test_checks);
	return 0;
}
