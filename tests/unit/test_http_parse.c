/*
 * HTTP request parsing: valid heads, smuggling-shaped inputs, chunked
 * bodies. The one parser of the tree: airlockd's API, the gateway and the
 * guest agent frame requests with it (test_ported_agent: what the agent's
 * own parser was tested for before it was deleted).
 */
#include "http/http_parse.h"
#include "common/util.h"
#include "t.h"

static ssize_t
parse(const char *s, struct http_head *h, int *status, char **cause)
{
	return http_parse_head(s, strlen(s), h, status, cause);
}

static void
test_valid(void)
{
	const char *req = "GET /v1/sandboxes?state=running HTTP/1.1\r\nHost: x\r\n"
	    "X-A:  padded  \r\nContent-Length: 5\r\n\r\nhello";
	struct http_head h;
	char *cause = NULL;
	int status;

	CHECK(parse(req, &h, &status, &cause) == (ssize_t)(strlen(req) - 5));
	CHECK_STR(h.method, "GET");
	CHECK_STR(h.target, "/v1/sandboxes?state=running");
	CHECK(h.minor == 1 && h.keep_alive == 1 && h.content_length == 5 && !h.chunked);
	CHECK_STR(http_head_get(&h, "x-a"), "padded");
	http_head_free(&h);
	/* Incomplete: need more. */
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\n", &h, &status, &cause) == 0);
	/* HTTP/1.0 defaults to close. */
	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &h, &status, &cause) > 0 && h.keep_alive == 0);
	http_head_free(&h);
	CHECK(parse("\r\nPOST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	    "Connection: close\r\n\r\n", &h, &status, &cause) > 0);
	CHECK(h.chunked && !h.keep_alive);
	http_head_free(&h);
	CHECK(parse("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n"
	    "Upgrade: websocket\r\n\r\n", &h, &status, &cause) > 0 && h.upgrade);
	http_head_free(&h);
	free(cause);
}

static void
test_rejects(void)
{
	static const struct { const char *req; int status; const char *needle; } cases[] = {
		{ "GET / HTTP/1.1\r\n\r\n", 400, "without Host" },
		{ "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP/1.0" },
		{ "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505, "HTTP/1.0" },
		/* Malformed, not an unsupported version: 400. */
		{ "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", 400, "space in request target" },
		{ "GET /a  HTTP/1.1\r\nHost: x\r\n\r\n", 400, "space in request target" },
		{ "GET / http/1.1\r\nHost: x\r\n\r\n", 400, "HTTP version" },
		{ "GET / HTTP/1.1x\r\nHost: x\r\n\r\n", 400, "HTTP version" },
		{ "GET / HTTP/x.1\r\nHost: x\r\n\r\n", 400, "HTTP version" },
		{ "GET / HTTP/1\r\nHost: x\r\n\r\n", 400, "HTTP version" },
		{ "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "request line" },
		{ "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "method" },
		{ "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, "folding" },
		{ "GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", 400, "header name" },
		{ "GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400, "bare" },
		{ "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both" },
		{ "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "conflicting" },
		{ "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "chunked" },
		{ "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "duplicate Host" },
		{ "GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "target" },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX: a\x7f\r\n\r\n", 400, "header value" },
		{ "GET / HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", 417, "Expect" },
		/* The guest agent's own parser read only the first of these (issue 12). */
		{ "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n", 501, "chunked" },
		{ "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		  "Transfer-Encoding: identity\r\n\r\n", 501, "chunked" },
		{ "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400, "header line" },
	};
	struct http_head h;
	char *cause = NULL;
	int status;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		status = 0;
		CHECK(parse(cases[i].req, &h, &status, &cause) == -1);
		CHECK(status == cases[i].status);
		CHECK_CAUSE(cause, cases[i].needle);
	}
	/* Oversized head. */
	char *big = xmalloc(HTTP_HEAD_MAX + 100);
	memset(big, 'a', HTTP_HEAD_MAX + 99);
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	big[HTTP_HEAD_MAX + 99] = '\0';
	CHECK(parse(big, &h, &status, &cause) == -1 && status == 431);
	free(big);
	free(cause);
}

struct sink {
	char	buf[256];
	size_t	len;
};

static void
sink_cb(void *arg, const char *data, size_t n)
{
	struct sink *s = arg;

	if (s->len + n < sizeof(s->buf)) {
		memcpy(s->buf + s->len, data, n);
		s->len += n;
	}
}

static void
test_chunked(void)
{
	const char *body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
	struct http_head h = { .chunked = 1 };
	struct http_body b;
	struct sink s = { .len = 0 };
	char *cause = NULL;
	size_t consumed, i, pos = 0;
	enum http_body_state st = HTTP_BODY_MORE;

	/* Feed one byte at a time: the decoder must handle every split point. */
	http_body_init(&b, &h, 0);
	for (i = 0; i < strlen(body) && st == HTTP_BODY_MORE; i++) {
		st = http_body_feed(&b, body + i, 1, &consumed, sink_cb, &s, &cause);
		pos += consumed;
	}
	CHECK(st == HTTP_BODY_DONE);
	CHECK(s.len == 11 && memcmp(s.buf, "hello world", 11) == 0);
	CHECK(strcmp(body + pos, "NEXT") == 0);

	/* Whole buffer at once leaves the next request's bytes unconsumed. */
	memset(&s, 0, sizeof(s));
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, body, strlen(body), &consumed, sink_cb, &s, &cause) == HTTP_BODY_DONE);
	CHECK(strcmp(body + consumed, "NEXT") == 0);

	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "zz\r\n", 4, &consumed, sink_cb, &s, &cause) == HTTP_BODY_ERROR);
	CHECK_CAUSE(cause, "chunk size");
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "3\r\nabcX", 7, &consumed, sink_cb, &s, &cause) == HTTP_BODY_ERROR);
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "3\nabc", 5, &consumed, sink_cb, &s, &cause) == HTTP_BODY_ERROR);
	/*
	 * A proxy passes chunk lines on as they are: a bare CR (a line end to
	 * a lenient upstream) or another control byte in an extension or a
	 * trailer would let the two parsers disagree where the body ends.
	 */
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "3;a\rb\r\nabc\r\n", 12, &consumed, sink_cb, &s, &cause) ==
	    HTTP_BODY_ERROR);
	CHECK_CAUSE(cause, "chunk line");
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "0\r\nX: a\rb\r\n\r\n", 13, &consumed, sink_cb, &s, &cause) ==
	    HTTP_BODY_ERROR);
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "3;a\0b\r\nabc\r\n", 12, &consumed, sink_cb, &s, &cause) ==
	    HTTP_BODY_ERROR);
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "3;a=\"b\tc\"\r\nabc\r\n0\r\n\r\n", 21, &consumed, sink_cb,
	    &s, &cause) == HTTP_BODY_DONE);
	/* Size limit. */
	http_body_init(&b, &h, 4);
	CHECK(http_body_feed(&b, "5\r\nhello\r\n", 10, &consumed, sink_cb, &s, &cause) == HTTP_BODY_ERROR);
	CHECK_CAUSE(cause, "too large");
	free(cause);
}

static void
test_length_body(void)
{
	struct http_head h = { .content_length = 3 };
	struct http_body b;
	struct sink s = { .len = 0 };
	size_t consumed;
	char *cause = NULL;

	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "ab", 2, &consumed, sink_cb, &s, &cause) == HTTP_BODY_MORE);
	CHECK(http_body_feed(&b, "cdef", 4, &consumed, sink_cb, &s, &cause) == HTTP_BODY_DONE);
	CHECK(consumed == 1 && s.len == 3);
}

static void
test_target(void)
{
	struct http_query q;
	char *path, *query, *cause = NULL;

	CHECK(http_split_target("/v1/sandboxes/a%20b/files?path=%2Ftmp%2Fx+y&depth=2", &path, &query) == 0);
	CHECK_STR(path, "/v1/sandboxes/a b/files");
	CHECK(http_query_parse(query, &q, &cause) == 0);
	CHECK(q.n == 2);
	CHECK_STR(http_query_value(&q, "path"), "/tmp/x y");
	CHECK_STR(http_query_value(&q, "depth"), "2");
	CHECK(http_query_value(&q, "dep") == NULL);
	http_query_free(&q);
	free(path);
	free(query);
	CHECK(http_split_target("/a%00b", &path, &query) == -1);
	CHECK(http_split_target("/a%4", &path, &query) == -1);
	CHECK(http_split_target("*", &path, &query) == -1);
	CHECK(http_split_target("/a+b", &path, &query) == 0);
	CHECK_STR(path, "/a+b");
	free(path);
	free(query);
	free(cause);
}

/* The strict query parser: every malformed value is an error naming it, never "absent". */
static void
test_query(void)
{
	static const struct { const char *query, *needle, *name; } bad[] = {
		{ "sandbox=ab%zz", "sandbox: bad percent-encoding", "sandbox" },
		{ "sandbox=%00", "sandbox: bad percent-encoding", "sandbox" },
		{ "sandbox=ab%4", "sandbox: bad percent-encoding", "sandbox" },
		{ "path=%ff", "path: not valid UTF-8", "path" },
		{ "path=%c3%28", "path: not valid UTF-8", "path" },
		{ "path=%ed%a0%80", "path: not valid UTF-8", "path" },	/* a surrogate */
		{ "path=%c0%af", "path: not valid UTF-8", "path" },	/* an overlong '/' */
		{ "a=1&a=2", "a: query parameter given more than once", "a" },
		{ "a=1&a", "a: query parameter given more than once", "a" },
		{ "=1", "without a name", NULL },
		{ "%zz=1", "parameter name", NULL },
		{ "%ff=1", "parameter name", NULL },
	};
	struct http_query q;
	char *cause = NULL, many[HTTP_QUERY_PARAMS_MAX * 8 + 8];
	size_t i, o = 0;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(http_query_parse(bad[i].query, &q, &cause) == -1);
		CHECK_CAUSE(cause, bad[i].needle);
		CHECK(q.n == 0 && q.params == NULL);
		if (bad[i].name != NULL)
			CHECK_STR(q.bad, bad[i].name);
		else
			CHECK(q.bad == NULL);
		http_query_free(&q);
	}
	CHECK(http_query_parse("", &q, &cause) == 0 && q.n == 0);
	http_query_free(&q);
	/* Empty segments are nothing; a bare name is ""; '+' is a space; UTF-8 passes. */
	CHECK(http_query_parse("&recursive&&n=+1&p=%C3%A9t%C3%A9&", &q, &cause) == 0);
	CHECK(q.n == 3);
	CHECK_STR(http_query_value(&q, "recursive"), "");
	CHECK_STR(http_query_value(&q, "n"), " 1");
	CHECK_STR(http_query_value(&q, "p"), "\xc3\xa9t\xc3\xa9");
	http_query_free(&q);
	for (i = 0; i <= HTTP_QUERY_PARAMS_MAX; i++)
		o += (size_t)snprintf(many + o, sizeof(many) - o, "p%zu=&", i);
	CHECK(http_query_parse(many, &q, &cause) == -1);
	CHECK_CAUSE(cause, "more than");
	http_query_free(&q);
	free(cause);
}

/* The one percent-encoder (API → agent paths, CLI → API paths and ids). */
static void
test_pct_encode(void)
{
	static const char *const in[] = { "/tmp/a b", "..", "x/../keys", "\xc3\xa9%+?#&=",
	    "\x01\x7f\xff", "" };
	char *e, *d;
	size_t i;

	CHECK_STR(e = http_pct_encode("/tmp/a b/é~-._", "-._~/"), "/tmp/a%20b/%C3%A9~-._");
	free(e);
	CHECK_STR(e = http_pct_encode("../keys", "-_~"), "%2E%2E%2Fkeys");
	free(e);
	CHECK_STR(e = http_pct_encode("a+b&c=d?e#f%", "-._~/"), "a%2Bb%26c%3Dd%3Fe%23f%25");
	free(e);
	/* What the parser decodes is what was encoded, whatever the bytes. */
	for (i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		e = http_pct_encode(in[i], "-._~/");
		CHECK(strspn(e, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789-._~/%") == strlen(e));
		CHECK(http_pct_decode(e, strlen(e), &d) == 0);
		CHECK_STR(d, in[i]);
		free(d);
		free(e);
	}
}

/* What the agent's deleted parser was tested for, against the shared one. */
static void
test_ported_agent(void)
{
	struct http_head h;
	char *cause = NULL, *path = NULL, *query = NULL;
	struct http_query q;
	int status = 0;
	size_t o, i;
	char big[HTTP_HEADERS_MAX * 8 + 64];
	static const char nul[] = "GET / HTTP/1.1\r\nHost: x\r\nA: \0\r\n\r\n";

	/* An upload head: framing, keep-alive, a header value trimmed, the query decoded. */
	CHECK(parse("POST /files?path=%2Fhome%2Fuser%2Fa.txt&username=root HTTP/1.1\r\n"
	    "Host: x\r\nTransfer-Encoding: chunked\r\nContent-Type:  multipart/form-data; b=1  \r\n"
	    "\r\n", &h, &status, &cause) > 0);
	CHECK(h.chunked && h.keep_alive && h.content_length == -1);
	CHECK_STR(http_head_get(&h, "content-type"), "multipart/form-data; b=1");
	CHECK(http_split_target(h.target, &path, &query) == 0);
	CHECK_STR(path, "/files");
	CHECK(http_query_parse(query, &q, &cause) == 0);
	CHECK_STR(http_query_value(&q, "path"), "/home/user/a.txt");
	CHECK_STR(http_query_value(&q, "username"), "root");
	CHECK(http_query_value(&q, "user") == NULL);
	http_query_free(&q);
	free(path);
	free(query);
	http_head_free(&h);
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &h, &status,
	    &cause) > 0 && !h.keep_alive);
	http_head_free(&h);
	/* A NUL in a header value, and one header too many. */
	CHECK(http_parse_head(nul, sizeof(nul) - 1, &h, &status, &cause) == -1 && status == 400);
	o = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (i = 0; i < HTTP_HEADERS_MAX; i++)
		o += (size_t)sprintf(big + o, "A: b\r\n");
	sprintf(big + o, "\r\n");
	CHECK(parse(big, &h, &status, &cause) == -1 && status == 431);
	/* Percent-escapes in the path: bad ones and %00 refused. */
	CHECK(http_split_target("/%zz", &path, &query) == -1);
	CHECK(http_split_target("/%00", &path, &query) == -1);
	CHECK(http_split_target("x", &path, &query) == -1);
	free(cause);
}

/* Chunk sizes that overflow, and a chunk-size line longer than the decoder keeps. */
static void
test_chunk_limits(void)
{
	struct http_head h = { .chunked = 1 };
	char line[HTTP_CHUNK_LINE_MAX + 10], *cause = NULL;
	struct sink s = { .len = 0 };
	struct http_body b;
	size_t consumed;

	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, "fffffffffffffffff\r\n", 19, &consumed, sink_cb, &s, &cause) ==
	    HTTP_BODY_ERROR);
	memset(line, '1', sizeof(line));
	http_body_init(&b, &h, 0);
	CHECK(http_body_feed(&b, line, sizeof(line), &consumed, sink_cb, &s, &cause) ==
	    HTTP_BODY_ERROR);
	free(cause);
}

int
main(void)
{
	T_RUN(test_valid);
	T_RUN(test_rejects);
	T_RUN(test_chunked);
	T_RUN(test_length_body);
	T_RUN(test_target);
	T_RUN(test_query);
	T_RUN(test_pct_encode);
	T_RUN(test_ported_agent);
	T_RUN(test_chunk_limits);
	return t_done();
}
