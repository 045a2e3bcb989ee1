/* The one proxy: a client request piped to an upstream and back (see http_proxy.h). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "common/util.h"
#include "http/http_parse.h"
#include "http/http_proxy.h"
#include "http/http_server.h"

#define PROXY_HIGH_WATER	HTTP_OUTPUT_HIGH_WATER

struct http_proxy {
	struct http_req			*req;
	struct http_proxy_hooks		 hooks;
	const struct http_proxy_upstream *ops;	/* NULL until attached */
	void				*up;
	struct evbuffer			*held;	/* body bytes before the upstream came */
	int				 replied;	/* the answer's head went to the client */
	int				 no_body;	/* 1xx/204/304 or HEAD: nothing follows */
	int				 body_ended, gone;
	int				 held_paused;	/* we paused the body to hold it */
	/* Two owners: the upstream side (until its end) and the client's body (until its end). */
	int				 up_live, body_live;
};

int
http_hop_header(const char *name)
{
	static const char *const hop[] = { "connection", "keep-alive", "proxy-connection",
	    "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding",
	    "upgrade", "content-length", NULL };
	const char *const *a;

	for (a = hop; *a != NULL; a++)
		if (strcasecmp(name, *a) == 0)
			return 1;
	return 0;
}

/* An owner is done; the last one ends the proxy (the request's callbacks cleared first). */
static void
proxy_put(struct http_proxy *p)
{
	if (p->up_live || p->body_live)
		return;
	http_req_on_close(p->req, NULL, NULL);
	http_req_on_drain(p->req, NULL, NULL);
	if (p->held != NULL)
		evbuffer_free(p->held);
	if (p->hooks.ended != NULL)
		p->hooks.ended(p->hooks.arg);
	http_req_unref(p->req);
	free(p);
}

/* --- upstream → client ------------------------------------------------- */

static void
pass_response_headers(struct http_proxy *p, const struct http_head *h)
{
	const char *up;
	size_t i;

	for (i = 0; h != NULL && i < h->nheaders; i++) {
		const char *name = h->headers[i].name;
		if (!http_hop_header(name) && strcasecmp(name, "content-type") != 0 &&
		    strcasecmp(name, "server") != 0)
			http_req_add_header(p->req, name, h->headers[i].value);
	}
	if (h != NULL && (up = http_head_get(h, "upgrade")) != NULL) {
		http_req_add_header(p->req, "Connection", "upgrade");
		http_req_add_header(p->req, "Upgrade", up);
	}
}

void
http_proxy_up_head(struct http_proxy *p, int status, const char *ctype,
    const struct http_head *h)
{
	const char *ct = ctype != NULL && *ctype != '\0' ? ctype : p->hooks.default_ctype;

	p->replied = 1;
	if (p->hooks.pass_headers)
		pass_response_headers(p, h);
	if (status == 101) {
		/* WebSocket and the like: both directions are raw bytes from here on. */
		http_reply_upgrade(p->req);
		return;
	}
	if (status == 204 || status == 304 || (status >= 100 && status < 200)) {
		p->no_body = 1;
		http_reply(p->req, status, NULL, NULL, 0);
		return;
	}
	if (strcmp(http_req_method(p->req), "HEAD") == 0) {
		p->no_body = 1;
		http_reply_start_length(p->req, status, ct, h != NULL && h->content_length > 0 ?
		    (uint64_t)h->content_length : 0);
		return;
	}
	/* The upstream's length kept when it gave one; chunked otherwise (streams). */
	if (h != NULL && !h->chunked && h->content_length >= 0)
		http_reply_start_length(p->req, status, ct, (uint64_t)h->content_length);
	else
		http_reply_start(p->req, status, ct);
}

void
http_proxy_up_data(struct http_proxy *p, const char *data, size_t n)
{
	if (p->no_body)
		return;
	http_reply_chunk(p->req, data, n);
	if (http_req_output_pending(p->req) > PROXY_HIGH_WATER && p->ops != NULL)
		p->ops->pause(p->up, 1);
}

void
http_proxy_up_done(struct http_proxy *p, const char *error)
{
	p->up = NULL;
	p->up_live = 0;
	if (!p->replied)
		p->hooks.no_answer(p->req, error, p->hooks.arg);
	else if (error != NULL) {
		if (p->hooks.cut != NULL)
			p->hooks.cut(error, p->hooks.arg);
		http_reply_abort(p->req);
	} else
		http_reply_end(p->req);
	/*
	 * The answer is over: a body the client is still sending is not read
	 * any further (the server closes such a connection), so it is done too.
	 */
	p->body_live = 0;
	proxy_put(p);
}

/* The client drained our output: read from the upstream again. */
static void
client_drained(struct http_req *req, void *arg)
{
	struct http_proxy *p = arg;

	if (p->up != NULL)
		p->ops->pause(p->up, 0);
}

/* --- client → upstream ------------------------------------------------- */

void
http_proxy_up_drained(struct http_proxy *p)
{
	if (p->up != NULL && p->ops->pending(p->up) < PROXY_HIGH_WATER)
		http_req_pause_body(p->req, 0);
}

static void
on_body(struct http_req *req, const char *data, size_t n, void *arg)
{
	struct http_proxy *p = arg;

	if (p->ops == NULL) {
		/* No upstream yet: hold it, and read no more until one comes. */
		evbuffer_add(p->held, data, n);
		http_req_pause_body(req, 1);
		p->held_paused = 1;
		return;
	}
	if (p->up == NULL)
		return;
	p->ops->write(p->up, data, n);
	if (p->ops->pending(p->up) > PROXY_HIGH_WATER)
		http_req_pause_body(req, 1);
}

static void
on_body_end(struct http_req *req, void *arg)
{
	struct http_proxy *p = arg;

	if (p->up != NULL)
		p->ops->end(p->up);
	p->body_ended = 1;
	p->body_live = 0;
	proxy_put(p);
}

/* The client left (or its body was bad and the server answered): stop the upstream. */
static void
client_gone(struct http_req *req, void *arg)
{
	struct http_proxy *p = arg;

	p->gone = 1;
	if (p->up != NULL) {
		p->ops->cancel(p->up);
		p->up = NULL;
		p->up_live = 0;
	}
	p->body_live = 0;
	proxy_put(p);
}

struct http_proxy *
http_proxy_new(struct http_req *req, const struct http_proxy_hooks *hooks)
{
	struct http_proxy *p = xcalloc(1, sizeof(*p));

	p->req = req;
	http_req_ref(req);
	p->hooks = *hooks;
	p->held = evbuffer_new();
	/* The upstream side is the caller's until it attaches one or abandons. */
	p->up_live = p->body_live = 1;
	http_req_on_close(req, client_gone, p);
	http_req_on_drain(req, client_drained, p);
	http_req_stream(req, 0, on_body, on_body_end, p);
	return p;
}

void
http_proxy_attach(struct http_proxy *p, const struct http_proxy_upstream *ops, void *up)
{
	size_t n;

	p->ops = ops;
	p->up = up;
	if (p->gone) {
		/* Nobody to answer: the upstream goes at once. */
		ops->cancel(up);
		p->up = NULL;
		p->up_live = 0;
		proxy_put(p);
		return;
	}
	if ((n = evbuffer_get_length(p->held)) > 0) {
		ops->write(up, evbuffer_pullup(p->held, -1), n);
		evbuffer_drain(p->held, n);
	}
	if (p->body_ended)
		ops->end(up);
	else if (p->held_paused) {
		p->held_paused = 0;
		http_req_pause_body(p->req, 0);
	}
}

void
http_proxy_abandon(struct http_proxy *p)
{
	/* Answered by the caller: a body still coming is not read any further. */
	p->up_live = p->body_live = 0;
	proxy_put(p);
}

int
http_proxy_client_gone(const struct http_proxy *p)
{
	return p->gone;
}
