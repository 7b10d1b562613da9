/*
 * laio.h - public interface of liblaio, lazy asynchronous I/O (paper 002's
 * LAIO API) for Linux.
 *
 * An event-driven program issues any system call through laio_syscall(). If
 * the call completes without blocking, laio_syscall() behaves exactly like
 * syscall(2): it returns the result, or -1 with errno set. If the call would
 * block, laio_syscall() returns -1 with errno EINPROGRESS and the call goes on
 * in the background; laio_gethandle() then names it, and laio_poll() later
 * returns its completion (handle, return value, errno) exactly once. A call
 * that completed inline never produces a completion.
 *
 * The back end (lazy: io_uring with a helper-thread pool for what io_uring
 * cannot express; eager: every call on a helper thread, the liblaiogen design)
 * is chosen at the first call; LAIO_BACKEND=eager|lazy overrides it. Which
 * calls count as "would block", thread-safety and fork behaviour: laio(3).
 */
#ifndef LAIO_LAIO_H
#define LAIO_LAIO_H

#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Names one background operation; positive, never reused in a process. */
typedef long laio_handle_t;

/* The completion of one background operation, as laio_poll() returns it. */
struct laio_completion {
	laio_handle_t laio_handle;	/* what laio_gethandle() returned for it */
	long laio_return_value;		/* the call's return value (-1 on error) */
	int laio_errno;			/* the call's errno when it failed, else 0 */
};

/*
 * Issues system call `number` (SYS_* from <sys/syscall.h>) with up to six
 * arguments. Returns its result, or -1 with errno: the call's own errno, or
 * EINPROGRESS when it continues in the background. Buffers and other memory
 * the call uses must stay valid until its completion has been collected.
 */
long laio_syscall(long number, ...);

/*
 * The handle of the last operation the calling thread put in the background
 * (the last laio_syscall() of this thread that returned EINPROGRESS); 0 when
 * this thread has started none.
 */
laio_handle_t laio_gethandle(void);

/*
 * Collects up to n completions into c. Waits while none is ready and
 * operations are outstanding, at most *timeout (NULL: no limit). Returns the
 * number collected (0 on timeout, or at once when no operation is
 * outstanding), or -1 with errno EINVAL (c NULL, n < 1, timeout invalid).
 */
int laio_poll(struct laio_completion *c, int n, const struct timespec *timeout);

/*
 * The back end in use, "lazy" or "eager" (starts the library if needed).
 * For tests and benchmarks that must say what they measured.
 */
const char *laio_backend(void);

#ifdef __cplusplus
}
#endif

#endif
