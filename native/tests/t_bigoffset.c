/*
 * t_bigoffset.c - offsets beyond 4 GiB (a sparse 5 GiB file with data at
 * 4.5 GiB): pread, pread64, sendfile and sendfile64 with an offset pointer,
 * read after lseek, preadv and mmap64 must see libc's bytes in every mode, and
 * the daemon must be asked for the 64-bit offset, not a truncated one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "harness.h"

#define DATA_AT (4608ull << 20) /* 4.5 GiB */
#define FILE_SIZE (5ull << 30)

static char buf[65536];

static void scenario(const char *name)
{
	int fd, sv[2];
	off_t off;
	struct iovec iov = { buf, 8192 };
	void *map;

	(void)name;
	h_evict(h_path("sparse.bin"));
	fd = open(h_path("sparse.bin"), O_RDONLY);
	H_CALL("pread at 4.5G", pread(fd, buf, 65536, (off_t)DATA_AT), buf, 0);
	H_CALL("pread64 at 4.5G+64K", pread64(fd, buf, 65536, (off64_t)DATA_AT + 65536), buf, 0);
	lseek(fd, (off_t)DATA_AT + 131072, SEEK_SET);
	H_CALL("read after lseek to 4.5G+128K", read(fd, buf, 65536), buf, 0);
	H_CALL("preadv at 4.5G+192K", preadv(fd, &iov, 1, (off_t)DATA_AT + 196608), buf, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
		off = (off_t)DATA_AT + 262144;
		H_CALL("sendfile at 4.5G+256K", sendfile(sv[0], fd, &off, 16384), NULL, 0);
		H_CALL("received", recv(sv[1], buf, sizeof(buf), 0), buf, 0);
		off = (off_t)DATA_AT + 327680;
		H_CALL("sendfile64 at 4.5G+320K", sendfile64(sv[0], fd, &off, 16384), NULL, 0);
		H_CALL("received", recv(sv[1], buf, sizeof(buf), 0), buf, 0);
		close(sv[0]);
		close(sv[1]);
	}
	errno = ERRNO_SENTINEL;
	map = mmap64(NULL, 65536, PROT_READ, MAP_SHARED, fd, (off64_t)DATA_AT + 393216);
	h_report("mmap64 at 4.5G+384K", map == MAP_FAILED ? -1 : 0, errno, map == MAP_FAILED ? NULL : map, 65536);
	if (map != MAP_FAILED)
		munmap(map, 65536);
	close(fd);
}

int main(int argc, char **argv)
{
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result r;
	int high = 0, low = 0, fd;

	h_init(argc, argv, scenario);
	fd = open(h_path("sparse.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)FILE_SIZE) != 0)
		h_skip("cannot make a sparse 5 GiB file: %s", strerror(errno));
	close(fd);
	{
		/* 1 MiB of data at 4.5 GiB, the rest holes. */
		char block[65536];
		int w = open(h_path("sparse.bin"), O_WRONLY);

		for (int i = 0; i < 16; i++) {
			for (size_t k = 0; k < sizeof(block); k++)
				block[k] = (char)(k * 31 + (size_t)i * 7);
			if (pwrite(w, block, sizeof(block), (off_t)(DATA_AT + (unsigned)i * sizeof(block))) < 0)
				h_fail("pwrite: %s", strerror(errno));
		}
		fsync(w);
		close(w);
	}
	h_compare_all("bigoffset", 1);
	h_run(&full, "bigoffset", 60, &r);
	for (int i = 0; i < r.nrecords; i++) {
		if (r.records[i].offset >= DATA_AT)
			high++;
		else
			low++;
	}
	printf("bigoffset/full: %d requests at offsets >= 4.5 GiB, %d below\n", high, low);
	h_expect(high >= 1 && low == 0, "bigoffset/full: offsets reached the daemon truncated (%d low, %d high)", low,
		 high);
	h_result_free(&r);
	return h_finish();
}
