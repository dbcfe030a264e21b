// SPDX-License-Identifier: MIT
/*
 * test_adapt.c - the adaptive sheaf capacity (barn.c, sheaf.c, thread_sheaves.c).
 *
 *   grow_2threads  a producer allocates bursts of 64 stamped objects and
 *                  hands them through a ring to a consumer on another
 *                  thread, which checks and frees them: every stamp is seen
 *                  exactly once, the capacity grows from its base (126 for
 *                  256-byte objects) to its maximum (1022) and the
 *                  statistics show it (capacity now, min, max, grow steps,
 *                  barn trades); shrink and destroy leave nothing behind.
 *   decay_direct   barn_decay() at one interval (USLAB_SHEAF_DECAY_MS)
 *                  halves the capacity, at ten goes to the base: the barn's
 *                  empty sheaves (old size) are freed, full ones past
 *                  max_full * capacity objects flushed, none lost
 *                  (active_objs is what the sheaves hold).
 *   decay_monitor  traffic stops and nothing calls uslab: the decay
 *                  monitor alone brings the capacity back to the base
 *                  (three halvings, 1022 -> 126) within the documented
 *                  (3 + 1) intervals, checked with a bound of 20; then it
 *                  exits (nothing grown).
 *   decay_idle     traffic stops; a thread's exit after ten intervals
 *                  finds the capacity back at the base.
 *   mixed          the same producer/consumer while a third thread keeps
 *                  forcing the capacity down (and the traffic grows it
 *                  again): sheaves of every size cross threads, the library
 *                  asserts its relaxed invariants, every stamp seen once.
 *   exit_destroy   threads holding grown sheaves (full and partly full)
 *                  exit, or are drained by destroy while alive: destroy
 *                  succeeds (no object lost in a sheaf), none twice.
 *   pinned         uslab_cache_args.sheaf_capacity and USLAB_SHEAF_CAPACITY
 *                  pin the capacity: the same traffic leaves it as it was.
 *   depth          the barn's adaptive depth: one thread frees DEPTH_N
 *                  stamped objects and allocates them back, three times;
 *                  the depth grows past USLAB_BARN_MAX_FULL (the last free
 *                  leaves the objects in full sheaves), every object is
 *                  handed out once and keeps its stamp. Idle, the decay
 *                  monitor brings the depth back to its base, flushing the
 *                  excess (none lost). Freeing without allocating back
 *                  grows nothing, nor does a consumer's freeing that a
 *                  producer on another thread allocates back (the
 *                  grow_2threads traffic); USLAB_BARN_MAX_MB=0 grows
 *                  nothing, nor does a malloc drop-in's size class
 *                  (CACHE_DROPIN: USLAB_MALLOC_BARN_MAX_MB, 0 by default,
 *                  which it follows when set).
 */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "internal.h"
#include "../test.h"

#define OBJ_SIZE 256
#define BURST 64
#define RING 2048 /* pointers between producer and consumer */
#define MAGIC 0x5eafcafe5eafcafeull

struct obj {
	uint64_t magic;
	uint64_t id;
	char pad[OBJ_SIZE - 16];
};

struct run {
	struct uslab_cache *c;
	size_t n; /* objects to pass */
	void *ring[RING];
	size_t head, tail; /* atomics: head written by the producer, tail by the consumer */
	unsigned char *seen;
	unsigned int peak;	       /* largest capacity the producer saw */
	bool stop;		       /* the shaker's */
	unsigned long pchecks, checks; /* the producer's, the consumer's */
};

static void *producer(void *arg)
{
	struct run *r = arg;
	void *objs[BURST];

	for (size_t id = 0; id < r->n;) {
		size_t k = r->n - id < BURST ? r->n - id : BURST;
		size_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
		unsigned int cap = READ_ONCE(r->c->barn.capacity);

		while (head + k - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) > RING)
			sched_yield();
		CHECK_COUNTED(r->pchecks, uslab_cache_alloc_bulk(r->c, k, objs) == k, "alloc_bulk");
		for (size_t i = 0; i < k; i++) {
			struct obj *o = objs[i];

			o->magic = MAGIC;
			o->id = id + i;
			r->ring[(head + i) % RING] = o;
		}
		__atomic_store_n(&r->head, head + k, __ATOMIC_RELEASE);
		id += k;
		if (cap > r->peak)
			r->peak = cap;
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct run *r = arg;
	void *objs[BURST];
	size_t done = 0;

	while (done < r->n) {
		size_t tail = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
		size_t avail = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) - tail;
		size_t k = avail < BURST ? avail : BURST;

		if (!k) {
			sched_yield();
			continue;
		}
		for (size_t i = 0; i < k; i++) {
			struct obj *o = r->ring[(tail + i) % RING];

			CHECK_COUNTED(r->checks, o->magic == MAGIC && o->id < r->n,
				      "stamp %#llx id %llu", (unsigned long long)o->magic,
				      (unsigned long long)o->id);
			CHECK_COUNTED(r->checks, !r->seen[o->id], "object %llu seen twice",
				      (unsigned long long)o->id);
			r->seen[o->id] = 1;
			o->magic = 0;
			objs[i] = o;
		}
		__atomic_store_n(&r->tail, tail + k, __ATOMIC_RELEASE);
		uslab_cache_free_bulk(r->c, k, objs);
		done += k;
	}
	return NULL;
}

/* Keep forcing the capacity down while the traffic grows it. */
static void *shaker(void *arg)
{
	struct run *r = arg;
	struct timespec ms = { 0, 1000000 };

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		barn_decay(r->c, barn_now_ns() + 100ull * 1000000000u);
		nanosleep(&ms, NULL);
	}
	return NULL;
}

/* Pass @n stamped objects from a producer to a consumer thread; check them all. */
static struct run *traffic(struct uslab_cache *c, size_t n, bool shake)
{
	struct run *r = calloc(1, sizeof(*r));
	pthread_t tp, tc, ts;

	CHECK(r, "calloc");
	r->c = c;
	r->n = n;
	r->seen = calloc(n, 1);
	CHECK(r->seen, "calloc");
	CHECK(!pthread_create(&tc, NULL, consumer, r) && !pthread_create(&tp, NULL, producer, r),
	      "threads");
	if (shake)
		CHECK(!pthread_create(&ts, NULL, shaker, r), "shaker");
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	if (shake) {
		__atomic_store_n(&r->stop, true, __ATOMIC_RELEASE);
		pthread_join(ts, NULL);
	}
	for (size_t i = 0; i < n; i++)
		CHECK(r->seen[i], "object %zu lost", i);
	test_checks += r->checks + r->pchecks;
	return r;
}

static void run_free(struct run *r)
{
	free(r->seen);
	free(r);
}

static struct uslab_cache_stats stats(struct uslab_cache *c)
{
	struct uslab_cache_stats st;

	CHECK(!uslab_cache_stats(c, &st), "stats");
	return st;
}

/*
 * Shrink and destroy @c: every object came back (no object lost in a
 * sheaf). The decay monitor may be flushing sheaves it just took out of
 * the barn (outside the barn lock): those objects arrive within its pass,
 * so the count is retried for up to a second.
 */
static void finish(struct uslab_cache *c)
{
	struct uslab_cache_stats st;

	for (int i = 0;; i++) {
		CHECK(!uslab_cache_shrink(c), "shrink");
		st = stats(c);
		if (st.active_objs == 0 || i == 200)
			break;
		nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	CHECK(st.active_objs == 0, "active_objs %lu after shrink", st.active_objs);
	CHECK(st.sheaf_capacity == st.sheaf_capacity_min, "shrink: back to the base (%u)",
	      st.sheaf_capacity);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/* A cache that adapts (no pinned capacity), grown by a run of traffic. */
static struct uslab_cache *grown(const char *name)
{
	struct uslab_cache *c = uslab_cache_create(name, OBJ_SIZE, NULL, 0);
	struct run *r;

	CHECK(c && c->sheaf_capacity == 126 && c->barn.cap_max == 1022, "create %s", name);
	r = traffic(c, 300000, false);
	CHECK(r->peak == 1022, "%s: grew to %u", name, r->peak);
	run_free(r);
	return c;
}

static void grow_2threads(void)
{
	struct uslab_cache *c = uslab_cache_create("adapt-grow", OBJ_SIZE, NULL, 0);
	struct uslab_cache_stats st;
	struct run *r;

	CHECK(c, "create");
	st = stats(c);
	CHECK(st.sheaf_capacity == 126 && st.sheaf_capacity_min == 126 &&
		      st.sheaf_capacity_max == 1022,
	      "before: capacity %u (%u..%u)", st.sheaf_capacity, st.sheaf_capacity_min,
	      st.sheaf_capacity_max);
	r = traffic(c, 1000000, false);
	st = stats(c);
	CHECK(r->peak == 1022, "capacity grew to %u", r->peak);
	CHECK(st.events[USLAB_STAT_SHEAF_GROW] >= 3, "grow steps %llu",
	      (unsigned long long)st.events[USLAB_STAT_SHEAF_GROW]);
	CHECK(st.events[USLAB_STAT_BARN_GET] && st.events[USLAB_STAT_BARN_PUT], "trades counted");
	CHECK(!strcmp(uslab_stat_name(USLAB_STAT_SHEAF_GROW), "sheaf_grow") &&
		      !strcmp(uslab_stat_name(USLAB_STAT_SHEAF_SHRINK), "sheaf_shrink"),
	      "stat names");
	printf("  1M objects: capacity peak %u, now %u, grow steps %llu, barn gets %llu puts %llu\n",
	       r->peak, st.sheaf_capacity, (unsigned long long)st.events[USLAB_STAT_SHEAF_GROW],
	       (unsigned long long)st.events[USLAB_STAT_BARN_GET],
	       (unsigned long long)st.events[USLAB_STAT_BARN_PUT]);
	run_free(r);
	finish(c);
}

/* Objects the barn holds; every full sheaf of @c is a valid one. */
static unsigned long barn_check_objects(struct uslab_cache *c)
{
	unsigned long n = 0;

	ulock_lock(&c->barn.lock);
	for (struct sheaf *s = c->barn.full; s; s = s->next) {
		CHECK(s->size == s->capacity && sheaf_ok(c, s), "full sheaf %u/%u", s->size,
		      s->capacity);
		n += s->size;
	}
	for (struct sheaf *s = c->barn.empty; s; s = s->next)
		CHECK(s->capacity == READ_ONCE(c->barn.capacity), "empty sheaf of %u, capacity %u",
		      s->capacity, READ_ONCE(c->barn.capacity));
	ulock_unlock(&c->barn.lock);
	return n;
}

static void decay_direct(void)
{
	struct uslab_cache *c = grown("adapt-decay");
	uint64_t now = barn_now_ns(), iv = (uint64_t)usl_opt.sheaf_decay_ms * 1000000u;
	struct uslab_cache_stats st = stats(c), st2;
	unsigned long held;

	/* The producer and the consumer exited: what they held is in the barn or in slabs. */
	held = barn_check_objects(c);
	CHECK(st.active_objs == held, "active %lu, barn %lu", st.active_objs, held);
	CHECK(READ_ONCE(c->barn.capacity) == 1022, "grown: %u", READ_ONCE(c->barn.capacity));
	barn_decay(c, now + iv / 2);
	CHECK(READ_ONCE(c->barn.capacity) == 1022, "half an interval: still %u",
	      READ_ONCE(c->barn.capacity));
	barn_decay(c, now + iv + iv / 10);
	CHECK(READ_ONCE(c->barn.capacity) == 510, "one interval: %u", READ_ONCE(c->barn.capacity));
	CHECK(READ_ONCE(c->barn.nr_empty) == 0, "empty sheaves of 1022 freed");
	held = barn_check_objects(c);
	CHECK(held <= (unsigned long)c->barn.max_full * 510, "barn keeps %lu objects", held);
	st2 = stats(c);
	CHECK(st2.active_objs == held, "flushed, none lost: active %lu, barn %lu", st2.active_objs,
	      held);
	barn_decay(c, now + 12 * iv);
	CHECK(READ_ONCE(c->barn.capacity) == 126, "ten intervals: the base (%u)",
	      READ_ONCE(c->barn.capacity));
	held = barn_check_objects(c);
	CHECK(held <= (unsigned long)c->barn.max_full * 126, "barn keeps %lu objects", held);
	st2 = stats(c);
	CHECK(st2.active_objs == held && st2.sheaf_capacity == 126, "active %lu, barn %lu",
	      st2.active_objs, held);
	CHECK(st2.events[USLAB_STAT_SHEAF_SHRINK] == st.events[USLAB_STAT_SHEAF_SHRINK] + 3,
	      "three shrink steps");
	barn_decay(c, now + 100 * iv);
	CHECK(READ_ONCE(c->barn.capacity) == 126, "not below the base");
	finish(c);
}

static void *touch(void *arg)
{
	struct uslab_cache *c = arg;

	uslab_cache_free(c, uslab_cache_alloc(c)); /* then exits: pcs_drain, barn_decay */
	return NULL;
}

static void decay_idle(void)
{
	struct uslab_cache *c = grown("adapt-idle");
	uint64_t t0 = barn_now_ns();
	unsigned int ms = usl_opt.sheaf_decay_ms;
	struct timespec ts = { (time_t)(ms * 10 / 1000),
			       (long)(ms * 10 % 1000) * 1000000 + 5000000 };
	pthread_t t;

	/* Traffic stopped: 10 intervals later, a thread's exit shrinks the barn (or the monitor did). */
	nanosleep(&ts, NULL);
	CHECK(!pthread_create(&t, NULL, touch, c) && !pthread_join(t, NULL), "thread");
	CHECK(READ_ONCE(c->barn.capacity) == 126, "back to the base after %llu ms: %u",
	      (unsigned long long)((barn_now_ns() - t0) / 1000000), READ_ONCE(c->barn.capacity));
	printf("  idle %u ms, then a thread exit: capacity %u\n", ms * 10,
	       READ_ONCE(c->barn.capacity));
	finish(c);
	t0 = barn_now_ns();
	while (barn_monitor_running() && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
}

static void decay_monitor(void)
{
	struct uslab_cache *c = grown("adapt-monitor");
	unsigned int ms = usl_opt.sheaf_decay_ms;
	struct timespec tick = { 0, 2000000 };
	uint64_t t0 = barn_now_ns(), took;

	CHECK(barn_monitor_running(), "the monitor started when the cache grew");
	while (READ_ONCE(c->barn.capacity) != 126 && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&tick, NULL);
	took = (barn_now_ns() - t0) / 1000000u;
	CHECK(READ_ONCE(c->barn.capacity) == 126, "not back at the base after %llu ms",
	      (unsigned long long)took);
	CHECK(took <= 20ull * ms, "back at the base after %llu ms, bound %u ms",
	      (unsigned long long)took, 20 * ms);
	printf("  idle: 1022 -> 126 by the monitor alone in %llu ms (USLAB_SHEAF_DECAY_MS=%u)\n",
	       (unsigned long long)took, ms);
	finish(c);
	/* Nothing grown: it exits after its next pass. */
	t0 = barn_now_ns();
	while (barn_monitor_running() && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&tick, NULL);
	CHECK(!barn_monitor_running(), "the monitor exited");
}

/*
 * The call that grows the capacity is the last one: the decay monitor must
 * start from it (not only from a later slow path), and bring it back.
 */
static void decay_after_last_call(void)
{
	struct uslab_cache *c = uslab_cache_create("adapt-last", 64, NULL, 0);
	unsigned int base = c->sheaf_capacity, ms = usl_opt.sheaf_decay_ms;
	struct timespec tick = { 0, 2000000 };
	static void *h[4096];
	size_t n = 0;
	uint64_t t0;
	int it;

	CHECK(c && 3 * base <= 4096, "create");
	for (it = 0; it < 1000000; it++) {
		n = uslab_cache_alloc_bulk(c, 3 * base, h);
		CHECK(n == 3 * base, "alloc");
		if (READ_ONCE(c->barn.capacity) != base)
			break; /* grown by this call: no other call follows */
		uslab_cache_free_bulk(c, n, h);
		n = 0;
	}
	CHECK(READ_ONCE(c->barn.capacity) != base, "the capacity grew");
	t0 = barn_now_ns();
	while (READ_ONCE(c->barn.capacity) != base && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&tick, NULL);
	CHECK(READ_ONCE(c->barn.capacity) == base, "still %u (base %u) after %u ms idle",
	      READ_ONCE(c->barn.capacity), base, 40 * ms);
	t0 = barn_now_ns();
	while (barn_monitor_running() && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&tick, NULL);
	CHECK(!barn_monitor_running(), "the monitor exited");
	uslab_cache_free_bulk(c, n, h);
	finish(c);
}

static void mixed(void)
{
	struct uslab_cache *c = uslab_cache_create("adapt-mixed", OBJ_SIZE, NULL, 0);
	struct uslab_cache_stats st;
	struct run *r;

	CHECK(c, "create");
	/*
	 * Until the shaker has forced the capacity down twice: on a loaded
	 * machine (make test's parallel tests, another program) it may not
	 * get a CPU during one run of the traffic.
	 */
	for (int round = 0;; round++) {
		r = traffic(c, 600000, true);
		st = stats(c);
		if (st.events[USLAB_STAT_SHEAF_SHRINK] >= 2 || round == 20)
			break;
		run_free(r);
	}
	CHECK(st.events[USLAB_STAT_SHEAF_GROW] >= 2 && st.events[USLAB_STAT_SHEAF_SHRINK] >= 2,
	      "capacity went up and down: %llu up, %llu down",
	      (unsigned long long)st.events[USLAB_STAT_SHEAF_GROW],
	      (unsigned long long)st.events[USLAB_STAT_SHEAF_SHRINK]);
	printf("  capacity steps: %llu up, %llu down\n",
	       (unsigned long long)st.events[USLAB_STAT_SHEAF_GROW],
	       (unsigned long long)st.events[USLAB_STAT_SHEAF_SHRINK]);
	run_free(r);
	finish(c);
}

#define HOLDERS 3
#define HELD 2500 /* more than two sheaves of 1022 */

struct holder {
	struct uslab_cache *c;
	pthread_barrier_t *b;
	unsigned int main_cap;
	unsigned long checks;
};

/* Allocate HELD objects, free them into grown sheaves, wait, exit holding them. */
static void *holder(void *arg)
{
	struct holder *h = arg;
	void **objs = malloc(HELD * sizeof(void *));

	CHECK_COUNTED(h->checks, objs, "malloc");
	for (int i = 0; i < HELD; i++) {
		objs[i] = uslab_cache_alloc(h->c);
		CHECK_COUNTED(h->checks, objs[i], "alloc");
		((struct obj *)objs[i])->magic = MAGIC;
	}
	for (int i = 0; i < HELD - 7; i++) /* main left partly full */
		uslab_cache_free(h->c, objs[i]);
	for (int i = HELD - 7; i < HELD; i++)
		uslab_cache_free(h->c, objs[i]);
	h->main_cap = pcs_of(h->c)->main ? pcs_of(h->c)->main->capacity : 0;
	free(objs);
	if (h->b) {
		pthread_barrier_wait(h->b); /* holding them */
		pthread_barrier_wait(h->b); /* destroy ran */
	}
	return NULL;
}

static void holders(struct uslab_cache *c, bool wait_destroy)
{
	struct holder h[HOLDERS];
	pthread_t t[HOLDERS];
	pthread_barrier_t b;
	unsigned long bigger = 0;

	CHECK(!pthread_barrier_init(&b, NULL, HOLDERS + 1), "barrier");
	for (int i = 0; i < HOLDERS; i++) {
		h[i] = (struct holder){ .c = c, .b = wait_destroy ? &b : NULL };
		CHECK(!pthread_create(&t[i], NULL, holder, &h[i]), "thread");
	}
	if (wait_destroy) {
		struct uslab_cache_stats st;

		pthread_barrier_wait(&b);
		st = stats(c);
		CHECK(st.active_objs >= 3 * 1022, "threads hold grown sheaves: %lu",
		      st.active_objs);
		CHECK(uslab_cache_destroy(c) == 0, "destroy while they hold grown sheaves");
		pthread_barrier_wait(&b);
	}
	for (int i = 0; i < HOLDERS; i++) {
		pthread_join(t[i], NULL);
		test_checks += h[i].checks;
		bigger += h[i].main_cap > 126;
	}
	CHECK(bigger == HOLDERS, "every holder had a grown main sheaf (%lu)", bigger);
	pthread_barrier_destroy(&b);
	if (!wait_destroy)
		finish(c); /* they exited holding them */
}

static void exit_destroy(void)
{
	holders(grown("adapt-exit"), false);
	holders(grown("adapt-destroy"), true);
}

static void pinned(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 126 };
	struct uslab_cache *c = uslab_cache_create("adapt-pinned", OBJ_SIZE, &a, 0);
	struct uslab_cache_stats st;
	struct run *r;

	CHECK(c && c->barn.cap_min == 126 && c->barn.cap_max == 126, "pinned by args");
	r = traffic(c, 300000, false);
	st = stats(c);
	CHECK(r->peak == 126 && st.sheaf_capacity == 126 && st.sheaf_capacity_max == 126 &&
		      !st.events[USLAB_STAT_SHEAF_GROW],
	      "args: capacity %u (peak %u)", st.sheaf_capacity, r->peak);
	run_free(r);
	finish(c);

	usl_opt.sheaf_capacity = 254; /* USLAB_SHEAF_CAPACITY=254 */
	c = uslab_cache_create("adapt-pinned-env", OBJ_SIZE, NULL, 0);
	usl_opt.sheaf_capacity = 0;
	CHECK(c && c->barn.cap_min == 254 && c->barn.cap_max == 254, "pinned by the variable");
	r = traffic(c, 300000, false);
	CHECK(r->peak == 254 && READ_ONCE(c->barn.capacity) == 254, "variable: capacity %u",
	      READ_ONCE(c->barn.capacity));
	run_free(r);
	finish(c);
}

#define DEPTH_N 40000

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;

	return x < y ? -1 : x > y;
}

/* Allocate DEPTH_N objects into @h, stamped with their index; none twice. */
static void depth_alloc(struct uslab_cache *c, void **h)
{
	void **sorted = malloc(DEPTH_N * sizeof(void *));

	CHECK(sorted, "malloc");
	for (size_t i = 0; i < DEPTH_N; i += BURST)
		CHECK(uslab_cache_alloc_bulk(c, BURST, h + i) == BURST, "alloc_bulk at %zu", i);
	for (size_t i = 0; i < DEPTH_N; i++) {
		((struct obj *)h[i])->magic = MAGIC;
		((struct obj *)h[i])->id = i;
	}
	memcpy(sorted, h, DEPTH_N * sizeof(void *));
	qsort(sorted, DEPTH_N, sizeof(void *), cmp_ptr);
	for (size_t i = 1; i < DEPTH_N; i++)
		CHECK(sorted[i] != sorted[i - 1], "object %p handed out twice", sorted[i]);
	free(sorted);
}

/* Check the stamps of @h and free them all. */
static void depth_free(struct uslab_cache *c, void **h)
{
	for (size_t i = 0; i < DEPTH_N; i++) {
		struct obj *o = h[i];

		CHECK(o->magic == MAGIC && o->id == i, "object %zu: stamp %#llx id %llu", i,
		      (unsigned long long)o->magic, (unsigned long long)o->id);
		o->magic = 0;
	}
	for (size_t i = 0; i < DEPTH_N; i += BURST)
		uslab_cache_free_bulk(c, BURST, h + i);
}

static void depth(void)
{
	struct uslab_cache *c = uslab_cache_create("adapt-depth", OBJ_SIZE, NULL, 0);
	void **h = malloc(DEPTH_N * sizeof(void *));
	unsigned int base = usl_opt.barn_max_full, ms = usl_opt.sheaf_decay_ms;
	struct uslab_cache_stats st;
	unsigned long held;
	uint64_t t0;

	_Static_assert(DEPTH_N % BURST == 0, "whole bursts");
	CHECK(c && h && c->barn.max_full == base && c->barn.full_min == base, "create");
	/* Freed, never allocated back: the barn refused sheaves, but nothing missed them. */
	depth_alloc(c, h);
	depth_free(c, h);
	CHECK(READ_ONCE(c->barn.max_full) == base, "freed only: depth %u", c->barn.max_full);
	for (int round = 0; round < 3; round++) {
		depth_alloc(c, h);
		depth_free(c, h);
	}
	held = barn_check_objects(c);
	printf("  %d objects freed and allocated back: depth %u (base %u), the barn holds %lu\n",
	       DEPTH_N, READ_ONCE(c->barn.max_full), base, held);
	/* More full sheaves than the base depth (of whatever capacity they have now). */
	CHECK(READ_ONCE(c->barn.max_full) > base && READ_ONCE(c->barn.nr_full) > base,
	      "depth %u, barn holds %lu objects in %u full sheaves", READ_ONCE(c->barn.max_full),
	      held, READ_ONCE(c->barn.nr_full));
	st = stats(c);
	CHECK(st.active_objs >= held, "active %lu, barn %lu", st.active_objs, held);
	/* One step per sheaf of depth (more if it also halved meanwhile). */
	CHECK(st.events[USLAB_STAT_BARN_GROW] >= READ_ONCE(c->barn.max_full) - base,
	      "grow steps %llu, depth %u", (unsigned long long)st.events[USLAB_STAT_BARN_GROW],
	      READ_ONCE(c->barn.max_full));

	/* Idle: the monitor halves the depth to its base; the excess goes back to slabs. */
	t0 = barn_now_ns();
	while (READ_ONCE(c->barn.max_full) != base && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	CHECK(READ_ONCE(c->barn.max_full) == base, "depth %u after %u ms idle",
	      READ_ONCE(c->barn.max_full), 40 * ms);
	held = barn_check_objects(c);
	CHECK(held <= (unsigned long)base * 1022, "the barn keeps %lu objects", held);
	st = stats(c);
	CHECK(st.events[USLAB_STAT_BARN_SHRINK] >= 1 && st.active_objs >= held,
	      "shrink steps %llu, active %lu, barn %lu",
	      (unsigned long long)st.events[USLAB_STAT_BARN_SHRINK], st.active_objs, held);
	finish(c);

	/* Another thread's refusals: a producer's misses grow nothing. */
	c = uslab_cache_create("adapt-depth-2t", OBJ_SIZE, NULL, 0);
	CHECK(c, "create");
	run_free(traffic(c, 300000, false));
	CHECK(READ_ONCE(c->barn.max_full) == base && !c->barn.full_grows,
	      "producer and consumer: depth %u, %u steps up", READ_ONCE(c->barn.max_full),
	      c->barn.full_grows);
	finish(c);

	/* USLAB_BARN_MAX_MB=0: the depth is USLAB_BARN_MAX_FULL. */
	usl_opt.barn_max_mb = 0;
	c = uslab_cache_create("adapt-depth-0", OBJ_SIZE, NULL, 0);
	usl_opt.barn_max_mb = 1024;
	CHECK(c, "create");
	depth_alloc(c, h);
	for (int round = 0; round < 3; round++) {
		depth_free(c, h);
		depth_alloc(c, h);
	}
	CHECK(READ_ONCE(c->barn.max_full) == base && !c->barn.full_grows, "pinned: depth %u",
	      READ_ONCE(c->barn.max_full));
	depth_free(c, h);
	finish(c);

	/*
	 * A size class of the malloc drop-in (CACHE_DROPIN) grows by
	 * USLAB_MALLOC_BARN_MAX_MB (0 by default: pinned like the cache
	 * above), any other cache by USLAB_BARN_MAX_MB.
	 */
	c = lifecycle_create("adapt-depth-dropin", OBJ_SIZE, &(struct uslab_cache_args){ 0 },
			     CACHE_DROPIN, NULL);
	CHECK(c && c->barn.full_bytes == 0, "the drop-in's class: %llu bytes of growth",
	      c ? (unsigned long long)c->barn.full_bytes : 0ull);
	depth_alloc(c, h);
	for (int round = 0; round < 3; round++) {
		depth_free(c, h);
		depth_alloc(c, h);
	}
	CHECK(READ_ONCE(c->barn.max_full) == base && !c->barn.full_grows,
	      "the drop-in's class pinned: depth %u", READ_ONCE(c->barn.max_full));
	depth_free(c, h);
	finish(c);
	usl_opt.dropin_barn_mb = 3;
	c = lifecycle_create("adapt-depth-dropin-3", OBJ_SIZE, &(struct uslab_cache_args){ 0 },
			     CACHE_DROPIN, NULL);
	usl_opt.dropin_barn_mb = 0;
	CHECK(c && c->barn.full_bytes == 3ull << 20, "USLAB_MALLOC_BARN_MAX_MB=3: %llu bytes",
	      c ? (unsigned long long)c->barn.full_bytes : 0ull);
	finish(c);
	c = uslab_cache_create("adapt-depth-default", OBJ_SIZE, NULL, 0);
	CHECK(c && c->barn.full_bytes == 1024ull << 20, "another cache: %llu bytes",
	      c ? (unsigned long long)c->barn.full_bytes : 0ull);
	finish(c);
	free(h);
	/* Nothing grown: the monitor exits after its next pass. */
	t0 = barn_now_ns();
	while (barn_monitor_running() && barn_now_ns() - t0 < 40ull * ms * 1000000u)
		nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
	CHECK(!barn_monitor_running(), "the monitor exited");
}

int main(void)
{
	/* uslab's options are read at the first call; then the test's own. */
	uslab_cache_destroy(uslab_cache_create("adapt-init", 64, NULL, 0));
	usl_opt.sheaf_grow_rate = 500; /* 32 trades within 64 ms: sanitizer builds grow too */
	usl_opt.sheaf_decay_ms = 50;
	RUN(decay_monitor);
	RUN(decay_idle);
	RUN(decay_after_last_call);
	RUN(depth);
	/* (The monitor exited: nobody reads the options now.) */
	CHECK(!barn_monitor_running(), "no monitor");
	usl_opt.sheaf_decay_ms = 2000; /* no decay in the middle of a run */
	RUN(grow_2threads);
	RUN(mixed);
	RUN(exit_destroy);
	RUN(pinned);
	RUN(decay_direct);
	return 0;
}
