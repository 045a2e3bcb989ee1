/* The HTTP/1.1 client side: one request per connection, streamed both ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/ref.h"
#include "common/util.h"
#include "http/http_client.h"
#include "http/http_parse.h"

enum creq_phase { CREQ_HEAD, CREQ_BODY, CREQ_DONE };

enum creq_framing { CREQ_FIXED, CREQ_CHUNKED, CREQ_LENGTH };

struct http_creq {
	struct bufferevent	*bev;
	struct http_client_cb	 cb;
	void			*arg;
	enum creq_phase		 phase;
	enum creq_framing	 framing;
	int			 body_open;	/* chunked/length body still being written */
	uint64_t		 left;		/* CREQ_LENGTH: bytes still to send */
	int			 until_close;	/* response body ends at EOF */
	int			 tunnel;	/* after a 101: raw bytes both ways */
	int			 flags;
	struct http_body	 dec;
	int			 finished;	/* done() ran (or will not: cancelled) */
	struct ref		 ref;		/* common/ref.h: frames in callbacks hold one */
	char			 method[16];
	char			 peer[64];
	const struct http_head	*resp_head;	/* during the head callback only */
	void			(*release)(void *);
	void			*release_arg;
};

static void
creq_release(void *arg)
{
	struct http_creq *r = arg;

	if (r->release != NULL)
		r->release(r->release_arg);
	if (r->bev != NULL)
		bufferevent_free(r->bev);
	free(r);
}

/* Drop a frame's reference; 1: r is dead (maybe freed), touch it no more. */
static int
creq_put(struct http_creq *r)
{
	return ref_put(&r->ref, creq_release, r);
}

/* Report the end once and let the request go. */
static void
creq_finish(struct http_creq *r, const char *error)
{
	if (r->finished)
		return;
	r->finished = 1;
	r->phase = CREQ_DONE;
	if (r->bev != NULL)
		bufferevent_disable(r->bev, EV_READ | EV_WRITE);
	ref_get(&r->ref);
	if (r->cb.done != NULL && !ref_dead(&r->ref))
		r->cb.done(r, error, r->arg);
	/* The end of the response is the end of r: drop the owner's reference (unless done() cancelled). */
	if (!ref_kill(&r->ref))
		creq_put(r);
	creq_put(r);
}

static void
creq_finishf(struct http_creq *r, const char *what)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "%s %s", r->peer, what);
	creq_finish(r, msg);
}

static void
creq_body_sink(void *arg, const char *data, size_t n)
{
	struct http_creq *r = arg;

	if (r->cb.data != NULL && !ref_dead(&r->ref))
		r->cb.data(r, data, n, r->arg);
}

/* A response head in in (or not yet): 1 parsed, 0 more needed, -1 finished with an error. */
static int
creq_head(struct http_creq *r, struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in), want = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
	const char *buf = (const char *)evbuffer_pullup(in, (ssize_t)want), *ct;
	char ctype[128], *cause = NULL;
	struct http_head h;
	int status;
	ssize_t n;

	n = http_parse_response_head(buf, want, &h, &status, &cause);
	if (n == 0)
		return 0;
	if (n < 0) {
		creq_finish(r, cause);
		free(cause);
		return -1;
	}
	evbuffer_drain(in, (size_t)n);
	if (status == 101 && (r->flags & HTTP_CREQ_UPGRADE)) {
		/* Switched protocols: from here on the connection is the caller's bytes. */
		r->tunnel = r->until_close = 1;
		r->framing = CREQ_FIXED;
		r->body_open = 0;
		r->phase = CREQ_BODY;
		r->resp_head = &h;
		if (r->cb.head != NULL)
			r->cb.head(r, status, "", r->arg);
		r->resp_head = NULL;
		http_head_free(&h);
		return 1;
	}
	if (status >= 100 && status < 200) {
		http_head_free(&h);
		return 1;
	}
	if (!http_response_has_body(r->method, status))
		h.content_length = 0;
	ct = http_head_get(&h, "content-type");
	snprintf(ctype, sizeof(ctype), "%s", ct ? ct : "");
	http_body_init(&r->dec, &h, 0);
	r->until_close = !h.chunked && h.content_length < 0;
	r->phase = CREQ_BODY;
	r->resp_head = &h;
	if (r->cb.head != NULL)
		r->cb.head(r, status, ctype, r->arg);
	r->resp_head = NULL;
	if (!ref_dead(&r->ref) && !h.chunked && h.content_length == 0) {
		http_head_free(&h);
		creq_finish(r, NULL);
		return -1;
	}
	http_head_free(&h);
	return 1;
}

/* Body bytes from in: 1 go on, -1 finished. */
static int
creq_body(struct http_creq *r, struct evbuffer *in)
{
	struct evbuffer_iovec v;
	enum http_body_state st;
	size_t consumed;
	char *cause = NULL;

	if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return -1;
	if (r->until_close) {
		creq_body_sink(r, v.iov_base, v.iov_len);
		evbuffer_drain(in, v.iov_len);
		return 1;
	}
	st = http_body_feed(&r->dec, v.iov_base, v.iov_len, &consumed, creq_body_sink, r, &cause);
	evbuffer_drain(in, consumed);
	if (st == HTTP_BODY_ERROR) {
		creq_finish(r, cause);
		free(cause);
		return -1;
	}
	if (st == HTTP_BODY_DONE) {
		creq_finish(r, NULL);
		return -1;
	}
	return 1;
}

static void
creq_read(struct bufferevent *bev, void *arg)
{
	struct http_creq *r = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	int rc = 1;

	ref_get(&r->ref);
	while (rc == 1 && !ref_dead(&r->ref) && evbuffer_get_length(in) > 0) {
		if (r->phase == CREQ_HEAD)
			rc = creq_head(r, in);
		else if (r->phase == CREQ_BODY)
			rc = creq_body(r, in);
		else
			evbuffer_drain(in, evbuffer_get_length(in));
	}
	creq_put(r);
}

static void
creq_write_cb(struct bufferevent *bev, void *arg)
{
	struct http_creq *r = arg;

	if (r->cb.drain != NULL && !ref_dead(&r->ref)) {
		ref_get(&r->ref);
		r->cb.drain(r, r->arg);
		creq_put(r);
	}
}

static void
creq_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_creq *r = arg;

	if (what & BEV_EVENT_EOF) {
		if (r->phase == CREQ_BODY && r->until_close)
			creq_finish(r, NULL);
		else
			creq_finishf(r, r->phase == CREQ_BODY ? "closed the connection mid-response" :
			    "closed the connection before answering");
	} else if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		creq_finishf(r, what & BEV_EVENT_TIMEOUT ? "timed out" :
		    "could not be reached (connection failed)");
}

struct http_creq *
http_client_start(struct bufferevent *bev, const struct http_creq_spec *s,
    const struct http_client_cb *cb, void *arg)
{
	struct http_creq *r = xcalloc(1, sizeof(*r));
	struct evbuffer *out = bufferevent_get_output(bev);
	const char *const *h;

	r->bev = bev;
	r->cb = *cb;
	r->arg = arg;
	r->flags = s->flags;
	snprintf(r->method, sizeof(r->method), "%s", s->method);
	snprintf(r->peer, sizeof(r->peer), "%s", s->peer ? s->peer : "the server");
	ref_init(&r->ref);
	bufferevent_setcb(bev, creq_read, creq_write_cb, creq_event, r);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* One request per connection: the server closes after answering (or keeps a tunnel). */
	evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n",
	    s->method, s->target, s->host, (s->flags & HTTP_CREQ_UPGRADE) ? "upgrade" : "close");
	if (s->ctype != NULL)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", s->ctype);
	for (h = s->headers; h != NULL && *h != NULL; h++)
		evbuffer_add_printf(out, "%s\r\n", *h);
	if (s->body_len >= 0) {
		r->framing = CREQ_FIXED;
		/* A bodiless upgrade request says nothing about length, as browsers send it. */
		if (s->body_len > 0 || !(s->flags & HTTP_CREQ_UPGRADE))
			evbuffer_add_printf(out, "Content-Length: %zd\r\n", s->body_len);
		evbuffer_add(out, "\r\n", 2);
		if (s->body_len > 0)
			evbuffer_add(out, s->body, (size_t)s->body_len);
	} else if (s->body_len == -2) {
		r->framing = CREQ_LENGTH;
		r->left = s->stream_len;
		r->body_open = 1;
		evbuffer_add_printf(out, "Content-Length: %llu\r\n\r\n",
		    (unsigned long long)s->stream_len);
	} else {
		r->framing = CREQ_CHUNKED;
		r->body_open = 1;
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n\r\n");
	}
	r->phase = CREQ_HEAD;
	return r;
}

const struct http_head *
http_creq_response_head(const struct http_creq *r)
{
	return r->resp_head;
}

void
http_creq_write(struct http_creq *r, const void *data, size_t n)
{
	struct evbuffer *out;

	if (ref_dead(&r->ref) || n == 0)
		return;
	out = bufferevent_get_output(r->bev);
	if (r->tunnel) {
		evbuffer_add(out, data, n);
		return;
	}
	if (!r->body_open)
		return;
	if (r->framing == CREQ_LENGTH) {
		if (n > r->left)
			n = (size_t)r->left;
		evbuffer_add(out, data, n);
		r->left -= n;
		return;
	}
	evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add(out, data, n);
	evbuffer_add(out, "\r\n", 2);
}

void
http_creq_end(struct http_creq *r)
{
	if (ref_dead(&r->ref) || !r->body_open)
		return;
	r->body_open = 0;
	if (r->framing == CREQ_CHUNKED)
		evbuffer_add(bufferevent_get_output(r->bev), "0\r\n\r\n", 5);
}

size_t
http_creq_pending(const struct http_creq *r)
{
	return ref_dead(&r->ref) ? 0 : evbuffer_get_length(bufferevent_get_output(r->bev));
}

void
http_creq_pause(struct http_creq *r, int paused)
{
	if (ref_dead(&r->ref))
		return;
	if (paused)
		bufferevent_disable(r->bev, EV_READ);
	else {
		bufferevent_enable(r->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_input(r->bev)) > 0)
			creq_read(r->bev, r);
	}
}

void
http_creq_cancel(struct http_creq *r)
{
	if (r == NULL || ref_kill(&r->ref))
		return;
	r->finished = 1;
	if (r->bev != NULL)
		bufferevent_disable(r->bev, EV_READ | EV_WRITE);
	creq_put(r);
}

void
http_creq_fail(struct http_creq *r, const char *error)
{
	if (!ref_dead(&r->ref))
		creq_finish(r, error);
}

void
http_creq_on_release(struct http_creq *r, void (*fn)(void *), void *arg)
{
	r->release = fn;
	r->release_arg = arg;
}

struct bufferevent *
http_creq_bev(const struct http_creq *r)
{
	return r->bev;
}
