/*
 * t_foreign.c - files the process neither owns nor may write. There
 * cachestat(2) says EPERM and mincore(2) claims every page is resident, so a
 * local check cannot be trusted; the shim must ask the daemon, and a cold
 * file must still be seen as a miss and fetched. Runs the reader as uid 65534
 * (setpriv) over root-owned files; needs root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "harness.h"

static char buf[65536];

static void scenario(const char *name)
{
	const char *file = strcmp(name, "own") == 0 ? h_path("nobody.bin") : h_path("root.bin");
	int fd;

	if (strcmp(name, "probe") == 0) {
		/* What the kernel tells this uid about a cold root-owned file. */
		struct { uint64_t off, len; } range = { 0, 1 << 20 };
		uint64_t cs[5];
		unsigned char vec[256];
		long rc;
		void *map;
		int resident = 0;

		h_evict(file);
		fd = open(file, O_RDONLY);
		rc = syscall(451, fd, &range, cs, 0);
		printf("cachestat: %s\n", rc == 0 ? "allowed" : strerrorname_np(errno));
		map = mmap(NULL, 1 << 20, PROT_READ, MAP_SHARED, fd, 0);
		if (map != MAP_FAILED && mincore(map, 1 << 20, vec) == 0)
			for (int i = 0; i < 256; i++)
				resident += vec[i] & 1;
		printf("mincore resident pages of a cold file: %d of 256\n", resident);
		close(fd);
		return;
	}
	h_evict(file);
	fd = open(file, O_RDONLY);
	H_CALL("read cold", read(fd, buf, 4096), buf, 0);
	H_CALL("pread 1M", pread(fd, buf, sizeof(buf), 1 << 20), buf, 0);
	H_CALL("pread 1M again (now resident)", pread(fd, buf, sizeof(buf), 1 << 20), buf, 0);
	close(fd);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline", .setpriv_uid = "65534" };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1, .setpriv_uid = "65534" };
	const struct h_run track = { .label = "track", .mode = "track", .daemon = 1, .setpriv_uid = "65534" };
	const struct h_run alone = { .label = "full/no-daemon", .mode = "full", .setpriv_uid = "65534" };
	struct h_result b, r;
	int fetch_misses = 0, checks = 0;

	h_init(argc, argv, scenario);
	h_require_setpriv();
	h_make_file(h_path("root.bin"), 2u << 20, 50);
	h_make_file(h_path("nobody.bin"), 2u << 20, 51);
	if (chown(h_path("nobody.bin"), 65534, 65534) != 0)
		h_skip("cannot chown a file to 65534: %s", strerror(errno));

	h_run(&base, "probe", 30, &b);
	printf("%s", b.output);
	h_expect(strstr(b.output, "cachestat: EPERM") != NULL,
		 "as uid 65534, cachestat of a root-owned file should be refused (the premise of this test)");
	h_result_free(&b);

	h_run(&base, "foreign", 30, &b);
	h_expect(b.status == 0, "baseline exited with %d", b.status);

	h_run(&full, "foreign", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "full: output differs from libc's");
	for (int i = 0; i < r.nrecords; i++) {
		if (r.records[i].op == 1 && !r.records[i].resident && r.records[i].uid == 65534)
			fetch_misses++;
	}
	printf("full: %d requests, %d fetches of non-resident ranges; daemon-checked %lld, cachestat %lld\n",
	       r.nrecords, fetch_misses, h_stat(&r, "\"residency_checks\"", "daemon"),
	       h_stat(&r, "\"residency_checks\"", "cachestat"));
	h_expect(fetch_misses >= 1, "full: the cold foreign file was never fetched (miss not detected)");
	h_expect(h_stat(&r, "\"residency_checks\"", "daemon") >= 1 &&
		 h_stat(&r, "\"residency_checks\"", "daemon") + h_stat(&r, "\"residency_checks\"", "window") >= 3,
		 "full: every call on the foreign file should be answered by the daemon or its recent window");
	h_expect(h_stat(&r, "\"read\"", "misses") == 1, "full: the cold read() should count as a miss");
	h_result_free(&r);

	h_run(&track, "foreign", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "track: output differs from libc's");
	for (int i = 0; i < r.nrecords; i++) {
		h_expect(r.records[i].op == 2, "track: sent op %u, only CHECK is allowed", r.records[i].op);
		checks += r.records[i].op == 2;
	}
	h_expect(checks >= 1, "track: no CHECK reached the daemon");
	h_expect(h_stat(&r, "\"read\"", "misses") == 1, "track: the cold read() is a miss (daemon check), got %lld",
		 h_stat(&r, "\"read\"", "misses"));
	h_result_free(&r);

	h_run(&alone, "foreign", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "full/no-daemon: output differs from libc's");
	h_expect(h_stat(&r, "\"read\"", "unknown") == 1, "full/no-daemon: residency must be unknown, not a hit");
	h_result_free(&r);
	h_result_free(&b);

	/* A file the uid owns: cachestat works, the daemon is not asked. */
	h_run(&base, "own", 30, &b);
	h_run(&full, "own", 30, &r);
	h_expect(r.status == 0 && strcmp(r.output, b.output) == 0, "own file: output differs from libc's");
	h_expect(h_stat(&r, "\"residency_checks\"", "cachestat") >= 3 && h_stat(&r, "\"residency_checks\"", "daemon") == 0,
		 "own file: cachestat should answer, not the daemon");
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
