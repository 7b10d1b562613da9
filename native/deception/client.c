/*
 * client.c - the shim's side of the conversation with the daemon.
 *
 * One AF_UNIX SOCK_SEQPACKET connection per thread (thread-local struct conn),
 * opened on first need, non-blocking and close-on-exec. A request is one
 * datagram (struct lcp_request + the file's fd via SCM_RIGHTS); the reply is
 * awaited with poll() for at most LIBCEPTION_TIMEOUT_MS. At most one request is
 * outstanding per connection, and each carries a sequence number that the
 * reply must echo.
 *
 * Trust: right after connecting, SO_PEERCRED must show a daemon whose uid
 * config.c trusts (root, LIBCEPTION_DAEMON_UID, or outside AT_SECURE our own
 * euid); anyone else who bound the socket path gets no fd - the connection is
 * closed, stderr says so once, and calls go to libc as with no daemon.
 *
 * A late reply is not a dead daemon: when the wait for a reply runs out (a
 * long disk queue), the call goes on to libc but the connection stays, with
 * the request counted as stale; its reply, when it comes, is recognised by its
 * older sequence number and taken in. While a late reply is still owed, that
 * thread's calls go to libc without waiting (other threads and the back-off
 * are untouched); a reply owed for longer than the longest back-off (30 s)
 * means the daemon is stuck, and the connection is dropped as failed.
 *
 * Patience while the daemon works: a wait that runs out after a timeout
 * period in which another thread of this process took in a good reply is
 * stretched by another LIBCEPTION_TIMEOUT_MS, up to LIBCEPTION_PATIENCE_MS in
 * all (the stuck-daemon rule above then counts from the end of the wait). The daemon is
 * then alive and working through a queue that is the disk's queue; going to
 * libc would put one more unserialized read on that disk. In a server with
 * hundreds of threads (Apache above its limit) the drive went from one
 * request at a time to 123 queued requests of 121 KiB, and Apache delivered
 * 24 MB/s instead of 38 (docs/shim.md). A process whose only waiting thread
 * is this one (an nginx worker, whose wait stalls all its connections) sees
 * no other reply and gives up on time.
 *
 * Failing open: any failure (cannot connect, untrusted peer, send fails,
 * daemon closes, garbage or out-of-sequence reply, stray fds in the reply, a
 * dead daemon) drops the connection and arms a process-wide back-off: for the
 * next 100 ms, doubling up to 30 s, no thread tries the daemon again and calls
 * go straight to libc. The first good reply clears the back-off. No connect
 * storm, no repeated waits.
 *
 * Ownership and locks: a thread's conn is touched only by that thread, except
 * in the fork child handler (single-threaded by then). thread.c calls in here
 * when a thread exits and around fork(); this file calls nothing above it. registry_lock protects
 * the list of open connections, which exists so that a fork child can close
 * every connection it inherited (each thread's, not only the forking one's);
 * it is held only to link or unlink, and across fork by the atfork handlers.
 *
 * Our socket can be closed behind our back (closefrom-style loops, close_range,
 * dup2 onto it, a vfork child's close() that cleared our fd table entry):
 * before each use, and before closing it at thread exit or in a fork child,
 * fstat must show the very socket we connected (same device and inode), else
 * the number is someone else's and is forgotten without being closed or
 * written to. The fd table is only a hint here (it cannot describe
 * fds beyond its size, and other processes sharing our memory can edit it);
 * when the socket is still ours, its SHIM entry is restored.
 *
 * Children the atfork handler did not see (vfork and posix_spawn children,
 * which share our memory; _Fork and raw clone children) hold copies of our
 * sockets, and in the vfork case our very thread-local state. The process id
 * recorded by the constructor and the fork handler tells them apart: in such a
 * child every request goes straight to libc and nothing of the parent's state
 * is touched.
 *
 * Cancellation: internal syscalls go through syscall(2), which is not a
 * cancellation point; the wait in poll() is one (as the real read would be),
 * with a cleanup handler that drops the connection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "deception.h"
#include "fdpass.h"

#define BACKOFF_INITIAL_MS 100u
#define BACKOFF_MAX_MS 30000u

struct conn {
	int fd;              /* -1: not connected */
	int dead;            /* thread is exiting: never connect again */
	int registered;      /* linked in the registry */
	uint64_t ino, dev;   /* socket identity, to notice the fd being replaced */
	uint64_t seq;        /* last sequence number sent */
	uint64_t stale;      /* requests whose reply came too late, still owed */
	uint64_t stale_since_ns; /* when the oldest of them timed out */
	pid_t tid;
	struct conn *next, *prev;
};

static LCP__TLS struct conn tls_conn = { .fd = -1 };

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *registry; /* guarded by registry_lock */

/* This process's id as the constructor or the fork child handler saw it. */
static pid_t cached_pid;

static uint64_t backoff_until_ns;
static uint32_t backoff_delay_ms;

/* Are we a child that our fork handler never saw (vfork, _Fork, clone)? */
static int unseen_child(void)
{
	pid_t pid = __atomic_load_n(&cached_pid, __ATOMIC_RELAXED);

	return pid != 0 && (pid_t)syscall(SYS_getpid) != pid;
}

static void backoff_failure(void)
{
	uint32_t delay = __atomic_load_n(&backoff_delay_ms, __ATOMIC_RELAXED);

	delay = delay == 0 ? BACKOFF_INITIAL_MS : (delay >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : delay * 2);
	__atomic_store_n(&backoff_delay_ms, delay, __ATOMIC_RELAXED);
	__atomic_store_n(&backoff_until_ns, lcp__now_ns() + (uint64_t)delay * 1000000u, __ATOMIC_RELAXED);
}

static void backoff_success(void)
{
	if (__atomic_load_n(&backoff_delay_ms, __ATOMIC_RELAXED) != 0) {
		__atomic_store_n(&backoff_delay_ms, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&backoff_until_ns, 0, __ATOMIC_RELAXED);
	}
}

static void registry_link(struct conn *c)
{
	pthread_mutex_lock(&registry_lock);
	c->prev = NULL;
	c->next = registry;
	if (registry != NULL)
		registry->prev = c;
	registry = c;
	c->registered = 1;
	pthread_mutex_unlock(&registry_lock);
}

static void registry_unlink(struct conn *c)
{
	pthread_mutex_lock(&registry_lock);
	if (c->registered) {
		if (c->prev != NULL)
			c->prev->next = c->next;
		else
			registry = c->next;
		if (c->next != NULL)
			c->next->prev = c->prev;
		c->next = c->prev = NULL;
		c->registered = 0;
	}
	pthread_mutex_unlock(&registry_lock);
}

/*
 * Forget the connection. close_fd: the fd is still our socket, close it and
 * clear its table entry; otherwise the number now belongs to someone else and
 * neither the fd nor its entry is ours to touch.
 */
static void conn_drop(struct conn *c, int close_fd)
{
	int fd = c->fd;

	if (fd < 0)
		return;
	registry_unlink(c);
	c->fd = -1;
	c->stale = 0;
	if (close_fd) {
		lcp__fdtab_forget(fd);
		lcp__sys_close(fd);
	}
}

static void conn_fail(struct conn *c, enum lcp__counter why)
{
	lcp__stats_count(why, 1);
	conn_drop(c, 1);
	backoff_failure();
}

/* Is the daemon on the other end one we may hand fds to? */
static int peer_trusted(int fd)
{
	static int warned;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	char line[256];
	int n;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred) &&
	    lcp__daemon_uid_trusted(cred.uid))
		return 1;
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
		n = snprintf(line, sizeof(line),
			     "libdeception: not using the daemon at %.108s: it runs as uid %ld, not root%s; "
			     "reads go straight to libc (set LIBCEPTION_DAEMON_UID to trust it)\n",
			     lcp__cfg.socket_path, len == sizeof(cred) ? (long)cred.uid : -1L,
			     lcp__cfg.secure ? "" : " nor our own uid");
		if (n > 0)
			(void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	}
	return 0;
}

static int conn_open(struct conn *c)
{
	struct sockaddr_un addr;
	struct stat st;
	int fd;

	if (lcp__now_ns() < __atomic_load_n(&backoff_until_ns, __ATOMIC_RELAXED)) {
		lcp__stats_count(LCP_CTR_BACKOFF_SKIPS, 1);
		return -ENOTCONN;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		lcp__stats_count(LCP_CTR_CONNECT_FAILURES, 1);
		backoff_failure();
		return -ENOTCONN;
	}
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	memcpy(addr.sun_path, lcp__cfg.socket_path, sizeof(addr.sun_path) - 1);
	if (syscall(SYS_connect, fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 || fstat(fd, &st) != 0) {
		lcp__sys_close(fd);
		lcp__stats_count(LCP_CTR_CONNECT_FAILURES, 1);
		backoff_failure();
		return -ENOTCONN;
	}
	if (!peer_trusted(fd)) {
		lcp__sys_close(fd);
		lcp__stats_count(LCP_CTR_UNTRUSTED, 1);
		backoff_failure();
		return -ENOTCONN;
	}
	c->fd = fd;
	c->ino = st.st_ino;
	c->dev = st.st_dev;
	c->tid = gettid();
	lcp__fdtab_set(fd, LCP_FD_SHIM, LCP_METHOD_UNLEARNED);
	registry_link(c);
	lcp__stats_count(LCP_CTR_CONNECTS, 1);
	return 0;
}

/* Does c->fd still name the socket we connected? */
static int conn_is_ours(const struct conn *c)
{
	struct stat st;

	return c->fd >= 0 && fstat(c->fd, &st) == 0 && S_ISSOCK(st.st_mode) && (uint64_t)st.st_ino == c->ino &&
	       (uint64_t)st.st_dev == c->dev;
}

/* Is c->fd still the socket we connected? If not, forget it untouched. */
static int conn_valid(struct conn *c)
{
	if (c->fd < 0)
		return 0;
	if (!conn_is_ours(c)) {
		conn_drop(c, 0);
		return 0;
	}
	if (lcp__fd_kind(lcp__fdtab_get(c->fd)) != LCP_FD_SHIM)
		lcp__fdtab_set(c->fd, LCP_FD_SHIM, LCP_METHOD_UNLEARNED);
	return 1;
}

static void wait_cancelled(void *arg)
{
	conn_drop(arg, 1);
	lcp__guard = 0;
}

/* poll() for readability; cancellation point, like the call it precedes. */
static int wait_readable(struct conn *c, int timeout_ms)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	int ready;

	pthread_cleanup_push(wait_cancelled, c);
	ready = poll(&pfd, 1, timeout_ms);
	pthread_cleanup_pop(0);
	if (ready < 0)
		return -errno;
	return ready;
}

/* Close any descriptor a (misbehaving) daemon sent us. Returns how many. */
static int close_passed_fds(struct msghdr *msg)
{
	int count = 0;

	for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(msg); cmsg != NULL; cmsg = CMSG_NXTHDR(msg, cmsg)) {
		if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
			size_t n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int fds[16];

			if (n > 16)
				n = 16;
			memcpy(fds, CMSG_DATA(cmsg), n * sizeof(int));
			for (size_t i = 0; i < n; i++)
				lcp__sys_close(fds[i]);
			count += (int)n;
		}
	}
	return count;
}

static int send_request(struct conn *c, const struct lcp_request *req, int fd)
{
	union lcp__fd_control control;
	struct iovec iov;
	struct msghdr msg;
	long sent;

	lcp__fdpass_message(&msg, &iov, &control, req, sizeof(*req), fd);
	sent = syscall(SYS_sendmsg, c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (sent < 0)
		return -errno;
	return sent == (long)sizeof(*req) ? 0 : -EPROTO;
}

/* When this process last took in a good reply (its own sequence, status
 * not negative), of any thread (lcp__now_ns): the daemon is working. Relaxed:
 * a hint, and a lost race can only withhold a stretch. */
static uint64_t last_reply_ns; /* __atomic */

static void note_good_reply(const struct lcp_reply *reply)
{
	if (reply->status >= 0)
		__atomic_store_n(&last_reply_ns, lcp__now_ns(), __ATOMIC_RELAXED);
}

/*
 * Receive one well-formed reply by deadline (lcp__now_ns clock; a deadline
 * already past still takes a reply that is waiting). 0, -ETIMEDOUT, -EPIPE
 * (closed or broken) or -EPROTO.
 */
static int receive_one(struct conn *c, uint64_t deadline, struct lcp_reply *reply)
{
	union {
		char bytes[LCP_MAX_MESSAGE];
		struct lcp_reply reply;
	} buf;
	union {
		char buf[CMSG_SPACE(16 * sizeof(int))];
		struct cmsghdr align;
	} control;

	for (;;) {
		uint64_t now = lcp__now_ns();
		struct iovec iov = { .iov_base = buf.bytes, .iov_len = sizeof(buf.bytes) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
		long got;
		int ready;

		ready = wait_readable(c, now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u));
		if (ready == -EINTR)
			continue; /* the handler ran; keep waiting within the bound */
		if (ready < 0)
			return -EPIPE;
		if (ready == 0) {
			if (lcp__now_ns() >= deadline)
				return -ETIMEDOUT;
			continue;
		}
		got = syscall(SYS_recvmsg, c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (got < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -EPIPE;
		}
		if (close_passed_fds(&msg) > 0 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
			return -EPROTO;
		if (got == 0)
			return -EPIPE;
		if (got != (long)sizeof(struct lcp_reply) || buf.reply.magic != LCP_REPLY_MAGIC ||
		    buf.reply.version != LCP_PROTO_VERSION)
			return -EPROTO;
		*reply = buf.reply;
		return 0;
	}
}

/* Is this the late reply to one of the requests we gave up on? Those are
 * the last c->stale ones sent before next_seq. */
static int is_stale_reply(const struct conn *c, const struct lcp_reply *reply, uint64_t next_seq)
{
	return reply->seq < next_seq && reply->seq + c->stale >= next_seq;
}

/* Take in the late replies that have arrived. 0 when none is owed any more,
 * -EAGAIN while one is, or the error that ended the connection. */
static int drain_stale(struct conn *c)
{
	struct lcp_reply late;

	while (c->stale > 0) {
		int err = receive_one(c, 0, &late);

		if (err == -ETIMEDOUT)
			return -EAGAIN;
		if (err < 0)
			return err;
		if (!is_stale_reply(c, &late, c->seq + 1))
			return -EPROTO;
		note_good_reply(&late);
		c->stale--;
	}
	return 0;
}

/* Receive the reply to req, taking late replies in on the way; a wait whose
 * last timeout period saw a good reply to another thread is stretched (see
 * the top). */
static int receive_reply(struct conn *c, const struct lcp_request *req, struct lcp_reply *reply)
{
	const uint64_t slice = (uint64_t)lcp__cfg.timeout_ms * 1000000u;
	const uint64_t start = lcp__now_ns(), limit = start + (uint64_t)lcp__cfg.patience_ms * 1000000u;
	uint64_t deadline = start + slice;

	for (;;) {
		int err = receive_one(c, deadline, reply);

		if (err == -ETIMEDOUT && deadline < limit &&
		    __atomic_load_n(&last_reply_ns, __ATOMIC_RELAXED) > deadline - slice) {
			deadline = deadline + slice < limit ? deadline + slice : limit;
			lcp__stats_count(LCP_CTR_PATIENT_WAITS, 1);
			continue;
		}
		if (err < 0)
			return err;
		if (is_stale_reply(c, reply, req->seq)) {
			note_good_reply(reply);
			c->stale--;
			continue;
		}
		if (reply->seq != req->seq || reply->op != req->op)
			return -EPROTO;
		note_good_reply(reply);
		return 0;
	}
}

int lcp__daemon_request(uint16_t op, int fd, uint64_t off, uint64_t len, uint32_t flags, uint32_t call,
			struct lcp_reply *reply)
{
	struct conn *c = &tls_conn;
	struct lcp_request req;
	int err;

	if (c->dead || unseen_child())
		return -ENOTCONN;
	if (!conn_valid(c)) {
		err = conn_open(c);
		if (err < 0)
			return err;
	}
	if (c->stale > 0) {
		err = drain_stale(c);
		if (err == -EAGAIN) {
			/* Still owed a late reply: this call goes to libc
			 * without waiting; a reply owed for longer than the
			 * longest back-off means the daemon is stuck. */
			if (lcp__now_ns() - c->stale_since_ns > (uint64_t)BACKOFF_MAX_MS * 1000000u) {
				conn_fail(c, LCP_CTR_TIMEOUTS);
				return -ETIMEDOUT;
			}
			lcp__stats_count(LCP_CTR_LATE_SKIPS, 1);
			return -EBUSY;
		}
		if (err < 0) {
			conn_fail(c, err == -EPROTO ? LCP_CTR_PROTOCOL_ERRORS : LCP_CTR_BROKEN);
			return err;
		}
	}
	memset(&req, 0, sizeof(req));
	req.magic = LCP_REQUEST_MAGIC;
	req.version = LCP_PROTO_VERSION;
	req.op = op;
	req.flags = flags;
	req.call = call;
	req.seq = ++c->seq;
	req.offset = off;
	req.length = len;
	req.tid = (uint32_t)c->tid;

	lcp__stats_count(LCP_CTR_REQUESTS, 1);
	err = send_request(c, &req, fd);
	if (err < 0) {
		conn_fail(c, LCP_CTR_BROKEN);
		return err == -EPROTO ? -EPROTO : -EPIPE;
	}
	err = receive_reply(c, &req, reply);
	if (err == -ETIMEDOUT) {
		/* Late, not dead: keep the connection, take the reply later. */
		if (c->stale++ == 0)
			c->stale_since_ns = lcp__now_ns();
		lcp__stats_count(LCP_CTR_TIMEOUTS, 1);
		return err;
	}
	if (err < 0) {
		conn_fail(c, err == -ETIMEDOUT ? LCP_CTR_TIMEOUTS :
			     err == -EPROTO ? LCP_CTR_PROTOCOL_ERRORS : LCP_CTR_BROKEN);
		return err;
	}
	backoff_success();
	lcp__stats_count(op == LCP_OP_CHECK ? LCP_CTR_CHECKS : LCP_CTR_FETCHES, 1);
	if (reply->status < 0)
		lcp__stats_count(LCP_CTR_DAEMON_ERRORS, 1);
	return 0;
}

/* The thread is exiting: close its connection and never open another. */
void lcp__client_thread_exit(void)
{
	struct conn *c = &tls_conn;

	c->dead = 1;
	if (conn_valid(c))
		conn_drop(c, 1);
}

void lcp__client_fork_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
}

void lcp__client_fork_parent(void)
{
	pthread_mutex_unlock(&registry_lock);
}

/* The child is single-threaded: close every inherited connection (they are
 * the parent's sockets) so each thread of the child connects afresh - but
 * only a number that still names our socket: after the application's
 * close_range or dup2 it is the application's. */
void lcp__client_fork_child(void)
{
	for (struct conn *c = registry; c != NULL;) {
		struct conn *next = c->next;

		if (conn_is_ours(c)) {
			lcp__fdtab_forget(c->fd);
			lcp__sys_close(c->fd);
		}
		c->fd = -1;
		c->stale = 0;
		c->registered = 0;
		c->next = c->prev = NULL;
		c = next;
	}
	registry = NULL;
	pthread_mutex_init(&registry_lock, NULL);
	__atomic_store_n(&cached_pid, getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&backoff_delay_ms, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&backoff_until_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&last_reply_ns, 0, __ATOMIC_RELAXED);
}

void lcp__client_init(void)
{
	__atomic_store_n(&cached_pid, getpid(), __ATOMIC_RELAXED);
}
