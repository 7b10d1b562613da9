/*
 * t_httpd_parse.c - laio-httpd's protocol code (http.c) on its own: request
 * heads good, incomplete and malformed; paths that must not escape the
 * document root; keep-alive by version and Connection; single byte ranges
 * and their resolution against a file size; response heads. Exit 0 pass,
 * 1 fail (native/tests/run, plain and ASan+UBSan).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static int failures;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                   \
		}                                                                     \
	} while (0)

static enum httpd_parse parse(const char *s, struct httpd_request *r)
{
	return httpd_parse_request(s, strlen(s), r);
}

static void heads(void)
{
	struct httpd_request r;
	const char *two = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";

	CHECK(parse("GET /v/a/00001.mp4 HTTP/1.1\r\nHost: h\r\nRange: bytes=0-524287\r\n\r\n", &r) == HTTPD_PARSE_OK);
	CHECK(r.method == HTTPD_GET && r.minor == 1 && r.keep_alive);
	CHECK(strcmp(r.path, "/v/a/00001.mp4") == 0);
	CHECK(r.range.present && r.range.first == 0 && r.range.last == 524287 && !r.range.suffix && !r.range.open_ended);

	/* Pipelined: only the first head is consumed. */
	CHECK(parse(two, &r) == HTTPD_PARSE_OK && strcmp(r.path, "/a") == 0);
	CHECK(httpd_parse_request(two + r.head_len, strlen(two) - r.head_len, &r) == HTTPD_PARSE_OK);
	CHECK(strcmp(r.path, "/b") == 0);

	/* Incomplete heads wait for more bytes; an oversized one is refused. */
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\n", &r) == HTTPD_PARSE_INCOMPLETE);
	CHECK(parse("", &r) == HTTPD_PARSE_INCOMPLETE);
	{
		char *big = malloc(HTTPD_MAX_HEAD + 100);

		memset(big, 'a', HTTPD_MAX_HEAD + 99);
		memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
		big[HTTPD_MAX_HEAD + 99] = 0;
		CHECK(parse(big, &r) == HTTPD_PARSE_TOO_LARGE);
		free(big);
	}

	/* Bare LF line ends and leading empty lines are accepted. */
	CHECK(parse("\r\nGET /x HTTP/1.0\nHost: y\n\n", &r) == HTTPD_PARSE_OK && r.minor == 0 && !r.keep_alive);

	/* Keep-alive: 1.1 unless close, 1.0 only when asked. */
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n", &r) == HTTPD_PARSE_OK && !r.keep_alive);
	CHECK(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r) == HTTPD_PARSE_OK && r.keep_alive);
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: TE, close\r\n\r\n", &r) == HTTPD_PARSE_OK && !r.keep_alive);

	CHECK(parse("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_OK && r.method == HTTPD_HEAD);
	CHECK(parse("GET http://example/v/x?q=1 HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_OK);
	CHECK(strcmp(r.path, "/v/x") == 0);
	CHECK(parse("GET /a%20b HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_OK && strcmp(r.path, "/a b") == 0);
	CHECK(parse("GET /a..b/c.. HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_OK);
}

static void malformed(void)
{
	struct httpd_request r;
	static const char *const bad[] = {
		"GET\r\n\r\n",
		"GET / \r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",			/* no Host */
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1 x\r\nHost: x\r\n\r\n",
		"GET / HTTP/x.1\r\nHost: x\r\n\r\n",
		"GET x HTTP/1.1\r\nHost: x\r\n\r\n",		/* not origin-form */
		"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a/%2e%2e/%2e%2e/etc HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a/.. HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a%00b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a% HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /a%4 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n: empty name\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nRange: bytes=2-3\r\n\r\n",
		"G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		enum httpd_parse p = parse(bad[i], &r);

		if (p != HTTPD_PARSE_BAD) {
			fprintf(stderr, "malformed head %zu parsed as %d: %s\n", i, (int)p, bad[i]);
			failures++;
		}
	}
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_METHOD);
	CHECK(parse("GET / HTTP/2.0\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_VERSION);
	CHECK(parse("GET / HTTP/1.2\r\nHost: x\r\n\r\n", &r) == HTTPD_PARSE_VERSION);
	/* A Content-Length of 0 is no body. */
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", &r) == HTTPD_PARSE_OK);
}

static void ranges(void)
{
	struct httpd_request r;
	uint64_t off, len;

#define RANGE(h) parse("GET / HTTP/1.1\r\nHost: x\r\nRange: " h "\r\n\r\n", &r)
	CHECK(RANGE("bytes=100-") == HTTPD_PARSE_OK && r.range.present && r.range.open_ended);
	CHECK(httpd_resolve_range(&r.range, 1000, &off, &len) == HTTPD_SPAN_PARTIAL && off == 100 && len == 900);
	CHECK(RANGE("bytes=-300") == HTTPD_PARSE_OK && r.range.suffix);
	CHECK(httpd_resolve_range(&r.range, 1000, &off, &len) == HTTPD_SPAN_PARTIAL && off == 700 && len == 300);
	CHECK(httpd_resolve_range(&r.range, 100, &off, &len) == HTTPD_SPAN_PARTIAL && off == 0 && len == 100);
	CHECK(RANGE("bytes=990-5000") == HTTPD_PARSE_OK);
	CHECK(httpd_resolve_range(&r.range, 1000, &off, &len) == HTTPD_SPAN_PARTIAL && off == 990 && len == 10);
	CHECK(RANGE("bytes=1000-1001") == HTTPD_PARSE_OK);
	CHECK(httpd_resolve_range(&r.range, 1000, &off, &len) == HTTPD_SPAN_UNSATISFIABLE);
	CHECK(RANGE("bytes=0-0") == HTTPD_PARSE_OK);
	CHECK(httpd_resolve_range(&r.range, 1000, &off, &len) == HTTPD_SPAN_PARTIAL && off == 0 && len == 1);
	CHECK(httpd_resolve_range(&r.range, 0, &off, &len) == HTTPD_SPAN_UNSATISFIABLE);
	/* Ignored, so the whole file is served: other units, several ranges, nonsense, overflow. */
	static const char *const ignored[] = { "items=0-1", "bytes=0-1,5-6", "bytes=5-1", "bytes=a-b", "bytes=-0", "bytes=-",
					       "bytes=99999999999999999999-", "bytes=1-2-3" };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) {
		char head[256];

		snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: x\r\nRange: %s\r\n\r\n", ignored[i]);
		CHECK(parse(head, &r) == HTTPD_PARSE_OK);
		if (r.range.present) {
			fprintf(stderr, "range \"%s\" was taken\n", ignored[i]);
			failures++;
		}
		CHECK(httpd_resolve_range(&r.range, 1000, &off, &len) == HTTPD_SPAN_WHOLE && off == 0 && len == 1000);
	}
#undef RANGE
}

static void response_heads(void)
{
	char out[512];
	int n = httpd_format_head(out, sizeof(out), 206, 1, 10, 5, 10, 100, "Thu, 01 Jan 1970 00:00:00 GMT");

	CHECK(n > 0 && (size_t)n == strlen(out));
	CHECK(strncmp(out, "HTTP/1.1 206 Partial Content\r\n", 30) == 0);
	CHECK(strstr(out, "\r\nContent-Length: 10\r\n") != NULL);
	CHECK(strstr(out, "\r\nContent-Range: bytes 5-14/100\r\n") != NULL);
	CHECK(strstr(out, "\r\nConnection: keep-alive\r\n") != NULL);
	CHECK(n >= 4 && memcmp(out + n - 4, "\r\n\r\n", 4) == 0);
	n = httpd_format_head(out, sizeof(out), 416, 0, 0, 0, 0, 100, "x");
	CHECK(n > 0 && strstr(out, "Content-Range: bytes */100\r\n") && strstr(out, "Connection: close\r\n"));
	CHECK(httpd_format_head(out, 40, 200, 1, 1, 0, 1, 1, "x") == -1);
}

int main(void)
{
	heads();
	malformed();
	ranges();
	response_heads();
	if (failures) {
		fprintf(stderr, "t_httpd_parse: %d failures\n", failures);
		return 1;
	}
	printf("t_httpd_parse: ok\n");
	return 0;
}
