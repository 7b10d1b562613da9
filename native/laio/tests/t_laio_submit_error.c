/*
 * t_laio_submit_error.c - the lazy back end when io_uring_enter() fails with
 * an error that retrying cannot cure (here EPERM from a seccomp filter
 * installed after the ring is up): a call that needed io_uring still runs,
 * on the pool, and completes exactly once; the request left in the ring
 * produces no stray completion later. Before the fix the operation was
 * reported in the background and never completed (laio_poll waited forever).
 */
#include "ltest.h"


/* A read of an empty pipe must wait: background, then one completion. */
static void blocking_read_completes_once(int round)
{
	int p[2];
	char buf[8] = "";
	struct laio_completion c[4];
	struct timespec two_s = { 2, 0 }, short_wait = { 0, 200 * 1000 * 1000 };
	laio_handle_t h;
	long r;
	int n;

	CHECK(pipe(p) == 0);
	errno = 0;
	r = laio_syscall(SYS_read, p[0], (long)buf, 5);
	CHECK(r == -1 && errno == EINPROGRESS);
	h = laio_gethandle();
	CHECK(h > 0);
	CHECK(write(p[1], "abcde", 5) == 5);
	n = laio_poll(c, 4, &two_s);
	if (n != 1)
		fprintf(stderr, "round %d: laio_poll gave %d completions, want 1\n", round, n);
	CHECK(n == 1);
	CHECK(c[0].laio_handle == h && c[0].laio_return_value == 5 && c[0].laio_errno == 0);
	CHECK(memcmp(buf, "abcde", 5) == 0);
	/* Nothing else is outstanding, and nothing stray arrives. */
	CHECK(laio_poll(c, 4, &short_wait) == 0);
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	pid_t pid;
	int status;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		setenv("LAIO_BACKEND", "lazy", 1);
		if (strcmp(laio_backend(), "lazy") != 0) {
			fprintf(stderr, "skip: the lazy back end is not available here\n");
			_exit(77);
		}
		deny_syscall(SYS_io_uring_enter, EPERM);
		for (int round = 0; round < 3; round++)
			blocking_read_completes_once(round);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		return 77;
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("t_laio_submit_error: ok\n");
	return 0;
}
