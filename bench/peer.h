/* SPDX-License-Identifier: MIT */
/*
 * peer.h - one allocation interface over uslab and the allocators it is
 * compared with. Each benchmark is compiled once per peer (-DPEER_<NAME>)
 * into its own program, because jemalloc, tcmalloc and mimalloc replace
 * malloc for the whole process they are linked into.
 *
 *   uslab     uslab_cache_alloc / uslab_cache_free on a cache of the size
 *             (the inline fast path of <uslab/fastpath.h>)
 *   uslab-call the same through the exported functions (USLAB_NO_INLINE)
 *   glibc     __libc_malloc / __libc_free
 *   mimalloc  mi_malloc / mi_free
 *   jemalloc  malloc / free (libjemalloc linked: its malloc)
 *   tcmalloc  tc_malloc / tc_free
 *   dpdk      rte_mempool_generic_get / _put with a 512-object per-lcore
 *             cache (EAL started with --no-huge --no-pci --no-shconf; threads other
 *             than the main one register with rte_thread_register)
 *
 * peer_init(size) prepares for objects of one size; every thread other
 * than the one that called peer_init calls peer_thread_init() first;
 * peer_alloc / peer_free and peer_alloc_bulk / peer_free_bulk are what the
 * loops call (the malloc peers have no bulk interface: a loop stands in).
 *
 * Objects of any size (every peer but dpdk, PEER_HAS_KMALLOC): peer_kinit()
 * once, then peer_kmalloc(size) / peer_kfree(p, size) from any thread, @size
 * being what the object was allocated with (only a hint; no peer uses it):
 *
 *   uslab      uslab_kmalloc / uslab_kfree (inline, <uslab/kmalloc.h>)
 *   uslab-call the same through the exported functions (USLAB_NO_INLINE)
 *   glibc      __libc_malloc / __libc_free
 *   mimalloc   mi_malloc / mi_free
 *   jemalloc   malloc / free
 *   tcmalloc   tc_malloc / tc_free
 *
 * peer_kreport(): with BENCH_STATS=1, uslab prints the slow-path events of
 * its kmalloc classes, summed, to stderr (the others print nothing).
 */
#ifndef USLAB_BENCH_PEER_H
#define USLAB_BENCH_PEER_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(PEER_USLAB) || defined(PEER_USLAB_CALL)
#ifdef PEER_USLAB_CALL
#define USLAB_NO_INLINE 1
#define PEER_NAME "uslab-call"
#else
#define PEER_NAME "uslab"
#endif
#include <uslab.h>
static struct uslab_cache *peer_cache;
/*
 * BENCH_NO_FREE_KEY=1: the cache is created with USLAB_NO_FREE_KEY (what the
 * key costs). Headers without the flag (commits before it, which
 * bench/regress builds these programs against) refuse the setting.
 */
#ifdef USLAB_NO_FREE_KEY
#define PEER_NO_FREE_KEY USLAB_NO_FREE_KEY
#else
#define PEER_NO_FREE_KEY 0u
#endif
static inline void peer_init(size_t size)
{
	const char *nk = getenv("BENCH_NO_FREE_KEY");

	if (nk && *nk == '1' && !PEER_NO_FREE_KEY) {
		fprintf(stderr, "BENCH_NO_FREE_KEY=1: this uslab has no USLAB_NO_FREE_KEY\n");
		exit(2);
	}
	peer_cache =
		uslab_cache_create("bench", size, NULL, nk && *nk == '1' ? PEER_NO_FREE_KEY : 0);
	if (!peer_cache)
		abort();
}
static inline void *peer_alloc(size_t size)
{
	(void)size;
	return uslab_cache_alloc(peer_cache);
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	uslab_cache_free(peer_cache, p);
}
#define PEER_HAS_BULK
/* always_inline, as DPDK's rte_mempool_generic_get/put are (gcc -O2 called these). */
static inline __attribute__((always_inline)) size_t peer_alloc_bulk(size_t size, size_t n, void **p)
{
	(void)size;
	return uslab_cache_alloc_bulk(peer_cache, n, p);
}
static inline __attribute__((always_inline)) void peer_free_bulk(size_t size, size_t n, void **p)
{
	(void)size;
	uslab_cache_free_bulk(peer_cache, n, p);
}
/* BENCH_STATS=1: print the cache's slow-path events to stderr. */
static inline void peer_report(void)
{
	struct uslab_cache_stats st;

	if (!getenv("BENCH_STATS") || uslab_cache_stats(peer_cache, &st))
		return;
	for (unsigned int i = 0; uslab_stat_name(i); i++)
		fprintf(stderr, "%s=%llu ", uslab_stat_name(i), (unsigned long long)st.events[i]);
	fprintf(stderr, "slabs=%lu active=%lu\n", st.num_slabs, st.active_objs);
}
/* Bytes in objects the cache has handed out (held by the program, sheaves, barn). */
#define PEER_HAS_HELD
static inline double peer_held_bytes(void)
{
	struct uslab_cache_stats st;

	if (uslab_cache_stats(peer_cache, &st))
		return -1;
	return (double)st.active_objs * st.object_size;
}
#define PEER_HAS_KMALLOC
static inline void peer_kinit(void)
{
}
static inline void *peer_kmalloc(size_t size)
{
	return uslab_kmalloc(size);
}
static inline void peer_kfree(void *p, size_t size)
{
	(void)size;
	uslab_kfree(p);
}
/* BENCH_STATS=1: the slow-path events of every kmalloc class, summed, to stderr. */
static inline void peer_kreport(void)
{
	unsigned long long ev[USLAB_STAT_NR_ITEMS] = { 0 };
	struct uslab_cache *prev = NULL;
	unsigned long slabs = 0;

	if (!getenv("BENCH_STATS"))
		return;
	for (size_t size = 8; size <= USLAB_KMALLOC_MAX_CACHE_SIZE; size += 8) {
		struct uslab_cache *c = uslab_kmalloc_cache(size);
		struct uslab_cache_stats st;

		if (!c || c == prev || uslab_cache_stats(c, &st))
			continue;
		prev = c;
		for (unsigned int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
			ev[i] += st.events[i];
		slabs += st.num_slabs;
	}
	for (unsigned int i = 0; i < USLAB_STAT_NR_ITEMS; i++)
		fprintf(stderr, "%s=%llu ", uslab_stat_name(i), ev[i]);
	fprintf(stderr, "slabs=%lu\n", slabs);
}

#elif defined(PEER_GLIBC) || defined(PEER_MALLOC)
#ifdef PEER_GLIBC
/* glibc's own malloc, whatever LD_PRELOAD holds. */
#define PEER_NAME "glibc"
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *p);
#define PEER_MALLOC_FN __libc_malloc
#define PEER_FREE_FN __libc_free
#else
/*
 * Plain malloc and free, whichever the process has: glibc's, or the one
 * LD_PRELOAD puts first (libuslab-malloc.so, mimalloc's, ...): a drop-in
 * measured as programs get it. BENCH_PEER_NAME names it in the output.
 */
#define PEER_NAME (getenv("BENCH_PEER_NAME") ? getenv("BENCH_PEER_NAME") : "malloc")
#define PEER_MALLOC_FN malloc
#define PEER_FREE_FN free
#endif
#define PEER_NO_REPORT
static inline void peer_init(size_t size)
{
	(void)size;
}
static inline void *peer_alloc(size_t size)
{
	return PEER_MALLOC_FN(size);
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	PEER_FREE_FN(p);
}
#define PEER_HAS_KMALLOC
static inline void peer_kinit(void)
{
}
static inline void *peer_kmalloc(size_t size)
{
	return PEER_MALLOC_FN(size);
}
static inline void peer_kfree(void *p, size_t size)
{
	(void)size;
	PEER_FREE_FN(p);
}

#elif defined(PEER_MIMALLOC)
#define PEER_NO_REPORT
#include <mimalloc.h>
#define PEER_NAME "mimalloc"
static inline void peer_init(size_t size)
{
	(void)size;
}
static inline void *peer_alloc(size_t size)
{
	return mi_malloc(size);
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	mi_free(p);
}
#define PEER_HAS_KMALLOC
static inline void peer_kinit(void)
{
}
static inline void *peer_kmalloc(size_t size)
{
	return mi_malloc(size);
}
static inline void peer_kfree(void *p, size_t size)
{
	(void)size;
	mi_free(p);
}

#elif defined(PEER_JEMALLOC)
#define PEER_NO_REPORT
#include <jemalloc/jemalloc.h>
#define PEER_NAME "jemalloc"
static inline void peer_init(size_t size)
{
	const char *v = NULL;
	size_t len = sizeof(v);

	(void)size;
	/* Make sure malloc really is jemalloc's in this process. */
	if (mallctl("version", &v, &len, NULL, 0) || !v)
		abort();
}
static inline void *peer_alloc(size_t size)
{
	return malloc(size);
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	free(p);
}
#define PEER_HAS_KMALLOC
static inline void peer_kinit(void)
{
	peer_init(0); /* only checks that malloc is jemalloc's */
}
static inline void *peer_kmalloc(size_t size)
{
	return malloc(size);
}
static inline void peer_kfree(void *p, size_t size)
{
	(void)size;
	free(p);
}

#elif defined(PEER_TCMALLOC)
#define PEER_NO_REPORT
#define PEER_NAME "tcmalloc"
extern void *tc_malloc(size_t size);
extern void tc_free(void *p);
static inline void peer_init(size_t size)
{
	(void)size;
}
static inline void *peer_alloc(size_t size)
{
	return tc_malloc(size);
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	tc_free(p);
}
#define PEER_HAS_KMALLOC
static inline void peer_kinit(void)
{
}
static inline void *peer_kmalloc(size_t size)
{
	return tc_malloc(size);
}
static inline void peer_kfree(void *p, size_t size)
{
	(void)size;
	tc_free(p);
}

#elif defined(PEER_DPDK)
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <stdio.h>
#define PEER_NAME "dpdk"
#define PEER_NO_REPORT
#define PEER_HAS_BULK
#define PEER_HAS_THREAD_INIT
static struct rte_mempool *peer_pool;
/*
 * One pool of BENCH_DPDK_OBJS objects (default 2^20 - 1, the size DPDK
 * recommends: 2^q - 1), a 512-object cache per lcore.
 */
static inline void peer_init(size_t size)
{
	/* --no-shconf: no /var/run/dpdk files, so two benchmark runs at once do not collide. */
	char *eal[] = { (char *)"bench",       (char *)"--no-huge",
			(char *)"--no-pci",    (char *)"--no-telemetry",
			(char *)"--no-shconf", (char *)"-l",
			(char *)"0-1",	       (char *)"--log-level",
			(char *)"*:error",     (char *)"-m",
			(char *)"2048",	       NULL };
	const char *n = getenv("BENCH_DPDK_OBJS");
	unsigned int objs = n ? (unsigned int)strtoul(n, NULL, 0) : (1u << 20) - 1;

	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0]) - 1), eal) < 0) {
		fprintf(stderr, "dpdk: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		abort();
	}
	peer_pool = rte_mempool_create("bench", objs, (unsigned int)size, 512, 0, NULL, NULL, NULL,
				       NULL, SOCKET_ID_ANY, 0);
	if (!peer_pool) {
		fprintf(stderr, "dpdk: rte_mempool_create failed: %s\n", rte_strerror(rte_errno));
		abort();
	}
}
static inline void peer_thread_init(void)
{
	if (rte_lcore_id() == LCORE_ID_ANY && rte_thread_register())
		abort();
}
static inline struct rte_mempool_cache *peer_dpdk_cache(void)
{
	return rte_mempool_default_cache(peer_pool, rte_lcore_id());
}
static inline void *peer_alloc(size_t size)
{
	void *o;

	(void)size;
	if (rte_mempool_generic_get(peer_pool, &o, 1, peer_dpdk_cache()))
		return NULL;
	return o;
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	rte_mempool_generic_put(peer_pool, &p, 1, peer_dpdk_cache());
}
static inline size_t peer_alloc_bulk(size_t size, size_t n, void **p)
{
	(void)size;
	return rte_mempool_generic_get(peer_pool, p, (unsigned int)n, peer_dpdk_cache()) ? 0 : n;
}
static inline void peer_free_bulk(size_t size, size_t n, void **p)
{
	(void)size;
	rte_mempool_generic_put(peer_pool, p, (unsigned int)n, peer_dpdk_cache());
}

#else
#error "define one of PEER_USLAB PEER_USLAB_CALL PEER_GLIBC PEER_MALLOC PEER_MIMALLOC PEER_JEMALLOC PEER_TCMALLOC PEER_DPDK"
#endif

#ifdef PEER_NO_REPORT
static inline void peer_report(void)
{
}
#endif

#if defined(PEER_HAS_KMALLOC) && !defined(PEER_USLAB) && !defined(PEER_USLAB_CALL)
static inline void peer_kreport(void)
{
}
#endif

#ifndef PEER_HAS_HELD
/* Only uslab says what its caches hold: -1. */
static inline double peer_held_bytes(void)
{
	return -1;
}
#endif

#ifndef PEER_HAS_BULK
static inline size_t peer_alloc_bulk(size_t size, size_t n, void **p)
{
	for (size_t i = 0; i < n; i++)
		if (!(p[i] = peer_alloc(size)))
			abort();
	return n;
}
static inline void peer_free_bulk(size_t size, size_t n, void **p)
{
	for (size_t i = 0; i < n; i++)
		peer_free(p[i], size);
}
#endif

#ifndef PEER_HAS_THREAD_INIT
static inline void peer_thread_init(void)
{
}
#endif

#endif /* USLAB_BENCH_PEER_H */
