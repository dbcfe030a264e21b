// SPDX-License-Identifier: MIT
/* Every public header compiles on its own, as C11 (and as C++: headers.cpp). */
#include <uslab.h>
#include <uslab/stats.h>
#include <uslab/kmem.h>
#include <uslab/rcu.h>
#include <uslab.h> /* twice: include guards */

int main(void)
{
	struct uslab_cache_args a = { 0 };
	struct uslab_cache_stats st;
	struct uslab_cache *c = uslab_cache_create("hdr", 8, &a, USLAB_HWCACHE_ALIGN);

	if (!c || uslab_cache_stats(c, &st))
		return 1;
	uslab_cache_free(c, uslab_cache_alloc(c));
	kvfree_rcu(uslab_cache_alloc(c));
	kvfree_rcu_barrier();
	return uslab_cache_destroy(c);
}
