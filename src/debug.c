// SPDX-License-Identifier: MIT
/*
 * debug.c - reporting. A detected corruption (double free, foreign
 * pointer, broken freelist) is reported in one line and stops the program:
 *
 *	uslab: BUG <cache>: <what> at <address>
 *
 * Warnings (a cache destroyed with live objects, a bad tunable) are one
 * line on stderr and the program goes on.
 *
 * The debug tier (slab_debug.c) reports the same first line, then its
 * details (usl_report, usl_report_line), then usl_report_end() decides:
 * USLAB_ON_BUG=abort stops the program, =report lets it go on and reports
 * each call site and kind once (every problem is counted:
 * uslab_bug_count()); unset, caches with USLAB_CONSISTENCY_CHECKS abort and
 * the others report.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <unwind.h>

#include "cache.h" /* the cache named in a report */

static __thread struct usl_lines *held_lines; /* usl_lines_hold(): innermost */

/* Out to stderr, not cancelled: write() is a cancellation point. */
static void write_out(const char *buf, size_t len)
{
	int old = usl_nocancel();

	/* stderr may be unbuffered or locked by the thread that broke things. */
	if (len > 0 && write(STDERR_FILENO, buf, len) < 0)
		len = 0;
	usl_cancel_restore(old);
}

/* A line: held back while this thread holds a lock (usl_lines_hold), else written. */
static void write_line(const char *buf, int len)
{
	struct usl_lines *h = held_lines;

	if (len <= 0)
		return;
	if (!h || !h->buf) {
		write_out(buf, (size_t)len);
	} else if (h->cap - h->len >= (size_t)len) {
		memcpy(h->buf + h->len, buf, (size_t)len);
		h->len += (size_t)len;
	} else {
		h->dropped++;
	}
}

void usl_lines_hold(struct usl_lines *h, char *buf, size_t cap)
{
	h->prev = held_lines;
	h->buf = buf;
	h->len = 0;
	h->cap = buf ? cap : 0;
	h->dropped = 0;
	held_lines = h;
}

void usl_lines_release(struct usl_lines *h)
{
	USLAB_ASSERT(held_lines == h);
	held_lines = h->prev;
	write_line(h->buf, (int)h->len);
	if (h->dropped)
		usl_warn("... and %lu more lines (no room to hold them)", h->dropped);
}

/* Before abort(): the lines held back come first (the locks no longer matter). */
static void flush_held(void)
{
	struct usl_lines *h = held_lines;

	held_lines = NULL;
	for (; h; h = h->prev)
		if (h->buf)
			write_out(h->buf, h->len);
}

/* The first line of every report: "uslab: BUG <cache>: <what> at <address>". */
static void bug_line(const struct uslab_cache *c, const void *addr, const char *fmt, va_list ap)
{
	char buf[512];
	int len;

	len = snprintf(buf, sizeof(buf), "uslab: BUG %s: ", c ? c->name : "-");
	len += vsnprintf(buf + len, sizeof(buf) - (size_t)len, fmt, ap);
	/* (The line so far, NUL-terminated: the report probe's message.) */
	PROBE(report, c ? c->name : "-", addr, buf);
	if (len < (int)sizeof(buf))
		len += snprintf(buf + len, sizeof(buf) - (size_t)len, " at %p\n", addr);
	if (len >= (int)sizeof(buf)) {
		len = (int)sizeof(buf);
		buf[len - 1] = '\n';
	}
	write_line(buf, len);
}

void usl_bug(const struct uslab_cache *c, const void *addr, const char *fmt, ...)
{
	va_list ap;

	flush_held();
	va_start(ap, fmt);
	bug_line(c, addr, fmt, ap);
	va_end(ap);
	abort();
}

void usl_warn(const char *fmt, ...)
{
	char buf[512];
	int len;
	va_list ap;

	len = snprintf(buf, sizeof(buf), "uslab: ");
	va_start(ap, fmt);
	len += vsnprintf(buf + len, sizeof(buf) - (size_t)len, fmt, ap);
	va_end(ap);
	if (len >= (int)sizeof(buf) - 1)
		len = (int)sizeof(buf) - 2;
	buf[len++] = '\n';
	write_line(buf, len);
}

/* ------------------------------------------------------- debug tier */

/* USLAB_DEBUG: the letters' flags and the caches named (none: every cache). */
static unsigned int env_flags;
static char env_names[256];

static unsigned int letter_flag(char l)
{
	switch (l) {
	case 'F':
	case 'f':
		return USLAB_CONSISTENCY_CHECKS;
	case 'Z':
	case 'z':
		return USLAB_RED_ZONE;
	case 'P':
	case 'p':
		return USLAB_POISON;
	case 'U':
	case 'u':
		return USLAB_STORE_USER;
	}
	return 0;
}

/*
 * debug_parse - read USLAB_DEBUG (options.c), the kernel's slab_debug=
 * syntax: letters of F, Z, P, U ("1", or none before a comma: all four;
 * "-" or "0": none), then optionally ",name,name..." (empty names, as in a
 * trailing comma, are ignored; none at all: every cache). NULL resets to
 * none. Return: 0, or -EINVAL (nothing selected).
 */
int debug_parse(const char *s)
{
	unsigned int flags = 0;
	const char *p = s;
	size_t len;

	env_flags = 0;
	env_names[0] = 0;
	if (!s)
		return 0;
	if (*p == '1') {
		flags = DEBUG_FLAGS;
		p++;
	} else if (*p == '-' || *p == '0') {
		p++;
	} else if (!*p || *p == ',') {
		flags = DEBUG_FLAGS;
	} else {
		for (; *p && *p != ','; p++) {
			if (!letter_flag(*p))
				return -EINVAL;
			flags |= letter_flag(*p);
		}
	}
	if (*p && *p != ',')
		return -EINVAL;
	/* ",a,,b," -> ",a,,b," (a name matches as ",name,"); nothing but commas: every cache. */
	len = strlen(p);
	if (len + 2 > sizeof(env_names))
		return -EINVAL;
	if (strspn(p, ",") != len) {
		strcpy(env_names, p);
		strcat(env_names, ",");
	}
	env_flags = flags;
	return 0;
}

/* The debug flags USLAB_DEBUG gives the cache @name (0: none). */
unsigned int debug_selects(const char *name)
{
	char key[USLAB_NAME_MAX + 3];

	if (!env_flags)
		return 0;
	snprintf(key, sizeof(key), ",%s,", name);
	return !env_names[0] || strstr(env_names, key) ? env_flags : 0;
}

static unsigned long bug_count;

/* Sites already reported (report mode): a small open-addressed set. */
#define SITES 1024
static uintptr_t sites[SITES];

/* Whether (@site, @key) is new; it is remembered. Lock-free (CAS). */
static bool site_new(const void *site, const void *key)
{
	uintptr_t k = ((uintptr_t)site * 31) ^ (uintptr_t)key;
	size_t h = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 54);

	if (!k)
		k = 1;
	for (size_t i = 0; i < SITES; i++) {
		uintptr_t *slot = &sites[(h + i) % SITES];
		uintptr_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);

		if (cur == k)
			return false;
		if (!cur && __atomic_compare_exchange_n(slot, &cur, k, false, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED))
			return true;
		if (cur == k)
			return false;
	}
	return false; /* the set is full: report no more */
}

/* Whether a problem in @c stops the program (USLAB_ON_BUG; unset: caches with F). */
static bool aborts(const struct uslab_cache *c)
{
	return usl_opt.on_bug == ON_BUG_ABORT ||
	       (usl_opt.on_bug == ON_BUG_DEFAULT && (!c || (c->debug & USLAB_CONSISTENCY_CHECKS)));
}

/*
 * usl_report - count a problem the debug tier found in @c and print its
 * first line, unless the program goes on after it and (@site, @key) was
 * reported before. Return: whether it was printed (then the details).
 */
bool usl_report(const struct uslab_cache *c, const void *addr, const void *site, const void *key,
		const char *fmt, ...)
{
	va_list ap;

	__atomic_add_fetch(&bug_count, 1, __ATOMIC_RELAXED);
	if (!aborts(c) && !site_new(site, key))
		return false;
	va_start(ap, fmt);
	bug_line(c, addr, fmt, ap);
	va_end(ap);
	return true;
}

void usl_report_line(const char *fmt, ...)
{
	char buf[512];
	int len;
	va_list ap;

	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (len >= (int)sizeof(buf) - 1)
		len = (int)sizeof(buf) - 2;
	buf[len++] = '\n';
	write_line(buf, len);
}

/* The end of a report: abort() or go on. */
void usl_report_end(const struct uslab_cache *c)
{
	if (aborts(c)) {
		flush_held();
		abort();
	}
}

unsigned long uslab_bug_count(void)
{
	return __atomic_load_n(&bug_count, __ATOMIC_RELAXED);
}

/*
 * usl_symbolise - return address @addr as "0x... symbol+0xoff
 * (file+0xoff)" in @buf (@len bytes), as far as the dynamic symbols go (a
 * program linked with -rdynamic names its own functions; the file offset
 * is what addr2line -e file takes). Return: @buf.
 */
const char *usl_symbolise(const void *addr, char *buf, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	Dl_info info;

	/* (A return address: the call is the byte before it.) */
	if (!dladdr((void *)(a - 1), &info) || !info.dli_fname)
		snprintf(buf, len, "%p", addr);
	else if (info.dli_sname)
		snprintf(buf, len, "%p %s+0x%lx (%s+0x%lx)", addr, info.dli_sname,
			 (unsigned long)(a - (uintptr_t)info.dli_saddr), info.dli_fname,
			 (unsigned long)(a - (uintptr_t)info.dli_fbase));
	else
		snprintf(buf, len, "%p (%s+0x%lx)", addr, info.dli_fname,
			 (unsigned long)(a - (uintptr_t)info.dli_fbase));
	return buf;
}

struct code_range {
	uintptr_t self, start, end;
};

static int find_code(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct code_range *r = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
		    r->self - start < ph->p_memsz) {
			/* Linked into the program itself: no range to skip. */
			if (info->dlpi_name && info->dlpi_name[0]) {
				r->start = start;
				r->end = start + ph->p_memsz;
			}
			return 1;
		}
	}
	return 0;
}

/*
 * usl_code_range - the library's code, the frames a backtrace skips: its
 * executable segment when it is a shared library; 0 and 0 when it is
 * linked into the program (nothing tells its code apart by address). Takes
 * the dynamic loader's lock (dl_iterate_phdr): never under a uslab lock.
 */
void usl_code_range(uintptr_t *start, uintptr_t *end)
{
	struct code_range r = { (uintptr_t)&usl_code_range, 0, 0 };

	dl_iterate_phdr(find_code, &r);
	*start = r.start;
	*end = r.end;
}

/* ---------------------------------------------------------- backtraces */

/*
 * The program's calls, as the debug tier's tracks and reports and the
 * sampling guard's call sites record them: return addresses below the
 * library's own frames (its code's range, usl_code_range(), when it is a
 * shared library), symbolised only when a report prints them.
 */
static uintptr_t lib_start, lib_end; /* (relaxed atomics, set once by usl_backtrace_init) */
static bool lib_known;

/*
 * usl_backtrace_init - find the library's code, for the backtraces to skip.
 * Takes the dynamic loader's lock: call it where no uslab lock is held
 * (a debug cache's creation, the guard's capture). Racing threads find the
 * same range.
 */
void usl_backtrace_init(void)
{
	uintptr_t start, end;

	if (__atomic_load_n(&lib_known, __ATOMIC_ACQUIRE))
		return;
	usl_code_range(&start, &end);
	__atomic_store_n(&lib_start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&lib_end, end, __ATOMIC_RELAXED);
	__atomic_store_n(&lib_known, true, __ATOMIC_RELEASE);
}

/* Whether backtraces skip the library's frames themselves (it is a shared library). */
bool usl_backtrace_skips(void)
{
	return __atomic_load_n(&lib_end, __ATOMIC_RELAXED) != 0;
}

struct bt {
	void **addrs;
	unsigned int n, max;
	uintptr_t start, end; /* the library's code */
	bool skipping;
};

static _Unwind_Reason_Code bt_step(struct _Unwind_Context *ctx, void *arg)
{
	struct bt *b = arg;
	uintptr_t ip = _Unwind_GetIP(ctx);

	if (!ip)
		return _URC_END_OF_STACK;
	/* The library's own frames first: skipped, the caller is what matters. */
	if (b->skipping && ip - b->start < b->end - b->start)
		return _URC_NO_REASON;
	b->skipping = false;
	b->addrs[b->n++] = (void *)ip;
	return b->n == b->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

/*
 * usl_backtrace - the calling thread's return addresses below the
 * library's frames (a DWARF unwind) into @addrs. Return: frames (at most @max).
 */
unsigned int usl_backtrace(void **addrs, unsigned int max)
{
	struct bt b = { addrs, 0, max, 0, 0, true };

	if (!max)
		return 0;
	b.start = __atomic_load_n(&lib_start, __ATOMIC_RELAXED);
	b.end = __atomic_load_n(&lib_end, __ATOMIC_RELAXED);
	_Unwind_Backtrace(bt_step, &b);
	return b.n;
}

/*
 * Whether return address @a is in an exported uslab_* function (dladdr),
 * remembered per thread: dladdr searches the symbol table, and the sites
 * of a program's bulk calls repeat (the debug tier's U with one frame,
 * linked statically: without this cache the stress test ran 3.5 times
 * slower).
 */
static bool in_uslab_function(const void *a)
{
	static __thread struct {
		const void *addr;
		bool ours;
	} memo[64];
	unsigned int h = (unsigned int)(((uintptr_t)a * 0x9e3779b97f4a7c15ull) >> 58);
	Dl_info info;

	if (memo[h].addr == a)
		return memo[h].ours;
	memo[h].addr = a;
	memo[h].ours = dladdr((const char *)a - 1, &info) && info.dli_sname &&
		       !strncmp(info.dli_sname, "uslab_", 6);
	return memo[h].ours;
}

/*
 * usl_first_caller - the first frame of @addrs[0..n) that is the
 * program's. Linked as a shared library, the capture skipped uslab's
 * frames already; linked statically, the frames up to the outermost one in
 * an exported uslab_* function (among the first 10) are uslab's (named
 * when the program is linked with -rdynamic; if none is, every frame is
 * the program's).
 */
unsigned int usl_first_caller(void *const *addrs, unsigned int n)
{
	unsigned int first = 0;

	if (usl_backtrace_skips())
		return 0;
	for (unsigned int i = 0; i < n && i < 10; i++)
		if (in_uslab_function(addrs[i]))
			first = i + 1;
	return first < n ? first : 0;
}

/*
 * usl_site_ok - whether return address @site can stand for the program's
 * call: outside the library's code (linked statically, its range is not
 * known: outside an exported uslab_* function as far as dladdr tells; a
 * build without tail calls, such as ThreadSanitizer's, returns into
 * uslab_cache_alloc).
 */
bool usl_site_ok(const void *site)
{
	uintptr_t start = __atomic_load_n(&lib_start, __ATOMIC_RELAXED);
	uintptr_t end = __atomic_load_n(&lib_end, __ATOMIC_RELAXED);

	if (!site)
		return false;
	if (end)
		return (uintptr_t)site - start >= end - start;
	return !in_uslab_function(site);
}

/* Report lines "    #k symbol" for the program's frames of @addrs[0..n), at most @max. */
void usl_print_backtrace(void *const *addrs, unsigned int n, unsigned int max)
{
	char buf[320];

	for (unsigned int i = usl_first_caller(addrs, n), k = 0; i < n && k < max; i++, k++)
		usl_report_line("    #%u %s", k, usl_symbolise(addrs[i], buf, sizeof(buf)));
}

/* This thread's id (gettid() is a system call: once per thread). */
static __thread uint32_t tls_tid;

uint32_t usl_tid(void)
{
	if (unlikely(!tls_tid))
		tls_tid = (uint32_t)gettid();
	return tls_tid;
}

/* In a forked child (init.c's handler, on its one thread): its own id. */
void usl_tid_fork_child(void)
{
	tls_tid = 0;
}
