/*
 * usermem.c - reading the caller's memory without trusting its pointers.
 *
 * Some arguments point at memory the kernel would validate (iovec arrays,
 * sendfile's offset pointer): a bad pointer must give the application EFAULT
 * from libc, not a crash in the shim. Memory in the live part of the calling
 * thread's stack is known to be mapped and is read directly; anything else is
 * read with process_vm_readv. Everything here is async-signal-safe: the first
 * call of a thread may come from a signal handler. Calls nothing else of the
 * shim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "deception.h"

/* Bounds of this thread's stack: 1 known, -1 unknown, 0 not looked yet. */
static LCP__TLS int stack_state;
static LCP__TLS uintptr_t stack_low, stack_high;

static uintptr_t parse_hex(const char **p)
{
	uintptr_t v = 0;

	for (;; (*p)++) {
		char ch = **p;

		if (ch >= '0' && ch <= '9')
			v = v << 4 | (uintptr_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			v = v << 4 | (uintptr_t)(ch - 'a' + 10);
		else
			return v;
	}
}

/*
 * The readable mapping of /proc/self/maps that holds addr, with raw system
 * calls and a buffer on the stack only: this runs inside whatever interposed
 * call a thread makes first, possibly in a signal handler, where
 * pthread_getattr_np (malloc, stdio) is not allowed. 0, or -errno.
 */
static int mapping_of(uintptr_t addr, uintptr_t *low, uintptr_t *high)
{
	char buf[4096];
	size_t used = 0;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
	int err = -ENOENT;

	if (fd < 0)
		return -errno;
	for (;;) {
		long got = syscall(SYS_read, fd, buf + used, sizeof(buf) - 1 - used);
		char *line = buf, *nl;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		used += (size_t)got;
		buf[used] = '\0';
		/* Lines look like "7ffd1000-7ffd3000 rw-p ...\n". */
		while ((nl = strchr(line, '\n')) != NULL) {
			const char *p = line;
			uintptr_t from = parse_hex(&p), to;

			if (*p++ == '-') {
				to = parse_hex(&p);
				if (addr >= from && addr < to && p[0] == ' ' && p[1] == 'r') {
					*low = from;
					*high = to;
					err = 0;
					goto out;
				}
			}
			line = nl + 1;
		}
		/* Keep the unfinished line; a line never fills the buffer. */
		used -= (size_t)(line - buf);
		memmove(buf, line, used);
		if (used == sizeof(buf) - 1)
			break;
	}
out:
	syscall(SYS_close, fd);
	return err;
}

/*
 * Is [p, p+n) in the live part of this thread's stack (between our own frame
 * and the stack's top)? Such memory is mapped, so it can be read directly.
 * Servers pass sendfile offsets and iovec arrays that live in their own stack
 * frames, so this spares the hit path a process_vm_readv (several
 * microseconds). The stack's top is the end of the mapping our frame lies in,
 * learned once per thread (async-signal-safe, see mapping_of), never while on
 * an alternate signal stack: off the thread's stack, the answer is no.
 */
static int on_live_stack(const void *p, size_t n)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0), a = (uintptr_t)p;

	if (LCP__UNLIKELY(stack_state == 0)) {
		stack_t ss;

		if (syscall(SYS_sigaltstack, NULL, &ss) != 0 || (ss.ss_flags & SS_ONSTACK))
			return 0; /* look again on the thread's own stack */
		stack_state = mapping_of(here, &stack_low, &stack_high) == 0 ? 1 : -1;
	}
	return stack_state == 1 && here >= stack_low && here < stack_high && a >= here && a + n >= a &&
	       a + n <= stack_high;
}

int lcp__read_user(void *dst, const void *src, size_t n)
{
	if (on_live_stack(src, n)) {
		memcpy(dst, src, n);
		return 0;
	}
	struct iovec local = { .iov_base = dst, .iov_len = n };
	struct iovec remote = { .iov_base = (void *)src, .iov_len = n };
	ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);

	if (got < 0)
		return -errno;
	return (size_t)got == n ? 0 : -EFAULT;
}
