/*
 * t_laio_api.c - laio_poll() and the API's contract on both back ends:
 * argument errors, returning at once with nothing outstanding, timeouts
 * (zero and finite) with an operation outstanding, partial batches,
 * completions exactly once with the handle laio_gethandle() gave, errno
 * kept on inline success and equal to the direct call's on failure.
 */
#include "ltest.h"

#include <sys/socket.h>


static void args(void)
{
	struct laio_completion c;
	struct timespec bad = { 0, 1000000000L }, neg = { -1, 0 };

	errno = 0;
	CHECK(laio_poll(NULL, 1, NULL) == -1 && errno == EINVAL);
	CHECK(laio_poll(&c, 0, NULL) == -1 && errno == EINVAL);
	CHECK(laio_poll(&c, 1, &bad) == -1 && errno == EINVAL);
	CHECK(laio_poll(&c, 1, &neg) == -1 && errno == EINVAL);
	/* Nothing outstanding: returns at once even without a timeout. */
	CHECK(laio_poll(&c, 1, NULL) == 0);
	CHECK(laio_gethandle() == 0);
}

static void errno_kept(void)
{
	struct outcome o, d;

	/* getpid: inline (lazy) leaves errno alone. */
	errno = 1234;
	o.ret = laio_syscall(SYS_getpid);
	if (lazy()) {
		CHECK(o.ret == getpid());
		CHECK(errno == 1234);
	} else {
		CHECK(o.ret == -1 && errno == EINPROGRESS);
	}
	if (!lazy())
		collect(laio_gethandle(), &o);
	CHECK(o.ret == getpid());

	/* A failing call: the same errno as the direct call. */
	direct(&d, SYS_close, -1);
	call(&o, SYS_close, -1);
	SAME(&o, &d);
	CHECK(o.err == EBADF);
	direct(&d, SYS_lseek, -1, 0, SEEK_SET);
	call(&o, SYS_lseek, -1, 0, SEEK_SET);
	SAME(&o, &d);
}

static void timeouts(void)
{
	struct timespec zero = { 0, 0 }, tenth = { 0, 100000000L }, t0;
	struct laio_completion c[2];
	struct outcome o;
	char buf[8] = { 0 };
	int sv[2];

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	start_call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, 0, 0);
	CHECK(o.background);
	CHECK(laio_gethandle() == o.handle);

	CHECK(laio_poll(c, 2, &zero) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(laio_poll(c, 2, &tenth) == 0);
	CHECK(since(&t0) >= 0.099);

	CHECK(write(sv[1], "hey", 3) == 3);
	CHECK(laio_poll(c, 2, NULL) == 1);
	CHECK(c[0].laio_handle == o.handle);
	CHECK(c[0].laio_return_value == 3 && c[0].laio_errno == 0);
	CHECK(memcmp(buf, "hey", 3) == 0);
	/* Exactly once: nothing more, and with nothing outstanding, at once. */
	CHECK(laio_poll(c, 2, &zero) == 0);
	CHECK(laio_poll(c, 2, NULL) == 0);
	close(sv[0]);
	close(sv[1]);
}

#define BATCH 5

static void batches(void)
{
	struct laio_completion c[BATCH];
	laio_handle_t handles[BATCH];
	int sv[BATCH][2], seen[BATCH] = { 0 }, total = 0;
	char buf[BATCH];
	struct outcome o;

	for (int i = 0; i < BATCH; i++) {
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]) == 0);
		start_call(&o, SYS_recvfrom, sv[i][0], &buf[i], 1, 0, 0, 0);
		CHECK(o.background);
		handles[i] = o.handle;
		for (int j = 0; j < i; j++)
			CHECK(handles[j] != handles[i]);
	}
	for (int i = 0; i < BATCH; i++)
		CHECK(write(sv[i][1], &"abcde"[i], 1) == 1);
	/* At most 2 per call; every handle once. */
	while (total < BATCH) {
		int n = laio_poll(c, 2, NULL);

		CHECK(n >= 1 && n <= 2);
		for (int k = 0; k < n; k++) {
			int i = 0;

			while (i < BATCH && handles[i] != c[k].laio_handle)
				i++;
			CHECK(i < BATCH);
			CHECK(!seen[i]);
			seen[i] = 1;
			CHECK(c[k].laio_return_value == 1);
			CHECK(buf[i] == "abcde"[i]);
		}
		total += n;
	}
	CHECK(laio_poll(c, 2, NULL) == 0);
	for (int i = 0; i < BATCH; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
}

static void body(void)
{
	args();
	errno_kept();
	timeouts();
	batches();
}

int main(void)
{
	return for_each_backend(body);
}
