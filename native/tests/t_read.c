/*
 * t_read.c - read() and __read_chk() with and without the shim: cold and
 * warm regular files, EOF, zero and huge lengths, bad fds, directories,
 * pipes, sockets, devices, write-only fds, and an fd number that was a
 * regular file and is now a pipe (the fd-type cache must notice).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "harness.h"

ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);

static char buf[1 << 17];

static void scenario(const char *name)
{
	int fd, dir, pipes[2], sv[2];

	(void)name;
	h_evict(h_path("big.bin"));
	h_evict(h_path("small.bin"));

	fd = open(h_path("big.bin"), O_RDONLY);
	H_CALL("read 4096 cold", read(fd, buf, 4096), buf, 4096);
	H_CALL("read 100000", read(fd, buf, 100000), buf, 0);
	H_CALL("read 131072", read(fd, buf, sizeof(buf)), buf, 0);
	lseek(fd, -10, SEEK_END);
	H_CALL("read across EOF", read(fd, buf, 4096), buf, 0);
	H_CALL("read at EOF", read(fd, buf, 4096), buf, 0);
	H_CALL("read zero length", read(fd, buf, 0), buf, 0);
	lseek(fd, 2 << 20, SEEK_SET);
	H_CALL("__read_chk", __read_chk(fd, buf, 8192, sizeof(buf)), buf, 0);
	close(fd);

	fd = open(h_path("small.bin"), O_RDONLY);
	H_CALL("read huge length small file", read(fd, buf, h_opaque((size_t)1 << 40)), buf, 0);
	lseek(fd, 0, SEEK_SET);
	H_CALL("read SIZE_MAX", read(fd, buf, h_opaque(SIZE_MAX)), buf, 0);
	close(fd);

	fd = open(h_path("empty.bin"), O_RDONLY);
	H_CALL("read empty file", read(fd, buf, 4096), buf, 0);
	close(fd);

	H_CALL("read fd -1", read(-1, buf, 10), buf, 0);
	H_CALL("read fd 9999", read(9999, buf, 10), buf, 0);
	H_CALL("read fd 70000 (beyond the table)", read(70000, buf, 10), buf, 0);
	fd = open(h_path("small.bin"), O_RDONLY);
	close(fd);
	H_CALL("read closed fd", read(fd, buf, 10), buf, 0);

	fd = open(h_path("small.bin"), O_WRONLY);
	H_CALL("read write-only fd", read(fd, buf, 10), buf, 0);
	close(fd);

	dir = open(h_dir(), O_RDONLY | O_DIRECTORY);
	H_CALL("read directory", read(dir, buf, 10), buf, 0);
	close(dir);

	/* fd reuse: a regular file's number comes back as a pipe. */
	fd = open(h_path("small.bin"), O_RDONLY);
	H_CALL("read before reuse", read(fd, buf, 100), buf, 0);
	close(fd);
	if (pipe(pipes) == 0) {
		printf("pipe reused number: %s\n", pipes[0] == fd ? "yes" : "no");
		H_CALL("write pipe", write(pipes[1], "hello pipe", 10), NULL, 0);
		H_CALL("read pipe", read(pipes[0], buf, sizeof(buf)), buf, 0);
		close(pipes[1]);
		H_CALL("read pipe EOF", read(pipes[0], buf, 10), buf, 0);
		close(pipes[0]);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
		H_CALL("write socket", write(sv[1], "socket data", 11), NULL, 0);
		H_CALL("read socket", read(sv[0], buf, sizeof(buf)), buf, 0);
		close(sv[0]);
		close(sv[1]);
	}
	fd = open("/dev/zero", O_RDONLY);
	H_CALL("read /dev/zero", read(fd, buf, 4096), buf, 0);
	close(fd);
	fd = open("/dev/null", O_RDONLY);
	H_CALL("read /dev/null", read(fd, buf, 4096), buf, 0);
	close(fd);
	/* EFAULT must come from libc, not from a crash in the shim. */
	fd = open(h_path("small.bin"), O_RDONLY);
	H_CALL("read into NULL", read(fd, h_opaque_ptr(NULL), 100), NULL, 0);
	close(fd);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 1);
	h_make_file(h_path("small.bin"), 10000, 2);
	h_make_file(h_path("empty.bin"), 0, 3);
	h_compare_all("read", 1);
	return h_finish();
}
