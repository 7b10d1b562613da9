/*
 * t_sigsafe.c - a thread's first interposed readv, preadv or sendfile may
 * come from a signal handler, where only async-signal-safe functions may run:
 * the shim must not allocate there (the handler may have interrupted malloc
 * holding its lock: a deadlock). Regression (issue 13): on_live_stack looked
 * the thread's stack up with pthread_getattr_np, which mallocs (and reads
 * /proc/self/maps through stdio for the main thread).
 *
 * This program defines malloc, calloc and realloc itself (forwarding to the
 * next definition, libc's or a sanitizer's), so it sees every allocation in
 * the process, the shim's included, and counts those made while a handler
 * runs. The handler runs on a fresh thread and makes that thread's first
 * readv, preadv and sendfile calls on a regular file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/uio.h>

#include "harness.h"

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static __thread int in_handler;
static int allocations_in_handler;

/* dlsym may allocate before the next calloc is known: a little static room. */
static char early[4096] __attribute__((aligned(16)));
static size_t early_used;

static void *early_alloc(size_t n)
{
	void *p = early + early_used;

	n = (n + 15) & ~(size_t)15;
	if (early_used + n > sizeof(early))
		return NULL;
	early_used += n;
	memset(p, 0, n);
	return p;
}

static void resolve(void)
{
	if (next_malloc == NULL) {
		next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
		next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
		next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	}
}

void *malloc(size_t n)
{
	if (in_handler)
		__atomic_add_fetch(&allocations_in_handler, 1, __ATOMIC_RELAXED);
	resolve();
	return next_malloc != NULL ? next_malloc(n) : early_alloc(n);
}

void *calloc(size_t n, size_t size)
{
	if (in_handler)
		__atomic_add_fetch(&allocations_in_handler, 1, __ATOMIC_RELAXED);
	if (next_calloc == NULL)
		return early_alloc(n * size);
	return next_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	if (in_handler)
		__atomic_add_fetch(&allocations_in_handler, 1, __ATOMIC_RELAXED);
	resolve();
	return next_realloc(p, n);
}

static int data_fd, null_fd;
static char buf[3][4096];
static long results[3];

static void handler(int sig)
{
	struct iovec iov = { buf[0], sizeof(buf[0]) };
	struct iovec iov2 = { buf[1], sizeof(buf[1]) };
	off_t off = 8192;

	(void)sig;
	in_handler = 1;
	results[0] = readv(data_fd, &iov, 1);
	results[1] = preadv(data_fd, &iov2, 1, 4096);
	results[2] = sendfile(null_fd, data_fd, &off, 4096);
	in_handler = 0;
}

static void *thread_main(void *arg)
{
	(void)arg;
	pthread_kill(pthread_self(), SIGUSR1);
	return NULL;
}

static void scenario(const char *name)
{
	struct sigaction sa;
	pthread_t t;

	(void)name;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigaction(SIGUSR1, &sa, NULL);
	data_fd = open(h_path("data.bin"), O_RDONLY);
	null_fd = open("/dev/null", O_WRONLY);
	pthread_create(&t, NULL, thread_main, NULL);
	pthread_join(t, NULL);
	h_report("readv in a handler", results[0], 0, buf[0], results[0] > 0 ? (size_t)results[0] : 0);
	h_report("preadv in a handler", results[1], 0, buf[1], results[1] > 0 ? (size_t)results[1] : 0);
	h_report("sendfile in a handler", results[2], 0, NULL, 0);
	printf("allocations inside the handler: %d\n", allocations_in_handler);
}

int main(int argc, char **argv)
{
	const struct h_run base = { .label = "baseline" };
	const struct h_run runs[] = {
		{ .label = "track", .mode = "track" },
		{ .label = "full", .mode = "full", .daemon = 1 },
	};
	struct h_result b, r;

	h_init(argc, argv, scenario);
	h_make_file(h_path("data.bin"), 65536, 7);
	h_run(&base, "handler", 30, &b);
	h_expect(b.status == 0 && strstr(b.output, "handler: 0\n") != NULL, "baseline: %s", b.output);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		h_run(&runs[i], "handler", 30, &r);
		h_expect(r.status == 0 && strcmp(r.output, b.output) == 0,
			 "%s: the shim allocated in a signal handler, or its answers differ:\n%s", runs[i].label,
			 r.output);
		h_result_free(&r);
	}
	h_result_free(&b);
	return h_finish();
}
