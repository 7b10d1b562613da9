/*
 * config.c - the shim's settings (struct lcp__config), read once at start-up
 * from the system-wide configuration file and the environment.
 *
 * The names of the variables and of the modes come from
 * <libception/shim.h>, their single source (the Rust side that builds a
 * shim's environment mirrors that header, and a test checks they agree);
 * docs/man/libdeception.7 documents each for users. In short:
 *   LCP_ENV_MODE         full | serialize | prefetch | track | off
 *   LCP_ENV_SOCKET       daemon socket path (protocol.h default)
 *   LCP_ENV_TIMEOUT_MS   bound on one daemon round trip (default 2000)
 *   LCP_ENV_PATIENCE_MS  the bound stretched while the daemon answers other
 *                        threads of the process (default 10000)
 *   LCP_ENV_PREFETCH     prefetch mode read-ahead (default 2M)
 *   LCP_ENV_MAX_REQUEST  largest range checked/fetched per call (default 8M)
 *   LCP_ENV_STATS        JSON stats path written at exit (%p = pid)
 *   LCP_ENV_STATS_INTERVAL_MS  also rewritten while running, at most this
 *                        often (default 0: at exit only)
 *   LCP_ENV_WINDOW_MS    how long a range the daemon confirmed resident is
 *                        trusted without asking again (default 250, 0 off)
 *   LCP_ENV_DAEMON_UID   a uid besides root whose daemon is trusted
 *   LCP_ENV_FORCE_CHECK  testing aid: mincore | daemon forces that residency
 *                        check path (cachestat exists on the kernels we test
 *                        on, so its fallbacks would otherwise never run)
 *
 * Trust (docs/shim.md): the shim may sit in /etc/ld.so.preload and so run
 * inside setuid programs, whose environment belongs to the user who started
 * them. Hence two sources, the same NAME=value pairs in both:
 *   - the configuration file LCP_CONF_PATH (a build may point LCP_CONF_FILE
 *     elsewhere, as the tests do), used only if it is a regular file owned by
 *     root and writable by nobody else (otherwise ignored, with a warning);
 *   - the environment, through secure_getenv, which overrides the file - but
 *     in AT_SECURE processes it is not read at all, statistics files are
 *     refused whatever the file says, and only root's daemon or the file's
 *     LIBCEPTION_DAEMON_UID is trusted (otherwise also our own euid's).
 *
 * Invalid values are reported once on stderr ("libdeception: ...") naming the
 * variable; an invalid mode turns the shim off (the safe choice), an invalid
 * number keeps its default. Calls nothing else of the shim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "deception.h"

#ifndef LCP_CONF_FILE
#define LCP_CONF_FILE LCP_CONF_PATH
#endif

/* The configuration file's pairs, pointing into conf_text (start-up only). */
#define CONF_MAX_BYTES 8192
#define CONF_MAX_PAIRS 32
static char conf_text[CONF_MAX_BYTES + 1];
static struct { const char *name, *value; } conf_pairs[CONF_MAX_PAIRS];
static int conf_npairs;

struct lcp__config lcp__cfg = {
	.mode = LCP_MODE_OFF,
	.timeout_ms = 2000,
	.patience_ms = 10000,
	.prefetch = 2u << 20,
	/* nginx with sendfile_max_chunk 0 passes the rest of the response as
	 * sendfile's count, and one call can move more than 2 MiB: a bound below
	 * the response left its tail (up to 0.5 MB of a 2.6 MB HD chunk) to the
	 * kernel, read in the server's thread outside the daemon's
	 * serialization. 8 MiB covers a whole HD chunk with room to spare
	 * (docs/shim.md, "Decisions and why"). */
	.max_request = 8u << 20,
	.page_shift = 12,
	.window_ns = 250ull * 1000000u,
};

static void warn_env(const char *var, const char *value, const char *why)
{
	/* One line on stderr: the user asked for something we cannot do. */
	char line[512];
	int n = snprintf(line, sizeof(line), "libdeception: ignoring %s=\"%.200s\": %s\n", var, value, why);

	if (n > 0)
		(void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

int lcp__parse_size(const char *text, uint64_t *out)
{
	char *end;
	unsigned long long value;
	uint64_t scale = 1;

	if (text == NULL || *text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	value = strtoull(text, &end, 10);
	if (errno != 0)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': scale = 1ull << 10; end++; break;
	case 'm': case 'M': scale = 1ull << 20; end++; break;
	case 'g': case 'G': scale = 1ull << 30; end++; break;
	default: break;
	}
	if (scale != 1 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B'))
		end += 2;
	else if (end[0] == 'b' || end[0] == 'B')
		end += 1;
	if (*end != '\0')
		return -EINVAL;
	if (value > UINT64_MAX / scale)
		return -EINVAL;
	*out = value * scale;
	return 0;
}

/* A whole number of milliseconds in [min, max]: 0 with *out set, or -EINVAL. */
static int parse_ms(const char *text, long min, long max, long *out)
{
	char *end;
	long ms;

	errno = 0;
	ms = strtol(text, &end, 10);
	if (errno != 0 || *end != '\0' || ms < min || ms > max)
		return -EINVAL;
	*out = ms;
	return 0;
}

const char *lcp__mode_name(enum lcp_mode mode)
{
	switch (mode) {
	case LCP_MODE_FULL: return LCP_MODE_NAME_FULL;
	case LCP_MODE_SERIALIZE: return LCP_MODE_NAME_SERIALIZE;
	case LCP_MODE_PREFETCH: return LCP_MODE_NAME_PREFETCH;
	case LCP_MODE_TRACK: return LCP_MODE_NAME_TRACK;
	case LCP_MODE_OFF: break;
	}
	return LCP_MODE_NAME_OFF;
}

static void warn_conf(const char *why)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "libdeception: ignoring %s: %s\n", LCP_CONF_FILE, why);

	if (n > 0)
		(void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* Split conf_text into NAME=value pairs: '#' starts a comment, blanks around
 * names and values are dropped, lines without '=' are reported. */
static void parse_conf(char *text)
{
	for (char *line = text, *next; line != NULL && *line != '\0'; line = next) {
		char *eq, *end;

		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if ((end = strchr(line, '#')) != NULL)
			*end = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		end = line + strlen(line);
		while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
			*--end = '\0';
		if (*line == '\0')
			continue;
		eq = strchr(line, '=');
		if (eq == NULL || conf_npairs == CONF_MAX_PAIRS) {
			warn_conf(eq == NULL ? "a line without NAME=value" : "too many lines; the rest is ignored");
			continue;
		}
		end = eq;
		while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		*end = '\0';
		for (eq++; *eq == ' ' || *eq == '\t'; eq++)
			;
		conf_pairs[conf_npairs].name = line;
		conf_pairs[conf_npairs].value = eq;
		conf_npairs++;
	}
}

/* Read the configuration file if it is one root vouches for. */
static void read_conf_file(void)
{
	struct stat st;
	size_t used = 0;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, LCP_CONF_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
			      O_NONBLOCK);

	if (fd < 0) {
		if (errno != ENOENT)
			warn_conf(strerror(errno));
		return;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		warn_conf("not a regular file owned by root and writable by root alone");
		syscall(SYS_close, fd);
		return;
	}
	for (;;) {
		long got = syscall(SYS_read, fd, conf_text + used, CONF_MAX_BYTES - used);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		used += (size_t)got;
		if (used == CONF_MAX_BYTES) {
			warn_conf("longer than 8 KiB; the rest is ignored");
			break;
		}
	}
	syscall(SYS_close, fd);
	conf_text[used] = '\0';
	parse_conf(conf_text);
}

static const char *conf_value(const char *var)
{
	const char *value = NULL;

	for (int i = 0; i < conf_npairs; i++)
		if (strcmp(conf_pairs[i].name, var) == 0)
			value = conf_pairs[i].value; /* the last one wins */
	return value;
}

/* The variable's value (environment, else configuration file), or NULL when
 * it is unset or empty (the default). AT_SECURE: the file alone. */
static const char *setting(const char *var)
{
	const char *value = lcp__cfg.secure ? NULL : secure_getenv(var);

	if (value == NULL || *value == '\0')
		value = conf_value(var);
	return value != NULL && *value != '\0' ? value : NULL;
}

int lcp__daemon_uid_trusted(uid_t uid)
{
	return uid == 0 || (lcp__cfg.have_daemon_uid && uid == lcp__cfg.daemon_uid) ||
	       (!lcp__cfg.secure && uid == geteuid());
}

/* Track mode's statistics without LIBCEPTION_STATS: a directory of the
 * user's own (stats.c creates it 0700 and checks it before writing). */
static void default_stats_path(void)
{
	int n = snprintf(lcp__cfg.stats_path, sizeof(lcp__cfg.stats_path), "/tmp/libception-%u/stats.%%p.json",
			 (unsigned)geteuid());

	if (n > 0 && (size_t)n < sizeof(lcp__cfg.stats_path)) {
		lcp__cfg.stats_enabled = 1;
		lcp__cfg.stats_private_dir = 1;
	}
}

static void read_settings(void)
{
	const char *mode = setting(LCP_ENV_MODE);
	const char *socket_path = setting(LCP_ENV_SOCKET);
	const char *timeout = setting(LCP_ENV_TIMEOUT_MS);
	const char *patience = setting(LCP_ENV_PATIENCE_MS);
	const char *prefetch = setting(LCP_ENV_PREFETCH);
	const char *max_request = setting(LCP_ENV_MAX_REQUEST);
	const char *stats = setting(LCP_ENV_STATS);
	const char *stats_interval = setting(LCP_ENV_STATS_INTERVAL_MS);
	const char *force_check = setting(LCP_ENV_FORCE_CHECK);
	const char *window = setting(LCP_ENV_WINDOW_MS);
	const char *daemon_uid = setting(LCP_ENV_DAEMON_UID);
	uint64_t size;
	long ms;

	lcp__cfg.mode = LCP_MODE_FULL;
	if (mode != NULL) {
		if (strcasecmp(mode, LCP_MODE_NAME_FULL) == 0)
			lcp__cfg.mode = LCP_MODE_FULL;
		else if (strcasecmp(mode, LCP_MODE_NAME_SERIALIZE) == 0)
			lcp__cfg.mode = LCP_MODE_SERIALIZE;
		else if (strcasecmp(mode, LCP_MODE_NAME_PREFETCH) == 0)
			lcp__cfg.mode = LCP_MODE_PREFETCH;
		else if (strcasecmp(mode, LCP_MODE_NAME_TRACK) == 0)
			lcp__cfg.mode = LCP_MODE_TRACK;
		else if (strcasecmp(mode, LCP_MODE_NAME_OFF) == 0)
			lcp__cfg.mode = LCP_MODE_OFF;
		else {
			warn_env(LCP_ENV_MODE, mode,
				 "expected full, serialize, prefetch, track or off; the shim is off");
			lcp__cfg.mode = LCP_MODE_OFF;
		}
	}

	if (socket_path != NULL && strlen(socket_path) >= sizeof(lcp__cfg.socket_path)) {
		warn_env(LCP_ENV_SOCKET, socket_path, "longer than a Unix socket path may be; using the default");
		socket_path = NULL;
	}
	strcpy(lcp__cfg.socket_path, socket_path != NULL ? socket_path : LCP_SOCKET_DEFAULT);

	if (timeout != NULL) {
		if (parse_ms(timeout, 1, 3600000, &ms) < 0)
			warn_env(LCP_ENV_TIMEOUT_MS, timeout, "expected milliseconds between 1 and 3600000");
		else
			lcp__cfg.timeout_ms = (int)ms;
	}
	if (patience != NULL) {
		if (parse_ms(patience, 0, 3600000, &ms) < 0)
			warn_env(LCP_ENV_PATIENCE_MS, patience, "expected milliseconds between 0 and 3600000");
		else
			lcp__cfg.patience_ms = (int)ms;
	}

	if (prefetch != NULL) {
		if (lcp__parse_size(prefetch, &size) < 0 || size > (1ull << 30))
			warn_env(LCP_ENV_PREFETCH, prefetch, "expected a size like 2M, 512K or 4096, at most 1G");
		else
			lcp__cfg.prefetch = size;
	}

	if (max_request != NULL) {
		if (lcp__parse_size(max_request, &size) < 0 || size < 4096 || size > (1ull << 30))
			warn_env(LCP_ENV_MAX_REQUEST, max_request,
				 "expected a size like 2M, between 4K and 1G");
		else
			lcp__cfg.max_request = size;
	}

	if (stats_interval != NULL) {
		if (parse_ms(stats_interval, 0, 3600000, &ms) < 0)
			warn_env(LCP_ENV_STATS_INTERVAL_MS, stats_interval,
				 "expected milliseconds between 0 and 3600000; statistics are written at exit only");
		else
			lcp__cfg.stats_interval_ns = (uint64_t)ms * 1000000u;
	}

	if (window != NULL) {
		if (parse_ms(window, 0, 60000, &ms) < 0)
			warn_env(LCP_ENV_WINDOW_MS, window, "expected milliseconds between 0 and 60000");
		else
			lcp__cfg.window_ns = (uint64_t)ms * 1000000u;
	}

	if (force_check != NULL) {
		if (strcasecmp(force_check, "mincore") == 0)
			lcp__cfg.force_check = LCP_METHOD_MINCORE;
		else if (strcasecmp(force_check, "daemon") == 0)
			lcp__cfg.force_check = LCP_METHOD_DAEMON;
		else
			warn_env(LCP_ENV_FORCE_CHECK, force_check,
				 "expected mincore or daemon (a testing aid); residency checks are chosen as usual");
	}

	if (daemon_uid != NULL) {
		char *end;
		unsigned long uid;

		errno = 0;
		uid = strtoul(daemon_uid, &end, 10);
		if (errno != 0 || *end != '\0' || *daemon_uid < '0' || *daemon_uid > '9' || uid >= (uid_t)-1)
			warn_env(LCP_ENV_DAEMON_UID, daemon_uid, "expected a numeric uid; only root's daemon is trusted");
		else {
			lcp__cfg.daemon_uid = (uid_t)uid;
			lcp__cfg.have_daemon_uid = 1;
		}
	}

	/* Statistics: never in mode off; never in AT_SECURE processes, where a
	 * file created with our privileges could be aimed by the caller. */
	if (lcp__cfg.mode == LCP_MODE_OFF || lcp__cfg.secure)
		return;
	if (stats != NULL) {
		if (strlen(stats) >= sizeof(lcp__cfg.stats_path) - 16) {
			warn_env(LCP_ENV_STATS, stats, "path too long; no statistics file");
		} else {
			strcpy(lcp__cfg.stats_path, stats);
			lcp__cfg.stats_enabled = 1;
		}
	} else if (lcp__cfg.mode == LCP_MODE_TRACK) {
		default_stats_path();
	}
}

void lcp__config_read(void)
{
	long page = sysconf(_SC_PAGESIZE);

	lcp__cfg.page_shift = (unsigned)__builtin_ctzl(page > 0 ? (unsigned long)page : 4096ul);
	lcp__cfg.secure = getauxval(AT_SECURE) != 0;
	read_conf_file();
	read_settings();
}
