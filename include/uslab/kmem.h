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
 *   kfree(p), kfree_bulk(n, p)   for objects of any uslab cache
 *   kfree_rcu(p, field)          free after a grace period; @field is the
 *                                struct rcu_head inside *p (uslab/rcu.h)
 *   kvfree_rcu(p)                single-argument form (may wait, see
 *                                uslab_free_rcu()); kfree_rcu_mightsleep(p)
 *   kvfree_rcu_barrier()         uslab_rcu_barrier()
 *   SLAB_TYPESAFE_BY_RCU
 *   SLAB_HWCACHE_ALIGN, GFP_KERNEL, GFP_ATOMIC, GFP_NOWAIT, __GFP_NOWARN,
 *   __GFP_ZERO (honoured: the object is zeroed)
 *
 * GFP flags other than __GFP_ZERO are accepted and ignored: uslab never
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

#define SLAB_HWCACHE_ALIGN USLAB_HWCACHE_ALIGN

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

/* kfree() of an object of any uslab cache (NULL does nothing). */
static inline void kfree(const void *p)
{
	if (p)
		uslab_cache_free(uslab_cache_of(p), (void *)p);
}

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

#endif /* USLAB_KMEM_H */
