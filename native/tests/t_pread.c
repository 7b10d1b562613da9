/*
 * t_pread.c - pread, pread64, __pread_chk, __pread64_chk with and without the
 * shim: cold ranges, ranges across and past EOF, negative offsets, zero and
 * huge lengths, bad fds, pipes, directories.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "harness.h"

ssize_t __pread_chk(int fd, void *buf, size_t nbytes, off_t offset, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t nbytes, off64_t offset, size_t buflen);

static char buf[1 << 17];

/* Pipe: ESPIPE, directory: EISDIR from libc; /dev/zero reads zeros. */
static void pread_special(const char *what, int fd)
{
	H_CALL(what, pread(fd, buf, 512, 1234), buf, 0);
}

static void scenario(const char *name)
{
	int fd;
	off_t size = 3 << 20;

	(void)name;
	h_evict(h_path("big.bin"));
	fd = open(h_path("big.bin"), O_RDONLY);
	H_CALL("pread 0 4096", pread(fd, buf, 4096, 0), buf, 0);
	H_CALL("pread 1M 65536", pread(fd, buf, 65536, 1 << 20), buf, 0);
	H_CALL("pread64 2.5M 131072", pread64(fd, buf, sizeof(buf), (5 << 20) / 2), buf, 0);
	H_CALL("pread across EOF", pread(fd, buf, 8192, size - 100), buf, 0);
	H_CALL("pread at EOF", pread(fd, buf, 8192, size), buf, 0);
	H_CALL("pread past EOF", pread(fd, buf, 8192, size * 4), buf, 0);
	H_CALL("pread64 huge offset", pread64(fd, buf, 8192, (off64_t)1 << 62), buf, 0);
	H_CALL("pread negative offset", pread(fd, buf, 10, -1), buf, 0);
	H_CALL("pread64 negative offset", pread64(fd, buf, 10, -4096), buf, 0);
	H_CALL("pread zero length", pread(fd, buf, 0, 100), buf, 0);
	H_CALL("__pread_chk", __pread_chk(fd, buf, 4096, 3 << 19, sizeof(buf)), buf, 0);
	H_CALL("__pread64_chk", __pread64_chk(fd, buf, 4096, 5 << 18, sizeof(buf)), buf, 0);
	printf("offset unchanged: %ld\n", (long)lseek(fd, 0, SEEK_CUR));
	close(fd);
	fd = open(h_path("small.bin"), O_RDONLY);
	H_CALL("pread huge length", pread(fd, buf, h_opaque((size_t)1 << 40), 0), buf, 0);
	H_CALL("pread64 huge length at 5000", pread64(fd, buf, h_opaque((size_t)1 << 40), 5000), buf, 0);
	close(fd);
	H_CALL("pread bad fd", pread(-1, buf, 10, 0), buf, 0);
	H_CALL("pread64 closed fd", pread64(fd, buf, 10, 0), buf, 0);
	h_on_special_fds("pread", pread_special);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 1);
	h_make_file(h_path("small.bin"), 10000, 2);
	h_compare_all("pread", 1);
	return h_finish();
}
