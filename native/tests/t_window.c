/*
 * t_window.c - the window a daemon answer leaves behind. For a file the
 * process cannot check itself (uid 65534 reading root's file), every check
 * is a daemon round trip; after the daemon fetched or confirmed a range, the
 * shim trusts that range for LIBCEPTION_WINDOW_MS without asking again. The
 * bytes must always be libc's, and the window must be used only within its
 * range, its file and its time:
 *   nginx     sendfile of a 2 MiB chunk that the socket takes in pieces: one
 *             FETCH, the later pieces answered by the window;
 *   beyond    a call past the window's end asks the daemon again;
 *   expiry    the same range after the window expired asks again;
 *   otherfile another file dup2'ed onto the number asks again;
 * and LIBCEPTION_WINDOW_MS=0 turns it off (every call asks). A daemon that
 * lets the shim learn residency says how far the resident run reaches past
 * the request (lcp_reply.resident_end, up to its 2 MiB prefetch here):
 *   walk      64 KiB preads walking a resident 4 MiB file ask once per
 *             2 MiB window, not once per call;
 *   change    the window ends when the file is truncated, and when the fd
 *             is closed and the number opened again (same file, so only the
 *             close can have ended it).
 * Needs root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>

#include <libception/protocol.h>

#include "harness.h"

#define CHUNK (2u << 20)
#define PIECE 65536

static char buf[PIECE];

static void drain(int fd)
{
	while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

#define WALK_FILE (4u << 20)

static void walk(void)
{
	int fd = open(h_path("walk.bin"), O_RDONLY);

	for (unsigned off = 0; off < WALK_FILE; off += PIECE)
		H_CALL("walk", pread(fd, buf, PIECE, off), buf, PIECE);
	close(fd);
}

static void change(void)
{
	int fd = open(h_path("own.bin"), O_RDONLY), rw, again;

	H_CALL("first", pread(fd, buf, PIECE, 0), buf, PIECE);
	H_CALL("inside the window", pread(fd, buf, PIECE, PIECE), buf, PIECE);
	rw = open(h_path("own.bin"), O_RDWR);
	printf("truncate: %d\n", ftruncate(rw, 3u << 20));
	close(rw);
	H_CALL("after the truncation", pread(fd, buf, PIECE, 2 * PIECE), buf, PIECE);
	H_CALL("inside the new window", pread(fd, buf, PIECE, 3 * PIECE), buf, PIECE);
	close(fd);
	again = open(h_path("own.bin"), O_RDONLY);
	printf("same number: %s\n", again == fd ? "yes" : "no");
	H_CALL("after close and open", pread(again, buf, PIECE, 4 * PIECE), buf, PIECE);
	H_CALL("inside the newest window", pread(again, buf, PIECE, 5 * PIECE), buf, PIECE);
	close(again);
}

static void scenario(const char *name)
{
	int fd, other, sv[2], size = PIECE;
	off_t off = 0;

	if (strcmp(name, "walk") == 0) {
		walk();
		return;
	}
	if (strcmp(name, "change") == 0) {
		change();
		return;
	}
	h_evict(h_path("root.bin"));
	h_evict(h_path("root2.bin"));
	fd = open(h_path("root.bin"), O_RDONLY);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
		return;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	/* nginx: sendfile(count = rest of the chunk), the socket takes less. */
	for (int i = 0; i < 8; i++) {
		ssize_t n;

		errno = ERRNO_SENTINEL;
		n = sendfile(sv[0], fd, &off, CHUNK - (size_t)off);
		printf("sendfile piece %d: %s, offset now %s\n", i, n > 0 ? "sent" : strerror(errno),
		       off > 0 && off < (off_t)CHUNK ? "inside the chunk" : "?");
		drain(sv[1]);
	}
	/* beyond: past the first chunk. */
	H_CALL("pread beyond the window", pread(fd, buf, 4096, CHUNK + 4096), buf, 0);
	/* expiry: the first chunk again, after the window ran out. */
	{
		struct timespec pause = { 1, 200 * 1000000 }; /* the window is 1000 ms */

		nanosleep(&pause, NULL);
	}
	H_CALL("pread after expiry", pread(fd, buf, 4096, 8192), buf, 0);
	/* otherfile: another file on the same number, same range. */
	other = open(h_path("root2.bin"), O_RDONLY);
	dup2(other, fd);
	close(other);
	H_CALL("pread of another file on the number", pread(fd, buf, 4096, 8192), buf, 0);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline", .setpriv_uid = "65534" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1, .setpriv_uid = "65534",
				    .extra_env = { "LIBCEPTION_WINDOW_MS=1000" } };
	const struct h_run off = { .label = "full, window off", .mode = "full", .daemon = 1, .setpriv_uid = "65534",
				   .extra_env = { "LIBCEPTION_WINDOW_MS=0" } };
	const struct h_run track = { .label = "track", .mode = "track", .daemon = 1, .setpriv_uid = "65534",
				     .extra_env = { "LIBCEPTION_WINDOW_MS=1000" } };
	struct h_result b, r;
	long long window, daemon;
	int calls = 8 + 3;

	h_init(argc, argv, scenario);
	h_require_setpriv();
	h_make_file(h_path("root.bin"), 6u << 20, 110);
	h_make_file(h_path("root2.bin"), 1u << 20, 111);
	h_run(&base, "window", 30, &b);
	h_expect(b.status == 0 && strstr(b.output, "piece 7: sent, offset now inside the chunk") != NULL,
		 "baseline: the socket should take the chunk in pieces:\n%s", b.output);

	h_run(&full, "window", 30, &r);
	window = h_stat(&r, "\"residency_checks\"", "window");
	daemon = h_stat(&r, "\"residency_checks\"", "daemon");
	printf("full: %d requests, daemon checks %lld, window hits %lld\n", r.nrecords, daemon, window);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "full: output differs from libc's:\n%s", r.output);
	/* One FETCH for the chunk, one beyond, one after expiry, one for the
	 * other file; the 7 later pieces from the window. */
	h_expect(window == 7 && daemon == 4 && r.nrecords == 4,
		 "full: expected 4 requests and 7 window hits, got %d requests, %lld window hits", r.nrecords, window);
	h_expect(r.nrecords >= 1 && r.records[0].op == LCP_OP_FETCH && !r.records[0].resident,
		 "full: the first piece of the cold chunk should have been fetched");
	h_result_free(&r);

	h_run(&off, "window", 30, &r);
	printf("full, window off: %d requests, window hits %lld\n", r.nrecords,
	       h_stat(&r, "\"residency_checks\"", "window"));
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "window off: output differs from libc's");
	h_expect(r.nrecords == calls && h_stat(&r, "\"residency_checks\"", "window") == 0,
		 "window off: every one of the %d calls should ask the daemon (%d did)", calls, r.nrecords);
	h_result_free(&r);

	h_run(&track, "window", 30, &r);
	printf("track: %d requests, window hits %lld\n", r.nrecords, h_stat(&r, "\"residency_checks\"", "window"));
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "track: output differs from libc's");
	for (int i = 0; i < r.nrecords; i++)
		h_expect(r.records[i].op == LCP_OP_CHECK, "track: sent op %u", r.records[i].op);
	h_result_free(&r);
	h_result_free(&b);

	/* walk: 64 calls, two windows of 2 MiB, one round trip each. */
	h_make_file(h_path("walk.bin"), WALK_FILE, 112);
	h_run(&base, "walk", 30, &b);
	h_run(&full, "walk", 30, &r);
	window = h_stat(&r, "\"residency_checks\"", "window");
	printf("walk: %d requests, window hits %lld\n", r.nrecords, window);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "walk: output differs from libc's:\n%s", r.output);
	h_expect(r.nrecords == 2 && window == 62,
		 "walk: expected 2 requests (one per 2 MiB window) and 62 window hits, got %d and %lld", r.nrecords,
		 window);
	h_result_free(&r);
	h_result_free(&b);

	/* change: a file of the caller's own, checked through the daemon. */
	{
		const struct h_run own = { .label = "full, own file via the daemon", .mode = "full", .daemon = 1,
					   .setpriv_uid = "65534",
					   .extra_env = { "LIBCEPTION_WINDOW_MS=60000", "LIBCEPTION_FORCE_CHECK=daemon" } };
		int asked = 0;

		h_make_file(h_path("own.bin"), 4u << 20, 113);
		if (chown(h_path("own.bin"), 65534, 65534) != 0)
			h_fail("chown own.bin: %s", strerror(errno));
		h_run(&base, "change", 30, &b);
		h_make_file(h_path("own.bin"), 4u << 20, 113);
		if (chown(h_path("own.bin"), 65534, 65534) != 0)
			h_fail("chown own.bin: %s", strerror(errno));
		h_run(&own, "change", 30, &r);
		window = h_stat(&r, "\"residency_checks\"", "window");
		/* Every file is checked through the daemon here, the loader's
		 * and libc's own small reads too: count the scenario's. */
		for (int i = 0; i < r.nrecords; i++)
			asked += r.records[i].length == PIECE;
		printf("change: %d requests about own.bin, window hits %lld\n", asked, window);
		h_expect(r.status == 0 && strcmp(r.output, b.output) == 0 && strstr(b.output, "same number: yes"),
			 "change: output differs from libc's (or the number was not reused):\n%s\n%s", b.output,
			 r.output);
		h_expect(asked == 3 && window == 3,
			 "change: expected 3 requests (first, after the truncation, after close+open) and 3 window "
			 "hits, got %d and %lld", asked, window);
		h_result_free(&r);
		h_result_free(&b);
	}
	return h_finish();
}
