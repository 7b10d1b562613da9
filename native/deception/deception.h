/*
 * deception.h - internal interfaces of libdeception.so (the Deception shim).
 *
 * The shim is split by concern, listed from the top of the call graph down:
 *   intercept.c the exported libc entry points and the shared hit/miss logic
 *   init.c      lazy and constructor-time start-up, statistics at exit
 *   thread.c    thread-exit hook (a pthread key) and fork handlers: tells
 *               client.c, prefetch.c and stats.c when to let go of state
 *   client.c    the per-thread connection to the daemon, request/reply with
 *               bounded waits, back-off, the connection side of fork
 *   prefetch.c  in-process prefetch (LIBCEPTION_MODE=prefetch)
 *   resident.c  residency checks: cachestat(2), mmap+mincore, or the daemon
 *   fdtab.c     per-fd cache of "is this a regular file" and of which
 *               residency check works for it, and the residency window
 *   stats.c     counters and latency histograms, JSON at exit
 *   usermem.c   reading the caller's memory without trusting its pointers
 *   config.c    settings from the configuration file and the environment
 *               (names: <libception/shim.h>), which daemon uid is trusted
 *   libc.c      the real libc functions (dlsym), the interposed names
 *   fdpass.h    a datagram carrying one fd (client.c; the tests' fake daemon)
 *
 * Who uses whom, calls and shared data alike (a DAG: a file uses only files
 * below it in the list above, never one that uses it back):
 *   intercept -> init thread client prefetch resident fdtab stats usermem
 *                config libc
 *   init      -> thread client stats config libc
 *   thread    -> client prefetch stats libc
 *   client    -> fdtab stats config libc
 *   prefetch  -> stats config libc
 *   resident  -> fdtab config libc
 *   stats     -> config libc
 *   fdtab, usermem, config, libc -> nothing
 * Shared data lives low enough for all its users: lcp__cfg (config.c,
 * written once at start-up), lcp__guard (libc.c), lcp__initialised (init.c,
 * read only by intercept.c).
 *
 * Naming: exported symbols are exactly the libc names we interpose (see
 * libdeception.map); everything else is hidden and carries the lcp__ prefix
 * (static helpers carry none; lcp_ is the prefix of the public headers in
 * include/libception/). Internal functions return 0 / a value, or -errno;
 * only the interposed boundary sets errno and returns -1, and it restores the
 * caller's errno around everything the shim does itself.
 */
#ifndef LCP_DECEPTION_H
#define LCP_DECEPTION_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include <libception/protocol.h>
#include <libception/shim.h>

#define LCP__LIKELY(x) __builtin_expect(!!(x), 1)
#define LCP__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LCP__TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- configuration (config.c) ----------------------------------------- */

struct lcp__config {
	enum lcp_mode mode;
	char socket_path[108];     /* sun_path size */
	int timeout_ms;            /* bound on one daemon round trip */
	int patience_ms;           /* ... stretched while the daemon answers others */
	uint64_t prefetch;         /* prefetch mode: bytes read ahead */
	uint64_t max_request;      /* largest range checked/fetched per call */
	int stats_enabled;         /* counters + histograms maintained */
	char stats_path[4096];     /* may contain %p */
	/* Rewrite the statistics file while running, at most this often
	 * (LIBCEPTION_STATS_INTERVAL_MS; 0 = at exit only). */
	uint64_t stats_interval_ns;
	unsigned page_shift;
	/* Testing aid (LIBCEPTION_FORCE_CHECK): LCP_METHOD_MINCORE behaves as
	 * if cachestat did not exist, LCP_METHOD_DAEMON as if no local check
	 * could be trusted; LCP_METHOD_UNLEARNED (0) is normal operation. */
	int force_check;
	/* How long a range confirmed resident stays trusted without asking
	 * again (LIBCEPTION_WINDOW_MS; 0 = never). */
	uint64_t window_ns;
	/* AT_SECURE process: settings come from the configuration file only,
	 * no statistics file, a daemon of our own uid is not trusted. */
	int secure;
	/* The daemon may run as this uid besides root (LIBCEPTION_DAEMON_UID). */
	int have_daemon_uid;
	uid_t daemon_uid;
	/* stats_path lies in the per-uid directory of track mode's default,
	 * which stats.c creates private and checks before writing into it. */
	int stats_private_dir;
};

extern struct lcp__config lcp__cfg;

/* Fills lcp__cfg from the configuration file and (unless AT_SECURE) the
 * environment; warns about invalid values. */
void lcp__config_read(void);
/* May a daemon running as uid receive this process's descriptors? */
int lcp__daemon_uid_trusted(uid_t uid);
const char *lcp__mode_name(enum lcp_mode mode);
/* Parses "2M", "512K", "1G", "4096", "2MiB". 0 or -EINVAL. */
int lcp__parse_size(const char *text, uint64_t *out);

/* ---- start-up (init.c) ------------------------------------------------ */

/* 0 until lcp__init() has completed; read with acquire. */
extern int lcp__initialised;
void lcp__init(void);

/* ---- the real libc functions (libc.c) --------------------------------- */

/* Re-entrancy guard: non-zero while the shim itself is working on this
 * thread; interposed calls made meanwhile go straight to libc. */
extern LCP__TLS int lcp__guard;

/* The interposed functions, in the order of libdeception.map. */
enum lcp__fn {
	LCP_FN_OPEN, LCP_FN_OPEN64, LCP_FN_OPENAT, LCP_FN_OPENAT64,
	LCP_FN_OPEN_2, LCP_FN_OPEN64_2, LCP_FN_OPENAT_2, LCP_FN_OPENAT64_2,
	LCP_FN_CLOSE,
	LCP_FN_READ, LCP_FN_READ_CHK, LCP_FN_PREAD, LCP_FN_PREAD64, LCP_FN_PREAD_CHK, LCP_FN_PREAD64_CHK,
	LCP_FN_READV, LCP_FN_PREADV, LCP_FN_PREADV64, LCP_FN_PREADV2, LCP_FN_PREADV64V2,
	LCP_FN_SENDFILE, LCP_FN_SENDFILE64,
	LCP_FN_MMAP, LCP_FN_MMAP64,
	LCP_FN_FORK,
	LCP_FN_COUNT
};

/* The libc name of fn ("pread64"), for dlsym and the statistics. */
const char *lcp__fn_name(enum lcp__fn fn);

/* libc's function for fn, found with dlsym(RTLD_NEXT) and cached; NULL if
 * libc lacks it. lcp__real is the hit path's inline look at the cache. */
extern void *lcp__real_fns[LCP_FN_COUNT];
void *lcp__resolve(enum lcp__fn fn);
void lcp__resolve_all(void);
static inline void *lcp__real(enum lcp__fn fn)
{
	void *real = __atomic_load_n(&lcp__real_fns[fn], __ATOMIC_ACQUIRE);

	return LCP__LIKELY(real != NULL) ? real : lcp__resolve(fn);
}

/* Real functions the shim itself uses (a raw syscall if libc lacks one). */
ssize_t lcp__real_pread(int fd, void *buf, size_t count, off_t offset);
void *lcp__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int lcp__real_open(const char *path, int flags, mode_t mode);
int lcp__sys_close(int fd);

/* ---- the caller's memory (usermem.c) ---------------------------------- */

/* Reads n bytes of the caller's memory at src without trusting the pointer:
 * 0, or -EFAULT (or another -errno) where the kernel would refuse it. */
int lcp__read_user(void *dst, const void *src, size_t n);

/* ---- fd table (fdtab.c) ----------------------------------------------- */

enum lcp__fd_kind {
	LCP_FD_UNKNOWN = 0, /* not looked at since open/close: fstat needed */
	LCP_FD_REGULAR = 1,
	LCP_FD_OTHER = 2,   /* socket, pipe, device, directory...: libc only */
	LCP_FD_SHIM = 3,    /* one of the shim's own daemon connections */
};

enum lcp__method {
	LCP_METHOD_UNLEARNED = 0,
	LCP_METHOD_CACHESTAT = 1,
	LCP_METHOD_MINCORE = 2,
	LCP_METHOD_DAEMON = 3, /* local checks cannot be trusted for this file */
};

/* Descriptors below this are cached; the tests build a shim with a small
 * table (-DLCP_FDTAB_SIZE=1024) to cover fds beyond it without root. */
#ifndef LCP_FDTAB_SIZE
#define LCP_FDTAB_SIZE 65536
#endif

uint32_t lcp__fdtab_get(int fd);
void lcp__fdtab_set(int fd, enum lcp__fd_kind kind, enum lcp__method method);
void lcp__fdtab_forget(int fd);
/* The file a window is about, as it was: st_dev, st_ino, and st_size and
 * st_ctime, which a write, a truncation or a rewrite changes. */
struct lcp__file_id {
	uint64_t dev, ino, size, change_ns;
};

/* A range of the file behind fd recently confirmed resident (by the daemon,
 * or by an in-process prefetch), valid until expires_ns (lcp__now_ns clock)
 * and only while fstat still shows the same id: lets calls inside it on files
 * the process cannot check itself skip the daemon round trip (or a second
 * prefetch). A hint: a wrong one only lets a read go to libc unprepared. */
int lcp__fdtab_in_window(int fd, const struct lcp__file_id *id, uint64_t off, uint64_t len, uint64_t now_ns);
void lcp__fdtab_set_window(int fd, const struct lcp__file_id *id, uint64_t start, uint64_t end, uint64_t expires_ns);

static inline enum lcp__fd_kind lcp__fd_kind(uint32_t state) { return (enum lcp__fd_kind)(state & 3u); }
static inline enum lcp__method lcp__fd_method(uint32_t state) { return (enum lcp__method)((state >> 2) & 3u); }

/* ---- residency (resident.c) ------------------------------------------- */

enum lcp__residency {
	LCP_RES_HIT = 0,
	LCP_RES_MISS = 1,
	LCP_RES_UNKNOWN = 2, /* no trustworthy local check, daemon not asked */
};

/*
 * Facts about the file behind an fd, filled lazily (fstat) by the checks so
 * that one call never fstats twice.
 */
struct lcp__file {
	int fd;
	int have_stat;
	uint64_t size;
	uid_t uid;
	uint64_t ino, dev;
	uint64_t change_ns; /* st_ctime */
};

int lcp__file_stat(struct lcp__file *file);

/*
 * Local residency check of [off, off+len) (len > 0, already bounded). Picks and
 * caches the method for the fd. Returns enum lcp__residency; LCP_RES_UNKNOWN
 * means the caller must ask the daemon (*method_out = LCP_METHOD_DAEMON).
 * -errno when the fd turned out not to be a regular file or vanished.
 */
int lcp__check_local(struct lcp__file *file, uint64_t off, uint64_t len, enum lcp__method *method_out);

/* ---- daemon client (client.c) ----------------------------------------- */

/*
 * One request/reply with the daemon on this thread's connection, bounded by
 * lcp__cfg.timeout_ms. 0 with *reply filled (reply->status may be negative),
 * or -ENOTCONN (no daemon / backing off), -ETIMEDOUT, -EPROTO, -EPIPE...
 */
int lcp__daemon_request(uint16_t op, int fd, uint64_t off, uint64_t len, uint32_t flags,
			uint32_t call, struct lcp_reply *reply);
/* Records this process's id (start-up). */
void lcp__client_init(void);
/* This thread is exiting: close its connection, never open another. */
void lcp__client_thread_exit(void);
/* Around fork(): hold the connection registry; in the child, close every
 * inherited connection and forget the back-off. */
void lcp__client_fork_prepare(void);
void lcp__client_fork_parent(void);
void lcp__client_fork_child(void);

/* ---- thread exit and fork (thread.c) ---------------------------------- */

/* Creates the thread-exit key and installs the atfork handlers (start-up). */
void lcp__thread_init(void);
/* Make sure this thread's exit frees the shim's per-thread state. */
void lcp__thread_arm(void);

/* ---- prefetch mode (prefetch.c) --------------------------------------- */

/* Reads [off, off+max(len, prefetch)) clamped to the file's size into a
 * scratch buffer; returns the bytes read (the window now resident). */
int64_t lcp__prefetch_range(const struct lcp__file *file, uint64_t off, uint64_t len);
/* Bytes of [off, end) cached from off without a gap (0 if unknown). */
uint64_t lcp__cached_prefix(int fd, uint64_t off, uint64_t end);
void lcp__prefetch_thread_exit(void);

/* ---- statistics (stats.c) --------------------------------------------- */

enum lcp__counter {
	LCP_CTR_CONNECTS,          /* connections established */
	LCP_CTR_CONNECT_FAILURES,  /* connect attempts that failed */
	LCP_CTR_BACKOFF_SKIPS,     /* requests not sent: backing off */
	LCP_CTR_LATE_SKIPS,        /* requests not sent: a late reply still owed */
	LCP_CTR_REQUESTS,          /* requests sent */
	LCP_CTR_FETCHES,           /* FETCH requests answered */
	LCP_CTR_CHECKS,            /* CHECK requests answered */
	LCP_CTR_DAEMON_ERRORS,     /* replies with negative status */
	LCP_CTR_TIMEOUTS,          /* no reply within the bound */
	LCP_CTR_PATIENT_WAITS,     /* waits stretched: the daemon was answering others */
	LCP_CTR_PROTOCOL_ERRORS,   /* garbage, wrong seq, truncated, stray fds */
	LCP_CTR_BROKEN,            /* send/recv failures, daemon closed */
	LCP_CTR_UNTRUSTED,         /* connections refused: the daemon's uid is not trusted */
	LCP_CTR_CHECK_CACHESTAT,   /* residency answered by cachestat */
	LCP_CTR_CHECK_MINCORE,     /* ... by mmap+mincore */
	LCP_CTR_CHECK_DAEMON,      /* ... by the daemon */
	LCP_CTR_CHECK_WINDOW,      /* ... by a window the daemon recently confirmed */
	LCP_CTR_CHECK_UNKNOWN,     /* nobody could answer */
	LCP_CTR_PREFETCH_CALLS,    /* in-process prefetches */
	LCP_CTR_PREFETCH_BYTES,
	LCP_CTR_COUNT
};

struct lcp__timer {
	uint64_t start_ns;
};

void lcp__stats_call(enum lcp__fn fn, const struct lcp__timer *timer, int64_t ret,
		     int residency /* enum lcp__residency or -1 */);
void lcp__stats_count(enum lcp__counter counter, uint64_t n);
uint64_t lcp__now_ns(void);
void lcp__stats_after_fork_child(void);
/* At start-up: the process whose counters these are, and the clock of the
 * running rewrites. */
void lcp__stats_init(void);
void lcp__stats_write(void);

#endif /* LCP_DECEPTION_H */
