/*
 * intercept.c - the libc entry points libdeception.so exports, and the one
 * piece of logic they share: "before the real call, make sure the range is in
 * the page cache".
 *
 * Every read-like wrapper follows the same shape:
 *
 *   enter()         re-entrancy guard, lazy init, mode off -> straight to libc
 *   before_range()  fd kind from the table (fstat once per fd); sockets, pipes,
 *                   devices leave here. Offset (lseek for read/readv/NULL
 *                   sendfile offsets), length bounded by LIBCEPTION_MAX_REQUEST,
 *                   residency check, and on a miss: FETCH from the daemon
 *                   (full, serialize), in-process pread (prefetch) or nothing
 *                   (track). Restores errno.
 *   real call       exactly the arguments given; its return value and errno
 *                   are what the application sees.
 *   leave()         statistics (when enabled), preserving errno.
 *
 * The guard covers only the shim's own work, not the real call, so a thread
 * cancelled inside a blocking real read leaves nothing behind, and a signal
 * handler that reads during the shim's own work goes straight to libc.
 *
 * User memory the kernel would validate (iovec arrays, sendfile's offset
 * pointer) is never dereferenced blindly but read with lcp__read_user
 * (usermem.c): a bad pointer must give the application EFAULT from libc, not
 * a crash in the shim.
 *
 * Real functions come from lcp__real(fn) (libc.c): found with dlsym(RTLD_NEXT)
 * at start-up and, for calls that come earlier, on first use. A symbol libc
 * lacks makes the wrapper fail with ENOSYS, as a missing syscall would.
 *
 * A call that leaves per-thread state behind (a kept daemon connection, a
 * prefetch buffer) arms the thread-exit hook (thread.c) that frees it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

#include "deception.h"

#define LCP_EXPORT __attribute__((visibility("default")))

#ifndef __OPEN_NEEDS_MODE
#define __OPEN_NEEDS_MODE(flags) (((flags) & O_CREAT) != 0 || ((flags) & O_TMPFILE) == O_TMPFILE)
#endif

/* Fortified entry points (declared by glibc only under _FORTIFY_SOURCE). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t nbytes, off64_t offset, size_t buflen);

static long enosys(void)
{
	errno = ENOSYS;
	return -1;
}

/* ---- the shared path -------------------------------------------------- */

struct call {
	enum lcp__fn fn;
	int saved_errno;
	int residency; /* enum lcp__residency, or -1 when not checked */
	int stats;
	struct lcp__timer timer;
};

/* 1: the shim takes part in this call (guard held); 0: straight to libc. */
static inline int enter(struct call *c, enum lcp__fn fn)
{
	if (LCP__UNLIKELY(lcp__guard != 0))
		return 0;
	if (LCP__UNLIKELY(!__atomic_load_n(&lcp__initialised, __ATOMIC_ACQUIRE))) {
		lcp__init();
		if (!__atomic_load_n(&lcp__initialised, __ATOMIC_ACQUIRE))
			return 0;
	}
	if (lcp__cfg.mode == LCP_MODE_OFF)
		return 0;
	lcp__guard++;
	c->fn = fn;
	c->saved_errno = errno;
	c->residency = -1;
	c->stats = lcp__cfg.stats_enabled;
	if (c->stats)
		c->timer.start_ns = lcp__now_ns();
	return 1;
}

/* End of the shim's own work: release the guard, give errno back. */
static inline void settle(struct call *c)
{
	lcp__guard--;
	errno = c->saved_errno;
}

/* After the real call: statistics. Returns ret, errno untouched. */
static inline int64_t leave(struct call *c, int64_t ret)
{
	if (c->stats) {
		int saved = errno;

		lcp__stats_call(c->fn, &c->timer, ret, c->residency);
		errno = saved;
	}
	return ret;
}

/* Total length of an iovec array, or -errno if libc will refuse it anyway. */
static int64_t iov_total(const struct iovec *iov, int iovcnt)
{
	struct iovec chunk[32];
	uint64_t total = 0;

	if (iovcnt <= 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	for (int done = 0; done < iovcnt;) {
		int n = iovcnt - done < 32 ? iovcnt - done : 32;
		int err = lcp__read_user(chunk, iov + done, (size_t)n * sizeof(struct iovec));

		if (err < 0)
			return err;
		for (int i = 0; i < n; i++) {
			if ((ssize_t)chunk[i].iov_len < 0)
				return -EINVAL;
			total += chunk[i].iov_len;
			if (total > (uint64_t)SSIZE_MAX)
				return -EINVAL;
		}
		done += n;
	}
	return (int64_t)total;
}

static struct lcp__file_id file_id(const struct lcp__file *file)
{
	return (struct lcp__file_id){ file->dev, file->ino, file->size, file->change_ns };
}

/*
 * Remember that [start, end) of the file behind fd is resident, for
 * LIBCEPTION_WINDOW_MS: only for files the process cannot check itself, whose
 * every check would otherwise be a daemon round trip.
 */
static void remember_window(const struct lcp__file *file, uint64_t start, uint64_t end)
{
	struct lcp__file_id id;

	if (lcp__cfg.window_ns == 0 || end <= start || !file->have_stat)
		return;
	id = file_id(file);
	lcp__fdtab_set_window(file->fd, &id, start, end, lcp__now_ns() + lcp__cfg.window_ns);
}

/* Is [off, off+len) inside fd's window? The range is clamped to the file's
 * size first: a call that asks past end of file reads only up to it. */
static int in_window(const struct lcp__file *file, uint64_t off, uint64_t len)
{
	struct lcp__file_id id;

	if (lcp__cfg.window_ns == 0 || !file->have_stat || off >= file->size)
		return 0;
	id = file_id(file);
	if (len > file->size - off)
		len = file->size - off;
	return lcp__fdtab_in_window(file->fd, &id, off, len, lcp__now_ns());
}

static int ask_daemon(struct lcp__file *file, uint16_t op, uint64_t off, uint64_t len, uint32_t call_kind,
		      int local_verdict)
{
	struct lcp_reply reply;
	uint32_t flags = (op == LCP_OP_FETCH && lcp__cfg.mode == LCP_MODE_SERIALIZE) ? LCP_REQ_NO_PREFETCH : 0;

	if (lcp__daemon_request(op, file->fd, off, len, flags, call_kind, &reply) < 0)
		return local_verdict;
	lcp__thread_arm(); /* a connection is kept: close it at thread exit */
	if (reply.status < 0) {
		/* The daemon refused the fd: if it is no longer a regular file,
		 * fstat records that so we stop asking. */
		file->have_stat = 0;
		(void)lcp__file_stat(file);
		return local_verdict;
	}
	if (local_verdict == LCP_RES_UNKNOWN) {
		lcp__stats_count(LCP_CTR_CHECK_DAEMON, 1);
		if ((reply.flags & LCP_REP_RESIDENT) || op == LCP_OP_FETCH) {
			/* A FETCH answered without error has made the range
			 * resident; a daemon that lets us learn residency says
			 * how far past it the resident run goes (what it read,
			 * or found resident up to its prefetch size), so a
			 * forward walk asks once per window, not per call. */
			uint64_t end = off + len;

			if (reply.resident_end > end)
				end = reply.resident_end;
			remember_window(file, off, end);
		}
		return (reply.flags & LCP_REP_RESIDENT) ? LCP_RES_HIT : LCP_RES_MISS;
	}
	return local_verdict;
}

static int prefetch_in_process(struct lcp__file *file, uint64_t off, uint64_t len, int remember)
{
	int64_t got;

	if (lcp__file_stat(file) < 0)
		return -1;
	lcp__thread_arm(); /* the scratch buffer goes at thread exit */
	got = lcp__prefetch_range(file, off, len);
	if (got < 0)
		return -1;
	if (remember)
		remember_window(file, off, off + (uint64_t)got);
	return 0;
}

/*
 * O_DIRECT reads bypass the cache, so a fetch would only read the same bytes
 * twice (and the daemon's pread through the shared O_DIRECT file description
 * would not fill the cache either): such fds are left to libc. But the flag
 * comes and goes with fcntl(F_SETFL) (nginx's "directio" sets it after open),
 * so the verdict is never final: an fd left alone for O_DIRECT is marked
 * OTHER with DIRECT_MARK and its flags are read again on each call (one fcntl
 * beside an uncached read), and a REGULAR fd's flags are read again on each
 * miss, before anything is fetched.
 */
#define DIRECT_MARK LCP_METHOD_CACHESTAT

static int is_direct(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		return -errno;
	if (flags & O_DIRECT) {
		lcp__fdtab_set(fd, LCP_FD_OTHER, DIRECT_MARK);
		return 1;
	}
	return 0;
}

/* Must the shim leave fd to libc at once, from its table entry alone? */
static int left_to_libc(uint32_t state)
{
	return lcp__fd_kind(state) == LCP_FD_OTHER && lcp__fd_method(state) != DIRECT_MARK;
}

/*
 * First look at an fd: a regular file read through the page cache becomes
 * REGULAR; O_DIRECT ones are left to libc (above). 0, or -errno when libc
 * alone should answer.
 */
static int classify(struct lcp__file *file)
{
	int err = lcp__file_stat(file); /* marks non-regular fds OTHER */

	if (err < 0)
		return err;
	err = is_direct(file->fd);
	if (err != 0)
		return err < 0 ? err : -ENOTSUP;
	lcp__fdtab_set(file->fd, LCP_FD_REGULAR, LCP_METHOD_UNLEARNED);
	return 0;
}

/*
 * Make [off, off+len) of fd resident if it is a regular file (see the top of
 * the file). have_offset == 0 means "at the current file position".
 */
static void before_range(struct call *c, int fd, int have_offset, int64_t off, uint64_t len, uint32_t call_kind)
{
	uint32_t state = lcp__fdtab_get(fd);
	struct lcp__file file = { .fd = fd };
	enum lcp__method method = LCP_METHOD_UNLEARNED;
	int verdict;

	switch (lcp__fd_kind(state)) {
	case LCP_FD_OTHER:
		if (left_to_libc(state) || classify(&file) < 0)
			return;
		break;
	case LCP_FD_SHIM:
		/* Our socket, or a number that was ours until it was closed
		 * behind our back (close_range) and reused for a file opened
		 * where we do not see it (fopen): look again. Marking our own
		 * socket OTHER is harmless, the connection re-marks it. */
		if (classify(&file) < 0)
			return;
		break;
	case LCP_FD_UNKNOWN:
		if (fd < 0 || classify(&file) < 0)
			return; /* bad fd or not a regular file: libc answers */
		break;
	case LCP_FD_REGULAR:
		break;
	}
	if (!have_offset) {
		off = lseek(fd, 0, SEEK_CUR);
		if (off < 0)
			return;
	}
	if (off < 0 || len == 0)
		return;
	if (len > lcp__cfg.max_request)
		len = lcp__cfg.max_request;

	verdict = lcp__check_local(&file, (uint64_t)off, len, &method);
	if (verdict < 0)
		return;
	if (method == LCP_METHOD_CACHESTAT)
		lcp__stats_count(LCP_CTR_CHECK_CACHESTAT, 1);
	else if (method == LCP_METHOD_MINCORE)
		lcp__stats_count(LCP_CTR_CHECK_MINCORE, 1);
	else if (verdict == LCP_RES_UNKNOWN && in_window(&file, (uint64_t)off, len)) {
		/* Inside a range the daemon confirmed moments ago. */
		lcp__stats_count(LCP_CTR_CHECK_WINDOW, 1);
		verdict = LCP_RES_HIT;
	}
	if (verdict != LCP_RES_HIT && lcp__cfg.mode != LCP_MODE_TRACK && is_direct(fd) != 0)
		return; /* O_DIRECT set since the fd was classified */

	switch (lcp__cfg.mode) {
	case LCP_MODE_FULL:
	case LCP_MODE_SERIALIZE:
		/* FETCH answers at once when resident: one round trip either way. */
		if (verdict != LCP_RES_HIT)
			verdict = ask_daemon(&file, LCP_OP_FETCH, (uint64_t)off, len, call_kind, verdict);
		break;
	case LCP_MODE_TRACK:
		if (verdict == LCP_RES_UNKNOWN)
			verdict = ask_daemon(&file, LCP_OP_CHECK, (uint64_t)off, len, call_kind, verdict);
		break;
	case LCP_MODE_PREFETCH:
		/* Untrusted residency: prefetch, and remember the window so
		 * the calls inside it do not prefetch it again. */
		if (verdict == LCP_RES_MISS || verdict == LCP_RES_UNKNOWN)
			(void)prefetch_in_process(&file, (uint64_t)off, len, verdict == LCP_RES_UNKNOWN);
		break;
	case LCP_MODE_OFF:
		break;
	}
	if (verdict == LCP_RES_UNKNOWN)
		lcp__stats_count(LCP_CTR_CHECK_UNKNOWN, 1);
	c->residency = verdict;
}

/* ---- open family: only keep the fd table honest ------------------------ */

#define OPEN_MODE(flags, mode)                                 \
	do {                                                   \
		if (__OPEN_NEEDS_MODE(flags)) {                \
			va_list ap;                            \
			va_start(ap, flags);                   \
			mode = va_arg(ap, mode_t);             \
			va_end(ap);                            \
		}                                              \
	} while (0)

/*
 * Every open: the real function of fn, called with the arguments its
 * signature takes (dirfd for the *at forms, mode for the non-fortified ones).
 */
static int open_common(enum lcp__fn fn, int dirfd, const char *path, int flags, mode_t mode)
{
	void *real = lcp__real(fn);
	struct call c;
	int active, ret;

	if (real == NULL)
		return (int)enosys();
	active = enter(&c, fn);
	if (active)
		settle(&c);
	switch (fn) {
	case LCP_FN_OPENAT:
	case LCP_FN_OPENAT64:
		ret = ((int (*)(int, const char *, int, ...))real)(dirfd, path, flags, mode);
		break;
	case LCP_FN_OPEN_2:
	case LCP_FN_OPEN64_2:
		ret = ((int (*)(const char *, int))real)(path, flags);
		break;
	case LCP_FN_OPENAT_2:
	case LCP_FN_OPENAT64_2:
		ret = ((int (*)(int, const char *, int))real)(dirfd, path, flags);
		break;
	default: /* open, open64 */
		ret = ((int (*)(const char *, int, ...))real)(path, flags, mode);
		break;
	}
	/* A new file behind that number: whatever the table said is stale. */
	if (ret >= 0)
		lcp__fdtab_forget(ret);
	if (active)
		leave(&c, ret < 0 ? -1 : 0);
	return ret;
}

LCP_EXPORT int open(const char *path, int flags, ...)
{
	mode_t mode = 0;

	OPEN_MODE(flags, mode);
	return open_common(LCP_FN_OPEN, AT_FDCWD, path, flags, mode);
}

LCP_EXPORT int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;

	OPEN_MODE(flags, mode);
	return open_common(LCP_FN_OPEN64, AT_FDCWD, path, flags, mode);
}

LCP_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;

	OPEN_MODE(flags, mode);
	return open_common(LCP_FN_OPENAT, dirfd, path, flags, mode);
}

LCP_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;

	OPEN_MODE(flags, mode);
	return open_common(LCP_FN_OPENAT64, dirfd, path, flags, mode);
}

LCP_EXPORT int __open_2(const char *path, int flags)
{
	return open_common(LCP_FN_OPEN_2, AT_FDCWD, path, flags, 0);
}

LCP_EXPORT int __open64_2(const char *path, int flags)
{
	return open_common(LCP_FN_OPEN64_2, AT_FDCWD, path, flags, 0);
}

LCP_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	return open_common(LCP_FN_OPENAT_2, dirfd, path, flags, 0);
}

LCP_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	return open_common(LCP_FN_OPENAT64_2, dirfd, path, flags, 0);
}

LCP_EXPORT int close(int fd)
{
	int (*real)(int) = lcp__real(LCP_FN_CLOSE);
	struct call c;
	int active, ret;

	if (real == NULL)
		return (int)enosys();
	active = enter(&c, LCP_FN_CLOSE);
	if (active)
		settle(&c);
	ret = real(fd);
	/* After the close: a concurrent open of the same number resets it too. */
	lcp__fdtab_forget(fd);
	if (active)
		leave(&c, ret);
	return ret;
}

/* ---- reads ------------------------------------------------------------ */

/*
 * One function per signature that several wrappers share; the wrappers only
 * name their enum lcp__fn. Shape: no real function -> ENOSYS; shim not taking
 * part -> the real call alone; else before_*(), settle(), real call, leave().
 */

LCP_EXPORT ssize_t read(int fd, void *buf, size_t count)
{
	ssize_t (*real)(int, void *, size_t) = lcp__real(LCP_FN_READ);
	struct call c;

	if (real == NULL)
		return enosys();
	if (!enter(&c, LCP_FN_READ))
		return real(fd, buf, count);
	before_range(&c, fd, 0, 0, count, LCP_CALL_READ);
	settle(&c);
	return leave(&c, real(fd, buf, count));
}

LCP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen)
{
	ssize_t (*real)(int, void *, size_t, size_t) = lcp__real(LCP_FN_READ_CHK);
	struct call c;

	if (real == NULL)
		return enosys();
	if (nbytes > buflen || !enter(&c, LCP_FN_READ_CHK))
		return real(fd, buf, nbytes, buflen); /* overflow: libc aborts */
	before_range(&c, fd, 0, 0, nbytes, LCP_CALL_READ);
	settle(&c);
	return leave(&c, real(fd, buf, nbytes, buflen));
}

static ssize_t pread_common(enum lcp__fn fn, int fd, void *buf, size_t count, off_t offset)
{
	ssize_t (*real)(int, void *, size_t, off_t) = lcp__real(fn);
	struct call c;

	if (real == NULL)
		return enosys();
	if (!enter(&c, fn))
		return real(fd, buf, count, offset);
	before_range(&c, fd, 1, offset, count, LCP_CALL_READ);
	settle(&c);
	return leave(&c, real(fd, buf, count, offset));
}

LCP_EXPORT ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
	return pread_common(LCP_FN_PREAD, fd, buf, count, offset);
}

LCP_EXPORT ssize_t pread64(int fd, void *buf, size_t count, off64_t offset)
{
	return pread_common(LCP_FN_PREAD64, fd, buf, count, offset);
}

static ssize_t pread_chk_common(enum lcp__fn fn, int fd, void *buf, size_t nbytes, off_t offset, size_t buflen)
{
	ssize_t (*real)(int, void *, size_t, off_t, size_t) = lcp__real(fn);
	struct call c;

	if (real == NULL)
		return enosys();
	if (nbytes > buflen || !enter(&c, fn))
		return real(fd, buf, nbytes, offset, buflen); /* overflow: libc aborts */
	before_range(&c, fd, 1, offset, nbytes, LCP_CALL_READ);
	settle(&c);
	return leave(&c, real(fd, buf, nbytes, offset, buflen));
}

LCP_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen)
{
	return pread_chk_common(LCP_FN_PREAD_CHK, fd, buf, nbytes, offset, buflen);
}

LCP_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t nbytes, off64_t offset, size_t buflen)
{
	return pread_chk_common(LCP_FN_PREAD64_CHK, fd, buf, nbytes, offset, buflen);
}

/* The iovec array is only read once the fd is known to be a regular file. */
static void before_vector(struct call *c, int fd, int have_offset, int64_t offset, const struct iovec *iov,
			  int iovcnt)
{
	uint32_t state = lcp__fdtab_get(fd);
	int64_t total;

	if (left_to_libc(state) || lcp__fd_kind(state) == LCP_FD_SHIM || fd < 0)
		return;
	if (have_offset && offset < 0)
		return;
	total = iov_total(iov, iovcnt);
	if (total <= 0)
		return;
	before_range(c, fd, have_offset, offset, (uint64_t)total, LCP_CALL_READ);
}

LCP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t (*real)(int, const struct iovec *, int) = lcp__real(LCP_FN_READV);
	struct call c;

	if (real == NULL)
		return enosys();
	if (!enter(&c, LCP_FN_READV))
		return real(fd, iov, iovcnt);
	before_vector(&c, fd, 0, 0, iov, iovcnt);
	settle(&c);
	return leave(&c, real(fd, iov, iovcnt));
}

static ssize_t preadv_common(enum lcp__fn fn, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	ssize_t (*real)(int, const struct iovec *, int, off_t) = lcp__real(fn);
	struct call c;

	if (real == NULL)
		return enosys();
	if (!enter(&c, fn))
		return real(fd, iov, iovcnt, offset);
	before_vector(&c, fd, 1, offset, iov, iovcnt);
	settle(&c);
	return leave(&c, real(fd, iov, iovcnt, offset));
}

LCP_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	return preadv_common(LCP_FN_PREADV, fd, iov, iovcnt, offset);
}

LCP_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int iovcnt, off64_t offset)
{
	return preadv_common(LCP_FN_PREADV64, fd, iov, iovcnt, offset);
}

static ssize_t preadv2_common(enum lcp__fn fn, int fd, const struct iovec *iov, int iovcnt, off_t offset,
			      int flags)
{
	ssize_t (*real)(int, const struct iovec *, int, off_t, int) = lcp__real(fn);
	struct call c;

	if (real == NULL)
		return enosys();
	if (!enter(&c, fn))
		return real(fd, iov, iovcnt, offset, flags);
	/* RWF_NOWAIT asks never to block: the shim must not block either. Only
	 * RWF_HIPRI is harmless; other flags go untouched to libc. */
	if ((flags & ~RWF_HIPRI) == 0)
		before_vector(&c, fd, offset != -1, offset, iov, iovcnt);
	settle(&c);
	return leave(&c, real(fd, iov, iovcnt, offset, flags));
}

LCP_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	return preadv2_common(LCP_FN_PREADV2, fd, iov, iovcnt, offset, flags);
}

LCP_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int iovcnt, off64_t offset, int flags)
{
	return preadv2_common(LCP_FN_PREADV64V2, fd, iov, iovcnt, offset, flags);
}

/* ---- sendfile --------------------------------------------------------- */

static ssize_t sendfile_common(enum lcp__fn fn, int out_fd, int in_fd, off_t *offset, size_t count)
{
	ssize_t (*real)(int, int, off_t *, size_t) = lcp__real(fn);
	struct call c;
	uint32_t state;

	if (real == NULL)
		return enosys();
	if (!enter(&c, fn))
		return real(out_fd, in_fd, offset, count);
	state = lcp__fdtab_get(in_fd);
	if (!left_to_libc(state) && lcp__fd_kind(state) != LCP_FD_SHIM && in_fd >= 0) {
		if (offset == NULL) {
			before_range(&c, in_fd, 0, 0, count, LCP_CALL_SENDFILE);
		} else {
			off_t start;

			if (lcp__read_user(&start, offset, sizeof(start)) == 0)
				before_range(&c, in_fd, 1, start, count, LCP_CALL_SENDFILE);
		}
	}
	settle(&c);
	return leave(&c, real(out_fd, in_fd, offset, count));
}

LCP_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	return sendfile_common(LCP_FN_SENDFILE, out_fd, in_fd, offset, count);
}

LCP_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	return sendfile_common(LCP_FN_SENDFILE64, out_fd, in_fd, offset, count);
}

/* ---- mmap of regular files: prefetch the mapped window ------------------ */

static void *mmap_common(enum lcp__fn fn, void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	void *(*real)(void *, size_t, int, int, int, off_t) = lcp__real(fn);
	struct call c;
	void *ret;

	if (real == NULL)
		return (void *)enosys();
	/* Anonymous memory (malloc, stacks, sanitizers) leaves at once. */
	if ((flags & MAP_ANONYMOUS) || fd < 0 || (prot & (PROT_READ | PROT_EXEC)) == 0 || !enter(&c, fn))
		return real(addr, length, prot, flags, fd, offset);
	before_range(&c, fd, 1, offset, length, LCP_CALL_MMAP);
	settle(&c);
	ret = real(addr, length, prot, flags, fd, offset);
	leave(&c, ret == MAP_FAILED ? -1 : (int64_t)length);
	return ret;
}

LCP_EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset)
{
	return mmap_common(LCP_FN_MMAP, addr, length, prot, flags, fd, offset);
}

LCP_EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off64_t offset)
{
	return mmap_common(LCP_FN_MMAP64, addr, length, prot, flags, fd, offset);
}

/* ---- fork: the atfork handlers (thread.c) give the child its own state --- */

LCP_EXPORT pid_t fork(void)
{
	pid_t (*real)(void) = lcp__real(LCP_FN_FORK);
	struct call c;
	int active;
	pid_t pid;

	if (real == NULL)
		return (pid_t)enosys();
	active = enter(&c, LCP_FN_FORK);
	if (active)
		settle(&c);
	pid = real();
	if (active && pid != 0)
		leave(&c, pid < 0 ? -1 : 0); /* counted by the parent only */
	return pid;
}
