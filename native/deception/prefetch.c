/*
 * prefetch.c - LIBCEPTION_MODE=prefetch: read ahead in-process, no daemon.
 *
 * On a miss the calling thread itself preads the window [offset, offset +
 * max(length, LIBCEPTION_PREFETCH)), clamped to end of file, into a per-thread
 * scratch buffer and throws the bytes away. When the request is cached from its
 * start partway (a stream whose next call runs past the range read before) the
 * cached part is skipped and the window counts from the first page not cached,
 * so that every prefetch brings LIBCEPTION_PREFETCH new bytes, as the daemon
 * plans its reads (docs/daemon.md, "Reads, prefetch and joining"). Only
 * where cachestat answers (a file the process owns or may write): for other
 * files, such as root's library read by a server's workers, nothing in the
 * process knows what is cached, and the window starts at the offset: what matters is that the page
 * cache now holds them, so the real call that follows does not block on disk.
 * This is the "prefetching without serialization" configuration of the paper:
 * reads are long, but every thread issues its own.
 *
 * pread (never read) so the application's file offset is untouched. The
 * scratch buffer is an anonymous mapping of SCRATCH_BYTES made on first use and
 * unmapped when the thread exits (thread.c calls lcp__prefetch_thread_exit);
 * longer windows are read in several chunks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>

#include "deception.h"

#define SCRATCH_BYTES (1u << 20)

static LCP__TLS char *scratch;

int64_t lcp__prefetch_range(const struct lcp__file *file, uint64_t off, uint64_t len)
{
	uint64_t end, pos, from, req_end, size = file->size;
	int fd = file->fd;

	if (off >= size)
		return 0;
	req_end = len < size - off ? off + len : size;
	from = off + lcp__cached_prefix(fd, off, req_end);
	if (from >= req_end)
		from = off; /* all cached after all: the window as planned */
	end = from + lcp__cfg.prefetch;
	if (end < req_end)
		end = req_end;
	if (end > size || end < from)
		end = size;
	if (scratch == NULL) {
		void *buf = lcp__real_mmap(NULL, SCRATCH_BYTES, PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (buf == MAP_FAILED)
			return -errno;
		scratch = buf;
	}
	for (pos = from; pos < end;) {
		uint64_t want = end - pos < SCRATCH_BYTES ? end - pos : SCRATCH_BYTES;
		ssize_t got = lcp__real_pread(fd, scratch, (size_t)want, (off_t)pos);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (got == 0)
			break;
		pos += (uint64_t)got;
	}
	lcp__stats_count(LCP_CTR_PREFETCH_CALLS, 1);
	lcp__stats_count(LCP_CTR_PREFETCH_BYTES, pos - from);
	return (int64_t)(pos - off);
}

void lcp__prefetch_thread_exit(void)
{
	if (scratch != NULL) {
		munmap(scratch, SCRATCH_BYTES);
		scratch = NULL;
	}
}
