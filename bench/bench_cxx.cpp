// SPDX-License-Identifier: MIT
/*
 * bench_cxx.cpp - the C++ API against the standard library's allocation
 * (issue 40): a std::unordered_map<int, Node> and a std::list<Node> under
 * churn, each with one allocation scheme:
 *
 *	cxx-bench CONTAINER SCHEME [OPS [LIVE [REPS]]]
 *		CONTAINER: umap or list
 *		SCHEME:    std (std::allocator: whatever malloc the process
 *		           has, glibc's or a peer's under LD_PRELOAD),
 *		           uslab (uslab::allocator), kres
 *		           (std::pmr over uslab::kmalloc_resource), cres
 *		           (std::pmr over a uslab::cache_resource for the nodes),
 *		           unsync, sync (std::pmr::unsynchronized_pool_resource,
 *		           synchronized_pool_resource on new/delete)
 *		OPS (default 4000000): operations timed; LIVE (default 100000):
 *		entries kept; REPS (default 3)
 *
 * Each operation erases a random entry (umap: a random key; list: the
 * front) and inserts a new one (umap: a random key; list: at the back),
 * with its 48-byte Node written, so the container keeps LIVE entries while
 * its nodes are freed and allocated in a random order (umap) or FIFO
 * (list). Prints the median time per operation in TSC cycles and in ns
 * (the seeds' format) and the CSV line "CSV,cxx,<container>-<scheme>[-<BENCH_PEER_NAME>],..."
 * (BENCH_PEER_NAME names the malloc under the std scheme).
 */
#include <uslab/uslab.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>
#include <x86intrin.h>

namespace
{

struct Node {
	std::uint64_t id;
	std::uint64_t payload[5];
};

std::uint64_t rnd(std::uint64_t &s)
{
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

template <class Map> double run_umap(Map &m, long ops, long live)
{
	std::uint64_t s = 88172645463325252ull;
	long keyspace = live * 2;

	while (static_cast<long>(m.size()) < live) {
		long k = static_cast<long>(rnd(s) % static_cast<std::uint64_t>(keyspace));
		m[static_cast<int>(k)] = Node{ static_cast<std::uint64_t>(k), { 1, 2, 3, 4, 5 } };
	}
	auto t0 = std::chrono::steady_clock::now();
	for (long i = 0; i < ops; i++) {
		int del = static_cast<int>(rnd(s) % static_cast<std::uint64_t>(keyspace));
		int add = static_cast<int>(rnd(s) % static_cast<std::uint64_t>(keyspace));

		m.erase(del);
		m[add] = Node{ static_cast<std::uint64_t>(add),
			       { static_cast<std::uint64_t>(i), 2, 3, 4, 5 } };
	}
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(ops);
}

template <class List> double run_list(List &l, long ops, long live)
{
	while (static_cast<long>(l.size()) < live)
		l.push_back(Node{ l.size(), { 1, 2, 3, 4, 5 } });
	auto t0 = std::chrono::steady_clock::now();
	for (long i = 0; i < ops; i++) {
		l.pop_front();
		l.push_back(Node{ static_cast<std::uint64_t>(i), { 1, 2, 3, 4, 5 } });
	}
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(ops);
}

template <class Alloc>
using Umap = std::unordered_map<int, Node, std::hash<int>, std::equal_to<int>, Alloc>;

double once(const std::string &cont, const std::string &scheme, long ops, long live)
{
	using P = std::pair<const int, Node>;

	if (cont == "umap") {
		if (scheme == "std") {
			Umap<std::allocator<P>> m;
			return run_umap(m, ops, live);
		}
		if (scheme == "uslab") {
			Umap<uslab::allocator<P>> m;
			return run_umap(m, ops, live);
		}
		if (scheme == "kres") {
			std::pmr::unordered_map<int, Node> m(uslab::kmalloc_resource::get());
			return run_umap(m, ops, live);
		}
		if (scheme == "cres") {
			/* The node: a next pointer, the pair, the cached hash (libstdc++). */
			uslab::cache_resource nodes("cxx-umap-node", 80, alignof(std::max_align_t));
			std::pmr::unordered_map<int, Node> m(&nodes);
			return run_umap(m, ops, live);
		}
		if (scheme == "unsync") {
			std::pmr::unsynchronized_pool_resource pool;
			std::pmr::unordered_map<int, Node> m(&pool);
			return run_umap(m, ops, live);
		}
		if (scheme == "sync") {
			std::pmr::synchronized_pool_resource pool;
			std::pmr::unordered_map<int, Node> m(&pool);
			return run_umap(m, ops, live);
		}
	} else if (cont == "list") {
		if (scheme == "std") {
			std::list<Node> l;
			return run_list(l, ops, live);
		}
		if (scheme == "uslab") {
			std::list<Node, uslab::allocator<Node>> l;
			return run_list(l, ops, live);
		}
		if (scheme == "kres") {
			std::pmr::list<Node> l(uslab::kmalloc_resource::get());
			return run_list(l, ops, live);
		}
		if (scheme == "cres") {
			uslab::cache_resource nodes("cxx-list-node", 64, alignof(std::max_align_t));
			std::pmr::list<Node> l(&nodes);
			return run_list(l, ops, live);
		}
		if (scheme == "unsync") {
			std::pmr::unsynchronized_pool_resource pool;
			std::pmr::list<Node> l(&pool);
			return run_list(l, ops, live);
		}
		if (scheme == "sync") {
			std::pmr::synchronized_pool_resource pool;
			std::pmr::list<Node> l(&pool);
			return run_list(l, ops, live);
		}
	}
	std::fprintf(
		stderr,
		"usage: cxx-bench umap|list std|uslab|kres|cres|unsync|sync [OPS [LIVE [REPS]]]\n");
	std::exit(2);
}

double tsc_per_ns()
{
	auto t0 = std::chrono::steady_clock::now();
	unsigned long long c0 = __rdtsc();
	while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20))
		;
	unsigned long long c1 = __rdtsc();
	auto t1 = std::chrono::steady_clock::now();
	return static_cast<double>(c1 - c0) /
	       std::chrono::duration<double, std::nano>(t1 - t0).count();
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 3) {
		once("", "", 0, 0);
		return 2;
	}
	std::string cont = argv[1], scheme = argv[2];
	long ops = argc > 3 ? std::atol(argv[3]) : 4000000;
	long live = argc > 4 ? std::atol(argv[4]) : 100000;
	int reps = argc > 5 ? std::atoi(argv[5]) : 3;
	std::vector<double> ns;
	const char *peer = std::getenv("BENCH_PEER_NAME");
	std::string variant =
		cont + "-" + scheme + (scheme == "std" && peer ? std::string("-") + peer : "");
	double med, g = tsc_per_ns();

	for (int r = 0; r < reps; r++)
		ns.push_back(once(cont, scheme, ops, live));
	std::sort(ns.begin(), ns.end());
	med = ns[ns.size() / 2];
	std::printf("cxx        %-22s %-8ld: %.0f cycles(tsc) %.3f ns\n", variant.c_str(), live,
		    med * g, med);
	std::printf("CSV,cxx,%s,%ld,ns,%.4f\n", variant.c_str(), live, med);
	return 0;
}
