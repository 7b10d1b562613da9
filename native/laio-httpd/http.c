/*
 * http.c - request-head parsing, range resolution and response heads for
 * laio-httpd (see http.h). Strict where a lenient reading could serve the
 * wrong bytes (ranges, paths, bodies), lenient where RFC 9112 allows it
 * (bare LF line ends, any case in header names).
 */
#include "http.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* tchar of RFC 9110 section 5.6.2. */
static int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Length of the head (through its blank line) in buf[0..len), or 0. */
static size_t head_length(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		/* A line end; the head ends when the next line is empty. */
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/*
 * Decodes the request target's path into out: percent-decoding, query and
 * fragment dropped, absolute-form's scheme and authority dropped. Refuses
 * NUL, a bad escape, a ".." segment and anything not starting with '/'.
 */
static int decode_path(const char *t, size_t n, char *out)
{
	size_t o = 0;

	if (n >= 7 && strncasecmp(t, "http://", 7) == 0) {
		const char *slash = memchr(t + 7, '/', n - 7);

		if (!slash)
			return -1;
		n -= (size_t)(slash - t);
		t = slash;
	}
	if (n == 0 || t[0] != '/')
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];

		if (c == '?' || c == '#')
			break;
		if (c == '%') {
			int hi, lo;

			if (i + 2 >= n)
				return -1;
			hi = hexval((unsigned char)t[i + 1]);
			lo = hexval((unsigned char)t[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		if (c == 0 || c < 0x20 || c == 0x7f)
			return -1;
		if (o + 1 >= HTTPD_MAX_PATH)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = 0;
	/* No ".." segment anywhere: /../x, /a/.., /a/../b. */
	for (const char *p = out; (p = strstr(p, "..")) != NULL; p += 2) {
		int starts = p > out && p[-1] == '/';
		int ends = p[2] == 0 || p[2] == '/';

		if (starts && ends)
			return -1;
	}
	return 0;
}

/* Parses a decimal u64 of digits only; -1 on overflow or no digit. */
static int parse_u64(const char *s, const char *end, uint64_t *v)
{
	uint64_t x = 0;

	if (s == end)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return 0;
}

/*
 * The Range header's value. A syntactically valid single bytes= range sets
 * r->present; several ranges or another unit are ignored (the whole file is
 * served, which RFC 9110 allows); a malformed bytes= value is also ignored,
 * as the RFC requires of an invalid Range.
 */
static void parse_range(const char *v, const char *end, struct httpd_range *r)
{
	const char *dash;

	memset(r, 0, sizeof(*r));
	if (end - v < 6 || strncasecmp(v, "bytes=", 6) != 0)
		return;
	v += 6;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	if (memchr(v, ',', (size_t)(end - v)))
		return;
	dash = memchr(v, '-', (size_t)(end - v));
	if (!dash)
		return;
	if (dash == v) {
		if (parse_u64(dash + 1, end, &r->last) < 0 || r->last == 0)
			return;
		r->suffix = 1;
	} else {
		if (parse_u64(v, dash, &r->first) < 0)
			return;
		if (dash + 1 == end) {
			r->open_ended = 1;
		} else {
			if (parse_u64(dash + 1, end, &r->last) < 0 || r->last < r->first)
				return;
		}
	}
	r->present = 1;
}

/* Does the comma-separated value contain `token` (case-insensitively)? */
static int has_token(const char *v, const char *end, const char *token)
{
	size_t tl = strlen(token);

	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v));
		const char *e = comma ? comma : end;

		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		const char *te = e;
		while (te > v && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		if ((size_t)(te - v) == tl && strncasecmp(v, token, tl) == 0)
			return 1;
		v = comma ? comma + 1 : end;
	}
	return 0;
}

enum httpd_parse httpd_parse_request(const char *buf, size_t len, struct httpd_request *req)
{
	size_t hl = head_length(buf, len < HTTPD_MAX_HEAD ? len : HTTPD_MAX_HEAD);
	const char *p, *end, *eol, *sp1, *sp2;
	int have_host = 0, conn_close = 0, conn_keep = 0;

	memset(req, 0, sizeof(*req));
	if (hl == 0)
		return len >= HTTPD_MAX_HEAD ? HTTPD_PARSE_TOO_LARGE : HTTPD_PARSE_INCOMPLETE;
	req->head_len = hl;
	p = buf;
	end = buf + hl;
	/* RFC 9112 section 2.2: ignore empty lines before the request line. */
	while (p < end && (*p == '\r' || *p == '\n'))
		p++;
	if (p == end)
		return HTTPD_PARSE_BAD;
	eol = memchr(p, '\n', (size_t)(end - p));
	{
		const char *le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;

		sp1 = memchr(p, ' ', (size_t)(le - p));
		if (!sp1 || sp1 == p)
			return HTTPD_PARSE_BAD;
		for (const char *m = p; m < sp1; m++)
			if (!is_tchar((unsigned char)*m))
				return HTTPD_PARSE_BAD;
		sp2 = memchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1));
		if (!sp2 || sp2 == sp1 + 1)
			return HTTPD_PARSE_BAD;
		if (le - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/", 5) != 0 || sp2[7] != '.' ||
		    sp2[6] < '0' || sp2[6] > '9' || sp2[8] < '0' || sp2[8] > '9')
			return HTTPD_PARSE_BAD;
		if (sp2[6] != '1' || (sp2[8] != '0' && sp2[8] != '1'))
			return HTTPD_PARSE_VERSION;
		req->minor = sp2[8] - '0';
		if (sp1 - p == 3 && memcmp(p, "GET", 3) == 0)
			req->method = HTTPD_GET;
		else if (sp1 - p == 4 && memcmp(p, "HEAD", 4) == 0)
			req->method = HTTPD_HEAD;
		else
			return HTTPD_PARSE_METHOD;
		for (const char *t = sp1 + 1; t < sp2; t++)
			if ((unsigned char)*t <= 0x20 || *t == 0x7f)
				return HTTPD_PARSE_BAD;
		if (decode_path(sp1 + 1, (size_t)(sp2 - sp1 - 1), req->path) < 0)
			return HTTPD_PARSE_BAD;
	}
	for (p = eol + 1; p < end; p = eol + 1) {
		const char *le, *colon, *v, *ve;

		eol = memchr(p, '\n', (size_t)(end - p));
		le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
		if (le == p)
			break; /* the blank line */
		if (*p == ' ' || *p == '\t')
			return HTTPD_PARSE_BAD; /* obsolete line folding */
		colon = memchr(p, ':', (size_t)(le - p));
		if (!colon || colon == p)
			return HTTPD_PARSE_BAD;
		for (const char *c = p; c < colon; c++)
			if (!is_tchar((unsigned char)*c))
				return HTTPD_PARSE_BAD;
		v = colon + 1;
		while (v < le && (*v == ' ' || *v == '\t'))
			v++;
		ve = le;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		for (const char *c = v; c < ve; c++)
			if (*c == 0 || (*c == '\r'))
				return HTTPD_PARSE_BAD;
#define NAME_IS(s) ((size_t)(colon - p) == sizeof(s) - 1 && strncasecmp(p, s, sizeof(s) - 1) == 0)
		if (NAME_IS("Host")) {
			if (have_host)
				return HTTPD_PARSE_BAD;
			have_host = 1;
		} else if (NAME_IS("Connection")) {
			conn_close |= has_token(v, ve, "close");
			conn_keep |= has_token(v, ve, "keep-alive");
		} else if (NAME_IS("Range")) {
			if (req->range.present)
				return HTTPD_PARSE_BAD;
			parse_range(v, ve, &req->range);
		} else if (NAME_IS("Content-Length")) {
			uint64_t n;

			if (parse_u64(v, ve, &n) < 0 || n > 0)
				return HTTPD_PARSE_BAD;
		} else if (NAME_IS("Transfer-Encoding")) {
			return HTTPD_PARSE_BAD;
		}
#undef NAME_IS
	}
	/* RFC 9112 section 3.2: a 1.1 request without Host is bad. */
	if (req->minor == 1 && !have_host)
		return HTTPD_PARSE_BAD;
	req->keep_alive = req->minor == 1 ? !conn_close : (conn_keep && !conn_close);
	return HTTPD_PARSE_OK;
}

enum httpd_span httpd_resolve_range(const struct httpd_range *r, uint64_t size, uint64_t *off, uint64_t *len)
{
	if (!r->present) {
		*off = 0;
		*len = size;
		return HTTPD_SPAN_WHOLE;
	}
	if (r->suffix) {
		if (size == 0)
			return HTTPD_SPAN_UNSATISFIABLE;
		*len = r->last < size ? r->last : size;
		*off = size - *len;
		return HTTPD_SPAN_PARTIAL;
	}
	if (r->first >= size)
		return HTTPD_SPAN_UNSATISFIABLE;
	*off = r->first;
	*len = (r->open_ended || r->last >= size ? size - 1 : r->last) - r->first + 1;
	return HTTPD_SPAN_PARTIAL;
}

const char *httpd_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 206: return "Partial Content";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

int httpd_format_head(char *out, size_t cap, int status, int keep_alive, uint64_t content_length,
		      uint64_t off, uint64_t len, uint64_t size, const char *date)
{
	char range[96] = "";
	int n;

	if (status == 206)
		snprintf(range, sizeof(range), "Content-Range: bytes %llu-%llu/%llu\r\n", (unsigned long long)off,
			 (unsigned long long)(off + len - 1), (unsigned long long)size);
	else if (status == 416)
		snprintf(range, sizeof(range), "Content-Range: bytes */%llu\r\n", (unsigned long long)size);
	n = snprintf(out, cap,
		     "HTTP/1.1 %d %s\r\n"
		     "Server: laio-httpd\r\n"
		     "Date: %s\r\n"
		     "Content-Type: %s\r\n"
		     "Content-Length: %llu\r\n"
		     "%s"
		     "%s"
		     "Connection: %s\r\n"
		     "\r\n",
		     status, httpd_reason(status), date, status == 200 || status == 206 ? "application/octet-stream" : "text/plain",
		     (unsigned long long)content_length, status == 200 || status == 206 ? "Accept-Ranges: bytes\r\n" : "",
		     range, keep_alive ? "keep-alive" : "close");
	if (n < 0 || (size_t)n >= cap)
		return -1;
	return n;
}
