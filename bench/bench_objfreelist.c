// SPDX-License-Identifier: MIT
/*
 * bench_objfreelist.c - slab layouts (issue 11) measured one against the
 * other: the seed's OBJFREELIST table and the memory each layout costs.
 * uslab only, one program.
 *
 *	objfreelist table [LOOPS [REPS]]
 *		The seed's "Kmalloc: Repeatedly allocate then free test"
 *		(slab-objfreelist-slab.txt): for N = 32 ... 4096, LOOPS
 *		(default 100000; BENCH_QUICK=1: 20000) uslab_cache_alloc() of an
 *		N-byte object, then LOOPS uslab_cache_free() in the same order;
 *		cycles per alloc and per free. One cache per N and layout
 *		(.layout = freeptr, objfreelist, onslab, offslab, auto), default
 *		sheaves: the loops go through the sheaves, which refill from and
 *		flush to the slabs. Between the allocs and the frees every page
 *		of every object is touched, untimed (the seed's slabs are
 *		resident kernel memory: the frees do not pay the page faults of
 *		objects never used); the timed loops touch nothing.
 *		One untimed round per cache, then REPS (default 5) rounds with
 *		the layouts in turn; medians. A layout the cache cannot have
 *		(EINVAL) is "n/a". bench/run runs it with USLAB_PURGE_DELAY_MS
 *		and USLAB_RETAIN_KB raised, so that slabs emptied by the frees
 *		keep their pages (as the kernel's page allocator would): with
 *		the defaults, on a machine where madvise and page faults are
 *		slow, returning pages to the OS and faulting them back in
 *		decides the figures at 1 KiB and above, not the layout.
 *	objfreelist kmalloc [LOOPS [REPS]]
 *		The same through uslab_kmalloc / uslab_kfree (the size classes);
 *		the variant is "kmalloc-" and USLAB_LAYOUT's value ("auto" when
 *		it is unset), so bench/run compares two processes.
 *	objfreelist memory [OBJS]
 *		For each layout, object size (64 96 192 256 1024) and with and
 *		without a constructor: OBJS (default 100000) objects allocated,
 *		then from uslab_cache_stats(): objects and pages per slab,
 *		metadata bytes per slab (meta_bytes: the 64-byte slab
 *		descriptor, an index array reserved in the slab or allocated
 *		apart, out-of-object free pointers) and per object, metadata as
 *		a percentage of the slab, slab memory per live byte
 *		(num_slabs * pagesperslab * 4096 / (active_objs * object_size))
 *		and the number of colours.
 *
 * Output: the seed's line ("100000 times alloc(32) -> 116 cycles free ->
 * 78 cycles") or one line per figure, and CSV lines for bench/run:
 * CSV,objfreelist,uslab-<layout>,N,{alloc,free}_{cycles,ns},value,
 * CSV,objfreelist,kmalloc-<layout>,N,...,
 * CSV,layoutmem,<layout>,<size>[-ctor],<metric>,value; for auto, the layout
 * it chose as metric "layout" (enum uslab_layout).
 */
#include "bench.h"

#include <errno.h>
#include <uslab.h>
#include <uslab/kmalloc.h>

static const size_t table_sizes[] = { 32, 64, 128, 256, 512, 1024, 2048, 4096 };
static const size_t mem_sizes[] = { 64, 96, 192, 256, 1024 };
/* The order in which layouts run: the forced ones, then auto. */
static const unsigned int layouts[] = { USLAB_LAYOUT_FREEPTR, USLAB_LAYOUT_OBJFREELIST,
					USLAB_LAYOUT_ONSLAB, USLAB_LAYOUT_OFFSLAB,
					USLAB_LAYOUT_AUTO };
#define NR_LAYOUTS (sizeof(layouts) / sizeof(layouts[0]))
#define NR_TABLE (sizeof(table_sizes) / sizeof(table_sizes[0]))

static void **objs;

static void ctor(void *obj)
{
	memset(obj, 0x5a, 16);
}

/* Whether freed slabs' pages stay resident longer than by default (bench/run sets both). */
static const char *resident_note(void)
{
	return getenv("USLAB_PURGE_DELAY_MS") || getenv("USLAB_RETAIN_KB") ?
		       " (USLAB_PURGE_DELAY_MS / USLAB_RETAIN_KB set)" :
		       "";
}

/* A cache of @size bytes with @layout, or NULL when the layout is impossible (EINVAL). */
static struct uslab_cache *make_cache(size_t size, unsigned int layout, bool with_ctor)
{
	struct uslab_cache_args args = { 0 };
	struct uslab_cache *c;
	char name[64];

	args.layout = layout;
	args.ctor = with_ctor ? ctor : NULL;
	snprintf(name, sizeof(name), "%s-%zu%s", uslab_layout_name(layout), size,
		 with_ctor ? "-ctor" : "");
	c = uslab_cache_create(name, size, &args, 0);
	if (!c && errno != EINVAL) {
		perror("uslab_cache_create");
		abort();
	}
	return c;
}

static unsigned int layout_of(struct uslab_cache *c)
{
	struct uslab_cache_stats st;

	return uslab_cache_stats(c, &st) ? USLAB_LAYOUT_AUTO : st.layout;
}

/* @loops allocs then @loops frees: cycles per alloc in *a, per free in *f. */
static void alloc_then_free(struct uslab_cache *c, size_t size, unsigned long loops, double *a,
			    double *f)
{
	uint64_t t0, t1, t2, t3;

	t0 = tsc_now();
	if (c)
		for (unsigned long i = 0; i < loops; i++)
			objs[i] = uslab_cache_alloc(c);
	else
		for (unsigned long i = 0; i < loops; i++)
			objs[i] = uslab_kmalloc(size);
	t1 = tsc_now();
	escape(objs);
	/*
	 * The seed's slabs are kernel memory, always resident: touch every
	 * page of every object (untimed), as a program using them would, so
	 * the free phase does not pay the page faults of objects never used.
	 */
	for (unsigned long i = 0; i < loops; i++) {
		for (size_t b = 0; b < size; b += 4096)
			((volatile char *)objs[i])[b] = 1;
		((volatile char *)objs[i])[size - 1] = 1;
	}
	t2 = tsc_now();
	if (c)
		for (unsigned long i = 0; i < loops; i++)
			uslab_cache_free(c, objs[i]);
	else
		for (unsigned long i = 0; i < loops; i++)
			uslab_kfree(objs[i]);
	t3 = tsc_now();
	for (unsigned long i = 0; i < loops; i++)
		if (!objs[i])
			abort();
	*a = (double)(t1 - t0) / (double)loops;
	*f = (double)(t3 - t2) / (double)loops;
}

static void print_row(const char *variant, size_t size, unsigned long loops, double a, double f,
		      int layout)
{
	double g = tsc_per_ns();

	printf("%lu times alloc(%zu) -> %.0f cycles free -> %.0f cycles   (%s; %.3f ns, %.3f ns)\n",
	       loops, size, a, f, variant, a / g, f / g);
	printf("CSV,objfreelist,%s,%zu,alloc_cycles,%.3f\n", variant, size, a);
	printf("CSV,objfreelist,%s,%zu,free_cycles,%.3f\n", variant, size, f);
	printf("CSV,objfreelist,%s,%zu,alloc_ns,%.4f\n", variant, size, a / g);
	printf("CSV,objfreelist,%s,%zu,free_ns,%.4f\n", variant, size, f / g);
	if (layout >= 0)
		printf("CSV,objfreelist,%s,%zu,layout,%d\n", variant, size, layout);
}

static void table(unsigned long loops, int reps)
{
	double *a = malloc(NR_LAYOUTS * (size_t)reps * sizeof(double));
	double *f = malloc(NR_LAYOUTS * (size_t)reps * sizeof(double));

	printf("uslab_cache_alloc/free: %lu allocs then %lu frees (cycles each), %d rounds, medians%s\n",
	       loops, loops, reps, resident_note());
	for (size_t k = 0; k < NR_TABLE; k++) {
		size_t size = table_sizes[k];
		struct uslab_cache *c[NR_LAYOUTS];
		double dummy;

		for (size_t l = 0; l < NR_LAYOUTS; l++) {
			c[l] = make_cache(size, layouts[l], false);
			if (c[l]) /* warm: the slabs exist */
				alloc_then_free(c[l], size, loops, &dummy, &dummy);
		}
		for (int r = 0; r < reps; r++)
			for (size_t l = 0; l < NR_LAYOUTS; l++)
				if (c[l])
					alloc_then_free(c[l], size, loops, &a[l * reps + r],
							&f[l * reps + r]);
		for (size_t l = 0; l < NR_LAYOUTS; l++) {
			char variant[64];

			snprintf(variant, sizeof(variant), "uslab-%s",
				 uslab_layout_name(layouts[l]));
			if (!c[l]) {
				printf("%lu times alloc(%zu) -> n/a   (%s: EINVAL)\n", loops, size,
				       variant);
				printf("CSV,objfreelist,%s,%zu,na,1\n", variant, size);
				continue;
			}
			print_row(variant, size, loops, median(&a[l * reps], (size_t)reps),
				  median(&f[l * reps], (size_t)reps),
				  layouts[l] == USLAB_LAYOUT_AUTO ? (int)layout_of(c[l]) : -1);
			if (uslab_cache_destroy(c[l]))
				abort();
		}
	}
	free(a);
	free(f);
}

static void kmalloc_table(unsigned long loops, int reps)
{
	const char *env = getenv("USLAB_LAYOUT");
	double *a = malloc((size_t)reps * sizeof(double));
	double *f = malloc((size_t)reps * sizeof(double));
	char variant[64];

	snprintf(variant, sizeof(variant), "kmalloc-%s", env && *env ? env : "auto");
	printf("uslab_kmalloc/kfree: %lu allocs then %lu frees (cycles each), %d rounds, medians%s\n",
	       loops, loops, reps, resident_note());
	for (size_t k = 0; k < NR_TABLE; k++) {
		size_t size = table_sizes[k];
		struct uslab_cache *kc;
		double dummy;

		alloc_then_free(NULL, size, loops, &dummy, &dummy);
		for (int r = 0; r < reps; r++)
			alloc_then_free(NULL, size, loops, &a[r], &f[r]);
		kc = uslab_kmalloc_cache(size);
		print_row(variant, size, loops, median(a, (size_t)reps), median(f, (size_t)reps),
			  kc ? (int)layout_of(kc) : -1);
	}
	free(a);
	free(f);
}

static void memory(unsigned long n)
{
	printf("%-12s %-10s %9s %6s %10s %9s %7s %9s %7s\n", "layout", "size", "objs/slab", "pages",
	       "meta/slab", "meta/obj", "meta %", "mem/live", "colours");
	for (size_t k = 0; k < sizeof(mem_sizes) / sizeof(mem_sizes[0]); k++) {
		for (int with_ctor = 0; with_ctor < 2; with_ctor++) {
			size_t size = mem_sizes[k];
			char param[32];

			snprintf(param, sizeof(param), "%zu%s", size, with_ctor ? "-ctor" : "");
			for (size_t l = 0; l < NR_LAYOUTS; l++) {
				const char *name = uslab_layout_name(layouts[l]);
				struct uslab_cache *c = make_cache(size, layouts[l], with_ctor);
				struct uslab_cache_stats st;
				double slab_bytes, per_obj, pct, per_live;

				if (!c) {
					printf("%-12s %-10s n/a (EINVAL)\n", name, param);
					printf("CSV,layoutmem,%s,%s,na,1\n", name, param);
					continue;
				}
				for (unsigned long i = 0; i < n; i++)
					if (!(objs[i] = uslab_cache_alloc(c)))
						abort();
				if (uslab_cache_stats(c, &st))
					abort();
				slab_bytes = (double)st.pagesperslab * 4096.0;
				per_obj = (double)st.meta_bytes / (double)st.objperslab;
				pct = 100.0 * (double)st.meta_bytes / slab_bytes;
				per_live = (double)st.num_slabs * slab_bytes /
					   ((double)st.active_objs * (double)st.object_size);
				printf("%-12s %-10s %9u %6u %10u %9.2f %7.3f %9.3f %7u%s%s\n", name,
				       param, st.objperslab, st.pagesperslab, st.meta_bytes,
				       per_obj, pct, per_live, st.colours,
				       layouts[l] == USLAB_LAYOUT_AUTO ? "  -> " : "",
				       layouts[l] == USLAB_LAYOUT_AUTO ?
					       uslab_layout_name(st.layout) :
					       "");
				printf("CSV,layoutmem,%s,%s,objperslab,%u\n", name, param,
				       st.objperslab);
				printf("CSV,layoutmem,%s,%s,pagesperslab,%u\n", name, param,
				       st.pagesperslab);
				printf("CSV,layoutmem,%s,%s,meta_bytes,%u\n", name, param,
				       st.meta_bytes);
				printf("CSV,layoutmem,%s,%s,meta_per_obj,%.4f\n", name, param,
				       per_obj);
				printf("CSV,layoutmem,%s,%s,meta_pct,%.4f\n", name, param, pct);
				printf("CSV,layoutmem,%s,%s,mem_per_live,%.4f\n", name, param,
				       per_live);
				printf("CSV,layoutmem,%s,%s,colours,%u\n", name, param, st.colours);
				printf("CSV,layoutmem,%s,%s,layout,%u\n", name, param, st.layout);
				for (unsigned long i = 0; i < n; i++)
					uslab_cache_free(c, objs[i]);
				if (uslab_cache_destroy(c))
					abort();
			}
		}
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "table";
	unsigned long loops = argc > 2 ? strtoul(argv[2], NULL, 0) : bench_quick() ? 20000 : 100000;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	unsigned long mem_objs = argc > 2 ? loops : 100000;

	if (!loops || reps < 1) {
		fprintf(stderr, "usage: %s table|kmalloc [LOOPS [REPS]] | memory [OBJS]\n",
			argv[0]);
		return 2;
	}
	pin_to_cpu(0);
	tsc_per_ns();
	if (!(objs = malloc((loops > mem_objs ? loops : mem_objs) * sizeof(*objs))))
		abort();
	if (!strcmp(mode, "table")) {
		table(loops, reps);
	} else if (!strcmp(mode, "kmalloc")) {
		kmalloc_table(loops, reps);
	} else if (!strcmp(mode, "memory")) {
		memory(mem_objs);
	} else {
		fprintf(stderr, "usage: %s table|kmalloc [LOOPS [REPS]] | memory [OBJS]\n",
			argv[0]);
		return 2;
	}
	free(objs);
	return 0;
}
