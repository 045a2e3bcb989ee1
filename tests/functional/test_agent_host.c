/*
 * The guest agent without a VM: airlock-agent-host serves its channel on a
 * unix socket, airlock-agentctl forwards a local socket to guest port
 * 49983 through the channel (the same host client airlockd uses), and the
 * test speaks envd HTTP to it. Covers the E2B JS SDK's recorded envd
 * requests (../shared/spec/e2b-observed-requests.txt) and the list:
 * exec, exit codes, stdin, signals, PTY, reattach, files up/down incl.
 * 100 MB, watches, aborted uploads that must not touch the old file,
 * FIFOs and devices refused without blocking the agent, errnos named in
 * errors, bad input of every kind, 20 execs beside a 100 MB upload, port
 * forwarding, access token.
 *
 * The agent runs as root with a private passwd where "user" is uid 1000
 * with its home in the temporary directory, so nothing outside it changes.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_harness.h"
#include "common/digest.h"
#include "common/util.h"
#include "../unit/t.h"

#define BIG_LEN		(100u * 1024 * 1024)
#define N_EXEC		20

static char dir[64], api[128], chan_sock[128], home[128];
static const char *agent_bin, *ctl_bin;
static pid_t agent_pid, fwd_pid;

static char *
jstr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *
jstr(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		abort();
	va_end(ap);
	return s;
}

static json_t *
body_json(const struct hresp *r)
{
	return json_loadb(r->body != NULL ? r->body : "", r->len, 0, NULL);
}

/* JSON error body {"code":..}: string for Connect, integer for REST. */
static int
has_code_str(const struct hresp *r, const char *code)
{
	json_t *j = body_json(r);
	int ok = j != NULL && json_is_string(json_object_get(j, "code")) &&
	    strcmp(json_string_value(json_object_get(j, "code")), code) == 0 &&
	    json_is_string(json_object_get(j, "message"));

	json_decref(j);
	return ok;
}

static int
has_code_int(const struct hresp *r, int code)
{
	json_t *j = body_json(r);
	int ok = j != NULL && json_integer_value(json_object_get(j, "code")) == code &&
	    json_is_string(json_object_get(j, "message"));

	json_decref(j);
	return ok;
}

static void
test_health(void)
{
	struct hresp r;

	CHECK(ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 204);
	ah_resp_free(&r);
}

/* The JS SDK's Start requests, as recorded. */
static void
test_e2b_exec(void)
{
	struct ah_run run;

	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\","
	    "\"echo hi; echo err 1>&2\"]},\"stdin\":false}",
	    "Connect-Timeout-Ms: 60000\r\nKeepalive-Ping-Interval: 50\r\n", &run) == 0);
	CHECK(run.http_status == 200);
	CHECK(run.start_first && run.pid > 0);
	CHECK_STR(run.out, "hi\n");
	CHECK_STR(run.err, "err\n");
	CHECK(run.ended && run.exit_code == 0 && run.exited);
	CHECK_STR(run.status, "exit status 0");
	CHECK_STR(run.error, "");
	CHECK(run.end_stream && run.stream_error[0] == '\0');
	ah_run_free(&run);

	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"exit 3\"]},"
	    "\"stdin\":false}", NULL, &run) == 0);
	CHECK(run.ended && run.exit_code == 3);
	CHECK_STR(run.error, "exit status 3");
	CHECK(run.end_stream);
	ah_run_free(&run);

	/* Sandbox env (env file), request envs, HOME/USER, cwd, default user uid 1000. */
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
	    "\"echo $FOO $A $USER $HOME $(id -u) $(pwd)\"],\"envs\":{\"A\":\"1\"},\"cwd\":\"/tmp\"}}",
	    NULL, &run) == 0);
	{
		char *want = jstr("bar 1 user %s 1000 /tmp\n", home);

		CHECK_STR(run.out, want);
		free(want);
	}
	ah_run_free(&run);

	/* Basic auth picks the user, as the SDK sends it for user: "root". */
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"id\",\"args\":[\"-u\"]}}",
	    "Authorization: Basic cm9vdDo=\r\n", &run) == 0);
	CHECK_STR(run.out, "0\n");
	ah_run_free(&run);

	/* A missing cwd, a missing binary, an unknown user: errors in the end-stream, HTTP 200. */
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"true\",\"cwd\":\"/nonexistent\"}}", NULL, &run) == 0);
	CHECK(run.http_status == 200 && run.end_stream && !run.ended);
	CHECK_STR(run.stream_error, "invalid_argument");
	ah_run_free(&run);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/no/such/binary\"}}", NULL, &run) == 0);
	CHECK(run.end_stream);
	CHECK_STR(run.stream_error, "internal");
	ah_run_free(&run);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"true\"}}", "Authorization: Basic bm9ib2R5Og==\r\n",
	    &run) == 0);
	CHECK_STR(run.stream_error, "unauthenticated");
	ah_run_free(&run);
	CHECK(ah_exec(api, "{\"process\":{}}", NULL, &run) == 0);
	CHECK_STR(run.stream_error, "invalid_argument");
	ah_run_free(&run);
	/* Connect-Timeout-Ms kills the process. */
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"sleep\",\"args\":[\"30\"]}}",
	    "Connect-Timeout-Ms: 300\r\n", &run) == 0);
	CHECK(run.ended && !run.exited && run.exit_code == -1);
	CHECK_STR(run.status, "signal: killed");
	ah_run_free(&run);
}

/* stdin: the start event is flushed before the process has produced anything. */
struct streamer {
	int	fd;
	int	pid;
};

static int
stream_open(const char *json, const char *path, struct streamer *s)
{
	char *env, *chunk;
	size_t len;
	struct hresp r;
	ssize_t n;
	json_t *j;

	memset(s, 0, sizeof(*s));
	if ((s->fd = ah_unix_connect(api)) == -1)
		return -1;
	env = ah_envelope(json, &len);
	ah_send(s->fd, "POST", path, "Content-Type: application/connect+json\r\n", env, len);
	free(env);
	if (ah_read_head(s->fd, &r) == -1 || r.status != 200) {
		ah_resp_free(&r);
		return -1;
	}
	ah_resp_free(&r);
	/* One chunk = one envelope: the first must be the start event. */
	if ((n = ah_read_chunk(s->fd, &chunk)) <= 5)
		return -1;
	j = json_loadb(chunk + 5, (size_t)n - 5, 0, NULL);
	s->pid = (int)json_integer_value(json_object_get(json_object_get(json_object_get(j,
	    "event"), "start"), "pid"));
	if (json_object_get(j, "start") != NULL)
		s->pid = 1;	/* WatchDir's {"start":{}} */
	json_decref(j);
	free(chunk);
	return s->pid > 0 ? 0 : -1;
}

/* Read the rest of a stream into run (after stream_open consumed the start),
 * then close it. */
static int
stream_finish(struct streamer *s, struct ah_run *run)
{
	int rc = ah_read_response_rest(s->fd, run);

	close(s->fd);
	return rc;
}

static void
test_stdin_and_list(void)
{
	struct streamer s;
	struct ah_run run;
	struct hresp r;
	char *req;
	json_t *j, *procs;

	/* The process blocks on stdin, so the start event cannot be waiting for output. */
	CHECK(stream_open("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"cat\"]},"
	    "\"stdin\":true}", "/process.Process/Start", &s) == 0);
	CHECK(ah_rpc(api, "process.Process/List", "{}", NULL, &r) == 200);
	j = body_json(&r);
	procs = json_object_get(j, "processes");
	CHECK(json_array_size(procs) >= 1);
	CHECK(json_object_get(json_array_get(procs, 0), "config") != NULL);
	json_decref(j);
	ah_resp_free(&r);
	req = jstr("{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"YWJjCg==\"}}", s.pid);
	CHECK(ah_rpc(api, "process.Process/SendInput", req, NULL, &r) == 200);
	CHECK(r.len == 2 && strcmp(r.body, "{}") == 0);
	CHECK_STR(ah_header(&r, "Content-Type"), "application/json");
	ah_resp_free(&r);
	free(req);
	req = jstr("{\"process\":{\"pid\":%d}}", s.pid);
	CHECK(ah_rpc(api, "process.Process/CloseStdin", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	CHECK(stream_finish(&s, &run) == 0);
	CHECK_STR(run.out, "abc\n");
	CHECK(run.ended && run.exit_code == 0 && run.end_stream);
	ah_run_free(&run);
	/* Input to a process without stdin is refused. */
	CHECK(ah_rpc(api, "process.Process/SendInput",
	    "{\"process\":{\"pid\":999999},\"input\":{\"stdin\":\"YQ==\"}}", NULL, &r) == 404);
	CHECK(has_code_str(&r, "not_found"));
	ah_resp_free(&r);
}

static void
test_signal(void)
{
	struct streamer s;
	struct ah_run run;
	struct hresp r;
	char *req;

	CHECK(stream_open("{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"sleep 30\"],"
	    "\"envs\":{\"A\":\"1\"},\"cwd\":\"/tmp\"},\"stdin\":false}", "/process.Process/Start",
	    &s) == 0);
	req = jstr("{\"process\":{\"pid\":%d},\"signal\":\"SIGNAL_SIGKILL\"}", s.pid);
	CHECK(ah_rpc(api, "process.Process/SendSignal", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	CHECK(stream_finish(&s, &run) == 0);
	CHECK(run.ended && run.exit_code == -1 && !run.exited);
	CHECK_STR(run.status, "signal: killed");
	CHECK_STR(run.error, "signal: killed");
	CHECK(run.end_stream);
	ah_run_free(&run);
	CHECK(ah_rpc(api, "process.Process/SendSignal",
	    "{\"process\":{\"pid\":999999},\"signal\":\"SIGNAL_SIGKILL\"}", NULL, &r) == 404);
	CHECK(has_code_str(&r, "not_found"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "process.Process/SendSignal",
	    "{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGSTOP\"}", NULL, &r) == 400);
	CHECK(has_code_str(&r, "invalid_argument"));
	ah_resp_free(&r);
}

static void
test_pty(void)
{
	struct streamer s;
	struct ah_run run;
	struct hresp r;
	char *req;

	CHECK(stream_open("{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
	    "\"stty size; read x; stty size; echo got $x\"],\"envs\":{\"TERM\":\"xterm\"}},"
	    "\"pty\":{\"size\":{\"cols\":80,\"rows\":24}}}", "/process.Process/Start", &s) == 0);
	/* Resize only after the first stty ran, or it could see the new size. */
	{
		char *chunk;
		int seen = 0;

		while (!seen && ah_read_chunk(s.fd, &chunk) > 5) {
			seen = strstr(chunk + 5, "\"pty\"") != NULL;
			free(chunk);
		}
		CHECK(seen);
	}
	req = jstr("{\"process\":{\"pid\":%d},\"pty\":{\"size\":{\"cols\":100,\"rows\":30}}}", s.pid);
	CHECK(ah_rpc(api, "process.Process/Update", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	req = jstr("{\"process\":{\"pid\":%d},\"input\":{\"pty\":\"aGVsbG8K\"}}", s.pid);
	CHECK(ah_rpc(api, "process.Process/SendInput", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	CHECK(stream_finish(&s, &run) == 0);
	CHECK(strstr(run.pty, "30 100") != NULL);
	CHECK(strstr(run.pty, "got hello") != NULL);
	CHECK(run.outlen == 0);
	CHECK(run.ended && run.exit_code == 0);
	ah_run_free(&run);
	CHECK(ah_rpc(api, "process.Process/Update",
	    "{\"process\":{\"pid\":999999},\"pty\":{\"size\":{\"cols\":1,\"rows\":1}}}", NULL, &r) == 404);
	ah_resp_free(&r);
}

/* A client disconnects; the process lives on; Connect replays and continues. */
static void
test_reattach(void)
{
	struct streamer s, s2;
	struct ah_run run;
	struct hresp r;
	char *req, *chunk;
	int pid;

	CHECK(stream_open("{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
	    "\"echo before; read x; echo after $x\"]},\"stdin\":true}", "/process.Process/Start",
	    &s) == 0);
	pid = s.pid;
	/* Wait for "before", then hang up. */
	CHECK(ah_read_chunk(s.fd, &chunk) > 0);
	free(chunk);
	close(s.fd);
	req = jstr("{\"process\":{\"pid\":%d}}", pid);
	CHECK(stream_open(req, "/process.Process/Connect", &s2) == 0);
	CHECK(s2.pid == pid);
	free(req);
	req = jstr("{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"eW8K\"}}", pid);
	CHECK(ah_rpc(api, "process.Process/SendInput", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	CHECK(stream_finish(&s2, &run) == 0);
	CHECK_STR(run.out, "before\nafter yo\n");	/* replayed, then live */
	CHECK(run.ended && run.exit_code == 0 && run.end_stream);
	ah_run_free(&run);
	/* A finished process cannot be reattached. */
	req = jstr("{\"process\":{\"pid\":%d}}", pid);
	{
		size_t len;
		char *env = ah_envelope(req, &len);

		CHECK(ah_request(api, "POST", "/process.Process/Connect",
		    "Content-Type: application/connect+json\r\n", env, len, &r) == 0);
		memset(&run, 0, sizeof(run));
		CHECK(ah_parse_stream(r.body, r.len, &run) == 0);
		CHECK_STR(run.stream_error, "not_found");
		free(env);
		ah_resp_free(&r);
		ah_run_free(&run);
	}
	free(req);
}

/* Two clients on one process: the Start stream and a Connect both get the live output. */
static void
test_two_subscribers(void)
{
	struct streamer s, s2;
	struct ah_run run, run2;
	struct hresp r;
	char *req;

	CHECK(stream_open("{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
	    "\"read x; echo got $x\"]},\"stdin\":true}", "/process.Process/Start", &s) == 0);
	req = jstr("{\"process\":{\"pid\":%d}}", s.pid);
	CHECK(stream_open(req, "/process.Process/Connect", &s2) == 0);
	free(req);
	req = jstr("{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"b25lCg==\"}}", s.pid);
	CHECK(ah_rpc(api, "process.Process/SendInput", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	CHECK(stream_finish(&s, &run) == 0);
	CHECK(stream_finish(&s2, &run2) == 0);
	CHECK_STR(run.out, "got one\n");
	CHECK_STR(run2.out, "got one\n");
	CHECK(run.ended && run2.ended && run.end_stream && run2.end_stream);
	ah_run_free(&run);
	ah_run_free(&run2);
}

/* Keepalives fill silence at the client's interval (seconds). */
static void
test_keepalive(void)
{
	struct ah_run run;

	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"sleep\",\"args\":[\"3.5\"]}}",
	    "Keepalive-Ping-Interval: 1\r\n", &run) == 0);
	CHECK(run.ended && run.exit_code == 0);
	CHECK(run.keepalives >= 1);
	ah_run_free(&run);
}

/* Output kept for reattach is bounded: 3 MiB written, at most ~1 MiB replayed, the newest. */
static void
test_ring_bound(void)
{
	struct streamer s, s2;
	struct ah_run run;
	struct hresp r;
	char *marker = jstr("%s/ring.done", home), *script, *req;
	int pid, i;

	unlink(marker);
	script = jstr("{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\","
	    "\"head -c 3145728 /dev/zero | tr '\\\\0' x; echo; echo END; touch %s; read x\"]},"
	    "\"stdin\":true}", marker);
	CHECK(stream_open(script, "/process.Process/Start", &s) == 0);
	free(script);
	pid = s.pid;
	close(s.fd);
	/* All output is written once the marker exists (then it blocks on stdin). */
	for (i = 0; i < 1200 && access(marker, F_OK) != 0; i++)
		usleep(50000);
	CHECK(access(marker, F_OK) == 0);
	free(marker);
	req = jstr("{\"process\":{\"pid\":%d}}", pid);
	CHECK(stream_open(req, "/process.Process/Connect", &s2) == 0);
	free(req);
	req = jstr("{\"process\":{\"pid\":%d},\"input\":{\"stdin\":\"eAo=\"}}", pid);
	CHECK(ah_rpc(api, "process.Process/SendInput", req, NULL, &r) == 200);
	ah_resp_free(&r);
	free(req);
	CHECK(stream_finish(&s2, &run) == 0);
	/* The ring (1 MiB) plus at most a pipe's worth read after the marker. */
	CHECK(run.outlen > 0 && run.outlen <= 1024 * 1024 + 128 * 1024);
	CHECK(run.outlen >= 4 && memcmp(run.out + run.outlen - 4, "END\n", 4) == 0);
	CHECK(run.ended && run.exit_code == 0);
	fprintf(stderr, "   replayed %zu of 3145733 bytes\n", run.outlen);
	ah_run_free(&run);
}

static void
test_e2b_files(void)
{
	struct hresp r;
	char *target, *body, *want, *p;
	json_t *j, *e;
	size_t i;
	int fd;

	/* Multipart with the full path as filename, ?path= set, chunked body. */
	target = jstr("/files?path=%s%%2Fa.txt", home);
	body = jstr("------formdata-undici-075540592812\r\nContent-Disposition: form-data; "
	    "name=\"file\"; filename=\"%s/a.txt\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	    "hello file\r\n------formdata-undici-075540592812--\r\n", home);
	fd = ah_unix_connect(api);
	CHECK(ah_send_chunked(fd, target, "multipart/form-data; boundary=----formdata-undici-075540592812",
	    body, strlen(body)) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200);
	j = body_json(&r);
	CHECK(json_array_size(j) == 1);
	e = json_array_get(j, 0);
	CHECK(json_object_size(e) == 3);	/* exactly name, type, path */
	CHECK_STR(json_string_value(json_object_get(e, "name")), "a.txt");
	CHECK_STR(json_string_value(json_object_get(e, "type")), "file");
	want = jstr("%s/a.txt", home);
	CHECK_STR(json_string_value(json_object_get(e, "path")), want);
	free(want);
	json_decref(j);
	ah_resp_free(&r);
	free(target);
	free(body);

	/* Keep-alive: a second request on the same connection, octet-stream, relative path. */
	CHECK(ah_send_chunked(fd, "/files?path=rel%2Fb.txt", "application/octet-stream", "octet", 5) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200);
	want = jstr("[{\"name\":\"b.txt\",\"type\":\"file\",\"path\":\"%s/rel/b.txt\"}]", home);
	CHECK_STR(r.body, want);
	free(want);
	ah_resp_free(&r);
	close(fd);

	/* Two files in one request, no ?path=. */
	body = jstr("------formdata-undici-013289807675\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"%s/m1.txt\"\r\nContent-Type: application/octet-stream\r\n\r\none\r\n"
	    "------formdata-undici-013289807675\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"%s/m2.txt\"\r\nContent-Type: application/octet-stream\r\n\r\ntwo\r\n"
	    "------formdata-undici-013289807675--\r\n", home, home);
	fd = ah_unix_connect(api);
	CHECK(ah_send_chunked(fd, "/files", "multipart/form-data; boundary=----formdata-undici-013289807675",
	    body, strlen(body)) == 0);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 200);
	j = body_json(&r);
	CHECK(json_array_size(j) == 2);
	CHECK_STR(json_string_value(json_object_get(json_array_get(j, 1), "name")), "m2.txt");
	json_decref(j);
	ah_resp_free(&r);
	close(fd);
	free(body);

	/* Read back; ownership is the acting user's. */
	target = jstr("/files?path=%s%%2Fa.txt", home);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 200 && r.len == 10 && memcmp(r.body, "hello file", 10) == 0);
	CHECK_STR(ah_header(&r, "Content-Type"), "application/octet-stream");
	ah_resp_free(&r);
	free(target);
	{
		struct stat st;
		char *path = jstr("%s/rel/b.txt", home);

		CHECK(stat(path, &st) == 0 && st.st_uid == 1000);
		free(path);
	}
	/* Expect: 100-continue: the interim answer comes before the body is sent. */
	{
		static const char head[] = "POST /files?path=cont.txt HTTP/1.1\r\nHost: a\r\n"
		    "Content-Type: application/octet-stream\r\nContent-Length: 5\r\n"
		    "Expect: 100-continue\r\n\r\n";
		char interim[32];
		int cfd = ah_unix_connect(api);

		CHECK(ah_write_all(cfd, head, sizeof(head) - 1) == 0);
		CHECK(read(cfd, interim, 25) == 25 && memcmp(interim, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
		CHECK(ah_write_all(cfd, "hello", 5) == 0);
		CHECK(ah_read_response(cfd, &r) == 0 && r.status == 200);
		ah_resp_free(&r);
		close(cfd);
	}
	/* airlock's ?mode= extension, also on an existing file. */
	CHECK(ah_request(api, "POST", "/files?path=moded.txt&mode=0640",
	    "Content-Type: application/octet-stream\r\n", "m", 1, &r) == 0 && r.status == 200);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/files?path=moded.txt&mode=0751",
	    "Content-Type: application/octet-stream\r\n", "m", 1, &r) == 0 && r.status == 200);
	ah_resp_free(&r);
	{
		struct stat st;
		char *path = jstr("%s/moded.txt", home);

		CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0751);
		free(path);
	}
	CHECK(ah_request(api, "POST", "/files?path=moded.txt&mode=99",
	    "Content-Type: application/octet-stream\r\n", "m", 1, &r) == 0 && r.status == 400);
	ah_resp_free(&r);
	target = jstr("/files?path=%s%%2Fmissing", home);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 404 && has_code_int(&r, 404));
	ah_resp_free(&r);
	free(target);
	target = jstr("/files?path=%s", home);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 400 && has_code_int(&r, 400));
	ah_resp_free(&r);
	free(target);
	CHECK(ah_request(api, "GET", "/files?path=x&username=nobody", NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 401 && has_code_int(&r, 401));
	ah_resp_free(&r);
	/* Uploads: a directory target, an unsupported type, a body with no closing boundary. */
	target = jstr("/files?path=%s", home);
	CHECK(ah_request(api, "POST", target, "Content-Type: application/octet-stream\r\n", "x", 1,
	    &r) == 0);
	CHECK(r.status == 400 && has_code_int(&r, 400));
	ah_resp_free(&r);
	free(target);
	CHECK(ah_request(api, "POST", "/files?path=x", "Content-Type: text/plain\r\n", "x", 1, &r) == 0);
	CHECK(r.status == 400);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/files?path=x", "Content-Type: multipart/form-data; boundary=zz\r\n",
	    "--zz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc", 52, &r) == 0);
	CHECK(r.status == 400);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/files", "Content-Type: multipart/form-data; boundary=zz\r\n",
	    "--zz--\r\n", 8, &r) == 0);
	CHECK(r.status == 400);	/* no file: the SDKs throw on an empty list */
	ah_resp_free(&r);

	/* ListDir / Stat / MakeDir as the SDK sends them. */
	body = jstr("{\"path\":\"%s\",\"depth\":1}", home);
	CHECK(ah_rpc(api, "filesystem.Filesystem/ListDir", body, NULL, &r) == 200);
	j = body_json(&r);
	e = json_object_get(j, "entries");
	CHECK(json_array_size(e) >= 4);
	for (i = 0; i < json_array_size(e); i++) {
		p = (char *)json_string_value(json_object_get(json_array_get(e, i), "path"));
		CHECK(p != NULL && p[0] == '/');
		CHECK(strchr(p + strlen(home) + 1, '/') == NULL);	/* depth 1 */
	}
	json_decref(j);
	ah_resp_free(&r);
	free(body);
	body = jstr("{\"path\":\"%s\",\"depth\":2}", home);
	CHECK(ah_rpc(api, "filesystem.Filesystem/ListDir", body, NULL, &r) == 200);
	CHECK(strstr(r.body, "/rel/b.txt") != NULL);
	ah_resp_free(&r);
	free(body);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"nope\"}", NULL, &r) == 404);
	CHECK(has_code_str(&r, "not_found"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\n  \"path\": \"a.txt\"\n}", NULL, &r) == 200);
	j = body_json(&r);
	e = json_object_get(j, "entry");
	CHECK_STR(json_string_value(json_object_get(e, "type")), "FILE_TYPE_FILE");
	CHECK_STR(json_string_value(json_object_get(e, "size")), "10");
	CHECK_STR(json_string_value(json_object_get(e, "permissions")), "-rw-r--r--");
	CHECK_STR(json_string_value(json_object_get(e, "owner")), "user");
	json_decref(j);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"dir/sub\"}", NULL, &r) == 200);
	CHECK(strstr(r.body, "FILE_TYPE_DIRECTORY") != NULL);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"dir/sub\"}", NULL, &r) == 409);
	CHECK(has_code_str(&r, "already_exists"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"a.txt\"}", NULL, &r) == 400);
	CHECK(has_code_str(&r, "invalid_argument"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/ListDir", "{\"path\":\"a.txt\"}", NULL, &r) == 400);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Move",
	    "{\"source\":\"m1.txt\",\"destination\":\"moved/m1.txt\"}", NULL, &r) == 200);
	CHECK(strstr(r.body, "moved/m1.txt") != NULL);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Move",
	    "{\"source\":\"nope\",\"destination\":\"x\"}", NULL, &r) == 404);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Remove", "{\"path\":\"dir\"}", NULL, &r) == 200);
	CHECK_STR(r.body, "{}");
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"dir\"}", NULL, &r) == 404);
	ah_resp_free(&r);
}

static void
test_watch(void)
{
	struct streamer s;
	struct hresp r;
	char *path, *chunk, *id;
	json_t *j;
	ssize_t n;
	int fd, found = 0;

	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"w\"}", NULL, &r) == 200);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/CreateWatcher", "{\"path\":\"w\",\"recursive\":true}",
	    NULL, &r) == 200);
	j = body_json(&r);
	id = strdup(json_string_value(json_object_get(j, "watcherId")) ?: "");
	json_decref(j);
	ah_resp_free(&r);
	path = jstr("%s/w/new.txt", home);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	close(fd);
	free(path);
	path = jstr("{\"watcherId\":\"%s\"}", id);
	CHECK(ah_rpc(api, "filesystem.Filesystem/GetWatcherEvents", path, NULL, &r) == 200);
	CHECK(strstr(r.body, "\"name\":\"new.txt\"") != NULL);
	CHECK(strstr(r.body, "EVENT_TYPE_CREATE") != NULL);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/RemoveWatcher", path, NULL, &r) == 200);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/GetWatcherEvents", path, NULL, &r) == 404);
	ah_resp_free(&r);
	free(path);
	free(id);

	/* WatchDir stream: the start frame first, then events as they happen. */
	CHECK(stream_open("{\"path\":\"w\",\"recursive\":false}", "/filesystem.Filesystem/WatchDir",
	    &s) == 0);
	path = jstr("%s/w/streamed.txt", home);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	close(fd);
	free(path);
	while (!found && (n = ah_read_chunk(s.fd, &chunk)) > 5) {
		found = strstr(chunk + 5, "streamed.txt") != NULL &&
		    strstr(chunk + 5, "\"filesystem\"") != NULL;
		free(chunk);
	}
	CHECK(found);
	close(s.fd);
}

/*
 * envd 0.6.2-0.6.4 as airlock reports it (e2b-delta.md §1.3, §1.4): file
 * metadata as user.e2b.* xattrs, symlink entries, includeEntry in watch
 * events, and envd's own answers for ?path= with several parts and for
 * removing a missing path. Each check fails against the agent before.
 */
static void
test_e2b_v064(void)
{
	struct streamer s;
	struct hresp r;
	char *body, *path, *chunk, *want, big[300];
	json_t *j, *e, *m;
	ssize_t n;
	int found = 0;

	/* Upload with metadata: the answer and Stat carry it, keys lowercased. */
	CHECK(ah_request(api, "POST", "/files?path=meta.txt", "Content-Type: application/octet-stream\r\n"
	    "X-Metadata-Owner: alice\r\nx-metadata-TAG: v 1\r\n", "data", 4, &r) == 0);
	CHECK(r.status == 200);
	j = body_json(&r);
	m = json_object_get(json_array_get(j, 0), "metadata");
	CHECK(json_object_size(m) == 2);
	CHECK_STR(json_string_value(json_object_get(m, "owner")), "alice");
	CHECK_STR(json_string_value(json_object_get(m, "tag")), "v 1");
	json_decref(j);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"meta.txt\"}", NULL, &r) == 200);
	j = body_json(&r);
	m = json_object_get(json_object_get(j, "entry"), "metadata");
	CHECK_STR(json_string_value(json_object_get(m, "owner")), "alice");
	json_decref(j);
	ah_resp_free(&r);
	/* ListDir entries carry it too. */
	CHECK(ah_rpc(api, "filesystem.Filesystem/ListDir", "{\"path\":\"\",\"depth\":1}", NULL, &r) == 200);
	CHECK(strstr(r.body, "\"metadata\":{\"owner\":\"alice\"") != NULL ||
	    strstr(r.body, "\"owner\":\"alice\"") != NULL);
	ah_resp_free(&r);
	/* A new upload replaces the set: none sent, none left, and exactly three keys answered. */
	CHECK(ah_request(api, "POST", "/files?path=meta.txt", "Content-Type: application/octet-stream\r\n",
	    "new", 3, &r) == 0 && r.status == 200);
	j = body_json(&r);
	CHECK(json_object_size(json_array_get(j, 0)) == 3);
	json_decref(j);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"meta.txt\"}", NULL, &r) == 200);
	CHECK(strstr(r.body, "\"metadata\"") == NULL);
	ah_resp_free(&r);
	/* Multipart carries it as well (the JS SDK's default write). */
	body = jstr("--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"mp.txt\"\r\n\r\n"
	    "abc\r\n--zz--\r\n");
	CHECK(ah_request(api, "POST", "/files?path=mp.txt", "Content-Type: multipart/form-data; boundary=zz\r\n"
	    "X-Metadata-k: v\r\n", body, strlen(body), &r) == 0 && r.status == 200);
	CHECK(strstr(r.body, "\"metadata\":{\"k\":\"v\"}") != NULL);
	ah_resp_free(&r);
	free(body);
	/* Bad metadata: a 400 naming it, and nothing written. */
	CHECK(ah_request(api, "POST", "/files?path=bad-meta.txt", "Content-Type: application/octet-stream\r\n"
	    "X-Metadata-k: caf\xc3\xa9\r\n", "x", 1, &r) == 0);
	CHECK(r.status == 400 && has_code_int(&r, 400) && strstr(r.body, "metadata") != NULL);
	ah_resp_free(&r);
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	want = jstr("Content-Type: application/octet-stream\r\nX-Metadata-%s: v\r\n", big);
	CHECK(ah_request(api, "POST", "/files?path=bad-meta.txt", want, "x", 1, &r) == 0);
	CHECK(r.status == 400);
	ah_resp_free(&r);
	free(want);
	path = jstr("%s/bad-meta.txt", home);
	CHECK(access(path, F_OK) == -1);
	free(path);

	/* ?path= names every part's target: a second part to it is envd's 400. */
	body = jstr("--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"one\"\r\n\r\n"
	    "first\r\n--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"two\"\r\n\r\n"
	    "second\r\n--zz--\r\n");
	CHECK(ah_request(api, "POST", "/files?path=qp.txt", "Content-Type: multipart/form-data; boundary=zz\r\n",
	    body, strlen(body), &r) == 0);
	CHECK(r.status == 400 && strstr(r.body, "same path") != NULL);
	ah_resp_free(&r);
	free(body);
	path = jstr("%s/two", home);
	CHECK(access(path, F_OK) == -1);	/* before: the second part went to its file name */
	free(path);

	/* Removing a missing path is envd's success (os.RemoveAll). */
	CHECK(ah_rpc(api, "filesystem.Filesystem/Remove", "{\"path\":\"never-was\"}", NULL, &r) == 200);
	CHECK_STR(r.body, "{}");
	ah_resp_free(&r);

	/* A symlink is FILE_TYPE_SYMLINK with its target. */
	path = jstr("%s/link-to-meta", home);
	CHECK(symlink("meta.txt", path) == 0);
	free(path);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Stat", "{\"path\":\"link-to-meta\"}", NULL, &r) == 200);
	j = body_json(&r);
	e = json_object_get(j, "entry");
	CHECK_STR(json_string_value(json_object_get(e, "type")), "FILE_TYPE_SYMLINK");
	CHECK_STR(json_string_value(json_object_get(e, "symlinkTarget")), "meta.txt");
	json_decref(j);
	ah_resp_free(&r);

	/* includeEntry: each event carries the entry, recursive into a new directory. */
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"wi\"}", NULL, &r) == 200);
	ah_resp_free(&r);
	CHECK(stream_open("{\"path\":\"wi\",\"recursive\":true,\"includeEntry\":true,"
	    "\"allowNetworkMounts\":true}", "/filesystem.Filesystem/WatchDir", &s) == 0);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"wi/sub\"}", NULL, &r) == 200);
	ah_resp_free(&r);
	usleep(200000);	/* the watch on the new directory is added when its create is read */
	CHECK(ah_request(api, "POST", "/files?path=wi%2Fsub%2Fe.txt", "Content-Type: application/octet-stream\r\n",
	    "e", 1, &r) == 0 && r.status == 200);
	ah_resp_free(&r);
	want = jstr("\"path\":\"%s/wi/sub/e.txt\"", home);
	while (!found && (n = ah_read_chunk(s.fd, &chunk)) > 5) {
		found = strstr(chunk + 5, "\"name\":\"sub/e.txt\"") != NULL &&
		    strstr(chunk + 5, "\"entry\"") != NULL && strstr(chunk + 5, want) != NULL &&
		    strstr(chunk + 5, "FILE_TYPE_FILE") != NULL;
		free(chunk);
	}
	CHECK(found);
	free(want);
	close(s.fd);
}

static void
test_bad_input(void)
{
	struct hresp r;
	struct ah_run run;
	char big[70 * 1024];
	int fd;

	CHECK(ah_rpc(api, "process.Process/Nope", "{}", NULL, &r) == 501);
	CHECK(has_code_str(&r, "unimplemented"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/Nope", "{}", NULL, &r) == 501);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "process.Process/List", "{not json", NULL, &r) == 400);
	CHECK(has_code_str(&r, "invalid_argument"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "process.Process/List", "[1,2]", NULL, &r) == 400);
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/nope", NULL, NULL, 0, &r) == 0 && r.status == 404);
	CHECK(has_code_int(&r, 404));
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/health", NULL, NULL, 0, &r) == 0 && r.status == 405);
	ah_resp_free(&r);
	/* A stream request that is not one envelope: end-stream error, HTTP 200. */
	CHECK(ah_request(api, "POST", "/process.Process/Start",
	    "Content-Type: application/connect+json\r\n", "\x00\x00\x00\x00\x09{}", 7, &r) == 0);
	memset(&run, 0, sizeof(run));
	CHECK(r.status == 200 && ah_parse_stream(r.body, r.len, &run) == 0);
	CHECK_STR(run.stream_error, "invalid_argument");
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/process.Process/Start",
	    "Content-Type: application/connect+json\r\n", "\x01\x00\x00\x00\x02{}", 7, &r) == 0);
	memset(&run, 0, sizeof(run));
	CHECK(ah_parse_stream(r.body, r.len, &run) == 0);
	CHECK_STR(run.stream_error, "invalid_argument");
	ah_resp_free(&r);
	/* Oversized head: 431 and the connection closes. */
	fd = ah_unix_connect(api);
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	ah_write_all(fd, big, sizeof(big));
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 431);
	ah_resp_free(&r);
	close(fd);
	/* Garbage request line, smuggling shape. */
	fd = ah_unix_connect(api);
	ah_write_all(fd, "\x16\x03\x01garbage\r\n\r\n", 14);
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 400);
	ah_resp_free(&r);
	close(fd);
	CHECK(ah_request(api, "POST", "/process.Process/List",
	    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n", "{}", 2, &r) == 0);
	CHECK(r.status == 400);
	ah_resp_free(&r);
	/* Unary call with the wrong content type. */
	CHECK(ah_request(api, "POST", "/process.Process/List", "Content-Type: text/plain\r\n", "{}", 2,
	    &r) == 0);
	CHECK(r.status != 200 && has_code_str(&r, "unimplemented"));
	ah_resp_free(&r);
	/* A body over the limit for a buffered RPC. */
	{
		size_t n = 5 * 1024 * 1024;
		char *huge = malloc(n);

		memset(huge, ' ', n);
		CHECK(ah_request(api, "POST", "/process.Process/List",
		    "Content-Type: application/json\r\n", huge, n, &r) == 0);
		CHECK(r.status == 413);
		ah_resp_free(&r);
		free(huge);
	}
	CHECK(ah_alive(agent_pid));
}

/*
 * One parser decides framing (issue 12): the agent frames requests with the
 * shared parser, so a second Transfer-Encoding header is refused as
 * airlockd refuses it (the agent's own parser read the first one and ran
 * the call), and heads are capped at HTTP_HEAD_MAX (16 KiB; it took 64).
 */
static void
test_framing(void)
{
	static const char *const two_te[] = {
		"POST /process.Process/List HTTP/1.1\r\nHost: agent\r\n"
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
		"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"POST /process.Process/List HTTP/1.1\r\nHost: agent\r\n"
		"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
		"Transfer-Encoding: identity\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
	};
	char head[20 * 1024];
	struct hresp r;
	size_t i, n;
	int fd;

	for (i = 0; i < sizeof(two_te) / sizeof(two_te[0]); i++) {
		fd = ah_unix_connect(api);
		ah_write_all(fd, two_te[i], strlen(two_te[i]));
		CHECK(ah_read_response(fd, &r) == 0);
		CHECK(r.status == 501);
		CHECK(r.body != NULL && strstr(r.body, "chunked") != NULL);
		ah_resp_free(&r);
		close(fd);
	}
	/* A 20 KiB head: over the shared cap. */
	n = (size_t)snprintf(head, sizeof(head), "GET /health HTTP/1.1\r\nHost: agent\r\nX: ");
	memset(head + n, 'a', sizeof(head) - n);
	memcpy(head + sizeof(head) - 4, "\r\n\r\n", 4);
	fd = ah_unix_connect(api);
	ah_write_all(fd, head, sizeof(head));
	CHECK(ah_read_response(fd, &r) == 0 && r.status == 431);
	ah_resp_free(&r);
	close(fd);
	/* A bad escape in the query is a 400 naming it, not a missing parameter. */
	CHECK(ah_request(api, "GET", "/files?path=%zz", NULL, NULL, 0, &r) == 0 && r.status == 400);
	CHECK(r.body != NULL && strstr(r.body, "path") != NULL);
	ah_resp_free(&r);
	CHECK(ah_alive(agent_pid));
}

/* Raw garbage and oversized frames on the channel itself. */
static void
test_bad_frames(void)
{
	static const unsigned char frames[][24] = {
		{ 0xa7, 5, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff },	/* 2 GB DATA */
		{ 0xa7, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 1 }, /* OPEN before HELLO */
		{ 'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1' },
	};
	struct hresp r;
	size_t i;
	int fd;

	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		/* A new connection takes the channel over (as a reconnecting host would). */
		fd = ah_unix_connect(chan_sock);
		CHECK(fd != -1);
		ah_write_all(fd, frames[i], sizeof(frames[i]));
		usleep(100000);
		close(fd);
	}
	CHECK(ah_alive(agent_pid));
	/* The forwarder reconnects by itself and the API works again. */
	for (i = 0; i < 100; i++) {
		if (ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204) {
			ah_resp_free(&r);
			break;
		}
		ah_resp_free(&r);
		usleep(50000);
	}
	CHECK(i < 100);
}

/* ---- 20 execs beside a 100 MB upload ---- */

/* ---- file operations that cannot lose data or freeze the agent (#10.4, #10.8, #11.4) ---- */

static char *
home_file(const char *name)
{
	return jstr("%s/%s", home, name);
}

static void
put_file(const char *name, const char *content, mode_t mode)
{
	char *p = home_file(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);

	CHECK(fd != -1 && write(fd, content, strlen(content)) == (ssize_t)strlen(content));
	if (fd != -1)
		close(fd);
	CHECK(chmod(p, mode) == 0);
	free(p);
}

/* The whole content of home/name ("" when missing; caller frees). */
static char *
file_content(const char *name)
{
	char *p = home_file(name), buf[4096];
	int fd = open(p, O_RDONLY);
	ssize_t n = fd == -1 ? 0 : read(fd, buf, sizeof(buf) - 1);

	if (fd != -1)
		close(fd);
	free(p);
	buf[n > 0 ? n : 0] = '\0';
	return strdup(buf);
}

/* Upload temporaries left in dir (the agent's ".<name>.airlock-upload-<hex>"). */
static int
count_temps(const char *d)
{
	struct dirent *de;
	DIR *dp = opendir(d);
	int n = 0;

	if (dp == NULL)
		return -1;
	while ((de = readdir(dp)) != NULL)
		n += strstr(de->d_name, ".airlock-upload-") != NULL;
	closedir(dp);
	return n;
}

/* Send raw bytes on a fresh connection, then hang up without finishing the body. */
static void
send_and_hang_up(const char *raw, size_t len)
{
	int fd = ah_unix_connect(api);

	CHECK(fd != -1 && ah_write_all(fd, raw, len) == 0);
	usleep(300000);	/* the agent has the bytes (and wrote them to its temporary file) */
	close(fd);
}

/* Wait until the agent dropped every temporary in home (it saw the hang-up). */
static int
temps_gone(void)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (count_temps(home) == 0)
			return 1;
		usleep(50000);
	}
	return 0;
}

static void
test_upload_aborted(void)
{
	static const char cl_head[] = "POST /files?path=keep.txt HTTP/1.1\r\nHost: a\r\n"
	    "Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\npartial";
	static const char ch_head[] = "POST /files?path=keep.txt HTTP/1.1\r\nHost: a\r\n"
	    "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "7\r\nchunk-1\r\n10\r\nhalf";
	struct hresp r;
	struct stat st;
	char *c, *body, *p;

	put_file("keep.txt", "old content\n", 0600);
	/* Content-Length 1000, 7 bytes sent, connection gone. */
	send_and_hang_up(cl_head, sizeof(cl_head) - 1);
	CHECK(temps_gone());
	c = file_content("keep.txt");
	CHECK_STR(c, "old content\n");
	free(c);
	/* Chunked, cut off in the middle of the second chunk. */
	send_and_hang_up(ch_head, sizeof(ch_head) - 1);
	CHECK(temps_gone());
	c = file_content("keep.txt");
	CHECK_STR(c, "old content\n");
	free(c);
	/* Multipart: the first part completed and is committed, the cut second part is not. */
	put_file("mp-a.txt", "A0", 0644);
	put_file("mp-b.txt", "B0", 0644);
	body = jstr("POST /files HTTP/1.1\r\nHost: a\r\nContent-Type: multipart/form-data; boundary=XyZ\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n%x\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"%s/mp-a.txt\"\r\n\r\nA1\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"%s/mp-b.txt\"\r\n\r\nB1-partial\r\n", 0x1000, home, home);
	send_and_hang_up(body, strlen(body));
	free(body);
	CHECK(temps_gone());
	c = file_content("mp-a.txt");
	CHECK_STR(c, "A1");
	free(c);
	c = file_content("mp-b.txt");
	CHECK_STR(c, "B0");
	free(c);
	/* A complete upload replaces the file and keeps its mode; the owner is the user's. */
	CHECK(ah_request(api, "POST", "/files?path=keep.txt", "Content-Type: application/octet-stream\r\n",
	    "new content\n", 12, &r) == 0 && r.status == 200);
	ah_resp_free(&r);
	c = file_content("keep.txt");
	CHECK_STR(c, "new content\n");
	free(c);
	p = home_file("keep.txt");
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0600 && st.st_uid == 1000);
	free(p);
	CHECK(count_temps(home) == 0);
	/* Through a symlink: the file it points to gets the content, the link stays. */
	put_file("real.txt", "real0", 0640);
	p = home_file("link.txt");
	CHECK(symlink("real.txt", p) == 0);
	CHECK(ah_request(api, "POST", "/files?path=link.txt", "Content-Type: application/octet-stream\r\n",
	    "real1", 5, &r) == 0 && r.status == 200);
	ah_resp_free(&r);
	CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode));
	free(p);
	c = file_content("real.txt");
	CHECK_STR(c, "real1");
	free(c);
	p = home_file("real.txt");
	CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640);
	free(p);
}

/* Read one response within ms, or fail (the agent is stuck). */
static int
response_within(int fd, int ms, struct hresp *r)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	memset(r, 0, sizeof(*r));
	if (poll(&pfd, 1, ms) != 1)
		return -1;
	return ah_read_response(fd, r);
}

static void
test_special_files(void)
{
	char *fifo = home_file("fifo"), *dev = home_file("nulldev"), *target, *body;
	int dl, ul, dv, rel;
	struct hresp r;
	struct ah_run run;
	struct stat st;
	double t0;

	CHECK(mkfifo(fifo, 0644) == 0);
	/* A download and an upload of the FIFO at once, then health and exec. */
	t0 = ah_now_ms();
	dl = ah_unix_connect(api);
	target = jstr("/files?path=%s", fifo);
	CHECK(ah_send(dl, "GET", target, NULL, NULL, 0) == 0);
	ul = ah_unix_connect(api);
	CHECK(ah_send(ul, "POST", target, "Content-Type: application/octet-stream\r\n", "x", 1) == 0);
	CHECK(response_within(dl, 5000, &r) == 0);
	CHECK(r.status == 400 && has_code_int(&r, 400) && strstr(r.body, "FIFO") != NULL);
	ah_resp_free(&r);
	CHECK(response_within(ul, 5000, &r) == 0);
	CHECK(r.status == 400 && has_code_int(&r, 400) && strstr(r.body, "FIFO") != NULL);
	ah_resp_free(&r);
	fprintf(stderr, "   FIFO download and upload refused in %.0f ms\n", ah_now_ms() - t0);
	/* An agent stuck in open() of either end would be released by these, so the rest can run. */
	for (int i = 0; i < 10; i++) {
		if ((rel = open(fifo, O_WRONLY | O_NONBLOCK)) != -1)
			close(rel);
		if ((rel = open(fifo, O_RDONLY | O_NONBLOCK)) != -1)
			close(rel);
		usleep(50000);
	}
	close(dl);
	close(ul);
	CHECK(ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/true\"}}", NULL, &run) == 0 && run.ended &&
	    run.exit_code == 0);
	ah_run_free(&run);
	CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));	/* never replaced */
	free(target);
	/* A device node: refused both ways, never opened nor replaced. */
	if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
		target = jstr("/files?path=%s", dev);
		CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0 && r.status == 400 &&
		    strstr(r.body, "character device") != NULL);
		ah_resp_free(&r);
		dv = ah_unix_connect(api);
		CHECK(ah_send(dv, "POST", target, "Content-Type: application/octet-stream\r\n", "x", 1) == 0);
		CHECK(response_within(dv, 5000, &r) == 0 && r.status == 400);
		ah_resp_free(&r);
		close(dv);
		CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode));
		free(target);
	} else
		fprintf(stderr, "   (no mknod here: device node case skipped)\n");
	/* Multipart to a FIFO: refused at its part, nothing opened. */
	body = jstr("--zz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n\r\nx\r\n"
	    "--zz--\r\n", fifo);
	ul = ah_unix_connect(api);
	CHECK(ah_send(ul, "POST", "/files", "Content-Type: multipart/form-data; boundary=zz\r\n", body,
	    strlen(body)) == 0);
	CHECK(response_within(ul, 5000, &r) == 0 && r.status == 400);
	ah_resp_free(&r);
	close(ul);
	free(body);
	CHECK(count_temps(home) == 0);
	free(fifo);
	free(dev);
}

/* A Connect error naming errno: its code, and "errno" and the message both name it. */
static int
rpc_errno(const char *method, const char *json, int status, const char *code, const char *err)
{
	struct hresp r;
	json_t *j;
	int ok, st = ah_rpc(api, method, json, NULL, &r);

	j = body_json(&r);
	ok = st == status && has_code_str(&r, code) &&
	    json_is_string(json_object_get(j, "errno")) &&
	    strcmp(json_string_value(json_object_get(j, "errno")), err) == 0 &&
	    strstr(json_string_value(json_object_get(j, "message")), err) != NULL;
	if (!ok)
		fprintf(stderr, "   %s %s -> %d %s\n", method, json, st, r.body != NULL ? r.body : "");
	json_decref(j);
	ah_resp_free(&r);
	return ok;
}

static void
test_errno_mapping(void)
{
	char *mnt = jstr("%s/mnt", dir), *p, *json, longname[300];
	struct hresp r;
	int mounted;

	/*
	 * Another filesystem: a private tmpfs (we are root) gives EXDEV and a
	 * busy mount point; /dev/shm is the fallback for EXDEV.
	 */
	mkdir(mnt, 0755);
	mounted = mount("tmpfs", mnt, "tmpfs", 0, "size=1m") == 0;
	p = jstr("%s/other.txt", mounted ? mnt : "/dev/shm");
	{
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		CHECK(fd != -1);
		if (fd != -1)
			close(fd);
	}
	json = jstr("{\"source\":\"%s\",\"destination\":\"moved-across.txt\"}", p);
	CHECK(rpc_errno("filesystem.Filesystem/Move", json, 400, "invalid_argument", "EXDEV"));
	free(json);
	unlink(p);
	free(p);
	if (mounted) {
		/* A full filesystem: 507 naming ENOSPC, the old file intact, no temporary. */
		char *full = jstr("%s/full.txt", mnt), *target = jstr("/files?path=%s", full);
		size_t big = 2 * 1024 * 1024;
		char *buf = calloc(1, big), got[16] = "";
		int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		CHECK(fd != -1 && write(fd, "old", 3) == 3);
		close(fd);
		CHECK(ah_request(api, "POST", target, "Content-Type: application/octet-stream\r\n", buf,
		    big, &r) == 0 && r.status == 507 && strstr(r.body, "\"errno\":\"ENOSPC\"") != NULL);
		ah_resp_free(&r);
		fd = open(full, O_RDONLY);
		CHECK(fd != -1 && read(fd, got, sizeof(got) - 1) == 3 && strcmp(got, "old") == 0);
		close(fd);
		CHECK(count_temps(mnt) == 0);
		unlink(full);
		free(full);
		free(target);
		free(buf);
		json = jstr("{\"path\":\"%s\"}", mnt);
		CHECK(rpc_errno("filesystem.Filesystem/Remove", json, 400, "failed_precondition", "EBUSY"));
		free(json);
		umount(mnt);
	} else
		fprintf(stderr, "   (no tmpfs mount here: EBUSY case skipped)\n");
	rmdir(mnt);
	free(mnt);
	/* A directory moved onto a non-empty one. */
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"ne-a/sub\"}", NULL, &r) == 200);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "filesystem.Filesystem/MakeDir", "{\"path\":\"ne-b/sub\"}", NULL, &r) == 200);
	ah_resp_free(&r);
	CHECK(rpc_errno("filesystem.Filesystem/Move", "{\"source\":\"ne-a\",\"destination\":\"ne-b\"}",
	    400, "failed_precondition", "ENOTEMPTY"));
	/* airlock's non-recursive remove: one rmdir. */
	CHECK(rpc_errno("filesystem.Filesystem/Remove", "{\"path\":\"ne-b\",\"recursive\":false}",
	    400, "failed_precondition", "ENOTEMPTY"));
	CHECK(ah_rpc(api, "filesystem.Filesystem/Remove", "{\"path\":\"ne-b/sub\",\"recursive\":false}",
	    NULL, &r) == 200);
	ah_resp_free(&r);
	/* Missing, through a file, too long, a loop. */
	CHECK(rpc_errno("filesystem.Filesystem/Stat", "{\"path\":\"nothing-here\"}", 404, "not_found",
	    "ENOENT"));
	put_file("plain.txt", "x", 0644);
	CHECK(rpc_errno("filesystem.Filesystem/Stat", "{\"path\":\"plain.txt/x\"}", 404, "not_found",
	    "ENOTDIR"));
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	json = jstr("{\"path\":\"%s\"}", longname);
	CHECK(rpc_errno("filesystem.Filesystem/Stat", json, 400, "invalid_argument", "ENAMETOOLONG"));
	free(json);
	p = home_file("loop1");
	CHECK(symlink("loop2", p) == 0);
	free(p);
	p = home_file("loop2");
	CHECK(symlink("loop1", p) == 0);
	free(p);
	CHECK(rpc_errno("filesystem.Filesystem/ListDir", "{\"path\":\"loop1\"}", 400, "invalid_argument",
	    "ELOOP"));
	/* The same on /files: REST codes with "errno". */
	p = jstr("/files?path=loop1");
	CHECK(ah_request(api, "GET", p, NULL, NULL, 0, &r) == 0 && r.status == 400 &&
	    has_code_int(&r, 400) && strstr(r.body, "\"errno\":\"ELOOP\"") != NULL);
	ah_resp_free(&r);
	free(p);
	p = jstr("/files?path=%s", home);
	CHECK(ah_request(api, "GET", p, NULL, NULL, 0, &r) == 0 && r.status == 400 &&
	    strstr(r.body, "\"errno\":\"EISDIR\"") != NULL);
	ah_resp_free(&r);
	free(p);
	CHECK(ah_request(api, "GET", "/files?path=nothing-here", NULL, NULL, 0, &r) == 0 &&
	    r.status == 404 && strstr(r.body, "\"errno\":\"ENOENT\"") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/files?path=plain.txt/below", "Content-Type: application/octet-stream\r\n",
	    "x", 1, &r) == 0 && r.status == 400 && strstr(r.body, "ENOTDIR") != NULL);
	ah_resp_free(&r);
}

static void *
upload_job(void *arg)
{
	struct ah_job *j = arg;
	struct hresp r;
	char *buf = malloc(BIG_LEN), *target;
	double t0 = ah_now_ms();
	size_t i;
	int fd;

	for (i = 0; i < BIG_LEN; i++)
		buf[i] = (char)(i * 7 + i / 4096);
	target = jstr("/files?path=%s%%2Fbig.bin", home);
	fd = ah_unix_connect(api);
	j->ok = ah_send(fd, "POST", target, "Content-Type: application/octet-stream\r\n", buf,
	    BIG_LEN) == 0 && ah_read_response(fd, &r) == 0 && r.status == 200;
	j->ms = ah_now_ms() - t0;
	ah_resp_free(&r);
	close(fd);
	free(target);
	free(buf);
	return NULL;
}

static void
test_concurrent(void)
{
	struct ah_job up, ex[N_EXEC];
	struct hresp r;
	char *target;
	double sum, maxms;
	int ok, bad = 0;

	memset(&up, 0, sizeof(up));
	pthread_create(&up.t, NULL, upload_job, &up);
	usleep(200000);	/* the upload is in flight */
	ok = ah_exec_jobs(api, ex, N_EXEC, &sum, &maxms);
	pthread_join(up.t, NULL);
	CHECK(ok == N_EXEC);
	CHECK(up.ok);
	fprintf(stderr, "   %d/%d execs ok (mean %.1f ms, max %.1f ms); 100 MB upload %.0f ms "
	    "(%.1f MB/s)\n", ok, N_EXEC, sum / N_EXEC, maxms, up.ms, 100.0 * 1000 / up.ms);
	/* Download it back and compare byte for byte. */
	target = jstr("/files?path=%s%%2Fbig.bin", home);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 200 && r.len == BIG_LEN);
	for (size_t k = 0; k < r.len && k < BIG_LEN; k++) {
		if (r.body[k] != (char)(k * 7 + k / 4096)) {
			bad = 1;
			break;
		}
	}
	CHECK(!bad);
	ah_resp_free(&r);
	free(target);
}

/* ---- port forwarding ---- */

static void *
echo_server(void *arg)
{
	int lfd = *(int *)arg, c;
	char buf[256];
	ssize_t n;

	if ((c = accept(lfd, NULL, NULL)) == -1)
		return NULL;
	while ((n = read(c, buf, sizeof(buf))) > 0)
		if (write(c, buf, (size_t)n) != n)
			break;
	close(c);
	return NULL;
}

static void
test_forward(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	char *a, *f, *c, buf[64], *argv[11];
	pthread_t t;
	int lfd, fd, one = 1, closed_port;
	ssize_t n;

	/* A port nothing listens on: bind, note it, close. */
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	getsockname(lfd, (struct sockaddr *)&sin, &sl);
	closed_port = ntohs(sin.sin_port);
	close(lfd);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sin.sin_port = 0;
	CHECK(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && listen(lfd, 4) == 0);
	sl = sizeof(sin);
	getsockname(lfd, (struct sockaddr *)&sin, &sl);
	pthread_create(&t, NULL, echo_server, &lfd);
	/* One host client carries every forward, as with QEMU's single-client socket. */
	ah_kill(fwd_pid);
	a = jstr("unix:%s=49983", api);
	f = jstr("unix:%s/fwd.sock=%u", dir, ntohs(sin.sin_port));
	c = jstr("unix:%s/closed.sock=%d", dir, closed_port);
	argv[0] = (char *)ctl_bin; argv[1] = "-s"; argv[2] = chan_sock; argv[3] = "forward";
	argv[4] = "-L"; argv[5] = a; argv[6] = "-L"; argv[7] = f; argv[8] = "-L"; argv[9] = c;
	argv[10] = NULL;
	fwd_pid = ah_spawn(argv, "forwarding ready", NULL);
	CHECK(fwd_pid > 0);
	*strrchr(f, '=') = '\0';
	fd = ah_unix_connect(f + 5);
	CHECK(ah_write_all(fd, "ping through the channel", 24) == 0);
	n = read(fd, buf, sizeof(buf));
	CHECK(n == 24 && memcmp(buf, "ping through the channel", 24) == 0);
	close(fd);
	pthread_join(t, NULL);
	close(lfd);
	/* Nothing listens there: the stream is refused and the local socket closes. */
	*strrchr(c, '=') = '\0';
	fd = ah_unix_connect(c + 5);
	n = read(fd, buf, sizeof(buf));
	CHECK(n == 0 || (n == -1 && errno == ECONNRESET));
	close(fd);
	free(a);
	free(f);
	free(c);
}

/* E2B's signed URL: "v1_" + base64(sha256(msg)) without padding. */
static char *
sign(const char *msg)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char hex[65], *out = malloc(160), *o = out, *p, *q;
	unsigned char d[33];
	unsigned v;
	int i;

	sha256_hex(msg, strlen(msg), hex);
	for (i = 0; i < 32; i++) {
		sscanf(hex + 2 * i, "%2x", &v);
		d[i] = (unsigned char)v;
	}
	d[32] = 0;
	o += sprintf(o, "v1_");
	for (i = 0; i < 33; i += 3) {
		v = (unsigned)d[i] << 16 | (i + 1 < 33 ? (unsigned)d[i + 1] << 8 : 0) |
		    (i + 2 < 33 ? d[i + 2] : 0);
		*o++ = t[v >> 18];
		*o++ = t[(v >> 12) & 63];
		if (i + 1 < 32)
			*o++ = t[(v >> 6) & 63];
		if (i + 2 < 32)
			*o++ = t[v & 63];
	}
	*o = '\0';
	/* As URLSearchParams sends it: '+' and '/' percent-encoded. */
	q = malloc(160);
	for (p = out, o = q; *p != '\0'; p++)
		o += *p == '+' ? sprintf(o, "%%2B") : *p == '/' ? sprintf(o, "%%2F") : sprintf(o, "%c", *p);
	free(out);
	return q;
}

static void
test_files_signature(void)
{
	struct hresp r;
	char *sig, *target;

	/* The token from test_init_token is still set here. */
	CHECK(ah_request(api, "GET", "/files?path=a.txt", NULL, NULL, 0, &r) == 0 && r.status == 401);
	CHECK(has_code_int(&r, 401));
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/files?path=a.txt", "X-Access-Token: tok\r\n", NULL, 0, &r) == 0);
	CHECK(r.status == 200);
	ah_resp_free(&r);
	sig = sign("a.txt:read::tok");
	target = jstr("/files?path=a.txt&signature=%s", sig);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0 && r.status == 200);
	CHECK(r.len == 10);
	ah_resp_free(&r);
	free(target);
	/* Signed for reading, not writing; and a wrong signature. */
	target = jstr("/files?path=a.txt&signature=%s", sig);
	CHECK(ah_request(api, "POST", target, "Content-Type: application/octet-stream\r\n", "x", 1,
	    &r) == 0 && r.status == 401);
	ah_resp_free(&r);
	free(target);
	free(sig);
	sig = sign("a.txt:read:user:tok:4102444800");
	target = jstr("/files?path=a.txt&username=user&signature=%s&signature_expiration=4102444800",
	    sig);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0 && r.status == 200);
	ah_resp_free(&r);
	free(target);
	free(sig);
	sig = sign("a.txt:read::tok:1000");
	target = jstr("/files?path=a.txt&signature=%s&signature_expiration=1000", sig);
	CHECK(ah_request(api, "GET", target, NULL, NULL, 0, &r) == 0 && r.status == 401);
	ah_resp_free(&r);
	free(target);
	free(sig);
	CHECK(ah_request(api, "GET", "/files?path=a.txt&signature=v1_AAAA", NULL, NULL, 0, &r) == 0);
	CHECK(r.status == 401);
	ah_resp_free(&r);
}

static void
test_init_token(void)
{
	struct hresp r;

	{
		const char *init = "{\"envVars\":{\"FROM_INIT\":\"yes\"},\"accessToken\":\"tok\","
		    "\"timestamp\":\"2026-05-14T10:00:00.123Z\",\"entropy\":\"AAECAwQFBgc=\"}";

		CHECK(ah_request(api, "POST", "/init", "Content-Type: application/json\r\n", init,
		    strlen(init), &r) == 0);
	}
	CHECK(r.status == 204);
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "process.Process/List", "{}", NULL, &r) == 401);
	CHECK(has_code_str(&r, "unauthenticated"));
	ah_resp_free(&r);
	CHECK(ah_rpc(api, "process.Process/List", "{}", "X-Access-Token: tok\r\n", &r) == 200);
	ah_resp_free(&r);
	/* GET /envs: the sandbox's env vars (the code interpreter's kernels read them). */
	CHECK(ah_request(api, "GET", "/envs", "X-Access-Token: tok\r\n", NULL, 0, &r) == 0);
	CHECK(r.status == 200 && r.body != NULL && strstr(r.body, "\"FROM_INIT\":\"yes\"") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/envs", NULL, NULL, 0, &r) == 0 && r.status == 401);
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/health", NULL, NULL, 0, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	{
		struct ah_run run;

		CHECK(ah_exec(api, "{\"process\":{\"cmd\":\"/bin/sh\",\"args\":[\"-c\",\"echo $FROM_INIT\"]}}",
		    "X-Access-Token: tok\r\n", &run) == 0);
		CHECK_STR(run.out, "yes\n");
		ah_run_free(&run);
	}
	test_files_signature();
	CHECK(ah_request(api, "POST", "/init", "Content-Type: application/json\r\n",
	    "{\"accessToken\":\"\"}", 18, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/init", NULL, "{\"timestamp\":\"yesterday\"}", 25, &r) == 0);
	CHECK(r.status == 400);
	ah_resp_free(&r);
	/* Every field validated, the refusal names it (the host-run agent applies nothing). */
	CHECK(ah_request(api, "POST", "/init", NULL, "{\"hostname\":\"-x\"}", 17, &r) == 0);
	CHECK(r.status == 400 && r.body != NULL && strstr(r.body, "hostname") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/init", NULL, "{\"machineId\":\"abc\"}", 19, &r) == 0);
	CHECK(r.status == 400 && r.body != NULL && strstr(r.body, "machineId") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "GET", "/metrics", NULL, NULL, 0, &r) == 0 && r.status == 200);
	CHECK(strstr(r.body, "\"mem_total\"") != NULL && strstr(r.body, "\"cpu_count\"") != NULL);
	ah_resp_free(&r);
}

/* The signed-URL vectors of e2b-delta.md §4.8, against the agent's check. */
static void
test_signature_vectors(void)
{
	static const char init[] = "{\"accessToken\":\"tok_sbx00000000000000000\"}";
	struct hresp r;
	char *sig;

	sig = sign("/home/user/a.txt:read::tok_sbx00000000000000000:1796113405");
	CHECK_STR(sig, "v1_F0bPIrLr6lz2wTF%2FQ2LXmetYczBooznfRZ5gNI%2FZ5Vc");	/* sign() URL-encodes */
	free(sig);
	CHECK(ah_request(api, "POST", "/init", "Content-Type: application/json\r\n", init,
	    sizeof(init) - 1, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
	/*
	 * The write vector has no expiry: accepted, so the request goes on to
	 * its content type (400) instead of a 401; one character off is a 401.
	 * (A text/plain body keeps the host-run agent from writing /home/user.)
	 */
	CHECK(ah_request(api, "POST", "/files?path=%2Fhome%2Fuser%2Fa.txt&signature="
	    "v1_6vmQ7MqOnlmkAXzJGxKcLYRQTMuWwqROHfKdsPfNXro", "Content-Type: text/plain\r\n", "x", 1,
	    &r) == 0);
	CHECK(r.status == 400 && strstr(r.body, "content type") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/files?path=%2Fhome%2Fuser%2Fa.txt&signature="
	    "v1_6vmQ7MqOnlmkAXzJGxKcLYRQTMuWwqROHfKdsPfNXrp", "Content-Type: text/plain\r\n", "x", 1,
	    &r) == 0 && r.status == 401);
	ah_resp_free(&r);
	/* Signed for writing, not reading. */
	CHECK(ah_request(api, "GET", "/files?path=%2Fhome%2Fuser%2Fa.txt&signature="
	    "v1_6vmQ7MqOnlmkAXzJGxKcLYRQTMuWwqROHfKdsPfNXro", NULL, NULL, 0, &r) == 0 && r.status == 401);
	ah_resp_free(&r);
	/* The read vector expired on 2026-12-01 08:23:25 UTC: 401, however right it is. */
	CHECK(ah_request(api, "GET", "/files?path=%2Fhome%2Fuser%2Fa.txt&signature="
	    "v1_F0bPIrLr6lz2wTF%2FQ2LXmetYczBooznfRZ5gNI%2FZ5Vc&signature_expiration=1796113405", NULL,
	    NULL, 0, &r) == 0);
	CHECK(r.status == 401 && strstr(r.body, "expired") != NULL);
	ah_resp_free(&r);
	CHECK(ah_request(api, "POST", "/init", "Content-Type: application/json\r\n",
	    "{\"accessToken\":\"\"}", 18, &r) == 0 && r.status == 204);
	ah_resp_free(&r);
}

/* Run one case; a dead agent ends the run at once instead of timing out later. */
#define RUN(fn) do {							\
	T_RUN(fn);							\
	if (!ah_alive(agent_pid)) {					\
		fprintf(stderr, "agent died during %s (log in %s)\n", #fn, dir); \
		ah_kill(fwd_pid);					\
		return 1;						\
	}								\
} while (0)

static int
setup(void)
{
	char *p, *argv[12], *log;
	FILE *fp;

	snprintf(dir, sizeof(dir), "/tmp/airlock-agent-test-XXXXXX");
	if (mkdtemp(dir) == NULL || chmod(dir, 0755) == -1)
		return -1;
	snprintf(home, sizeof(home), "%s/home/user", dir);
	snprintf(api, sizeof(api), "%s/api.sock", dir);
	snprintf(chan_sock, sizeof(chan_sock), "%s/chan.sock", dir);
	p = jstr("%s/etc", dir);
	mkdir(p, 0755);
	free(p);
	p = jstr("%s/home", dir);
	mkdir(p, 0755);
	free(p);
	p = jstr("%s/root", dir);
	mkdir(p, 0700);
	free(p);
	mkdir(home, 0755);
	if (chown(home, 1000, 1000) == -1)
		return -1;
	p = jstr("%s/etc/passwd", dir);
	fp = fopen(p, "w");
	fprintf(fp, "root:x:0:0:root:%s/root:/bin/bash\nuser:x:1000:1000:user:%s:/bin/bash\n", dir,
	    home);
	fclose(fp);
	free(p);
	p = jstr("%s/etc/group", dir);
	fp = fopen(p, "w");
	fprintf(fp, "root:x:0:\nuser:x:1000:\nsudo:x:27:user\n");
	fclose(fp);
	free(p);
	p = jstr("%s/env", dir);
	fp = fopen(p, "w");
	fprintf(fp, "FOO=bar\n# comment\n");
	fclose(fp);
	log = jstr("%s/agent.log", dir);
	argv[0] = (char *)agent_bin;
	argv[1] = "--listen"; argv[2] = chan_sock;
	argv[3] = "--passwd"; argv[4] = jstr("%s/etc/passwd", dir);
	argv[5] = "--env-file"; argv[6] = p;
	argv[7] = NULL;
	agent_pid = ah_spawn(argv, "airlock-agent: ready", log);
	free(argv[4]);
	free(p);
	free(log);
	if (agent_pid <= 0)
		return -1;
	log = jstr("%s/fwd.log", dir);
	p = jstr("unix:%s", api);
	argv[0] = (char *)ctl_bin; argv[1] = "-s"; argv[2] = chan_sock; argv[3] = "forward";
	argv[4] = "-L"; argv[5] = p; argv[6] = "49983"; argv[7] = NULL;
	fwd_pid = ah_spawn(argv, "forwarding ready", log);
	free(p);
	free(log);
	return fwd_pid > 0 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	char *cmd;

	if (argc != 3) {
		fprintf(stderr, "usage: test_agent_host AGENT_HOST_BIN AGENTCTL_BIN\n");
		return 2;
	}
	agent_bin = argv[1];
	ctl_bin = argv[2];
	signal(SIGPIPE, SIG_IGN);
	if (setup() == -1) {
		fprintf(stderr, "test_agent_host: setup failed (logs in %s)\n", dir);
		return 1;
	}
	RUN(test_health);
	RUN(test_e2b_exec);
	RUN(test_stdin_and_list);
	RUN(test_signal);
	RUN(test_pty);
	RUN(test_reattach);
	RUN(test_two_subscribers);
	RUN(test_keepalive);
	RUN(test_ring_bound);
	RUN(test_e2b_files);
	RUN(test_watch);
	RUN(test_e2b_v064);
	RUN(test_upload_aborted);
	RUN(test_special_files);
	RUN(test_errno_mapping);
	RUN(test_bad_input);
	RUN(test_framing);
	RUN(test_init_token);
	RUN(test_signature_vectors);
	RUN(test_concurrent);
	RUN(test_forward);
	RUN(test_bad_frames);
	CHECK(ah_alive(agent_pid));
	ah_kill(fwd_pid);
	ah_kill(agent_pid);
	if (t_failed == 0) {
		cmd = jstr("rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
		free(cmd);
	} else
		fprintf(stderr, "logs kept in %s\n", dir);
	return t_done();
}
