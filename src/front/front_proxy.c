/* The API front's way to the worker: http_proxy over an http_client request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/log.h"
#include "common/util.h"
#include "front/front_proxy.h"
#include "http/http_client.h"
#include "http/http_parse.h"
#include "http/http_proxy.h"
#include "http/http_server.h"

#define FP_HEADERS_MAX	(HTTP_HEADERS_MAX + 4)

struct fproxy {
	struct http_proxy	*hp;
	struct http_req		*req;	/* borrowed: the proxy holds the reference */
	char			**hdrs;
};

void
front_reply_error(struct http_req *req, int status, const char *code, const char *msg)
{
	http_reply_json(req, status, json_pack("{s:i,s:s,s:{s:s,s:s}}", "code", status,
	    "message", msg, "error", "code", code, "message", msg));
}

/* --- the upstream: an http_client request to the worker ---------------- */

static void
up_write(void *up, const void *data, size_t n)
{
	http_creq_write(up, data, n);
}

static void
up_end(void *up)
{
	http_creq_end(up);
}

static size_t
up_pending(const void *up)
{
	return http_creq_pending(up);
}

static void
up_pause(void *up, int paused)
{
	http_creq_pause(up, paused);
}

static void
up_cancel(void *up)
{
	http_creq_cancel(up);
}

static const struct http_proxy_upstream up_ops = { up_write, up_end, up_pending, up_pause,
    up_cancel };

static void
on_head(struct http_creq *cr, int status, const char *ctype, void *arg)
{
	http_proxy_up_head(((struct fproxy *)arg)->hp, status, ctype, http_creq_response_head(cr));
}

static void
on_data(struct http_creq *cr, const char *data, size_t n, void *arg)
{
	http_proxy_up_data(((struct fproxy *)arg)->hp, data, n);
}

static void
on_done(struct http_creq *cr, const char *error, void *arg)
{
	http_proxy_up_done(((struct fproxy *)arg)->hp, error);
}

static void
on_drain(struct http_creq *cr, void *arg)
{
	http_proxy_up_drained(((struct fproxy *)arg)->hp);
}

/* --- hooks -------------------------------------------------------------- */

static void
no_answer(struct http_req *req, const char *error, void *arg)
{
	log_warnx("front %s %s: %s", http_req_method(req), http_req_head(req)->target,
	    error ? error : "no answer");
	front_reply_error(req, 503, "unavailable", "the sandbox worker is not available; try again");
}

static void
cut(const char *error, void *arg)
{
	struct fproxy *p = arg;

	log_warnx("front %s %s: %s", http_req_method(p->req), http_req_head(p->req)->target, error);
}

static void
ended(void *arg)
{
	struct fproxy *p = arg;

	front_headers_free(p->hdrs);
	free(p);
}

/* Forwarding headers are the front's to set: a client's own never pass. */
static int
front_only_header(const char *name)
{
	static const char *const own[] = { "host", "expect", "forwarded", "x-forwarded-for",
	    "x-forwarded-proto", "x-forwarded-host", "x-real-ip", NULL };
	const char *const *a;

	for (a = own; *a != NULL; a++)
		if (strcasecmp(name, *a) == 0)
			return 1;
	return 0;
}

/* A header the client's Connection header names is about this hop too. */
static int
connection_names(const struct http_head *h, const char *name)
{
	const char *conn = http_head_get(h, "connection"), *p;
	size_t n = strlen(name);

	for (p = conn; p != NULL && *p != '\0'; ) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (strncasecmp(p, name, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' ' ||
		    p[n] == '\t'))
			return 1;
		p = strchr(p, ',');
	}
	return 0;
}

char **
front_request_headers(struct http_req *req, const char *proto)
{
	const struct http_head *h = http_req_head(req);
	char **v = xcalloc(FP_HEADERS_MAX + 1, sizeof(*v));
	size_t i, n = 0;

	for (i = 0; i < h->nheaders && n < FP_HEADERS_MAX - 3; i++) {
		const char *name = h->headers[i].name;
		if (http_hop_header(name) || front_only_header(name) || connection_names(h, name))
			continue;
		xasprintf(&v[n++], "%s: %s", name, h->headers[i].value);
	}
	if (h->upgrade && http_head_get(h, "upgrade") != NULL)
		xasprintf(&v[n++], "Upgrade: %s", http_head_get(h, "upgrade"));
	xasprintf(&v[n++], "X-Forwarded-For: %s", http_req_peer(req));
	xasprintf(&v[n++], "X-Forwarded-Proto: %s", proto);
	v[n] = NULL;
	return v;
}

void
front_headers_free(char **v)
{
	size_t i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

void
front_proxy(struct http_req *req, struct bufferevent *up, const char *proto)
{
	static const struct http_client_cb cbs = { on_head, on_data, on_done, on_drain };
	const struct http_head *h = http_req_head(req);
	struct fproxy *p = xcalloc(1, sizeof(*p));
	struct http_proxy_hooks hooks = { 1, NULL, no_answer, cut, ended, p };
	struct http_creq_spec spec;
	const char *host = http_req_header(req, "host");

	p->req = req;
	p->hdrs = front_request_headers(req, proto);
	memset(&spec, 0, sizeof(spec));
	spec.method = http_req_method(req);
	spec.target = h->target;	/* as sent: the worker decodes it with the same parser */
	spec.host = host != NULL ? host : "localhost";
	spec.headers = (const char *const *)p->hdrs;
	spec.peer = "the sandbox worker";
	if (h->chunked)
		spec.body_len = -1;
	else if (h->content_length > 0) {
		spec.body_len = -2;
		spec.stream_len = (uint64_t)h->content_length;
	}
	if (h->upgrade && http_head_get(h, "upgrade") != NULL && !h->chunked &&
	    h->content_length <= 0)
		spec.flags = HTTP_CREQ_UPGRADE;
	p->hp = http_proxy_new(req, &hooks);
	http_proxy_attach(p->hp, &up_ops, http_client_start(up, &spec, &cbs, p));
}
