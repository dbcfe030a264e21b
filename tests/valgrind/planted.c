// SPDX-License-Identifier: MIT
/*
 * planted.c - a program with three planted bugs in uslab objects, run
 * under valgrind --tool=memcheck by run.sh, which checks that memcheck
 * reports each of them against the function that has it:
 *
 *   read_after_free    reads an object of a cache after freeing it
 *   leak_one           drops the last pointer to a kmalloc'd object
 *   branch_on_garbage  branches on bytes of an object never written
 *
 * and nothing else (a correct cycle of allocations and frees beside them).
 */
#include <stdio.h>
#include <string.h>
#include <uslab.h>

struct item {
	long key;
	char name[56];
};

static struct uslab_cache *items;

__attribute__((noinline)) long read_after_free(void);
__attribute__((noinline)) long read_after_free(void)
{
	struct item *it = uslab_cache_alloc(items);
	long key;

	it->key = 42;
	uslab_cache_free(items, it);
	key = *(volatile long *)&it->key; /* planted: use after free */
	return key;
}

__attribute__((noinline)) void leak_one(void);
__attribute__((noinline)) void leak_one(void)
{
	char *p = uslab_kmalloc(100);

	if (p)
		strcpy(p, "leaked"); /* planted: never freed, no pointer kept */
}

__attribute__((noinline)) int branch_on_garbage(void);
__attribute__((noinline)) int branch_on_garbage(void)
{
	struct item *it = uslab_cache_alloc(items);
	int r = 0;

	if (it->name[3] == 'x') { /* planted: never written */
		puts("x");
		r = 1;
	}
	uslab_cache_free(items, it);
	return r;
}

int main(void)
{
	void *ok[64];

	items = uslab_cache_create("items", sizeof(struct item), NULL, 0);
	if (!items)
		return 1;
	for (int i = 0; i < 64; i++) {
		ok[i] = uslab_cache_zalloc(items);
		memset(ok[i], i, sizeof(struct item));
	}
	for (int i = 0; i < 64; i++)
		uslab_cache_free(items, ok[i]);
	leak_one();
	printf("%d\n", branch_on_garbage());
	printf("%d\n", read_after_free() == 42);
	return 0;
}
