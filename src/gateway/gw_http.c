/*
 * The request checks of the proxy (DESIGN §6: Host == SNI on every request,
 * Host allowed, method/path rules, CONNECT refused) and credential
 * injection. Everything here is a pure function of the policy and the
 * parsed head, so the decisions are unit-tested without sockets.
 *
 * Credential placeholders: a header value containing "airlock:NAME" where
 * NAME is a credential of the policy. Its value is put in only when the
 * header is the credential's header, the request's (already checked) Host
 * matches one of its hosts, and the connection is TLS; the whole header
 * value becomes the credential's format with {value} replaced. A known
 * placeholder anywhere else in the head is an exfiltration attempt and
 * refuses the request. Values never leave this file except in the head.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>

#include "common/util.h"
#include "gateway/gw_http.h"
#include "http/http_parse.h"

static int
deny(struct gw_http_verdict *v, int status, const char *reason)
{
	v->status = status;
	v->reason = reason;
	return -1;
}

/*
 * Split "name[:port]" (an authority without userinfo) and normalize the
 * name into out. IPv6 literals are refused: islands have no IPv6.
 */
static int
authority_host(const char *auth, size_t len, char *out, size_t outlen)
{
	char buf[GW_NAME_MAX + 8];
	const char *colon;
	size_t i, n = len;

	if (len == 0 || len >= sizeof(buf) || memchr(auth, '@', len) != NULL ||
	    auth[0] == '[')
		return -1;
	if ((colon = memchr(auth, ':', len)) != NULL) {
		n = (size_t)(colon - auth);
		if (colon + 1 == auth + len || auth + len - colon - 1 > 5)
			return -1;
		for (i = 1; colon + i < auth + len; i++)
			if (!isdigit((unsigned char)colon[i]))
				return -1;
	}
	memcpy(buf, auth, n);
	buf[n] = '\0';
	return gw_name_normalize(buf, out, outlen);
}

/* For absolute-form targets: the authority span and where the path starts. */
static int
absolute_target(const char *target, int *is_abs, const char **auth, size_t *authlen,
    const char **rest, int *https)
{
	size_t skip;

	*is_abs = 0;
	if (strncasecmp(target, "http://", 7) == 0) {
		skip = 7;
		*https = 0;
	} else if (strncasecmp(target, "https://", 8) == 0) {
		skip = 8;
		*https = 1;
	} else
		return 0;
	*is_abs = 1;
	*auth = target + skip;
	*authlen = strcspn(*auth, "/?#");
	*rest = *auth + *authlen;
	return 0;
}

/*
 * A "." or ".." segment (also behind "\\", which some servers treat as
 * "/", or before ";", where Java servers cut path parameters off).
 */
static int
has_dot_segment(const char *path)
{
	const char *p = path;

	while (*p != '\0') {
		size_t n = strcspn(p, "/\\"), m = strcspn(p, "/\\;");
		if ((m == 1 && p[0] == '.') || (m == 2 && p[0] == '.' && p[1] == '.'))
			return 1;
		p += n;
		if (*p != '\0')
			p++;
	}
	return 0;
}

/* Decoded path of an origin-form rest ("/a/b?q"): '+' stays literal. */
static char *
decode_path(const char *rest)
{
	char *path, *query, *tmp;

	if (*rest == '\0' || *rest == '?')
		xasprintf(&tmp, "/%s", rest);
	else
		tmp = xstrdup(rest);
	if (http_split_target(tmp, &path, &query) == -1) {
		free(tmp);
		return NULL;
	}
	free(tmp);
	free(query);
	return path;
}

static void
remove_header(struct http_head *h, const char *name)
{
	size_t i = 0;

	while (i < h->nheaders) {
		if (strcasecmp(h->headers[i].name, name) != 0) {
			i++;
			continue;
		}
		free(h->headers[i].name);
		free(h->headers[i].value);
		memmove(&h->headers[i], &h->headers[i + 1],
		    (h->nheaders - i - 1) * sizeof(*h->headers));
		h->nheaders--;
	}
}

/* The credential named by the first known placeholder in s, and how many there are. */
static const struct gw_credential *
find_placeholder(const struct gw_policy *p, const char *s, int *count)
{
	const struct gw_credential *first = NULL, *c;
	const size_t plen = strlen(GW_PLACEHOLDER_PREFIX);
	char name[128];
	const char *q = s;
	size_t n;

	*count = 0;
	while ((q = strstr(q, GW_PLACEHOLDER_PREFIX)) != NULL) {
		q += plen;
		for (n = 0; n < sizeof(name) - 1 && (isalnum((unsigned char)q[n]) ||
		    q[n] == '_' || q[n] == '-' || q[n] == '.'); n++)
			name[n] = q[n];
		name[n] = '\0';
		if (n > 0 && (c = gw_policy_credential(p, name)) != NULL) {
			if (first == NULL)
				first = c;
			(*count)++;
		}
	}
	return first;
}

static int
cred_host_ok(const struct gw_credential *c, const char *host)
{
	for (size_t i = 0; i < c->nhosts; i++)
		if (gw_host_match(c->hosts[i], host))
			return 1;
	return 0;
}

/* format with every "{value}" replaced; NULL if the result is no valid header value. */
static char *
cred_render(const struct gw_credential *c)
{
	const char *fmt = c->format != NULL ? c->format : "{value}", *q;
	size_t vlen = strlen(c->value), n = 0, cap = strlen(fmt) + 1;
	char *out;

	for (q = fmt; (q = strstr(q, "{value}")) != NULL; q += 7)
		cap += vlen;
	out = xmalloc(cap);
	for (q = fmt; *q != '\0';) {
		if (strncmp(q, "{value}", 7) == 0) {
			memcpy(out + n, c->value, vlen);
			n += vlen;
			q += 7;
		} else
			out[n++] = *q++;
	}
	out[n] = '\0';
	for (q = out; *q != '\0'; q++)
		if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f) {
			explicit_bzero(out, n);
			free(out);
			return NULL;
		}
	return out;
}

static int
inject(const struct gw_policy *p, int tls, struct http_head *h, struct gw_http_verdict *v)
{
	const struct gw_credential *c;
	char *nv;
	int count;

	if (p->ncreds == 0)
		return 0;
	if (find_placeholder(p, h->target, &count) != NULL) {
		v->credential = find_placeholder(p, h->target, &count)->name;
		return deny(v, 403, "credential placeholder in the request target");
	}
	for (size_t i = 0; i < h->nheaders; i++) {
		struct http_header *hd = &h->headers[i];

		if ((c = find_placeholder(p, hd->value, &count)) == NULL)
			continue;
		v->credential = c->name;
		if (count > 1)
			return deny(v, 403, "several credential placeholders in one header");
		if (strcasecmp(hd->name, c->header) != 0)
			return deny(v, 403, "credential placeholder in another header");
		if (!cred_host_ok(c, v->host))
			return deny(v, 403, "credential not bound to this host");
		if (!tls)
			return deny(v, 403, "credential over plain HTTP");
		if ((nv = cred_render(c)) == NULL)
			return deny(v, 500, "credential value is not a valid header value");
		free(hd->value);
		hd->value = nv;
	}
	return 0;
}

/*
 * The policy's header sets for the request's host (policy.headers): each
 * replaces a header of its name the guest sent, so the guest cannot
 * pre-empt or duplicate it. Applied last, after every check and the
 * credential placeholders, to the head as it goes upstream.
 */
static void
set_headers(const struct gw_policy *p, struct http_head *h, struct gw_http_verdict *v)
{
	const char *host = v->host;
	char *names;

	for (size_t i = 0; i < p->nhdrsets; i++) {
		const struct gw_hdrset *s = &p->hdrsets[i];

		if (!gw_host_match(s->host, host))
			continue;
		for (size_t k = 0; k < s->n; k++) {
			remove_header(h, s->names[k]);
			h->headers = xreallocarray(h->headers, h->nheaders + 1, sizeof(*h->headers));
			h->headers[h->nheaders].name = xstrdup(s->names[k]);
			h->headers[h->nheaders++].value = xstrdup(s->values[k]);
			/* The audit line names what was set, never the value. */
			xasprintf(&names, "%s%s%s", v->headers_set != NULL ? v->headers_set : "",
			    v->headers_set != NULL ? "," : "", s->names[k]);
			free(v->headers_set);
			v->headers_set = names;
		}
	}
}

int
gw_http_check(const struct gw_policy *p, const char *bound, int tls, int port,
    struct http_head *h, struct gw_http_verdict *v)
{
	const char *hosthdr, *auth = NULL, *rest, *upg;
	char ahost[GW_NAME_MAX];
	size_t authlen = 0, nupg = 0;
	int is_abs, https;

	memset(v, 0, sizeof(*v));
	if (strcmp(h->method, "CONNECT") == 0)
		return deny(v, 403, "CONNECT refused");
	hosthdr = http_head_get(h, "host");
	absolute_target(h->target, &is_abs, &auth, &authlen, &rest, &https);
	if (is_abs) {
		if (https != tls)
			return deny(v, 400, "scheme does not match the connection");
		if (authority_host(auth, authlen, ahost, sizeof(ahost)) == -1)
			return deny(v, 400, "invalid authority in request target");
	} else if (h->target[0] == '/')
		rest = h->target;
	else if (strcmp(h->target, "*") == 0 && strcmp(h->method, "OPTIONS") == 0)
		rest = NULL;
	else
		return deny(v, 400, "invalid request target");
	if (hosthdr != NULL) {
		if (authority_host(hosthdr, strlen(hosthdr), v->host, sizeof(v->host)) == -1)
			return deny(v, 400, "invalid Host");
		if (is_abs && strcmp(v->host, ahost) != 0)
			return deny(v, 403, "Host differs from the request target");
	} else if (is_abs)
		memcpy(v->host, ahost, sizeof(v->host));
	else
		return deny(v, 400, "missing Host");
	if (bound != NULL && strcmp(v->host, bound) != 0)
		return deny(v, 403, tls ? "Host differs from SNI" :
		    "Host differs from the connection's first request");
	if ((v->rule = gw_policy_http_rule(p, v->host, port)) == NULL)
		return deny(v, 403, "host not allowed");

	if (rest == NULL)
		v->path = xstrdup("*");
	else if ((v->path = decode_path(rest)) == NULL)
		return deny(v, 400, "invalid path encoding");
	/* Servers resolve dot segments after decoding: "/v1/%2e%2e/admin" leaves /v1/. */
	if (v->rule->npaths > 0 && has_dot_segment(v->path))
		return deny(v, 403, "dot segment in path");
	if (!gw_rule_request_allowed(v->rule, h->method, v->path))
		return deny(v, 403, "method or path not allowed");
	/*
	 * Some frameworks (IIS URL rewrite, Symfony) route by these headers
	 * instead of the request line: a path rule would check one path while
	 * the upstream serves another. Where paths are restricted they go.
	 */
	if (v->rule->npaths > 0) {
		remove_header(h, "x-original-url");
		remove_header(h, "x-rewrite-url");
	}

	/*
	 * Only WebSocket may switch protocols: an h2c upgrade would carry
	 * requests the gateway no longer sees, so the offer is dropped. So
	 * is a second Upgrade header (the upstream reads "websocket, h2c")
	 * and an upgrade request with a body: the relay splices after 101
	 * and does not track that body, so an upstream answering without
	 * 101 would read as body what the gateway checks as the next request.
	 */
	upg = http_head_get(h, "upgrade");
	for (size_t i = 0; i < h->nheaders; i++)
		if (strcasecmp(h->headers[i].name, "upgrade") == 0)
			nupg++;
	if (h->upgrade && nupg == 1 && strcasecmp(upg, "websocket") == 0 && !h->chunked &&
	    h->content_length <= 0)
		v->websocket = 1;
	else if (upg != NULL) {
		remove_header(h, "upgrade");
		remove_header(h, "http2-settings");
		h->upgrade = 0;
	}
	if (inject(p, tls, h, v) == -1)
		return -1;
	set_headers(p, h, v);
	return 0;
}

void
gw_http_verdict_clear(struct gw_http_verdict *v)
{
	free(v->path);
	free(v->headers_set);
	memset(v, 0, sizeof(*v));
}

void
gw_http_head_write(struct evbuffer *out, const struct http_head *h)
{
	evbuffer_add_printf(out, "%s %s HTTP/1.%d\r\n", h->method, h->target, h->minor);
	for (size_t i = 0; i < h->nheaders; i++)
		evbuffer_add_printf(out, "%s: %s\r\n", h->headers[i].name, h->headers[i].value);
	evbuffer_add(out, "\r\n", 2);
}

void
gw_http_error_write(struct evbuffer *out, int status, const char *reason)
{
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\nX-Airlock-Deny: 1\r\n\r\n%s\n",
	    status, http_status_text(status), strlen(reason) + 1, reason);
}

void
gw_http_head_wipe(struct http_head *h)
{
	for (size_t i = 0; i < h->nheaders; i++)
		explicit_bzero(h->headers[i].value, strlen(h->headers[i].value));
	http_head_free(h);
}

int
gw_http_sniff(const char *buf, size_t len)
{
	static const char version[] = "HTTP/1.";
	size_t i = 0, m, t;

	/* method SP */
	for (m = 0; i < len && http_tchar((unsigned char)buf[i]); i++, m++)
		if (m > 32)
			return 0;
	if (i == len)
		return -1;
	if (m == 0 || buf[i++] != ' ')
		return 0;
	/* request-target SP */
	for (t = 0; i < len && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f;
	    i++, t++)
		if (t > HTTP_TARGET_MAX)
			return 0;
	if (i == len)
		return -1;
	if (t == 0 || buf[i++] != ' ')
		return 0;
	/* HTTP/1.x CRLF */
	for (t = 0; t < sizeof(version) - 1; t++, i++) {
		if (i == len)
			return -1;
		if (buf[i] != version[t])
			return 0;
	}
	if (i == len)
		return -1;
	if (buf[i] != '0' && buf[i] != '1')
		return 0;
	if (++i == len)
		return -1;
	if (buf[i] != '\r')
		return 0;
	if (++i == len)
		return -1;
	return buf[i] == '\n' ? 1 : 0;
}
