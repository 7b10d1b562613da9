/*
 * t_laio_threads.c - thread-safety as laio(3) documents it, on both back
 * ends: 4 threads each issue 150 calls that go to the background (recv on
 * their own socket, fed by the main thread) and inline calls, and all 4 poll
 * the one process-wide completion queue. Every completion is collected
 * exactly once by some thread; laio_gethandle() is per thread (a thread
 * that started nothing gets 0). A thread that exits with an operation in
 * the background: still exactly one completion, the result (eager) or
 * ECANCELED (lazy: the kernel cancels an exiting thread's io_uring
 * requests, laio(3) "THREADS").
 */
#include "ltest.h"

#include <pthread.h>
#include <sys/socket.h>

#define THREADS 4
#define PER 150
#define ALL (THREADS * PER)

static laio_handle_t handles[ALL];
static int collected[ALL];
static int sv[THREADS][2];
static char bufs[ALL];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int total;
static pthread_barrier_t started;

static void record(struct laio_completion *c, int n)
{
	pthread_mutex_lock(&lock);
	for (int k = 0; k < n; k++) {
		int i = 0;

		while (i < ALL && handles[i] != c[k].laio_handle)
			i++;
		CHECK(i < ALL);
		CHECK(c[k].laio_return_value == 1);
		collected[i]++;
		total++;
	}
	pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
	int t = (int)(long)arg;
	struct laio_completion c[8];
	struct outcome o;

	CHECK(laio_gethandle() == 0);
	for (int j = 0; j < PER; j++) {
		int i = t * PER + j;

		pthread_mutex_lock(&lock);
		start_call(&o, SYS_recvfrom, sv[t][0], &bufs[i], 1, 0, 0, 0);
		CHECK(o.background);
		handles[i] = o.handle;
		pthread_mutex_unlock(&lock);
		CHECK(laio_gethandle() == handles[i]);
		if (lazy())
			CHECK(laio_syscall(SYS_gettid) == gettid());
	}
	pthread_barrier_wait(&started);
	for (;;) {
		struct timespec ms = { 0, 1000000L };
		int n, done;

		n = laio_poll(c, 8, &ms);
		CHECK(n >= 0);
		record(c, n);
		pthread_mutex_lock(&lock);
		done = total == ALL;
		pthread_mutex_unlock(&lock);
		if (done)
			return NULL;
	}
}

static int exit_sv[2];
static char exit_buf[4];
static laio_handle_t exit_handle;

static void *exits_early(void *arg)
{
	struct outcome o;

	start_call(&o, SYS_recvfrom, exit_sv[0], exit_buf, sizeof(exit_buf), 0, 0, 0);
	CHECK(o.background);
	exit_handle = o.handle;
	return arg;
}

static void exiting_thread(void)
{
	struct timespec ten = { 10, 0 }, zero = { 0, 0 };
	struct laio_completion c[2];
	pthread_t tid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, exit_sv) == 0);
	CHECK(pthread_create(&tid, NULL, exits_early, NULL) == 0);
	CHECK(pthread_join(tid, NULL) == 0);
	CHECK(write(exit_sv[1], "ok", 2) == 2);
	CHECK(laio_poll(c, 2, &ten) == 1);
	CHECK(c[0].laio_handle == exit_handle);
	if (lazy())
		CHECK(c[0].laio_return_value == -1 && c[0].laio_errno == ECANCELED);
	else
		CHECK(c[0].laio_return_value == 2 && memcmp(exit_buf, "ok", 2) == 0);
	CHECK(laio_poll(c, 2, &zero) == 0);
	close(exit_sv[0]);
	close(exit_sv[1]);
}

static void body(void)
{
	pthread_t tid[THREADS];

	exiting_thread();

	total = 0;
	memset(collected, 0, sizeof(collected));
	CHECK(pthread_barrier_init(&started, NULL, THREADS + 1) == 0);
	for (int t = 0; t < THREADS; t++)
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[t]) == 0);
	for (int t = 0; t < THREADS; t++)
		CHECK(pthread_create(&tid[t], NULL, worker, (void *)(long)t) == 0);
	pthread_barrier_wait(&started);
	CHECK(laio_gethandle() == 0);
	for (int j = 0; j < PER; j++)
		for (int t = 0; t < THREADS; t++)
			CHECK(write(sv[t][1], "x", 1) == 1);
	for (int t = 0; t < THREADS; t++)
		CHECK(pthread_join(tid[t], NULL) == 0);
	for (int i = 0; i < ALL; i++)
		CHECK(collected[i] == 1 && bufs[i] == 'x');
	{
		struct timespec zero = { 0, 0 };
		struct laio_completion c;

		CHECK(laio_poll(&c, 1, &zero) == 0);
	}
	for (int t = 0; t < THREADS; t++) {
		close(sv[t][0]);
		close(sv[t][1]);
	}
}

int main(void)
{
	return for_each_backend(body);
}
