/*
 * t_laio_fork.c - fork behaviour as laio(3) documents it, on both back ends:
 * a background operation started before fork belongs to the parent alone;
 * the child sees no completion of it, has nothing outstanding, and its own
 * calls (inline and background) work with a fresh start; the parent still
 * gets its operation's completion exactly once.
 */
#include "ltest.h"

#include <sys/socket.h>

/*
 * GCC 12's AddressSanitizer runtime cannot start a thread in the child of a
 * fork of a threaded process: the new thread waits forever on a lock of the
 * sanitizer's allocator copied in its locked state (seen 5 times in 30 runs;
 * ThreadSanitizer refuses the same outright unless die_after_fork=0). So in
 * the ASan build the child's own eager calls, which need a new helper
 * thread, are left to the plain and TSan builds.
 */
#if defined(__SANITIZE_ADDRESS__)
#define CHILD_CAN_START_THREADS 0
#else
#define CHILD_CAN_START_THREADS 1
#endif

static void body(void)
{
	struct timespec zero = { 0, 0 }, tenth = { 0, 100000000L };
	struct laio_completion c[4];
	struct outcome o, oc;
	char buf[8], cbuf[8];
	int sv[2], cv[2], st;
	pid_t pid;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	start_call(&o, SYS_recvfrom, sv[0], buf, sizeof(buf), 0, 0, 0);
	CHECK(o.background);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* Nothing of the parent's: not outstanding, no completion. */
		CHECK(laio_gethandle() == 0);
		CHECK(laio_poll(c, 4, NULL) == 0);
		CHECK(laio_poll(c, 4, &tenth) == 0);
		CHECK(strcmp(laio_backend(), getenv("LAIO_BACKEND")) == 0);
		/* Its own calls work. */
		if (lazy() || CHILD_CAN_START_THREADS) {
			CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, cv) == 0);
			start_call(&oc, SYS_recvfrom, cv[0], cbuf, sizeof(cbuf), 0, 0, 0);
			CHECK(oc.background);
			CHECK(write(cv[1], "kid", 3) == 3);
			collect(oc.handle, &oc);
			CHECK(oc.ret == 3 && memcmp(cbuf, "kid", 3) == 0);
			call(&oc, SYS_getppid);
			CHECK(oc.ret == getppid());
		} else {
			printf("note: the child's eager calls are checked in the plain and TSan builds\n");
		}
		CHECK(laio_poll(c, 4, &zero) == 0);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The parent's operation is still its own and completes once. */
	CHECK(laio_poll(c, 4, &zero) == 0);
	CHECK(write(sv[1], "mom", 3) == 3);
	collect(o.handle, &o);
	CHECK(o.ret == 3 && memcmp(buf, "mom", 3) == 0);
	CHECK(laio_poll(c, 4, &zero) == 0);
	close(sv[0]);
	close(sv[1]);
}

int main(int argc, char **argv)
{
	const char *tsan = getenv("TSAN_OPTIONS");

	/*
	 * Under TSan the child starts helper threads after a fork of a threaded
	 * parent, which TSan refuses unless told (die_after_fork=0); the runner
	 * sets TSAN_OPTIONS for all tests, so add it and start again.
	 */
	if (tsan && !strstr(tsan, "die_after_fork")) {
		char opts[512];

		snprintf(opts, sizeof(opts), "%s:die_after_fork=0", tsan);
		setenv("TSAN_OPTIONS", opts, 1);
		execv("/proc/self/exe", argv);
		CHECK(!"re-exec");
	}
	(void)argc;
	return for_each_backend(body);
}
