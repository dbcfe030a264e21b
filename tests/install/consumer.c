// SPDX-License-Identifier: MIT
/* A program outside the project, built against the installed uslab. */
#include <stdio.h>
#include <string.h>
#include <uslab.h>

struct point {
	double x, y, z;
};

int main(void)
{
	struct uslab_cache *c =
		uslab_cache_create("point", sizeof(struct point), NULL, USLAB_HWCACHE_ALIGN);
	struct uslab_cache_stats st;
	struct point *p[1000];

	if (!c)
		return 1;
	for (int i = 0; i < 1000; i++) {
		p[i] = uslab_cache_alloc(c);
		p[i]->x = i;
	}
	for (int i = 0; i < 1000; i++) {
		if (p[i]->x != i)
			return 2;
		if (i % 2)
			uslab_free_rcu(p[i]); /* after a grace period (liburcu) */
		else
			uslab_cache_free(c, p[i]);
	}
	uslab_rcu_barrier();
	uslab_cache_stats(c, &st);
	printf("consumer: %lu objects in %lu slabs of %u pages\n", st.num_objs, st.num_slabs,
	       st.pagesperslab);
	return uslab_cache_destroy(c) == 0 ? 0 : 3;
}
