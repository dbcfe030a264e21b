// SPDX-License-Identifier: MIT
/*
 * bench_burst.c - bursts: B allocations (first word written), then the B
 * frees, in one thread. Small bursts stay in the thread's sheaves; large
 * ones go through slabs and the OS layer, so this is where slab order and
 * the retention of freed slabs show.
 *
 *	burst-<peer> [BURST [TOTAL [SIZE [REPS]]]]	(defaults 10000 4000000 256 3)
 *
 * TOTAL pairs per repetition; reports the median ns per pair.
 * BENCH_WRITE=first4 (bench.h): the first word is a 4-byte field at offset
 * 0 instead of 8 bytes (variant "<peer>-w4").
 */
#include "bench.h"
#include "peer.h"

int main(int argc, char **argv)
{
	size_t burst = argc > 1 ? strtoul(argv[1], NULL, 0) : 10000;
	size_t total = argc > 2 ? strtoul(argv[2], NULL, 0) : 4000000;
	size_t size = argc > 3 ? strtoul(argv[3], NULL, 0) : 256;
	int reps = argc > 4 ? atoi(argv[4]) : 3;
	void **p = malloc(burst * sizeof(void *));
	double *ns = calloc((size_t)reps, sizeof(double));
	size_t rounds = total / burst ? total / burst : 1;
	char param[32], name[32];
	bool w4 = bench_w4();

	pin_to_cpu(0);
	peer_init(size);
	for (int r = 0; r < reps; r++) {
		double t0 = wall_ns();

		for (size_t k = 0; k < rounds; k++) {
			for (size_t i = 0; i < burst; i++) {
				p[i] = peer_alloc(size);
				if (w4)
					write_first4(p[i], (uint32_t)i);
				else
					*(size_t *)p[i] = i;
			}
			for (size_t i = 0; i < burst; i++)
				peer_free(p[i], size);
		}
		ns[r] = (wall_ns() - t0) / (double)(rounds * burst);
	}
	snprintf(param, sizeof(param), "%zu", burst);
	report_value("burst", write_name(name, sizeof(name), PEER_NAME), param, "ns",
		     median(ns, (size_t)reps));
	peer_report();
	return 0;
}
