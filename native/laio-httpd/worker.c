/*
 * worker.c - one laio-httpd worker: an event-driven HTTP/1.1 server whose
 * only wait is laio_poll().
 *
 * Every call that can block goes through laio_syscall() on blocking
 * descriptors, as in paper 002's thttpd-liblaio and ohttpd: accept4 on the
 * shared listener, recvfrom and sendto on connections, openat and pread64 on
 * files. A call that does not block returns its result at once and the
 * connection's state machine goes on in the same iteration; one that would
 * block returns EINPROGRESS, its handle is filed in `pending` against its
 * connection, and the state machine resumes when laio_poll() returns the
 * completion. So each connection has at most one operation outstanding, and
 * a descriptor is closed only when none is (an io_uring request may still
 * name it until then). Calls that never block here are made directly:
 * fstat on an open file, close, shutdown, setsockopt.
 *
 * A connection: RECV (request head) -> OPEN (file) -> [READ -> SEND]... ->
 * RECV again on keep-alive, or closed (after DRAIN when a malformed request
 * left input unread). The response head shares the buffer
 * with the first piece of the body, so a small response is one send. Idle
 * keep-alive connections and stalled responses are cut by shutdown(2) from
 * the once-a-second sweep: the outstanding receive or send then completes
 * with 0 or an error, and the state machine closes the connection.
 *
 * Body bytes are copied through a buffer (pread64 + sendto): sendfile is not
 * an operation io_uring can express, so under liblaio it would always go to a
 * helper thread. laio-httpd(8), NOTES, says what that costs against nginx.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <laio/laio.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "httpd.h"

/* ST_DRAIN: after answering a request whose framing was lost, the write
 * side is shut and input is read and dropped until the client closes (or
 * two seconds pass), so that closing does not reset the connection and
 * destroy the answer before the client has read it. */
enum state { ST_RECV, ST_OPEN, ST_READ, ST_SEND, ST_DRAIN };
#define DRAIN_S 2

/* Families of calls, for the counters printed at exit. */
enum family { F_ACCEPT, F_RECV, F_SEND, F_OPEN, F_READ, F_FAMILIES };
static const char *const family_name[F_FAMILIES] = { "accept", "recv", "send", "open", "read" };

struct conn {
	int fd;
	int slot;			/* index in worker.conns */
	enum state st;
	laio_handle_t pending;		/* outstanding operation, 0 if none */
	time_t last_progress;
	int cut;			/* shut down by the sweep */
	char in[HTTPD_MAX_HEAD];
	size_t in_len;
	struct httpd_request req;
	int keep_alive;			/* after the response being sent */
	int linger;			/* drain input before closing (framing lost) */
	int file;			/* -1 when none */
	uint64_t off, left;		/* body still to read from file */
	char *buf;			/* head and/or body piece being sent */
	size_t buf_len, buf_sent;
};

struct pending_entry {
	laio_handle_t h;		/* 0: empty */
	struct conn *c;
};

static struct worker {
	const struct httpd_settings *s;
	struct conn **conns;		/* max_connections slots */
	unsigned nconns;
	int *free_slots;
	unsigned nfree;
	/* Open addressing, linear probing, backward-shift deletion. */
	struct pending_entry *pending;
	size_t pending_mask;
	laio_handle_t accept_handle;	/* outstanding accept, 0 if none */
	int accepting;			/* an accept is outstanding or being issued */
	time_t accept_retry_at;		/* after EMFILE and the like: not before */
	char **spare_bufs;		/* buffers of finished responses */
	unsigned nspare;
	char date[64];
	time_t date_at;
	unsigned long long calls[F_FAMILIES], background[F_FAMILIES], requests, responses[6];
} w;

static void pending_put(laio_handle_t h, struct conn *c)
{
	size_t i = (size_t)h & w.pending_mask;

	while (w.pending[i].h)
		i = (i + 1) & w.pending_mask;
	w.pending[i].h = h;
	w.pending[i].c = c;
}

static struct conn *pending_take(laio_handle_t h)
{
	size_t i = (size_t)h & w.pending_mask, j;
	struct conn *c;

	while (w.pending[i].h != h) {
		if (!w.pending[i].h)
			return NULL;
		i = (i + 1) & w.pending_mask;
	}
	c = w.pending[i].c;
	w.pending[i].h = 0;
	/* Backward shift: move later entries of the run into the hole. */
	for (j = (i + 1) & w.pending_mask; w.pending[j].h; j = (j + 1) & w.pending_mask) {
		size_t home = (size_t)w.pending[j].h & w.pending_mask;

		if (((j - home) & w.pending_mask) >= ((j - i) & w.pending_mask)) {
			w.pending[i] = w.pending[j];
			w.pending[j].h = 0;
			i = j;
		}
	}
	return c;
}

static const char *http_date(void)
{
	time_t now = time(NULL);

	if (now != w.date_at) {
		struct tm tm;

		gmtime_r(&now, &tm);
		strftime(w.date, sizeof(w.date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		w.date_at = now;
	}
	return w.date;
}

static char *get_buffer(void)
{
	if (w.nspare)
		return w.spare_bufs[--w.nspare];
	return malloc(w.s->buffer);
}

static void put_buffer(char *b)
{
	if (!b)
		return;
	if (w.nspare < w.s->max_connections)
		w.spare_bufs[w.nspare++] = b;
	else
		free(b);
}

/*
 * Issues one call through LAIO. Returns 1 with *res (and errno) when it
 * completed inline, 0 when it went to the background (filed for c, or as
 * the worker's accept when c is NULL).
 */
static int issue(struct conn *c, enum family f, long nr, long a0, long a1, long a2, long a3, long a4, long a5,
		 long *res)
{
	long r;

	w.calls[f]++;
	errno = 0;
	r = laio_syscall(nr, a0, a1, a2, a3, a4, a5);
	if (r == -1 && errno == EINPROGRESS) {
		laio_handle_t h = laio_gethandle();

		w.background[f]++;
		if (c) {
			c->pending = h;
			pending_put(h, c);
		} else {
			w.accept_handle = h;
		}
		return 0;
	}
	*res = r;
	return 1;
}

static void conn_close(struct conn *c)
{
	if (c->file >= 0)
		close(c->file);
	put_buffer(c->buf);
	close(c->fd);
	w.conns[c->slot] = NULL;
	w.free_slots[w.nfree++] = c->slot;
	w.nconns--;
	free(c);
}

static void count_response(int status)
{
	w.responses[status / 100 < 6 ? status / 100 : 0]++;
}

/*
 * Puts a response head in c's buffer, to be sent next: the buffer starts
 * with it, and a body read from the file (c->left bytes) follows it.
 */
static int put_head(struct conn *c, int status, int keep_alive, uint64_t content_length, uint64_t off, uint64_t len,
		    uint64_t size)
{
	int hl;

	if (!c->buf && !(c->buf = get_buffer()))
		return -1;
	hl = httpd_format_head(c->buf, w.s->buffer, status, keep_alive, content_length, off, len, size, http_date());
	if (hl < 0)
		return -1;
	c->buf_len = (size_t)hl;
	c->buf_sent = 0;
	c->keep_alive = keep_alive;
	c->left = 0;
	c->st = ST_SEND;
	count_response(status);
	return 0;
}

/* A response whose short text body says the status (errors). */
static int respond_error(struct conn *c, int status, int keep_alive)
{
	char body[96];
	int bl = snprintf(body, sizeof(body), "%d %s\n", status, httpd_reason(status));

	if (put_head(c, status, keep_alive, (uint64_t)bl, 0, 0, 0) < 0)
		return -1;
	if (c->req.method != HTTPD_HEAD) {
		memcpy(c->buf + c->buf_len, body, (size_t)bl);
		c->buf_len += (size_t)bl;
	}
	return 0;
}

static void close_file(struct conn *c)
{
	close(c->file);
	c->file = -1;
}

/* The file of the request in c->req is open (or failed to): answer it. */
static int start_response(struct conn *c, long open_result, int open_errno)
{
	struct stat st;
	uint64_t off, len;
	enum httpd_span span;
	int status;

	if (open_result < 0) {
		status = open_errno == ENOENT || open_errno == ENOTDIR || open_errno == ENAMETOOLONG || open_errno == ELOOP
				 ? 404
			 : open_errno == EACCES || open_errno == EPERM ? 403
								       : 500;
		return respond_error(c, status, c->req.keep_alive && status != 500);
	}
	c->file = (int)open_result;
	if (fstat(c->file, &st) < 0 || !S_ISREG(st.st_mode)) {
		close_file(c);
		return respond_error(c, 404, c->req.keep_alive);
	}
	span = httpd_resolve_range(&c->req.range, (uint64_t)st.st_size, &off, &len);
	if (span == HTTPD_SPAN_UNSATISFIABLE) {
		close_file(c);
		return put_head(c, 416, c->req.keep_alive, 0, 0, 0, (uint64_t)st.st_size);
	}
	status = span == HTTPD_SPAN_PARTIAL ? 206 : 200;
	if (put_head(c, status, c->req.keep_alive, len, off, len, (uint64_t)st.st_size) < 0)
		return -1;
	if (c->req.method == HTTPD_HEAD || len == 0) {
		close_file(c);
	} else {
		c->off = off;
		c->left = len;
		c->st = ST_READ;
	}
	return 0;
}

/* Starts on the next request of a kept-alive connection: bytes after the head stay. */
static void next_request(struct conn *c)
{
	size_t used = c->req.head_len;

	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	put_buffer(c->buf);
	c->buf = NULL;
	c->st = ST_RECV;
}

/*
 * Feeds the result of c's last call (res, err) to its state machine and
 * issues calls until one goes to the background or the connection closes.
 * `have` is 0 when there is no result yet (a new connection, or a request
 * already buffered).
 */
static void advance(struct conn *c, int have, long res, int err)
{
	for (;;) {
		if (have) {
			switch (c->st) {
			case ST_RECV:
				if (res <= 0) {
					conn_close(c);
					return;
				}
				c->in_len += (size_t)res;
				break;
			case ST_OPEN:
				if (start_response(c, res, err) < 0) {
					conn_close(c);
					return;
				}
				break;
			case ST_READ:
				if (res <= 0) { /* read error, or the file shrank */
					conn_close(c);
					return;
				}
				c->buf_len += (size_t)res;
				c->off += (uint64_t)res;
				c->left -= (uint64_t)res;
				c->st = ST_SEND;
				break;
			case ST_SEND:
				if (res <= 0) {
					conn_close(c);
					return;
				}
				c->buf_sent += (size_t)res;
				if (c->buf_sent < c->buf_len)
					break;
				c->buf_len = c->buf_sent = 0;
				if (c->left) {
					c->st = ST_READ;
					break;
				}
				if (c->file >= 0)
					close_file(c);
				if (c->linger && !c->cut) {
					shutdown(c->fd, SHUT_WR);
					c->st = ST_DRAIN;
					break;
				}
				if (!c->keep_alive || c->cut) {
					conn_close(c);
					return;
				}
				next_request(c);
				break;
			case ST_DRAIN:
				if (res <= 0) {
					conn_close(c);
					return;
				}
				break;
			}
			have = 0;
			c->last_progress = time(NULL);
		}
		/* Issue the call the state asks for. */
		switch (c->st) {
		case ST_RECV: {
			enum httpd_parse p = httpd_parse_request(c->in, c->in_len, &c->req);

			if (p == HTTPD_PARSE_INCOMPLETE) {
				if (c->cut) {
					conn_close(c);
					return;
				}
				have = issue(c, F_RECV, SYS_recvfrom, c->fd, (long)(c->in + c->in_len),
					     (long)(sizeof(c->in) - c->in_len), 0, 0, 0, &res);
				break;
			}
			w.requests++;
			if (p != HTTPD_PARSE_OK) {
				int status = p == HTTPD_PARSE_TOO_LARGE ? 431
					     : p == HTTPD_PARSE_METHOD  ? 501
					     : p == HTTPD_PARSE_VERSION ? 505
									: 400;
				/* The framing is lost: answer and close. */
				c->req.method = HTTPD_GET;
				c->req.head_len = c->in_len;
				c->linger = 1;
				if (respond_error(c, status, 0) < 0) {
					conn_close(c);
					return;
				}
				continue;
			}
			c->st = ST_OPEN;
			have = issue(c, F_OPEN, SYS_openat, w.s->docroot_fd,
				     (long)(c->req.path[1] ? c->req.path + 1 : "."), O_RDONLY | O_CLOEXEC | O_NOCTTY, 0, 0, 0,
				     &res);
			break;
		}
		case ST_READ: {
			size_t room = w.s->buffer - c->buf_len;
			size_t n = c->left < room ? (size_t)c->left : room;

			have = issue(c, F_READ, SYS_pread64, c->file, (long)(c->buf + c->buf_len), (long)n, (long)c->off, 0, 0,
				     &res);
			break;
		}
		case ST_DRAIN:
			if (c->cut) {
				conn_close(c);
				return;
			}
			have = issue(c, F_RECV, SYS_recvfrom, c->fd, (long)c->in, (long)sizeof(c->in), 0, 0, 0, &res);
			break;
		case ST_SEND:
			have = issue(c, F_SEND, SYS_sendto, c->fd, (long)(c->buf + c->buf_sent), (long)(c->buf_len - c->buf_sent),
				     MSG_NOSIGNAL, 0, 0, &res);
			break;
		case ST_OPEN: /* its result is handled above; never issued from here */
			conn_close(c);
			return;
		}
		if (!have)
			return;
		err = res < 0 ? errno : 0;
	}
}

static void start_accept(void);

static void new_connection(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->file = -1;
	c->slot = w.free_slots[--w.nfree];
	c->last_progress = time(NULL);
	c->st = ST_RECV;
	w.conns[c->slot] = c;
	w.nconns++;
	advance(c, 0, 0, 0);
}

/* Keeps one accept outstanding while there is room for a connection. */
static void start_accept(void)
{
	long res;

	if (w.accepting || httpd_stop || time(NULL) < w.accept_retry_at)
		return;
	w.accepting = 1;
	while (w.nfree > 0 && !httpd_stop) {
		if (!issue(NULL, F_ACCEPT, SYS_accept4, w.s->listen_fd, 0, 0, SOCK_CLOEXEC, 0, 0, &res))
			return; /* outstanding: w.accepting stays 1 */
		if (res >= 0) {
			new_connection((int)res);
		} else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			fprintf(stderr, "laio-httpd: accept: %s; %u connections open; retrying in a second\n", strerror(errno),
				w.nconns);
			w.accept_retry_at = time(NULL) + 1;
			break;
		}
	}
	w.accepting = 0;
}

/* Once a second: cut idle keep-alive connections and stalled responses. */
static void sweep(time_t now)
{
	for (unsigned i = 0; i < w.s->max_connections; i++) {
		struct conn *c = w.conns[i];
		unsigned limit;

		if (!c || c->cut)
			continue;
		limit = c->st == ST_DRAIN			   ? DRAIN_S
			: c->st == ST_RECV && c->in_len == 0 ? w.s->keepalive_s
							       : w.s->send_timeout_s;
		if (now - c->last_progress >= (time_t)limit) {
			c->cut = 1;
			shutdown(c->fd, SHUT_RDWR);
		}
	}
}

/* One line, written at once: the workers share the error log. */
static void print_counters(int index)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "laio-httpd worker %d (%s back end): %llu requests; 2xx %llu, 4xx %llu, 5xx %llu; calls (background):",
			 index, laio_backend(), w.requests, w.responses[2], w.responses[4], w.responses[5]);

	for (int f = 0; f < F_FAMILIES && n > 0 && (size_t)n < sizeof(line); f++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %llu (%llu)", family_name[f], w.calls[f], w.background[f]);
	if (n > 0 && (size_t)n < sizeof(line) - 1) {
		line[n++] = '\n';
		if (write(2, line, (size_t)n) < 0)
			return;
	}
}

int httpd_worker_run(const struct httpd_settings *s, int index)
{
	struct laio_completion done[64];
	size_t cap = 16;
	time_t last_sweep = time(NULL);

	w.s = s;
	while (cap < 2 * ((size_t)s->max_connections + 1))
		cap <<= 1;
	w.pending = calloc(cap, sizeof(*w.pending));
	w.pending_mask = cap - 1;
	w.conns = calloc(s->max_connections, sizeof(*w.conns));
	w.free_slots = calloc(s->max_connections, sizeof(*w.free_slots));
	w.spare_bufs = calloc(s->max_connections, sizeof(*w.spare_bufs));
	if (!w.pending || !w.conns || !w.free_slots || !w.spare_bufs) {
		fprintf(stderr, "laio-httpd worker %d: out of memory for %u connections\n", index, s->max_connections);
		return 1;
	}
	for (unsigned i = 0; i < s->max_connections; i++)
		w.free_slots[w.nfree++] = (int)(s->max_connections - 1 - i);
	start_accept();
	while (!httpd_stop) {
		struct timespec timeout = { 1, 0 };
		int n = laio_poll(done, 64, &timeout);
		time_t now;

		for (int i = 0; i < n; i++) {
			laio_handle_t h = done[i].laio_handle;
			long res = done[i].laio_return_value;
			int err = done[i].laio_errno;

			if (h == w.accept_handle) {
				w.accept_handle = 0;
				w.accepting = 0;
				if (res >= 0)
					new_connection((int)res);
				else if (err != EINTR && err != ECONNABORTED && err != EAGAIN) {
					fprintf(stderr, "laio-httpd: accept: %s; %u connections open; retrying in a second\n",
						strerror(err), w.nconns);
					w.accept_retry_at = time(NULL) + 1;
				}
				start_accept();
				continue;
			}
			struct conn *c = pending_take(h);

			if (!c) {
				fprintf(stderr, "laio-httpd worker %d: completion of unknown handle %ld\n", index, (long)h);
				continue;
			}
			c->pending = 0;
			errno = err;
			advance(c, 1, res, err);
		}
		start_accept();
		now = time(NULL);
		if (now != last_sweep) {
			sweep(now);
			last_sweep = now;
		}
	}
	print_counters(index);
	return 0;
}
