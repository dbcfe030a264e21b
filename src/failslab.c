// SPDX-License-Identifier: MIT
/*
 * failslab.c - fault injection for the program's error paths (the
 * kernel's failslab): USLAB_FAILSLAB=probability[,interval[,times[,cache]]]
 * makes allocations from the selected caches fail with ENOMEM.
 *
 *   probability  percent of eligible calls that fail, 0..100
 *   interval     only every interval-th call is eligible (default 1)
 *   times        failures at most, then none (default -1: no limit)
 *   cache        only the cache of this name (default: every cache the
 *                program creates and every kmalloc class; never uslab's
 *                own metadata caches nor large kmalloc objects)
 *
 * The decision is a hash of the call's sequence number (one atomic counter
 * over all selected caches), so a program that allocates in the same order
 * sees the same failures on every run. A selected cache has no sheaves
 * (lifecycle.c), so every allocation, inline ones included, reaches the
 * library's slow path, which asks failslab_hit(). A bulk allocation asks
 * once per call and fails whole (all or nothing).
 */
#include <stdlib.h>
#include <string.h>

#include "cache.h" /* CACHE_INTERNAL, CACHE_LARGE */

static struct {
	bool on;
	unsigned int probability; /* percent */
	unsigned long interval;
	long times; /* -1: no limit */
	char cache[USLAB_NAME_MAX + 1];
	uint64_t calls;	   /* eligible or not, atomic */
	uint64_t failures; /* atomic */
} fs;

/* A number in [min, max] from *@s up to the next comma or the end. */
static bool field(const char **s, long min, long max, long *v)
{
	char *end;

	errno = 0;
	*v = strtol(*s, &end, 10);
	if (errno || end == *s || (*end && *end != ',') || *v < min || *v > max)
		return false;
	*s = *end ? end + 1 : end;
	return true;
}

/*
 * failslab_parse - read USLAB_FAILSLAB (options.c calls it at start-up);
 * NULL: off. Return: 0, or -EINVAL when @s does not parse.
 */
int failslab_parse(const char *s)
{
	long prob, interval = 1, times = -1;

	memset(&fs, 0, sizeof(fs));
	if (!s)
		return 0;
	if (!field(&s, 0, 100, &prob) || (*s && !field(&s, 1, 1l << 30, &interval)) ||
	    (*s && !field(&s, -1, 1l << 30, &times)) || strlen(s) > USLAB_NAME_MAX)
		return -EINVAL;
	fs.probability = (unsigned int)prob;
	fs.interval = (unsigned long)interval;
	fs.times = times;
	strcpy(fs.cache, s);
	fs.on = prob > 0 && times != 0;
	return 0;
}

/* Whether the cache @name (created with internal @flags) is one failslab selects. */
bool failslab_selects(const char *name, unsigned int flags)
{
	if (!fs.on || (flags & (CACHE_INTERNAL | CACHE_LARGE)))
		return false;
	return !fs.cache[0] || !strcmp(fs.cache, name);
}

/* splitmix64: a well-mixed function of the call number. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* failslab_hit - whether this allocation from a selected cache fails. */
bool failslab_hit(void)
{
	uint64_t n = __atomic_add_fetch(&fs.calls, 1, __ATOMIC_RELAXED);

	if (n % fs.interval || mix(n) % 100 >= fs.probability)
		return false;
	if (fs.times >= 0 &&
	    __atomic_add_fetch(&fs.failures, 1, __ATOMIC_RELAXED) > (uint64_t)fs.times)
		return false;
	if (fs.times < 0)
		__atomic_add_fetch(&fs.failures, 1, __ATOMIC_RELAXED);
	return true;
}

unsigned long uslab_failslab_count(void)
{
	uint64_t f = __atomic_load_n(&fs.failures, __ATOMIC_RELAXED);

	return fs.times >= 0 && f > (uint64_t)fs.times ? (unsigned long)fs.times : (unsigned long)f;
}
