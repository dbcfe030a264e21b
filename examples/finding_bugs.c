// SPDX-License-Identifier: MIT
/*
 * finding_bugs.c - the reports of README.md, "Finding bugs": a double free
 * stopped at the library's call, uslab_cache_validate() after a write into a
 * freed object, and USLAB_FAILSLAB. Built with USLAB_NO_INLINE.
 */
#include <uslab.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct uslab_cache_args a = { .layout = USLAB_LAYOUT_FREEPTR };
	struct uslab_cache *conn = uslab_cache_create("conn", 256, &a, 0);
	char *p = uslab_cache_alloc(conn), *q = uslab_cache_alloc(conn);

	if (argc > 1 && !strcmp(argv[1], "validate")) {
		uslab_cache_free(conn, p);
		uslab_cache_shrink(conn); /* p is back in its slab */
		memset(p, 0x41, 256);	  /* a write after free */
		printf("validate: %ld problem(s)\n", uslab_cache_validate(conn));
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "failslab")) {
		int failed = 0;

		for (int i = 0; i < 1000; i++) {
			void *o = uslab_cache_alloc(conn);

			if (!o)
				failed++;
			uslab_cache_free(conn, o);
		}
		printf("%d of 1000 allocations failed (uslab_failslab_count() = %lu)\n", failed,
		       uslab_failslab_count());
		return 0;
	}
	uslab_cache_free(conn, q);
	uslab_cache_free(conn, q); /* a double free */
	return 0;
}
