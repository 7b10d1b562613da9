/*
 * t_sendfile.c - sendfile and sendfile64 with and without the shim: to a
 * socket, a pipe and a regular file; with an offset pointer (updated) and
 * with NULL (file position advanced); zero count, EOF, huge counts; a bad
 * offset pointer (EFAULT from libc, not a crash); bad fds; a pipe as input.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include "harness.h"

static char buf[1 << 18];

/* Read back what sendfile put into fd (expect bytes) and report its hash. */
static void drain(const char *what, int fd, long expect)
{
	uint64_t h = 1469598103934665603ull;
	long got = 0;

	while (got < expect) {
		size_t want = (size_t)(expect - got) < sizeof(buf) ? (size_t)(expect - got) : sizeof(buf);
		ssize_t n = read(fd, buf, want);

		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
		got += n;
	}
	printf("%s = %ld hash=%016llx\n", what, got, (unsigned long long)h);
}

static void scenario(const char *name)
{
	int in, sv[2], pipes[2], out_file;
	off_t off;
	long r;

	(void)name;
	h_evict(h_path("big.bin"));
	in = open(h_path("big.bin"), O_RDONLY);
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);

	off = 0;
	errno = ERRNO_SENTINEL;
	r = sendfile(sv[0], in, &off, 65536);
	h_report("sendfile offset 0", r, errno, NULL, 0);
	printf("offset now %ld, position %ld\n", (long)off, (long)lseek(in, 0, SEEK_CUR));
	drain("  received", sv[1], r);

	off = 1 << 20;
	errno = ERRNO_SENTINEL;
	r = sendfile64(sv[0], in, &off, 100000);
	h_report("sendfile64 offset 1M", r, errno, NULL, 0);
	printf("offset now %ld\n", (long)off);
	drain("  received", sv[1], r);

	lseek(in, 2 << 20, SEEK_SET);
	errno = ERRNO_SENTINEL;
	r = sendfile(sv[0], in, NULL, 50000);
	h_report("sendfile NULL offset at 2M", r, errno, NULL, 0);
	printf("position now %ld\n", (long)lseek(in, 0, SEEK_CUR));
	drain("  received", sv[1], r);

	off = (3 << 20) - 10;
	H_CALL("sendfile across EOF", sendfile(sv[0], in, &off, 4096), NULL, 0);
	drain("  received", sv[1], 10);
	H_CALL("sendfile at EOF", sendfile(sv[0], in, &off, 4096), NULL, 0);
	off = 0;
	H_CALL("sendfile zero count", sendfile(sv[0], in, &off, 0), NULL, 0);
	off = -1;
	H_CALL("sendfile negative offset", sendfile(sv[0], in, &off, 10), NULL, 0);
	H_CALL("sendfile bad offset pointer", sendfile(sv[0], in, h_opaque_ptr((void *)8), 10), NULL, 0);
	H_CALL("sendfile64 bad offset pointer", sendfile64(sv[0], in, h_opaque_ptr((void *)4096), 10), NULL, 0);
	H_CALL("sendfile bad in fd", sendfile(sv[0], -1, NULL, 10), NULL, 0);
	H_CALL("sendfile bad out fd", sendfile(-1, in, NULL, 10), NULL, 0);
	H_CALL("sendfile closed in fd", sendfile(sv[0], 999, NULL, 10), NULL, 0);

	if (pipe(pipes) == 0) {
		off = 500000;
		H_CALL("sendfile to pipe", sendfile(pipes[1], in, &off, 30000), NULL, 0);
		drain("  received", pipes[0], 30000);
		H_CALL("write pipe", write(pipes[1], "xyz", 3), NULL, 0);
		H_CALL("sendfile from pipe", sendfile(sv[0], pipes[0], NULL, 3), NULL, 0);
		close(pipes[0]);
		close(pipes[1]);
	}
	close(sv[0]);
	close(sv[1]);

	out_file = open(h_path("copy.out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	off = 0;
	H_CALL("sendfile64 to file, huge count", sendfile64(out_file, in, &off, (size_t)1 << 40), NULL, 0);
	close(out_file);
	out_file = open(h_path("copy.out"), O_RDONLY);
	drain("  copy", out_file, 3 << 20);
	close(out_file);
	close(in);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 5);
	h_compare_all("sendfile", 1);
	return h_finish();
}
