/*
 * usermem.c - reading the caller's memory without trusting its pointers.
 *
 * Some arguments point at memory the kernel would validate (iovec arrays,
 * sendfile's offset pointer): a bad pointer must give the application EFAULT
 * from libc, not a crash in the shim. Memory in the live part of the calling
 * thread's stack is known to be mapped and is read directly; anything else is
 * read with process_vm_readv. Calls nothing else of the shim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "deception.h"

/* Bounds of this thread's stack: 1 known, -1 unknown, 0 not looked yet. */
static LCP__TLS int stack_state;
static LCP__TLS uintptr_t stack_low, stack_high;

/*
 * Is [p, p+n) in the live part of this thread's stack (between our own frame
 * and the stack's top)? Such memory is mapped, so it can be read directly.
 * Servers pass sendfile offsets and iovec arrays that live in their own stack
 * frames, so this spares the hit path a process_vm_readv (several
 * microseconds). Off the thread's stack (sigaltstack), the answer is no.
 */
static int on_live_stack(const void *p, size_t n)
{
	uintptr_t here = (uintptr_t)__builtin_frame_address(0), a = (uintptr_t)p;

	if (LCP__UNLIKELY(stack_state == 0)) {
		pthread_attr_t attr;
		void *addr;
		size_t size;

		stack_state = -1;
		if (pthread_getattr_np(pthread_self(), &attr) == 0) {
			if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
				stack_low = (uintptr_t)addr;
				stack_high = (uintptr_t)addr + size;
				stack_state = 1;
			}
			pthread_attr_destroy(&attr);
		}
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
