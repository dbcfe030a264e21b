// SPDX-License-Identifier: MIT
/*
 * test_barn.c - barn.c: the depot of full and empty sheaves.
 *
 *   init_bounds      barn_init: empty stacks, zero counts, the bounds kept;
 *                    a barn of bounds 0 refuses every sheaf.
 *   put_get          barn_put_full/barn_put_empty keep sheaves up to their
 *                    bound and refuse the next; barn_get_empty returns the
 *                    empty ones, most recent first (a stack), then NULL.
 *   replace_empty    every outcome of its comment: no full sheaf (NULL,
 *                    @empty untouched), a full one with room for @empty
 *                    (kept: *empty = NULL), without room (the caller keeps
 *                    it), with *empty NULL.
 *   replace_full     kept with an empty one back, kept with none (NULL),
 *                    refused (taken false, nothing changed).
 *   drain            barn_drain returns every object of its full sheaves to
 *                    slabs (active_objs) and frees every sheaf (the sheaf
 *                    cache's active objects), leaving the barn empty.
 *   trade_2threads   a producer puts stamped full sheaves, a consumer takes
 *                    them: each stamp is seen exactly once, every sheaf is
 *                    accounted for exactly once at the end.
 */
#include <pthread.h>
#include <sched.h>

#include "internal.h"
#include "../test.h"

/* A bare sheaf: barn.c only links them (@next). */
static struct sheaf *new_sheaf(unsigned int capacity)
{
	struct sheaf *sh = calloc(1, sizeof(*sh) + capacity * sizeof(void *));

	CHECK(sh, "calloc");
	sh->capacity = capacity;
	return sh;
}

static unsigned int stack_len(const struct sheaf *s)
{
	unsigned int n = 0;

	for (; s; s = s->next)
		n++;
	return n;
}

/* The counts agree with the stacks, and with barn_counts(). */
static void check_counts(struct barn *b, unsigned int full, unsigned int empty)
{
	unsigned long f, e;

	barn_counts(b, &f, &e);
	CHECK(b->nr_full == full && b->nr_empty == empty, "counts %u/%u, want %u/%u", b->nr_full,
	      b->nr_empty, full, empty);
	CHECK(f == full && e == empty, "barn_counts %lu/%lu", f, e);
	CHECK(stack_len(b->full) == full && stack_len(b->empty) == empty, "stacks %u/%u",
	      stack_len(b->full), stack_len(b->empty));
}

static void init_bounds(void)
{
	struct barn b;
	struct sheaf *sh = new_sheaf(2), *e = new_sheaf(2);
	bool taken = true;

	memset(&b, 0xa5, sizeof(b));
	barn_init(&b, NULL, 3, 5);
	CHECK(b.max_full == 3 && b.max_empty == 5, "bounds %u/%u", b.max_full, b.max_empty);
	CHECK(!b.full && !b.empty && !ulock_held(&b.lock), "empty stacks, unlocked");
	check_counts(&b, 0, 0);

	barn_init(&b, NULL, 0, 0);
	CHECK(!barn_put_full(&b, sh), "bound 0: full sheaf refused");
	CHECK(!barn_put_empty(&b, sh), "bound 0: empty sheaf refused");
	CHECK(!barn_replace_full(&b, sh, &taken) && !taken, "bound 0: trade refused");
	CHECK(!barn_replace_empty(&b, &e) && e, "bound 0: no full sheaf, empty one not kept");
	CHECK(!barn_get_empty(&b), "bound 0: no empty sheaf");
	check_counts(&b, 0, 0);
	free(sh);
	free(e);
}

static void put_get(void)
{
	enum { MAXF = 4, MAXE = 3 };
	struct sheaf *f[MAXF + 1], *e[MAXE + 1];
	struct barn b;

	barn_init(&b, NULL, MAXF, MAXE);
	for (int i = 0; i <= MAXF; i++)
		f[i] = new_sheaf(2);
	for (int i = 0; i <= MAXE; i++)
		e[i] = new_sheaf(2);
	for (int i = 0; i < MAXF; i++) {
		CHECK(barn_put_full(&b, f[i]), "full %d kept", i);
		check_counts(&b, i + 1, 0);
	}
	CHECK(!barn_put_full(&b, f[MAXF]), "full sheaf beyond max_full refused");
	check_counts(&b, MAXF, 0);
	for (int i = 0; i < MAXE; i++)
		CHECK(barn_put_empty(&b, e[i]), "empty %d kept", i);
	CHECK(!barn_put_empty(&b, e[MAXE]), "empty sheaf beyond max_empty refused");
	check_counts(&b, MAXF, MAXE);
	for (int i = MAXE - 1; i >= 0; i--) {
		struct sheaf *s = barn_get_empty(&b);

		CHECK(s == e[i], "get_empty %d: the most recent first", i);
	}
	CHECK(!barn_get_empty(&b), "no empty sheaf left: NULL");
	check_counts(&b, MAXF, 0);
	/* Full sheaves leave the same way, through trades. */
	for (int i = MAXF - 1; i >= 0; i--) {
		struct sheaf *mine = e[0];

		CHECK(barn_replace_empty(&b, &mine) == f[i], "full %d back, the most recent first",
		      i);
		CHECK(!mine, "the empty sheaf kept");
		CHECK(barn_get_empty(&b) == e[0], "and given back");
	}
	check_counts(&b, 0, 0);
	for (int i = 0; i <= MAXF; i++)
		free(f[i]);
	for (int i = 0; i <= MAXE; i++)
		free(e[i]);
}

static void replace_empty(void)
{
	struct sheaf *f1 = new_sheaf(2), *f2 = new_sheaf(2), *f3 = new_sheaf(2);
	struct sheaf *e1 = new_sheaf(2), *e2 = new_sheaf(2), *mine;
	struct barn b;

	barn_init(&b, NULL, 4, 1);
	/* No full sheaf: NULL, the caller's empty one untouched. */
	mine = e1;
	CHECK(!barn_replace_empty(&b, &mine) && mine == e1, "empty barn: NULL, @empty kept");
	check_counts(&b, 0, 0);

	CHECK(barn_put_full(&b, f1) && barn_put_full(&b, f2) && barn_put_full(&b, f3), "3 full");
	/* A full sheaf, room for the empty one: the barn keeps it. */
	CHECK(barn_replace_empty(&b, &mine) == f3 && !mine, "traded: full out, empty kept");
	check_counts(&b, 2, 1);
	/* A full sheaf, no room (max_empty 1): the caller still owns its empty. */
	mine = e2;
	CHECK(barn_replace_empty(&b, &mine) == f2 && mine == e2,
	      "no room for empties: full out, @empty stays the caller's");
	check_counts(&b, 1, 1);
	CHECK(b.empty == e1, "the empty sheaf kept is the first one");
	/* No empty sheaf to give: a full one all the same. */
	mine = NULL;
	CHECK(barn_replace_empty(&b, &mine) == f1 && !mine, "@empty NULL: full out");
	check_counts(&b, 0, 1);
	CHECK(!barn_replace_empty(&b, &mine), "drained of full sheaves: NULL");
	CHECK(barn_get_empty(&b) == e1, "e1 back");
	free(f1), free(f2), free(f3), free(e1), free(e2);
}

static void replace_full(void)
{
	struct sheaf *f1 = new_sheaf(2), *f2 = new_sheaf(2), *f3 = new_sheaf(2);
	struct sheaf *e1 = new_sheaf(2), *got;
	struct barn b;
	bool taken;

	barn_init(&b, NULL, 2, 4);
	CHECK(barn_put_empty(&b, e1), "one empty");
	/* Room, and an empty sheaf to give back. */
	got = barn_replace_full(&b, f1, &taken);
	CHECK(taken && got == e1, "kept, the empty sheaf given back");
	check_counts(&b, 1, 0);
	/* Room, no empty sheaf: kept, NULL back. */
	got = barn_replace_full(&b, f2, &taken);
	CHECK(taken && !got, "kept, no empty sheaf: NULL");
	check_counts(&b, 2, 0);
	/* No room: refused, the barn unchanged, the caller keeps its sheaf. */
	CHECK(barn_put_empty(&b, e1), "an empty one again");
	taken = true;
	got = barn_replace_full(&b, f3, &taken);
	CHECK(!taken && !got, "full barn: refused, no empty sheaf handed out");
	check_counts(&b, 2, 1);
	CHECK(b.full == f2 && b.full->next == f1 && b.empty == e1, "stacks unchanged");
	free(f1), free(f2), free(f3), free(e1);
}

/* Active objects of an internal cache (uslab_cache_stats would do too). */
static unsigned long node_active(struct uslab_cache *c)
{
	unsigned long a;

	ulock_lock(&c->node.lock);
	a = c->node.nr_objects - c->node.nr_free;
	ulock_unlock(&c->node.lock);
	return a;
}

static void drain(void)
{
	struct uslab_cache_args a = { .sheaf_capacity = 14 };
	struct uslab_cache *c = uslab_cache_create("barn-drain", 64, &a, 0);
	struct uslab_cache *sc = NULL;
	struct uslab_cache_stats st;
	enum { FULL = 5, EMPTY = 3 };
	unsigned long sheaves0;

	CHECK(c && c->sheaf_capacity == 14, "create");
	for (int i = 0; i < SHEAF_CLASSES; i++)
		if (sheaf_caps[i] == 14)
			sc = sheaf_caches[i];
	CHECK(sc, "sheaf cache of capacity 14");
	sheaves0 = node_active(sc);
	CHECK(FULL <= c->barn.max_full && EMPTY <= c->barn.max_empty, "default bounds fit");
	for (int i = 0; i < FULL + EMPTY; i++) {
		struct sheaf *sh = sheaf_alloc(c, 0);

		CHECK(sh, "sheaf_alloc");
		if (i < FULL) {
			sh->size = cache_refill(c, sh->objs, sh->capacity);
			CHECK(sh->size == 14, "refill");
			CHECK(barn_put_full(&c->barn, sh), "put full %d", i);
		} else {
			CHECK(barn_put_empty(&c->barn, sh), "put empty %d", i);
		}
	}
	CHECK(node_active(sc) == sheaves0 + FULL + EMPTY, "%d sheaves out", FULL + EMPTY);
	CHECK(cache_active(c) == FULL * 14, "active %lu: the objects of the full sheaves",
	      cache_active(c));
	uslab_cache_stats(c, &st);
	CHECK(st.barn_full == FULL && st.barn_empty == EMPTY, "stats see the barn: %lu/%lu",
	      st.barn_full, st.barn_empty);

	barn_drain(c);
	CHECK(cache_active(c) == 0, "every object back in its slab: active %lu", cache_active(c));
	CHECK(node_active(sc) == sheaves0, "every sheaf freed: %lu more than before",
	      node_active(sc) - sheaves0);
	check_counts(&c->barn, 0, 0);
	barn_drain(c); /* an empty barn: nothing to do */
	check_counts(&c->barn, 0, 0);
	CHECK(uslab_cache_destroy(c) == 0, "destroy");
}

/*
 * Two threads trade sheaves through one barn. Each sheaf carries a stamp
 * in objs[0] (the token it carries while full, 0 while empty) and a state
 * in objs[1]; the producer numbers tokens 1..TOKENS.
 */
#define SHEAVES 12
#define TOKENS (TEST_SANITIZED ? 20000u : 200000u)
#define ST_EMPTY ((void *)1)
#define ST_FULL ((void *)2)

static struct barn tb;
static struct sheaf *pool[SHEAVES];
static unsigned char *seen;
/* What each thread holds when it stops, for the final count. */
static struct sheaf *prod_held[SHEAVES], *cons_held[SHEAVES];
static unsigned int prod_n, cons_n;
static unsigned long prod_checks, cons_checks, prod_refused;

/* Wait for the other thread briefly: spin (both run at once), yield at times. */
static void backoff(void)
{
	static __thread unsigned int n;

	if (++n % 64 == 0)
		sched_yield();
	else
		for (int i = 0; i < 32; i++)
			cpu_relax();
}

static void *producer(void *arg)
{
	struct sheaf **held = prod_held;
	unsigned int n = 0;

	(void)arg;
	for (int i = 0; i < SHEAVES / 2; i++)
		held[n++] = pool[i];
	for (uintptr_t token = 1; token <= TOKENS;) {
		struct sheaf *sh, *got;
		bool taken;

		if (!n) {
			sh = barn_get_empty(&tb);
			if (!sh) {
				backoff();
				continue;
			}
			CHECK_COUNTED(prod_checks, sh->objs[1] == ST_EMPTY && !sh->objs[0],
				      "producer got a sheaf that is not empty (token %lu)",
				      (unsigned long)(uintptr_t)sh->objs[0]);
			held[n++] = sh;
		}
		sh = held[--n];
		sh->objs[0] = (void *)token;
		sh->objs[1] = ST_FULL;
		sh->size = sh->capacity;
		got = barn_replace_full(&tb, sh, &taken);
		if (!taken) {
			CHECK_COUNTED(prod_checks, !got, "refused trade handed out a sheaf");
			sh->objs[0] = NULL;
			sh->objs[1] = ST_EMPTY;
			sh->size = 0;
			held[n++] = sh;
			prod_refused++;
			backoff();
			continue;
		}
		token++;
		if (got) {
			CHECK_COUNTED(prod_checks, got->objs[1] == ST_EMPTY && !got->objs[0],
				      "trade gave a sheaf that is not empty");
			held[n++] = got;
		}
	}
	prod_n = n;
	return NULL;
}

static void *consumer(void *arg)
{
	struct sheaf **held = cons_held;
	unsigned int n = SHEAVES / 2, got_tokens = 0; /* it starts with the other half */

	(void)arg;
	while (got_tokens < TOKENS) {
		struct sheaf *mine, *full;
		uintptr_t token;

		/* Keep one empty sheaf; the rest back to the barn while it has room. */
		while (n > 1 && barn_put_empty(&tb, held[n - 1]))
			n--;
		mine = n ? held[n - 1] : NULL;
		full = barn_replace_empty(&tb, &mine);
		if (n && !mine)
			n--; /* the barn kept it */
		if (!full) {
			CHECK_COUNTED(cons_checks, !n || mine == held[n - 1], "@empty changed");
			backoff();
			continue;
		}
		token = (uintptr_t)full->objs[0];
		CHECK_COUNTED(cons_checks, full->objs[1] == ST_FULL && full->size == full->capacity,
			      "taken sheaf not full (token %lu)", (unsigned long)token);
		CHECK_COUNTED(cons_checks, token >= 1 && token <= TOKENS, "bad token %lu",
			      (unsigned long)token);
		CHECK_COUNTED(cons_checks, !seen[token], "token %lu handed out twice",
			      (unsigned long)token);
		seen[token] = 1;
		got_tokens++;
		full->objs[0] = NULL;
		full->objs[1] = ST_EMPTY;
		full->size = 0;
		CHECK_COUNTED(cons_checks, n < SHEAVES, "consumer holds more sheaves than exist");
		held[n++] = full;
	}
	cons_n = n;
	return NULL;
}

static void trade_2threads(void)
{
	unsigned int counted[SHEAVES] = { 0 }, total = 0, missing = 0;
	pthread_t t[2];

	barn_init(&tb, NULL, 3, 2);
	seen = calloc(TOKENS + 1, 1);
	CHECK(seen, "calloc");
	for (int i = 0; i < SHEAVES; i++) {
		pool[i] = new_sheaf(2);
		pool[i]->objs[1] = ST_EMPTY;
	}
	for (int i = SHEAVES / 2; i < SHEAVES; i++)
		cons_held[i - SHEAVES / 2] = pool[i];
	CHECK(!pthread_create(&t[0], NULL, producer, NULL), "thread");
	CHECK(!pthread_create(&t[1], NULL, consumer, NULL), "thread");
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	test_checks += prod_checks + cons_checks;
	for (unsigned int k = 1; k <= TOKENS; k++)
		missing += !seen[k];
	CHECK(!missing, "%u tokens never taken", missing);

	/* Every sheaf exactly once: in a thread's hands or in the barn. */
	struct sheaf **lists[] = { prod_held, cons_held };
	unsigned int lens[] = { prod_n, cons_n };

	for (int l = 0; l < 2; l++)
		for (unsigned int i = 0; i < lens[l]; i++)
			for (int k = 0; k < SHEAVES; k++)
				counted[k] += lists[l][i] == pool[k];
	for (struct sheaf *s = tb.full; s; s = s->next)
		for (int k = 0; k < SHEAVES; k++)
			counted[k] += s == pool[k];
	for (struct sheaf *s = tb.empty; s; s = s->next)
		for (int k = 0; k < SHEAVES; k++)
			counted[k] += s == pool[k];
	for (int k = 0; k < SHEAVES; k++) {
		CHECK(counted[k] == 1, "sheaf %d found %u times", k, counted[k]);
		total += counted[k];
	}
	CHECK(!tb.full && tb.nr_full == 0, "every full sheaf taken");
	check_counts(&tb, 0, stack_len(tb.empty));
	printf("   %u tokens traded, %u sheaves accounted for (producer %u, consumer %u, "
	       "barn %u), %lu trades refused for room\n",
	       TOKENS, total, prod_n, cons_n, tb.nr_empty, prod_refused);
	for (int k = 0; k < SHEAVES; k++)
		free(pool[k]);
	free(seen);
}

int main(void)
{
	CHECK(usl_init() == 0, "init");
	RUN(init_bounds);
	RUN(put_get);
	RUN(replace_empty);
	RUN(replace_full);
	RUN(drain);
	RUN(trade_2threads);
	return 0;
}
