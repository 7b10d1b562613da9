/*
 * t_laio_submit_error.c - the lazy back end when io_uring_enter() fails with
 * an error that retrying cannot cure (here EPERM from a seccomp filter
 * installed after the ring is up): a call that needed io_uring still runs,
 * on the pool, and completes exactly once; the request left in the ring
 * produces no stray completion later. Before the fix the operation was
 * reported in the background and never completed (laio_poll waited forever).
 */
#include "ltest.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

static void deny_io_uring_enter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_enter, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

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
		deny_io_uring_enter();
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
