/*
 * thread.c - the shim's per-thread and per-process life cycle: what happens
 * when a thread that used the shim exits, and around fork().
 *
 * Per-thread state lives in the modules that own it (client.c's connection,
 * prefetch.c's scratch buffer); this file only tells them when to let go. A
 * pthread key's destructor is the thread-exit hook: intercept.c arms it, once
 * per thread, when a call keeps a daemon connection or is about to make a
 * prefetch buffer, so threads that only ever hit the page cache pay nothing
 * (and a vfork child, which never connects, never touches the key). The atfork handlers hold
 * the connection registry across fork() and give the child fresh state.
 *
 * In the call graph this file sits above client.c, prefetch.c and stats.c
 * and below init.c and intercept.c; nothing it calls calls back into it.
 * Its state: the key (written once by lcp__thread_init, before any wrapper
 * takes part) and a per-thread "armed" flag touched only by its thread.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "deception.h"

static pthread_key_t thread_key;
static int thread_key_ok;
static LCP__TLS int armed;

static void thread_exit(void *arg)
{
	(void)arg;
	lcp__client_thread_exit();
	lcp__prefetch_thread_exit();
}

void lcp__thread_arm(void)
{
	if (LCP__LIKELY(armed) || !thread_key_ok)
		return;
	/* Any non-NULL value: the destructor runs only for those. */
	pthread_setspecific(thread_key, &armed);
	armed = 1;
}

static void fork_prepare(void)
{
	lcp__guard++;
	lcp__client_fork_prepare();
}

static void fork_parent(void)
{
	lcp__client_fork_parent();
	lcp__guard--;
}

/* The child is single-threaded: it gets its own connections and counters. */
static void fork_child(void)
{
	lcp__client_fork_child();
	lcp__stats_after_fork_child();
	lcp__guard--;
}

void lcp__thread_init(void)
{
	if (pthread_key_create(&thread_key, thread_exit) == 0)
		thread_key_ok = 1;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
