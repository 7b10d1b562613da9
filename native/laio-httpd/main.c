/*
 * main.c - laio-httpd's start: settings from a configuration file and the
 * command line, the listening socket, the document root, the error log,
 * dropping privileges, then a master process that runs `workers` worker
 * processes (worker.c), restarts one that dies, and stops them all on
 * SIGTERM or SIGINT.
 *
 *   laio-httpd [-f FILE] [-r DOCROOT] [-l [ADDR:]PORT] [-w WORKERS] [-u USER]
 *              [-b BUFFER_KB] [-c MAX_CONNECTIONS] [-k KEEPALIVE_S]
 *              [-B lazy|eager] [-e ERROR_LOG] [-P PID_FILE] [-t]
 *
 * The file has one `key = value` per line (# comments); the keys are the
 * long names of the options (docs/man/laio-httpd.8). Options on the command
 * line win over the file. -t checks the settings and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpd.h"

volatile sig_atomic_t httpd_stop;

struct config {
	char docroot[PATH_MAX];
	char listen[128];
	char user[64];
	char error_log[PATH_MAX];
	char pid_file[PATH_MAX];
	char backend[16];
	unsigned long workers, buffer_kb, max_connections, keepalive_s, send_timeout_s;
};

static void usage(FILE *f)
{
	fprintf(f, "usage: laio-httpd [-f FILE] [-r DOCROOT] [-l [ADDR:]PORT] [-w WORKERS] [-u USER] [-b BUFFER_KB]\n"
		   "                  [-c MAX_CONNECTIONS] [-k KEEPALIVE_S] [-B lazy|eager] [-e ERROR_LOG] [-P PID_FILE] [-t]\n"
		   "A static HTTP/1.1 server whose disk and network calls go through liblaio (laio(3)).\n"
		   "See laio-httpd(8).\n");
}

static int parse_ulong(const char *v, unsigned long min, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || end == v || *end || x < min || x > max || v[0] == '-')
		return -1;
	*out = x;
	return 0;
}

static int copy(char *dst, size_t cap, const char *v)
{
	if (strlen(v) >= cap)
		return -1;
	strcpy(dst, v);
	return 0;
}

/* Sets one setting by its long name; `where` names the source for errors. */
static int set(struct config *c, const char *key, const char *v, const char *where)
{
	int r;

	if (!strcmp(key, "docroot"))
		r = copy(c->docroot, sizeof(c->docroot), v);
	else if (!strcmp(key, "listen"))
		r = copy(c->listen, sizeof(c->listen), v);
	else if (!strcmp(key, "user"))
		r = copy(c->user, sizeof(c->user), v);
	else if (!strcmp(key, "error_log"))
		r = copy(c->error_log, sizeof(c->error_log), v);
	else if (!strcmp(key, "pid_file"))
		r = copy(c->pid_file, sizeof(c->pid_file), v);
	else if (!strcmp(key, "backend"))
		r = strcmp(v, "lazy") && strcmp(v, "eager") && strcmp(v, "auto") ? -1 : copy(c->backend, sizeof(c->backend), v);
	else if (!strcmp(key, "workers"))
		r = parse_ulong(v, 1, 256, &c->workers);
	else if (!strcmp(key, "buffer_kb"))
		r = parse_ulong(v, 64, 65536, &c->buffer_kb);
	else if (!strcmp(key, "max_connections"))
		r = parse_ulong(v, 1, 1 << 20, &c->max_connections);
	else if (!strcmp(key, "keepalive_timeout"))
		r = parse_ulong(v, 1, 86400, &c->keepalive_s);
	else if (!strcmp(key, "send_timeout"))
		r = parse_ulong(v, 1, 86400, &c->send_timeout_s);
	else {
		fprintf(stderr, "laio-httpd: %s: unknown setting \"%s\"\n", where, key);
		return -1;
	}
	if (r < 0)
		fprintf(stderr, "laio-httpd: %s: bad value \"%s\" for %s (see laio-httpd(8))\n", where, v, key);
	return r;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static int read_file(struct config *c, const char *path)
{
	FILE *f = fopen(path, "re");
	char line[PATH_MAX + 64], where[PATH_MAX + 32];
	int lineno = 0, bad = 0;

	if (!f) {
		fprintf(stderr, "laio-httpd: cannot open configuration %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash, *eq, *s;

		lineno++;
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "laio-httpd: %s: line too long\n", where);
			bad = 1;
			break;
		}
		if ((hash = strchr(line, '#')))
			*hash = 0;
		s = trim(line);
		if (!*s)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			fprintf(stderr, "laio-httpd: %s: expected key = value, got \"%s\"\n", where, s);
			bad = 1;
			continue;
		}
		*eq = 0;
		if (set(c, trim(s), trim(eq + 1), where) < 0)
			bad = 1;
	}
	fclose(f);
	return bad ? -1 : 0;
}

static int open_listener(const char *spec)
{
	char host[128] = "127.0.0.1";
	const char *colon = strrchr(spec, ':');
	unsigned long port;
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd, one = 1;

	if (colon) {
		if ((size_t)(colon - spec) >= sizeof(host)) {
			fprintf(stderr, "laio-httpd: listen address too long: %s\n", spec);
			return -1;
		}
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = 0;
	}
	if (parse_ulong(colon ? colon + 1 : spec, 1, 65535, &port) < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "laio-httpd: bad listen \"%s\": give PORT or IPv4ADDR:PORT\n", spec);
		return -1;
	}
	a.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0) {
		fprintf(stderr, "laio-httpd: cannot listen on %s: %s\n", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int drop_privileges(const char *user)
{
	struct passwd *pw;

	if (!*user || geteuid() != 0)
		return 0;
	pw = getpwnam(user);
	if (!pw) {
		fprintf(stderr, "laio-httpd: user \"%s\" does not exist\n", user);
		return -1;
	}
	if (initgroups(user, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
		fprintf(stderr, "laio-httpd: cannot become %s: %s\n", user, strerror(errno));
		return -1;
	}
	return 0;
}

static void on_stop(int sig)
{
	(void)sig;
	httpd_stop = 1;
}

static pid_t spawn(const struct httpd_settings *s, int index)
{
	pid_t p = fork();

	if (p == 0) {
		signal(SIGCHLD, SIG_DFL);
		exit(httpd_worker_run(s, index));
	}
	if (p < 0)
		fprintf(stderr, "laio-httpd: cannot start worker %d: %s\n", index, strerror(errno));
	return p;
}

int main(int argc, char **argv)
{
	struct config c = { .listen = "8080", .backend = "auto", .workers = 1, .buffer_kb = 256,
			    .max_connections = 4096, .keepalive_s = 60, .send_timeout_s = 60 };
	struct httpd_settings s;
	struct sigaction sa = { .sa_handler = on_stop };
	int opt, check_only = 0, log_fd;
	pid_t *pids;
	struct rlimit rl;
	static const char *const key_of[128] = {
		['r'] = "docroot", ['l'] = "listen", ['w'] = "workers", ['u'] = "user", ['b'] = "buffer_kb",
		['c'] = "max_connections", ['k'] = "keepalive_timeout", ['B'] = "backend", ['e'] = "error_log",
		['P'] = "pid_file",
	};

	/* The file first, so the command line wins whatever the order. */
	for (int i = 1; i < argc - 1; i++)
		if (!strcmp(argv[i], "-f") && read_file(&c, argv[i + 1]) < 0)
			return 2;
	while ((opt = getopt(argc, argv, "f:r:l:w:u:b:c:k:B:e:P:th")) != -1) {
		if (opt == 'f')
			continue;
		if (opt == 't') {
			check_only = 1;
		} else if (opt == 'h') {
			usage(stdout);
			return 0;
		} else if (opt > 0 && opt < 128 && key_of[opt]) {
			char where[32];

			snprintf(where, sizeof(where), "option -%c", opt);
			if (set(&c, key_of[opt], optarg, where) < 0)
				return 2;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "laio-httpd: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!*c.docroot) {
		fprintf(stderr, "laio-httpd: no document root: give -r DIR or docroot = DIR\n");
		return 2;
	}
	if (strcmp(c.backend, "auto"))
		setenv("LAIO_BACKEND", c.backend, 1);

	s.docroot_fd = open(c.docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s.docroot_fd < 0) {
		fprintf(stderr, "laio-httpd: document root %s: %s\n", c.docroot, strerror(errno));
		return 1;
	}
	s.listen_fd = open_listener(c.listen);
	if (s.listen_fd < 0)
		return 1;
	if (*c.error_log) {
		log_fd = open(c.error_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
		if (log_fd < 0) {
			fprintf(stderr, "laio-httpd: error log %s: %s\n", c.error_log, strerror(errno));
			return 1;
		}
		if (check_only)
			close(log_fd);
		else if (dup2(log_fd, 2) < 0 || close(log_fd) < 0)
			return 1;
	}
	if (*c.pid_file && !check_only) {
		FILE *pf = fopen(c.pid_file, "we");

		if (!pf || fprintf(pf, "%d\n", (int)getpid()) < 0 || fclose(pf) != 0) {
			fprintf(stderr, "laio-httpd: pid file %s: %s\n", c.pid_file, strerror(errno));
			return 1;
		}
	}
	if (drop_privileges(c.user) < 0)
		return 1;
	if (check_only) {
		printf("laio-httpd: settings ok: docroot %s, listen %s, %lu workers, buffer %lu KiB, %lu connections per worker\n",
		       c.docroot, c.listen, c.workers, c.buffer_kb, c.max_connections);
		return 0;
	}
	/* Each connection holds a socket and, while it is served, a file. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 2 * c.max_connections + 64) {
		rl.rlim_cur = rl.rlim_max < 2 * c.max_connections + 64 ? rl.rlim_max : 2 * c.max_connections + 64;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	s.keepalive_s = (unsigned)c.keepalive_s;
	s.send_timeout_s = (unsigned)c.send_timeout_s;
	s.buffer = c.buffer_kb * 1024;
	s.max_connections = (unsigned)c.max_connections;
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	fprintf(stderr, "laio-httpd: serving %s on %s, %lu workers\n", c.docroot, c.listen, c.workers);

	pids = calloc(c.workers, sizeof(*pids));
	if (!pids)
		return 1;
	for (unsigned long i = 0; i < c.workers; i++)
		if ((pids[i] = spawn(&s, (int)i)) < 0)
			httpd_stop = 1;
	while (!httpd_stop) {
		int status;
		pid_t p = wait(&status);

		if (p < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (unsigned long i = 0; i < c.workers; i++) {
			if (pids[i] != p)
				continue;
			if (WIFSIGNALED(status))
				fprintf(stderr, "laio-httpd: worker %lu died of signal %d; starting another\n", i, WTERMSIG(status));
			else
				fprintf(stderr, "laio-httpd: worker %lu exited with status %d; starting another\n", i,
					WEXITSTATUS(status));
			sleep(1); /* a worker that dies at once must not spin */
			if (!httpd_stop)
				pids[i] = spawn(&s, (int)i);
		}
	}
	for (unsigned long i = 0; i < c.workers; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
	while (wait(NULL) > 0 || errno == EINTR)
		;
	if (*c.pid_file)
		unlink(c.pid_file);
	return 0;
}
