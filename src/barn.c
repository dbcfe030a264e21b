// SPDX-License-Identifier: MIT
/*
 * barn.c - a cache's depot of full and empty sheaves (Bonwick's magazine
 * depot; the per-node barn of Linux 6.18).
 *
 * Threads trade whole sheaves here: an allocating thread whose sheaves are
 * empty gives an empty sheaf and takes a full one; a freeing thread whose
 * sheaves are full gives a full one and takes an empty one. One lock
 * acquisition moves a whole sheaf of objects between threads, which is what
 * makes producer -> consumer traffic cheap.
 *
 * Bounds: at most max_full full and max_empty empty sheaves (tunables
 * USLAB_BARN_MAX_FULL, USLAB_BARN_MAX_EMPTY). A full sheaf refused for lack
 * of room is flushed to slabs by the caller; an empty one is freed.
 *
 * Lock: barn->lock (rank 9, LOCK_BARN, in src/lock.h) protects both
 * stacks and the counts. It is never held together with the node lock;
 * flushing happens after the sheaf has left the barn. The counts are also
 * read without the lock, to skip a trip to an empty barn: they are written
 * with WRITE_ONCE.
 *
 * Invariants (barn_check): nr_full <= max_full, nr_empty <= max_empty, and
 * each count is the length of its stack (that one at check level 2).
 */
#include "perthread.h"

/* The invariants of the file comment. Lock held. */
static void barn_check(struct barn *b)
{
	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(b->nr_full <= b->max_full && b->nr_empty <= b->max_empty);
#if USLAB_EXPENSIVE
	unsigned int nf = 0, ne = 0;

	for (struct sheaf *s = b->full; s; s = s->next)
		nf++;
	for (struct sheaf *s = b->empty; s; s = s->next)
		ne++;
	USLAB_ASSERT_EXPENSIVE(nf == b->nr_full && ne == b->nr_empty);
#endif
}

/* Take the barn lock: never with a node lock held (the file comment). */
static void barn_lock(struct barn *b)
{
	USLAB_ASSERT(!lockdep_held(LOCK_NODE));
	ulock_lock(&b->lock);
	barn_check(b);
}

static void barn_unlock(struct barn *b)
{
	barn_check(b);
	ulock_unlock(&b->lock);
}

void barn_init(struct barn *b, unsigned int max_full, unsigned int max_empty)
{
	ulock_setup(&b->lock, LOCK_BARN);
	b->full = b->empty = NULL;
	b->nr_full = b->nr_empty = 0;
	b->max_full = max_full;
	b->max_empty = max_empty;
}

/* Pop a sheaf off one of the barn's stacks. Lock held. */
static struct sheaf *pop_locked(struct barn *b, struct sheaf **stack, unsigned int *nr)
{
	struct sheaf *s = *stack;

	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(!s == !*nr); /* an empty stack counts 0 */
	if (s) {
		*stack = s->next;
		WRITE_ONCE(*nr, *nr - 1);
	}
	return s;
}

/* Push @s onto one of the barn's stacks if it has room. Lock held. */
static bool push_locked(struct barn *b, struct sheaf **stack, unsigned int *nr, unsigned int max,
			struct sheaf *s)
{
	USLAB_ASSERT_HELD(&b->lock);
	USLAB_ASSERT(s && s->size <= s->capacity);
	if (*nr >= max)
		return false;
	s->next = *stack;
	*stack = s;
	WRITE_ONCE(*nr, *nr + 1);
	return true;
}

/*
 * barn_replace_empty - trade an empty sheaf for a full one.
 * @empty: in: an empty sheaf or NULL; out: NULL if the barn kept it, else
 *         unchanged (the caller still owns it).
 * Return: a full sheaf, or NULL if the barn has none (@empty untouched).
 */
struct sheaf *barn_replace_empty(struct barn *b, struct sheaf **empty)
{
	struct sheaf *full;

	if (!READ_ONCE(b->nr_full))
		return NULL;
	barn_lock(b);
	full = pop_locked(b, &b->full, &b->nr_full);
	if (full && *empty && push_locked(b, &b->empty, &b->nr_empty, b->max_empty, *empty))
		*empty = NULL;
	barn_unlock(b);
	return full;
}

/*
 * barn_replace_full - trade a full sheaf for an empty one.
 * @taken: set to whether the barn kept @full (false: no room).
 * Return: an empty sheaf if the barn kept @full and had one, else NULL.
 */
struct sheaf *barn_replace_full(struct barn *b, struct sheaf *full, bool *taken)
{
	struct sheaf *empty = NULL;

	*taken = false;
	if (READ_ONCE(b->nr_full) >= b->max_full)
		return NULL;
	barn_lock(b);
	if (push_locked(b, &b->full, &b->nr_full, b->max_full, full)) {
		*taken = true;
		empty = pop_locked(b, &b->empty, &b->nr_empty);
	}
	barn_unlock(b);
	return empty;
}

/* An empty sheaf from the barn, or NULL. */
struct sheaf *barn_get_empty(struct barn *b)
{
	struct sheaf *empty;

	if (!READ_ONCE(b->nr_empty))
		return NULL;
	barn_lock(b);
	empty = pop_locked(b, &b->empty, &b->nr_empty);
	barn_unlock(b);
	return empty;
}

/* Keep an empty sheaf if there is room. Return: whether it was kept. */
bool barn_put_empty(struct barn *b, struct sheaf *empty)
{
	bool kept;

	barn_lock(b);
	kept = push_locked(b, &b->empty, &b->nr_empty, b->max_empty, empty);
	barn_unlock(b);
	return kept;
}

/* Keep a full sheaf if there is room. Return: whether it was kept. */
bool barn_put_full(struct barn *b, struct sheaf *full)
{
	bool kept;

	barn_lock(b);
	kept = push_locked(b, &b->full, &b->nr_full, b->max_full, full);
	barn_unlock(b);
	return kept;
}

/* Flush every full sheaf of @c's barn to slabs and free all its sheaves. */
void barn_drain(struct uslab_cache *c)
{
	struct barn *b = &c->barn;
	struct sheaf *full, *empty, *next;

	barn_lock(b);
	full = b->full;
	empty = b->empty;
	b->full = b->empty = NULL;
	WRITE_ONCE(b->nr_full, 0);
	WRITE_ONCE(b->nr_empty, 0);
	barn_unlock(b);

	for (; full; full = next) {
		next = full->next;
		sheaf_flush(c, full);
		sheaf_free(c, full);
	}
	for (; empty; empty = next) {
		next = empty->next;
		sheaf_free(c, empty);
	}
}

/*
 * barn_gather - copy the objects of the barn's full sheaves into @dst (at
 * most @max; validate). Return: how many there are (may exceed @max).
 */
size_t barn_gather(struct barn *b, void **dst, size_t max)
{
	size_t n = 0;

	barn_lock(b);
	for (struct sheaf *sh = b->full; sh; sh = sh->next) {
		for (uint32_t i = 0; i < sh->size; i++, n++)
			if (n < max)
				dst[n] = sh->objs[i];
	}
	barn_unlock(b);
	return n;
}

void barn_counts(struct barn *b, unsigned long *full, unsigned long *empty)
{
	barn_lock(b);
	*full = b->nr_full;
	*empty = b->nr_empty;
	barn_unlock(b);
}
