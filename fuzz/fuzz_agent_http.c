/*
 * The guest agent's HTTP side on arbitrary bytes: what a channel stream to
 * port 49983 carries goes through the shared http_server (adopted
 * socketpair end, the agent's limits and error shape) into the agent's
 * route table, its access-token check, /health, /init (env, token,
 * timestamp, entropy: the agent is not PID 1 here, so the clock and RNG
 * are left alone) and /metrics. The services behind the table are wrapped
 * (-Wl,--wrap): process and filesystem calls buffer their body and answer
 * a Connect message, /files streams its body and answers, so the framing
 * of both body modes is fuzzed and no process or file is touched.
 *
 * Oracles besides ASan/UBSan/LSan: every answer is a well-formed HTTP/1.1
 * response head, none is a 500, and the connection is gone (nothing
 * leaked) once the client closed.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "guest/agent/agent.h"
#include "http/http_parse.h"
#include "http/http_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void __wrap_proc_route(struct http_req *req, const char *method);
void __wrap_fs_route(struct http_req *req, const char *method);
void __wrap_files_route(struct http_req *req, const char *rest);

struct agent ag;

void
alog(const char *fmt, ...)
{
	(void)fmt;
}

void
agent_poweroff(const char *why)
{
	(void)why;
}

static void
canned_end(struct http_req *req, void *arg)
{
	connect_reply(req, json_pack("{s:b}", "ok", 1));
}

void
__wrap_proc_route(struct http_req *req, const char *method)
{
	http_req_buffer(req, CONNECT_MAX_MSG + 5, canned_end, NULL);
}

void
__wrap_fs_route(struct http_req *req, const char *method)
{
	http_req_buffer(req, CONNECT_MAX_MSG + 5, canned_end, NULL);
}

static void
files_sink(struct http_req *req, const char *data, size_t n, void *arg)
{
	*(size_t *)arg += n;
}

static void
files_end(struct http_req *req, void *arg)
{
	if (!http_req_replied(req))
		http_reply(req, 200, "application/json", "[]", 2);
}

static size_t files_bytes;

void
__wrap_files_route(struct http_req *req, const char *rest)
{
	http_req_stream(req, 0, files_sink, files_end, &files_bytes);
}

static struct event_base *base;

static void
agent_reset(void)
{
	size_t i;

	for (i = 0; i < ag.ag_nenv; i++)
		free(ag.ag_env[i]);
	free(ag.ag_env);
	ag.ag_env = NULL;
	ag.ag_nenv = 0;
	free(ag.ag_token);
	ag.ag_token = strdup("fuzz-token");
}

/* Every response head in out must parse, and none may be a 500. */
static void
check_answers(const char *out, size_t len)
{
	struct http_head h;
	char *cause = NULL;
	ssize_t n;
	int code;

	if (len == 0)
		return;
	n = http_parse_response_head(out, len, &h, &code, &cause);
	if (n == -1 || code == 500)
		abort();
	if (n > 0)
		http_head_free(&h);
	free(cause);
}

static void
setup(void)
{
	struct http_limits lim;

	base = event_base_new();
	ag.ag_base = base;
	ag.ag_default_user = "user";
	ag.ag_passwd = "/nonexistent";
	ag.ag_http = http_server_new(base, api_route, NULL);
	http_limits_default(&lim);
	lim.write_ms = 0;
	http_server_set_limits(ag.ag_http, &lim);
	http_server_set_error_body(ag.ag_http, api_error_body);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[1 << 20];
	size_t outlen = 0, off = 0;
	int sv[2], idle = 0, i;
	ssize_t n;

	if (base == NULL)
		setup();
	agent_reset();
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == -1)
		return 0;
	if (http_server_adopt(ag.ag_http, sv[1], "fuzz") == -1) {
		close(sv[0]);
		return 0;
	}
	/* Send, let the server run, read its answers, until nothing moves. */
	for (i = 0; i < 256 && idle < 4; i++) {
		int moved = 0;

		if (off < size && (n = write(sv[0], data + off, size - off)) > 0) {
			off += (size_t)n;
			moved = 1;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		while ((n = read(sv[0], out + outlen, sizeof(out) - outlen)) > 0) {
			outlen += (size_t)n;
			moved = 1;
			if (outlen == sizeof(out))
				outlen = 0;	/* only the first answer is checked */
		}
		idle = moved ? 0 : idle + 1;
	}
	check_answers(out, outlen);
	/* The client leaves: the server must let go of the connection. */
	close(sv[0]);
	for (i = 0; i < 8; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	return 0;
}
