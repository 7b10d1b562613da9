/*
 * t_open.c - the open family and close with and without the shim: the fd
 * numbers given, errors (ENOENT, ENOTDIR, EISDIR for writing, EBADF dirfd,
 * EEXIST), O_CREAT modes (the mode argument must reach libc), O_TMPFILE,
 * the fortified __open_2 family, close of bad and already closed fds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

/* Reports an open (fd keeps the number it returned), then closes it. */
#define OPEN_THEN_CLOSE(what, fd, expr)                 \
	do {                                            \
		H_CALL(what, (fd) = (expr), NULL, 0);   \
		close(fd);                              \
	} while (0)

static void mode_of(const char *what, const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0)
		printf("%s mode %o\n", what, (unsigned)(st.st_mode & 07777));
	else
		printf("%s missing\n", what);
}

static void scenario(const char *name)
{
	int dir, fd, fd2;

	(void)name;
	umask(022);
	dir = open(h_dir(), O_RDONLY | O_DIRECTORY);
	H_CALL("open", fd = open(h_path("file.bin"), O_RDONLY), NULL, 0);
	H_CALL("close", close(fd), NULL, 0);
	H_CALL("close again", close(fd), NULL, 0);
	H_CALL("close -1", close(-1), NULL, 0);
	H_CALL("close 70000", close(70000), NULL, 0);
	OPEN_THEN_CLOSE("open64", fd, open64(h_path("file.bin"), O_RDONLY));
	OPEN_THEN_CLOSE("openat", fd, openat(dir, "file.bin", O_RDONLY));
	OPEN_THEN_CLOSE("openat64", fd, openat64(dir, "file.bin", O_RDONLY));
	OPEN_THEN_CLOSE("__open_2", fd, __open_2(h_path("file.bin"), O_RDONLY));
	OPEN_THEN_CLOSE("__open64_2", fd, __open64_2(h_path("file.bin"), O_RDONLY));
	OPEN_THEN_CLOSE("__openat_2", fd, __openat_2(dir, "file.bin", O_RDONLY));
	OPEN_THEN_CLOSE("__openat64_2", fd, __openat64_2(dir, "file.bin", O_RDONLY));
	H_CALL("open missing", open(h_path("missing"), O_RDONLY), NULL, 0);
	H_CALL("open64 missing", open64(h_path("missing"), O_RDONLY), NULL, 0);
	H_CALL("openat bad dirfd", openat(9999, "file.bin", O_RDONLY), NULL, 0);
	H_CALL("openat64 relative to a file", openat64(fd, "x", O_RDONLY), NULL, 0);
	H_CALL("__openat_2 bad dirfd", __openat_2(-5, "file.bin", O_RDONLY), NULL, 0);
	H_CALL("open O_DIRECTORY on file", open(h_path("file.bin"), O_RDONLY | O_DIRECTORY), NULL, 0);
	H_CALL("open directory for writing", open(h_dir(), O_WRONLY), NULL, 0);
	OPEN_THEN_CLOSE("open O_CREAT 0600", fd, open(h_path("created-a"), O_WRONLY | O_CREAT | O_TRUNC, 0600));
	mode_of("created-a", h_path("created-a"));
	OPEN_THEN_CLOSE("open64 O_CREAT 0640", fd, open64(h_path("created-b"), O_WRONLY | O_CREAT | O_TRUNC, 0640));
	mode_of("created-b", h_path("created-b"));
	OPEN_THEN_CLOSE("openat O_CREAT 0604", fd, openat(dir, "created-c", O_WRONLY | O_CREAT | O_TRUNC, 0604));
	mode_of("created-c", h_path("created-c"));
	H_CALL("openat64 O_CREAT|O_EXCL existing", openat64(dir, "created-c", O_WRONLY | O_CREAT | O_EXCL, 0600),
	       NULL, 0);
	H_CALL("open O_TMPFILE", fd = open(h_dir(), O_TMPFILE | O_RDWR, 0600), NULL, 0);
	if (fd >= 0) {
		H_CALL("write tmpfile", write(fd, "tmp", 3), NULL, 0);
		close(fd);
	}
	/* Two files open at once get the numbers libc gives. */
	fd = open(h_path("file.bin"), O_RDONLY);
	fd2 = open(h_path("file.bin"), O_RDONLY);
	printf("numbers differ by %d\n", fd2 - fd);
	close(fd);
	close(fd2);
	unlink(h_path("created-a"));
	unlink(h_path("created-b"));
	unlink(h_path("created-c"));
	close(dir);
}

int main(int argc, char **argv)
{
	h_init(argc, argv, scenario);
	h_make_file(h_path("file.bin"), 100000, 8);
	h_compare_all("open", 0);
	return h_finish();
}
