// SPDX-License-Identifier: MIT
/*
 * bench_stat.c - what USLAB_STATS=1 costs the process it watches: N caches
 * (default 1000; objects of 64 to 560 bytes) with 16 objects each, and
 * uslab's own, exported for SECONDS (default 3.5) at USLAB_STATS_MS
 * (default 1000: one snapshot a second), then the CPU time of one
 * snapshot, read from the process's own export file (src/export.h).
 *
 *	stat [CACHES [SECONDS]]		(run with USLAB_STATS=1)
 *
 * CSV (bench "stat", variant "uslab", param CACHES): refresh_ms, the CPU
 * time of one snapshot; cpu_ms_per_s, that per second at USLAB_STATS_MS.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "export.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	double secs = argc > 2 ? atof(argv[2]) : 3.5;
	const char *ms = getenv("USLAB_STATS_MS");
	double period = ms ? atof(ms) : 1000;
	char name[32], dir[EXPORT_DIR_MAX + 32], path[EXPORT_DIR_MAX + 80];
	const struct export_header *h;
	int fd;

	for (int i = 0; i < n; i++) {
		struct uslab_cache *c;

		snprintf(name, sizeof(name), "bench-%d", i);
		c = uslab_cache_create(name, 64 + (size_t)(i % 32) * 16, NULL, 0);
		if (!c)
			return 1;
		for (int j = 0; j < 16; j++)
			uslab_cache_alloc(c);
	}
	usleep((useconds_t)(secs * 1e6));
	if (!export_dir(dir, sizeof(dir), geteuid()))
		return 1;
	snprintf(path, sizeof(path), "%s/%s%d", dir, EXPORT_PREFIX, (int)getpid());
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "stat: %s: run with USLAB_STATS=1\n", path);
		return 1;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED)
		return 1;
	printf("stat: %u caches, %llu refreshes, %.3f ms of CPU per refresh, %.3f ms per second\n",
	       h->nrows, (unsigned long long)h->refreshes, h->refresh_ns / 1e6,
	       h->refresh_ns / 1e6 * 1000 / period);
	printf("CSV,stat,uslab,%d,refresh_ms,%.4f\n", n, h->refresh_ns / 1e6);
	printf("CSV,stat,uslab,%d,cpu_ms_per_s,%.4f\n", n, h->refresh_ns / 1e6 * 1000 / period);
	return 0;
}
