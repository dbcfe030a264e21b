/* SPDX-License-Identifier: MIT */
/*
 * uslab/kmem.h - the kernel's slab API names, mapped onto uslab, so slab
 * code written against <linux/slab.h> builds unchanged in userspace.
 *
 * Opt-in (like liburcu's map headers): include it only where you want the
 * kernel names; every name is a macro or a static inline over <uslab.h>.
 *
 *   struct kmem_cache            struct uslab_cache
 *   kmem_cache_create(name, size, align, flags, ctor), KMEM_CACHE(s, flags)
 *   kmem_cache_alloc(s, gfp), kmem_cache_zalloc(s, gfp), kmem_cache_free(s, p)
 *   kmem_cache_alloc_bulk(s, gfp, n, p) -> int, kmem_cache_free_bulk(s, n, p)
 *   kmem_cache_destroy(s) (void), kmem_cache_shrink(s), kmem_cache_size(s)
 *   kmem_cache_alloc_node(s, gfp, node), kmalloc_node, kzalloc_node: from
 *                                NUMA node @node (NUMA_NO_NODE: the
 *                                caller's); __GFP_THISNODE: that node or
 *                                NULL (uslab_cache_alloc_node())
 *   NUMA_NO_NODE, numa_mem_id()  the caller's memory node (uslab_numa_node())
 *   kmalloc(size, gfp), kzalloc, kcalloc(n, size, gfp), kmalloc_array,
 *   krealloc(p, size, gfp), krealloc_array, kmalloc_node, kzalloc_node,
 *   kvmalloc, kvzalloc, kvcalloc, kvfree (no vmalloc: the same memory),
 *   kmemdup, kstrdup, kstrndup, ksize(p), kfree_sensitive(p)
 *   ZERO_SIZE_PTR, ZERO_OR_NULL_PTR(p), KMALLOC_MAX_CACHE_SIZE
 *   kfree(p), kfree_bulk(n, p)   for kmalloc'd objects and objects of any
 *                                uslab cache, mixed
 *   virt_to_slab(p), virt_to_head_page(p)  an opaque handle of the slab
 *                                (its first byte): equal for objects of
 *                                one slab (uslab_slab_of())
 *   kfree_rcu(p, field)          free after a grace period; @field is the
 *                                struct rcu_head inside *p (uslab/rcu.h)
 *   kvfree_rcu(p)                single-argument form (may wait, see
 *                                uslab_free_rcu()); kfree_rcu_mightsleep(p)
 *   kvfree_rcu_barrier()         uslab_rcu_barrier()
 *   SLAB_TYPESAFE_BY_RCU
 *   struct percpu_counter, percpu_counter_init(c, v, gfp), _add, _inc, _dec,
 *   _read, _read_positive, _sum, _sum_positive, _destroy   (uslab/counter.h)
 *   get_next_ino-style batches: uslab_idgen (uslab/counter.h)
 *   SLAB_CONSISTENCY_CHECKS, SLAB_RED_ZONE, SLAB_POISON, SLAB_STORE_USER
 *                                the debug tier (uslab.h)
 *   SLAB_HWCACHE_ALIGN, GFP_KERNEL, GFP_ATOMIC, GFP_NOWAIT, __GFP_NOWARN,
 *   __GFP_ZERO (honoured: the object is zeroed)
 *
 * GFP flags other than __GFP_ZERO and __GFP_THISNODE are accepted and
 * ignored: uslab never
 * sleeps for memory (it may wait briefly on a lock), and every allocation
 * can fail with NULL.
 */
#ifndef USLAB_KMEM_H
#define USLAB_KMEM_H

#include <string.h>
#include <uslab.h>

#ifdef __cplusplus
extern "C" {
#endif

#define kmem_cache uslab_cache

typedef unsigned int gfp_t;
typedef unsigned int slab_flags_t;

#define GFP_KERNEL 0x01u
#define GFP_ATOMIC 0x02u
#define GFP_NOWAIT 0x04u
#define __GFP_NOWARN 0x08u
#define __GFP_ZERO 0x100u
#define __GFP_THISNODE 0x200u
#define NUMA_NO_NODE (-1)

/* A _node call's node for uslab: @node, strict under __GFP_THISNODE. */
static inline int uslab_kmem_node(gfp_t gfp, int node)
{
	return (gfp & __GFP_THISNODE) && node != NUMA_NO_NODE ? node | USLAB_NODE_STRICT : node;
}

/* The caller's memory node (Linux's numa_mem_id(); numa_node_id() is the same here). */
static inline int numa_mem_id(void)
{
	return uslab_numa_node();
}
#define numa_node_id() numa_mem_id()

#define SLAB_HWCACHE_ALIGN USLAB_HWCACHE_ALIGN
#define SLAB_CONSISTENCY_CHECKS USLAB_CONSISTENCY_CHECKS
#define SLAB_RED_ZONE USLAB_RED_ZONE
#define SLAB_POISON USLAB_POISON
#define SLAB_STORE_USER USLAB_STORE_USER

static inline struct kmem_cache *kmem_cache_create(const char *name, unsigned int size,
						   unsigned int align, slab_flags_t flags,
						   void (*ctor)(void *))
{
	struct uslab_cache_args args;

	memset(&args, 0, sizeof(args));
	args.align = align;
	args.ctor = ctor;
	return uslab_cache_create(name, size, &args, flags);
}

/* KMEM_CACHE(struct name, flags): a cache named and aligned after a struct. */
#define KMEM_CACHE(type, flags) \
	kmem_cache_create(#type, sizeof(struct type), __alignof__(struct type), (flags), NULL)

static inline void *kmem_cache_alloc(struct kmem_cache *s, gfp_t gfp)
{
	return (gfp & __GFP_ZERO) ? uslab_cache_zalloc(s) : uslab_cache_alloc(s);
}

static inline void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t gfp)
{
	(void)gfp;
	return uslab_cache_zalloc(s);
}

static inline void kmem_cache_free(struct kmem_cache *s, void *p)
{
	uslab_cache_free(s, p);
}

/* Return: @size (all allocated) or 0 (none), as the kernel's. */
static inline int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t size, void **p)
{
	size_t n = uslab_cache_alloc_bulk(s, size, p);

	if (n && (gfp & __GFP_ZERO))
		for (size_t i = 0; i < n; i++)
			memset(p[i], 0, uslab_cache_size(s));
	return (int)n;
}

/* @s may be NULL: each object's cache is found from its address. */
static inline void kmem_cache_free_bulk(struct kmem_cache *s, size_t size, void **p)
{
	uslab_cache_free_bulk(s, size, p);
}

static inline void kmem_cache_destroy(struct kmem_cache *s)
{
	(void)uslab_cache_destroy(s);
}

static inline int kmem_cache_shrink(struct kmem_cache *s)
{
	return uslab_cache_shrink(s);
}

static inline unsigned int kmem_cache_size(struct kmem_cache *s)
{
	return (unsigned int)uslab_cache_size(s);
}

static inline void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t gfp, int node)
{
	void *p = uslab_cache_alloc_node(s, uslab_kmem_node(gfp, node));

	if (p && (gfp & __GFP_ZERO))
		memset(p, 0, uslab_cache_size(s));
	return p;
}

/* ---------------------------------------------------------- kmalloc */

#define ZERO_SIZE_PTR USLAB_ZERO_SIZE_PTR
#define ZERO_OR_NULL_PTR(p) USLAB_ZERO_OR_NULL_PTR(p)
#define KMALLOC_MAX_CACHE_SIZE USLAB_KMALLOC_MAX_CACHE_SIZE
#define KMALLOC_MAX_SIZE USLAB_KMALLOC_MAX_SIZE

static inline void *kmalloc(size_t size, gfp_t gfp)
{
	return (gfp & __GFP_ZERO) ? uslab_kzalloc(size) : uslab_kmalloc(size);
}

static inline void *kzalloc(size_t size, gfp_t gfp)
{
	(void)gfp;
	return uslab_kzalloc(size);
}

static inline void *kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes))
		return NULL;
	return kmalloc(bytes, gfp);
}

static inline void *kcalloc(size_t n, size_t size, gfp_t gfp)
{
	(void)gfp;
	return uslab_kcalloc(n, size);
}

static inline void *kmalloc_node(size_t size, gfp_t gfp, int node)
{
	node = uslab_kmem_node(gfp, node);
	return (gfp & __GFP_ZERO) ? uslab_kzalloc_node(size, node) : uslab_kmalloc_node(size, node);
}

static inline void *kzalloc_node(size_t size, gfp_t gfp, int node)
{
	return uslab_kzalloc_node(size, uslab_kmem_node(gfp, node));
}

/* krealloc: with __GFP_ZERO the bytes beyond the old usable size are zeroed. */
static inline void *krealloc(const void *p, size_t size, gfp_t gfp)
{
	size_t old = (gfp & __GFP_ZERO) ? uslab_ksize(p) : 0;
	void *q = uslab_krealloc(p, size);

	if (q && !ZERO_OR_NULL_PTR(q) && (gfp & __GFP_ZERO) && old < uslab_ksize(q))
		memset((char *)q + old, 0, uslab_ksize(q) - old);
	return q;
}

static inline void *krealloc_array(void *p, size_t n, size_t size, gfp_t gfp)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, size, &bytes))
		return NULL;
	return krealloc(p, bytes, gfp);
}

/* kfree() of kmalloc'd memory or of an object of any uslab cache (NULL does nothing). */
static inline void kfree(const void *p)
{
	uslab_kfree(p);
}

static inline void kfree_sensitive(const void *p)
{
	uslab_kfree_sensitive(p);
}

static inline size_t ksize(const void *p)
{
	return uslab_ksize(p);
}

#define kvmalloc(size, gfp) kmalloc((size), (gfp))
#define kvzalloc(size, gfp) kzalloc((size), (gfp))
#define kvcalloc(n, size, gfp) kcalloc((n), (size), (gfp))
#define kvmalloc_array(n, size, gfp) kmalloc_array((n), (size), (gfp))
#define kvmalloc_node(size, gfp, node) kmalloc_node((size), (gfp), (node))
#define kvrealloc(p, size, gfp) krealloc((p), (size), (gfp))
#define kvfree(p) kfree(p)
#define kvfree_sensitive(p, len) ((void)(len), kfree_sensitive(p))

static inline void *kmemdup(const void *src, size_t len, gfp_t gfp)
{
	void *p = kmalloc(len, gfp);

	if (p && len)
		memcpy(p, src, len);
	return p;
}

static inline char *kstrndup(const char *s, size_t max, gfp_t gfp)
{
	size_t len;
	char *p;

	if (!s)
		return NULL;
	for (len = 0; len < max && s[len]; len++)
		;
	p = (char *)kmalloc(len + 1, gfp);
	if (p) {
		memcpy(p, s, len);
		p[len] = 0;
	}
	return p;
}

static inline char *kstrdup(const char *s, gfp_t gfp)
{
	return s ? kstrndup(s, (size_t)-1, gfp) : NULL;
}

/* The slab an object lives in, as an opaque handle (its first byte). */
#define virt_to_slab(p) uslab_slab_of(p)
#define virt_to_head_page(p) uslab_slab_of(p)

static inline void kfree_bulk(size_t size, void **p)
{
	uslab_cache_free_bulk(NULL, size, p);
}

#define SLAB_TYPESAFE_BY_RCU USLAB_TYPESAFE_BY_RCU

/* kfree_rcu(ptr, field): @field names the struct rcu_head inside *ptr. */
#define kfree_rcu(ptr, field) uslab_free_rcu_head((ptr), (ptr) ? &(ptr)->field : NULL)
#define kvfree_rcu(ptr) uslab_free_rcu(ptr)
#define kfree_rcu_mightsleep(ptr) uslab_free_rcu(ptr)
#define kvfree_rcu_barrier() uslab_rcu_barrier()

#ifdef __cplusplus
}
#endif

/* percpu_counter: the per-thread-batched counters of <uslab/counter.h>. */
#define percpu_counter uslab_counter
static inline int percpu_counter_init(struct percpu_counter *c, int64_t v, gfp_t gfp)
{
	(void)gfp;
	return uslab_counter_init(c, v);
}
#define percpu_counter_add(c, d) uslab_counter_add((c), (d))
#define percpu_counter_inc(c) uslab_counter_add((c), 1)
#define percpu_counter_dec(c) uslab_counter_add((c), -1)
#define percpu_counter_read(c) uslab_counter_read(c)
#define percpu_counter_sum(c) uslab_counter_sum(c)
/* As the kernel's: a no-op on a counter destroyed or never initialized (zero-filled). */
static inline void percpu_counter_destroy(struct percpu_counter *c)
{
	if (c && c->gen)
		uslab_counter_destroy(c);
}

static inline int64_t percpu_counter_read_positive(const struct percpu_counter *c)
{
	int64_t v = uslab_counter_read(c);

	return v > 0 ? v : 0;
}

static inline int64_t percpu_counter_sum_positive(const struct percpu_counter *c)
{
	int64_t v = uslab_counter_sum(c);

	return v > 0 ? v : 0;
}

#endif /* USLAB_KMEM_H */
