/*
 * stats.c - what the shim saw: counters per interposed function, latency
 * histograms, daemon conversation counters; written as JSON at exit.
 *
 * Maintained only when statistics are on (LIBCEPTION_STATS set, or track
 * mode), so the hit path of the other modes pays nothing. All counters are
 * relaxed atomics in static storage: no allocation, no locks, safe in any
 * thread. Latency is measured around the whole interposed call (shim work +
 * real call: what the application waited) with CLOCK_MONOTONIC (vDSO, no
 * syscall) and binned by powers of two: bucket b counts calls that took
 * [2^b, 2^(b+1)) ns (bucket 0 also holds 0 ns).
 *
 * The file is written by the library destructor (normal exit) to the
 * LIBCEPTION_STATS path with %p replaced by the pid and, when
 * LIBCEPTION_STATS_INTERVAL_MS is set, also while the process runs: the
 * first interposed call after each interval rewrites it (after the call's
 * own statistics, so its time is not in them), and a reader can take the
 * counters over a window as the difference of two files read at its edges
 * ("written_ns" is CLOCK_MONOTONIC, "at_exit" tells the last file). Only one
 * thread writes at a time (a flag; a call that finds it taken goes on), from
 * static buffers, and never on an alternate signal stack (a handler's stack
 * may be too small for the formatting); the writer uses raw syscalls
 * and vsnprintf of integers and strings, which neither allocate nor take
 * locks, and no cancellation point, so a cancelled thread cannot leave the
 * flag taken. (A handler that longjmps out of a call that was writing can:
 * the file then stops being rewritten, and the exit writes it anyway.) A
 * vfork child, sharing its parent's counters, never writes them. Via a
 * temporary file
 * (unpredictable name, O_EXCL|O_NOFOLLOW, in the target's directory) and
 * rename so readers never see half a file and nobody can aim the write. Never
 * in mode off, never in AT_SECURE processes (config.c, and checked again
 * here); track mode's default lies in a per-uid directory that must be the
 * user's own. A fork child starts from zero and
 * writes its own file; if the path has no %p the child appends ".<pid>" so it
 * cannot overwrite its parent's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "deception.h"

#define HIST_BUCKETS 64

struct fn_stats {
	uint64_t calls, bytes, hits, misses, unknown, errors;
	uint64_t latency[HIST_BUCKETS];
};

static struct fn_stats fn_stats[LCP_FN_COUNT];
static uint64_t counters[LCP_CTR_COUNT];
static int is_fork_child;
/* The running rewrites: when the last began, the process whose counters
 * these are (set at start-up and in a fork child; a vfork child shares
 * them and must not write them), and whether a rewrite is under way. */
static uint64_t last_write_ns;
static pid_t owner_pid;
static int writing;

static const char *const counter_names[LCP_CTR_COUNT] = {
	[LCP_CTR_CONNECTS] = "connects", [LCP_CTR_CONNECT_FAILURES] = "connect_failures",
	[LCP_CTR_BACKOFF_SKIPS] = "backoff_skips", [LCP_CTR_LATE_SKIPS] = "late_skips",
	[LCP_CTR_PATIENT_WAITS] = "patient_waits", [LCP_CTR_REQUESTS] = "requests",
	[LCP_CTR_FETCHES] = "fetches", [LCP_CTR_CHECKS] = "checks",
	[LCP_CTR_DAEMON_ERRORS] = "daemon_errors", [LCP_CTR_TIMEOUTS] = "timeouts",
	[LCP_CTR_PROTOCOL_ERRORS] = "protocol_errors", [LCP_CTR_BROKEN] = "broken",
	[LCP_CTR_UNTRUSTED] = "untrusted",
	[LCP_CTR_CHECK_CACHESTAT] = "cachestat", [LCP_CTR_CHECK_MINCORE] = "mincore",
	[LCP_CTR_CHECK_DAEMON] = "daemon", [LCP_CTR_CHECK_WINDOW] = "window", [LCP_CTR_CHECK_UNKNOWN] = "unknown",
	[LCP_CTR_PREFETCH_CALLS] = "calls", [LCP_CTR_PREFETCH_BYTES] = "bytes",
};

uint64_t lcp__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
}

void lcp__stats_count(enum lcp__counter counter, uint64_t n)
{
	if (lcp__cfg.stats_enabled)
		add(&counters[counter], n);
}

struct file_buffers;
static struct file_buffers running_buffers, exit_buffers;
static void write_file(struct file_buffers *b, int at_exit);

void lcp__stats_init(void)
{
	__atomic_store_n(&owner_pid, getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&last_write_ns, lcp__now_ns(), __ATOMIC_RELAXED);
}

/* Is this thread running on its alternate signal stack? */
static int on_alternate_stack(void)
{
	stack_t ss;

	return sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK) != 0;
}

/* The running rewrite, if an interval has passed since the last. Not on an
 * alternate signal stack, which may be too small for the formatting (a
 * few KB): a call outside the handler writes it instead. */
static void maybe_rewrite(uint64_t now)
{
	uint64_t last = __atomic_load_n(&last_write_ns, __ATOMIC_RELAXED);
	int idle = 0;

	/* Signed: another thread may have moved last past our now. */
	if ((int64_t)(now - last) < (int64_t)lcp__cfg.stats_interval_ns ||
	    getpid() != __atomic_load_n(&owner_pid, __ATOMIC_RELAXED) || on_alternate_stack() ||
	    !__atomic_compare_exchange_n(&last_write_ns, &last, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
	    !__atomic_compare_exchange_n(&writing, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	lcp__guard++;
	write_file(&running_buffers, 0);
	lcp__guard--;
	__atomic_store_n(&writing, 0, __ATOMIC_RELEASE);
}

void lcp__stats_call(enum lcp__fn fn, const struct lcp__timer *timer, int64_t ret, int residency)
{
	struct fn_stats *s = &fn_stats[fn];
	uint64_t now = lcp__now_ns();
	uint64_t elapsed = now - timer->start_ns;
	unsigned bucket = elapsed == 0 ? 0 : 63u - (unsigned)__builtin_clzll(elapsed);

	add(&s->calls, 1);
	if (ret < 0)
		add(&s->errors, 1);
	else
		add(&s->bytes, (uint64_t)ret);
	if (residency == LCP_RES_HIT)
		add(&s->hits, 1);
	else if (residency == LCP_RES_MISS)
		add(&s->misses, 1);
	else if (residency == LCP_RES_UNKNOWN)
		add(&s->unknown, 1);
	add(&s->latency[bucket], 1);
	if (lcp__cfg.stats_interval_ns != 0)
		maybe_rewrite(now);
}

void lcp__stats_after_fork_child(void)
{
	memset(fn_stats, 0, sizeof(fn_stats));
	memset(counters, 0, sizeof(counters));
	is_fork_child = 1;
	/* The parent's writer, if it was busy, is not in this process (the
	 * child keeps that writer's two descriptors: a fork inside the few
	 * microseconds of a rewrite). */
	__atomic_store_n(&writing, 0, __ATOMIC_RELAXED);
	lcp__stats_init();
}

/* A small buffered writer over a raw fd; remembers the first error. */
struct writer {
	int fd;
	int err;
	size_t used;
	char buf[4096];
};

static void flush(struct writer *w)
{
	size_t done = 0;

	while (w->err == 0 && done < w->used) {
		/* The raw call: libc's write is a cancellation point. */
		ssize_t n = syscall(SYS_write, w->fd, w->buf + done, w->used - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->err = n < 0 ? errno : EIO;
			break;
		}
		done += (size_t)n;
	}
	w->used = 0;
}

__attribute__((format(printf, 2, 3))) static void emit(struct writer *w, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	if (w->used + (size_t)n > sizeof(w->buf))
		flush(w);
	memcpy(w->buf + w->used, line, (size_t)n);
	w->used += (size_t)n;
}

static uint64_t load(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static void emit_json(struct writer *w, int at_exit)
{
	emit(w, "{\n  \"pid\": %d,\n  \"ppid\": %d,\n  \"mode\": \"%s\",\n", (int)getpid(), (int)getppid(),
	     lcp__mode_name(lcp__cfg.mode));
	emit(w, "  \"written_ns\": %llu,\n  \"at_exit\": %s,\n  \"interval_ms\": %llu,\n",
	     (unsigned long long)lcp__now_ns(), at_exit ? "true" : "false",
	     (unsigned long long)(lcp__cfg.stats_interval_ns / 1000000u));
	emit(w, "  \"socket\": \"");
	for (const char *p = lcp__cfg.socket_path; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			emit(w, "\\%c", *p);
		else if ((unsigned char)*p < 0x20)
			emit(w, "\\u%04x", (unsigned)(unsigned char)*p);
		else
			emit(w, "%c", *p);
	}
	emit(w, "\",\n  \"timeout_ms\": %d,\n  \"patience_ms\": %d,\n  \"prefetch_bytes\": %llu,\n  \"max_request_bytes\": %llu,\n",
	     lcp__cfg.timeout_ms, lcp__cfg.patience_ms, (unsigned long long)lcp__cfg.prefetch,
	     (unsigned long long)lcp__cfg.max_request);
	emit(w, "  \"window_ms\": %llu,\n", (unsigned long long)(lcp__cfg.window_ns / 1000000u));
	emit(w, "  \"force_check\": \"%s\",\n",
	     lcp__cfg.force_check == LCP_METHOD_MINCORE ? "mincore" :
	     lcp__cfg.force_check == LCP_METHOD_DAEMON ? "daemon" : "none");
	emit(w, "  \"functions\": {\n");
	for (int fn = 0; fn < LCP_FN_COUNT; fn++) {
		struct fn_stats *s = &fn_stats[fn];
		int first = 1;

		emit(w, "    \"%s\": {\"calls\": %llu, \"bytes\": %llu, \"hits\": %llu, \"misses\": %llu, "
			"\"unknown\": %llu, \"errors\": %llu, \"latency_ns\": {",
		     lcp__fn_name((enum lcp__fn)fn), (unsigned long long)load(&s->calls), (unsigned long long)load(&s->bytes),
		     (unsigned long long)load(&s->hits), (unsigned long long)load(&s->misses),
		     (unsigned long long)load(&s->unknown), (unsigned long long)load(&s->errors));
		for (int b = 0; b < HIST_BUCKETS; b++) {
			uint64_t n = load(&s->latency[b]);

			if (n == 0)
				continue;
			emit(w, "%s\"%llu\": %llu", first ? "" : ", ", 1ull << b, (unsigned long long)n);
			first = 0;
		}
		emit(w, "}}%s\n", fn + 1 < LCP_FN_COUNT ? "," : "");
	}
	emit(w, "  },\n  \"daemon\": {");
	for (int c = LCP_CTR_CONNECTS; c <= LCP_CTR_UNTRUSTED; c++)
		emit(w, "%s\"%s\": %llu", c == LCP_CTR_CONNECTS ? "" : ", ", counter_names[c],
		     (unsigned long long)load(&counters[c]));
	emit(w, "},\n  \"residency_checks\": {");
	for (int c = LCP_CTR_CHECK_CACHESTAT; c <= LCP_CTR_CHECK_UNKNOWN; c++)
		emit(w, "%s\"%s\": %llu", c == LCP_CTR_CHECK_CACHESTAT ? "" : ", ", counter_names[c],
		     (unsigned long long)load(&counters[c]));
	emit(w, "},\n  \"prefetch\": {\"calls\": %llu, \"bytes\": %llu}\n}\n",
	     (unsigned long long)load(&counters[LCP_CTR_PREFETCH_CALLS]),
	     (unsigned long long)load(&counters[LCP_CTR_PREFETCH_BYTES]));
}

/* Expand %p (pid) and %% in the configured path. 0 or -ENAMETOOLONG. */
static int expand_path(char *out, size_t size)
{
	const char *in = lcp__cfg.stats_path;
	size_t used = 0;
	int had_pid = 0;

	for (; *in != '\0'; in++) {
		char piece[32];
		const char *add_text = piece;

		if (in[0] == '%' && in[1] == 'p') {
			snprintf(piece, sizeof(piece), "%d", (int)getpid());
			had_pid = 1;
			in++;
		} else if (in[0] == '%' && in[1] == '%') {
			piece[0] = '%', piece[1] = '\0';
			in++;
		} else {
			piece[0] = *in, piece[1] = '\0';
		}
		if (used + strlen(add_text) + 1 > size)
			return -ENAMETOOLONG;
		strcpy(out + used, add_text);
		used += strlen(add_text);
	}
	if (is_fork_child && !had_pid) {
		int n = snprintf(out + used, size - used, ".%d", (int)getpid());

		if (n < 0 || (size_t)n >= size - used)
			return -ENAMETOOLONG;
	}
	return 0;
}

/* An unpredictable temporary name: ".NAME.XXXXXXXXXXXXXXXX". */
static void temp_name(char *out, size_t size, const char *base)
{
	uint64_t r = 0;

	if (syscall(SYS_getrandom, &r, sizeof(r), GRND_NONBLOCK) != (long)sizeof(r))
		r = lcp__now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
	snprintf(out, size, ".%.200s.%016llx", base, (unsigned long long)r);
}

/*
 * The directory of path, opened (O_PATH would do, but renameat wants a real
 * directory fd either way). For track mode's default it is the user's own:
 * created 0700 if missing, and refused unless it is a directory that we own
 * and nobody else may enter - someone who made it first could otherwise
 * read or replace our files.
 */
static int open_parent(char *path, const char **base)
{
	char *slash = strrchr(path, '/');
	struct stat st;
	int dirfd;

	if (slash == NULL) {
		*base = path;
		return (int)syscall(SYS_openat, AT_FDCWD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	*slash = '\0';
	*base = slash + 1;
	if (lcp__cfg.stats_private_dir)
		(void)mkdir(path, 0700);
	dirfd = (int)syscall(SYS_openat, AT_FDCWD, slash == path ? "/" : path,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	*slash = '/';
	if (dirfd < 0)
		return -errno;
	if (lcp__cfg.stats_private_dir &&
	    (fstat(dirfd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0)) {
		static const char msg[] = "libdeception: no statistics file: its directory is not the user's own "
					  "(owned by us, mode 0700); set LIBCEPTION_STATS\n";

		(void)!write(2, msg, sizeof(msg) - 1);
		lcp__sys_close(dirfd);
		return -EPERM;
	}
	return dirfd;
}

/*
 * Write the JSON beside the target under a temporary name that nobody can
 * predict, created exclusively and without following links, then rename it
 * over the target: nobody can aim the write elsewhere by planting a link,
 * and readers never see half a file.
 */
/* What one writer uses: static, not on the stack (a signal handler's
 * alternate stack may be a few KB). */
struct file_buffers {
	char path[4200], tmp[300];
	struct writer w;
};

static void write_file(struct file_buffers *b, int at_exit)
{
	char *path = b->path, *tmp = b->tmp;
	struct writer *wp = &b->w;
	const char *base;
	int dirfd;

	if (lcp__cfg.secure || expand_path(path, sizeof(b->path)) < 0)
		return;
	dirfd = open_parent(path, &base);
	if (dirfd < 0)
		return;
	wp->fd = -1;
	for (int attempt = 0; attempt < 4 && wp->fd < 0; attempt++) {
		temp_name(tmp, sizeof(b->tmp), base);
		wp->fd = (int)syscall(SYS_openat, dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				    0644);
		if (wp->fd < 0 && errno != EEXIST)
			break;
	}
	wp->err = 0;
	wp->used = 0;
	if (wp->fd >= 0) {
		emit_json(wp, at_exit);
		flush(wp);
		lcp__sys_close(wp->fd);
		if (wp->err != 0 || renameat(dirfd, tmp, dirfd, base) != 0)
			unlinkat(dirfd, tmp, 0);
	}
	lcp__sys_close(dirfd);
}

/*
 * The file at exit. A running rewrite still under way in another thread is
 * waited for (briefly: it only formats and writes a few KB), so that the
 * last file to land is this one; past the wait (a writer that will never
 * finish: a handler longjmp'd out of it) this one is written anyway, from
 * buffers of its own. A vfork child that calls exit() shares its parent's
 * counters and writes nothing.
 */
void lcp__stats_write(void)
{
	struct timespec pause = { 0, 1000000 };
	int idle = 0;

	if (getpid() != __atomic_load_n(&owner_pid, __ATOMIC_RELAXED))
		return;
	for (int waited = 0; waited < 200; waited++) {
		if (__atomic_compare_exchange_n(&writing, &idle, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			break;
		idle = 0;
		nanosleep(&pause, NULL);
	}
	write_file(&exit_buffers, 1);
}
