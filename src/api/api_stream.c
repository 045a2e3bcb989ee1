/* Agent calls for API handlers: the common headers and the Connect → SSE bridge. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_stream.h"
#include "api/metrics.h"
#include "common/base64.h"
#include "common/json_time.h"
#include "common/util.h"
#include "config/config.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"

/* "Authorization: Basic <user:>" : how envd is told the acting user. */
static char *
basic_user(const char *user)
{
	char raw[64], out[BASE64_LEN(sizeof(raw)) + 1], *h;
	int n = snprintf(raw, sizeof(raw), "%s:", user);

	base64_encode(raw, n < 0 ? 0 : (size_t)n < sizeof(raw) ? (size_t)n : sizeof(raw) - 1, out);
	xasprintf(&h, "Authorization: Basic %s", out);
	return h;
}

static void
headers_push(struct api_agent_headers *ah, const char *h)
{
	size_t n = 0;

	while (ah->h[n] != NULL)
		n++;
	if (n < API_AGENT_HEADERS_MAX) {
		ah->h[n] = h;
		ah->h[n + 1] = NULL;
	}
}

void
api_agent_headers(struct api_agent_headers *ah, struct sandbox *sb, const char *user,
    int connect_unary)
{
	memset(ah, 0, sizeof(*ah));
	if (connect_unary)
		headers_push(ah, "Connect-Protocol-Version: 1");
	ah->auth = basic_user(user);
	headers_push(ah, ah->auth);
	if (sb_access_token(sb) != NULL) {
		xasprintf(&ah->token, "X-Access-Token: %s", sb_access_token(sb));
		headers_push(ah, ah->token);
	}
}

void
api_agent_headers_add(struct api_agent_headers *ah, const char *fmt, ...)
{
	va_list ap;
	size_t i;

	for (i = 0; i < 3 && ah->extra[i] != NULL; i++)
		;
	if (i == 3)
		return;
	va_start(ap, fmt);
	xvasprintf(&ah->extra[i], fmt, ap);
	va_end(ap);
	headers_push(ah, ah->extra[i]);
}

void
api_agent_headers_free(struct api_agent_headers *ah)
{
	free(ah->auth);
	free(ah->token);
	free(ah->extra[0]);
	free(ah->extra[1]);
	free(ah->extra[2]);
	memset(ah, 0, sizeof(*ah));
}

static void
stream_free(struct api_stream *st)
{
	if (st->flags & API_STREAM_EXEC)
		sb_exec_end(st->sb);
	sb_stream_end(st->sb);
	sb_unref(st->sb);
	free(st);
}

/*
 * Without this a client that reads slowly (or not at all) made airlockd
 * hold everything the process wrote: 12 MB/s of `yes` per such stream.
 */
static void
stream_msg(json_t *msg, void *arg)
{
	struct api_stream *st = arg;

	st->on_msg(st, msg);
	if (!st->held && st->req != NULL &&
	    http_req_output_pending(st->call->req) > HTTP_OUTPUT_HIGH_WATER) {
		st->held = 1;
		envd_req_pause(st->req, 1);
	}
}

static void
stream_drained(struct http_req *req, void *arg)
{
	struct api_stream *st = arg;

	if (st->held && st->req != NULL) {
		st->held = 0;
		envd_req_pause(st->req, 0);
	}
}

static void
stream_end(const char *error, void *arg)
{
	struct api_stream *st = arg;

	st->req = NULL;
	if (error != NULL)
		http_sse_event(st->call->req, "error", json_pack("{s:o}", "message", json_text(error)));
	http_reply_end(st->call->req);
	api_call_done(st->call);
	stream_free(st);
}

static void
stream_client_gone(struct http_req *req, void *arg)
{
	struct api_stream *st = arg;

	if (st->req != NULL)
		envd_req_cancel(st->req);
	st->req = NULL;
	api_call_done(st->call);
	stream_free(st);
}

/*
 * Admission: one sandbox may hold only so many streams (and exec starts)
 * at once. Each costs the guest a process or a subscriber with its own
 * buffers; past the cap a guest of a few hundred MiB ran out of memory
 * and its agent stopped answering everyone (docs/security.md
 * "Admission"). The excess is refused here, before the guest sees it.
 */
static int
stream_admit(struct api_call *c, struct sandbox *sb, int exec)
{
	const struct config *cfg = c->api->cfg;

	if (exec && sb_execs(sb) >= cfg->max_execs_per_sandbox) {
		metrics_inc(c->api->metrics, "sandbox_admission_refused");
		api_error(c, 429, "too_many_execs", "sandbox %s already runs %d exec calls, the "
		    "limit (max_execs_per_sandbox = %d): wait for one to end", sb_id(sb),
		    sb_execs(sb), cfg->max_execs_per_sandbox);
		return -1;
	}
	if (sb_streams(sb) >= cfg->max_streams_per_sandbox) {
		metrics_inc(c->api->metrics, "sandbox_admission_refused");
		api_error(c, 429, "too_many_streams", "sandbox %s already has %d open streams, the "
		    "limit (max_streams_per_sandbox = %d): close one first", sb_id(sb),
		    sb_streams(sb), cfg->max_streams_per_sandbox);
		return -1;
	}
	return 0;
}

int
api_stream_start(struct api_call *c, struct sandbox *sb, const char *method, json_t *body,
    const char *const *headers, api_stream_msg_fn on_msg, int flags)
{
	struct api_stream *st;
	char *cause = NULL;

	/* json_pack gives NULL for a string that is not UTF-8: a bug, never a crash. */
	if (body == NULL) {
		api_error(c, 500, "internal", "%s: the request to the guest agent could not be "
		    "encoded", method);
		return -1;
	}
	if (stream_admit(c, sb, flags & API_STREAM_EXEC) == -1)
		return -1;
	st = xcalloc(1, sizeof(*st));
	st->call = c;
	st->sb = sb;
	st->on_msg = on_msg;
	st->flags = flags;
	sb_ref(sb);
	sb_stream_begin(sb);
	if (flags & API_STREAM_EXEC)
		sb_exec_begin(sb);
	st->req = envd_stream(sb_agent(sb), method, body, headers, stream_msg, stream_end, st,
	    &cause);
	if (st->req == NULL) {
		api_error(c, 502, "agent_unavailable", "guest agent: %s", cause);
		free(cause);
		stream_free(st);
		return -1;
	}
	envd_req_pace(st->req, sb_stream_budget(sb));
	http_sse_start(c->req);
	http_req_on_close(c->req, stream_client_gone, st);
	http_req_on_drain(c->req, stream_drained, st);
	return 0;
}

struct api_unary {
	struct api_call	*call;
	api_unary_fn	 ok;
	int		 flag;
};

static void
unary_done(int status, json_t *resp, const char *error, void *arg)
{
	struct api_unary *u = arg;
	struct api_call *c = u->call;
	const char *code, *msg;

	if (error != NULL)
		api_error(c, 502, "agent_unavailable", "guest agent: %s", error);
	else if (status != 200) {
		struct envd_error e;

		code = json_string_value(json_object_get(resp, "code"));
		msg = json_string_value(json_object_get(resp, "message"));
		envd_error_from_connect(code, json_string_value(json_object_get(resp, "errno")), &e);
		if (msg == NULL)
			msg = e.status == 502 ? "malformed error answer from the guest agent" :
			    "guest agent error";
		api_error(c, e.status, e.code, "%s", msg);
	} else
		u->ok(c, resp, u->flag);
	free(u);
}

void
api_agent_unary(struct api_call *c, struct sandbox *sb, const char *user, const char *method,
    json_t *body, api_unary_fn ok, int flag)
{
	struct api_unary *u;
	struct api_agent_headers ah;
	char *path, *cause = NULL;

	if (body == NULL) {
		api_error(c, 500, "internal", "%s: the request to the guest agent could not be "
		    "encoded", method);
		return;
	}
	u = xcalloc(1, sizeof(*u));
	u->call = c;
	u->ok = ok;
	u->flag = flag;
	xasprintf(&path, "/%s", method);
	api_agent_headers(&ah, sb, user, 1);
	if (envd_call_json(sb_agent(sb), "POST", path, body, ah.h, unary_done, u, &cause) == NULL) {
		api_error(c, 502, "agent_unavailable", "guest agent: %s", cause);
		free(cause);
		free(u);
	}
	api_agent_headers_free(&ah);
	free(path);
}
