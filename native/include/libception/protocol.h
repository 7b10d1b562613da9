/*
 * libception/protocol.h - the wire protocol between Deception (the LD_PRELOAD
 * shim) and Reception (the `libception daemon`).
 *
 * This header is the source of truth. The Rust mirror lives in
 * crates/libception-proto and a test there compiles a C program against this
 * header to prove that sizes, offsets and constants agree.
 *
 * Transport: one AF_UNIX SOCK_SEQPACKET connection per client thread. Every
 * message is exactly one datagram holding one struct below, little-endian,
 * no padding (all fields are naturally aligned; the static asserts pin it).
 *
 *   client                                   daemon
 *   lcp_request + SCM_RIGHTS(fd)   ---->     (FETCH, CHECK: exactly one fd,
 *                                              a regular file)
 *                                  <----     lcp_reply (same seq)
 *   lcp_request (STATS, no fd)     ---->
 *                                  <----     lcp_reply, payload_len = N
 *                                  <----     one datagram of N bytes of JSON
 *
 * Replies come in request order on a connection; a client has at most one
 * request outstanding per connection. The daemon closes the passed fd once it
 * is done with it; the client keeps its own descriptor.
 *
 * The daemon treats every datagram as hostile. A message of the wrong size,
 * magic or version, with reserved bits set, with no fd or more than one, or an
 * fd that is not a regular file gets a reply with a negative status (when the
 * header is readable enough to echo seq) or a closed connection, never a crash.
 */
#ifndef LIBCEPTION_PROTOCOL_H
#define LIBCEPTION_PROTOCOL_H

#include <stdint.h>

/*
 * Version 2 added lcp_reply.resident_end (the reply grew from 40 to 48
 * bytes). The daemon still accepts version 1 requests and answers them with
 * a version 1 reply (the first 40 bytes, resident_end left out), so shims
 * loaded before an upgrade keep working; a version 2 shim accepts only
 * version 2 replies.
 */
#define LCP_PROTO_VERSION 2
#define LCP_PROTO_VERSION_MIN 1

/* "LCPQ" and "LCPR" as little-endian u32. */
#define LCP_REQUEST_MAGIC 0x5150434cu
#define LCP_REPLY_MAGIC 0x5250434cu

/* Environment variable and default path of the daemon's socket. */
#define LCP_SOCKET_ENV "LIBCEPTION_SOCKET"
#define LCP_SOCKET_DEFAULT "/run/libception.sock"

/* Largest datagram either side ever needs to receive for a fixed struct. */
#define LCP_MAX_MESSAGE 64

enum lcp_op {
	/*
	 * Make [offset, offset+length) of the passed file resident. The daemon
	 * answers at once if it already is; otherwise it queues the read on the
	 * file's disk, extends it to the prefetch size (unless
	 * LCP_REQ_NO_PREFETCH), waits for the data and then replies.
	 */
	LCP_OP_FETCH = 1,
	/*
	 * Report whether [offset, offset+length) of the passed file is resident,
	 * using the daemon's rights (for clients whose own check cannot be
	 * trusted). No I/O is done.
	 */
	LCP_OP_CHECK = 2,
	/* Ask for the daemon's counters as JSON. No fd. */
	LCP_OP_STATS = 3,
};

/* lcp_request.flags */
enum lcp_request_flags {
	/* Read exactly the requested range (serialize-only mode). */
	LCP_REQ_NO_PREFETCH = 1u << 0,
};
#define LCP_REQ_FLAGS_KNOWN (LCP_REQ_NO_PREFETCH)

/* lcp_request.call: which interposed function caused the request (stats). */
enum lcp_call {
	LCP_CALL_OTHER = 0,
	LCP_CALL_READ = 1,     /* read, pread*, readv, preadv* */
	LCP_CALL_SENDFILE = 2, /* sendfile, sendfile64 */
	LCP_CALL_MMAP = 3,     /* mmap, mmap64 of a regular file */
};

struct lcp_request {
	uint32_t magic;    /* LCP_REQUEST_MAGIC */
	uint16_t version;  /* LCP_PROTO_VERSION */
	uint16_t op;       /* enum lcp_op */
	uint32_t flags;    /* enum lcp_request_flags; unknown bits are an error */
	uint32_t call;     /* enum lcp_call; informational */
	uint64_t seq;      /* chosen by the client, echoed in the reply */
	uint64_t offset;   /* byte offset in the file */
	uint64_t length;   /* bytes; 0 is valid and trivially resident */
	uint32_t tid;      /* caller's thread id; informational */
	uint32_t reserved; /* must be 0 */
};

/* lcp_reply.flags */
enum lcp_reply_flags {
	/* The whole range was resident when the daemon looked. */
	LCP_REP_RESIDENT = 1u << 0,
	/* The daemon read from the file for this request. */
	LCP_REP_READ = 1u << 1,
	/* The request waited on a read already queued or in flight. */
	LCP_REP_JOINED = 1u << 2,
};

struct lcp_reply {
	uint32_t magic;       /* LCP_REPLY_MAGIC */
	uint16_t version;     /* LCP_PROTO_VERSION */
	uint16_t op;          /* echoed; 0 if the request was unreadable */
	uint64_t seq;         /* echoed; 0 if the request was unreadable */
	int32_t status;       /* 0, or a negative errno (EPROTO, EINVAL, EBADF...) */
	uint32_t flags;       /* enum lcp_reply_flags */
	uint64_t bytes_read;  /* bytes the daemon read from the file for this */
	uint64_t payload_len; /* STATS: size of the JSON datagram that follows */
	/*
	 * FETCH and CHECK answered with status 0: 0, or the end (exclusive byte
	 * offset) of a range from the request's offset that the daemon knew
	 * resident when it replied - what it just read, or what it checked with
	 * its own rights - reaching past the requested range by up to the
	 * prefetch size. A hint about the page cache for the client's
	 * residency window: pages may be evicted at any time after. Always 0 for
	 * a peer that may not learn residency (same rule as LCP_REP_RESIDENT).
	 */
	uint64_t resident_end;
};

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(struct lcp_request) == 48, "lcp_request is 48 bytes");
_Static_assert(sizeof(struct lcp_reply) == 48, "lcp_reply is 48 bytes");
#endif

#endif /* LIBCEPTION_PROTOCOL_H */
