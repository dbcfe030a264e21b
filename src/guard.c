// SPDX-License-Identifier: MIT
/*
 * guard.c - the sampling guard (the kernel's KFENCE, LLVM's GWP-ASan): a
 * few allocations, of any cache or kmalloc class, come from slots beside
 * guard pages, so that a use after free or an overflow of one of them
 * faults at the access and is reported with the object's allocating and
 * freeing call sites.
 *
 * The region: 2 * USLAB_GUARD_SLOTS + 1 pages of address space, mapped
 * PROT_NONE once (at the first sampled allocation) and never unmapped:
 *
 *   guard | slot 0 | guard | slot 1 | guard | ... | slot n-1 | guard
 *
 * A slot is one page. Its object is right-aligned in it (as far down as
 * the cache's alignment asks), so the first byte past the usable size is
 * on the guard page after it; the bytes of the page around the object are
 * filled with a canary, checked when the object is freed (an overflow
 * smaller than the alignment's rounding, or a write before the object).
 *
 * The slots' states:
 *
 *   UNUSED --guard_alloc--> LIVE --guard_free--> FREED --guard_alloc--> LIVE
 *   (PROT_NONE)             (read/write)         (PROT_NONE, in the FIFO)
 *
 * A freed slot is held back: the FIFO of freed slots gives the oldest
 * one again only when no slot was never used, so a use after free faults
 * as long as possible. A destroyed cache's freed slots go back to UNUSED.
 *
 * Who calls: the allocation slow path (thread_sheaves.c) asks guard_sample() on each
 * sheaf miss, a counter per thread (USLAB_GUARD: one in that many slow
 * paths), and on a hit cache.c's cache_guard_alloc() takes a slot. Nothing
 * on the inline fast paths. The region is in no arena, so every lookup of
 * its objects in the slab registry misses and goes where a foreign
 * pointer would be reported: there the frees (the library's frees, kfree,
 * a sheaf flushed to slabs through build_detached_freelist) and the
 * queries (ksize, uslab_cache_of, uslab_slab_of, krealloc, validate, the
 * rcu heads) ask guard_owns() first, a subtraction and a compare.
 *
 * The fault: a SIGSEGV handler, installed with the region, recognises an
 * address in it, prints the report and aborts; any other fault goes to
 * the handler that was installed before (called, or restored for the
 * default action when there was none).
 *
 * Lock: guard_lock (LOCK_GUARD, the last in src/lock.h) protects the
 * slots, the FIFO and the stack of unused slots; nothing else is taken
 * under it (mprotect is a system call, no allocation). The fault handler
 * reads the slots without it (the faulting thread may be anywhere).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* REG_ERR */
#endif
#include <link.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "cache.h" /* the names of the caches it reports: an exception in base.h */

/*
 * Return addresses kept per event: a statically linked program keeps
 * uslab's own frames (no range to skip at the capture), and the report
 * starts after the outermost exported uslab_* frame (usl_first_caller(),
 * debug.c's, as the debug tier's reports).
 */
#define GUARD_DEPTH 16
/* The byte around an object in its page, checked at free. */
#define GUARD_CANARY 0xa5

enum slot_state { SLOT_UNUSED, SLOT_LIVE, SLOT_FREED };

struct guard_site {
	void *addrs[GUARD_DEPTH];
	uint32_t depth;
	uint32_t tid;
};

struct guard_slot {
	const struct uslab_cache *cache; /* owner while LIVE and FREED */
	char *obj;			 /* the object (LIVE, FREED) */
	uint32_t size;			 /* its usable bytes */
	uint32_t state;			 /* enum slot_state */
	uint32_t next;			 /* FIFO or unused stack: the next slot's index + 1 */
	struct guard_site site[2];	 /* [0] allocated, [1] freed */
};

uintptr_t guard_base;
size_t guard_bytes;
__thread unsigned int guard_countdown __attribute__((tls_model("initial-exec")));

static struct ulock guard_lock = ULOCK_INIT_RANK(LOCK_GUARD);
static struct guard_slot *slots;
static uint32_t nslots;
static uint32_t unused_top;	      /* stack of UNUSED slots (index + 1, 0: empty) */
static uint32_t fifo_head, fifo_tail; /* FREED slots, oldest first (index + 1) */
static bool setup_failed;
static struct sigaction old_segv;

/* ------------------------------------------------------------- sampling */

/*
 * The thread's counter ran out (or it is the thread's first slow path):
 * start it again. One in USLAB_GUARD slow paths, counted per thread, from
 * its first: deterministic, so a run can be repeated; 1 samples every one,
 * 0 none (a count that ends after 2^32 slow paths, to look again).
 */
bool guard_sample_slow(void)
{
	unsigned int n = usl_opt.guard;
	bool first = guard_countdown == 0;

	guard_countdown = n ? n : UINT_MAX;
	return n == 1 || (n && !first);
}

/* ---------------------------------------------------------- call sites */

/*
 * The caller's return addresses (below the library's frames) and thread.
 * Never under guard_lock: the unwinder, and finding the library's code,
 * take the dynamic loader's lock, whose holder may allocate.
 */
static void capture(struct guard_site *site)
{
	usl_backtrace_init();
	site->depth = usl_backtrace(site->addrs, GUARD_DEPTH);
	site->tid = usl_tid();
}

static void print_site(const struct guard_slot *s, int which)
{
	const struct guard_site *site = &s->site[which];
	if (!site->depth) {
		usl_report_line("  %s", which ? "not freed" : "allocated: no call site");
		return;
	}
	usl_report_line("  %s by thread %u at:", which ? "freed" : "allocated", site->tid);
	usl_print_backtrace(site->addrs, site->depth, 4);
}

/* ---------------------------------------------------------------- slots */

static char *slot_page(uint32_t i)
{
	return (char *)guard_base + (2 * (size_t)i + 1) * PAGE_SIZE;
}

/* The slot whose page holds @p, or UINT32_MAX (a guard page, or outside). */
static uint32_t slot_of(const void *p)
{
	uintptr_t off = (uintptr_t)p - guard_base;
	size_t page = off / PAGE_SIZE;

	if (off >= guard_bytes || !(page & 1))
		return UINT32_MAX;
	return (uint32_t)(page / 2);
}

static void segv_handler(int sig, siginfo_t *si, void *uc);

/* Map the region and the slots, install the fault handler. Under guard_lock. */
static bool setup(void)
{
	size_t n = usl_opt.guard_slots ? usl_opt.guard_slots : 1;
	size_t bytes = (2 * n + 1) * PAGE_SIZE;
	size_t meta = ALIGN_UP(n * sizeof(struct guard_slot), PAGE_SIZE);
	struct sigaction sa;
	void *region, *meta_p;

	if (setup_failed)
		return false;
	setup_failed = true; /* once: a failure is not retried */
	region = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (region == MAP_FAILED)
		return false;
	meta_p = mmap(NULL, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (meta_p == MAP_FAILED) {
		munmap(region, bytes);
		return false;
	}
	slots = meta_p;
	nslots = (uint32_t)n;
	for (uint32_t i = nslots; i-- > 0;) {
		slots[i].next = unused_top;
		unused_top = i + 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	/* Published last: guard_owns() reads the size first, with acquire. */
	__atomic_store_n(&guard_base, (uintptr_t)region, __ATOMIC_RELAXED);
	__atomic_store_n(&guard_bytes, bytes, __ATOMIC_RELEASE);
	setup_failed = false;
	return true;
}

/* Take a slot: one never used, else the oldest freed. Under guard_lock. */
static uint32_t slot_take(void)
{
	uint32_t i;

	if (unused_top) {
		i = unused_top - 1;
		unused_top = slots[i].next;
		return i;
	}
	if (fifo_head) {
		i = fifo_head - 1;
		fifo_head = slots[i].next;
		if (!fifo_head)
			fifo_tail = 0;
		return i;
	}
	return UINT32_MAX;
}

static void slot_unused(uint32_t i)
{
	slots[i].state = SLOT_UNUSED;
	slots[i].cache = NULL;
	slots[i].next = unused_top;
	unused_top = i + 1;
}

void *guard_alloc(const struct uslab_cache *c, size_t size, size_t align)
{
	struct guard_site site;
	struct guard_slot *s;
	char *page, *obj;
	uint32_t i;

	if (!size || size > PAGE_SIZE || align > PAGE_SIZE)
		return NULL;
	capture(&site);
	ulock_lock(&guard_lock);
	if ((!slots && !setup()) || (i = slot_take()) == UINT32_MAX) {
		ulock_unlock(&guard_lock);
		return NULL;
	}
	page = slot_page(i);
	if (mprotect(page, PAGE_SIZE, PROT_READ | PROT_WRITE)) {
		slot_unused(i);
		ulock_unlock(&guard_lock);
		return NULL;
	}
	asan_unpoison(page, PAGE_SIZE);
	obj = page + ALIGN_DOWN(PAGE_SIZE - size, align ? align : 1);
	memset(page, GUARD_CANARY, (size_t)(obj - page));
	memset(obj + size, GUARD_CANARY, PAGE_SIZE - (size_t)(obj - page) - size);
	s = &slots[i];
	s->cache = c;
	s->obj = obj;
	s->size = (uint32_t)size;
	s->site[0] = site;
	s->site[1].depth = 0;
	__atomic_store_n(&s->state, SLOT_LIVE, __ATOMIC_RELEASE);
	ulock_unlock(&guard_lock);
	PROBE(guard_sample, c ? c->name : "-", obj, size);
	return obj;
}

/* The first byte around @s's object that is not the canary, or NULL. */
static const char *canary_broken(const struct guard_slot *s)
{
	const char *page = slot_page((uint32_t)(s - slots)), *end = page + PAGE_SIZE;

	for (const char *b = page; b < s->obj; b++)
		if ((unsigned char)*b != GUARD_CANARY)
			return b;
	for (const char *b = s->obj + s->size; b < end; b++)
		if ((unsigned char)*b != GUARD_CANARY)
			return b;
	return NULL;
}

/* Report a misuse of the object of (a copy of) slot @s and stop. */
static __attribute__((noreturn)) void report(const struct guard_slot *s, const void *addr,
					     const char *what, const char *detail)
{
	usl_report(s->cache, addr, NULL, NULL, "%s", what);
	usl_report_line("  %s%sthe %u-byte object %p (sampling guard)", detail ? detail : "",
			detail ? " " : "", s->size, (void *)s->obj);
	print_site(s, 0);
	print_site(s, 1);
	abort();
}

/*
 * guard_free - the free of sampled object @p (of @c, NULL from kfree):
 * checked, then held back. @at_call: the program's free of @p (the
 * library's single free, kfree), not a sheaf or batch on its way to the
 * slabs: a live slot whose object carries its cache's free key is in a
 * sheaf, a CPU's or a magazine already (the inline frees of a keyed cache
 * mark and push an object without asking where it lives): a double free,
 * as the library's other frees report it at the call.
 */
void guard_free(const struct uslab_cache *c, const void *p, bool at_call)
{
	struct guard_site site;
	struct guard_slot copy;
	const char *what = NULL, *broken = NULL;
	uint32_t i = slot_of(p);
	struct guard_slot *s;
	char *page;

	capture(&site);
	ulock_lock(&guard_lock);
	if (i == UINT32_MAX || slots[i].state == SLOT_UNUSED) {
		ulock_unlock(&guard_lock);
		usl_bug(c, p, "free of a pointer uslab did not hand out");
	}
	s = &slots[i];
	if (s->state == SLOT_LIVE)
		asan_unpoison(slot_page(i),
			      PAGE_SIZE); /* (poisoned in a sheaf: the canary is read) */
	if (s->state == SLOT_FREED)
		what = "double free";
	else if ((const char *)p != s->obj)
		what = "free of a pointer inside an object";
	else if (c && c != s->cache)
		what = "object of another cache freed to this cache";
	else if (at_call && s->cache && s->cache->hot.free_key &&
		 *(const uintptr_t *)p == s->cache->hot.free_key)
		what = "double free (the object carries the free key: it is free already)";
	else if ((broken = canary_broken(s)))
		what = "out-of-bounds write";
	if (what) {
		copy = *s;
		copy.site[1] = site;
		ulock_unlock(&guard_lock);
		if (broken)
			report(&copy, broken, what, "found at its free, beside");
		if (copy.state == SLOT_FREED)
			copy.site[1] = s->site[1];
		else if (c && c != copy.cache)
			usl_bug(c, p, "object of cache %s freed to this cache", copy.cache->name);
		report(&copy, p, what, NULL);
	}
	s->site[1] = site;
	page = slot_page(i);
	asan_unpoison(page, PAGE_SIZE);
	__atomic_store_n(&s->state, SLOT_FREED, __ATOMIC_RELEASE);
	mprotect(page, PAGE_SIZE, PROT_NONE);
	s->next = 0;
	if (fifo_tail)
		slots[fifo_tail - 1].next = i + 1;
	else
		fifo_head = i + 1;
	fifo_tail = i + 1;
	ulock_unlock(&guard_lock);
}

const struct uslab_cache *guard_object(const void *p, void **obj, size_t *size)
{
	uint32_t i = slot_of(p);
	const struct uslab_cache *c = NULL;

	if (i == UINT32_MAX)
		return NULL;
	ulock_lock(&guard_lock);
	if (slots[i].state == SLOT_LIVE) {
		c = slots[i].cache;
		if (obj)
			*obj = slots[i].obj;
		if (size)
			*size = slots[i].size;
	}
	ulock_unlock(&guard_lock);
	return c;
}

const struct uslab_cache *guard_object_of(const void *p, const char *call, size_t *size)
{
	struct guard_slot copy;
	uint32_t i = slot_of(p);

	if (i != UINT32_MAX) {
		ulock_lock(&guard_lock);
		copy = slots[i];
		ulock_unlock(&guard_lock);
		if (copy.state == SLOT_LIVE && (const char *)p == copy.obj) {
			*size = copy.size;
			return copy.cache;
		}
		if (copy.state == SLOT_LIVE)
			usl_bug(copy.cache, p, "%s of a pointer inside an object", call);
		if (copy.state == SLOT_FREED) {
			char detail[64];

			snprintf(detail, sizeof(detail), "%s of", call);
			report(&copy, p, "use after free", detail);
		}
	}
	usl_bug(NULL, p, "%s of a pointer uslab did not hand out", call);
}

unsigned long guard_live(const struct uslab_cache *c)
{
	unsigned long n = 0;

	if (!__atomic_load_n(&guard_bytes, __ATOMIC_ACQUIRE))
		return 0;
	ulock_lock(&guard_lock);
	for (uint32_t i = 0; i < nslots; i++)
		n += slots[i].state == SLOT_LIVE && slots[i].cache == c;
	ulock_unlock(&guard_lock);
	return n;
}

void guard_forget(const struct uslab_cache *c)
{
	uint32_t head = 0, tail = 0;

	if (!__atomic_load_n(&guard_bytes, __ATOMIC_ACQUIRE))
		return;
	ulock_lock(&guard_lock);
	/* The FIFO again without @c's slots, which become unused (still PROT_NONE). */
	for (uint32_t k = fifo_head; k;) {
		uint32_t i = k - 1;

		k = slots[i].next;
		if (slots[i].cache == c) {
			slot_unused(i);
			continue;
		}
		slots[i].next = 0;
		if (tail)
			slots[tail - 1].next = i + 1;
		else
			head = i + 1;
		tail = i + 1;
	}
	fifo_head = head;
	fifo_tail = tail;
	ulock_unlock(&guard_lock);
}

void guard_fork_prepare(void)
{
	ulock_lock(&guard_lock);
}

void guard_fork_parent(void)
{
	ulock_unlock(&guard_lock);
}

void guard_fork_child(void)
{
	ulock_init(&guard_lock);
}

/* ---------------------------------------------------------------- fault */

/* A fault at @a in the region: which object, what kind, both call sites. */
static __attribute__((noreturn)) void fault(uintptr_t a, const ucontext_t *uc)
{
	size_t page = (a - guard_base) / PAGE_SIZE;
	const char *access = "access";
	struct guard_slot copy;
	char detail[128];
	uint32_t i;

#if defined(__x86_64__) && defined(REG_ERR)
	access = (uc->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#else
	(void)uc;
#endif
	if (page & 1) {
		/* A slot's page: freed (or never used). */
		i = (uint32_t)(page / 2);
		copy = slots[i];
		if (copy.state == SLOT_FREED) {
			snprintf(detail, sizeof(detail), "%s at offset %ld of", access,
				 (long)(a - (uintptr_t)copy.obj));
			report(&copy, (void *)a, "use after free", detail);
		}
	} else {
		/* A guard page: past the end of the slot before it, or before the one after. */
		uint32_t left = page ? (uint32_t)(page / 2 - 1) : UINT32_MAX;
		uint32_t right = page / 2 < nslots ? (uint32_t)(page / 2) : UINT32_MAX;

		i = left != UINT32_MAX && slots[left].state != SLOT_UNUSED ? left : right;
		if (i != UINT32_MAX && slots[i].state != SLOT_UNUSED) {
			copy = slots[i];
			if (i == left)
				snprintf(detail, sizeof(detail), "%s %lu bytes past the end of",
					 access,
					 (unsigned long)(a - ((uintptr_t)copy.obj + copy.size)));
			else
				snprintf(detail, sizeof(detail), "%s %lu bytes before", access,
					 (unsigned long)((uintptr_t)copy.obj - a));
			report(&copy, (void *)a, "out-of-bounds access", detail);
		}
	}
	usl_bug(NULL, (void *)a, "invalid access to the sampling guard's unused pages (%s)",
		access);
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	/* A fault of the kernel's (si_code > 0), not a kill(), in the region. */
	if (si->si_code > 0 && a - guard_base < guard_bytes)
		fault(a, uc);
	if (old_segv.sa_flags & SA_SIGINFO) {
		old_segv.sa_sigaction(sig, si, uc);
	} else if (old_segv.sa_handler == SIG_DFL || old_segv.sa_handler == SIG_IGN) {
		/* Not ours: the previous behaviour, as the access faults again. */
		sigaction(SIGSEGV, &old_segv, NULL);
	} else {
		old_segv.sa_handler(sig);
	}
}
