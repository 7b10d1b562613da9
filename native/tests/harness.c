/*
 * harness.c - see harness.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "harness.h"

extern char **environ;

static char test_dir[256];
static char self_path[4096];
static char stats_dir[300];
static int failures;
static int run_counter;

/* ---- child side ---- */

const char *h_dir(void)
{
	if (test_dir[0] == '\0') {
		const char *env = getenv("LCP_TEST_DIR");

		if (env != NULL)
			snprintf(test_dir, sizeof(test_dir), "%s", env);
	}
	return test_dir;
}

const char *h_path(const char *name)
{
	static __thread char bufs[8][512];
	static __thread int next;
	char *buf = bufs[next++ % 8];

	snprintf(buf, sizeof(bufs[0]), "%s/%s", h_dir(), name);
	return buf;
}

static uint64_t fnv1a(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

void h_report(const char *what, long ret, int err, const void *buf, size_t len)
{
	if (ret < 0)
		printf("%s = %ld errno=%s\n", what, ret, strerrorname_np(err) ? strerrorname_np(err) : "?");
	else if (buf != NULL && len > 0)
		printf("%s = %ld errno=%s hash=%016llx\n", what, ret,
		       err == ERRNO_SENTINEL ? "kept" : (strerrorname_np(err) ? strerrorname_np(err) : "?"),
		       (unsigned long long)fnv1a(buf, len));
	else
		printf("%s = %ld errno=%s\n", what, ret,
		       err == ERRNO_SENTINEL ? "kept" : (strerrorname_np(err) ? strerrorname_np(err) : "?"));
}

/* Drop the file's pages; DONTNEED leaves behind pages still under I/O (the
 * kernel's asynchronous readahead of an earlier read) and a few in per-CPU
 * LRU batches, so try again, for up to about a second on a busy machine,
 * while some are resident.
 * The pause is a raw nanosleep syscall: this runs in threads that tests
 * cancel, and must add no cancellation point. */
void h_evict(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	fdatasync(fd);
	for (int attempt = 0; attempt < 100; attempt++) {
		struct { uint64_t off, len; } range = { 0, 0 };
		uint64_t cs[5] = { 0 };
		struct timespec pause = { 0, attempt < 20 ? 1000000 : 10000000 };

		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (syscall(451, fd, &range, cs, 0) != 0 || cs[0] == 0)
			break;
		syscall(SYS_nanosleep, &pause, NULL);
	}
	close(fd);
}

static void probe_kind(void (*probe)(const char *what, int fd), const char *call, const char *kind, int fd)
{
	char what[128];

	snprintf(what, sizeof(what), "%s %s", call, kind);
	probe(what, fd);
}

void h_on_special_fds(const char *call, void (*probe)(const char *what, int fd))
{
	int pipes[2], fd;

	if (pipe(pipes) == 0) {
		H_CALL("write pipe", write(pipes[1], "abc", 3), NULL, 0);
		probe_kind(probe, call, "pipe", pipes[0]);
		close(pipes[0]);
		close(pipes[1]);
	}
	fd = open(h_dir(), O_RDONLY | O_DIRECTORY);
	probe_kind(probe, call, "directory", fd);
	close(fd);
	fd = open("/dev/zero", O_RDONLY);
	probe_kind(probe, call, "/dev/zero", fd);
	close(fd);
}

/* ---- parent side ---- */

static void vfail(const char *fmt, va_list ap)
{
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	failures++;
}

void h_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(fmt, ap);
	va_end(ap);
}

void h_expect(int cond, const char *fmt, ...)
{
	va_list ap;

	if (cond)
		return;
	va_start(ap, fmt);
	vfail(fmt, ap);
	va_end(ap);
}

void h_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	fflush(stdout);
	exit(77);
}

void h_require_setpriv(void)
{
	if (geteuid() != 0)
		h_skip("needs root to run the reader as another uid");
	if (access("/usr/bin/setpriv", X_OK) != 0)
		h_skip("needs setpriv (util-linux)");
}

int h_failed(void)
{
	return failures;
}

int h_finish(void)
{
	return failures ? 1 : 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static pid_t parent_pid;

static void cleanup(void)
{
	if (getpid() == parent_pid && test_dir[0] != '\0')
		nftw(test_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void h_init(int argc, char **argv, void (*scenario)(const char *name))
{
	if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
		setvbuf(stdout, NULL, _IOFBF, 1 << 16);
		scenario(argv[2]);
		fflush(stdout);
		exit(0);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (readlink("/proc/self/exe", self_path, sizeof(self_path) - 1) < 0) {
		perror("readlink /proc/self/exe");
		exit(1);
	}
	snprintf(test_dir, sizeof(test_dir), "/tmp/lcp-test-XXXXXX");
	if (mkdtemp(test_dir) == NULL || chmod(test_dir, 0755) != 0) {
		perror("mkdtemp");
		exit(1);
	}
	parent_pid = getpid();
	atexit(cleanup);
	/* Statistics land here; writable by children running as another uid. */
	snprintf(stats_dir, sizeof(stats_dir), "%s/stats", test_dir);
	if (mkdir(stats_dir, 0777) != 0 || chmod(stats_dir, 0777) != 0) {
		perror("mkdir stats");
		exit(1);
	}
	setenv("LCP_TEST_DIR", test_dir, 1);
	signal(SIGPIPE, SIG_IGN);
}

void h_make_file(const char *path, size_t size, unsigned seed)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	unsigned char block[65536];
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
	size_t done = 0;

	if (fd < 0) {
		h_fail("create %s: %s", path, strerror(errno));
		return;
	}
	while (done < size) {
		size_t n = size - done < sizeof(block) ? size - done : sizeof(block);

		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			block[i] = (unsigned char)x;
		}
		if (write(fd, block, n) != (ssize_t)n) {
			h_fail("write %s: %s", path, strerror(errno));
			break;
		}
		done += n;
	}
	fsync(fd);
	close(fd);
	chmod(path, 0644);
}

uint64_t h_resident_pages(const char *path)
{
	struct { uint64_t off, len; } range = { 0, 0 };
	uint64_t cs[5] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (syscall(451, fd, &range, cs, 0) != 0)
		cs[0] = 0;
	close(fd);
	return cs[0];
}

static int env_is_ours(const char *entry)
{
	return strncmp(entry, "LIBCEPTION_", 11) == 0 || strncmp(entry, "LD_PRELOAD=", 11) == 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void h_run(const struct h_run *run, const char *scenario, int timeout_s, struct h_result *result)
{
	char sock[300], preload[1200], mode[64], socket_env[320], timeout_env[64], prefetch_env[64],
		stats_env[600], uid_arg[64], gid_arg[64];
	const char *envp[512];
	const char *argv[16];
	struct fake_daemon *daemon = NULL;
	int out_pipe[2], n = 0, argc = 0, id = ++run_counter, status;
	size_t cap = 1 << 16, used = 0;
	double start, deadline;
	pid_t pid;

	memset(result, 0, sizeof(*result));
	result->output = calloc(1, cap);
	snprintf(sock, sizeof(sock), "%s/d%d.sock", test_dir, id);
	snprintf(result->stats_path, sizeof(result->stats_path), "%s/stats/stats-%d.json", test_dir, id);
	if (run->daemon) {
		daemon = fake_daemon_start(sock, run->behaviour, run->delay_ms);
		if (daemon == NULL) {
			h_fail("%s: cannot start the fake daemon", run->label);
			result->status = -1;
			return;
		}
	}

	for (char **e = environ; *e != NULL && n < 480; e++)
		if (!env_is_ours(*e))
			envp[n++] = *e;
	if (run->mode != NULL) {
		const char *shim = getenv("LCP_TEST_PRELOAD");

		snprintf(preload, sizeof(preload), "LD_PRELOAD=%s", shim != NULL ? shim : "");
		snprintf(mode, sizeof(mode), "LIBCEPTION_MODE=%s", run->mode);
		snprintf(socket_env, sizeof(socket_env), "LIBCEPTION_SOCKET=%s", sock);
		snprintf(stats_env, sizeof(stats_env), "LIBCEPTION_STATS=%s", result->stats_path);
		envp[n++] = preload;
		envp[n++] = mode;
		envp[n++] = socket_env;
		envp[n++] = stats_env;
		if (run->timeout_ms > 0) {
			snprintf(timeout_env, sizeof(timeout_env), "LIBCEPTION_TIMEOUT_MS=%d", run->timeout_ms);
			envp[n++] = timeout_env;
		}
		if (run->prefetch != NULL) {
			snprintf(prefetch_env, sizeof(prefetch_env), "LIBCEPTION_PREFETCH=%s", run->prefetch);
			envp[n++] = prefetch_env;
		}
	}
	for (int i = 0; i < 4 && run->extra_env[i] != NULL; i++)
		envp[n++] = run->extra_env[i];
	envp[n] = NULL;

	if (run->setpriv_uid != NULL) {
		snprintf(uid_arg, sizeof(uid_arg), "--reuid=%s", run->setpriv_uid);
		snprintf(gid_arg, sizeof(gid_arg), "--regid=%s", run->setpriv_uid);
		argv[argc++] = "setpriv";
		argv[argc++] = uid_arg;
		argv[argc++] = gid_arg;
		argv[argc++] = "--clear-groups";
		argv[argc++] = "--";
	}
	argv[argc++] = self_path;
	argv[argc++] = "--child";
	argv[argc++] = scenario;
	argv[argc] = NULL;

	if (pipe2(out_pipe, O_CLOEXEC) != 0) {
		h_fail("pipe: %s", strerror(errno));
		fake_daemon_stop(daemon);
		result->status = -1;
		return;
	}
	start = now_s();
	pid = fork();
	if (pid == 0) {
		dup2(out_pipe[1], 1);
		if (run->setpriv_uid != NULL)
			execvpe("setpriv", (char **)argv, (char **)envp);
		else
			execve(self_path, (char **)argv, (char **)envp);
		_exit(126);
	}
	close(out_pipe[1]);
	deadline = start + timeout_s;
	for (;;) {
		struct pollfd pfd = { out_pipe[0], POLLIN, 0 };
		double left = deadline - now_s();
		ssize_t got;

		if (left <= 0) {
			kill(pid, SIGKILL);
			result->timed_out = 1;
			break;
		}
		if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		if (used + 4096 + 1 > cap) {
			cap *= 2;
			result->output = realloc(result->output, cap);
		}
		got = read(out_pipe[0], result->output + used, cap - used - 1);
		if (got <= 0)
			break;
		used += (size_t)got;
	}
	result->output[used] = '\0';
	close(out_pipe[0]);
	waitpid(pid, &status, 0);
	result->seconds = now_s() - start;
	result->status = WIFEXITED(status) && !result->timed_out ? WEXITSTATUS(status) : -1;
	if (daemon != NULL) {
		int total = fake_daemon_records(daemon, NULL, 0);

		result->records = calloc((size_t)total + 1, sizeof(struct fake_record));
		result->nrecords = fake_daemon_records(daemon, result->records, total);
		if (result->nrecords > total)
			result->nrecords = total;
		result->connections = fake_daemon_connections(daemon);
		fake_daemon_stop(daemon);
	}
}

void h_result_free(struct h_result *result)
{
	free(result->output);
	free(result->records);
	result->output = NULL;
	result->records = NULL;
}

long long h_stat(const struct h_result *result, const char *after, const char *key)
{
	char *text = NULL, needle[128];
	size_t cap = 0;
	FILE *f = fopen(result->stats_path, "r");
	const char *from, *hit;
	long long value = -1;

	if (f == NULL)
		return -1;
	if (getdelim(&text, &cap, '\0', f) < 0) {
		fclose(f);
		free(text);
		return -1;
	}
	fclose(f);
	from = text;
	if (after != NULL) {
		from = strstr(text, after);
		if (from == NULL) {
			free(text);
			return -1;
		}
	}
	snprintf(needle, sizeof(needle), "\"%s\": ", key);
	hit = strstr(from, needle);
	if (hit != NULL)
		value = strtoll(hit + strlen(needle), NULL, 10);
	free(text);
	return value;
}

static void show_difference(const char *label, const char *want, const char *got)
{
	int line = 1;

	while (*want && *got && *want == *got) {
		if (*want == '\n')
			line++;
		want++, got++;
	}
	printf("  %s: first difference at output line %d\n", label, line);
	printf("    baseline: %.*s\n", (int)strcspn(want, "\n"), want);
	printf("    shim    : %.*s\n", (int)strcspn(got, "\n"), got);
}

void h_compare_all(const char *scenario, int expect_fetch)
{
	const struct h_run runs[] = {
		{ .label = "off", .mode = "off" },
		{ .label = "track", .mode = "track", .daemon = 1 },
		{ .label = "full", .mode = "full", .daemon = 1 },
		{ .label = "serialize", .mode = "serialize", .daemon = 1 },
		{ .label = "prefetch", .mode = "prefetch", .prefetch = "256K" },
		{ .label = "full/no-daemon", .mode = "full" },
		{ .label = "full/never-replies", .mode = "full", .daemon = 1, .behaviour = FAKE_NEVER_REPLY, .timeout_ms = 100 },
		{ .label = "full/slow", .mode = "full", .daemon = 1, .behaviour = FAKE_SLOW, .delay_ms = 20, .timeout_ms = 5000 },
		{ .label = "full/garbage", .mode = "full", .daemon = 1, .behaviour = FAKE_GARBAGE },
		{ .label = "full/wrong-seq", .mode = "full", .daemon = 1, .behaviour = FAKE_WRONG_SEQ },
		{ .label = "full/closes", .mode = "full", .daemon = 1, .behaviour = FAKE_CLOSE },
		{ .label = "full/stray-fd", .mode = "full", .daemon = 1, .behaviour = FAKE_STRAY_FD },
	};
	const struct h_run baseline_run = { .label = "baseline" };
	struct h_result baseline;

	h_run(&baseline_run, scenario, 60, &baseline);
	if (baseline.status != 0) {
		h_fail("%s: baseline run exited with %d", scenario, baseline.status);
		h_result_free(&baseline);
		return;
	}
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct h_result r;
		int fetches = 0, no_prefetch = 1;

		h_run(&runs[i], scenario, 60, &r);
		if (r.timed_out)
			h_fail("%s/%s: child did not finish within 60 s", scenario, runs[i].label);
		else if (r.status != 0)
			h_fail("%s/%s: child exited with %d", scenario, runs[i].label, r.status);
		else if (strcmp(baseline.output, r.output) != 0) {
			h_fail("%s/%s: output differs from libc's", scenario, runs[i].label);
			show_difference(runs[i].label, baseline.output, r.output);
		}
		for (int k = 0; k < r.nrecords; k++) {
			if (r.records[k].op == 1)
				fetches++;
			if (r.records[k].op == 1 && !(r.records[k].flags & 1u))
				no_prefetch = 0;
		}
		printf("  %s/%s: %.2fs, %d daemon requests (%d FETCH) on %d connections\n", scenario, runs[i].label,
		       r.seconds, r.nrecords, fetches, r.connections);
		if (expect_fetch && strcmp(runs[i].label, "full") == 0)
			h_expect(fetches > 0, "%s/full: the daemon saw no FETCH for cold files", scenario);
		if (expect_fetch && strcmp(runs[i].label, "serialize") == 0)
			h_expect(fetches > 0 && no_prefetch, "%s/serialize: FETCH requests must carry LCP_REQ_NO_PREFETCH",
				 scenario);
		if (strcmp(runs[i].label, "track") == 0)
			h_expect(fetches == 0, "%s/track: track mode must never FETCH (saw %d)", scenario, fetches);
		h_result_free(&r);
	}
	h_result_free(&baseline);
}
