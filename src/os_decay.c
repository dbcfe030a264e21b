// SPDX-License-Identifier: MIT
/*
 * os_decay.c - memory the page heap gives back: purges (dirty pages back
 * to the kernel with madvise, idle arenas unmapped), the decay thread
 * that runs them off the callers' path, and retention (what a free does
 * when no thread can, or past USLAB_RETAIN_KB).
 *
 * Decay: a thread of this file (started by os_kick() from where no lock is held,
 * when freed pages appear; it exits once nothing has been retained for 2 s) ticks every
 * USLAB_PURGE_DELAY_MS. Where it cannot run (its start failed; the child
 * of a fork under a sanitizer) the frees run the due ticks themselves,
 * a bounded batch (about 256 KiB) each. Each tick purges the dirty pages
 * that are not young (freed at least one tick ago) beyond the recent
 * demand (as many pages as the heap handed out in its busiest tick of the
 * last DEMAND_TICKS: memory likely to be asked for again is kept, the
 * lowest addresses first, which are taken first), then ages the young. So an unused freed page lives between one and two
 * ticks; contiguous dirty runs go back in one madvise each. With
 * USLAB_HUGEPAGES=1 arenas are marked MADV_HUGEPAGE and the decay purges
 * only whole free 2 MiB regions (os_purge still returns everything).
 *
 * Lock: os_lock (os.c's) protects the state below and every arena's
 * bitmaps; a purge carves its runs under it, drops it for the madvise
 * calls, and takes it again to give the pages back clean. What it does
 * under the lock is counted in bitmap words, never pages (purge_pick).
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "os.h"
#include "os_heap.h"

/* Pages per 2 MiB (a transparent huge page). */
#define HUGE_PAGES 512
/*
 * The decay keeps as many old dirty pages as the heap handed out in its
 * busiest tick of the last DEMAND_WINDOW_MS: demand_ticks() ticks, at most
 * DEMAND_TICKS (a tick shorter than DEMAND_WINDOW_MS / DEMAND_TICKS looks
 * back over fewer milliseconds).
 */
#define DEMAND_WINDOW_MS 2000u
#define DEMAND_TICKS 128
/* A free past the retention cap purges about this much itself. */
#define PURGE_BATCH_PAGES (256 * 1024 / PAGE_SIZE)

struct pbatch *os_inflight; /* purges outside the lock */

bool os_decay_need; /* dirty pages and no decay thread: os_kick() starts one */
/* The decay's state, under os_lock. */
static struct {
	bool running;	     /* (read without the lock by os_decay_running) */
	bool no_thread;	     /* a fork child, sanitized: never starts one (decays inline) */
	bool inline_decay;   /* no thread (a child, or a start failed): frees run the ticks */
	uint64_t retry_ms;   /* a start that failed is retried after */
	uint64_t next_ms;    /* inline_decay: the next tick is due */
	uint64_t taken_tick; /* os_fig.taken at the last tick */
	/* Pages handed out in each of the last DEMAND_TICKS ticks (a ring). */
	uint64_t demand[DEMAND_TICKS];
	unsigned int demand_at;
} decay_ctl;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ----------------------------------------------------------------- purge */

/* Under os_lock: the candidate pages of word @w of @a: dirty, and old unless @all. */
static inline uint64_t purge_word(const struct arena *a, size_t w, bool all)
{
	return all ? a->dirty[w] : a->dirty[w] & ~a->young[w];
}

/*
 * run_len - how many candidate pages (see purge_word) of @a follow page
 * @i, itself a candidate, up to page @limit (a multiple of 64): a word at
 * a time. Under os_lock.
 */
static size_t run_len(const struct arena *a, size_t i, size_t limit, bool all)
{
	size_t n = 0;

	while (i + n < limit) {
		size_t p = i + n, b = p % 64;
		/* Its non-candidates from bit b on (the b bits shifted in at the top are zeros). */
		uint64_t m = ~purge_word(a, p / 64, all) >> b;

		os_fig.pick_words++;
		if (m) {
			n += (size_t)__builtin_ctzll(m);
			break;
		}
		n += 64 - b;
	}
	return n;
}

/*
 * purge_pick - carve up to PURGE_RUNS runs of dirty pages (all of them
 * with @all, else those older than a tick, the first @keep of them
 * skipped: lowest addresses, which are taken first), at most *@budget
 * pages, into @b, on the in-flight list. With USLAB_HUGEPAGES (not @all)
 * only whole free 2 MiB regions. Under os_lock, for as long as a scan of
 * the bitmaps a word (64 pages) at a time takes: the kept pages are
 * skipped a word per popcount, runs are measured a word per step (a walk
 * page by page held the lock in proportion to what is retained, every
 * tick, while frees that give slabs back waited: design.md, "Nothing per
 * page under the lock"). Return: runs picked.
 */
static unsigned int purge_pick(struct pbatch *b, bool all, size_t keep, size_t *budget)
{
	/*
	 * Each call scans from the start again: the pages kept stay dirty and
	 * old, so skipping @keep of them again keeps the same ones (pages
	 * freed meanwhile are young, not candidates).
	 */
	b->n = 0;
	USLAB_ASSERT_HELD(&os_lock);
	for (struct arena *a = os_arenas; a && b->n < PURGE_RUNS && *budget; a = a->next) {
		size_t i = 0;

		if (!a->ndirty)
			continue;
		while (i < ARENA_PAGES && b->n < PURGE_RUNS && *budget) {
			size_t w = i / 64, start, n, limit = ARENA_PAGES, c;
			uint64_t m = purge_word(a, w, all) & (~0ull << (i % 64));

			os_fig.pick_words++;
			if (usl_opt.hugepages && !all) {
				/* Only a 2 MiB region all free: a huge page is not split. */
				size_t r = w / (HUGE_PAGES / 64) * (HUGE_PAGES / 64);
				bool whole = true;

				for (size_t x = r; x < r + HUGE_PAGES / 64; x++)
					whole &= a->freemap[x] == ~0ull;
				limit = (r + HUGE_PAGES / 64) * 64;
				if (!whole) {
					i = limit;
					continue;
				}
			}
			if (!m) {
				i = (w + 1) * 64;
				continue;
			}
			if (keep) {
				/* The lowest @keep candidates stay: a word of them at a time. */
				c = (size_t)__builtin_popcountll(m);
				if (c <= keep) {
					keep -= c;
					i = (w + 1) * 64;
					continue;
				}
				for (; keep; keep--)
					m &= m - 1;
			}
			start = w * 64 + (size_t)__builtin_ctzll(m);
			n = run_len(a, start, limit, all);
			if (n > *budget)
				n = *budget;
			i = start + n;
			heap_carve(a, start, n);
			a->npurging++;
			*budget -= n;
			b->r[b->n++] = (struct prun){ a, (uint32_t)start, (uint32_t)n };
		}
	}
	if (b->n) {
		b->next = os_inflight;
		os_inflight = b;
	}
	return b->n;
}

/* Give the picked runs' pages back to the kernel. Outside os_lock. */
static void purge_madvise(const struct pbatch *b)
{
	USLAB_ASSERT(!ulock_owned(&os_lock));
	for (unsigned int r = 0; r < b->n; r++)
		madvise((void *)(b->r[r].a->base + ((uintptr_t)b->r[r].idx << PAGE_SHIFT)),
			(size_t)b->r[r].n << PAGE_SHIFT, MADV_DONTNEED);
}

/* The runs are free and clean; arenas left idle detached onto *@rel. Under os_lock. Return: bytes. */
static size_t purge_done(struct pbatch *b, struct arena **rel)
{
	struct pbatch **pp = &os_inflight;
	size_t bytes = 0;

	USLAB_ASSERT_HELD(&os_lock);
	while (*pp != b)
		pp = &(*pp)->next;
	*pp = b->next;
	for (unsigned int r = 0; r < b->n; r++) {
		struct arena *a = b->r[r].a;

		USLAB_ASSERT(a->npurging);
		heap_give(a, b->r[r].idx, b->r[r].n, false);
		a->npurging--;
		bytes += (size_t)b->r[r].n << PAGE_SHIFT;
		heap_check_idle(a, rel);
	}
	os_fig.madvise_calls += b->n;
	os_fig.purged += bytes;
	return bytes;
}

/*
 * purge_pass - purge dirty pages (see purge_pick) in batches, dropping
 * os_lock for the system calls, up to @budget pages; then unmap arenas
 * left idle. Called without os_lock. Return: bytes given back.
 */
static size_t purge_pass(bool all, size_t keep, size_t budget)
{
	struct pbatch b;
	struct arena *rel = NULL;
	size_t bytes = 0;

	ulock_lock(&os_lock);
	if (all) {
		/* Idle clean arenas too (an arena emptied with no purge to do). */
		for (struct arena *a = os_arenas, *next; a; a = next) {
			next = a->next;
			heap_check_idle(a, &rel);
		}
	}
	while (budget && purge_pick(&b, all, keep, &budget)) {
		ulock_unlock(&os_lock);
		purge_madvise(&b);
		ulock_lock(&os_lock);
		bytes += purge_done(&b, &rel);
	}
	ulock_unlock(&os_lock);
	bytes += arenas_unmap(rel);
	/* (all: a shrink, trim or destroy; else the decay's tick) */
	if (bytes)
		PROBE(purge, bytes, (int)all);
	return bytes;
}

size_t os_purge(void)
{
	return purge_pass(true, 0, SIZE_MAX);
}

/* ----------------------------------------------------------------- decay */

/* Ticks in DEMAND_WINDOW_MS at USLAB_PURGE_DELAY_MS: 1 to DEMAND_TICKS. */
static unsigned int demand_ticks(void)
{
	unsigned int ms = usl_opt.purge_delay_ms ? usl_opt.purge_delay_ms : 1;
	unsigned int t = DEMAND_WINDOW_MS / ms;

	return t < 1 ? 1 : t > DEMAND_TICKS ? DEMAND_TICKS : t;
}

/*
 * os_decay_step - one tick: purge what is old beyond the recent demand
 * (at most @budget pages), then age the young. Without os_lock. The decay
 * thread's, the frees' when it cannot run, and unit_os's.
 * Return: whether anything stays retained.
 */
bool os_decay_step(size_t budget)
{
	size_t keep;
	bool more;

	unsigned int ticks = demand_ticks();

	ulock_lock(&os_lock);
	decay_ctl.demand[decay_ctl.demand_at++ % ticks] = os_fig.taken - decay_ctl.taken_tick;
	decay_ctl.taken_tick = os_fig.taken;
	keep = 0;
	for (unsigned int t = 0; t < ticks; t++)
		keep = decay_ctl.demand[t] > keep ? (size_t)decay_ctl.demand[t] : keep;
	ulock_unlock(&os_lock);
	purge_pass(false, keep, budget);
	ulock_lock(&os_lock);
	for (struct arena *a = os_arenas; a; a = a->next)
		if (a->ndirty)
			memset(a->young, 0, sizeof(a->young));
	more = os_fig.retained != 0;
	ulock_unlock(&os_lock);
	return more;
}

/*
 * The decay thread. It lingers for a demand window's worth of idle ticks
 * (DEMAND_WINDOW_MS) before it exits: at a 20 ms tick a program that frees
 * in bursts would otherwise start and stop a thread several times a
 * second, and a start from a thread that is itself exiting (a key
 * destructor that frees) is what AddressSanitizer's thread bookkeeping
 * handles worst.
 */
static void *decay_main(void *arg)
{
	unsigned int idle = 0;

	(void)arg;
	for (;;) {
		unsigned int ms = usl_opt.purge_delay_ms ? usl_opt.purge_delay_ms : 1;
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
		if (os_decay_step(SIZE_MAX)) {
			idle = 0;
			continue;
		}
		if (++idle < demand_ticks())
			continue;
		/* Nothing retained: stop, unless a free came since (it saw the thread running). */
		ulock_lock(&os_lock);
		if (!os_fig.retained) {
			__atomic_store_n(&decay_ctl.running, false, __ATOMIC_RELEASE);
			WRITE_ONCE(os_decay_need, false);
			ulock_unlock(&os_lock);
			return NULL;
		}
		ulock_unlock(&os_lock);
	}
}

static const struct usl_bgthread decay_thread = { decay_main, "uslab-decay" };

void os_decay_start(void)
{
	uint64_t now = now_ms();
	int err;

	ulock_lock(&os_lock);
	if (decay_ctl.running || decay_ctl.no_thread || now < decay_ctl.retry_ms ||
	    !os_decay_need) {
		ulock_unlock(&os_lock);
		return;
	}
	__atomic_store_n(&decay_ctl.running, true, __ATOMIC_RELAXED);
	WRITE_ONCE(os_decay_need, false);
	ulock_unlock(&os_lock);

	err = usl_thread_detached(&decay_thread);
	ulock_lock(&os_lock);
	if (err) {
		/* Frees run the ticks themselves meanwhile, a bounded batch each. */
		__atomic_store_n(&decay_ctl.running, false, __ATOMIC_RELAXED);
		WRITE_ONCE(os_decay_need, true);
		decay_ctl.retry_ms = now + 100;
		decay_ctl.inline_decay = true;
	} else {
		decay_ctl.inline_decay = false;
	}
	ulock_unlock(&os_lock);
}

bool os_decay_running(void)
{
	return __atomic_load_n(&decay_ctl.running, __ATOMIC_ACQUIRE);
}

/* ---------------------------------------------------------- retention */

/* Pages became dirty (under os_lock): a decay thread will be started for them. */
void decay_dirty_locked(void)
{
	USLAB_ASSERT_HELD(&os_lock);
	if (!decay_ctl.running && !decay_ctl.no_thread)
		WRITE_ONCE(os_decay_need, true);
}

/*
 * decay_freed_locked - a slab or large object was freed (under os_lock,
 * its pages given back): what the free does after dropping the lock.
 */
enum decay_todo decay_freed_locked(void)
{
	enum decay_todo todo = DECAY_NOTHING;

	USLAB_ASSERT_HELD(&os_lock);
	if (!usl_opt.purge_delay_ms)
		return DECAY_PURGE_ALL; /* purged at once: no thread needed */
	decay_dirty_locked();
	if (unlikely(decay_ctl.inline_decay)) {
		/* No decay thread: this free runs a due tick (a bounded batch). */
		uint64_t t = now_ms();

		if (t >= decay_ctl.next_ms) {
			decay_ctl.next_ms = t + usl_opt.purge_delay_ms;
			todo = DECAY_STEP;
		}
	}
	if (os_fig.retained > (size_t)usl_opt.retain_kb << 10)
		todo = DECAY_PURGE_BATCH;
	return todo;
}

/* What decay_freed_locked() asked for. Without os_lock. */
void decay_after_free(enum decay_todo todo)
{
	USLAB_ASSERT(!ulock_owned(&os_lock));
	if (unlikely(todo == DECAY_PURGE_ALL))
		purge_pass(true, 0, SIZE_MAX);
	else if (unlikely(todo == DECAY_PURGE_BATCH))
		purge_pass(true, 0, PURGE_BATCH_PAGES);
	else if (unlikely(todo == DECAY_STEP))
		os_decay_step(PURGE_BATCH_PAGES);
}

/*
 * decay_fork_child - in the child of fork (os_lock held by the forking
 * thread, about to be reset by os_fork_child()).
 */
void decay_fork_child(void)
{
	/*
	 * Purges other threads had in flight never finish here, and their
	 * madvise may not have happened before the fork: free and dirty again.
	 */
	while (os_inflight) {
		struct pbatch *b = os_inflight;

		os_inflight = b->next;
		for (unsigned int r = 0; r < b->n; r++) {
			USLAB_ASSERT(b->r[r].a->npurging);
			heap_give(b->r[r].a, b->r[r].idx, b->r[r].n, true);
			b->r[r].a->npurging--;
		}
	}
	/*
	 * No decay thread here. The child starts its own at its first
	 * os_kick() with pages retained, as a new process does (a child that
	 * only calls exec or _exit makes no such call; a daemon that forks
	 * once at start-up gets one). Under a sanitizer it starts none: TSan
	 * refuses threads after a threaded fork, and GCC 12's AddressSanitizer
	 * has no fork handlers on its allocator, while starting a thread
	 * allocates (glibc's pthread_create: the new thread's DTV), so the
	 * child could wait for ever on an allocator lock a parent thread held
	 * at the fork (api_heap's fork test hung so, once in a while). Its
	 * frees run the ticks, a bounded batch each, as when a thread cannot
	 * start.
	 */
	decay_ctl.running = false;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	decay_ctl.no_thread = true;
#endif
	decay_ctl.inline_decay = decay_ctl.no_thread;
	decay_ctl.next_ms = 0;
	decay_ctl.retry_ms = 0;
	WRITE_ONCE(os_decay_need, !decay_ctl.no_thread && os_fig.retained != 0);
}
