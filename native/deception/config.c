/*
 * config.c - the shim's settings (struct lcp__config) read from the
 * environment once at start-up.
 *
 * The names of the variables and of the modes come from
 * <libception/shim.h>, their single source (the Rust side that builds a
 * shim's environment mirrors that header, and a test checks they agree);
 * docs/man/libdeception.7 documents each for users. In short:
 *   LCP_ENV_MODE         full | serialize | prefetch | track | off
 *   LCP_ENV_SOCKET       daemon socket path (protocol.h default)
 *   LCP_ENV_TIMEOUT_MS   bound on one daemon round trip (default 2000)
 *   LCP_ENV_PREFETCH     prefetch mode read-ahead (default 2M)
 *   LCP_ENV_MAX_REQUEST  largest range checked/fetched per call (default 2M)
 *   LCP_ENV_STATS        JSON stats path written at exit (%p = pid)
 *   LCP_ENV_WINDOW_MS    how long a range the daemon confirmed resident is
 *                        trusted without asking again (default 250, 0 off)
 *   LCP_ENV_FORCE_CHECK  testing aid: mincore | daemon forces that residency
 *                        check path (cachestat exists on the kernels we test
 *                        on, so its fallbacks would otherwise never run)
 *
 * Invalid values are reported once on stderr ("libdeception: ...") naming the
 * variable; an invalid mode turns the shim off (the safe choice), an invalid
 * number keeps its default. Calls nothing else of the shim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "deception.h"

struct lcp__config lcp__cfg = {
	.mode = LCP_MODE_OFF,
	.timeout_ms = 2000,
	.prefetch = 2u << 20,
	.max_request = 2u << 20,
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

/* The variable's value, or NULL when it is unset or empty (the default). */
static const char *setting(const char *var)
{
	const char *value = getenv(var);

	return value != NULL && *value != '\0' ? value : NULL;
}

static void read_environment(void)
{
	const char *mode = setting(LCP_ENV_MODE);
	const char *socket_path = setting(LCP_ENV_SOCKET);
	const char *timeout = setting(LCP_ENV_TIMEOUT_MS);
	const char *prefetch = setting(LCP_ENV_PREFETCH);
	const char *max_request = setting(LCP_ENV_MAX_REQUEST);
	const char *stats = setting(LCP_ENV_STATS);
	const char *force_check = setting(LCP_ENV_FORCE_CHECK);
	const char *window = setting(LCP_ENV_WINDOW_MS);
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

	if (stats != NULL) {
		if (strlen(stats) >= sizeof(lcp__cfg.stats_path) - 16) {
			warn_env(LCP_ENV_STATS, stats, "path too long; no statistics file");
		} else {
			strcpy(lcp__cfg.stats_path, stats);
			lcp__cfg.stats_enabled = 1;
		}
	} else if (lcp__cfg.mode == LCP_MODE_TRACK) {
		strcpy(lcp__cfg.stats_path, "/tmp/libception-stats.%p.json");
		lcp__cfg.stats_enabled = 1;
	}
}

void lcp__config_read(void)
{
	long page = sysconf(_SC_PAGESIZE);

	lcp__cfg.page_shift = (unsigned)__builtin_ctzl(page > 0 ? (unsigned long)page : 4096ul);
	read_environment();
}
