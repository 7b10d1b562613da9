/*
 * fake_daemon.c - see fake_daemon.h. One accept thread, one thread per
 * connection (simple, and a slow or silent connection never holds up the
 * others). Records live in a growable array under a mutex.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <libception/protocol.h>

#include "../deception/fdpass.h"
#include "fake_daemon.h"

struct fake_daemon {
	int listen_fd;
	int stop_pipe[2];
	enum fake_behaviour behaviour;
	int delay_ms;
	char path[108];
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_mutex_t queue; /* FAKE_QUEUE: held while one request is served */
	struct fake_record *records;
	int nrecords, capacity;
	int connections;
	int log_fd;
	int served_total;    /* late-first: requests seen so far; guarded by lock */
	int active;          /* connection threads running; guarded by lock */
	pthread_cond_t idle; /* signalled when active drops */
};

struct conn_arg {
	struct fake_daemon *daemon;
	int fd;
	int number;
};

static const char *const behaviour_names[] = {
	[FAKE_NORMAL] = "normal", [FAKE_NEVER_REPLY] = "never", [FAKE_SLOW] = "slow",
	[FAKE_GARBAGE] = "garbage", [FAKE_WRONG_SEQ] = "wrong-seq", [FAKE_CLOSE] = "close",
	[FAKE_STRAY_FD] = "stray-fd", [FAKE_LATE_FIRST] = "late-first", [FAKE_QUEUE] = "queue",
	[FAKE_SLOW_LATER] = "slow-later",
};

int fake_behaviour_parse(const char *name, enum fake_behaviour *out)
{
	for (size_t i = 0; i < sizeof(behaviour_names) / sizeof(behaviour_names[0]); i++) {
		if (strcmp(name, behaviour_names[i]) == 0) {
			*out = (enum fake_behaviour)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int range_resident(int fd, uint64_t off, uint64_t len)
{
	struct { uint64_t off, len; } range = { off, len };
	uint64_t cs[5];
	struct stat st;
	uint64_t end, pages;

	if (fstat(fd, &st) != 0 || off >= (uint64_t)st.st_size || len == 0)
		return 1;
	end = off + len < (uint64_t)st.st_size ? off + len : (uint64_t)st.st_size;
	range.len = end - off;
	if (syscall(451, fd, &range, cs, 0) != 0)
		return 0;
	pages = ((end - 1) >> 12) - (off >> 12) + 1;
	return cs[0] >= pages;
}

/* resident_end of a reply about a resident [off, off+len): as far as the
 * prefetch size (2 MiB from off's page) if all of that is resident too. */
static uint64_t resident_ahead(int fd, uint64_t off, uint64_t len)
{
	uint64_t ahead = (off & ~4095ull) + (2u << 20);

	if (ahead > off + len && range_resident(fd, off, ahead - off))
		return ahead;
	return off + len;
}

static void read_range(int fd, uint64_t off, uint64_t len, uint64_t *bytes)
{
	static __thread char buf[1 << 16];

	*bytes = 0;
	while (*bytes < len) {
		size_t want = len - *bytes < sizeof(buf) ? len - *bytes : sizeof(buf);
		ssize_t got = pread(fd, buf, want, (off_t)(off + *bytes));

		if (got <= 0)
			break;
		*bytes += (uint64_t)got;
	}
}

static void record(struct fake_daemon *d, const struct fake_record *r)
{
	pthread_mutex_lock(&d->lock);
	if (d->nrecords == d->capacity) {
		int cap = d->capacity ? d->capacity * 2 : 256;
		struct fake_record *grown = realloc(d->records, (size_t)cap * sizeof(*grown));

		if (grown == NULL) {
			pthread_mutex_unlock(&d->lock);
			return;
		}
		d->records = grown;
		d->capacity = cap;
	}
	d->records[d->nrecords++] = *r;
	if (d->log_fd >= 0)
		dprintf(d->log_fd, "op=%u flags=%u call=%u seq=%llu off=%llu len=%llu pid=%d uid=%d conn=%d fd=%d regular=%d resident=%d\n",
			r->op, r->flags, r->call, (unsigned long long)r->seq, (unsigned long long)r->offset,
			(unsigned long long)r->length, (int)r->pid, (int)r->uid, r->conn, r->had_fd, r->regular, r->resident);
	pthread_mutex_unlock(&d->lock);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int send_reply(int fd, const struct lcp_reply *reply, int stray_fd)
{
	union lcp__fd_control control;
	struct iovec iov;
	struct msghdr msg;

	lcp__fdpass_message(&msg, &iov, &control, reply, sizeof(*reply), stray_fd);
	return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof(*reply) ? 0 : -1;
}

/* Whether this is the daemon's very first reply, over all connections. */
static int first_reply(struct fake_daemon *d)
{
	int first;

	pthread_mutex_lock(&d->lock);
	first = d->served_total == 0;
	d->served_total++;
	pthread_mutex_unlock(&d->lock);
	return first;
}

static void *serve_connection(void *arg)
{
	struct conn_arg *ca = arg;
	struct fake_daemon *d = ca->daemon;
	struct ucred cred = { 0, 0, 0 };
	socklen_t cred_len = sizeof(cred);
	int served = 0;

	getsockopt(ca->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len);
	for (;;) {
		union {
			char bytes[LCP_MAX_MESSAGE];
			struct lcp_request req;
		} buf;
		union {
			char buf[CMSG_SPACE(4 * sizeof(int))];
			struct cmsghdr align;
		} control;
		struct iovec iov = { .iov_base = buf.bytes, .iov_len = sizeof(buf.bytes) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
		struct pollfd pfds[2] = { { ca->fd, POLLIN, 0 }, { d->stop_pipe[0], POLLIN, 0 } };
		struct lcp_reply reply;
		struct fake_record r;
		int passed_fd = -1, nfds = 0;
		ssize_t got;

		if (poll(pfds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfds[1].revents)
			break;
		got = recvmsg(ca->fd, &msg, MSG_CMSG_CLOEXEC);
		if (got <= 0)
			break;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

				for (int i = 0; i < n; i++) {
					int fd;

					memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
					if (passed_fd < 0)
						passed_fd = fd;
					else
						close(fd);
					nfds++;
				}
			}
		}
		memset(&r, 0, sizeof(r));
		memset(&reply, 0, sizeof(reply));
		reply.magic = LCP_REPLY_MAGIC;
		reply.version = LCP_PROTO_VERSION;
		r.pid = cred.pid;
		r.uid = cred.uid;
		r.conn = ca->number;
		r.had_fd = nfds;
		if (got != (ssize_t)sizeof(struct lcp_request) || buf.req.magic != LCP_REQUEST_MAGIC ||
		    buf.req.version != LCP_PROTO_VERSION || buf.req.reserved != 0 ||
		    (buf.req.flags & ~LCP_REQ_FLAGS_KNOWN) != 0) {
			reply.status = -EPROTO;
		} else {
			r.op = buf.req.op;
			r.flags = buf.req.flags;
			r.call = buf.req.call;
			r.seq = buf.req.seq;
			r.offset = buf.req.offset;
			r.length = buf.req.length;
			reply.op = buf.req.op;
			reply.seq = buf.req.seq;
			if (buf.req.op != LCP_OP_FETCH && buf.req.op != LCP_OP_CHECK) {
				reply.status = -EINVAL;
			} else if (nfds != 1) {
				reply.status = -EBADF;
			} else {
				struct stat st;

				if (fstat(passed_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
					reply.status = -EINVAL;
				} else {
					r.regular = 1;
					r.resident = range_resident(passed_fd, buf.req.offset, buf.req.length);
					if (r.resident) {
						reply.flags |= LCP_REP_RESIDENT;
						reply.resident_end = resident_ahead(passed_fd, buf.req.offset,
										    buf.req.length);
					}
					if (buf.req.op == LCP_OP_FETCH && !r.resident) {
						uint64_t len = buf.req.length;

						if (!(buf.req.flags & LCP_REQ_NO_PREFETCH) && len < (2u << 20))
							len = 2u << 20;
						read_range(passed_fd, buf.req.offset, len, &reply.bytes_read);
						reply.flags |= LCP_REP_READ;
						reply.resident_end = buf.req.offset + reply.bytes_read;
					}
				}
			}
		}
		if (passed_fd >= 0)
			close(passed_fd);
		record(d, &r);
		served++;

		switch (d->behaviour) {
		case FAKE_NEVER_REPLY:
			continue;
		case FAKE_CLOSE:
			goto out;
		case FAKE_SLOW:
			sleep_ms(d->delay_ms);
			break;
		case FAKE_QUEUE:
			/* One disk: requests are served one after another. */
			pthread_mutex_lock(&d->queue);
			sleep_ms(d->delay_ms);
			pthread_mutex_unlock(&d->queue);
			break;
		case FAKE_LATE_FIRST:
			if (first_reply(d))
				sleep_ms(d->delay_ms);
			break;
		case FAKE_SLOW_LATER:
			if (!first_reply(d))
				sleep_ms(d->delay_ms);
			break;
		case FAKE_GARBAGE:
			reply.magic = 0xdeadbeef;
			break;
		case FAKE_WRONG_SEQ:
			reply.seq += 1000;
			break;
		default:
			break;
		}
		if (send_reply(ca->fd, &reply, d->behaviour == FAKE_STRAY_FD ? d->stop_pipe[0] : -1) != 0 &&
		    d->behaviour != FAKE_LATE_FIRST)
			break;
	}
out:
	close(ca->fd);
	free(ca);
	pthread_mutex_lock(&d->lock);
	d->active--;
	pthread_cond_broadcast(&d->idle);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void *accept_loop(void *arg)
{
	struct fake_daemon *d = arg;

	for (;;) {
		struct pollfd pfds[2] = { { d->listen_fd, POLLIN, 0 }, { d->stop_pipe[0], POLLIN, 0 } };
		struct conn_arg *ca;
		int fd;

		if (poll(pfds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pfds[1].revents)
			return NULL;
		fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		ca = malloc(sizeof(*ca));
		if (ca == NULL) {
			close(fd);
			continue;
		}
		pthread_mutex_lock(&d->lock);
		ca->daemon = d;
		ca->fd = fd;
		ca->number = ++d->connections;
		{
			pthread_t thread;
			pthread_attr_t attr;

			pthread_attr_init(&attr);
			pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
			if (pthread_create(&thread, &attr, serve_connection, ca) == 0) {
				d->active++;
			} else {
				close(fd);
				free(ca);
			}
			pthread_attr_destroy(&attr);
		}
		pthread_mutex_unlock(&d->lock);
	}
}

struct fake_daemon *fake_daemon_start(const char *path, enum fake_behaviour behaviour, int delay_ms)
{
	struct fake_daemon *d = calloc(1, sizeof(*d));
	struct sockaddr_un addr;

	if (d == NULL || strlen(path) >= sizeof(addr.sun_path))
		goto fail;
	d->behaviour = behaviour;
	d->delay_ms = delay_ms;
	d->log_fd = -1;
	strcpy(d->path, path);
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->queue, NULL);
	pthread_cond_init(&d->idle, NULL);
	if (pipe2(d->stop_pipe, O_CLOEXEC) != 0)
		goto fail;
	d->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (d->listen_fd < 0)
		goto fail;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, path);
	unlink(path);
	if (bind(d->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || chmod(path, 0666) != 0 ||
	    listen(d->listen_fd, 128) != 0)
		goto fail;
	if (pthread_create(&d->acceptor, NULL, accept_loop, d) != 0)
		goto fail;
	return d;
fail:
	fprintf(stderr, "fake daemon: cannot listen on %s: %s\n", path, strerror(errno));
	free(d);
	return NULL;
}

void fake_daemon_stop(struct fake_daemon *d)
{
	if (d == NULL)
		return;
	(void)!write(d->stop_pipe[1], "x", 1);
	pthread_join(d->acceptor, NULL);
	pthread_mutex_lock(&d->lock);
	while (d->active > 0)
		pthread_cond_wait(&d->idle, &d->lock);
	pthread_mutex_unlock(&d->lock);
	close(d->listen_fd);
	close(d->stop_pipe[0]);
	close(d->stop_pipe[1]);
	unlink(d->path);
	free(d->records);
	free(d);
}

int fake_daemon_records(struct fake_daemon *d, struct fake_record *out, int max)
{
	int n;

	pthread_mutex_lock(&d->lock);
	n = d->nrecords;
	if (out != NULL && n > 0 && max > 0)
		memcpy(out, d->records, (size_t)(n < max ? n : max) * sizeof(*out));
	pthread_mutex_unlock(&d->lock);
	return n;
}

int fake_daemon_connections(struct fake_daemon *d)
{
	int n;

	pthread_mutex_lock(&d->lock);
	n = d->connections;
	pthread_mutex_unlock(&d->lock);
	return n;
}

void fake_daemon_reset(struct fake_daemon *d)
{
	pthread_mutex_lock(&d->lock);
	d->nrecords = 0;
	d->connections = 0;
	pthread_mutex_unlock(&d->lock);
}

void fake_daemon_log_to(struct fake_daemon *d, int fd)
{
	pthread_mutex_lock(&d->lock);
	d->log_fd = fd;
	pthread_mutex_unlock(&d->lock);
}
