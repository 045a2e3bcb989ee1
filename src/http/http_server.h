/*
 * HTTP/1.1 server on libevent bufferevents, with the strict parser of
 * http/http_parse: airlockd's API and the guest agent's envd endpoints
 * alike (the agent links it statically: nothing here needs OpenSSL, TLS is
 * http_tls.c's, host-only). Request bodies stream to the handler (uploads have no
 * size limit beyond disk) or are buffered up to a limit (JSON); responses are
 * fixed-length, chunked, or server-sent events with heartbeats. One request
 * at a time per connection (no pipelining in parallel), keep-alive.
 *
 * Connection limits (docs/security.md "Connection limits"): deadlines that
 * bytes do not restart (a whole head within HTTP_HEAD_TIMEOUT_S, a body at
 * HTTP_BODY_MIN_RATE), a cap per client address, and a total cap reached
 * only by connections with a request in progress: before that, the
 * connections idle or without a complete head the longest are shed.
 */
#ifndef AIRLOCK_HTTP_SERVER_H
#define AIRLOCK_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>
#include <jansson.h>

#include "http/http_parse.h"

#define HTTP_JSON_BODY_MAX		(1024 * 1024)
#define HTTP_WRITE_TIMEOUT_S		120	/* no output progress (restarts on each write) */

/*
 * Connection limits: the defaults of struct http_limits. Why each number is
 * what it is: docs/security.md "Connection limits".
 */
#define HTTP_CONNS_MAX			4096	/* all connections of a server */
#define HTTP_CONNS_PER_ADDR		256	/* per IPv4 address or IPv6 /64 */
#define HTTP_SHED_RESERVE_DIV		16	/* shedding starts 1/16 below the cap */
#define HTTP_SHED_MIN_AGE_MS		100	/* a new connection has this long to send a head */
#define HTTP_LISTEN_BACKLOG		1024	/* absorbs bursts of connects between accepts */
#define HTTP_HEAD_TIMEOUT_S		10	/* whole head, from accept or its first byte */
#define HTTP_IDLE_TIMEOUT_S		60	/* keep-alive between requests */
#define HTTP_IDLE_PRESSURE_S		5	/* ... while half the cap or more is open */
#define HTTP_BODY_GRACE_S		20	/* a body's first allowance */
#define HTTP_BODY_MIN_RATE		1024	/* then bytes/s on average ... */
#define HTTP_BODY_CREDIT_S		60	/* ... banking at most this far ahead */
#define HTTP_LIMIT_LOG_INTERVAL_S	60	/* refusals and sheds: one line per interval */
#define HTTP_SSE_HEARTBEAT_S		15
#define HTTP_LINGER_S			5	/* discard input after an early answer, at most */
#define HTTP_OUTPUT_HIGH_WATER		(1024 * 1024)	/* stop producers above this */
/* Unread input per connection (pipelined requests, a paused body); > HTTP_HEAD_MAX. */
#define HTTP_INPUT_MAX			(64 * 1024)

struct http_server;
struct bufferevent;
struct http_req;

/* Body handling chosen by the router once the head is known. */
enum http_body_mode {
	HTTP_BODY_BUFFER,	/* collect up to a limit; handler runs at the end */
	HTTP_BODY_STREAM,	/* on_body per piece, on_end at the end */
};

typedef void (*http_handler_cb)(struct http_req *req, void *arg);
typedef void (*http_body_cb)(struct http_req *req, const char *data, size_t n, void *arg);
typedef void (*http_event_cb)(struct http_req *req, void *arg);

/*
 * Called for every request head. The router looks at the method and path
 * and either answers at once (http_reply_*) or sets a handler with
 * http_req_buffer() or http_req_stream().
 */
typedef void (*http_router_cb)(struct http_req *req, void *arg);

/*
 * A server's limits (milliseconds, bytes, connections). Every field is
 * bounded in http_server_set_limits; tests shorten the times.
 */
struct http_limits {
	unsigned	conns_max;		/* refused (503) only when none can be shed */
	unsigned	conns_per_addr;		/* 0: no per-address cap (behind a proxy) */
	unsigned	shed_min_age_ms;	/* never shed a connection younger than this */
	unsigned	head_ms;
	unsigned	idle_ms;
	unsigned	idle_pressure_ms;
	unsigned	body_grace_ms;
	unsigned	body_min_rate;		/* bytes per second, >= 1 */
	unsigned	body_credit_ms;
	unsigned	write_ms;		/* no output progress this long: close (0: never) */
};

void http_limits_default(struct http_limits *lim);

struct http_server *http_server_new(struct event_base *base, http_router_cb router, void *arg);
/* Replace the limits (before listening); out-of-range values are clamped. */
void http_server_set_limits(struct http_server *srv, const struct http_limits *lim);
/* Listen on host:port (port 0 picks one; http_server_port tells). */
int http_server_listen(struct http_server *srv, const char *host, int port, char **cause);
/*
 * The two halves of that, for a listening socket made by one process and
 * served by another (airlockd's privileged part binds, the unprivileged
 * API front serves): a bound, listening, close-on-exec TCP socket (-1 and
 * a cause), and serving a listening socket (TCP or unix; owned from now on).
 */
int http_listen_socket(const char *host, int port, char **cause);
/* TCP_NODELAY on an IPv4/6 stream socket (a no-op for other families). */
void http_tcp_nodelay(int fd, int family);
/*
 * TCP_NODELAY on every connection accepted from now on: for hops inside a
 * cluster (replica to worker, LB to replica), where a request's second
 * write waiting for a delayed ACK costs 40 ms each time. Not for clients'
 * long output streams, which Nagle coalesces into fewer segments.
 */
void http_server_set_nodelay(struct http_server *srv);
int http_server_listen_fd(struct http_server *srv, int fd, char **cause);
/* Accept only unix-socket peers of this uid (SO_PEERCRED); others are closed and logged. */
void http_server_set_peer_uid(struct http_server *srv, uid_t uid);
int http_server_port(const struct http_server *srv);
/*
 * How an accepted socket becomes a bufferevent (default: a plain socket one).
 * NULL refuses the connection; the server then closes fd. http_tls.h
 * provides the TLS transport.
 */
typedef struct bufferevent *(*http_transport_fn)(struct event_base *base, evutil_socket_t fd,
    void *arg);
void http_server_set_transport(struct http_server *srv, http_transport_fn fn, void *arg);
/*
 * Serve a socket that is already connected (the guest agent's channel
 * streams are socketpair ends): owned from now on, closed on failure. peer
 * names it in logs. No per-address accounting (it has no IP peer).
 */
int http_server_adopt(struct http_server *srv, evutil_socket_t fd, const char *peer);
/*
 * How protocol errors the server answers itself (400/408/413/431/...) are
 * shaped: a JSON body for status, a short code ("bad_request") and a
 * message. Default: the API's {"error":{"code":...,"message":...}}.
 */
typedef json_t *(*http_error_fn)(int status, const char *code, const char *message);
void http_server_set_error_body(struct http_server *srv, http_error_fn fn);
/* Stop accepting, close every connection (their on_close callbacks run), free. */
void http_server_free(struct http_server *srv);

/* Request accessors. */
const char *http_req_method(const struct http_req *req);
const char *http_req_path(const struct http_req *req);	/* percent-decoded */
/* Raw; parse it with http_query_parse, which refuses what it cannot decode. */
const char *http_req_query(const struct http_req *req);
const char *http_req_header(const struct http_req *req, const char *name);
const struct http_head *http_req_head(const struct http_req *req);
const char *http_req_peer(const struct http_req *req);
/* The buffered body (NUL-terminated) and its length. */
const char *http_req_body(const struct http_req *req, size_t *len);
void *http_req_data(const struct http_req *req);
void http_req_set_data(struct http_req *req, void *data);

void http_req_buffer(struct http_req *req, size_t max, http_handler_cb done, void *arg);
void http_req_stream(struct http_req *req, uint64_t max, http_body_cb on_body,
    http_handler_cb on_end, void *arg);
/*
 * The request ended before its handler finished it: the client went away
 * (SSE, long exec), the server is shutting down, or the body was malformed
 * or over the limit (the server has answered 400/413). Runs at most once;
 * the handler drops its references here.
 */
void http_req_on_close(struct http_req *req, http_event_cb cb, void *arg);
/*
 * Runs once, when req is freed: its response ended (or its connection
 * closed) and no reference remains. The place to free a handler's state
 * that lives exactly as long as its request. The server holds a reference
 * while it runs any of the request's callbacks, so this never runs inside
 * one; a handler replying from elsewhere (a timer, a thread's completion)
 * holds its own reference across the reply if it uses its state after.
 */
void http_req_on_free(struct http_req *req, http_event_cb cb, void *arg);
/* Output fell below the high water mark again (streamed downloads). */
void http_req_on_drain(struct http_req *req, http_event_cb cb, void *arg);
/* Pause/resume reading the request body (back-pressure toward the client). */
void http_req_pause_body(struct http_req *req, int paused);

/*
 * Keep req alive across asynchronous work. Every reference is dropped with
 * http_req_unref(); the request is freed when the response ended (or the
 * connection closed) and no references remain.
 */
void http_req_ref(struct http_req *req);
void http_req_unref(struct http_req *req);
int http_req_closed(const struct http_req *req);
/* A response was started or sent (a second one would be dropped). */
int http_req_replied(const struct http_req *req);

/*
 * Responses. Headers added before the reply starts. A request is answered
 * once: http_reply* after the first reply started is a handler bug, logged
 * once and dropped (never a second response on the wire).
 */
void http_req_add_header(struct http_req *req, const char *name, const char *value);
void http_reply(struct http_req *req, int status, const char *content_type,
    const void *body, size_t len);
/* len bytes of fd from offset 0, sent by the event loop as the client reads; fd is owned. */
void http_reply_file(struct http_req *req, int status, const char *content_type, int fd,
    uint64_t len);
/* Takes a reference to json (steals it). */
void http_reply_json(struct http_req *req, int status, json_t *json);
/* The API's one error shape: {"error":{"code":code,"message":message}}. */
void http_reply_error(struct http_req *req, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/*
 * 101 Switching Protocols (WebSocket through a proxy): the handler adds
 * Connection/Upgrade headers first and set a stream handler with
 * http_req_stream. From then on every byte the client sends goes to its
 * on_body, http_reply_chunk writes raw bytes, and http_reply_end or
 * http_reply_abort closes the connection. A request that had a body
 * cannot switch (the connection just closes after this answer).
 */
void http_reply_upgrade(struct http_req *req);
/* Streaming responses: chunked transfer encoding. */
void http_reply_start(struct http_req *req, int status, const char *content_type);
/*
 * A streaming response of a known length (a proxy passing a fixed-length
 * answer on): exactly len bytes follow with http_reply_chunk, unframed;
 * http_reply_end after the last (http_reply_abort if they never come).
 */
void http_reply_start_length(struct http_req *req, int status, const char *content_type,
    uint64_t len);
void http_reply_chunk(struct http_req *req, const void *data, size_t len);
void http_reply_end(struct http_req *req);
/*
 * End a streaming response that failed midway: no terminating chunk, and
 * the connection closes, so the client sees a cut answer, not a short one.
 */
void http_reply_abort(struct http_req *req);
/* Bytes queued for the client and not yet written. */
size_t http_req_output_pending(const struct http_req *req);
/* Server-sent events on top of a streaming response; heartbeats keep proxies open. */
void http_sse_start(struct http_req *req);
void http_sse_event(struct http_req *req, const char *event, json_t *data);

#endif
