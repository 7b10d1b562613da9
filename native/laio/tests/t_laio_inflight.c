/*
 * t_laio_inflight.c - background path lookups run side by side, as many as
 * the program has in flight, on both back ends (root: mounts a FUSE file
 * system). 100 statx calls of distinct uncached paths each wait for a
 * lookup that a small FUSE server in this test holds back; each call is
 * issued once the server holds the previous ones, and must reach it within
 * 5 s while they are still held. Then the server answers them all (ENOENT):
 * each call went to the background and completes once with ENOENT. The
 * eager back end's pool grows to 100 helpers, and the lazy one's io-wq must
 * too: by default io_uring runs at most min(SQ entries, 4 x CPUs) such
 * lookups at once per thread, 8 on two CPUs, and the ninth would queue
 * behind them, not at the disk. The limit is the thread's: the lookups run
 * twice, from the thread that started the back end and from a thread that
 * used an io_uring ring of its own first (which gave the thread that ring's
 * default limit).
 *
 * The server speaks the kernel's FUSE protocol on /dev/fuse directly: INIT
 * (with parallel lookups: without them FUSE runs one lookup per directory
 * at a time), LOOKUP (held), FORGET (no reply), anything else ENOSYS. It
 * answers what it holds when it holds all 100, or after 10 s without a new
 * lookup (the test has failed by then). It runs in a process of its own that holds the only
 * descriptor of the connection and dies with the test: a test that fails
 * or is killed takes the server with it, which aborts the connection and
 * releases every waiting lookup (a server thread in the test's own process
 * would wait for those lookups' threads to exit, and they for it).
 */
#include "ltest.h"

#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define N 100
#define QUIET_MS 10000
#define ARRIVE_MS 5000

/* The server's descriptor, in the server process. */
static int fuse_fd = -1;

/* Shared with the test process: the server's counts. */
static struct counts {
	int held;	/* lookups held now */
	int answered;	/* lookups answered */
	int all_at_once;	/* rounds answered because all N were held */
} *counts;

static char mnt[] = "/tmp/laio-inflight-XXXXXX";

static void reply(uint64_t unique, int error, const void *body, size_t len)
{
	struct fuse_out_header h = { .len = (uint32_t)(sizeof(h) + len), .error = error,
				     .unique = unique };
	struct iovec v[2] = { { &h, sizeof(h) }, { (void *)body, len } };

	/* ENOENT: the request was interrupted or the file system unmounted. */
	if (writev(fuse_fd, v, len ? 2 : 1) < 0 && errno != ENOENT && errno != ENODEV)
		CHECK(!"write to /dev/fuse");
}

static void answer_held(uint64_t *held, int *n)
{
	for (int i = 0; i < *n; i++)
		reply(held[i], -ENOENT, NULL, 0);
	counts->answered += *n;
	*n = 0;
	__atomic_store_n(&counts->held, 0, __ATOMIC_RELEASE);
}

static void serve(void)
{
	static char buf[1 << 17];
	uint64_t held[N];
	int n = 0;

	for (;;) {
		struct pollfd p = { .fd = fuse_fd, .events = POLLIN };
		int r = poll(&p, 1, n ? QUIET_MS : -1);
		struct fuse_in_header *in = (struct fuse_in_header *)buf;
		ssize_t got;

		if (r == 0) {
			answer_held(held, &n);
			continue;
		}
		got = read(fuse_fd, buf, sizeof(buf));
		if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOENT))
			continue;
		if (got < 0)	/* ENODEV: unmounted */
			break;
		CHECK((size_t)got >= sizeof(*in));
		switch (in->opcode) {
		case FUSE_INIT: {
			struct fuse_init_in *ii = (struct fuse_init_in *)(in + 1);
			struct fuse_init_out out = {
				.major = FUSE_KERNEL_VERSION,
				.minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ? ii->minor
									: FUSE_KERNEL_MINOR_VERSION,
				.flags = ii->flags & FUSE_PARALLEL_DIROPS,
				.max_write = 4096,
				.time_gran = 1,
			};

			reply(in->unique, 0, &out, sizeof(out));
			break;
		}
		case FUSE_LOOKUP:
			CHECK(n < N);
			held[n++] = in->unique;
			__atomic_store_n(&counts->held, n, __ATOMIC_RELEASE);
			if (n == N) {
				counts->all_at_once++;
				answer_held(held, &n);
			}
			break;
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
			break;
		default:
			reply(in->unique, -ENOSYS, NULL, 0);
		}
	}
	answer_held(held, &n);
}

/*
 * Fork the server: it mounts mnt on its own /dev/fuse descriptor, says
 * so on the pipe, and serves until the file system is unmounted (or the
 * test process dies: PR_SET_PDEATHSIG).
 */
static pid_t start_server(void)
{
	int ready[2];
	char byte;
	pid_t pid;

	CHECK(pipe(ready) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char opts[128];

		CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0);
		fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
		CHECK(fuse_fd >= 0);
		snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fuse_fd);
		CHECK(mount("laio-test", mnt, "fuse.laio-test", MS_NOSUID | MS_NODEV, opts) == 0);
		CHECK(write(ready[1], "r", 1) == 1);
		serve();
		_exit(0);
	}
	close(ready[1]);
	CHECK(read(ready[0], &byte, 1) == 1);
	close(ready[0]);
	return pid;
}

/* A test that fails leaves no directory behind (the mount is gone with its
 * namespace; the server is gone by then). */
static void unmount_at_exit(void)
{
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

/* Does the server hold n lookups within ms milliseconds? */
static int held_within(int n, int ms)
{
	for (int waited = 0; waited < ms; waited++) {
		if (__atomic_load_n(&counts->held, __ATOMIC_ACQUIRE) >= n)
			return 1;
		usleep(1000);
	}
	return 0;
}

/*
 * One round: N background statx calls of paths no round used before, each
 * issued once the server holds the previous ones; then every completion,
 * once each, with ENOENT.
 */
static void lookups(int round)
{
	static char paths[N][160];
	static struct statx sx[N];
	static laio_handle_t handles[N];
	static struct laio_completion c[N];
	struct outcome o;
	int done = 0;

	for (int i = 0; i < N; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/r%d-f%d", mnt, round, i);
		start_call(&o, SYS_statx, AT_FDCWD, paths[i], 0, STATX_BASIC_STATS, &sx[i]);
		CHECK(o.background);
		handles[i] = o.handle;
		if (i < N - 1 && !held_within(i + 1, ARRIVE_MS)) {
			fprintf(stderr, "[%s] round %d: lookup %d of %d did not reach the server while %d were held\n",
				laio_backend(), round, i + 1, N, i);
			CHECK(!"every background lookup in flight at once");
		}
	}
	while (done < N) {
		struct timespec twenty = { 20, 0 };
		int n = laio_poll(c + done, N - done, &twenty);

		CHECK(n > 0);
		done += n;
	}
	for (int i = 0; i < N; i++) {
		int found = 0;

		CHECK(c[i].laio_return_value == -1 && c[i].laio_errno == ENOENT);
		for (int j = 0; j < N; j++)
			found += c[j].laio_handle == handles[i];
		CHECK(found == 1);
	}
}

/* A thread that used an io_uring ring of its own (a NOP through it) before
 * its first call through liblaio. */
static void *after_own_ring(void *unused)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;

	(void)unused;
	CHECK(io_uring_queue_init(8, &ring, 0) == 0);
	io_uring_prep_nop(io_uring_get_sqe(&ring));
	CHECK(io_uring_submit(&ring) == 1);
	CHECK(io_uring_wait_cqe(&ring, &cqe) == 0);
	io_uring_cqe_seen(&ring, cqe);
	lookups(1);
	io_uring_queue_exit(&ring);
	return NULL;
}

static void body(void)
{
	pthread_t t;
	pid_t server;
	int st;

	counts = mmap(NULL, sizeof(*counts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(counts != MAP_FAILED);
	/*
	 * A mount namespace of this test's own: its FUSE mount goes away with
	 * the test and the server whatever ends them (a harness's SIGTERM too).
	 */
	CHECK(unshare(CLONE_NEWNS) == 0);
	CHECK(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
	CHECK(mkdtemp(mnt));
	server = start_server();
	atexit(unmount_at_exit);

	lookups(0);
	CHECK(pthread_create(&t, NULL, after_own_ring, NULL) == 0);
	CHECK(pthread_join(t, NULL) == 0);

	CHECK(umount2(mnt, MNT_DETACH) == 0);
	CHECK(waitpid(server, &st, 0) == server && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(rmdir(mnt) == 0);
	CHECK(counts->answered == 2 * N && counts->all_at_once == 2);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("needs root (mounts a FUSE file system)\n");
		return 77;
	}
	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		printf("needs /dev/fuse\n");
		return 77;
	}
	return for_each_backend(body);
}
