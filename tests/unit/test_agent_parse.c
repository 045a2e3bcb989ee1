/*
 * The agent's parsers on hostile input: HTTP request heads (framing
 * ambiguities, limits), chunked bodies, percent-decoding, multipart bodies
 * split at every byte, Connect envelopes, base64, envd path rules.
 */
#include <string.h>

#include <event2/buffer.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_http.h"
#include "guest/agent/agent_multipart.h"
#include "common/util.h"
#include "t.h"

/* Unused here, but agent_api.o (path_resolve) refers to them. */
struct agent ag;
void alog(const char *fmt, ...) { (void)fmt; }
void agent_poweroff(const char *why) { (void)why; }
uint64_t agent_now_ns(void) { return 0; }
void proc_route(struct http_conn *hc, const char *m) { (void)hc; (void)m; }
void fs_route(struct http_conn *hc, const char *m) { (void)hc; (void)m; }
void files_route(struct http_conn *hc, const struct http_req *r) { (void)hc; (void)r; }

static int
parse(const char *head, struct http_req *req, int *status, const char **err)
{
	return http_parse_head(head, strlen(head), req, status, err);
}

static void
test_http_head(void)
{
	struct http_req req;
	const char *err = NULL;
	int status;
	char *v;

	memset(&req, 0, sizeof(req));
	CHECK(parse("POST /files?path=%2Fhome%2Fuser%2Fa.txt&username=root HTTP/1.1\r\n"
	    "Host: x\r\nTransfer-Encoding: chunked\r\nContent-Type:  multipart/form-data; b=1  \r\n\r\n",
	    &req, &status, &err) == 0);
	CHECK_STR(req.method, "POST");
	CHECK_STR(req.path, "/files");
	CHECK(req.chunked && req.keepalive && req.content_length == -1);
	CHECK_STR(http_req_header(&req, "content-type"), "multipart/form-data; b=1");
	v = http_query_get(req.query, "path");
	CHECK_STR(v, "/home/user/a.txt");
	free(v);
	v = http_query_get(req.query, "username");
	CHECK_STR(v, "root");
	free(v);
	CHECK(http_query_get(req.query, "user") == NULL);

	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &req, &status, &err) == 0 && !req.keepalive);
	CHECK(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &req, &status, &err) == 0 &&
	    !req.keepalive);
	CHECK(parse("GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", &req,
	    &status, &err) == 0 && req.content_length == 5);
	/* Request smuggling shapes and garbage. */
	CHECK(parse("GET / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", &req,
	    &status, &err) == -1 && status == 400);
	CHECK(parse("GET / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	    &req, &status, &err) == -1 && status == 400);
	CHECK(parse("GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &req, &status,
	    &err) == -1 && status == 501);
	CHECK(parse("GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", &req,
	    &status, &err) == -1);
	CHECK(parse("GET / HTTP/2.0\r\n\r\n", &req, &status, &err) == -1 && status == 505);
	CHECK(parse("GET /a b HTTP/1.1\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET x HTTP/1.1\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("G(T / HTTP/1.1\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET / HTTP/1.1\r\n folded\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET / HTTP/1.1\r\nNoColon\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET /%zz HTTP/1.1\r\n\r\n", &req, &status, &err) == -1);
	CHECK(parse("GET /%00 HTTP/1.1\r\n\r\n", &req, &status, &err) == -1);
	CHECK(http_parse_head("GET / HTTP/1.1\r\nA: \0\r\n\r\n", 23, &req, &status, &err) == -1);
	{
		char big[HTTP_MAX_HEADERS * 8 + 64];
		size_t o = (size_t)sprintf(big, "GET / HTTP/1.1\r\n");

		for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
			o += (size_t)sprintf(big + o, "A: b\r\n");
		sprintf(big + o, "\r\n");
		CHECK(parse(big, &req, &status, &err) == -1 && status == 431);
	}
	http_req_clear(&req);
	free(req.buf);
}

static int
chunked(const char *in, size_t inlen, size_t step, char *out, size_t *outlen)
{
	struct http_chunked c;
	struct evbuffer *ib = evbuffer_new(), *ob = evbuffer_new();
	const char *err = NULL;
	size_t off = 0;
	int r = 0;

	memset(&c, 0, sizeof(c));
	while (off < inlen && r == 0) {
		size_t n = inlen - off < step ? inlen - off : step;

		evbuffer_add(ib, in + off, n);
		off += n;
		r = http_chunked_step(&c, ib, ob, &err);
	}
	*outlen = evbuffer_get_length(ob);
	evbuffer_remove(ob, out, *outlen);
	evbuffer_free(ib);
	evbuffer_free(ob);
	return r;
}

static void
test_http_chunked(void)
{
	const char *ok = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n";
	char out[64];
	size_t len, step;

	for (step = 1; step <= strlen(ok); step++) {
		CHECK(chunked(ok, strlen(ok), step, out, &len) == 1);
		CHECK(len == 11 && memcmp(out, "hello world", 11) == 0);
	}
	CHECK(chunked("zz\r\n", 4, 4, out, &len) == -1);
	CHECK(chunked("5\r\nhelloXX", 10, 10, out, &len) == -1);
	CHECK(chunked("fffffffffffffffff\r\n", 19, 19, out, &len) == -1);
	{
		char longline[HTTP_MAX_LINE + 10];

		memset(longline, '1', sizeof(longline));
		CHECK(chunked(longline, sizeof(longline), sizeof(longline), out, &len) == -1);
	}
}

struct mp_result {
	char	names[4][128];
	char	files[4][128];
	char	data[4][128];
	size_t	lens[4];
	int	n, ended;
};

static int
mr_begin(void *arg, const char *name, const char *filename)
{
	struct mp_result *r = arg;

	if (r->n == 4)
		return -1;
	snprintf(r->names[r->n], 128, "%s", name);
	snprintf(r->files[r->n], 128, "%s", filename != NULL ? filename : "");
	r->lens[r->n] = 0;
	return 0;
}

static int
mr_data(void *arg, const void *d, size_t len)
{
	struct mp_result *r = arg;

	if (r->lens[r->n] + len > 127)
		return -1;
	memcpy(r->data[r->n] + r->lens[r->n], d, len);
	r->lens[r->n] += len;
	return 0;
}

static int
mr_end(void *arg)
{
	struct mp_result *r = arg;

	r->data[r->n][r->lens[r->n]] = '\0';
	r->n++;
	r->ended++;
	return 0;
}

static const struct mp_callbacks mr_cb = { mr_begin, mr_data, mr_end };

static int
mp_run(const char *body, size_t step, struct mp_result *r)
{
	struct mp_parser mp;
	struct evbuffer *in = evbuffer_new();
	size_t off = 0, len = strlen(body);
	int rc = 0;

	memset(r, 0, sizeof(*r));
	CHECK(mp_init(&mp, "----formdata-undici-013289807675", &mr_cb, r) == 0);
	while (off < len && rc == 0) {
		size_t n = len - off < step ? len - off : step;

		evbuffer_add(in, body + off, n);
		off += n;
		rc = mp_feed(&mp, in);
	}
	if (rc == 0 && !mp_done(&mp))
		rc = 1;
	mp_free(&mp);
	evbuffer_free(in);
	return rc;
}

static void
test_multipart(void)
{
	/* Exactly what e2b@2.20.1 sent for a two-file write. */
	const char *body = "------formdata-undici-013289807675\r\nContent-Disposition: form-data; "
	    "name=\"file\"; filename=\"/home/user/m1.txt\"\r\nContent-Type: application/octet-stream"
	    "\r\n\r\none\r\n------formdata-undici-013289807675\r\nContent-Disposition: form-data; "
	    "name=\"file\"; filename=\"/home/user/m2.txt\"\r\nContent-Type: application/octet-stream"
	    "\r\n\r\ntwo\r\n------formdata-undici-013289807675--\r\n";
	struct mp_result r;
	char b[128];
	size_t step;

	for (step = 1; step <= strlen(body); step++) {
		CHECK(mp_run(body, step, &r) == 0);
		CHECK(r.n == 2);
		CHECK_STR(r.names[0], "file");
		CHECK_STR(r.files[0], "/home/user/m1.txt");
		CHECK_STR(r.data[0], "one");
		CHECK_STR(r.files[1], "/home/user/m2.txt");
		CHECK_STR(r.data[1], "two");
	}
	/* Data that looks almost like the delimiter stays data. */
	CHECK(mp_run("------formdata-undici-013289807675\r\nContent-Disposition: form-data; name=file;"
	    " filename=a\r\n\r\nx\r\n------formdata-undici-01328980767\r\n------formdata-undici-013289807675--",
	    7, &r) == 0);
	CHECK(r.n == 1 && strcmp(r.data[0], "x\r\n------formdata-undici-01328980767") == 0);
	CHECK(mp_run("------formdata-undici-013289807675\r\nNoColonHere\r\n\r\nx", 5, &r) == -1);
	CHECK(mp_run("------formdata-undici-013289807675\r\n\r\nx", 5, &r) == -1);
	CHECK(mp_run("------formdata-undici-013289807675\r\nContent-Disposition: form-data\r\n\r\nx",
	    5, &r) == -1);
	CHECK(mp_run("------formdata-undici-013289807675\r\nContent-Disposition: form-data; name=file"
	    "\r\n\r\nunterminated", 5, &r) == 1);
	CHECK(mp_boundary("multipart/form-data; boundary=----x", b, sizeof(b)) == 0);
	CHECK_STR(b, "----x");
	CHECK(mp_boundary("multipart/form-data; charset=utf-8; boundary=\"q q\"", b, sizeof(b)) == 0);
	CHECK_STR(b, "q q");
	CHECK(mp_boundary("multipart/form-data", b, sizeof(b)) == -1);
	CHECK(mp_boundary("application/json; boundary=x", b, sizeof(b)) == -1);
}

static void
test_connect_envelope(void)
{
	const uint8_t ok[] = { 0, 0, 0, 0, 2, '{', '}' }, end[] = { 2, 0, 0, 0, 0 };
	const uint8_t *msg;
	const char *err = NULL;
	size_t len;
	uint8_t flags, bad[8];

	CHECK(connect_env_parse(ok, sizeof(ok), &flags, &msg, &len, &err) == 0);
	CHECK(flags == 0 && len == 2 && memcmp(msg, "{}", 2) == 0);
	CHECK(connect_env_parse(end, sizeof(end), &flags, &msg, &len, &err) == 0 && flags == 2);
	CHECK(connect_env_parse(ok, 4, &flags, &msg, &len, &err) == -1);
	CHECK(connect_env_parse(ok, 6, &flags, &msg, &len, &err) == -1);
	CHECK_CAUSE(err, "truncated");
	memcpy(bad, ok, sizeof(ok));
	bad[7] = 'x';
	CHECK(connect_env_parse(bad, 8, &flags, &msg, &len, &err) == -1);
	CHECK_CAUSE(err, "trailing");
	bad[0] = 1;
	CHECK(connect_env_parse(bad, 7, &flags, &msg, &len, &err) == -1);
	CHECK_CAUSE(err, "compressed");
	bad[0] = 0x80;
	CHECK(connect_env_parse(bad, 7, &flags, &msg, &len, &err) == -1);
	memcpy(bad, (const uint8_t[]){ 0, 0xff, 0xff, 0xff, 0xff }, 5);
	CHECK(connect_env_parse(bad, 5, &flags, &msg, &len, &err) == -1);
	CHECK_CAUSE(err, "too large");
	CHECK(connect_http_status("not_found") == 404);
	CHECK(connect_http_status("bogus") == 500);
}

static void
test_base64(void)
{
	uint8_t *out = NULL;
	size_t len;
	char *s;

	s = b64_encode("hi\n", 3);
	CHECK_STR(s, "aGkK");
	free(s);
	s = b64_encode("abc\n", 4);
	CHECK_STR(s, "YWJjCg==");
	CHECK(b64_decode(s, &out, &len) == 0 && len == 4 && memcmp(out, "abc\n", 4) == 0);
	free(s);
	free(out);
	CHECK(b64_decode("", &out, &len) == 0 && len == 0);
	free(out);
	CHECK(b64_decode("a$==", &out, &len) == -1);
	CHECK(b64_decode("YQ==YQ", &out, &len) == -1);
}

static void
test_paths(void)
{
	struct agent_user u;
	char *p;

	memset(&u, 0, sizeof(u));
	strcpy(u.home, "/home/user");
	p = path_resolve("", &u);
	CHECK_STR(p, "/home/user");
	free(p);
	p = path_resolve("~", &u);
	CHECK_STR(p, "/home/user");
	free(p);
	p = path_resolve("~/a//b/./c", &u);
	CHECK_STR(p, "/home/user/a/b/c");
	free(p);
	p = path_resolve("rel/b.txt", &u);
	CHECK_STR(p, "/home/user/rel/b.txt");
	free(p);
	p = path_resolve("/../../etc/../tmp/x/..", &u);
	CHECK_STR(p, "/tmp");
	free(p);
	p = path_resolve("~user", &u);
	CHECK_STR(p, "/home/user/~user");
	free(p);
}

static void
test_sha256(void)
{
	uint8_t d[32], buf[300];
	char hex[65], ref[65];
	size_t len, i;

	agent_sha256("abc", 3, d);
	for (i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* Every length across the padding edges, against OpenSSL. */
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	for (len = 0; len <= sizeof(buf); len++) {
		agent_sha256(buf, len, d);
		for (i = 0; i < 32; i++)
			sprintf(hex + 2 * i, "%02x", d[i]);
		sha256_hex(buf, len, ref);
		CHECK(strcmp(hex, ref) == 0);
	}
}

int
main(void)
{
	T_RUN(test_http_head);
	T_RUN(test_http_chunked);
	T_RUN(test_multipart);
	T_RUN(test_connect_envelope);
	T_RUN(test_base64);
	T_RUN(test_paths);
	T_RUN(test_sha256);
	return t_done();
}
