/*
 * t_maxrequest.c - how much of one call the shim checks and fetches
 * (LIBCEPTION_MAX_REQUEST). nginx with sendfile_max_chunk 0 passes the rest
 * of a response as sendfile's count, and one call can move more than 2 MiB:
 * a part of the count the shim leaves unchecked is read by the kernel in the
 * server's thread, outside the daemon's serialization. So:
 *   chunk   a 2.6 MB sendfile (a paper 001 HD chunk) is fetched whole, one
 *           FETCH of the whole count, not 2 MiB of it;
 *   huge    a count far past the file asks for the default bound, 8 MiB;
 * and LIBCEPTION_MAX_REQUEST=1M lowers the bound to 1 MiB. The bytes sent are
 * libc's in every run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include <libception/protocol.h>

#include "harness.h"

#define HD_CHUNK 2618750u
#define FILE_SIZE (12u << 20)

static char buf[1 << 16];

/* Reads everything the socket holds, returns the bytes read. */
static long drain(int fd)
{
	long got = 0;
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		got += n;
	return got;
}

static void scenario(const char *name)
{
	int fd, sv[2];
	off_t off = 0;
	size_t count = strcmp(name, "huge") == 0 ? (size_t)100 << 20 : HD_CHUNK;
	ssize_t n;

	h_evict(h_path("video.bin"));
	fd = open(h_path("video.bin"), O_RDONLY);
	if (fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
		return;
	errno = ERRNO_SENTINEL;
	n = sendfile(sv[0], fd, &off, count);
	printf("sendfile of %zu bytes: %s, offset moved by the bytes sent: %s\n", count,
	       n > 0 ? "sent" : strerror(errno), n > 0 && off == n ? "yes" : "no");
	printf("received what was sent: %s\n", drain(sv[1]) == n ? "yes" : "no");
	H_CALL("pread after it", pread(fd, buf, sizeof(buf), (off_t)HD_CHUNK), buf, sizeof(buf));
	close(sv[0]);
	close(sv[1]);
	close(fd);
}

/* The first request the shim sent in `result`: a FETCH of [0, want). */
static void expect_fetch(const char *what, const struct h_result *result, const struct h_result *baseline,
			 uint64_t want)
{
	h_expect(result->status == 0 && strcmp(result->output, baseline->output) == 0,
		 "%s: output differs from libc's:\n%s", what, result->output);
	h_expect(result->nrecords >= 1, "%s: the shim sent nothing", what);
	if (result->nrecords < 1)
		return;
	printf("%s: first request op %u, offset %llu, length %llu\n", what, result->records[0].op,
	       (unsigned long long)result->records[0].offset, (unsigned long long)result->records[0].length);
	h_expect(result->records[0].op == LCP_OP_FETCH && result->records[0].offset == 0 &&
			 result->records[0].length == want,
		 "%s: expected a FETCH of [0, %llu), got op %u of [%llu, +%llu)", what, (unsigned long long)want,
		 result->records[0].op, (unsigned long long)result->records[0].offset,
		 (unsigned long long)result->records[0].length);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	const struct h_run low = { .label = "full, LIBCEPTION_MAX_REQUEST=1M", .mode = "full", .daemon = 1,
				   .extra_env = { "LIBCEPTION_MAX_REQUEST=1M" } };
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("video.bin"), FILE_SIZE, 120);

	h_run(&base, "chunk", 30, &b);
	h_run(&full, "chunk", 30, &r);
	expect_fetch("chunk", &r, &b, HD_CHUNK);
	h_result_free(&r);
	h_run(&low, "chunk", 30, &r);
	expect_fetch("chunk, 1M bound", &r, &b, 1u << 20);
	h_result_free(&r);
	h_result_free(&b);

	h_run(&base, "huge", 30, &b);
	h_run(&full, "huge", 30, &r);
	expect_fetch("huge", &r, &b, 8u << 20);
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
