/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what every benchmark program shares: rdtsc timing, the TSC
 * frequency, medians and percentiles, CPU pinning, and the output format.
 *
 * Output: a human line per measurement in the seeds' format,
 *
 *	<what>: N cycles(tsc) X.XXX ns
 *
 * and a machine line for bench/run,
 *
 *	CSV,<bench>,<variant>,<param>,<metric>,<value>
 *
 * Programs take their sizes from argv and run a fixed amount of work; the
 * alternation of variants and repetitions (A B A B ...) and the medians
 * across processes are bench/run's job.
 */
#ifndef USLAB_BENCH_H
#define USLAB_BENCH_H

#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "../tests/common.h"

/* Keep the compiler from eliding an allocation it can see is unused. */
#define escape(p) __asm__ __volatile__("" : : "r"(p) : "memory")

/* lfence; rdtsc (valgrind does not know rdtscp). */
static inline uint64_t tsc_now(void)
{
	_mm_lfence();
	return __rdtsc();
}

static inline double wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* TSC ticks per nanosecond, measured once against CLOCK_MONOTONIC_RAW. */
static inline double tsc_per_ns(void)
{
	static double ghz;

	if (!ghz) {
		double t0 = wall_ns(), t1;
		uint64_t c0 = tsc_now(), c1;

		do
			t1 = wall_ns();
		while (t1 - t0 < 50e6);
		c1 = tsc_now();
		ghz = (double)(c1 - c0) / (t1 - t0);
	}
	return ghz;
}

/* The tests' generator (tests/common.h) under the benchmarks' name. */
static inline uint64_t rnd(uint64_t *s)
{
	return rnd_next(s);
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of @n values (sorts them). */
static inline double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The @q-quantile (0..1) of @n samples, sorted in place. */
static inline uint64_t quantile(uint64_t *v, size_t n, double q)
{
	size_t i;

	qsort(v, n, sizeof(*v), cmp_u64);
	i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

static inline void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* "<what>: N cycles(tsc) X.XXX ns" plus the CSV line for bench/run. */
static inline void report_cycles(const char *bench, const char *variant, const char *param,
				 double cycles)
{
	double ns = cycles / tsc_per_ns();

	printf("%-10s %-12s %-10s: %.0f cycles(tsc) %.3f ns\n", bench, variant, param, cycles, ns);
	printf("CSV,%s,%s,%s,cycles,%.3f\n", bench, variant, param, cycles);
	printf("CSV,%s,%s,%s,ns,%.4f\n", bench, variant, param, ns);
}

/*
 * BENCH_WRITE: what the program writes into each object right after it
 * allocates it (issue 34: measured the way programs use their objects).
 *
 *   first4  one 4-byte store at offset 0, as a program sets the first field
 *           of its object (the README's struct conn { int fd; ... }). Where
 *           a benchmark stamps or checks a first word of its own, that word
 *           is this 4-byte field instead. The variant's name gets "-w4".
 *   none    (or unset) what the benchmark wrote before issue 34: nothing in
 *           pair, bulk and kmalloc's pair; its own 8-byte word (or line, in
 *           forward) in the others.
 *
 * Every peer writes the same bytes the same way. bench_w4() reads the
 * setting once: call it in main before any thread starts.
 */
static inline bool bench_w4(void)
{
	static int mode = -1;

	if (mode < 0) {
		const char *w = getenv("BENCH_WRITE");

		if (!w || !*w || !strcmp(w, "none")) {
			mode = 0;
		} else if (!strcmp(w, "first4")) {
			mode = 1;
		} else {
			fprintf(stderr, "BENCH_WRITE=%s: first4 or none\n", w);
			exit(2);
		}
	}
	return mode;
}

/* The store of BENCH_WRITE=first4: one 4-byte movl at offset 0, never merged or dropped. */
static inline void write_first4(void *p, uint32_t v)
{
	*(volatile uint32_t *)p = v;
}

/* @name, with "-w4" appended under BENCH_WRITE=first4, into @buf. */
static inline const char *write_name(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s%s", name, bench_w4() ? "-w4" : "");
	return buf;
}

/* BENCH_QUICK=1 in the environment: small default sizes, for a smoke run (bench/run). */
static inline bool bench_quick(void)
{
	const char *q = getenv("BENCH_QUICK");

	return q && !strcmp(q, "1");
}

static inline void report_value(const char *bench, const char *variant, const char *param,
				const char *metric, double value)
{
	printf("%-10s %-12s %-10s: %s %.3f\n", bench, variant, param, metric, value);
	printf("CSV,%s,%s,%s,%s,%.4f\n", bench, variant, param, metric, value);
}

/*
 * A latency histogram of TSC cycle counts, for many threads' samples
 * without storing them: exact below 64 cycles, then 64 buckets per power
 * of two (1.6% resolution). Each thread fills its own array of HBUCKETS
 * counters (hist_add); the arrays are summed and hist_quantile reads them.
 */
#define HBUCKETS 3840

static inline unsigned int hist_bucket(uint64_t v)
{
	unsigned int e;

	if (v < 64)
		return (unsigned int)v;
	e = 63u - (unsigned int)__builtin_clzll(v); /* >= 6 */
	return (e - 5) * 64 + (unsigned int)((v >> (e - 6)) & 63);
}

static inline void hist_add(uint64_t *h, uint64_t cycles)
{
	h[hist_bucket(cycles)]++;
}

/*
 * The @q-quantile (0..1) of the @n samples in @h, in cycles: the floor of
 * the bucket holding the sample of rank floor(q * (n - 1)) + 1, so up to
 * 1.6% low. 0 when there are no samples.
 */
static inline uint64_t hist_quantile(const uint64_t *h, uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * (double)(n - 1)) + 1, seen = 0;
	unsigned int b;

	if (!n)
		return 0;

	for (b = 0; b < HBUCKETS - 1; b++) {
		seen += h[b];
		if (seen >= want)
			break;
	}
	return b < 64 ? b : (64ull + b % 64) << (b / 64 - 1);
}

#endif /* USLAB_BENCH_H */
