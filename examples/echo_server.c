// SPDX-License-Identifier: MIT
/*
 * echo_server.c - a TCP echo server on uslab, with its own load generator:
 * an acceptor thread hands each new connection to one of the worker
 * threads, each with its own epoll set. A connection's state comes from a
 * cache ("conn", freed by whichever worker closes it); each read goes into
 * a buffer from the worker's magazine of the "msgbuf" cache (its burst
 * loop takes and gives back buffers without touching the shared sheaves);
 * a partial write waits in a buffer from kmalloc. Then client threads open
 * CONNS connections to it on the loopback, send MESSAGES messages of
 * random sizes each, check every byte echoed, and close. At the end every
 * connection object must be back: active_objs 0.
 *
 *	echo_server [CONNS [MESSAGES [WORKERS]]]	(defaults 200, 100, 2)
 *
 * Run it with USLAB_STATS=1 and watch the caches of the running process
 * with `uslab-stat -w PID` (installed with uslab).
 *
 * Build: cc -O2 echo_server.c -luslab -pthread
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uslab.h>
#include <uslab/kmalloc.h>
#include <uslab/magazine.h>

#define MSG_MAX 2048
#define MAX_WORKERS 16
#define CLIENT_THREADS 4

/* A connection's state, from the "conn" cache. */
struct conn {
	int fd;
	char *pending; /* bytes not yet written back (kmalloc), or NULL */
	size_t pend_len, pend_off;
	uint64_t bytes; /* echoed so far */
};

struct worker {
	pthread_t thread;
	int epfd;
	int wake[2]; /* the acceptor writes new fds here */
	struct uslab_magazine *bufs;
};

static struct uslab_cache *conns, *msgbufs;
static struct worker workers[MAX_WORKERS];
static int nworkers, listen_fd, port;
static atomic_bool stopping;
static atomic_ulong closed, echoed_bytes;

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void conn_close(struct worker *w, struct conn *c)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	uslab_kfree(c->pending);
	atomic_fetch_add(&echoed_bytes, c->bytes);
	uslab_cache_free(conns, c);
	atomic_fetch_add(&closed, 1);
}

/* Write what is pending; returns -1 on an error (the connection is done). */
static int flush_pending(struct conn *c)
{
	while (c->pending && c->pend_off < c->pend_len) {
		ssize_t n = write(c->fd, c->pending + c->pend_off, c->pend_len - c->pend_off);

		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		c->pend_off += (size_t)n;
	}
	uslab_kfree(c->pending);
	c->pending = NULL;
	return 0;
}

/* One readable connection: read into a magazine buffer, echo it back. */
static void on_readable(struct worker *w, struct conn *c)
{
	char *buf = uslab_magazine_alloc(w->bufs);

	if (!buf || flush_pending(c) < 0) {
		uslab_magazine_free(w->bufs, buf);
		conn_close(w, c);
		return;
	}
	for (;;) {
		ssize_t n = read(c->fd, buf, MSG_MAX), off = 0;

		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			uslab_magazine_free(w->bufs, buf);
			conn_close(w, c);
			return;
		}
		if (n < 0)
			break;
		c->bytes += (uint64_t)n;
		while (off < n) {
			ssize_t k = write(c->fd, buf + off, (size_t)(n - off));

			if (k < 0) {
				/* The peer is slow: keep the rest (kmalloc) until it is writable. */
				c->pending = uslab_kmalloc((size_t)(n - off));
				if (!c->pending) {
					uslab_magazine_free(w->bufs, buf);
					conn_close(w, c);
					return;
				}
				memcpy(c->pending, buf + off, (size_t)(n - off));
				c->pend_len = (size_t)(n - off);
				c->pend_off = 0;
				break;
			}
			off += k;
		}
		if (c->pending)
			break;
	}
	uslab_magazine_free(w->bufs, buf);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event ev[64];

	/* Its own magazine of read buffers: the burst loop's, no other thread's. */
	w->bufs = uslab_magazine_create(msgbufs, 64, 16);
	if (!w->bufs)
		die("uslab_magazine_create");
	for (;;) {
		int n = epoll_wait(w->epfd, ev, 64, 100);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == NULL) { /* a new connection from the acceptor */
				int fd;

				while (read(w->wake[0], &fd, sizeof(fd)) == sizeof(fd)) {
					struct conn *c = uslab_cache_zalloc(conns);
					struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP };

					if (!c) {
						close(fd);
						continue;
					}
					c->fd = fd;
					e.data.ptr = c;
					if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &e)) {
						close(fd);
						uslab_cache_free(conns, c);
					}
				}
				continue;
			}
			on_readable(w, ev[i].data.ptr);
		}
		if (n == 0 && atomic_load(&stopping))
			break;
	}
	uslab_magazine_destroy(w->bufs); /* its buffers back to the cache */
	return NULL;
}

static void *acceptor_main(void *arg)
{
	unsigned int next = 0;

	(void)arg;
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK);
		int one = 1;

		if (fd < 0) {
			if (atomic_load(&stopping))
				return NULL;
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* Round robin to the workers. */
		if (write(workers[next++ % nworkers].wake[1], &fd, sizeof(fd)) != sizeof(fd))
			close(fd);
	}
}

/* ---------------------------------------------------- the load generator */

static int nconns, nmsgs;
static atomic_int client_errors;

static void *client_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t seed = 0x9E3779B97F4A7C15ull * (uint64_t)(id + 1);
	char out[MSG_MAX], in[MSG_MAX];

	for (int k = id; k < nconns; k += CLIENT_THREADS) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			atomic_fetch_add(&client_errors, 1);
			if (fd >= 0)
				close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (int m = 0; m < nmsgs; m++) {
			size_t len, got = 0;

			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			len = 1 + seed % (MSG_MAX - 1);
			for (size_t i = 0; i < len; i++)
				out[i] = (char)(seed >> (i % 56)) ^ (char)i;
			if (write(fd, out, len) != (ssize_t)len) {
				atomic_fetch_add(&client_errors, 1);
				break;
			}
			while (got < len) {
				ssize_t n = read(fd, in + got, len - got);

				if (n <= 0)
					break;
				got += (size_t)n;
			}
			if (got != len || memcmp(in, out, len)) {
				atomic_fetch_add(&client_errors, 1);
				break;
			}
		}
		close(fd);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	pthread_t acceptor, clients[CLIENT_THREADS];
	struct uslab_cache_stats st;
	int one = 1;

	nconns = argc > 1 ? atoi(argv[1]) : 200;
	nmsgs = argc > 2 ? atoi(argv[2]) : 100;
	nworkers = argc > 3 ? atoi(argv[3]) : 2;
	if (nconns < 1 || nmsgs < 1 || nworkers < 1 || nworkers > MAX_WORKERS) {
		fprintf(stderr, "usage: echo_server [CONNS [MESSAGES [WORKERS]]]\n");
		return 2;
	}
	conns = uslab_cache_create("conn", sizeof(struct conn), NULL, 0);
	msgbufs = uslab_cache_create("msgbuf", MSG_MAX, NULL, 0);
	if (!conns || !msgbufs)
		die("uslab_cache_create");

	/* The listening socket, on an ephemeral port of the loopback. */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (listen_fd < 0 || setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) || listen(listen_fd, 1024) ||
	    getsockname(listen_fd, (struct sockaddr *)&a, &alen))
		die("listen");
	port = ntohs(a.sin_port);
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };

		if (pipe2(w->wake, O_NONBLOCK) || (w->epfd = epoll_create1(0)) < 0 ||
		    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake[0], &e))
			die("epoll");
		pthread_create(&w->thread, NULL, worker_main, w);
	}
	pthread_create(&acceptor, NULL, acceptor_main, NULL);
	printf("echo server on 127.0.0.1:%d, %d workers\n", port, nworkers);

	for (int i = 0; i < CLIENT_THREADS; i++)
		pthread_create(&clients[i], NULL, client_main, (void *)(intptr_t)i);
	for (int i = 0; i < CLIENT_THREADS; i++)
		pthread_join(clients[i], NULL);
	/* Wait for the workers to see every connection closed. */
	for (int waited = 0; (int)atomic_load(&closed) < nconns && waited < 10000; waited++)
		usleep(1000);
	atomic_store(&stopping, true);
	shutdown(listen_fd, SHUT_RDWR);
	pthread_join(acceptor, NULL);
	for (int i = 0; i < nworkers; i++)
		pthread_join(workers[i].thread, NULL);

	/* Cached objects (the barn's sheaves) back to their slabs: what is left is in use. */
	uslab_cache_shrink(conns);
	uslab_cache_stats(conns, &st);
	printf("%d connections, %d messages each: %lu bytes echoed, %lu closed, %d client errors\n",
	       nconns, nmsgs, atomic_load(&echoed_bytes), atomic_load(&closed),
	       atomic_load(&client_errors));
	printf("conn cache: %lu objects in use, %lu slabs\n", st.active_objs, st.num_slabs);
	if (atomic_load(&client_errors) || st.active_objs || (int)atomic_load(&closed) != nconns ||
	    uslab_cache_destroy(conns) || uslab_cache_destroy(msgbufs)) {
		puts("FAILED");
		return 1;
	}
	puts("ok: every reply checked, every connection object back");
	return 0;
}
