// SPDX-License-Identifier: MIT
/*
 * test_asan.c - built only with USLAB_SANITIZE=address: an object resting
 * in a sheaf (or on a slab freelist) is poisoned, so AddressSanitizer
 * reports a use after free of a uslab object; a live one is not.
 */
#include <uslab.h>

#include "../test.h"

static struct uslab_cache *cache;

static void use_after_free(void *arg)
{
	volatile char *p = uslab_cache_alloc(cache);

	(void)arg;
	p[5] = 1;
	uslab_cache_free(cache, (void *)p);
	p[5] = 2; /* must be reported */
}

static void use_after_flush(void *arg)
{
	volatile char *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_cache_free(cache, (void *)p);
	uslab_thread_flush(); /* now on a slab freelist */
	(void)p[0];
}

static void overflow_into_padding(void *arg)
{
	volatile char *p = uslab_cache_alloc(cache); /* 50 bytes, stride 56 */

	(void)arg;
	p[52] = 1;
}

static void live_use(void *arg)
{
	char *p = uslab_cache_alloc(cache);

	(void)arg;
	memset(p, 1, 50);
	uslab_cache_free(cache, p);
	p = uslab_cache_alloc(cache);
	memset(p, 2, 50);
	uslab_cache_free(cache, p);
}

static void test_poisoning(void)
{
	char err[8192];
	int status;

	cache = uslab_cache_create("asan", 50, NULL, 0);
	status = run_child(use_after_free, NULL, err, sizeof(err));
	CHECK(status != 0 && strstr(err, "AddressSanitizer: use-after-poison"),
	      "use after free reported: %s", err);
	status = run_child(use_after_flush, NULL, err, sizeof(err));
	CHECK(status != 0 && strstr(err, "AddressSanitizer: use-after-poison"),
	      "use after flush reported: %s", err);
	status = run_child(overflow_into_padding, NULL, err, sizeof(err));
	CHECK(status != 0 && strstr(err, "AddressSanitizer"), "write past the object reported: %s",
	      err);
	status = run_child(live_use, NULL, err, sizeof(err));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "live objects usable: %s", err);
	uslab_cache_destroy(cache);
}

int main(void)
{
	RUN(test_poisoning);
	return 0;
}
