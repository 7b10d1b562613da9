/*
 * harness.h - shared machinery of the shim's C tests.
 *
 * Each test is one program. Run without arguments it is the parent: it makes
 * its files, then re-executes itself as "--child SCENARIO" several times -
 * without the shim (the baseline), and with the shim in every mode and against
 * a fake daemon that behaves or misbehaves - and compares each child's stdout
 * with the baseline's. A scenario prints one line per libc call: the return
 * value, errno (set to a sentinel before each call, so a shim that clobbers
 * errno on success is caught) and a hash of the bytes read. The parent can
 * also inspect what the fake daemon received and the shim's JSON statistics.
 *
 * Exit status: 0 pass, 1 fail, 77 skip (reason on the last line).
 * The runner (tests/run) sets LCP_TEST_PRELOAD: the LD_PRELOAD value that
 * loads the shim build matching this test build (plain or ASan).
 */
#ifndef LCP_HARNESS_H
#define LCP_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fake_daemon.h"

#define ERRNO_SENTINEL 4242

/* ---- in the child (scenario) ---- */
void h_report(const char *what, long ret, int err, const void *buf, size_t len);
/* Convenience: runs the expression with errno = sentinel, then reports. */
#define H_CALL(what, expr, buf, len)                                              \
	do {                                                                      \
		long h_ret_;                                                      \
		errno = ERRNO_SENTINEL;                                           \
		h_ret_ = (long)(expr);                                            \
		h_report(what, h_ret_, errno, buf, h_ret_ > 0 ? (size_t)h_ret_ : 0); \
	} while (0)
/* Hide a value from the compiler's overflow and nonnull warnings: the tests
 * pass absurd arguments to libc on purpose. */
static inline size_t h_opaque(size_t x)
{
	__asm__("" : "+r"(x));
	return x;
}
static inline void *h_opaque_ptr(void *p)
{
	__asm__("" : "+r"(p));
	return p;
}
/* A directory holding the test's files; same path in parent and children. */
const char *h_dir(void);
/* h_dir()/name in a static rotating buffer. */
const char *h_path(const char *name);
void h_evict(const char *path);
/* Calls probe(what, fd) on each kind of descriptor that is not a regular
 * file, which the shim must leave to libc: a pipe holding "abc" (its write
 * reported), a directory, /dev/zero. what is "CALL pipe", "CALL directory",
 * "CALL /dev/zero". */
void h_on_special_fds(const char *call, void (*probe)(const char *what, int fd));

/* ---- in the parent ---- */
struct h_run {
	const char *label;
	const char *mode;             /* NULL: no shim at all (baseline) */
	int daemon;                   /* 1: start a fake daemon with .behaviour */
	enum fake_behaviour behaviour;
	int delay_ms;
	int timeout_ms;               /* LIBCEPTION_TIMEOUT_MS, 0 = default */
	const char *prefetch;         /* LIBCEPTION_PREFETCH */
	const char *setpriv_uid;      /* run the child under setpriv --reuid=... */
	const char *extra_env[4];     /* "K=V" */
};

struct h_result {
	int status;         /* exit status, or -1 if killed by a signal / timeout */
	int timed_out;
	char *output;       /* stdout */
	char stats_path[512];
	struct fake_record *records;
	int nrecords;
	int connections;
	double seconds;
};

void h_init(int argc, char **argv, void (*scenario)(const char *name));
void h_make_file(const char *path, size_t size, unsigned seed);
uint64_t h_resident_pages(const char *path);
void h_run(const struct h_run *run, const char *scenario, int timeout_s, struct h_result *result);
void h_result_free(struct h_result *result);
/* The standard matrix: baseline, then every mode and daemon misbehaviour.
 * Fails if any output differs from the baseline. expect_fetch: the full-mode
 * run must have sent at least one FETCH. */
void h_compare_all(const char *scenario, int expect_fetch);
/* Value of "key": N in the stats JSON, searching after the text 'after' (or
 * from the start). -1 if absent. */
long long h_stat(const struct h_result *result, const char *after, const char *key);

void h_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void h_expect(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void h_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Skips (77) unless children can run as another uid: root and setpriv. */
void h_require_setpriv(void);
int h_finish(void);
int h_failed(void);

#endif
