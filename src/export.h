/* SPDX-License-Identifier: MIT */
/*
 * export.h - the snapshot a process exports with USLAB_STATS=1 (export.c)
 * and uslab-stat reads (tools/uslab-stat.c): a file named after the pid,
 * holding a header and one row per cache, in a directory only the
 * process's user can write (export_dir()): nobody else can plant, replace
 * or block a file there.
 *
 * Torn reads: the writer makes @seq odd, rewrites the rows, makes it even
 * again (a seqlock); a reader copies the file between two equal, even
 * reads of @seq. A crashed writer: the reader checks that the pid is alive,
 * started at @starttime (pid reuse) and still runs the program that wrote
 * the file (@exe_dev, @exe_ino: an exec keeps the pid and the start time),
 * else the file is stale. A process that starts exporting removes the
 * stale files of dead processes it finds.
 */
#ifndef USLAB_EXPORT_H
#define USLAB_EXPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <uslab.h>

#define EXPORT_MAGIC 0x3154415453424c55ull /* "ULBSTAT1" */
/*
 * The layout's version: a reader refuses a file of another (uslab-stat says
 * which it found and which it reads). 1: the caches, rcu and options;
 * 2: the page heap (@heap) after @rcu; 4: NUMA, @nr_nodes and the node
 * table after the rows (EXPORT_MAX_ROWS rows of @nr_nodes entries: the
 * row at @index has entries [@index * @nr_nodes, ... + @nr_nodes));
 * 5: struct uslab_node_stats.pool_objs; 6: the problems reported
 * (@reports) and each row's objects in the sampling guard (@guard_objs).
 */
#define EXPORT_VERSION 6
#define EXPORT_SHM "/dev/shm"  /* the fallback: EXPORT_SHM/uslab-UID */
#define EXPORT_RUN "/run/user" /* the XDG runtime directories: EXPORT_RUN/UID */
#define EXPORT_PREFIX "uslab-stat."
/* USLAB_PROFILE=on: the heap profile beside the snapshot, rewritten with it
   (gperftools' heap profile text without its maps: uslab-stat --heap-profile) */
#define EXPORT_HEAP_PREFIX "uslab-heap."
#define EXPORT_DIR_MAX 200			     /* the longest USLAB_STATS_DIR */
#define EXPORT_NAME_ESCAPED (4 * USLAB_NAME_MAX + 5) /* a name through export_escape() */
#define EXPORT_MAX_ROWS USLAB_MAX_CACHES
#define EXPORT_OPTIONS_BYTES 8192
#define EXPORT_MAX_NODES 16 /* a file's node table: at most this many nodes a row */

struct export_row {
	char name[USLAB_NAME_MAX + 1];
	uint64_t sheaved;    /* objects in the threads' sheaves (racy sum) */
	uint32_t flags;	     /* creation flags (debug tier's included) */
	uint32_t index;	     /* its place in the file, for the node table (rows may be sorted) */
	uint64_t guard_objs; /* of st.active_objs, objects in the sampling guard's slots */
	struct uslab_cache_stats st;
};

struct export_header {
	uint64_t magic;
	uint32_t version;
	uint32_t row_size; /* sizeof(struct export_row) */
	int32_t pid;
	uint32_t nrows;
	uint64_t starttime; /* the process's start, /proc/PID/stat field 22 */
	uint64_t exe_dev;   /* its program (/proc/PID/exe): an exec'd image is not the writer */
	uint64_t exe_ino;
	uint64_t seq;	     /* odd while the rows are rewritten */
	uint64_t updated_ns; /* CLOCK_REALTIME of the snapshot */
	uint64_t refresh_ns; /* CPU time the last refresh took */
	uint64_t refreshes;
	struct uslab_rcu_stats rcu;
	struct uslab_heap_stats heap; /* the page heap (uslab_heap_stats()), at each refresh */
	uint32_t nr_nodes;	      /* NUMA nodes of the node table; 0: NUMA off, no table */
	uint32_t pad;
	uint64_t reports; /* problems the debug tier reported: uslab_bug_count() */
	char options[EXPORT_OPTIONS_BYTES]; /* uslab_options_print()'s text */
};

/* The pid a file name's suffix (or a command line's PID) names: digits only, > 0; else -1. */
static inline int export_pid_of(const char *s)
{
	long v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (INT32_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v > 0 ? (int)v : -1;
}

/* Why the directory @sb describes cannot hold @uid's snapshots; NULL if it can. */
static inline const char *export_dir_refusal(const struct stat *sb, uid_t uid)
{
	if (!S_ISDIR(sb->st_mode))
		return "not a directory";
	if (sb->st_uid != uid)
		return "owned by another user";
	if (sb->st_mode & (S_IWGRP | S_IWOTH))
		return "writable by others";
	return NULL;
}

/*
 * The directory of @uid's snapshots, into @buf (EXPORT_DIR_MAX + 32 bytes):
 * $USLAB_STATS_DIR if set, else EXPORT_RUN/UID when that exists and is
 * @uid's alone (only root creates those, so nobody can block it), else
 * EXPORT_SHM/uslab-UID (which the writer creates, mode 0700, and refuses if
 * someone else made it first). The writer and every reader compute the same.
 * Return: false if USLAB_STATS_DIR is set but not an absolute path of at
 * most EXPORT_DIR_MAX bytes.
 */
static inline bool export_dir(char *buf, size_t n, uid_t uid)
{
	const char *env = getenv("USLAB_STATS_DIR");
	struct stat sb;

	if (env && *env) {
		if (env[0] != '/' || strlen(env) > EXPORT_DIR_MAX)
			return false;
		snprintf(buf, n, "%s", env);
		return true;
	}
	snprintf(buf, n, "%s/%u", EXPORT_RUN, (unsigned int)uid);
	if (!lstat(buf, &sb) && !export_dir_refusal(&sb, uid))
		return true;
	snprintf(buf, n, "%s/uslab-%u", EXPORT_SHM, (unsigned int)uid);
	return true;
}

/*
 * @src into @dst (@n bytes, terminated, cut short if need be) with every
 * byte a terminal could act on (outside ' '..'~', and '\\' itself) written
 * as \xNN; with @newlines, '\n' is kept. Names and options come from
 * another user's process: no escape sequence of theirs reaches a terminal.
 */
static inline void export_escape(char *dst, size_t n, const char *src, bool newlines)
{
	size_t o = 0;

	for (; *src && o + 5 < n; src++) {
		unsigned char ch = (unsigned char)*src;

		if ((ch >= ' ' && ch <= '~' && ch != '\\') || (newlines && ch == '\n'))
			dst[o++] = (char)ch;
		else
			o += (size_t)snprintf(dst + o, n - o, "\\x%02x", ch);
	}
	if (n)
		dst[o < n ? o : n - 1] = 0;
}

/* The bytes of a snapshot file holding @rows rows. */
static inline size_t export_bytes(uint32_t rows)
{
	return sizeof(struct export_header) + (size_t)rows * sizeof(struct export_row);
}

/* The file: the header, EXPORT_MAX_ROWS rows, and with NUMA on the node table. */
static inline size_t export_file_bytes(uint32_t nr_nodes)
{
	return export_bytes(EXPORT_MAX_ROWS) +
	       (size_t)EXPORT_MAX_ROWS * nr_nodes * sizeof(struct uslab_node_stats);
}

/* /proc/PID/stat's start time (field 22), 0 if unreadable. */
static inline uint64_t export_starttime(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')'))) {
		/* After "pid (comm)": state is field 3, starttime field 22. */
		if (sscanf(p + 2,
			   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			   "%*d %*d %*d %llu",
			   &t) != 1)
			t = 0;
	}
	fclose(f);
	return t;
}

/* Whether the snapshot header @h describes the live process @pid (not a stale file). */
static inline bool export_is_live(const struct export_header *h, int pid)
{
	char path[64];
	struct stat sb;
	uint64_t start = export_starttime(pid);

	if (!start || h->starttime != start)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &sb))
		return errno == EACCES; /* another user's process: the start time must do */
	return sb.st_dev == h->exe_dev && sb.st_ino == h->exe_ino;
}

/* Print rows as /proc/slabinfo does (and a totals line); export.c and uslab-stat share it. */
void export_print_slabinfo(FILE *f, const struct export_row *rows, uint32_t n);
/* The slow-path counters of each row (/sys/kernel/slab/<cache>/ statistics). */
void export_print_events(FILE *f, const struct export_row *rows, uint32_t n);
/* Caches with sheaves: capacity now, min, max, barn trades, grow/shrink steps. */
void export_print_sheaves(FILE *f, const struct export_row *rows, uint32_t n);
void export_print_nodes(FILE *f, const struct export_row *rows, uint32_t n,
			const struct uslab_node_stats *nodes, uint32_t nr_nodes);
/* The page heap: a line per figure (uslab-stat --heap). */
void export_print_heap(FILE *f, const struct uslab_heap_stats *h);
/* The page heap in one "# heap:" line (under the slabinfo table's totals). */
void export_print_heap_line(FILE *f, const struct uslab_heap_stats *h);
/* madvise calls per GiB purged (-1 when nothing was purged yet). */
double export_madvise_per_gib(const struct uslab_heap_stats *h);
/* The bytes a row's slabs take (pages of its slabs and their metadata). */
uint64_t export_row_bytes(const struct export_row *r);

#endif /* USLAB_EXPORT_H */
