/* SPDX-License-Identifier: MIT */
/*
 * common.h - what the tests (test.h) and the benchmarks (bench/bench.h)
 * both need, written once: the seeded pseudo-random generator and the
 * process's resident memory.
 */
#ifndef USLAB_TESTS_COMMON_H
#define USLAB_TESTS_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* xorshift64*: deterministic pseudo-random numbers from a seed. */
static inline uint64_t rnd_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* Resident set size of this process in bytes (from /proc/self/statm); -1 if unknown. */
static inline long rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE);
}

/*
 * A field of /proc/self/status in MB: "VmHWM:" (peak resident memory of the
 * process so far) or "VmRSS:" (now); 0 if it cannot be read.
 */
static inline double proc_status_mb(const char *field)
{
	char line[256];
	long kb = 0;
	size_t len = strlen(field);
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len))
			kb = strtol(line + len, NULL, 10);
	if (f)
		fclose(f);
	return (double)kb / 1024.0;
}

#endif /* USLAB_TESTS_COMMON_H */
