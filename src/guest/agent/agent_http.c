/*
 * HTTP/1.1 server of the agent (see agent_http.h). One http_conn per
 * socket; staged like httpd's server.c: head -> body -> handler -> reply,
 * then the next request on the same connection (keep-alive).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "guest/agent/agent_http.h"

enum hc_state { HC_HEAD, HC_BODY, HC_HANDLER, HC_NEXT, HC_CLOSING, HC_LINGER };

struct http_conn {
	struct bufferevent		*hc_bev;
	http_route_fn			*hc_route;
	enum hc_state			 hc_state;
	struct http_req			 hc_req;
	int				 hc_have_req;
	int64_t				 hc_body_left;	/* Content-Length bodies */
	struct http_chunked		 hc_chunk;
	int				 hc_body_done;
	struct evbuffer			*hc_body;	/* dechunked body staging */
	const struct http_handler	*hc_handler;
	void				*hc_ctx;
	int				 hc_resp_started;
	int				 hc_resp_chunked;
	int				 hc_resp_done;
	int				 hc_peer_eof;
	int				 hc_stop_body;	/* handler replied early */
};

static void hc_read(struct bufferevent *, void *);
static void hc_write(struct bufferevent *, void *);
static void hc_event(struct bufferevent *, short, void *);
static void hc_process(struct http_conn *);

const char *
http_status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
}

void
http_req_clear(struct http_req *req)
{
	free(req->buf);
	free(req->path);
	memset(req, 0, sizeof(*req));
	req->content_length = -1;
}

static int
hex_val(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *
http_pct_decode(const char *s, size_t len, int plus_is_space)
{
	char *out, *o;
	size_t i;
	int hi, lo;

	if ((out = malloc(len + 1)) == NULL)
		return NULL;
	for (i = 0, o = out; i < len; i++) {
		if (s[i] == '%') {
			if (i + 2 >= len || (hi = hex_val(s[i + 1])) < 0 ||
			    (lo = hex_val(s[i + 2])) < 0 || (hi == 0 && lo == 0)) {
				free(out);
				return NULL;
			}
			*o++ = (char)(hi << 4 | lo);
			i += 2;
		} else if (s[i] == '+' && plus_is_space)
			*o++ = ' ';
		else if (s[i] == '\0') {
			free(out);
			return NULL;
		} else
			*o++ = s[i];
	}
	*o = '\0';
	return out;
}

char *
http_query_get(const char *query, const char *name)
{
	size_t nlen = strlen(name);
	const char *p = query, *amp, *eq;

	while (p != NULL && *p != '\0') {
		amp = strchr(p, '&');
		eq = memchr(p, '=', amp != NULL ? (size_t)(amp - p) : strlen(p));
		if (eq != NULL && (size_t)(eq - p) == nlen && strncmp(p, name, nlen) == 0)
			return http_pct_decode(eq + 1, amp != NULL ? (size_t)(amp - eq - 1) :
			    strlen(eq + 1), 1);
		p = amp != NULL ? amp + 1 : NULL;
	}
	return NULL;
}

const char *
http_req_header(const struct http_req *req, const char *name)
{
	int i;

	for (i = 0; i < req->nhdrs; i++) {
		if (strcasecmp(req->hdrs[i].name, name) == 0)
			return req->hdrs[i].value;
	}
	return NULL;
}

static int
is_tchar(int c)
{
	return isalnum(c) || (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Does the comma-separated header value contain token (case-insensitive)? */
static int
has_token(const char *v, const char *token)
{
	size_t tl = strlen(token);

	while (v != NULL && *v != '\0') {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		if (strncasecmp(v, token, tl) == 0 &&
		    (v[tl] == '\0' || v[tl] == ',' || v[tl] == ' ' || v[tl] == '\t'))
			return 1;
		v = strchr(v, ',');
	}
	return 0;
}

int
http_parse_head(const char *buf, size_t len, struct http_req *req, int *status,
    const char **err)
{
	char *p, *line, *next, *sp1, *sp2, *colon, *v, *end, *q;
	const char *te, *cl, *conn;
	unsigned long long n;
	int i;

	http_req_clear(req);
	*status = 400;
	if (len > HTTP_MAX_HEAD) {
		*status = 431;
		*err = "request head too large";
		return -1;
	}
	if ((req->buf = malloc(len + 1)) == NULL) {
		*status = 500;
		*err = "out of memory";
		return -1;
	}
	memcpy(req->buf, buf, len);
	req->buf[len] = '\0';
	if (memchr(req->buf, '\0', len) != NULL) {
		*err = "NUL in request head";
		return -1;
	}
	/* Request line. */
	line = req->buf;
	if ((next = strstr(line, "\r\n")) == NULL) {
		*err = "unterminated request line";
		return -1;
	}
	*next = '\0';
	next += 2;
	if ((sp1 = strchr(line, ' ')) == NULL || (sp2 = strchr(sp1 + 1, ' ')) == NULL ||
	    strchr(sp2 + 1, ' ') != NULL) {
		*err = "malformed request line";
		return -1;
	}
	*sp1 = *sp2 = '\0';
	req->method = line;
	req->target = sp1 + 1;
	for (p = req->method; *p != '\0'; p++) {
		if (!is_tchar((unsigned char)*p)) {
			*err = "bad method";
			return -1;
		}
	}
	if (*req->method == '\0' || req->target[0] != '/') {
		*err = "bad request target";
		return -1;
	}
	for (p = req->target; *p != '\0'; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			*err = "bad character in target";
			return -1;
		}
	}
	if (strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)sp2[8]) ||
	    sp2[9] != '\0') {
		*status = 505;
		*err = "unsupported HTTP version";
		return -1;
	}
	req->minor = sp2[8] - '0';
	/* Headers. */
	for (;;) {
		line = next;
		if ((next = strstr(line, "\r\n")) == NULL) {
			*err = "unterminated header line";
			return -1;
		}
		*next = '\0';
		next += 2;
		if (*line == '\0')
			break;
		if (*line == ' ' || *line == '\t') {
			*err = "obsolete header folding";
			return -1;
		}
		if (req->nhdrs == HTTP_MAX_HEADERS) {
			*status = 431;
			*err = "too many headers";
			return -1;
		}
		if ((colon = strchr(line, ':')) == NULL || colon == line) {
			*err = "malformed header";
			return -1;
		}
		*colon = '\0';
		for (p = line; *p != '\0'; p++) {
			if (!is_tchar((unsigned char)*p)) {
				*err = "bad header name";
				return -1;
			}
		}
		v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		end = v + strlen(v);
		while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		for (p = v; *p != '\0'; p++) {
			if ((unsigned char)*p < ' ' && *p != '\t') {
				*err = "control character in header value";
				return -1;
			}
		}
		req->hdrs[req->nhdrs].name = line;
		req->hdrs[req->nhdrs].value = v;
		req->nhdrs++;
	}
	/* Framing (RFC 9112 section 6): reject anything ambiguous. */
	te = http_req_header(req, "Transfer-Encoding");
	for (i = 0; i < req->nhdrs; i++) {
		if (strcasecmp(req->hdrs[i].name, "Content-Length") != 0)
			continue;
		cl = req->hdrs[i].value;
		if (*cl == '\0' || strspn(cl, "0123456789") != strlen(cl) || strlen(cl) > 18) {
			*err = "bad Content-Length";
			return -1;
		}
		n = strtoull(cl, NULL, 10);
		if (req->content_length != -1 && (unsigned long long)req->content_length != n) {
			*err = "conflicting Content-Length";
			return -1;
		}
		req->content_length = (int64_t)n;
	}
	if (te != NULL) {
		if (strcasecmp(te, "chunked") != 0) {
			*status = 501;
			*err = "unsupported Transfer-Encoding";
			return -1;
		}
		if (req->content_length != -1) {
			*err = "both Content-Length and Transfer-Encoding";
			return -1;
		}
		req->chunked = 1;
	}
	conn = http_req_header(req, "Connection");
	req->keepalive = req->minor >= 1 ? !has_token(conn, "close") : has_token(conn, "keep-alive");
	v = (char *)http_req_header(req, "Expect");
	req->expect_continue = v != NULL && strcasecmp(v, "100-continue") == 0;
	/* Path: percent-decoded, query kept raw for http_query_get. */
	q = strchr(req->target, '?');
	req->query = q != NULL ? q + 1 : NULL;
	req->path = http_pct_decode(req->target, q != NULL ? (size_t)(q - req->target) :
	    strlen(req->target), 0);
	if (req->path == NULL) {
		*err = "bad percent-encoding in path";
		return -1;
	}
	return 0;
}

enum { CK_SIZE, CK_DATA, CK_DATA_CRLF, CK_TRAILER, CK_DONE };

int
http_chunked_step(struct http_chunked *c, struct evbuffer *in, struct evbuffer *out,
    const char **err)
{
	char line[HTTP_MAX_LINE + 1], *end;
	struct evbuffer_ptr pos;
	size_t llen, n;
	unsigned long long v;

	for (;;) {
		switch (c->state) {
		case CK_DATA_CRLF: {
			char crlf[2];
			ev_ssize_t got = evbuffer_copyout(in, crlf, 2);

			if (got < 1)
				return 0;
			if (crlf[0] != '\r' || (got == 2 && crlf[1] != '\n')) {
				*err = "missing CRLF after chunk";
				return -1;
			}
			if (got < 2)
				return 0;
			evbuffer_drain(in, 2);
			c->state = CK_SIZE;
			break;
		}
		case CK_SIZE:
		case CK_TRAILER:
			pos = evbuffer_search_eol(in, NULL, &llen, EVBUFFER_EOL_CRLF_STRICT);
			if (pos.pos < 0) {
				if (evbuffer_get_length(in) > HTTP_MAX_LINE) {
					*err = "chunk line too long";
					return -1;
				}
				return 0;
			}
			if ((size_t)pos.pos > HTTP_MAX_LINE) {
				*err = "chunk line too long";
				return -1;
			}
			evbuffer_remove(in, line, (size_t)pos.pos);
			line[pos.pos] = '\0';
			evbuffer_drain(in, 2);
			if (c->state == CK_TRAILER) {
				if (pos.pos == 0) {
					c->state = CK_DONE;
					return 1;
				}
				break;	/* trailer fields are ignored */
			}
			if (!isxdigit((unsigned char)line[0])) {
				*err = "bad chunk size";
				return -1;
			}
			errno = 0;
			v = strtoull(line, &end, 16);
			if (errno != 0 || end - line > 15 || (*end != '\0' && *end != ';' &&
			    *end != ' ' && *end != '\t')) {
				*err = "bad chunk size";
				return -1;
			}
			c->left = v;
			c->state = v == 0 ? CK_TRAILER : CK_DATA;
			break;
		case CK_DATA:
			n = evbuffer_get_length(in);
			if (n == 0)
				return 0;
			if (n > c->left)
				n = (size_t)c->left;
			evbuffer_remove_buffer(in, out, n);
			c->left -= n;
			if (c->left == 0)
				c->state = CK_DATA_CRLF;
			break;
		case CK_DONE:
			return 1;
		}
	}
}

static void
hc_free(struct http_conn *hc)
{
	const struct http_handler *h = hc->hc_handler;

	hc->hc_handler = NULL;
	if (h != NULL && h->abort != NULL)
		h->abort(hc);
	bufferevent_free(hc->hc_bev);
	http_req_clear(&hc->hc_req);
	evbuffer_free(hc->hc_body);
	free(hc);
}

/* Close once everything queued went out (or right away if nothing is). */
static void
hc_close_after_flush(struct http_conn *hc)
{
	hc->hc_state = HC_CLOSING;
	bufferevent_disable(hc->hc_bev, EV_READ);
	/* Never free here: callers still hold hc. The write callback frees. */
	bufferevent_trigger(hc->hc_bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS |
	    BEV_TRIG_DEFER_CALLBACKS);
}

static void
hc_head(struct http_conn *hc, int status, const char *ctype, int64_t len, int close)
{
	struct evbuffer *out = bufferevent_get_output(hc->hc_bev);

	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, http_status_text(status));
	if (ctype != NULL)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
	if (len >= 0)
		evbuffer_add_printf(out, "Content-Length: %" PRId64 "\r\n", len);
	else if (len == -1)
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
	/* -2: no body and no framing (204). */
	if (close)
		evbuffer_add_printf(out, "Connection: close\r\n");
	evbuffer_add(out, "\r\n", 2);
	hc->hc_resp_started = 1;
}

/* Must the connection close after this response? */
static int
hc_must_close(struct http_conn *hc)
{
	return !hc->hc_req.keepalive || hc->hc_peer_eof || !hc->hc_body_done;
}

/*
 * The response is complete: next request, or close. Handler state is
 * released later (hc_free or HC_NEXT), never here: the handler that
 * replied is still on the stack.
 */
static void
hc_done(struct http_conn *hc)
{
	hc->hc_resp_done = 1;
	if (hc_must_close(hc)) {
		hc_close_after_flush(hc);
		return;
	}
	hc->hc_state = HC_NEXT;
	bufferevent_trigger(hc->hc_bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS |
	    BEV_TRIG_DEFER_CALLBACKS);
}

/* Forget the finished request and its handler; ready for the next head. */
static void
hc_next(struct http_conn *hc)
{
	const struct http_handler *h = hc->hc_handler;

	hc->hc_handler = NULL;
	if (h != NULL && h->abort != NULL)
		h->abort(hc);
	hc->hc_ctx = NULL;
	http_req_clear(&hc->hc_req);
	hc->hc_have_req = 0;
	evbuffer_drain(hc->hc_body, evbuffer_get_length(hc->hc_body));
	hc->hc_resp_started = hc->hc_resp_chunked = hc->hc_resp_done = 0;
	hc->hc_body_done = 0;
	hc->hc_stop_body = 0;
	hc->hc_state = HC_HEAD;
}

static void
hc_error(struct http_conn *hc, int status, const char *msg)
{
	char body[512];
	int n;

	n = snprintf(body, sizeof(body), "{\"code\":%d,\"message\":\"%s\"}", status, msg);
	hc->hc_req.keepalive = 0;
	http_reply(hc, status, "application/json", body, (size_t)n);
}

void
http_reply(struct http_conn *hc, int status, const char *ctype, const void *body, size_t len)
{
	if (hc->hc_resp_started)
		return;
	if (status == 204)
		len = 0;
	hc_head(hc, status, status == 204 ? NULL : ctype, status == 204 ? -2 : (int64_t)len,
	    hc_must_close(hc));
	if (len > 0)
		evbuffer_add(bufferevent_get_output(hc->hc_bev), body, len);
	hc_done(hc);
}

void
http_reply_buf(struct http_conn *hc, int status, const char *ctype, struct evbuffer *buf)
{
	if (hc->hc_resp_started)
		return;
	hc_head(hc, status, ctype, (int64_t)evbuffer_get_length(buf), hc_must_close(hc));
	evbuffer_add_buffer(bufferevent_get_output(hc->hc_bev), buf);
	hc_done(hc);
}

void
http_reply_file(struct http_conn *hc, int status, const char *ctype, int fd, uint64_t len)
{
	if (hc->hc_resp_started) {
		close(fd);
		return;
	}
	hc_head(hc, status, ctype, (int64_t)len, hc_must_close(hc));
	if (len > 0)
		evbuffer_add_file(bufferevent_get_output(hc->hc_bev), fd, 0, (ev_off_t)len);
	else
		close(fd);
	hc_done(hc);
}

void
http_stream_start(struct http_conn *hc, int status, const char *ctype)
{
	if (hc->hc_resp_started)
		return;
	hc_head(hc, status, ctype, -1, hc_must_close(hc));
	hc->hc_resp_chunked = 1;
}

void
http_stream_write(struct http_conn *hc, const void *data, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(hc->hc_bev);

	if (!hc->hc_resp_chunked || hc->hc_resp_done || len == 0)
		return;
	evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, data, len);
	evbuffer_add(out, "\r\n", 2);
}

void
http_stream_end(struct http_conn *hc)
{
	if (!hc->hc_resp_chunked || hc->hc_resp_done)
		return;
	evbuffer_add(bufferevent_get_output(hc->hc_bev), "0\r\n\r\n", 5);
	hc_done(hc);
}

size_t
http_out_len(struct http_conn *hc)
{
	return evbuffer_get_length(bufferevent_get_output(hc->hc_bev));
}

int
http_responded(struct http_conn *hc)
{
	return hc->hc_resp_started;
}

void
http_set_handler(struct http_conn *hc, const struct http_handler *h, void *ctx)
{
	hc->hc_handler = h;
	hc->hc_ctx = ctx;
}

void *
http_ctx(struct http_conn *hc)
{
	return hc->hc_ctx;
}

const struct http_req *
http_request(struct http_conn *hc)
{
	return &hc->hc_req;
}

struct evbuffer *
http_body(struct http_conn *hc)
{
	return hc->hc_body;
}

/* Read the head; 1 when a request is ready, 0 for more input, -1 when closed. */
static int
hc_read_head(struct http_conn *hc, struct evbuffer *in)
{
	struct evbuffer_ptr pos;
	const char *err = NULL;
	char *head;
	size_t len;
	int status;

	/* Tolerate empty lines between requests (RFC 9112 2.2). */
	while (evbuffer_get_length(in) >= 2) {
		char crlf[2];

		evbuffer_copyout(in, crlf, 2);
		if (crlf[0] != '\r' || crlf[1] != '\n')
			break;
		evbuffer_drain(in, 2);
	}
	pos = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	if (pos.pos < 0) {
		if (evbuffer_get_length(in) > HTTP_MAX_HEAD) {
			hc->hc_body_done = 1;
			hc_error(hc, 431, "request head too large");
			return -1;
		}
		return 0;
	}
	len = (size_t)pos.pos + 4;
	if (len > HTTP_MAX_HEAD) {
		hc_error(hc, 431, "request head too large");
		return -1;
	}
	if ((head = malloc(len)) == NULL) {
		hc_error(hc, 500, "out of memory");
		return -1;
	}
	evbuffer_remove(in, head, len);
	if (http_parse_head(head, len, &hc->hc_req, &status, &err) == -1) {
		free(head);
		hc->hc_req.keepalive = 0;
		hc_error(hc, status, err);
		return -1;
	}
	free(head);
	hc->hc_have_req = 1;
	hc->hc_body_left = hc->hc_req.chunked ? -1 :
	    hc->hc_req.content_length > 0 ? hc->hc_req.content_length : 0;
	hc->hc_body_done = !hc->hc_req.chunked && hc->hc_body_left == 0;
	memset(&hc->hc_chunk, 0, sizeof(hc->hc_chunk));
	return 1;
}

/* Move body bytes to the handler (or the staging buffer). -1: stop. */
static int
hc_read_body(struct http_conn *hc, struct evbuffer *in)
{
	const char *err = NULL;
	size_t n;
	int r;

	if (hc->hc_req.chunked) {
		r = http_chunked_step(&hc->hc_chunk, in, hc->hc_body, &err);
		if (r == -1) {
			hc->hc_body_done = 1;	/* nothing more will be read */
			hc->hc_req.keepalive = 0;
			if (!hc->hc_resp_started)
				hc_error(hc, 400, err);
			else
				hc_close_after_flush(hc);
			return -1;
		}
		if (r == 1)
			hc->hc_body_done = 1;
	} else {
		n = evbuffer_get_length(in);
		if ((int64_t)n > hc->hc_body_left)
			n = (size_t)hc->hc_body_left;
		evbuffer_remove_buffer(in, hc->hc_body, n);
		hc->hc_body_left -= (int64_t)n;
		if (hc->hc_body_left == 0)
			hc->hc_body_done = 1;
	}
	if (hc->hc_handler != NULL && hc->hc_handler->body != NULL) {
		if (evbuffer_get_length(hc->hc_body) > 0 &&
		    hc->hc_handler->body(hc, hc->hc_body) == -1)
			return -1;
	} else if (evbuffer_get_length(hc->hc_body) > HTTP_MAX_BODY) {
		hc->hc_body_done = 0;
		hc_error(hc, 413, "request body too large");
		return -1;
	}
	return 0;
}

static void
hc_process(struct http_conn *hc)
{
	struct evbuffer *in = bufferevent_get_input(hc->hc_bev);
	int r;

	for (;;) {
		switch (hc->hc_state) {
		case HC_HEAD:
			if ((r = hc_read_head(hc, in)) <= 0)
				return;
			hc->hc_state = HC_BODY;
			if (hc->hc_req.expect_continue && !hc->hc_body_done)
				evbuffer_add_printf(bufferevent_get_output(hc->hc_bev),
				    "HTTP/1.1 100 Continue\r\n\r\n");
			hc->hc_route(hc, &hc->hc_req);
			/* The route may have replied (and closed or reset) already. */
			if (hc->hc_state != HC_BODY)
				return;
			break;
		case HC_BODY:
			if (!hc->hc_body_done && hc_read_body(hc, in) == -1)
				return;
			if (hc->hc_state != HC_BODY)
				return;
			if (!hc->hc_body_done)
				return;
			hc->hc_state = HC_HANDLER;
			if (hc->hc_handler != NULL && hc->hc_handler->end != NULL)
				hc->hc_handler->end(hc);
			else if (!hc->hc_resp_started)
				hc_error(hc, 500, "no handler");
			return;
		case HC_NEXT:
			hc_next(hc);
			break;
		case HC_HANDLER:
		case HC_CLOSING:
		case HC_LINGER:
			return;
		}
	}
}

static void
hc_read(struct bufferevent *bev, void *arg)
{
	struct http_conn *hc = arg;

	if (hc->hc_state == HC_LINGER) {
		evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
		return;
	}
	hc_process(hc);
}

static void
hc_write(struct bufferevent *bev, void *arg)
{
	struct http_conn *hc = arg;
	struct timeval tv = { HTTP_LINGER_S, 0 };

	if (hc->hc_state == HC_CLOSING) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) > 0)
			return;
		if (hc->hc_peer_eof) {
			hc_free(hc);
			return;
		}
		/*
		 * Lingering close: closing a socket with unread input resets
		 * the peer, which could drop the answer we just queued (an
		 * early 413/400 before the body was read, a head too large).
		 * Shut our side and discard input until the peer closes too,
		 * bounded in time.
		 */
		shutdown(bufferevent_getfd(bev), SHUT_WR);
		hc->hc_state = HC_LINGER;
		evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
		bufferevent_set_timeouts(bev, &tv, NULL);
		bufferevent_enable(bev, EV_READ);
		return;
	}
	if (hc->hc_handler != NULL && hc->hc_handler->drain != NULL)
		hc->hc_handler->drain(hc);
}

static void
hc_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn *hc = arg;

	if (what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT) || hc->hc_state == HC_LINGER) {
		hc_free(hc);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		hc->hc_peer_eof = 1;
		/* A response in progress still goes out; then the conn closes. */
		if ((hc->hc_state == HC_HANDLER || hc->hc_state == HC_BODY) &&
		    hc->hc_resp_started && !hc->hc_resp_done)
			return;
		if (hc->hc_state == HC_HANDLER && !hc->hc_resp_done)
			return;
		if (hc->hc_state == HC_CLOSING)
			return;
		hc_free(hc);
	}
}

int
http_conn_new(struct event_base *base, int fd, http_route_fn *route)
{
	struct http_conn *hc;

	if ((hc = calloc(1, sizeof(*hc))) == NULL) {
		close(fd);
		return -1;
	}
	hc->hc_route = route;
	hc->hc_req.content_length = -1;
	hc->hc_body = evbuffer_new();
	evutil_make_socket_nonblocking(fd);
	hc->hc_bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (hc->hc_bev == NULL || hc->hc_body == NULL) {
		if (hc->hc_bev == NULL)
			close(fd);
		else
			bufferevent_free(hc->hc_bev);
		if (hc->hc_body != NULL)
			evbuffer_free(hc->hc_body);
		free(hc);
		return -1;
	}
	bufferevent_setcb(hc->hc_bev, hc_read, hc_write, hc_event, hc);
	/* Read-ahead is bounded; the handler drains it. */
	bufferevent_setwatermark(hc->hc_bev, EV_READ, 0, 256 * 1024);
	bufferevent_setwatermark(hc->hc_bev, EV_WRITE, HTTP_OUT_HIGH / 2, 0);
	bufferevent_enable(hc->hc_bev, EV_READ | EV_WRITE);
	return 0;
}
