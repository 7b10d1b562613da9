/*
 * fakedaemon_main.c - the fake daemon as a program, for the shell tests:
 *
 *   fakedaemon --socket PATH [--behaviour normal|never|slow|garbage|wrong-seq|
 *              close|stray-fd|late-first] [--delay-ms N] [--log FILE]
 *
 * Serves until SIGTERM or SIGINT, then removes the socket. With --log, one
 * line per request ("op=1 flags=0 ... pid=N conn=N ...") is appended.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_daemon.h"

static void usage(const char *why)
{
	fprintf(stderr, "fakedaemon: %s\nusage: fakedaemon --socket PATH [--behaviour NAME] [--delay-ms N] [--log FILE]\n",
		why);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *socket_path = NULL, *log_path = NULL;
	enum fake_behaviour behaviour = FAKE_NORMAL;
	int delay_ms = 0, log_fd = -1, sig;
	struct fake_daemon *daemon;
	sigset_t set;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage("missing value after an option");
		if (strcmp(argv[i], "--socket") == 0)
			socket_path = argv[++i];
		else if (strcmp(argv[i], "--behaviour") == 0) {
			if (fake_behaviour_parse(argv[++i], &behaviour) != 0)
				usage("unknown --behaviour");
		} else if (strcmp(argv[i], "--delay-ms") == 0)
			delay_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--log") == 0)
			log_path = argv[++i];
		else
			usage("unknown option");
	}
	if (socket_path == NULL)
		usage("--socket is required");
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	daemon = fake_daemon_start(socket_path, behaviour, delay_ms);
	if (daemon == NULL)
		return 1;
	if (log_path != NULL) {
		log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (log_fd < 0) {
			fprintf(stderr, "fakedaemon: cannot open log %s: %s\n", log_path, strerror(errno));
			fake_daemon_stop(daemon);
			return 1;
		}
		fake_daemon_log_to(daemon, log_fd);
	}
	sigwait(&set, &sig);
	fake_daemon_stop(daemon);
	return 0;
}
