// SPDX-License-Identifier: MIT
/*
 * rcu_table.c - an RCU-protected table: liburcu's lock-free hash table
 * (cds_lfht) whose entries come from a uslab cache and are freed with
 * uslab_free_rcu() after a grace period, as the kernel frees with
 * kfree_rcu(). Reader threads look keys up without a lock while writer
 * threads replace and delete entries; a reader never sees an entry freed
 * under it, because uslab frees it only after every reader that could
 * hold it has left its read-side critical section. At the end:
 * uslab_rcu_barrier(), and every entry must be back in the cache.
 *
 *	rcu_table [SECONDS_TENTHS [READERS [WRITERS]]]	(defaults 10, 2, 2)
 *
 * Build: cc -O2 rcu_table.c -luslab $(pkg-config --cflags --libs liburcu-memb liburcu-cds) -pthread
 * Readers use liburcu's memb flavor, the one uslab waits for by default
 * (uslab_rcu_set_flavor() changes it).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <urcu/urcu-memb.h>
#include <urcu/rculfhash.h>
#include <uslab.h>
#include <uslab/rcu.h>

#define KEYS 4096 /* below 2^20: a value's low bits are its key */

struct entry {
	struct cds_lfht_node node;
	uint64_t key;
	uint64_t value; /* version << 20 | key */
	uint64_t check; /* ~value: a torn or freed entry fails the check */
};

static struct uslab_cache *entries;
static struct cds_lfht *table;
static atomic_bool stop;
static atomic_ulong lookups, hits, bad, replaced, deleted;

static unsigned long hash_key(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (unsigned long)key;
}

static int match(struct cds_lfht_node *node, const void *key)
{
	return caa_container_of(node, struct entry, node)->key == *(const uint64_t *)key;
}

static struct entry *new_entry(uint64_t key, uint64_t version)
{
	struct entry *e = uslab_cache_alloc(entries);

	if (!e) {
		perror("uslab_cache_alloc");
		exit(1);
	}
	cds_lfht_node_init(&e->node);
	e->key = key;
	e->value = version << 20 | key;
	e->check = ~e->value;
	return e;
}

static void *reader(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;

	urcu_memb_register_thread();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct cds_lfht_iter it;
		uint64_t key;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		key = seed % KEYS;
		urcu_memb_read_lock();
		cds_lfht_lookup(table, hash_key(key), match, &key, &it);
		struct cds_lfht_node *n = cds_lfht_iter_get_node(&it);
		if (n) {
			struct entry *e = caa_container_of(n, struct entry, node);

			/* Read under the lock: never freed while we are here. */
			if (e->key != key || e->check != ~e->value || (e->value & 0xfffff) != key)
				atomic_fetch_add(&bad, 1);
			atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed);
		}
		urcu_memb_read_unlock();
		atomic_fetch_add_explicit(&lookups, 1, memory_order_relaxed);
	}
	urcu_memb_unregister_thread();
	return NULL;
}

static void *writer(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 0xBF58476D1CE4E5B9ull + 7, version = 0;

	urcu_memb_register_thread();
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t key;

		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		key = seed % KEYS;
		urcu_memb_read_lock(); /* (cds_lfht's updates run inside one too) */
		if (seed & 1) {
			struct entry *e = new_entry(key, ++version);
			struct cds_lfht_node *old =
				cds_lfht_add_replace(table, hash_key(key), match, &key, &e->node);

			if (old) {
				/* Readers may hold it: freed after a grace period. */
				uslab_free_rcu(caa_container_of(old, struct entry, node));
				atomic_fetch_add_explicit(&replaced, 1, memory_order_relaxed);
			}
		} else {
			struct cds_lfht_iter it;
			struct cds_lfht_node *n;

			cds_lfht_lookup(table, hash_key(key), match, &key, &it);
			n = cds_lfht_iter_get_node(&it);
			if (n && cds_lfht_del(table, n) == 0) {
				uslab_free_rcu(caa_container_of(n, struct entry, node));
				atomic_fetch_add_explicit(&deleted, 1, memory_order_relaxed);
			}
		}
		urcu_memb_read_unlock();
	}
	urcu_memb_unregister_thread();
	return NULL;
}

int main(int argc, char **argv)
{
	int tenths = argc > 1 ? atoi(argv[1]) : 10;
	int nr = argc > 2 ? atoi(argv[2]) : 2, nw = argc > 3 ? atoi(argv[3]) : 2;
	struct timespec pause = { tenths / 10, (long)(tenths % 10) * 100000000 };
	pthread_t t[64];
	struct cds_lfht_iter it;
	struct entry *e;
	struct uslab_cache_stats st;
	unsigned long left = 0;

	if (nr < 1 || nw < 1 || nr + nw > 64) {
		fprintf(stderr, "usage: rcu_table [SECONDS_TENTHS [READERS [WRITERS]]]\n");
		return 2;
	}
	entries = uslab_cache_create("entry", sizeof(struct entry), NULL, 0);
	table = cds_lfht_new_flavor(KEYS, KEYS, 0, CDS_LFHT_AUTO_RESIZE, &urcu_memb_flavor, NULL);
	if (!entries || !table) {
		fprintf(stderr, "cannot create the cache or the table\n");
		return 1;
	}
	for (uint64_t k = 0; k < KEYS; k++)
		cds_lfht_add(table, hash_key(k), &new_entry(k, 0)->node);
	for (int i = 0; i < nr; i++)
		pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < nw; i++)
		pthread_create(&t[nr + i], NULL, writer, (void *)(uintptr_t)(i + 1));
	nanosleep(&pause, NULL);
	atomic_store(&stop, true);
	for (int i = 0; i < nr + nw; i++)
		pthread_join(t[i], NULL);

	/* Empty the table (no reader left: each entry can go at once after its removal). */
	urcu_memb_register_thread();
	urcu_memb_read_lock();
	cds_lfht_for_each_entry(table, &it, e, node)
	{
		if (cds_lfht_del(table, &e->node) == 0) {
			uslab_free_rcu(e);
			left++;
		}
	}
	urcu_memb_read_unlock();
	urcu_memb_unregister_thread();
	uslab_rcu_barrier(); /* every deferred free done: the objects are back */
	cds_lfht_destroy(table, NULL);
	uslab_thread_flush();
	uslab_cache_shrink(entries);
	uslab_cache_stats(entries, &st);
	printf("%lu lookups (%lu hits) by %d readers; %lu replaced and %lu deleted by %d writers; "
	       "%lu left at the end\n",
	       atomic_load(&lookups), atomic_load(&hits), nr, atomic_load(&replaced),
	       atomic_load(&deleted), nw, left);
	printf("entries in use after the barrier: %lu\n", st.active_objs);
	if (atomic_load(&bad) || st.active_objs || uslab_cache_destroy(entries)) {
		printf("FAILED: %lu bad reads\n", atomic_load(&bad));
		return 1;
	}
	puts("ok: no reader saw a freed entry, every entry back after the barrier");
	return 0;
}
