/*
 * t_patience.c - a wait for the daemon that runs out while the daemon is
 * answering other threads of the process is stretched (LIBCEPTION_PATIENCE_MS),
 * so that a crowd of threads behind one disk queue keeps to the daemon instead
 * of each reading on its own; a lone waiting thread still gives up after
 * LIBCEPTION_TIMEOUT_MS, and the patience is a bound.
 *
 * The fake daemon serves one request at a time over all connections, each
 * taking 40 ms (a disk). Sixteen threads ask at once with a 150 ms timeout,
 * so most of them wait longer than the timeout (the last about 640 ms), with
 * a reply every 40 ms to keep the waits stretched (110 ms of slack for a
 * loaded machine):
 *   - default patience: no timeout, waits stretched, every thread served by
 *     the daemon;
 *   - patience 300 ms: waits stretched, but only the threads served by about
 *     300 ms get the daemon's answer (5 to 9 of them: about 7; the old
 *     behaviour, 3; stretching past the bound, 11 or more);
 *   - patience 0: nothing is stretched, the old behaviour;
 *   - one thread alone behind a 400 ms reply: it gives up at 150 ms, since no
 *     other reply shows the daemon working; and one thread whose own fast
 *     reply came just before its slow request: its own reply does not count.
 * In every case the bytes are libc's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define CROWD 16
#define FILE_SIZE (1u << 20)

static pthread_barrier_t start;
static uint64_t sums[CROWD];

static void *reader(void *arg)
{
	int id = (int)(long)arg, fd;
	char name[32], *buf = malloc(65536);
	uint64_t h = 1469598103934665603ull;
	ssize_t n;

	snprintf(name, sizeof(name), "p%d.bin", id);
	fd = open(h_path(name), O_RDONLY);
	pthread_barrier_wait(&start);
	n = pread(fd, buf, 65536, 65536);
	for (ssize_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
	sums[id] = n == 65536 ? h : 0;
	close(fd);
	free(buf);
	return NULL;
}

/* One thread, two cold ranges: the first answered at once, the second slowly. */
static void twice(void)
{
	char *buf = malloc(65536);
	int fd = open(h_path("p0.bin"), O_RDONLY);

	H_CALL("pread first", pread(fd, buf, 65536, 0), buf, 65536);
	h_evict(h_path("p0.bin"));
	H_CALL("pread second", pread(fd, buf, 65536, 512 * 1024), buf, 65536);
	close(fd);
	free(buf);
}

static void scenario(const char *name)
{
	int threads = strcmp(name, "lone") == 0 ? 1 : CROWD;

	if (strcmp(name, "twice") == 0) {
		h_evict(h_path("p0.bin"));
		twice();
		return;
	}
	pthread_t t[CROWD];
	char fname[32];

	for (int i = 0; i < threads; i++) {
		snprintf(fname, sizeof(fname), "p%d.bin", i);
		h_evict(h_path(fname));
	}
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, reader, (void *)(long)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < threads; i++)
		printf("thread %d: %016llx\n", i, (unsigned long long)sums[i]);
}

static void run(const struct h_run *run, const char *scenario_name, const struct h_result *baseline,
		struct h_result *r)
{
	h_run(run, scenario_name, 60, r);
	h_expect(r->status == 0 && !r->timed_out, "%s: child exited with %d", run->label, r->status);
	h_expect(r->output != NULL && strcmp(r->output, baseline->output) == 0, "%s: output differs from libc's",
		 run->label);
	printf("  %s: %.2fs, daemon saw %d requests; shim: timeouts %lld, patient_waits %lld, fetches %lld\n",
	       run->label, r->seconds, r->nrecords, h_stat(r, "\"daemon\"", "timeouts"),
	       h_stat(r, "\"daemon\"", "patient_waits"), h_stat(r, "\"daemon\"", "fetches"));
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run patient = { .label = "crowd, default patience", .mode = "full", .daemon = 1,
				       .behaviour = FAKE_QUEUE, .delay_ms = 40, .timeout_ms = 150 };
	const struct h_run bounded = { .label = "crowd, patience 300 ms", .mode = "full", .daemon = 1,
				       .behaviour = FAKE_QUEUE, .delay_ms = 40, .timeout_ms = 150,
				       .extra_env = { "LIBCEPTION_PATIENCE_MS=300" } };
	const struct h_run impatient = { .label = "crowd, patience 0", .mode = "full", .daemon = 1,
					 .behaviour = FAKE_QUEUE, .delay_ms = 40, .timeout_ms = 150,
					 .extra_env = { "LIBCEPTION_PATIENCE_MS=0" } };
	const struct h_run lone = { .label = "lone thread", .mode = "full", .daemon = 1, .behaviour = FAKE_QUEUE,
				    .delay_ms = 400, .timeout_ms = 150 };
	const struct h_run own = { .label = "own reply first", .mode = "full", .daemon = 1,
				   .behaviour = FAKE_SLOW_LATER, .delay_ms = 400, .timeout_ms = 150,
				   .extra_env = { "LIBCEPTION_WINDOW_MS=0" } };
	struct h_result crowd_base, lone_base, twice_base, r;
	long long fetched;
	char name[32];

	h_init(argc, argv, scenario);
	for (int i = 0; i < CROWD; i++) {
		snprintf(name, sizeof(name), "p%d.bin", i);
		h_make_file(h_path(name), FILE_SIZE, 70 + (unsigned)i);
	}
	h_run(&base, "crowd", 60, &crowd_base);
	h_run(&base, "lone", 60, &lone_base);
	h_run(&base, "twice", 60, &twice_base);
	h_expect(crowd_base.status == 0 && lone_base.status == 0 && twice_base.status == 0, "baseline runs failed");

	/* 16 x 40 ms behind one queue: the last thread waits about 640 ms. */
	run(&patient, "crowd", &crowd_base, &r);
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") == 0, "crowd, default patience: a thread gave up on a working daemon");
	h_expect(h_stat(&r, "\"daemon\"", "patient_waits") >= 1, "crowd, default patience: no wait was stretched");
	h_expect(h_stat(&r, "\"daemon\"", "fetches") == CROWD, "crowd, default patience: %lld of %d threads served",
		 h_stat(&r, "\"daemon\"", "fetches"), CROWD);
	h_result_free(&r);

	run(&bounded, "crowd", &crowd_base, &r);
	fetched = h_stat(&r, "\"daemon\"", "fetches");
	h_expect(h_stat(&r, "\"daemon\"", "patient_waits") >= 1, "crowd, patience 300 ms: no wait was stretched");
	h_expect(fetched >= 5 && fetched <= 9,
		 "crowd, patience 300 ms: %lld threads served; about 7 (40 ms each up to 300 ms) expected, 3 without "
		 "stretching, 11 or more past the bound", fetched);
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") == CROWD - fetched, "crowd, patience 300 ms: %lld timeouts for %lld unserved",
		 h_stat(&r, "\"daemon\"", "timeouts"), CROWD - fetched);
	h_result_free(&r);

	run(&impatient, "crowd", &crowd_base, &r);
	h_expect(h_stat(&r, "\"daemon\"", "patient_waits") == 0, "crowd, patience 0: a wait was stretched");
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") >= 1, "crowd, patience 0: no thread gave up after the timeout");
	h_result_free(&r);

	run(&lone, "lone", &lone_base, &r);
	h_expect(h_stat(&r, "\"daemon\"", "timeouts") == 1 && h_stat(&r, "\"daemon\"", "patient_waits") == 0,
		 "lone thread: expected one timeout and no stretch (nothing shows the daemon working)");
	h_result_free(&r);

	/* The thread's own reply, taken in just before it asked again, is not
	 * another thread's: the slow second request gives up on time. */
	run(&own, "twice", &twice_base, &r);
	h_expect(h_stat(&r, "\"daemon\"", "fetches") == 1 && h_stat(&r, "\"daemon\"", "timeouts") == 1 &&
			 h_stat(&r, "\"daemon\"", "patient_waits") == 0,
		 "own reply first: expected one fetch, one timeout and no stretch");
	h_result_free(&r);

	h_result_free(&crowd_base);
	h_result_free(&lone_base);
	h_result_free(&twice_base);
	return h_finish();
}
