// SPDX-License-Identifier: MIT
/*
 * test_kmalloc.c - the kmalloc API (<uslab/kmalloc.h>) and its kernel
 * names (<uslab/kmem.h>): every function, every documented outcome and
 * error, contents that survive resizing, memory that goes back, and misuse
 * stopped with "uslab: BUG". Built twice: inline fast paths, and through
 * the library's functions (USLAB_NO_INLINE).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <uslab/kmem.h>

#include "../test.h"

#define PAGE 4096ul

/* The classes as the contract lists them, computed independently. */
static size_t classes[USLAB_KMALLOC_CLASSES];

static void make_classes(void)
{
	unsigned int n = 0;

	for (size_t s = 8; s <= 64; s += 8)
		classes[n++] = s;
	for (unsigned int k = 6; k < 15; k++)
		for (size_t m = 1; m <= 8; m++)
			classes[n++] = (1ul << k) + m * (1ul << (k - 3));
	CHECK(n == USLAB_KMALLOC_CLASSES && classes[n - 1] == USLAB_KMALLOC_MAX_CACHE_SIZE,
	      "%u classes", n);
}

static size_t expected_usable(size_t n)
{
	for (unsigned int i = 0; i < USLAB_KMALLOC_CLASSES; i++)
		if (classes[i] >= n)
			return classes[i];
	return (n + PAGE - 1) & ~(PAGE - 1);
}

static int is_resident(const void *p)
{
	unsigned char v = 0;

	return mincore((void *)((uintptr_t)p & ~(PAGE - 1)), PAGE, &v) == 0 && (v & 1);
}

/* Every size 1..64 KiB: the smallest class that fits, its alignment, its waste. */
static void test_every_size(void)
{
	char name[64];

	for (size_t n = 1; n <= 65536; n++) {
		size_t want = expected_usable(n);
		unsigned char *p = uslab_kmalloc(n);
		size_t got = uslab_ksize(p);

		CHECK(p && got == want, "size %zu: usable %zu, want %zu", n, got, want);
		CHECK(uslab_kmalloc_class_size(n) == want, "class_size(%zu)", n);
		CHECK((uintptr_t)p % 8 == 0, "size %zu: 8-byte aligned", n);
		if ((want & (want - 1)) == 0)
			CHECK((uintptr_t)p % want == 0, "class %zu: naturally aligned", want);
		if (n >= 64)
			CHECK((double)(got - n) / (double)n < 0.125, "size %zu: waste %zu", n,
			      got - n);
		p[0] = 1;
		p[got - 1] = 2; /* the whole usable size is ours */
		if (n <= USLAB_KMALLOC_MAX_CACHE_SIZE) {
			struct uslab_cache *c = uslab_kmalloc_cache(n);

			snprintf(name, sizeof(name), "kmalloc-%zu", want);
			CHECK(uslab_cache_of(p) == c && !strcmp(uslab_cache_name(c), name),
			      "size %zu: from %s", n, name);
		} else {
			CHECK(uslab_cache_of(p) == NULL && uslab_owns(p), "size %zu: large", n);
			CHECK(uslab_slab_of(p) == p, "a large object is its own slab");
		}
		uslab_kfree(p);
	}
	CHECK(uslab_kmalloc_cache(0) == NULL && errno == EINVAL, "no class for 0");
	CHECK(uslab_kmalloc_cache(USLAB_KMALLOC_MAX_CACHE_SIZE + 1) == NULL && errno == EINVAL,
	      "no class for a large object");
	CHECK(uslab_kmalloc_class_size(0) == 0 && uslab_kmalloc_class_size(~0ul) == 0,
	      "class_size of 0 and of too much");
}

static void test_zero_and_errors(void)
{
	void *p;

	CHECK(uslab_kmalloc(0) == USLAB_ZERO_SIZE_PTR, "kmalloc(0)");
	CHECK(uslab_kzalloc(0) == USLAB_ZERO_SIZE_PTR, "kzalloc(0)");
	CHECK(uslab_kcalloc(0, 8) == USLAB_ZERO_SIZE_PTR, "kcalloc(0, 8)");
	CHECK(uslab_kmalloc_aligned(0, 64) == USLAB_ZERO_SIZE_PTR, "kmalloc_aligned(0)");
	CHECK(uslab_ksize(USLAB_ZERO_SIZE_PTR) == 0 && uslab_ksize(NULL) == 0, "ksize(0)");
	uslab_kfree(USLAB_ZERO_SIZE_PTR);
	uslab_kfree(NULL);
	CHECK(ZERO_OR_NULL_PTR(NULL) && ZERO_OR_NULL_PTR(ZERO_SIZE_PTR), "ZERO_OR_NULL_PTR");
	{
		/* kfree_bulk and free_rcu take what kmalloc(0) returned, like kfree. */
		void *a[4] = { uslab_kmalloc(0), uslab_kmalloc(10), NULL, USLAB_ZERO_SIZE_PTR };

		kfree_bulk(4, a);
		CHECK(!a[0] && !a[1] && !a[2] && !a[3], "kfree_bulk with ZERO_SIZE_PTR");
		uslab_free_rcu(USLAB_ZERO_SIZE_PTR);
		uslab_rcu_barrier();
	}

	errno = 0;
	CHECK(uslab_kmalloc(USLAB_KMALLOC_MAX_SIZE + 1) == NULL && errno == ENOMEM, "too big");
	errno = 0;
	CHECK(uslab_kcalloc(~0ul / 2, 3) == NULL && errno == ENOMEM, "kcalloc overflow");
	errno = 0;
	CHECK(uslab_kmalloc_aligned(64, 48) == NULL && errno == EINVAL, "align 48");
	errno = 0;
	CHECK(uslab_kmalloc_aligned(64, 0) == NULL && errno == EINVAL, "align 0");
	errno = 0;
	CHECK(uslab_kmalloc_aligned(64, USLAB_KMALLOC_MAX_ALIGN * 2) == NULL && errno == EINVAL,
	      "align too big");
	CHECK(kmalloc_array(~0ul / 4, 8, GFP_KERNEL) == NULL, "kmalloc_array overflow");

	/* krealloc: NULL and ZERO_SIZE_PTR allocate, size 0 frees. */
	p = uslab_krealloc(NULL, 10);
	CHECK(p && uslab_ksize(p) == 16, "krealloc(NULL)");
	p = uslab_krealloc(p, 0);
	CHECK(p == USLAB_ZERO_SIZE_PTR, "krealloc(p, 0)");
	p = uslab_krealloc(p, 100);
	CHECK(p && p != USLAB_ZERO_SIZE_PTR && uslab_ksize(p) == 104, "krealloc(ZERO_SIZE_PTR)");
	errno = 0;
	CHECK(uslab_krealloc(p, USLAB_KMALLOC_MAX_SIZE + 1) == NULL && errno == ENOMEM,
	      "krealloc failure");
	memset(p, 7, 100); /* still valid */
	uslab_kfree(p);
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static int same(const unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

static void test_zeroed(void)
{
	static const size_t sizes[] = { 1, 24, 100, 1000, 4096, 30000, 40000, 300000, 5 << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int round = 0; round < 3; round++) {
			unsigned char *p = uslab_kmalloc(sizes[i]);
			size_t n = uslab_ksize(p), bad = 0;

			memset(p, 0xa5, n); /* dirty, then freed and reused */
			uslab_kfree(p);
			p = round == 2 ? uslab_kcalloc(1, sizes[i]) : uslab_kzalloc(sizes[i]);
			CHECK(p && uslab_ksize(p) == n, "kzalloc(%zu)", sizes[i]);
			for (size_t j = 0; j < n; j++)
				bad += p[j] != 0;
			CHECK(bad == 0, "kzalloc(%zu): %zu of %zu bytes not zero", sizes[i], bad,
			      n);
			uslab_kfree(p);
		}
	}
}

static void test_krealloc(void)
{
	unsigned char *p = uslab_kmalloc(65), *q;
	size_t n;

	/* In place within the class: 65..72 */
	fill(p, 65, 1);
	CHECK(uslab_krealloc(p, 72) == p && uslab_krealloc(p, 66) == p, "in place in class");
	/* Growth through every class into large objects: contents survive. */
	n = 65;
	for (size_t size = 100; size <= (3u << 20); size = size * 3 / 2) {
		q = uslab_krealloc(p, size);
		CHECK(q && uslab_ksize(q) >= size, "krealloc to %zu", size);
		CHECK(same(q, n, 1), "contents after krealloc to %zu", size);
		fill(q, size, 1);
		p = q;
		n = size;
	}
	/* A large object grows in place inside its slab (2^order pages). */
	q = uslab_kmalloc(200000); /* slab of 256 KiB */
	fill(q, 200000, 3);
	p = uslab_krealloc(q, 250000);
	CHECK(p == q && uslab_ksize(p) == 250000 + (PAGE - 250000 % PAGE),
	      "large grows in place (%p %p, %zu)", (void *)p, (void *)q, uslab_ksize(p));
	CHECK(same(p, 200000, 3), "contents in place");
	/* Shrinking below half of it moves to the right size, prefix kept. */
	q = uslab_krealloc(p, 1000);
	CHECK(q != p && uslab_ksize(q) == 1024 && same(q, 1000, 3), "shrink moves");
	/* A shrink to a smaller class moves too; to the same class stays. */
	p = uslab_krealloc(q, 100);
	CHECK(p != q && uslab_ksize(p) == 104 && same(p, 100, 3), "shrink to a smaller class");
	CHECK(uslab_krealloc(p, 97) == p, "same class stays");
	uslab_kfree(p);
	uslab_kfree(uslab_krealloc(NULL, 0)); /* ZERO_SIZE_PTR */
}

static void test_aligned(void)
{
	static const size_t sizes[] = { 1, 8, 24, 100, 1000, 3000, 5000, 20000, 70000 };

	for (size_t align = 1; align <= (4u << 20); align *= 2) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			unsigned char *p = uslab_kmalloc_aligned(sizes[i], align);

			CHECK(p && (uintptr_t)p % align == 0 && uslab_ksize(p) >= sizes[i],
			      "kmalloc_aligned(%zu, %zu) = %p", sizes[i], align, (void *)p);
			memset(p, 1, sizes[i]);
			uslab_kfree(p);
		}
	}
}

/* Large and huge objects: pages go back, the address is no longer ours. */
static void test_large_release(void)
{
	size_t sizes[] = { 40000, 1 << 20, 40u << 20 }; /* the last above 32 MiB: unmapped */

	for (size_t i = 0; i < 3; i++) {
		unsigned char *p = uslab_kmalloc(sizes[i]);

		CHECK(p && uslab_owns(p) && uslab_owns(p + sizes[i] - 1), "large %zu", sizes[i]);
		CHECK(uslab_ksize(p) == ((sizes[i] + PAGE - 1) & ~(PAGE - 1)), "usable");
		p[0] = 1;
		p[sizes[i] - 1] = 1;
		uslab_kfree(p);
		CHECK(!uslab_owns(p), "freed large object %zu is not live", sizes[i]);
		if (sizes[i] > (32u << 20))
			CHECK(!is_resident(p), "a huge object is unmapped at once");
	}
	/* Retained pages go back on shrink (any cache's shrink purges os.c). */
	{
		unsigned char *p = uslab_kmalloc(1 << 20);

		memset(p, 1, 1 << 20);
		uslab_kfree(p);
		uslab_cache_shrink(uslab_kmalloc_cache(8));
		CHECK(!is_resident(p) && !is_resident(p + (1 << 20) - PAGE),
		      "large pages purged by shrink");
	}
}

/*
 * The kmalloc-large row of uslab_stats_print: @bytes its memory (active
 * slabs x pages per slab), the table's total "KiB of slabs" in @total.
 */
static void large_row(unsigned long *objs, uint64_t *bytes, double *total)
{
	char *buf = NULL, *line;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	unsigned long active = 0, num = 0, slabs = 0;
	unsigned int objsize = 0, perslab = 0, pages = 0;

	CHECK(f, "open_memstream");
	uslab_stats_print(f);
	fclose(f);
	*objs = 0;
	*bytes = 0;
	*total = -1;
	line = strstr(buf, "\nkmalloc-large ");
	CHECK(line && sscanf(line,
			     " kmalloc-large %lu %lu %u %u %u : tunables %*u %*u %*u : "
			     "slabdata %*u %lu",
			     &active, &num, &objsize, &perslab, &pages, &slabs) == 6,
	      "a kmalloc-large row in\n%s", buf);
	*objs = active;
	*bytes = (uint64_t)slabs * pages * PAGE;
	CHECK(!active || (uint64_t)objsize * active <= *bytes, "objsize %u x %lu within %" PRIu64,
	      objsize, active, *bytes);
	line = strstr(buf, "objects active");
	CHECK(line && sscanf(strstr(line, "),") ? strstr(line, "),") + 2 : "", "%lf", total) == 1,
	      "a total line in\n%s", buf);
	free(buf);
}

/*
 * Issue 22 item 14: large objects are counted at their size (their usable
 * bytes, a page each at most above what was asked), not as one page each.
 */
static void large_stats_child(void *arg)
{
	enum { NBIG = 10, NMID = 100 };
	static void *big[NBIG], *mid[NMID];
	unsigned long objs0, objs;
	uint64_t bytes0, bytes, held = NBIG * (1ul << 20) + NMID * 40000ul;
	double total0, total;

	(void)arg;
	large_row(&objs0, &bytes0, &total0);
	for (int i = 0; i < NBIG; i++)
		big[i] = uslab_kmalloc(1 << 20);
	for (int i = 0; i < NMID; i++)
		mid[i] = uslab_kmalloc(40000);
	large_row(&objs, &bytes, &total);
	CHECK(objs == objs0 + NBIG + NMID, "%lu large objects, %lu before", objs, objs0);
	CHECK(bytes >= bytes0 + held && bytes <= bytes0 + held + (objs0 + objs) * PAGE,
	      "kmalloc-large holds %" PRIu64 " bytes (%" PRIu64 " before) for %" PRIu64 " held",
	      bytes, bytes0, held);
	CHECK(total - total0 >= (double)held / 1024,
	      "total %.1f KiB (%.1f before), %" PRIu64 " bytes held", total, total0, held);
	/* A resize within its slab, and frees one by one and in bulk, keep it true. */
	CHECK(uslab_krealloc(big[0], 600 << 10) == big[0], "1 MiB shrunk in place to 600 KiB");
	held -= (1ul << 20) - (600ul << 10);
	large_row(&objs, &bytes, &total);
	CHECK(bytes >= bytes0 + held && bytes <= bytes0 + held + (objs0 + objs) * PAGE,
	      "after krealloc: %" PRIu64 " bytes (%" PRIu64 " before) for %" PRIu64, bytes, bytes0,
	      held);
	kfree_bulk(NMID, mid);
	for (int i = 0; i < NBIG; i++)
		uslab_kfree(big[i]);
	large_row(&objs, &bytes, &total);
	CHECK(objs == objs0 && bytes <= bytes0 + objs0 * PAGE && bytes + objs0 * PAGE >= bytes0,
	      "all freed: %lu objects, %" PRIu64 " bytes (%lu, %" PRIu64 " before)", objs, bytes,
	      objs0, bytes0);
}

static void test_large_stats(void)
{
	char out[8192];
	int st = run_child(large_stats_child, NULL, out, sizeof(out));

	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "large stats child: status %#x\n%s", st, out);
}

/*
 * Issue 22 item 13: a huge request the kernel's overcommit policy refuses
 * to the C library (a private writable mapping of its bytes, accounted)
 * fails with ENOMEM here too, and one it grants succeeds.
 */
static void test_huge_commit(void)
{
	static const size_t sizes[] = { 1ul << 46, 1ul << 44, 1ul << 40,
					1ul << 36, 1ul << 30, 100ul << 20 };

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		bool fits = m != MAP_FAILED;
		unsigned char *p;

		if (fits)
			munmap(m, n);
		errno = 0;
		p = uslab_kmalloc(n);
		CHECK(!p == !fits && (p || errno == ENOMEM), "kmalloc(%zu) = %p errno %d, mmap %s",
		      n, (void *)p, errno, fits ? "maps it" : "refuses");
		uslab_kfree(p);
		errno = 0;
		p = uslab_kzalloc(n);
		CHECK(!p == !fits && (p || errno == ENOMEM), "kzalloc(%zu) = %p errno %d", n,
		      (void *)p, errno);
		uslab_kfree(p);
	}
}

/* kfree() and kfree_bulk() take objects of any cache, mixed with kmalloc'd ones. */
static void test_mixed_free(void)
{
	struct uslab_cache *c = uslab_cache_create("mixed", 200, NULL, 0);
	struct uslab_cache_stats before, after;
	void *p[64], *big[4];
	size_t k = 0;

	uslab_thread_flush();
	CHECK(!uslab_cache_stats(c, &before), "stats");
	for (int i = 0; i < 16; i++) {
		p[k++] = uslab_cache_alloc(c);
		p[k++] = uslab_kmalloc((size_t)i * 300 + 1);
		p[k++] = NULL;
		if (i % 4 == 0) {
			big[i / 4] = uslab_kmalloc(100000 + (size_t)i);
			p[k++] = big[i / 4];
		}
	}
	CHECK(uslab_ksize(p[0]) == 200 && uslab_slab_of(p[0]) == uslab_slab_of(p[0]),
	      "ksize of a cache object");
	kfree(uslab_cache_alloc(c)); /* kfree of a kmem_cache object */
	void *last_c = NULL;	     /* the last object of c in the array */

	for (size_t i = 0; i < k; i++)
		if (p[i] && uslab_cache_of(p[i]) == c)
			last_c = p[i];
	kfree_bulk(k, p);
	for (size_t i = 0; i < k; i++)
		CHECK(p[i] == NULL, "kfree_bulk cleared entry %zu", i);
	for (int i = 0; i < 4; i++)
		CHECK(!uslab_owns(big[i]), "large object %d freed by kfree_bulk", i);
	/* kfree_bulk went through the cache's sheaves: the last one freed comes back first. */
	void *again = uslab_cache_alloc(c);

	CHECK(again == last_c, "kfree_bulk used this thread's sheaf: %p, want %p", again, last_c);
	uslab_cache_free(c, again);
	CHECK(uslab_cache_shrink(c) == 0, "shrink");
	CHECK(!uslab_cache_stats(c, &after), "stats");
	CHECK(after.active_objs == before.active_objs, "every cache object back: %lu vs %lu",
	      after.active_objs, before.active_objs);
	CHECK(uslab_cache_destroy(c) == 0, "destroy after mixed frees");
	CHECK(uslab_cache_destroy(uslab_kmalloc_cache(64)) == -EPERM, "kmalloc caches stay");
}

/* Deferred frees take kmalloc'd objects, small and large. */
static void test_free_rcu(void)
{
	void *big = uslab_kmalloc(200000);

	for (int i = 0; i < 1000; i++)
		uslab_free_rcu(uslab_kmalloc((size_t)i * 13 + 1));
	uslab_free_rcu(big);
	uslab_rcu_barrier();
	CHECK(!uslab_owns(big), "large object freed after the grace period");
}

static void test_kernel_names(void)
{
	char *s = kstrdup("uslab", GFP_KERNEL), *t = kstrndup("kernel names", 6, GFP_KERNEL);
	int *a = kcalloc(10, sizeof(int), GFP_KERNEL), *b;
	unsigned char *z, *q;

	CHECK(s && !strcmp(s, "uslab") && t && !strcmp(t, "kernel"), "kstrdup, kstrndup");
	CHECK(kstrdup(NULL, GFP_KERNEL) == NULL, "kstrdup(NULL)");
	CHECK(a && a[9] == 0, "kcalloc");
	a[9] = 9;
	b = krealloc_array(a, 1000, sizeof(int), GFP_KERNEL | __GFP_ZERO);
	CHECK(b && b[9] == 9 && b[999] == 0, "krealloc_array with __GFP_ZERO");
	q = kmemdup(b, 40, GFP_KERNEL);
	CHECK(q && !memcmp(q, b, 40), "kmemdup");
	kvfree(b);
	kfree(q);
	kfree(s);
	kfree(t);
	z = kmalloc_node(128, GFP_KERNEL | __GFP_ZERO, NUMA_NO_NODE);
	CHECK(z && z[127] == 0 && ksize(z) == 128, "kmalloc_node");
	memset(z, 0xaa, 128);
	kfree_sensitive(z);
	q = kzalloc_node(100, GFP_KERNEL, 0);
	CHECK(q && q[99] == 0, "kzalloc_node");
	kfree(q);
	/* The next 128-byte object is the one just freed (LIFO sheaf): zeroed. */
	q = kmalloc(128, GFP_KERNEL);
	if (q == z)
		CHECK(q[0] == 0 && q[127] == 0, "kfree_sensitive cleared the object");
	kfree(q);
	q = kvmalloc(1 << 20, GFP_KERNEL);
	CHECK(q && virt_to_head_page(q) == q && virt_to_slab(q + 1000) == q, "kvmalloc, virt_to_*");
	kvfree(q);
	CHECK(virt_to_slab(&s) == NULL, "virt_to_slab of the stack");
}

/* Two threads: one allocates random sizes and stamps them, the other checks and frees. */
#define XFER 4096
static void *xfer[XFER];
static size_t xfer_size[XFER];
static volatile int xfer_ready;

static void *consumer(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&xfer_ready, __ATOMIC_ACQUIRE))
		;
	for (int i = 0; i < XFER; i++) {
		CHECK_COUNTED(*(unsigned long *)arg, same(xfer[i], xfer_size[i], (unsigned int)i),
			      "object %d survived the hand-over", i);
		uslab_kfree(xfer[i]);
	}
	return NULL;
}

static void test_cross_thread(void)
{
	static unsigned long checks;
	uint64_t seed = 42;
	pthread_t t;

	for (int round = 0; round < 8; round++) {
		xfer_ready = 0;
		CHECK(!pthread_create(&t, NULL, consumer, &checks), "thread");
		for (int i = 0; i < XFER; i++) {
			xfer_size[i] = rnd_next(&seed) % (i % 64 == 0 ? 200000 : 4096) + 1;
			xfer[i] = uslab_kmalloc(xfer_size[i]);
			fill(xfer[i], xfer_size[i], (unsigned int)i);
		}
		__atomic_store_n(&xfer_ready, 1, __ATOMIC_RELEASE);
		pthread_join(t, NULL);
	}
	test_checks += checks;
}

/* Misuse stops the program with a BUG line. */
static void free_stack(void *arg)
{
	int x;

	(void)arg;
	uslab_kfree(&x);
}

static void free_interior_large(void *arg)
{
	char *p = uslab_kmalloc(100000);

	(void)arg;
	uslab_kfree(p + 4096);
}

static void free_large_twice(void *arg)
{
	char *p = uslab_kmalloc(100000);

	(void)arg;
	uslab_kfree(p);
	uslab_kfree(p);
}

static void ksize_foreign(void *arg)
{
	(void)arg;
	uslab_ksize(malloc(16));
}

static const struct death kmalloc_misuse[] = {
	{ "kfree of a stack address", free_stack, "uslab: BUG" },
	{ "interior pointer", free_interior_large, "inside an object" },
	{ "double free, large", free_large_twice, "did not hand out" },
	{ "ksize of malloc'd memory", ksize_foreign, "did not hand out" },
};

static void test_misuse(void)
{
	EXPECT_DEATHS(kmalloc_misuse);
}

/* Address space of this process in KiB (VmSize). */
static long vm_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmSize:", 7))
			kb = atol(line + 7);
	if (f)
		fclose(f);
	return kb;
}

/*
 * The first request fails for want of address space (the classes cannot be
 * created): ENOMEM, and not for ever: the next request, with memory again,
 * succeeds. In a child that has not started uslab (this runs first).
 */
static void first_request_fails_child(void *arg)
{
	struct rlimit rl, saved;
	void *p;

	(void)arg;
	getrlimit(RLIMIT_AS, &saved);
	rl = saved;
	rl.rlim_cur = (rlim_t)(vm_kb() + 1024) * 1024;
	if (setrlimit(RLIMIT_AS, &rl))
		_exit(3);
	errno = 0;
	p = uslab_kmalloc(100);
	if (p || errno != ENOMEM)
		_exit(4);
	setrlimit(RLIMIT_AS, &saved);
	p = uslab_kmalloc(100);
	if (!p || uslab_ksize(p) != 104 || uslab_kmalloc_cache(100) == NULL)
		_exit(5);
	uslab_kfree(p);
	_exit(0);
}

static void test_first_request_fails(void)
{
	char buf[1024];
	int st;

	if (TEST_SANITIZED) /* the sanitizers reserve terabytes of address space */
		return;
	st = run_child(first_request_fails_child, NULL, buf, sizeof(buf));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x: %s", st, buf);
}

/*
 * The first uslab call of a process is a large request (then an aligned
 * one): the library starts for it (large objects belong to its internal
 * cache). In a child that has not started uslab.
 */
static void first_request_large_child(void *arg)
{
	char *p = uslab_kmalloc(100000), *q;

	(void)arg;
	if (!p || uslab_ksize(p) != 102400)
		_exit(3);
	memset(p, 1, 100000);
	uslab_kfree(p);
	if (uslab_owns(p))
		_exit(4);
	q = uslab_kmalloc(100);
	p = uslab_kmalloc(200000);
	if (!q || !p || uslab_ksize(p) != 200704)
		_exit(5);
	uslab_kfree(p);
	uslab_kfree(q);
	_exit(0);
}

static void first_request_aligned_child(void *arg)
{
	char *p = uslab_kmalloc_aligned(100, 65536);

	(void)arg;
	if (!p || (uintptr_t)p % 65536 || uslab_ksize(p) < 100)
		_exit(3);
	uslab_kfree(p);
	_exit(uslab_owns(p) ? 4 : 0);
}

static void test_first_request_large(void)
{
	char buf[1024];
	int st = run_child(first_request_large_child, NULL, buf, sizeof(buf));

	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "large first: status %#x: %s", st, buf);
	st = run_child(first_request_aligned_child, NULL, buf, sizeof(buf));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "aligned first: status %#x: %s", st, buf);
}

int main(void)
{
	make_classes();
	RUN(test_first_request_fails);
	RUN(test_first_request_large);
	RUN(test_every_size);
	RUN(test_zero_and_errors);
	RUN(test_zeroed);
	RUN(test_krealloc);
	RUN(test_aligned);
	RUN(test_large_release);
	RUN(test_large_stats);
	RUN(test_huge_commit);
	RUN(test_mixed_free);
	RUN(test_free_rcu);
	RUN(test_kernel_names);
	RUN(test_cross_thread);
	RUN(test_misuse);
	return 0;
}
