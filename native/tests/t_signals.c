/*
 * t_signals.c - signals, EINTR and cancellation behave as without the shim.
 *  - A timer signal without SA_RESTART fires every 2 ms while files are read
 *    through a slow daemon; its handler itself reads a file (re-entrancy).
 *    Regular-file reads still complete; a read on an empty pipe still fails
 *    with EINTR, exactly as libc does.
 *  - A thread blocked in the shim waiting for a daemon that never answers is
 *    cancelled promptly (well before the timeout), and the process carries on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>

#include "harness.h"

static char buf[65536];
static volatile sig_atomic_t handler_reads_ok = 1;

static void on_alarm(int sig)
{
	char small[128];
	int saved = errno, fd = open(h_path("small.bin"), O_RDONLY);

	(void)sig;
	if (fd < 0 || read(fd, small, sizeof(small)) != (ssize_t)sizeof(small))
		handler_reads_ok = 0;
	if (fd >= 0)
		close(fd);
	errno = saved;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *blocked_reader(void *arg)
{
	int fd = open(h_path("big.bin"), O_RDONLY);

	(void)arg;
	for (;;) {
		h_evict(h_path("big.bin"));
		(void)!pread(fd, buf, 4096, 0);
	}
	return NULL;
}

static void scenario(const char *name)
{
	if (strcmp(name, "interrupted") == 0) {
		struct sigaction sa;
		struct itimerval tick = { { 0, 2000 }, { 0, 2000 } }, stop = { { 0, 0 }, { 0, 0 } };
		int fd, pipes[2];

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm; /* no SA_RESTART */
		sigaction(SIGALRM, &sa, NULL);
		h_evict(h_path("big.bin"));
		setitimer(ITIMER_REAL, &tick, NULL);
		fd = open(h_path("big.bin"), O_RDONLY);
		for (int i = 0; i < 24; i++) {
			if (i % 6 == 0)
				h_evict(h_path("big.bin"));
			H_CALL("pread under signals", pread(fd, buf, sizeof(buf), (off_t)i * 131072), buf, 0);
		}
		close(fd);
		if (pipe(pipes) == 0) {
			H_CALL("read empty pipe", read(pipes[0], buf, 10), buf, 0);
			close(pipes[0]);
			close(pipes[1]);
		}
		setitimer(ITIMER_REAL, &stop, NULL);
		printf("handler reads ok: %s\n", handler_reads_ok ? "yes" : "no");
	} else if (strcmp(name, "cancel") == 0) {
		pthread_t thread;
		struct timespec pause = { 0, 300 * 1000000 };
		double start;
		void *ret;
		int fd;

		pthread_create(&thread, NULL, blocked_reader, NULL);
		nanosleep(&pause, NULL);
		start = now_s();
		pthread_cancel(thread);
		pthread_join(thread, &ret);
		printf("cancelled: %s, within 3 s: %s\n", ret == PTHREAD_CANCELED ? "yes" : "no",
		       now_s() - start < 3.0 ? "yes" : "no");
		fd = open(h_path("small.bin"), O_RDONLY);
		H_CALL("read after cancel", read(fd, buf, 1000), buf, 0);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run slow = { .label = "slow daemon", .mode = "full", .daemon = 1, .behaviour = FAKE_SLOW,
				    .delay_ms = 30, .timeout_ms = 5000 };
	const struct h_run silent = { .label = "silent daemon", .mode = "full", .daemon = 1,
				      .behaviour = FAKE_NEVER_REPLY, .timeout_ms = 20000 };
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 80);
	h_make_file(h_path("small.bin"), 4096, 81);

	h_run(&base, "interrupted", 60, &b);
	h_expect(b.status == 0 && strstr(b.output, "read empty pipe = -1 errno=EINTR") != NULL,
		 "baseline: an empty pipe read should fail with EINTR");
	h_run(&slow, "interrupted", 60, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "slow daemon + signals: output differs from libc's");
	if (strcmp(r.output, b.output) != 0)
		printf("baseline:\n%s\nshim:\n%s\n", b.output, r.output);
	h_expect(h_stat(&r, "\"daemon\"", "fetches") >= 1, "slow daemon + signals: nothing was fetched");
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") == 0, "slow daemon + signals: EINTR must not end the wait");
	h_result_free(&r);
	h_result_free(&b);

	h_run(&base, "cancel", 60, &b);
	h_run(&silent, "cancel", 60, &r);
	printf("cancel: %s", r.output);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "cancel while waiting on the daemon: %s",
		 r.timed_out ? "hung" : "output differs");
	h_expect(r.nrecords >= 1, "cancel: the reader never reached the daemon");
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
