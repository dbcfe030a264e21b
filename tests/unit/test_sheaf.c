// SPDX-License-Identifier: MIT
/*
 * test_sheaf.c - sheaf.c and barn.c: capacity classes, and the slow-path
 * transitions (swap, barn trades, refill, flush) seen through the event
 * counters and the thread's pcs.
 */
#include "internal.h"
#include "../test.h"

static uint64_t ev(struct uslab_cache *c, int item)
{
	struct uslab_cache_stats st;

	uslab_cache_stats(c, &st);
	return st.events[item];
}

static void test_capacity(void)
{
	CHECK(sheaf_capacity_for(8, 0) == 126, "small objects: 126");
	CHECK(sheaf_capacity_for(256, 0) == 126, "256 B: 126");
	CHECK(sheaf_capacity_for(1024, 0) == 30, "1 KiB: 30");
	CHECK(sheaf_capacity_for(4096, 0) == 6, "4 KiB: 6");
	CHECK(sheaf_capacity_for(1 << 20, 0) == 2, "1 MiB: 2");
	CHECK(sheaf_capacity_for(64, 1) == 0, "1 asks for none");
	CHECK(sheaf_capacity_for(64, 20) == 14, "rounded down to a class");
	CHECK(sheaf_capacity_for(64, 1000) == 510, "1000: 510");
	CHECK(sheaf_capacity_for(64, 5000) == 1022, "at most 1022");
}

static void test_transitions(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 14 };
	struct uslab_cache *c;
	struct pcs *p;
	void *o[100];

	usl_opt.barn_max_full = 2; /* read at cache creation */
	c = uslab_cache_create("sheaf", 64, &a, 0);
	usl_opt.barn_max_full = 10;
	CHECK(c->sheaf_capacity == 14 && c->barn.max_full == 2, "setup");

	o[0] = uslab_cache_alloc(c);
	p = pcs_of(c);
	CHECK(p->main && p->hot.top - p->hot.bottom == 13, "first alloc refilled main (13 left)");
	CHECK(ev(c, USLAB_STAT_SHEAF_REFILL) == 1 && ev(c, USLAB_STAT_BARN_GET_FAIL) == 1,
	      "refill after an empty barn");
	for (int i = 1; i < 14; i++)
		o[i] = uslab_cache_alloc(c);
	CHECK(p->hot.top == p->hot.bottom, "main drained by 13 fast allocations");
	CHECK(ev(c, USLAB_STAT_ALLOC_SLOWPATH) == 1, "no slow path meanwhile");

	/* Free 14: fills main; the 15th free parks it as spare. */
	for (int i = 0; i < 14; i++)
		uslab_cache_free(c, o[i]);
	CHECK(p->hot.top == p->hot.limit && !p->spare, "main full");
	o[0] = uslab_cache_alloc(c);
	uslab_cache_free(c, o[0]);
	o[14] = o[0];
	for (int i = 0; i < 14; i++)
		o[i] = uslab_cache_alloc(c);
	for (int i = 14; i < 28; i++)
		o[i] = uslab_cache_alloc(c);
	/* 28 objects out: main and spare empty. Free them back, then more. */
	for (int i = 0; i < 28; i++)
		uslab_cache_free(c, o[i]);
	CHECK(p->spare && p->spare->size == 14 && p->hot.top == p->hot.limit,
	      "main and spare full after 28 frees");
	uint64_t swaps = ev(c, USLAB_STAT_SHEAF_SWAP);

	for (int i = 0; i < 28; i++)
		o[i] = uslab_cache_alloc(c);
	CHECK(ev(c, USLAB_STAT_SHEAF_SWAP) == swaps + 1, "alloc swapped in the full spare");

	/* Push more than both sheaves hold: full sheaves go to the barn... */
	for (int i = 28; i < 100; i++)
		o[i] = uslab_cache_alloc(c);
	for (int i = 0; i < 100; i++)
		uslab_cache_free(c, o[i]);
	CHECK(ev(c, USLAB_STAT_BARN_PUT) == 2, "two full sheaves parked in the barn");
	CHECK(c->barn.nr_full == 2, "barn holds 2 (its maximum)");
	/* ...and beyond the barn's bound main is flushed to slabs. */
	CHECK(ev(c, USLAB_STAT_BARN_PUT_FAIL) >= 1 && ev(c, USLAB_STAT_SHEAF_FLUSH) >= 1,
	      "barn full: flush");
	/* An empty thread takes full sheaves from the barn. */
	uslab_thread_flush();
	CHECK(!p->main && !p->spare && !p->cache, "thread flush cleared the pcs");
	o[0] = uslab_cache_alloc(c);
	CHECK(ev(c, USLAB_STAT_BARN_GET) == 1, "refilled from the barn, not slabs");
	uslab_cache_free(c, o[0]);
	uslab_cache_shrink(c);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(test_capacity);
	RUN(test_transitions);
	return 0;
}
