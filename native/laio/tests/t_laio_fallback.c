/*
 * t_laio_fallback.c - without io_uring, the lazy back end falls back to the
 * eager one with one clear line on stderr, printed once:
 *   1. a kernel without io_uring: a seccomp filter makes io_uring_setup fail
 *      with ENOSYS in a child;
 *   2. io_uring disabled by sysctl kernel.io_uring_disabled=2 (root, when
 *      the sysctl exists): set for the child's start-up only, restored at
 *      once and on SIGINT/SIGTERM/exit;
 *   3. LAIO_BACKEND=eager asked for: no note at all.
 * In each case calls still work (background, completed through laio_poll).
 */
#include "ltest.h"

#include <fcntl.h>
#include <signal.h>

#define SYSCTL "/proc/sys/kernel/io_uring_disabled"

static char saved[16];
static int must_restore;

static void restore(void)
{
	int fd;

	if (!must_restore)
		return;
	fd = open(SYSCTL, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, saved, strlen(saved)) < 0)
			perror("t_laio_fallback: restoring " SYSCTL);
		close(fd);
	}
	must_restore = 0;
}

static void on_signal(int sig)
{
	restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* In a child: stderr to a file, LAIO_BACKEND as given, then check. */
static void child(const char *backend, const char *want_note, const char *errfile)
{
	struct outcome o;
	char text[1024] = "";
	int fd, lines = 0;
	ssize_t n;

	fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && dup2(fd, 2) == 2);
	if (backend)
		setenv("LAIO_BACKEND", backend, 1);
	else
		unsetenv("LAIO_BACKEND");
	CHECK(strcmp(laio_backend(), "eager") == 0);
	for (int i = 0; i < 3; i++) {
		call(&o, SYS_getpid);
		CHECK(o.background && o.ret == getpid());
	}
	fd = open(errfile, O_RDONLY);
	n = read(fd, text, sizeof(text) - 1);
	CHECK(n >= 0);
	text[n] = 0;
	for (char *p = text; *p; p++)
		lines += *p == '\n';
	if (want_note) {
		CHECK(lines == 1);
		CHECK(strncmp(text, "laio: io_uring unavailable (", 28) == 0);
		CHECK(strstr(text, want_note) != NULL);
		CHECK(strstr(text, "using the eager back end") != NULL);
	} else {
		CHECK(lines == 0);
	}
	_exit(0);
}

static int run_child(const char *backend, const char *want_note, int seccomp, int sysctl2)
{
	char errfile[] = "/tmp/laio-fallback-XXXXXX";
	int fd = mkstemp(errfile), st;
	pid_t pid;

	CHECK(fd >= 0);
	close(fd);
	if (sysctl2) {
		fd = open(SYSCTL, O_RDWR);
		CHECK(fd >= 0);
		ssize_t n = read(fd, saved, sizeof(saved) - 1);

		CHECK(n > 0);
		saved[n] = 0;
		must_restore = 1;
		/* sysctl_writes_strict: a write must start at offset 0 */
		CHECK(pwrite(fd, "2\n", 2, 0) == 2);
		close(fd);
	}
	fflush(stdout);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (seccomp)
			deny_syscall(SYS_io_uring_setup, ENOSYS);
		child(backend, want_note, errfile);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	restore();	/* the child started; the ring (or its absence) is decided */
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char cmd[96];

		fprintf(stderr, "child (LAIO_BACKEND=%s) failed; its stderr:\n", backend);
		snprintf(cmd, sizeof(cmd), "cat %s >&2", errfile);
		if (system(cmd) != 0)
			fprintf(stderr, "(could not show %s)\n", errfile);
		unlink(errfile);
		return 1;
	}
	unlink(errfile);
	return 0;
}

int main(void)
{
	int rc = 0;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	atexit(restore);

	rc |= run_child(NULL, "Function not implemented", 1, 0);
	rc |= run_child("lazy", "Function not implemented", 1, 0);
	rc |= run_child("eager", NULL, 1, 0);
	if (!rc)
		printf("ok: seccomp ENOSYS falls back with one note\n");
	if (access(SYSCTL, F_OK) != 0) {
		printf("this kernel has no %s; the sysctl case cannot run\n", SYSCTL);
		return rc ? 1 : 77;
	}
	if (geteuid() != 0) {
		printf("the sysctl case needs root\n");
		return rc ? 1 : 77;
	}
	if (!run_child(NULL, "kernel.io_uring_disabled is set", 0, 1))
		printf("ok: sysctl io_uring_disabled=2 falls back with one note\n");
	else
		rc = 1;
	return rc;
}
