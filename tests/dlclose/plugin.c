// SPDX-License-Identifier: MIT
/*
 * plugin.c - a shared object that uses uslab, loaded and unloaded by
 * host.c (dlopen, dlclose): its constructor creates a cache, plugin_work()
 * allocates and frees (single, bulk, kmalloc, deferred), its destructor
 * destroys the cache. Built twice: linked with libuslab.so, and with
 * libuslab.a (uslab inside the plugin itself). A failed destroy is
 * reported on stderr (the test fails on it).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uslab.h>
#include <uslab/kmalloc.h>
#include <uslab/rcu.h>

#define EXPORT __attribute__((__visibility__("default")))

EXPORT int plugin_work(unsigned int round);
EXPORT int plugin_kmalloc(unsigned int n);

static struct uslab_cache *cache;

__attribute__((__constructor__)) static void plugin_init(void)
{
	cache = uslab_cache_create("plugin", 200, NULL, 0);
}

__attribute__((__destructor__)) static void plugin_fini(void)
{
	uslab_rcu_barrier();
	uslab_thread_flush();
	if (uslab_cache_destroy(cache))
		fprintf(stderr, "plugin: uslab_cache_destroy failed\n");
	cache = NULL;
}

/* One round of work; 0 if every object kept its contents. */
EXPORT int plugin_work(unsigned int round)
{
	void *p[300], *big;
	int bad = 0;

	if (!cache)
		return -1;
	for (int i = 0; i < 300; i++) {
		p[i] = uslab_cache_alloc(cache);
		if (!p[i])
			return -2;
		memset(p[i], (int)(round + (unsigned int)i) & 0xff, 200);
	}
	for (int i = 0; i < 300; i++) {
		bad |= ((unsigned char *)p[i])[199] != ((round + (unsigned int)i) & 0xff);
		if (i % 3 == 2)
			uslab_free_rcu(p[i]);
		else if (i % 3)
			uslab_cache_free(cache, p[i]);
	}
	for (int i = 0, n = 0; i < 300; i += 3)
		p[n++] = p[i];
	uslab_cache_free_bulk(cache, 100, p);
	/* kmalloc: small, large (pages) and huge (its own mapping). */
	for (size_t n = 16; n <= (64u << 20); n *= 4) {
		big = uslab_kmalloc(n);
		if (!big)
			return -3;
		memset(big, 1, n < 4096 ? n : 4096);
		uslab_kfree(big);
	}
	/* Pages freed: the page heap's decay thread has work to do later. */
	uslab_cache_shrink(cache);
	return bad;
}

/* kmalloc and kfree on the calling thread only (its sheaves keep objects). */
EXPORT int plugin_kmalloc(unsigned int n)
{
	for (unsigned int i = 0; i < n; i++) {
		void *q = uslab_kmalloc(i % 2000 + 1);

		if (!q)
			return -1;
		uslab_kfree(q);
	}
	return 0;
}
