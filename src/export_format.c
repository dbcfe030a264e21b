// SPDX-License-Identifier: MIT
/*
 * export_format.c - the tables of a snapshot (export.h): /proc/slabinfo's
 * format and the event counters. Compiled into the library
 * (uslab_stats_print, USLAB_STATS=exit) and into uslab-stat, so both print
 * the same thing. Cache names are printed escaped (export_escape()).
 */
#include <inttypes.h>

#include "export.h"

uint64_t export_row_bytes(const struct export_row *r)
{
	return (uint64_t)r->st.num_slabs * r->st.pagesperslab * 4096u +
	       (uint64_t)r->st.num_slabs * r->st.meta_bytes;
}

void export_print_slabinfo(FILE *f, const struct export_row *rows, uint32_t n)
{
	uint64_t active = 0, total = 0, bytes = 0, used = 0, sheaved = 0;

	fprintf(f, "slabinfo - version: 2.1 (uslab)\n");
	fprintf(f, "# name            <active_objs> <num_objs> <objsize> <objperslab> "
		   "<pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata "
		   "<active_slabs> <num_slabs> <sharedavail>\n");
	for (uint32_t i = 0; i < n; i++) {
		const struct uslab_cache_stats *st = &rows[i].st;
		char name[EXPORT_NAME_ESCAPED];

		export_escape(name, sizeof(name), rows[i].name, false);
		/* tunables: the sheaf capacity is SLAB's limit; batchcount and sharedfactor 0 as in SLUB. */
		fprintf(f,
			"%-17s %6lu %6lu %6u %4u %4u : tunables %4u %4u %4u : slabdata %6lu %6lu %6" PRIu64
			"\n",
			name, st->active_objs, st->num_objs, st->objsize, st->objperslab,
			st->pagesperslab, st->sheaf_capacity, 0u, 0u, st->active_slabs,
			st->num_slabs, rows[i].sheaved);
		active += st->active_objs;
		total += st->num_objs;
		bytes += export_row_bytes(&rows[i]);
		used += (uint64_t)st->active_objs * st->object_size;
		sheaved += rows[i].sheaved;
	}
	fprintf(f,
		"# total: %u caches, %" PRIu64 " of %" PRIu64 " objects active (%" PRIu64
		" in sheaves), %.1f KiB of slabs, %.1f KiB in active objects\n",
		n, active, total, sheaved, (double)bytes / 1024, (double)used / 1024);
}

void export_print_events(FILE *f, const struct export_row *rows, uint32_t n)
{
	fprintf(f, "%-17s", "# cache");
	for (unsigned int i = 0; uslab_stat_name(i); i++)
		fprintf(f, " %s", uslab_stat_name(i));
	fputc('\n', f);
	for (uint32_t r = 0; r < n; r++) {
		char name[EXPORT_NAME_ESCAPED];

		export_escape(name, sizeof(name), rows[r].name, false);
		fprintf(f, "%-17s", name);
		for (unsigned int i = 0; uslab_stat_name(i); i++)
			fprintf(f, " %" PRIu64, rows[r].st.events[i]);
		fputc('\n', f);
	}
}

void export_print_sheaves(FILE *f, const struct export_row *rows, uint32_t n)
{
	fprintf(f, "# %-15s %8s %5s %5s %10s %10s %6s %6s %4s %5s %8s\n", "cache", "capacity",
		"min", "max", "barn_get", "barn_put", "grow", "shrink", "full", "empty", "sheaved");
	for (uint32_t r = 0; r < n; r++) {
		const struct uslab_cache_stats *st = &rows[r].st;
		char name[EXPORT_NAME_ESCAPED];

		if (!st->sheaf_capacity)
			continue;
		export_escape(name, sizeof(name), rows[r].name, false);
		fprintf(f,
			"%-17s %8u %5u %5u %10" PRIu64 " %10" PRIu64 " %6" PRIu64 " %6" PRIu64
			" %4lu %5lu %8" PRIu64 "\n",
			name, st->sheaf_capacity, st->sheaf_capacity_min, st->sheaf_capacity_max,
			st->events[USLAB_STAT_BARN_GET], st->events[USLAB_STAT_BARN_PUT],
			st->events[USLAB_STAT_SHEAF_GROW], st->events[USLAB_STAT_SHEAF_SHRINK],
			st->barn_full, st->barn_empty, rows[r].sheaved);
	}
}
