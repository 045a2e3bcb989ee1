/*
 * The agent's own parsers on hostile input: multipart bodies split at every
 * byte, Connect envelopes, envd path rules, its SHA-256. HTTP framing is
 * the shared parser's (test_http_parse), base64 the core's (test_util).
 */
#include <string.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_multipart.h"
#include "common/digest.h"
#include "common/util.h"
#include "t.h"

/* Unused here, but agent_api.o (path_resolve) refers to them. */
struct agent ag;
void alog(const char *fmt, ...) { (void)fmt; }
void agent_poweroff(const char *why) { (void)why; }
void proc_route(struct http_req *req, const char *m) { (void)req; (void)m; }
void fs_route(struct http_req *req, const char *m) { (void)req; (void)m; }
void files_route(struct http_req *req, const char *r) { (void)req; (void)r; }
/* agent_start.o (through /init) spawns with it. */
pid_t proc_spawn_shell(const char *c, const struct agent_user *u, const char *w, char **e,
    int *o, int *x, char *why, size_t n) { (void)c; (void)u; (void)w; (void)e; (void)o;
    (void)x; (void)why; (void)n; return -1; }

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
	size_t off = 0, len = strlen(body);
	int rc = 0;

	memset(r, 0, sizeof(*r));
	CHECK(mp_init(&mp, "----formdata-undici-013289807675", &mr_cb, r) == 0);
	while (off < len && rc == 0) {
		size_t n = len - off < step ? len - off : step;

		rc = mp_feed(&mp, body + off, n);
		off += n;
	}
	if (rc == 0 && !mp_done(&mp))
		rc = 1;
	mp_free(&mp);
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
	T_RUN(test_multipart);
	T_RUN(test_connect_envelope);
	T_RUN(test_paths);
	T_RUN(test_sha256);
	return t_done();
}
