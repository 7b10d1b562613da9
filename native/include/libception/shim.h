/*
 * libception/shim.h - the settings of Deception (the LD_PRELOAD shim): the
 * names of the environment variables it reads and the modes it runs in.
 *
 * This header is the source of truth for both. The shim reads the variables
 * once at start-up (native/deception/config.c); every program that starts a
 * process under the shim (`libception run`, `vidbench run`) builds that
 * environment from the Rust mirror in crates/libception-proto (module
 * shim_env), and a test there compiles a C program against this header to
 * prove that names, values and mode names agree. docs/man/libdeception.7
 * documents each variable for users.
 *
 * Trust: the same names, as NAME=value lines, make up the system-wide
 * configuration file (LCP_CONF_PATH), read by every process the shim runs in.
 * The environment overrides the file, except in AT_SECURE processes (setuid,
 * setgid, file capabilities), which read the file alone.
 */
#ifndef LIBCEPTION_SHIM_H
#define LIBCEPTION_SHIM_H

#include <libception/protocol.h>

/* Which mode: one of the LCP_MODE_NAME_* strings below (default full). */
#define LCP_ENV_MODE "LIBCEPTION_MODE"
/* Daemon socket path (full, serialize); LCP_SOCKET_ENV in protocol.h. */
#define LCP_ENV_SOCKET LCP_SOCKET_ENV
/* Bound on one daemon round trip in milliseconds (full, serialize). */
#define LCP_ENV_TIMEOUT_MS "LIBCEPTION_TIMEOUT_MS"
/* Longest wait for one reply, in milliseconds, while the daemon keeps
 * answering other threads of the process (full, serialize). */
#define LCP_ENV_PATIENCE_MS "LIBCEPTION_PATIENCE_MS"
/* Bytes read ahead in-process (prefetch mode only): 2M, 512K, 4096. */
#define LCP_ENV_PREFETCH "LIBCEPTION_PREFETCH"
/* Largest range checked or fetched for one call (every mode but off). */
#define LCP_ENV_MAX_REQUEST "LIBCEPTION_MAX_REQUEST"
/* JSON statistics written at exit, %p = pid (every mode but off). */
#define LCP_ENV_STATS "LIBCEPTION_STATS"
/* Also rewrite that file while the process runs, at most this often in
 * milliseconds (0, the default: at exit only). */
#define LCP_ENV_STATS_INTERVAL_MS "LIBCEPTION_STATS_INTERVAL_MS"
/* How long a range the daemon confirmed stays trusted (full, serialize). */
#define LCP_ENV_WINDOW_MS "LIBCEPTION_WINDOW_MS"
/* Testing aid: force the "mincore" or "daemon" residency check. */
#define LCP_ENV_FORCE_CHECK "LIBCEPTION_FORCE_CHECK"
/* A uid besides root whose daemon may receive this process's fds (SO_PEERCRED). */
#define LCP_ENV_DAEMON_UID "LIBCEPTION_DAEMON_UID"

/* The system-wide configuration file: root-owned, not group- or
 * world-writable, NAME=value lines with the names above, '#' comments. */
#define LCP_CONF_PATH "/etc/libception/shim.conf"

/*
 * The modes. The numbering is part of this header's contract (the Rust mirror
 * checks it) but never crosses a process boundary: only the names do.
 */
enum lcp_mode {
	/* Interpose nothing: every call goes straight to libc. */
	LCP_MODE_OFF = 0,
	/* Misses go to the daemon, which serializes and prefetches. */
	LCP_MODE_FULL = 1,
	/* Misses go to the daemon, which serializes but reads only the range. */
	LCP_MODE_SERIALIZE = 2,
	/* No daemon: read ahead in-process on a miss. */
	LCP_MODE_PREFETCH = 3,
	/* No change to I/O: count calls, hits, misses and latencies. */
	LCP_MODE_TRACK = 4,
};

#define LCP_MODE_NAME_OFF "off"
#define LCP_MODE_NAME_FULL "full"
#define LCP_MODE_NAME_SERIALIZE "serialize"
#define LCP_MODE_NAME_PREFETCH "prefetch"
#define LCP_MODE_NAME_TRACK "track"

#endif /* LIBCEPTION_SHIM_H */
