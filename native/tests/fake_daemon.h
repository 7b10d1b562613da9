/*
 * fake_daemon.h - a small, scriptable stand-in for `libception daemon`, used
 * by the shim's tests (in-process as a thread, or as the `fakedaemon`
 * program for the shell tests).
 *
 * It speaks protocol.h faithfully in "normal" behaviour (FETCH reads the range
 * with pread, CHECK answers from cachestat with the daemon's own rights) and
 * can misbehave on purpose: never reply, reply late, reply with garbage or a
 * wrong sequence number, close the connection, or pass back a stray fd. Every
 * request is recorded (op, flags, range, peer pid, connection number) so tests
 * can assert what the shim sent.
 */
#ifndef LCP_FAKE_DAEMON_H
#define LCP_FAKE_DAEMON_H

#include <stdint.h>
#include <sys/types.h>

enum fake_behaviour {
	FAKE_NORMAL = 0,
	FAKE_NEVER_REPLY,  /* read requests, never answer */
	FAKE_SLOW,         /* answer after delay_ms */
	FAKE_GARBAGE,      /* answer with a wrong magic */
	FAKE_WRONG_SEQ,    /* answer with seq + 1000 */
	FAKE_CLOSE,        /* close the connection on every request */
	FAKE_STRAY_FD,     /* a correct reply carrying an extra fd */
	FAKE_LATE_FIRST,   /* the daemon's very first reply comes after delay_ms */
	FAKE_QUEUE,        /* one request at a time over all connections, delay_ms each */
	FAKE_SLOW_LATER,   /* the first reply at once, every later one after delay_ms */
};

struct fake_record {
	uint16_t op;
	uint32_t flags;
	uint32_t call;
	uint64_t seq;
	uint64_t offset;
	uint64_t length;
	pid_t pid;      /* SO_PEERCRED of the connection */
	uid_t uid;
	int conn;       /* connection number, from 1 */
	int had_fd;
	int regular;   /* the passed fd was a regular file */
	int resident;   /* CHECK/FETCH: range was resident on arrival */
};

struct fake_daemon;

struct fake_daemon *fake_daemon_start(const char *path, enum fake_behaviour behaviour, int delay_ms);
void fake_daemon_stop(struct fake_daemon *daemon);
/* Number of requests recorded; copies up to max of them into out. */
int fake_daemon_records(struct fake_daemon *daemon, struct fake_record *out, int max);
int fake_daemon_connections(struct fake_daemon *daemon);
void fake_daemon_reset(struct fake_daemon *daemon);
/* Appends one line per request to this file (for the shell tests). */
void fake_daemon_log_to(struct fake_daemon *daemon, int fd);
int fake_behaviour_parse(const char *name, enum fake_behaviour *out);

#endif
