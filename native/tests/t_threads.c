/*
 * t_threads.c - many threads under load: each thread reads its own cold file
 * with a mix of read, pread, readv and sendfile while other threads open and
 * close descriptors as fast as they can (churning the fd table) and the
 * daemon answers. The bytes must be libc's, every thread must have its own
 * connection, and no request may be lost or mis-paired.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "harness.h"

#define READERS 8
#define CHURNERS 2
#define FILE_SIZE (2u << 20)

static uint64_t results[READERS];
static int churning = 1; /* __atomic */

static uint64_t mix(uint64_t h, const char *buf, ssize_t n)
{
	for (ssize_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
	return h;
}

static void *reader(void *arg)
{
	int id = (int)(long)arg, fd, sv[2];
	char name[32], *buf = malloc(65536);
	uint64_t h = 1469598103934665603ull;
	off_t off = 0;

	snprintf(name, sizeof(name), "t%d.bin", id);
	fd = open(h_path(name), O_RDONLY);
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	for (int step = 0; off < (off_t)FILE_SIZE; step++) {
		ssize_t n = 0;

		switch (step % 4) {
		case 0:
			n = pread(fd, buf, 65536, off);
			break;
		case 1:
			lseek(fd, off, SEEK_SET);
			n = read(fd, buf, 32768);
			break;
		case 2: {
			struct iovec iov[2] = { { buf, 10000 }, { buf + 10000, 20000 } };

			n = preadv(fd, iov, 2, off);
			break;
		}
		case 3: {
			off_t o = off;
			ssize_t sent = sendfile(sv[0], fd, &o, 16384), got = 0;

			while (got < sent) {
				ssize_t k = read(sv[1], buf + got, (size_t)(sent - got));

				if (k <= 0)
					break;
				got += k;
			}
			n = got;
			break;
		}
		}
		if (n <= 0)
			break;
		h = mix(h, buf, n);
		off += n;
	}
	results[id] = h;
	close(fd);
	close(sv[0]);
	close(sv[1]);
	free(buf);
	return NULL;
}

static void *churner(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&churning, __ATOMIC_RELAXED)) {
		int fds[8];

		for (int i = 0; i < 8; i++)
			fds[i] = open(h_path("t0.bin"), O_RDONLY);
		for (int i = 0; i < 8; i++)
			close(fds[i]);
	}
	return NULL;
}

static void scenario(const char *name)
{
	pthread_t readers[READERS], churners[CHURNERS];
	char fname[32];

	(void)name;
	for (int i = 0; i < READERS; i++) {
		snprintf(fname, sizeof(fname), "t%d.bin", i);
		h_evict(h_path(fname));
	}
	for (int i = 0; i < CHURNERS; i++)
		pthread_create(&churners[i], NULL, churner, NULL);
	for (int i = 0; i < READERS; i++)
		pthread_create(&readers[i], NULL, reader, (void *)(long)i);
	for (int i = 0; i < READERS; i++)
		pthread_join(readers[i], NULL);
	__atomic_store_n(&churning, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < CHURNERS; i++)
		pthread_join(churners[i], NULL);
	for (int i = 0; i < READERS; i++)
		printf("thread %d: %016llx\n", i, (unsigned long long)results[i]);
}

int main(int argc, char **argv)
{
	const struct h_run full = { .label = "full", .mode = "full", .daemon = 1 };
	struct h_result r;
	char name[32];
	int conns_with_fetch = 0;

	h_init(argc, argv, scenario);
	for (int i = 0; i < READERS; i++) {
		snprintf(name, sizeof(name), "t%d.bin", i);
		h_make_file(h_path(name), FILE_SIZE, 40 + (unsigned)i);
	}
	h_compare_all("threads", 1);

	/* The same with every check forced to the daemon: the threads then
	 * also write and read the fd table's residency windows. */
	{
		const struct h_run base = { .label = "baseline" };
		const struct h_run forced = { .label = "full/force-daemon", .mode = "full", .daemon = 1,
					      .extra_env = { "LIBCEPTION_FORCE_CHECK=daemon" } };
		struct h_result b;

		h_run(&base, "threads", 120, &b);
		h_run(&forced, "threads", 120, &r);
		printf("threads/full/force-daemon: %d requests, window hits %lld\n", r.nrecords,
		       h_stat(&r, "\"residency_checks\"", "window"));
		h_expect(r.status == 0 && b.status == 0 && strcmp(r.output, b.output) == 0,
			 "threads/full/force-daemon: output differs from libc's");
		h_expect(h_stat(&r, "\"residency_checks\"", "window") > 0,
			 "threads/full/force-daemon: the daemon's windows were never used");
		h_result_free(&r);
		h_result_free(&b);
	}

	h_run(&full, "threads", 120, &r);
	h_expect(r.status == 0, "threads/full: child exited with %d", r.status);
	for (int c = 1; c <= r.connections; c++) {
		for (int i = 0; i < r.nrecords; i++) {
			if (r.records[i].conn == c && r.records[i].op == 1) {
				conns_with_fetch++;
				break;
			}
		}
	}
	printf("threads/full: %d requests on %d connections, %d connections fetched\n", r.nrecords, r.connections,
	       conns_with_fetch);
	h_expect(conns_with_fetch >= READERS, "threads/full: each of %d readers should fetch on its own connection (%d did)",
		 READERS, conns_with_fetch);
	h_expect(h_stat(&r, "\"daemon\"", "protocol_errors") == 0 && h_stat(&r, "\"daemon\"", "timeouts") == 0,
		 "threads/full: protocol errors or timeouts with a healthy daemon");
	h_expect(h_stat(&r, "\"daemon\"", "fetches") == r.nrecords,
		 "threads/full: the shim counted %lld answered fetches, the daemon saw %d requests",
		 h_stat(&r, "\"daemon\"", "fetches"), r.nrecords);
	h_result_free(&r);
	return h_finish();
}
