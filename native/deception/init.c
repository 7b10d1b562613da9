/*
 * init.c - start-up and shut-down of the Deception shim.
 *
 * lcp__init() runs from the library constructor or, if an interposed call
 * arrives first (another library's constructor opening a file), from that
 * call. It reads the settings (config.c; the variable names come from
 * <libception/shim.h>), resolves the real libc functions (libc.c) and sets up
 * the connection bookkeeping, the thread-exit and fork handlers (client.c,
 * thread.c). A tiny state machine makes the first caller do the work; any
 * other thread that arrives meanwhile goes straight to libc for that call
 * rather than wait. Re-entry from the same thread is stopped by the guard.
 * The destructor writes the statistics (stats.c).
 */
#define _GNU_SOURCE
#include <errno.h>

#include "deception.h"

int lcp__initialised;

/* 0 = not started, 1 = running, 2 = done */
static int init_state;

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

		lcp__config_read();
		lcp__stats_init();
		lcp__resolve_all();
		lcp__client_init();
		lcp__thread_init();
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
