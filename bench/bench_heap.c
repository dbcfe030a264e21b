// SPDX-License-Identifier: MIT
/*
 * bench_heap.c - what returning memory to the OS costs in system calls
 * (issue 24): about 1 GiB allocated across caches whose slabs have several
 * orders and large objects of several sizes, every page written, all of it
 * freed in a random order, then given back to the OS.
 *
 *	heap MODE [MB [WAIT_MS]]
 *
 * MODE: "trim" - uslab_trim() after the frees (every free page back now);
 * "decay" - uslab_cache_shrink() on each cache and kmalloc class used
 * (empty slabs back to the page heap), then the decay thread is left to
 * purge: the program waits until the page heap retains nothing, or WAIT_MS
 * (default 5000) have passed. MB: the total (default 1024), 5/8 of it in
 * four caches (64, 512, 4096 and 16384-byte objects), 3/8 in kmalloc large
 * objects (40 KiB to 3 MiB).
 *
 * With the page heap's API (uslab_heap_stats, uslab_trim: CMake defines
 * BENCH_HEAP_STATS when include/uslab/stats.h declares them) it reports
 * the page heap's counters; without it (the OS layer before issue 24) it
 * shrinks the caches in both modes and reports what it can. The system
 * calls themselves are counted from outside too: bench/suites/heap.py runs
 * the program under strace -e trace=madvise,munmap.
 *
 * CSV (bench "heap", variant MODE, param MB): madvise_calls, purged_mb,
 * munmap_calls, madvise_per_gib (madvise_calls * 2^30 / purged_bytes),
 * rss_peak_mb, rss_after_mb (VmRSS once the memory was given back),
 * return_ms (the trim call, or the shrinks plus the wait for the decay).
 */
#include "bench.h"

#include <uslab.h>
#include <uslab/kmalloc.h>
#include <uslab/stats.h>

#define NCACHES 4
static const size_t cache_size[NCACHES] = { 64, 512, 4096, 16384 };
#define NLARGE 5
static const size_t large_size[NLARGE] = { 40 << 10, 100 << 10, 300 << 10, 1 << 20, 3 << 20 };

struct obj {
	void *p;
	int kind; /* 0..NCACHES-1: a cache; NCACHES: kmalloc */
};

static void touch(void *p, size_t size)
{
	for (size_t off = 0; off < size; off += 4096)
		((volatile char *)p)[off] = 1;
	((volatile char *)p)[size - 1] = 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "trim";
	size_t mb = argc > 2 ? strtoul(argv[2], NULL, 10) : 1024;
	long wait_ms = argc > 3 ? strtol(argv[3], NULL, 10) : 5000;
	size_t total = mb << 20, per_cache = total / 8 * 5 / NCACHES, large_total = total / 8 * 3;
	struct uslab_cache *c[NCACHES];
	struct obj *v;
	size_t n = 0, cap = 0, bytes = 0;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	double t0, t1, peak;
	char param[32];
	bool trim = !strcmp(mode, "trim");

	if (!mb || (!trim && strcmp(mode, "decay"))) {
		fprintf(stderr, "usage: %s trim|decay [MB [WAIT_MS]]\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < NCACHES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "heap-%zu", cache_size[i]);
		c[i] = uslab_cache_create(name, cache_size[i], NULL, 0);
		if (!c[i]) {
			perror("uslab_cache_create");
			return 1;
		}
		cap += per_cache / cache_size[i];
	}
	cap += large_total / large_size[0] + 1;
	v = malloc(cap * sizeof(*v));
	if (!v)
		return 1;
	/* The caches' objects, interleaved so slabs of every order are taken in turn. */
	for (size_t k = 0;; k++) {
		bool more = false;

		for (int i = 0; i < NCACHES; i++) {
			if (k >= per_cache / cache_size[i])
				continue;
			more = true;
			v[n].p = uslab_cache_alloc(c[i]);
			if (!v[n].p) {
				perror("uslab_cache_alloc");
				return 1;
			}
			touch(v[n].p, cache_size[i]);
			v[n++].kind = i;
		}
		if (!more)
			break;
	}
	for (unsigned k = 0; bytes < large_total; k++) {
		size_t s = large_size[k % NLARGE];

		v[n].p = uslab_kmalloc(s);
		if (!v[n].p) {
			perror("uslab_kmalloc");
			return 1;
		}
		touch(v[n].p, s);
		v[n++].kind = NCACHES;
		bytes += s;
	}
	peak = proc_status_mb("VmRSS:");
	for (size_t i = n - 1; i > 0; i--) { /* a random order of frees */
		size_t j = rnd(&seed) % (i + 1);
		struct obj t = v[i];

		v[i] = v[j];
		v[j] = t;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i].kind < NCACHES)
			uslab_cache_free(c[v[i].kind], v[i].p);
		else
			uslab_kfree(v[i].p);
	}
	t0 = wall_ns();
#ifdef BENCH_HEAP_STATS
	if (trim) {
		size_t got = uslab_trim();

		printf("uslab_trim: %zu MB given back\n", got >> 20);
	} else {
		struct uslab_heap_stats st;

		for (int i = 0; i < NCACHES; i++)
			uslab_cache_shrink(c[i]);
		uslab_thread_flush();
		for (long waited = 0; waited < wait_ms; waited += 10) {
			if (uslab_heap_stats(&st) == 0 && st.retained_bytes == 0)
				break;
			usleep(10000);
		}
	}
#else
	for (int i = 0; i < NCACHES; i++)
		uslab_cache_shrink(c[i]);
	uslab_thread_flush();
	if (!trim)
		usleep((useconds_t)wait_ms * 1000);
#endif
	t1 = wall_ns();
	snprintf(param, sizeof(param), "%zu", mb);
	report_value("heap", mode, param, "rss_peak_mb", peak);
	report_value("heap", mode, param, "rss_after_mb", proc_status_mb("VmRSS:"));
	report_value("heap", mode, param, "return_ms", (t1 - t0) / 1e6);
#ifdef BENCH_HEAP_STATS
	{
		struct uslab_heap_stats st;

		if (uslab_heap_stats(&st)) {
			perror("uslab_heap_stats");
			return 1;
		}
		printf("page heap: mapped %llu MB, used %llu MB, retained %llu MB, purged %llu MB; "
		       "%llu madvise, %llu munmap, %llu mremap, %llu grown in place, %llu arenas\n",
		       (unsigned long long)st.mapped_bytes >> 20,
		       (unsigned long long)st.used_bytes >> 20,
		       (unsigned long long)st.retained_bytes >> 20,
		       (unsigned long long)st.purged_bytes >> 20,
		       (unsigned long long)st.madvise_calls, (unsigned long long)st.munmap_calls,
		       (unsigned long long)st.mremap_calls, (unsigned long long)st.grown_in_place,
		       (unsigned long long)st.arenas);
		report_value("heap", mode, param, "madvise_calls", (double)st.madvise_calls);
		report_value("heap", mode, param, "munmap_calls", (double)st.munmap_calls);
		report_value("heap", mode, param, "purged_mb", (double)st.purged_bytes / (1 << 20));
		report_value("heap", mode, param, "retained_mb",
			     (double)st.retained_bytes / (1 << 20));
		if (st.purged_bytes)
			report_value("heap", mode, param, "madvise_per_gib",
				     (double)st.madvise_calls * (1 << 30) /
					     (double)st.purged_bytes);
	}
#endif
	for (int i = 0; i < NCACHES; i++)
		uslab_cache_destroy(c[i]);
	free(v);
	return 0;
}
