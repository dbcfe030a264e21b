// SPDX-License-Identifier: MIT
/*
 * prometheus.c - uslab-stat --prometheus: snapshots (export.h) in
 * Prometheus's text exposition format (version 0.0.4), the format
 * node_exporter's textfile collector reads and `promtool check metrics`
 * lints. Not OpenMetrics, whose counters' TYPE lines name the family
 * without `_total` and which ends with "# EOF": this format's TYPE line
 * names the sample, `_total` included, as those two parsers want.
 *
 * Every sample is labelled with pid and program (the command name), a
 * cache's with cache, a node's with node, an event's with event. No
 * timestamps (the textfile collector refuses them): the snapshot's time is
 * a gauge of its own, uslab_snapshot_timestamp_seconds. Gauges are what
 * is now; counters (`_total`) count since the process started.
 *
 * Label values come from another user's process: each is first escaped as
 * the other views escape it (export_escape(): a byte outside printable
 * ASCII, and '\\', as \xNN; valid UTF-8, and no byte reaches a terminal),
 * then as the format wants (\\ and \"). Cache names need not be unique: a
 * name a process gave more than one cache is "name#2", "name#3", ... for
 * the second, third, ... oldest of them, so that no two series are one.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>

#include "prometheus.h"

/* A metric family: its name, "gauge" or "counter", its HELP text. */
struct fam {
	const char *name;
	const char *type;
	const char *help;
};

/* A family as it is printed: its HELP and TYPE lines before its first sample. */
struct out {
	FILE *f;
	const struct fam *fam;
	bool headed;
};

/* A figure of the header (uint64_t at @off), times @scale (0: as it is). */
struct hfig {
	struct fam fam;
	size_t off;
	double scale;
};

/* A figure of a row (@size bytes at @off), or @fn's. */
struct rfig {
	struct fam fam;
	size_t off, size;
	uint64_t (*fn)(const struct export_row *r);
};

/* A figure of a node table entry (@size bytes at @off). */
struct nfig {
	struct fam fam;
	size_t off, size;
};

#define HDR(f) offsetof(struct export_header, f)
#define ROW(f) offsetof(struct export_row, f), sizeof(((const struct export_row *)0)->f)
#define NODE(f) \
	offsetof(struct uslab_node_stats, f), sizeof(((const struct uslab_node_stats *)0)->f)

static uint64_t slab_bytes(const struct export_row *r)
{
	return (uint64_t)r->st.pagesperslab * 4096u;
}

static const struct hfig hfigs[] = {
	{ { "uslab_heap_mapped_bytes", "gauge",
	    "Address space mapped for slabs and large objects (arenas, huge objects' own "
	    "mappings)." },
	  HDR(heap.mapped_bytes),
	  0 },
	{ { "uslab_heap_used_bytes", "gauge", "Pages given to slabs and large objects." },
	  HDR(heap.used_bytes),
	  0 },
	{ { "uslab_heap_retained_bytes", "gauge",
	    "Free pages still resident, waiting for the decay to purge them." },
	  HDR(heap.retained_bytes),
	  0 },
	{ { "uslab_heap_purged_bytes_total", "counter",
	    "Bytes given back to the kernel with madvise or munmap." },
	  HDR(heap.purged_bytes),
	  0 },
	{ { "uslab_heap_madvise_calls_total", "counter",
	    "madvise(MADV_DONTNEED) calls that purged." },
	  HDR(heap.madvise_calls),
	  0 },
	{ { "uslab_heap_munmap_calls_total", "counter",
	    "Arenas and huge objects unmapped (whole or their tails)." },
	  HDR(heap.munmap_calls),
	  0 },
	{ { "uslab_heap_mremap_calls_total", "counter", "Huge objects grown without copying." },
	  HDR(heap.mremap_calls),
	  0 },
	{ { "uslab_heap_grown_in_place_total", "counter",
	    "Large objects grown into the free pages after them." },
	  HDR(heap.grown_in_place),
	  0 },
	{ { "uslab_heap_arenas", "gauge", "Heap arenas mapped." }, HDR(heap.arenas), 0 },
	{ { "uslab_heap_huge_objects", "gauge",
	    "Objects in mappings of their own (above 32 MiB)." },
	  HDR(heap.huge_objects),
	  0 },
	{ { "uslab_heap_huge_bytes", "gauge", "Usable bytes of the huge objects (part of used)." },
	  HDR(heap.huge_bytes),
	  0 },
	{ { "uslab_heap_object_bytes", "gauge",
	    "Bytes of the objects handed out (cached in sheaves, large and huge included)." },
	  HDR(heap.object_bytes),
	  0 },
	{ { "uslab_reports_total", "counter",
	    "Problems uslab reported and the process outlived (uslab_bug_count(): the debug tier "
	    "with USLAB_ON_BUG=report). The sampling guard's and the free checks' reports stop "
	    "the process." },
	  HDR(reports),
	  0 },
	{ { "uslab_rcu_queued_total", "counter", "Objects passed to uslab_free_rcu()." },
	  HDR(rcu.queued),
	  0 },
	{ { "uslab_rcu_freed_total", "counter",
	    "Deferred objects freed after their grace period." },
	  HDR(rcu.freed),
	  0 },
	{ { "uslab_rcu_batches_total", "counter", "Grace periods waited for." },
	  HDR(rcu.batches),
	  0 },
	{ { "uslab_rcu_leaked_total", "counter",
	    "Deferred objects never freed (no block, no reserve)." },
	  HDR(rcu.leaked),
	  0 },
	{ { "uslab_snapshot_refreshes_total", "counter",
	    "Snapshots the process wrote (every USLAB_STATS_MS)." },
	  HDR(refreshes),
	  0 },
	{ { "uslab_snapshot_timestamp_seconds", "gauge",
	    "When the process wrote the snapshot read (Unix time)." },
	  HDR(updated_ns),
	  1e-9 },
	{ { "uslab_snapshot_refresh_cpu_seconds", "gauge",
	    "CPU time the process spent writing that snapshot." },
	  HDR(refresh_ns),
	  1e-9 },
};

static const struct rfig rfigs[] = {
	{ { "uslab_cache_objects_active", "gauge",
	    "Objects handed out of slabs: held by the program, or cached in sheaves and the barn." },
	  ROW(st.active_objs),
	  NULL },
	{ { "uslab_cache_objects", "gauge", "Objects the cache's slabs can hold." },
	  ROW(st.num_objs),
	  NULL },
	{ { "uslab_cache_objects_sheaved", "gauge",
	    "Of the active objects, those cached in threads' sheaves." },
	  ROW(sheaved),
	  NULL },
	{ { "uslab_cache_objects_guarded", "gauge",
	    "Of the active objects, those in the sampling guard's slots." },
	  ROW(guard_objs),
	  NULL },
	{ { "uslab_cache_slabs_active", "gauge", "Slabs holding at least one active object." },
	  ROW(st.active_slabs),
	  NULL },
	{ { "uslab_cache_slabs", "gauge", "Slabs the cache owns." }, ROW(st.num_slabs), NULL },
	{ { "uslab_cache_slabs_partial", "gauge",
	    "Slabs on the partial lists (kept empty ones included)." },
	  ROW(st.partial_slabs),
	  NULL },
	{ { "uslab_cache_object_size_bytes", "gauge",
	    "The object size the cache was created with." },
	  ROW(st.object_size),
	  NULL },
	{ { "uslab_cache_object_stride_bytes", "gauge",
	    "Bytes between two objects in a slab (object, padding, free pointer)." },
	  ROW(st.objsize),
	  NULL },
	{ { "uslab_cache_objects_per_slab", "gauge", "Objects per slab." },
	  ROW(st.objperslab),
	  NULL },
	{ { "uslab_cache_slab_size_bytes", "gauge", "Bytes of pages per slab." },
	  0,
	  0,
	  slab_bytes },
	{ { "uslab_cache_slab_meta_bytes", "gauge",
	    "Bytes per slab spent on tracking free objects (descriptor, index, free pointers)." },
	  ROW(st.meta_bytes),
	  NULL },
	{ { "uslab_cache_memory_bytes", "gauge",
	    "Bytes the cache's slabs take, their metadata included." },
	  0,
	  0,
	  export_row_bytes },
	{ { "uslab_cache_sheaf_capacity", "gauge",
	    "Objects per sheaf handed out now (0: the cache has no sheaves)." },
	  ROW(st.sheaf_capacity),
	  NULL },
	{ { "uslab_cache_sheaf_capacity_min", "gauge", "The adaptive sheaf capacity's base." },
	  ROW(st.sheaf_capacity_min),
	  NULL },
	{ { "uslab_cache_sheaf_capacity_max", "gauge",
	    "The largest the sheaf capacity may grow to." },
	  ROW(st.sheaf_capacity_max),
	  NULL },
	{ { "uslab_cache_barn_sheaves_full", "gauge", "Full sheaves in the barn." },
	  ROW(st.barn_full),
	  NULL },
	{ { "uslab_cache_barn_sheaves_empty", "gauge", "Empty sheaves in the barn." },
	  ROW(st.barn_empty),
	  NULL },
	{ { "uslab_cache_percpu", "gauge", "1 if the cache's sheaves are per CPU (USLAB_PERCPU)." },
	  ROW(st.percpu),
	  NULL },
	{ { "uslab_cache_percpu_cpus", "gauge", "CPUs with a slot of sheaves (per-CPU caches)." },
	  ROW(st.percpu_cpus),
	  NULL },
	{ { "uslab_cache_percpu_sheaves", "gauge", "Sheaves the CPUs hold (main and spare)." },
	  ROW(st.percpu_sheaves),
	  NULL },
	{ { "uslab_cache_percpu_objects", "gauge", "Objects cached in the CPUs' sheaves." },
	  ROW(st.percpu_objects),
	  NULL },
};

static const struct fam events = {
	"uslab_cache_events_total", "counter",
	"Slow-path events of the cache, by event (enum uslab_stat_item; uslab-stat --events)."
};

static const struct nfig nfigs[] = {
	{ { "uslab_cache_node_slabs", "gauge", "NUMA: the node's slabs of the cache." },
	  NODE(num_slabs) },
	{ { "uslab_cache_node_slabs_active", "gauge",
	    "NUMA: of those, slabs holding at least one active object." },
	  NODE(active_slabs) },
	{ { "uslab_cache_node_slabs_partial", "gauge", "NUMA: slabs on the node's partial list." },
	  NODE(partial_slabs) },
	{ { "uslab_cache_node_objects", "gauge", "NUMA: objects the node's slabs can hold." },
	  NODE(num_objs) },
	{ { "uslab_cache_node_objects_active", "gauge", "NUMA: of those, objects handed out." },
	  NODE(active_objs) },
	{ { "uslab_cache_node_remote_frees_total", "counter",
	    "NUMA: the node's objects freed on another node's CPU and sent home." },
	  NODE(remote_frees) },
	{ { "uslab_cache_node_fallbacks_total", "counter",
	    "NUMA: refills of the node's callers served by other nodes' slabs." },
	  NODE(fallbacks) },
	{ { "uslab_cache_node_pool_objects", "gauge",
	    "NUMA: a pool's free objects kept on the node." },
	  NODE(pool_objs) },
};

/* The @size-byte unsigned field at @off of @base. */
static uint64_t field(const void *base, size_t off, size_t size)
{
	uint32_t v32;
	uint64_t v64;

	if (size == sizeof(v32)) {
		memcpy(&v32, (const char *)base + off, sizeof(v32));
		return v32;
	}
	memcpy(&v64, (const char *)base + off, sizeof(v64));
	return v64;
}

/* A label value: escaped for a terminal (export_escape()), then for the format. */
static void label_value(FILE *f, const char *raw)
{
	char shown[EXPORT_NAME_ESCAPED];

	export_escape(shown, sizeof(shown), raw, false);
	for (const char *s = shown; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		fputc(*s, f); /* (no newline is left: export_escape wrote it as \x0a) */
	}
}

/*
 * The start of a sample of @o's family: its HELP and TYPE lines first if
 * need be, then the name and the labels of process @p, cache @cache (NULL:
 * none; its number among the process's caches of that name @dup, 1 for the
 * oldest), and @key="@val" (NULL: none). The caller prints the value.
 */
static void sample(struct out *o, const struct prom_process *p, const char *cache, unsigned int dup,
		   const char *key, const char *val)
{
	if (!o->headed) {
		fprintf(o->f, "# HELP %s %s\n# TYPE %s %s\n", o->fam->name, o->fam->help,
			o->fam->name, o->fam->type);
		o->headed = true;
	}
	fprintf(o->f, "%s{pid=\"%d\",program=\"", o->fam->name, p->h->pid);
	label_value(o->f, p->program);
	fputc('"', o->f);
	if (cache) {
		fputs(",cache=\"", o->f);
		label_value(o->f, cache);
		if (dup > 1)
			fprintf(o->f, "#%u", dup);
		fputc('"', o->f);
	}
	if (key)
		fprintf(o->f, ",%s=\"%s\"", key, val);
	fputs("} ", o->f);
}

/* The rows of one process by name, then oldest first (the highest index: rows are newest first). */
static int cmp_name_age(const void *pa, const void *pb)
{
	const struct export_row *a = *(const struct export_row *const *)pa;
	const struct export_row *b = *(const struct export_row *const *)pb;
	int c = strcmp(a->name, b->name);

	return c ? c : a->index > b->index ? -1 : a->index < b->index;
}

/*
 * Each row's number among the process's caches of its name (1: the oldest),
 * by row index, into @dup (@p->h->nrows entries). Return: false for no memory.
 */
static bool number_names(const struct prom_process *p, unsigned int *dup)
{
	uint32_t n = p->h->nrows;
	const struct export_row **by = malloc((n ? n : 1) * sizeof(*by));

	if (!by)
		return false;
	for (uint32_t i = 0; i < n; i++)
		by[i] = &p->rows[i];
	qsort(by, n, sizeof(*by), cmp_name_age);
	for (uint32_t i = 0; i < n; i++)
		dup[by[i]->index] =
			i && !strcmp(by[i]->name, by[i - 1]->name) ? dup[by[i - 1]->index] + 1 : 1;
	free(by);
	return true;
}

void prom_print(FILE *f, const struct prom_process *p, size_t n)
{
	unsigned int **dup = calloc(n ? n : 1, sizeof(*dup));
	char num[16];

	for (size_t i = 0; dup && i < n; i++) {
		dup[i] = calloc(p[i].h->nrows ? p[i].h->nrows : 1, sizeof(**dup));
		if (!dup[i] || !number_names(&p[i], dup[i])) {
			fprintf(stderr, "uslab-stat: no memory\n");
			exit(1);
		}
	}
	if (!dup) {
		fprintf(stderr, "uslab-stat: no memory\n");
		exit(1);
	}
	for (size_t k = 0; k < sizeof(hfigs) / sizeof(hfigs[0]); k++) {
		struct out o = { f, &hfigs[k].fam, false };

		for (size_t i = 0; i < n; i++) {
			uint64_t v = field(p[i].h, hfigs[k].off, sizeof(uint64_t));

			sample(&o, &p[i], NULL, 0, NULL, NULL);
			if (hfigs[k].scale)
				fprintf(f, "%.9f\n", (double)v * hfigs[k].scale);
			else
				fprintf(f, "%" PRIu64 "\n", v);
		}
	}
	for (size_t k = 0; k < sizeof(rfigs) / sizeof(rfigs[0]); k++) {
		struct out o = { f, &rfigs[k].fam, false };

		for (size_t i = 0; i < n; i++)
			for (uint32_t r = 0; r < p[i].h->nrows; r++) {
				const struct export_row *row = &p[i].rows[r];

				sample(&o, &p[i], row->name, dup[i][row->index], NULL, NULL);
				fprintf(f, "%" PRIu64 "\n",
					rfigs[k].fn ? rfigs[k].fn(row) :
						      field(row, rfigs[k].off, rfigs[k].size));
			}
	}
	{
		struct out o = { f, &events, false };

		for (size_t i = 0; i < n; i++)
			for (uint32_t r = 0; r < p[i].h->nrows; r++) {
				const struct export_row *row = &p[i].rows[r];

				for (unsigned int e = 0; uslab_stat_name(e); e++) {
					sample(&o, &p[i], row->name, dup[i][row->index], "event",
					       uslab_stat_name(e));
					fprintf(f, "%" PRIu64 "\n", row->st.events[e]);
				}
			}
	}
	for (size_t k = 0; k < sizeof(nfigs) / sizeof(nfigs[0]); k++) {
		struct out o = { f, &nfigs[k].fam, false };

		for (size_t i = 0; i < n; i++)
			for (uint32_t r = 0; p[i].nodes && r < p[i].h->nrows; r++) {
				const struct export_row *row = &p[i].rows[r];

				for (uint32_t nid = 0; nid < p[i].h->nr_nodes; nid++) {
					const struct uslab_node_stats *ns =
						&p[i].nodes[(size_t)row->index * p[i].h->nr_nodes +
							    nid];

					snprintf(num, sizeof(num), "%u", nid);
					sample(&o, &p[i], row->name, dup[i][row->index], "node",
					       num);
					fprintf(f, "%" PRIu64 "\n",
						field(ns, nfigs[k].off, nfigs[k].size));
				}
			}
	}
	for (size_t i = 0; i < n; i++)
		free(dup[i]);
	free(dup);
}
