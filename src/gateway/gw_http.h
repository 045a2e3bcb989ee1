/*
 * Per-request policy for the proxy's HTTP path: the pure decision on one
 * parsed request head (no I/O, unit-tested), credential injection, and the
 * re-serialization of the head the upstream sees. The relay state machine
 * that calls these is gw_proxy_http.c.
 */
#ifndef AIRLOCK_GW_HTTP_H
#define AIRLOCK_GW_HTTP_H

#include <stddef.h>

#include <event2/buffer.h>

#include "http/http_parse.h"
#include "gateway/shared/gw_policy.h"

#define GW_NAME_MAX	256	/* a normalized DNS name and its NUL */

struct gw_http_verdict {
	const struct gw_rule	*rule;		/* the allowing rule (also set when a later check fails) */
	const char		*reason;	/* static text; NULL when allowed */
	int			 status;	/* answer to the guest when denied */
	char			 host[GW_NAME_MAX];	/* normalized Host, port stripped */
	char			*path;		/* decoded path for rules and the audit log (malloc'd) */
	const char		*credential;	/* credential injected, or refused (name only) */
	char			*headers_set;	/* policy.headers names set, "A,B" (malloc'd), or NULL */
	int			 websocket;	/* a WebSocket upgrade request */
};

/*
 * Decide on request head h arriving on a connection to port (80: plain
 * HTTP, 443: TLS) that is bound to the name bound (the SNI, or the Host of
 * the connection's first plain-HTTP request; NULL before that). In order:
 * CONNECT refused; Host and an absolute-form authority must agree and name
 * bound; the Host must be allowed by a rule for port; method and path
 * must pass the rule; an Upgrade other than WebSocket is dropped from the
 * head; then credential placeholders are replaced in h (see gw_http.c) and
 * the policy's header sets for the host are put in h (policy.headers).
 * Returns 0 to forward h, -1 to refuse with v->status and v->reason.
 * Free v with gw_http_verdict_clear.
 */
int gw_http_check(const struct gw_policy *, const char *bound, int tls, int port,
    struct http_head *h, struct gw_http_verdict *v);
void gw_http_verdict_clear(struct gw_http_verdict *);
/* Zero and free a head that may hold an injected credential. */
void gw_http_head_wipe(struct http_head *);

/*
 * First-bytes test: 1 when buf starts with a complete HTTP/1.x request
 * line, 0 when it cannot be one, -1 when it could still become one.
 */
int gw_http_sniff(const char *buf, size_t len);

/* The request head as the upstream gets it. */
void gw_http_head_write(struct evbuffer *, const struct http_head *);
/* A short complete response for a refused request; the connection then closes. */
void gw_http_error_write(struct evbuffer *, int status, const char *reason);

#endif
