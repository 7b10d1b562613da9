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
 * The second hint is the window: a byte range of the file behind the fd that
 * was recently confirmed resident by someone the shim trusts (the daemon's
 * answer, or the shim's own in-process prefetch), with the file's identity
 * (st_dev, st_ino), its size and change time when it was confirmed (a
 * truncation or a write changes them and so ends the window) and an expiry
 * time. Closing the fd or opening another file on its number forgets it. It spares files that only the daemon
 * can check a round trip per call while a server works through a range the
 * daemon just fetched or confirmed. Its fields are written together under a
 * per-entry sequence counter (odd while a writer is at work; a writer that
 * finds another one busy simply skips its update) and read optimistically: a
 * reader that sees the counter change discards what it read.
 */
#include "deception.h"

struct fd_entry {
	uint32_t state;      /* kind | method << 2 */
	uint32_t window_seq; /* odd while the window is being written */
	uint64_t window_dev, window_ino;
	uint64_t window_size, window_change_ns;
	uint64_t window_start, window_end;
	uint64_t window_expires_ns;
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

/* Write the window of fd; skipped if another thread is writing it. */
static void window_store(struct fd_entry *e, const struct lcp__file_id *id, uint64_t start, uint64_t end,
			 uint64_t expires_ns)
{
	uint32_t seq = __atomic_load_n(&e->window_seq, __ATOMIC_RELAXED);

	if ((seq & 1u) != 0 ||
	    !__atomic_compare_exchange_n(&e->window_seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&e->window_dev, id->dev, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_ino, id->ino, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_size, id->size, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_change_ns, id->change_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_start, start, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_end, end, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_expires_ns, expires_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&e->window_seq, seq + 2, __ATOMIC_RELEASE);
}

void lcp__fdtab_forget(int fd)
{
	static const struct lcp__file_id none;

	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return;
	__atomic_store_n(&fd_table[fd].state, LCP_FD_UNKNOWN, __ATOMIC_RELAXED);
	/* The window names its file, so a stale one is harmless; dropping it
	 * is only tidiness and may be skipped under contention. */
	if (__atomic_load_n(&fd_table[fd].window_end, __ATOMIC_RELAXED) != 0)
		window_store(&fd_table[fd], &none, 0, 0, 0);
}

int lcp__fdtab_in_window(int fd, const struct lcp__file_id *id, uint64_t off, uint64_t len, uint64_t now_ns)
{
	struct fd_entry *e;
	uint64_t w_dev, w_ino, w_size, w_change, start, end, expires;
	uint32_t seq;

	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return 0;
	e = &fd_table[fd];
	seq = __atomic_load_n(&e->window_seq, __ATOMIC_ACQUIRE);
	if ((seq & 1u) != 0)
		return 0;
	/* Acquire loads keep the second look at the counter after them (a
	 * fence would do, but ThreadSanitizer does not model fences). */
	w_dev = __atomic_load_n(&e->window_dev, __ATOMIC_ACQUIRE);
	w_ino = __atomic_load_n(&e->window_ino, __ATOMIC_ACQUIRE);
	w_size = __atomic_load_n(&e->window_size, __ATOMIC_ACQUIRE);
	w_change = __atomic_load_n(&e->window_change_ns, __ATOMIC_ACQUIRE);
	start = __atomic_load_n(&e->window_start, __ATOMIC_ACQUIRE);
	end = __atomic_load_n(&e->window_end, __ATOMIC_ACQUIRE);
	expires = __atomic_load_n(&e->window_expires_ns, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&e->window_seq, __ATOMIC_RELAXED) != seq)
		return 0;
	return end > start && w_dev == id->dev && w_ino == id->ino && w_size == id->size &&
	       w_change == id->change_ns && now_ns < expires && off >= start && off + len <= end;
}

void lcp__fdtab_set_window(int fd, const struct lcp__file_id *id, uint64_t start, uint64_t end, uint64_t expires_ns)
{
	if (fd < 0 || fd >= LCP_FDTAB_SIZE)
		return;
	window_store(&fd_table[fd], id, start, end, expires_ns);
}
