// SPDX-License-Identifier: MIT
/*
 * options.c - runtime tunables, read once from the environment at start-up.
 *
 * Every tunable is one row of the table below: its variable, default and
 * accepted range. doc/tuning.md gives the measurement behind each default.
 * A value that does not parse or is out of range is reported on stderr and
 * the default is kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "os.h" /* SLAB_MAX_ORDER */
/* (After the library's headers, which set how <uslab.h> is read inside it.) */
#include "export.h" /* EXPORT_DIR_MAX */

struct uslab_options usl_opt;
__thread bool usl_thread_exiting __attribute__((tls_model("initial-exec")));

/* USLAB_STATS_DIR: export_dir() reads it where it is used (export.c and uslab-stat); checked here. */
static int stats_dir_parse(const char *s)
{
	return s && (s[0] != '/' || strlen(s) > EXPORT_DIR_MAX);
}

/* USLAB_PROFILE_DIR: profile.c reads it at exit; any path (relative: to the current directory). */
static int profile_dir_parse(const char *s)
{
	(void)s;
	return 0;
}

/* enum uslab_layout by name (uslab_layout_name(), USLAB_LAYOUT). */
const char *const usl_layout_names[USLAB_LAYOUT_NR + 1] = {
	"auto", "freeptr", "objfreelist", "onslab", "offslab", NULL,
};

/* USLAB_ON_BUG (enum on_bug). */
const char *const usl_on_bug_names[] = { "default", "abort", "report", NULL };
/* USLAB_STATS (enum stats_mode). */
const char *const usl_stats_names[] = { "off", "on", "exit", NULL };
/* USLAB_PROFILE (enum profile_mode). */
static const char *const usl_profile_names[] = { "off", "on", "exit", NULL };
/* USLAB_PERCPU (enum percpu_mode). */
const char *const usl_percpu_names[] = { "0", "1", "auto", NULL };
/* USLAB_FREE_KEY (enum free_key_mode). */
static const char *const usl_free_key_names[] = { "0", "1", "malloc", NULL };

/*
 * One tunable: a number in [min, max], or with @names one of those words
 * (its index; a number is accepted too).
 */
static const struct option_row {
	const char *env;
	unsigned int *var;
	unsigned int def, min, max;
	const char *what;
	const char *const *names;
	int (*parse)(const char *s); /* a string option (@var NULL): parse(NULL) resets it */
} options[] = {
	{ "USLAB_MIN_OBJECTS", &usl_opt.min_objects, 0, 0, 65535,
	  "objects per slab at least (0: 4 * (fls(nr_cpus) + 1), as SLUB)", NULL, NULL },
	{ "USLAB_MIN_ORDER", &usl_opt.min_order, 2, 0, SLAB_MAX_ORDER,
	  "smallest slab order (SLUB: 0; 2 amortises per-slab work, doc/tuning.md)", NULL, NULL },
	{ "USLAB_MAX_ORDER", &usl_opt.max_order, 3, 0, SLAB_MAX_ORDER,
	  "largest slab order chosen for the min_objects rule", NULL, NULL },
	{ "USLAB_MIN_PARTIAL", &usl_opt.min_partial, 0, 0, 1000,
	  "empty slabs kept per cache (0: 5..10 by size, as SLUB)", NULL, NULL },
	{ "USLAB_SHEAF_CAPACITY", &usl_opt.sheaf_capacity, 0, 0, 1022,
	  "objects per sheaf for every cache, pinned (0: from USLAB_SHEAF_BYTES, adaptive; 1: none)",
	  NULL, NULL },
	{ "USLAB_SHEAF_BYTES", &usl_opt.sheaf_bytes, 32768, 64, 1u << 24,
	  "bytes of objects a default sheaf holds (capacity 2..126) before it grows", NULL, NULL },
	{ "USLAB_SHEAF_MAX", &usl_opt.sheaf_max, 1022, 2, 1022,
	  "objects per sheaf an adaptive cache grows to at most (126 or less: no growth)", NULL,
	  NULL },
	{ "USLAB_SHEAF_MAX_BYTES", &usl_opt.sheaf_max_bytes, 1u << 20, 64, 1u << 30,
	  "bytes of objects a grown sheaf holds at most", NULL, NULL },
	{ "USLAB_SHEAF_GROW_RATE", &usl_opt.sheaf_grow_rate, 32000, 1, 1000000000,
	  "barn trades per second of a cache above which its sheaf capacity doubles", NULL, NULL },
	{ "USLAB_SHEAF_DECAY_MS", &usl_opt.sheaf_decay_ms, 100, 1, 3600000,
	  "milliseconds of few trades after which a grown sheaf capacity halves", NULL, NULL },
	{ "USLAB_BARN_MAX_FULL", &usl_opt.barn_max_full, 10, 0, 100000,
	  "full sheaves a barn keeps (its base depth: USLAB_BARN_MAX_MB lets it grow)", NULL,
	  NULL },
	{ "USLAB_BARN_MAX_MB", &usl_opt.barn_max_mb, 1024, 0, 1u << 20,
	  "MiB of objects a barn's full sheaves may hold when its depth grows (0: no growth)", NULL,
	  NULL },
	{ "USLAB_MALLOC_BARN_MAX_MB", &usl_opt.dropin_barn_mb, 0, 0, 1u << 20,
	  "the same for the size classes of the malloc drop-in (0: no growth)", NULL, NULL },
	{ "USLAB_BARN_MAX_EMPTY", &usl_opt.barn_max_empty, 10, 0, 100000,
	  "empty sheaves a barn keeps", NULL, NULL },
	{ "USLAB_LOOKAHEAD", &usl_opt.lookahead, 3, 0, 1024,
	  "detached freelist look-ahead when flushing (seed: 3)", NULL, NULL },
	{ "USLAB_PURGE_DELAY_MS", &usl_opt.purge_delay_ms, 20, 0, 3600000,
	  "the page heap's decay tick: a freed page unused for one to two ticks is purged (0: at once)",
	  NULL, NULL },
	{ "USLAB_RETAIN_KB", &usl_opt.retain_kb, 1u << 20, 0, 1u << 30,
	  "KiB of freed pages kept resident at most (beyond it, frees purge a batch themselves)",
	  NULL, NULL },
	{ "USLAB_HUGEPAGES", &usl_opt.hugepages, 0, 0, 1,
	  "1: ask for transparent huge pages on the heap's arenas; the decay purges whole 2 MiB only",
	  NULL, NULL },
	{ "USLAB_PREFETCH", &usl_opt.prefetch, 1022, 0, 1022,
	  "objects of a sheaf taken from the barn prefetched for writing", NULL, NULL },
	{ "USLAB_RCU_DRAIN_MS", &usl_opt.rcu_drain_ms, 20, 1, 60000,
	  "milliseconds a partly filled block of deferred frees may wait", NULL, NULL },
	{ "USLAB_RCU_BATCH_BLOCKS", &usl_opt.rcu_batch_blocks, 64, 1, 4096,
	  "full blocks (509 objects each) queued that wake the monitor", NULL, NULL },
	{ "USLAB_RCU_MAX_INFLIGHT", &usl_opt.rcu_max_inflight, 256, 16, 1u << 24,
	  "blocks waiting for a grace period before uslab_free_rcu() waits", NULL, NULL },
	{ "USLAB_LAYOUT", &usl_opt.layout, USLAB_LAYOUT_AUTO, 0, USLAB_LAYOUT_NR - 1,
	  "slab layout of every cache created with AUTO, where it can serve (auto, "
	  "freeptr, objfreelist, onslab, offslab)",
	  usl_layout_names, NULL },
	{ "USLAB_COLOUR", &usl_opt.colour, 0, 0, 1,
	  "slab colouring: offset the first object from slab to slab (1: on)", NULL, NULL },
	{ "USLAB_ON_BUG", &usl_opt.on_bug, ON_BUG_DEFAULT, 0, ON_BUG_REPORT,
	  "what a problem found by the debug tier does: abort, or report and go on "
	  "(default: abort in caches with F, report in the others)",
	  usl_on_bug_names, NULL },
	{ "USLAB_DEBUG_FRAMES", &usl_opt.debug_frames, 1, 1, 16,
	  "call-site frames kept per allocation and free of a cache with U: 1, the "
	  "caller's return address; more, a DWARF backtrace of that many (costly)",
	  NULL, NULL },
	{ "USLAB_STATS", &usl_opt.stats, STATS_OFF, 0, STATS_EXIT,
	  "export every cache's statistics for uslab-stat (1, on), or print them at exit (exit)",
	  usl_stats_names, NULL },
	{ "USLAB_STATS_MS", &usl_opt.stats_ms, 1000, 10, 3600000,
	  "milliseconds between two snapshots of USLAB_STATS=1", NULL, NULL },
	{ "USLAB_COUNTER_BATCH", &usl_opt.counter_batch, 0, 0, 1u << 30,
	  "delta a thread keeps per uslab_counter (0: max(32, 2 * CPUs), as percpu_counter_batch)",
	  NULL, NULL },
	{ "USLAB_IDGEN_BATCH", &usl_opt.idgen_batch, USLAB_IDGEN_BATCH, 1, 1u << 30,
	  "IDs a thread takes at once from a uslab_idgen (get_next_ino: 1024)", NULL, NULL },
	{ "USLAB_PERCPU", &usl_opt.percpu, PERCPU_AUTO, 0, PERCPU_AUTO,
	  "per-CPU sheaves (rseq): 0 never, 1 for every cache with sheaves, auto for caches "
	  "created with USLAB_PERCPU and those many threads use",
	  usl_percpu_names, NULL },
	{ "USLAB_PERCPU_THREADS", &usl_opt.percpu_threads, 32, 1, 1u << 20,
	  "auto: a cache switches to per-CPU sheaves when more threads hold its sheaves than "
	  "this many per CPU",
	  NULL, NULL },
	{ "USLAB_GUARD", &usl_opt.guard, 1000, 0, 1u << 30,
	  "sampling guard: one allocation in this many allocation slow paths (sheaf misses) of "
	  "each thread comes from a slot beside guard pages (0: off, 1: every slow path)",
	  NULL, NULL },
	{ "USLAB_GUARD_SLOTS", &usl_opt.guard_slots, 255, 1, 65535,
	  "slots of the sampling guard, live and freed objects held back (8 KiB of address "
	  "space each)",
	  NULL, NULL },
	{ "USLAB_FREE_KEY", &usl_opt.free_key, FREE_KEY_MALLOC, 0, FREE_KEY_MALLOC,
	  "the free key (a double free stopped at the call): 0 no cache, 1 every cache that can "
	  "carry it, malloc only the malloc drop-in's classes (and caches created with "
	  "USLAB_FREE_KEY)",
	  usl_free_key_names, NULL },
	{ "USLAB_PROFILE", &usl_opt.profile, PROFILE_OFF, 0, PROFILE_EXIT,
	  "sampled heap profile of kmalloc and malloc: on keeps it (uslab-stat --heap-profile "
	  "with USLAB_STATS=1), exit also writes uslab-heap.<pid>.prof at exit",
	  usl_profile_names, NULL },
	{ "USLAB_PROFILE_BYTES", &usl_opt.profile_bytes, 2u << 20, 0, 1u << 30,
	  "heap profile: one sample per this many bytes handed out on average (0: off)", NULL,
	  NULL },
	/* No variable: strings of their own, parsed by their owners. */
	{ "USLAB_FAILSLAB", NULL, 0, 0, 0,
	  "probability[,interval[,times[,cache]]]: allocations fail with ENOMEM (failslab)", NULL,
	  failslab_parse },
	{ "USLAB_DEBUG", NULL, 0, 0, 0,
	  "debug tier letters F, Z, P, U (1 or none: all), then optionally ,cache,cache...", NULL,
	  debug_parse },
	{ "USLAB_NUMA", &usl_opt.numa, 1, 0, 1,
	  "1: NUMA-aware when the machine (or USLAB_NUMA_FAKE) has two nodes or more; 0: one node",
	  NULL, NULL },
	{ "USLAB_NUMA_FAKE", NULL, 0, 0, 0,
	  "a fake topology for tests: CPU:NODE,... (unlisted CPUs on node 0) or a node count N "
	  "(CPU i on node i % N); memory stays on real node 0",
	  NULL, numa_fake_parse },
	{ "USLAB_PROFILE_DIR", NULL, 0, 0, 0,
	  "directory of USLAB_PROFILE=exit's uslab-heap.<pid>.prof (unset: the current "
	  "directory)",
	  NULL, profile_dir_parse },
	{ "USLAB_STATS_DIR", NULL, 0, 0, 0,
	  "directory of USLAB_STATS=1's files, an absolute path (unset: /run/user/UID if "
	  "there, else /dev/shm/uslab-UID)",
	  NULL, stats_dir_parse },
};

/* A string option whose value was rejected (options_print shows "unset", as in effect). */
static bool rejected[ARRAY_SIZE(options)];

/* @s as the index of one of @names; -1 if it is none of them. */
static long name_index(const char *const *names, const char *s)
{
	for (long i = 0; names && names[i]; i++) {
		if (!strcmp(names[i], s))
			return i;
	}
	return -1;
}

void options_init(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	usl_opt.nr_cpus = cpus > 0 ? (unsigned int)cpus : 1;
	for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
		const struct option_row *o = &options[i];
		const char *s = getenv(o->env);
		char *end;
		unsigned long v;

		if (o->var)
			*o->var = o->def;
		else
			o->parse(NULL);
		rejected[i] = false;
		if (!s)
			continue;
		if (!*s) {
			usl_warn("%s= (empty) ignored: want %s", o->env, o->what);
			continue;
		}
		if (!o->var) {
			if (o->parse(s)) {
				o->parse(NULL);
				rejected[i] = true;
				usl_warn("%s=%s ignored: want %s", o->env, s, o->what);
			}
			continue;
		}
		if (name_index(o->names, s) >= 0) {
			*o->var = (unsigned int)name_index(o->names, s);
			continue;
		}
		/* Decimal digits only: strtoul alone takes spaces, signs and 0x. */
		errno = 0;
		v = *s >= '0' && *s <= '9' ? strtoul(s, &end, 10) : (end = (char *)s, 0);
		if (errno || end == s || *end || v < o->min || v > o->max) {
			usl_warn("%s=%s ignored: want %u..%u, decimal (%s)", o->env, s, o->min,
				 o->max, o->what);
			continue;
		}
		*o->var = (unsigned int)v;
	}
}

/* A string option's value in effect: what the environment says if it was taken, else unset. */
static const char *string_value(const struct option_row *o)
{
	const char *s = getenv(o->env);

	return s && *s && !rejected[o - options] ? s : "unset";
}

/* Every tunable: value in effect, default, range, meaning (export.c, at start-up too). */
void options_print(FILE *f)
{
	fprintf(f, "# variable               value    default  range  meaning\n");
	for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
		const struct option_row *o = &options[i];
		char val[32], def[32], range[96];

		if (!o->var) {
			fprintf(f, "%-24s %-8s %-8s %-6s %s\n", o->env, string_value(o), "unset",
				"-", o->what);
			continue;
		}
		if (o->names) {
			snprintf(val, sizeof(val), "%s", o->names[*o->var]);
			snprintf(def, sizeof(def), "%s", o->names[o->def]);
			/* Every word, then the numbers: "off,on,exit,0..2" (doc_tuning_options). */
			size_t n = 0;

			for (unsigned int k = o->min; k <= o->max; k++)
				n += (size_t)snprintf(range + n, sizeof(range) - n, "%s,",
						      o->names[k]);
			snprintf(range + n, sizeof(range) - n, "%u..%u", o->min, o->max);
		} else {
			snprintf(val, sizeof(val), "%u", *o->var);
			snprintf(def, sizeof(def), "%u", o->def);
			snprintf(range, sizeof(range), "%u..%u", o->min, o->max);
		}
		fprintf(f, "%-24s %-8s %-8s %-6s %s\n", o->env, val, def, range, o->what);
	}
}

void uslab_options_print(FILE *f)
{
	int old;

	if (f && !usl_init()) {
		old = usl_nocancel(); /* fprintf() may be a cancellation point */
		options_print(f);
		usl_cancel_restore(old);
	}
}
