/*
 * t_connfd.c - the application closes or replaces the shim's own daemon
 * socket behind its back, the way daemons and servers do (close_range after
 * fork, dup2 onto low numbers, fopen landing on a freed number). The shim
 * must notice, never write a protocol byte into the application's descriptor
 * that now has the number, reconnect, and keep serving files opened on that
 * number.
 *
 * The scenario prints what the application's own sockets received (nothing,
 * as without the shim); the parent checks with the fake daemon that every
 * request carried a regular file and that the file fopen()ed onto the
 * shim's old number was still fetched.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <libception/protocol.h>

#include "harness.h"

/* The fopen()ed file is read at this offset: its FETCH is recognisable. */
#define FOPEN_OFFSET (777 * 4096)

static char buf[65536];

static void close_from(int first)
{
	syscall(SYS_close_range, (unsigned)first, ~0u, 0u); /* not interposed */
}

/* Sockets among fds >= 3 that are not in mine[]: the shim's. -1 if none. */
static int foreign_socket(const int *mine, int nmine)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name), skip = fd < 3 || fd == dirfd(d);
		struct stat st;

		for (int i = 0; i < nmine; i++)
			skip |= fd == mine[i];
		if (!skip && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
			found = fd;
	}
	closedir(d);
	return found;
}

static void report_peer(const char *what, int fd)
{
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	printf("%s received: %s\n", what, n > 0 ? "bytes" : n == 0 ? "end of stream" : strerrorname_np(errno));
}

static void cold_pread(const char *what, const char *name, off_t off)
{
	int fd;

	h_evict(h_path(name));
	fd = open(h_path(name), O_RDONLY);
	H_CALL(what, pread(fd, buf, 8192, off), buf, 0);
	close(fd);
}

static void scenario(const char *name)
{
	int seq[2], stream[2], pipes[2], fd;
	FILE *f;

	(void)name;
	/* 1. The shim connects (cold read), then everything >= 3 is closed
	 *    behind its back and the numbers go to the application's sockets. */
	cold_pread("cold pread before close_range", "a.bin", 0);
	close_from(3);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, seq) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, stream) != 0 ||
	    pipe(pipes) != 0)
		exit(1);
	cold_pread("cold pread after close_range", "b.bin", 65536);
	report_peer("seqpacket peer", seq[1]);
	report_peer("seqpacket end", seq[0]);
	report_peer("stream peer", stream[1]);
	report_peer("stream end", stream[0]);

	/* 2. dup2 of an application socket onto the shim's (new) socket. */
	{
		int mine[6] = { seq[0], seq[1], stream[0], stream[1], pipes[0], pipes[1] };
		int shim_fd = foreign_socket(mine, 6);

		if (shim_fd >= 0)
			dup2(stream[0], shim_fd);
		cold_pread("cold pread after dup2 onto the shim's socket", "a.bin", 131072);
		report_peer("stream peer after dup2", stream[1]);
		if (shim_fd >= 0)
			close(shim_fd);
	}
	close(seq[0]), close(seq[1]), close(stream[0]), close(stream[1]), close(pipes[0]), close(pipes[1]);

	/* 3. The shim's socket gets number 3 while the file lives elsewhere;
	 *    close_range frees 3 and fopen (not seen by the shim) takes it. */
	close_from(3);
	fd = open(h_path("a.bin"), O_RDONLY);
	dup2(fd, 10);
	close(fd);
	h_evict(h_path("a.bin"));
	H_CALL("cold pread on fd 10", pread(10, buf, 4096, 0), buf, 0);
	h_evict(h_path("c.bin")); /* before: its open() would take number 3 */
	close_from(3);
	f = fopen(h_path("c.bin"), "r");
	if (f == NULL)
		exit(1);
	printf("fopen took fd %d\n", fileno(f));
	H_CALL("cold pread through the fopen()ed fd", pread(fileno(f), buf, 8192, FOPEN_OFFSET), buf, 0);
	fclose(f);
}

int main(int argc, char **argv)
{
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result r;
	int not_regular = 0, fopen_fetched = 0;

	h_init(argc, argv, scenario);
	h_make_file(h_path("a.bin"), 1u << 20, 90);
	h_make_file(h_path("b.bin"), 1u << 20, 91);
	h_make_file(h_path("c.bin"), 4u << 20, 92);
	h_compare_all("connfd", 1);

	h_run(&full, "connfd", 60, &r);
	h_expect(r.status == 0, "connfd/full: child exited with %d", r.status);
	for (int i = 0; i < r.nrecords; i++) {
		not_regular += !r.records[i].regular;
		fopen_fetched += r.records[i].op == LCP_OP_FETCH && r.records[i].offset == FOPEN_OFFSET;
	}
	printf("connfd/full: %d requests on %d connections, %d without a regular file\n", r.nrecords, r.connections,
	       not_regular);
	h_expect(not_regular == 0, "connfd/full: %d requests carried something else than a regular file", not_regular);
	h_expect(fopen_fetched == 1, "connfd/full: the cold file fopen()ed onto the shim's old number was not fetched");
	h_expect(h_stat(&r, "\"daemon\"", "protocol_errors") == 0 && h_stat(&r, "\"daemon\"", "timeouts") == 0,
		 "connfd/full: protocol errors or timeouts with a healthy daemon");
	h_result_free(&r);
	return h_finish();
}
