// SPDX-License-Identifier: MIT
/*
 * bench_socketalloc.c - a userspace analogue of Eric Dumazet's
 * socketallocbench (seed: socket-pipe-dentry-scalability.txt). In 2008,
 * close(socket()) a million times took 1.561 s on one CPU and 27.5 s when
 * eight CPUs each did it at once: every socket dirtied shared cache lines.
 * Here one "socket" is a file (192 bytes, zeroed at allocation like
 * get_empty_filp()), a dentry and an inode (with the 512 bytes of a
 * struct socket_alloc's socket after it), created and destroyed the way
 * 2.6.28's VFS did, and each patch of the series is a variant:
 *
 *	2008   malloc for all three objects; nr_files a shared atomic;
 *	       nr_dentry, nr_inodes and last_ino plain words under the locks;
 *	       d_alloc() links the dentry on the root's child list and takes a
 *	       reference on the root under dcache_lock, d_instantiate() takes
 *	       dcache_lock again, dput() undoes both (the root's count dropped
 *	       like atomic_dec_and_lock); new_inode() and iput() put the inode
 *	       on and off inode_in_use and sb->s_inodes under inode_lock;
 *	       init_file() and fput() take and drop a reference on the mount;
 *	       the file and the dentry are freed with liburcu's call_rcu, one
 *	       callback per object. Two deliberate departures from 2.6.28:
 *	       nr_files is a shared atomic here (the kernel's was already a
 *	       percpu_counter; p1 converts it), and the dentry is deferred
 *	       through call_rcu (2.6.28 freed unhashed dentries at once), so
 *	       that every variant but uslab-nodefer defers it like uslab's
 *	p1     nr_dentry (and nr_files, already per-CPU in 2008's kernel) a
 *	       per-thread-batched counter (uslab_counter)
 *	p2     + nr_inodes a uslab_counter
 *	p3     + last_ino from per-thread batches of 1024 (uslab_idgen)
 *	p4     + "single" dentries: no parent, no root reference, no
 *	       dcache_lock
 *	p5     + new_inode_single()/iput_single(): no inode lists, no inode_lock
 *	p6     + files from a USLAB_TYPESAFE_BY_RCU cache, freed at once
 *	       (SLAB_DESTROY_BY_RCU instead of call_rcu per file)
 *	p7     + no mount reference (MS_NOREFCOUNT)
 *	uslab  + dentries and inodes from uslab caches too, the dentry freed
 *	       with uslab_free_rcu() instead of malloc + call_rcu: the whole
 *	       pattern on uslab
 *	uslab-nodefer  the same with the dentry freed at once
 *	       (uslab_cache_free), as 2.6.28's d_free() freed an unhashed
 *	       dentry: what the deferred free costs, measured beside it
 *	uslab-late  the dentry freed with uslab_cache_free() LATE_RING (8192)
 *	       frees late (a ring per thread): a deferred free's distance
 *	       between free and reuse, without grace periods or the monitor
 *	       thread; CYCLES must be at least 4 * LATE_RING, so the ring
 *	       turns over
 *
 *	socketalloc VARIANT NTHREADS [CYCLES [REPS]]	(defaults uslab 1 1000000 3)
 *
 * Each of NTHREADS threads (thread i on CPU i mod ncpu) does CYCLES
 * create+destroy cycles; the threads are created for every repetition, wait
 * at a barrier and time themselves. An unreported repetition of CYCLES / 4
 * warms up first. Reported (medians of REPS):
 *
 *	wall_s      first start to last end (Ingo's question: can N threads
 *	            finish in the wall time of one?)
 *	mcps        million cycles per second over all threads
 *	p50/p99/p999 of one cycle: one cycle in 8 is timed with rdtsc (lfence
 *	            first; its own ~25 cycles included) into a per-thread
 *	            histogram (1.6% resolution), merged over the threads
 *	held_kb     (variants with uslab caches) memory in objects the caches
 *	            have handed out while every thread is done with its loop and
 *	            not yet exited: what the threads' sheaves, the barns and the
 *	            deferred frees hold, since the program holds none
 *	peak_rss_mb the process's VmHWM at the end
 *
 * After each repetition every counter must read 0 and every list be empty,
 * and every cycle's inode number must have been unique: without ID batches
 * (2008, p1, p2) their sum must be that of first .. first + n - 1; with
 * batches each thread records its runs of consecutive numbers, and no two
 * runs of any threads may overlap. A mismatch is an error (exit 1); a
 * clean run ends with an "ok" line saying what was checked.
 *
 * Every object is written at once (its reference count, 8 bytes at offset
 * 0, then its fields) and its count is decremented just before it is freed.
 * BENCH_WRITE=first4 (bench.h; variant "<VARIANT>-w4") adds a 4-byte store
 * at offset 0 right after each inode's and dentry's allocation, before that
 * initialisation, the same for malloc and uslab (not the file's: a
 * TYPESAFE_BY_RCU file's count is written last, see file_alloc()).
 */
#include "bench.h"

#include <errno.h>
#include <stdatomic.h>
#include <urcu/urcu-memb.h>
#include <uslab.h>

/* ------------------------------------------------------------ the objects */

struct list {
	struct list *next, *prev;
};

static void list_init(struct list *h)
{
	h->next = h->prev = h;
}

static void list_add(struct list *n, struct list *h)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}

static void list_del(struct list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = NULL;
}

struct inode {
	_Atomic long i_count;
	uint64_t i_ino;
	unsigned int i_mode, i_flags;
	struct list i_list;    /* inode_in_use */
	struct list i_sb_list; /* sb->s_inodes */
	struct list i_dentry;  /* the dentries of this inode */
	void *i_private;
	char rest[512]; /* struct socket_alloc: the socket follows the inode */
};

struct dentry {
	_Atomic long d_count;
	unsigned int d_flags;
	struct inode *d_inode;
	struct dentry *d_parent;
	struct list d_child; /* on the parent's d_subdirs */
	struct list d_subdirs;
	struct list d_alias; /* on the inode's i_dentry */
	struct rcu_head d_rcu;
	uint64_t d_name_hash;
	char d_iname[40];
	char rest[32];
};

struct file {
	_Atomic long f_count;
	struct dentry *f_dentry;
	void *f_vfsmnt;
	unsigned int f_flags, f_mode;
	int64_t f_pos;
	void *private_data;
	struct rcu_head f_rcu;
	char rest[112]; /* 192 bytes, zeroed at allocation like get_empty_filp() */
};

/* ------------------------------------------------------ the shared state */

enum {
	P1_NR_DENTRY = 1 << 0,
	P2_NR_INODES = 1 << 1,
	P3_LAST_INO = 1 << 2,
	P4_SINGLE_DENTRY = 1 << 3,
	P5_SINGLE_INODE = 1 << 4,
	P6_FILE_TYPESAFE = 1 << 5,
	P7_NO_MNT_REF = 1 << 6,
	USLAB_ALL = 1 << 7,
	NO_DEFER = 1 << 8,
	LATE = 1 << 9,
};

/* uslab-late: frees of dentries wait in a ring of this many per thread. */
#define LATE_RING 8192
static __thread struct dentry **late_ring;
static __thread unsigned long late_pos;

static const struct {
	const char *name;
	unsigned int features;
} variants[] = {
#define V_P1 P1_NR_DENTRY
#define V_P2 (V_P1 | P2_NR_INODES)
#define V_P3 (V_P2 | P3_LAST_INO)
#define V_P4 (V_P3 | P4_SINGLE_DENTRY)
#define V_P5 (V_P4 | P5_SINGLE_INODE)
#define V_P6 (V_P5 | P6_FILE_TYPESAFE)
#define V_P7 (V_P6 | P7_NO_MNT_REF)
#define V_USLAB (V_P7 | USLAB_ALL)
	{ "2008", 0 },
	{ "p1", V_P1 },
	{ "p2", V_P2 },
	{ "p3", V_P3 },
	{ "p4", V_P4 },
	{ "p5", V_P5 },
	{ "p6", V_P6 },
	{ "p7", V_P7 },
	{ "uslab", V_USLAB },
	{ "uslab-nodefer", V_USLAB | NO_DEFER },
	{ "uslab-late", V_USLAB | NO_DEFER | LATE },
};

static unsigned int features;
#define HAS(f) (features & (f))
static bool w4; /* BENCH_WRITE=first4 */

/* BENCH_WRITE=first4: the 4-byte store right after an allocation (bench.h). */
static inline void *written(void *p)
{
	if (w4 && p)
		write_first4(p, 1);
	return p;
}

/* Each shared word on its own cache line, as they were in the kernel. */
#define LINE __attribute__((aligned(64)))
static pthread_mutex_t dcache_lock LINE;
static pthread_mutex_t inode_lock LINE;
static struct dentry sock_root LINE; /* the socket mount's root dentry */
static struct list inode_in_use LINE;
static struct list sb_inodes LINE;
static long nr_dentry_locked LINE;    /* under dcache_lock */
static long nr_inodes_locked LINE;    /* under inode_lock */
static uint64_t last_ino_locked LINE; /* under inode_lock */
static _Atomic long nr_files_atomic LINE;
static _Atomic long mnt_count LINE; /* the socket mount's reference count */
static struct uslab_counter nr_files, nr_dentry, nr_inodes;
static struct uslab_idgen last_ino;
static struct uslab_cache *filp_cache, *dentry_cache, *inode_cache;

/* ------------------------------------------------- allocation and freeing */

static void file_free_rcu(struct rcu_head *h)
{
	free(caa_container_of(h, struct file, f_rcu));
}

static void d_free_rcu(struct rcu_head *h)
{
	free(caa_container_of(h, struct dentry, d_rcu));
}

static struct file *file_alloc(void)
{
	struct file *f = HAS(P6_FILE_TYPESAFE) ? uslab_cache_alloc(filp_cache) : malloc(sizeof(*f));

	if (!f)
		return NULL;
	/*
	 * A TYPESAFE_BY_RCU file may still be looked at by a reader that found
	 * it before it was freed: everything but the count is set first, and
	 * the count last, with release (as the kernel's get_empty_filp()).
	 */
	memset((char *)f + sizeof(f->f_count), 0, sizeof(*f) - sizeof(f->f_count));
	atomic_store_explicit(&f->f_count, 1, memory_order_release);
	return f;
}

static void file_free(struct file *f)
{
	if (HAS(P6_FILE_TYPESAFE))
		uslab_cache_free(filp_cache, f);
	else
		urcu_memb_call_rcu(&f->f_rcu, file_free_rcu);
}

/* new_inode(): one inode with a fresh number, on the lists unless single. */
static struct inode *new_inode(void)
{
	struct inode *inode =
		written(HAS(USLAB_ALL) ? uslab_cache_alloc(inode_cache) : malloc(sizeof(*inode)));

	if (!inode)
		return NULL;
	atomic_store_explicit(&inode->i_count, 1, memory_order_relaxed);
	inode->i_mode = 0140777; /* S_IFSOCK */
	inode->i_flags = 0;
	inode->i_private = NULL;
	list_init(&inode->i_dentry);
	if (HAS(P2_NR_INODES))
		uslab_counter_add(&nr_inodes, 1);
	if (HAS(P3_LAST_INO))
		inode->i_ino = uslab_idgen_next(&last_ino);
	if (!HAS(P5_SINGLE_INODE) || !HAS(P3_LAST_INO) || !HAS(P2_NR_INODES)) {
		pthread_mutex_lock(&inode_lock);
		if (!HAS(P2_NR_INODES))
			nr_inodes_locked++;
		if (!HAS(P5_SINGLE_INODE)) {
			list_add(&inode->i_list, &inode_in_use);
			list_add(&inode->i_sb_list, &sb_inodes);
		}
		if (!HAS(P3_LAST_INO))
			inode->i_ino = ++last_ino_locked;
		pthread_mutex_unlock(&inode_lock);
	}
	return inode;
}

/* iput(): the last reference drops the inode off its lists and frees it. */
static void iput(struct inode *inode)
{
	if (atomic_fetch_sub_explicit(&inode->i_count, 1, memory_order_acq_rel) != 1)
		return;
	if (!HAS(P5_SINGLE_INODE) || !HAS(P2_NR_INODES)) {
		pthread_mutex_lock(&inode_lock);
		if (!HAS(P5_SINGLE_INODE)) {
			list_del(&inode->i_list);
			list_del(&inode->i_sb_list);
		}
		if (!HAS(P2_NR_INODES))
			nr_inodes_locked--;
		pthread_mutex_unlock(&inode_lock);
	}
	if (HAS(P2_NR_INODES))
		uslab_counter_add(&nr_inodes, -1);
	if (HAS(USLAB_ALL))
		uslab_cache_free(inode_cache, inode);
	else
		free(inode);
}

/* d_alloc() and d_instantiate(): a dentry named after the inode number. */
static struct dentry *d_alloc_instantiate(struct inode *inode)
{
	struct dentry *d =
		written(HAS(USLAB_ALL) ? uslab_cache_alloc(dentry_cache) : malloc(sizeof(*d)));

	if (!d)
		return NULL;
	atomic_store_explicit(&d->d_count, 1, memory_order_relaxed);
	d->d_flags = 0;
	d->d_name_hash = inode->i_ino * 0x9e3779b97f4a7c15ull;
	memcpy(d->d_iname, "socket:", 8);
	list_init(&d->d_subdirs);
	if (HAS(P1_NR_DENTRY))
		uslab_counter_add(&nr_dentry, 1);
	if (HAS(P4_SINGLE_DENTRY)) {
		d->d_parent = d; /* its own parent, like a disconnected root */
		d->d_inode = inode;
		list_add(&d->d_alias, &inode->i_dentry);
		return d;
	}
	/* d_alloc() */
	atomic_fetch_add_explicit(&sock_root.d_count, 1, memory_order_relaxed); /* dget(parent) */
	pthread_mutex_lock(&dcache_lock);
	d->d_parent = &sock_root;
	list_add(&d->d_child, &sock_root.d_subdirs);
	if (!HAS(P1_NR_DENTRY))
		nr_dentry_locked++;
	pthread_mutex_unlock(&dcache_lock);
	/* d_instantiate() */
	pthread_mutex_lock(&dcache_lock);
	list_add(&d->d_alias, &inode->i_dentry);
	d->d_inode = inode;
	pthread_mutex_unlock(&dcache_lock);
	return d;
}

static void d_free(struct dentry *d)
{
	if (HAS(LATE)) {
		struct dentry **slot = &late_ring[late_pos++ % LATE_RING];

		if (*slot)
			uslab_cache_free(dentry_cache, *slot);
		*slot = d;
	} else if (HAS(NO_DEFER))
		uslab_cache_free(dentry_cache, d);
	else if (HAS(USLAB_ALL))
		uslab_free_rcu(d);
	else
		urcu_memb_call_rcu(&d->d_rcu, d_free_rcu);
}

/*
 * atomic_dec_and_lock(): drop a reference; only the last one takes the
 * lock (and returns true with it held).
 */
static bool dec_and_lock(_Atomic long *count, pthread_mutex_t *lock)
{
	long c = atomic_load_explicit(count, memory_order_relaxed);

	while (c > 1)
		if (atomic_compare_exchange_weak_explicit(count, &c, c - 1, memory_order_acq_rel,
							  memory_order_relaxed))
			return false;
	pthread_mutex_lock(lock);
	if (atomic_fetch_sub_explicit(count, 1, memory_order_acq_rel) == 1)
		return true;
	pthread_mutex_unlock(lock);
	return false;
}

/* dput(): the last reference kills the dentry, then its inode and parent. */
static void dput(struct dentry *d)
{
	struct inode *inode = d->d_inode;

	if (HAS(P4_SINGLE_DENTRY)) {
		if (atomic_fetch_sub_explicit(&d->d_count, 1, memory_order_acq_rel) != 1)
			return;
		list_del(&d->d_alias);
	} else {
		if (!dec_and_lock(&d->d_count, &dcache_lock))
			return;
		list_del(&d->d_alias);
		list_del(&d->d_child);
		if (!HAS(P1_NR_DENTRY))
			nr_dentry_locked--;
		pthread_mutex_unlock(&dcache_lock);
		if (dec_and_lock(&sock_root.d_count, &dcache_lock)) /* never the last */
			abort();
	}
	if (HAS(P1_NR_DENTRY))
		uslab_counter_add(&nr_dentry, -1);
	d_free(d);
	iput(inode);
}

/* socket(): inode, dentry, file; close(): fput() undoes them. */
static struct file *sock_create(void)
{
	struct inode *inode = new_inode();
	struct dentry *d;
	struct file *f;

	if (!inode)
		return NULL;
	d = d_alloc_instantiate(inode);
	if (!d) {
		iput(inode);
		return NULL;
	}
	f = file_alloc();
	if (!f) {
		dput(d);
		return NULL;
	}
	f->f_dentry = d;
	f->f_flags = 02; /* O_RDWR */
	f->f_mode = 3;
	f->f_vfsmnt = &mnt_count;
	if (!HAS(P7_NO_MNT_REF))
		atomic_fetch_add_explicit(&mnt_count, 1, memory_order_relaxed); /* mntget() */
	if (HAS(P1_NR_DENTRY))
		uslab_counter_add(&nr_files, 1);
	else
		atomic_fetch_add_explicit(&nr_files_atomic, 1, memory_order_relaxed);
	return f;
}

static void sock_close(struct file *f)
{
	struct dentry *d = f->f_dentry;

	if (atomic_fetch_sub_explicit(&f->f_count, 1, memory_order_acq_rel) != 1)
		return;
	/* __fput() */
	dput(d);
	if (!HAS(P7_NO_MNT_REF))
		atomic_fetch_sub_explicit(&mnt_count, 1, memory_order_relaxed); /* mntput() */
	if (HAS(P1_NR_DENTRY))
		uslab_counter_add(&nr_files, -1);
	else
		atomic_fetch_sub_explicit(&nr_files_atomic, 1, memory_order_relaxed);
	file_free(f);
}

/* ---------------------------------------------------------- the threads */

#define SAMPLE_EVERY 8

/* A run of consecutive inode numbers one thread was given. */
struct run {
	uint64_t first, n;
};

struct worker {
	pthread_t thread;
	int cpu;
	double start, end;
	uint64_t ino_sum; /* sum of the inode numbers it saw */
	struct run *runs; /* with ID batches: its runs of consecutive numbers */
	size_t nruns, runs_cap;
	int failed;
	uint64_t hist[HBUCKETS];
};

static unsigned long cycles;
static pthread_barrier_t go, done, release;

__attribute__((noinline)) void run_cycles(struct worker *w);
/* Note @ino in @w's runs (variants with ID batches). Return: false without memory. */
static bool note_ino(struct worker *w, uint64_t ino)
{
	struct run *last = w->nruns ? &w->runs[w->nruns - 1] : NULL;

	if (last && ino == last->first + last->n) {
		last->n++;
		return true;
	}
	if (w->nruns == w->runs_cap) {
		size_t cap = w->runs_cap ? 2 * w->runs_cap : 1024;
		struct run *r = realloc(w->runs, cap * sizeof(*r));

		if (!r)
			return false;
		w->runs = r;
		w->runs_cap = cap;
	}
	w->runs[w->nruns++] = (struct run){ ino, 1 };
	return true;
}

static int cmp_run(const void *a, const void *b)
{
	uint64_t x = ((const struct run *)a)->first, y = ((const struct run *)b)->first;

	return x < y ? -1 : x > y;
}

/* With ID batches: no two runs of any threads overlap. Return: true if so. */
static bool runs_disjoint(struct worker *w, int nthreads)
{
	size_t n = 0, k = 0;
	struct run *all;
	bool ok = true;

	for (int t = 0; t < nthreads; t++)
		n += w[t].nruns;
	all = malloc((n ? n : 1) * sizeof(*all));
	if (!all)
		return false;
	for (int t = 0; t < nthreads; t++) {
		memcpy(all + k, w[t].runs, w[t].nruns * sizeof(*all));
		k += w[t].nruns;
	}
	qsort(all, n, sizeof(*all), cmp_run);
	for (size_t i = 1; i < n && ok; i++)
		ok = all[i - 1].first + all[i - 1].n <= all[i].first;
	free(all);
	return ok;
}

__attribute__((noinline)) void run_cycles(struct worker *w)
{
	uint64_t sum = 0;

	for (unsigned long i = 0; i < cycles; i++) {
		uint64_t t0 = 0;
		struct file *f;

		if (!(i % SAMPLE_EVERY))
			t0 = tsc_now();
		f = sock_create();
		if (!f) {
			w->failed = errno ? errno : ENOMEM;
			break;
		}
		sum += f->f_dentry->d_inode->i_ino;
		if (HAS(P3_LAST_INO) && !note_ino(w, f->f_dentry->d_inode->i_ino)) {
			w->failed = ENOMEM;
			break;
		}
		sock_close(f);
		if (!(i % SAMPLE_EVERY))
			hist_add(w->hist, tsc_now() - t0);
	}
	w->ino_sum = sum;
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	bool rcu = !HAS(USLAB_ALL);

	pin_to_cpu(w->cpu);
	if (rcu)
		urcu_memb_register_thread();
	if (HAS(LATE) && !(late_ring = calloc(LATE_RING, sizeof(*late_ring))))
		w->failed = ENOMEM;
	pthread_barrier_wait(&go);
	w->start = wall_ns();
	if (!w->failed)
		run_cycles(w);
	if (late_ring) { /* timed: the frees the ring still delays */
		for (unsigned long i = 0; i < LATE_RING; i++)
			if (late_ring[i])
				uslab_cache_free(dentry_cache, late_ring[i]);
		free(late_ring);
		late_ring = NULL;
		late_pos = 0;
	}
	w->end = wall_ns();
	pthread_barrier_wait(&done); /* main reads what the caches hold */
	pthread_barrier_wait(&release);
	if (rcu)
		urcu_memb_unregister_thread();
	return NULL;
}

/* Bytes in objects @c has handed out (0 without the cache). */
static double held_bytes(struct uslab_cache *c)
{
	struct uslab_cache_stats st;

	if (!c || uslab_cache_stats(c, &st))
		return 0;
	return (double)st.active_objs * st.object_size;
}

static bool counters_zero(void)
{
	return nr_dentry_locked == 0 && nr_inodes_locked == 0 &&
	       atomic_load(&nr_files_atomic) == 0 && uslab_counter_sum(&nr_files) == 0 &&
	       uslab_counter_sum(&nr_dentry) == 0 && uslab_counter_sum(&nr_inodes) == 0 &&
	       atomic_load(&mnt_count) == 0 && atomic_load(&sock_root.d_count) == 1 &&
	       sock_root.d_subdirs.next == &sock_root.d_subdirs &&
	       inode_in_use.next == &inode_in_use && sb_inodes.next == &sb_inodes;
}

int main(int argc, char **argv)
{
	const char *vname = argc > 1 ? argv[1] : "uslab";
	char name[48];
	int nthreads = argc > 2 ? atoi(argv[2]) : 1;
	int reps = argc > 4 ? atoi(argv[4]) : 3;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double *wall, *mcps, *held;
	uint64_t *hist, *p50, *p99, *p999;
	unsigned long full;
	struct worker *w;
	char param[32];
	int v;

	cycles = argc > 3 ? strtoul(argv[3], NULL, 0) : bench_quick() ? 100000 : 1000000;
	for (v = 0; v < (int)(sizeof(variants) / sizeof(variants[0])); v++)
		if (!strcmp(vname, variants[v].name))
			break;
	if (v == (int)(sizeof(variants) / sizeof(variants[0])) || nthreads < 1 || reps < 1 ||
	    cycles < SAMPLE_EVERY || ((variants[v].features & LATE) && cycles < 4 * LATE_RING)) {
		fprintf(stderr,
			"usage: %s 2008|p1|p2|p3|p4|p5|p6|p7|uslab|uslab-nodefer|uslab-late "
			"NTHREADS [CYCLES [REPS]]\n"
			"(CYCLES >= %d; >= %d for uslab-late, whose ring must turn over)\n",
			argv[0], SAMPLE_EVERY, 4 * LATE_RING);
		return 2;
	}
	features = variants[v].features;
	w4 = bench_w4();
	write_name(name, sizeof(name), vname);

	pthread_mutex_init(&dcache_lock, NULL);
	pthread_mutex_init(&inode_lock, NULL);
	atomic_store(&sock_root.d_count, 1);
	list_init(&sock_root.d_subdirs);
	list_init(&inode_in_use);
	list_init(&sb_inodes);
	if (uslab_counter_init(&nr_files, 0) || uslab_counter_init(&nr_dentry, 0) ||
	    uslab_counter_init(&nr_inodes, 0) || uslab_idgen_init(&last_ino, 1)) {
		perror("socketalloc: counters");
		return 1;
	}
	if (HAS(P6_FILE_TYPESAFE))
		filp_cache = uslab_cache_create("filp", sizeof(struct file), NULL,
						USLAB_HWCACHE_ALIGN | USLAB_TYPESAFE_BY_RCU);
	if (HAS(USLAB_ALL)) {
		dentry_cache = uslab_cache_create("dentry", sizeof(struct dentry), NULL, 0);
		inode_cache = uslab_cache_create("sock_inode_cache", sizeof(struct inode), NULL,
						 USLAB_HWCACHE_ALIGN);
	}
	if ((HAS(P6_FILE_TYPESAFE) && !filp_cache) ||
	    (HAS(USLAB_ALL) && (!dentry_cache || !inode_cache))) {
		perror("socketalloc: uslab_cache_create");
		return 1;
	}

	w = calloc((size_t)nthreads, sizeof(*w));
	wall = calloc((size_t)reps, sizeof(double));
	mcps = calloc((size_t)reps, sizeof(double));
	held = calloc((size_t)reps, sizeof(double));
	p50 = calloc((size_t)reps, sizeof(uint64_t));
	p99 = calloc((size_t)reps, sizeof(uint64_t));
	p999 = calloc((size_t)reps, sizeof(uint64_t));
	hist = calloc(HBUCKETS, sizeof(uint64_t));
	if (!w || !wall || !mcps || !held || !p50 || !p99 || !p999 || !hist) {
		perror("socketalloc");
		return 1;
	}
	full = cycles;
	/* Repetition -1 warms up (a quarter of the cycles, not reported): first
	 * slabs and pages, liburcu's and uslab's threads started. */
	for (int r = -1; r < reps; r++) {
		double t0 = 0, t1 = 0;
		uint64_t first = 0, samples = 0, ino_sum = 0, want_sum, n;

		cycles = r < 0 ? (full / 4 > SAMPLE_EVERY ? full / 4 : SAMPLE_EVERY) : full;

		if (!HAS(P3_LAST_INO))
			first = last_ino_locked + 1;
		memset(hist, 0, HBUCKETS * sizeof(uint64_t));
		pthread_barrier_init(&go, NULL, (unsigned int)nthreads);
		pthread_barrier_init(&done, NULL, (unsigned int)nthreads + 1);
		pthread_barrier_init(&release, NULL, (unsigned int)nthreads + 1);
		for (int t = 0; t < nthreads; t++) {
			struct run *runs = w[t].runs; /* kept across repetitions */
			size_t cap = w[t].runs_cap;

			memset(&w[t], 0, sizeof(w[t]));
			w[t].runs = runs;
			w[t].runs_cap = cap;
			w[t].cpu = (int)(t % ncpu);
			errno = pthread_create(&w[t].thread, NULL, worker, &w[t]);
			if (errno) {
				perror("socketalloc: pthread_create");
				return 1;
			}
		}
		pthread_barrier_wait(&done);
		if (r >= 0)
			held[r] = held_bytes(filp_cache) + held_bytes(dentry_cache) +
				  held_bytes(inode_cache);
		pthread_barrier_wait(&release);
		for (int t = 0; t < nthreads; t++) {
			pthread_join(w[t].thread, NULL);
			if (w[t].failed) {
				fprintf(stderr, "socketalloc: thread %d: %s\n", t,
					strerror(w[t].failed));
				return 1;
			}
			if (t == 0 || w[t].start < t0)
				t0 = w[t].start;
			if (t == 0 || w[t].end > t1)
				t1 = w[t].end;
			ino_sum += w[t].ino_sum;
			for (int b = 0; b < HBUCKETS; b++) {
				hist[b] += w[t].hist[b];
				samples += w[t].hist[b];
			}
		}
		pthread_barrier_destroy(&go);
		pthread_barrier_destroy(&done);
		pthread_barrier_destroy(&release);
		urcu_memb_barrier(); /* the files and dentries call_rcu still holds */
		uslab_rcu_barrier();
		if (!counters_zero()) {
			fprintf(stderr, "socketalloc: %s: a counter or list is not back to 0\n",
				name);
			return 1;
		}
		/* Without ID batches the numbers are first .. first + n - 1 (mod 2^64). */
		n = (uint64_t)nthreads * cycles;
		want_sum = n * first + (n % 2 ? n * ((n - 1) / 2) : (n / 2) * (n - 1));
		if (HAS(P3_LAST_INO) ? !runs_disjoint(w, nthreads) : ino_sum != want_sum) {
			fprintf(stderr, "socketalloc: %s: inode numbers repeated or skipped\n",
				name);
			return 1;
		}
		if (r < 0)
			continue;
		wall[r] = (t1 - t0) / 1e9;
		mcps[r] = (double)cycles * nthreads / (t1 - t0) * 1e3;
		p50[r] = hist_quantile(hist, samples, 0.50);
		p99[r] = hist_quantile(hist, samples, 0.99);
		p999[r] = hist_quantile(hist, samples, 0.999);
	}
	snprintf(param, sizeof(param), "%dT", nthreads);
	report_value("socketalloc", name, param, "wall_s", median(wall, (size_t)reps));
	report_value("socketalloc", name, param, "mcps", median(mcps, (size_t)reps));
	{
		double d50[reps], d99[reps], d999[reps];

		for (int r = 0; r < reps; r++) {
			d50[r] = (double)p50[r];
			d99[r] = (double)p99[r];
			d999[r] = (double)p999[r];
		}
		report_value("socketalloc", name, param, "p50_ns",
			     median(d50, (size_t)reps) / tsc_per_ns());
		report_value("socketalloc", name, param, "p99_ns",
			     median(d99, (size_t)reps) / tsc_per_ns());
		report_value("socketalloc", name, param, "p999_ns",
			     median(d999, (size_t)reps) / tsc_per_ns());
	}
	if (filp_cache)
		report_value("socketalloc", name, param, "held_kb",
			     median(held, (size_t)reps) / 1024);
	report_value("socketalloc", name, param, "peak_rss_mb", proc_status_mb("VmHWM:"));
	printf("ok socketalloc %s %dT: %d repetitions, every counter 0, every list empty, "
	       "%lu inode numbers per repetition unique\n",
	       name, nthreads, reps + 1, cycles * (unsigned long)nthreads);
	for (int t = 0; t < nthreads; t++)
		free(w[t].runs);
	return 0;
}
