/* SPDX-License-Identifier: MIT */
/*
 * <uslab/uslab.hpp> - uslab for C++ (C++17 and later), header-only over
 * the C library: a typed object cache, an allocator for the standard
 * containers and std::pmr memory resources.
 *
 *   uslab::cache<T>            owns a uslab_cache sized and aligned for T
 *                              (RAII, movable, not copyable); make() and
 *                              destroy(), unique_ptr helpers, bulk forms
 *   uslab::deleter<T>          destroys through the cache it names
 *   uslab::allocator<T>        the kmalloc size classes for containers
 *                              (over-aligned types honoured); all equal
 *   uslab::kmalloc_resource    a std::pmr::memory_resource over kmalloc
 *   uslab::cache_resource      a std::pmr::memory_resource over one cache
 *                              for a fixed-size node type; other requests
 *                              go to an upstream resource
 *
 * Errors: without exceptions (-fno-exceptions) every failure that would
 * throw std::bad_alloc calls std::abort() instead (no allocation is ever
 * handed out NULL); with them, a failure throws std::bad_alloc, and a
 * constructor that throws in make() gives its object back before the
 * exception leaves. The debug tier (USLAB_DEBUG) and per-CPU sheaves
 * (USLAB_PERCPU) apply as to any cache: they are the C library's.
 *
 * Attributes are spelt __name__, so a program's macros named noreturn,
 * nodiscard, unused... do not reach them (api_headers_macros_cxx).
 *
 * Thread safety: as the C functions (any thread may allocate and free; a
 * cache<T> must not be destroyed while another thread uses it).
 */
#ifndef USLAB_USLAB_HPP
#define USLAB_USLAB_HPP

#include <uslab.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#if __has_include(<memory_resource>)
#include <memory_resource>
#define USLAB_HPP_HAVE_PMR 1
#endif

namespace uslab
{

namespace detail
{
/* std::bad_alloc, or abort() in a build without exceptions. */
__attribute__((__noreturn__)) inline void out_of_memory()
{
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
	throw std::bad_alloc();
#else
	std::abort();
#endif
}
} // namespace detail

template <class T> class cache;

/**
 * deleter<T> - a std::unique_ptr deleter that destroys a T of @cache: the
 * destructor, then the object back to the cache. Default-constructed it
 * names no cache and may not be called.
 */
template <class T> struct deleter {
	cache<T> *owner = nullptr;

	void operator()(T *p) const noexcept
	{
		if (p)
			owner->destroy(p);
	}
};

/**
 * cache<T> - an object cache of T: uslab_cache_create(name, sizeof(T),
 * alignof(T) and @flags). T may be over-aligned (up to USLAB_MAX_ALIGN).
 * Movable (the moved-from cache owns nothing: every call on it but
 * destruction and assignment is a bug), not copyable. Destroyed, it
 * destroys the C cache: every object must be back (else the C library's
 * complaint on stderr, and the cache's memory stays).
 */
template <class T> class cache {
	static_assert(!std::is_array<T>::value, "uslab::cache<T>: T is an object type");
	static_assert(sizeof(T) <= USLAB_MAX_OBJECT_SIZE, "uslab::cache<T>: T is too large");
	static_assert(alignof(T) <= USLAB_MAX_ALIGN, "uslab::cache<T>: T is over-aligned beyond "
						     "USLAB_MAX_ALIGN");

    public:
	using value_type = T;
	using unique_ptr = std::unique_ptr<T, deleter<T>>;

	/**
	 * cache(name, flags) - create it (@flags as uslab_cache_create()'s;
	 * @args: its arguments, whose align is raised to alignof(T)).
	 * Throws std::bad_alloc (or aborts) if the C library refuses: errno
	 * says why (EINVAL, ENOMEM, ENOSPC).
	 */
	explicit cache(const char *name, unsigned int flags = 0, uslab_cache_args args = {})
	{
		if (args.align < alignof(T))
			args.align = alignof(T);
		c_ = uslab_cache_create(name, sizeof(T), &args, flags);
		if (!c_)
			detail::out_of_memory();
	}
	cache(const cache &) = delete;
	cache &operator=(const cache &) = delete;
	cache(cache &&o) noexcept : c_(std::exchange(o.c_, nullptr))
	{
	}
	cache &operator=(cache &&o) noexcept
	{
		if (this != &o) {
			reset();
			c_ = std::exchange(o.c_, nullptr);
		}
		return *this;
	}
	~cache()
	{
		reset();
	}

	/** The C cache (for the C functions: stats, shrink, magazines, pools). */
	uslab_cache *get() const noexcept
	{
		return c_;
	}
	explicit operator bool() const noexcept
	{
		return c_ != nullptr;
	}

	/**
	 * make(args...) - allocate an object and construct a T in it with
	 * @args. A constructor that throws gives the object back first.
	 * Throws std::bad_alloc (or aborts) when no memory is left.
	 */
	template <class... Args> T *make(Args &&...args)
	{
		void *p = uslab_cache_alloc(c_);

		if (!p)
			detail::out_of_memory();
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
		try {
			return ::new (p) T(std::forward<Args>(args)...);
		} catch (...) {
			uslab_cache_free(c_, p);
			throw;
		}
#else
		return ::new (p) T(std::forward<Args>(args)...);
#endif
	}

	/** destroy(p) - ~T(), then the object back to the cache. NULL: nothing. */
	void destroy(T *p) noexcept
	{
		if (!p)
			return;
		p->~T();
		uslab_cache_free(c_, p);
	}

	/** make_unique(args...) - make(), owned by a unique_ptr that destroy()s it. */
	template <class... Args> unique_ptr make_unique(Args &&...args)
	{
		return unique_ptr(make(std::forward<Args>(args)...), deleter<T>{ this });
	}

	/**
	 * make_bulk(n, out, args...) - @n objects in one bulk allocation, each
	 * constructed with @args (copied, not forwarded: one set for all),
	 * into @out[0..n). All or nothing: if an allocation or a constructor
	 * fails, what was made is destroyed and given back, and the error
	 * leaves (std::bad_alloc, or the constructor's exception).
	 */
	template <class... Args> void make_bulk(std::size_t n, T **out, const Args &...args)
	{
		void **raw = reinterpret_cast<void **>(out);
		std::size_t built = 0;

		if (!n)
			return;
		if (uslab_cache_alloc_bulk(c_, n, raw) != n)
			detail::out_of_memory();
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
		try {
			for (; built < n; built++)
				out[built] = ::new (raw[built]) T(args...);
		} catch (...) {
			for (std::size_t i = 0; i < built; i++)
				out[i]->~T();
			uslab_cache_free_bulk(c_, n, raw);
			throw;
		}
#else
		for (; built < n; built++)
			out[built] = ::new (raw[built]) T(args...);
#endif
	}

	/**
	 * destroy_bulk(n, objs) - ~T() on each of @objs[0..n) (NULL entries
	 * skipped), then one bulk free; every entry is NULL on return.
	 */
	void destroy_bulk(std::size_t n, T **objs) noexcept
	{
		for (std::size_t i = 0; i < n; i++)
			if (objs[i])
				objs[i]->~T();
		uslab_cache_free_bulk(c_, n, reinterpret_cast<void **>(objs));
	}

    private:
	void reset() noexcept
	{
		if (c_)
			uslab_cache_destroy(c_);
		c_ = nullptr;
	}

	uslab_cache *c_ = nullptr;
};

/**
 * allocator<T> - std::allocator's interface over kmalloc's size classes:
 * uslab_kmalloc(), or uslab_kmalloc_aligned() for a T aligned beyond 16
 * bytes. Stateless: every instance equals every other, for any T.
 */
template <class T> struct allocator {
	using value_type = T;
	using is_always_equal = std::true_type;
	using propagate_on_container_move_assignment = std::true_type;

	allocator() noexcept = default;
	template <class U> allocator(const allocator<U> &) noexcept
	{
	}

	__attribute__((__warn_unused_result__)) T *allocate(std::size_t n)
	{
		void *p;

		if (n > static_cast<std::size_t>(-1) / sizeof(T))
			detail::out_of_memory();
		if (alignof(T) > 16)
			p = uslab_kmalloc_aligned(n * sizeof(T), alignof(T));
		else
			p = uslab_kmalloc(n * sizeof(T));
		if (!p)
			detail::out_of_memory();
		return static_cast<T *>(p);
	}
	void deallocate(T *p, std::size_t) noexcept
	{
		uslab_kfree(p);
	}
};

template <class T, class U>
constexpr bool operator==(const allocator<T> &, const allocator<U> &) noexcept
{
	return true;
}
template <class T, class U>
constexpr bool operator!=(const allocator<T> &, const allocator<U> &) noexcept
{
	return false;
}

#ifdef USLAB_HPP_HAVE_PMR
/**
 * kmalloc_resource - a std::pmr::memory_resource over kmalloc: any size,
 * any alignment up to USLAB_KMALLOC_MAX_ALIGN (beyond: std::bad_alloc).
 * Stateless; two of them compare equal. kmalloc_resource::get() is one
 * for the whole program.
 */
class kmalloc_resource : public std::pmr::memory_resource {
    public:
	static kmalloc_resource *get() noexcept
	{
		static kmalloc_resource r;
		return &r;
	}

    protected:
	void *do_allocate(std::size_t bytes, std::size_t align) override
	{
		void *p;

		if (align > USLAB_KMALLOC_MAX_ALIGN)
			detail::out_of_memory();
		p = align > 16 ? uslab_kmalloc_aligned(bytes ? bytes : 1, align) :
				 uslab_kmalloc(bytes ? bytes : 1);
		if (!p)
			detail::out_of_memory();
		return p;
	}
	void do_deallocate(void *p, std::size_t, std::size_t) override
	{
		uslab_kfree(p);
	}
	bool do_is_equal(const std::pmr::memory_resource &o) const noexcept override
	{
		return dynamic_cast<const kmalloc_resource *>(&o) != nullptr;
	}
};

/**
 * cache_resource - a std::pmr::memory_resource over one cache of @size
 * bytes aligned to @align (a container's node: std::pmr::list,
 * std::pmr::unordered_map): an allocation of at most @size bytes and
 * @align serves from the cache, anything else from @upstream (default,
 * and for nullptr: kmalloc_resource). Owns its cache (destroyed with it: every node must
 * be back). Equal only to itself.
 */
class cache_resource : public std::pmr::memory_resource {
    public:
	cache_resource(const char *name, std::size_t size,
		       std::size_t align = alignof(std::max_align_t),
		       std::pmr::memory_resource *upstream = kmalloc_resource::get())
	    : size_(size), align_(align), upstream_(upstream ? upstream : kmalloc_resource::get())
	{
		uslab_cache_args args = {};

		args.align = align;
		c_ = uslab_cache_create(name, size, &args, 0);
		if (!c_)
			detail::out_of_memory();
	}
	cache_resource(const cache_resource &) = delete;
	cache_resource &operator=(const cache_resource &) = delete;
	~cache_resource() override
	{
		uslab_cache_destroy(c_);
	}

	/** The C cache (statistics, shrink). */
	uslab_cache *get() const noexcept
	{
		return c_;
	}

    protected:
	void *do_allocate(std::size_t bytes, std::size_t align) override
	{
		void *p;

		if (bytes > size_ || align > align_)
			return upstream_->allocate(bytes, align);
		p = uslab_cache_alloc(c_);
		if (!p)
			detail::out_of_memory();
		return p;
	}
	void do_deallocate(void *p, std::size_t bytes, std::size_t align) override
	{
		if (bytes > size_ || align > align_)
			upstream_->deallocate(p, bytes, align);
		else
			uslab_cache_free(c_, p);
	}
	bool do_is_equal(const std::pmr::memory_resource &o) const noexcept override
	{
		return this == &o;
	}

    private:
	uslab_cache *c_ = nullptr;
	std::size_t size_, align_;
	std::pmr::memory_resource *upstream_;
};
#endif /* USLAB_HPP_HAVE_PMR */

} // namespace uslab

#endif /* USLAB_USLAB_HPP */
