/*
 * laio_int.h - internal interfaces of liblaio (the public API: <laio/laio.h>,
 * its semantics: docs/man/laio.3).
 *
 * Files, from the top of the call graph down:
 *   laio.c   the exported calls, start-up and back-end choice, fork handlers,
 *            and the decision, per call family, of how a call is tried
 *            without blocking (the lazy back end's dispatch)
 *   uring.c  the io_uring ring: submit one request, take its completion at
 *            once when the kernel completed it inline, else leave it in the
 *            background; reaping of background completions
 *   pool.c   the helper-thread pool (liblaiogen's design): one helper per
 *            outstanding call, created on demand, idle helpers reused
 *   queue.c  completions waiting for laio_poll(), the outstanding count, the
 *            eventfd that wakes pollers
 * laio.c uses all three; uring.c and pool.c use queue.c; nothing else.
 *
 * Conventions: internal functions return a result >= 0 or -errno; only the
 * exported calls set errno. Internal non-static names carry laio__.
 *
 * Locks, always taken in this order, never held across a blocking call:
 *   uring.c ring lock -> queue.c queue lock;  pool.c pool lock alone.
 */
#ifndef LAIO_INT_H
#define LAIO_INT_H

#include <laio/laio.h>

/* queue.c */
int laio__queue_init(void);		/* 0 or -errno */
void laio__queue_reset_child(void);	/* after fork, in the child */
void laio__queue_lock(void);		/* fork: prepare */
void laio__queue_unlock(void);		/* fork: parent and child */
int laio__queue_fd(void);		/* the eventfd io_uring signals too */
laio_handle_t laio__new_handle(void);
/*
 * Reserve room for one completion before a call may go to the background
 * (-ENOMEM when there is none); then either commit (it is outstanding) or
 * cancel (it completed inline).
 */
int laio__reserve(void);
void laio__commit(void);
void laio__cancel(void);
void laio__uncommit(void);	/* committed, then failed to start */
/* A background call finished: queue its completion, wake a poller. */
void laio__complete(laio_handle_t h, long ret, int err);
void laio__complete_locked(laio_handle_t h, long ret, int err); /* queue lock held */
/*
 * Take up to n queued completions; *outstanding gets the number of
 * operations started and not yet collected (after this take). With
 * will_wait, when it took none and some are outstanding, the caller is
 * counted as a sleeper and must call laio__wait().
 */
int laio__take(struct laio_completion *c, int n, long *outstanding, int will_wait);
/* Sleep until woken or the absolute CLOCK_MONOTONIC deadline (NULL: none). */
void laio__wait(const struct timespec *deadline);

/* pool.c */
/* Run the call on a helper; h names it. 0 or -errno (no thread). */
int laio__pool_start(long nr, const long a[6], laio_handle_t h);
void laio__pool_lock(void);
void laio__pool_unlock(void);
void laio__pool_reset_child(void);

/* uring.c: the request kinds the lazy back end sends to io_uring. */
enum laio__kind {
	LAIO__READ,	/* fd, buf, len, off (-1: file position) */
	LAIO__READV,	/* fd, iov, iovcnt, off */
	LAIO__WRITE,	/* fd, buf, len, off */
	LAIO__WRITEV,	/* fd, iov, iovcnt, off */
	LAIO__RECV,	/* fd, buf, len, flags */
	LAIO__SEND,	/* fd, buf, len, flags */
	LAIO__ACCEPT,	/* fd, addr, addrlen, flags */
	LAIO__OPENAT,	/* dirfd, path, flags, mode */
	LAIO__STATX,	/* dirfd, path, flags, mask, buf */
	LAIO__CLOSE,	/* fd */
	LAIO__FSYNC,	/* fd, datasync */
	LAIO__KINDS
};
int laio__uring_init(void);		/* 0 or -errno (io_uring unusable) */
int laio__uring_supports(enum laio__kind k);
/*
 * Submit one request and look at the completion queue at once. Returns the
 * result (>= 0 or -errno) with *h = 0 when the kernel completed it inline;
 * with *h = its handle (> 0) when it went to the background; -EAGAIN with
 * *h = -1 when the ring could not take it (the caller uses the pool).
 * async: skip io_uring's inline try (IOSQE_ASYNC), for a call the caller
 * already found would block.
 */
long laio__uring_call(enum laio__kind k, const long a[6], int async, laio_handle_t *h);
void laio__uring_reap(void);		/* move finished requests to the queue */
void laio__uring_lock(void);
void laio__uring_unlock(void);
void laio__uring_reset_child(void);

#endif
