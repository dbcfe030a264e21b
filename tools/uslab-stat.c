// SPDX-License-Identifier: MIT
/*
 * uslab-stat - slabinfo and slabtop for a process using uslab. The process
 * exports its caches with USLAB_STATS=1 (src/export.c) into a file
 * uslab-stat.<pid> of its user's directory (export_dir(): USLAB_STATS_DIR,
 * else /run/user/UID, else /dev/shm/uslab-UID); this program reads that
 * snapshot. What comes from the other process (cache names, options, its
 * command name) is printed escaped: no byte of it drives the terminal.
 *
 *   uslab-stat PID                 /proc/slabinfo's format, a totals line, a heap line
 *   uslab-stat -w SECONDS PID      refresh like slabtop (sorted by memory)
 *   uslab-stat -s KEY ...          sort by name, objs, active, size, mem, slabs
 *   uslab-stat --events PID        slow-path counters per cache
 *   uslab-stat --sheaves PID       sheaf capacity (now, min, max), barn trades,
 *                                  per-CPU sheaves (CPUs, sheaves, objects held)
 *   uslab-stat --nodes PID         NUMA: each cache's slabs, objects and remote
 *                                  frees per node (a process with NUMA on)
 *   uslab-stat --heap PID          the page heap: mapped, used, retained, purged
 *   uslab-stat --json PID          the snapshot as JSON
 *   uslab-stat --prometheus PID    the snapshot as Prometheus metrics (prometheus.c)
 *   uslab-stat --prometheus-all    the metrics of every process --list lists
 *   uslab-stat --heap-profile PID  the sampled heap profile (USLAB_PROFILE=on), in
 *                                  gperftools' heap profile format, for google-pprof
 *   uslab-stat --folded PID        the same as folded stacks (flamegraph.pl's input)
 *   uslab-stat --options [PID]     the USLAB_* variables in effect
 *   uslab-stat --list              processes that export
 *
 * Exit status: 0, or 1 with a one-line message (no such process, it does
 * not export, its file cannot be read or is of another EXPORT_VERSION),
 * 2 for a usage error. -w runs until the process exits, then prints
 * "uslab-stat: process PID exited" under its last frame and exits 0 (1 if
 * it never showed a frame). --list and --prometheus-all exit 0 whoever
 * exports: a file they cannot read is a line on stderr, and no exporter
 * is no line (--prometheus-all: empty output, valid for a scraper).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "export.h"
#include "prometheus.h"

struct snap {
	struct export_header h;
	struct export_row *rows;
	struct uslab_node_stats *nodes; /* the node table (h.nr_nodes per row), or NULL */
};

/* What snap_read() allocated. */
static void snap_free(struct snap *s)
{
	free(s->rows);
	free(s->nodes);
	s->rows = NULL;
	s->nodes = NULL;
}

static const char *prog = "uslab-stat";
static bool quiet; /* fail() prints nothing (watch(): the process may have exited) */

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return 1;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* pread() exactly @n bytes at @off. Return: whether they were all there. */
static bool read_at(int fd, void *buf, size_t n, off_t off)
{
	while (n) {
		ssize_t r = pread(fd, buf, n, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		buf = (char *)buf + r;
		n -= (size_t)r;
		off += r;
	}
	return true;
}

/*
 * Read the snapshot of @pid into @s (rows allocated). The file is read with
 * pread(), not mapped: a file that shrinks under the reader (a writer that
 * exec'd, or anyone who can write it) is a short read, not a SIGBUS.
 * Nothing in it is trusted: the row count is bounded, the strings are
 * terminated, and the file must belong to the process's owner and be
 * writable by nobody else. Return: 0, or 1 after printing why not.
 */
static int snap_read(int pid, struct snap *s)
{
	const off_t seq_off = offsetof(struct export_header, seq);
	char dir[EXPORT_DIR_MAX + 32], path[EXPORT_DIR_MAX + 80], proc[64];
	const char *why;
	struct stat sb, pb;
	int fd, ret = 1;

	if (pid <= 0 || (kill(pid, 0) && errno == ESRCH))
		return fail("no process %d", pid);
	snprintf(proc, sizeof(proc), "/proc/%d", pid);
	if (stat(proc, &pb))
		return fail("no process %d", pid);
	if (!export_dir(dir, sizeof(dir), pb.st_uid))
		return fail("USLAB_STATS_DIR must be an absolute path of at most %d bytes",
			    EXPORT_DIR_MAX);
	/* The directory must be the owner's alone, else anyone could have put the file there. */
	if (!lstat(dir, &sb) && (why = export_dir_refusal(&sb, pb.st_uid)))
		return fail("%s is %s: not pid %d's snapshots", dir, why, pid);
	snprintf(path, sizeof(path), "%s/%s%d", dir, EXPORT_PREFIX, pid);
	/* Non-blocking: a FIFO planted there cannot hang the reader. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT)
		return fail("process %d does not export its caches (run it with USLAB_STATS=1)",
			    pid);
	if (fd < 0)
		return fail("cannot read %s (pid %d): %s", path, pid, strerror(errno));
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		fail("%s is not a regular file: not pid %d's snapshot", path, pid);
		goto out;
	}
	if (sb.st_uid != pb.st_uid || (sb.st_mode & (S_IWGRP | S_IWOTH))) {
		fail("%s is not pid %d's own snapshot (another owner, or writable by others)", path,
		     pid);
		goto out;
	}
	if (!read_at(fd, &s->h, sizeof(s->h), 0) || s->h.magic != EXPORT_MAGIC) {
		fail("%s is stale or not of this version (pid %d does not export)", path, pid);
		goto out;
	}
	/*
	 * A live process's file of another version is named as such: magic,
	 * version and the fields up to exe_ino are where every version so far
	 * has them. A stale one (a dead writer's, the pid reused) is stale.
	 */
	if (s->h.version != EXPORT_VERSION && s->h.pid == pid && export_is_live(&s->h, pid)) {
		fail("%s is of snapshot version %u, this uslab-stat reads version %u (pid %d runs "
		     "another uslab: use its uslab-stat)",
		     path, s->h.version, EXPORT_VERSION, pid);
		goto out;
	}
	if (s->h.row_size != sizeof(struct export_row) || s->h.pid != pid ||
	    !export_is_live(&s->h, pid)) {
		fail("%s is stale or not of this version (pid %d does not export)", path, pid);
		goto out;
	}
	s->rows = calloc(EXPORT_MAX_ROWS, sizeof(struct export_row));
	s->nodes = calloc((size_t)EXPORT_MAX_ROWS * EXPORT_MAX_NODES, sizeof(*s->nodes));
	if (!s->rows || !s->nodes) {
		free(s->rows);
		free(s->nodes);
		s->rows = NULL;
		s->nodes = NULL;
		fail("no memory (pid %d)", pid);
		goto out;
	}
	/* The seqlock of export.h: copy between two equal, even counts. */
	for (int tries = 0;; tries++) {
		uint64_t seq, again;

		if (!read_at(fd, &seq, sizeof(seq), seq_off))
			break;
		if (!(seq & 1)) {
			if (!read_at(fd, &s->h, sizeof(s->h), 0) || s->h.nrows > EXPORT_MAX_ROWS ||
			    s->h.nr_nodes > EXPORT_MAX_NODES ||
			    !read_at(fd, s->rows, (size_t)s->h.nrows * sizeof(struct export_row),
				     (off_t)sizeof(s->h)) ||
			    (s->h.nr_nodes &&
			     !read_at(fd, s->nodes,
				      (size_t)s->h.nrows * s->h.nr_nodes * sizeof(*s->nodes),
				      (off_t)export_bytes(EXPORT_MAX_ROWS))))
				break;
			/* (Each pread is a system call: the loads cannot pass it.) */
			if (!read_at(fd, &again, sizeof(again), seq_off))
				break;
			if (again == seq) {
				s->h.options[sizeof(s->h.options) - 1] = 0;
				for (uint32_t i = 0; i < s->h.nrows; i++) {
					s->rows[i].name[USLAB_NAME_MAX] = 0;
					if (s->rows[i].index >= s->h.nrows)
						s->rows[i].index = 0; /* (not trusted) */
				}
				ret = 0;
				goto out;
			}
		}
		if (tries == 1000) {
			fail("%s (pid %d) is being rewritten without end", path, pid);
			goto out_rows;
		}
		usleep(1000);
	}
	fail("%s (pid %d) is truncated or not a uslab snapshot", path, pid);
out_rows:
	snap_free(s);
out:
	close(fd);
	return ret;
}

/* ------------------------------------------------------------- sort */

/* -s keys: the value each sorts by (largest first; "name" alphabetically). */
enum sort_key { SORT_NONE, SORT_NAME, SORT_OBJS, SORT_ACTIVE, SORT_SIZE, SORT_SLABS, SORT_MEM };

static const char *const sort_names[] = { "", "name", "objs", "active", "size", "slabs", "mem" };
static enum sort_key sort_key; /* SORT_NONE: list order */

static uint64_t sort_value(const struct export_row *r)
{
	switch (sort_key) {
	case SORT_OBJS:
		return r->st.num_objs;
	case SORT_ACTIVE:
		return r->st.active_objs;
	case SORT_SIZE:
		return r->st.objsize;
	case SORT_SLABS:
		return r->st.num_slabs;
	default:
		return export_row_bytes(r);
	}
}

static int cmp_rows(const void *pa, const void *pb)
{
	const struct export_row *a = pa, *b = pb;
	uint64_t x, y;

	if (sort_key == SORT_NAME)
		return strcmp(a->name, b->name);
	x = sort_value(a);
	y = sort_value(b);
	return x < y ? 1 : x > y ? -1 : strcmp(a->name, b->name);
}

/* The key named @k, or -1. */
static int parse_sort(const char *k)
{
	for (int i = SORT_NAME; i <= SORT_MEM; i++)
		if (!strcmp(k, sort_names[i]))
			return i;
	return -1;
}

/* ------------------------------------------------------------- print */

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void print_json(FILE *f, const struct snap *s)
{
	fprintf(f,
		"{\"pid\": %d, \"updated_ns\": %" PRIu64 ", \"refreshes\": %" PRIu64
		", \"refresh_cpu_ns\": %" PRIu64 ", \"reports\": %" PRIu64
		",\n \"rcu\": {\"queued\": %" PRIu64 ", \"freed\": %" PRIu64
		", \"batches\": %" PRIu64 ", \"leaked\": %" PRIu64 "},\n",
		s->h.pid, s->h.updated_ns, s->h.refreshes, s->h.refresh_ns, s->h.reports,
		s->h.rcu.queued, s->h.rcu.freed, s->h.rcu.batches, s->h.rcu.leaked);
	fprintf(f,
		" \"heap\": {\"mapped_bytes\": %" PRIu64 ", \"used_bytes\": %" PRIu64
		", \"retained_bytes\": %" PRIu64 ", \"purged_bytes\": %" PRIu64
		", \"madvise_calls\": %" PRIu64 ", \"munmap_calls\": %" PRIu64
		", \"mremap_calls\": %" PRIu64 ", \"grown_in_place\": %" PRIu64
		", \"arenas\": %" PRIu64 ", \"huge_objects\": %" PRIu64 ", \"huge_bytes\": %" PRIu64
		", \"object_bytes\": %" PRIu64 "},\n \"caches\": [",
		s->h.heap.mapped_bytes, s->h.heap.used_bytes, s->h.heap.retained_bytes,
		s->h.heap.purged_bytes, s->h.heap.madvise_calls, s->h.heap.munmap_calls,
		s->h.heap.mremap_calls, s->h.heap.grown_in_place, s->h.heap.arenas,
		s->h.heap.huge_objects, s->h.heap.huge_bytes, s->h.heap.object_bytes);
	for (uint32_t i = 0; i < s->h.nrows; i++) {
		const struct export_row *r = &s->rows[i];

		fprintf(f, "%s\n  {\"name\": ", i ? "," : "");
		json_string(f, r->name);
		fprintf(f,
			", \"active_objs\": %lu, \"num_objs\": %lu, \"objsize\": %u, \"object_size\": %u"
			", \"objperslab\": %u, \"pagesperslab\": %u, \"active_slabs\": %lu"
			", \"num_slabs\": %lu, \"partial_slabs\": %lu, \"sheaf_capacity\": %u"
			", \"sheaf_capacity_min\": %u, \"sheaf_capacity_max\": %u"
			", \"sheaved\": %" PRIu64 ", \"guard_objs\": %" PRIu64
			", \"barn_full\": %lu, \"barn_empty\": %lu"
			", \"layout\": \"%s\", \"meta_bytes\": %u, \"bytes\": %" PRIu64
			", \"flags\": %u, \"percpu\": %u, \"percpu_cpus\": %u"
			", \"percpu_sheaves\": %lu, \"percpu_objects\": %lu, \"events\": {",
			r->st.active_objs, r->st.num_objs, r->st.objsize, r->st.object_size,
			r->st.objperslab, r->st.pagesperslab, r->st.active_slabs, r->st.num_slabs,
			r->st.partial_slabs, r->st.sheaf_capacity, r->st.sheaf_capacity_min,
			r->st.sheaf_capacity_max, r->sheaved, r->guard_objs, r->st.barn_full,
			r->st.barn_empty,
			uslab_layout_name(r->st.layout) ? uslab_layout_name(r->st.layout) : "?",
			r->st.meta_bytes, export_row_bytes(r), r->flags, r->st.percpu,
			r->st.percpu_cpus, r->st.percpu_sheaves, r->st.percpu_objects);
		for (unsigned int k = 0; uslab_stat_name(k); k++)
			fprintf(f, "%s\"%s\": %" PRIu64, k ? ", " : "", uslab_stat_name(k),
				r->st.events[k]);
		fputc('}', f);
		for (uint32_t n = 0; n < s->h.nr_nodes; n++) {
			const struct uslab_node_stats *ns =
				&s->nodes[(size_t)r->index * s->h.nr_nodes + n];

			fprintf(f,
				"%s{\"node\": %u, \"num_slabs\": %lu, \"num_objs\": %lu"
				", \"active_objs\": %lu, \"active_slabs\": %lu, \"partial_slabs\": %lu"
				", \"remote_frees\": %" PRIu64 ", \"fallbacks\": %" PRIu64
				", \"pool_objs\": %lu}",
				n ? ", " : ", \"nodes\": [", n, ns->num_slabs, ns->num_objs,
				ns->active_objs, ns->active_slabs, ns->partial_slabs,
				ns->remote_frees, ns->fallbacks, ns->pool_objs);
		}
		fputs(s->h.nr_nodes ? "]}" : "}", f);
	}
	fputs("\n]}\n", f);
}

/*
 * Whether the process @pid, started at @start (/proc/PID/stat), has exited:
 * gone, a zombie not yet reaped (its snapshot removed at exit, or left by
 * a kill), or its pid taken by another process.
 */
static bool exited(int pid, uint64_t start)
{
	char path[64], buf[1024], *p, state = 0;
	FILE *f;

	if (export_starttime(pid) != start)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		state = p[2];
	fclose(f);
	return state == 'Z' || state == 'X';
}

/*
 * -w: one frame, written at once, each line cleared to its end (no
 * flicker). After the first frame, a snapshot that cannot be read because
 * the process exited ends the watch with status 0.
 */
static int watch(int pid, double seconds)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	uint64_t start = 0; /* the watched process's start time, once a frame was shown */

	for (;;) {
		struct snap s;
		char *buf = NULL, *line, *save = NULL;
		size_t len = 0;
		FILE *f;
		time_t now = time(NULL);
		int err;

		quiet = start != 0;
		err = snap_read(pid, &s);
		/*
		 * A process ending is not a zombie yet while it runs its exit
		 * handlers (the file goes in one) or the kernel takes its
		 * memory down (its file, left by a kill, is stale from the
		 * start of that): up to 5 s for it to end, or to be readable.
		 */
		for (int i = 0; err && start && i < 50 && !exited(pid, start); i++) {
			nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
			err = snap_read(pid, &s);
		}
		quiet = false;
		if (err && start && exited(pid, start)) {
			printf("%s: process %d exited\n", prog, pid);
			return 0;
		}
		if (err && start)
			err = snap_read(pid, &s); /* again, to say why */
		if (err)
			return 1;
		start = s.h.starttime;
		qsort(s.rows, s.h.nrows, sizeof(*s.rows), cmp_rows);
		f = open_memstream(&buf, &len);
		if (!f)
			return fail("no memory (pid %d)", pid);
		fprintf(f, "uslab-stat %d - %s", pid, ctime(&now));
		export_print_slabinfo(f, s.rows, s.h.nrows);
		export_print_heap_line(f, &s.h.heap);
		fclose(f);
		fputs("\033[H", stdout);
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			printf("%s\033[K\n", line);
		fputs("\033[J", stdout);
		fflush(stdout);
		free(buf);
		snap_free(&s);
		nanosleep(&ts, NULL);
	}
}

/*
 * The command name of @pid, started at @start, into @buf (@n bytes,
 * unescaped): /proc/PID/comm, "?" if it cannot be read or the pid is
 * another process's by now.
 */
static void program_of(int pid, uint64_t start, char *buf, size_t n)
{
	char path[64];
	FILE *f;

	snprintf(buf, n, "?");
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if ((f = fopen(path, "r"))) {
		if (fgets(buf, (int)n, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
	if (export_starttime(pid) != start)
		snprintf(buf, n, "?");
}

/* What each_exporter() calls with a live exporter's snapshot (freed after, unless taken). */
typedef void exporter_fn(int pid, struct snap *s, void *arg);

/* @fn for each live exporter in @dir. */
static void each_in_dir(const char *dir, exporter_fn *fn, void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		struct snap s;
		char own[EXPORT_DIR_MAX + 32], path[64];
		struct stat pb;
		int pid;

		if (strncmp(e->d_name, EXPORT_PREFIX, strlen(EXPORT_PREFIX)))
			continue;
		pid = export_pid_of(e->d_name + strlen(EXPORT_PREFIX));
		if (pid <= 0 || kill(pid, 0) || export_starttime(pid) == 0)
			continue; /* gone: a stale file */
		snprintf(path, sizeof(path), "/proc/%d", pid);
		if (stat(path, &pb) || !export_dir(own, sizeof(own), pb.st_uid) || strcmp(own, dir))
			continue; /* not where that process's user exports: not its file */
		if (snap_read(pid, &s))
			continue; /* (snap_read said why) */
		fn(pid, &s, arg);
		snap_free(&s);
	}
	if (d)
		closedir(d);
}

/*
 * @fn for each exporter in every user's directory this program can read
 * (USLAB_STATS_DIR alone if it is set), each checked by snap_read().
 * Return: 0, or 1 for a bad USLAB_STATS_DIR (said).
 */
static int each_exporter(exporter_fn *fn, void *arg)
{
	static const char *const parents[] = { EXPORT_RUN, EXPORT_SHM };
	char dir[EXPORT_DIR_MAX + 32 + 256];

	if (getenv("USLAB_STATS_DIR") && *getenv("USLAB_STATS_DIR")) {
		if (!export_dir(dir, sizeof(dir), geteuid()))
			return fail("USLAB_STATS_DIR must be an absolute path of at most %d bytes",
				    EXPORT_DIR_MAX);
		each_in_dir(dir, fn, arg);
		return 0;
	}
	for (size_t i = 0; i < sizeof(parents) / sizeof(parents[0]); i++) {
		DIR *d = opendir(parents[i]);
		struct dirent *e;

		while (d && (e = readdir(d))) {
			bool run = i == 0;

			if (run ? export_pid_of(e->d_name) < 0 && strcmp(e->d_name, "0") :
				  strncmp(e->d_name, "uslab-", 6))
				continue;
			snprintf(dir, sizeof(dir), "%s/%s", parents[i], e->d_name);
			each_in_dir(dir, fn, arg);
		}
		if (d)
			closedir(d);
	}
	return 0;
}

/* One line of --list. */
static void list_one(int pid, struct snap *s, void *arg)
{
	char comm[64], shown[4 * sizeof(comm) + 5];
	uint64_t objs = 0;

	(void)arg;
	for (uint32_t i = 0; i < s->h.nrows; i++)
		objs += s->rows[i].st.active_objs;
	program_of(pid, s->h.starttime, comm, sizeof(comm));
	export_escape(shown, sizeof(shown), comm, false);
	printf("%6d %6u %8" PRIu64 "  %s\n", pid, s->h.nrows, objs, shown);
}

/* --list: a line for each exporter. */
static int list(void)
{
	printf("# pid  caches  objects  command\n");
	return each_exporter(list_one, NULL);
}

/* The snapshots --prometheus-all gathers, each with its program's name. */
struct gathered {
	struct snap *snaps;
	char (*comms)[64];
	size_t n, cap;
	bool nomem;
};

/* Keep @s (its rows and nodes cut to their size) for the metrics. */
static void gather_one(int pid, struct snap *s, void *arg)
{
	struct gathered *g = arg;
	void *p;

	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 8;

		if (!(p = realloc(g->snaps, cap * sizeof(*g->snaps)))) {
			g->nomem = true;
			return;
		}
		g->snaps = p;
		if (!(p = realloc(g->comms, cap * sizeof(*g->comms)))) {
			g->nomem = true;
			return;
		}
		g->comms = p;
		g->cap = cap;
	}
	/* (Smaller: a shrinking realloc that fails leaves the block as it was.) */
	if ((p = realloc(s->rows, (s->h.nrows ? s->h.nrows : 1) * sizeof(*s->rows))))
		s->rows = p;
	if (s->h.nrows && s->h.nr_nodes &&
	    (p = realloc(s->nodes, (size_t)s->h.nrows * s->h.nr_nodes * sizeof(*s->nodes))))
		s->nodes = p;
	program_of(pid, s->h.starttime, g->comms[g->n], sizeof(g->comms[g->n]));
	g->snaps[g->n++] = *s;
	s->rows = NULL; /* (taken) */
	s->nodes = NULL;
}

/* --prometheus PID (@pid > 0) or --prometheus-all (@pid 0): the metrics on stdout. */
static int prometheus(int pid)
{
	struct gathered g = { 0 };
	struct prom_process *p;
	struct snap s;
	int ret = 0;

	if (pid) {
		if (snap_read(pid, &s))
			return 1;
		gather_one(pid, &s, &g);
		snap_free(&s);
	} else {
		ret = each_exporter(gather_one, &g);
	}
	p = calloc(g.n ? g.n : 1, sizeof(*p));
	if (g.nomem || !p) {
		ret = fail("no memory");
	} else if (!ret) {
		for (size_t i = 0; i < g.n; i++)
			p[i] = (struct prom_process){ &g.snaps[i].h, g.snaps[i].rows,
						      g.snaps[i].h.nr_nodes ? g.snaps[i].nodes :
									      NULL,
						      g.comms[i] };
		prom_print(stdout, p, g.n);
	}
	for (size_t i = 0; i < g.n; i++)
		snap_free(&g.snaps[i]);
	free(g.snaps);
	free(g.comms);
	free(p);
	return ret;
}

/*
 * The frame at @a as "file+0xoffset" (the mapping of /proc/PID/maps that
 * holds it, its offset in the file: addr2line -f -e FILE OFFSET names it),
 * else the address.
 */
struct mapping {
	unsigned long start, end, off;
	char file[256];
};

static void frame_name(char *buf, size_t n, unsigned long a, const struct mapping *m, size_t nm)
{
	for (size_t i = 0; i < nm; i++) {
		if (a - 1 >= m[i].start && a - 1 < m[i].end && m[i].file[0]) {
			const char *base = strrchr(m[i].file, '/');

			snprintf(buf, n, "%s+0x%lx", base ? base + 1 : m[i].file,
				 a - m[i].start + m[i].off);
			return;
		}
	}
	snprintf(buf, n, "0x%lx", a);
}

/*
 * --heap-profile PID: the profile the process rewrites with its snapshot
 * (EXPORT_HEAP_PREFIX<pid>, src/profile.c), then "MAPPED_LIBRARIES:" and
 * its /proc/PID/maps, as gperftools writes a heap profile (google-pprof
 * --text PROGRAM FILE reads it). --folded PID (@folded): one line per
 * sample, "outermost;...;innermost bytes", the frames named by their file
 * and offset (frame_name()).
 */
static int heap_profile(int pid, bool folded)
{
	char dir[EXPORT_DIR_MAX + 32], path[EXPORT_DIR_MAX + 80], line[8192];
	struct mapping *maps = NULL;
	size_t nmaps = 0, cap = 0;
	struct stat pb, sb;
	struct snap s;
	FILE *f, *m;
	int fd;

	if (snap_read(pid, &s)) /* (it exports: the file is its, the process alive) */
		return 1;
	snap_free(&s);
	snprintf(line, sizeof(line), "/proc/%d", pid);
	if (stat(line, &pb) || !export_dir(dir, sizeof(dir), pb.st_uid))
		return fail("no process %d", pid);
	snprintf(path, sizeof(path), "%s/%s%d", dir, EXPORT_HEAP_PREFIX, pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT)
		return fail("process %d keeps no heap profile (run it with USLAB_PROFILE=on "
			    "USLAB_STATS=1), or has not written it yet",
			    pid);
	if (fd < 0)
		return fail("cannot read %s: %s", path, strerror(errno));
	/* As the snapshot (snap_read()): a regular file, the process owner's alone. */
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != pb.st_uid ||
	    (sb.st_mode & (S_IWGRP | S_IWOTH)) || !(f = fdopen(fd, "r"))) {
		close(fd);
		return fail("%s is not pid %d's own heap profile", path, pid);
	}
	snprintf(line, sizeof(line), "/proc/%d/maps", pid);
	m = fopen(line, "re");
	if (!m) {
		fclose(f);
		return fail("cannot read /proc/%d/maps: %s", pid, strerror(errno));
	}
	if (!folded) {
		size_t r;

		while ((r = fread(line, 1, sizeof(line), f)) > 0)
			fwrite(line, 1, r, stdout);
		fputs("\nMAPPED_LIBRARIES:\n", stdout);
		while ((r = fread(line, 1, sizeof(line), m)) > 0)
			fwrite(line, 1, r, stdout);
		fclose(f);
		fclose(m);
		return 0;
	}
	while (fgets(line, sizeof(line), m)) {
		struct mapping x = { 0 };
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255s", &x.start, &x.end, perms, &x.off,
			   x.file) < 4 ||
		    !strchr(perms, 'x'))
			continue;
		if (nmaps == cap) {
			struct mapping *t = realloc(maps, (cap = cap ? 2 * cap : 64) * sizeof(*t));

			if (!t)
				break;
			maps = t;
		}
		maps[nmaps++] = x;
	}
	fclose(m);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long count, bytes;
		unsigned long addrs[64];
		char *at = strchr(line, '@'), *p, *end;
		int n = 0;

		if (!at || sscanf(line, " %llu: %llu [", &count, &bytes) != 2)
			continue; /* (the header) */
		for (p = at + 1; n < 64; p = end) {
			unsigned long a = strtoul(p, &end, 16);

			if (end == p)
				break;
			addrs[n++] = a;
		}
		for (int k = n - 1; k >= 0; k--) {
			char name[300];

			frame_name(name, sizeof(name), addrs[k], maps, nmaps);
			printf("%s%s", name, k ? ";" : "");
		}
		printf(" %llu\n", bytes);
	}
	fclose(f);
	free(maps);
	return 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: %s [-s KEY] [-w SECONDS] [--events | --sheaves | --nodes | --heap | --json] "
		"PID\n"
		"       %s --prometheus PID\n"
		"       %s --prometheus-all\n"
		"       %s --heap-profile PID | --folded PID\n"
		"       %s --options [PID]\n"
		"       %s --list\n"
		"KEY: name, objs, active, size, slabs, mem (default for -w: mem)\n",
		prog, prog, prog, prog, prog, prog);
	return 2;
}

int main(int argc, char **argv)
{
	enum {
		SLABINFO,
		EVENTS,
		SHEAVES,
		NODES,
		HEAP,
		JSON,
		PROMETHEUS,
		OPTIONS,
		HEAP_PROFILE,
		FOLDED
	} what = SLABINFO;
	double wait = 0;
	int pid = 0, i;
	struct snap s;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--events")) {
			what = EVENTS;
		} else if (!strcmp(argv[i], "--sheaves")) {
			what = SHEAVES;
		} else if (!strcmp(argv[i], "--nodes")) {
			what = NODES;
		} else if (!strcmp(argv[i], "--heap")) {
			what = HEAP;
		} else if (!strcmp(argv[i], "--json")) {
			what = JSON;
		} else if (!strcmp(argv[i], "--prometheus")) {
			what = PROMETHEUS;
		} else if (!strcmp(argv[i], "--prometheus-all")) {
			return i == argc - 1 ? prometheus(0) : usage();
		} else if (!strcmp(argv[i], "--options")) {
			what = OPTIONS;
		} else if (!strcmp(argv[i], "--heap-profile")) {
			what = HEAP_PROFILE;
		} else if (!strcmp(argv[i], "--folded")) {
			what = FOLDED;
		} else if (!strcmp(argv[i], "--list")) {
			return list();
		} else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
			char *end;

			wait = strtod(argv[++i], &end);
			if (*end || !(wait > 0 && wait <= 86400)) /* (NaN fails both) */
				return usage();
			if (sort_key == SORT_NONE)
				sort_key = SORT_MEM;
		} else if (!strcmp(argv[i], "-s") && i + 1 < argc) {
			int k = parse_sort(argv[++i]);

			if (k < 0)
				return usage();
			sort_key = (enum sort_key)k;
		} else {
			return usage();
		}
	}
	if (i == argc && what == OPTIONS) {
		uslab_options_print(stdout); /* this program's own environment */
		return 0;
	}
	if (i != argc - 1)
		return usage();
	pid = export_pid_of(argv[i]);
	if (pid < 0)
		return usage();
	if (what == PROMETHEUS)
		return wait > 0 ? usage() : prometheus(pid);
	if (what == HEAP_PROFILE || what == FOLDED)
		return wait > 0 ? usage() : heap_profile(pid, what == FOLDED);
	if (wait > 0)
		return watch(pid, wait);
	if (snap_read(pid, &s))
		return 1;
	if (sort_key)
		qsort(s.rows, s.h.nrows, sizeof(*s.rows), cmp_rows);
	switch (what) {
	case SLABINFO:
		export_print_slabinfo(stdout, s.rows, s.h.nrows);
		export_print_heap_line(stdout, &s.h.heap);
		break;
	case EVENTS:
		export_print_events(stdout, s.rows, s.h.nrows);
		break;
	case SHEAVES:
		export_print_sheaves(stdout, s.rows, s.h.nrows);
		break;
	case NODES:
		export_print_nodes(stdout, s.rows, s.h.nrows, s.nodes, s.h.nr_nodes);
		break;
	case HEAP:
		export_print_heap(stdout, &s.h.heap);
		break;
	case JSON:
		print_json(stdout, &s);
		break;
	case PROMETHEUS: /* (above) */
	case HEAP_PROFILE:
	case FOLDED:
		break;
	case OPTIONS: {
		char shown[4 * sizeof(s.h.options) + 5];

		export_escape(shown, sizeof(shown), s.h.options, true);
		fputs(shown, stdout);
		break;
	}
	}
	snap_free(&s);
	return 0;
}
