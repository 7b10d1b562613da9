/*
 * init.c - configuration and start-up of the Deception shim.
 *
 * The environment is read once, by lcp__init(), which runs from the library
 * constructor or, if an interposed call arrives first (another library's
 * constructor opening a file), from that call. A tiny state machine makes the
 * first caller do the work; any other thread that arrives meanwhile goes
 * straight to libc for that call rather than wait. Re-entry from the same
 * thread is stopped by the guard.
 *
 * Environment (documented in docs/man/libdeception.7):
 *   LIBCEPTION_MODE        full | serialize | prefetch | track | off
 *   LIBCEPTION_SOCKET      daemon socket path (protocol.h default)
 *   LIBCEPTION_TIMEOUT_MS  bound on one daemon round trip (default 2000)
 *   LIBCEPTION_PREFETCH    prefetch mode read-ahead (default 2M)
 *   LIBCEPTION_MAX_REQUEST largest range checked/fetched per call (default 2M)
 *   LIBCEPTION_STATS       JSON stats path written at exit (%p = pid)
 *   LIBCEPTION_WINDOW_MS   how long a range the daemon confirmed resident is
 *                          trusted without asking again (default 250, 0 off)
 *   LIBCEPTION_FORCE_CHECK testing aid: mincore | daemon forces that
 *                          residency check path (cachestat exists on the
 *                          kernels we test on, so its fallbacks would
 *                          otherwise never run)
 *
 * Invalid values are reported once on stderr ("libdeception: ...") naming the
 * variable; an invalid mode turns the shim off (the safe choice), an invalid
 * number keeps its default.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "deception.h"

struct lcp__config lcp__cfg = {
	.mode = LCP_MODE_OFF,
	.timeout_ms = 2000,
	.prefetch = 2u << 20,
	.max_request = 2u << 20,
	.page_shift = 12,
	.window_ns = 250ull * 1000000u,
};

int lcp__initialised;
LCP__TLS int lcp__guard;

/* 0 = not started, 1 = running, 2 = done */
static int init_state;

void *lcp__resolve(void **slot, const char *name)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (LCP__LIKELY(fn != NULL))
		return fn;
	fn = dlsym(RTLD_NEXT, name);
	if (fn != NULL)
		__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	return fn;
}

static void *real_pread_fn, *real_mmap_fn, *real_open_fn;

ssize_t lcp__real_pread(int fd, void *buf, size_t count, off_t offset)
{
	ssize_t (*fn)(int, void *, size_t, off_t) = lcp__resolve(&real_pread_fn, "pread");

	if (fn == NULL)
		return syscall(SYS_pread64, fd, buf, count, offset);
	return fn(fd, buf, count, offset);
}

void *lcp__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *(*fn)(void *, size_t, int, int, int, off_t) = lcp__resolve(&real_mmap_fn, "mmap");

	if (fn == NULL)
		return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	return fn(addr, len, prot, flags, fd, off);
}

int lcp__real_open(const char *path, int flags, mode_t mode)
{
	int (*fn)(const char *, int, ...) = lcp__resolve(&real_open_fn, "open");

	if (fn == NULL)
		return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
	return fn(path, flags, mode);
}

/* close(2) without being a cancellation point and without our wrapper. */
int lcp__sys_close(int fd)
{
	return syscall(SYS_close, fd) == 0 ? 0 : -errno;
}

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

static void read_environment(void)
{
	const char *mode = getenv(LCP_ENV_MODE);
	const char *socket_path = getenv(LCP_ENV_SOCKET);
	const char *timeout = getenv(LCP_ENV_TIMEOUT_MS);
	const char *prefetch = getenv(LCP_ENV_PREFETCH);
	const char *max_request = getenv(LCP_ENV_MAX_REQUEST);
	const char *stats = getenv(LCP_ENV_STATS);
	const char *force_check = getenv(LCP_ENV_FORCE_CHECK);
	const char *window = getenv(LCP_ENV_WINDOW_MS);
	uint64_t size;

	lcp__cfg.mode = LCP_MODE_FULL;
	if (mode != NULL && *mode != '\0') {
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

	if (socket_path != NULL && *socket_path != '\0') {
		if (strlen(socket_path) >= sizeof(lcp__cfg.socket_path)) {
			warn_env(LCP_ENV_SOCKET, socket_path, "longer than a Unix socket path may be; using the default");
			socket_path = NULL;
		}
	} else {
		socket_path = NULL;
	}
	strcpy(lcp__cfg.socket_path, socket_path != NULL ? socket_path : LCP_SOCKET_DEFAULT);

	if (timeout != NULL && *timeout != '\0') {
		char *end;
		long ms;

		errno = 0;
		ms = strtol(timeout, &end, 10);
		if (errno != 0 || *end != '\0' || ms < 1 || ms > 3600000)
			warn_env(LCP_ENV_TIMEOUT_MS, timeout, "expected milliseconds between 1 and 3600000");
		else
			lcp__cfg.timeout_ms = (int)ms;
	}

	if (prefetch != NULL && *prefetch != '\0') {
		if (lcp__parse_size(prefetch, &size) < 0 || size > (1ull << 30))
			warn_env(LCP_ENV_PREFETCH, prefetch, "expected a size like 2M, 512K or 4096, at most 1G");
		else
			lcp__cfg.prefetch = size;
	}

	if (max_request != NULL && *max_request != '\0') {
		if (lcp__parse_size(max_request, &size) < 0 || size < 4096 || size > (1ull << 30))
			warn_env(LCP_ENV_MAX_REQUEST, max_request,
				 "expected a size like 2M, between 4K and 1G");
		else
			lcp__cfg.max_request = size;
	}

	if (window != NULL && *window != '\0') {
		char *end;
		long ms;

		errno = 0;
		ms = strtol(window, &end, 10);
		if (errno != 0 || *end != '\0' || ms < 0 || ms > 60000)
			warn_env(LCP_ENV_WINDOW_MS, window, "expected milliseconds between 0 and 60000");
		else
			lcp__cfg.window_ns = (uint64_t)ms * 1000000u;
	}

	if (force_check != NULL && *force_check != '\0') {
		if (strcasecmp(force_check, "mincore") == 0)
			lcp__cfg.force_check = LCP_METHOD_MINCORE;
		else if (strcasecmp(force_check, "daemon") == 0)
			lcp__cfg.force_check = LCP_METHOD_DAEMON;
		else
			warn_env(LCP_ENV_FORCE_CHECK, force_check,
				 "expected mincore or daemon (a testing aid); residency checks are chosen as usual");
	}

	if (stats != NULL && *stats != '\0') {
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

void lcp__init(void)
{
	int expected = 0;

	if (__atomic_load_n(&init_state, __ATOMIC_ACQUIRE) == 2)
		return;
	if (!__atomic_compare_exchange_n(&init_state, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* someone else is initialising (or done): caller passes through */

	lcp__guard++;
	{
		int saved_errno = errno;
		long page = sysconf(_SC_PAGESIZE);

		lcp__cfg.page_shift = (unsigned)__builtin_ctzl(page > 0 ? (unsigned long)page : 4096ul);
		read_environment();
		(void)lcp__resolve(&real_pread_fn, "pread");
		(void)lcp__resolve(&real_mmap_fn, "mmap");
		(void)lcp__resolve(&real_open_fn, "open");
		lcp__resolve_interposed();
		lcp__client_init();
		errno = saved_errno;
	}
	lcp__guard--;
	__atomic_store_n(&lcp__initialised, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&init_state, 2, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void lcp_constructor(void)
{
	lcp__init();
}

__attribute__((destructor)) static void lcp_destructor(void)
{
	if (__atomic_load_n(&lcp__initialised, __ATOMIC_ACQUIRE) && lcp__cfg.stats_enabled) {
		int saved_errno = errno;

		lcp__guard++;
		lcp__stats_write();
		lcp__guard--;
		errno = saved_errno;
	}
}
