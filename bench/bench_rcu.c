// SPDX-License-Identifier: MIT
/*
 * bench_rcu.c - rcuscale's kfree test in userspace (seed "rcu: Support
 * kfree_bulk() interface in kfree_rcu()"): T threads, each running L loops
 * that allocate N objects and free every one after a grace period.
 *
 *	rcu [THREADS [LOOPS [OBJECTS [RUNS]]]]	(default 2 2000 1000 3)
 *
 * Variants, each run in its own child process (peak RSS per variant), in
 * turn A B C D E, A B C D E, ... RUNS times:
 *   free_rcu        uslab_cache_alloc + uslab_free_rcu
 *   free_rcu_head   uslab_cache_alloc + uslab_free_rcu_head (kfree_rcu)
 *   callrcu_glibc   malloc + call_rcu per object, free in the callback
 *   callrcu_uslab   uslab_cache_alloc + call_rcu, uslab_cache_free in it
 *   defer_rcu       malloc + liburcu's defer_rcu(free, p)
 * Objects are 24 bytes: 8 bytes of payload and a struct rcu_head, like
 * rcuscale's struct kfree_obj. Grace periods are liburcu's urcu-memb for
 * every variant (uslab waits for them through liburcu too); every thread
 * is registered with urcu-memb (call_rcu and defer_rcu need it; uslab
 * does not). Time: from the start of the loops to the end of the final
 * barrier, so every object has been freed. Memory footprint: peak RSS
 * (VmHWM) minus RSS before the loops.
 * Each object's first byte is written after its allocation ("as a user
 * would"); BENCH_WRITE=first4 (bench.h): its first 4 bytes instead, one
 * 4-byte store (variants "<variant>-w4").
 *
 * Output, per run, in the seed's format:
 *	<variant>: Total time taken by all kfree'ers: N ns, loops: L, batches: B, memory footprint: M MB
 * with batches = grace-period requests (uslab: call_rcu per batch; the
 * others: one per object), then CSV lines (bench "rcu", param
 * THREADSxLOOPSxOBJECTS: ns_per_obj, the time over all THREADS x LOOPS x
 * OBJECTS objects; footprint_mb; batches; uslab's also emergency) and a
 * summary with the medians and P4's ratios.
 */
#define _GNU_SOURCE
#include <sys/resource.h>
#include <sys/wait.h>
#include <urcu/urcu-memb.h>
#include <urcu/defer.h>
#include <uslab.h>

#include "bench.h"

struct kfree_obj {
	char payload[8];
	struct rcu_head rh;
};

enum variant { FREE_RCU, FREE_RCU_HEAD, CALLRCU_GLIBC, CALLRCU_USLAB, DEFER_RCU, NVAR };
static const char *const names[NVAR] = { "free_rcu", "free_rcu_head", "callrcu_glibc",
					 "callrcu_uslab", "defer_rcu" };

static int nthreads = 2;
static long loops = 2000, nobj = 1000;
static enum variant var;
static struct uslab_cache *cache;
static pthread_barrier_t start;
static bool w4;		  /* BENCH_WRITE=first4 */
static char *vname[NVAR]; /* names[], "-w4" appended under BENCH_WRITE=first4 */

static void free_glibc_cb(struct rcu_head *h)
{
	free(caa_container_of(h, struct kfree_obj, rh));
}

static void free_uslab_cb(struct rcu_head *h)
{
	uslab_cache_free(cache, caa_container_of(h, struct kfree_obj, rh));
}

static void *kfree_thread(void *arg)
{
	struct kfree_obj **objs = malloc((size_t)nobj * sizeof(*objs));

	(void)arg;
	urcu_memb_register_thread();
	if (var == DEFER_RCU)
		urcu_memb_defer_register_thread();
	pthread_barrier_wait(&start);
	for (long l = 0; l < loops; l++) {
		for (long i = 0; i < nobj; i++) {
			struct kfree_obj *o = var == CALLRCU_GLIBC || var == DEFER_RCU ?
						      malloc(sizeof(*o)) :
						      uslab_cache_alloc(cache);

			if (w4)
				write_first4(o, (uint32_t)i);
			else
				o->payload[0] = (char)i; /* touch it, as a user would */
			objs[i] = o;
		}
		for (long i = 0; i < nobj; i++) {
			struct kfree_obj *o = objs[i];

			switch (var) {
			case FREE_RCU:
				uslab_free_rcu(o);
				break;
			case FREE_RCU_HEAD:
				uslab_free_rcu_head(o, &o->rh);
				break;
			case CALLRCU_GLIBC:
				urcu_memb_call_rcu(&o->rh, free_glibc_cb);
				break;
			case CALLRCU_USLAB:
				urcu_memb_call_rcu(&o->rh, free_uslab_cb);
				break;
			case DEFER_RCU:
				urcu_memb_defer_rcu(free, o);
				break;
			default:
				break;
			}
		}
	}
	if (var == DEFER_RCU)
		urcu_memb_defer_unregister_thread(); /* runs what it still holds */
	urcu_memb_unregister_thread();
	free(objs);
	return NULL;
}

/* One run of one variant, in a fresh process: prints its results. */
static void run_child(int run)
{
	pthread_t th[64];
	struct uslab_rcu_stats st;
	double t0, t1, mb;
	double base_mb;
	unsigned long batches;
	char param[64];

	cache = uslab_cache_create("kfree_obj", sizeof(struct kfree_obj), NULL, 0);
	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	base_mb = proc_status_mb("VmRSS:");
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, kfree_thread, NULL);
	pthread_barrier_wait(&start);
	t0 = wall_ns();
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	if (var == FREE_RCU || var == FREE_RCU_HEAD)
		uslab_rcu_barrier();
	else
		urcu_memb_barrier();
	t1 = wall_ns();
	mb = proc_status_mb("VmHWM:") - base_mb;
	uslab_rcu_stats(&st);
	batches = var == FREE_RCU || var == FREE_RCU_HEAD ?
			  (unsigned long)st.batches :
			  (unsigned long)(nthreads * loops * nobj);
	printf("%s: Total time taken by all kfree'ers: %.0f ns, loops: %ld, batches: %lu, "
	       "memory footprint: %.1f MB\n",
	       vname[var], t1 - t0, loops, batches, mb);
	snprintf(param, sizeof(param), "%dx%ldx%ld", nthreads, loops, nobj);
	printf("CSV,rcu,%s,%s,ns_per_obj,%.4f\n", vname[var], param,
	       (t1 - t0) / ((double)nthreads * loops * nobj));
	printf("CSV,rcu,%s,%s,footprint_mb,%.2f\n", vname[var], param, mb);
	printf("CSV,rcu,%s,%s,batches,%lu\n", vname[var], param, batches);
	if (var == FREE_RCU || var == FREE_RCU_HEAD)
		printf("CSV,rcu,%s,%s,emergency,%lu\n", vname[var], param,
		       (unsigned long)st.emergency);
	(void)run;
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int runs = 3;
	int fds[2];
	double ns[NVAR][16], mbs[NVAR][16];

	w4 = bench_w4();
	for (int v = 0; v < NVAR; v++) {
		vname[v] = malloc(strlen(names[v]) + 4);
		write_name(vname[v], strlen(names[v]) + 4, names[v]);
	}
	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		loops = atol(argv[2]);
	if (argc > 3)
		nobj = atol(argv[3]);
	if (argc > 4)
		runs = atoi(argv[4]);
	if (nthreads < 1 || nthreads > 64 || loops < 1 || nobj < 1 || runs < 1 || runs > 16) {
		fprintf(stderr, "usage: rcu [THREADS(1..64) [LOOPS [OBJECTS [RUNS(1..16)]]]]\n");
		return 2;
	}
	printf("rcuscale kfree: %d threads x %ld loops x %ld objects of %zu bytes, %d runs\n",
	       nthreads, loops, nobj, sizeof(struct kfree_obj), runs);
	fflush(stdout);
	for (int r = 0; r < runs; r++) {
		for (int v = 0; v < NVAR; v++) {
			char buf[4096];
			ssize_t n;
			size_t len = 0;
			pid_t pid;
			int status;
			FILE *f;
			char line[512];

			if (pipe(fds))
				return 1;
			fflush(stdout); /* or the child inherits our buffer */
			pid = fork();
			if (pid == 0) {
				close(fds[0]);
				dup2(fds[1], 1);
				var = (enum variant)v;
				run_child(r);
				_exit(0);
			}
			close(fds[1]);
			while ((n = read(fds[0], buf + len, sizeof(buf) - 1 - len)) > 0)
				len += (size_t)n;
			close(fds[0]);
			buf[len] = 0;
			waitpid(pid, &status, 0);
			fputs(buf, stdout);
			ns[v][r] = mbs[v][r] = -1;
			f = fmemopen(buf, len, "r");
			while (f && fgets(line, sizeof(line), f)) {
				char *p = strrchr(line, ',');

				if (strstr(line, ",ns_per_obj,"))
					ns[v][r] = atof(p + 1);
				else if (strstr(line, ",footprint_mb,"))
					mbs[v][r] = atof(p + 1);
			}
			if (f)
				fclose(f);
		}
	}
	printf("\nmedians of %d runs (per object, peak memory):\n", runs);
	double mn[NVAR], mm[NVAR];

	for (int v = 0; v < NVAR; v++) {
		mn[v] = median(ns[v], (size_t)runs);
		mm[v] = median(mbs[v], (size_t)runs);
		printf("  %-14s %8.1f ns %8.1f MB\n", vname[v], mn[v], mm[v]);
	}
	printf("P4 (per object >= 5x faster than call_rcu + free, memory <= 0.75x):\n");
	for (int v = FREE_RCU; v <= FREE_RCU_HEAD; v++)
		for (int b = CALLRCU_GLIBC; b <= CALLRCU_USLAB; b++) {
			printf("  %-14s vs %-14s: %.2fx faster, %.2fx memory\n", vname[v], vname[b],
			       mn[b] / mn[v], mm[v] / mm[b]);
			printf("CSV,rcu,%s,vs_%s,speedup,%.3f\n", vname[v], vname[b],
			       mn[b] / mn[v]);
			printf("CSV,rcu,%s,vs_%s,mem_ratio,%.3f\n", vname[v], vname[b],
			       mm[v] / mm[b]);
		}
	return 0;
}
