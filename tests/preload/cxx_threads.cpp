// SPDX-License-Identifier: MIT
/*
 * cxx_threads.cpp - a multi-threaded C++ program on libuslab-malloc.so:
 * std::threads doing new/delete of std::string, std::vector growth,
 * std::map and std::unordered_map inserts and erases, shared_ptrs handed
 * between threads (the last reference often dropped by another thread,
 * some objects outliving the thread that made them), thread_local objects
 * whose destructors allocate, and aligned new (alignas(64), alignas(256),
 * alignas(4096)).
 *
 *   cxx_threads [--preload]
 *
 * Every part yields a checksum that the program computes again on one
 * thread and compares; it prints them (tests/preload/run.sh compares the
 * output with that of a run without the preload) and exits 1 on any
 * mismatch. --preload: also require libuslab-malloc.so to be the malloc
 * under operator new (uslab_owns() found, owning what new returns).
 */
#include <dlfcn.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

constexpr int kThreads = 4;
constexpr int kRounds = 3;
constexpr int kPayloads = 600; /* per thread and round */

std::atomic<int> errors{ 0 };

#define EXPECT(cond, ...)                                                                    \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			std::fprintf(stderr, __VA_ARGS__);                                   \
			std::fputc('\n', stderr);                                            \
			errors++;                                                            \
		}                                                                            \
	} while (0)

uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xff51afd7ed558ccdull;
}

uint64_t hash_str(const std::string &s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (unsigned char c : s)
		h = (h ^ c) * 0x100000001b3ull;
	return h;
}

struct Rng {
	uint64_t s;
	uint64_t next()
	{
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		return s * 0x2545F4914F6CDD1Dull;
	}
};

struct alignas(64) Line {
	uint64_t v[8];
};
struct alignas(256) Block {
	unsigned char b[300];
};
struct alignas(4096) PageObj {
	uint64_t v;
	char pad[5000];
};

template <typename T> bool aligned(const T *p)
{
	return reinterpret_cast<uintptr_t>(p) % alignof(T) == 0;
}

/* ------------------------------------------------- one thread's own work */

uint64_t local_work(uint64_t seed)
{
	Rng r{ seed * 0x9E3779B97F4A7C15ull + 1 };
	uint64_t h = seed;

	/* std::string by new and delete, deleted in random order. */
	std::vector<std::string *> strs;
	for (int i = 0; i < 12000; i++) {
		strs.push_back(new std::string("s" + std::to_string(r.next() % 100000) +
					       std::string(r.next() % 200, char('a' + i % 26))));
		if (r.next() % 3 == 0) {
			size_t k = r.next() % strs.size();
			h = mix(h, hash_str(*strs[k]));
			delete strs[k];
			strs[k] = strs.back();
			strs.pop_back();
		}
	}
	for (auto *s : strs) {
		h = mix(h, hash_str(*s));
		delete s;
	}

	/* std::vector growth, one large and many small. */
	std::vector<uint64_t> v;
	for (int i = 0; i < 150000; i++)
		v.push_back(r.next());
	uint64_t sum = 0;
	for (auto x : v)
		sum += x;
	h = mix(h, sum);
	std::vector<std::vector<int>> vv(100);
	for (int i = 0; i < 40000; i++)
		vv[r.next() % 100].push_back(i);
	for (auto &x : vv)
		h = mix(h, x.size() * 1000003 + (x.empty() ? 0 : uint64_t(x.back())));
	std::vector<std::string> vs;
	for (int i = 0; i < 3000; i++)
		vs.emplace_back(size_t(r.next() % 64), char('A' + i % 26));
	for (auto &s : vs)
		h = mix(h, hash_str(s));

	/* std::map (ordered: hashed in order) and unordered_map (summed). */
	std::map<uint64_t, std::string> m;
	std::unordered_map<std::string, uint64_t> um;
	for (int i = 0; i < 20000; i++) {
		uint64_t k = r.next() % 40000;
		m[k] = std::to_string(k * 7) + std::string(k % 40, 'm');
		um[std::to_string(k)] += k;
	}
	for (int i = 0; i < 15000; i++) {
		uint64_t k = r.next() % 40000;
		m.erase(k);
		um.erase(std::to_string(k));
	}
	for (auto &kv : m)
		h = mix(h, kv.first ^ hash_str(kv.second));
	uint64_t usum = um.size();
	for (auto &kv : um)
		usum += hash_str(kv.first) * 31 + kv.second;
	h = mix(h, usum);

	/* Aligned new, single objects and arrays, and in a vector. */
	std::vector<Line *> lines;
	for (int i = 0; i < 2000; i++) {
		Line *l = new Line;
		EXPECT(aligned(l), "new Line = %p", static_cast<void *>(l));
		for (int j = 0; j < 8; j++)
			l->v[j] = r.next();
		lines.push_back(l);
	}
	for (Line *l : lines) {
		h = mix(h, l->v[0] ^ l->v[7]);
		delete l;
	}
	for (int i = 0; i < 50; i++) {
		size_t n = r.next() % 40 + 1;
		Block *b = new Block[n];
		EXPECT(aligned(b), "new Block[%zu] = %p", n, static_cast<void *>(b));
		std::memset(b, i, sizeof(Block) * n);
		h = mix(h, b[n - 1].b[299] + n);
		delete[] b;
	}
	for (int i = 0; i < 4; i++) {
		auto *p = new PageObj;
		EXPECT(aligned(p), "new PageObj = %p", static_cast<void *>(p));
		p->v = r.next();
		h = mix(h, p->v);
		delete p;
	}
	std::vector<Line> lv;
	for (int i = 0; i < 5000; i++) {
		lv.push_back(Line{ { uint64_t(i), 1, 2, 3, 4, 5, 6, 7 } });
		EXPECT(aligned(lv.data()), "vector<Line>::data() = %p",
		       static_cast<void *>(lv.data()));
	}
	h = mix(h, lv.size() + lv[4321].v[0]);
	return h;
}

/* -------------------------------------------- shared_ptrs between threads */

struct Payload {
	uint64_t seed;
	std::vector<uint64_t> data;
	std::string text;
};

uint64_t payload_seed(int round, int thread, int i)
{
	return (uint64_t(round) << 40) | (uint64_t(thread) << 20) | uint64_t(i);
}

std::shared_ptr<Payload> make_payload(uint64_t seed)
{
	auto p = std::make_shared<Payload>();
	Rng r{ seed + 12345 };

	p->seed = seed;
	p->data.resize(r.next() % (seed % 50 == 0 ? 20000 : 300) + 1);
	for (auto &x : p->data)
		x = r.next();
	p->text = "payload-" + std::to_string(seed) + std::string(r.next() % 500, 'p');
	return p;
}

uint64_t payload_hash(const Payload &p)
{
	uint64_t h = mix(p.seed, hash_str(p.text));

	for (auto x : p.data)
		h = mix(h, x);
	return h;
}

/* The hash of a payload as made, computed afresh: what a receiver must see. */
uint64_t expected_payload_hash(uint64_t seed)
{
	return payload_hash(*make_payload(seed));
}

struct Mailbox {
	std::mutex lock;
	std::condition_variable cv;
	std::deque<std::shared_ptr<Payload>> q;
};

Mailbox mailbox[kThreads];
std::atomic<uint64_t> payload_sum{ 0 };
std::atomic<uint64_t> payloads_seen{ 0 };

/* Payloads that outlive the thread that made them. */
std::mutex survivors_lock;
std::vector<std::shared_ptr<Payload>> survivors;

void receive(const std::shared_ptr<Payload> &p)
{
	uint64_t h = payload_hash(*p);

	EXPECT(h == expected_payload_hash(p->seed), "payload %llx changed",
	       static_cast<unsigned long long>(p->seed));
	payload_sum += h;
	payloads_seen++;
}

/* ------------------------------------- thread_local destructors allocating */

std::atomic<uint64_t> tl_sum{ 0 };
std::atomic<int> tl_dtors{ 0 };

uint64_t tl_digest(const std::vector<std::string> &names)
{
	std::string all;
	for (auto &n : names)
		all += n;
	std::vector<uint64_t> w(names.size() * 10 + 1, 3);
	auto *m = new std::map<int, std::string>;
	for (int i = 0; i < 200; i++)
		(*m)[i] = std::to_string(i) + all.substr(0, size_t(i) % 50);
	uint64_t h = hash_str(all) + w.size() + m->size() + hash_str((*m)[199]);
	delete m;
	return h;
}

struct TlState {
	std::vector<std::string> names;
	~TlState()
	{
		/* Runs at thread exit, after uslab's own exit handler perhaps. */
		tl_sum += tl_digest(names);
		tl_dtors++;
	}
};

thread_local TlState tl_state;
thread_local std::unique_ptr<std::vector<std::string>> tl_lazy;

std::vector<std::string> tl_names(int round, int thread)
{
	std::vector<std::string> names;
	for (int i = 0; i < 50 + thread; i++)
		names.push_back(std::to_string(round) + "/" + std::to_string(thread) + "/" +
				std::string(size_t(i), 'n'));
	return names;
}

/* ------------------------------------------------------------------ threads */

uint64_t local_result[kRounds][kThreads];

void worker(int round, int t)
{
	std::vector<std::shared_ptr<Payload>> mine;
	int received = 0;

	tl_state.names = tl_names(round, t);
	tl_lazy.reset(new std::vector<std::string>(100, std::string(100, 'z')));

	/* Survivors of an earlier round's threads, now gone. */
	{
		std::lock_guard<std::mutex> g(survivors_lock);
		for (int i = 0; i < 20 && !survivors.empty(); i++) {
			receive(survivors.back());
			survivors.pop_back();
		}
	}

	auto drain = [&](bool wait) {
		Mailbox &mb = mailbox[t];
		std::unique_lock<std::mutex> g(mb.lock);
		if (wait)
			mb.cv.wait(g, [&] { return !mb.q.empty(); });
		while (!mb.q.empty()) {
			std::shared_ptr<Payload> p = std::move(mb.q.front());
			mb.q.pop_front();
			g.unlock();
			receive(p);
			received++;
			p.reset(); /* often the last reference: freed here, made elsewhere */
			g.lock();
		}
	};

	for (int i = 0; i < kPayloads; i++) {
		auto p = make_payload(payload_seed(round, t, i));
		Mailbox &next = mailbox[(t + 1) % kThreads];
		{
			std::lock_guard<std::mutex> g(next.lock);
			next.q.push_back(p);
		}
		next.cv.notify_one();
		if (i % 10 == 0) {
			std::lock_guard<std::mutex> g(survivors_lock);
			survivors.push_back(p);
		} else if (i % 3 == 0) {
			mine.push_back(std::move(p)); /* dropped later, maybe the last reference */
		}
		if (i % 64 == 0) {
			drain(false);
			if (mine.size() > 50)
				mine.erase(mine.begin(), mine.begin() + 25);
		}
		if (i == kPayloads / 2)
			local_result[round][t] = local_work(payload_seed(round, t, 0));
	}
	while (received < kPayloads)
		drain(true);
}

bool preload_active()
{
	auto owns = reinterpret_cast<int (*)(const void *)>(dlsym(RTLD_DEFAULT, "uslab_owns"));
	if (!owns) {
		std::fprintf(stderr, "FAIL: uslab_owns not found: not under LD_PRELOAD\n");
		return false;
	}
	auto *i = new int(5);
	std::string s(1000, 'x');
	auto *l = new Line;
	std::vector<int> v(100000);
	bool ok = owns(i) == 1 && owns(s.data()) == 1 && owns(l) == 1 && owns(v.data()) == 1;
	if (!ok)
		std::fprintf(stderr, "FAIL: operator new's memory is not uslab's\n");
	delete i;
	delete l;
	return ok;
}

} // namespace

int main(int argc, char **argv)
{
	bool want_preload = argc > 1 && !std::strcmp(argv[1], "--preload");

	if (want_preload && !preload_active())
		return 1;

	for (int round = 0; round < kRounds; round++) {
		std::vector<std::thread> threads;
		for (int t = 0; t < kThreads; t++)
			threads.emplace_back(worker, round, t);
		for (auto &th : threads)
			th.join();
	}
	/* The rest of the survivors, after every thread that made them exited. */
	for (auto &p : survivors)
		receive(p);
	survivors.clear();

	/* The same, computed again on this thread. */
	uint64_t local = 0, local_expect = 0, pay_expect = 0, tl_expect = 0;
	for (int round = 0; round < kRounds; round++) {
		for (int t = 0; t < kThreads; t++) {
			local += local_result[round][t];
			local_expect += local_work(payload_seed(round, t, 0));
			for (int i = 0; i < kPayloads; i++) {
				uint64_t h = expected_payload_hash(payload_seed(round, t, i));
				pay_expect += i % 10 == 0 ? 2 * h : h; /* survivors: seen twice */
			}
			tl_expect += tl_digest(tl_names(round, t));
		}
	}
	uint64_t seen_expect = uint64_t(kRounds) * kThreads * (kPayloads + kPayloads / 10);
	EXPECT(local == local_expect, "local work %016llx, expected %016llx",
	       static_cast<unsigned long long>(local),
	       static_cast<unsigned long long>(local_expect));
	EXPECT(payload_sum == pay_expect, "payloads %016llx, expected %016llx",
	       static_cast<unsigned long long>(payload_sum.load()),
	       static_cast<unsigned long long>(pay_expect));
	EXPECT(payloads_seen == seen_expect, "%llu payloads seen, expected %llu",
	       static_cast<unsigned long long>(payloads_seen.load()),
	       static_cast<unsigned long long>(seen_expect));
	EXPECT(tl_dtors == kRounds * kThreads, "%d thread_local destructors", tl_dtors.load());
	EXPECT(tl_sum == tl_expect, "thread_local destructors %016llx, expected %016llx",
	       static_cast<unsigned long long>(tl_sum.load()),
	       static_cast<unsigned long long>(tl_expect));

	std::printf("local %016llx\npayloads %016llx (%llu)\nthread_local %016llx (%d)\n",
		    static_cast<unsigned long long>(local),
		    static_cast<unsigned long long>(payload_sum.load()),
		    static_cast<unsigned long long>(payloads_seen.load()),
		    static_cast<unsigned long long>(tl_sum.load()), tl_dtors.load());
	if (errors) {
		std::fprintf(stderr, "%d errors\n", errors.load());
		return 1;
	}
	std::printf("ok cxx_threads\n");
	return 0;
}
