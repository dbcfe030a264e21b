/* SPDX-License-Identifier: MIT */
/*
 * prometheus.h - uslab-stat --prometheus and --prometheus-all: snapshots
 * (export.h) in Prometheus's text exposition format (prometheus.c).
 */
#ifndef USLAB_STAT_PROMETHEUS_H
#define USLAB_STAT_PROMETHEUS_H

#include <stddef.h>
#include <stdio.h>

#include "export.h"

/**
 * struct prom_process - one process's snapshot, as uslab-stat read it.
 * @h:       its header.
 * @rows:    its @h->nrows rows (in any order: each knows its index).
 * @nodes:   the node table (@h->nr_nodes entries per row index), or NULL.
 * @program: its command name (/proc/PID/comm), unescaped.
 */
struct prom_process {
	const struct export_header *h;
	const struct export_row *rows;
	const struct uslab_node_stats *nodes;
	const char *program;
};

/**
 * prom_print - print the metrics of @n processes, family by family (each
 * family's "# HELP" and "# TYPE" lines once, then its samples of every
 * process), labelled with pid, program and cache. A family without a
 * sample is left out: no process prints nothing.
 * @f: where to.
 * @p: the processes.
 * @n: how many.
 */
void prom_print(FILE *f, const struct prom_process *p, size_t n);

#endif /* USLAB_STAT_PROMETHEUS_H */
