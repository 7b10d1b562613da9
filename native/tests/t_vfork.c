/*
 * t_vfork.c - children the shim's fork handler never sees.
 *
 *  - "vfork": a vfork() child shares the parent's memory, so whatever the
 *    shim does in it lands in the parent's state. A child that close()s every
 *    descriptor before _exit (what spawning code does) must not make the
 *    parent lose track of its still-open daemon socket: the parent must keep
 *    using it, not leak it and open another each time.
 *  - "_Fork": a _Fork() child (no atfork handlers) holds a copy of the
 *    parent's socket while the parent keeps using it. The child must not
 *    speak on it: its reads go straight to libc, and every request the daemon
 *    sees is one the parent sent and counted.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <libception/protocol.h>

#include "harness.h"

#define CYCLES 5

extern pid_t _Fork(void);

static char buf[65536];

__attribute__((noinline)) static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (d == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n;
}

/* A vfork child that closes every descriptor, as spawning code does. */
__attribute__((noinline)) static void spawn_closing_child(void)
{
	pid_t pid = vfork();

	if (pid == 0) {
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		_exit(0);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void cold_pread(const char *name, off_t off)
{
	int fd;

	h_evict(h_path(name));
	fd = open(h_path(name), O_RDONLY);
	H_CALL("cold pread", pread(fd, buf, 8192, off), buf, 0);
	close(fd);
}

static void scenario(const char *name)
{
	if (strcmp(name, "vfork") == 0) {
		int before, after;

		cold_pread("a.bin", 0); /* the shim connects */
		before = open_fds();
		for (int i = 0; i < CYCLES; i++) {
			spawn_closing_child();
			cold_pread("a.bin", (off_t)(i + 1) * 65536);
		}
		after = open_fds();
		printf("descriptors leaked over %d vfork cycles: %d\n", CYCLES, after - before);
	} else if (strcmp(name, "_Fork") == 0) {
		pid_t pid;

		cold_pread("a.bin", 0); /* the shim connects */
		pid = _Fork();
		if (pid == 0) {
			for (int i = 0; i < 20; i++)
				cold_pread("b.bin", (off_t)i * 65536);
			fflush(stdout);
			_exit(0); /* no destructor: the statistics file is the parent's */
		}
		for (int i = 0; i < 20; i++)
			cold_pread("a.bin", (off_t)i * 65536);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("a.bin"), 2u << 20, 70);
	h_make_file(h_path("b.bin"), 2u << 20, 71);

	h_run(&base, "vfork", 30, &b);
	h_expect(b.status == 0 && strstr(b.output, "leaked over 5 vfork cycles: 0") != NULL, "vfork/baseline: %s",
		 b.output);
	h_run(&full, "vfork", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "vfork/full: output differs from libc's:\n%s",
		 r.output);
	printf("vfork/full: %d requests on %d connections\n", r.nrecords, r.connections);
	h_expect(r.connections == 1, "vfork/full: the parent should keep its one connection, the daemon saw %d",
		 r.connections);
	h_result_free(&r);
	h_result_free(&b);

	h_run(&base, "_Fork", 30, &b);
	h_expect(b.status == 0, "_Fork/baseline exited with %d", b.status);
	h_run(&full, "_Fork", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "_Fork/full: output differs from libc's");
	printf("_Fork/full: daemon saw %d requests; the parent sent %lld; protocol errors %lld, timeouts %lld\n",
	       r.nrecords, h_stat(&r, "\"daemon\"", "requests"), h_stat(&r, "\"daemon\"", "protocol_errors"),
	       h_stat(&r, "\"daemon\"", "timeouts"));
	h_expect(r.nrecords == h_stat(&r, "\"daemon\"", "requests"),
		 "_Fork/full: the child spoke on the parent's connection");
	h_expect(h_stat(&r, "\"daemon\"", "protocol_errors") == 0 && h_stat(&r, "\"daemon\"", "timeouts") == 0,
		 "_Fork/full: the parent's conversation was disturbed");
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
