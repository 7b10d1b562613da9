/*
 * t_fallback.c - the residency checks this kernel would never use: cachestat
 * exists here, so the mmap+mincore fallback and the "ask the daemon" path are
 * forced, either with the testing aid LIBCEPTION_FORCE_CHECK=mincore|daemon
 * or, as an old kernel or a seccomp sandbox would, by a seccomp filter that
 * makes cachestat fail with ENOSYS in the child.
 *
 * Files and readers (uid 65534 via setpriv where the file must be foreign):
 *   own       the reader owns the file: mincore tells the truth and is used;
 *   foreign   root's read-only file: mincore claims every page resident, so
 *             the shim must ask the daemon, and the cold read is still a miss;
 *   writable  root's file the reader may write (0666): mincore is truthful;
 *   dup2      a number learned as "mincore works" (own file) is dup2'ed over
 *             with root's cold file: mincore must not be believed there.
 * Each scenario's output (return values, errno, hashes) must equal libc's,
 * and the statistics must show which check answered.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <libception/protocol.h>

#include "harness.h"

#define DUP_OFFSET (333 * 4096)

static char buf[65536];

/* cachestat fails with ENOSYS from now on, as on a kernel before 6.5. */
static void forbid_cachestat(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 451, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		printf("seccomp: %s\n", strerror(errno));
		exit(1);
	}
}

static void reads(const char *file)
{
	int fd;

	h_evict(h_path(file));
	fd = open(h_path(file), O_RDONLY);
	H_CALL("cold pread", pread(fd, buf, 8192, 0), buf, 0);
	H_CALL("pread of what the fetch brought in", pread(fd, buf, 8192, 65536), buf, 0);
	H_CALL("read", read(fd, buf, 4096), buf, 0);
	close(fd);
}

static void scenario(const char *name)
{
	char which[64];
	char *plus;

	snprintf(which, sizeof(which), "%s", name);
	plus = strchr(which, '+');
	if (plus != NULL) {
		*plus = '\0';
		if (strcmp(plus + 1, "seccomp") == 0)
			forbid_cachestat();
	}
	if (strcmp(which, "own") == 0) {
		reads("own.bin");
	} else if (strcmp(which, "foreign") == 0) {
		reads("root.bin");
	} else if (strcmp(which, "writable") == 0) {
		reads("writable.bin");
	} else if (strcmp(which, "dup2") == 0) {
		int own = open(h_path("own.bin"), O_RDONLY), root;

		H_CALL("pread of the own file", pread(own, buf, 4096, 0), buf, 0);
		H_CALL("again", pread(own, buf, 4096, 0), buf, 0);
		h_evict(h_path("root.bin"));
		root = open(h_path("root.bin"), O_RDONLY);
		dup2(root, own); /* not seen by the shim */
		close(root);
		H_CALL("cold pread of root's file on the own file's number", pread(own, buf, 8192, DUP_OFFSET), buf, 0);
		close(own);
	}
}

struct expect {
	const char *label;
	const char *scenario;
	const char *uid;       /* setpriv uid, NULL: root */
	const char *force;     /* LIBCEPTION_FORCE_CHECK value, NULL: none */
	const char *mode;
	int mincore_min, daemon_min; /* at least this many checks by each */
	int mincore_zero, daemon_zero, cachestat_zero;
	int cold_miss;         /* the cold pread must count as a miss */
};

static int fetched_cold_at(const struct h_result *r, uint64_t offset)
{
	for (int i = 0; i < r->nrecords; i++)
		if (r->records[i].op == LCP_OP_FETCH && r->records[i].offset == offset && !r->records[i].resident)
			return 1;
	return 0;
}

static void check(const struct expect *e)
{
	char force_env[64];
	struct h_run run = { .label = e->label, .mode = e->mode, .daemon = 1, .setpriv_uid = e->uid };
	const struct h_run base = { .label = "baseline", .setpriv_uid = e->uid };
	struct h_result b, r;
	long long mincore, daemon, cachestat;

	if (e->force != NULL) {
		snprintf(force_env, sizeof(force_env), "LIBCEPTION_FORCE_CHECK=%s", e->force);
		run.extra_env[0] = force_env;
	}
	h_run(&base, e->scenario, 30, &b);
	h_run(&run, e->scenario, 30, &r);
	mincore = h_stat(&r, "\"residency_checks\"", "mincore");
	/* Calls inside a range the daemon just confirmed are answered by that
	 * window (LIBCEPTION_WINDOW_MS): both count as the daemon's answer. */
	daemon = h_stat(&r, "\"residency_checks\"", "daemon") + h_stat(&r, "\"residency_checks\"", "window");
	cachestat = h_stat(&r, "\"residency_checks\"", "cachestat");
	printf("%s: checks by cachestat %lld, mincore %lld, daemon %lld; pread misses %lld, hits %lld; %d requests\n",
	       e->label, cachestat, mincore, daemon, h_stat(&r, "\"pread\"", "misses"), h_stat(&r, "\"pread\"", "hits"),
	       r.nrecords);
	h_expect(b.status == 0 && r.status == 0 && strcmp(b.output, r.output) == 0,
		 "%s: output differs from libc's\nbaseline:\n%sshim:\n%s", e->label, b.output, r.output);
	h_expect(mincore >= e->mincore_min && daemon >= e->daemon_min,
		 "%s: expected at least %d mincore and %d daemon checks", e->label, e->mincore_min, e->daemon_min);
	h_expect(!e->mincore_zero || mincore == 0, "%s: mincore must not be used here", e->label);
	h_expect(!e->daemon_zero || daemon == 0, "%s: the daemon must not be asked here", e->label);
	h_expect(!e->cachestat_zero || cachestat == 0, "%s: cachestat must not answer here", e->label);
	if (e->cold_miss && strcmp(e->mode, "full") == 0)
		h_expect(h_stat(&r, "\"pread\"", "misses") >= 1 && fetched_cold_at(&r, strcmp(e->scenario, "dup2") == 0 ||
						     strcmp(e->scenario, "dup2+seccomp") == 0 ? DUP_OFFSET : 0),
			 "%s: the cold read was not seen as a miss and fetched", e->label);
	if (strcmp(e->mode, "track") == 0)
		for (int i = 0; i < r.nrecords; i++)
			h_expect(r.records[i].op == LCP_OP_CHECK, "%s: track mode sent op %u", e->label, r.records[i].op);
	h_result_free(&r);
	h_result_free(&b);
}

int main(int argc, char **argv)
{
	const struct expect cases[] = {
		{ "own/force-mincore", "own", "65534", "mincore", "full", 3, 0, 0, 1, 1, 1 },
		{ "own/seccomp", "own+seccomp", "65534", NULL, "full", 3, 0, 0, 1, 1, 1 },
		{ "foreign/force-mincore", "foreign", "65534", "mincore", "full", 0, 3, 1, 0, 1, 1 },
		{ "foreign/seccomp", "foreign+seccomp", "65534", NULL, "full", 0, 3, 1, 0, 1, 1 },
		{ "foreign/force-mincore/track", "foreign", "65534", "mincore", "track", 0, 3, 1, 0, 1, 1 },
		{ "writable/force-mincore", "writable", "65534", "mincore", "full", 3, 0, 0, 1, 1, 1 },
		{ "dup2/force-mincore", "dup2", "65534", "mincore", "full", 2, 1, 0, 0, 1, 1 },
		{ "dup2/seccomp", "dup2+seccomp", "65534", NULL, "full", 2, 1, 0, 0, 1, 1 },
		{ "own/force-daemon", "own", "65534", "daemon", "full", 0, 3, 1, 0, 1, 1 },
		{ "own/force-daemon/track", "own", "65534", "daemon", "track", 0, 3, 1, 0, 1, 1 },
		{ "root/force-daemon", "foreign", NULL, "daemon", "full", 0, 3, 1, 0, 1, 1 },
		{ "own/unknown-force-value", "own", "65534", "bogus", "full", 0, 0, 1, 1, 0, 1 },
	};

	h_init(argc, argv, scenario);
	h_require_setpriv();
	h_make_file(h_path("root.bin"), 2u << 20, 100);
	h_make_file(h_path("own.bin"), 2u << 20, 101);
	h_make_file(h_path("writable.bin"), 2u << 20, 102);
	if (chown(h_path("own.bin"), 65534, 65534) != 0 || chmod(h_path("writable.bin"), 0666) != 0)
		h_skip("cannot chown/chmod the test files: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(&cases[i]);
	return h_finish();
}
