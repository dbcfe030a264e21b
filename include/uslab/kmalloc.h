/* SPDX-License-Identifier: MIT */
/*
 * uslab/kmalloc.h - memory of any size: kmalloc size classes built from
 * ordinary uslab caches, and large objects straight from uslab's OS layer.
 * Included by <uslab.h>; never include it directly. The kernel's names
 * (kmalloc, kfree, ksize, krealloc, ...) are in <uslab/kmem.h>.
 *
 * Size classes. A request of 1..USLAB_KMALLOC_MAX_CACHE_SIZE bytes is
 * served by the smallest class that holds it, each class a cache named
 * "kmalloc-<size>" (visible to uslab_cache_stats(), uslab_kmalloc_cache()):
 *
 *   8, 16, 24, ..., 64                 steps of 8
 *   then eight classes per power of two: (2^k, 2^(k+1)] in steps of 2^(k-3)
 *   72, 80, ..., 128, 144, ..., 256, 288, ..., 32768
 *
 * 80 classes in all. A request of 64 bytes or more wastes less than 12.5%
 * of its class (at most 2^(k-3) - 1 bytes of a request above 2^k). Objects
 * are 8-byte aligned at least, and an object of a power-of-two class is
 * aligned to its size, as the kernel's kmalloc promises.
 *
 * Large objects (above USLAB_KMALLOC_MAX_CACHE_SIZE) are whole slabs from
 * the OS layer: 2^order pages of address space, of which the object uses
 * its size rounded up to a page (the usable size; a page is 12.5% of the
 * smallest large object at most). No header: kfree() finds one through the
 * same arena registry as every slab. Freed, their pages stay resident
 * for USLAB_PURGE_DELAY_MS (up to USLAB_RETAIN_KB in all) and then go back
 * to the OS, like empty slabs; objects above 32 MiB are unmapped at once.
 *
 * The fast paths of uslab_kmalloc() and uslab_kfree() are inline, like
 * uslab_cache_alloc()'s: a constant-time class lookup (folded away for a
 * constant size), then the same sheaf pop; the free finds the object's
 * cache through the registry (four dependent loads), then the same push.
 */
#ifndef USLAB_KMALLOC_H
#define USLAB_KMALLOC_H

#ifndef USLAB_H
#error "include <uslab.h>, not <uslab/kmalloc.h>"
#endif

/** USLAB_KMALLOC_MAX_CACHE_SIZE - the largest size class; larger is a large object. */
#define USLAB_KMALLOC_MAX_CACHE_SIZE 32768ul
/** USLAB_KMALLOC_CLASSES - the number of size classes. */
#define USLAB_KMALLOC_CLASSES 80
/** USLAB_KMALLOC_MAX_SIZE - the largest request (64 TiB); larger fails with ENOMEM. */
#define USLAB_KMALLOC_MAX_SIZE (1ul << 46)
/** USLAB_KMALLOC_MAX_ALIGN - the largest alignment uslab_kmalloc_aligned() accepts (64 MiB). */
#define USLAB_KMALLOC_MAX_ALIGN (1ul << 26)

/**
 * USLAB_ZERO_SIZE_PTR - what a request of 0 bytes returns (the kernel's
 * ZERO_SIZE_PTR): not NULL, so it does not read as a failure, but no
 * object: any access faults (it lies in the unmapped first page), and
 * uslab_kfree(), uslab_ksize() (0) and uslab_krealloc() accept it.
 * Every 0-byte request returns this same value.
 */
#define USLAB_ZERO_SIZE_PTR ((void *)16)
/** USLAB_ZERO_OR_NULL_PTR - whether @p is NULL or USLAB_ZERO_SIZE_PTR. */
#define USLAB_ZERO_OR_NULL_PTR(p) ((unsigned long)(p) <= (unsigned long)USLAB_ZERO_SIZE_PTR)

/**
 * uslab_kmalloc - allocate @size bytes.
 * @size: bytes wanted, any number.
 *
 * The contents are undefined. The memory is at least 8-byte aligned, and
 * aligned to its class size when that is a power of two; use
 * uslab_kmalloc_aligned() for more. Free it with uslab_kfree() (or
 * uslab_cache_free_bulk(NULL, ...), uslab_free_rcu()).
 *
 * Context: any thread.
 * Return: the memory; USLAB_ZERO_SIZE_PTR if @size is 0; or NULL with
 * errno ENOMEM (the OS refused memory, or @size > USLAB_KMALLOC_MAX_SIZE).
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_kmalloc(size_t size);

/**
 * uslab_kzalloc - allocate @size bytes set to zero.
 * @size: bytes wanted.
 *
 * Every usable byte (uslab_ksize()) reads as zero.
 *
 * Context: any thread.
 * Return: as uslab_kmalloc().
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_kzalloc(size_t size);

/**
 * uslab_kmalloc_node - uslab_kmalloc() from NUMA node @node (the kernel's
 * kmalloc_node()).
 * @size: bytes wanted.
 * @node: USLAB_NUMA_NO_NODE (the caller's node: uslab_kmalloc() itself), or a
 *        node id, with USLAB_NODE_STRICT or'd in for that node's memory or
 *        nothing (<uslab.h>, "NUMA").
 *
 * A size class's object comes as uslab_cache_alloc_node() gives it; a
 * large object's pages are placed on the node. A node without memory (or
 * that the machine does not have) is served by the caller's node unless
 * the request is strict. The debug tier's classes serve the caller's node.
 *
 * Context: any thread.
 * Return: as uslab_kmalloc(); NULL with errno EINVAL (@node is neither
 * USLAB_NUMA_NO_NODE nor a node id) or ENOMEM (no memory; or strict and
 * the node has none).
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_kmalloc_node(size_t size, int node);

/**
 * uslab_kzalloc_node - uslab_kmalloc_node(), zeroed.
 * @size: bytes wanted.
 * @node: as uslab_kmalloc_node()'s.
 *
 * Context: any thread.
 * Return: as uslab_kmalloc_node().
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_kzalloc_node(size_t size, int node);

/**
 * uslab_kcalloc - allocate an array of @n elements of @size bytes, zeroed.
 * @n:    elements.
 * @size: bytes per element.
 *
 * Context: any thread.
 * Return: as uslab_kzalloc(n * size); NULL with errno ENOMEM when n * size
 * overflows; USLAB_ZERO_SIZE_PTR when it is 0.
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_kcalloc(size_t n, size_t size);

/**
 * uslab_krealloc - resize memory from uslab_kmalloc().
 * @p:    the memory, NULL or USLAB_ZERO_SIZE_PTR (then this is
 *        uslab_kmalloc(@size)).
 * @size: the new size.
 *
 * In place when @size still belongs to @p's size class (or, for a large
 * object, fits its slab and keeps at least half of it in use): @p is
 * returned unchanged. Otherwise new memory is allocated, the first
 * min(old usable size, @size) bytes copied and @p freed. Bytes beyond the
 * old usable size are undefined.
 *
 * Context: any thread; the caller owns @p.
 * Return: the memory (@p or a new address);
 *   USLAB_ZERO_SIZE_PTR - @size is 0: @p was freed;
 *   NULL - errno ENOMEM: no memory; @p is untouched and still valid;
 *          errno EINVAL: in the debug tier, @p is not allocated (a use
 *          after free, reported; with USLAB_ON_BUG=report the program
 *          goes on and nothing is done).
 * A pointer uslab did not hand out stops the program (uslab: BUG). In the
 * debug tier (USLAB_RED_ZONE), a resize within the class moves the
 * kmalloc red zone to the new size.
 */
USLAB_API void *uslab_krealloc(const void *p, size_t size);

/**
 * uslab_kfree - free memory from uslab_kmalloc(), or an object of any
 * uslab cache (kfree() of a kmem_cache object, as the kernel allows).
 * @p: the memory; NULL and USLAB_ZERO_SIZE_PTR do nothing.
 *
 * Misuse stops the program with "uslab: BUG" at the call: a pointer uslab
 * did not hand out, one inside an object (the slab's geometry), an object
 * freed twice (the free key, as uslab_cache_free()'s), whatever cache it
 * belongs to; the object of a cache without the free key (a constructor,
 * TYPESAFE_BY_RCU, pools) freed twice, when it reaches its slab, unless
 * the cache is in the debug tier.
 *
 * Context: any thread, whichever thread allocated @p.
 */
USLAB_API USLAB_NO_ACCESS(1) void uslab_kfree(const void *p);

/**
 * uslab_kfree_sensitive - zero memory, then free it (kfree_sensitive()).
 * @p: as uslab_kfree().
 *
 * Every usable byte is cleared with a store the compiler cannot remove.
 *
 * Context: any thread.
 */
USLAB_API void uslab_kfree_sensitive(const void *p);

/**
 * uslab_ksize - the usable size of memory from uslab.
 * @p: memory from uslab_kmalloc(), or an object of any cache.
 *
 * The whole usable size may be used as if it had been asked for. For a
 * kmalloc object it is its class size; for a large object its size rounded
 * up to a page (or what uslab_krealloc() grew it to); for an object of a
 * cache, the cache's object size. In the debug tier the size asked for
 * (the rest of the class is red zone).
 *
 * Context: any thread.
 * Return: bytes; 0 for NULL and USLAB_ZERO_SIZE_PTR, and in the debug tier
 * for an object that is not allocated (reported). A pointer uslab did not
 * hand out, or one inside an object, stops the program (uslab: BUG).
 */
USLAB_API USLAB_NO_ACCESS(1) size_t uslab_ksize(const void *p);

/**
 * uslab_kmalloc_aligned - allocate @size bytes aligned to @align.
 * @size:  bytes wanted.
 * @align: a power of two up to USLAB_KMALLOC_MAX_ALIGN.
 *
 * Up to a page of alignment is served by a size class that is a multiple
 * of @align (so the waste is the rounding of @size up to @align, and the
 * class's own); more by a large object.
 *
 * Context: any thread.
 * Return: the memory, a multiple of @align; USLAB_ZERO_SIZE_PTR if @size
 * is 0; NULL with errno EINVAL (@align is not a power of two or is above
 * USLAB_KMALLOC_MAX_ALIGN) or ENOMEM.
 */
USLAB_API USLAB_MALLOC_ATTR void *uslab_kmalloc_aligned(size_t size, size_t align);

/**
 * uslab_kmalloc_cache - the cache that serves requests of @size bytes.
 * @size: 1..USLAB_KMALLOC_MAX_CACHE_SIZE.
 *
 * For statistics (uslab_cache_stats()) and tests. The cache belongs to
 * uslab: uslab_cache_destroy() refuses it.
 *
 * Context: any thread.
 * Return: the "kmalloc-<class>" cache; NULL with errno EINVAL for 0 or a
 * size above USLAB_KMALLOC_MAX_CACHE_SIZE (a large object), ENOMEM if the
 * classes could not be created.
 */
USLAB_API struct uslab_cache *uslab_kmalloc_cache(size_t size);

/**
 * uslab_kmalloc_class_size - the usable size a request of @size bytes gets.
 * @size: bytes.
 *
 * Context: any thread.
 * Return: the class size; for a large request, @size rounded up to a page;
 * 0 for 0 or above USLAB_KMALLOC_MAX_SIZE.
 */
USLAB_API size_t uslab_kmalloc_class_size(size_t size);

/**
 * uslab_slab_of - the first byte of the slab an object lives in.
 * @p: any address.
 *
 * Objects with the same answer share a slab (virt_to_slab() in
 * <uslab/kmem.h>). A large object is a slab of its own: its own address.
 *
 * Context: any thread.
 * Return: the slab's first byte, or NULL if @p is not inside a live slab.
 */
USLAB_API USLAB_NO_ACCESS(1) void *uslab_slab_of(const void *p);

/* The inline fast paths of uslab_kmalloc() and uslab_kfree(): the implementation. */
#include <uslab/inline/kmalloc.h>

#endif /* USLAB_KMALLOC_H */
