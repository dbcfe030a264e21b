/* SPDX-License-Identifier: MIT */
/*
 * probes.h - uslab's static probes (USDT: <sys/sdt.h>, provider "uslab"),
 * the kmem tracepoints of Linux's slab in userspace, for bpftrace, perf
 * and SystemTap. A service: any layer fires them. doc/tracing.md lists
 * every probe with its arguments, with bpftrace one-liners.
 *
 * Each probe has a semaphore (uslab_<name>_semaphore, in section .probes)
 * that a tracer raises while it is attached (the kernel's uprobe reference
 * counter): probe_on(name) is then true, and only then are the arguments
 * computed. Untraced, a probe costs a load of its semaphore and a branch
 * not taken, at the entry of an exported function or on a slow path. The
 * inline fast paths (<uslab/fastpath.h>, <uslab/inline/kmalloc.h>) have
 * none: a program built with USLAB_NO_INLINE sends every call through the
 * probed functions. A build without <sys/sdt.h> (Debian's
 * systemtap-sdt-dev) has no probes: probe_on() is 0.
 *
 * Adding a probe: a name in PROBE_LIST (libuslab.so, semaphores in
 * probes.c) or MALLOC_PROBE_LIST (libuslab-malloc.so, in malloc.c), its
 * PROBE() at the event, its row in doc/tracing.md; tests/trace checks
 * that the notes of both libraries carry every name of their list.
 */
#ifndef USLAB_PROBES_H
#define USLAB_PROBES_H

/* The probes of libuslab.so (doc/tracing.md has their arguments). */
/* clang-format off */
#define PROBE_LIST(X)							\
	X(cache_create) X(cache_destroy)				\
	X(alloc) X(free) X(alloc_bulk) X(free_bulk)			\
	X(kmalloc) X(kfree)						\
	X(sheaf_refill) X(sheaf_flush) X(barn_get) X(barn_put)		\
	X(capacity) X(slab_new) X(slab_free) X(purge)			\
	X(rcu_batch) X(guard_sample) X(report)

/* The probes of the malloc drop-in, libuslab-malloc.so. */
#define MALLOC_PROBE_LIST(X)						\
	X(malloc) X(calloc) X(realloc) X(memalign) X(free)
/* clang-format on */

#if USLAB_HAVE_SDT
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define PROBE_SEMAPHORE_DECLARE(name) \
	extern unsigned short uslab_##name##_semaphore __attribute__((visibility("hidden")));
PROBE_LIST(PROBE_SEMAPHORE_DECLARE)
MALLOC_PROBE_LIST(PROBE_SEMAPHORE_DECLARE)
#undef PROBE_SEMAPHORE_DECLARE

/* The definition of probe @name's semaphore (probes.c, malloc.c). */
#define PROBE_SEMAPHORE_DEFINE(name) \
	unsigned short uslab_##name##_semaphore __attribute__((section(".probes"), used));

/*
 * Whether a tracer is attached to probe @name: one compare with memory and
 * a branch (a plain load: a tracer attaching late is seen at the next
 * call, as with any USDT semaphore).
 */
#define probe_on(name) __builtin_expect(uslab_##name##_semaphore != 0, 0)
/* Fire probe @name; its arguments are computed only while it is traced. */
#define PROBE(name, ...)                                       \
	do {                                                   \
		if (probe_on(name))                            \
			STAP_PROBEV(uslab, name, __VA_ARGS__); \
	} while (0)
#else
/* No probes: the arguments are still "used" (in code never run), as with them. */
static inline void probe_args_unused(int none, ...)
{
	(void)none;
}
#define PROBE_SEMAPHORE_DEFINE(name)
#define probe_on(name) 0
#define PROBE(name, ...)                                   \
	do {                                               \
		if (0)                                     \
			probe_args_unused(0, __VA_ARGS__); \
	} while (0)
#endif

#endif /* USLAB_PROBES_H */
