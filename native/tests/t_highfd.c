/*
 * t_highfd.c - a process with more descriptors than the shim's fd table
 * covers (a busy server with a raised RLIMIT_NOFILE), so the shim's daemon
 * socket and the files get numbers beyond the table. Reads must still be
 * served on one connection, without leaking a socket per request.
 *
 * With the right to raise RLIMIT_NOFILE past 65536 (CAP_SYS_RESOURCE) the
 * real shim is used; otherwise the same code path is covered with the
 * shim built with a 1024-entry table (LCP_TEST_PRELOAD_FDTAB1024, set by
 * tests/run), filling descriptors up past 1024 within the default limit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "harness.h"

#define READS 20

static int table_size = 65536;

static char buf[65536];

/* Open descriptors at or above the table size. */
static int high_fds(void)
{
	int n = 0;

	for (int fd = table_size; fd < table_size + 4096; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void scenario(const char *name)
{
	struct rlimit lim;
	int null, fd, before, after;

	table_size = atoi(name);
	if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < (rlim_t)table_size + 8192) {
		lim.rlim_cur = lim.rlim_max = (rlim_t)table_size + 8192;
		if (setrlimit(RLIMIT_NOFILE, &lim) != 0) {
			printf("cannot raise RLIMIT_NOFILE: %s\n", strerror(errno));
			return;
		}
	}
	null = open("/dev/null", O_RDONLY);
	while (dup(null) < table_size + 64)
		;
	h_evict(h_path("data.bin"));
	fd = open(h_path("data.bin"), O_RDONLY);
	printf("file fd beyond the table: %s\n", fd >= table_size ? "yes" : "no");
	before = high_fds();
	for (int i = 0; i < READS; i++) {
		if (i % 4 == 0)
			h_evict(h_path("data.bin"));
		H_CALL("cold pread", pread(fd, buf, 65536, (off_t)i * 65536), buf, 0);
	}
	after = high_fds();
	/* The shim may keep one socket open; libc alone keeps none. */
	printf("descriptors gained beyond one: %d\n", after - before > 1 ? after - before - 1 : 0);
	close(fd);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	const char *scenario_name = "65536";
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("data.bin"), 2u << 20, 75);
	h_run(&base, scenario_name, 60, &b);
	if (strstr(b.output, "cannot raise") != NULL) {
		const char *small = getenv("LCP_TEST_PRELOAD_FDTAB1024");

		printf("%s", b.output);
		if (small == NULL)
			h_skip("cannot raise RLIMIT_NOFILE past 65536 and LCP_TEST_PRELOAD_FDTAB1024 is not set");
		printf("using the shim built with a 1024-entry fd table instead\n");
		setenv("LCP_TEST_PRELOAD", small, 1);
		scenario_name = "1024";
		h_result_free(&b);
		h_run(&base, scenario_name, 60, &b);
	}
	h_expect(b.status == 0 && strstr(b.output, "beyond the table: yes") != NULL, "baseline: %s", b.output);
	h_run(&full, scenario_name, 60, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "full: output differs from libc's:\n%s", r.output);
	printf("full (table %s): %d requests on %d connections\n", scenario_name, r.nrecords, r.connections);
	h_expect(r.nrecords >= 5, "full: cold reads should be fetched (%d requests)", r.nrecords);
	h_expect(r.connections == 1, "full: one connection should serve every request, the daemon saw %d",
		 r.connections);
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
