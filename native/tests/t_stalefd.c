/*
 * t_stalefd.c - a descriptor number the shim learned as "a file only the
 * daemon can check" (uid 65534 reading root's file) is closed behind the
 * shim's back (close_range) and reused for a socket. Calls on the socket must
 * get libc's answers and the daemon must never be handed the socket: only
 * regular files may cross the wire. Needs root (setpriv).
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
#include <sys/syscall.h>
#include <sys/uio.h>

#include "harness.h"

static char buf[65536];

static void scenario(const char *name)
{
	int fd, sv[2], null = open("/dev/null", O_WRONLY);
	off_t off = 0;
	struct iovec iov = { buf, 4096 };
	void *map;

	(void)name;
	h_evict(h_path("root.bin"));
	fd = open(h_path("root.bin"), O_RDONLY);
	H_CALL("cold pread of root's file", pread(fd, buf, 4096, 0), buf, 0);
	syscall(SYS_close_range, (unsigned)fd, (unsigned)fd, 0u); /* not seen by the shim */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return;
	printf("the socket took the file's number: %s\n", sv[0] == fd ? "yes" : "no");
	(void)!write(sv[1], "0123456789", 10);
	H_CALL("pread on the socket", pread(fd, buf, 4096, 0), buf, 0);
	H_CALL("preadv on the socket", preadv(fd, &iov, 1, 0), buf, 0);
	H_CALL("sendfile from the socket", sendfile(null, fd, &off, 4096), buf, 0);
	errno = ERRNO_SENTINEL;
	map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	h_report("mmap of the socket", map == MAP_FAILED ? -1 : 0, errno, NULL, 0);
	H_CALL("read on the socket", read(fd, buf, 4096), buf, 0);
	close(sv[0]);
	close(sv[1]);
	close(null);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline", .setpriv_uid = "65534" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1, .setpriv_uid = "65534" };
	const struct h_run track = { .label = "track", .mode = "track", .daemon = 1, .setpriv_uid = "65534" };
	const struct h_run *runs[] = { &full, &track };
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_require_setpriv();
	h_make_file(h_path("root.bin"), 1u << 20, 95);
	h_run(&base, "stale", 30, &b);
	h_expect(b.status == 0 && strstr(b.output, "file's number: yes") != NULL, "baseline: %s", b.output);
	for (int k = 0; k < 2; k++) {
		int not_regular = 0;

		h_run(runs[k], "stale", 30, &r);
		h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "%s: output differs from libc's:\n%s",
			 runs[k]->label, r.output);
		for (int i = 0; i < r.nrecords; i++)
			not_regular += !r.records[i].regular;
		printf("%s: %d requests, %d of them with a non-regular fd\n", runs[k]->label, r.nrecords, not_regular);
		h_expect(r.nrecords >= 1, "%s: the cold foreign file should have reached the daemon", runs[k]->label);
		h_expect(not_regular == 0, "%s: the daemon was handed the application's socket %d times", runs[k]->label,
			 not_regular);
		h_result_free(&r);
	}
	h_result_free(&b);
	return h_finish();
}
