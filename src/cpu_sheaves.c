// SPDX-License-Identifier: MIT
/*
 * cpu_sheaves.c - per-CPU sheaves: a cache's main and spare sheaf per CPU,
 * popped and pushed in restartable sequences (rseq), as the kernel's
 * sheaves are per CPU. With thread_sheaves.c and thread.c one layer (7): the per-thread
 * sheaves of thread_sheaves.c are the default; a cache switches here (USLAB_PERCPU)
 * and then every thread's calls of it meet in its CPU's slot, so the
 * objects the sheaves hold are bounded by CPUs x 2 sheaves, not threads.
 *
 * The slot of a CPU (struct percpu_slot, one cache line) holds two sheaf
 * pointers, never NULL (percpu_dead, a sheaf of capacity 0, stands for
 * none), and a stop word. Two kinds of rseq critical section touch it, each
 * on the slot of the CPU it runs on (it reads rseq->cpu_id inside the
 * section; a preemption, migration or signal restarts it from the top), and
 * each commits with its last instruction:
 *
 *   pop / push (the fast path): load slot->main, compare its size with 0 or
 *       its capacity, load or store the object, commit sheaf->size. No
 *       atomic, no lock: about 12 instructions and two loads of the slot's
 *       line and the sheaf's, plus the call from the inline path.
 *   exchange (the slow path): check the stop word and that main and spare
 *       are the two sheaves read before, commit both new pointers with one
 *       16-byte store. A thread that wins owns what it took out: no section
 *       on that CPU still holds it (it would have been preempted, so
 *       restarted), and a section on another CPU uses that CPU's slot.
 *
 * The slow paths prepare outside the section (a full sheaf from the barn
 * or the slabs, an empty one), exchange, and hand what they took out back
 * to the barn; a lost exchange (another thread on that CPU won) gives its
 * sheaf back and retries, PERCPU_TRIES times, then serves the call from
 * the slabs directly.
 *
 * Draining from another thread (shrink, destroy, trim, statistics), under
 * percpu_lock, one CPU at a time (tcmalloc's stop-and-fence):
 *   1. store 1 to slot->stop: every exchange started afterwards fails;
 *   2. fence the CPU (membarrier MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
 *      MEMBARRIER_CMD_FLAG_CPU): an exchange in flight there completed or
 *      restarts and sees the stop, so main and spare change no more;
 *   3. read them, store percpu_dead to both;
 *   4. fence again: a pop or push in flight on the old main completed or
 *      restarts and finds percpu_dead; the two sheaves are the drainer's;
 *   5. store 0 to slot->stop.
 * While a slot is stopped its slow paths allocate from and free to the
 * slabs directly. Statistics stop the slot and fence once (steps 1, 2):
 * the sheaves cannot be freed under them, their sizes are read racily.
 *
 * rseq: glibc (2.35 and later) registers every thread's area (__rseq_offset
 * from the thread pointer, __rseq_size); only cpu_id and rseq_cs are used,
 * never cpu_id_start (Linux 6.19 stopped rewriting it, which broke
 * tcmalloc's use of it as scratch) nor mm_cid (outside glibc's 20 bytes
 * here). The abort handler is preceded by glibc's signature, 0x53053053.
 * Where rseq is not registered (GLIBC_TUNABLES=glibc.pthread.rseq=0), the
 * rseq fence cannot be registered, the build is not x86-64, or it runs
 * ThreadSanitizer (which cannot see the sections' stores, so would report
 * every object handed between threads through them), percpu_supported is
 * false and caches keep per-thread sheaves.
 *
 * Lock order: percpu_lock (LOCK_PERCPU) is held while the barn and node
 * locks are taken (src/lock.h); the sections take no lock.
 */
#include <linux/membarrier.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perthread.h"

#ifdef USLAB_PRIV_RSEQ /* <uslab/inline/priv.h>: x86-64, glibc 2.35 or later, no TSan */
#define PERCPU_RSEQ 1
#endif

/* Exchanges lost in a row before a slow path serves the call from the slabs. */
#define PERCPU_TRIES 8

bool percpu_supported;
unsigned int percpu_nr;
struct uslab_priv_pcpu *uslab_priv_pcpu_of_id[USLAB_MAX_CACHES + 1];
unsigned int uslab_priv_pcpu_nr;
static unsigned int percpu_threshold;
static struct ulock percpu_lock = ULOCK_INIT_RANK(LOCK_PERCPU);
/* "No sheaf": size 0, capacity 0, so a pop finds it empty and a push full. */
struct uslab_priv_sheaf percpu_dead;

_Static_assert(offsetof(struct sheaf, size) == 16 && offsetof(struct sheaf, capacity) == 20 &&
		       offsetof(struct sheaf, objs) == 24,
	       "the critical sections' offsets into a sheaf");
_Static_assert(offsetof(struct uslab_priv_pcpu, main) == 0 &&
		       offsetof(struct uslab_priv_pcpu, spare) == 8 &&
		       offsetof(struct uslab_priv_pcpu, stop) == 16 &&
		       sizeof(struct uslab_priv_pcpu) == 64,
	       "the critical sections' offsets into a slot");
_Static_assert(offsetof(struct uslab_priv_sheaf, size) == offsetof(struct sheaf, size) &&
		       offsetof(struct uslab_priv_sheaf, capacity) ==
			       offsetof(struct sheaf, capacity) &&
		       sizeof(struct uslab_priv_sheaf) == offsetof(struct sheaf, objs),
	       "a sheaf's first bytes are struct uslab_priv_sheaf");

#ifdef PERCPU_RSEQ
#define RSEQ_ENTER USLAB_PRIV_RSEQ_ENTER
#define RSEQ_ABORT USLAB_PRIV_RSEQ_ABORT

/* The calling thread's struct rseq, as an offset from the thread pointer. */
static inline long rseq_off(void)
{
	return (long)__rseq_offset;
}

/* The pop and push of <uslab/inline/priv.h> (the inline paths' own). */
static inline void *pc_pop(struct percpu_slot *slots)
{
	return uslab_priv_pcpu_pop(slots, percpu_nr);
}

static inline bool pc_push(struct percpu_slot *slots, void *obj)
{
	return uslab_priv_pcpu_push(slots, percpu_nr, obj);
}

/* Take up to @n (< 2^31) objects off this CPU's main sheaf into @dst. Return: how many. */
static inline unsigned int pc_pop_bulk(struct percpu_slot *slots, void **dst, unsigned int n)
{
	unsigned int k;

	__asm__ __volatile__(RSEQ_ENTER "movq (%%rcx), %%rcx\n\t"
					"movl 16(%%rcx), %%edx\n\t"
					"movl %[n], %%r8d\n\t"
					"cmpl %%edx, %%r8d\n\t"
					"cmoval %%edx, %%r8d\n\t"
					"testl %%r8d, %%r8d\n\t"
					"jz 5f\n\t"
					"subl %%r8d, %%edx\n\t"
					"leaq 24(%%rcx,%%rdx,8), %%r9\n\t"
					"xorl %%r10d, %%r10d\n\t"
					"8:\n\t"
					"movq (%%r9,%%r10,8), %%r11\n\t"
					"movq %%r11, (%[dst],%%r10,8)\n\t"
					"addq $1, %%r10\n\t"
					"cmpq %%r8, %%r10\n\t"
					"jb 8b\n\t"
					"movl %%edx, 16(%%rcx)\n\t"
					"2:\n\t"
					"movl %%r8d, %[k]\n\t"
					"jmp 7f\n\t" RSEQ_ABORT "5:\n\t"
					"xorl %[k], %[k]\n\t"
					"7:\n\t"
			     : [k] "=&r"(k)
			     : [rs] "r"(rseq_off()), [slots] "r"(slots), [nr] "r"(percpu_nr),
			       [dst] "r"(dst), [n] "r"(n)
			     : "rax", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
	return k;
}

/* Put up to @n (< 2^31) objects of @src onto this CPU's main sheaf. Return: how many. */
static inline unsigned int pc_push_bulk(struct percpu_slot *slots, void *const *src, unsigned int n)
{
	unsigned int k;

	__asm__ __volatile__(RSEQ_ENTER "movq (%%rcx), %%rcx\n\t"
					"movl 16(%%rcx), %%edx\n\t"
					"movl 20(%%rcx), %%r8d\n\t"
					"subl %%edx, %%r8d\n\t"
					"cmpl %[n], %%r8d\n\t"
					"cmoval %[n], %%r8d\n\t"
					"testl %%r8d, %%r8d\n\t"
					"jz 5f\n\t"
					"leaq 24(%%rcx,%%rdx,8), %%r9\n\t"
					"xorl %%r10d, %%r10d\n\t"
					"8:\n\t"
					"movq (%[src],%%r10,8), %%r11\n\t"
					"movq %%r11, (%%r9,%%r10,8)\n\t"
					"addq $1, %%r10\n\t"
					"cmpq %%r8, %%r10\n\t"
					"jb 8b\n\t"
					"addl %%r8d, %%edx\n\t"
					"movl %%edx, 16(%%rcx)\n\t"
					"2:\n\t"
					"movl %%r8d, %[k]\n\t"
					"jmp 7f\n\t" RSEQ_ABORT "5:\n\t"
					"xorl %[k], %[k]\n\t"
					"7:\n\t"
			     : [k] "=&r"(k)
			     : [rs] "r"(rseq_off()), [slots] "r"(slots), [nr] "r"(percpu_nr),
			       [src] "r"(src), [n] "r"(n)
			     : "rax", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc");
	return k;
}

typedef uint64_t pc_pair __attribute__((vector_size(16)));

/*
 * On this CPU's slot, if it is not stopped and holds @m and @s, install
 * @nm and @ns (one 16-byte store). Return: whether it did.
 */
static inline bool pc_exchange(struct percpu_slot *slots, struct uslab_priv_sheaf *m,
			       struct uslab_priv_sheaf *s, struct uslab_priv_sheaf *nm,
			       struct uslab_priv_sheaf *ns)
{
	pc_pair v = { (uint64_t)(uintptr_t)nm, (uint64_t)(uintptr_t)ns };
	unsigned int ok;

	__asm__ __volatile__(RSEQ_ENTER "cmpl $0, 16(%%rcx)\n\t"
					"jne 5f\n\t"
					"cmpq %[m], (%%rcx)\n\t"
					"jne 5f\n\t"
					"cmpq %[s], 8(%%rcx)\n\t"
					"jne 5f\n\t"
					"movdqa %[v], (%%rcx)\n\t"
					"2:\n\t"
					"movl $1, %[ok]\n\t"
					"jmp 7f\n\t" RSEQ_ABORT "5:\n\t"
					"xorl %[ok], %[ok]\n\t"
					"7:\n\t"
			     : [ok] "=&r"(ok)
			     : [rs] "r"(rseq_off()), [slots] "r"(slots), [nr] "r"(percpu_nr),
			       [m] "r"(m), [s] "r"(s), [v] "x"(v)
			     : "rax", "rcx", "memory", "cc");
	return ok;
}

/*
 * On this CPU's slot, unless it is stopped: when main cannot serve (@alloc:
 * it is empty; else it is full) and the spare can, swap them (one 16-byte
 * store). Return: nonzero to try the pop or push again (swapped, or main
 * can serve now: another thread on this CPU came first); 0 when neither
 * can serve, or the slot is stopped or missing.
 */
static inline int pc_swap(struct percpu_slot *slots, bool alloc)
{
	int ok;

	__asm__ __volatile__(RSEQ_ENTER "cmpl $0, 16(%%rcx)\n\t"
					"jne 5f\n\t"
					"movq (%%rcx), %%rdx\n\t"
					"movq 8(%%rcx), %%r8\n\t"
					"movl 16(%%rdx), %%r9d\n\t"
					"movl 16(%%r8), %%r10d\n\t"
					"testl %[alloc], %[alloc]\n\t"
					"jz 8f\n\t"
					/* alloc: main has objects, or the spare has none */
					"testl %%r9d, %%r9d\n\t"
					"jnz 9f\n\t"
					"testl %%r10d, %%r10d\n\t"
					"jz 5f\n\t"
					"jmp 10f\n\t"
					"8:\n\t"
					/* free: main has room, or the spare has none */
					"cmpl 20(%%rdx), %%r9d\n\t"
					"jb 9f\n\t"
					"cmpl 20(%%r8), %%r10d\n\t"
					"jae 5f\n\t"
					"10:\n\t"
					"movq %%r8, %%xmm0\n\t"
					"movq %%rdx, %%xmm1\n\t"
					"punpcklqdq %%xmm1, %%xmm0\n\t"
					"movdqa %%xmm0, (%%rcx)\n\t"
					"2:\n\t"
					"9:\n\t"
					"movl $1, %[ok]\n\t"
					"jmp 7f\n\t" RSEQ_ABORT "5:\n\t"
					"xorl %[ok], %[ok]\n\t"
					"7:\n\t"
			     : [ok] "=&r"(ok)
			     : [rs] "r"(rseq_off()), [slots] "r"(slots), [nr] "r"(percpu_nr),
			       [alloc] "r"((int)alloc)
			     : "rax", "rcx", "rdx", "r8", "r9", "r10", "xmm0", "xmm1", "memory",
			       "cc");
	return ok;
}

/* The CPU the calling thread runs on now (it may move at once). */
static inline unsigned int pc_cpu(void)
{
	const struct rseq *rs =
		(const struct rseq *)((char *)__builtin_thread_pointer() + rseq_off());

	return READ_ONCE(rs->cpu_id);
}

static bool rseq_registered(void)
{
	return __rseq_size >= 8 && (int)pc_cpu() >= 0;
}
#else /* !PERCPU_RSEQ: never called (percpu_supported stays false) */
static inline void *pc_pop(struct percpu_slot *slots)
{
	(void)slots;
	return NULL;
}
static inline bool pc_push(struct percpu_slot *slots, void *obj)
{
	(void)slots, (void)obj;
	return false;
}
static inline unsigned int pc_pop_bulk(struct percpu_slot *slots, void **dst, unsigned int n)
{
	(void)slots, (void)dst, (void)n;
	return 0;
}
static inline unsigned int pc_push_bulk(struct percpu_slot *slots, void *const *src, unsigned int n)
{
	(void)slots, (void)src, (void)n;
	return 0;
}
static inline bool pc_exchange(struct percpu_slot *slots, struct uslab_priv_sheaf *m,
			       struct uslab_priv_sheaf *s, struct uslab_priv_sheaf *nm,
			       struct uslab_priv_sheaf *ns)
{
	(void)slots, (void)m, (void)s, (void)nm, (void)ns;
	return false;
}
static inline int pc_swap(struct percpu_slot *slots, bool alloc)
{
	(void)slots, (void)alloc;
	return 0;
}
static inline unsigned int pc_cpu(void)
{
	return 0;
}
static bool rseq_registered(void)
{
	return false;
}
#endif

static long membarrier(int cmd, unsigned int flags, int cpu)
{
	return syscall(__NR_membarrier, cmd, flags, cpu);
}

/*
 * percpu_init - decide whether per-CPU sheaves can run (the file comment's
 * conditions) and register the rseq fence. Called once at start-up, and in
 * a fork child (the registration is the process's).
 */
void percpu_init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	percpu_supported = false;
	percpu_threshold = usl_opt.percpu_threads * usl_opt.nr_cpus;
	if (usl_opt.percpu == PERCPU_OFF || !rseq_registered() || cpus <= 0)
		return;
	if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0))
		return;
	percpu_nr = (unsigned int)cpus;
	uslab_priv_pcpu_nr = percpu_nr;
	percpu_supported = true;
}

/*
 * Slot arrays (percpu_nr slots each) are carved one after another from
 * shared chunks and reused through a free list, under percpu_lock: the
 * arrays of the caches a program uses together share pages and fall on
 * different cache lines, with one mmap per 256 KiB instead of one per
 * cache (no speed difference was measured either way: manythreads-uslab 1
 * ran at 49-54 million steps per second with both).
 */
#define SLOTS_CHUNK (256u << 10)
static char *slots_next, *slots_end;
static void *slots_free;

static size_t slots_size(void)
{
	return (size_t)percpu_nr * sizeof(struct percpu_slot);
}

static struct percpu_slot *slots_get(void)
{
	size_t size = slots_size();
	void *p = NULL;

	ulock_lock(&percpu_lock);
	if (slots_free) {
		p = slots_free;
		slots_free = *(void **)p;
	} else {
		if ((size_t)(slots_end - slots_next) < size) {
			size_t chunk = size > SLOTS_CHUNK ? ALIGN_UP(size, PAGE_SIZE) : SLOTS_CHUNK;
			char *m = os_mmap(chunk);

			if (m) {
				slots_next = m;
				slots_end = m + chunk;
			}
		}
		if ((size_t)(slots_end - slots_next) >= size) {
			p = slots_next;
			slots_next += size;
		}
	}
	ulock_unlock(&percpu_lock);
	return p;
}

static void slots_put(struct percpu_slot *slots)
{
	ulock_lock(&percpu_lock);
	*(void **)(void *)slots = slots_free;
	slots_free = slots;
	ulock_unlock(&percpu_lock);
}

/*
 * percpu_enable - give @c per-CPU slots, all empty (percpu_dead): from its
 * next slow path on, every thread's calls of it go through them. Caches
 * without sheaves, pools and uslab's own caches keep per-thread sheaves.
 * With NUMA on, the inline paths see no slot (pcpu_nr 0: they cannot tell
 * an object's node) and every call comes to the library, which keeps each
 * CPU's sheaves to its node's objects (percpu_free()).
 * Context: any; no lock needed (the slots are published with one CAS).
 * Return: whether @c is per CPU now.
 */
bool percpu_enable(struct uslab_cache *c)
{
	struct percpu_slot *slots, *none = NULL;

	if (__atomic_load_n(&c->hot.pcpu, __ATOMIC_ACQUIRE))
		return true;
	if (!percpu_supported || !c->sheaf_capacity || c->debug ||
	    (c->flags & (USLAB_POOL | USLAB_POOL_EXTERNAL | CACHE_INTERNAL)))
		return false;
	slots = slots_get();
	if (!slots)
		return false;
	for (unsigned int i = 0; i < percpu_nr; i++) {
		slots[i].main = &percpu_dead;
		slots[i].spare = &percpu_dead;
		slots[i].stop = 0;
	}
	/* (Set once, before the slots are published, and never changed.) */
	c->hot.pcpu_nr = cache_numa(c) ? 0 : percpu_nr;
	if (!__atomic_compare_exchange_n(&c->hot.pcpu, &none, slots, false, __ATOMIC_RELEASE,
					 __ATOMIC_RELAXED)) {
		slots_put(slots);
		return true;
	}
	/* The kmalloc paths' way in, by the cache's id (after the slots are the cache's). */
	if (c->id > 0 && !cache_numa(c))
		__atomic_store_n(&uslab_priv_pcpu_of_id[c->id], slots, __ATOMIC_RELEASE);
	return true;
}

/*
 * percpu_note_user - a thread attached its sheaves to @c (@delta 1) or
 * drained them (-1): with USLAB_PERCPU=auto, more threads holding sheaves
 * than USLAB_PERCPU_THREADS x CPUs switch the cache. Context: the thread's
 * own lock held (thread_sheaves.c).
 */
void percpu_note_user(struct uslab_cache *c, int delta)
{
	unsigned int users =
		__atomic_add_fetch(&c->pcpu_users, (unsigned int)delta, __ATOMIC_RELAXED);

	if (delta > 0 && usl_opt.percpu == PERCPU_AUTO && percpu_supported &&
	    users > percpu_threshold && !__atomic_load_n(&c->hot.pcpu, __ATOMIC_RELAXED))
		percpu_enable(c);
}

/* Give back a sheaf an exchange or a drain took out: full to the barn, objects to slabs. */
static void pc_release(struct uslab_cache *c, struct uslab_priv_sheaf *psh, unsigned int nid)
{
	struct sheaf *sh = slot_sheaf(psh);

	if (psh == &percpu_dead)
		return;
	sh->filler = NULL;
	if (sh->size == sh->capacity && barn_put_full(cache_barn(c, nid), sh))
		return;
	if (sh->size)
		sheaf_flush(c, sh);
	if (!barn_put_empty(cache_barn(c, nid), sh))
		sheaf_free(c, sh);
}

/* A sheaf with objects of node @nid for @c: a full one from its barn, else one refilled from slabs. */
static struct sheaf *pc_get_full(struct uslab_cache *c, unsigned int nid)
{
	struct sheaf *none = NULL, *sh = barn_replace_empty(cache_barn(c, nid), &none);

	if (sh)
		return sh;
	sh = sheaf_alloc(c, nid);
	if (!sh)
		return NULL;
	sh->size = cache_refill_node(c, sh->objs, sh->capacity, (int)nid);
	if (!sh->size) {
		sheaf_free(c, sh);
		return NULL;
	}
	return sh;
}

/* An empty sheaf for @c on node @nid: from its barn, else a new one. */
static struct sheaf *pc_get_empty(struct uslab_cache *c, unsigned int nid)
{
	struct sheaf *sh = barn_get_empty(cache_barn(c, nid));

	return sh ? sh : sheaf_alloc(c, nid);
}

/*
 * One step of a slow path on this CPU's slot of @c: @alloc, give main
 * objects; else give it room. Swap in the spare when it can serve, else
 * install a new main (full or empty): the old one becomes the spare when
 * there was none, else goes back to the barn. Return: true to try the
 * pop or push again; false when the slot is stopped, or no sheaf can be
 * had (the caller goes to the slabs).
 */
static bool pc_step(struct uslab_cache *c, struct percpu_slot *slots, bool alloc)
{
	unsigned int cpu = pc_cpu();
	struct uslab_priv_sheaf *m, *s, *sh;
	struct percpu_slot *slot;
	struct sheaf *got;
	unsigned int nid;

	if (cpu >= percpu_nr)
		return false;
	slot = &slots[cpu];
	if (__atomic_load_n(&slot->stop, __ATOMIC_ACQUIRE))
		return false;
	/* (No size of a sheaf is read out here: another thread may free it.) */
	if (pc_swap(slots, alloc))
		return true;
	m = READ_ONCE(slot->main);
	s = READ_ONCE(slot->spare);
	nid = numa_node_of_cpu(cpu);
	got = alloc ? pc_get_full(c, nid) : pc_get_empty(c, nid);
	if (!got)
		return false;
	sh = (struct uslab_priv_sheaf *)(void *)got;
	if (s == &percpu_dead) {
		if (!pc_exchange(slots, m, s, sh, m))
			pc_release(c, sh, nid);
	} else if (pc_exchange(slots, m, s, sh, s)) {
		pc_release(c, m, nid);
	} else {
		pc_release(c, sh, nid);
	}
	return true;
}

/* uslab_cache_alloc() of a per-CPU cache @c (slots @slots). */
void *percpu_alloc(struct uslab_cache *c, struct percpu_slot *slots)
{
	for (int i = 0; i < PERCPU_TRIES; i++) {
		void *obj = pc_pop(slots);

		if (obj) {
			asan_unpoison(obj, c->object_size);
			return obj;
		}
		/* The CPU's sheaves are empty: one miss in USLAB_GUARD is sampled (guard.c). */
		if (!i && unlikely(guard_sample()) && (obj = cache_guard_alloc(c)))
			return obj;
		if (!pc_step(c, slots, true))
			break;
	}
	return cache_alloc_direct(c);
}

/*
 * percpu_free_remote - with NUMA on, whether @obj (of @c, checked and
 * poisoned) is on its way home instead of into this
 * CPU's sheaves: another node's objects go on the calling thread's remote
 * sheaf (thread_sheaves.c, "NUMA"). A migration between this test and the
 * push may leave one object in the other node's CPU sheaf: placement only.
 */
bool percpu_free_remote(struct uslab_cache *c, void *obj)
{
	const struct slab *s;
	unsigned int node;
	struct pcs *p;

	/* (No slab: not uslab's; the CPU's sheaf, then the slab path, reports it.) */
	if (!cache_numa(c) || !(s = os_slab_lookup(obj)) || (node = s->node) == numa_node_self())
		return false;
	p = pcs_counters(c);
	if (!p)
		return false; /* (no thread state: into the CPU's sheaf) */
	pcs_numa_remote(c, p, obj, node);
	return true;
}

/* uslab_cache_free() of @obj (checked, poisoned) to a per-CPU cache @c. */
void percpu_free(struct uslab_cache *c, struct percpu_slot *slots, void *obj)
{
	if (percpu_free_remote(c, obj))
		return;
	for (int i = 0; i < PERCPU_TRIES; i++) {
		if (pc_push(slots, obj))
			return;
		if (!pc_step(c, slots, false))
			break;
	}
	cache_free_objects(c, &obj, 1, 0);
}

/*
 * percpu_alloc_bulk - up to @n objects of @c from this CPU's sheaves into
 * @objs (not unpoisoned): what they hold, with sheaves from the barn or
 * refilled from slabs only while the rest is smaller than a sheaf (as the
 * per-thread bulk path: a large rest goes to the slabs directly, and a
 * failed call leaves no refilled sheaf behind). Return: how many; the
 * caller takes the rest from the slabs.
 */
size_t percpu_alloc_bulk(struct uslab_cache *c, struct percpu_slot *slots, size_t n, void **objs)
{
	size_t k = 0;

	for (int i = 0; k < n && i < PERCPU_TRIES; i++) {
		size_t want = n - k > (1u << 30) ? (1u << 30) : n - k;

		k += pc_pop_bulk(slots, objs + k, (unsigned int)want);
		if (k == n || n - k >= sheaf_capacity_now(c, numa_node_of_cpu(pc_cpu())) ||
		    !pc_step(c, slots, true))
			break;
	}
	return k;
}

/*
 * percpu_free_bulk - @objs[0..n) of @c (no NULL; poisoned) onto this CPU's
 * sheaves. Return: how many went; the caller frees the rest to slabs.
 */
size_t percpu_free_bulk(struct uslab_cache *c, struct percpu_slot *slots, size_t n,
			void *const *objs)
{
	size_t k = 0;

	for (int i = 0; k < n && i < PERCPU_TRIES; i++) {
		size_t want = n - k > (1u << 30) ? (1u << 30) : n - k;

		k += pc_push_bulk(slots, objs + k, (unsigned int)want);
		if (k < n && !pc_step(c, slots, false))
			break;
	}
	return k;
}

/*
 * Fence CPU @cpu: every rseq section running there has completed or will
 * restart. A whole-process fence if the one-CPU form is refused.
 */
static void pc_fence(unsigned int cpu)
{
	if (!membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, MEMBARRIER_CMD_FLAG_CPU, (int)cpu))
		return;
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ, 0, 0))
		usl_bug(NULL, NULL, "membarrier rseq fence failed (errno %d) after it registered",
			errno);
}

static bool slot_empty(const struct percpu_slot *slot)
{
	return READ_ONCE(slot->main) == &percpu_dead && READ_ONCE(slot->spare) == &percpu_dead;
}

/*
 * percpu_drain - take every CPU's sheaves of @c out (the file comment's
 * protocol) and give them back: full ones to the barn, the rest to slabs.
 * Context: no uslab lock held (takes percpu_lock, then barn and node locks).
 */
void percpu_drain(struct uslab_cache *c)
{
	struct percpu_slot *slots = __atomic_load_n(&c->hot.pcpu, __ATOMIC_ACQUIRE);

	if (!slots)
		return;
	ulock_lock(&percpu_lock);
	for (unsigned int cpu = 0; cpu < percpu_nr; cpu++) {
		struct percpu_slot *slot = &slots[cpu];
		struct uslab_priv_sheaf *m, *s;

		if (slot_empty(slot))
			continue;
		__atomic_store_n(&slot->stop, 1, __ATOMIC_SEQ_CST);
		pc_fence(cpu);
		m = READ_ONCE(slot->main);
		s = READ_ONCE(slot->spare);
		WRITE_ONCE(slot->main, &percpu_dead);
		WRITE_ONCE(slot->spare, &percpu_dead);
		pc_fence(cpu);
		pc_release(c, m, numa_node_of_cpu(cpu));
		pc_release(c, s, numa_node_of_cpu(cpu));
		__atomic_store_n(&slot->stop, 0, __ATOMIC_RELEASE);
	}
	ulock_unlock(&percpu_lock);
}

/*
 * percpu_stats - what @c's CPUs hold, into @st (percpu, percpu_cpus,
 * percpu_objects, percpu_sheaves). Each slot stopped and fenced once, so its
 * sheaves stay; their sizes are read as they are.
 */
void percpu_stats(struct uslab_cache *c, struct uslab_cache_stats *st)
{
	struct percpu_slot *slots = __atomic_load_n(&c->hot.pcpu, __ATOMIC_ACQUIRE);

	if (!slots)
		return;
	st->percpu = 1;
	st->percpu_cpus = percpu_nr;
	ulock_lock(&percpu_lock);
	for (unsigned int cpu = 0; cpu < percpu_nr; cpu++) {
		struct percpu_slot *slot = &slots[cpu];
		struct uslab_priv_sheaf *sh[2];

		if (slot_empty(slot))
			continue;
		__atomic_store_n(&slot->stop, 1, __ATOMIC_SEQ_CST);
		pc_fence(cpu);
		sh[0] = READ_ONCE(slot->main);
		sh[1] = READ_ONCE(slot->spare);
		for (int i = 0; i < 2; i++) {
			if (sh[i] == &percpu_dead)
				continue;
			st->percpu_sheaves++;
			st->percpu_objects += READ_ONCE(sh[i]->size);
		}
		__atomic_store_n(&slot->stop, 0, __ATOMIC_RELEASE);
	}
	ulock_unlock(&percpu_lock);
}

/*
 * percpu_destroy - unmap @c's slots (destroy, after percpu_drain: nothing
 * may use the cache any more).
 */
void percpu_destroy(struct uslab_cache *c)
{
	struct percpu_slot *slots;

	/* The id may be given to another cache next: its entry first. */
	if (c->id > 0)
		__atomic_store_n(&uslab_priv_pcpu_of_id[c->id], NULL, __ATOMIC_RELEASE);
	slots = __atomic_exchange_n(&c->hot.pcpu, NULL, __ATOMIC_ACQ_REL);
	if (slots)
		slots_put(slots);
}

/* Fork: no drain half done in the child (percpu_lock, rank LOCK_PERCPU). */
void percpu_fork_prepare(void)
{
	ulock_lock(&percpu_lock);
}

void percpu_fork_parent(void)
{
	ulock_unlock(&percpu_lock);
}

void percpu_fork_child(void)
{
	ulock_init(&percpu_lock);
	if (percpu_supported && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0))
		usl_warn("membarrier rseq fence not registered in the fork child");
}

int uslab_percpu_supported(void)
{
	if (usl_init())
		return 0;
	return percpu_supported;
}

int uslab_cache_percpu(const struct uslab_cache *c)
{
	return c && __atomic_load_n(&c->hot.pcpu, __ATOMIC_ACQUIRE) != NULL;
}
