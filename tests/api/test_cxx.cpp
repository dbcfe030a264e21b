// SPDX-License-Identifier: MIT
/*
 * test_cxx.cpp - <uslab/uslab.hpp>: typed caches (construction and
 * destruction counted, a throwing constructor gives its object back,
 * over-aligned types, moved-from caches, unique_ptr, bulk forms with a
 * constructor that throws midway), uslab::allocator under the standard
 * containers on several threads with contents checked, and the pmr
 * resources (kmalloc's and a cache's, nodes of std::pmr::list and
 * std::pmr::unordered_map). Run in the release, ASan and TSan builds, and
 * with the debug tier (USLAB_DEBUG=F) and per-CPU sheaves.
 */
#include <uslab/uslab.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace
{

unsigned long checks;

#define CHECK(cond, ...)                                                                     \
	do {                                                                                 \
		checks++;                                                                    \
		if (!(cond)) {                                                               \
			std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			std::fprintf(stderr, __VA_ARGS__);                                   \
			std::fputc('\n', stderr);                                            \
			std::exit(1);                                                        \
		}                                                                            \
	} while (0)

std::atomic<int> alive{ 0 };

struct Conn {
	int fd;
	std::string peer;
	std::uint64_t stamp;

	Conn(int f, std::string p) : fd(f), peer(std::move(p)), stamp(0xc0ffee00u + f)
	{
		if (fd < 0)
			throw std::runtime_error("bad fd");
		alive++;
	}
	~Conn()
	{
		alive--;
	}
};

struct alignas(256) Wide {
	unsigned char b[300];
};

unsigned long active(uslab_cache *c)
{
	struct uslab_cache_stats st;

	uslab_thread_flush();
	uslab_cache_shrink(c);
	CHECK(uslab_cache_stats(c, &st) == 0, "stats");
	return st.active_objs;
}

void typed_cache()
{
	uslab::cache<Conn> conns("cxx-conn");
	std::vector<Conn *> v;

	for (int i = 0; i < 5000; i++)
		v.push_back(conns.make(i, "peer" + std::to_string(i)));
	CHECK(alive == 5000, "%d constructed", alive.load());
	for (int i = 0; i < 5000; i++)
		CHECK(v[i]->fd == i && v[i]->peer == "peer" + std::to_string(i) &&
			      v[i]->stamp == 0xc0ffee00u + static_cast<unsigned>(i),
		      "contents of %d", i);
	for (Conn *c : v)
		conns.destroy(c);
	CHECK(alive == 0, "%d left", alive.load());
	CHECK(active(conns.get()) == 0, "every object back");

	/* A constructor that throws gives its object back. */
	for (int i = 0; i < 100; i++) {
		bool thrown = false;

		try {
			conns.make(-1, "x");
		} catch (const std::runtime_error &) {
			thrown = true;
		}
		CHECK(thrown, "the constructor's exception leaves make()");
	}
	CHECK(active(conns.get()) == 0, "thrown constructors: no object kept");

	/* unique_ptr */
	{
		auto p = conns.make_unique(7, "u");
		CHECK(p->fd == 7 && alive == 1, "make_unique");
	}
	CHECK(alive == 0 && active(conns.get()) == 0, "unique_ptr destroyed it");

	/* Bulk, and a constructor that throws midway: all or nothing. */
	{
		Conn *b[64];
		bool thrown = false;

		conns.make_bulk(64, b, 3, std::string("bulk"));
		CHECK(alive == 64 && b[63]->peer == "bulk", "make_bulk");
		conns.destroy_bulk(64, b);
		for (Conn *p : b)
			CHECK(p == nullptr, "destroy_bulk clears the array");
		try {
			conns.make_bulk(64, b, -1, std::string("bad"));
		} catch (const std::runtime_error &) {
			thrown = true;
		}
		CHECK(thrown && alive == 0, "make_bulk: the exception, nothing constructed left");
		CHECK(active(conns.get()) == 0, "make_bulk: every object back");
	}

	/* Moved-from caches. */
	uslab::cache<Conn> other(std::move(conns));
	CHECK(!conns && other, "moved: the source owns nothing");
	Conn *c = other.make(1, "m");
	other.destroy(c);
	conns = std::move(other);
	CHECK(conns && !other, "moved back");
}

void over_aligned()
{
	uslab::cache<Wide> wide("cxx-wide");
	std::vector<Wide *> v;

	for (int i = 0; i < 1000; i++) {
		Wide *w = wide.make();
		CHECK(reinterpret_cast<std::uintptr_t>(w) % 256 == 0, "cache: %p aligned to 256",
		      (void *)w);
		v.push_back(w);
	}
	for (Wide *w : v)
		wide.destroy(w);
	std::vector<Wide, uslab::allocator<Wide>> a(333);
	CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % 256 == 0, "allocator: aligned to 256");
}

/* Containers on uslab::allocator, filled on one thread, read and emptied on another. */
using Str = std::basic_string<char, std::char_traits<char>, uslab::allocator<char>>;
using Map = std::map<int, Str, std::less<int>, uslab::allocator<std::pair<const int, Str>>>;
struct StrHash {
	std::size_t operator()(const Str &s) const noexcept
	{
		return std::hash<std::string_view>()(std::string_view(s.data(), s.size()));
	}
};
using Umap = std::unordered_map<Str, int, StrHash, std::equal_to<Str>,
				uslab::allocator<std::pair<const Str, int>>>;

void containers()
{
	constexpr int kThreads = 4, kRounds = 20;
	std::vector<std::thread> ts;
	std::atomic<int> bad{ 0 };

	for (int t = 0; t < kThreads; t++) {
		ts.emplace_back([t, &bad] {
			for (int r = 0; r < kRounds; r++) {
				auto *m = new Map;
				auto *u = new Umap;

				for (int i = 0; i < 500; i++) {
					Str s(static_cast<std::size_t>(10 + (i * 7 + t) % 200),
					      static_cast<char>('a' + (i + r) % 26));
					(*m)[i] = s;
					(*u)[s + Str(std::to_string(i).c_str())] = i;
				}
				if (!uslab_owns(&*m->begin()) ||
				    !uslab_owns(m->begin()->second.data()))
					bad++; /* (the nodes and the strings' buffers are kmalloc's) */
				/* Read and destroyed by another thread. */
				std::thread([m, u, r, &bad] {
					for (int i = 0; i < 500; i++) {
						const Str &s = m->at(i);
						if (s.empty() ||
						    s[0] != static_cast<char>('a' + (i + r) % 26) ||
						    u->at(s + Str(std::to_string(i).c_str())) != i)
							bad++;
					}
					delete m;
					delete u;
				}).join();
			}
		});
	}
	for (auto &t : ts)
		t.join();
	CHECK(bad == 0, "%d entries wrong", bad.load());
	CHECK(uslab::allocator<int>() == uslab::allocator<double>(), "allocators are equal");
}

#ifdef USLAB_HPP_HAVE_PMR
void resources()
{
	{
		std::pmr::vector<std::pmr::string> v(uslab::kmalloc_resource::get());

		for (int i = 0; i < 2000; i++)
			v.emplace_back(std::string(static_cast<std::size_t>(i % 300), 'k'));
		for (int i = 0; i < 2000; i++)
			CHECK(v[static_cast<std::size_t>(i)].size() ==
				      static_cast<std::size_t>(i % 300),
			      "pmr string %d", i);
		CHECK(uslab_owns(v.data()), "the vector's memory is uslab's");
	}
	/* A cache for std::pmr::list<int>'s nodes (3 words). */
	uslab::cache_resource nodes("cxx-list-node", 3 * sizeof(void *), alignof(void *));
	{
		std::pmr::list<long> l(&nodes);

		for (long i = 0; i < 10000; i++)
			l.push_back(i);
		CHECK(uslab_cache_of(&l.front()) == nodes.get() || uslab_owns(&l.front()),
		      "a node from the cache");
		long sum = 0;
		for (long x : l)
			sum += x;
		CHECK(sum == 10000L * 9999 / 2, "contents");
		CHECK(active(nodes.get()) >= 10000, "%lu nodes from the cache",
		      active(nodes.get()));
	}
	CHECK(active(nodes.get()) == 0, "every node back");
	/* An unordered_map: nodes from the cache, buckets from upstream (kmalloc). */
	uslab::cache_resource mapnodes("cxx-map-node", 64, alignof(std::max_align_t));
	{
		std::pmr::unordered_map<long, long> m(&mapnodes);

		for (long i = 0; i < 5000; i++)
			m[i] = i * 3;
		for (long i = 0; i < 5000; i++)
			CHECK(m.at(i) == i * 3, "map contents");
	}
	CHECK(active(mapnodes.get()) == 0, "every map node back");
	/* No upstream given (nullptr): kmalloc's serves what the cache cannot. */
	uslab::cache_resource small("cxx-small", 16, 8, nullptr);
	void *big = small.allocate(64, 8);
	CHECK(uslab_owns(big) && uslab_cache_of(big) != small.get(), "nullptr upstream: kmalloc");
	small.deallocate(big, 64, 8);
}
#endif

} // namespace

int main()
{
	typed_cache();
	std::printf("ok typed_cache (%lu checks)\n", checks);
	over_aligned();
	std::printf("ok over_aligned (%lu checks)\n", checks);
	containers();
	std::printf("ok containers (%lu checks)\n", checks);
#ifdef USLAB_HPP_HAVE_PMR
	resources();
	std::printf("ok resources (%lu checks)\n", checks);
#endif
	return 0;
}
