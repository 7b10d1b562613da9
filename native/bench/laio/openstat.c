/*
 * openstat.c - paper 002's open-stat and open-stat-read micro-benchmarks
 * (Tables 3 and 4): for each request of a trace (one path per line,
 * relative to ROOT), open the file, stat it and, with --read, read it whole;
 * then close it. Two ways to run the same work:
 *
 *   threads N   N threads, thread t taking requests t, t+N, ...; each
 *               request done start to end with plain blocking calls (a
 *               thread-per-request server);
 *   laio N      one thread, event-driven: up to N requests in flight, every
 *               open, stat and read issued through laio_syscall(); a call
 *               that would block continues in the background and its request
 *               resumes on its completion (LAIO_BACKEND picks the back end).
 *
 * Stat is by path (newfstatat), as a server stats what it was asked for.
 * Prints one CSV row: mode,backend,n,read,requests,bytes,seconds,calls,background
 * (calls and background: laio mode only, how many calls went through liblaio
 * and how many of them did not complete inline).
 *
 *   laio-openstat TRACE ROOT threads|laio N [--read]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <laio/laio.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BUF (64 * 1024)

static char **paths;
static size_t npaths;
static int root_fd, do_read;

static void die(const char *what)
{
	fprintf(stderr, "laio-openstat: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void load_trace(const char *file)
{
	FILE *f = fopen(file, "re");
	char line[4096];
	size_t cap = 0;

	if (!f)
		die(file);
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\r\n");

		if (n == 0)
			continue;
		line[n] = 0;
		if (npaths == cap) {
			cap = cap ? 2 * cap : 1 << 16;
			paths = realloc(paths, cap * sizeof(*paths));
			if (!paths)
				die("trace");
		}
		if (!(paths[npaths++] = strdup(line)))
			die("trace");
	}
	fclose(f);
	if (npaths == 0) {
		fprintf(stderr, "laio-openstat: %s holds no request\n", file);
		exit(1);
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A request failing is an error of the setup (wrong root), not a result. */
static void request_failed(const char *path, const char *op, int err)
{
	fprintf(stderr, "laio-openstat: %s %s: %s\n", op, path, strerror(err));
	exit(1);
}

/* ---- threads ---- */

struct thread_arg {
	size_t first, step;
	unsigned long long bytes;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	char *buf = malloc(BUF);

	if (!buf)
		die("buffer");
	for (size_t i = a->first; i < npaths; i += a->step) {
		struct stat st;
		int fd = openat(root_fd, paths[i], O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			request_failed(paths[i], "open", errno);
		if (fstatat(root_fd, paths[i], &st, 0) < 0)
			request_failed(paths[i], "stat", errno);
		if (do_read) {
			while ((n = read(fd, buf, BUF)) > 0)
				a->bytes += (unsigned long long)n;
			if (n < 0)
				request_failed(paths[i], "read", errno);
		}
		close(fd);
	}
	free(buf);
	return NULL;
}

static unsigned long long run_threads(int n)
{
	pthread_t *t = calloc((size_t)n, sizeof(*t));
	struct thread_arg *a = calloc((size_t)n, sizeof(*a));
	unsigned long long bytes = 0;

	if (!t || !a)
		die("threads");
	for (int i = 0; i < n; i++) {
		a[i].first = (size_t)i;
		a[i].step = (size_t)n;
		if (pthread_create(&t[i], NULL, thread_main, &a[i]) != 0)
			die("pthread_create");
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		bytes += a[i].bytes;
	}
	free(t);
	free(a);
	return bytes;
}

/* ---- laio ---- */

enum step { OPEN, STAT, READ };

struct req {
	size_t index;
	enum step step;
	int fd;
	laio_handle_t pending;
	struct stat st;
	char buf[BUF];
};

static unsigned long long laio_calls, laio_background, laio_bytes;

/* Issues the request's next call; returns 1 with *res when it completed inline. */
static int issue(struct req *r, long *res)
{
	long v;

	laio_calls++;
	errno = 0;
	switch (r->step) {
	case OPEN:
		v = laio_syscall(SYS_openat, root_fd, (long)paths[r->index], O_RDONLY | O_CLOEXEC, 0);
		break;
	case STAT:
		v = laio_syscall(SYS_newfstatat, root_fd, (long)paths[r->index], (long)&r->st, 0);
		break;
	default:
		v = laio_syscall(SYS_read, r->fd, (long)r->buf, BUF);
		break;
	}
	if (v == -1 && errno == EINPROGRESS) {
		laio_background++;
		r->pending = laio_gethandle();
		return 0;
	}
	*res = v == -1 ? -errno : v;
	return 1;
}

/* Feeds a result to the request; returns 1 when the request is finished. */
static int advance(struct req *r, long res)
{
	const char *op = r->step == OPEN ? "open" : r->step == STAT ? "stat" : "read";

	if (res < 0)
		request_failed(paths[r->index], op, (int)-res);
	switch (r->step) {
	case OPEN:
		r->fd = (int)res;
		r->step = STAT;
		return 0;
	case STAT:
		if (!do_read)
			break;
		r->step = READ;
		return 0;
	case READ:
		if (res > 0) {
			laio_bytes += (unsigned long long)res;
			return 0;
		}
		break;
	}
	close(r->fd);
	return 1;
}

/* Runs r until it goes to the background (0) or finishes (1). */
static int drive(struct req *r)
{
	long res;

	while (issue(r, &res))
		if (advance(r, res))
			return 1;
	return 0;
}

/*
 * Points a slot at request `index`. Field by field: assigning a compound
 * literal would zero the 64 KiB buffer too, a memset per request that the
 * threads do not pay.
 */
static void begin(struct req *r, size_t index)
{
	r->index = index;
	r->step = OPEN;
	r->fd = -1;
	r->pending = 0;
}

static unsigned long long run_laio(int n)
{
	struct req *slots = calloc((size_t)n, sizeof(*slots));
	struct laio_completion done[256];
	size_t next = 0, in_flight = 0;

	if (!slots)
		die("requests");
	/* Start a request in every free slot; finished ones free theirs at once. */
	for (int i = 0; i < n; i++) {
		while (next < npaths) {
			begin(&slots[i], next++);
			if (!drive(&slots[i])) {
				in_flight++;
				break;
			}
		}
	}
	while (in_flight) {
		int got = laio_poll(done, 256, NULL);

		if (got < 0)
			die("laio_poll");
		for (int k = 0; k < got; k++) {
			struct req *r = NULL;

			for (int i = 0; i < n && !r; i++)
				if (slots[i].pending == done[k].laio_handle)
					r = &slots[i];
			if (!r) {
				fprintf(stderr, "laio-openstat: completion of unknown handle %ld\n", (long)done[k].laio_handle);
				exit(1);
			}
			r->pending = 0;
			if (!advance(r, done[k].laio_return_value < 0 ? -done[k].laio_errno : done[k].laio_return_value) &&
			    !drive(r))
				continue;
			/* r finished: reuse its slot for the next requests. */
			in_flight--;
			while (next < npaths) {
				begin(r, next++);
				if (!drive(r)) {
					in_flight++;
					break;
				}
			}
		}
	}
	free(slots);
	return laio_bytes;
}

int main(int argc, char **argv)
{
	int n;
	double t0, t1;
	unsigned long long bytes;
	const char *mode;

	if (argc < 5 || argc > 6 || (argc == 6 && strcmp(argv[5], "--read")) ||
	    (strcmp(argv[3], "threads") && strcmp(argv[3], "laio")) || (n = atoi(argv[4])) < 1 || n > 100000) {
		fprintf(stderr, "usage: laio-openstat TRACE ROOT threads|laio N [--read]\n");
		return 2;
	}
	mode = argv[3];
	do_read = argc == 6;
	load_trace(argv[1]);
	root_fd = open(argv[2], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		die(argv[2]);
	if (!strcmp(mode, "laio"))
		laio_backend(); /* start the library outside the timed part */
	t0 = now();
	bytes = !strcmp(mode, "laio") ? run_laio(n) : run_threads(n);
	t1 = now();
	printf("%s,%s,%d,%d,%zu,%llu,%.3f,%llu,%llu\n", mode, !strcmp(mode, "laio") ? laio_backend() : "none", n, do_read,
	       npaths, bytes, t1 - t0, laio_calls, laio_background);
	return 0;
}
