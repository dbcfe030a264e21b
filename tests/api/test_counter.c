// SPDX-License-Identifier: MIT
/*
 * test_counter.c - <uslab/counter.h>: exact sums after concurrent adds from
 * threads that come and go, uslab_counter_read()'s error bound, unique IDs
 * across threads with gaps only in batch tails, slots of destroyed objects
 * reused without their old values, and thousands of counters at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <uslab.h>

#include "../test.h"

#if TEST_SANITIZED
#define IDS_PER_THREAD 200000
#else
#define IDS_PER_THREAD 1000000
#endif
#define ID_THREADS 8

static struct uslab_counter counter;
static pthread_barrier_t barrier;

struct adder {
	uint64_t seed;
	long n;
	int64_t total; /* what this thread added */
	int wait;      /* wait at the barrier before exiting */
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;

	for (long i = 0; i < a->n; i++) {
		int64_t d = (int64_t)(rnd_next(&a->seed) % 201) - 100;

		uslab_counter_add(&counter, d);
		a->total += d;
	}
	if (a->wait) {
		pthread_barrier_wait(&barrier); /* the main thread reads now */
		pthread_barrier_wait(&barrier);
	}
	return NULL;
}

/* Threads that come and go: every delta lands, read() exact once they have exited. */
static void test_exact_sum(void)
{
	int64_t expect = 12345;

	CHECK(uslab_counter_init(&counter, 12345) == 0, "init");
	for (int round = 0; round < 8; round++) {
		struct adder a[4];
		pthread_t t[4];

		for (int i = 0; i < 4; i++) {
			a[i] = (struct adder){ .seed = (uint64_t)(round * 4 + i + 1), .n = 50000 };
			CHECK(!pthread_create(&t[i], NULL, adder_main, &a[i]), "thread");
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(t[i], NULL);
			expect += a[i].total;
		}
		CHECK(uslab_counter_sum(&counter) == expect, "round %d: sum %lld, want %lld", round,
		      (long long)uslab_counter_sum(&counter), (long long)expect);
		CHECK(uslab_counter_read(&counter) == expect, "exited threads folded in: %lld",
		      (long long)uslab_counter_read(&counter));
	}
	uslab_counter_destroy(&counter);
}

/* Live threads: read() within threads * batch of the truth, sum() exact. */
static void test_read_bound(void)
{
	struct adder a[4];
	pthread_t t[4];
	int64_t expect = 0, r;

	CHECK(uslab_counter_init(&counter, 0) == 0, "init");
	pthread_barrier_init(&barrier, NULL, 5);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct adder){ .seed = (uint64_t)(100 + i), .n = 100000, .wait = 1 };
		CHECK(!pthread_create(&t[i], NULL, adder_main, &a[i]), "thread");
	}
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < 4; i++)
		expect += a[i].total;
	r = uslab_counter_read(&counter);
	CHECK(llabs(r - expect) < 4 * counter.batch, "read %lld, exact %lld, bound %lld",
	      (long long)r, (long long)expect, (long long)(4 * counter.batch));
	CHECK(uslab_counter_sum(&counter) == expect, "sum exact while threads live");
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(uslab_counter_read(&counter) == expect, "after exit");
	pthread_barrier_destroy(&barrier);
	uslab_counter_destroy(&counter);
}

/* A destroyed counter's slot goes to the next one, without its delta. */
static void test_reuse(void)
{
	struct uslab_counter a, b;
	uint32_t a_idx;
	uint64_t a_gen;

	CHECK(uslab_counter_init(&a, 0) == 0, "init a");
	uslab_counter_add(&a, 5); /* stays in this thread's slot */
	CHECK(uslab_counter_sum(&a) == 5 && uslab_counter_read(&a) == 0, "a: in the slot");
	a_idx = a.idx;
	a_gen = a.gen;
	uslab_counter_destroy(&a);
	CHECK(uslab_counter_init(&b, 0) == 0, "init b");
	CHECK(b.idx == a_idx && b.gen != a_gen, "b reuses a's index");
	uslab_counter_add(&b, 1);
	CHECK(uslab_counter_sum(&b) == 1, "b did not inherit a's delta: %lld",
	      (long long)uslab_counter_sum(&b));
	uslab_counter_destroy(&b);
}

/* Thousands of counters at once: no fixed table runs out. */
static void test_many(void)
{
	enum { N = 5000 };
	struct uslab_counter *c = calloc(N, sizeof(*c));

	for (int i = 0; i < N; i++)
		CHECK(uslab_counter_init(&c[i], i) == 0, "init %d", i);
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < N; i++)
			uslab_counter_add(&c[i], i);
	for (int i = 0; i < N; i++) {
		CHECK(uslab_counter_sum(&c[i]) == 4 * (int64_t)i, "counter %d", i);
		uslab_counter_destroy(&c[i]);
	}
	free(c);
}

static struct uslab_idgen idgen;

static void *ids_main(void *arg)
{
	uint64_t *out = arg;

	for (long i = 0; i < IDS_PER_THREAD; i++)
		out[i] = uslab_idgen_next(&idgen);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* IDs unique across threads; gaps only in each thread's last batch. */
static void test_ids(void)
{
	size_t n = (size_t)ID_THREADS * IDS_PER_THREAD;
	uint64_t *ids = malloc(n * sizeof(*ids)), first = 1000, taken;
	pthread_t t[ID_THREADS];

	CHECK(ids && uslab_idgen_init(&idgen, first) == 0, "init");
	for (int i = 0; i < ID_THREADS; i++)
		CHECK(!pthread_create(&t[i], NULL, ids_main, ids + (size_t)i * IDS_PER_THREAD),
		      "thread");
	for (int i = 0; i < ID_THREADS; i++)
		pthread_join(t[i], NULL);
	qsort(ids, n, sizeof(*ids), cmp_u64);
	CHECK(ids[0] >= first, "first %llu", (unsigned long long)ids[0]);
	for (size_t i = 1; i < n; i++)
		if (ids[i] == ids[i - 1])
			CHECK(0, "ID %llu handed out twice", (unsigned long long)ids[i]);
	taken = idgen.next - first;
	CHECK(taken >= n && taken - n < ID_THREADS * idgen.batch,
	      "%llu IDs taken for %zu handed out: gaps beyond the batch tails",
	      (unsigned long long)taken, n);
	uslab_idgen_destroy(&idgen);
	free(ids);
}

/* Misuse: each in a child, which must die with the report named. */
static void double_destroy(void *arg)
{
	struct uslab_counter c;

	(void)arg;
	uslab_counter_init(&c, 0);
	uslab_counter_destroy(&c);
	uslab_counter_destroy(&c);
}

static void add_after_destroy(void *arg)
{
	struct uslab_counter c, other;

	(void)arg;
	uslab_counter_init(&c, 0);
	uslab_counter_add(&c, 1);
	uslab_counter_destroy(&c);
	uslab_counter_init(&other, 0); /* takes c's index */
	for (int i = 0; i < 1000; i++)
		uslab_counter_add(&c, 1);
}

static void add_to_zeroed(void *arg)
{
	static struct uslab_counter zero; /* never initialized */
	struct uslab_counter c;

	(void)arg;
	uslab_counter_init(&c, 0); /* index 0 exists in this thread */
	uslab_counter_add(&c, 1);
	uslab_counter_add(&zero, 1);
}

static void id_after_destroy(void *arg)
{
	struct uslab_idgen g;

	(void)arg;
	uslab_idgen_init(&g, 0);
	(void)uslab_idgen_next(&g);
	uslab_idgen_destroy(&g);
	(void)uslab_idgen_next(&g);
}

/*
 * A copy of a counter taken before its destroy, used after a new counter
 * took its index: reported, and the live counter's delta is not touched.
 * add_through_stale_copy: the live counter has a delta in this thread's
 * slot; stale_copy_old_slot: the slot still holds the destroyed counter's
 * delta (the new counter never added here); sum_through_stale_copy: a sum.
 */
static void add_through_stale_copy(void *arg)
{
	struct uslab_counter a, stale, live;

	(void)arg;
	uslab_counter_init(&a, 0);
	uslab_counter_add(&a, 1);
	stale = a;
	uslab_counter_destroy(&a);
	uslab_counter_init(&live, 0); /* takes a's index */
	if (live.idx != stale.idx)
		_exit(3);
	uslab_counter_add(&live, 10);
	uslab_counter_add(&stale, 1);
	fprintf(stderr, "not reported: live sum %lld (10 expected)\n",
		(long long)uslab_counter_sum(&live));
}

static void stale_copy_old_slot(void *arg)
{
	struct uslab_counter a, stale, live;

	(void)arg;
	uslab_counter_init(&a, 0);
	uslab_counter_add(&a, 1);
	stale = a;
	uslab_counter_destroy(&a);
	uslab_counter_init(&live, 0);
	if (live.idx != stale.idx)
		_exit(3);
	uslab_counter_add(&stale, 1);
}

static void sum_through_stale_copy(void *arg)
{
	struct uslab_counter a, stale, live;

	(void)arg;
	uslab_counter_init(&a, 0);
	stale = a;
	uslab_counter_destroy(&a);
	uslab_counter_init(&live, 0);
	uslab_counter_add(&live, 10);
	(void)uslab_counter_sum(&stale);
}

/* A stale copy of a generator: its slot taken by a live counter (a's delta kept). */
static void id_through_stale_copy(void *arg)
{
	struct uslab_idgen g, stale;
	struct uslab_counter live;

	(void)arg;
	uslab_idgen_init(&g, 0);
	stale = g;
	uslab_idgen_destroy(&g);
	uslab_counter_init(&live, 0);
	uslab_counter_add(&live, 10);
	(void)uslab_idgen_next(&stale);
}

static void sum_of_null(void *arg)
{
	(void)arg;
	(void)uslab_counter_sum(NULL);
}

static const struct death counter_misuse[] = {
	{ "counter destroyed twice", double_destroy,
	  "uslab: BUG -: uslab_counter_destroy: counter never initialized, or destroyed" },
	{ "add to a destroyed counter whose index was reused", add_after_destroy,
	  "uslab: BUG -: uslab_counter_add: counter never initialized, or destroyed" },
	{ "add to a zero-filled counter", add_to_zeroed,
	  "uslab: BUG -: uslab_counter_add: counter never initialized, or destroyed" },
	{ "ID from a destroyed generator", id_after_destroy,
	  "uslab: BUG -: uslab_idgen_next: ID generator never initialized, or destroyed" },
	{ "add through a stale copy, index reused", add_through_stale_copy,
	  "uslab: BUG -: uslab_counter_add: counter never initialized, or destroyed" },
	{ "add through a stale copy, its old slot", stale_copy_old_slot,
	  "uslab: BUG -: uslab_counter_add: counter never initialized, or destroyed" },
	{ "sum through a stale copy, index reused", sum_through_stale_copy,
	  "uslab: BUG -: uslab_counter_sum: counter never initialized, or destroyed" },
	{ "ID through a stale copy, index reused by a counter", id_through_stale_copy,
	  "uslab: BUG -: uslab_idgen_next: ID generator never initialized, or destroyed" },
	{ "sum of NULL", sum_of_null,
	  "uslab: BUG -: uslab_counter_sum: counter never initialized, or destroyed" },
};

static void test_misuse(void)
{
	struct uslab_counter c;
	struct uslab_idgen g;

	CHECK(uslab_counter_init(NULL, 0) == -EINVAL, "counter_init(NULL)");
	CHECK(uslab_idgen_init(NULL, 0) == -EINVAL, "idgen_init(NULL)");
	uslab_counter_destroy(NULL);
	uslab_idgen_destroy(NULL);
	CHECK(uslab_counter_init(&c, 7) == 0 && uslab_idgen_init(&g, 7) == 0, "init");
	uslab_counter_destroy(&c);
	uslab_idgen_destroy(&g);
	EXPECT_DEATHS(counter_misuse);
}

int main(void)
{
	RUN(test_exact_sum);
	RUN(test_read_bound);
	RUN(test_reuse);
	RUN(test_many);
	RUN(test_ids);
	RUN(test_misuse);
	return 0;
}
