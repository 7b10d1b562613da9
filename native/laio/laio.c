/*
 * laio.c - liblaio's exported calls: laio_syscall(), laio_gethandle(),
 * laio_poll(), laio_backend(); start-up, the back-end choice, fork handlers,
 * and the lazy back end's decision of how each call family is tried without
 * blocking (the table is also in laio(3), section "WHEN A CALL BLOCKS").
 *
 * Lazy back end, per family:
 *   never blocks (getpid, getuid, lseek, dup, clock_gettime, ...): the
 *     system call itself, inline.
 *   read, pread64, readv, write, pwrite64, writev: preadv2/pwritev2 with
 *     RWF_NOWAIT first (files: only page-cache data; sockets and pipes: no
 *     waiting); EAGAIN on a non-blocking socket or pipe is the result;
 *     otherwise EAGAIN or EOPNOTSUPP (the file cannot say) sends the call to
 *     io_uring, where it runs in the background (a regular file or block
 *     device: straight to io-wq, IOSQE_ASYNC; a socket or pipe: io_uring's
 *     poll, inline if it became ready meanwhile).
 *   recvfrom, sendto: the call with MSG_DONTWAIT first; on EAGAIN (and the
 *     caller wanted to wait) io_uring recv/send, or the pool when an address
 *     is given.
 *   accept, accept4: on a non-blocking listener the call itself; otherwise
 *     io_uring, inline when a connection is pending.
 *   open, openat: openat2(RESOLVE_CACHED) first when nothing is created:
 *     inline when the path is in the dentry cache; else io_uring.
 *   close: io_uring; inline when the kernel completes it without punting to
 *     io-wq (no ->flush).
 *   statx, stat, lstat, newfstatat: inline at once when the same path
 *     buffer resolved from the dentry cache in this thread within the last
 *     RECENT_NS (an inline open or stat of it: a server's stat right after
 *     its open). Otherwise openat2(O_PATH, RESOLVE_CACHED) probes whether the
 *     path resolves from the dentry cache; if it does (or fails for any
 *     reason but EAGAIN) the call itself runs inline; else statx goes to
 *     io_uring and the others to the pool, in the background.
 *   fsync, fdatasync: io_uring, which always runs them in io-wq: background.
 *   anything else: the pool (background), as in the eager back end.
 * Eager back end: every call on a helper thread (background).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "laio_int.h"

#define EXPORT __attribute__((visibility("default")))

enum backend { EAGER, LAZY };

static enum backend backend;
/* 1 once the back end is up; 0 again in a fork child. */
static int started;
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* The fallback note is printed once per process tree. */
static int noted;

static __thread laio_handle_t last_handle;

static void note(const char *fmt, ...)
{
	va_list ap;

	if (noted)
		return;
	noted = 1;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&start_lock);
	laio__uring_lock();
	laio__queue_lock();
	laio__pool_lock();
}

static void fork_parent(void)
{
	laio__pool_unlock();
	laio__queue_unlock();
	laio__uring_unlock();
	pthread_mutex_unlock(&start_lock);
}

/*
 * The child starts afresh at its next call: the parent's background
 * operations, helpers and ring are not the child's.
 */
static void fork_child(void)
{
	laio__pool_reset_child();
	laio__queue_reset_child();
	laio__uring_reset_child();
	laio__pool_unlock();
	laio__queue_unlock();
	laio__uring_unlock();
	last_handle = 0;
	__atomic_store_n(&started, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&start_lock);
}

static void register_atfork(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static const char *disabled_hint(void)
{
	FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
	int v = 0;

	if (!f)
		return "";
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v ? ", sysctl kernel.io_uring_disabled is set" : "";
}

static int start_locked(void)
{
	const char *want = getenv("LAIO_BACKEND");
	int r;

	r = laio__queue_init();
	if (r < 0)
		return r;
	backend = LAZY;
	if (want && strcmp(want, "eager") == 0) {
		backend = EAGER;
	} else {
		if (want && *want && strcmp(want, "lazy") != 0)
			note("laio: LAIO_BACKEND=%s is neither eager nor lazy; using lazy\n", want);
		r = laio__uring_init();
		if (r < 0) {
			note("laio: io_uring unavailable (%s%s); using the eager back end, "
			     "every call on a helper thread\n", strerror(-r), disabled_hint());
			backend = EAGER;
		}
	}
	return 0;
}

static int start(void)
{
	int r = 0;

	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		return 0;
	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&start_lock);
	if (!started) {
		r = start_locked();
		if (r == 0)
			__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&start_lock);
	return r;
}

static long raw(long nr, const long a[6])
{
	long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);

	return r == -1 ? -errno : r;
}

/* Run on a helper; *h names it. */
static long to_pool(long nr, const long a[6], laio_handle_t *h)
{
	laio_handle_t mine = laio__new_handle();
	int r;

	r = laio__reserve();
	if (r < 0)
		return r;
	/* Outstanding before the helper can complete it (and a poller take it). */
	laio__commit();
	r = laio__pool_start(nr, a, mine);
	if (r < 0) {
		laio__uncommit();	/* not started: nothing will complete */
		return r;
	}
	*h = mine;
	return 0;
}

static long to_uring(enum laio__kind k, long nr, const long a[6], const long ua[6],
		     int async, laio_handle_t *h)
{
	long r;

	if (laio__uring_supports(k)) {
		r = laio__uring_call(k, ua, async, h);
		if (*h >= 0)
			return r;
	}
	return to_pool(nr, a, h);
}

/* A regular file or block device: data that RWF_NOWAIT refuses is not in
 * the page cache (or its blocks are not allocated), not merely not ready. */
static int is_file(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

static int nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* A socket, pipe or terminal in non-blocking mode: EAGAIN is the answer. */
static int nonblocking_stream(int fd)
{
	return nonblocking(fd) && !is_file(fd);
}

/*
 * A read of a regular file that RWF_NOWAIT cut short of the request before
 * the end of the file: the rest is not in the page cache, and the direct
 * call would have waited for it and returned it all, so the whole read goes
 * to io_uring. A read at the file position (off -1) has moved the position
 * past the part it got; it is put back first, so that io_uring reads from
 * where the call started. (Another thread reading at the same descriptor's
 * position in that instant could see it moved; the direct call's kernel
 * lock would have kept them apart. If the position cannot be put back, the
 * short count stands.)
 */
static int cut_short(int fd, const struct iovec *iov, int cnt, long off, long r)
{
	struct stat st;
	size_t want = 0;
	off_t end;

	if (r <= 0)
		return 0;
	for (int i = 0; i < cnt; i++)
		want += iov[i].iov_len;
	if ((size_t)r >= want || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (off >= 0)
		return off + r < st.st_size;
	end = lseek(fd, 0, SEEK_CUR);
	return end >= 0 && end < st.st_size && lseek(fd, end - r, SEEK_SET) == end - r;
}

/* read, pread64, readv, write, pwrite64, writev. off -1: file position. */
static long rw(long nr, const long a[6], int write, int vec, long off, laio_handle_t *h)
{
	struct iovec one = { (void *)a[1], (size_t)a[2] };
	const struct iovec *iov = vec ? (const struct iovec *)a[1] : &one;
	int cnt = vec ? (int)a[2] : 1;
	long ua[6] = { a[0], a[1], a[2], off, 0, 0 };
	enum laio__kind k;
	long r;
	int file;

	r = write ? pwritev2((int)a[0], iov, cnt, off, RWF_NOWAIT)
		  : preadv2((int)a[0], iov, cnt, off, RWF_NOWAIT);
	if (r >= 0 && (write || !cut_short((int)a[0], iov, cnt, off, r)))
		return r;
	if (r >= 0) {
		/* Cut short (a regular file): the whole read again, in the background. */
		r = -EAGAIN;
		file = 1;
	} else {
		r = -errno;
		if (r != -EAGAIN && r != -EOPNOTSUPP)
			return r;
		file = is_file((int)a[0]);
	}
	if (r == -EAGAIN && !file && nonblocking((int)a[0]))
		return r;
	if (write)
		k = vec ? LAIO__WRITEV : LAIO__WRITE;
	else
		k = vec ? LAIO__READV : LAIO__READ;
	return to_uring(k, nr, a, ua, file, h);
}

/* recvfrom(fd, buf, len, flags, addr, addrlen), sendto likewise. */
static long sock(long nr, const long a[6], int send, laio_handle_t *h)
{
	long b[6] = { a[0], a[1], a[2], a[3] | MSG_DONTWAIT, a[4], a[5] };
	long ua[6] = { a[0], a[1], a[2], a[3], 0, 0 };
	long r;

	r = raw(nr, b);
	if (r != -EAGAIN || (a[3] & MSG_DONTWAIT) || nonblocking_stream((int)a[0]))
		return r;
	if (a[4])
		return to_pool(nr, a, h);
	return to_uring(send ? LAIO__SEND : LAIO__RECV, nr, a, ua, 0, h);
}

/*
 * Path buffers that just resolved from the dentry cache in this thread.
 * Keyed by (dirfd, buffer address, nofollow), never by the bytes: reading a
 * caller's path could fault where the system call would return EFAULT. Any
 * open or stat of a buffer that does not resolve from the cache forgets it,
 * so a buffer refilled with another path is probed again after its next
 * open. A wrong guess (a buffer refilled without one, or dentries evicted
 * within RECENT_NS) only lets one stat wait inline; its result is the
 * system call's either way.
 */
#define RECENT 8
#define RECENT_NS 50000000LL	/* 50 ms */
static __thread struct recent {
	const char *path;
	long long at;
	int dirfd, nofollow;
} recent[RECENT];
static __thread unsigned recent_next;

static long long coarse_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct recent *recent_find(int dirfd, const char *path, int nofollow)
{
	for (unsigned i = 0; i < RECENT; i++)
		if (recent[i].path == path && recent[i].dirfd == dirfd && recent[i].nofollow == nofollow)
			return &recent[i];
	return NULL;
}

static void remember(int dirfd, const char *path, int nofollow)
{
	struct recent *r = recent_find(dirfd, path, nofollow);

	if (!r)
		r = &recent[recent_next++ % RECENT];
	*r = (struct recent){ .path = path, .at = coarse_ns(), .dirfd = dirfd, .nofollow = nofollow };
}

static void forget(const char *path)
{
	for (unsigned i = 0; i < RECENT; i++)
		if (recent[i].path == path)
			recent[i].path = NULL;
}

static int recently_cached(int dirfd, const char *path, int nofollow)
{
	struct recent *r = path ? recent_find(dirfd, path, nofollow) : NULL;

	return r && coarse_ns() - r->at < RECENT_NS;
}

/* Does the path resolve from the dentry cache? 1 yes, 0 no (would block). */
static int path_cached(int dirfd, const char *path, int nofollow)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
		.resolve = RESOLVE_CACHED,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	if (fd >= 0) {
		close((int)fd);
		return 1;
	}
	/* Any other failure came from the cache (or is the call's own error). */
	return errno != EAGAIN && errno != ENOSYS;
}

/*
 * open, openat: openat2() with RESOLVE_CACHED first, for opens that create
 * nothing. When every component is in the dentry cache it opens the file
 * in one call (what io_uring's inline try would do, without a ring round
 * trip); otherwise, or if openat2 refuses the flags, io_uring decides.
 * Only a success is taken: a failure is left to io_uring, whose result is
 * exactly openat's.
 */
static long cached_open(long nr, const long a[6], const long ua[6], laio_handle_t *h)
{
	int flags = (int)ua[2];

	if (!(flags & (O_CREAT | O_TRUNC | __O_TMPFILE))) {
		struct open_how how = { .flags = (unsigned int)flags, .resolve = RESOLVE_CACHED };
		long fd = syscall(SYS_openat2, (int)ua[0], (const char *)ua[1], &how, sizeof(how));

		if (fd >= 0) {
			remember((int)ua[0], (const char *)ua[1], !!(flags & O_NOFOLLOW));
			return fd;
		}
	}
	forget((const char *)ua[1]);
	return to_uring(LAIO__OPENAT, nr, a, ua, 0, h);
}

/* statx, stat, lstat, newfstatat: inline when the path is cached. */
static long stat_family(long nr, const long a[6], int dirfd, long path, int nofollow,
			laio_handle_t *h)
{
	const char *p = (const char *)path;

	if (recently_cached(dirfd, p, nofollow))
		return raw(nr, a);
	if (path_cached(dirfd, p, nofollow)) {
		remember(dirfd, p, nofollow);
		return raw(nr, a);
	}
	forget(p);
	if (nr == SYS_statx)
		return to_uring(LAIO__STATX, nr, a, a, 0, h);
	return to_pool(nr, a, h);
}

static long lazy(long nr, const long a[6], laio_handle_t *h)
{
	long ua[6] = { a[0], a[1], a[2], a[3], a[4], a[5] };

	switch (nr) {
	case SYS_getpid: case SYS_getppid: case SYS_gettid:
	case SYS_getuid: case SYS_geteuid: case SYS_getgid: case SYS_getegid:
	case SYS_getpgrp: case SYS_getpgid: case SYS_getsid: case SYS_umask:
	case SYS_lseek: case SYS_dup: case SYS_dup2: case SYS_dup3:
	case SYS_clock_gettime: case SYS_gettimeofday: case SYS_time:
	case SYS_getrusage: case SYS_uname: case SYS_socket: case SYS_pipe2:
	case SYS_eventfd2: case SYS_getsockname: case SYS_getpeername:
	case SYS_getsockopt:
		return raw(nr, a);
	case SYS_read:
		return rw(nr, a, 0, 0, -1, h);
	case SYS_readv:
		return rw(nr, a, 0, 1, -1, h);
	case SYS_pread64:
		/* preadv2 would take -1 as "file position": let the call say EINVAL. */
		return a[3] < 0 ? raw(nr, a) : rw(nr, a, 0, 0, a[3], h);
	case SYS_write:
		return rw(nr, a, 1, 0, -1, h);
	case SYS_writev:
		return rw(nr, a, 1, 1, -1, h);
	case SYS_pwrite64:
		return a[3] < 0 ? raw(nr, a) : rw(nr, a, 1, 0, a[3], h);
	case SYS_recvfrom:
		return sock(nr, a, 0, h);
	case SYS_sendto:
		return sock(nr, a, 1, h);
	case SYS_accept:
	case SYS_accept4:
		if (nonblocking_stream((int)a[0]))
			return raw(nr, a);
		ua[3] = nr == SYS_accept ? 0 : a[3];
		return to_uring(LAIO__ACCEPT, nr, a, ua, 0, h);
	case SYS_open:
		ua[0] = AT_FDCWD;
		ua[1] = a[0];
		ua[2] = a[1];
		ua[3] = a[2];
		return cached_open(nr, a, ua, h);
	case SYS_openat:
		return cached_open(nr, a, ua, h);
	case SYS_close:
		return to_uring(LAIO__CLOSE, nr, a, ua, 0, h);
	case SYS_fsync:
	case SYS_fdatasync:
		ua[1] = nr == SYS_fdatasync;
		return to_uring(LAIO__FSYNC, nr, a, ua, 0, h);
	case SYS_statx:
		return stat_family(nr, a, (int)a[0], a[1], a[2] & AT_SYMLINK_NOFOLLOW, h);
	case SYS_stat:
	case SYS_lstat:
		return stat_family(nr, a, AT_FDCWD, a[0], nr == SYS_lstat, h);
	case SYS_newfstatat:
		return stat_family(nr, a, (int)a[0], a[1], a[3] & AT_SYMLINK_NOFOLLOW, h);
	default:
		return to_pool(nr, a, h);
	}
}

EXPORT long laio_syscall(long number, ...)
{
	int saved = errno;
	laio_handle_t h = 0;
	va_list ap;
	long a[6], r;

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);

	r = start();
	if (r == 0)
		r = backend == EAGER ? to_pool(number, a, &h) : lazy(number, a, &h);
	if (h > 0) {
		last_handle = h;
		errno = EINPROGRESS;
		return -1;
	}
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	errno = saved;	/* probes on the way may have set it */
	return r;
}

EXPORT laio_handle_t laio_gethandle(void)
{
	return last_handle;
}

EXPORT int laio_poll(struct laio_completion *c, int n, const struct timespec *timeout)
{
	struct timespec deadline, now;
	long outstanding;
	int r, k;

	if (!c || n < 1 || (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
					timeout->tv_nsec >= 1000000000L))) {
		errno = EINVAL;
		return -1;
	}
	r = start();
	if (r < 0) {
		errno = -r;
		return -1;
	}
	if (timeout) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += timeout->tv_sec;
		deadline.tv_nsec += timeout->tv_nsec;
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_nsec -= 1000000000L;
			deadline.tv_sec++;
		}
	}
	for (;;) {
		int expired = 0;

		if (backend == LAZY)
			laio__uring_reap();
		if (timeout) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			expired = now.tv_sec > deadline.tv_sec ||
				  (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
		}
		k = laio__take(c, n, &outstanding, !expired);
		if (k > 0 || outstanding == 0 || expired)
			return k;
		laio__wait(timeout ? &deadline : NULL);
	}
}

EXPORT const char *laio_backend(void)
{
	if (start() < 0)
		return NULL;
	return backend == EAGER ? "eager" : "lazy";
}
