// SPDX-License-Identifier: MIT
/*
 * heapprof_sites - a heap of known allocation sites, for the heap profile's
 * test (test_heapprof.sh): site_main holds 80% of the live bytes (512-byte
 * objects), site_small and site_large 10% each (64-byte objects; 96 KiB
 * objects, large ones), and site_freed allocated as much as site_main,
 * resized it and freed it all: a profile must not show it. With -DUSE_KMALLOC it
 * calls uslab_kmalloc/uslab_kfree (linked with libuslab.so), else
 * malloc/free (run under the drop-in, LD_PRELOAD=libuslab-malloc.so).
 * Arguments: the live heap in MiB (default 64); seconds to wait before
 * exiting (default 0: uslab-stat --heap-profile reads it meanwhile). It
 * exits normally, for USLAB_PROFILE=exit to write its profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifdef USE_KMALLOC
#include <uslab.h>
#define ALLOC(n) uslab_kmalloc(n)
#define REALLOC(p, n) uslab_krealloc(p, n)
#define FREE(p) uslab_kfree(p)
#else
#define ALLOC(n) malloc(n)
#define REALLOC(p, n) realloc(p, n)
#define FREE(p) free(p)
#endif

static void **keep;
static size_t nkeep;

__attribute__((noinline)) static void hold(void *p)
{
	if (!p) {
		fprintf(stderr, "heapprof_sites: out of memory\n");
		exit(1);
	}
	memset(p, 1, 16);
	keep[nkeep++] = p;
}

__attribute__((noinline)) static void site_main(size_t bytes)
{
	for (size_t i = 0; i < bytes / 512; i++) {
		void *p = ALLOC(512);

		hold(p);
	}
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void site_small(size_t bytes)
{
	for (size_t i = 0; i < bytes / 64; i++) {
		void *p = ALLOC(64);

		hold(p);
	}
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void site_large(size_t bytes)
{
	for (size_t i = 0; i < bytes / (96 << 10); i++) {
		void *p = ALLOC(96 << 10);

		hold(p);
	}
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void site_freed(size_t bytes)
{
	void **tmp = calloc(bytes / 1024, sizeof(void *));

	for (size_t i = 0; tmp && i < bytes / 1024; i++) {
		tmp[i] = ALLOC(512);
		memset(tmp[i], 2, 16);
		/* Resized (a sampled object is copied, its record dropped), then freed. */
		tmp[i] = REALLOC(tmp[i], 1024);
	}
	for (size_t i = 0; tmp && i < bytes / 1024; i++)
		FREE(tmp[i]);
	free(tmp);
	__asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	size_t live = mib << 20;

	/* (Not from the allocator: the array would be a site of its own.) */
	keep = mmap(NULL, (live / 64 + 16) * sizeof(void *), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (keep == MAP_FAILED)
		return 1;
	/* Interleaved, in rounds: no site's objects all come first. */
	for (int r = 0; r < 8; r++) {
		site_freed(live / 8);
		site_main(live / 8 * 8 / 10);
		site_small(live / 8 / 10);
		site_large(live / 8 / 10);
	}
	printf("heapprof_sites: %zu objects live\n", nkeep);
	fflush(stdout);
	if (argc > 2)
		sleep((unsigned int)atoi(argv[2]));
	return 0;
}
