// SPDX-License-Identifier: MIT
/*
 * cxx_sessions.cpp - uslab from C++ (<uslab/uslab.hpp>): a table of
 * sessions the way a server keeps one. Session objects come from a typed
 * cache (uslab::cache<Session>, owned through std::unique_ptr); the index
 * is a std::unordered_map whose nodes and buckets come from kmalloc
 * (uslab::allocator); each session's history is a std::pmr::list whose
 * nodes come from one cache shared by every session (uslab::cache_resource).
 * Worker threads open, touch and close sessions; at the end every count
 * is checked and every cache must be empty.
 *
 *	cxx_sessions [SESSIONS [THREADS]]	(defaults 20000, 4)
 *
 * Build: c++ -std=c++17 -O2 cxx_sessions.cpp -luslab -pthread
 */
#include <uslab/uslab.hpp>

#include <cstdio>
#include <cstdlib>
#include <list>
#include <memory_resource>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace
{

/* The history's nodes: one cache for all sessions' lists (3 words a node). */
uslab::cache_resource history_nodes("session-history", 3 * sizeof(void *), alignof(void *));

struct Session {
	long id;
	std::string user;
	std::pmr::list<long> history{ &history_nodes };

	Session(long i, std::string u) : id(i), user(std::move(u))
	{
	}
};

using Index = std::unordered_map<
	long, uslab::cache<Session>::unique_ptr, std::hash<long>, std::equal_to<long>,
	uslab::allocator<std::pair<const long, uslab::cache<Session>::unique_ptr>>>;

} // namespace

int main(int argc, char **argv)
{
	long sessions = argc > 1 ? std::atol(argv[1]) : 20000;
	int threads = argc > 2 ? std::atoi(argv[2]) : 4;
	long touched = 0, expected = 0;
	bool ok = true;

	{
		uslab::cache<Session> cache("session");
		Index index;
		std::mutex lock;
		std::vector<std::thread> ts;

		/* Each thread opens its share of sessions and touches each a few times. */
		for (int t = 0; t < threads; t++) {
			ts.emplace_back([&, t] {
				for (long id = t; id < sessions; id += threads) {
					auto s = cache.make_unique(
						id, "user" + std::to_string(id % 97));

					for (long k = 0; k <= id % 5; k++)
						s->history.push_back(id * 10 + k);
					std::lock_guard<std::mutex> g(lock);
					index.emplace(id, std::move(s));
				}
			});
		}
		for (auto &t : ts)
			t.join();
		/* Check them all, then close every other one from other threads. */
		for (long id = 0; id < sessions; id++) {
			const Session &s = *index.at(id);

			ok &= s.id == id && s.user == "user" + std::to_string(id % 97) &&
			      s.history.size() == static_cast<size_t>(id % 5 + 1) &&
			      s.history.back() == id * 10 + id % 5;
			touched += static_cast<long>(s.history.size());
			expected += id % 5 + 1;
		}
		ts.clear();
		for (int t = 0; t < threads; t++) {
			ts.emplace_back([&, t] {
				for (long id = 2 * t; id < sessions; id += 2 * threads) {
					std::lock_guard<std::mutex> g(lock);
					index.erase(id); /* the Session destroyed and given back */
				}
			});
		}
		for (auto &t : ts)
			t.join();
		ok &= index.size() == static_cast<size_t>(sessions / 2);
		std::printf(
			"%ld sessions on %d threads, %ld history entries, %zu open after closing "
			"half\n",
			sessions, threads, touched, index.size());
		index.clear(); /* the rest: every Session back before the cache goes */
		struct uslab_cache_stats st;
		uslab_thread_flush();
		uslab_cache_shrink(cache.get());
		uslab_cache_stats(cache.get(), &st);
		ok &= st.active_objs == 0;
	}
	ok &= touched == expected;
	std::puts(ok ? "ok: every session and history entry checked, every object back" : "FAILED");
	return ok ? 0 : 1;
}
