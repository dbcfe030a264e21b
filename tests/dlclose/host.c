// SPDX-License-Identifier: MIT
/*
 * host.c - a program that loads and unloads a plugin using uslab
 * (plugin.c), as a plugin host does: host PLUGIN CYCLES SECONDS.
 *
 * Each cycle dlopen()s PLUGIN (its constructor creates a cache), calls its
 * work (objects, kmalloc, deferred frees, a shrink: the page heap's decay
 * and the grace-period thread get work), starts a thread that allocates
 * through the plugin and outlives the dlclose(), then dlclose()s PLUGIN
 * (its destructor destroys the cache). The threads exit after the unload
 * (uslab's thread-exit hook runs then). The process then lives SECONDS
 * more, so that every background thread uslab started wakes again (issue
 * 35 item 3: they used to run in unmapped code and crash the process).
 *
 * Not linked with uslab: it reaches it only through the plugin.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...)                                  \
	do {                                       \
		fprintf(stderr, "FAIL dlclose: "); \
		fprintf(stderr, __VA_ARGS__);      \
		fputc('\n', stderr);               \
		exit(1);                           \
	} while (0)

struct helper {
	int (*kmalloc_fn)(unsigned int n);
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int ready, go, result;
};

/* Allocates through the plugin, then waits for the unload and exits. */
static void *helper_main(void *arg)
{
	struct helper *h = arg;
	int r = h->kmalloc_fn(5000);

	pthread_mutex_lock(&h->lock);
	h->result = r;
	h->ready = 1;
	pthread_cond_broadcast(&h->cond);
	while (!h->go)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

static int still_loaded(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);

	if (h)
		dlclose(h);
	return h != NULL;
}

int main(int argc, char **argv)
{
	const char *plugin;
	int cycles, seconds;
	pthread_t tid[64];

	if (argc != 4)
		FAIL("usage: %s PLUGIN CYCLES SECONDS", argv[0]);
	plugin = argv[1];
	cycles = atoi(argv[2]);
	seconds = atoi(argv[3]);
	if (cycles < 1 || cycles > 64 || seconds < 0)
		FAIL("bad CYCLES or SECONDS");
	for (int c = 0; c < cycles; c++) {
		static struct helper h[64];
		void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
		int (*work)(unsigned int);

		if (!lib)
			FAIL("dlopen %s: %s", plugin, dlerror());
		*(void **)&work = dlsym(lib, "plugin_work");
		*(void **)&h[c].kmalloc_fn = dlsym(lib, "plugin_kmalloc");
		if (!work || !h[c].kmalloc_fn)
			FAIL("dlsym: %s", dlerror());
		for (unsigned int r = 0; r < 3; r++) {
			int bad = work((unsigned int)c * 3 + r);

			if (bad)
				FAIL("cycle %d round %u: plugin_work = %d", c, r, bad);
		}
		pthread_mutex_init(&h[c].lock, NULL);
		pthread_cond_init(&h[c].cond, NULL);
		if (pthread_create(&tid[c], NULL, helper_main, &h[c]))
			FAIL("pthread_create");
		pthread_mutex_lock(&h[c].lock);
		while (!h[c].ready)
			pthread_cond_wait(&h[c].cond, &h[c].lock);
		pthread_mutex_unlock(&h[c].lock);
		if (h[c].result)
			FAIL("cycle %d: plugin_kmalloc = %d", c, h[c].result);
		if (dlclose(lib))
			FAIL("dlclose: %s", dlerror());
		/* The helper exits now, after the unload. */
		pthread_mutex_lock(&h[c].lock);
		h[c].go = 1;
		pthread_cond_broadcast(&h[c].cond);
		pthread_mutex_unlock(&h[c].lock);
		if (c % 2)
			pthread_join(tid[c], NULL);
		else
			pthread_detach(tid[c]);
	}
	printf("%d dlopen/dlclose cycles of %s; libuslab.so.0 %s loaded\n", cycles, plugin,
	       still_loaded("libuslab.so.0") ? "still" : "not");
	fflush(stdout);
	/* uslab's background threads wake again: the process must live on. */
	for (int s = 0; s < seconds; s++) {
		struct timespec ts = { 1, 0 };

		nanosleep(&ts, NULL);
	}
	printf("ok dlclose: alive %d s after the last dlclose\n", seconds);
	return 0;
}
