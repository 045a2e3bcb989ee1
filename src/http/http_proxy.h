/*
 * One client request piped to an upstream request and its answer piped
 * back, as they come: the request body chunk by chunk to the upstream, the
 * answer to the client (its length kept when the upstream gave one,
 * chunked otherwise, SSE included), back-pressure both ways (nothing held
 * beyond HTTP_OUTPUT_HIGH_WATER), a 101 turned into a raw tunnel. The one
 * proxy of the tree: the API front to the worker (src/front/), airlockd's
 * E2B front to a guest's envd or port (src/e2b/e2b_envd.c).
 *
 * The upstream is the caller's: an http_client request, an envd request
 * over the agent channel, started by the caller, who forwards its
 * callbacks to http_proxy_up_*() and gives the proxy the means to drive it
 * (struct http_proxy_upstream). An upstream may come later than the
 * request (a sandbox being resumed): until it is attached the body is held
 * and reading it paused.
 */
#ifndef AIRLOCK_HTTP_PROXY_H
#define AIRLOCK_HTTP_PROXY_H

#include <stddef.h>

struct http_head;
struct http_proxy;
struct http_req;

/* How the proxy drives an upstream request (its first argument is the caller's up). */
struct http_proxy_upstream {
	void	(*write)(void *up, const void *data, size_t n);
	void	(*end)(void *up);		/* the request body ended */
	size_t	(*pending)(const void *up);	/* bytes queued toward it */
	void	(*pause)(void *up, int paused);	/* stop/start reading its answer */
	void	(*cancel)(void *up);		/* no callbacks after this */
};

struct http_proxy_hooks {
	int		 pass_headers;	/* the upstream's end-to-end answer headers go to the client */
	const char	*default_ctype;	/* Content-Type when the upstream sent none (NULL: none) */
	/* Nothing came back (error: why): the caller answers the client now. */
	void		(*no_answer)(struct http_req *req, const char *error, void *arg);
	/* The answer was cut midway (error: why); the client sees it cut. May be NULL. */
	void		(*cut)(const char *error, void *arg);
	/* Last, once: the proxy is over; the caller drops what it held for it. */
	void		(*ended)(void *arg);
	void		*arg;
};

/*
 * Take req over: its body is read from now on (held until an upstream is
 * attached). The proxy holds a reference to req.
 */
struct http_proxy *http_proxy_new(struct http_req *req, const struct http_proxy_hooks *hooks);
/* The upstream (started by the caller), fed what was held, then as it comes. */
void http_proxy_attach(struct http_proxy *p, const struct http_proxy_upstream *ops, void *up);
/*
 * No upstream will come: the caller has answered req (or it is gone). The
 * proxy ends once the body side is done.
 */
void http_proxy_abandon(struct http_proxy *p);
/* The client left before an upstream was attached (the caller need not start one). */
int http_proxy_client_gone(const struct http_proxy *p);

/* The upstream's events, forwarded by the caller. */
void http_proxy_up_head(struct http_proxy *p, int status, const char *ctype,
    const struct http_head *h);
void http_proxy_up_data(struct http_proxy *p, const char *data, size_t n);
void http_proxy_up_done(struct http_proxy *p, const char *error);
void http_proxy_up_drained(struct http_proxy *p);

/*
 * Headers about one hop (RFC 9110 §7.6.1) and the framing a server writes
 * itself (Content-Length): never passed on by a proxy.
 */
int http_hop_header(const char *name);

#endif
