// SPDX-License-Identifier: MIT
/*
 * export_format.c - the tables of a snapshot (export.h): /proc/slabinfo's
 * format, the event counters, the sheaves and the page heap. Compiled
 * into the library (uslab_stats_print, USLAB_STATS=exit) and into
 * uslab-stat, so both print the same thing. Cache names are printed escaped (export_escape()).
 */
#include <inttypes.h>
#include <stddef.h>

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
	fprintf(f, "# %-15s %8s %5s %5s %10s %10s %6s %6s %4s %5s %8s %6s %8s %8s\n", "cache",
		"capacity", "min", "max", "barn_get", "barn_put", "grow", "shrink", "full", "empty",
		"sheaved", "percpu", "cpu_shv", "cpu_objs");
	for (uint32_t r = 0; r < n; r++) {
		const struct uslab_cache_stats *st = &rows[r].st;
		char name[EXPORT_NAME_ESCAPED];

		if (!st->sheaf_capacity)
			continue;
		export_escape(name, sizeof(name), rows[r].name, false);
		fprintf(f,
			"%-17s %8u %5u %5u %10" PRIu64 " %10" PRIu64 " %6" PRIu64 " %6" PRIu64
			" %4lu %5lu %8" PRIu64 " %6u %8lu %8lu\n",
			name, st->sheaf_capacity, st->sheaf_capacity_min, st->sheaf_capacity_max,
			st->events[USLAB_STAT_BARN_GET], st->events[USLAB_STAT_BARN_PUT],
			st->events[USLAB_STAT_SHEAF_GROW], st->events[USLAB_STAT_SHEAF_SHRINK],
			st->barn_full, st->barn_empty, rows[r].sheaved, st->percpu_cpus,
			st->percpu_sheaves, st->percpu_objects);
	}
}

/*
 * --nodes: each cache's slabs per NUMA node (a row per cache and node with
 * slabs); with NUMA off (@nr_nodes 0) a line that says so.
 */
void export_print_nodes(FILE *f, const struct export_row *rows, uint32_t n,
			const struct uslab_node_stats *nodes, uint32_t nr_nodes)
{
	if (!nr_nodes) {
		fprintf(f, "# one NUMA node: every slab is node 0's (uslab-stat PID shows them)\n");
		return;
	}
	fprintf(f, "# %-15s %4s %8s %10s %10s %8s %12s %9s %9s\n", "cache", "node", "slabs", "objs",
		"active", "partial", "remote_frees", "fallbacks", "pool_objs");
	for (uint32_t r = 0; r < n; r++) {
		char name[EXPORT_NAME_ESCAPED];

		export_escape(name, sizeof(name), rows[r].name, false);
		for (uint32_t k = 0; k < nr_nodes; k++) {
			const struct uslab_node_stats *ns =
				&nodes[(size_t)rows[r].index * nr_nodes + k];

			if (!ns->num_slabs && !ns->remote_frees && !ns->fallbacks && !ns->pool_objs)
				continue;
			fprintf(f,
				"%-17s %4u %8lu %10lu %10lu %8lu %12" PRIu64 " %9" PRIu64 " %9lu\n",
				name, k, ns->num_slabs, ns->num_objs, ns->active_objs,
				ns->partial_slabs, ns->remote_frees, ns->fallbacks, ns->pool_objs);
		}
	}
}

double export_madvise_per_gib(const struct uslab_heap_stats *h)
{
	return h->purged_bytes ? (double)h->madvise_calls * (1u << 30) / (double)h->purged_bytes :
				 -1;
}

/* @b bytes, for a reader: KiB, MiB or GiB with one decimal. */
static const char *human(char *buf, size_t n, uint64_t b)
{
	if (b >= (1ull << 30))
		snprintf(buf, n, "%.1f GiB", (double)b / (1u << 30));
	else if (b >= (1u << 20))
		snprintf(buf, n, "%.1f MiB", (double)b / (1u << 20));
	else
		snprintf(buf, n, "%.1f KiB", (double)b / 1024);
	return buf;
}

void export_print_heap(FILE *f, const struct uslab_heap_stats *h)
{
	static const struct {
		const char *name;
		size_t off;
		bool bytes;
		const char *what;
	} figs[] = {
#define FIG(field, bytes, what) { #field, offsetof(struct uslab_heap_stats, field), bytes, what }
		FIG(mapped_bytes, true, "address space of arenas and huge objects"),
		FIG(used_bytes, true, "pages of slabs and large objects"),
		FIG(retained_bytes, true, "free and resident: the decay purges them"),
		FIG(purged_bytes, true, "given back (madvise, munmap), since start-up"),
		FIG(madvise_calls, false, "MADV_DONTNEED calls, since start-up"),
		FIG(munmap_calls, false, "arenas and huge objects unmapped, since start-up"),
		FIG(mremap_calls, false, "huge objects grown by mremap, since start-up"),
		FIG(grown_in_place, false, "large objects grown in the heap, since start-up"),
		FIG(arenas, false, "64 MiB arenas mapped"),
		FIG(huge_objects, false, "objects in mappings of their own"),
		FIG(huge_bytes, true, "their bytes (part of used_bytes)"),
		FIG(object_bytes, true, "objects handed out (sheaves', large, huge included)"),
#undef FIG
	};
	double per_gib = export_madvise_per_gib(h);
	char buf[32];

	fprintf(f, "# %-21s %14s %10s  %s\n", "page heap", "value", "", "meaning");
	for (size_t i = 0; i < sizeof(figs) / sizeof(figs[0]); i++) {
		uint64_t v;

		memcpy(&v, (const char *)h + figs[i].off, sizeof(v));
		fprintf(f, "%-23s %14" PRIu64 " %10s  %s\n", figs[i].name, v,
			figs[i].bytes ? human(buf, sizeof(buf), v) : "", figs[i].what);
	}
	if (per_gib < 0)
		fprintf(f, "%-23s %14s %10s  %s\n", "madvise_per_gib_purged", "-", "",
			"nothing purged yet");
	else
		fprintf(f, "%-23s %14.1f %10s  %s\n", "madvise_per_gib_purged", per_gib, "",
			"madvise calls per GiB purged");
}

void export_print_heap_line(FILE *f, const struct uslab_heap_stats *h)
{
	char m[32], u[32], r[32], p[32];

	fprintf(f,
		"# heap: %s mapped, %s used, %s retained, %s purged (%" PRIu64 " madvise, %" PRIu64
		" munmap), %" PRIu64 " arenas, %" PRIu64 " huge objects\n",
		human(m, sizeof(m), h->mapped_bytes), human(u, sizeof(u), h->used_bytes),
		human(r, sizeof(r), h->retained_bytes), human(p, sizeof(p), h->purged_bytes),
		h->madvise_calls, h->munmap_calls, h->arenas, h->huge_objects);
}
