/*
 * t_laio_files.c - file call families on both back ends, results and errno
 * equal to the direct call: read, pread64, readv with the data in the page
 * cache (lazy: inline) and evicted with posix_fadvise(DONTNEED), checked
 * non-resident with mincore (lazy: background, in one of three tries of an
 * 8 MiB read: see cold_read()), and with only its first page cached (the
 * whole read, not RWF_NOWAIT's short one, at an offset and at the file
 * position); write, pwrite64, writev (write and writev on a descriptor
 * opened read-only: EBADF); openat of
 * a cached path and of a missing one (lazy: inline), with O_CREAT (either);
 * statx, stat of a cached path (lazy: inline); close; fsync (background on
 * both: io_uring always punts it). Lazy only: the stat of a path buffer
 * right after its inline open skips the dentry-cache probe, while another
 * buffer, or the same one after an open that was not inline, is probed
 * (seen by making the probe, openat2, fail).
 */
#include "ltest.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>


#define SIZE (256 * 1024)
/* Larger than any readahead window (read_ahead_kb, the device's
 * max_sectors_kb): see cold_read(). */
#define BIG (8 * 1024 * 1024)

static char dir[] = "/tmp/laio-files-XXXXXX";
static char path[128], big[128];

/* Pages of the file's first `size` bytes resident in the page cache. */
static long resident(int fd, size_t size)
{
	long page = sysconf(_SC_PAGESIZE), n = 0;
	static unsigned char vec[BIG / 4096 + 1];
	void *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);

	CHECK(m != MAP_FAILED);
	CHECK(mincore(m, size, vec) == 0);
	for (long i = 0; i < ((long)size + page - 1) / page; i++)
		n += vec[i] & 1;
	munmap(m, size);
	return n;
}

static void evict_size(int fd, size_t size)
{
	CHECK(fdatasync(fd) == 0);
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	CHECK(resident(fd, size) == 0);
}

static void evict(int fd)
{
	evict_size(fd, SIZE);
}

/* The byte at offset i of the test files. */
static char pattern(long i)
{
	return (char)(i * 7 + i / 4096);
}

/*
 * A cold read goes to io-wq. It still counts as inline if io-wq finishes it
 * before the submitting thread looks at the completion queue: the
 * RWF_NOWAIT attempt started readahead, which on a disk served from the
 * host's cache can be done by then, and the worker, woken on the
 * submitter's CPU, can run first. So the read is larger than a readahead
 * window: io-wq has to wait for the disk for the rest, and the submitter
 * looks meanwhile. Three inline tries in a row mean a lazy back end that
 * runs cold reads inline.
 */
static void cold_read(void)
{
	static char a[BIG];
	struct outcome o;
	int fd = open(big, O_RDONLY);

	CHECK(fd >= 0);
	for (int try = 1;; try++) {
		evict_size(fd, BIG);
		memset(a, 0, BIG);
		call(&o, SYS_pread64, fd, a, BIG, 0);
		CHECK(o.ret == BIG);
		for (long i = 0; i < BIG; i += 4093)
			CHECK(a[i] == pattern(i));
		if (MODE_IS(&o, 0) || try == 3)
			break;
		printf("note: cold read %d completed inline; again\n", try);
	}
	EXPECT_MODE(&o, 0);
	close(fd);
}

/*
 * A cold read smaller than a readahead window: background, unless io-wq
 * finished it before the submitting thread looked (see cold_read(), whose
 * larger read is the one whose boundary is checked).
 */
#define EXPECT_SMALL_COLD(o)                                                    \
	do {                                                                   \
		if (!lazy())                                                   \
			CHECK((o)->background);                                \
		else if (!(o)->background)                                     \
			printf("note: small cold read completed inline\n");    \
	} while (0)

/* Evict the file, then read its first page on a descriptor without
 * readahead (POSIX_FADV_RANDOM set by the caller): only that page cached. */
static void first_page_only(int fd)
{
	static char page[4096];

	evict(fd);
	CHECK(pread(fd, page, sizeof(page), 0) == (ssize_t)sizeof(page));
	CHECK(resident(fd, SIZE) >= 1 && resident(fd, SIZE) < SIZE / 4096);
}

static void reads(void)
{
	static char a[SIZE], b[SIZE];
	struct iovec iov[2] = { { a, 1000 }, { a + 1000, 3000 } };
	struct outcome o, d;
	int fd = open(path, O_RDONLY);

	CHECK(fd >= 0);
	/* Cached (the file was just written). */
	CHECK(pread(fd, b, SIZE, 0) == SIZE);
	call(&o, SYS_pread64, fd, a, SIZE, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == SIZE && memcmp(a, b, SIZE) == 0);

	/* Not cached: the result is right either way; whether it went to the
	 * background is cold_read()'s check. */
	evict(fd);
	memset(a, 0, SIZE);
	call(&o, SYS_pread64, fd, a, SIZE, 0);
	EXPECT_SMALL_COLD(&o);
	CHECK(o.ret == SIZE && memcmp(a, b, SIZE) == 0);

	/* Only the first page cached (no readahead on this descriptor): the
	 * page cache gives a short RWF_NOWAIT read, but the call returns what
	 * the direct call would, all of it. */
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);
	first_page_only(fd);
	memset(a, 0, SIZE);
	call(&o, SYS_pread64, fd, a, SIZE, 0);
	CHECK(o.ret == SIZE && memcmp(a, b, SIZE) == 0);
	/* The same at the file position (read, readv): all of it, and the
	 * position moved by all of it. */
	first_page_only(fd);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	memset(a, 0, SIZE);
	call(&o, SYS_read, fd, a, SIZE);
	CHECK(o.ret == SIZE && memcmp(a, b, SIZE) == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == SIZE);
	first_page_only(fd);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	{
		struct iovec halves[2] = { { a, SIZE / 2 }, { a + SIZE / 2, SIZE / 2 } };

		memset(a, 0, SIZE);
		call(&o, SYS_readv, fd, halves, 2);
		CHECK(o.ret == SIZE && memcmp(a, b, SIZE) == 0);
		CHECK(lseek(fd, 0, SEEK_CUR) == SIZE);
	}
	CHECK(posix_fadvise(fd, 0, 0, POSIX_FADV_NORMAL) == 0);

	/* read: at the file position, which it moves. */
	evict(fd);
	CHECK(lseek(fd, 4096, SEEK_SET) == 4096);
	call(&o, SYS_read, fd, a, 8192);
	EXPECT_SMALL_COLD(&o);
	CHECK(o.ret == 8192 && memcmp(a, b + 4096, 8192) == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 4096 + 8192);
	CHECK(lseek(fd, 5000, SEEK_SET) == 5000);
	call(&o, SYS_read, fd, a, 100);	/* a page read just now */
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 100 && memcmp(a, b + 5000, 100) == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 5100);

	/* readv, cold then cached. */
	evict(fd);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	call(&o, SYS_readv, fd, iov, 2);
	EXPECT_SMALL_COLD(&o);
	CHECK(o.ret == 4000 && memcmp(a, b, 4000) == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 4000);
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	memset(a, 0, 4000);
	call(&o, SYS_readv, fd, iov, 2);	/* the page is cached now */
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 4000 && memcmp(a, b, 4000) == 0);

	/* At end of file; errors as the direct call gives them. */
	call(&o, SYS_pread64, fd, a, 10, SIZE);
	CHECK(o.ret == 0 && o.err == 0);
	direct(&d, SYS_pread64, fd, a, 10, -1L);
	call(&o, SYS_pread64, fd, a, 10, -1L);
	SAME(&o, &d);
	CHECK(o.err == EINVAL);
	direct(&d, SYS_read, 9999, a, 10);
	call(&o, SYS_read, 9999, a, 10);
	SAME(&o, &d);
	CHECK(o.err == EBADF);
	direct(&d, SYS_write, fd, a, 10);	/* opened read-only */
	call(&o, SYS_write, fd, a, 10);
	SAME(&o, &d);
	direct(&d, SYS_writev, fd, iov, 2);
	call(&o, SYS_writev, fd, iov, 2);
	SAME(&o, &d);
	CHECK(o.err == EBADF);
	close(fd);
}

static void writes(void)
{
	char name[160], back[64];
	struct iovec v[2] = { { (void *)"ab", 2 }, { (void *)"cd", 2 } };
	struct outcome o;
	int fd;

	snprintf(name, sizeof(name), "%s/w-%s", dir, getenv("LAIO_BACKEND"));
	fd = open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	call(&o, SYS_write, fd, "hello ", 6);
	CHECK(o.ret == 6 && o.err == 0);
	call(&o, SYS_pwrite64, fd, "world", 5, 6);
	CHECK(o.ret == 5 && o.err == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 6);	/* pwrite leaves the position */
	CHECK(pread(fd, back, sizeof(back), 0) == 11 && memcmp(back, "hello world", 11) == 0);
	call(&o, SYS_writev, fd, v, 2);	/* at the position, 6 */
	CHECK(o.ret == 4 && o.err == 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 10);
	CHECK(pread(fd, back, sizeof(back), 0) == 11 && memcmp(back, "hello abcdd", 11) == 0);
	call(&o, SYS_fsync, fd);
	CHECK(o.ret == 0 && o.err == 0);
	CHECK(o.background);	/* both back ends: see laio(3) */
	call(&o, SYS_fdatasync, fd);
	CHECK(o.ret == 0 && o.err == 0);
	call(&o, SYS_close, fd);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 0);
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF);
	unlink(name);
}

static void paths(void)
{
	char missing[160], created[160];
	struct stat st, st2;
	struct statx sx, sx2;
	struct outcome o, d;

	CHECK(stat(path, &st) == 0);	/* warm the dentry */
	call(&o, SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret >= 0);
	CHECK(fstat((int)o.ret, &st2) == 0 && st2.st_ino == st.st_ino);
	close((int)o.ret);
	call(&o, SYS_open, path, O_RDONLY, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret >= 0);
	close((int)o.ret);

	snprintf(missing, sizeof(missing), "%s/missing", dir);
	direct(&d, SYS_openat, AT_FDCWD, missing, O_RDONLY, 0);
	call(&o, SYS_openat, AT_FDCWD, missing, O_RDONLY, 0);
	EXPECT_MODE(&o, 1);
	SAME(&o, &d);
	CHECK(o.err == ENOENT);

	snprintf(created, sizeof(created), "%s/created-%s", dir, getenv("LAIO_BACKEND"));
	/* O_CREAT: inline or not as the kernel manages (laio(3)); no mode check. */
	call(&o, SYS_openat, AT_FDCWD, created, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (!lazy())
		CHECK(o.background);
	CHECK(o.ret >= 0);
	close((int)o.ret);
	direct(&d, SYS_openat, AT_FDCWD, created, O_RDWR | O_CREAT | O_EXCL, 0600);
	call(&o, SYS_openat, AT_FDCWD, created, O_RDWR | O_CREAT | O_EXCL, 0600);
	SAME(&o, &d);
	CHECK(o.err == EEXIST);
	unlink(created);

	memset(&sx, 0, sizeof(sx));
	call(&o, SYS_statx, AT_FDCWD, path, 0, STATX_BASIC_STATS, &sx);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 0 && sx.stx_ino == st.st_ino && (long)sx.stx_size == SIZE);
	call(&o, SYS_statx, AT_FDCWD, missing, 0, STATX_BASIC_STATS, &sx2);
	direct(&d, SYS_statx, AT_FDCWD, missing, 0, STATX_BASIC_STATS, &sx2);
	EXPECT_MODE(&o, 1);
	SAME(&o, &d);
	memset(&st2, 0, sizeof(st2));
	call(&o, SYS_stat, path, &st2);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 0 && st2.st_ino == st.st_ino && st2.st_size == SIZE);
	call(&o, SYS_newfstatat, AT_FDCWD, path, &st2, 0);
	EXPECT_MODE(&o, 1);
	CHECK(o.ret == 0 && st2.st_ino == st.st_ino);
	direct(&d, SYS_stat, missing, &st2);
	call(&o, SYS_stat, missing, &st2);
	SAME(&o, &d);
}

/* Lazy only, in a child: openat2 is denied once the open is done. */
static void recent_paths(void)
{
	char same[128], missing[160];
	struct stat st;
	struct outcome o;
	pid_t pid;
	int status;

	if (!lazy())
		return;
	snprintf(same, sizeof(same), "%s", path);
	snprintf(missing, sizeof(missing), "%s/not-here", dir);
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		call(&o, SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
		CHECK(!o.background && o.ret >= 0);
		close((int)o.ret);
		call(&o, SYS_openat, AT_FDCWD, missing, O_RDONLY, 0);
		CHECK(o.err == ENOENT);
		deny_syscall(SYS_openat2, ENOSYS);
		/* The buffer just opened: no probe, inline. */
		call(&o, SYS_newfstatat, AT_FDCWD, path, &st, 0);
		CHECK(!o.background && o.ret == 0 && st.st_size == SIZE);
		call(&o, SYS_stat, path, &st);
		CHECK(!o.background && o.ret == 0);
		/* lstat follows no link: a different question, probed. */
		call(&o, SYS_lstat, path, &st);
		CHECK(o.background && o.ret == 0);
		/* Another buffer with the same path: probed (the probe fails: background). */
		call(&o, SYS_newfstatat, AT_FDCWD, same, &st, 0);
		CHECK(o.background && o.ret == 0);
		/* An open whose openat2 try fails forgets its buffer (io_uring
		 * then opens it, inline or not). */
		call(&o, SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
		CHECK(o.ret >= 0);
		close((int)o.ret);
		call(&o, SYS_newfstatat, AT_FDCWD, path, &st, 0);
		CHECK(o.background && o.ret == 0);
		fflush(stdout);
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void body(void)
{
	cold_read();
	reads();
	writes();
	paths();
	recent_paths();
}

int main(void)
{
	static char data[SIZE];
	int fd, rc;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/data", dir);
	snprintf(big, sizeof(big), "%s/big", dir);
	for (int i = 0; i < SIZE; i++)
		data[i] = pattern(i);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, data, SIZE) == SIZE);
	close(fd);
	fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	for (long at = 0; at < BIG; at += SIZE) {
		for (int i = 0; i < SIZE; i++)
			data[i] = pattern(at + i);
		CHECK(write(fd, data, SIZE) == SIZE);
	}
	close(fd);
	rc = for_each_backend(body);
	unlink(path);
	unlink(big);
	rmdir(dir);
	return rc;
}
