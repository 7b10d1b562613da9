/*
 * libc.c - the real libc functions behind the shim: the name of every
 * interposed function, its libc counterpart found with dlsym(RTLD_NEXT), and
 * the few calls the shim makes for itself without going through its own
 * wrappers.
 *
 * The bottom of the shim's call graph: it calls nothing else of the shim.
 * It also holds the re-entrancy guard, which sends every call the shim makes
 * while working (on its own thread) straight to these real functions.
 * One table, indexed by enum lcp__fn, names each interposed function for both
 * dlsym and the statistics. Every slot is resolved by lcp__init() (under the
 * guard, before any wrapper needs it) and, for calls that arrive earlier, on
 * first use; a slot is written once with release and read with acquire.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "deception.h"

LCP__TLS int lcp__guard;
void *lcp__real_fns[LCP_FN_COUNT];

static const char *const fn_names[LCP_FN_COUNT] = {
	[LCP_FN_OPEN] = "open", [LCP_FN_OPEN64] = "open64", [LCP_FN_OPENAT] = "openat",
	[LCP_FN_OPENAT64] = "openat64", [LCP_FN_OPEN_2] = "__open_2", [LCP_FN_OPEN64_2] = "__open64_2",
	[LCP_FN_OPENAT_2] = "__openat_2", [LCP_FN_OPENAT64_2] = "__openat64_2", [LCP_FN_CLOSE] = "close",
	[LCP_FN_READ] = "read", [LCP_FN_READ_CHK] = "__read_chk", [LCP_FN_PREAD] = "pread",
	[LCP_FN_PREAD64] = "pread64", [LCP_FN_PREAD_CHK] = "__pread_chk",
	[LCP_FN_PREAD64_CHK] = "__pread64_chk", [LCP_FN_READV] = "readv", [LCP_FN_PREADV] = "preadv",
	[LCP_FN_PREADV64] = "preadv64", [LCP_FN_PREADV2] = "preadv2", [LCP_FN_PREADV64V2] = "preadv64v2",
	[LCP_FN_SENDFILE] = "sendfile", [LCP_FN_SENDFILE64] = "sendfile64", [LCP_FN_MMAP] = "mmap",
	[LCP_FN_MMAP64] = "mmap64", [LCP_FN_FORK] = "fork",
};

const char *lcp__fn_name(enum lcp__fn fn)
{
	return (unsigned)fn < LCP_FN_COUNT ? fn_names[fn] : "?";
}

void *lcp__resolve(enum lcp__fn fn)
{
	void *real = __atomic_load_n(&lcp__real_fns[fn], __ATOMIC_ACQUIRE);

	if (LCP__LIKELY(real != NULL))
		return real;
	real = dlsym(RTLD_NEXT, fn_names[fn]);
	if (real != NULL)
		__atomic_store_n(&lcp__real_fns[fn], real, __ATOMIC_RELEASE);
	return real;
}

void lcp__resolve_all(void)
{
	for (int fn = 0; fn < LCP_FN_COUNT; fn++)
		(void)lcp__resolve((enum lcp__fn)fn);
}

ssize_t lcp__real_pread(int fd, void *buf, size_t count, off_t offset)
{
	ssize_t (*fn)(int, void *, size_t, off_t) = lcp__real(LCP_FN_PREAD);

	if (fn == NULL)
		return syscall(SYS_pread64, fd, buf, count, offset);
	return fn(fd, buf, count, offset);
}

void *lcp__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *(*fn)(void *, size_t, int, int, int, off_t) = lcp__real(LCP_FN_MMAP);

	if (fn == NULL)
		return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	return fn(addr, len, prot, flags, fd, off);
}

int lcp__real_open(const char *path, int flags, mode_t mode)
{
	int (*fn)(const char *, int, ...) = lcp__real(LCP_FN_OPEN);

	if (fn == NULL)
		return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
	return fn(path, flags, mode);
}

/* close(2) without being a cancellation point and without our wrapper. */
int lcp__sys_close(int fd)
{
	return syscall(SYS_close, fd) == 0 ? 0 : -errno;
}
