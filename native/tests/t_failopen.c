/*
 * t_failopen.c - the shim fails open and does not storm. Against no daemon,
 * a daemon that never answers, one that answers late (after the shim gave
 * up), garbage, wrong sequence numbers, a closed connection and a reply
 * carrying a stray fd: the program's output is libc's, no call waits much
 * longer than LIBCEPTION_TIMEOUT_MS, the shim backs off instead of retrying on
 * every call, a late reply is never taken for a later answer nor for a dead
 * daemon (the connection stays, no back-off), and no fd leaks.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define CALLS 60

static char buf[65536];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_pipes(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int pipes = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		char link[300], target[128];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n > 0 && strncmp(target, "pipe:", 5) == 0)
			pipes++;
	}
	closedir(d);
	return pipes;
}

static void scenario(const char *name)
{
	struct timespec pause = { 0, 10 * 1000000 };
	double slowest = 0;
	int fd;

	(void)name;
	h_evict(h_path("data.bin"));
	fd = open(h_path("data.bin"), O_RDONLY);
	for (int i = 0; i < CALLS; i++) {
		double start = now_s(), took;
		long r;

		/* Every call a cold range: evicting keeps the shim asking. */
		if (i % 8 == 0)
			h_evict(h_path("data.bin"));
		errno = ERRNO_SENTINEL;
		r = pread(fd, buf, sizeof(buf), (off_t)(i % 48) * 65536);
		took = now_s() - start;
		if (took > slowest)
			slowest = took;
		h_report("pread", r, errno, buf, r > 0 ? (size_t)r : 0);
		nanosleep(&pause, NULL);
	}
	close(fd);
	/* The bound: 300 ms timeout + generous margin for a loaded machine. */
	printf("slowest call beyond 2.3 s: %s\n", slowest > 2.3 ? "yes" : "no");
	printf("pipes open: %d\n", open_pipes());
}

static void run_case(const struct h_run *run, const struct h_result *baseline, struct h_result *r)
{
	h_run(run, "calls", 60, r);
	if (r->status != 0 || r->timed_out)
		h_fail("%s: child exited with %d%s", run->label, r->status, r->timed_out ? " (timed out)" : "");
	else if (strcmp(r->output, baseline->output) != 0)
		h_fail("%s: output differs from libc's", run->label);
	printf("  %s: %.2fs, daemon saw %d requests on %d connections; shim: connects %lld, connect failures %lld, "
	       "timeouts %lld, protocol errors %lld, broken %lld, fetches %lld\n",
	       run->label, r->seconds, r->nrecords, r->connections, h_stat(r, "\"daemon\"", "connects"),
	       h_stat(r, "\"daemon\"", "connect_failures"), h_stat(r, "\"daemon\"", "timeouts"),
	       h_stat(r, "\"daemon\"", "protocol_errors"), h_stat(r, "\"daemon\"", "broken"),
	       h_stat(r, "\"daemon\"", "fetches"));
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run absent = { .label = "no daemon", .mode = "full", .timeout_ms = 300 };
	const struct h_run never = { .label = "never replies", .mode = "full", .daemon = 1,
				     .behaviour = FAKE_NEVER_REPLY, .timeout_ms = 300 };
	const struct h_run late = { .label = "late first reply", .mode = "full", .daemon = 1,
				    .behaviour = FAKE_LATE_FIRST, .delay_ms = 600, .timeout_ms = 150 };
	const struct h_run garbage = { .label = "garbage", .mode = "full", .daemon = 1, .behaviour = FAKE_GARBAGE,
				       .timeout_ms = 300 };
	const struct h_run wrong_seq = { .label = "wrong seq", .mode = "full", .daemon = 1,
					 .behaviour = FAKE_WRONG_SEQ, .timeout_ms = 300 };
	const struct h_run closes = { .label = "closes", .mode = "full", .daemon = 1, .behaviour = FAKE_CLOSE,
				      .timeout_ms = 300 };
	const struct h_run stray = { .label = "stray fd", .mode = "full", .daemon = 1, .behaviour = FAKE_STRAY_FD,
				     .timeout_ms = 300 };
	const struct h_run healthy = { .label = "healthy", .mode = "full", .daemon = 1, .timeout_ms = 300 };
	/* Each misbehaviour must show in the shim's counters as what it is. */
	const struct { const struct h_run *run; const char *counter; } misbehaviours[] = {
		{ &garbage, "protocol_errors" },
		{ &wrong_seq, "protocol_errors" },
		{ &closes, "broken" },
		{ &stray, "protocol_errors" },
	};
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("data.bin"), 3u << 20, 60);
	h_run(&base, "calls", 60, &b);
	h_expect(b.status == 0 && strstr(b.output, "beyond 2.3 s: no") != NULL, "baseline run failed or was slow");

	run_case(&absent, &b, &r);
	h_expect(h_stat(&r, "\"daemon\"", "connect_failures") >= 1 && h_stat(&r, "\"daemon\"", "connect_failures") <= 8,
		 "no daemon: expected a few connect attempts with back-off, got %lld",
		 h_stat(&r, "\"daemon\"", "connect_failures"));
	h_result_free(&r);

	run_case(&never, &b, &r);
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") >= 1, "never replies: no timeout counted");
	h_expect(r.nrecords <= 6, "never replies: %d requests in %.1fs, back-off should allow a handful", r.nrecords,
		 r.seconds);
	h_result_free(&r);

	run_case(&late, &b, &r);
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") == 1, "late reply: exactly one timeout expected");
	h_expect(h_stat(&r, "\"daemon\"", "protocol_errors") == 0,
		 "late reply: the late answer must never be read (it would be out of sequence)");
	/* Regression (issue 13): a late reply was taken for a dead daemon, the
	 * connection dropped and the shim backed off for 100 ms-30 s, exactly
	 * when the daemon's queue is long. Now the connection stays, the late
	 * reply is taken in by its sequence number and service resumes. */
	h_expect(h_stat(&r, "\"daemon\"", "fetches") >= 1 && r.connections == 1,
		 "late reply: the shim should keep its one connection and be served again (%d connections)",
		 r.connections);
	h_expect(h_stat(&r, "\"daemon\"", "backoff_skips") == 0 && h_stat(&r, "\"daemon\"", "broken") == 0,
		 "late reply: a late reply is not a dead daemon, no back-off expected");
	h_result_free(&r);

	for (size_t i = 0; i < sizeof(misbehaviours) / sizeof(misbehaviours[0]); i++) {
		const struct h_run *run = misbehaviours[i].run;
		const char *counter = misbehaviours[i].counter;

		run_case(run, &b, &r);
		h_expect(h_stat(&r, "\"daemon\"", counter) >= 1, "%s: not counted in daemon.%s", run->label, counter);
		h_result_free(&r);
	}
	run_case(&healthy, &b, &r);
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") == 0 && h_stat(&r, "\"daemon\"", "fetches") >= 1 &&
		 h_stat(&r, "\"daemon\"", "connects") == 1, "healthy: one connection, fetches, no timeouts");
	h_result_free(&r);
	h_result_free(&b);
	return h_finish();
}
