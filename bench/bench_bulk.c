// SPDX-License-Identifier: MIT
/*
 * bench_bulk.c - the seed's slab_bulk_test0{1,2,3} (Jesper Dangaard Brouer's
 * prototype-kernel modules), in userspace, per peer, on 256-byte objects.
 * The peers' calls are bench/peer.h's (dpdk: rte_mempool_generic_get / put
 * through a 512-object per-lcore cache; mimalloc: no bulk API, a loop of
 * single calls).
 *
 *	bulk-<peer> test01 [LOOPS [N...]]
 *		bulk sizes 1 2 3 4 8 16 30 32 34 48 64 128 158 250 (or the N
 *		given, 1 to 256: one size per run is what callgrind counts
 *		per call, with --toggle-collect=bulk): "fallback"
 *		(a loop of single allocs, then a loop of single frees) against
 *		the bulk API (one bulk alloc, one bulk free); per object
 *		"N cycles(tsc) X.XXX ns" and the improvement in %. uslab: also
 *		the pool calls, uslab_pool_get_bulk + uslab_pool_put_bulk on
 *		the same cache (DPDK's semantics: no NULL skipped, the array
 *		not cleared, where uslab_cache_free_bulk skips NULL entries
 *		and clears every entry).
 *	bulk-<peer> test02 [LOOPS [REPEAT]]
 *		bulk sizes 16 48 144 512 2048, each measured REPEAT times
 *		(default 100): min, avg, max and stddev of cycles per object.
 *	bulk-<peer> test03 [LIVE [CHUNK [OPS]]]
 *		the worst case: LIVE objects (default 1M) allocated, then OPS
 *		times a chunk of CHUNK (default 64) objects drawn at random from
 *		the live set is bulk-freed and as many bulk-allocated back, so
 *		neighbouring array entries are from different slabs. Per object
 *		cycles of one free + one alloc, the random draws included (the
 *		first tenth of OPS untimed, a warm-up). uslab's look-ahead is
 *		set with USLAB_LOOKAHEAD (variant "<peer>-la<N>");
 *		USLAB_SHEAF_CAPACITY=1 (variant "...-nosheaf") sends every bulk
 *		free straight to the slabs (detached freelists only, the seed's
 *		case).
 *	bulk-uslab test05 [LOOPS]
 *		the seed author's slab_bulk_test05 columns on the same objects,
 *		bulk sizes as test01: one bulk alloc, then the objects freed by
 *		uslab_cache_free_bulk(c) ("cache"), by kfree_bulk =
 *		uslab_cache_free_bulk(NULL) ("kfree_bulk"), and one by one with
 *		uslab_kfree ("kfree"); cycles per object of alloc + free.
 *
 * Objects are not touched (as in the seed's modules): what is measured is
 * the allocator. BENCH_WRITE=first4 (bench.h; variant "<peer>-w4"): every
 * object's first 4 bytes are written right after its allocation (after
 * the bulk call, one object after the other), as a program that uses
 * them does, the same way for every peer and every test.
 */
#include "bench.h"
#include "peer.h"

#include <math.h>

#define SIZE 256
static const size_t sizes01[] = { 1, 2, 3, 4, 8, 16, 30, 32, 34, 48, 64, 128, 158, 250 };
static const size_t sizes02[] = { 16, 48, 144, 512, 2048 };
static bool w4;
static char vname[64]; /* PEER_NAME, "-w4" under BENCH_WRITE=first4 */

/* BENCH_WRITE=first4: the first field of each of the @n objects set. */
static inline void write_all(size_t n, void **p)
{
	if (w4)
		for (size_t i = 0; i < n; i++)
			write_first4(p[i], (uint32_t)i);
}

/* LOOPS rounds of n allocs then n frees, one by one; @write a constant (no test per object). */
static inline __attribute__((always_inline)) void fallback_loop(size_t n, unsigned long loops,
								void **p, bool write)
{
	for (unsigned long l = 0; l < loops; l++) {
		for (size_t i = 0; i < n; i++) {
			p[i] = peer_alloc(SIZE);
			if (write)
				write_first4(p[i], (uint32_t)i);
		}
		escape(p);
		for (size_t i = 0; i < n; i++)
			peer_free(p[i], SIZE);
	}
}

/* Cycles per object of LOOPS rounds of n allocs then n frees, one by one. */
static double fallback(size_t n, unsigned long loops, void **p)
{
	uint64_t t0 = tsc_now();

	if (w4)
		fallback_loop(n, loops, p, true);
	else
		fallback_loop(n, loops, p, false);
	return (double)(tsc_now() - t0) / (double)(loops * n);
}

/* Cycles per object of LOOPS rounds of one bulk alloc and one bulk free. */
static double bulk(size_t n, unsigned long loops, void **p)
{
	uint64_t t0 = tsc_now();

	for (unsigned long l = 0; l < loops; l++) {
		if (peer_alloc_bulk(SIZE, n, p) != n)
			abort();
		write_all(n, p);
		escape(p);
		peer_free_bulk(SIZE, n, p);
	}
	return (double)(tsc_now() - t0) / (double)(loops * n);
}

#if (defined(PEER_USLAB) || defined(PEER_USLAB_CALL)) && defined(USLAB_POOL)
#define HAVE_POOL 1
/*
 * Cycles per object of LOOPS rounds of uslab_pool_get_bulk + put_bulk (DPDK's
 * semantics: all or nothing, no NULL skipped, the array not cleared).
 */
static double pool(size_t n, unsigned long loops, void **p)
{
	uint64_t t0 = tsc_now();

	for (unsigned long l = 0; l < loops; l++) {
		if (uslab_pool_get_bulk(peer_cache, n, p))
			abort();
		write_all(n, p);
		escape(p);
		uslab_pool_put_bulk(peer_cache, n, p);
	}
	return (double)(tsc_now() - t0) / (double)(loops * n);
}
#endif

static void test01(unsigned long objs, const size_t *sizes, size_t nsizes)
{
	void *p[256];
	char param[32];

	printf("bulk- fallback - bulk API   (%s, %d-byte objects)\n", vname, SIZE);
	for (size_t k = 0; k < nsizes; k++) {
		size_t n = sizes[k];
		unsigned long loops = objs / n;
		double f[5], b[5], fm, bm;
#ifdef HAVE_POOL
		double q[5], qm;
#endif

		fallback(n, loops / 10 + 1, p); /* warm */
		for (int r = 0; r < 5; r++) {
			f[r] = fallback(n, loops, p);
			b[r] = bulk(n, loops, p);
#ifdef HAVE_POOL
			q[r] = pool(n, loops, p);
#endif
		}
		fm = median(f, 5);
		bm = median(b, 5);
		printf("%3zu - %3.0f cycles(tsc) %6.3f ns - %3.0f cycles(tsc) %6.3f ns - improved %5.1f%%\n",
		       n, fm, fm / tsc_per_ns(), bm, bm / tsc_per_ns(), 100.0 * (fm - bm) / fm);
		snprintf(param, sizeof(param), "%zu", n);
		printf("CSV,test01,%s,%s,fallback_cycles,%.3f\n", vname, param, fm);
		printf("CSV,test01,%s,%s,bulk_cycles,%.3f\n", vname, param, bm);
		printf("CSV,test01,%s,%s,fallback_ns,%.4f\n", vname, param, fm / tsc_per_ns());
		printf("CSV,test01,%s,%s,bulk_ns,%.4f\n", vname, param, bm / tsc_per_ns());
#ifdef HAVE_POOL
		qm = median(q, 5);
		printf("      pool_get_bulk + pool_put_bulk: %3.0f cycles(tsc) %6.3f ns\n", qm,
		       qm / tsc_per_ns());
		printf("CSV,test01,%s,%s,pool_cycles,%.3f\n", vname, param, qm);
		printf("CSV,test01,%s,%s,pool_ns,%.4f\n", vname, param, qm / tsc_per_ns());
#endif
	}
}

#if defined(PEER_USLAB) || defined(PEER_USLAB_CALL)
#include <uslab/kmalloc.h>

/* Cycles per object of LOOPS rounds of one bulk alloc and a free of kind @how. */
static double test05_round(size_t n, unsigned long loops, void **p, int how)
{
	uint64_t t0 = tsc_now();

	for (unsigned long l = 0; l < loops; l++) {
		if (uslab_cache_alloc_bulk(peer_cache, n, p) != n)
			abort();
		write_all(n, p);
		escape(p);
		if (how == 0)
			uslab_cache_free_bulk(peer_cache, n, p);
		else if (how == 1)
			uslab_cache_free_bulk(NULL, n, p);
		else
			for (size_t i = 0; i < n; i++)
				uslab_kfree(p[i]);
	}
	return (double)(tsc_now() - t0) / (double)(loops * n);
}

static void test05(unsigned long objs)
{
	static const char *const col[] = { "cache", "kfree_bulk", "kfree" };
	void *p[256];
	char param[32];

	printf("bulk- free_bulk(c) - kfree_bulk - kfree loop   (%s, %d-byte objects)\n", vname,
	       SIZE);
	for (size_t k = 0; k < sizeof(sizes01) / sizeof(sizes01[0]); k++) {
		size_t n = sizes01[k];
		unsigned long loops = objs / n;
		double v[3][5], m[3];

		test05_round(n, loops / 10 + 1, p, 1); /* warm */
		for (int r = 0; r < 5; r++)
			for (int h = 0; h < 3; h++)
				v[h][r] = test05_round(n, loops, p, h);
		snprintf(param, sizeof(param), "%zu", n);
		for (int h = 0; h < 3; h++) {
			m[h] = median(v[h], 5);
			printf("CSV,test05,%s,%s,%s_cycles,%.3f\n", vname, param, col[h], m[h]);
		}
		printf("%3zu - %3.0f cycles(tsc) - %3.0f cycles(tsc) (%.2fx) - %3.0f cycles(tsc)\n",
		       n, m[0], m[1], m[1] / m[0], m[2]);
	}
}
#endif

static void test02(unsigned long objs, int repeat)
{
	void **p = malloc(2048 * sizeof(void *));
	double *v = malloc((size_t)repeat * sizeof(double));
	char param[32];

	printf("bulk size: min / avg / max / stddev cycles per object (%s, %d runs)\n", vname,
	       repeat);
	for (size_t k = 0; k < sizeof(sizes02) / sizeof(sizes02[0]); k++) {
		size_t n = sizes02[k];
		unsigned long loops = objs / n ? objs / n : 1;
		double min = 1e30, max = 0, sum = 0, sq = 0, avg, sd;

		bulk(n, loops, p); /* warm */
		for (int r = 0; r < repeat; r++) {
			v[r] = bulk(n, loops, p);
			min = v[r] < min ? v[r] : min;
			max = v[r] > max ? v[r] : max;
			sum += v[r];
		}
		avg = sum / repeat;
		for (int r = 0; r < repeat; r++)
			sq += (v[r] - avg) * (v[r] - avg);
		sd = sqrt(sq / repeat);
		printf("bulk size:%4zu  between %.0f-%.0f (average: %.2f stddev: +/-%.1f)\n", n,
		       min, max, avg, sd);
		snprintf(param, sizeof(param), "%zu", n);
		printf("CSV,test02,%s,%s,min,%.3f\n", vname, param, min);
		printf("CSV,test02,%s,%s,avg,%.3f\n", vname, param, avg);
		printf("CSV,test02,%s,%s,max,%.3f\n", vname, param, max);
		printf("CSV,test02,%s,%s,stddev,%.3f\n", vname, param, sd);
	}
	free(p);
	free(v);
}

static void test03(size_t live, size_t chunk, unsigned long ops)
{
	void **set = malloc(live * sizeof(void *));
	size_t *idx = malloc(chunk * sizeof(size_t));
	void **p = malloc(chunk * sizeof(void *));
	uint64_t seed = 12345, t0, cyc;
	const char *la = getenv("USLAB_LOOKAHEAD");
	const char *sc = getenv("USLAB_SHEAF_CAPACITY");
	char variant[64], param[32];

	for (size_t i = 0; i < live; i += chunk) {
		size_t n = live - i < chunk ? live - i : chunk;

		if (peer_alloc_bulk(SIZE, n, set + i) != n)
			abort();
	}
	/* Shuffle, so the live set's order says nothing about slabs. */
	for (size_t i = live - 1; i > 0; i--) {
		size_t j = (size_t)(rnd(&seed) % (i + 1));
		void *t = set[i];

		set[i] = set[j];
		set[j] = t;
	}
	t0 = tsc_now();
	for (unsigned long o = 0; o < ops + ops / 10; o++) {
		if (o == ops / 10)
			t0 = tsc_now(); /* the first tenth warms up */
		/* CHUNK distinct live objects, drawn at random. */
		for (size_t i = 0; i < chunk; i++) {
			do
				idx[i] = (size_t)(rnd(&seed) % live);
			while (!set[idx[i]]);
			p[i] = set[idx[i]];
			set[idx[i]] = NULL;
		}
		peer_free_bulk(SIZE, chunk, p);
		if (peer_alloc_bulk(SIZE, chunk, p) != chunk)
			abort();
		write_all(chunk, p);
		for (size_t i = 0; i < chunk; i++)
			set[idx[i]] = p[i];
	}
	cyc = tsc_now() - t0;
	snprintf(variant, sizeof(variant), "%s%s%s%s%s", PEER_NAME, la ? "-la" : "", la ? la : "",
		 sc && !strcmp(sc, "1") ? "-nosheaf" : "", w4 ? "-w4" : "");
	snprintf(param, sizeof(param), "%zu", chunk);
	report_cycles("test03", variant, param, (double)cyc / (double)(ops * chunk));
	free(set);
	free(idx);
	free(p);
}

int main(int argc, char **argv)
{
	const char *test = argc > 1 ? argv[1] : "test01";

	w4 = bench_w4();
	write_name(vname, sizeof(vname), PEER_NAME);
	pin_to_cpu(0);
	peer_init(SIZE);
	if (!strcmp(test, "test01")) {
		size_t own[16], nown = 0;

		for (int i = 3; i < argc && nown < 16; i++) {
			own[nown] = strtoul(argv[i], NULL, 0);
			if (own[nown] < 1 || own[nown] > 256) {
				fprintf(stderr, "%s: test01 sizes are 1 to 256\n", argv[0]);
				return 2;
			}
			nown++;
		}
		test01(argc > 2 ? strtoul(argv[2], NULL, 0) : 2000000, nown ? own : sizes01,
		       nown ? nown : sizeof(sizes01) / sizeof(sizes01[0]));
	} else if (!strcmp(test, "test02")) {
		test02(argc > 2 ? strtoul(argv[2], NULL, 0) : 200000,
		       argc > 3 ? atoi(argv[3]) : 100);
	} else if (!strcmp(test, "test03")) {
		test03(argc > 2 ? strtoul(argv[2], NULL, 0) : 1000000,
		       argc > 3 ? strtoul(argv[3], NULL, 0) : 64,
		       argc > 4 ? strtoul(argv[4], NULL, 0) : 200000);
#if defined(PEER_USLAB) || defined(PEER_USLAB_CALL)
	} else if (!strcmp(test, "test05")) {
		test05(argc > 2 ? strtoul(argv[2], NULL, 0) : 2000000);
#endif
	} else {
		fprintf(stderr, "usage: %s test01|test02|test03|test05 [args]\n", argv[0]);
		return 2;
	}
	peer_report();
	return 0;
}
