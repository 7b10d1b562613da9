/*
 * fdtab.c - per-descriptor cache: what kind of file an fd is, and which
 * residency check works for it.
 *
 * The hit path must not fstat on every call, so the first interposed call on
 * an fd fstats it once and stores the verdict here, in a flat table indexed by
 * fd number (fds at or above LCP_FDTAB_SIZE are simply not cached: correct,
 * just slower). An entry is forgotten when the fd is closed through close()
 * and when open*() returns that number again.
 *
 * Staleness: an fd can also be closed and its number reused behind our back
 * (fclose, close_range, dup2, socket(), accept()...). The design tolerates it:
 *   - a stale REGULAR entry on what is now a socket or pipe makes the check
 *     report a miss, and every miss path re-fstats before doing anything, which
 *     corrects the entry and goes straight to libc;
 *   - a stale OTHER entry only costs the optimisation for that fd;
 *   - a stale SHIM entry never misleads the connection, which checks its
 *     socket's identity itself before anything is sent (client.c); a read on
 *     a SHIM-marked number re-classifies it (intercept.c), so a file that
 *     took the number behind our back is still served.
 * Every entry is one 32-bit word updated atomically (relaxed: it is a hint,
 * and every decision it drives is safe if the hint is wrong).
 *
 * The prefetch window (start, end) is a second hint used only in prefetch
 * mode for files whose residency cannot be checked locally.
 */
#include "deception.h"

struct fd_entry {
	uint32_t state; /* kind | method << 2 */
	uint32_t unused;
	uint64_t window_start;
	uint64_t window_end;
};

static struct fd_entry fd_table[LCP_FDTAB_SIZE];

uint32_t lcp__fdtab_get(int fd)
{
	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return LCP_FD_UNKNOWN;
	return __atomic_load_n(&fd_table[fd].state, __ATOMIC_RELAXED);
}

void lcp__fdtab_set(int fd, enum lcp__fd_kind kind, enum lcp__method method)
{
	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return;
	__atomic_store_n(&fd_table[fd].state, (uint32_t)kind | ((uint32_t)method << 2), __ATOMIC_RELAXED);
}

void lcp__fdtab_forget(int fd)
{
	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return;
	__atomic_store_n(&fd_table[fd].state, LCP_FD_UNKNOWN, __ATOMIC_RELAXED);
	__atomic_store_n(&fd_table[fd].window_end, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&fd_table[fd].window_start, 0, __ATOMIC_RELAXED);
}

int lcp__fdtab_in_window(int fd, uint64_t off, uint64_t len)
{
	uint64_t start, end;

	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return 0;
	start = __atomic_load_n(&fd_table[fd].window_start, __ATOMIC_RELAXED);
	end = __atomic_load_n(&fd_table[fd].window_end, __ATOMIC_RELAXED);
	return end > start && off >= start && off + len <= end;
}

void lcp__fdtab_set_window(int fd, uint64_t start, uint64_t end)
{
	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return;
	__atomic_store_n(&fd_table[fd].window_start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&fd_table[fd].window_end, end, __ATOMIC_RELAXED);
}
