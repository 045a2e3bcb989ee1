/* envd HTTP client over agent channel streams. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/bufferevent.h>

#include "link/agent_client.h"
#include "http/http_parse.h"
#include "common/log.h"
#include "common/util.h"
#include "link/envd_client.h"

enum envd_phase { ENVD_OPENING, ENVD_HEAD, ENVD_BODY, ENVD_DONE };

struct envd_req {
	struct bufferevent	*bev;
	struct envd_cb		 cb;
	void			*arg;
	enum envd_phase		 phase;
	int			 chunked_req;	/* request body is chunked */
	int			 until_close;	/* response body ends at EOF */
	struct http_body	 dec;
	int			 finished;	/* done() called */
	int			 in_cb;		/* free deferred while in a callback */
	int			 dead;
	char			 method[8];
	/* Wrappers (unary JSON, Connect streams) free their state here on cancel. */
	void			(*wrap_free)(void *arg);
	struct agent_client	*ac;
	int			 open_done;	/* the channel reported the stream's open */
};

static void
envd_free(struct envd_req *r)
{
	/*
	 * A stream still opening would call envd_opened with r later. (Freeing
	 * the agent client reports every pending open first, so ac is valid here.)
	 */
	if (!r->open_done)
		agent_client_cancel(r->ac, r);
	if (r->bev != NULL)
		bufferevent_free(r->bev);
	free(r);
}

/* Report the end once and release the stream. */
static void
envd_finish(struct envd_req *r, const char *error)
{
	if (r->finished)
		return;
	r->finished = 1;
	r->phase = ENVD_DONE;
	if (r->bev != NULL) {
		bufferevent_disable(r->bev, EV_READ | EV_WRITE);
	}
	r->in_cb++;
	if (r->cb.done != NULL && !r->dead)
		r->cb.done(r, error, r->arg);
	r->in_cb--;
	r->dead = 1;
	if (r->in_cb == 0)
		envd_free(r);
}

static void
envd_body_sink(void *arg, const char *data, size_t n)
{
	struct envd_req *r = arg;

	if (r->cb.data != NULL && !r->dead)
		r->cb.data(r, data, n, r->arg);
}

static void
envd_read(struct bufferevent *bev, void *arg)
{
	struct envd_req *r = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char ctype[128], *cause = NULL;

	r->in_cb++;
	while (!r->dead && evbuffer_get_length(in) > 0) {
		if (r->phase == ENVD_OPENING || r->phase == ENVD_HEAD) {
			size_t len = evbuffer_get_length(in), want;
			struct http_head h;
			int status, chunked;
			int64_t clen;
			ssize_t n;
			const char *buf, *ct;

			want = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
			buf = (const char *)evbuffer_pullup(in, (ssize_t)want);
			n = http_parse_response_head(buf, want, &h, &status, &cause);
			if (n == 0)
				break;
			if (n < 0) {
				envd_finish(r, cause);
				free(cause);
				break;
			}
			evbuffer_drain(in, (size_t)n);
			if (status >= 100 && status < 200) {
				http_head_free(&h);
				continue;
			}
			if (!http_response_has_body(r->method, status))
				h.content_length = 0;
			chunked = h.chunked;
			clen = h.content_length;
			ct = http_head_get(&h, "content-type");
			snprintf(ctype, sizeof(ctype), "%s", ct ? ct : "");
			http_body_init(&r->dec, &h, 0);
			http_head_free(&h);
			r->until_close = !chunked && clen < 0;
			r->phase = ENVD_BODY;
			if (r->cb.head != NULL)
				r->cb.head(r, status, ctype, r->arg);
			if (!r->dead && !chunked && clen == 0) {
				envd_finish(r, NULL);
				break;
			}
			continue;
		}
		if (r->phase == ENVD_BODY) {
			struct evbuffer_iovec v;
			enum http_body_state st;
			size_t consumed;

			if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
				break;
			if (r->until_close) {
				envd_body_sink(r, v.iov_base, v.iov_len);
				evbuffer_drain(in, v.iov_len);
				continue;
			}
			st = http_body_feed(&r->dec, v.iov_base, v.iov_len, &consumed, envd_body_sink, r,
			    &cause);
			evbuffer_drain(in, consumed);
			if (st == HTTP_BODY_ERROR) {
				envd_finish(r, cause);
				free(cause);
				break;
			}
			if (st == HTTP_BODY_DONE) {
				envd_finish(r, NULL);
				break;
			}
			continue;
		}
		evbuffer_drain(in, evbuffer_get_length(in));
	}
	r->in_cb--;
	if (r->dead && r->in_cb == 0)
		envd_free(r);
}

static void
envd_write(struct bufferevent *bev, void *arg)
{
	struct envd_req *r = arg;

	if (r->cb.drain != NULL && !r->dead) {
		r->in_cb++;
		r->cb.drain(r, r->arg);
		r->in_cb--;
		if (r->dead && r->in_cb == 0)
			envd_free(r);
	}
}

static void
envd_event(struct bufferevent *bev, short what, void *arg)
{
	struct envd_req *r = arg;

	if (what & BEV_EVENT_EOF) {
		if (r->phase == ENVD_BODY && r->until_close)
			envd_finish(r, NULL);
		else
			envd_finish(r, r->phase == ENVD_BODY ? "guest closed the stream mid-response" :
			    "guest closed the stream before answering");
	} else if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		envd_finish(r, what & BEV_EVENT_TIMEOUT ? "timeout talking to the guest agent" :
		    "stream to the guest agent failed");
}

static void
envd_opened(int err, const char *reason, void *arg)
{
	struct envd_req *r = arg;

	r->open_done = 1;
	if (err != 0 && !r->dead) {
		char msg[256];
		snprintf(msg, sizeof(msg), "guest agent refused the stream: %s",
		    reason ? reason : "refused");
		envd_finish(r, msg);
	}
}

struct envd_req *
envd_request(struct agent_client *ac, const char *method, const char *target, const char *ctype,
    const void *body, ssize_t body_len, const char *const *extra, const struct envd_cb *cb,
    void *arg, char **cause)
{
	struct envd_req *r = xcalloc(1, sizeof(*r));
	struct evbuffer *out;

	r->cb = *cb;
	r->arg = arg;
	snprintf(r->method, sizeof(r->method), "%s", method);
	r->ac = ac;
	r->bev = agent_client_connect(ac, ENVD_PORT, envd_opened, r, cause);
	if (r->bev == NULL) {
		free(r);
		return NULL;
	}
	bufferevent_setcb(r->bev, envd_read, envd_write, envd_event, r);
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
	out = bufferevent_get_output(r->bev);
	evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: envd\r\nConnection: close\r\n",
	    method, target);
	if (ctype != NULL)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
	for (; extra != NULL && *extra != NULL; extra++)
		evbuffer_add_printf(out, "%s\r\n", *extra);
	if (body_len >= 0) {
		evbuffer_add_printf(out, "Content-Length: %zd\r\n\r\n", body_len);
		if (body_len > 0)
			evbuffer_add(out, body, (size_t)body_len);
	} else {
		r->chunked_req = 1;
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n\r\n");
	}
	r->phase = ENVD_HEAD;
	return r;
}

void
envd_req_write(struct envd_req *r, const void *data, size_t n)
{
	struct evbuffer *out;

	if (r->dead || !r->chunked_req || n == 0)
		return;
	out = bufferevent_get_output(r->bev);
	evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add(out, data, n);
	evbuffer_add(out, "\r\n", 2);
}

void
envd_req_end(struct envd_req *r)
{
	if (r->dead || !r->chunked_req)
		return;
	evbuffer_add(bufferevent_get_output(r->bev), "0\r\n\r\n", 5);
	r->chunked_req = 0;
}

size_t
envd_req_pending(const struct envd_req *r)
{
	return r->dead ? 0 : evbuffer_get_length(bufferevent_get_output(r->bev));
}

void
envd_req_pause(struct envd_req *r, int paused)
{
	if (r->dead)
		return;
	if (paused)
		bufferevent_disable(r->bev, EV_READ);
	else {
		bufferevent_enable(r->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(r->bev)) > 0)
			envd_read(r->bev, r);
	}
}

void
envd_req_cancel(struct envd_req *r)
{
	if (r == NULL || r->dead)
		return;
	r->dead = 1;
	r->finished = 1;
	if (r->wrap_free != NULL)
		r->wrap_free(r->arg);
	if (r->in_cb == 0)
		envd_free(r);
}

/* --- unary JSON ------------------------------------------------------- */

struct envd_json {
	envd_json_cb	 cb;
	void		*arg;
	int		 status;
	struct evbuffer	*buf;
	int		 overflow;
};

static void
json_head(struct envd_req *r, int status, const char *ctype, void *arg)
{
	((struct envd_json *)arg)->status = status;
}

static void
json_data(struct envd_req *r, const char *data, size_t n, void *arg)
{
	struct envd_json *j = arg;

	if (evbuffer_get_length(j->buf) + n > ENVD_JSON_MAX)
		j->overflow = 1;
	else
		evbuffer_add(j->buf, data, n);
}

static void
json_free(void *arg)
{
	struct envd_json *j = arg;

	evbuffer_free(j->buf);
	free(j);
}

static void
json_done(struct envd_req *r, const char *error, void *arg)
{
	struct envd_json *j = arg;
	json_t *resp = NULL;
	size_t len = evbuffer_get_length(j->buf);

	if (error == NULL && j->overflow)
		error = "guest response too large";
	if (error == NULL && len > 0) {
		resp = json_loadb((const char *)evbuffer_pullup(j->buf, -1), len, 0, NULL);
		if (resp == NULL && j->status < 300)
			error = "guest answered with invalid JSON";
	}
	j->cb(j->status, resp, error, j->arg);
	json_decref(resp);
	json_free(j);
}

struct envd_req *
envd_call_json(struct agent_client *ac, const char *method, const char *target, json_t *body,
    const char *const *extra, envd_json_cb cb, void *arg, char **cause)
{
	static const struct envd_cb cbs = { json_head, json_data, json_done, NULL };
	struct envd_json *j = xcalloc(1, sizeof(*j));
	struct envd_req *r;
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;

	j->cb = cb;
	j->arg = arg;
	j->buf = evbuffer_new();
	r = envd_request(ac, method, target, text ? "application/json" : NULL, text,
	    text ? (ssize_t)strlen(text) : 0, extra, &cbs, j, cause);
	free(text);
	if (r == NULL) {
		evbuffer_free(j->buf);
		free(j);
	} else
		r->wrap_free = json_free;
	return r;
}

/* --- agent error answers ------------------------------------------------ */

void
envd_error_from_connect(const char *connect_code, const char *errname, struct envd_error *e)
{
	static const struct { const char *connect; int status; const char *code; } map[] = {
		{ "not_found",		404, "not_found" },
		{ "invalid_argument",	400, "bad_request" },
		{ "out_of_range",	400, "bad_request" },
		{ "already_exists",	409, "conflict" },
		{ "failed_precondition", 409, "conflict" },	/* ENOTEMPTY, EBUSY */
		{ "aborted",		409, "conflict" },
		{ "permission_denied",	403, "forbidden" },
		{ "resource_exhausted",	503, "unavailable" },	/* EMFILE, too many watchers */
		{ "unavailable",	503, "unavailable" },
		{ "deadline_exceeded",	504, "guest_timeout" },
		{ "internal",		500, "guest_error" },	/* EIO and the like */
		{ "unknown",		500, "guest_error" },
		{ "data_loss",		500, "guest_error" },
	};
	size_t i;

	e->status = 502;
	e->code = "agent_error";
	if (connect_code == NULL)
		return;
	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(map[i].connect, connect_code) == 0) {
			e->status = map[i].status;
			e->code = map[i].code;
			break;
		}
	}
	if (e->status == 503 && errname != NULL &&
	    (strcmp(errname, "ENOSPC") == 0 || strcmp(errname, "EDQUOT") == 0)) {
		e->status = 507;
		e->code = "insufficient_storage";
	}
}

void
envd_error_from_status(int status, struct envd_error *e)
{
	switch (status) {
	case 400: e->status = 400; e->code = "bad_request"; break;
	case 403: e->status = 403; e->code = "forbidden"; break;
	case 404: e->status = 404; e->code = "not_found"; break;
	case 409: e->status = 409; e->code = "conflict"; break;
	case 500: e->status = 500; e->code = "guest_error"; break;
	case 503: e->status = 503; e->code = "unavailable"; break;
	case 504: e->status = 504; e->code = "guest_timeout"; break;
	case 507: e->status = 507; e->code = "insufficient_storage"; break;
	/* 401, 411, 405...: airlockd's own request was wrong for this agent. */
	default: e->status = 502; e->code = "agent_error"; break;
	}
}

/* --- Connect streams ---------------------------------------------------- */

int
connect_dec_feed(struct connect_dec *d, const char *data, size_t n,
    int (*cb)(int flags, const unsigned char *msg, size_t len, void *arg), void *arg,
    char **cause)
{
	while (n > 0) {
		if (d->hdrlen < 5) {
			size_t take = 5 - d->hdrlen < n ? 5 - d->hdrlen : n;
			memcpy(d->hdr + d->hdrlen, data, take);
			d->hdrlen += take;
			data += take;
			n -= take;
			if (d->hdrlen < 5)
				return 0;
			d->flags = d->hdr[0];
			d->want = (size_t)d->hdr[1] << 24 | (size_t)d->hdr[2] << 16 |
			    (size_t)d->hdr[3] << 8 | d->hdr[4];
			if (d->flags & ~0x02) {
				cause_set(cause, "unsupported Connect envelope flags 0x%02x", d->flags);
				return -1;
			}
			if (d->want > ENVD_CONNECT_MSG_MAX) {
				cause_set(cause, "Connect message of %zu bytes is too large", d->want);
				return -1;
			}
			free(d->msg);
			d->msg = xmalloc(d->want + 1);
			d->msglen = 0;
		}
		size_t take = d->want - d->msglen < n ? d->want - d->msglen : n;
		memcpy(d->msg + d->msglen, data, take);
		d->msglen += take;
		data += take;
		n -= take;
		if (d->msglen == d->want) {
			d->msg[d->msglen] = '\0';
			d->hdrlen = 0;
			if (cb(d->flags, d->msg, d->msglen, arg) == -1)
				return -1;
		}
	}
	return 0;
}

void
connect_dec_free(struct connect_dec *d)
{
	free(d->msg);
	memset(d, 0, sizeof(*d));
}

struct envd_streamer {
	envd_msg_cb		 on_msg;
	envd_end_cb		 on_end;
	void			*arg;
	struct connect_dec	 dec;
	int			 status;
	int			 ended;		/* end-stream seen */
	char			*end_error;
	int			 failed;
};

static void
stream_head(struct envd_req *r, int status, const char *ctype, void *arg)
{
	((struct envd_streamer *)arg)->status = status;
}

static int
stream_envelope(int flags, const unsigned char *msg, size_t len, void *arg)
{
	struct envd_streamer *s = arg;
	json_t *j = json_loadb((const char *)msg, len, 0, NULL);

	if (j == NULL)
		return -1;
	if (flags & 0x02) {
		json_t *e = json_object_get(j, "error");
		s->ended = 1;
		if (e != NULL) {
			const char *code = json_string_value(json_object_get(e, "code"));
			const char *m = json_string_value(json_object_get(e, "message"));
			xasprintf(&s->end_error, "%s: %s", code ? code : "error", m ? m : "");
		}
	} else if (!s->ended)
		s->on_msg(j, s->arg);
	json_decref(j);
	return 0;
}

static void
stream_data(struct envd_req *r, const char *data, size_t n, void *arg)
{
	struct envd_streamer *s = arg;
	char *cause = NULL;

	if (s->failed || s->status != 200)
		return;
	if (connect_dec_feed(&s->dec, data, n, stream_envelope, s, &cause) == -1) {
		s->failed = 1;
		free(s->end_error);
		xasprintf(&s->end_error, "bad stream from the guest agent: %s",
		    cause ? cause : "invalid message");
		free(cause);
	}
}

static void
stream_free(void *arg)
{
	struct envd_streamer *s = arg;

	connect_dec_free(&s->dec);
	free(s->end_error);
	free(s);
}

static void
stream_done(struct envd_req *r, const char *error, void *arg)
{
	struct envd_streamer *s = arg;
	char buf[64];

	if (error == NULL && s->status != 200) {
		snprintf(buf, sizeof(buf), "guest agent answered HTTP %d", s->status);
		error = buf;
	}
	if (error == NULL && s->end_error != NULL)
		error = s->end_error;
	if (error == NULL && !s->ended)
		error = "stream ended without an end-stream message";
	s->on_end(error, s->arg);
	stream_free(s);
}

struct envd_req *
envd_stream(struct agent_client *ac, const char *service_method, json_t *req,
    const char *const *extra, envd_msg_cb on_msg, envd_end_cb on_end, void *arg, char **cause)
{
	static const struct envd_cb cbs = { stream_head, stream_data, stream_done, NULL };
	struct envd_streamer *s = xcalloc(1, sizeof(*s));
	char *text = json_dumps(req, JSON_COMPACT), *target, *body;
	size_t len = strlen(text);
	const char *headers[16];
	struct envd_req *r;
	size_t nh = 0;

	s->on_msg = on_msg;
	s->on_end = on_end;
	s->arg = arg;
	body = xmalloc(len + 5);
	body[0] = 0;
	body[1] = (char)(len >> 24);
	body[2] = (char)(len >> 16);
	body[3] = (char)(len >> 8);
	body[4] = (char)len;
	memcpy(body + 5, text, len);
	free(text);
	headers[nh++] = "Connect-Protocol-Version: 1";
	for (; extra != NULL && *extra != NULL && nh < 15; extra++)
		headers[nh++] = *extra;
	headers[nh] = NULL;
	xasprintf(&target, "/%s", service_method);
	r = envd_request(ac, "POST", target, "application/connect+json", body, (ssize_t)len + 5,
	    headers, &cbs, s, cause);
	free(target);
	free(body);
	if (r == NULL)
		free(s);
	else
		r->wrap_free = stream_free;
	return r;
}
