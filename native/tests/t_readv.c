/*
 * t_readv.c - readv, preadv, preadv64, preadv2, preadv64v2 with and without
 * the shim: scattered reads of cold files, current-position preadv2 (-1),
 * RWF_NOWAIT (the shim must not block or fetch), unknown flags, iovcnt 0,
 * negative and > IOV_MAX, an invalid iovec array pointer (EFAULT from libc,
 * not a crash) and invalid buffers, pipes and bad fds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "harness.h"

static char a[5000], b[70000], c[3];

static void set_iov(struct iovec *iov)
{
	iov[0] = (struct iovec){ a, sizeof(a) };
	iov[1] = (struct iovec){ b, sizeof(b) };
	iov[2] = (struct iovec){ c, sizeof(c) };
}

static void report_iov(const char *what, long ret, int err)
{
	static char all[sizeof(a) + sizeof(b) + sizeof(c)];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(a); i++) all[n++] = a[i];
	for (size_t i = 0; i < sizeof(b); i++) all[n++] = b[i];
	for (size_t i = 0; i < sizeof(c); i++) all[n++] = c[i];
	h_report(what, ret, err, all, ret > 0 ? (size_t)ret : 0);
}

#define V_CALL(what, expr)                      \
	do {                                    \
		long r_;                        \
		errno = ERRNO_SENTINEL;         \
		r_ = (long)(expr);              \
		report_iov(what, r_, errno);    \
	} while (0)

static void scenario(const char *name)
{
	struct iovec iov[3], *many, bad_base[1] = { { (void *)16, 100 } };
	int fd, pipes[2];

	(void)name;
	h_evict(h_path("big.bin"));
	fd = open(h_path("big.bin"), O_RDONLY);
	set_iov(iov);
	V_CALL("readv cold", readv(fd, iov, 3));
	V_CALL("readv next", readv(fd, iov, 3));
	V_CALL("preadv 1M", preadv(fd, iov, 3, 1 << 20));
	V_CALL("preadv64 2M", preadv64(fd, iov, 3, 2 << 20));
	V_CALL("preadv2 at 1.5M", preadv2(fd, iov, 3, 3 << 19, 0));
	V_CALL("preadv2 current position", preadv2(fd, iov, 3, -1, 0));
	V_CALL("preadv64v2 current position", preadv64v2(fd, iov, 3, -1, 0));
	V_CALL("preadv64v2 RWF_HIPRI", preadv64v2(fd, iov, 3, 4096, RWF_HIPRI));
	V_CALL("preadv2 unknown flag", preadv2(fd, iov, 3, 0, 0x40000000));
	V_CALL("preadv across EOF", preadv(fd, iov, 3, (3 << 20) - 1000));
	V_CALL("preadv past EOF", preadv(fd, iov, 3, 4 << 20));
	V_CALL("preadv negative offset", preadv(fd, iov, 3, -5));
	V_CALL("preadv2 offset -2", preadv2(fd, iov, 3, -2, 0));
	V_CALL("readv iovcnt 0", readv(fd, iov, 0));
	V_CALL("readv iovcnt -1", readv(fd, iov, (int)h_opaque((size_t)-1)));
	many = calloc(IOV_MAX + 1, sizeof(*many));
	for (int i = 0; i <= IOV_MAX; i++)
		many[i] = (struct iovec){ a, 1 };
	V_CALL("readv IOV_MAX+1", readv(fd, many, IOV_MAX + 1));
	V_CALL("preadv IOV_MAX", preadv(fd, many, IOV_MAX, 0));
	free(many);
	V_CALL("readv bad iov pointer", readv(fd, h_opaque_ptr((void *)8), 3));
	V_CALL("preadv bad iov pointer", preadv(fd, h_opaque_ptr((void *)8), 3, 0));
	V_CALL("preadv2 bad iov pointer", preadv2(fd, h_opaque_ptr((void *)8), 3, 0, 0));
	V_CALL("readv bad buffer", readv(fd, bad_base, 1));
	close(fd);

	/* RWF_NOWAIT on a cold range: libc's answer, and no fetch. The kernel
	 * starts readahead before answering EAGAIN, and on a fast (host-cached)
	 * virtual disk that readahead sometimes completes first and the call
	 * returns the data, with or without the shim: either answer is libc's,
	 * so the line says which kind it was only when it is wrong. */
	h_evict(h_path("big.bin"));
	fd = open(h_path("big.bin"), O_RDONLY);
	{
		long r_;
		int err_;

		errno = ERRNO_SENTINEL;
		r_ = (long)preadv2(fd, iov, 3, 1 << 20, RWF_NOWAIT);
		err_ = errno;
		if (r_ == -1 && err_ == EAGAIN) {
			printf("preadv2 RWF_NOWAIT cold = EAGAIN, or the range's bytes\n");
		} else if (r_ > 0) {
			/* Compare with a plain read of the same range. */
			static char want[sizeof(a) + sizeof(b) + sizeof(c)], got[sizeof(want)];
			size_t n = 0;

			for (size_t i = 0; i < sizeof(a); i++) got[n++] = a[i];
			for (size_t i = 0; i < sizeof(b); i++) got[n++] = b[i];
			for (size_t i = 0; i < sizeof(c); i++) got[n++] = c[i];
			if (pread(fd, want, (size_t)r_, 1 << 20) == r_ && memcmp(want, got, (size_t)r_) == 0)
				printf("preadv2 RWF_NOWAIT cold = EAGAIN, or the range's bytes\n");
			else
				printf("preadv2 RWF_NOWAIT cold = %ld bytes that differ from the file's\n", r_);
		} else {
			report_iov("preadv2 RWF_NOWAIT cold", r_, err_);
		}
	}
	close(fd);

	V_CALL("readv bad fd", readv(-1, iov, 3));
	V_CALL("preadv bad fd", preadv(1000, iov, 3, 0));
	if (pipe(pipes) == 0) {
		H_CALL("write pipe", write(pipes[1], "vector", 6), NULL, 0);
		V_CALL("readv pipe", readv(pipes[0], iov, 3));
		V_CALL("preadv pipe", preadv(pipes[0], iov, 3, 0));
		close(pipes[0]);
		close(pipes[1]);
	}
}

int main(int argc, char **argv)
{
	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 4);
	h_compare_all("readv", 1);
	return h_finish();
}
