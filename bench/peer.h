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
 *
 * peer_init(size) prepares for objects of one size; peer_alloc and
 * peer_free are what the loops call.
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
static inline void peer_init(size_t size)
{
	peer_cache = uslab_cache_create("bench", size, NULL, 0);
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

#elif defined(PEER_GLIBC)
#define PEER_NO_REPORT
#define PEER_NAME "glibc"
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *p);
static inline void peer_init(size_t size)
{
	(void)size;
}
static inline void *peer_alloc(size_t size)
{
	return __libc_malloc(size);
}
static inline void peer_free(void *p, size_t size)
{
	(void)size;
	__libc_free(p);
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

#else
#error "define one of PEER_USLAB PEER_USLAB_CALL PEER_GLIBC PEER_MIMALLOC PEER_JEMALLOC PEER_TCMALLOC"
#endif

#ifdef PEER_NO_REPORT
static inline void peer_report(void)
{
}
#endif

#endif /* USLAB_BENCH_PEER_H */
