/*
 * t_laio_cold.c - path calls on a file system whose dentries and pages are
 * all cold (root: a small ext4 image; each back end mounts a new copy of
 * it, checked to have nothing in the dentry cache): openat, statx, stat,
 * lstat, newfstatat of uncached paths and a pread of uncached data go to
 * the background in the lazy back end too;
 * each result equals the direct call's made afterwards. A pass in which a
 * call ran inline is repeated on a fresh mount, up to three (a loaded
 * machine can make one look inline; see body). The image is
 * unmounted (and the loop device detached with it) at exit and on signals.
 */
#include "ltest.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define SIZE (256 * 1024)

static char dir[] = "/tmp/laio-cold-XXXXXX";
static char img[128], mnt[128], copy[160], loopdev[64];
static int mounted, copies;

/* Does mnt/name resolve from the dentry cache alone? (The precondition of
 * the lazy back end's expectations below: a fresh mount has nothing cached.) */
static int path_cached_now(const char *name)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_CACHED };
	char p[160];
	long fd;

	snprintf(p, sizeof(p), "%s/%s", mnt, name);
	fd = syscall(SYS_openat2, AT_FDCWD, p, &how, sizeof(how));
	if (fd >= 0)
		close((int)fd);
	return fd >= 0;
}

static void sh(const char *fmt, const char *a, const char *b)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	CHECK(system(cmd) == 0);
}

/*
 * The previous back end's child may still hold the file system for a moment
 * after it exits (io_uring's workers let go of their files asynchronously):
 * wait for a clean unmount, up to 5 s. A lazy detach would leave the old
 * superblock alive, and mount -o loop of the same image could be given it
 * back with its dentries still cached.
 */
static void unmount(void)
{
	for (int i = 0; mounted && i < 50; i++) {
		if (umount2(mnt, 0) == 0)
			mounted = 0;
		else if (errno == EBUSY)
			usleep(100000);
		else
			break;
	}
	if (mounted && umount2(mnt, MNT_DETACH) == 0)
		mounted = 0;
	/* Attached but never mounted (a failed check in between). */
	if (!mounted && loopdev[0]) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "losetup -d %s", loopdev);
		if (system(cmd) != 0)
			fprintf(stderr, "t_laio_cold: %s failed\n", cmd);
		loopdev[0] = 0;
	}
	if (!mounted && copy[0]) {
		unlink(copy);
		copy[0] = 0;
	}
}

static void cleanup(void)
{
	unmount();
	if (copy[0])
		unlink(copy);
	unlink(img);
	rmdir(mnt);
	rmdir(dir);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Everything under mnt cold: a fresh mount of a new copy of the image, on a
 * loop device in direct-I/O mode whose file's pages are evicted first, so
 * that every block the file system reads comes from the disk below and not
 * from the copy's page cache. A cached block finishes a lookup in
 * microseconds, and an io_uring worker that quick can post its completion
 * before liblaio looks for one after submitting, making a cold call look
 * inline: with a buffered loop device the read-ahead of the copy by an
 * earlier lookup cached the next directory's blocks, and statx of d3/f3 ran
 * inline in one run of about fifty. A new file per mount (named by pid and
 * count, as both back ends' children count from the same value) gets a new
 * loop device and so a new superblock: a file still bound to a loop device
 * whose release is pending would be given that device back, and with it
 * the previous mount's dentries.
 */
static void attach_loop(const char *file)
{
	char cmd[256];
	FILE *out;

	snprintf(cmd, sizeof(cmd), "losetup --find --show --direct-io=on %s", file);
	out = popen(cmd, "r");
	CHECK(out != NULL);
	CHECK(fgets(loopdev, sizeof(loopdev), out) != NULL);
	CHECK(pclose(out) == 0);
	loopdev[strcspn(loopdev, "\n")] = 0;
	CHECK(strncmp(loopdev, "/dev/loop", 9) == 0);
}

/*
 * Is the loop device really in direct-I/O mode? A kernel may leave it
 * buffered (the backing file's block size does not fit), and then the
 * cached-block race above comes back unseen.
 */
static int loop_dio(void)
{
	char path[128], flag = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/loop/dio", loopdev + strlen("/dev/"));
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fread(&flag, 1, 1, f) != 1)
		flag = 0;
	fclose(f);
	return flag == '1';
}

static void remount(void)
{
	int fd;

	unmount();
	snprintf(copy, sizeof(copy), "%s/img-%d-%d", dir, (int)getpid(), ++copies);
	sh("cp --sparse=always %s %s", img, copy);
	fd = open(copy, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	attach_loop(copy);
	if (!loop_dio()) {
		fprintf(stderr, "t_laio_cold: %s did not switch to direct I/O (/sys/block/*/loop/dio)\n", loopdev);
		CHECK(!"a direct-I/O loop device");
	}
	sh("mount %s %s", loopdev, mnt);
	mounted = 1;
	/*
	 * Detached now, while mounted: the kernel then frees the device at the
	 * unmount (autoclear, as mount -o loop sets), even if this test dies
	 * before its own clean-up runs.
	 */
	sh("losetup -d %s%s", loopdev, "");
	loopdev[0] = 0;
	CHECK(!path_cached_now("d3/f3") && !path_cached_now("d4/f4"));
	CHECK(!path_cached_now("d5/f5") && !path_cached_now("d6/f6"));
}

static void in(char *out, const char *name)
{
	snprintf(out, 160, "%s/%s", mnt, name);
}

/*
 * One pass over fresh cold state: every result checked against the direct
 * call; returns how many calls ran in the wrong mode (inline where the back
 * end should have gone to the background).
 */
static int cold_pass(void)
{
	static char a[SIZE], b[SIZE];
	char p[160];
	struct statx sx, dsx;
	struct stat st, dst;
	struct outcome o, d;
	int fd, wrong = 0;

	remount();

	in(p, "d1/f1");
	call(&o, SYS_openat, AT_FDCWD, p, O_RDONLY | O_CLOEXEC, 0);
	wrong += !MODE_IS(&o, 0);
	CHECK(o.ret >= 0);
	CHECK(fstat((int)o.ret, &st) == 0 && stat(p, &dst) == 0 && st.st_ino == dst.st_ino);
	close((int)o.ret);

	in(p, "d2/missing");
	call(&o, SYS_openat, AT_FDCWD, p, O_RDONLY, 0);
	wrong += !MODE_IS(&o, 0);
	direct(&d, SYS_openat, AT_FDCWD, p, O_RDONLY, 0);
	SAME(&o, &d);
	CHECK(o.err == ENOENT);

	in(p, "d3/f3");
	call(&o, SYS_statx, AT_FDCWD, p, 0, STATX_BASIC_STATS, &sx);
	wrong += !MODE_IS(&o, 0);
	direct(&d, SYS_statx, AT_FDCWD, p, 0, STATX_BASIC_STATS, &dsx);
	SAME(&o, &d);
	CHECK(sx.stx_ino == dsx.stx_ino && sx.stx_size == SIZE && sx.stx_mtime.tv_sec == dsx.stx_mtime.tv_sec);

	in(p, "d4/f4");
	call(&o, SYS_stat, p, &st);
	wrong += !MODE_IS(&o, 0);
	direct(&d, SYS_stat, p, &dst);
	SAME(&o, &d);
	CHECK(st.st_ino == dst.st_ino && st.st_size == SIZE);

	in(p, "d5/f5");
	call(&o, SYS_lstat, p, &st);
	wrong += !MODE_IS(&o, 0);
	direct(&d, SYS_lstat, p, &dst);
	SAME(&o, &d);
	CHECK(st.st_ino == dst.st_ino && st.st_size == SIZE);

	in(p, "d6/f6");
	call(&o, SYS_newfstatat, AT_FDCWD, p, &st, 0);
	wrong += !MODE_IS(&o, 0);
	direct(&d, SYS_newfstatat, AT_FDCWD, p, &dst, 0);
	SAME(&o, &d);
	CHECK(st.st_ino == dst.st_ino && st.st_size == SIZE);

	/* Data: the dentry is warm now (stat above), the pages are not. */
	fd = open(p, O_RDONLY);
	CHECK(fd >= 0);
	call(&o, SYS_pread64, fd, a, SIZE, 0);
	wrong += !MODE_IS(&o, 0);
	CHECK(o.ret == SIZE && pread(fd, b, SIZE, 0) == SIZE && memcmp(a, b, SIZE) == 0);
	close(fd);
	unmount();
	return wrong;
}

/*
 * A cold call's completion can be posted before liblaio looks for it when
 * the calling thread loses its CPU in between (a loaded machine), and the
 * call then counts as inline. A scheduling race does not repeat on fresh
 * mounts; a back end that runs cold calls inline does. So a pass with a
 * call in the wrong mode is repeated, up to three passes.
 */
static void body(void)
{
	for (int pass = 1;; pass++) {
		int wrong = cold_pass();

		if (wrong == 0)
			return;
		fprintf(stderr, "t_laio_cold: [%s] pass %d: %d cold calls ran inline%s\n", getenv("LAIO_BACKEND"), pass,
			wrong, pass < 3 ? "; again on a fresh mount" : "");
		CHECK(pass < 3);
	}
}

int main(void)
{
	static char data[SIZE];
	const char *dirs[] = { "d1", "d2", "d3", "d4", "d5", "d6" };
	char p[160];
	int fd, rc;

	if (geteuid() != 0) {
		printf("needs root (mounts an ext4 image)\n");
		return 77;
	}
	if (system("command -v mkfs.ext4 >/dev/null") != 0) {
		printf("needs mkfs.ext4 (scripts/bootstrap installs e2fsprogs)\n");
		return 77;
	}
	CHECK(mkdtemp(dir));
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	snprintf(img, sizeof(img), "%s/img", dir);
	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	CHECK(mkdir(mnt, 0700) == 0);
	fd = open(img, O_RDWR | O_CREAT, 0600);
	CHECK(fd >= 0 && ftruncate(fd, 32 << 20) == 0);
	close(fd);
	sh("mkfs.ext4 -q -F %s >/dev/null 2>&1%s", img, "");
	sh("mount -o loop %s %s", img, mnt);
	mounted = 1;
	for (int i = 0; i < SIZE; i++)
		data[i] = (char)(i * 13);
	for (int i = 0; i < 6; i++) {
		in(p, dirs[i]);
		CHECK(mkdir(p, 0755) == 0);
		snprintf(p + strlen(p), sizeof(p) - strlen(p), "/f%d", i + 1);
		fd = open(p, O_WRONLY | O_CREAT, 0644);
		CHECK(fd >= 0 && write(fd, data, SIZE) == SIZE);
		close(fd);
	}
	unmount();
	rc = for_each_backend(body);
	return rc;
}
