/*
 * t_fork.c - fork under the shim: every child gets its own connection to the
 * daemon (never the parent's socket), children and parent keep working while
 * other threads of the parent are in the middle of requests, and the output
 * is what libc gives. Also: a fork child's statistics file is its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"

#define CHILDREN 6
#define THREADS 3

static uint64_t hash_file(const char *path)
{
	static __thread char buf[65536];
	uint64_t h = 1469598103934665603ull;
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
	close(fd);
	return h;
}

static int stop_threads; /* __atomic */

static void *reader(void *arg)
{
	const char *path = arg;
	static __thread char buf[32768];
	int fd = open(path, O_RDONLY);
	off_t off = 0;

	while (!__atomic_load_n(&stop_threads, __ATOMIC_RELAXED)) {
		if (pread(fd, buf, sizeof(buf), off) <= 0)
			off = 0;
		else
			off += sizeof(buf);
		if ((off & ((1 << 20) - 1)) == 0)
			h_evict(path);
	}
	close(fd);
	return NULL;
}

static void scenario(const char *name)
{
	pthread_t threads[THREADS];
	int pipes[CHILDREN][2];
	char tname[64];

	(void)name;
	for (int i = 0; i < CHILDREN; i++) {
		snprintf(tname, sizeof(tname), "child%d.bin", i);
		h_evict(h_path(tname));
	}
	h_evict(h_path("parent.bin"));
	printf("parent before fork: %016llx\n", (unsigned long long)hash_file(h_path("parent.bin")));
	/* Threads busy with requests while the process forks. */
	for (int i = 0; i < THREADS; i++)
		pthread_create(&threads[i], NULL, reader, (void *)h_path("busy.bin"));
	for (int i = 0; i < CHILDREN; i++) {
		pid_t pid;

		if (pipe(pipes[i]) != 0)
			exit(1);
		pid = fork();
		if (pid == 0) {
			char line[64];
			int n;

			snprintf(tname, sizeof(tname), "child%d.bin", i);
			n = snprintf(line, sizeof(line), "%016llx", (unsigned long long)hash_file(h_path(tname)));
			(void)!write(pipes[i][1], line, (size_t)n);
			exit(0);
		}
		close(pipes[i][1]);
		if (pid < 0)
			printf("fork failed: %s\n", strerror(errno));
	}
	for (int i = 0; i < CHILDREN; i++) {
		char line[64] = "";
		int status;

		(void)!read(pipes[i][0], line, sizeof(line) - 1);
		close(pipes[i][0]);
		wait(&status);
		printf("child %d: %s\n", i, line);
	}
	__atomic_store_n(&stop_threads, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < THREADS; i++)
		pthread_join(threads[i], NULL);
	h_evict(h_path("parent.bin"));
	printf("parent after forks: %016llx\n", (unsigned long long)hash_file(h_path("parent.bin")));
}

int main(int argc, char **argv)
{
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result r;
	char name[64];
	pid_t parent_pid = 0;
	int parent_conn = 0, child_pids = 0, shared = 0;

	h_init(argc, argv, scenario);
	for (int i = 0; i < CHILDREN; i++) {
		snprintf(name, sizeof(name), "child%d.bin", i);
		h_make_file(h_path(name), 1u << 20, 20 + (unsigned)i);
	}
	h_make_file(h_path("parent.bin"), 1u << 20, 30);
	h_make_file(h_path("busy.bin"), 4u << 20, 31);
	h_compare_all("fork", 1);

	/* Who talked on which connection? */
	h_run(&full, "fork", 60, &r);
	h_expect(r.status == 0, "fork/full: child exited with %d", r.status);
	for (int i = 0; i < r.nrecords && parent_pid == 0; i++)
		if (r.records[i].op == 1) {
			parent_pid = r.records[i].pid;
			parent_conn = r.records[i].conn;
		}
	for (int i = 0; i < r.nrecords; i++) {
		int seen_before = 0;

		if (r.records[i].pid == parent_pid)
			continue;
		for (int k = 0; k < i; k++)
			if (r.records[k].pid == r.records[i].pid)
				seen_before = 1;
		child_pids += !seen_before;
		/* A child must never speak on a connection another process used. */
		for (int k = 0; k < r.nrecords; k++)
			if (r.records[k].conn == r.records[i].conn && r.records[k].pid != r.records[i].pid)
				shared = 1;
	}
	(void)parent_conn;
	printf("fork/full: %d requests, %d connections, %d child processes asked\n", r.nrecords, r.connections,
	       child_pids);
	h_expect(child_pids == CHILDREN, "fork/full: expected requests from %d children, saw %d", CHILDREN,
		 child_pids);
	h_expect(!shared, "fork/full: a connection carried requests from two processes");
	h_result_free(&r);

	/* Statistics: with %p every process writes its own file. */
	{
		const struct h_run track = { .label = "track", .mode = "track" };
		char pattern[600];
		int files = 0;
		glob_t g;

		h_run(&track, "fork", 60, &r);
		/* The harness path has no %p: the parent writes it, children
		 * append ".<pid>". */
		if (access(r.stats_path, F_OK) == 0)
			files++;
		snprintf(pattern, sizeof(pattern), "%s.*", r.stats_path);
		if (glob(pattern, 0, NULL, &g) == 0) {
			files += (int)g.gl_pathc;
			globfree(&g);
		}
		h_expect(files == CHILDREN + 1, "fork/track: expected %d statistics files, found %d", CHILDREN + 1,
			 files);
		h_expect(h_stat(&r, "\"fork\"", "calls") == CHILDREN, "fork/track: parent should count %d forks, has %lld",
			 CHILDREN, h_stat(&r, "\"fork\"", "calls"));
		h_result_free(&r);
	}
	return h_finish();
}
