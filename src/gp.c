// SPDX-License-Identifier: MIT
/*
 * gp.c - the grace-period engine: one background thread (the monitor)
 * that waits for RCU grace periods (liburcu's synchronize_rcu, one per
 * batch) and then releases what was handed to it. A service of two
 * clients: cache.c hands over the empty slabs of USLAB_TYPESAFE_BY_RCU
 * caches (gp_defer_slabs), and the kfree_rcu front end (rcu.c) registers
 * hooks that gather its blocks of pointers before a grace period and free
 * them after it (struct gp_client).
 *
 * Hand-off. gp_defer_slabs() is lock-free: a CAS push on a list and, when
 * the monitor is not running, a flag. It takes no lock and never starts a
 * thread, so cache.c may call it with any lock held (a thread flushing a
 * sheaf holds its own state lock). The monitor is started by gp_start()
 * from places that hold no uslab lock (round_lock at most: a barrier round
 * run in the caller flushes its sheaves): the front end's first deferred
 * free, uslab_rcu_barrier(), the creation of a TYPESAFE_BY_RCU cache, and
 * gp_kick() at the end of the free slow paths, flush and shrink when a
 * hand-off found no monitor. A start that fails (no memory for a thread)
 * is retried by the next gp_kick() or gp_start(), at most every
 * GP_RETRY_MS; meanwhile gp_barrier() does the monitor's work in the
 * calling thread.
 *
 * Rounds. The monitor sleeps on a futex word (no lock needed to wake it)
 * for at most USLAB_RCU_DRAIN_MS, and runs a round when woken urgently
 * (gp_wake_now: a batch is large, a throttled thread waits, the front
 * end's spare pool is low), when a barrier is requested, or when the
 * period has passed (a scan round: the front end also hands over partly
 * filled blocks). A round takes everything handed over, waits for ONE
 * grace period, then lets the front end free its batch and releases the
 * slabs (cache_release_slabs_now). It makes no liburcu call while holding
 * any lock but round_lock.
 *
 * Locks (ranks in src/lock.h): round_lock (LOCK_GP_ROUND), held across a round
 * (grace period and release), taken first by fork, so no grace period of
 * ours is in progress at fork; gp_lock (LOCK_GP), a mutex with one condition
 * variable, protecting the start of the monitor and the barrier
 * generations, and where barrier and throttled callers wait. Waits are not
 * cancellation points: cancellation is disabled around them (a cancelled
 * waiter would leave gp_lock held), and around synchronize_rcu.
 */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <urcu/urcu-memb.h>

#include "gp.h"

#define GP_RETRY_MS 100 /* between attempts to start the monitor */

/* For assertions: the calling thread holds no uslab lock, or only round_lock. */
#define NO_LOCK_BUT_ROUND() (lockdep_depth() == (unsigned int)lockdep_held(LOCK_GP_ROUND))

static struct {
	const struct rcu_flavor_struct *flavor;
	const struct gp_client *client;
	pthread_mutex_t round_lock;
	pthread_mutex_t lock; /* gp_lock */
	pthread_cond_t done;  /* barrier and gp_wait_until() callers */
	bool started;
	bool used; /* something was deferred: the flavor is fixed */
	uint64_t barrier_req, barrier_done;
	uint64_t retry_ms; /* no start attempt before */
	unsigned int waiters;

	struct slab *slabq;    /* slabs waiting for a round */
	bool start_needed;     /* handed over with no monitor */
	unsigned int wake_seq; /* futex word the monitor sleeps on */
	bool sleeping;
	bool urgent;
	unsigned long slabs_deferred, slabs_released;
} gp_state = {
	.round_lock = PTHREAD_MUTEX_INITIALIZER,
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER,
};

const struct rcu_flavor_struct *gp_flavor(void)
{
	const struct rcu_flavor_struct *f = __atomic_load_n(&gp_state.flavor, __ATOMIC_ACQUIRE);

	return f ? f : &urcu_memb_flavor;
}

int gp_set_flavor(const struct rcu_flavor_struct *f)
{
	int ret = 0;

	mutex_lock_ranked(&gp_state.lock, LOCK_GP);
	if (__atomic_load_n(&gp_state.used, __ATOMIC_SEQ_CST) && gp_flavor() != f)
		ret = -EBUSY;
	else
		__atomic_store_n(&gp_state.flavor, f, __ATOMIC_RELEASE);
	mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
	return ret;
}

void gp_set_client(const struct gp_client *client)
{
	__atomic_store_n(&gp_state.client, client, __ATOMIC_RELEASE);
}

bool gp_read_ongoing(void)
{
	return gp_flavor()->read_ongoing();
}

/* Wait for a grace period here. Not a cancellation point. */
void gp_synchronize(void)
{
	int old;

	/* No liburcu call with a lock held, but round_lock (the file comment). */
	USLAB_ASSERT(NO_LOCK_BUT_ROUND());

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	gp_flavor()->update_synchronize_rcu();
	pthread_setcancelstate(old, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ waking */

/*
 * gp_wake - ask the monitor for a round now, not at the end of its period.
 * Lock-free: a store, an atomic increment and, if it sleeps, a futex wake.
 */
void gp_wake(void)
{
	__atomic_store_n(&gp_state.urgent, true, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&gp_state.wake_seq, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&gp_state.sleeping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &gp_state.wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * Sleep until woken, or @ms milliseconds. A waker sets urgent, then bumps
 * wake_seq, then reads sleeping; the monitor sets sleeping, then reads
 * wake_seq, then urgent (all sequentially consistent): either it sees
 * urgent, or the futex sees a changed wake_seq, or the waker sees it asleep.
 */
static void monitor_sleep(uint64_t ms)
{
	unsigned int seq;
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	__atomic_store_n(&gp_state.sleeping, true, __ATOMIC_SEQ_CST);
	seq = __atomic_load_n(&gp_state.wake_seq, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&gp_state.urgent, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &gp_state.wake_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
	__atomic_store_n(&gp_state.sleeping, false, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------------ rounds */

/*
 * One round: gather, one grace period, release. Under round_lock, and no
 * other lock (the hooks of struct gp_client rely on it).
 */
static void gp_round(bool scan, bool all)
{
	const struct gp_client *cl = __atomic_load_n(&gp_state.client, __ATOMIC_ACQUIRE);
	void *batch;
	struct slab *slabs;

	USLAB_ASSERT(mutex_owned(&gp_state.round_lock, LOCK_GP_ROUND) && lockdep_depth() == 1);
	batch = cl ? cl->gather(scan, all) : NULL;
	slabs = __atomic_exchange_n(&gp_state.slabq, NULL, __ATOMIC_SEQ_CST);

	if (batch || slabs) {
		gp_synchronize();
		if (batch)
			cl->drain(batch);
		stat_add_shared(gp_state.slabs_released, cache_release_slabs_now(slabs));
	}
	if (all && cl)
		cl->after_barrier();
}

static void *monitor_main(void *arg)
{
	const struct gp_client *cl;
	uint64_t next_scan = now_ms() + usl_opt.rcu_drain_ms;

	(void)arg;
	bool idle = true;

	for (;;) {
		uint64_t now = now_ms(), target;
		bool barrier, scan;

		cl = __atomic_load_n(&gp_state.client, __ATOMIC_ACQUIRE);
		/* Between rounds the monitor holds no lock (idle runs outside round_lock). */
		USLAB_ASSERT(!lockdep_depth());
		if (cl && idle)
			cl->idle(); /* at start and after each round */
		idle = false;
		mutex_lock_ranked(&gp_state.lock, LOCK_GP);
		target = gp_state.barrier_req;
		barrier = target != gp_state.barrier_done;
		mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
		if (!barrier && now < next_scan &&
		    !__atomic_exchange_n(&gp_state.urgent, false, __ATOMIC_SEQ_CST)) {
			monitor_sleep(next_scan - now);
			continue;
		}
		scan = barrier || now >= next_scan;
		if (scan)
			next_scan = now + usl_opt.rcu_drain_ms;
		mutex_lock_ranked(&gp_state.round_lock, LOCK_GP_ROUND);
		gp_round(scan, barrier);
		mutex_unlock_ranked(&gp_state.round_lock, LOCK_GP_ROUND);
		idle = true;
		mutex_lock_ranked(&gp_state.lock, LOCK_GP);
		/* Generations only grow; a barrier round completes the one it read. */
		USLAB_ASSERT(gp_state.barrier_done <= target && target <= gp_state.barrier_req);
		if (barrier)
			gp_state.barrier_done = target;
		if (barrier || gp_state.waiters)
			pthread_cond_broadcast(&gp_state.done);
		mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
	}
	return NULL;
}

static const struct usl_bgthread gp_monitor = { monitor_main, "uslab-rcu" };

/* ------------------------------------------------------------ start */

/*
 * gp_start - start the monitor if it is not running, for work about to be
 * deferred (the flavor is fixed from now on); gp_prestart - the same for a
 * cache that will defer slabs later (the flavor may still change).
 * Context: no uslab lock held but round_lock (it takes gp_lock and creates
 * a thread, which may allocate; a barrier round run by its caller flushes
 * the caller's sheaves, which kicks).
 * Return: 0 - running; -1 - it could not be started (retried later).
 */
int gp_start(void)
{
	__atomic_store_n(&gp_state.used, true, __ATOMIC_SEQ_CST);
	return gp_prestart();
}

/* This thread is in pthread_create() for the monitor (under gp_state.lock). */
static __thread bool tls_creating;

int gp_prestart(void)
{
	int ret = 0;

	if (tls_creating)
		return -1;		   /* a malloc of pthread_create() freeing through uslab */
	USLAB_ASSERT(NO_LOCK_BUT_ROUND()); /* Context: gp_start() */
	mutex_lock_ranked(&gp_state.lock, LOCK_GP);
	if (!gp_state.started) {
		uint64_t now = now_ms();

		ret = -1;
		if (now >= gp_state.retry_ms) {
			/* It may allocate, with libuslab-malloc.so through uslab. */
			tls_creating = true;
			ret = usl_thread_detached(&gp_monitor) ? -1 : 0;
			tls_creating = false;
			if (!ret) {
				gp_state.started = true;
				__atomic_store_n(&gp_state.start_needed, false, __ATOMIC_SEQ_CST);
			} else {
				gp_state.retry_ms = now + GP_RETRY_MS;
			}
		}
	}
	mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
	return ret;
}

/* Start the monitor if work was handed over without one. No lock held but round_lock. */
void gp_kick(void)
{
	USLAB_ASSERT(NO_LOCK_BUT_ROUND());
	if (unlikely(__atomic_load_n(&gp_state.start_needed, __ATOMIC_RELAXED)))
		gp_start();
}

/* Note that work waits for a monitor (fork child, a front end without one). */
void gp_need_start(void)
{
	__atomic_store_n(&gp_state.start_needed, true, __ATOMIC_SEQ_CST);
}

bool gp_used(void)
{
	return __atomic_load_n(&gp_state.used, __ATOMIC_SEQ_CST);
}

/* ----------------------------------------------------------- clients */

/*
 * gp_defer_slabs - release slabs of USLAB_TYPESAFE_BY_RCU caches (linked
 * by ->next, state FREE, ->cache still set so lookups still answer) to
 * os.c after a grace period.
 * Context: any thread, any uslab lock held: lock-free, never blocks, never
 * starts a thread (a missing monitor is started by gp_kick()).
 */
void gp_defer_slabs(struct slab *list)
{
	struct slab *tail = list, *head;
	unsigned long k = 1;

	USLAB_ASSERT(list->state == SLAB_FREE && list->cache);
	while (tail->next) {
		tail = tail->next;
		USLAB_ASSERT(tail->state == SLAB_FREE && tail->cache);
		k++;
	}
	stat_add_shared(gp_state.slabs_deferred, k);
	__atomic_store_n(&gp_state.used, true, __ATOMIC_SEQ_CST);
	head = __atomic_load_n(&gp_state.slabq, __ATOMIC_RELAXED);
	do
		tail->next = head;
	while (!__atomic_compare_exchange_n(&gp_state.slabq, &head, list, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	if (!__atomic_load_n(&gp_state.started, __ATOMIC_ACQUIRE))
		__atomic_store_n(&gp_state.start_needed, true, __ATOMIC_SEQ_CST);
}

/*
 * gp_barrier - when it returns, a round that began after the call has
 * completed: everything handed over before the call was released. Without
 * a monitor (it cannot start) the round runs in the caller.
 * Context: no uslab lock held, outside a read-side critical section. Not
 * a cancellation point.
 */
void gp_barrier(void)
{
	int old;

	USLAB_ASSERT(!lockdep_depth() && !gp_read_ongoing()); /* Context: the comment */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	if (gp_start()) {
		mutex_lock_ranked(&gp_state.round_lock, LOCK_GP_ROUND);
		gp_round(true, true);
		mutex_unlock_ranked(&gp_state.round_lock, LOCK_GP_ROUND);
	} else {
		uint64_t my;

		mutex_lock_ranked(&gp_state.lock, LOCK_GP);
		my = ++gp_state.barrier_req;
		gp_wake();
		while (gp_state.barrier_done < my) {
			pthread_cond_wait(&gp_state.done, &gp_state.lock);
			USLAB_ASSERT(gp_state.barrier_done <= gp_state.barrier_req);
		}
		mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
	}
	pthread_setcancelstate(old, NULL);
}

/*
 * gp_wait_until - wait until @cond() holds, re-checked after every round
 * (the throttle of the front end). Returns at once without a monitor.
 * Context: no uslab lock held. Not a cancellation point.
 */
void gp_wait_until(bool (*cond)(void))
{
	int old;

	USLAB_ASSERT(!lockdep_depth()); /* Context: no uslab lock held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	mutex_lock_ranked(&gp_state.lock, LOCK_GP);
	gp_state.waiters++;
	while (gp_state.started && !cond()) {
		gp_wake();
		pthread_cond_wait(&gp_state.done, &gp_state.lock);
	}
	USLAB_ASSERT(gp_state.waiters);
	gp_state.waiters--;
	mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
	pthread_setcancelstate(old, NULL);
}

void gp_stats(uint64_t *deferred, uint64_t *released)
{
	*deferred = __atomic_load_n(&gp_state.slabs_deferred, __ATOMIC_SEQ_CST);
	*released = __atomic_load_n(&gp_state.slabs_released, __ATOMIC_SEQ_CST);
}

/* -------------------------------------------------------------- fork */

/* First of all: waits for the monitor's round (grace period and release). */
void gp_fork_prepare(void)
{
	mutex_lock_ranked(&gp_state.round_lock, LOCK_GP_ROUND);
}

/* After caches_lock. */
void gp_fork_prepare_late(void)
{
	USLAB_ASSERT(mutex_owned(&gp_state.round_lock, LOCK_GP_ROUND) && lockdep_held(LOCK_CACHES));
	mutex_lock_ranked(&gp_state.lock, LOCK_GP);
}

void gp_fork_parent(void)
{
	mutex_unlock_ranked(&gp_state.lock, LOCK_GP);
}

void gp_fork_parent_early(void)
{
	mutex_unlock_ranked(&gp_state.round_lock, LOCK_GP_ROUND);
}

/*
 * The child has no monitor. Slabs still waiting, and the front end's
 * blocks (rcu_fork_child), are released by a monitor that the child's
 * next gp_kick(), deferred free or barrier starts. uslab registers no
 * thread with liburcu, so it leaves no stale reader in the child.
 */
void gp_fork_child(void)
{
	/*
	 * The forking thread took both in gp_fork_prepare*(): it releases
	 * them (lockdep forgot them already). Re-initialised instead, a held
	 * mutex is undefined behaviour; ThreadSanitizer reported the child's
	 * monitor taking gp_state.lock as a double lock. No thread waits on done.
	 */
	pthread_mutex_unlock(&gp_state.lock);
	pthread_mutex_unlock(&gp_state.round_lock);
	pthread_cond_init(&gp_state.done, NULL);
	gp_state.started = false;
	gp_state.retry_ms = 0;
	gp_state.waiters = 0;
	gp_state.barrier_done = gp_state.barrier_req;
	__atomic_store_n(&gp_state.sleeping, false, __ATOMIC_SEQ_CST);
	__atomic_store_n(&gp_state.urgent, false, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&gp_state.slabq, __ATOMIC_SEQ_CST))
		__atomic_store_n(&gp_state.start_needed, true, __ATOMIC_SEQ_CST);
}
