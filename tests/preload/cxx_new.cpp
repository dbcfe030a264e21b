// SPDX-License-Identifier: MIT
/*
 * cxx_new.cpp - C++'s plain operator new and delete from libuslab-malloc.so
 * (src/malloc.c), run under LD_PRELOAD:
 *
 *   - operator new, new[], delete, delete[] and the sized deletes resolve
 *     into libuslab-malloc.so (dladdr), not into the C++ library;
 *   - objects of 0 to 70,000 bytes keep their contents, through new and
 *     new[], freed by every delete (plain, array, sized);
 *   - a request that cannot be met throws std::bad_alloc, through new and
 *     new[], after calling the new_handler installed (the standard's
 *     loop: the handler runs until it removes itself); std::nothrow
 *     returns nullptr; 0 bytes give distinct objects.
 *
 * Exit status 0 with "ok cxx_new" on stdout, 1 on the first failure.
 */
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "../test.h"

namespace
{

/* Whether @fn is defined in libuslab-malloc.so. */
bool from_uslab(void *fn)
{
	Dl_info info;

	return dladdr(fn, &info) && info.dli_fname &&
	       std::strstr(info.dli_fname, "libuslab-malloc");
}

void resolved()
{
	void *(*nw)(std::size_t) = &::operator new;
	void *(*na)(std::size_t) = &::operator new[];
	void (*dl)(void *) noexcept = &::operator delete;
	void (*da)(void *) noexcept = &::operator delete[];
	void (*dls)(void *, std::size_t) noexcept = &::operator delete;
	void (*das)(void *, std::size_t) noexcept = &::operator delete[];

	CHECK(from_uslab(reinterpret_cast<void *>(nw)), "operator new");
	CHECK(from_uslab(reinterpret_cast<void *>(na)), "operator new[]");
	CHECK(from_uslab(reinterpret_cast<void *>(dl)), "operator delete");
	CHECK(from_uslab(reinterpret_cast<void *>(da)), "operator delete[]");
	CHECK(from_uslab(reinterpret_cast<void *>(dls)), "sized operator delete");
	CHECK(from_uslab(reinterpret_cast<void *>(das)), "sized operator delete[]");
}

/* Fill @p[0..n) from @seed; check it. */
void stamp(unsigned char *p, std::size_t n, unsigned seed)
{
	for (std::size_t i = 0; i < n; i++)
		p[i] = static_cast<unsigned char>(seed + i * 7);
}

bool stamped(const unsigned char *p, std::size_t n, unsigned seed)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i] != static_cast<unsigned char>(seed + i * 7))
			return false;
	return true;
}

void contents()
{
	std::vector<std::pair<unsigned char *, std::size_t>> live;
	unsigned seed = 1;

	for (std::size_t n = 0; n <= 70000; n = n < 64 ? n + 1 : n * 9 / 8) {
		auto *a = static_cast<unsigned char *>(::operator new(n));
		auto *b = new unsigned char[n + 1];

		CHECK(a && b && a != b, "new of %zu bytes", n);
		stamp(a, n, seed);
		stamp(b, n + 1, seed + 1);
		live.emplace_back(a, n);
		live.emplace_back(b, n + 1);
		seed += 2;
	}
	seed = 1;
	for (std::size_t i = 0; i < live.size(); i += 2, seed += 2) {
		auto [a, n] = live[i];
		auto [b, m] = live[i + 1];

		CHECK(stamped(a, n, seed) && stamped(b, m, seed + 1), "contents of %zu bytes", n);
		switch (i / 2 % 3) {
		case 0:
			::operator delete(a);
			delete[] b;
			break;
		case 1:
			::operator delete(a, n);
			::operator delete[](b, m);
			break;
		default:
			::operator delete(a);
			::operator delete[](b);
		}
	}
	void *z1 = ::operator new(0), *z2 = ::operator new(0);

	CHECK(z1 && z2 && z1 != z2, "new(0): %p %p", z1, z2);
	::operator delete(z1);
	::operator delete(z2);
	::operator delete(nullptr);
	delete[] static_cast<char *>(nullptr);
}

int handler_calls;

void handler()
{
	handler_calls++;
	std::set_new_handler(nullptr); /* the next failure throws */
}

/* More than any allocator can give (not a constant: the compiler cannot see it). */
volatile std::size_t huge = std::size_t(1) << 62;

/* Whether @alloc throws std::bad_alloc (a pointer it returns is printed: a failure anyway). */
template <typename F> bool throws_bad_alloc(F alloc)
{
	try {
		std::printf("%p\n", alloc());
	} catch (const std::bad_alloc &) {
		return true;
	}
	return false;
}

void failures()
{
	auto plain = [] { return ::operator new(huge); };
	auto array = [] { return static_cast<void *>(new char[huge]); };

	CHECK(throws_bad_alloc(plain), "operator new(2^62) throws std::bad_alloc");
	CHECK(throws_bad_alloc(array), "new char[2^62] throws std::bad_alloc");
	std::set_new_handler(handler);
	CHECK(throws_bad_alloc(plain) && handler_calls == 1,
	      "the new_handler ran once, then bad_alloc: %d calls", handler_calls);
	std::set_new_handler(handler);
	CHECK(throws_bad_alloc(array) && handler_calls == 2,
	      "new[]: the new_handler ran once more: %d calls", handler_calls);

	CHECK(new (std::nothrow) char[huge] == nullptr, "nothrow new[] of 2^62: nullptr");
	CHECK(::operator new(huge, std::nothrow) == nullptr, "nothrow new of 2^62: nullptr");
	/* Still working after the failures. */
	auto *p = new int[100]();

	CHECK(p[99] == 0, "new int[100]() zeroed");
	delete[] p;
}

} // namespace

int main()
{
	CHECK(std::getenv("LD_PRELOAD") && std::strstr(std::getenv("LD_PRELOAD"), "uslab"),
	      "under the preload");
	resolved();
	contents();
	failures();
	std::printf("ok cxx_new (%lu checks)\n", test_checks);
	return 0;
}
