/*
 * t_modes.c - what each LIBCEPTION_MODE does to the page cache and to the
 * daemon, observed from outside: prefetch mode reads LIBCEPTION_PREFETCH
 * bytes ahead in-process (clamped to EOF), track mode counts but changes no
 * I/O and never fetches, off and an unknown mode leave everything alone,
 * sizes like 512K and 2MiB are understood, and the statistics file is valid;
 * with LIBCEPTION_STATS_INTERVAL_MS the file is also rewritten while the
 * process runs (a process that never exits normally still leaves its
 * counters), and without it only at exit. The rewrite may fall in a signal
 * handler on an 8 KiB alternate stack, in a thread being cancelled (no
 * descriptor leaks, the file goes on being rewritten) or after a vfork
 * child's call (the parent keeps writing its own file).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "harness.h"

static char buf[65536];

static void rewrite_scenario(const char *name);

static void scenario(const char *name)
{
	int fd;

	if (strncmp(name, "rewrite-", 8) == 0) {
		rewrite_scenario(name);
		return;
	}

	if (strcmp(name, "one-read") == 0) {
		h_evict(h_path("big.bin"));
		fd = open(h_path("big.bin"), O_RDONLY);
		H_CALL("pread 4096 at 0", pread(fd, buf, 4096, 0), buf, 0);
		close(fd);
		printf("resident pages: %llu\n", (unsigned long long)h_resident_pages(h_path("big.bin")));
	} else if (strcmp(name, "near-eof") == 0) {
		h_evict(h_path("short.bin"));
		fd = open(h_path("short.bin"), O_RDONLY);
		H_CALL("pread 100 at 500000", pread(fd, buf, 100, 500000), buf, 0);
		close(fd);
	} else if (strcmp(name, "straddle") == 0) {
		/* The first MiB prefetched by one read, then a read running
		 * 32 KiB past it: the next prefetch brings 1 MiB past the
		 * cached part, [1 MiB, 2 MiB), not [1 MiB - 32 KiB, 2 MiB - 32 KiB). */
		h_evict(h_path("big.bin"));
		fd = open(h_path("big.bin"), O_RDONLY);
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
		H_CALL("pread 4096 at 0", pread(fd, buf, 4096, 0), buf, 0);
		H_CALL("pread 64 KiB at 1 MiB - 32 KiB", pread(fd, buf, 65536, (1 << 20) - 32768), buf, 0);
		close(fd);
		printf("resident pages: %llu\n", (unsigned long long)h_resident_pages(h_path("big.bin")));
	} else if (strcmp(name, "five-preads") == 0) {
		h_evict(h_path("big.bin"));
		fd = open(h_path("big.bin"), O_RDONLY);
		for (int i = 0; i < 5; i++)
			H_CALL("pread", pread(fd, buf, 4096, (off_t)i * 4096), buf, 0);
		close(fd);
	} else if (strcmp(name, "two-preads-then-vanish") == 0 || strcmp(name, "two-preads") == 0) {
		struct timespec pause = { 0, 150 * 1000000 };

		fd = open(h_path("big.bin"), O_RDONLY);
		H_CALL("pread", pread(fd, buf, 4096, 0), buf, 0);
		nanosleep(&pause, NULL);
		H_CALL("pread", pread(fd, buf, 4096, 4096), buf, 0);
		if (strcmp(name, "two-preads-then-vanish") == 0) {
			fflush(stdout);
			_exit(0); /* no destructor: only a running rewrite leaves a file */
		}
		close(fd);
	}
}

static int scenario_fd;

static void pread_in_handler(int sig)
{
	char small[64];

	(void)sig;
	(void)!pread(scenario_fd, small, sizeof(small), 0);
}

static void *pread_forever(void *arg)
{
	char small[64];

	(void)arg;
	for (;;)
		(void)!pread(scenario_fd, small, sizeof(small), 0);
	return NULL;
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL)
		n++;
	if (d != NULL)
		closedir(d);
	return n;
}

/* Scenarios of the running rewrite (every millisecond) in awkward places. */
static void rewrite_scenario(const char *name)
{
	struct timespec two_ms = { 0, 2000000 };

	if (strcmp(name, "rewrite-after-vfork") == 0) {
		char small[64];
		pid_t pid = vfork();

		if (pid == 0) {
			close(-1); /* the process's first interposed call, in the child */
			_exit(0);
		}
		waitpid(pid, NULL, 0);
		scenario_fd = open(h_path("big.bin"), O_RDONLY);
		for (int i = 0; i < 20; i++) {
			(void)!pread(scenario_fd, small, sizeof(small), 0);
			nanosleep(&two_ms, NULL);
		}
		fflush(stdout);
		_exit(0); /* only a running rewrite leaves a file */
	}
	scenario_fd = open(h_path("big.bin"), O_RDONLY);
	if (strcmp(name, "rewrite-on-altstack") == 0) {
		/* 8 KiB of stack under a guard page: a writer on the stack overflows it. */
		size_t size = 8192;
		char *mem = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		stack_t ss = { .ss_sp = mem + 4096, .ss_size = size, .ss_flags = 0 };
		struct sigaction sa;

		mprotect(mem, 4096, PROT_NONE);
		sigaltstack(&ss, NULL);
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = pread_in_handler;
		sa.sa_flags = SA_ONSTACK;
		sigaction(SIGUSR1, &sa, NULL);
		for (int i = 0; i < 40; i++) {
			raise(SIGUSR1);
			nanosleep(&two_ms, NULL);
		}
		printf("handler preads done\n");
	} else if (strcmp(name, "rewrite-cancelled") == 0) {
		int before = open_fds();

		for (int i = 0; i < 300; i++) {
			pthread_t thread;

			pthread_create(&thread, NULL, pread_forever, NULL);
			nanosleep(&two_ms, NULL);
			pthread_cancel(thread);
			pthread_join(thread, NULL);
		}
		printf("descriptors before %d after %d\n", before, open_fds());
	}
	close(scenario_fd);
}

/* Does the run's statistics file contain text? (0 without a file.) */
static int stats_contain(const struct h_result *r, const char *text)
{
	char content[65536];
	FILE *f = fopen(r->stats_path, "r");
	size_t n;

	if (f == NULL)
		return 0;
	n = fread(content, 1, sizeof(content) - 1, f);
	fclose(f);
	content[n] = '\0';
	return strstr(content, text) != NULL;
}

static unsigned long long resident_of(const char *output)
{
	const char *p = strstr(output, "resident pages: ");

	return p ? strtoull(p + 16, NULL, 10) : 0;
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run prefetch = { .label = "prefetch 1M", .mode = "prefetch", .prefetch = "1M" };
	const struct h_run prefetch_k = { .label = "prefetch 512K", .mode = "prefetch", .prefetch = "512K" };
	const struct h_run prefetch_mib = { .label = "prefetch 2MiB", .mode = "prefetch", .prefetch = "2MiB" };
	const struct h_run prefetch_bad = { .label = "prefetch lots", .mode = "prefetch", .prefetch = "lots" };
	const struct h_run track = { .label = "track", .mode = "track", .daemon = 1 };
	const struct h_run off = { .label = "off", .mode = "off", .daemon = 1 };
	const struct h_run bogus = { .label = "bogus mode", .mode = "bogus", .daemon = 1 };
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result b, r;
	unsigned long long base_pages;

	h_init(argc, argv, scenario);
	h_make_file(h_path("big.bin"), 3u << 20, 70);
	h_make_file(h_path("short.bin"), 600000, 71);

	h_run(&base, "one-read", 30, &b);
	base_pages = resident_of(b.output);
	printf("baseline: one 4 KiB read leaves %llu pages resident (kernel readahead)\n", base_pages);
	h_expect(base_pages < 256, "baseline readahead already covers 1 MiB; the prefetch check would prove nothing");

	h_run(&prefetch, "one-read", 30, &r);
	printf("prefetch 1M: %llu pages resident, prefetched %lld bytes\n", resident_of(r.output),
	       h_stat(&r, "\"prefetch\": {", "bytes"));
	h_expect(resident_of(r.output) >= 256, "prefetch 1M: the first MiB should be resident");
	h_expect(h_stat(&r, "\"prefetch\": {", "bytes") == 1 << 20, "prefetch 1M: should read exactly 1 MiB ahead");
	h_expect(h_stat(&r, NULL, "prefetch_bytes") == 1 << 20, "LIBCEPTION_PREFETCH=1M not understood");
	h_expect(strncmp(r.output, b.output, strcspn(b.output, "\n")) == 0, "prefetch: the read itself changed");
	h_result_free(&r);

	h_run(&prefetch, "straddle", 30, &r);
	h_expect(h_stat(&r, "\"prefetch\": {", "calls") == 2, "straddle: two prefetches expected, %lld",
		 h_stat(&r, "\"prefetch\": {", "calls"));
	h_expect(h_stat(&r, "\"prefetch\": {", "bytes") == 2 << 20,
		 "straddle: the second prefetch should read the 1 MiB past the cached part (2 MiB in all), read %lld",
		 h_stat(&r, "\"prefetch\": {", "bytes"));
	/* Counted from the request instead, [0, 2 MiB - 32 KiB) would be: 504 pages. */
	h_expect(resident_of(r.output) >= 512, "straddle: [0, 2 MiB) should be resident, %llu pages", resident_of(r.output));
	h_result_free(&r);

	h_run(&prefetch_k, "one-read", 30, &r);
	h_expect(h_stat(&r, NULL, "prefetch_bytes") == 512 << 10, "LIBCEPTION_PREFETCH=512K not understood");
	h_result_free(&r);
	h_run(&prefetch_mib, "one-read", 30, &r);
	h_expect(h_stat(&r, NULL, "prefetch_bytes") == 2 << 20, "LIBCEPTION_PREFETCH=2MiB not understood");
	h_result_free(&r);
	h_run(&prefetch_bad, "one-read", 30, &r);
	h_expect(r.status == 0 && h_stat(&r, NULL, "prefetch_bytes") == 2 << 20,
		 "LIBCEPTION_PREFETCH=lots must keep the 2 MiB default and still run");
	h_result_free(&r);

	h_run(&prefetch, "near-eof", 30, &r);
	h_expect(h_stat(&r, "\"prefetch\": {", "bytes") == 100000,
		 "prefetch near EOF: should read the 100000 bytes to EOF, read %lld", h_stat(&r, "\"prefetch\": {", "bytes"));
	h_result_free(&r);

	h_run(&track, "one-read", 30, &r);
	printf("track: %llu pages resident\n", resident_of(r.output));
	h_expect(strcmp(r.output, b.output) == 0 || resident_of(r.output) < 256,
		 "track: must not prefetch (resident pages %llu)", resident_of(r.output));
	h_expect(r.nrecords == 0, "track: the daemon must not be asked about a file cachestat can check");
	h_result_free(&r);

	h_run(&track, "five-preads", 30, &r);
	h_expect(h_stat(&r, "\"pread\"", "calls") == 5, "track: pread calls %lld, expected 5",
		 h_stat(&r, "\"pread\"", "calls"));
	h_expect(h_stat(&r, "\"pread\"", "bytes") == 5 * 4096, "track: pread bytes wrong");
	h_expect(h_stat(&r, "\"pread\"", "misses") >= 1 &&
		 h_stat(&r, "\"pread\"", "misses") + h_stat(&r, "\"pread\"", "hits") == 5,
		 "track: the first cold pread is a miss and every call is classified");
	{
		char cmd[700];

		snprintf(cmd, sizeof(cmd), "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s",
			 r.stats_path);
		if (system("python3 -c '' 2>/dev/null") == 0)
			h_expect(system(cmd) == 0, "track: %s is not valid JSON", r.stats_path);
	}
	h_result_free(&r);

	{
		const struct h_run rewrite = { .label = "track, rewritten every 50 ms", .mode = "track",
					       .extra_env = { "LIBCEPTION_STATS_INTERVAL_MS=50" } };
		const struct h_run every_ms = { .label = "track, rewritten every millisecond", .mode = "track",
						.extra_env = { "LIBCEPTION_STATS_INTERVAL_MS=1" } };
		const struct h_run bad_interval = { .label = "track, interval soon", .mode = "track",
						    .extra_env = { "LIBCEPTION_STATS_INTERVAL_MS=soon" } };

		h_run(&rewrite, "two-preads-then-vanish", 30, &r);
		h_expect(r.status == 0 && h_stat(&r, "\"pread\"", "calls") == 2,
			 "interval: the second call, 150 ms after the first, should rewrite the file with both (calls %lld)",
			 h_stat(&r, "\"pread\"", "calls"));
		h_expect(stats_contain(&r, "\"at_exit\": false") && h_stat(&r, NULL, "interval_ms") == 50,
			 "interval: a running rewrite says at_exit false and its interval");
		h_expect(h_stat(&r, NULL, "written_ns") > 0, "interval: the file carries its CLOCK_MONOTONIC time");
		h_result_free(&r);
		h_run(&rewrite, "two-preads", 30, &r);
		h_expect(r.status == 0 && h_stat(&r, "\"pread\"", "calls") == 2 && stats_contain(&r, "\"at_exit\": true"),
			 "interval: the file at exit replaces the running one");
		h_result_free(&r);
		h_run(&track, "two-preads-then-vanish", 30, &r);
		h_expect(r.status == 0 && access(r.stats_path, F_OK) != 0,
			 "no interval: a process that skips its destructor leaves no file");
		h_result_free(&r);
		h_run(&every_ms, "rewrite-on-altstack", 60, &r);
		h_expect(r.status == 0 && strstr(r.output, "handler preads done") != NULL &&
			 h_stat(&r, "\"pread\"", "calls") >= 40,
			 "a rewrite in a handler on an 8 KiB alternate stack must not crash (status %d)", r.status);
		h_result_free(&r);
		h_run(&every_ms, "rewrite-cancelled", 60, &r);
		{
			int before = -1, after = -2;
			const char *line = strstr(r.output, "descriptors before");

			if (line != NULL)
				sscanf(line, "descriptors before %d after %d", &before, &after);
			h_expect(r.status == 0 && before == after,
				 "threads cancelled in calls that rewrite must leave no descriptor open (%d before, %d after)",
				 before, after);
		}
		h_expect(stats_contain(&r, "\"at_exit\": true"), "after the cancellations the file at exit is written");
		h_result_free(&r);
		h_run(&every_ms, "rewrite-after-vfork", 30, &r);
		h_expect(r.status == 0 && h_stat(&r, "\"pread\"", "calls") > 0 && stats_contain(&r, "\"at_exit\": false"),
			 "a vfork child's call must not take the parent's rewrites (calls %lld)",
			 h_stat(&r, "\"pread\"", "calls"));
		h_result_free(&r);
		h_run(&bad_interval, "two-preads", 30, &r);
		h_expect(r.status == 0 && h_stat(&r, "\"pread\"", "calls") == 2 && h_stat(&r, NULL, "interval_ms") == 0,
			 "an invalid interval keeps statistics at exit only, and the program runs");
		h_result_free(&r);
	}

	h_run(&off, "one-read", 30, &r);
	h_expect(strcmp(r.output, b.output) == 0 || resident_of(r.output) < 256, "off: changed the page cache");
	h_expect(r.nrecords == 0 && r.connections == 0, "off: must not talk to the daemon");
	h_result_free(&r);
	h_run(&bogus, "one-read", 30, &r);
	h_expect(r.status == 0 && r.nrecords == 0 && r.connections == 0, "unknown mode: must behave as off");
	h_result_free(&r);

	h_run(&full, "one-read", 30, &r);
	printf("full: %llu pages resident after the daemon's fetch\n", resident_of(r.output));
	h_expect(resident_of(r.output) >= 512, "full: the fake daemon reads 2 MiB ahead; those pages should be resident");
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
