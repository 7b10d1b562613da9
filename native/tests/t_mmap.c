/*
 * t_mmap.c - mmap and mmap64 with and without the shim: file mappings of
 * cold files (contents hashed), offsets, mappings past EOF (not touched),
 * anonymous memory, and every error libc gives: length 0, unaligned offset,
 * bad fd, pipe, directory, write mapping of a read-only fd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "harness.h"

static void map_report(const char *what, void *p, int err, size_t hash_len)
{
	if (p == MAP_FAILED)
		h_report(what, -1, err, NULL, 0);
	else
		h_report(what, 0, err, p, hash_len);
}

#define M_CALL(what, expr, hash_len, unmap_len)             \
	do {                                                 \
		void *p_;                                    \
		errno = ERRNO_SENTINEL;                      \
		p_ = (expr);                                 \
		map_report(what, p_, errno, hash_len);       \
		if (p_ != MAP_FAILED)                        \
			munmap(p_, unmap_len);               \
	} while (0)

/* Pipe and directory: ENODEV from libc; /dev/zero maps (and hashes zeros). */
static void map_special(const char *what, int fd)
{
	M_CALL(what, mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, fd, 0), 8192, 8192);
}

static void scenario(const char *name)
{
	int fd, wfd;

	(void)name;
	h_evict(h_path("big.bin"));
	fd = open(h_path("big.bin"), O_RDONLY);
	M_CALL("mmap whole file", mmap(NULL, 3 << 20, PROT_READ, MAP_SHARED, fd, 0), 3 << 20, 3 << 20);
	h_evict(h_path("big.bin"));
	M_CALL("mmap64 at 1M", mmap64(NULL, 1 << 20, PROT_READ, MAP_PRIVATE, fd, 1 << 20), 1 << 20, 1 << 20);
	M_CALL("mmap past EOF (untouched)", mmap(NULL, 8 << 20, PROT_READ, MAP_SHARED, fd, 0), 4096, 8 << 20);
	M_CALL("mmap offset past EOF", mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 16 << 20), 0, 4096);
	M_CALL("mmap PROT_NONE", mmap(NULL, 4096, PROT_NONE, MAP_SHARED, fd, 0), 0, 4096);
	M_CALL("mmap length 0", mmap(NULL, 0, PROT_READ, MAP_SHARED, fd, 0), 0, 0);
	M_CALL("mmap unaligned offset", mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 100), 0, 4096);
	M_CALL("mmap negative offset", mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, -4096), 0, 4096);
	M_CALL("mmap write on read-only fd", mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), 0, 4096);
	M_CALL("mmap no share flags", mmap(NULL, 4096, PROT_READ, 0, fd, 0), 0, 4096);
	M_CALL("mmap bad fd", mmap(NULL, 4096, PROT_READ, MAP_SHARED, 9999, 0), 0, 4096);
	M_CALL("mmap fd -1 not anonymous", mmap(NULL, 4096, PROT_READ, MAP_SHARED, -1, 0), 0, 4096);
	M_CALL("mmap anonymous", mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
	       1 << 20, 1 << 20);
	close(fd);
	M_CALL("mmap closed fd", mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0), 0, 4096);

	wfd = open(h_path("rw.bin"), O_RDWR);
	M_CALL("mmap read-write shared", mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, wfd, 0), 65536, 65536);
	close(wfd);
	h_on_special_fds("mmap", map_special);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 6);
	h_make_file(h_path("rw.bin"), 65536, 7);
	h_compare_all("mmap", 1);
	return h_finish();
}
