/*
 * The CLI's pure parts (arguments, ID:PATH, SSE, base64, response heads) and
 * its HTTP client and commands against a fake airlockd: the API server of
 * src/api runs on the main thread's event loop and answers like docs/api.md;
 * the tests run the real client code in a second thread.
 */
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <termios.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "http/http_server.h"
#include "cli/cli.h"
#include "cli/cli_http.h"
#include "cli/cli_sse.h"
#include "http/http_parse.h"
#include "common/base64.h"
#include "common/util.h"
#include "t.h"

#define TEST_KEY	"al_testkey123"
#define BIG_SIZE	(3 * 1024 * 1024 + 17)

static struct event_base *base;
static struct http_server *srv;
static int port;

/* --- pure parts ------------------------------------------------------- */

static void
test_args(void)
{
	char *k, *v, *id, *path, *cause = NULL;
	long long n;

	CHECK(cli_args_kv("A=b=c", &k, &v, &cause) == 0);
	CHECK_STR(k, "A");
	CHECK_STR(v, "b=c");
	free(k);
	free(v);
	CHECK(cli_args_kv("E=", &k, &v, &cause) == 0 && strcmp(v, "") == 0);
	free(k);
	free(v);
	CHECK(cli_args_kv("=x", &k, &v, &cause) == -1);
	CHECK_CAUSE(cause, "KEY=VALUE");
	free(cause);
	cause = NULL;
	CHECK(cli_args_kv("novalue", &k, &v, &cause) == -1);
	free(cause);
	cause = NULL;

	CHECK(cli_args_remote("sb1:/etc/hosts", &id, &path) == 1);
	CHECK_STR(id, "sb1");
	CHECK_STR(path, "/etc/hosts");
	free(id);
	free(path);
	CHECK(cli_args_remote("k3jz8x0q2m5n7p9r1t4v:", &id, &path) == 1);
	CHECK_STR(path, "");
	free(id);
	free(path);
	CHECK(cli_args_remote("./a:b", &id, &path) == 0 && id == NULL);
	CHECK(cli_args_remote("/tmp/a:b", &id, &path) == 0);
	CHECK(cli_args_remote(":x", &id, &path) == 0);
	CHECK(cli_args_remote("plain.txt", &id, &path) == 0);
	CHECK(cli_args_remote("-", &id, &path) == 0);

	CHECK(cli_args_num("16", 1, 16, &n, "--vcpus", &cause) == 0 && n == 16);
	CHECK(cli_args_num("17", 1, 16, &n, "--vcpus", &cause) == -1);
	CHECK_CAUSE(cause, "--vcpus");
	free(cause);
	cause = NULL;
	CHECK(cli_args_num("4x", 1, 16, &n, "--vcpus", &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(cli_args_num("", 1, 16, &n, "--vcpus", &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(cli_args_num("99999999999999999999", 0, 10, &n, "x", &cause) == -1);
	free(cause);
}

static void
test_escape(void)
{
	char *e;

	e = cli_http_escape("/home/user/a b+c&d=e?f#g%h~i.j-k_l");
	CHECK_STR(e, "/home/user/a%20b%2Bc%26d%3De%3Ff%23g%25h~i.j-k_l");
	free(e);
	e = cli_http_escape("\xc3\xa9\n");
	CHECK_STR(e, "%C3%A9%0A");
	free(e);
	/* An id stays one path segment, whatever it holds. */
	e = cli_sandbox_path("../keys/x", "/exec");
	CHECK_STR(e, "/v1/sandboxes/%2E%2E%2Fkeys%2Fx/exec");
	free(e);
	e = cli_named_path("/v1/pools", "a/b", "");
	CHECK_STR(e, "/v1/pools/a%2Fb");
	/* The first parameter after '?', the rest after '&'; NULL adds nothing. */
	cli_query_add(&e, "scope", NULL);
	CHECK_STR(e, "/v1/pools/a%2Fb");
	cli_query_add(&e, "scope", "project");
	cli_query_add(&e, "meta", "k=v&w=x");
	CHECK_STR(e, "/v1/pools/a%2Fb?scope=project&meta=k%3Dv%26w%3Dx");
	free(e);
	e = xstrdup("/v1/sandboxes?limit=100");
	cli_query_add(&e, "after", "sb 1");
	CHECK_STR(e, "/v1/sandboxes?limit=100&after=sb%201");
	free(e);
}

static void
test_create_parse(void)
{
	char *argv1[] = { "create", "--template", "py", "--vcpus", "4", "--memory", "1024",
	    "--allow", "pypi.org", "--allow", "*.github.com:443", "--env", "A=1",
	    "--meta", "team=x", "--timeout", "600", "--json", NULL };
	char *argv2[] = { "create", "--network", "full", "--allow", "x.org", NULL };
	char *argv3[] = { "create", "--network", "some", NULL };
	char *argv4[] = { "create", "--vcpus", "0", NULL };
	char *argv5[] = { "create", "stray", NULL };
	char *argv6[] = { "create", NULL };
	char *argv7[] = { "create", "--disk", "8192", NULL };
	char *argv8[] = { "create", "--disk", "0", NULL };
	char *cause = NULL, *s;
	json_t *b;
	int js;

	CHECK(cmd_create_parse(18, argv1, &b, &js, &cause) == 0);
	CHECK(js == 1);
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	CHECK_STR(s, "{\"env\":{\"A\":\"1\"},\"memory_mb\":1024,\"metadata\":{\"team\":\"x\"},"
	    "\"network\":{\"allow\":[\"pypi.org\",\"*.github.com:443\"],\"mode\":\"allowlist\"},"
	    "\"template\":\"py\",\"timeout_s\":600,\"vcpus\":4}");
	free(s);
	json_decref(b);
	CHECK(cmd_create_parse(5, argv2, &b, &js, &cause) == -1);
	CHECK_CAUSE(cause, "--allow needs --network allowlist");
	free(cause);
	cause = NULL;
	CHECK(cmd_create_parse(3, argv3, &b, &js, &cause) == -1);
	CHECK_CAUSE(cause, "none, allowlist, full");
	free(cause);
	cause = NULL;
	CHECK(cmd_create_parse(3, argv4, &b, &js, &cause) == -1);
	CHECK_CAUSE(cause, "1 to 16");
	free(cause);
	cause = NULL;
	CHECK(cmd_create_parse(2, argv5, &b, &js, &cause) == -1);
	CHECK_CAUSE(cause, "stray");
	free(cause);
	cause = NULL;
	/* No options: an empty body, so the daemon's defaults apply. */
	CHECK(cmd_create_parse(1, argv6, &b, &js, &cause) == 0 && json_object_size(b) == 0);
	json_decref(b);
	CHECK(cmd_create_parse(3, argv7, &b, &js, &cause) == 0);
	CHECK(json_integer_value(json_object_get(b, "disk_mb")) == 8192);
	json_decref(b);
	CHECK(cmd_create_parse(3, argv8, &b, &js, &cause) == -1);
	CHECK_CAUSE(cause, "--disk");
	free(cause);
	cause = NULL;
}

static void
test_exec_parse(void)
{
	char *argv1[] = { "exec", "-i", "-t", "--user", "root", "--env", "X=1", "sb1", "--",
	    "ls", "-la", NULL };
	char *argv2[] = { "exec", "sb1", "echo", "-n", "hi", NULL };
	char *argv3[] = { "exec", "-i", "sb1", NULL };
	char *argv4[] = { "exec", "--env", "bad", "sb1", "ls", NULL };
	char *argv5[] = { "exec", "--bogus", "sb1", "ls", NULL };
	struct cli_exec_opts o;
	char *cause = NULL;

	CHECK(cmd_exec_parse(11, argv1, &o, &cause) == 0);
	CHECK(o.interactive && o.tty);
	CHECK_STR(o.user, "root");
	CHECK_STR(o.id, "sb1");
	CHECK(o.ncmd == 2 && strcmp(o.cmd[0], "ls") == 0 && strcmp(o.cmd[1], "-la") == 0);
	CHECK_STR(json_string_value(json_object_get(o.env, "X")), "1");
	cmd_exec_opts_free(&o);
	/* Without "--", options after the id belong to the command. */
	CHECK(cmd_exec_parse(5, argv2, &o, &cause) == 0);
	CHECK(o.ncmd == 3 && strcmp(o.cmd[1], "-n") == 0 && !o.interactive);
	cmd_exec_opts_free(&o);
	CHECK(cmd_exec_parse(3, argv3, &o, &cause) == -1);
	CHECK_CAUSE(cause, "missing command");
	free(cause);
	cause = NULL;
	CHECK(cmd_exec_parse(5, argv4, &o, &cause) == -1);
	CHECK_CAUSE(cause, "KEY=VALUE");
	free(cause);
	cause = NULL;
	CHECK(cmd_exec_parse(4, argv5, &o, &cause) == -1);
	CHECK_CAUSE(cause, "--bogus");
	free(cause);
}

struct sse_rec {
	char	 out[4096];
	int	 n;
};

static int
sse_rec_cb(void *arg, const char *event, const char *data, size_t len)
{
	struct sse_rec *r = arg;
	int w;

	CHECK(strlen(data) == len);
	w = snprintf(r->out + strlen(r->out), sizeof(r->out) - strlen(r->out), "[%s|%s]",
	    event, data);
	(void)w;
	r->n++;
	return 0;
}

static void
test_sse(void)
{
	static const char stream[] =
	    ": ping\n\n"
	    "event: start\ndata: {\"pid\":42}\n\n"
	    "event:stdout\r\ndata: a\r\ndata:b\r\n\r\n"
	    "data: no name\rid: 7\rretry: 10\r\r"
	    "event: only-name\n\n"
	    "event: exit\ndata: {\"code\":0}\n\n"
	    "data: unterminated";
	static const char want[] = "[start|{\"pid\":42}][stdout|a\nb][message|no name]"
	    "[exit|{\"code\":0}]";
	struct sse_rec r;
	struct cli_sse s;
	char *cause = NULL, *big;
	size_t i, step;

	/* Whole, and split at every possible boundary size: same events. */
	for (step = 0; step <= 7; step++) {
		memset(&r, 0, sizeof(r));
		cli_sse_init(&s, sse_rec_cb, &r);
		if (step == 0)
			CHECK(cli_sse_feed(&s, stream, strlen(stream), &cause) == 0);
		else
			for (i = 0; i < strlen(stream); i += step) {
				size_t n = strlen(stream) - i < step ? strlen(stream) - i : step;
				CHECK(cli_sse_feed(&s, stream + i, n, &cause) == 0);
			}
		CHECK_STR(r.out, want);
		CHECK(r.n == 4);
		cli_sse_free(&s);
	}

	/* Bounds: a line that never ends, an event name too long. */
	cli_sse_init(&s, sse_rec_cb, &r);
	big = xmalloc(CLI_SSE_LINE_MAX + 2);
	memset(big, 'a', CLI_SSE_LINE_MAX + 1);
	CHECK(cli_sse_feed(&s, "data: ", 6, &cause) == 0);
	CHECK(cli_sse_feed(&s, big, CLI_SSE_LINE_MAX + 1, &cause) == -1);
	CHECK_CAUSE(cause, "line over");
	free(cause);
	cause = NULL;
	cli_sse_free(&s);
	cli_sse_init(&s, sse_rec_cb, &r);
	memcpy(big, "event: ", 7);
	big[7 + CLI_SSE_EVENT_NAME_MAX + 1] = '\n';
	CHECK(cli_sse_feed(&s, big, 7 + CLI_SSE_EVENT_NAME_MAX + 2, &cause) == -1);
	CHECK_CAUSE(cause, "event name");
	free(cause);
	cause = NULL;
	cli_sse_free(&s);
	/* Many data lines adding up past the event bound. */
	cli_sse_init(&s, sse_rec_cb, &r);
	for (i = 0; i < 64; i++) {
		big[0] = 'd'; memcpy(big, "data: ", 6);
		memset(big + 6, 'x', 100000);
		big[100006] = '\n';
		if (cli_sse_feed(&s, big, 100007, &cause) == -1)
			break;
	}
	CHECK(i < 64);
	CHECK_CAUSE(cause, "event data over");
	free(cause);
	cli_sse_free(&s);
	free(big);
}

static void
test_response_head(void)
{
	struct http_head h;
	char *cause = NULL;
	int code;
	const char *ok = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	    "Transfer-Encoding: chunked\r\n\r\nrest";

	CHECK(http_parse_response_head(ok, strlen(ok), &h, &code, &cause) ==
	    (ssize_t)strlen(ok) - 4);
	CHECK(code == 200 && h.chunked && h.keep_alive && h.content_length == -1);
	CHECK_STR(http_head_get(&h, "content-type"), "text/event-stream");
	http_head_free(&h);
	CHECK(http_parse_response_head(ok, 20, &h, &code, &cause) == 0);
	CHECK(http_parse_response_head("HTTP/1.0 204\r\n\r\n", 16, &h, &code, &cause) == 16);
	CHECK(code == 204 && !h.keep_alive);
	CHECK(!http_response_has_body("DELETE", 204) && http_response_has_body("GET", 200) &&
	    !http_response_has_body("HEAD", 200));
	http_head_free(&h);
	const char *nf = "HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\nConnection: close\r\n\r\n";
	CHECK(http_parse_response_head(nf, strlen(nf), &h, &code, &cause) > 0);
	CHECK(code == 404 && h.content_length == 5 && !h.keep_alive);
	http_head_free(&h);
	const char *bad[] = {
	    "HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 abc OK\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	    "HTTP/1.1 200 OK\r\nX: a\nb\r\n\r\n", "HTTP/1.1 200 O\x1bK\r\n\r\n",
	    "HTTP/1.1 099 x\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(http_parse_response_head(bad[i], strlen(bad[i]), &h, &code, &cause) == -1);
		free(cause);
		cause = NULL;
	}
}

/* --- the fake daemon --------------------------------------------------- */

static struct http_req *cat_req;	/* exec "cat" waiting for stdin */
static char cat_buf[4096];
static size_t cat_len;
static int cat_on_data;
static uint64_t put_bytes, put_sum;
static json_t *last_create;
static char last_query[512];
static int resize_cols;

static void
fake_stream_body(struct http_req *req, const char *data, size_t n, void *arg)
{
	size_t i;

	for (i = 0; i < n; i++)
		put_sum = put_sum * 31 + (unsigned char)data[i];
	put_bytes += n;
}

/* One query value of a request to the fake server (malloc'd), NULL if absent or malformed. */
static char *
fake_query(struct http_req *req, const char *key)
{
	struct http_query q;
	const char *v;
	char *out = NULL;

	if (http_query_parse(http_req_query(req), &q, NULL) == 0 &&
	    (v = http_query_value(&q, key)) != NULL)
		out = xstrdup(v);
	http_query_free(&q);
	return out;
}

static void
fake_stream_end(struct http_req *req, void *arg)
{
	char *p = fake_query(req, "path"), *m = fake_query(req, "mode");

	http_reply_json(req, 201, json_pack("{s:s,s:I,s:s}", "path", p ? p : "?", "size",
	    (json_int_t)put_bytes, "mode", m ? m : "-"));
	free(p);
	free(m);
}

static void
sse_out(struct http_req *req, const char *ev, const char *raw)
{
	char enc[1024];

	base64_encode(raw, strlen(raw), enc);
	http_sse_event(req, ev, json_pack("{s:s}", "data", enc));
}

/* "slowstart": the start event comes after the head, as a real VM's does. */
static void
fake_slow_start(evutil_socket_t fd, short what, void *arg)
{
	struct http_req *req = arg;

	if (!http_req_closed(req)) {
		http_sse_event(req, "start", json_pack("{s:i}", "pid", 8));
		sse_out(req, "stdout", "slow\n");
		http_sse_event(req, "exit", json_pack("{s:i,s:n}", "code", 0, "signal"));
		http_reply_end(req);
	}
	http_req_unref(req);
}

static void
fake_exec(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len);
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *cmd = json_string_value(json_array_get(json_object_get(j, "cmd"), 0));

	http_sse_start(req);
	if (cmd == NULL)
		cmd = "";
	if (strcmp(cmd, "nostart") == 0) {
		http_sse_event(req, "error", json_pack("{s:s}", "message", "nostart: not found"));
		http_reply_end(req);
		json_decref(j);
		return;
	}
	if (strcmp(cmd, "slowstart") == 0) {
		struct timeval tv = { 0, 300 * 1000 };
		http_req_ref(req);
		event_base_once(base, -1, EV_TIMEOUT, fake_slow_start, req, &tv);
		json_decref(j);
		return;
	}
	http_sse_event(req, "start", json_pack("{s:i}", "pid", 7));
	if (strcmp(cmd, "echo") == 0) {
		sse_out(req, "stdout", "hi\n");
		sse_out(req, "stderr", "oops\n");
		http_sse_event(req, "exit", json_pack("{s:i,s:n}", "code", 3, "signal"));
		http_reply_end(req);
	} else if (strcmp(cmd, "kill") == 0) {
		http_sse_event(req, "exit", json_pack("{s:n,s:s}", "code", "signal", "SIGKILL"));
		http_reply_end(req);
	} else if (strcmp(cmd, "hang") == 0) {
		http_reply_end(req);
	} else if (strcmp(cmd, "garbage") == 0) {
		/* Hostile stream: broken base64, bad JSON, unknown events; then exit. */
		http_sse_event(req, "stdout", json_pack("{s:s}", "data", "!!!"));
		http_sse_event(req, "stdout", json_pack("{s:i}", "data", 5));
		http_reply_chunk(req, "event: exit\ndata: {nope\n\n", 25);
		http_sse_event(req, "weird", json_pack("{}"));
		http_sse_event(req, "exit", json_pack("{s:i}", "code", 70000));
		http_reply_end(req);
	} else if (strcmp(cmd, "cat") == 0 || strcmp(cmd, "ttycat") == 0) {
		/* ttycat answers the first keystrokes; cat waits for EOF. */
		cat_on_data = strcmp(cmd, "ttycat") == 0;
		CHECK(json_is_true(json_object_get(j, "stdin")));
		resize_cols = (int)json_integer_value(json_object_get(json_object_get(j, "pty"),
		    "cols"));
		cat_len = 0;
		cat_req = req;
		http_req_ref(req);
	}
	json_decref(j);
}

static void
fake_stdin(struct http_req *req, void *arg)
{
	size_t len, n;
	const char *body = http_req_body(req, &len);
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *d = json_string_value(json_object_get(j, "data"));

	if (d != NULL && BASE64_DECODED_MAX(strlen(d)) < sizeof(cat_buf) - cat_len &&
	    base64_decode(d, strlen(d), (uint8_t *)cat_buf + cat_len, &n) == 0)
		cat_len += n;
	http_reply(req, 204, NULL, NULL, 0);
	if ((json_is_true(json_object_get(j, "eof")) || cat_on_data) && cat_req != NULL) {
		cat_buf[cat_len] = '\0';
		sse_out(cat_req, "stdout", cat_buf);
		http_sse_event(cat_req, "exit", json_pack("{s:i,s:n}", "code", 0, "signal"));
		http_reply_end(cat_req);
		http_req_unref(cat_req);
		cat_req = NULL;
	}
	json_decref(j);
}

static void
fake_create(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len);

	json_decref(last_create);
	last_create = json_loadb(body, len, 0, NULL);
	http_reply_json(req, 201, json_pack("{s:s,s:s,s:s}", "id", "sbnew", "state", "running",
	    "template", "base"));
}

static void
fake_key_create(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len);
	json_t *j = json_loadb(body, len, 0, NULL);

	http_reply_json(req, 201, json_pack("{s:s,s:O,s:O,s:O,s:s}", "id", "k2", "name",
	    json_object_get(j, "name"), "project", json_object_get(j, "project"), "role",
	    json_object_get(j, "role"), "key", "al_secret"));
	json_decref(j);
}

/* POST /v1/templates: progress, then done or error, by the name asked for. */
static void
fake_template_build(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len);
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *name = json_string_value(json_object_get(j, "name"));

	if (!json_is_object(json_object_get(j, "recipe"))) {
		http_reply_error(req, 400, "bad_request", "recipe: must be a recipe object");
		json_decref(j);
		return;
	}
	http_sse_start(req);
	http_sse_event(req, "progress", json_pack("{s:i,s:i,s:s}", "step", 1, "steps", 2,
	    "message", "debootstrap \x1b[31mcached"));
	if (strcmp(name, "good") == 0) {
		http_sse_event(req, "progress", json_pack("{s:i,s:i,s:s}", "step", 2, "steps", 2,
		    "message", "install"));
		http_sse_event(req, "done", json_pack("{s:{s:s,s:i}}", "template", "name", "good",
		    "disk_size_mb", 1024));
	} else if (strcmp(name, "bad") == 0)
		http_sse_event(req, "error", json_pack("{s:s}", "message",
		    "packages: not found in the distribution: nope"));
	http_reply_end(req);
	json_decref(j);
}

static void
fake_big(struct http_req *req)
{
	char chunk[65536];
	size_t left = BIG_SIZE, i, n;
	uint64_t off = 0;

	http_reply_start(req, 200, "application/octet-stream");
	while (left > 0) {
		n = left < sizeof(chunk) ? left : sizeof(chunk);
		for (i = 0; i < n; i++)
			chunk[i] = (char)((off + i) * 7 % 251);
		http_reply_chunk(req, chunk, n);
		off += n;
		left -= n;
	}
	http_reply_end(req);
}

static void
fake_router(struct http_req *req, void *arg)
{
	const char *p = http_req_path(req), *m = http_req_method(req);
	const char *auth = http_req_header(req, "authorization");
	char *q;

	if (strcmp(p, "/stop") == 0) {
		/* Leave the loop a moment later, once the answer is written. */
		struct timeval tv = { 0, 100000 };
		http_reply(req, 204, NULL, NULL, 0);
		event_base_loopexit(base, &tv);
		return;
	}
	if (auth == NULL || strcmp(auth, "Bearer " TEST_KEY) != 0) {
		http_reply_error(req, 401, "unauthorized", "missing or unknown API key");
		return;
	}
	if (strcmp(p, "/v1/sandboxes") == 0 && strcmp(m, "GET") == 0) {
		snprintf(last_query, sizeof(last_query), "%s", http_req_query(req));
		q = fake_query(req, "after");
		if (q == NULL)
			http_reply_json(req, 200, json_pack("{s:[{s:s,s:s},{s:s,s:s}],s:s}",
			    "sandboxes", "id", "a1", "state", "running", "id", "a2", "state",
			    "paused", "next", "a2"));
		else
			http_reply_json(req, 200, json_pack("{s:[{s:s,s:s}],s:n}", "sandboxes",
			    "id", "b1", "state", "suspended", "next"));
		free(q);
	} else if (strcmp(p, "/v1/sandboxes") == 0 && strcmp(m, "POST") == 0)
		http_req_buffer(req, HTTP_JSON_BODY_MAX, fake_create, NULL);
	else if (strcmp(p, "/v1/sandboxes/sb1") == 0 && strcmp(m, "GET") == 0)
		http_reply_json(req, 200, json_pack("{s:s,s:s,s:s}", "id", "sb1", "state",
		    "running", "template", "base\x1b[31m"));
	else if (strcmp(p, "/v1/sandboxes/sb1") == 0 && strcmp(m, "DELETE") == 0)
		http_reply(req, 204, NULL, NULL, 0);
	else if (strcmp(p, "/v1/sandboxes/sb1/pause") == 0 && strcmp(m, "POST") == 0)
		http_reply_json(req, 200, json_pack("{s:s,s:s}", "id", "sb1", "state", "paused"));
	else if (strcmp(p, "/v1/sandboxes/sb1/exec") == 0)
		http_req_buffer(req, HTTP_JSON_BODY_MAX, fake_exec, NULL);
	else if (strcmp(p, "/v1/sandboxes/sb1/processes") == 0)
		http_reply_json(req, 200, json_pack("{s:[{s:i,s:[ss],s:s,s:b}]}", "processes",
		    "pid", 7, "cmd", "sleep", "9", "cwd", "/home/user", "pty", 0));
	else if (strcmp(p, "/v1/sandboxes/sb1/processes/7/stream") == 0) {
		http_sse_start(req);
		sse_out(req, "stdout", "late\n");
		http_sse_event(req, "exit", json_pack("{s:i,s:n}", "code", 4, "signal"));
		http_reply_end(req);
	} else if (strcmp(p, "/v1/sandboxes/sb1/processes/7/stdin") == 0)
		http_req_buffer(req, HTTP_JSON_BODY_MAX, fake_stdin, NULL);
	else if (strcmp(p, "/v1/sandboxes/sb1/files") == 0 && strcmp(m, "PUT") == 0) {
		put_bytes = put_sum = 0;
		http_req_stream(req, 0, fake_stream_body, fake_stream_end, NULL);
	} else if (strcmp(p, "/v1/sandboxes/sb1/files") == 0 && strcmp(m, "GET") == 0) {
		q = fake_query(req, "path");
		if (q != NULL && strcmp(q, "/big") == 0)
			fake_big(req);
		else
			http_reply_error(req, 404, "not_found", "path \"%s\" not found",
			    q ? q : "");
		free(q);
	} else if (strcmp(p, "/v1/sandboxes/sb1/files/stat") == 0) {
		q = fake_query(req, "path");
		if (q != NULL && strcmp(q, "/dir") == 0)
			http_reply_json(req, 200, json_pack("{s:s,s:s}", "path", "/dir", "type",
			    "dir"));
		else
			http_reply_error(req, 404, "not_found", "no such path");
		free(q);
	} else if (strcmp(p, "/v1/sandboxes/sb1/logs") == 0) {
		q = fake_query(req, "tail");
		http_reply(req, 200, "text/plain", q && strcmp(q, "2") == 0 ? "b\nc\n" : "a\nb\nc\n",
		    q && strcmp(q, "2") == 0 ? 4 : 6);
		free(q);
	} else if (strcmp(p, "/v1/keys") == 0 && strcmp(m, "POST") == 0)
		http_req_buffer(req, HTTP_JSON_BODY_MAX, fake_key_create, NULL);
	else if (strcmp(p, "/v1/keys") == 0)
		http_reply_json(req, 200, json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}]}", "keys", "id",
		    "k1", "name", "ci", "project", "default", "role", "user", "prefix", "al_ab"));
	else if (strcmp(p, "/v1/keys/k1") == 0 && strcmp(m, "DELETE") == 0)
		http_reply(req, 204, NULL, NULL, 0);
	else if (strcmp(p, "/v1/templates") == 0 && strcmp(m, "POST") == 0)
		http_req_buffer(req, HTTP_JSON_BODY_MAX, fake_template_build, NULL);
	else if (strcmp(p, "/v1/templates") == 0)
		http_reply_json(req, 200, json_pack("{s:[{s:s,s:s,s:s,s:i}]}", "templates", "name",
		    "apitpl", "kernel_release", "6.1", "built_at", "2026-11-30T08:00:00Z",
		    "disk_size_mb", 4096));
	else if (strcmp(p, "/v1/templates/busy") == 0)
		http_reply_error(req, 409, "conflict", "template \"busy\" is used by 2 sandboxes");
	else if (strcmp(p, "/v1/events") == 0) {
		http_sse_start(req);
		http_sse_event(req, "created", json_pack("{s:i,s:s,s:s,s:s,s:{}}", "seq", 1,
		    "at", "2026-11-30T08:00:00.000Z", "sandbox", "sb1", "type", "created", "data"));
		http_sse_event(req, "paused", json_pack("{s:i,s:s,s:s,s:s,s:{s:s}}", "seq", 2,
		    "at", "2026-11-30T08:00:01.000Z", "sandbox", "sb1", "type", "paused", "data",
		    "by", "api"));
		http_reply_end(req);
	} else if (strncmp(p, "/v1/sandboxes/", 14) == 0)
		http_reply_error(req, 404, "not_found", "sandbox \"%s\" not found", p + 14);
	else
		http_reply_error(req, 404, "not_found", "no route %s", p);
}

/* --- client tests, on their own thread --------------------------------- */

/* Run fn with stdout (and stderr) captured into malloc'd strings. */
static int
capture(int (*fn)(int, char **), int argc, char **argv, char **out, char **err)
{
	char otmp[] = "/tmp/airlock-test-out.XXXXXX", etmp[] = "/tmp/airlock-test-err.XXXXXX";
	int ofd = mkstemp(otmp), efd = mkstemp(etmp), so = dup(1), se = dup(2), rv;
	size_t len;

	fflush(stdout);
	fflush(stderr);
	dup2(ofd, 1);
	dup2(efd, 2);
	rv = fn(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	close(ofd);
	close(efd);
	if (read_file(otmp, 1 << 20, out, &len, NULL) == -1)
		*out = xstrdup("");
	if (read_file(etmp, 1 << 20, err, &len, NULL) == -1)
		*err = xstrdup("");
	unlink(otmp);
	unlink(etmp);
	return rv;
}

static void
test_api_errors(void)
{
	struct cli_api *api;
	char *cause = NULL, url[64];
	json_t *j;
	int status, fd, dead;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);

	/* 404 with the API's error shape: the message, as is. */
	api = cli_api_new(&cause);
	CHECK(api != NULL);
	j = cli_api_json(api, "GET", "/v1/sandboxes/nope", NULL, &status, &cause);
	CHECK(j == NULL && status == 404);
	CHECK_STR(cause, "sandbox \"nope\" not found");
	free(cause);
	cause = NULL;
	/* The connection stays usable after an error answer (keep-alive). */
	j = cli_api_json(api, "GET", "/v1/sandboxes/sb1", NULL, &status, &cause);
	CHECK(j != NULL && status == 200);
	json_decref(j);
	cli_api_free(api);

	/* 401: the message plus where the key came from. */
	setenv("AIRLOCK_API_KEY", "wrong", 1);
	api = cli_api_new(&cause);
	j = cli_api_json(api, "GET", "/v1/sandboxes", NULL, &status, &cause);
	CHECK(j == NULL && status == 401);
	CHECK_CAUSE(cause, "missing or unknown API key");
	CHECK_CAUSE(cause, "AIRLOCK_API_KEY");
	free(cause);
	cause = NULL;
	cli_api_free(api);
	/* No key at all: say how to get one. */
	unsetenv("AIRLOCK_API_KEY");
	setenv("AIRLOCK_DATA_DIR", "/nonexistent-airlock", 1);
	api = cli_api_new(&cause);
	j = cli_api_json(api, "GET", "/v1/sandboxes", NULL, &status, &cause);
	CHECK(j == NULL && status == 401);
	CHECK_CAUSE(cause, "/nonexistent-airlock/admin.key");
	free(cause);
	cause = NULL;
	cli_api_free(api);
	/* The key file works when the variable is unset. */
	char dir[] = "/tmp/airlock-test-data.XXXXXX", *kp;
	CHECK(mkdtemp(dir) != NULL);
	xasprintf(&kp, "%s/admin.key", dir);
	CHECK(write_file_atomic(kp, TEST_KEY "\n", strlen(TEST_KEY) + 1, 0600, NULL) == 0);
	setenv("AIRLOCK_DATA_DIR", dir, 1);
	api = cli_api_new(&cause);
	j = cli_api_json(api, "GET", "/v1/sandboxes/sb1", NULL, &status, &cause);
	CHECK(j != NULL && status == 200);
	json_decref(j);
	cli_api_free(api);
	/* ...but not to a daemon elsewhere. */
	setenv("AIRLOCK_URL", "http://192.0.2.1:7070", 1);
	api = cli_api_new(&cause);
	CHECK(api != NULL && !cli_api_has_key(api));
	cli_api_free(api);
	setenv("AIRLOCK_URL", "http://localhost:7070", 1);
	api = cli_api_new(&cause);
	CHECK(api != NULL && cli_api_has_key(api));
	cli_api_free(api);
	setenv("AIRLOCK_URL", "http://[::1]:7070", 1);
	api = cli_api_new(&cause);
	CHECK(api != NULL && cli_api_has_key(api));
	cli_api_free(api);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	setenv("AIRLOCK_URL", url, 1);
	unlink(kp);
	rmdir(dir);
	free(kp);
	unsetenv("AIRLOCK_DATA_DIR");
	setenv("AIRLOCK_API_KEY", TEST_KEY, 1);

	/* Nothing listening: the hint to start the daemon. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	bind(fd, (struct sockaddr *)&sin, sizeof(sin));
	getsockname(fd, (struct sockaddr *)&sin, &sl);
	dead = ntohs(sin.sin_port);
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", dead);
	setenv("AIRLOCK_URL", url, 1);
	api = cli_api_new(&cause);
	j = cli_api_json(api, "GET", "/v1/sandboxes", NULL, &status, &cause);
	CHECK(j == NULL && status == 0);
	CHECK_CAUSE(cause, "cannot connect to airlockd at");
	CHECK_CAUSE(cause, "is it running? (make up)");
	free(cause);
	cause = NULL;
	cli_api_free(api);
	/* https is a URL like any other (TLS itself is tested against a real airlockd). */
	setenv("AIRLOCK_URL", "https://x", 1);
	api = cli_api_new(&cause);
	CHECK(api != NULL && !cli_api_local(api));
	cli_api_free(api);
	setenv("AIRLOCK_URL", "ftp://127.0.0.1", 1);
	CHECK(cli_api_new(&cause) == NULL);
	CHECK_CAUSE(cause, "must start with http:// or https://");
	free(cause);
	cause = NULL;
	const char *bad_urls[] = { "http://127.0.0.1:99999", "http://u:p@127.0.0.1",
	    "http://127.0.0.1/?q=1", "http://127.0.0.1/#f", "http:// x", "http://" };
	for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
		setenv("AIRLOCK_URL", bad_urls[i], 1);
		CHECK(cli_api_new(&cause) == NULL);
		CHECK_CAUSE(cause, "expected http[s]://HOST[:PORT][/PREFIX]");
		free(cause);
		cause = NULL;
	}
	setenv("AIRLOCK_CA_FILE", "/nonexistent-airlock-ca.pem", 1);
	setenv("AIRLOCK_URL", "https://127.0.0.1:1", 1);
	CHECK(cli_api_new(&cause) == NULL);
	CHECK_CAUSE(cause, "AIRLOCK_CA_FILE /nonexistent-airlock-ca.pem");
	unsetenv("AIRLOCK_CA_FILE");
	free(cause);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	setenv("AIRLOCK_URL", url, 1);
}

static void
test_commands(void)
{
	char *out, *err;
	char *ls[] = { "ls", "--state", "running,paused", NULL };
	char *lsj[] = { "ls", "--json", NULL };
	char *get[] = { "get", "sb1", NULL };
	char *getmiss[] = { "get", "missing", NULL };
	char *create[] = { "create", "--template", "base", "--env", "A=1", NULL };
	char *pause[] = { "pause", "sb1", NULL };
	char *rm[] = { "rm", "sb1", "missing", NULL };
	char *ev[] = { "events", NULL };

	CHECK(capture(cmd_ls, 3, ls, &out, &err) == 0);
	CHECK(strstr(out, "a1") && strstr(out, "a2") && strstr(out, "b1"));
	CHECK(strstr(out, "suspended") != NULL);
	CHECK(strstr(last_query, "state=running%2Cpaused") != NULL);
	free(out);
	free(err);
	CHECK(capture(cmd_ls, 2, lsj, &out, &err) == 0);
	json_t *arr = json_loads(out, 0, NULL);
	CHECK(json_is_array(arr) && json_array_size(arr) == 3);
	json_decref(arr);
	free(out);
	free(err);
	/* A hostile value cannot put escape sequences on the terminal. */
	CHECK(capture(cmd_get, 2, get, &out, &err) == 0);
	CHECK(strstr(out, "base?[31m") != NULL && strchr(out, '\x1b') == NULL);
	free(out);
	free(err);
	CHECK(capture(cmd_get, 2, getmiss, &out, &err) == 1);
	CHECK_STR(err, "airlock: sandbox \"missing\" not found\n");
	free(out);
	free(err);
	CHECK(capture(cmd_create, 5, create, &out, &err) == 0);
	CHECK_STR(out, "sbnew\n");
	CHECK_STR(json_string_value(json_object_get(json_object_get(last_create, "env"), "A")),
	    "1");
	free(out);
	free(err);
	CHECK(capture(cmd_pause, 2, pause, &out, &err) == 0);
	CHECK_STR(out, "paused sb1\n");
	free(out);
	free(err);
	CHECK(capture(cmd_rm, 3, rm, &out, &err) == 1);
	CHECK_STR(out, "removed sb1\n");
	CHECK(strstr(err, "sandbox \"missing\" not found") != NULL);
	free(out);
	free(err);
	char *logs[] = { "logs", "--tail", "2", "sb1", NULL };
	CHECK(capture(cmd_logs, 4, logs, &out, &err) == 0);
	CHECK_STR(out, "b\nc\n");
	free(out);
	free(err);
	char *logsj[] = { "logs", "--json", "sb1", NULL };
	CHECK(capture(cmd_logs, 3, logsj, &out, &err) == 0);
	json_t *lj = json_loads(out, 0, NULL);
	CHECK_STR(json_string_value(json_object_get(lj, "logs")), "a\nb\nc\n");
	json_decref(lj);
	free(out);
	free(err);
	char *rmj[] = { "rm", "--json", "sb1", NULL };
	CHECK(capture(cmd_rm, 3, rmj, &out, &err) == 0);
	lj = json_loads(out, 0, NULL);
	CHECK(json_is_true(json_object_get(lj, "deleted")));
	json_decref(lj);
	free(out);
	free(err);
	char *kc[] = { "key", "create", "ci", "--role", "admin", NULL };
	CHECK(capture(cmd_key, 5, kc, &out, &err) == 0);
	CHECK_STR(out, "al_secret\n");
	CHECK(strstr(err, "role admin") != NULL && strstr(err, "only this once") != NULL);
	free(out);
	free(err);
	char *kbad[] = { "key", "create", "ci", "--role", "root", NULL };
	CHECK(capture(cmd_key, 5, kbad, &out, &err) == 2);
	free(out);
	free(err);
	char *kl[] = { "key", "ls", NULL };
	CHECK(capture(cmd_key, 2, kl, &out, &err) == 0);
	CHECK(strstr(out, "PREFIX") != NULL && strstr(out, "al_ab") != NULL);
	free(out);
	free(err);
	char *kr[] = { "key", "rm", "k1", NULL };
	CHECK(capture(cmd_key, 3, kr, &out, &err) == 0);
	CHECK_STR(out, "removed key k1\n");
	free(out);
	free(err);
	/* template ls/rm go through the daemon when it answers. */
	char *tl[] = { "template", "ls", NULL };
	CHECK(capture(cmd_template, 2, tl, &out, &err) == 0);
	CHECK(strstr(out, "apitpl") != NULL);
	free(out);
	free(err);
	char *tr[] = { "template", "rm", "busy", NULL };
	CHECK(capture(cmd_template, 3, tr, &out, &err) == 1);
	CHECK(strstr(err, "used by 2 sandboxes") != NULL);
	free(out);
	free(err);
	/* template build --remote: the daemon's progress rendered like a local build's. */
	char recipe[] = "/tmp/airlock-test-recipe.XXXXXX";
	int rfd = mkstemp(recipe);
	CHECK(rfd != -1 && write(rfd, "{\"from\":{}}", 11) == 11);
	close(rfd);
	char *tbg[] = { "template", "build", "good", "--recipe", recipe, "--remote", NULL };
	CHECK(capture(cmd_template, 6, tbg, &out, &err) == 0);
	CHECK(strstr(out, "[1/2] debootstrap ?[31mcached\n") != NULL && strchr(out, '\x1b') == NULL);
	CHECK(strstr(out, "[2/2] install\n") != NULL);
	CHECK(strstr(out, "template \"good\" built in") != NULL && strstr(out, "on airlockd at"));
	free(out);
	free(err);
	char *tbj[] = { "template", "build", "good", "--recipe", recipe, "--remote", "--json",
	    NULL };
	CHECK(capture(cmd_template, 7, tbj, &out, &err) == 0);
	lj = json_loads(out, 0, NULL);
	CHECK(json_integer_value(json_object_get(lj, "disk_size_mb")) == 1024);
	CHECK(strstr(err, "[2/2] install") != NULL);
	json_decref(lj);
	free(out);
	free(err);
	char *tbb[] = { "template", "build", "bad", "--recipe", recipe, "--remote", NULL };
	CHECK(capture(cmd_template, 6, tbb, &out, &err) == 1);
	CHECK(strstr(err, "airlock: template bad: packages: not found in the distribution: nope\n")
	    != NULL);
	free(out);
	free(err);
	char *tbc[] = { "template", "build", "cut", "--recipe", recipe, "--remote", NULL };
	CHECK(capture(cmd_template, 6, tbc, &out, &err) == 1);
	CHECK(strstr(err, "without a result") != NULL && strstr(err, "may still finish") != NULL);
	free(out);
	free(err);
	unlink(recipe);

	CHECK(capture(cmd_events, 1, ev, &out, &err) == 0);
	CHECK(strstr(out, "created") != NULL && strstr(out, "{\"by\":\"api\"}") != NULL);
	free(out);
	free(err);
}

/* exec -t -i on a terminal: raw while it runs, restored after, size sent. */
static void
test_exec_tty(void)
{
	char *argv[] = { "ttycat", NULL };
	struct termios before, after;
	struct winsize ws = { .ws_row = 33, .ws_col = 111 };
	struct cli_exec_opts o;
	struct cli_api *api;
	int mfd, sfd, null = open("/dev/null", O_WRONLY);

	if (openpty(&mfd, &sfd, NULL, NULL, &ws) == -1) {
		fprintf(stderr, "no pty here, skipping the terminal test\n");
		close(null);
		return;
	}
	CHECK(tcgetattr(sfd, &before) == 0);
	memset(&o, 0, sizeof(o));
	o.id = "sb1";
	o.cmd = argv;
	o.ncmd = 1;
	o.interactive = 1;
	o.tty = 1;
	o.env = json_object();
	/* Keystrokes reach the remote side as typed (raw: no line editing). */
	CHECK(write(mfd, "typed", 5) == 5);
	api = cli_api_new(NULL);
	CHECK(cmd_exec_run(api, &o, sfd, null, null) == 0);
	CHECK(resize_cols == 111);
	CHECK_STR(cat_buf, "typed");
	CHECK(tcgetattr(sfd, &after) == 0);
	CHECK(memcmp(&before.c_lflag, &after.c_lflag, sizeof(before.c_lflag)) == 0);
	CHECK((after.c_lflag & ICANON) != 0);
	cli_api_free(api);
	cmd_exec_opts_free(&o);
	close(sfd);
	close(mfd);
	close(null);
}

/* ps lists, attach follows a running process to its exit code. */
static void
test_ps_attach(void)
{
	char otmp[] = "/tmp/airlock-test-at.XXXXXX";
	char *ps[] = { "ps", "sb1", NULL }, *out, *err;
	struct cli_exec_opts o;
	struct cli_api *api;
	size_t len;
	int fd;

	CHECK(capture(cmd_ps, 2, ps, &out, &err) == 0);
	CHECK(strstr(out, "7 ") != NULL && strstr(out, " sleep 9") != NULL);
	free(out);
	free(err);
	memset(&o, 0, sizeof(o));
	o.id = "sb1";
	o.attach = 7;
	o.env = json_object();
	fd = mkstemp(otmp);
	api = cli_api_new(NULL);
	CHECK(cmd_exec_run(api, &o, STDIN_FILENO, fd, STDERR_FILENO) == 4);
	cli_api_free(api);
	cmd_exec_opts_free(&o);
	close(fd);
	CHECK(read_file(otmp, 4096, &out, &len, NULL) == 0);
	CHECK_STR(out, "late\n");
	free(out);
	unlink(otmp);
}

/*
 * Events that come well after the response head (a real sandbox's start and
 * output) are read as they arrive: the loop polls the stream's socket.
 */
static void
test_exec_late_events(void)
{
	char otmp[] = "/tmp/airlock-test-late.XXXXXX", *out;
	char *argv[] = { "slowstart", NULL };
	struct cli_exec_opts o;
	struct cli_api *api;
	size_t len;
	int fd;

	memset(&o, 0, sizeof(o));
	o.id = "sb1";
	o.cmd = argv;
	o.ncmd = 1;
	o.env = json_object();
	fd = mkstemp(otmp);
	api = cli_api_new(NULL);
	CHECK(cmd_exec_run(api, &o, STDIN_FILENO, fd, STDERR_FILENO) == 0);
	cli_api_free(api);
	cmd_exec_opts_free(&o);
	close(fd);
	CHECK(read_file(otmp, 4096, &out, &len, NULL) == 0);
	CHECK_STR(out, "slow\n");
	free(out);
	unlink(otmp);

	/* The loop above can only wait on the stream if it has a socket to poll. */
	struct cli_conn *c;
	char *cause = NULL;
	api = cli_api_new(NULL);
	c = cli_conn_new(api);
	CHECK(cli_conn_fd(c) == -1);
	const char *slow = "{\"cmd\":[\"slowstart\"]}";
	CHECK(cli_conn_request(c, "POST", "/v1/sandboxes/sb1/exec", "application/json",
	    slow, strlen(slow), -1, NULL, NULL, NULL, &cause) == 200);
	CHECK(cli_conn_fd(c) >= 0);
	json_t *rest = cli_conn_json(c, &cause);
	CHECK(rest == NULL);	/* an event stream is not JSON */
	json_decref(rest);
	free(cause);
	cli_conn_free(c);
	cli_api_free(api);
}

/* stdout closed under us (| head): the remote command is stopped, exit 141. */
static void
test_exec_broken_pipe(void)
{
	char *argv[] = { "echo", NULL };
	struct cli_exec_opts o;
	struct cli_api *api;
	int p[2];

	memset(&o, 0, sizeof(o));
	o.id = "sb1";
	o.cmd = argv;
	o.ncmd = 1;
	o.env = json_object();
	CHECK(pipe(p) == 0);
	close(p[0]);
	api = cli_api_new(NULL);
	CHECK(cmd_exec_run(api, &o, STDIN_FILENO, p[1], STDERR_FILENO) == 128 + SIGPIPE);
	cli_api_free(api);
	cmd_exec_opts_free(&o);
	close(p[1]);
}

/* Run exec with the given command; stdout/stderr land in files. */
static int
run_exec(const char *cmd, int interactive, const char *input, char **out, char **err)
{
	char otmp[] = "/tmp/airlock-test-eo.XXXXXX", etmp[] = "/tmp/airlock-test-ee.XXXXXX";
	char *argv[] = { (char *)cmd, NULL };
	int ofd = mkstemp(otmp), efd = mkstemp(etmp), in[2], rv, se = dup(2);
	struct cli_exec_opts o;
	struct cli_api *api;
	size_t len;

	memset(&o, 0, sizeof(o));
	o.id = "sb1";
	o.cmd = argv;
	o.ncmd = 1;
	o.interactive = interactive;
	o.tty = interactive;	/* not a terminal: asks for a PTY, no raw mode */
	o.env = json_object();
	CHECK(pipe(in) == 0);
	if (input != NULL)
		CHECK(write(in[1], input, strlen(input)) == (ssize_t)strlen(input));
	close(in[1]);
	api = cli_api_new(NULL);
	dup2(efd, 2);	/* cli_fail messages */
	rv = cmd_exec_run(api, &o, in[0], ofd, efd);
	fflush(stderr);
	dup2(se, 2);
	close(se);
	cli_api_free(api);
	cmd_exec_opts_free(&o);
	close(in[0]);
	close(ofd);
	close(efd);
	CHECK(read_file(otmp, 1 << 20, out, &len, NULL) == 0);
	CHECK(read_file(etmp, 1 << 20, err, &len, NULL) == 0);
	unlink(otmp);
	unlink(etmp);
	return rv;
}

static void
test_exec(void)
{
	char *out, *err;

	CHECK(run_exec("echo", 0, NULL, &out, &err) == 3);
	CHECK_STR(out, "hi\n");
	CHECK_STR(err, "oops\n");
	free(out);
	free(err);
	CHECK(run_exec("kill", 0, NULL, &out, &err) == 128 + 9);
	free(out);
	free(err);
	CHECK(run_exec("nostart", 0, NULL, &out, &err) == 127);
	CHECK(strstr(err, "nostart: not found") != NULL);
	free(out);
	free(err);
	CHECK(run_exec("hang", 0, NULL, &out, &err) == CLI_EXIT_EXEC_FAIL);
	CHECK(strstr(err, "ended before the command exited") != NULL);
	free(out);
	free(err);
	/* Broken base64, bad JSON, an out-of-range code: no crash, and a failure code. */
	CHECK(run_exec("garbage", 0, NULL, &out, &err) == CLI_EXIT_EXEC_FAIL);
	CHECK_STR(out, "");
	free(out);
	free(err);
	/* -i: stdin goes up through .../stdin, EOF too; the fake echoes it back. */
	CHECK(run_exec("cat", 1, "line one\nline two\n", &out, &err) == 0);
	CHECK_STR(out, "line one\nline two\n");
	CHECK(resize_cols == 80);
	free(out);
	free(err);
}

static void
test_cp(void)
{
	char src[] = "/tmp/airlock-test-src.XXXXXX", dir[] = "/tmp/airlock-test-dst.XXXXXX";
	char *up[] = { "cp", src, "sb1:/dir", "--json", NULL };
	char *down[3] = { "cp", "sb1:/big", dir };
	char *miss[] = { "cp", "sb1:/missing", dir, NULL };
	char *both[] = { "cp", "a:x", "b:y", NULL };
	char *out, *err, *path, *data;
	uint64_t sum = 0;
	size_t len, i;
	int fd = mkstemp(src);
	char buf[100000];

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 13);
	for (i = 0; i < 20; i++)
		CHECK(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	fchmod(fd, 0640);
	close(fd);
	for (i = 0; i < 20 * sizeof(buf); i++)
		sum = sum * 31 + (unsigned char)buf[i % sizeof(buf)];
	/* Upload into a directory: the local name is kept, bytes and mode arrive. */
	CHECK(capture(cmd_cp, 4, up, &out, &err) == 0);
	CHECK(put_bytes == 20 * sizeof(buf) && put_sum == sum);
	json_t *j = json_loads(out, 0, NULL);
	char *want;
	xasprintf(&want, "/dir/%s", strrchr(src, '/') + 1);
	CHECK_STR(json_string_value(json_object_get(j, "path")), want);
	CHECK_STR(json_string_value(json_object_get(j, "mode")), "0640");
	free(want);
	json_decref(j);
	free(out);
	free(err);
	unlink(src);

	/* Download into a directory: streamed, complete, under the remote name. */
	CHECK(mkdtemp(dir) != NULL);
	CHECK(capture(cmd_cp, 3, down, &out, &err) == 0);
	xasprintf(&path, "%s/big", dir);
	CHECK(read_file(path, BIG_SIZE + 1, &data, &len, NULL) == 0);
	CHECK(len == BIG_SIZE);
	for (i = 0; i < len; i++)
		if (data[i] != (char)(i * 7 % 251))
			break;
	CHECK(i == len);
	free(data);
	free(out);
	free(err);
	unlink(path);
	free(path);
	/* A failed download leaves nothing behind. */
	CHECK(capture(cmd_cp, 3, miss, &out, &err) == 1);
	CHECK(strstr(err, "path \"/missing\" not found") != NULL);
	CHECK(rmdir(dir) == 0);
	free(out);
	free(err);
	/* The daemon refuses an upload before reading it: its message, not EPIPE. */
	char big[] = "/tmp/airlock-test-big.XXXXXX";
	char *upmiss[] = { "cp", big, "nosuch:/x", NULL };
	fd = mkstemp(big);
	for (i = 0; i < 80; i++)
		CHECK(write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf));
	close(fd);
	CHECK(capture(cmd_cp, 3, upmiss, &out, &err) == 1);
	CHECK(strstr(err, "sandbox \"nosuch/files\" not found") != NULL);
	unlink(big);
	free(out);
	free(err);
	CHECK(capture(cmd_cp, 3, both, &out, &err) == 1);
	CHECK(strstr(err, "between sandboxes") != NULL);
	free(out);
	free(err);
}

/* A daemon that is not quite HTTP: the client fails cleanly. */
static void *
bogus_server(void *arg)
{
	int lfd = *(int *)arg, fd;
	char buf[4096];

	/*
	 * First a good keep-alive answer, then the connection is dropped
	 * without a word, as a daemon's idle timeout does: the client's next
	 * request must go out again on a new connection.
	 */
	if ((fd = accept(lfd, NULL, NULL)) == -1)
		return NULL;
	(void)!read(fd, buf, sizeof(buf));
	(void)!write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"n\":1}", 45);
	usleep(100000);
	close(fd);
	if ((fd = accept(lfd, NULL, NULL)) == -1)
		return NULL;
	(void)!read(fd, buf, sizeof(buf));
	(void)!write(fd, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"n\":2}", 45);
	close(fd);
	static const char *answers[] = {
		"SSH-2.0-OpenSSH\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"a\"",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n{x}",
		/* Good but unusual: close-delimited, chunked with extensions and trailers. */
		"HTTP/1.0 200 OK\r\n\r\n{\"n\":3}",
		("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "3;x=y\r\n{\"n\r\n4\r\n\":4}\r\n0\r\nX-T: 1\r\n\r\n"),
		/* A hostile one: an endless chunk size line. */
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffffffff\r\n",
	};
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		if ((fd = accept(lfd, NULL, NULL)) == -1)
			break;
		(void)!read(fd, buf, sizeof(buf));
		(void)!write(fd, answers[i], strlen(answers[i]));
		close(fd);
	}
	return NULL;
}

static void
test_bogus_daemon(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	char url[64], *cause = NULL;
	struct cli_api *api;
	pthread_t th;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), st;
	json_t *j;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	bind(lfd, (struct sockaddr *)&sin, sizeof(sin));
	listen(lfd, 4);
	getsockname(lfd, (struct sockaddr *)&sin, &sl);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sin.sin_port));
	pthread_create(&th, NULL, bogus_server, &lfd);
	setenv("AIRLOCK_URL", url, 1);
	api = cli_api_new(NULL);
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j != NULL && json_integer_value(json_object_get(j, "n")) == 1);
	json_decref(j);
	usleep(300000);
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j != NULL && json_integer_value(json_object_get(j, "n")) == 2);
	json_decref(j);
	cli_api_free(api);
	api = cli_api_new(NULL);
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j == NULL);
	CHECK_CAUSE(cause, "bad response from airlockd");
	free(cause);
	cause = NULL;
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j == NULL);
	CHECK_CAUSE(cause, "closed the connection in the middle");
	free(cause);
	cause = NULL;
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j == NULL);
	CHECK_CAUSE(cause, "invalid JSON");
	free(cause);
	cause = NULL;
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j != NULL && json_integer_value(json_object_get(j, "n")) == 3);
	json_decref(j);
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j != NULL && json_integer_value(json_object_get(j, "n")) == 4);
	json_decref(j);
	j = cli_api_json(api, "GET", "/v1/x", NULL, &st, &cause);
	CHECK(j == NULL);
	CHECK_CAUSE(cause, "bad response body");
	free(cause);
	cli_api_free(api);
	pthread_join(th, NULL);
	close(lfd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	setenv("AIRLOCK_URL", url, 1);
}

static void *
client(void *arg)
{
	struct cli_api *api;
	char url[64];
	json_t *j;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", port);
	setenv("AIRLOCK_URL", url, 1);
	setenv("AIRLOCK_API_KEY", TEST_KEY, 1);
	T_RUN(test_api_errors);
	T_RUN(test_commands);
	T_RUN(test_exec);
	T_RUN(test_exec_late_events);
	T_RUN(test_exec_broken_pipe);
	T_RUN(test_ps_attach);
	T_RUN(test_exec_tty);
	T_RUN(test_cp);
	T_RUN(test_bogus_daemon);

	api = cli_api_new(NULL);
	j = cli_api_json(api, "GET", "/stop", NULL, NULL, NULL);
	json_decref(j);
	cli_api_free(api);
	return NULL;
}

int
main(void)
{
	pthread_t th;
	char *cause = NULL;

	signal(SIGPIPE, SIG_IGN);
	T_RUN(test_args);
	T_RUN(test_escape);
	T_RUN(test_create_parse);
	T_RUN(test_exec_parse);
	T_RUN(test_sse);
	T_RUN(test_response_head);

	evthread_use_pthreads();
	base = event_base_new();
	srv = http_server_new(base, fake_router, NULL);
	if (http_server_listen(srv, "127.0.0.1", 0, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	port = http_server_port(srv);
	pthread_create(&th, NULL, client, NULL);
	event_base_dispatch(base);
	pthread_join(th, NULL);
	http_server_free(srv);
	event_base_free(base);
	json_decref(last_create);
	return t_done();
}
