/*
 * queue.c - completions of background operations waiting for laio_poll().
 *
 * One process-wide FIFO (a growable circular array) under one lock. Room for
 * a completion is reserved before a call may go to the background, so that
 * queueing a completion never allocates and never fails: a completion is
 * never lost. `outstanding` counts operations started in the background and
 * not yet collected; laio_poll() returns at once when it is zero.
 *
 * Pollers sleep in ppoll() on an eventfd. Helpers write it when a poller
 * sleeps; io_uring writes it on every completion it posts (the ring has it
 * registered), so a poller wakes for either kind of completion.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "laio_int.h"

static struct {
	/* Guards every field below. */
	pthread_mutex_t lock;
	struct laio_completion *ring;
	long cap, head, count;	/* queued completions: ring[head..head+count) */
	long outstanding;	/* started in the background, not collected */
	long reserved;		/* room promised to calls being started */
	int sleepers;		/* pollers in laio__wait() */
	int efd;
} q = { .lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1 };

static long next_handle = 1;

laio_handle_t laio__new_handle(void)
{
	return __atomic_fetch_add(&next_handle, 1, __ATOMIC_RELAXED);
}

int laio__queue_init(void)
{
	q.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return q.efd < 0 ? -errno : 0;
}

int laio__queue_fd(void)
{
	return q.efd;
}

void laio__queue_lock(void)
{
	pthread_mutex_lock(&q.lock);
}

void laio__queue_unlock(void)
{
	pthread_mutex_unlock(&q.lock);
}

/* The child has none of the parent's background operations. */
void laio__queue_reset_child(void)
{
	free(q.ring);
	q.ring = NULL;
	q.cap = q.head = q.count = q.outstanding = q.reserved = 0;
	q.sleepers = 0;
	if (q.efd >= 0)
		close(q.efd);
	q.efd = -1;
}

/* Called with the lock held: make room for `need` completions. */
static int grow(long need)
{
	long cap = q.cap ? q.cap : 64;
	struct laio_completion *ring;

	if (need <= q.cap)
		return 0;
	while (cap < need)
		cap *= 2;
	ring = malloc(cap * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	for (long i = 0; i < q.count; i++)
		ring[i] = q.ring[(q.head + i) % q.cap];
	free(q.ring);
	q.ring = ring;
	q.cap = cap;
	q.head = 0;
	return 0;
}

int laio__reserve(void)
{
	int r;

	pthread_mutex_lock(&q.lock);
	r = grow(q.outstanding + q.reserved + 1);
	if (r == 0)
		q.reserved++;
	pthread_mutex_unlock(&q.lock);
	return r;
}

void laio__commit(void)
{
	pthread_mutex_lock(&q.lock);
	q.reserved--;
	q.outstanding++;
	pthread_mutex_unlock(&q.lock);
}

void laio__cancel(void)
{
	pthread_mutex_lock(&q.lock);
	q.reserved--;
	pthread_mutex_unlock(&q.lock);
}

static void wake(void)
{
	uint64_t one = 1;

	while (write(q.efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* A committed call could not start after all; pollers may have nothing left. */
void laio__uncommit(void)
{
	int need_wake;

	pthread_mutex_lock(&q.lock);
	q.outstanding--;
	need_wake = q.sleepers > 0;
	pthread_mutex_unlock(&q.lock);
	if (need_wake)
		wake();
}

/* Called with the lock held; returns whether a poller must be woken. */
static int push(laio_handle_t h, long ret, int err)
{
	struct laio_completion *c = &q.ring[(q.head + q.count) % q.cap];

	c->laio_handle = h;
	c->laio_return_value = ret;
	c->laio_errno = err;
	q.count++;
	return q.sleepers > 0;
}

void laio__complete(laio_handle_t h, long ret, int err)
{
	int need_wake;

	pthread_mutex_lock(&q.lock);
	need_wake = push(h, ret, err);
	pthread_mutex_unlock(&q.lock);
	if (need_wake)
		wake();
}

/*
 * For uring.c, draining the ring with the queue lock held: io_uring wrote the
 * eventfd when it posted the completion, so no poller needs waking here.
 */
void laio__complete_locked(laio_handle_t h, long ret, int err)
{
	push(h, ret, err);
}

int laio__take(struct laio_completion *c, int n, long *outstanding, int will_wait)
{
	int k = 0;

	pthread_mutex_lock(&q.lock);
	while (k < n && q.count > 0) {
		c[k++] = q.ring[q.head];
		q.head = (q.head + 1) % q.cap;
		q.count--;
	}
	q.outstanding -= k;
	*outstanding = q.outstanding;
	if (will_wait && k == 0 && q.outstanding > 0)
		q.sleepers++;	/* the caller will laio__wait() */
	pthread_mutex_unlock(&q.lock);
	return k;
}

void laio__wait(const struct timespec *deadline)
{
	struct pollfd p = { .fd = q.efd, .events = POLLIN };
	struct timespec now, left, *tp = NULL;
	uint64_t v;

	if (deadline) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = deadline->tv_sec - now.tv_sec;
		left.tv_nsec = deadline->tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_nsec += 1000000000L;
			left.tv_sec--;
		}
		if (left.tv_sec < 0)
			left.tv_sec = left.tv_nsec = 0;
		tp = &left;
	}
	/* EINTR: the caller looks again and comes back with the time left. */
	if (ppoll(&p, 1, tp, NULL) > 0)
		while (read(q.efd, &v, sizeof(v)) < 0 && errno == EINTR)
			;
	pthread_mutex_lock(&q.lock);
	q.sleepers--;
	pthread_mutex_unlock(&q.lock);
}
