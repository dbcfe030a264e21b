/* SPDX-License-Identifier: MIT */
/*
 * export.h - the snapshot a process exports with USLAB_STATS=1 (export.c)
 * and uslab-stat reads (tools/uslab-stat.c): a file in /dev/shm, named
 * after the pid, holding a header and one row per cache.
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
#include <sys/stat.h>
#include <string.h>
#include <uslab.h>

#define EXPORT_MAGIC 0x3154415453424c55ull /* "ULBSTAT1" */
#define EXPORT_VERSION 1
#define EXPORT_DIR "/dev/shm"
#define EXPORT_PREFIX "uslab-stat."
#define EXPORT_MAX_ROWS USLAB_MAX_CACHES
#define EXPORT_OPTIONS_BYTES 8192

struct export_row {
	char name[USLAB_NAME_MAX + 1];
	uint64_t sheaved; /* objects in the threads' sheaves (racy sum) */
	uint32_t flags;	  /* creation flags (debug tier's included) */
	uint32_t pad;
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

/* The bytes of a snapshot file holding @rows rows. */
static inline size_t export_bytes(uint32_t rows)
{
	return sizeof(struct export_header) + (size_t)rows * sizeof(struct export_row);
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
/* The bytes a row's slabs take (pages of its slabs and their metadata). */
uint64_t export_row_bytes(const struct export_row *r);

#endif /* USLAB_EXPORT_H */
