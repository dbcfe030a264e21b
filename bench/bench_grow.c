// SPDX-License-Identifier: MIT
/*
 * bench_grow.c - one buffer grown by realloc to a huge size, the way perl,
 * gawk and sed read a single very long line (issue 24): the line is read in
 * chunks appended at the end of one buffer that realloc grows when the next
 * chunk does not fit.
 *
 *	grow MODE MB [CHUNK_KB]
 *
 * MODE: "x1.5" (the capacity grows to 1.5x when full, as most line readers
 * do: a few large reallocs), "x2" (doubling, gawk's and sed's), or "+N"
 * (the capacity grows by N MiB each time: many reallocs of a block that is
 * already huge). The buffer starts at 8 KiB; CHUNK_KB-sized chunks (default
 * 8) are written with memset (a different byte each chunk) until MB MiB are
 * in it, then the buffer is read once (a checksum) and freed.
 *
 * Linked with no allocator: bench/suites/heap.py runs it under each one by
 * LD_PRELOAD, timed by GNU time (wall time, peak RSS). It prints the
 * checksum and the number of reallocs (the same under every allocator, so
 * the harness checks that), and CSV lines of its own: seconds (the first
 * malloc, the growth loop with its writes and reallocs, and the read; not
 * start-up or the free), peak_kb (VmHWM) and moves (reallocs that returned
 * another address, i.e. copied or remapped elsewhere: 0 in place).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long vm_hwm_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = strtol(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "x1.5";
	size_t total = (size_t)(argc > 2 ? strtoul(argv[2], NULL, 10) : 195) << 20;
	size_t chunk = (size_t)(argc > 3 ? strtoul(argv[3], NULL, 10) : 8) << 10;
	size_t step = 0, cap = 8192, len = 0;
	double factor = 0;
	unsigned long reallocs = 0, moves = 0;
	uint64_t sum = 0;
	char *buf;
	double t0, t1;

	if (mode[0] == 'x')
		factor = strtod(mode + 1, NULL);
	else if (mode[0] == '+')
		step = (size_t)strtoul(mode + 1, NULL, 10) << 20;
	if ((factor <= 1.0 && !step) || !total || !chunk) {
		fprintf(stderr, "usage: %s x1.5|x2|+MB MB [CHUNK_KB]\n", argv[0]);
		return 2;
	}
	t0 = now();
	buf = malloc(cap);
	if (!buf)
		return 1;
	while (len < total) {
		size_t n = total - len < chunk ? total - len : chunk;

		if (len + n > cap) {
			size_t want = step ? cap + step : (size_t)((double)cap * factor);
			char *nb;

			if (want < len + n)
				want = len + n;
			nb = realloc(buf, want);
			if (!nb) {
				perror("realloc");
				return 1;
			}
			reallocs++;
			moves += nb != buf;
			buf = nb;
			cap = want;
		}
		memset(buf + len, (int)(len / chunk) & 0xff, n);
		len += n;
	}
	for (size_t i = 0; i < len; i += 4096)
		sum = sum * 31 + (unsigned char)buf[i] + i;
	t1 = now();
	free(buf);
	printf("grow %s %zu MiB by %zu KiB chunks: %lu reallocs, checksum %016llx\n", mode,
	       total >> 20, chunk >> 10, reallocs, (unsigned long long)sum);
	printf("CSV,grow,-,%s,seconds,%.4f\n", mode, t1 - t0);
	printf("CSV,grow,-,%s,peak_kb,%ld\n", mode, vm_hwm_kb());
	printf("CSV,grow,-,%s,moves,%lu\n", mode, moves);
	return 0;
}
