// SPDX-License-Identifier: MIT
/*
 * test_kmem.c - slab code written against the kernel's API builds
 * unchanged with <uslab/kmem.h> and behaves as the kernel's: the
 * functions below are written exactly as kernel code would be.
 */
#include <uslab/kmem.h>

#include "../test.h"

struct skb_head {
	struct skb_head *next;
	unsigned int len;
	unsigned char cb[48];
};

static struct kmem_cache *skbuff_head_cache;
static int constructed;

static void skb_ctor(void *p)
{
	((struct skb_head *)p)->len = 0xfeed;
	constructed++;
}

static int kernel_style_init(void)
{
	skbuff_head_cache = kmem_cache_create("skbuff_head_cache", sizeof(struct skb_head), 0,
					      SLAB_HWCACHE_ALIGN, NULL);
	return skbuff_head_cache ? 0 : -ENOMEM;
}

static int kernel_style_bulk(void)
{
	void *skbs[16];
	int n = kmem_cache_alloc_bulk(skbuff_head_cache, GFP_ATOMIC | __GFP_ZERO, 16, skbs);

	if (n != 16)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		if (((struct skb_head *)skbs[i])->len != 0)
			return -EINVAL;
	kmem_cache_free_bulk(skbuff_head_cache, n, skbs);
	return 0;
}

static void test_kernel_names(void)
{
	struct kmem_cache *k;
	struct skb_head *skb;
	void *mix[4];

	CHECK(kernel_style_init() == 0, "kmem_cache_create");
	CHECK(kmem_cache_size(skbuff_head_cache) == sizeof(struct skb_head), "kmem_cache_size");
	skb = kmem_cache_alloc(skbuff_head_cache, GFP_KERNEL);
	CHECK(skb && (uintptr_t)skb % 64 == 0, "SLAB_HWCACHE_ALIGN");
	memset(skb, 0xff, sizeof(*skb));
	kmem_cache_free(skbuff_head_cache, skb);
	skb = kmem_cache_alloc(skbuff_head_cache, GFP_KERNEL | __GFP_ZERO);
	CHECK(skb->len == 0 && skb->cb[47] == 0, "__GFP_ZERO honoured");
	kfree(skb);
	skb = kmem_cache_zalloc(skbuff_head_cache, GFP_NOWAIT);
	CHECK(skb && skb->next == NULL, "kmem_cache_zalloc");
	kmem_cache_free(skbuff_head_cache, skb);
	CHECK(kernel_style_bulk() == 0, "kmem_cache_alloc_bulk with __GFP_ZERO, free_bulk");

	k = KMEM_CACHE(skb_head, 0);
	CHECK(k && strcmp(uslab_cache_name(k), "skb_head") == 0, "KMEM_CACHE names the cache");
	mix[0] = kmem_cache_alloc(k, GFP_KERNEL);
	mix[1] = kmem_cache_alloc(skbuff_head_cache, GFP_KERNEL);
	mix[2] = NULL;
	mix[3] = kmem_cache_alloc(k, GFP_KERNEL);
	kmem_cache_free_bulk(NULL, 4, mix);
	CHECK(!mix[0] && !mix[1] && !mix[3], "kmem_cache_free_bulk(NULL, ...) over two caches");
	mix[0] = kmem_cache_alloc(k, GFP_KERNEL);
	mix[1] = kmem_cache_alloc(skbuff_head_cache, GFP_KERNEL);
	kfree_bulk(2, mix);
	kfree(NULL);
	CHECK(kmem_cache_shrink(k) == 0, "kmem_cache_shrink");
	kmem_cache_destroy(k);

	k = kmem_cache_create("ctor", sizeof(struct skb_head), 0, 0, skb_ctor);
	skb = kmem_cache_alloc(k, GFP_KERNEL);
	CHECK(skb->len == 0xfeed && constructed > 0, "constructor");
	kmem_cache_free(k, skb);
	kmem_cache_destroy(k);
	kmem_cache_destroy(skbuff_head_cache);
	kmem_cache_destroy(NULL);
}

/* The kernel's percpu_counter calls, on uslab_counter. */
static void test_percpu_counter(void)
{
	struct percpu_counter c;

	CHECK(percpu_counter_init(&c, 10, GFP_KERNEL) == 0, "init");
	for (int i = 0; i < 1000; i++)
		percpu_counter_inc(&c);
	percpu_counter_add(&c, -5);
	percpu_counter_dec(&c);
	CHECK(percpu_counter_sum(&c) == 1004, "sum %lld", (long long)percpu_counter_sum(&c));
	CHECK(percpu_counter_sum_positive(&c) == 1004, "sum_positive");
	CHECK(percpu_counter_read_positive(&c) >= 0 && 1004 - percpu_counter_read(&c) < c.batch,
	      "read within a batch of one thread: %lld", (long long)percpu_counter_read(&c));
	percpu_counter_destroy(&c);
	percpu_counter_destroy(&c); /* as the kernel's: the second is a no-op */
	CHECK(c.gen == 0, "destroyed");
}

int main(void)
{
	RUN(test_kernel_names);
	RUN(test_percpu_counter);
	return 0;
}
