// SPDX-License-Identifier: MIT
/*
 * numa.c - the machine's NUMA topology, read once at start-up: its nodes,
 * which have memory, which CPUs each serves, their distances; the node of
 * the CPU a thread runs on; and placing a mapping on a node. A service:
 * the page heap (os.c) places arenas with it, the cache layer picks the
 * node lists a refill takes from, kmalloc and the public _node calls ask
 * it for the caller's node.
 *
 * Where the topology comes from:
 *   - USLAB_NUMA=0: one node (every NUMA path off, as on a one-node machine).
 *   - USLAB_NUMA_FAKE: a synthetic map for tests, "CPU:NODE,..." (CPUs not
 *     listed are on node 0) or a count N (CPU i on node i % N); every node
 *     has memory, distance 10 to itself and 20 to the others. uslab then
 *     tags arenas, slabs and node lists with the fake nodes while the
 *     kernel places all memory on real node 0 (mbind to node 0 runs for
 *     real). doc/design.md "NUMA" says what a fake topology cannot show.
 *   - Otherwise sysfs: /sys/devices/system/node/online, nodeN/cpulist,
 *     nodeN/distance, has_memory. No library (libnuma) is needed.
 * One node with memory (the common case, this machine): numa_on() is
 * false, and every NUMA path is skipped by a test of that one word.
 *
 * A node without memory (CPUs only, or outside the program's own
 * MPOL_BIND set or its cpuset) is served by the nearest node that has memory, as Linux's
 * numa_mem_id(): numa_node_self() never answers a node without memory.
 *
 * The program's policy: if it binds memory itself (numactl --membind,
 * set_mempolicy MPOL_BIND), only the nodes of its set have memory here and
 * uslab calls no mbind; its cpuset's Mems_allowed narrows them the same
 * way (mbind stays: the kernel keeps within the cpuset anyway); any other policy (default, preferred, interleave)
 * leaves uslab free to place each arena on its node with MPOL_PREFERRED
 * (the node first, the kernel's fallback when it is full: an allocation
 * never fails for placement; doc/design.md has the choice).
 *
 * Ids: node ids are the kernel's (uslab's tag is 4 bits in struct slab:
 * NUMA_MAX_NODES); a machine with a node id above that runs with NUMA off
 * and says so once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu */
#endif
#include <ctype.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"

/* <linux/mempolicy.h>'s modes, for the raw system calls (no libnuma). */
#define MPOL_DEFAULT_ 0
#define MPOL_PREFERRED_ 1
#define MPOL_BIND_ 2

struct numa_topology numa_topo = { .nr_nodes = 1, .mem_nodes = 1, .nr_order = { 1 } };

/* USLAB_NUMA_FAKE, parsed: node of each listed CPU (-1: not listed), or a count. */
static struct {
	bool set;
	unsigned int count; /* "N": CPU i on node i % N */
	int8_t cpu_node[NUMA_MAX_CPUS];
	unsigned int nr_nodes;
} fake;

int numa_fake_parse(const char *s)
{
	char *end;
	unsigned long cpu, node;

	memset(&fake, 0, sizeof(fake));
	memset(fake.cpu_node, -1, sizeof(fake.cpu_node));
	if (!s)
		return 0;
	if (isdigit((unsigned char)*s) && !strchr(s, ':')) {
		node = strtoul(s, &end, 10);
		if (*end || node < 1 || node > NUMA_MAX_NODES)
			return -EINVAL;
		fake.set = true;
		fake.count = fake.nr_nodes = (unsigned int)node;
		return 0;
	}
	while (*s) {
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		cpu = strtoul(s, &end, 10);
		if (*end != ':' || cpu >= NUMA_MAX_CPUS || !isdigit((unsigned char)end[1]))
			return -EINVAL;
		node = strtoul(end + 1, &end, 10);
		if (node >= NUMA_MAX_NODES || (*end && *end != ','))
			return -EINVAL;
		fake.cpu_node[cpu] = (int8_t)node;
		if (node + 1 > fake.nr_nodes)
			fake.nr_nodes = (unsigned int)node + 1;
		s = *end ? end + 1 : end;
	}
	fake.set = fake.nr_nodes > 0;
	return fake.set ? 0 : -EINVAL;
}

/* The first line of sysfs file @path into @buf; false if it cannot be read. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

/*
 * parse_list - a sysfs list ("0-3,8,10-11") as calls of @fn(@arg, i).
 * Return: false if it does not parse.
 */
static bool parse_list(const char *s, void (*fn)(void *arg, unsigned long i), void *arg)
{
	char *end;
	unsigned long a, b;

	while (*s && *s != '\n') {
		if (!isdigit((unsigned char)*s))
			return false;
		a = b = strtoul(s, &end, 10);
		if (*end == '-')
			b = strtoul(end + 1, &end, 10);
		if (b < a || b - a > 1ul << 20)
			return false;
		for (unsigned long i = a; i <= b; i++)
			fn(arg, i);
		s = *end == ',' ? end + 1 : end;
	}
	return true;
}

static void add_bit(void *arg, unsigned long i)
{
	if (i < 64)
		*(uint64_t *)arg |= 1ull << i;
	else
		*(uint64_t *)arg |= 1ull << 63; /* beyond what uslab tags: NUMA off */
}

struct cpu_arg {
	int8_t *map;
	unsigned int node;
};

static void set_cpu(void *arg, unsigned long cpu)
{
	struct cpu_arg *a = arg;

	if (cpu < NUMA_MAX_CPUS)
		a->map[cpu] = (int8_t)a->node;
}

/* The program's own policy: the nodes it binds memory to (MPOL_BIND), else all. */
static uint64_t policy_nodes(bool *bound)
{
	unsigned long mask[NUMA_MAX_NODES / 64 + 16] = { 0 };
	int mode = MPOL_DEFAULT_;

	*bound = false;
	if (syscall(SYS_get_mempolicy, &mode, mask, sizeof(mask) * 8, NULL, 0) != 0)
		return ~0ull;
	if ((mode & 0xff) != MPOL_BIND_)
		return ~0ull;
	*bound = true;
	return mask[0];
}

/*
 * The nodes the program's cpuset lets it allocate on (/proc/self/status,
 * Mems_allowed_list: a container or `cpuset` limited to some nodes), else
 * all. The kernel places a page outside them elsewhere whatever mbind
 * says, so uslab treats them as nodes without memory.
 */
static uint64_t cpuset_nodes(void)
{
	static const char key[] = "Mems_allowed_list:";
	uint64_t mask = 0;
	char buf[512];
	FILE *f = fopen("/proc/self/status", "re");
	bool found = false;

	if (!f)
		return ~0ull;
	while (!found && fgets(buf, sizeof(buf), f)) {
		const char *p = buf + sizeof(key) - 1;

		if (strncmp(buf, key, sizeof(key) - 1))
			continue;
		while (*p == ' ' || *p == '\t')
			p++;
		found = parse_list(p, add_bit, &mask);
	}
	fclose(f);
	return found && mask ? mask : ~0ull;
}

/* Real topology from sysfs into @t and @cpu_node; false: one node (or unusable). */
static bool read_sysfs(struct numa_topology *t, int8_t *cpu_node)
{
	char buf[4096], path[96];
	uint64_t online = 0, mem = 0;
	unsigned int n, m;

	if (!read_line("/sys/devices/system/node/online", buf, sizeof(buf)) ||
	    !parse_list(buf, add_bit, &online))
		return false;
	if (!read_line("/sys/devices/system/node/has_memory", buf, sizeof(buf)) ||
	    !parse_list(buf, add_bit, &mem))
		mem = online;
	if (online >> NUMA_MAX_NODES) {
		usl_warn("NUMA: a node id above %u: running as one node", NUMA_MAX_NODES - 1);
		return false;
	}
	if (__builtin_popcountll(online) < 2)
		return false;
	t->nr_nodes = 64 - (unsigned int)__builtin_clzll(online);
	t->mem_mask = (uint32_t)(mem & online);
	for (n = 0; n < t->nr_nodes; n++) {
		struct cpu_arg a = { cpu_node, n };
		const char *p;
		char *end;

		if (!(online >> n & 1))
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%u/cpulist", n);
		if (read_line(path, buf, sizeof(buf)))
			parse_list(buf, set_cpu, &a);
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%u/distance", n);
		if (!read_line(path, buf, sizeof(buf)))
			continue;
		/* One distance per online node, in id order. */
		p = buf;
		for (m = 0; m < t->nr_nodes; m++) {
			unsigned long d;

			if (!(online >> m & 1))
				continue;
			d = strtoul(p, &end, 10);
			if (end == p)
				break;
			t->distance[n][m] = (uint8_t)(d > 255 ? 255 : d);
			p = end;
		}
	}
	t->real = true;
	return true;
}

/* The distance from @n to @m for ordering: 0 to itself, 255 if sysfs gave none. */
static unsigned int order_key(const struct numa_topology *t, unsigned int n, unsigned int m)
{
	if (m == n)
		return 0;
	return t->distance[n][m] ? t->distance[n][m] : 255;
}

/* Fill the distance order of every node: nodes with memory, nearest first (ties by id). */
static void make_orders(struct numa_topology *t)
{
	for (unsigned int n = 0; n < t->nr_nodes; n++) {
		unsigned int k = 0;

		for (unsigned int m = 0; m < t->nr_nodes; m++) {
			unsigned int j;

			if (!(t->mem_mask >> m & 1))
				continue;
			j = k++;
			/* Insertion: the nodes already placed are in id order within a distance. */
			while (j > 0 && order_key(t, n, t->order[n][j - 1]) > order_key(t, n, m)) {
				t->order[n][j] = t->order[n][j - 1];
				j--;
			}
			t->order[n][j] = (uint8_t)m;
		}
		t->nr_order[n] = (uint8_t)k;
	}
}

/* The node of @cpu under USLAB_NUMA_FAKE. */
static unsigned int fake_node(unsigned int cpu)
{
	if (fake.count)
		return cpu % fake.count;
	return fake.cpu_node[cpu] >= 0 ? (unsigned int)fake.cpu_node[cpu] : 0;
}

void numa_init(void)
{
	static int8_t cpu_node[NUMA_MAX_CPUS];
	struct numa_topology t;
	uint64_t allowed;
	bool bound;

	memset(&t, 0, sizeof(t));
	memset(cpu_node, 0, sizeof(cpu_node));
	if (!usl_opt.numa)
		goto one;
	if (fake.set) {
		t.nr_nodes = fake.nr_nodes;
		t.mem_mask = (uint32_t)((1ull << t.nr_nodes) - 1);
		t.fake = true;
		for (unsigned int cpu = 0; cpu < NUMA_MAX_CPUS; cpu++)
			cpu_node[cpu] = (int8_t)fake_node(cpu);
		for (unsigned int n = 0; n < t.nr_nodes; n++)
			for (unsigned int m = 0; m < t.nr_nodes; m++)
				t.distance[n][m] = n == m ? 10 : 20;
	} else if (!read_sysfs(&t, cpu_node)) {
		goto one;
	}
	allowed = policy_nodes(&bound) & cpuset_nodes();
	if (!t.fake)
		t.mem_mask &= (uint32_t)allowed;
	t.mbind = !bound;
	if (!t.mem_mask || (!t.fake && __builtin_popcount(t.mem_mask) < 2))
		goto one;
	make_orders(&t);
	/* Each CPU's memory node: its node if that has memory, else the nearest that has. */
	for (unsigned int cpu = 0; cpu < NUMA_MAX_CPUS; cpu++) {
		unsigned int n = (unsigned int)cpu_node[cpu];

		t.cpu_mem[cpu] = n < t.nr_nodes ? t.order[n][0] : t.order[0][0];
	}
	t.mem_nodes = (unsigned int)__builtin_popcount(t.mem_mask);
	numa_topo = t;
	return;
one:
	memset(&numa_topo, 0, sizeof(numa_topo));
	numa_topo.nr_nodes = 1;
	numa_topo.mem_nodes = 1;
	numa_topo.mem_mask = 1;
	numa_topo.nr_order[0] = 1;
}

/* The CPU the calling thread runs on (it may move at once); 0 if unknown. */
static unsigned int cpu_self(void)
{
#ifdef USLAB_PRIV_RSEQ
	if (__rseq_size >= 8) {
		const struct rseq *rs =
			(const struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
		int cpu = (int)__atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);

		if (cpu >= 0)
			return (unsigned int)cpu;
	}
#endif
	int cpu = sched_getcpu();

	return cpu > 0 ? (unsigned int)cpu : 0;
}

unsigned int numa_node_self_slow(void)
{
	unsigned int cpu = cpu_self();

	return cpu < NUMA_MAX_CPUS ? numa_topo.cpu_mem[cpu] : numa_topo.order[0][0];
}

unsigned int numa_node_of_cpu(unsigned int cpu)
{
	if (!numa_on())
		return 0;
	return cpu < NUMA_MAX_CPUS ? numa_topo.cpu_mem[cpu] : numa_topo.order[0][0];
}

void numa_place(void *p, size_t len, unsigned int node)
{
	unsigned long mask[1];
	unsigned int real;

	if (!numa_on() || !numa_topo.mbind)
		return;
	/* A fake node is placed on real node 0: the kernel has no other. */
	real = numa_topo.fake ? 0 : node;
	mask[0] = 1ul << real;
	/* Best effort: a failure leaves the kernel's default (first touch). */
	(void)syscall(SYS_mbind, p, len, MPOL_PREFERRED_, mask, sizeof(mask) * 8 + 1, 0);
}

int uslab_numa_nodes(void)
{
	if (usl_init())
		return 1;
	return (int)numa_topo.nr_nodes;
}

int uslab_numa_node(void)
{
	if (usl_init())
		return 0;
	return (int)numa_node_self();
}

int uslab_numa_node_has_memory(int node)
{
	if (usl_init() || node < 0 || (unsigned int)node >= numa_topo.nr_nodes)
		return 0;
	return (int)(numa_topo.mem_mask >> node & 1);
}
