/* SPDX-License-Identifier: MIT */
/*
 * guard.c - the sampling guard through the malloc drop-in: run under
 * LD_PRELOAD=libuslab-malloc.so with USLAB_GUARD=1 (every allocation slow
 * path sampled). "uaf" reads a freed block, "overflow" writes one byte past
 * its usable size: each must die with the guard's report naming
 * guard_malloc_site and guard_free_site (-rdynamic). "clean" moves blocks
 * of every size class through malloc, realloc, malloc_usable_size and free
 * and must exit 0 with nothing on stderr.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#define NAMED __attribute__((noinline, noipa))
#else
#define NAMED __attribute__((noinline))
#endif

char *guard_malloc_site(size_t n);
void guard_free_site(void *p);

NAMED char *guard_malloc_site(size_t n)
{
	char *p = malloc(n);

	__asm__ volatile("" ::: "memory");
	return p;
}

NAMED void guard_free_site(void *p)
{
	free(p);
	__asm__ volatile("" ::: "memory");
}

static volatile char sink;

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "clean";
	char *p = guard_malloc_site(24);
	size_t n = malloc_usable_size(p);

	if (!strcmp(mode, "uaf")) {
		guard_free_site(p);
		sink = p[3];
	} else if (!strcmp(mode, "overflow")) {
		memset(p, 1, n);
		p[n] = 1;
	} else {
		char *blocks[512] = { 0 };
		uint64_t x = 88172645463325252ull;

		for (int i = 0; i < 200000; i++) {
			size_t k, size;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			k = x % 512;
			size = 1 + (x >> 20) % 5000;
			if (blocks[k] && (x >> 40) % 3 == 0) {
				char *q = realloc(blocks[k], size);

				if (!q)
					return 2;
				blocks[k] = q;
			} else {
				guard_free_site(blocks[k]);
				blocks[k] = guard_malloc_site(size);
				if (!blocks[k])
					return 2;
			}
			if (malloc_usable_size(blocks[k]) < size)
				return 3;
			memset(blocks[k], (int)k, size);
		}
		for (int k = 0; k < 512; k++)
			free(blocks[k]);
		guard_free_site(p);
		printf("clean ok\n");
	}
	return 0;
}
