/* SPDX-License-Identifier: MIT */
/*
 * uslab/inline/priv.h - the private ABI of uslab's inline paths: every name
 * uslab_priv_* and USLAB_PRIV_*, in one place. Included by the public
 * headers whose inline paths use it (<uslab/fastpath.h>, <uslab/kmalloc.h>,
 * <uslab/magazine.h>, <uslab/counter.h>); never include it directly, and
 * never use what it declares: it is an implementation detail, which may
 * change with the library's soname.
 *
 * The inline paths compiled into programs read the library's structures
 * directly: the first bytes of a cache and of a thread's sheaves of it,
 * the slab registry, a slab descriptor's cache id, a counter's slot. The
 * layout of those bytes is the ABI of libuslab.so.0, described here with
 * named constants; src/abi.c pins each of them to the library's own
 * structures with _Static_assert (the one place), so the library and a
 * program built against this header cannot disagree silently.
 */
#ifndef USLAB_PRIV_H
#define USLAB_PRIV_H

#ifndef USLAB_H
#error "include <uslab.h>, not <uslab/inline/priv.h>"
#endif

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The one condition for the inline paths: not asked off with
 * USLAB_NO_INLINE, and no sanitizer, detected as gcc and clang announce
 * them. src/base.h derives its ASan switch from USLAB_PRIV_ASAN.
 */
#if defined(__SANITIZE_ADDRESS__)
#define USLAB_PRIV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define USLAB_PRIV_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define USLAB_PRIV_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define USLAB_PRIV_TSAN 1
#endif
#endif
#if !defined(USLAB_NO_INLINE) && !defined(USLAB_PRIV_ASAN) && !defined(USLAB_PRIV_TSAN)
#define USLAB_PRIV_INLINE 1
#endif

/*
 * The private ABI's generation, bumped with every change to what the
 * inline paths read or write (a structure's layout, a field's meaning).
 * The symbols the inline paths reference carry it in their names: the
 * thread's table (every cache and kmalloc path) and the magazine's slow
 * paths (every magazine path). A program compiled with another
 * generation's headers, inline, fails to link against this library, or to
 * load with it: "undefined symbol: uslab_priv_pcs_table" (generation 1,
 * the headers before issue 34) or "..._abiN". Rebuild it (doc/api.md,
 * "Inline paths"). src/abi.c pins the structures to the library's.
 * 2: the free key opt-in (issue 34): a keyed cache's pcs_off is 0, and the
 *    inline kmalloc paths serve classes without the key.
 */
#define USLAB_PRIV_ABI 2
#define uslab_priv_pcs_table uslab_priv_pcs_table_abi2
#define uslab_priv_magazine_refill uslab_priv_magazine_refill_abi2
#define uslab_priv_magazine_alloc_slow uslab_priv_magazine_alloc_slow_abi2
#define uslab_priv_magazine_free_slow uslab_priv_magazine_free_slow_abi2

/*
 * The library's large tables, declared weak where the inline paths read
 * them: a program built as PIE (gcc's default here) would otherwise get a
 * copy relocation of each, made at start-up into its own memory: 16 MiB of
 * slab registry resident in every program that frees inline (VmHWM 34.7 MB
 * against 2.0 MB for a kmalloc and a kfree). Weak, they are read through
 * the GOT (one load; linked statically, the linker resolves it).
 */
#ifdef USLAB_PRIV_INLINE
#define USLAB_PRIV_BIG_DATA __attribute__((__weak__))
#else
#define USLAB_PRIV_BIG_DATA
#endif

/* ---------------------------------------------------------- constants */

/* User addresses are below 2^USLAB_PRIV_VA_BITS (x86-64, 4-level paging). */
#define USLAB_PRIV_VA_BITS 47
/* The slab registry has one entry per 2^USLAB_PRIV_ARENA_SHIFT bytes. */
#define USLAB_PRIV_ARENA_SHIFT 26
/* A slab descriptor is 2^USLAB_PRIV_SLAB_SHIFT bytes (one cache line). */
#define USLAB_PRIV_SLAB_SHIFT 6
/*
 * A registry entry: the address of the first slab descriptor of its range
 * (aligned to a descriptor) ORed with the range's slab shift (log2 of its
 * slabs' size), which the descriptor's alignment leaves room for.
 */
#define USLAB_PRIV_ENTRY_SHIFT_MASK ((1ul << USLAB_PRIV_SLAB_SHIFT) - 1)
/* Offset of the 16-bit cache id in a slab descriptor (0: no sheaves). */
#define USLAB_PRIV_SLAB_PCS_ID 30
/* Offset of minus the address of a cache slab's first object in its descriptor. */
#define USLAB_PRIV_SLAB_FIRST 56
/* A thread's sheaves of one cache (struct pcs) are 2^USLAB_PRIV_PCS_SHIFT bytes. */
#define USLAB_PRIV_PCS_SHIFT 7
/* Bits of an unsigned long, less one: the highest bit's index (kmalloc's class). */
#define USLAB_PRIV_LONG_TOP_BIT (sizeof(unsigned long) * 8 - 1)
/*
 * Magazine bulk calls of up to this many objects are served inline; larger
 * ones call the library (<uslab/magazine.h>).
 */
#define USLAB_PRIV_BULK_INLINE 16
/*
 * Cache bulk calls of up to this many objects are served inline (when the
 * main sheaf can), larger ones call the library: the inline copies move
 * 16 bytes a store in a program built for generic x86-64, the library's
 * 32 (an AVX2 clone) after a call of a few ns.
 */
#define USLAB_PRIV_CACHE_BULK_INLINE 16
/*
 * uslab_pool_get_bulk() / _put_bulk() of up to this many objects are
 * served inline: they neither skip NULLs nor clear the array, so their
 * copy is one loop, and DPDK's bursts (32) stay in the caller.
 */
#define USLAB_PRIV_POOL_BULK_INLINE 64
/*
 * Inline cache bulk calls of fewer objects copy one pointer at a time: the
 * vector loops cost more there (in-process A/B of the inline paths, 256-byte
 * objects, cycles per object: n = 1 6.8 against 5.9, 2 7.2 against 4.7, 4
 * 3.7 against 2.9; from 7 they win, 1.9 against 2.5).
 */
#define USLAB_PRIV_BULK_VECTOR 6

/* ------------------------------------------------------------ caches */

/*
 * The inline bulk paths' copies, a vector at a time (gcc vector
 * extensions: 16 bytes, two pointers, for generic x86-64; 32 bytes with
 * AVX2), the rest one pointer at a time. Not an overlapping last vector:
 * the next copy of the same places (an alloc of what a free pushed, a free
 * of what an alloc wrote) would load across two stores, which the CPU
 * cannot forward (measured: doc/design.md, "Decisions measured in code").
 */
#if defined(__GNUC__) && defined(__AVX2__)
typedef uintptr_t uslab_priv_ptrv
	__attribute__((__vector_size__(32), __aligned__(8), __may_alias__));
#define USLAB_PRIV_PTRV 4
#elif defined(__GNUC__)
typedef uintptr_t uslab_priv_ptrv
	__attribute__((__vector_size__(16), __aligned__(8), __may_alias__));
#define USLAB_PRIV_PTRV 2
#endif

/* Copy @src[0..n) to @dst (not overlapping). */
static inline __attribute__((__always_inline__)) void
uslab_priv_copy_ptrs(void **dst, void *const *src, size_t n)
{
	size_t i = 0;

#ifdef USLAB_PRIV_PTRV
	for (; i + USLAB_PRIV_PTRV <= n; i += USLAB_PRIV_PTRV)
		*(uslab_priv_ptrv *)(void *)(dst + i) =
			*(const uslab_priv_ptrv *)(const void *)(src + i);
#endif
	for (; i < n; i++)
		dst[i] = src[i];
}

/*
 * A hole in a free array: NULL or USLAB_ZERO_SIZE_PTR (16, what a 0-byte
 * kmalloc returns), which the bulk frees skip (<uslab.h>).
 */
#define USLAB_PRIV_HOLE_MAX 16u
#define uslab_priv_is_hole(o) ((uintptr_t)(o) <= USLAB_PRIV_HOLE_MAX)

/*
 * Copy @src[0..n) to @dst (not overlapping) and clear @src. Return nonzero
 * if an entry may be a hole: each pointer less 17 has its sign ORed in (a
 * hole sets it, and so does a pointer at or above 2^63, which is no object:
 * the caller's exact pass then costs time only).
 */
static inline __attribute__((__always_inline__)) uintptr_t
uslab_priv_move_ptrs(void **dst, void **src, size_t n)
{
	uintptr_t z = 0;
	size_t i = 0;

#ifdef USLAB_PRIV_PTRV
	if (n >= USLAB_PRIV_PTRV) {
		const uslab_priv_ptrv zero = { 0 };
		uslab_priv_ptrv acc = zero;

		for (; i + USLAB_PRIV_PTRV <= n; i += USLAB_PRIV_PTRV) {
			uslab_priv_ptrv v = *(const uslab_priv_ptrv *)(const void *)(src + i);

			*(uslab_priv_ptrv *)(void *)(dst + i) = v;
			*(uslab_priv_ptrv *)(void *)(src + i) = zero;
			acc |= v - (USLAB_PRIV_HOLE_MAX + 1);
		}
		for (int k = 0; k < USLAB_PRIV_PTRV; k++)
			z |= acc[k];
	}
#endif
	for (; i < n; i++) {
		z |= (uintptr_t)src[i] - (USLAB_PRIV_HOLE_MAX + 1);
		dst[i] = src[i];
		src[i] = (void *)0;
	}
	return z >> 63;
}

/*
 * Squeeze the holes out of @p[0..n). Return: the entries left. Out of line
 * (a copy per program that uses it): the inline free calls it only when
 * its array had a hole, and a loop inline made callers' own inline
 * wrappers too big for gcc to inline.
 */
static __attribute__((__noinline__, __cold__, __unused__)) size_t uslab_priv_squeeze(void **p,
										     size_t n)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (!uslab_priv_is_hole(p[i]))
			p[m++] = p[i];
	return m;
}

/*
 * The hot part of a thread's sheaves of one cache: objects are [bottom,
 * top), room up to limit; and, while the thread holds a main sheaf, a copy
 * of the cache's struct uslab_priv_objgeo (below): the inline kfree's
 * interior and double-free checks read it from the line they read top
 * from, not from a line of their own behind the cache id. One cache line
 * with the library's pointer to the main sheaf.
 */
struct uslab_priv_pcs {
	void **top;
	void **bottom;
	void **limit;
	uint64_t recip;
	uint64_t span;
	uintptr_t free_key;
};

/*
 * Per-CPU sheaves (the library's src/cpu_sheaves.c has the protocol). A sheaf's
 * first bytes, and one CPU's slot: main and spare, never NULL (an empty
 * sheaf of capacity 0 stands for none), the stop word of a drain.
 */
struct uslab_priv_sheaf {
	void *next;
	const void *filler;
	uint32_t size;
	uint32_t capacity;
	/* then the objects: void *objs[capacity] */
};

struct uslab_priv_pcpu {
	struct uslab_priv_sheaf *main;
	struct uslab_priv_sheaf *spare;
	uint32_t stop;
} __attribute__((__aligned__(64)));

/*
 * The hot part of a cache, its first bytes: where its sheaves are in a
 * thread's table; its CPUs' slots (NULL while its sheaves are per thread)
 * and how many there are.
 */
struct uslab_priv_cache {
	size_t pcs_off;
	struct uslab_priv_pcpu *pcpu;
	unsigned int pcpu_nr;
	uintptr_t free_key;
};

/*
 * The default tier's free checks (doc/design.md, "Free checks").
 *
 * The free key: a random word of the process (bit 63 set, so never an
 * address and never 0), written into the first word of an object of a
 * keyed cache as it goes into a sheaf (per thread or per CPU) or a
 * magazine, and cleared when one hands the object out again; a free that
 * finds the key there frees an object that is free already, and stops the
 * program. Keyed: the malloc drop-in's classes and caches created with
 * USLAB_FREE_KEY (or every cache, USLAB_FREE_KEY=1); a cache's copy,
 * free_key, is 0 for all others, and always where free objects are not
 * uslab's to write: a constructor or TYPESAFE_BY_RCU (the object keeps its
 * state), pools and external pools (the caller's), the debug tier (which
 * checks more). A keyed cache's pcs_off is 0, so the inline cache paths
 * (which never touch an object) send its calls to the library; the inline
 * kmalloc and kfree read the key from the thread's pcs (its copy of struct
 * uslab_priv_objgeo), a magazine from its own copy.
 */
USLAB_API __attribute__((__noreturn__, __cold__))
USLAB_NO_ACCESS(2) void uslab_priv_double_free(struct uslab_cache *c, const void *obj);

/*
 * Check @obj against @key (a double free stops the program), then mark it
 * free. The pointer is laundered (an empty asm): the compiler must not see
 * a read of the caller's object, which may never have been written (the
 * word is uslab's, and the free's access(none) contract stays true for
 * -Wmaybe-uninitialized).
 */
static inline __attribute__((__always_inline__)) void uslab_priv_free_mark(struct uslab_cache *c,
									   void *obj, uintptr_t key)
{
	typedef uint32_t __attribute__((__may_alias__)) half;
	const int hi = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__; /* the high half's index */
	uintptr_t *w = (uintptr_t *)obj;

	__asm__("" : "+r"(w));
	/*
	 * The key's high half first, then its low half: a program's store
	 * narrower than 8 bytes at the object's start (an int fd) is not
	 * forwarded to an 8-byte load of the word, which would wait for it
	 * to retire (a store-forwarding stall on every free); a 4-byte load
	 * beside it does not wait. The high half has bit 63 set, which no
	 * cleared word (0) and no pointer has: the low half is rarely read.
	 */
	if (__builtin_expect(((const half *)w)[hi] == (uint32_t)(key >> 32), 0) &&
	    ((const half *)w)[!hi] == (uint32_t)key)
		uslab_priv_double_free(c, obj);
	*w = key;
}

/* An object handed out: its first word no longer the key. */
static inline __attribute__((__always_inline__)) void uslab_priv_free_unmark(void *obj)
{
	*(uintptr_t *)obj = 0;
}

/*
 * The objects' places in the slabs of the cache with each id (a cache with
 * sheaves), for the interior-pointer check of the inline kfree: recip is
 * 2^64 / size rounded up, span the bytes from a slab's first object to the
 * end of its last (0: a debug cache: the check always fails and the
 * library frees them), and the cache's free key (0: none). The
 * inline kfree reads the copy a thread's pcs holds beside its sheaf top
 * (struct uslab_priv_pcs), the per-CPU miss path this table. An address
 * @off bytes from its slab's first object is an object's start iff off <
 * span and off * recip (mod 2^64) < recip (Lemire, Kaser and Kurz:
 * divisibility by a multiply).
 */
struct uslab_priv_objgeo {
	uint64_t recip;
	uint64_t span;
	uintptr_t free_key; /* the cache's, 0: none (always when span is 0) */
	uint64_t pad;
};

/*
 * The per-CPU pop and push: restartable sequences (rseq) on glibc's
 * registration of the thread (glibc 2.35 and later export __rseq_offset),
 * x86-64. Each section reads the CPU number inside it and commits with its
 * last instruction, a store of the sheaf's size; a preemption, migration
 * or signal sends it to its abort handler, which starts it again. Without
 * them (another architecture, an older glibc, ThreadSanitizer) the inline
 * paths call the library, which serves per-CPU caches itself or keeps
 * per-thread sheaves.
 */
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(USLAB_PRIV_TSAN) && \
	(__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#include <sys/rseq.h>
#define USLAB_PRIV_RSEQ 1

/*
 * The descriptor of the section from label 1 to label 2 with abort handler
 * 4 (struct rseq_cs: version, flags, start_ip, post_commit_offset,
 * abort_ip), then label 6, where the section arms itself (rseq_cs, at 8 in
 * struct rseq) and where an abort starts again; then the CPU's slot in
 * %rcx (cpu_id at 4; 5: beyond the slots). Operands: [rs] the offset of
 * struct rseq from the thread pointer, [slots], [nr]. Clobbers rax, rcx.
 */
#define USLAB_PRIV_RSEQ_ENTER                \
	".pushsection __rseq_cs, \"aw\"\n\t" \
	".balign 32\n\t"                     \
	"3:\n\t"                             \
	".long 0, 0\n\t"                     \
	".quad 1f, 2f - 1f, 4f\n\t"          \
	".popsection\n\t"                    \
	"6:\n\t"                             \
	"leaq 3b(%%rip), %%rax\n\t"          \
	"movq %%rax, %%fs:8(%[rs])\n\t"      \
	"1:\n\t"                             \
	"movl %%fs:4(%[rs]), %%eax\n\t"      \
	"cmpl %[nr], %%eax\n\t"              \
	"jae 5f\n\t"                         \
	"shlq $6, %%rax\n\t"                 \
	"leaq (%[slots],%%rax), %%rcx\n\t"

/*
 * The abort handler, out of line behind the signature glibc registered
 * (0x53053053, the last four bytes of a ud1 instruction): start again.
 */
#define USLAB_PRIV_RSEQ_ABORT                     \
	".pushsection __rseq_failure, \"ax\"\n\t" \
	".byte 0x0f, 0xb9, 0x3d\n\t"              \
	".long 0x53053053\n\t"                    \
	"4:\n\t"                                  \
	"jmp 6b\n\t"                              \
	".popsection\n\t"

/* Pop this CPU's main sheaf. Return: the object, or NULL (empty, or no slot). */
static inline __attribute__((__always_inline__)) void *
uslab_priv_pcpu_pop(struct uslab_priv_pcpu *slots, unsigned int nr)
{
	void *obj;

	__asm__ __volatile__(USLAB_PRIV_RSEQ_ENTER "movq (%%rcx), %%rcx\n\t"
						   "movl 16(%%rcx), %%edx\n\t"
						   "testl %%edx, %%edx\n\t"
						   "jz 5f\n\t"
						   "subl $1, %%edx\n\t"
						   "movq 24(%%rcx,%%rdx,8), %[obj]\n\t"
						   "movl %%edx, 16(%%rcx)\n\t"
						   "2:\n\t"
						   "jmp 7f\n\t" USLAB_PRIV_RSEQ_ABORT "5:\n\t"
						   "xorl %k[obj], %k[obj]\n\t"
						   "7:\n\t"
			     : [obj] "=&r"(obj)
			     : [rs] "r"((long)__rseq_offset), [slots] "r"(slots), [nr] "r"(nr)
			     : "rax", "rcx", "rdx", "memory", "cc");
	return obj;
}

/* Push @obj onto this CPU's main sheaf. Return: 0 if it is full (or no slot). */
static inline __attribute__((__always_inline__)) int
uslab_priv_pcpu_push(struct uslab_priv_pcpu *slots, unsigned int nr, void *obj)
{
	int ok;

	__asm__ __volatile__(
		USLAB_PRIV_RSEQ_ENTER "movq (%%rcx), %%rcx\n\t"
				      "movl 16(%%rcx), %%edx\n\t"
				      "cmpl 20(%%rcx), %%edx\n\t"
				      "jae 5f\n\t"
				      "movq %[obj], 24(%%rcx,%%rdx,8)\n\t"
				      "addl $1, %%edx\n\t"
				      "movl %%edx, 16(%%rcx)\n\t"
				      "2:\n\t"
				      "movl $1, %[ok]\n\t"
				      "jmp 7f\n\t" USLAB_PRIV_RSEQ_ABORT "5:\n\t"
				      "xorl %[ok], %[ok]\n\t"
				      "7:\n\t"
		: [ok] "=&r"(ok)
		: [rs] "r"((long)__rseq_offset), [slots] "r"(slots), [nr] "r"(nr), [obj] "r"(obj)
		: "rax", "rcx", "rdx", "memory", "cc");
	return ok;
}
#endif

/*
 * The CPUs' slots of the cache with each id (0..USLAB_MAX_CACHES), NULL
 * while its sheaves are per thread, and how many slots each has: the
 * kmalloc paths know a class by its id only (uslab_priv_kmalloc_ids, a slab
 * descriptor's cache id).
 */
extern USLAB_API struct uslab_priv_pcpu *uslab_priv_pcpu_of_id[] USLAB_PRIV_BIG_DATA;
extern USLAB_API unsigned int uslab_priv_pcpu_nr;

/* This thread's table of sheaves (all zero until its first slow path). */
extern USLAB_API __thread char *uslab_priv_pcs_table __attribute__((__tls_model__("initial-exec")));

USLAB_API void *uslab_priv_alloc_slow(struct uslab_cache *c);
USLAB_API void uslab_priv_free_slow(struct uslab_cache *c, void *obj);
USLAB_API size_t uslab_priv_alloc_bulk_slow(struct uslab_cache *c, size_t n, void **p);
USLAB_API void uslab_priv_free_bulk_slow(struct uslab_cache *c, size_t n, void **p);

/*
 * Move a sheaf top by n pointers: *top += n as one read-modify-write
 * instruction on x86-64, where gcc would compute it in a register from the
 * top it already holds and store it (one instruction less, the same
 * micro-ops; the push uses it, the pop not: fastpath.h says why).
 */
static inline __attribute__((__always_inline__)) void uslab_priv_top_add(void ***top, long n)
{
#if defined(__x86_64__)
	__asm__("addq %1, %0" : "+m"(*top) : "er"(n * (long)sizeof(void *)));
#else
	*top += n;
#endif
}

/* This thread's hot sheaves of @c. */
static inline struct uslab_priv_pcs *uslab_priv_pcs_at(char *table, const struct uslab_cache *c)
{
	const struct uslab_priv_cache *h = (const struct uslab_priv_cache *)(const void *)c;

	return (struct uslab_priv_pcs *)(void *)(table + h->pcs_off);
}

static inline struct uslab_priv_pcs *uslab_priv_pcs_of(const struct uslab_cache *c)
{
	return uslab_priv_pcs_at(uslab_priv_pcs_table, c);
}

/* This thread's hot sheaves of the cache with id @id (0: the always empty entry). */
static inline __attribute__((__always_inline__)) struct uslab_priv_pcs *
uslab_priv_pcs_of_id(unsigned int id)
{
	return (struct uslab_priv_pcs *)(void *)(uslab_priv_pcs_table +
						 ((size_t)id << USLAB_PRIV_PCS_SHIFT));
}

/* ------------------------------------------------------------ kmalloc */

/*
 * - uslab_priv_kmalloc_ids: each class's cache id (USLAB_KMALLOC_CLASSES
 *   of them); 0 (an entry that is always empty) until the classes exist.
 *   (A table of ids by size / 8, one load instead of the index computation,
 *   measured slower: doc/design.md, "Decisions measured in code".)
 * - uslab_priv_slab_map: one entry per 2^USLAB_PRIV_ARENA_SHIFT bytes of
 *   address space below 2^USLAB_PRIV_VA_BITS (see
 *   USLAB_PRIV_ENTRY_SHIFT_MASK), or 0.
 */
extern USLAB_API unsigned long uslab_priv_slab_map[] USLAB_PRIV_BIG_DATA;
extern USLAB_API struct uslab_priv_objgeo uslab_priv_objgeo[] USLAB_PRIV_BIG_DATA;
extern USLAB_API unsigned short uslab_priv_kmalloc_ids[];
USLAB_API void *uslab_priv_kmalloc_slow(size_t size);
USLAB_API USLAB_NO_ACCESS(1) void uslab_priv_kfree_slow(const void *p);

/*
 * uslab_priv_slab_desc - the slab descriptor of address @a, from @e, the
 * non-zero registry entry of its range: the range's first descriptor plus
 * one per slab before @a's. The one copy of this arithmetic (the inline
 * kfree and the library's lookups use it).
 */
static inline __attribute__((__always_inline__)) const char *uslab_priv_slab_desc(unsigned long a,
										  unsigned long e)
{
	return (const char *)((e & ~USLAB_PRIV_ENTRY_SHIFT_MASK) +
			      (((a & ((1ul << USLAB_PRIV_ARENA_SHIFT) - 1)) >>
				(e & USLAB_PRIV_ENTRY_SHIFT_MASK))
			       << USLAB_PRIV_SLAB_SHIFT));
}

/*
 * uslab_priv_at_object - whether @a, in the slab with descriptor @d, is the
 * start of an object of a cache with sheaves and the free key whose
 * struct uslab_priv_objgeo has @recip and @span (span 0: never): a load, a
 * multiply, two compares.
 */
static inline __attribute__((__always_inline__)) int
uslab_priv_at_object(unsigned long a, const char *d, uint64_t recip, uint64_t span)
{
	uint64_t off = a + *(const unsigned long *)(const void *)(d + USLAB_PRIV_SLAB_FIRST);

	return off < span && off * recip < recip;
}

/* The cache id in slab descriptor @d. */
static inline __attribute__((__always_inline__)) unsigned int uslab_priv_desc_id(const char *d)
{
	return *(const unsigned short *)(const void *)(d + USLAB_PRIV_SLAB_PCS_ID);
}

/* The class of a request of 1..USLAB_KMALLOC_MAX_CACHE_SIZE bytes: a few instructions. */
static inline __attribute__((__always_inline__)) unsigned int uslab_priv_kmalloc_index(size_t size)
{
	unsigned int k;

	if (size <= 64)
		return (unsigned int)((size + 7) >> 3) - 1;
	/* 2^k < size <= 2^(k+1) */
	k = (unsigned int)USLAB_PRIV_LONG_TOP_BIT - (unsigned int)__builtin_clzl(size - 1);
	return 8 + (k - 6) * 8 + (unsigned int)((size - 1 - (1ul << k)) >> (k - 3));
}

/* ----------------------------------------------------------- magazine */

struct uslab_magazine;

/*
 * The slow paths return the new fill level and the inline code stores it
 * itself (free_slow: ~0u when it freed the object itself, in a debug
 * cache's magazine, whose capacity reads 0), so both ways into a caller's
 * next iteration leave the count in a register: with partial PRE (gcc
 * -O3) a loop of pops or pushes keeps it there instead of loading it back
 * from the magazine every time.
 */
USLAB_API unsigned int uslab_priv_magazine_refill(struct uslab_magazine *m);
USLAB_API unsigned int uslab_priv_magazine_make_room(struct uslab_magazine *m);
USLAB_API void *uslab_priv_magazine_alloc_slow(struct uslab_magazine *m);
USLAB_API unsigned int uslab_priv_magazine_free_slow(struct uslab_magazine *m, void *obj);

/* ----------------------------------------------------------- counters */

struct uslab_counter;
struct uslab_idgen;

/* One thread's slot for one counter or generator: @gen says whose it is. */
struct uslab_priv_cslot {
	uint64_t gen;
	uint64_t a; /* counter: the delta (two's complement); generator: the next ID of the batch */
	uint64_t b; /* generator: the end of the batch */
	uint64_t pad;
};

/* This thread's table of slots and its length (0 until its first slow path). */
extern USLAB_API __thread struct uslab_priv_cslot *uslab_priv_cslots
	__attribute__((__tls_model__("initial-exec")));
extern USLAB_API __thread uint32_t uslab_priv_ncslots
	__attribute__((__tls_model__("initial-exec")));

USLAB_API void uslab_priv_counter_add_slow(struct uslab_counter *c, int64_t delta);
USLAB_API uint64_t uslab_priv_idgen_next_slow(struct uslab_idgen *g);

#ifdef __cplusplus
}
#endif

#endif /* USLAB_PRIV_H */
