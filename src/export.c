// SPDX-License-Identifier: MIT
/*
 * export.c - what the person running a program can see of its caches:
 * uslab_stats_print() (/proc/slabinfo's format), USLAB_STATS=exit (the
 * same table on stderr at exit), and USLAB_STATS=1: a snapshot of every
 * cache, and the page heap's figures, in a file uslab-stat.<pid> of the
 * user's own directory (export.h), rewritten by a thread of its own every
 * USLAB_STATS_MS milliseconds, for uslab-stat to read. A failure to
 * export (no directory of the user's own, a full file system, no thread)
 * is one warning; the program goes on.
 *
 * Nothing here is on a fast path: a snapshot is uslab_cache_stats() of
 * every cache (the node lock, the barn lock, each thread's lock in turn),
 * taken under caches_lock by the exporter thread. The file is removed at
 * exit; a process that dies without exit leaves it behind, and readers
 * tell it from a live one by the pid's start time (export.h).
 *
 * Layer: above kmalloc.c (it reads every layer's counters through
 * lifecycle.c, cache.c, thread.c and rcu.c's public calls, and
 * lifecycle_heap_stats()).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "front.h"
/* (After front.h, which sets how <uslab.h> is read inside the library.) */
#include "export.h"

static struct export_header *map; /* the file, EXPORT_MAX_ROWS rows long */
static int dir_fd = -1;		  /* its directory (export_dir()) */
static char dir[EXPORT_DIR_MAX + 32];
static char name[48]; /* EXPORT_PREFIX and the pid */
static bool exporter_running;
static int exit_fd = -1; /* USLAB_STATS=exit: stderr as it was at start-up */

static uint64_t ns_of(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct gather {
	struct export_row *rows;
	uint32_t n, max;
	struct uslab_node_stats *nodes; /* the node table, or NULL */
	uint32_t nr_nodes;
};

/* The node table's entries per row: the NUMA nodes, 0 with one (no table). */
static uint32_t map_nodes;

/* One cache's row (cache_for_each's callback: caches_lock held). */
static void gather_one(struct uslab_cache *c, void *arg)
{
	struct gather *g = arg;
	struct export_row *r;

	if (g->n == g->max)
		return;
	r = &g->rows[g->n];
	memset(r, 0, sizeof(*r));
	r->index = g->n++;
	snprintf(r->name, sizeof(r->name), "%s", c->name);
	r->flags = c->flags | c->debug;
	lifecycle_stats(c, &r->st); /* (uslab's own caches too: no handle check) */
	r->sheaved = thread_sum_sheaved(c);
	r->guard_objs = guard_live(c);
	for (uint32_t nid = 0; g->nodes && nid < g->nr_nodes && nid < c->nr_nodes; nid++)
		lifecycle_node_stats(c, nid, &g->nodes[(size_t)r->index * g->nr_nodes + nid]);
}

/*
 * Rows of every cache into @rows (at most @max), in the list's order (newest
 * first). Return: how many.
 */
static uint32_t gather(struct export_row *rows, uint32_t max, struct uslab_node_stats *nodes,
		       uint32_t nr_nodes)
{
	struct gather g = { rows, 0, max, nodes, nr_nodes };

	cache_for_each(gather_one, &g);
	return g.n;
}

/* Rewrite the snapshot: the rows between two increments of seq. */
static void refresh(void)
{
	uint64_t t0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	struct export_row *rows = (struct export_row *)(map + 1);
	struct uslab_rcu_stats rcu;
	struct uslab_heap_stats heap;

	/*
	 * Odd, then a release fence: the rows written next cannot be seen
	 * before the odd count (a store alone would not keep later stores
	 * after it on a weakly ordered CPU). TSan does not take fences; its
	 * builds are x86, where the seq_cst store is enough.
	 */
#ifdef USLAB_PRIV_TSAN
	__atomic_store_n(&map->seq, map->seq + 1, __ATOMIC_SEQ_CST);
#else
	__atomic_store_n(&map->seq, map->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
	map->nrows = gather(
		rows, EXPORT_MAX_ROWS,
		map_nodes ? (struct uslab_node_stats *)(void *)(rows + EXPORT_MAX_ROWS) : NULL,
		map_nodes);
	if (!uslab_rcu_stats(&rcu))
		map->rcu = rcu;
	lifecycle_heap_stats(&heap);
	map->heap = heap;
	map->reports = uslab_bug_count();
	map->updated_ns = ns_of(CLOCK_REALTIME);
	map->refreshes++;
	map->refresh_ns = ns_of(CLOCK_THREAD_CPUTIME_ID) - t0;
	__atomic_store_n(&map->seq, map->seq + 1, __ATOMIC_RELEASE); /* even */
}

/*
 * USLAB_PROFILE=on: the heap profile (profile.c) into EXPORT_HEAP_PREFIX<pid>
 * beside the snapshot, written under a temporary name and renamed over it
 * (a reader sees a whole one).
 */
static void refresh_profile(void)
{
	char file[sizeof(name) + 8], tmp[sizeof(name) + 16];
	struct stat st;
	int fd;

	if (!__atomic_load_n(&profile_enabled, __ATOMIC_RELAXED))
		return;
	snprintf(file, sizeof(file), "%s%d", EXPORT_HEAP_PREFIX, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.new", file);
	/* (No wait on a FIFO someone left at the name: O_NONBLOCK, then a regular file only.) */
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode) || ftruncate(fd, 0))) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		return;
	profile_write(fd, false);
	close(fd);
	renameat(dir_fd, tmp, dir_fd, file);
}

static void *exporter_main(void *arg)
{
	struct timespec ts = { usl_opt.stats_ms / 1000, (long)(usl_opt.stats_ms % 1000) * 1000000 };

	(void)arg;
	for (;;) {
		refresh();
		refresh_profile();
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static const struct usl_bgthread exporter = { exporter_main, "uslab-stats" };

/*
 * USLAB_STATS=exit: the table, headed by pid and program, on the stderr the
 * program started with. A copy of that descriptor is taken at start-up, so
 * a program that closes or redirects stderr in its own exit handler (which
 * runs before this one: atexit's order) still shows the table.
 */
static void print_exit_table(void)
{
	FILE *f = exit_fd >= 0 ? fdopen(exit_fd, "w") : NULL;

	if (!f)
		return;
	exit_fd = -1;
	fprintf(f, "uslab: statistics of pid %d (%s) at exit\n", (int)getpid(),
		program_invocation_short_name);
	uslab_stats_print(f);
	fclose(f);
}

/* At exit: the table (USLAB_STATS=exit), the file removed. */
static void at_exit(void)
{
	if (usl_opt.stats == STATS_EXIT)
		print_exit_table();
	if (map) {
		char file[sizeof(name) + 8];

		unlinkat(dir_fd, name, 0);
		snprintf(file, sizeof(file), "%s%d", EXPORT_HEAP_PREFIX, (int)getpid());
		unlinkat(dir_fd, file, 0);
	}
}

/* Remove the files of this user's exporters that died without exit (a kill, a crash). */
static void sweep_stale(void)
{
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		int pid;

		if (strncmp(e->d_name, EXPORT_PREFIX, strlen(EXPORT_PREFIX)))
			continue;
		pid = export_pid_of(e->d_name + strlen(EXPORT_PREFIX));
		if (pid > 0 && kill(pid, 0) && errno == ESRCH)
			unlinkat(dir_fd, e->d_name, 0);
	}
	closedir(d);
}

/*
 * This user's directory (export_dir()), made if missing, opened and checked:
 * not a symlink, a directory, the user's own, writable by nobody else.
 * Return: 0, or -1 after a warning saying why not.
 */
static int export_open_dir(void)
{
	uid_t uid = geteuid();
	const char *why;
	struct stat sb;

	if (!export_dir(dir, sizeof(dir), uid)) {
		usl_warn("USLAB_STATS=1: not exporting: USLAB_STATS_DIR must be an absolute path "
			 "of at most %d bytes",
			 EXPORT_DIR_MAX);
		return -1;
	}
	if (mkdir(dir, 0700) && errno != EEXIST)
		goto fail_errno;
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0)
		goto fail_errno;
	if (fstat(dir_fd, &sb))
		goto fail_errno;
	why = export_dir_refusal(&sb, uid);
	if (why) {
		usl_warn("USLAB_STATS=1: not exporting: %s is %s (set USLAB_STATS_DIR to a "
			 "directory of your own)",
			 dir, why);
		goto fail;
	}
	return 0;
fail_errno:
	usl_warn("USLAB_STATS=1: not exporting: %s: %s", dir, strerror(errno));
fail:
	if (dir_fd >= 0)
		close(dir_fd);
	dir_fd = -1;
	return -1;
}

/*
 * Create and map this process's file, with its header. Its blocks are
 * reserved before it is mapped (a full tmpfs is ENOSPC here, not a SIGBUS
 * at the first store). It is made under a temporary name and renamed over
 * the final one once complete: a reader of an older file of this pid (an
 * image before an exec) keeps that file whole. Return: 0, or -1 after a
 * warning saying why not.
 */
static int export_open(void)
{
	size_t bytes;
	char tmp[sizeof(name) + 8];
	struct stat sb;
	FILE *opts;
	int fd, err;

	if (export_open_dir())
		return -1;
	sweep_stale();
	/* With NUMA on, the node table too (nodes beyond the file's table are not shown). */
	map_nodes = numa_on() ? numa_topo.nr_nodes : 0;
	if (map_nodes > EXPORT_MAX_NODES)
		map_nodes = EXPORT_MAX_NODES;
	bytes = export_file_bytes(map_nodes);
	snprintf(name, sizeof(name), "%s%d", EXPORT_PREFIX, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.new", name);
	unlinkat(dir_fd, tmp, 0); /* left by a crash between open and rename */
	fd = openat(dir_fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = errno;
		goto fail;
	}
	err = posix_fallocate(fd, 0, (off_t)bytes);
	if (!err) {
		map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			map = NULL;
			err = ENOMEM;
		}
	}
	close(fd);
	if (err)
		goto fail_unlink;
	map->version = EXPORT_VERSION;
	map->nr_nodes = map_nodes;
	map->row_size = sizeof(struct export_row);
	map->pid = (int32_t)getpid();
	map->starttime = export_starttime(map->pid);
	if (!stat("/proc/self/exe", &sb)) {
		map->exe_dev = sb.st_dev;
		map->exe_ino = sb.st_ino;
	}
	opts = fmemopen(map->options, sizeof(map->options) - 1, "w");
	if (opts) {
		options_print(opts); /* (inside the start-up: not the exported call) */
		fclose(opts);
	}
	__atomic_store_n(&map->magic, EXPORT_MAGIC, __ATOMIC_RELEASE);
	if (!renameat(dir_fd, tmp, dir_fd, name))
		return 0;
	err = errno;
	munmap(map, bytes);
	map = NULL;
fail_unlink:
	unlinkat(dir_fd, tmp, 0);
fail:
	usl_warn("USLAB_STATS=1: not exporting: %s/%s: %s", dir, tmp, strerror(err));
	close(dir_fd);
	dir_fd = -1;
	return -1;
}

/* Start exporting (USLAB_STATS=1): the file and its thread; on failure a warning, no export. */
static void export_start(void)
{
	int err;

	if (export_open())
		return;
	err = usl_thread_detached(&exporter);
	if (err) {
		usl_warn("USLAB_STATS=1: not exporting: no thread (%s)", strerror(err));
		unlinkat(dir_fd, name, 0);
		munmap(map, export_file_bytes(map_nodes));
		map = NULL;
		close(dir_fd);
		dir_fd = -1;
		return;
	}
	exporter_running = true;
}

/* Start-up (init.c): what USLAB_STATS asks for. */
void export_init(void)
{
	if (usl_opt.stats == STATS_OFF)
		return;
	if (usl_opt.stats == STATS_ON)
		export_start();
	else
		exit_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3); /* -1 if stderr is closed */
	atexit(at_exit);
}

/* In a forked child (init.c): the parent's file is not the child's; a file and thread of its own. */
void export_fork_child(void)
{
	int old;

	if (!exporter_running)
		return;
	munmap(map, export_file_bytes(map_nodes));
	map = NULL;
	close(dir_fd);
	dir_fd = -1;
	exporter_running = false;
	old = usl_nocancel(); /* open(), in fork(), which is no cancellation point */
	export_start();
	usl_cancel_restore(old);
}

void uslab_stats_print(FILE *f)
{
	size_t bytes = ALIGN_UP(EXPORT_MAX_ROWS * sizeof(struct export_row), PAGE_SIZE);
	struct export_row *rows;
	uint32_t n;
	int old;

	if (!f || usl_init())
		return;
	old = usl_nocancel(); /* fprintf() may be a cancellation point */
	rows = os_mmap(bytes);
	if (!rows) {
		fprintf(f, "uslab: no memory for the statistics\n");
	} else {
		n = gather(rows, EXPORT_MAX_ROWS, NULL, 0);
		export_print_slabinfo(f, rows, n);
		fflush(f);
		os_munmap(rows, bytes);
	}
	usl_cancel_restore(old);
}
