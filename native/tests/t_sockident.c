/*
 * t_sockident.c - the shim closes its daemon socket at thread exit and in a
 * fork child only while the number still names that socket. Regression
 * (issue 13): both closed the stored number blindly, so after the
 * application replaced the socket behind the shim's back (close_range then
 * open, or dup2 onto it, as daemons that tidy their descriptors do) the
 * application's own file was closed under it. Each scenario connects (a cold
 * read in full mode), puts a file of its own on the socket's number with
 * dup2, then lets the thread exit or forks, and reads that file again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"

static char buf[65536];

/* The shim's connection, if any: the only socket the scenario has. */
static int find_socket(void)
{
	struct stat st;

	for (int fd = 3; fd < 1024; fd++)
		if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
			return fd;
	return -1;
}

/* Cold read (connects), then our file on the socket's number (or a new one
 * without a shim). Returns that number. */
static int take_socket_number(void)
{
	int fd = open(h_path("data.bin"), O_RDONLY), mine, s;

	h_evict(h_path("data.bin"));
	H_CALL("cold pread", pread(fd, buf, 65536, 0), buf, 0);
	close(fd);
	mine = open(h_path("mine.txt"), O_RDONLY);
	s = find_socket();
	if (s >= 0)
		s = dup2(mine, s);
	else
		s = dup(mine);
	close(mine);
	return s;
}

static void report_mine(const char *when, int fd)
{
	char text[16] = { 0 };
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);

	printf("%s: our file is %s (%s)\n", when, n > 0 ? "still open" : "gone", n > 0 ? text : strerror(errno));
}

static void *thread_main(void *arg)
{
	*(int *)arg = take_socket_number();
	return NULL; /* the shim's thread-exit hook runs now */
}

static void scenario(const char *name)
{
	int fd = -1;

	if (strcmp(name, "thread") == 0) {
		pthread_t t;

		pthread_create(&t, NULL, thread_main, &fd);
		pthread_join(t, NULL);
		report_mine("after the thread exited", fd);
	} else {
		pid_t pid;
		int status;

		fd = take_socket_number();
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			report_mine("in the fork child", fd);
			fflush(stdout);
			_exit(0);
		}
		waitpid(pid, &status, 0);
		report_mine("in the parent", fd);
	}
}

int main(int argc, char **argv)
{
	const char *scenarios[] = { "thread", "fork" };
	const struct h_run base = { .label = "baseline" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result b, r;
	int fd;

	h_init(argc, argv, scenario);
	h_make_file(h_path("data.bin"), 1u << 20, 41);
	fd = open(h_path("mine.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "mine", 4) != 4)
		h_fail("cannot write mine.txt: %s", strerror(errno));
	close(fd);
	for (int i = 0; i < 2; i++) {
		h_run(&base, scenarios[i], 30, &b);
		h_expect(b.status == 0 && strstr(b.output, "gone") == NULL, "%s baseline: %s", scenarios[i], b.output);
		h_run(&full, scenarios[i], 30, &r);
		printf("%s under the shim: %d requests on %d connections\n%s", scenarios[i], r.nrecords, r.connections,
		       r.output);
		h_expect(r.nrecords >= 1, "%s: the cold read never reached the daemon: no socket to replace",
			 scenarios[i]);
		h_expect(r.status == 0 && strcmp(r.output, b.output) == 0,
			 "%s: the shim closed the application's descriptor:\n%s", scenarios[i], r.output);
		h_result_free(&r);
		h_result_free(&b);
	}
	return h_finish();
}
