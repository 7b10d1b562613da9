/*
 * t_direct.c - O_DIRECT reads bypass the page cache, so there is nothing to
 * prefetch: a fetch would read the bytes twice (and through the shared
 * O_DIRECT file description the daemon's read would not even fill the
 * cache). The shim must leave such descriptors to libc: no request to the
 * daemon, no in-process prefetch, libc's bytes. Both ways of getting
 * O_DIRECT are covered: open(O_DIRECT), and fcntl(F_SETFL) after open as
 * nginx's "directio" does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void scenario(const char *name)
{
	char *buf;
	int fd;

	(void)name;
	if (posix_memalign((void **)&buf, 4096, 65536) != 0)
		exit(1);
	h_evict(h_path("direct.bin"));
	fd = open(h_path("direct.bin"), O_RDONLY | O_DIRECT);
	if (fd < 0) {
		printf("O_DIRECT unsupported here: %s\n", strerror(errno));
		return;
	}
	for (int i = 0; i < 8; i++)
		H_CALL("O_DIRECT pread", pread(fd, buf, 65536, (off_t)i * 65536), buf, 0);
	H_CALL("O_DIRECT read", read(fd, buf, 65536), buf, 0);
	close(fd);

	h_evict(h_path("direct.bin"));
	fd = open(h_path("direct.bin"), O_RDONLY);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT);
	for (int i = 0; i < 8; i++)
		H_CALL("F_SETFL O_DIRECT pread", pread(fd, buf, 65536, (off_t)i * 65536), buf, 0);
	close(fd);
	printf("resident pages after direct reads: %llu\n",
	       (unsigned long long)h_resident_pages(h_path("direct.bin")));
	free(buf);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	const struct h_run prefetch = { .label = "prefetch", .mode = "prefetch", .prefetch = "1M" };
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("direct.bin"), 1u << 20, 85);
	h_run(&base, "direct", 30, &b);
	if (strstr(b.output, "unsupported") != NULL)
		h_skip("the test directory's filesystem refuses O_DIRECT: %s", b.output);
	h_expect(b.status == 0, "baseline exited with %d", b.status);
	h_run(&full, "direct", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "full: output differs from libc's:\n%s", r.output);
	printf("full: %d daemon requests for O_DIRECT reads\n", r.nrecords);
	h_expect(r.nrecords == 0, "full: O_DIRECT reads sent %d requests to the daemon", r.nrecords);
	h_result_free(&r);
	h_run(&prefetch, "direct", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "prefetch: output differs from libc's:\n%s",
		 r.output);
	h_expect(h_stat(&r, "\"prefetch\": {", "calls") == 0, "prefetch: %lld in-process prefetches of O_DIRECT reads",
		 h_stat(&r, "\"prefetch\": {", "calls"));
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
