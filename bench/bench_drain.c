// SPDX-License-Identifier: MIT
/*
 * bench_drain.c - the scattered full drain of issue 11: a big set of live
 * objects freed entirely, in random order, in bulk chunks, then allocated
 * back (the teardown of a connection table, an LRU eviction storm).
 *
 *	drain-<peer> [SIZE [N [ROUNDS [LAYOUT]]]]
 *
 * N objects of SIZE bytes (defaults 256, 1048576; BENCH_QUICK=1: 131072)
 * are allocated in chunks of 64 and one word of each is written, so their
 * pages are real. Then ROUNDS times (default 3): the pointer array is
 * shuffled (xorshift, fixed seed; untimed), every object is freed with the
 * bulk free in chunks of 64 consecutive array entries (neighbours come from
 * unrelated slabs), then all N are allocated back with the bulk alloc in
 * chunks of 64 into the same array; then one word of each object is
 * written, as the program would (timed apart: "touch"). The allocator's
 * calls are timed on their own.
 *
 * Per operation, the median over the rounds: the free phase / N, the alloc
 * phase / N, both phases / 2N ("op"), and the writes after the refill / N
 * ("touch": page faults on pages an allocator gave back to the OS land
 * there), as "N cycles(tsc) X.XXX ns".
 * Peak RSS of the process (VmHWM) as well; uslab: the layout in effect
 * too (metric "layout", enum uslab_layout: what auto chose), with its
 * objects per slab and colours. BENCH_WRITE=first4 (bench.h):
 * those writes are 4-byte stores at offset 0 instead of 8-byte ones
 * (variant "...-w4").
 *
 * Peers: uslab (uslab_cache_alloc_bulk / free_bulk on a cache created with
 * .layout = LAYOUT: auto freeptr objfreelist onslab offslab, default auto;
 * LAYOUT "pool": a USLAB_POOL cache with a reserve of N objects, through
 * uslab_pool_get_bulk / uslab_pool_put_bulk, as DPDK's mempool is used
 * (free objects stay pointers in the sheaves, the barn and the cache's
 * loose array, never back in a slab);
 * variant "uslab-<LAYOUT>", "uslab-<LAYOUT>-resident" when USLAB_PURGE_DELAY_MS
 * or USLAB_RETAIN_KB is set; a layout the cache cannot have, EINVAL, is
 * reported as "n/a" and the program exits 0); dpdk (rte_mempool_generic_get /
 * put with the 512-object cache, a pool of N + 4096 objects unless
 * BENCH_DPDK_OBJS says otherwise); mimalloc (no bulk API: mi_malloc / mi_free
 * one by one over each chunk).
 */
#include "bench.h"
#include "peer.h"

#include <errno.h>

#define CHUNK 64

static bool w4; /* BENCH_WRITE=first4 */

/* What the program writes into an object it allocated: its first word or field. */
static inline void write_obj(void *p, size_t v)
{
	if (w4)
		write_first4(p, (uint32_t)v);
	else
		*(volatile size_t *)p = v;
}

#ifdef PEER_USLAB
static const char *layout_arg = "auto";
static bool pool_mode;

static size_t reserve_objs;

/* The cache of peer.h, created with a layout; false if the layout is impossible. */
static bool init_layout(size_t size, const char *name)
{
	struct uslab_cache_args args = { 0 };
	unsigned int l;

	if (!strcmp(name, "pool")) {
		/* The whole population reserved at creation, as rte_mempool_create(). */
		pool_mode = true;
		args.reserve = reserve_objs;
		peer_cache = uslab_cache_create("drain", size, &args, USLAB_POOL);
		if (!peer_cache)
			abort();
		return true;
	}
	for (l = 0; l < USLAB_LAYOUT_NR; l++)
		if (!strcmp(name, uslab_layout_name(l)))
			break;
	if (l == USLAB_LAYOUT_NR) {
		fprintf(stderr, "drain: unknown layout '%s'\n", name);
		exit(2);
	}
	args.layout = l;
	peer_cache = uslab_cache_create("drain", size, &args, 0);
	if (peer_cache)
		return true;
	if (errno != EINVAL)
		abort();
	return false;
}
#endif

static inline size_t drain_alloc(size_t size, size_t n, void **p)
{
#ifdef PEER_USLAB
	if (pool_mode)
		return uslab_pool_get_bulk(peer_cache, n, p) ? 0 : n;
#endif
	return peer_alloc_bulk(size, n, p);
}

static inline void drain_free(size_t size, size_t n, void **p)
{
#ifdef PEER_USLAB
	if (pool_mode) {
		uslab_pool_put_bulk(peer_cache, n, p);
		return;
	}
#endif
	peer_free_bulk(size, n, p);
}

static void shuffle(void **set, size_t n, uint64_t *seed)
{
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)(rnd(seed) % (i + 1));
		void *t = set[i];

		set[i] = set[j];
		set[j] = t;
	}
}

static void print_phase(const char *variant, const char *param, const char *what,
			const char *metric, double cycles)
{
	double ns = cycles / tsc_per_ns();

	printf("%-10s %-18s %-6s %-5s: %.0f cycles(tsc) %.3f ns\n", "drain", variant, param, what,
	       cycles, ns);
	printf("CSV,drain,%s,%s,%scycles,%.3f\n", variant, param, metric, cycles);
	printf("CSV,drain,%s,%s,%sns,%.4f\n", variant, param, metric, ns);
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	size_t n = argc > 2 ? strtoul(argv[2], NULL, 0) : bench_quick() ? 131072 : 1048576;
	int rounds = argc > 3 ? atoi(argv[3]) : 3;
	char variant[64], param[32];
	double *fr, *al, *tot, *wr;
	uint64_t seed = 0x5eed0011;
	void **set;

	if (!size || n < CHUNK || rounds < 1) {
		fprintf(stderr, "usage: %s [SIZE [N [ROUNDS [LAYOUT]]]]\n", argv[0]);
		return 2;
	}
	snprintf(param, sizeof(param), "%zu", size);
	w4 = bench_w4();
	pin_to_cpu(0);
#ifdef PEER_USLAB
	if (argc > 4)
		layout_arg = argv[4];
	reserve_objs = n;
	/* Freed slabs kept resident (bench/run's "-resident" variants): the OS layer set aside. */
	snprintf(variant, sizeof(variant), "uslab-%s%s%s", layout_arg,
		 getenv("USLAB_PURGE_DELAY_MS") || getenv("USLAB_RETAIN_KB") ? "-resident" : "",
		 w4 ? "-w4" : "");
	if (!init_layout(size, layout_arg)) {
		printf("%-10s %-18s %-6s: n/a (uslab_cache_create: EINVAL)\n", "drain", variant,
		       param);
		printf("CSV,drain,%s,%s,na,1\n", variant, param);
		return 0;
	}
#else
#ifdef PEER_DPDK
	{
		char objs[32];

		snprintf(objs, sizeof(objs), "%zu", n + 4096);
		setenv("BENCH_DPDK_OBJS", objs, 0);
	}
#endif
	write_name(variant, sizeof(variant), PEER_NAME);
	peer_init(size);
#endif
	tsc_per_ns();

	set = malloc(n * sizeof(*set));
	fr = malloc((size_t)rounds * sizeof(*fr));
	al = malloc((size_t)rounds * sizeof(*al));
	tot = malloc((size_t)rounds * sizeof(*tot));
	wr = malloc((size_t)rounds * sizeof(*wr));
	if (!set || !fr || !al || !tot || !wr)
		abort();

	for (size_t i = 0; i < n; i += CHUNK) {
		size_t k = n - i < CHUNK ? n - i : CHUNK;

		if (drain_alloc(size, k, set + i) != k)
			abort();
		for (size_t j = 0; j < k; j++)
			write_obj(set[i + j], i + j);
	}

	for (int r = 0; r < rounds; r++) {
		uint64_t t0, t1, t2, t3;

		shuffle(set, n, &seed);
		t0 = tsc_now();
		for (size_t i = 0; i < n; i += CHUNK)
			drain_free(size, n - i < CHUNK ? n - i : CHUNK, set + i);
		t1 = tsc_now();
		for (size_t i = 0; i < n; i += CHUNK) {
			size_t k = n - i < CHUNK ? n - i : CHUNK;

			if (drain_alloc(size, k, set + i) != k)
				abort();
		}
		t2 = tsc_now();
		/* What the program does next: write into each object (the pages become real again). */
		for (size_t i = 0; i < n; i++)
			write_obj(set[i], i);
		t3 = tsc_now();
		fr[r] = (double)(t1 - t0) / (double)n;
		al[r] = (double)(t2 - t1) / (double)n;
		tot[r] = (double)(t2 - t0) / (2.0 * (double)n);
		wr[r] = (double)(t3 - t2) / (double)n;
	}

	print_phase(variant, param, "free", "free_", median(fr, (size_t)rounds));
	print_phase(variant, param, "alloc", "alloc_", median(al, (size_t)rounds));
	print_phase(variant, param, "op", "", median(tot, (size_t)rounds));
	print_phase(variant, param, "touch", "touch_", median(wr, (size_t)rounds));
	printf("%-10s %-18s %-6s %-5s: %.1f MB\n", "drain", variant, param, "peak",
	       proc_status_mb("VmHWM:"));
	printf("CSV,drain,%s,%s,peak_rss_mb,%.4f\n", variant, param, proc_status_mb("VmHWM:"));
#ifdef PEER_USLAB
	{
		struct uslab_cache_stats st;

		if (!uslab_cache_stats(peer_cache, &st)) {
			printf("%-10s %-18s %-6s %-5s: %s, %u objects per slab, %u colours\n",
			       "drain", variant, param, "slab", uslab_layout_name(st.layout),
			       st.objperslab, st.colours);
			printf("CSV,drain,%s,%s,layout,%u\n", variant, param, st.layout);
		}
	}
#endif
	peer_report();
	for (size_t i = 0; i < n; i += CHUNK)
		drain_free(size, n - i < CHUNK ? n - i : CHUNK, set + i);
	free(set);
	free(fr);
	free(al);
	free(tot);
	free(wr);
	return 0;
}
