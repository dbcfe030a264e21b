// SPDX-License-Identifier: MIT
/*
 * test_magazine_asan.c - built only with USLAB_SANITIZE=address: objects
 * resting in a magazine (freed into it, or refilled into it and not yet
 * handed out) and objects given to a free batch are poisoned, so
 * AddressSanitizer reports their use; objects handed out are not.
 */
#include <uslab.h>

#include "../test.h"

static struct uslab_cache *cache;

static void use_after_magazine_free(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(cache, 0, 0);
	volatile char *p = uslab_magazine_alloc(m);

	(void)arg;
	p[5] = 1;
	uslab_magazine_free(m, (void *)p);
	p[5] = 2; /* must be reported */
}

static void use_of_refilled(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(cache, 0, 0);

	(void)arg;
	uslab_magazine_alloc(m);	    /* refills 16, hands out one */
	(void)*(volatile char *)m->objs[0]; /* resting: must be reported */
}

static void use_after_bulk_free(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_create(cache, 0, 0);
	void *p[8];
	volatile char *q;

	(void)arg;
	uslab_magazine_alloc_bulk(m, 8, p);
	q = p[3];
	uslab_magazine_free_bulk(m, 8, p);
	(void)q[0]; /* must be reported */
}

static void use_after_batch_add(void *arg)
{
	struct uslab_free_batch b;
	volatile char *p = uslab_cache_alloc(cache);

	(void)arg;
	uslab_free_batch_init(&b, NULL);
	uslab_free_batch_add(&b, (void *)p);
	p[1] = 1; /* given up: must be reported before the flush */
	uslab_free_batch_flush(&b);
}

static void live_use(void *arg)
{
	struct uslab_magazine *m = uslab_magazine_prefill(cache, 40);
	struct uslab_free_batch b;
	void *p[40];

	(void)arg;
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 40; i++)
			memset(p[i] = uslab_magazine_alloc(m), r, 50);
		uslab_magazine_free_bulk(m, 40, p);
		uslab_magazine_alloc_bulk(m, 40, p);
		for (int i = 0; i < 40; i++)
			memset(p[i], r, 50);
		uslab_magazine_free_bulk(m, 40, p);
	}
	uslab_magazine_destroy(m);
	uslab_free_batch_init(&b, cache);
	for (int i = 0; i < 100; i++) {
		char *o = uslab_cache_alloc(cache);

		memset(o, 3, 50);
		uslab_free_batch_add(&b, o);
	}
	uslab_free_batch_flush(&b);
	p[0] = uslab_cache_alloc(cache);
	memset(p[0], 4, 50);
	uslab_cache_free(cache, p[0]);
}

/*
 * TYPESAFE_BY_RCU: an RCU reader may still read an object freed into a
 * magazine or a free batch, so those stay unpoisoned, as in the sheaves.
 */
static void typesafe_reads(void *arg)
{
	struct uslab_cache *ts =
		uslab_cache_create("mag-asan-rcu", 50, NULL, USLAB_TYPESAFE_BY_RCU);
	struct uslab_magazine *m = uslab_magazine_create(ts, 0, 0);
	struct uslab_free_batch b;
	volatile char *p = uslab_magazine_alloc(m), *q = uslab_cache_alloc(ts);

	(void)arg;
	p[5] = 1;
	uslab_magazine_free(m, (void *)p);
	(void)p[5]; /* a reader's read: not reported */
	(void)*(volatile char *)m->objs[0];
	uslab_free_batch_init(&b, ts);
	uslab_free_batch_add(&b, (void *)q);
	(void)q[5];
	uslab_free_batch_flush(&b);
	uslab_magazine_destroy(m);
}

static void test_poisoning(void)
{
	static const struct {
		void (*fn)(void *);
		const char *what;
	} bad[] = {
		{ use_after_magazine_free, "use after uslab_magazine_free" },
		{ use_of_refilled, "use of an object resting after a refill" },
		{ use_after_bulk_free, "use after uslab_magazine_free_bulk" },
		{ use_after_batch_add, "use after uslab_free_batch_add" },
	};
	char err[8192];
	int status;

	cache = uslab_cache_create("mag-asan", 50, NULL, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		status = run_child(bad[i].fn, NULL, err, sizeof(err));
		CHECK(status != 0 && strstr(err, "AddressSanitizer: use-after-poison"),
		      "%s reported: %s", bad[i].what, err);
	}
	status = run_child(live_use, NULL, err, sizeof(err));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "live objects usable: %s", err);
	status = run_child(typesafe_reads, NULL, err, sizeof(err));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "TYPESAFE_BY_RCU objects in a magazine stay readable: %s", err);
	uslab_cache_destroy(cache);
}

int main(void)
{
	RUN(test_poisoning);
	return 0;
}
