/*
 * ltest.h - helpers for liblaio's tests (each t_laio_*.c is one program:
 * exit 0 pass, 1 fail, 77 skip, run by native/tests/run plain, ASan+UBSan
 * and TSan).
 *
 * for_each_backend() runs a test body once per back end, each in a forked
 * child with LAIO_BACKEND set, so every family is checked on both. call()
 * issues one call through laio_syscall() and, when it went to the
 * background, collects its completion and checks that it is the only one.
 */
#ifndef LAIO_LTEST_H
#define LAIO_LTEST_H

#define _GNU_SOURCE
#include <errno.h>
#include <laio/laio.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: [%s] check failed: %s (errno %d %s)\n", \
				__FILE__, __LINE__, getenv("LAIO_BACKEND"), #cond, \
				errno, strerror(errno));                       \
			exit(1);                                               \
		}                                                              \
	} while (0)

static inline int lazy(void)
{
	return strcmp(laio_backend(), "lazy") == 0;
}

/*
 * From now on, in this process, system call nr fails with errno err (a
 * seccomp filter; x86-64 only, other architectures are let through): a
 * kernel without io_uring, or io_uring refusing work.
 */
static inline void deny_syscall(long nr, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (__u32)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((__u32)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

/* What a call gave: the result, errno (0 on success), inline or not. */
struct outcome {
	long ret;
	int err;
	int background;
	laio_handle_t handle;
};

/* Wait for the completion of h (and nothing else) at most 10 s. */
static inline void collect(laio_handle_t h, struct outcome *o)
{
	struct timespec ten = { 10, 0 };
	struct laio_completion c[4];
	int n = laio_poll(c, 4, &ten);

	CHECK(n == 1);
	CHECK(c[0].laio_handle == h);
	o->ret = c[0].laio_return_value;
	o->err = c[0].laio_errno;
	CHECK((o->ret == -1) == (o->err != 0));
}

/* Issue the call; start only: the caller collects (o->background says). */
#define start_call(o, ...)                                                     \
	do {                                                                   \
		errno = 0;                                                     \
		(o)->ret = laio_syscall(__VA_ARGS__);                          \
		(o)->err = (o)->ret == -1 ? errno : 0;                         \
		(o)->background = (o)->ret == -1 && errno == EINPROGRESS;      \
		(o)->handle = (o)->background ? laio_gethandle() : 0;          \
		if ((o)->background)                                           \
			CHECK((o)->handle > 0);                                \
	} while (0)

/* Issue the call and, if it went to the background, wait for it. */
#define call(o, ...)                                                           \
	do {                                                                   \
		start_call(o, __VA_ARGS__);                                    \
		if ((o)->background)                                           \
			collect((o)->handle, o);                               \
		struct timespec zero_ = { 0, 0 };                              \
		struct laio_completion extra_;                                 \
		CHECK(laio_poll(&extra_, 1, &zero_) == 0);                     \
	} while (0)

/* The direct call's outcome, for comparison. */
#define direct(o, ...)                                                         \
	do {                                                                   \
		errno = 0;                                                     \
		(o)->ret = syscall(__VA_ARGS__);                               \
		(o)->err = (o)->ret == -1 ? errno : 0;                         \
		(o)->background = 0;                                           \
	} while (0)

#define SAME(a, b)                                                             \
	do {                                                                   \
		CHECK((a)->ret == (b)->ret);                                   \
		CHECK((a)->err == (b)->err);                                   \
	} while (0)

/*
 * Expect inline in the lazy back end when `lazy_inline`, background when
 * not; the eager back end puts every call in the background.
 */
#define MODE_IS(o, lazy_inline) ((o)->background == (lazy() ? !(lazy_inline) : 1))
#define EXPECT_MODE(o, lazy_inline) CHECK(MODE_IS(o, lazy_inline))

static inline int for_each_backend(void (*body)(void))
{
	const char *names[] = { "eager", "lazy" };

	for (int i = 0; i < 2; i++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();

		CHECK(pid >= 0);
		if (pid == 0) {
			setenv("LAIO_BACKEND", names[i], 1);
			CHECK(strcmp(laio_backend(), names[i]) == 0);
			body();
			fflush(stdout);
			_exit(0);
		}
		CHECK(waitpid(pid, &st, 0) == pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "back end %s failed (status 0x%x)\n", names[i], st);
			return 1;
		}
		printf("ok: %s\n", names[i]);
	}
	return 0;
}

static inline double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

#endif
