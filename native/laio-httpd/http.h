/*
 * http.h - the HTTP/1.x subset laio-httpd speaks, as pure functions: parsing
 * a request head, resolving a single byte range, formatting a response head.
 * No I/O and no allocation, so they are tested on their own
 * (tests/t_httpd_parse.c) and cannot block the event loop.
 */
#ifndef LAIO_HTTPD_HTTP_H
#define LAIO_HTTPD_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Longest request head accepted (request line and headers). */
#define HTTPD_MAX_HEAD 8192
/* Longest decoded path. */
#define HTTPD_MAX_PATH 1024

enum httpd_method { HTTPD_GET, HTTPD_HEAD };

/* How a request head parsed. */
enum httpd_parse {
	HTTPD_PARSE_OK,			/* *req filled, head_len consumed */
	HTTPD_PARSE_INCOMPLETE,		/* no blank line yet: read more */
	HTTPD_PARSE_BAD,		/* 400 */
	HTTPD_PARSE_TOO_LARGE,		/* 431: head longer than HTTPD_MAX_HEAD */
	HTTPD_PARSE_METHOD,		/* 501: a method other than GET or HEAD */
	HTTPD_PARSE_VERSION,		/* 505: not HTTP/1.0 or HTTP/1.1 */
};

/* A byte range as the request gave it (RFC 9110 section 14.1.2). */
struct httpd_range {
	int present;			/* a single bytes= range was given */
	int suffix;			/* bytes=-N: the last `last` bytes */
	uint64_t first;			/* bytes=first-... */
	uint64_t last;			/* ...-last, or N for a suffix */
	int open_ended;			/* bytes=first- */
};

struct httpd_request {
	enum httpd_method method;
	int minor;			/* HTTP/1.<minor> */
	int keep_alive;			/* after the Connection header and version */
	char path[HTTPD_MAX_PATH];	/* decoded, starts with '/', no ".." segment */
	struct httpd_range range;
	size_t head_len;		/* bytes of the head, blank line included */
};

/*
 * Parses the request head at the start of buf[0..len). Only the first head
 * is looked at; bytes after it (a pipelined request) are left for the next
 * call. A request with a body (Content-Length > 0 or Transfer-Encoding) is
 * refused as bad: GET and HEAD carry none here.
 */
enum httpd_parse httpd_parse_request(const char *buf, size_t len, struct httpd_request *req);

/* The result of matching a range against a file of `size` bytes. */
enum httpd_span { HTTPD_SPAN_WHOLE, HTTPD_SPAN_PARTIAL, HTTPD_SPAN_UNSATISFIABLE };

/* Resolves req->range for a file of `size` bytes into [*off, *off + *len). */
enum httpd_span httpd_resolve_range(const struct httpd_range *r, uint64_t size, uint64_t *off, uint64_t *len);

/*
 * Formats a response head into out (cap bytes, NUL-terminated). status is
 * 200, 206, 400, 403, 404, 416, 431, 500, 501 or 505; for 206 and 416 the
 * Content-Range is made from off, len and size. Returns the length, or -1
 * when cap is too small.
 */
int httpd_format_head(char *out, size_t cap, int status, int keep_alive, uint64_t content_length,
		      uint64_t off, uint64_t len, uint64_t size, const char *date);

/* The reason phrase of a status this server sends. */
const char *httpd_reason(int status);

#endif
