/* SPDX-License-Identifier: MIT */
/*
 * test.h - the few helpers uslab's tests share.
 *
 * CHECK(cond, fmt, ...) counts and, on failure, prints the condition with
 * the message and exits 1. RUN(fn) runs one test function and prints
 * "ok <name> (<n> checks)". run_child() runs a function in a child process
 * and collects its stderr; expect_death() checks that it dies by SIGABRT
 * with a given message, expect_deaths() does so for a table of misuses.
 * cache_stats() and cache_active() read a cache's statistics.
 */
#ifndef USLAB_TEST_H
#define USLAB_TEST_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if __has_include(<uslab.h>) /* (not for preload/: it reaches uslab only through LD_PRELOAD) */
#include <uslab.h>
#define TEST_HAVE_USLAB 1
#endif

#include "common.h"

static unsigned long test_checks;

/* CHECK counting into @counter (worker threads keep their own). */
#define CHECK_COUNTED(counter, cond, ...)                                               \
	do {                                                                            \
		(counter)++;                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
			exit(1);                                                        \
		}                                                                       \
	} while (0)

#define CHECK(cond, ...) CHECK_COUNTED(test_checks, cond, __VA_ARGS__)

#define RUN(fn)                                                                \
	do {                                                                   \
		unsigned long before_ = test_checks;                           \
		fn();                                                          \
		printf("ok %-40s (%lu checks)\n", #fn, test_checks - before_); \
		fflush(stdout);                                                \
	} while (0)

/*
 * run_child - run @fn(@arg) in a child process and collect its stderr.
 * Return: the wait status; @buf holds up to @size - 1 bytes of stderr.
 */
static inline int run_child(void (*fn)(void *), void *arg, char *buf, size_t size)
{
	int pfd[2], status = -1;
	size_t len = 0;
	ssize_t r;
	pid_t pid;

	buf[0] = 0;
	if (pipe(pfd))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(pfd[1], STDERR_FILENO);
		close(pfd[0]);
		fn(arg);
		fflush(NULL);
		_exit(0);
	}
	close(pfd[1]);
	while (len < size - 1 && (r = read(pfd[0], buf + len, size - 1 - len)) > 0)
		len += (size_t)r;
	buf[len] = 0;
	close(pfd[0]);
	waitpid(pid, &status, 0);
	return status;
}

/*
 * expect_death - 1 if @fn(@arg) in a child is killed by SIGABRT with
 * @needle on its stderr, else 0 (printing what happened instead).
 */
static inline int expect_death(void (*fn)(void *), void *arg, const char *needle)
{
	char buf[8192];
	int status = run_child(fn, arg, buf, sizeof(buf));

	if (status == -1 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT ||
	    !strstr(buf, needle)) {
		fprintf(stderr, "expected SIGABRT with \"%s\"; got status %#x, stderr:\n%s\n",
			needle, status, buf);
		return 0;
	}
	return 1;
}

/* One misuse: @fn does it in a child, whose stderr must hold @message. */
struct death {
	const char *name;
	void (*fn)(void *arg);
	const char *message;
};

/* expect_deaths - CHECK that each of the @n misuses of @t dies by SIGABRT with its message. */
static inline void expect_deaths(const struct death *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		CHECK(expect_death(t[i].fn, NULL, t[i].message), "%s", t[i].name);
}

#define EXPECT_DEATHS(table) expect_deaths(table, sizeof(table) / sizeof((table)[0]))

#ifdef TEST_HAVE_USLAB
/* The statistics of @c (CHECKed). */
static inline struct uslab_cache_stats cache_stats(struct uslab_cache *c)
{
	struct uslab_cache_stats st;

	CHECK(!uslab_cache_stats(c, &st), "stats");
	return st;
}

/* Objects of @c allocated and not freed, sheaves included. */
static inline unsigned long cache_active(struct uslab_cache *c)
{
	return cache_stats(c).active_objs;
}
#endif

/* Whether the build runs under a sanitizer (they reserve address space). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZED 1
#else
#define TEST_SANITIZED 0
#endif

/*
 * check_oom_child - run @fn (which sets RLIMIT_AS and exits 0 when every
 * out-of-memory contract held) in a child, and CHECK its exit status.
 * Skipped under sanitizers, which reserve the address space.
 */
static inline void check_oom_child(void (*fn)(void *), const char *what)
{
	char err[4096];
	int status;

	if (TEST_SANITIZED) {
		printf("   (RLIMIT_AS check skipped: sanitizers reserve the address space)\n");
		return;
	}
	status = run_child(fn, NULL, err, sizeof(err));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x (exit %d) %s", what,
	      status, WEXITSTATUS(status), err);
}

#endif /* USLAB_TEST_H */
