/*
 * uring.c - the lazy back end's io_uring ring.
 *
 * One ring per process, used under one lock (submission and completion side
 * alike). A call is submitted without IOSQE_ASYNC, so io_uring_enter() first
 * tries it inline, without blocking; requests it completed that way have
 * their completion in the CQ when io_uring_enter() returns. So after each
 * submission the CQ is drained at once, still under the lock: if the new
 * request's completion is there, the call did not block and its result is
 * returned inline; otherwise the kernel handed it to io-wq or armed a poll
 * for it, and it is a background operation. Completions of earlier
 * background requests found while draining go to the completion queue.
 * A file read or write that RWF_NOWAIT already found would block goes with
 * IOSQE_ASYNC, straight to io-wq: the inline try would repeat that check,
 * and could pass only because the readahead RWF_NOWAIT started was quick.
 *
 * user_data is the operation's handle, so no memory is kept per request:
 * the kernel copies what it needs at submission (IORING_FEAT_SUBMIT_STABLE).
 * The ring has the completion queue's eventfd registered, so a poller
 * sleeping in laio__wait() wakes whenever the kernel posts a completion.
 *
 * io-wq runs a path lookup (openat, statx), fsync or close on a "bounded"
 * worker, and by default starts at most min(SQ entries, 4 x CPUs) of them
 * per thread: 8 on two CPUs. The ninth such background call would wait for
 * a worker, not for its disk, so a program with a hundred cold opens in
 * flight would have eight at the drive. The limit is raised as far as the
 * kernel lets (it caps it at RLIMIT_NPROC), so io-wq, like the eager back
 * end's pool, grows to the calls in flight. The kernel keeps the limit per
 * thread: registering it on the ring sets it for the registering thread and
 * for threads that first meet io_uring through this ring, but a thread that
 * used another ring before keeps that ring's limit. So every thread
 * registers it once, before its first submission.
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>

#include "laio_int.h"

static const int opcode[LAIO__KINDS] = {
	[LAIO__READ] = IORING_OP_READ,     [LAIO__READV] = IORING_OP_READV,
	[LAIO__WRITE] = IORING_OP_WRITE,   [LAIO__WRITEV] = IORING_OP_WRITEV,
	[LAIO__RECV] = IORING_OP_RECV,     [LAIO__SEND] = IORING_OP_SEND,
	[LAIO__ACCEPT] = IORING_OP_ACCEPT, [LAIO__OPENAT] = IORING_OP_OPENAT,
	[LAIO__STATX] = IORING_OP_STATX,   [LAIO__CLOSE] = IORING_OP_CLOSE,
	[LAIO__FSYNC] = IORING_OP_FSYNC,
};

/* Features a ring must have: no lost completions, submit-time copies, and
 * offset -1 meaning the file position (read(2), not pread(2)). */
#define NEEDED (IORING_FEAT_NODROP | IORING_FEAT_SUBMIT_STABLE | IORING_FEAT_RW_CUR_POS)

static struct {
	/* Guards ring (SQ and CQ). Taken before the queue lock. */
	pthread_mutex_t lock;
	struct io_uring ring;
	int up;
	unsigned char supported[LAIO__KINDS];
} u = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Whether this thread has raised its own io-wq limit (raise_worker_limit). */
static __thread unsigned char raised_here;

/*
 * Bounded io-wq workers: as many as the kernel allows (see the top). A
 * kernel before 5.15 has no such limit to set, and then keeps its default.
 */
static void raise_worker_limit(void)
{
	unsigned int limits[2] = { 1u << 30, 0 };	/* bounded; 0: unbounded unchanged */

	(void)io_uring_register_iowq_max_workers(&u.ring, limits);
	raised_here = 1;
}

int laio__uring_init(void)
{
	struct io_uring_params p = { .flags = IORING_SETUP_CQSIZE, .cq_entries = 8192 };
	struct io_uring_probe *probe;
	int r;

	r = io_uring_queue_init_params(64, &u.ring, &p);
	if (r < 0)
		return r;
	if ((p.features & NEEDED) != NEEDED) {
		io_uring_queue_exit(&u.ring);
		return -EOPNOTSUPP;
	}
	probe = io_uring_get_probe_ring(&u.ring);
	for (int k = 0; k < LAIO__KINDS; k++)
		u.supported[k] = probe && io_uring_opcode_supported(probe, opcode[k]);
	io_uring_free_probe(probe);
	r = io_uring_register_eventfd(&u.ring, laio__queue_fd());
	if (r < 0) {
		io_uring_queue_exit(&u.ring);
		return r;
	}
	raise_worker_limit();
	u.up = 1;
	return 0;
}

int laio__uring_supports(enum laio__kind k)
{
	return u.up && u.supported[k];
}

static void prep(struct io_uring_sqe *sqe, enum laio__kind k, const long a[6])
{
	int fd = (int)a[0];
	void *p = (void *)a[1];

	switch (k) {
	case LAIO__READ:
		io_uring_prep_read(sqe, fd, p, (unsigned)a[2], (__u64)a[3]);
		break;
	case LAIO__READV:
		io_uring_prep_readv(sqe, fd, p, (unsigned)a[2], (__u64)a[3]);
		break;
	case LAIO__WRITE:
		io_uring_prep_write(sqe, fd, p, (unsigned)a[2], (__u64)a[3]);
		break;
	case LAIO__WRITEV:
		io_uring_prep_writev(sqe, fd, p, (unsigned)a[2], (__u64)a[3]);
		break;
	case LAIO__RECV:
		io_uring_prep_recv(sqe, fd, p, (size_t)a[2], (int)a[3]);
		break;
	case LAIO__SEND:
		io_uring_prep_send(sqe, fd, p, (size_t)a[2], (int)a[3]);
		break;
	case LAIO__ACCEPT:
		io_uring_prep_accept(sqe, fd, p, (socklen_t *)a[2], (int)a[3]);
		break;
	case LAIO__OPENAT:
		io_uring_prep_openat(sqe, fd, p, (int)a[2], (mode_t)a[3]);
		break;
	case LAIO__STATX:
		io_uring_prep_statx(sqe, fd, p, (int)a[2], (unsigned)a[3], (struct statx *)a[4]);
		break;
	case LAIO__CLOSE:
		io_uring_prep_close(sqe, fd);
		break;
	case LAIO__FSYNC:
		io_uring_prep_fsync(sqe, fd, a[1] ? IORING_FSYNC_DATASYNC : 0);
		break;
	case LAIO__KINDS:
		break;
	}
}

/*
 * With both locks held: move every CQE to the completion queue except the
 * one of `mine` (0: none), whose result is returned through *res.
 */
static int drain(laio_handle_t mine, long *res)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int found = 0;

	io_uring_for_each_cqe(&u.ring, head, cqe) {
		laio_handle_t h = (laio_handle_t)cqe->user_data;

		seen++;
		if (h == 0) {
			/* a request turned into a NOP after a failed submission */
		} else if (mine && h == mine) {
			*res = cqe->res;
			found = 1;
		} else {
			laio__complete_locked(h, cqe->res < 0 ? -1 : cqe->res,
					      cqe->res < 0 ? -cqe->res : 0);
		}
	}
	io_uring_cq_advance(&u.ring, seen);
	return found;
}

long laio__uring_call(enum laio__kind k, const long a[6], int async, laio_handle_t *h)
{
	laio_handle_t mine = laio__new_handle();
	struct io_uring_sqe *sqe;
	long res = 0;
	int r, found;

	r = laio__reserve();
	if (r < 0) {
		*h = 0;
		return r;
	}
	pthread_mutex_lock(&u.lock);
	if (!raised_here)
		raise_worker_limit();
	sqe = io_uring_get_sqe(&u.ring);
	if (!sqe) {
		/* Cannot happen: every call submits its one SQE at once. */
		pthread_mutex_unlock(&u.lock);
		laio__cancel();
		*h = -1;
		return -EAGAIN;
	}
	prep(sqe, k, a);
	if (async)
		io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	io_uring_sqe_set_data64(sqe, (__u64)mine);
	/*
	 * EBUSY/EAGAIN: the CQ is full (overflowing) or the kernel is short of
	 * memory; the SQE stays queued, so drain and try again.
	 */
	while ((r = io_uring_submit(&u.ring)) < 0 &&
	       (r == -EINTR || r == -EAGAIN || r == -EBUSY)) {
		laio__queue_lock();
		drain(0, NULL);
		laio__queue_unlock();
		sched_yield();
	}
	if (r < 0) {
		/*
		 * Not retryable: the kernel took nothing, and the SQE would go with
		 * the next submission. It becomes a NOP whose completion drain()
		 * drops, and the call goes to the pool as one io_uring cannot run.
		 */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, 0);
		pthread_mutex_unlock(&u.lock);
		laio__cancel();
		*h = -1;
		return r;
	}
	laio__queue_lock();
	found = drain(mine, &res);
	laio__queue_unlock();
	if (found)
		laio__cancel();
	else
		laio__commit();
	pthread_mutex_unlock(&u.lock);
	*h = found ? 0 : mine;
	return found ? res : 0;
}

void laio__uring_reap(void)
{
	pthread_mutex_lock(&u.lock);
	if (u.up) {
		laio__queue_lock();
		drain(0, NULL);
		laio__queue_unlock();
	}
	pthread_mutex_unlock(&u.lock);
}

void laio__uring_lock(void)
{
	pthread_mutex_lock(&u.lock);
}

void laio__uring_unlock(void)
{
	pthread_mutex_unlock(&u.lock);
}

/*
 * The child must not use the parent's ring: its requests are the parent's.
 * Unmapping and closing our copy leaves the parent's ring as it is.
 */
void laio__uring_reset_child(void)
{
	if (u.up)
		io_uring_queue_exit(&u.ring);
	u.up = 0;
	/* The child's thread meets io_uring afresh (a new ring, no io-wq yet). */
	raised_here = 0;
}
