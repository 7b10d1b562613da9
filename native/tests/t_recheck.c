/*
 * t_recheck.c - what the shim learns about an fd is not final. Regressions
 * (issue 13, transparency gaps):
 *   direct:   the O_DIRECT verdict was cached per fd forever, so O_DIRECT set
 *             with fcntl(F_SETFL) after the first read still sent fetches
 *             (read twice, through a description that bypasses the cache),
 *             and one cleared after open never got any;
 *   mmapfail: one transient mmap failure (ENOMEM: here RLIMIT_AS at the
 *             process's current size) sent the fd to daemon round trips for
 *             good instead of checking with mincore again next time.
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

#define MIB (1u << 20)

static void direct(void)
{
	char *buf;
	int fd;

	if (posix_memalign((void **)&buf, 4096, 65536) != 0)
		exit(1);
	/* A: read through the cache first, then O_DIRECT: reads in [1M, 2M)
	 * must not be fetched. */
	h_evict(h_path("a.bin"));
	fd = open(h_path("a.bin"), O_RDONLY);
	H_CALL("cached pread", pread(fd, buf, 65536, 0), buf, 0);
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_DIRECT) != 0) {
		printf("O_DIRECT unsupported here: %s\n", strerror(errno));
		return;
	}
	h_evict(h_path("a.bin")); /* whatever readahead brought in */
	for (int i = 0; i < 8; i++)
		H_CALL("pread after F_SETFL O_DIRECT", pread(fd, buf, 65536, MIB + (off_t)i * 65536), buf, 0);
	close(fd);
	/* B: O_DIRECT first, then cleared: reads in [3M, 4M) are fetched. */
	h_evict(h_path("b.bin"));
	fd = open(h_path("b.bin"), O_RDONLY | O_DIRECT);
	H_CALL("O_DIRECT pread", pread(fd, buf, 65536, 0), buf, 0);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT);
	for (int i = 0; i < 8; i++)
		H_CALL("pread after clearing O_DIRECT", pread(fd, buf, 65536, 3 * MIB + (off_t)i * 65536), buf, 0);
	close(fd);
	free(buf);
}

static void mmapfail(void)
{
	static char buf[4096];
	struct rlimit saved, tight;
	unsigned long pages = 0;
	FILE *statm = fopen("/proc/self/statm", "r");
	int fd = open(h_path("a.bin"), O_RDONLY);

	if (statm == NULL || fscanf(statm, "%lu", &pages) != 1 || getrlimit(RLIMIT_AS, &saved) != 0)
		exit(1);
	fclose(statm);
	h_evict(h_path("a.bin"));
	/* No room for one more mapping: the shim's mmap for mincore fails. */
	tight = saved;
	tight.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
	setrlimit(RLIMIT_AS, &tight);
	H_CALL("cold pread, mmap impossible", pread(fd, buf, 4096, 0), buf, 0);
	setrlimit(RLIMIT_AS, &saved);
	H_CALL("pread of the same page", pread(fd, buf, 4096, 0), buf, 0);
	close(fd);
}

static void scenario(const char *name)
{
	if (strcmp(name, "direct") == 0)
		direct();
	else
		mmapfail();
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	const struct h_run mincore = { .label = "full, mincore", .mode = "full", .daemon = 1,
				       .extra_env = { "LIBCEPTION_FORCE_CHECK=mincore" } };
	struct h_result b, r;
	int after_set = 0, after_clear = 0;

	h_init(argc, argv, scenario);
	h_make_file(h_path("a.bin"), 2 * MIB, 11);
	h_make_file(h_path("b.bin"), 4 * MIB, 12);

	h_run(&base, "direct", 30, &b);
	if (strstr(b.output, "unsupported") != NULL)
		h_skip("the test directory's filesystem refuses O_DIRECT: %s", b.output);
	h_run(&full, "direct", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "direct: output differs from libc's:\n%s", r.output);
	for (int i = 0; i < r.nrecords; i++) {
		after_set += r.records[i].offset >= MIB && r.records[i].offset < 2 * MIB;
		after_clear += r.records[i].offset >= 3 * MIB;
	}
	printf("direct: %d fetches after F_SETFL O_DIRECT, %d after clearing it\n", after_set, after_clear);
	h_expect(after_set == 0, "direct: %d fetches for reads made after O_DIRECT was set", after_set);
	h_expect(after_clear >= 1, "direct: no fetch for cold reads made after O_DIRECT was cleared");
	h_result_free(&r);
	h_result_free(&b);

	h_run(&base, "mmapfail", 30, &b);
	h_run(&mincore, "mmapfail", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "mmapfail: output differs from libc's:\n%s",
		 r.output);
	printf("mmapfail: %lld mincore checks, %lld daemon checks, %d requests\n",
	       h_stat(&r, "\"residency_checks\"", "mincore"), h_stat(&r, "\"residency_checks\"", "daemon"), r.nrecords);
	h_expect(h_stat(&r, "\"residency_checks\"", "mincore") >= 1,
		 "mmapfail: after one failed mmap the fd never used mincore again");
	h_expect(r.nrecords == 1, "mmapfail: %d daemon requests, expected 1 (the call whose mmap failed)", r.nrecords);
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
