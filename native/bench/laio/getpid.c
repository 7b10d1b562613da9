/*
 * getpid.c - paper 002's getpid micro-benchmark (Table 2): N getpid calls
 * directly, or through liblaio with at most K outstanding at once. Prints
 * one CSV row: mode,backend,outstanding,calls,seconds,inline,background.
 * Lazy calls that complete inline never count against K; calls that go to
 * the background (all of them in the eager back end) are collected with
 * laio_poll() and a new call issued for each, keeping K in flight.
 *
 *   laio-getpid direct|laio CALLS [OUTSTANDING]   (LAIO_BACKEND picks the back end)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <laio/laio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long calls, k, issued = 0, done = 0, inflight = 0, inl = 0, bg = 0;
	struct laio_completion c[256];
	pid_t me = getpid();
	double t0, t1;

	if (argc < 3 || (strcmp(argv[1], "direct") && strcmp(argv[1], "laio"))) {
		fprintf(stderr, "usage: %s direct|laio CALLS [OUTSTANDING]\n", argv[0]);
		return 2;
	}
	calls = atol(argv[2]);
	k = argc > 3 ? atol(argv[3]) : 1;
	if (calls < 1 || k < 1) {
		fprintf(stderr, "laio-getpid: CALLS and OUTSTANDING must be positive\n");
		return 2;
	}
	if (strcmp(argv[1], "direct") == 0) {
		t0 = now();
		for (long i = 0; i < calls; i++)
			if (syscall(SYS_getpid) != me)
				return 1;
		t1 = now();
		printf("direct,none,1,%ld,%.6f,%ld,0\n", calls, t1 - t0, calls);
		return 0;
	}
	laio_backend();	/* start-up outside the timed part */
	t0 = now();
	while (done < calls) {
		while (issued < calls && inflight < k) {
			long r = laio_syscall(SYS_getpid);

			issued++;
			if (r == me) {
				inl++;
				done++;
			} else if (r == -1 && errno == EINPROGRESS) {
				inflight++;
				bg++;
			} else {
				fprintf(stderr, "laio-getpid: getpid gave %ld (%s)\n", r, strerror(errno));
				return 1;
			}
		}
		if (inflight) {
			int n = laio_poll(c, 256, NULL);

			for (int i = 0; i < n; i++)
				if (c[i].laio_return_value != me)
					return 1;
			inflight -= n;
			done += n;
		}
	}
	t1 = now();
	printf("laio,%s,%ld,%ld,%.6f,%ld,%ld\n", laio_backend(), k, calls, t1 - t0, inl, bg);
	return 0;
}
