/*
 * envd routing: a request with E2b-Sandbox-Id (or, from the Python SDK
 * after connect, only X-Access-Token) goes to that sandbox's guest agent,
 * which speaks envd (Connect process/filesystem, /files, /health). Bytes
 * pass both ways as they come: the request body chunk by chunk to the
 * agent, the answer frame by frame to the client (chunked), with
 * back-pressure each way and nothing buffered beyond the high-water marks.
 *
 * The access token is checked here, before anything reaches a guest (the
 * agent checks it again): only /health and /files, whose signed URLs the
 * agent verifies, go without it. Paths the agent serves to airlockd alone
 * (/init, which sets the token, /airlock/...) are not reachable.
 *
 * A paused or suspended sandbox made with E2B's autoResume is resumed by
 * the request (after its token is checked: nobody else wakes it), which is
 * then served; the body the client sends meanwhile is held, and reading
 * more waits for the resume. Without autoResume: 502, as E2B's proxy does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "api/api.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/util.h"
#include "e2b/e2b.h"
#include "http/http_proxy.h"
#include "http/http_server.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"

#define PROXY_HEADERS_MAX	(HTTP_HEADERS_MAX + 4)

/*
 * One envd-routed request: the piping is http/http_proxy.c's; this holds
 * the sandbox, the agent stream and the headers sent on it.
 */
struct proxy {
	struct http_proxy	*hp;
	struct http_req		*req;	/* borrowed: the proxy holds the reference */
	struct sandbox		*sb;
	struct envd_req		*er;
	char			*hdrs[PROXY_HEADERS_MAX + 1];
	int			 chunked_body;
	int			 streaming;	/* counted in sb_stream_begin */
	unsigned		 port;		/* the guest port: E2B_ENVD_PORT or a server's */
	int			 upgrade;
};

/* upstream's proxy answers for a sandbox it cannot reach (e2b-compat.md §3.4). */
static void
reply_not_found(struct http_req *req, const char *id)
{
	/* The id is the client's header, not necessarily UTF-8: json_text keeps it encodable. */
	http_reply_json(req, 502, json_pack("{s:o,s:s,s:i}", "sandboxId", json_text(id ? id : ""),
	    "message", "The sandbox was not found", "code", 502));
}

static void
reply_port_closed(struct http_req *req, const char *id, unsigned port)
{
	http_reply_json(req, 502, json_pack("{s:s,s:s,s:i,s:i}", "sandboxId", id,
	    "message", "The sandbox is running but port is not open", "port", (int)port,
	    "code", 502));
}

static int
connect_path(const char *p)
{
	return strncmp(p, "/process.Process/", 17) == 0 ||
	    strncmp(p, "/filesystem.Filesystem/", 23) == 0;
}

static void
reply_unauthorized(struct http_req *req, const char *path)
{
	if (connect_path(path))
		http_reply_json(req, 401, json_pack("{s:s,s:s}", "code", "unauthenticated",
		    "message", "missing or wrong X-Access-Token"));
	else
		http_reply_json(req, 401, json_pack("{s:i,s:s}", "code", 401, "message",
		    "missing or wrong X-Access-Token"));
}

/* --- the upstream: an envd request over the agent channel --------------- */

/* up is the struct proxy: its agent stream is p->er. */
static void
up_write(void *up, const void *data, size_t n)
{
	envd_req_write(((struct proxy *)up)->er, data, n);
}

/* Only a request sent with a body to stream has one to end. */
static void
up_end(void *up)
{
	struct proxy *p = up;

	if (p->chunked_body)
		envd_req_end(p->er);
}

static size_t
up_pending(const void *up)
{
	return envd_req_pending(((const struct proxy *)up)->er);
}

static void
up_pause(void *up, int paused)
{
	envd_req_pause(((struct proxy *)up)->er, paused);
}

static void
up_cancel(void *up)
{
	struct proxy *p = up;

	envd_req_cancel(p->er);
	p->er = NULL;
}

static const struct http_proxy_upstream up_ops = { up_write, up_end, up_pending, up_pause,
    up_cancel };

static void
on_head(struct envd_req *er, int status, const char *ctype, void *arg)
{
	struct proxy *p = arg;

	http_proxy_up_head(p->hp, status, ctype, envd_req_response_head(er));
}

static void
on_data(struct envd_req *er, const char *data, size_t n, void *arg)
{
	http_proxy_up_data(((struct proxy *)arg)->hp, data, n);
}

static void
on_done(struct envd_req *er, const char *error, void *arg)
{
	struct proxy *p = arg;

	p->er = NULL;
	http_proxy_up_done(p->hp, error);
}

static void
agent_drained(struct envd_req *er, void *arg)
{
	http_proxy_up_drained(((struct proxy *)arg)->hp);
}

/* --- hooks -------------------------------------------------------------- */

/* Nothing came back from the guest: why, in E2B's words. */
static void
no_answer(struct http_req *req, const char *error, void *arg)
{
	struct proxy *p = arg;

	if (p->port != E2B_ENVD_PORT)
		/* The agent could not connect to the port: nothing listens there (E2B's answer). */
		reply_port_closed(req, sb_id(p->sb), p->port);
	else
		/* Nothing answered: the agent or its channel is gone (a guest that died). */
		http_reply_json(req, 502, json_pack("{s:s,s:o,s:i}", "sandboxId", sb_id(p->sb),
		    "message", json_text(error ? error : "the guest agent did not answer"),
		    "code", 502));
}

static void
cut(const char *error, void *arg)
{
	/* Cut midway (the guest died, the channel broke): the client sees it cut. */
	log_warnx("e2b envd %s: %s", sb_id(((struct proxy *)arg)->sb), error);
}

static void
ended(void *arg)
{
	struct proxy *p = arg;
	size_t i;

	for (i = 0; p->hdrs[i] != NULL; i++)
		free(p->hdrs[i]);
	if (p->streaming)
		sb_stream_end(p->sb);
	sb_unref(p->sb);
	free(p);
}

/*
 * The headers envd reads, and only those: the agent never sees the
 * client's Host, cookies or encodings (responses are never compressed).
 */
static void
copy_headers(struct proxy *p, struct http_req *req)
{
	static const char *const pass[] = { "connect-protocol-version", "connect-timeout-ms",
	    "keepalive-ping-interval", "content-encoding", NULL };
	const struct http_head *h = http_req_head(req);
	size_t i, n = 0;
	const char *const *a;

	for (i = 0; i < h->nheaders && n < PROXY_HEADERS_MAX - 2; i++) {
		const char *name = h->headers[i].name, *v = h->headers[i].value;
		for (a = pass; *a != NULL; a++)
			if (strcasecmp(name, *a) == 0)
				break;
		if (*a != NULL) {
			/* identity is the only encoding envd must not be told about twice */
			if (strcasecmp(name, "content-encoding") == 0 && strcasecmp(v, "identity") == 0)
				continue;
			xasprintf(&p->hdrs[n++], "%s: %s", *a, v);
		} else if (strcasecmp(name, "authorization") == 0 &&
		    strncasecmp(v, "Basic ", 6) == 0)
			xasprintf(&p->hdrs[n++], "Authorization: %s", v);	/* the process's user */
		else if (strncasecmp(name, "x-metadata-", 11) == 0)
			xasprintf(&p->hdrs[n++], "%s: %s", name, v);
	}
	/* The sandbox's own token: checked equal to the client's already, or exempt. */
	if (sb_access_token(p->sb) != NULL && http_req_header(req, "x-access-token") != NULL)
		xasprintf(&p->hdrs[n++], "X-Access-Token: %s", sb_access_token(p->sb));
	p->hdrs[n] = NULL;
}

/*
 * A server of the sandbox's own (getHost(port), the code interpreter):
 * every end-to-end header as the client sent it, less airlock's routing
 * and traffic-token headers, which are for airlockd alone.
 */
static void
copy_headers_port(struct proxy *p, struct http_req *req, int upgrade)
{
	static const char *const drop[] = { "host", "content-type", "e2b-sandbox-id",
	    "e2b-sandbox-port", "e2b-traffic-access-token", NULL };
	const struct http_head *h = http_req_head(req);
	const char *const *a;
	size_t i, n = 0;

	for (i = 0; i < h->nheaders && n < PROXY_HEADERS_MAX - 2; i++) {
		const char *name = h->headers[i].name;
		if (http_hop_header(name))
			continue;
		for (a = drop; *a != NULL; a++)
			if (strcasecmp(name, *a) == 0)
				break;
		if (*a == NULL)
			xasprintf(&p->hdrs[n++], "%s: %s", name, h->headers[i].value);
	}
	if (upgrade)
		xasprintf(&p->hdrs[n++], "Upgrade: %s", http_head_get(h, "upgrade"));
	p->hdrs[n] = NULL;
}

static int
envd_path_ok(const char *path)
{
	return strcmp(path, "/health") == 0 || strcmp(path, "/files") == 0 ||
	    strcmp(path, "/metrics") == 0 || strcmp(path, "/envs") == 0 || connect_path(path);
}

static int
token_ok(struct sandbox *sb, struct http_req *req, const char *path)
{
	const char *want = sb_access_token(sb), *got = http_req_header(req, "x-access-token");
	const char *q = http_req_query(req);

	if (strcmp(path, "/health") == 0)
		return 1;
	if (got != NULL)
		return want != NULL && ct_streq(got, want);
	/* A signed /files URL: the agent checks the signature against the token. */
	return strcmp(path, "/files") == 0 && q != NULL && strstr(q, "signature=") != NULL;
}

/*
 * allowPublicTraffic false: a port other than envd's answers only requests
 * carrying the sandbox's traffic token (E2B's e2b-traffic-access-token),
 * compared in constant time. Public sandboxes (no token) pass.
 */
static int
traffic_ok(struct sandbox *sb, struct http_req *req)
{
	const char *want = sb_traffic_token(sb);
	const char *got = http_req_header(req, "e2b-traffic-access-token");

	return want == NULL || (got != NULL && ct_streq(got, want));
}

/* E2b-Sandbox-Port: a decimal port, 1..65535 (0: absent or bad). */
static unsigned
port_header(const char *v)
{
	unsigned long n = 0;

	if (v == NULL || *v == '\0' || strlen(v) > 5)
		return 0;
	for (; *v != '\0'; v++) {
		if (*v < '0' || *v > '9')
			return 0;
		n = n * 10 + (unsigned long)(*v - '0');
	}
	return n >= 1 && n <= 65535 ? (unsigned)n : 0;
}

/*
 * Open the agent stream of a running sandbox and attach it; -1 (answered)
 * when there is no channel. The body follows through the proxy.
 */
static int
proxy_start(struct proxy *p)
{
	static const struct envd_cb cbs = { on_head, on_data, on_done, agent_drained };
	struct http_req *req = p->req;
	const struct http_head *h = http_req_head(req);
	const char *ct = http_req_header(req, "content-type"), *host;
	char *target, *cause = NULL;

	if (sb_agent(p->sb) == NULL) {
		reply_not_found(req, sb_id(p->sb));
		return -1;
	}
	sb_touch(p->sb);
	if (p->port == E2B_ENVD_PORT)
		copy_headers(p, req);
	else
		copy_headers_port(p, req, p->upgrade);
	/* The path as the client sent it (still encoded), with its query. */
	target = xstrdup(h->target);
	/* A server in the sandbox sees the name the client used (virtual hosts, redirects). */
	host = p->port == E2B_ENVD_PORT ? "envd" : http_req_header(req, "host");
	if (host == NULL)
		host = "localhost";
	p->er = envd_request_port(sb_agent(p->sb), (uint16_t)p->port, host,
	    p->upgrade ? ENVD_REQ_UPGRADE : 0, http_req_method(req), target, ct, NULL,
	    p->chunked_body ? -1 : 0, (const char *const *)p->hdrs, &cbs, p, &cause);
	free(target);
	if (p->er == NULL) {
		http_reply_json(req, 502, json_pack("{s:s,s:o,s:i}", "sandboxId", sb_id(p->sb),
		    "message", json_text(cause ? cause : "no channel to the guest agent"),
		    "code", 502));
		free(cause);
		return -1;
	}
	/* Process output shares the sandbox's stream budget with the REST API's. */
	if (p->port == E2B_ENVD_PORT && strncmp(h->target, "/process.Process/", 17) == 0)
		envd_req_pace(p->er, sb_stream_budget(p->sb));
	/* Streams (process output, watches) keep the sandbox from looking idle. */
	sb_stream_begin(p->sb);
	p->streaming = 1;
	http_proxy_attach(p->hp, &up_ops, p);
	return 0;
}

/* The auto-resume ended: serve the request now (the proxy held its body meanwhile). */
static void
woke(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct proxy *p = arg;

	if (http_proxy_client_gone(p->hp)) {
		http_proxy_abandon(p->hp);
		return;
	}
	if (error != NULL || sb_state(sb) != SB_RUNNING) {
		log_warnx("e2b envd %s: auto-resume: %s", sb_id(sb), error ? error :
		    sb_state_name(sb_state(sb)));
		reply_not_found(p->req, sb_id(sb));
		http_proxy_abandon(p->hp);
	} else if (proxy_start(p) == -1)
		http_proxy_abandon(p->hp);
}

/* Paused or suspended (or on the way): a state an auto-resume can leave. */
static int
wakeable(struct sandbox *sb)
{
	enum sb_state s = sb_state(sb);

	return sb_auto_resume(sb) && (s == SB_PAUSED || s == SB_SUSPENDING ||
	    s == SB_SUSPENDED || s == SB_RESUMING);
}

void
e2b_envd_proxy(struct api *api, struct http_req *req, const char *id, unsigned port)
{
	const char *path = http_req_path(req), *porth = http_req_header(req, "e2b-sandbox-port");
	const char *tok = http_req_header(req, "x-access-token");
	const struct http_head *h = http_req_head(req);
	struct http_proxy_hooks hooks = { 0, NULL, no_answer, cut, ended, NULL };
	struct sandbox *sb;
	struct proxy *p;

	if (port == 0 && porth != NULL && (port = port_header(porth)) == 0) {
		http_reply_json(req, 400, json_pack("{s:i,s:s,s:s}", "code", 400, "message",
		    "E2b-Sandbox-Port: must be a port number (1-65535)", "field",
		    "E2b-Sandbox-Port"));
		return;
	}
	if (port == 0)
		port = E2B_ENVD_PORT;
	sb = id != NULL ? sbm_find(api->sbm, id, NULL) : tok != NULL ?
	    sbm_find_token(api->sbm, tok) : NULL;
	if (sb == NULL || (sb_state(sb) != SB_RUNNING && !wakeable(sb))) {
		reply_not_found(req, id);
		return;
	}
	if (port == E2B_ENVD_PORT) {
		if (!envd_path_ok(path)) {
			http_reply_json(req, 404, json_pack("{s:i,s:s}", "code", 404, "message",
			    "not an envd path"));
			return;
		}
		if (!token_ok(sb, req, path)) {
			reply_unauthorized(req, path);
			return;
		}
	} else if (!traffic_ok(sb, req)) {
		/* Before any wake-up: a request without the token resumes nothing. */
		http_reply_json(req, 403, json_pack("{s:i,s:s}", "code", 403, "message",
		    "the sandbox's traffic is private (allowPublicTraffic false): send its "
		    "trafficAccessToken in the e2b-traffic-access-token header"));
		return;
	}
	if (sb_state(sb) == SB_RUNNING && sb_agent(sb) == NULL) {
		reply_not_found(req, sb_id(sb));
		return;
	}
	p = xcalloc(1, sizeof(*p));
	p->req = req;
	p->sb = sb;
	sb_ref(sb);
	p->port = port;
	p->chunked_body = h->chunked || h->content_length > 0;
	/* An upgrade (WebSocket) passes to a guest server; envd has none. */
	p->upgrade = port != E2B_ENVD_PORT && h->upgrade && !p->chunked_body &&
	    http_head_get(h, "upgrade") != NULL;
	hooks.pass_headers = port != E2B_ENVD_PORT;
	/* A server of the guest's may send no Content-Type; envd's answers always have one. */
	hooks.default_ctype = port == E2B_ENVD_PORT ? "application/octet-stream" : NULL;
	hooks.arg = p;
	p->hp = http_proxy_new(req, &hooks);
	if (sb_state(sb) != SB_RUNNING) {
		/* Resumed by this request (queued behind a suspend still under way). */
		log_info("e2b envd %s: auto-resume by %s %s", sb_id(sb), http_req_method(req), path);
		sb_enqueue(sb, SB_OP_RESUME, woke, p);
		return;
	}
	if (proxy_start(p) == -1)
		http_proxy_abandon(p->hp);
}
