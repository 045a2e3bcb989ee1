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
#include "http/http_client.h"
#include "http/http_parse.h"
#include "common/log.h"
#include "common/ref.h"
#include "common/tbucket.h"
#include "common/util.h"
#include "link/envd_client.h"

/*
 * A request to the agent: the HTTP client's request (http/http_client.c) on
 * an agent channel stream, with envd's callbacks. r lives as long as its
 * HTTP request (freed by its release hook).
 */
struct envd_req {
	struct http_creq	*hr;
	struct envd_cb		 cb;
	void			*arg;
	/* Wrappers (unary JSON, Connect streams) free their state here on cancel. */
	void			(*wrap_free)(void *arg);
	struct agent_client	*ac;
	int			 open_done;	/* the channel reported the stream's open */
	int			 cancelled, done_ran;
	/* envd_req_pace: the budget, and who holds reading (the caller, the budget). */
	struct tbucket		*budget;
	struct event		*pace;
	int			 held_by_caller, held_by_budget;
};

static void pace_stop(struct envd_req *);

static void
envd_release(void *arg)
{
	struct envd_req *r = arg;

	/*
	 * A stream still opening would call envd_opened with r later. (Freeing
	 * the agent client reports every pending open first, so ac is valid here.)
	 */
	if (!r->open_done)
		agent_client_cancel(r->ac, r);
	pace_stop(r);
	free(r);
}

static void
envd_head(struct http_creq *hr, int status, const char *ctype, void *arg)
{
	struct envd_req *r = arg;

	if (r->cb.head != NULL)
		r->cb.head(r, status, ctype, r->arg);
}

static void
reading_apply(struct envd_req *r)
{
	http_creq_pause(r->hr, r->held_by_caller || r->held_by_budget);
}

static void
pace_stop(struct envd_req *r)
{
	if (r->pace != NULL)
		event_free(r->pace);
	r->pace = NULL;
	r->budget = NULL;
}

static void
pace_arm(struct envd_req *r, uint64_t wait_ms)
{
	struct timeval tv = { (time_t)(wait_ms / 1000), (suseconds_t)(wait_ms % 1000) * 1000 };

	event_add(r->pace, &tv);
}

/* The budget's timer: read again once it is out of debt. */
static void
pace_wake(evutil_socket_t fd, short what, void *arg)
{
	struct envd_req *r = arg;
	uint64_t wait;

	if (r->budget == NULL || r->cancelled || r->done_ran)
		return;
	if ((wait = tbucket_wait_ms(r->budget, 0, monotonic_ms())) > 0) {
		pace_arm(r, wait);
		return;
	}
	r->held_by_budget = 0;
	reading_apply(r);
}

/* Charge a chunk read; in debt, stop reading and wake when it is paid. */
static void
pace_charge(struct envd_req *r, size_t n)
{
	uint64_t now = monotonic_ms(), wait;

	tbucket_charge(r->budget, (double)n, now);
	if (r->held_by_budget || (wait = tbucket_wait_ms(r->budget, 0, now)) == 0)
		return;
	r->held_by_budget = 1;
	reading_apply(r);
	pace_arm(r, wait);
}

static void
envd_data(struct http_creq *hr, const char *data, size_t n, void *arg)
{
	struct envd_req *r = arg;

	if (r->budget != NULL)
		pace_charge(r, n);
	if (r->cb.data != NULL)
		r->cb.data(r, data, n, r->arg);
}

static void
envd_done(struct http_creq *hr, const char *error, void *arg)
{
	struct envd_req *r = arg;

	if (r->pace != NULL)
		event_del(r->pace);
	if (r->cb.done != NULL)
		r->cb.done(r, error, r->arg);
	r->done_ran = 1;
}

static void
envd_drain(struct http_creq *hr, void *arg)
{
	struct envd_req *r = arg;

	if (r->cb.drain != NULL)
		r->cb.drain(r, r->arg);
}

static void
envd_opened(int err, const char *reason, void *arg)
{
	struct envd_req *r = arg;

	r->open_done = 1;
	if (err != 0 && !r->cancelled && !r->done_ran) {
		char msg[256];
		snprintf(msg, sizeof(msg), "guest agent refused the stream: %s",
		    reason ? reason : "refused");
		http_creq_fail(r->hr, msg);
	}
}

struct envd_req *
envd_request_port(struct agent_client *ac, uint16_t port, const char *host, int flags,
    const char *method, const char *target, const char *ctype, const void *body,
    ssize_t body_len, const char *const *extra, const struct envd_cb *cb, void *arg,
    char **cause)
{
	static const struct http_client_cb cbs = { envd_head, envd_data, envd_done, envd_drain };
	struct envd_req *r = xcalloc(1, sizeof(*r));
	struct http_creq_spec spec = {
		.method = method, .target = target, .host = host, .ctype = ctype,
		.body = body, .body_len = body_len < 0 ? -1 : body_len, .headers = extra,
		.flags = (flags & ENVD_REQ_UPGRADE) ? HTTP_CREQ_UPGRADE : 0,
		.peer = "the guest agent",
	};
	struct bufferevent *bev;

	r->cb = *cb;
	r->arg = arg;
	r->ac = ac;
	if ((bev = agent_client_connect(ac, port, envd_opened, r, cause)) == NULL) {
		free(r);
		return NULL;
	}
	r->hr = http_client_start(bev, &spec, &cbs, r);
	http_creq_on_release(r->hr, envd_release, r);
	return r;
}

struct envd_req *
envd_request(struct agent_client *ac, const char *method, const char *target, const char *ctype,
    const void *body, ssize_t body_len, const char *const *extra, const struct envd_cb *cb,
    void *arg, char **cause)
{
	return envd_request_port(ac, ENVD_PORT, "envd", 0, method, target, ctype, body, body_len,
	    extra, cb, arg, cause);
}

const struct http_head *
envd_req_response_head(const struct envd_req *r)
{
	return http_creq_response_head(r->hr);
}

void
envd_req_write(struct envd_req *r, const void *data, size_t n)
{
	http_creq_write(r->hr, data, n);
}

void
envd_req_end(struct envd_req *r)
{
	http_creq_end(r->hr);
}

size_t
envd_req_pending(const struct envd_req *r)
{
	return http_creq_pending(r->hr);
}

void
envd_req_pause(struct envd_req *r, int paused)
{
	r->held_by_caller = paused != 0;
	reading_apply(r);
}

void
envd_req_pace(struct envd_req *r, struct tbucket *b)
{
	if (b == NULL || b->rate <= 0 || r->cancelled || r->done_ran)
		return;
	r->budget = b;
	if (r->pace == NULL)
		r->pace = xnonnull(evtimer_new(bufferevent_get_base(http_creq_bev(r->hr)),
		    pace_wake, r), "evtimer_new");
}

void
envd_req_cancel(struct envd_req *r)
{
	if (r == NULL || r->cancelled || r->done_ran)
		return;
	r->cancelled = 1;
	if (r->pace != NULL)
		event_del(r->pace);
	if (r->wrap_free != NULL)
		r->wrap_free(r->arg);
	http_creq_cancel(r->hr);
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
