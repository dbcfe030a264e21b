// SPDX-License-Identifier: MIT
/*
 * debug.c - reporting. A detected corruption (double free, foreign
 * pointer, broken freelist) is reported in one line and stops the program:
 *
 *	uslab: BUG <cache>: <what> at <address>
 *
 * Warnings (a cache destroyed with live objects, a bad tunable) are one
 * line on stderr and the program goes on.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

static void write_line(const char *buf, int len)
{
	/* stderr may be unbuffered or locked by the thread that broke things. */
	if (len > 0 && write(STDERR_FILENO, buf, (size_t)len) < 0)
		return;
}

void usl_bug(const struct uslab_cache *c, const void *addr, const char *fmt, ...)
{
	char buf[512];
	int len;
	va_list ap;

	len = snprintf(buf, sizeof(buf), "uslab: BUG %s: ", c ? c->name : "-");
	va_start(ap, fmt);
	len += vsnprintf(buf + len, sizeof(buf) - (size_t)len, fmt, ap);
	va_end(ap);
	if (len < (int)sizeof(buf))
		len += snprintf(buf + len, sizeof(buf) - (size_t)len, " at %p\n", addr);
	if (len >= (int)sizeof(buf)) {
		len = (int)sizeof(buf);
		buf[len - 1] = '\n';
	}
	write_line(buf, len);
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
