/*
 * sendfile_hitpath.c - cost of the shim's hit path: a page-cache-resident file
 * sent with sendfile() in a loop, calls per second.
 *
 *   sendfile-hitpath --csv OUT.csv --label NAME [--file PATH] [--file-size BYTES]
 *                    [--chunk BYTES] [--seconds S] [--sink socket|devnull|pipe]
 *                    [--count-to BYTES] [--sndbuf BYTES]
 *
 * The file (created if missing, 4 MiB by default) is read once so every page
 * is resident, then sendfile(sink, file, &offset, chunk) runs for --seconds
 * with the offset walking through the file. Sinks: "socket" is a connected
 * AF_UNIX stream pair drained by a second thread (what a server does),
 * "devnull" is /dev/null (nothing but the syscall and the shim's work). Run it
 * with and without LD_PRELOAD=libdeception.so to see what the shim adds; the
 * LD_PRELOAD and LIBCEPTION_MODE in effect are recorded in the row.
 *
 * --count-to N is nginx's pattern: each call asks for the rest of the current
 * N-byte chunk of the file and the sink takes only what fits, so a chunk goes
 * out in several calls over ranges inside the first call's. Its sink is
 * "pipe": a non-blocking pipe of --sndbuf bytes (like a socket buffer) that
 * the loop empties into /dev/null with splice() after each call, so every
 * call sends exactly one buffer's worth without waiting on another thread.
 * Run as a user who does not own the file, it measures the path where only
 * the daemon can check residency (bench/run-hit-path does that as uid 65534).
 *
 * One CSV row is appended per run (header written if the file is new):
 *   label,sink,mode,preloaded,chunk_bytes,file_bytes,seconds,calls,calls_per_sec,
 *   ns_per_call,resident_before,count_to,sndbuf,uid,bytes_per_sec
 * Speed is never judged here: the numbers go to the file, and the summary is
 * made from the file (bench/run-hit-path).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static volatile int draining = 1;

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "sendfile-hitpath: %s %s: %s\n", what, detail ? detail : "", strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *drain(void *arg)
{
	int fd = *(int *)arg;
	static char buf[1 << 20];

	while (draining) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
	}
	return NULL;
}

static uint64_t resident_pages(int fd)
{
	struct { uint64_t off, len; } range = { 0, 0 };
	uint64_t cs[5] = { 0 };

	if (syscall(451, fd, &range, cs, 0) != 0)
		return 0;
	return cs[0];
}

static void usage(const char *why)
{
	fprintf(stderr, "sendfile-hitpath: %s\nusage: sendfile-hitpath --csv OUT.csv --label NAME [--file PATH] "
			"[--file-size BYTES] [--chunk BYTES] [--seconds S] [--sink socket|devnull|pipe] [--count-to BYTES] "
			"[--sndbuf BYTES]\n", why);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *csv = NULL, *label = NULL, *file = "/tmp/libception-hitpath.bin", *sink = "socket";
	size_t file_size = 4u << 20, chunk = 65536, count_to = 0, sndbuf = 4u << 20;
	uint64_t bytes = 0;
	double seconds = 2.0, start, elapsed;
	uint64_t calls = 0, resident;
	int fd, out, pair[2], new_csv, devnull = -1;
	pthread_t drainer;
	off_t offset = 0;
	struct stat st;
	FILE *f;
	char *buf;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage("missing value after an option");
		if (!strcmp(argv[i], "--csv")) csv = argv[++i];
		else if (!strcmp(argv[i], "--label")) label = argv[++i];
		else if (!strcmp(argv[i], "--file")) file = argv[++i];
		else if (!strcmp(argv[i], "--file-size")) file_size = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--chunk")) chunk = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--sink")) sink = argv[++i];
		else if (!strcmp(argv[i], "--count-to")) count_to = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--sndbuf")) sndbuf = strtoull(argv[++i], NULL, 0);
		else usage("unknown option");
	}
	if (csv == NULL || label == NULL)
		usage("--csv and --label are required");
	if (chunk == 0 || file_size < chunk || seconds <= 0)
		usage("need chunk > 0, file size >= chunk, seconds > 0");
	if ((count_to != 0) != (strcmp(sink, "pipe") == 0) || (count_to != 0 && file_size % count_to != 0))
		usage("--count-to goes with the pipe sink, and the file size must be a multiple of it");
	if (sndbuf == 0 || sndbuf > (1u << 30))
		usage("--sndbuf must be between 1 and 1G");

	if (stat(file, &st) != 0 || (size_t)st.st_size != file_size) {
		int w = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (w < 0)
			die("create", file);
		buf = malloc(1 << 20);
		for (size_t i = 0; i < (1u << 20); i++)
			buf[i] = (char)(i * 2654435761u >> 24);
		for (size_t done = 0; done < file_size;) {
			size_t n = file_size - done < (1u << 20) ? file_size - done : (1u << 20);

			if (write(w, buf, n) != (ssize_t)n)
				die("write", file);
			done += n;
		}
		free(buf);
		close(w);
	}
	fd = open(file, O_RDONLY);
	if (fd < 0)
		die("open", file);
	buf = malloc(1 << 20);
	while (read(fd, buf, 1 << 20) > 0)
		;
	free(buf);
	resident = resident_pages(fd);

	if (!strcmp(sink, "devnull")) {
		out = open("/dev/null", O_WRONLY);
		if (out < 0)
			die("open", "/dev/null");
	} else if (!strcmp(sink, "socket")) {
		int size = (int)sndbuf;

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0)
			die("socketpair", NULL);
		setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
		setsockopt(pair[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
		out = pair[0];
		pthread_create(&drainer, NULL, drain, &pair[1]);
	} else if (!strcmp(sink, "pipe")) {
		if (pipe2(pair, O_NONBLOCK) != 0 || fcntl(pair[1], F_SETPIPE_SZ, (int)sndbuf) < 0)
			die("pipe", NULL);
		out = pair[1];
		devnull = open("/dev/null", O_WRONLY);
		if (devnull < 0)
			die("open", "/dev/null");
	} else {
		usage("--sink must be socket, devnull or pipe");
	}

	start = now_s();
	do {
		for (int i = 0; i < 64; i++) {
			size_t count = chunk;
			ssize_t n;

			if (count_to != 0) {
				if ((size_t)offset >= file_size)
					offset = 0;
				count = count_to - (size_t)offset % count_to;
			} else if ((size_t)offset + chunk > file_size) {
				offset = 0;
			}
			n = sendfile(out, fd, &offset, count);
			calls++;
			if (n < 0)
				die("sendfile", file);
			bytes += (uint64_t)n;
			if (devnull >= 0 && n > 0 && splice(pair[0], NULL, devnull, NULL, (size_t)n, 0) != n)
				die("splice", "pipe to /dev/null");
		}
		elapsed = now_s() - start;
	} while (elapsed < seconds);

	if (!strcmp(sink, "socket")) {
		draining = 0;
		shutdown(pair[0], SHUT_RDWR);
		pthread_join(drainer, NULL);
	}

	new_csv = access(csv, F_OK) != 0;
	f = fopen(csv, "a");
	if (f == NULL)
		die("open", csv);
	if (new_csv)
		fprintf(f, "label,sink,mode,preloaded,chunk_bytes,file_bytes,seconds,calls,calls_per_sec,ns_per_call,"
			   "resident_before,count_to,sndbuf,uid,bytes_per_sec\n");
	fprintf(f, "%s,%s,%s,%s,%zu,%zu,%.3f,%llu,%.0f,%.1f,%llu,%zu,%zu,%d,%.0f\n", label, sink,
		getenv("LIBCEPTION_MODE") ? getenv("LIBCEPTION_MODE") : "",
		getenv("LD_PRELOAD") && *getenv("LD_PRELOAD") ? "yes" : "no", chunk, file_size, elapsed,
		(unsigned long long)calls, (double)calls / elapsed, elapsed * 1e9 / (double)calls,
		(unsigned long long)resident, count_to, sndbuf, (int)geteuid(), (double)bytes / elapsed);
	fclose(f);
	printf("%s %s: %.0f calls/s (%.1f ns/call)\n", label, sink, (double)calls / elapsed, elapsed * 1e9 / (double)calls);
	return 0;
}
