// SPDX-License-Identifier: MIT
/*
 * finding_bugs.c - the reports of README.md, "Finding bugs":
 *
 *   fb            a double free, stopped at the library's call (tier 1), or
 *                 with USLAB_DEBUG=FZPU,conn by the debug tier, with history
 *   fb uaf        a write after free, found by USLAB_DEBUG=P when the object
 *                 is handed out again
 *   fb leak       a cache destroyed with live objects (USLAB_DEBUG=U lists them)
 *   fb validate   uslab_cache_validate() after a write into a freed object
 *   fb failslab   USLAB_FAILSLAB
 *
 * Built with USLAB_NO_INLINE and -rdynamic (reports name its functions).
 */
#include <uslab.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct conn {
	char buf[256];
};

static struct uslab_cache *conn;
static int open_conns;

/* (Not static: exported by -rdynamic, so backtraces name them.) */
struct conn *open_conn(void);
void close_conn(struct conn *c);

__attribute__((noinline)) struct conn *open_conn(void)
{
	struct conn *c = uslab_cache_alloc(conn);

	open_conns += c != NULL;
	return c;
}

__attribute__((noinline)) void close_conn(struct conn *c)
{
	uslab_cache_free(conn, c);
	open_conns--;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "double";
	struct uslab_cache_args a = { .layout = USLAB_LAYOUT_FREEPTR };
	struct conn *p, *q;

	conn = uslab_cache_create("conn", sizeof(struct conn), &a, 0);
	p = open_conn();
	q = open_conn();
	if (!strcmp(mode, "validate")) {
		close_conn(p);
		uslab_cache_shrink(conn);    /* p is back in its slab */
		memset(p, 0x41, sizeof(*p)); /* a write after free */
		printf("validate: %ld problem(s)\n", uslab_cache_validate(conn));
		return 0;
	}
	if (!strcmp(mode, "failslab")) {
		int failed = 0;

		for (int i = 0; i < 1000; i++) {
			struct conn *o = open_conn();

			if (!o)
				failed++;
			else
				close_conn(o);
		}
		printf("%d of 1000 allocations failed (uslab_failslab_count() = %lu)\n", failed,
		       uslab_failslab_count());
		return 0;
	}
	if (!strcmp(mode, "uaf")) {
		close_conn(q);
		q->buf[50] = 'x'; /* a write after free */
		q = open_conn();  /* handed out again: the poison is checked */
		printf("bugs found: %lu\n", uslab_bug_count());
		return 0;
	}
	if (!strcmp(mode, "leak")) {
		close_conn(q);
		printf("destroy: %d\n", uslab_cache_destroy(conn)); /* p is still allocated */
		return 0;
	}
	close_conn(q);
	close_conn(q); /* a double free */
	return 0;
}
