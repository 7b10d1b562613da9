/*
 * resident.c - is [offset, offset+length) of a file in the page cache?
 *
 * Three ways to know, tried in this order and remembered per fd (fdtab.c):
 *
 *  1. cachestat(2) (Linux 6.5+, syscall 451): one syscall whatever the range.
 *     It refuses (EPERM) files the process neither owns nor may write: exactly
 *     the files for which mincore lies, so EPERM means "ask elsewhere". If it
 *     refuses a file we own, a seccomp filter is blocking the syscall and we
 *     stop trying it for the whole process; ENOSYS likewise.
 *  2. mmap + mincore + munmap, only where the kernel answers truthfully:
 *     since 5.2 mincore reports every page resident unless the caller owns the
 *     file, has CAP_FOWNER, opened it for writing, or may write it.
 *  3. Otherwise the check cannot be trusted locally and the caller asks the
 *     daemon (LCP_OP_CHECK, or directly LCP_OP_FETCH, which answers at once
 *     when the range is resident).
 *
 * LIBCEPTION_FORCE_CHECK (a testing aid) starts at step 2 ("mincore": as if
 * cachestat did not exist, so mincore where it tells the truth, else the
 * daemon) or at step 3 ("daemon").
 *
 * Pages past end of file are never resident, so a request that runs past EOF
 * would look like a miss; the verdict is only "miss" after fstat has clamped
 * the range to the file size. That fstat also re-validates the fd's kind, so
 * a stale table entry never sends a socket to the daemon; the mincore and
 * daemon methods, which never get an error from the kernel for a wrong kind
 * of file, fstat on every call for the same reason (their cost dwarfs it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "deception.h"

#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

struct cachestat_range {
	uint64_t off;
	uint64_t len;
};

struct cachestat_result {
	uint64_t nr_cache;
	uint64_t nr_dirty;
	uint64_t nr_writeback;
	uint64_t nr_evicted;
	uint64_t nr_recently_evicted;
};

/* Set once cachestat is known not to work in this process (ENOSYS, seccomp). */
static int cachestat_unusable;

int lcp__file_stat(struct lcp__file *file)
{
	struct stat st;

	if (file->have_stat)
		return 0;
	if (fstat(file->fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		lcp__fdtab_set(file->fd, LCP_FD_OTHER, LCP_METHOD_UNLEARNED);
		return -ENOTSUP;
	}
	file->have_stat = 1;
	file->size = (uint64_t)st.st_size;
	file->uid = st.st_uid;
	file->ino = st.st_ino;
	file->dev = st.st_dev;
	file->change_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
	return 0;
}

static uint64_t pages_spanned(uint64_t off, uint64_t len)
{
	unsigned shift = lcp__cfg.page_shift;

	return ((off + len - 1) >> shift) - (off >> shift) + 1;
}

/* Verdict from the number of resident pages found in the unclamped range. */
static int judge(struct lcp__file *file, uint64_t off, uint64_t len, uint64_t resident)
{
	int err;
	uint64_t end;

	if (resident >= pages_spanned(off, len))
		return LCP_RES_HIT;
	err = lcp__file_stat(file);
	if (err < 0)
		return err;
	if (off >= file->size)
		return LCP_RES_HIT; /* at or past EOF: nothing to read */
	end = off + len < file->size ? off + len : file->size;
	return resident >= pages_spanned(off, end - off) ? LCP_RES_HIT : LCP_RES_MISS;
}

static int has_cap_fowner(void)
{
	struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &header, data) != 0)
		return 0;
	return (data[0].effective >> CAP_FOWNER) & 1u;
}

/* Would mincore tell the truth about this file? (mm/mincore.c, can_do_mincore) */
static int mincore_trustworthy(struct lcp__file *file)
{
	char path[64];
	int flags;

	if (file->uid == geteuid())
		return 1;
	flags = fcntl(file->fd, F_GETFL);
	if (flags >= 0 && (flags & O_ACCMODE) != O_RDONLY)
		return 1;
	if (has_cap_fowner())
		return 1;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file->fd);
	return faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
}

static int choose_fallback(struct lcp__file *file, enum lcp__method *method)
{
	int err = lcp__file_stat(file);

	if (err < 0)
		return err;
	*method = mincore_trustworthy(file) ? LCP_METHOD_MINCORE : LCP_METHOD_DAEMON;
	lcp__fdtab_set(file->fd, LCP_FD_REGULAR, *method);
	return 0;
}

static int check_cachestat(struct lcp__file *file, uint64_t off, uint64_t len, uint64_t *resident)
{
	struct cachestat_range range = { .off = off, .len = len };
	struct cachestat_result result;

	if (syscall(SYS_cachestat, file->fd, &range, &result, 0) != 0)
		return -errno;
	*resident = result.nr_cache;
	return 0;
}

/*
 * How many bytes of [off, end) from off are cached without a gap, found by
 * bisection with cachestat over whole pages (one call when the first page is
 * not cached, else about log2(pages) more; on a miss only). 0 where
 * cachestat cannot tell (a file the process neither owns nor may write, an
 * old kernel, a filter) or another check method is forced: the caller then
 * reads from off.
 */
uint64_t lcp__cached_prefix(int fd, uint64_t off, uint64_t end)
{
	uint64_t page = 1ull << lcp__cfg.page_shift;
	uint64_t start = off & ~(page - 1);
	uint64_t lo = 0, hi, prefix_end;
	struct cachestat_range first = { .off = start, .len = page };
	struct cachestat_result first_result;

	if (end <= off || __atomic_load_n(&cachestat_unusable, __ATOMIC_RELAXED) ||
	    lcp__cfg.force_check != LCP_METHOD_UNLEARNED)
		return 0;
	if (syscall(SYS_cachestat, fd, &first, &first_result, 0) != 0 || first_result.nr_cache == 0)
		return 0;
	lo = 1;
	hi = (end - start + page - 1) >> lcp__cfg.page_shift;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		struct cachestat_range range = { .off = start, .len = mid << lcp__cfg.page_shift };
		struct cachestat_result result;

		if (syscall(SYS_cachestat, fd, &range, &result, 0) != 0)
			return 0;
		if (result.nr_cache >= mid)
			lo = mid;
		else
			hi = mid - 1;
	}
	prefix_end = start + (lo << lcp__cfg.page_shift);
	if (prefix_end > end)
		prefix_end = end;
	return prefix_end > off ? prefix_end - off : 0;
}

static int check_mincore(struct lcp__file *file, uint64_t off, uint64_t len, uint64_t *resident)
{
	enum { VEC = 4096 };
	unsigned char vec[VEC];
	uint64_t page = 1ull << lcp__cfg.page_shift;
	uint64_t start = off & ~(page - 1);
	size_t map_len = (size_t)(off + len - start);
	size_t pages = (size_t)((map_len + page - 1) >> lcp__cfg.page_shift);
	size_t done = 0, count = 0;
	char *map;

	map = lcp__real_mmap(NULL, map_len, PROT_READ, MAP_SHARED, file->fd, (off_t)start);
	if (map == MAP_FAILED)
		return -errno;
	while (done < pages) {
		size_t chunk = pages - done < VEC ? pages - done : VEC;

		if (mincore(map + (done << lcp__cfg.page_shift), chunk << lcp__cfg.page_shift, vec) != 0) {
			int err = -errno;

			munmap(map, map_len);
			return err;
		}
		for (size_t i = 0; i < chunk; i++)
			count += vec[i] & 1u;
		done += chunk;
	}
	munmap(map, map_len);
	*resident = count;
	return 0;
}

int lcp__check_local(struct lcp__file *file, uint64_t off, uint64_t len, enum lcp__method *method_out)
{
	enum lcp__method method = lcp__fd_method(lcp__fdtab_get(file->fd));
	uint64_t resident = 0;
	int err;

	if (LCP__UNLIKELY(lcp__cfg.force_check == LCP_METHOD_DAEMON))
		method = LCP_METHOD_DAEMON;
	for (;;) {
		switch (method) {
		case LCP_METHOD_UNLEARNED:
		case LCP_METHOD_CACHESTAT:
			if (__atomic_load_n(&cachestat_unusable, __ATOMIC_RELAXED) ||
			    LCP__UNLIKELY(lcp__cfg.force_check == LCP_METHOD_MINCORE)) {
				err = choose_fallback(file, &method);
				if (err < 0)
					return err;
				continue;
			}
			err = check_cachestat(file, off, len, &resident);
			if (err == 0) {
				if (method == LCP_METHOD_UNLEARNED)
					lcp__fdtab_set(file->fd, LCP_FD_REGULAR, LCP_METHOD_CACHESTAT);
				*method_out = LCP_METHOD_CACHESTAT;
				return judge(file, off, len, resident);
			}
			if (err == -ENOSYS) {
				__atomic_store_n(&cachestat_unusable, 1, __ATOMIC_RELAXED);
			} else if (err == -EPERM) {
				int serr = lcp__file_stat(file);

				if (serr < 0)
					return serr;
				/* The owner is always allowed: EPERM here is a filter. */
				if (file->uid == geteuid())
					__atomic_store_n(&cachestat_unusable, 1, __ATOMIC_RELAXED);
			} else if (err == -EOPNOTSUPP) {
				/* hugetlbfs: the file lives in memory. */
				*method_out = LCP_METHOD_CACHESTAT;
				return LCP_RES_HIT;
			} else {
				return err; /* EBADF and the like: let libc answer */
			}
			err = choose_fallback(file, &method);
			if (err < 0)
				return err;
			continue;
		case LCP_METHOD_MINCORE:
			/* The method is remembered per fd number, and the number
			 * may now name another file (dup2, close_range): mincore
			 * is only believed after this file passed the rule. */
			err = lcp__file_stat(file);
			if (err < 0)
				return err;
			if (!mincore_trustworthy(file)) {
				method = LCP_METHOD_DAEMON;
				lcp__fdtab_set(file->fd, LCP_FD_REGULAR, method);
				continue;
			}
			err = check_mincore(file, off, len, &resident);
			if (err == 0) {
				*method_out = LCP_METHOD_MINCORE;
				return judge(file, off, len, resident);
			}
			if (err == -EBADF)
				return err;
			if (err == -ENOMEM || err == -EAGAIN) {
				/* Out of address space or locked memory for now:
				 * the daemon answers this call, mincore the next. */
				*method_out = LCP_METHOD_DAEMON;
				return LCP_RES_UNKNOWN;
			}
			/* Cannot map it (ENODEV, EACCES...): the daemon will know. */
			method = LCP_METHOD_DAEMON;
			lcp__fdtab_set(file->fd, LCP_FD_REGULAR, method);
			continue;
		case LCP_METHOD_DAEMON:
			/* The daemon only ever gets regular files: a number
			 * learned as a file and reused behind our back for a
			 * socket (accept after close_range) is caught here. */
			err = lcp__file_stat(file);
			if (err < 0)
				return err;
			*method_out = LCP_METHOD_DAEMON;
			return LCP_RES_UNKNOWN;
		}
	}
}
