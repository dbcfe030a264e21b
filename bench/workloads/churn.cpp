// SPDX-License-Identifier: MIT
/*
 * churn.cpp - the C++ churn of the malloc suite (issue 36): what a server
 * written in C++ does to malloc. THREADS threads each build batches of
 * standard containers (a std::map of int to std::string, a
 * std::unordered_map of std::string to int, a std::vector of std::string
 * grown by push_back, strings of 8 to 300 characters built by appending),
 * and hand each batch to the next thread through a queue; the receiving
 * thread reads it (a checksum) and destroys it, so most memory is freed by
 * a thread other than the one that allocated it, in batches, while every
 * thread keeps allocating. The live memory swings with the queues.
 *
 *	churn [SCALE [THREADS]]	(defaults 1, 4): SCALE * 400 batches a thread
 *
 * Prints the checksum over every batch (independent of the scheduling) and
 * the batch count: the output must be the same under every malloc.
 */
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace
{

struct Batch {
	std::map<int, std::string> byid;
	std::unordered_map<std::string, int> byname;
	std::vector<std::string> log;
};

struct Queue {
	std::mutex m;
	std::condition_variable cv;
	std::deque<std::unique_ptr<Batch>> q;
	bool done = false;
};

uint64_t rnd(uint64_t &s)
{
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

std::string word(uint64_t &s)
{
	std::string w;
	size_t n = 8 + rnd(s) % 293;

	for (size_t i = 0; i < n; i++)
		w += static_cast<char>('a' + rnd(s) % 26);
	return w;
}

std::unique_ptr<Batch> make(uint64_t &s)
{
	auto b = std::make_unique<Batch>();
	int n = 200 + static_cast<int>(rnd(s) % 400);

	for (int i = 0; i < n; i++) {
		std::string w = word(s);

		b->byid.emplace(static_cast<int>(rnd(s) % 100000), w);
		b->byname[w] = i;
		if (i % 3 == 0)
			b->log.push_back(w + ":" + std::to_string(i));
	}
	return b;
}

uint64_t sum(const Batch &b)
{
	uint64_t h = 0;

	for (const auto &kv : b.byid)
		h += static_cast<uint64_t>(kv.first) * 31 + kv.second.size();
	for (const auto &kv : b.byname)
		h += kv.second + kv.first.size() * 7;
	for (const auto &l : b.log)
		h += l.size() * 13;
	return h;
}

} // namespace

int main(int argc, char **argv)
{
	double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
	int threads = argc > 2 ? std::atoi(argv[2]) : 4;
	int batches = static_cast<int>(400 * scale);
	std::vector<Queue> queues(static_cast<size_t>(threads));
	std::vector<uint64_t> sums(static_cast<size_t>(threads));
	std::vector<std::thread> ts;

	if (threads < 1 || batches < 1) {
		std::fprintf(stderr, "usage: churn [SCALE [THREADS]]\n");
		return 2;
	}
	for (int t = 0; t < threads; t++) {
		ts.emplace_back([&, t] {
			Queue &out = queues[static_cast<size_t>((t + 1) % threads)];
			Queue &in = queues[static_cast<size_t>(t)];
			uint64_t s = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(t + 1);
			uint64_t h = 0;
			int got = 0;

			for (int i = 0; i < batches; i++) {
				auto b = make(s);
				{
					std::lock_guard<std::mutex> g(out.m);
					out.q.push_back(std::move(b));
				}
				out.cv.notify_one();
				/* Take what arrived meanwhile (at most 8 batches wait). */
				std::unique_lock<std::mutex> g(in.m);
				while (!in.q.empty() && (in.q.size() > 8 || i % 2)) {
					auto r = std::move(in.q.front());
					in.q.pop_front();
					g.unlock();
					h += sum(*r);
					r.reset(); /* freed by this thread, made by the previous one */
					got++;
					g.lock();
				}
			}
			/* The rest, until the previous thread has sent all of its batches. */
			std::unique_lock<std::mutex> g(in.m);
			while (got < batches) {
				in.cv.wait(g, [&] { return !in.q.empty(); });
				auto r = std::move(in.q.front());
				in.q.pop_front();
				g.unlock();
				h += sum(*r);
				r.reset();
				got++;
				g.lock();
			}
			sums[static_cast<size_t>(t)] = h;
		});
	}
	for (auto &t : ts)
		t.join();
	uint64_t total = 0;
	for (uint64_t h : sums)
		total += h;
	std::printf("churn: %d threads x %d batches, checksum %llu\n", threads, batches,
		    static_cast<unsigned long long>(total));
	return 0;
}
