/*
 * The proxy's HTTP/1.1 relay: every request on a guest connection (kept
 * alive or not) is parsed with the shared strict parser and decided by
 * gw_http_check before a byte of it goes upstream; bodies are passed
 * through with their framing tracked (http_body_feed), and each response
 * head is parsed so the end of the response, and with it the start of the
 * next request, is known. One request is in flight at a time: pipelined
 * requests wait in the guest's input buffer (bounded by its watermark)
 * until the previous response is complete.
 *
 * The upstream connection is bound to one name (the SNI, or the first
 * Host on plain HTTP), dialled on the first request and re-dialled if the
 * upstream closes between requests. A WebSocket upgrade that gets a 101
 * turns the connection into a splice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "http/http_parse.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/gw_proxy.h"

enum gw_req_phase { REQ_HEAD, REQ_BODY, REQ_DONE };
enum gw_resp_phase { RESP_NONE, RESP_HEAD, RESP_BODY, RESP_DONE };

struct gw_http_state {
	char			 bound[GW_NAME_MAX];	/* SNI, or the first request's Host */
	int			 has_bound;
	enum gw_req_phase	 req;
	enum gw_resp_phase	 resp;
	struct http_body	 reqbody;
	struct http_body	 respbody;
	int			 until_close;	/* response delimited by the upstream closing */
	int			 close_after;	/* no further request on this connection */
	int			 guest_eof;	/* guest half-closed after its request */
	int			 websocket;	/* request in flight asks for an upgrade */
	struct evbuffer		*pending;	/* head waiting for the upstream connection */

	/* The request in flight, for its audit line. */
	int			 in_flight;
	char			*method;
	char			*host;
	char			*path;
	char			*rule;
	char			*credential;
	char			*headers_set;
	int			 status;
	uint64_t		 up0, down0;
};

static void	gw_http_guest(struct gw_conn *);
static void	gw_http_upstream(struct gw_conn *);

static void
discard(void *arg, const char *data, size_t n)
{
}

static void
gw_http_audit(struct gw_conn *c, int allow, const char *reason)
{
	struct gw_http_state *h = c->http;
	struct gw_audit_rec r = {
		.kind = "http", .host = h->host, .method = h->method, .path = h->path,
		.rule = h->rule, .allow = allow, .reason = reason, .status = h->status,
		.credential = h->credential, .headers_set = h->headers_set,
		.bytes_up = c->bytes_up - h->up0, .bytes_down = c->bytes_down - h->down0,
	};

	gw_conn_audit(c, &r);
}

static void
gw_http_clear_request(struct gw_http_state *h)
{
	free(h->method);
	free(h->host);
	free(h->path);
	free(h->rule);
	free(h->credential);
	free(h->headers_set);
	h->method = h->host = h->path = h->rule = h->credential = h->headers_set = NULL;
	h->status = 0;
	h->in_flight = 0;
	h->websocket = 0;
	h->until_close = 0;
}

void
gw_http_free(struct gw_conn *c)
{
	struct gw_http_state *h = c->http;

	if (h == NULL)
		return;
	if (h->in_flight)
		gw_http_audit(c, 1, "connection closed before the response ended");
	gw_http_clear_request(h);
	if (h->pending != NULL)
		evbuffer_free(h->pending);
	free(h);
	c->http = NULL;
}

/* Answer the guest with status and close (the request is refused or failed). */
static void
gw_http_refuse(struct gw_conn *c, int status, const char *reason)
{
	gw_http_error_write(bufferevent_get_output(c->in), status, reason);
	gw_conn_finish(c, reason);
}

/* Audit a refused request (from a verdict) and refuse it. */
static void
gw_http_deny(struct gw_conn *c, const struct http_head *head, const struct gw_http_verdict *v,
    int status, const char *reason)
{
	struct gw_audit_rec r = {
		.kind = "http", .method = head != NULL ? head->method : NULL, .allow = 0,
		.reason = reason, .status = status,
	};

	if (v != NULL) {
		r.host = v->host[0] != '\0' ? v->host : NULL;
		r.path = v->path != NULL ? v->path : head != NULL ? head->target : NULL;
		r.rule = v->rule != NULL ? v->rule->text : NULL;
		r.credential = v->credential;
	}
	gw_conn_audit(c, &r);
	c->sb->counters.requests_denied++;
	gw_http_refuse(c, status, reason);
}

static void
gw_http_dial_failed(struct gw_conn *c, const char *reason)
{
	struct gw_http_state *h = c->http;

	if (h == NULL || gw_conn_closed(c))
		return;
	h->in_flight = 0;
	h->status = 502;
	gw_http_audit(c, 0, reason);
	c->sb->counters.requests_denied++;
	gw_http_refuse(c, 502, reason);
}

static void
gw_http_out_read_cb(struct bufferevent *bev, void *arg)
{
	gw_http_upstream(arg);
}

/* The guest drained below the watermark: resume the response. */
static void
gw_http_in_write_cb(struct bufferevent *bev, void *arg)
{
	struct gw_conn *c = arg;

	if (c->out != NULL && c->connected && !(bufferevent_get_enabled(c->out) & EV_READ)) {
		bufferevent_setwatermark(c->in, EV_WRITE, 0, 0);
		bufferevent_enable(c->out, EV_READ);
		gw_http_upstream(c);
	}
}

/* The upstream drained below the watermark: resume the request body. */
static void
gw_http_out_write_cb(struct bufferevent *bev, void *arg)
{
	struct gw_conn *c = arg;

	if (!c->http->guest_eof && !(bufferevent_get_enabled(c->in) & EV_READ)) {
		bufferevent_setwatermark(c->out, EV_WRITE, 0, 0);
		bufferevent_enable(c->in, EV_READ);
	}
	gw_http_guest(c);
}

/* Forget the upstream connection (it closed or idled out between requests). */
static void
gw_http_drop_upstream(struct gw_conn *c)
{
	if (c->out == NULL)
		return;
	bufferevent_remove_from_rate_limit_group(c->out);
	bufferevent_free(c->out);
	c->out = NULL;
	c->connected = 0;
}

static void
gw_http_out_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;
	struct gw_http_state *h = c->http;

	if (what & BEV_EVENT_EOF) {
		gw_http_upstream(c);
		if (gw_conn_closed(c) || c->http == NULL || c->out == NULL)
			return;
		if (h->resp == RESP_BODY && h->until_close) {
			h->resp = RESP_DONE;
			h->close_after = 1;
			gw_http_drop_upstream(c);
			gw_http_guest(c);
			return;
		}
	}
	if (h->resp == RESP_NONE) {
		/* Idle upstream went away: the next request dials again. */
		gw_http_drop_upstream(c);
		return;
	}
	if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
	    monotonic_ms() - c->t_io < (uint64_t)GW_RESPONSE_SECS * 1000) {
		/* A long upload: the upstream answers once the body is in. */
		bufferevent_enable(bev, EV_READ);
		return;
	}
	if (h->resp == RESP_HEAD && h->status == 0) {
		int status = (what & BEV_EVENT_TIMEOUT) ? 504 : 502;

		h->status = status;
		h->in_flight = 0;
		gw_http_audit(c, 1, status == 504 ? "upstream timeout" : "upstream closed");
		gw_http_refuse(c, status, status == 504 ? "upstream timeout" :
		    "upstream closed without a response");
		return;
	}
	/* Mid-response: the guest gets what there is, then the close. */
	gw_conn_finish(c, "upstream closed mid-response");
}

static void
gw_http_in_read_cb(struct bufferevent *bev, void *arg)
{
	gw_http_guest(arg);
}

static void
gw_http_in_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;
	struct gw_http_state *h = c->http;

	if (what & BEV_EVENT_TIMEOUT) {
		if ((what & BEV_EVENT_READING) && (h->resp != RESP_NONE || h->req != REQ_HEAD)) {
			/* Quiet while its response streams: not idle. */
			bufferevent_enable(bev, EV_READ);
			return;
		}
		gw_conn_close(c, "guest idle or not reading");
		return;
	}
	if ((what & BEV_EVENT_EOF) && ((h->req == REQ_DONE && h->resp != RESP_NONE) ||
	    evbuffer_get_length(bufferevent_get_input(bev)) > 0)) {
		/*
		 * Half-closed after its request(s): answer what is complete (also
		 * requests still buffered behind a response in flight), then close.
		 */
		h->guest_eof = 1;
		bufferevent_disable(bev, EV_READ);
		gw_http_guest(c);
		return;
	}
	gw_conn_close(c, (what & BEV_EVENT_EOF) ? "guest closed" : "guest connection error");
}

static void
gw_http_connected(struct gw_conn *c)
{
	struct timeval tv = { GW_RESPONSE_SECS, 0 };

	bufferevent_setcb(c->out, gw_http_out_read_cb, gw_http_out_write_cb, gw_http_out_event_cb,
	    c);
	bufferevent_setwatermark(c->out, EV_READ, 0, GW_BUF_HIGH);
	bufferevent_set_timeouts(c->out, &tv, &tv);
	bufferevent_enable(c->out, EV_READ | EV_WRITE);
	bufferevent_write_buffer(c->out, c->http->pending);
	gw_http_guest(c);
	if (!gw_conn_closed(c))
		gw_http_upstream(c);
}

/* Parse, check and forward the next request head. 1 progressed, 0 wait, -1 gone. */
static int
gw_http_next_request(struct gw_conn *c)
{
	struct gw_http_state *h = c->http;
	struct gw_sandbox *sb = c->sb;
	struct evbuffer *in = bufferevent_get_input(c->in), *dst;
	struct http_head head;
	struct gw_http_verdict v;
	struct gw_ratelim *rl;
	size_t len = evbuffer_get_length(in), n;
	char *cause = NULL;
	const char *buf;
	ssize_t used;
	int status;

	if (len == 0 || h->close_after)
		return 0;
	n = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
	buf = (const char *)evbuffer_pullup(in, (ssize_t)n);
	if ((used = http_parse_head(buf, n, &head, &status, &cause)) == 0)
		return 0;
	sb->counters.requests++;
	if (used < 0) {
		gw_http_deny(c, NULL, NULL, status, "malformed request");
		log_debug("gateway: sandbox %s: %s", sb->id, cause);
		free(cause);
		return -1;
	}
	if (gw_http_check(sb->policy, h->has_bound ? h->bound : NULL, c->tls, c->dport, &head,
	    &v) == -1) {
		gw_http_deny(c, &head, &v, v.status, v.reason);
		goto gone;
	}
	rl = gw_ratelim_get(sb, v.rule);
	if (!tbucket_take(&sb->req_bucket, 1, monotonic_ms()) || (rl != NULL && !tbucket_take(&rl->req, 1, monotonic_ms()))) {
		gw_ratelim_unref(rl);
		gw_http_deny(c, &head, &v, 429, "rate limit");
		goto gone;
	}
	gw_conn_set_ratelim(c, rl);
	if (!h->has_bound) {
		memcpy(h->bound, v.host, sizeof(h->bound));
		h->has_bound = 1;
	}

	h->in_flight = 1;
	h->method = xstrdup(head.method);
	h->host = xstrdup(v.host);
	h->path = xstrdup(v.path);
	h->rule = xstrdup(v.rule->text);
	h->credential = v.credential != NULL ? xstrdup(v.credential) : NULL;
	h->headers_set = v.headers_set != NULL ? xstrdup(v.headers_set) : NULL;
	h->websocket = v.websocket;
	h->up0 = c->bytes_up;
	h->down0 = c->bytes_down;
	evbuffer_drain(in, (size_t)used);
	if (!v.websocket && (head.chunked || head.content_length > 0)) {
		http_body_init(&h->reqbody, &head, 0);
		h->req = REQ_BODY;
	} else
		h->req = REQ_DONE;
	h->resp = RESP_HEAD;
	if (!head.keep_alive)
		h->close_after = 1;
	dst = c->connected ? bufferevent_get_output(c->out) : h->pending;
	n = evbuffer_get_length(dst);
	gw_http_head_write(dst, &head);
	n = evbuffer_get_length(dst) - n;
	c->bytes_up += n;
	sb->counters.bytes_up += n;
	gw_http_head_wipe(&head);
	gw_http_verdict_clear(&v);

	if (c->out == NULL && c->resolve == NULL) {
		c->on_connected = gw_http_connected;
		c->on_dial_failed = gw_http_dial_failed;
		gw_conn_dial(c, h->bound, c->tls);
		if (gw_conn_closed(c))
			return -1;
	}
	return 1;
gone:
	gw_http_head_wipe(&head);
	gw_http_verdict_clear(&v);
	return -1;
}

/* Stream request body bytes upstream. 1 body done, 0 wait, -1 gone. */
static int
gw_http_body_up(struct gw_conn *c)
{
	struct gw_http_state *h = c->http;
	struct evbuffer *in = bufferevent_get_input(c->in);
	struct evbuffer_iovec vec;
	enum http_body_state st;
	size_t consumed;
	char *cause = NULL;

	while (evbuffer_get_length(in) > 0) {
		if (evbuffer_get_length(bufferevent_get_output(c->out)) >= GW_BUF_HIGH) {
			bufferevent_disable(c->in, EV_READ);
			bufferevent_setwatermark(c->out, EV_WRITE, GW_BUF_HIGH / 2, 0);
			return 0;
		}
		if (evbuffer_peek(in, -1, NULL, &vec, 1) < 1)
			return 0;
		st = http_body_feed(&h->reqbody, vec.iov_base, vec.iov_len, &consumed, discard,
		    NULL, &cause);
		if (st == HTTP_BODY_ERROR) {
			h->in_flight = 0;
			gw_http_audit(c, 0, "malformed request body");
			log_debug("gateway: sandbox %s: request body: %s", c->sb->id, cause);
			free(cause);
			gw_http_refuse(c, 400, "malformed request body");
			return -1;
		}
		gw_conn_move(c, c->in, consumed);
		if (st == HTTP_BODY_DONE) {
			h->req = REQ_DONE;
			return 1;
		}
	}
	return 0;
}

/* A request and its response are both complete: log it, get ready for the next. */
static int
gw_http_complete(struct gw_conn *c)
{
	struct gw_http_state *h = c->http;

	gw_http_audit(c, 1, NULL);
	gw_http_clear_request(h);
	h->req = REQ_HEAD;
	h->resp = RESP_NONE;
	/* Bytes past the response's end answer nothing: never hand them to the next request. */
	if (c->out != NULL && evbuffer_get_length(bufferevent_get_input(c->out)) > 0)
		gw_http_drop_upstream(c);
	if (h->close_after) {
		gw_conn_finish(c, "connection: close");
		return -1;
	}
	return 1;
}

static void
gw_http_guest(struct gw_conn *c)
{
	struct gw_http_state *h;
	int r = 1;

	while (r > 0 && !gw_conn_closed(c) && c->state == GW_CONN_HTTP) {
		h = c->http;
		switch (h->req) {
		case REQ_HEAD:
			r = h->resp == RESP_NONE ? gw_http_next_request(c) : 0;
			break;
		case REQ_BODY:
			r = c->connected ? gw_http_body_up(c) : 0;
			break;
		case REQ_DONE:
			r = h->resp == RESP_DONE ? gw_http_complete(c) : 0;
			break;
		}
	}
	/* Half-closed: once nothing complete is left to answer, the connection ends. */
	if (!gw_conn_closed(c) && c->state == GW_CONN_HTTP && c->http->guest_eof &&
	    ((c->http->req == REQ_HEAD && c->http->resp == RESP_NONE) ||
	    (c->http->req == REQ_BODY &&
	    evbuffer_get_length(bufferevent_get_input(c->in)) == 0)))
		gw_conn_finish(c, "guest closed");
}

/* 101 to a WebSocket request: from here on both directions are spliced. */
static void
gw_http_upgrade(struct gw_conn *c)
{
	struct gw_http_state *h = c->http;

	h->status = 101;
	gw_http_audit(c, 1, NULL);
	h->in_flight = 0;
	gw_http_free(c);
	gw_conn_splice(c);
}

/* Relay what the upstream sent. */
static void
gw_http_upstream(struct gw_conn *c)
{
	struct gw_http_state *h;
	struct evbuffer *up;
	struct evbuffer_iovec vec;
	struct http_head rh;
	enum http_body_state st;
	size_t len, n, consumed;
	const char *upg;
	char *cause = NULL;
	ssize_t used;
	int code;

	for (;;) {
		if (gw_conn_closed(c) || c->state != GW_CONN_HTTP || c->out == NULL)
			return;
		h = c->http;
		up = bufferevent_get_input(c->out);
		if ((len = evbuffer_get_length(up)) == 0)
			return;
		if (h->resp == RESP_DONE)
			return;
		if (h->resp == RESP_NONE) {
			/* Nothing was asked: a server about to close (408), or broken. */
			gw_http_drop_upstream(c);
			return;
		}
		if (evbuffer_get_length(bufferevent_get_output(c->in)) >= GW_BUF_HIGH) {
			bufferevent_disable(c->out, EV_READ);
			bufferevent_setwatermark(c->in, EV_WRITE, GW_BUF_HIGH / 2, 0);
			return;
		}
		if (h->resp == RESP_HEAD) {
			n = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
			used = http_parse_response_head((const char *)evbuffer_pullup(up, (ssize_t)n),
			    n, &rh, &code, &cause);
			if (used == 0)
				return;
			if (used < 0) {
				log_debug("gateway: sandbox %s: upstream %s: %s", c->sb->id, c->name,
				    cause);
				free(cause);
				h->status = 502;
				h->in_flight = 0;
				gw_http_audit(c, 1, "malformed upstream response");
				gw_http_refuse(c, 502, "malformed upstream response");
				return;
			}
			/* Only the WebSocket we let through may take the connection over. */
			if (code == 101 && (!h->websocket ||
			    (upg = http_head_get(&rh, "upgrade")) == NULL ||
			    strcasecmp(upg, "websocket") != 0)) {
				http_head_free(&rh);
				h->status = 502;
				h->in_flight = 0;
				gw_http_audit(c, 1, "upstream switched protocols unasked");
				gw_http_refuse(c, 502, "upstream switched protocols unasked");
				return;
			}
			gw_conn_move(c, c->out, (size_t)used);
			if (code == 101) {
				http_head_free(&rh);
				gw_http_upgrade(c);
				return;
			}
			if (code < 200) {
				http_head_free(&rh);
				continue;	/* 100 Continue and friends: the final head follows */
			}
			h->status = code;
			if (!rh.keep_alive)
				h->close_after = 1;
			if (!http_response_has_body(h->method, code) ||
			    (!rh.chunked && rh.content_length == 0))
				h->resp = RESP_DONE;
			else if (rh.chunked || rh.content_length > 0) {
				http_body_init(&h->respbody, &rh, 0);
				h->resp = RESP_BODY;
			} else {
				h->resp = RESP_BODY;
				h->until_close = 1;
				h->close_after = 1;
			}
			http_head_free(&rh);
			if (h->resp == RESP_DONE) {
				gw_http_guest(c);
				return;
			}
			continue;
		}
		/* RESP_BODY */
		if (h->until_close) {
			gw_conn_move(c, c->out, len);
			continue;
		}
		if (evbuffer_peek(up, -1, NULL, &vec, 1) < 1)
			return;
		st = http_body_feed(&h->respbody, vec.iov_base, vec.iov_len, &consumed, discard, NULL,
		    &cause);
		if (st == HTTP_BODY_ERROR) {
			log_debug("gateway: sandbox %s: upstream %s body: %s", c->sb->id, c->name,
			    cause);
			free(cause);
			gw_conn_finish(c, "malformed upstream response body");
			return;
		}
		gw_conn_move(c, c->out, consumed);
		if (st == HTTP_BODY_DONE) {
			h->resp = RESP_DONE;
			gw_http_guest(c);
			return;
		}
	}
}

void
gw_http_start(struct gw_conn *c, const char *bound)
{
	struct gw_http_state *h = xcalloc(1, sizeof(*h));
	struct timeval idle = { GW_HTTP_IDLE_SECS, 0 }, wr = { GW_RESPONSE_SECS, 0 };

	if (bound != NULL) {
		snprintf(h->bound, sizeof(h->bound), "%s", bound);
		h->has_bound = 1;
	}
	h->pending = evbuffer_new();
	c->http = h;
	c->state = GW_CONN_HTTP;
	bufferevent_setcb(c->in, gw_http_in_read_cb, gw_http_in_write_cb, gw_http_in_event_cb, c);
	bufferevent_setwatermark(c->in, EV_READ, 0, GW_BUF_HIGH);
	bufferevent_set_timeouts(c->in, &idle, &wr);
	bufferevent_enable(c->in, EV_READ | EV_WRITE);
	gw_http_guest(c);
}
