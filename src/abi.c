// SPDX-License-Identifier: MIT
/*
 * abi.c - the one place that pins <uslab/inline/priv.h>, the private ABI of the
 * inline paths compiled into programs, to the library's structures. Each
 * assertion names what an inline path reads; a change to a structure that
 * breaks one, or to what a field means, is a change of the private ABI:
 * bump USLAB_PRIV_ABI and the generation in the symbol names beside it
 * (<uslab/inline/priv.h>), so that programs compiled against older headers fail
 * to link or load instead of misreading memory (api_abi_stale checks it).
 * No code: compiling this file is the check.
 */
#include "front.h"

/* ---------------------------------------- uslab_cache_alloc/free (fastpath.h) */

/* uslab_priv_pcs_of(): a cache's first bytes are struct uslab_priv_cache. */
_Static_assert(offsetof(struct uslab_cache, hot) == 0, "struct uslab_priv_cache leads the cache");
_Static_assert(offsetof(struct uslab_priv_cache, pcs_off) == 0, "pcs_off: the first word");
/* The sheaf's top, bottom and limit and the objgeo copy: a thread's pcs's first bytes, one line. */
_Static_assert(offsetof(struct pcs, hot) == 0, "struct uslab_priv_pcs leads struct pcs");
_Static_assert(sizeof(struct uslab_priv_pcs) + sizeof(void *) <= CACHELINE,
	       "the fast paths' fields and the main sheaf are on the first cache line of a pcs");
/* uslab_priv_pcs_of_id() (kmalloc.h): a pcs is 2^USLAB_PRIV_PCS_SHIFT bytes. */
_Static_assert(sizeof(struct pcs) == 1u << USLAB_PRIV_PCS_SHIFT, "pcs of an id");

/* --------------------------------------------------- uslab_kfree (kmalloc.h) */

/* Addresses the registry covers. */
_Static_assert(USLAB_PRIV_VA_BITS == VA_BITS, "the registry covers 2^VA_BITS bytes");
_Static_assert(USLAB_PRIV_VA_BITS < sizeof(unsigned long) * 8 && sizeof(unsigned long) == 8 &&
		       sizeof(uintptr_t) == sizeof(unsigned long),
	       "a registry entry is an unsigned long holding an address (64-bit only)");
/* (os.c refuses an arena mmap() placed above 2^VA_BITS: 5-level paging.) */
_Static_assert(USLAB_PRIV_ARENA_SHIFT == ARENA_SHIFT, "one registry entry per arena granule");
/* A registry entry: a descriptor's address, cache-line aligned, ORed with a slab shift. */
_Static_assert(1u << USLAB_PRIV_SLAB_SHIFT == CACHELINE && sizeof(struct slab) == CACHELINE,
	       "a slab descriptor is one cache line, 2^USLAB_PRIV_SLAB_SHIFT bytes");
_Static_assert(USLAB_PRIV_ENTRY_SHIFT_MASK == CACHELINE - 1,
	       "an entry's shift lives in the bits a descriptor's alignment leaves zero");
_Static_assert(ARENA_SHIFT <= USLAB_PRIV_ENTRY_SHIFT_MASK,
	       "the largest shift (a huge object's granules) fits an entry's low bits");
/* The cache id the inline kfree reads from the descriptor. */
_Static_assert(offsetof(struct slab, pcs_id) == USLAB_PRIV_SLAB_PCS_ID &&
		       sizeof(((struct slab *)0)->pcs_id) == sizeof(unsigned short),
	       "a 16-bit cache id at USLAB_PRIV_SLAB_PCS_ID");
_Static_assert(USLAB_MAX_CACHES < 65536, "a cache id fits struct slab.pcs_id");
/* The interior-pointer check reads a cache slab's first object from its descriptor. */
_Static_assert(offsetof(struct slab, first_neg) == USLAB_PRIV_SLAB_FIRST &&
		       sizeof(((struct slab *)0)->first_neg) == 8,
	       "minus the first object's address at USLAB_PRIV_SLAB_FIRST");
/* uslab_priv_objgeo[id]: one entry per id, each on its own half line. */
_Static_assert(sizeof(struct uslab_priv_objgeo) == 32, "an objgeo entry is 32 bytes");
/* The free key: the cache's copy at the hot line, which the inline paths read. */
_Static_assert(offsetof(struct uslab_cache, hot.free_key) + sizeof(uintptr_t) <= CACHELINE,
	       "the free key is on the cache's first line");
/* uslab_priv_kmalloc_index(): the highest bit of an unsigned long. */
_Static_assert(USLAB_PRIV_LONG_TOP_BIT == 63, "__builtin_clzl of a 64-bit long");

/* The generation in the names the inline paths bind to (<uslab/inline/priv.h>). */
_Static_assert(USLAB_PRIV_ABI == 2,
	       "the _abi2 names below USLAB_PRIV_ABI in <uslab/inline/priv.h>");

/* ----------------------------------------------------------- magazine.h */

_Static_assert(sizeof(struct uslab_magazine) == CACHELINE &&
		       offsetof(struct uslab_magazine, objs) == CACHELINE,
	       "a magazine's header is one line, the array right after it");

/* ------------------------------------------------------------ counter.h */

_Static_assert(sizeof(struct uslab_priv_cslot) == 4 * sizeof(uint64_t) &&
		       offsetof(struct uslab_priv_cslot, gen) == 0,
	       "a counter's slot: its generation, then the words the inline paths update");
