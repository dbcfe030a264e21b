// SPDX-License-Identifier: MIT
/*
 * profile.c - the sampled heap profile (USLAB_PROFILE, USLAB_PROFILE_BYTES;
 * tcmalloc's heap sampling): a few kmalloc allocations (the drop-in's
 * malloc included) record their call stack, size and time; the record is
 * dropped at their free; a profile is the live records, scaled to
 * estimates, in gperftools' heap profile text format (google-pprof reads
 * it).
 *
 * What is counted, what is sampled. Each thread counts down bytes, from a
 * random exponential start of mean USLAB_PROFILE_BYTES. The count is not
 * taken on the inline fast paths: it is taken where a kmalloc class's main
 * sheaf is given objects again (the allocation slow path, thread_sheaves.c:
 * a spare swapped in, a full sheaf from the barn, a refill from slabs),
 * by the bytes that sheaf now holds (objects * object size: a "chunk"),
 * and at each large allocation by its bytes. A chunk whose bytes take
 * the count past zero is sampled (the count starts again, a new draw):
 * the request that ran that slow path is served by a sampled object
 * (kmalloc.c: an object of large_cache, its own pages, whose free always
 * comes to the library's slow path, where cache_slab_drop_single() drops
 * the record). The count being memoryless, a chunk of R bytes is sampled
 * with probability 1 - exp(-R / T) whatever came before; its sample stands
 * for R / (1 - exp(-R / T)) bytes of its class (tcmalloc's estimator, the
 * chunk for the object): an unbiased estimate of the bytes the sheaves
 * handed out. What it estimates: objects handed out by sheaf chunks, net
 * of what frees put back in the same thread's sheaves; a site that
 * allocates and frees (short-lived objects) runs few slow paths and has
 * few samples, and a long-lived site served by objects another site freed
 * to the same sheaf is under-counted. A heap that grows (the live set
 * built by allocations) is counted as allocated. doc/tracing.md.
 *
 * Not sampled: uslab_cache_alloc() on a program's own caches (their
 * objects come back through uslab_cache_free's inline push, which cannot
 * see a record), per-CPU and debug classes, kmalloc_node.
 *
 * A service (base.h): it calls no function of a layer. The records: a
 * table mapped once (PROFILE_MAX_RECS), a hash of addresses, under
 * profile_lock (LOCK_PROFILE, a leaf); a stack is captured before it is
 * taken (the unwinder may take the dynamic loader's lock).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "sample_math.h"

#define PROFILE_DEPTH 32
#define PROFILE_MAX_RECS 65536u
#define PROFILE_BUCKETS 16384u

struct profile_rec {
	uintptr_t addr;	   /* the object; 0: a free record */
	uint64_t size;	   /* bytes asked for */
	uint64_t obj_size; /* bytes of one object of its chunk (its class, or the large object) */
	double weight;	   /* bytes of its class the sample stands for */
	uint64_t time_ns;  /* CLOCK_REALTIME at the allocation */
	uint32_t depth;
	uint32_t next; /* hash chain or free list: index + 1 */
	void *addrs[PROFILE_DEPTH];
};

bool profile_enabled;
__thread bool profile_due __attribute__((tls_model("initial-exec")));
static __thread int64_t left __attribute__((tls_model("initial-exec")));
static __thread uint64_t chunk __attribute__((tls_model("initial-exec")));
static __thread uint64_t rng __attribute__((tls_model("initial-exec")));

static struct ulock profile_lock = ULOCK_INIT_RANK(LOCK_PROFILE);
static struct profile_rec *recs;
static uint32_t *buckets;
static uint32_t free_top, used; /* free list (index + 1), records never used */
static uint64_t nr_live, nr_dropped;

/* ------------------------------------------------------------- sampling */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The next count: exponential, mean USLAB_PROFILE_BYTES (xorshift64*, per thread). */
static int64_t draw(void)
{
	double u;

	if (!rng)
		rng = (now_ns() ^ ((uint64_t)usl_tid() << 32)) | 1;
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	u = (double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0; /* [0, 1) */
	return (int64_t)(-usl_ln(1.0 - u) * usl_opt.profile_bytes) + 1;
}

void profile_count_slow(uint64_t bytes)
{
	if (!left) /* the thread's first chunk */
		left = draw();
	left -= (int64_t)bytes;
	if (left > 0)
		return;
	left = draw();
	profile_due = true;
	chunk = bytes;
}

/* The weight of the sample of a chunk of @r bytes: r / (1 - exp(-r / T)). */
static double weight_of(uint64_t r)
{
	double t = usl_opt.profile_bytes;

	return (double)r / -usl_expm1(-(double)r / t);
}

/* ------------------------------------------------------------- records */

static uint32_t bucket_of(uintptr_t a)
{
	return (uint32_t)(((uint64_t)a * 0x9e3779b97f4a7c15ull) >> 50) % PROFILE_BUCKETS;
}

/*
 * The malloc drop-in's code (libuslab-malloc.so, if mapped): its frames
 * are the allocator's, skipped at the top of a stack as the library's are
 * (usl_backtrace()); else, unoptimised, its out-of-line kmalloc miss would
 * be the innermost frame of every sample. Found once (dl_iterate_phdr:
 * never under a uslab lock); racing threads find the same.
 */
static uintptr_t dropin_start, dropin_end;
static bool dropin_known;

static int find_dropin(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libuslab-malloc.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			__atomic_store_n(&dropin_start, info->dlpi_addr + ph->p_vaddr,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&dropin_end, info->dlpi_addr + ph->p_vaddr + ph->p_memsz,
					 __ATOMIC_RELAXED);
			return 1;
		}
	}
	return 0;
}

/* @addrs less its leading frames in the drop-in. Return: frames left. */
static uint32_t skip_dropin(void **addrs, uint32_t depth)
{
	uintptr_t start, end;
	uint32_t k = 0;

	if (!__atomic_load_n(&dropin_known, __ATOMIC_ACQUIRE)) {
		dl_iterate_phdr(find_dropin, NULL);
		__atomic_store_n(&dropin_known, true, __ATOMIC_RELEASE);
	}
	start = __atomic_load_n(&dropin_start, __ATOMIC_RELAXED);
	end = __atomic_load_n(&dropin_end, __ATOMIC_RELAXED);
	while (k < depth && (uintptr_t)addrs[k] - start < end - start)
		k++;
	if (k)
		memmove(addrs, addrs + k, (depth - k) * sizeof(void *));
	return depth - k;
}

void profile_record(const void *p, size_t size, size_t obj_size)
{
	void *addrs[PROFILE_DEPTH];
	uint32_t depth, i, b;
	struct profile_rec *r;
	uint64_t r_bytes = chunk;

	profile_due = false;
	if (!p || !recs)
		return;
	usl_backtrace_init();
	depth = skip_dropin(addrs, usl_backtrace(addrs, PROFILE_DEPTH));
	ulock_lock(&profile_lock);
	if (free_top) {
		i = free_top - 1;
		free_top = recs[i].next;
	} else if (used < PROFILE_MAX_RECS) {
		i = used++;
	} else {
		nr_dropped++;
		ulock_unlock(&profile_lock);
		return;
	}
	r = &recs[i];
	r->addr = (uintptr_t)p;
	r->size = size;
	r->obj_size = obj_size ? obj_size : 1;
	r->weight = weight_of(r_bytes ? r_bytes : obj_size);
	r->time_ns = now_ns();
	r->depth = depth;
	memcpy(r->addrs, addrs, depth * sizeof(void *));
	b = bucket_of(r->addr);
	r->next = buckets[b];
	buckets[b] = i + 1;
	nr_live++;
	ulock_unlock(&profile_lock);
}

/* The record of @p, unlinked (under the lock), or false. */
static bool unlink_rec(uintptr_t a, bool drop)
{
	uint32_t *link = &buckets[bucket_of(a)];

	while (*link) {
		struct profile_rec *r = &recs[*link - 1];

		if (r->addr == a) {
			if (drop) {
				uint32_t i = *link - 1;

				*link = r->next;
				r->addr = 0;
				r->next = free_top;
				free_top = i + 1;
				nr_live--;
			}
			return true;
		}
		link = &r->next;
	}
	return false;
}

void profile_drop(const void *p)
{
	if (!recs)
		return;
	ulock_lock(&profile_lock);
	unlink_rec((uintptr_t)p, true);
	ulock_unlock(&profile_lock);
}

bool profile_has(const void *p)
{
	bool has;

	if (!recs)
		return false;
	ulock_lock(&profile_lock);
	has = unlink_rec((uintptr_t)p, false);
	ulock_unlock(&profile_lock);
	return has;
}

/* --------------------------------------------------------------- output */

struct out {
	int fd;
	size_t n;
	char buf[16384];
};

static void out_flush(struct out *o)
{
	size_t off = 0;

	while (off < o->n) {
		ssize_t w = write(o->fd, o->buf + off, o->n - off);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
	o->n = 0;
}

static __attribute__((format(printf, 2, 3))) void out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (sizeof(o->buf) - o->n < 1024)
		out_flush(o);
	va_start(ap, fmt);
	w = vsnprintf(o->buf + o->n, sizeof(o->buf) - o->n, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->n += (size_t)w < sizeof(o->buf) - o->n ? (size_t)w : sizeof(o->buf) - o->n - 1;
}

/* The estimates of record @r: objects and bytes (at least one object, its size). */
static void estimate(const struct profile_rec *r, uint64_t *count, uint64_t *bytes)
{
	double objs = r->weight / (double)r->obj_size;

	if (objs < 1)
		objs = 1;
	*count = (uint64_t)(objs + 0.5);
	*bytes = (uint64_t)(objs * (double)r->size + 0.5);
}

/*
 * profile_write - the live records, in gperftools' heap profile text
 * format: the header line, one line per record ("objects: bytes [objects:
 * bytes] @ return addresses", the estimates, in use and allocated alike),
 * and with @maps "MAPPED_LIBRARIES:" and /proc/self/maps (uslab-stat adds
 * the process's maps itself). Allocates nothing from uslab: the records
 * are copied under the lock to pages of their own, then written.
 * Return: 0, or -1 (no memory).
 */
int profile_write(int fd, bool maps)
{
	struct profile_rec *copy;
	size_t bytes, n = 0;
	uint64_t tc = 0, tb = 0;
	struct out *o;

	if (!recs)
		return -1;
	ulock_lock(&profile_lock);
	bytes = ALIGN_UP((size_t)used * sizeof(*copy) + sizeof(*o), 4096);
	copy = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (copy == MAP_FAILED) {
		ulock_unlock(&profile_lock);
		return -1;
	}
	for (uint32_t i = 0; i < used; i++)
		if (recs[i].addr)
			copy[n++] = recs[i];
	ulock_unlock(&profile_lock);
	o = (struct out *)(void *)(copy + used);
	o->fd = fd;
	o->n = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t c, b;

		estimate(&copy[i], &c, &b);
		tc += c;
		tb += b;
	}
	out_printf(o, "heap profile: %6llu: %8llu [%6llu: %8llu] @ heapprofile\n",
		   (unsigned long long)tc, (unsigned long long)tb, (unsigned long long)tc,
		   (unsigned long long)tb);
	for (size_t i = 0; i < n; i++) {
		uint64_t c, b;

		estimate(&copy[i], &c, &b);
		out_printf(o, "%6llu: %8llu [%6llu: %8llu] @", (unsigned long long)c,
			   (unsigned long long)b, (unsigned long long)c, (unsigned long long)b);
		for (uint32_t k = 0; k < copy[i].depth; k++)
			out_printf(o, " %p", copy[i].addrs[k]);
		out_printf(o, "\n");
	}
	if (maps) {
		int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

		out_printf(o, "\nMAPPED_LIBRARIES:\n");
		out_flush(o);
		if (mfd >= 0) {
			ssize_t r;

			while ((r = read(mfd, o->buf, sizeof(o->buf))) > 0) {
				o->n = (size_t)r;
				out_flush(o);
			}
			close(mfd);
		}
	}
	out_flush(o);
	munmap(copy, bytes);
	return 0;
}

/* USLAB_PROFILE=exit: uslab-heap.<pid>.prof in USLAB_PROFILE_DIR, else the current directory. */
static void at_exit(void)
{
	const char *d = getenv("USLAB_PROFILE_DIR");
	char path[4096];
	int fd;

	struct stat st;
	int n;

	n = snprintf(path, sizeof(path), "%s%suslab-heap.%d.prof", d && *d ? d : "",
		     d && *d ? "/" : "", (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(path)) {
		usl_warn("USLAB_PROFILE=exit: USLAB_PROFILE_DIR too long: no profile written");
		return;
	}
	/*
	 * Not through a symlink (another user's planted link), and without
	 * waiting on a FIFO: only a regular file is written (truncated after
	 * the check, so a FIFO or device is left as it was).
	 */
	fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0) {
		usl_warn("USLAB_PROFILE=exit: %s: %s", path, strerror(errno));
		return;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || ftruncate(fd, 0)) {
		usl_warn("USLAB_PROFILE=exit: %s: not a regular file: no profile written", path);
		close(fd);
		return;
	}
	profile_write(fd, true);
	close(fd);
}

/* Start-up (init.c): the table, when USLAB_PROFILE asks for a profile. */
void profile_init(void)
{
	void *m;

	if (usl_opt.profile == PROFILE_OFF || !usl_opt.profile_bytes)
		return;
	m = mmap(NULL,
		 (size_t)PROFILE_MAX_RECS * sizeof(struct profile_rec) +
			 PROFILE_BUCKETS * sizeof(uint32_t),
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		usl_warn("USLAB_PROFILE: no memory for the records: not profiling");
		return;
	}
	recs = m;
	buckets = (uint32_t *)(void *)(recs + PROFILE_MAX_RECS);
	if (usl_opt.profile == PROFILE_EXIT)
		atexit(at_exit);
	__atomic_store_n(&profile_enabled, true, __ATOMIC_RELEASE);
}

void profile_fork_prepare(void)
{
	ulock_lock(&profile_lock);
}

void profile_fork_parent(void)
{
	ulock_unlock(&profile_lock);
}

void profile_fork_child(void)
{
	ulock_init(&profile_lock);
}
