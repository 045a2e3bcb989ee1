/* HTTP/1.1 server: connection and request lifecycles on bufferevents. */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "http/http_server.h"
#include "common/log.h"
#include "common/ref.h"
#include "common/util.h"

struct http_rheader {
	char				*name, *value;
	TAILQ_ENTRY(http_rheader)	 entry;
};
TAILQ_HEAD(http_rheaders, http_rheader);

enum http_resp_state { RESP_NONE, RESP_STREAMING, RESP_ENDED };

struct http_conn;

struct http_req {
	struct http_conn	*conn;		/* NULL once detached */
	struct http_head	 head;
	char			*path, *query;
	char			 peer[64];
	/*
	 * common/ref.h: the connection's link is the owner's reference (dead
	 * once detached); handlers (http_req_ref) and frames in callbacks hold
	 * the others.
	 */
	struct ref		 ref;
	int			 closed;	/* ended before the handler finished */
	int			 routed;	/* router chose a body mode or replied */
	int			 keep_alive;

	enum http_body_mode	 mode;
	struct http_body	 dec;
	int			 body_done;
	size_t			 body_max;
	struct evbuffer		*body;
	char			*body_flat;
	http_handler_cb		 done_cb;
	http_body_cb		 body_cb;
	void			*cb_arg;
	http_event_cb		 close_cb, drain_cb, free_cb;
	void			*close_arg, *drain_arg, *free_arg;
	void			*data;

	struct http_rheaders	 rheaders;
	enum http_resp_state	 resp;
	int			 chunked;	/* response uses chunked encoding */
	int			 status;
	int			 reply_bug;	/* a second reply was logged */
	int			 tunnel;	/* answered 101: raw bytes both ways */
	struct event		*heartbeat;
};

/*
 * Where a connection is, for its deadline and for shedding. HEAD and IDLE
 * have no request in progress: they are on the shed lists.
 */
enum conn_phase {
	CONN_HEAD,	/* no complete head: since accept, or the next request's first byte */
	CONN_IDLE,	/* keep-alive: no byte of the next request yet */
	CONN_BODY,	/* receiving a request body */
	CONN_BUSY,	/* handler or response in progress (or closing): no read deadline */
	CONN_LINGER,	/* answered early: our side shut, unread input discarded until EOF */
};

struct http_addr;

struct http_conn {
	struct http_server	*srv;
	struct bufferevent	*bev;
	struct http_req		*req;		/* the request being served */
	char			 peer[64];
	int			 closing;	/* close once output is flushed */
	int			 linger;		/* ... then linger: the client may still be sending */
	int			 dispatching;	/* inside conn_process: do not re-enter */
	struct ref		 ref;		/* common/ref.h: conn_process holds one */
	TAILQ_ENTRY(http_conn)	 entry;

	/* Connection accounting: one timer for the phase's deadline. */
	struct http_addr	*addr;		/* NULL: not an IP peer, no per-address cap */
	struct event		*timer;
	enum conn_phase		 phase;
	int			 sheddable;	/* on srv->idle and addr->idle */
	uint64_t		 since_ms;	/* without a request since (accept, response end) */
	uint64_t		 head_t0_ms;	/* the head deadline counts from here */
	uint64_t		 body_deadline_ms;
	uint64_t		 body_frac;	/* bytes * 1000 not yet turned into credit */
	uint64_t		 paused_at_ms;	/* the handler paused the body (0: not) */
	TAILQ_ENTRY(http_conn)	 idle_entry;	/* srv->idle, oldest first */
	TAILQ_ENTRY(http_conn)	 addr_entry;	/* addr->idle, oldest first */
};
TAILQ_HEAD(http_conns, http_conn);

/* One client address: an IPv4 address or an IPv6 /64 (what one host gets). */
struct http_addr_key {
	uint8_t		family;		/* 4 or 6 */
	uint8_t		bytes[8];
};

struct http_addr {
	struct http_addr_key	 key;
	char			 name[INET6_ADDRSTRLEN + 4];
	unsigned		 nconns;	/* the entry lives while this is > 0 */
	unsigned		 refused;	/* since the last log line */
	uint64_t		 logged_ms;
	struct http_conns	 idle;		/* this address's sheddable ones */
	LIST_ENTRY(http_addr)	 entry;
};

/* Distinct addresses are at most conns_max: chains stay short. */
#define HTTP_ADDR_BUCKETS	1024

struct http_listener {
	struct evconnlistener		*lev;
	int				 port;
	TAILQ_ENTRY(http_listener)	 entry;
};

struct http_server {
	struct event_base		*base;
	http_router_cb			 router;
	void				*arg;
	struct http_conns		 conns;
	size_t				 nconns;
	TAILQ_HEAD(, http_listener)	 listeners;
	int				 accept_paused;	/* out of fds, nothing to shed */
	int				 nodelay;	/* TCP_NODELAY on accepted connections */
	http_transport_fn		 transport;	/* NULL: plain sockets */
	void				*transport_arg;
	http_error_fn			 error_body;
	int				 peer_uid_set;	/* unix peers: only this uid */
	uid_t				 peer_uid;

	struct http_limits		 lim;
	struct http_conns		 idle;		/* sheddable, oldest first */
	LIST_HEAD(, http_addr)		 addrs[HTTP_ADDR_BUCKETS];
	unsigned			 shed, refused;	/* since the last log line */
	uint64_t			 shed_logged_ms, refused_logged_ms;
};

static void conn_process(struct http_conn *conn);
static void conn_close(struct http_conn *conn, const char *why);
static int req_put(struct http_req *req);
static void req_detach(struct http_req *req);
static void req_abandon(struct http_req *req);
static void conn_set_phase(struct http_conn *conn, enum conn_phase phase);
static void conn_body_paused(struct http_conn *conn, int paused);
static int conn_start(struct http_server *srv, evutil_socket_t fd, struct http_addr *a,
    const char *peer);
static void conn_flushed(struct http_conn *conn);

static void
conn_release(void *conn)
{
	free(conn);
}

/* Drop a reference to conn; 1: closed (maybe freed), touch it no more. */
static int
conn_put(struct http_conn *conn)
{
	return ref_put(&conn->ref, conn_release, conn);
}

/* --- requests --------------------------------------------------------- */

static void
req_release(void *arg)
{
	struct http_req *req = arg;
	struct http_rheader *h;

	if (req->free_cb != NULL)
		req->free_cb(req, req->free_arg);
	while ((h = TAILQ_FIRST(&req->rheaders)) != NULL) {
		TAILQ_REMOVE(&req->rheaders, h, entry);
		free(h->name);
		free(h->value);
		free(h);
	}
	if (req->heartbeat != NULL)
		event_free(req->heartbeat);
	if (req->body != NULL)
		evbuffer_free(req->body);
	free(req->body_flat);
	free(req->path);
	free(req->query);
	http_head_free(&req->head);
	free(req);
}

/* Drop a reference; freed at the last. 1: detached (maybe freed), touch it no more. */
static int
req_put(struct http_req *req)
{
	return ref_put(&req->ref, req_release, req);
}

/* The connection lets go (req->conn already NULL): its reference goes. */
static void
req_detach(struct http_req *req)
{
	if (!ref_kill(&req->ref))
		req_put(req);
}

void
http_req_ref(struct http_req *req)
{
	ref_get(&req->ref);
}

void
http_req_unref(struct http_req *req)
{
	if (req->ref.r_count <= 0)
		fatalx("http_req_unref: negative refcount");
	req_put(req);
}

int
http_req_closed(const struct http_req *req)
{
	return req->closed;
}

int
http_req_replied(const struct http_req *req)
{
	return req->resp != RESP_NONE;
}

const char *
http_req_method(const struct http_req *req)
{
	return req->head.method;
}

const char *
http_req_path(const struct http_req *req)
{
	return req->path;
}

const char *
http_req_query(const struct http_req *req)
{
	return req->query;
}

const char *
http_req_header(const struct http_req *req, const char *name)
{
	return http_head_get(&req->head, name);
}

const struct http_head *
http_req_head(const struct http_req *req)
{
	return &req->head;
}

const char *
http_req_peer(const struct http_req *req)
{
	return req->peer;
}

const char *
http_req_body(const struct http_req *req, size_t *len)
{
	if (len != NULL)
		*len = req->body ? evbuffer_get_length(req->body) : 0;
	return req->body_flat ? req->body_flat : "";
}

void *
http_req_data(const struct http_req *req)
{
	return req->data;
}

void
http_req_set_data(struct http_req *req, void *data)
{
	req->data = data;
}

void
http_req_buffer(struct http_req *req, size_t max, http_handler_cb done, void *arg)
{
	req->routed = 1;
	req->mode = HTTP_BODY_BUFFER;
	req->body_max = max;
	req->done_cb = done;
	req->cb_arg = arg;
	req->body = evbuffer_new();
}

void
http_req_stream(struct http_req *req, uint64_t max, http_body_cb on_body,
    http_handler_cb on_end, void *arg)
{
	req->routed = 1;
	req->mode = HTTP_BODY_STREAM;
	req->body_max = (size_t)max;
	req->body_cb = on_body;
	req->done_cb = on_end;
	req->cb_arg = arg;
}

void
http_req_on_close(struct http_req *req, http_event_cb cb, void *arg)
{
	req->close_cb = cb;
	req->close_arg = arg;
}

void
http_req_on_free(struct http_req *req, http_event_cb cb, void *arg)
{
	req->free_cb = cb;
	req->free_arg = arg;
}

void
http_req_on_drain(struct http_req *req, http_event_cb cb, void *arg)
{
	req->drain_cb = cb;
	req->drain_arg = arg;
}

void
http_req_pause_body(struct http_req *req, int paused)
{
	if (req->conn == NULL || (req->body_done && !req->tunnel))
		return;
	/* Time paused by the handler is not the client's: the body deadline waits. */
	conn_body_paused(req->conn, paused);
	if (paused)
		bufferevent_disable(req->conn->bev, EV_READ);
	else {
		bufferevent_enable(req->conn->bev, EV_READ);
		/*
		 * Bytes already read go to the handler now, unless the connection
		 * is being processed below us (the router itself unpaused): that
		 * loop reads them, and the body must not end twice.
		 */
		if (!req->conn->dispatching)
			conn_process(req->conn);
	}
}

size_t
http_req_output_pending(const struct http_req *req)
{
	if (req->conn == NULL)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(req->conn->bev));
}

/* --- responses -------------------------------------------------------- */

void
http_req_add_header(struct http_req *req, const char *name, const char *value)
{
	struct http_rheader *h;

	if (req->resp != RESP_NONE)
		return;
	h = xcalloc(1, sizeof(*h));
	h->name = xstrdup(name);
	h->value = xstrdup(value);
	TAILQ_INSERT_TAIL(&req->rheaders, h, entry);
}

static void
write_head(struct http_req *req, int status, const char *ctype, int64_t length)
{
	struct evbuffer *out = bufferevent_get_output(req->conn->bev);
	struct http_rheader *h;

	req->status = status;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nServer: airlock\r\n", status,
	    http_status_text(status));
	if (ctype != NULL)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
	if (length >= 0)
		evbuffer_add_printf(out, "Content-Length: %lld\r\n", (long long)length);
	else if (req->chunked)
		evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
	TAILQ_FOREACH(h, &req->rheaders, entry)
		evbuffer_add_printf(out, "%s: %s\r\n", h->name, h->value);
	/* A 101's Connection: upgrade is among the handler's headers. */
	if (!req->keep_alive && status != 101)
		evbuffer_add_printf(out, "Connection: close\r\n");
	evbuffer_add(out, "\r\n", 2);
}

/* The response is complete: let the connection move on. */
static void
resp_ended(struct http_req *req)
{
	struct http_conn *conn = req->conn;

	req->resp = RESP_ENDED;
	if (req->heartbeat != NULL)
		event_del(req->heartbeat);
	if (conn == NULL)
		return;
	/* A body we never finished reading cannot be skipped safely: close. */
	if (!req->body_done || !req->keep_alive)
		conn->closing = 1;
	if (!req->body_done)
		conn->linger = 1;
	conn->req = NULL;
	req->conn = NULL;
	conn_set_phase(conn, conn->closing ? CONN_BUSY : CONN_IDLE);
	if (conn->closing) {
		bufferevent_disable(conn->bev, EV_READ);
		if (evbuffer_get_length(bufferevent_get_output(conn->bev)) == 0)
			conn_flushed(conn);
	} else {
		/* Bytes of the next request may already be waiting. */
		if (!conn->dispatching)
			conn_process(conn);
	}
	req_detach(req);
}

/*
 * A request gets one response. Another attempt is a bug in the handler,
 * dropped here so it can never write a second response onto the
 * connection (or into the next request's): log it, once per request.
 */
static int
req_replied(struct http_req *req, int status)
{
	if (req->resp == RESP_NONE)
		return 0;
	if (!req->reply_bug)
		/* The raw target: printable ASCII (the parser saw to it), unlike the decoded path. */
		log_warnx("http %s %s %s: bug: a second reply (%d) after %d, dropped", req->peer,
		    req->head.method, req->head.target, status, req->status);
	req->reply_bug = 1;
	return 1;
}

void
http_reply(struct http_req *req, int status, const char *ctype, const void *body, size_t len)
{
	if (req_replied(req, status))
		return;
	req->routed = 1;
	if (req->conn == NULL) {
		req->resp = RESP_ENDED;
		req->status = status;
		return;
	}
	/*
	 * Answered before the body was read: resp_ended closes the connection
	 * (the rest of the body cannot be skipped safely), so the head says
	 * so; a client would otherwise reuse it and meet a reset.
	 */
	if (!req->body_done)
		req->keep_alive = 0;
	write_head(req, status, ctype, status == 204 || status == 304 ? -1 : (int64_t)len);
	if (len > 0 && strcmp(req->head.method, "HEAD") != 0)
		evbuffer_add(bufferevent_get_output(req->conn->bev), body, len);
	resp_ended(req);
}

void
http_reply_file(struct http_req *req, int status, const char *ctype, int fd, uint64_t len)
{
	if (req_replied(req, status) || req->conn == NULL) {
		close(fd);
		if (req->resp == RESP_NONE) {
			req->resp = RESP_ENDED;
			req->status = status;
		}
		return;
	}
	req->routed = 1;
	write_head(req, status, ctype, (int64_t)len);
	/* The loop sends it as the client reads (sendfile where it can). */
	if (len > 0 && strcmp(req->head.method, "HEAD") != 0)
		evbuffer_add_file(bufferevent_get_output(req->conn->bev), fd, 0, (ev_off_t)len);
	else
		close(fd);
	resp_ended(req);
}

void
http_reply_json(struct http_req *req, int status, json_t *json)
{
	char *text = json_dumps(json, JSON_COMPACT);

	json_decref(json);
	if (text == NULL) {
		/* json_pack refused a value (a string that is not UTF-8): a bug upstream. */
		static const char err[] = "{\"error\":{\"code\":\"internal\",\"message\":"
		    "\"the answer could not be encoded as JSON\"}}";
		if (req->resp == RESP_NONE)
			log_warnx("http %s %s %s: bug: a %d answer could not be encoded as JSON",
			    req->peer, req->head.method, req->head.target, status);
		http_reply(req, 500, "application/json", err, sizeof(err) - 1);
		return;
	}
	http_reply(req, status, "application/json", text, strlen(text));
	free(text);
}

static json_t *
default_error_body(int status, const char *code, const char *message)
{
	return json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message);
}

void
http_reply_error(struct http_req *req, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	http_reply_json(req, status, default_error_body(status, code, msg));
	free(msg);
}

/* An error the server answers itself, in the shape the server was given. */
static void
srv_reply_error(struct http_req *req, int status, const char *code, const char *msg)
{
	http_error_fn fn = req->conn != NULL && req->conn->srv->error_body != NULL ?
	    req->conn->srv->error_body : default_error_body;

	http_reply_json(req, status, fn(status, code, msg));
}

/* A streaming answer begins: 0 when its head is to be written now, -1 when not. */
static int
stream_begin(struct http_req *req, int status)
{
	if (req_replied(req, status))
		return -1;
	req->routed = 1;
	req->resp = RESP_STREAMING;
	req->status = status;
	return req->conn == NULL ? -1 : 0;
}

void
http_reply_start(struct http_req *req, int status, const char *ctype)
{
	if (stream_begin(req, status) == -1)
		return;
	/* HTTP/1.0 has no chunked encoding: the end of the body is the close. */
	if (req->head.minor == 0)
		req->keep_alive = 0;
	else
		req->chunked = 1;
	write_head(req, status, ctype, -1);
	bufferevent_flush(req->conn->bev, EV_WRITE, BEV_FLUSH);
}

void
http_reply_start_length(struct http_req *req, int status, const char *ctype, uint64_t len)
{
	if (stream_begin(req, status) == -1)
		return;
	req->chunked = 0;
	if (!req->body_done)
		req->keep_alive = 0;
	write_head(req, status, ctype, (int64_t)len);
}

void
http_reply_upgrade(struct http_req *req)
{
	if (req_replied(req, 101))
		return;
	req->routed = 1;
	req->resp = RESP_STREAMING;
	req->status = 101;
	if (req->conn == NULL || !req->body_done) {
		/* Bytes after a request body are not the tunnel's: nothing to switch to. */
		if (req->conn != NULL)
			req->keep_alive = 0;
		return;
	}
	req->tunnel = 1;
	req->chunked = 0;
	req->keep_alive = 0;	/* the end of the tunnel is the end of the connection */
	write_head(req, 101, NULL, -1);
	bufferevent_flush(req->conn->bev, EV_WRITE, BEV_FLUSH);
	/* The client may have sent its first bytes with the head: hand them over from the loop. */
	if (evbuffer_get_length(bufferevent_get_input(req->conn->bev)) > 0)
		bufferevent_trigger(req->conn->bev, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

void
http_reply_chunk(struct http_req *req, const void *data, size_t len)
{
	struct evbuffer *out;

	if (req->resp != RESP_STREAMING || req->conn == NULL || len == 0)
		return;
	out = bufferevent_get_output(req->conn->bev);
	if (req->chunked)
		evbuffer_add_printf(out, "%zx\r\n", len);
	evbuffer_add(out, data, len);
	if (req->chunked)
		evbuffer_add(out, "\r\n", 2);
}

void
http_reply_end(struct http_req *req)
{
	if (req->resp != RESP_STREAMING)
		return;
	if (req->conn != NULL && req->chunked)
		evbuffer_add(bufferevent_get_output(req->conn->bev), "0\r\n\r\n", 5);
	resp_ended(req);
}

void
http_reply_abort(struct http_req *req)
{
	if (req->resp != RESP_STREAMING)
		return;
	/* No last chunk, and the connection closes once the rest is out. */
	req->keep_alive = 0;
	resp_ended(req);
}

static void
sse_heartbeat(evutil_socket_t fd, short ev, void *arg)
{
	struct http_req *req = arg;

	http_reply_chunk(req, ": ping\n\n", 8);
}

void
http_sse_start(struct http_req *req)
{
	struct timeval tv = { HTTP_SSE_HEARTBEAT_S, 0 };

	http_req_add_header(req, "Cache-Control", "no-cache");
	http_req_add_header(req, "X-Accel-Buffering", "no");
	http_reply_start(req, 200, "text/event-stream");
	if (req->conn == NULL)
		return;
	req->heartbeat = event_new(req->conn->srv->base, -1, EV_PERSIST, sse_heartbeat, req);
	event_add(req->heartbeat, &tv);
	/* Open the stream with a comment so clients see headers and a first byte now. */
	http_reply_chunk(req, ": airlock\n\n", 11);
}

void
http_sse_event(struct http_req *req, const char *event, json_t *data)
{
	char *text = json_dumps(data, JSON_COMPACT), *msg;
	int n;

	json_decref(data);
	if (text == NULL)
		return;
	n = xasprintf(&msg, "event: %s\ndata: %s\n\n", event, text);
	http_reply_chunk(req, msg, (size_t)n);
	free(msg);
	free(text);
}

/*
 * The request ends without its handler finishing it: the client left, the
 * server is shutting down, or the server answered a bad body itself. The
 * handler learns it once, through its close callback, and must drop its
 * references there; without this the handler's state (and its reference on
 * req) would wait for a body or a client that never comes.
 */
static void
req_abandon(struct http_req *req)
{
	http_event_cb cb = req->close_cb;

	req->closed = 1;
	req->close_cb = NULL;
	if (req->heartbeat != NULL)
		event_del(req->heartbeat);
	/* Callers hold a reference or the link, so this put never frees. */
	if (cb != NULL) {
		ref_get(&req->ref);
		cb(req, req->close_arg);
		req_put(req);
	}
}

/* --- connection accounting: deadlines, addresses, shedding ------------ */

/*
 * Half the cap or more open: keep-alive connections idle for less time, so
 * a flood is shed by the clock before it needs shedding at accept.
 */
static int
srv_pressure(const struct http_server *srv)
{
	return srv->nconns >= srv->lim.conns_max / 2;
}

/*
 * The phase's deadline (UINT64_MAX: none) and what passing it means. No
 * deadline restarts when a byte arrives: a head counts from accept or from
 * its first byte, a body earns time only at the minimum rate.
 */
static uint64_t
conn_deadline(const struct http_conn *conn, const char **why)
{
	const struct http_limits *lim = &conn->srv->lim;

	*why = NULL;
	switch (conn->phase) {
	case CONN_HEAD:
		*why = "no complete request head in time";
		return conn->head_t0_ms + lim->head_ms;
	case CONN_IDLE:
		*why = "keep-alive idle";
		return conn->since_ms + (srv_pressure(conn->srv) ? lim->idle_pressure_ms :
		    lim->idle_ms);
	case CONN_BODY:
		*why = "request body below the minimum rate";
		return conn->paused_at_ms != 0 ? UINT64_MAX : conn->body_deadline_ms;
	case CONN_LINGER:
		*why = "lingering close";
		return conn->head_t0_ms + HTTP_LINGER_S * 1000;
	case CONN_BUSY:
		break;
	}
	return UINT64_MAX;
}

/*
 * Arm the timer for the deadline. Deadlines only move later while armed
 * (body credit, pressure ending), so the timer may fire early and re-arm:
 * nothing is re-armed per byte.
 */
static void
conn_arm(struct http_conn *conn)
{
	const char *why;
	uint64_t now = monotonic_ms(), at = conn_deadline(conn, &why), early;
	struct timeval tv;

	/* Pressure may start while this one idles: look again at the shorter time. */
	if (conn->phase == CONN_IDLE) {
		early = conn->since_ms + conn->srv->lim.idle_pressure_ms;
		if (early > now && early < at)
			at = early;
	}
	if (at == UINT64_MAX) {
		event_del(conn->timer);
		return;
	}
	at = at > now ? at - now : 0;
	tv.tv_sec = (time_t)(at / 1000);
	tv.tv_usec = (suseconds_t)(at % 1000) * 1000;
	event_add(conn->timer, &tv);
}

static void
conn_expire(struct http_conn *conn, const char *why)
{
	struct http_req *req = conn->req;

	/* A body cut short is answered, so the client knows why (as for 413). */
	if (conn->phase == CONN_BODY && req != NULL && req->resp == RESP_NONE) {
		log_debug("http %s: %s", conn->peer, why);
		ref_get(&req->ref);
		srv_reply_error(req, 408, "timeout", why);
		req_abandon(req);
		req_put(req);
		return;
	}
	conn_close(conn, why);
}

static void
conn_timer_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct http_conn *conn = arg;
	const char *why;

	if (monotonic_ms() < conn_deadline(conn, &why)) {
		conn_arm(conn);
		return;
	}
	conn_expire(conn, why);
}

static void
conn_shed_unlink(struct http_conn *conn)
{
	if (!conn->sheddable)
		return;
	TAILQ_REMOVE(&conn->srv->idle, conn, idle_entry);
	if (conn->addr != NULL)
		TAILQ_REMOVE(&conn->addr->idle, conn, addr_entry);
	conn->sheddable = 0;
}

/* Move to a phase: shed lists, timestamps, deadline. */
static void
conn_set_phase(struct http_conn *conn, enum conn_phase phase)
{
	uint64_t now = monotonic_ms();

	if (ref_dead(&conn->ref))
		return;
	if (phase == CONN_HEAD || phase == CONN_IDLE || phase == CONN_LINGER) {
		/* Oldest first: the position is kept from IDLE into HEAD. */
		if (!conn->sheddable) {
			conn->since_ms = now;
			TAILQ_INSERT_TAIL(&conn->srv->idle, conn, idle_entry);
			if (conn->addr != NULL)
				TAILQ_INSERT_TAIL(&conn->addr->idle, conn, addr_entry);
			conn->sheddable = 1;
		}
	} else
		conn_shed_unlink(conn);
	conn->phase = phase;
	if (phase == CONN_HEAD || phase == CONN_LINGER)
		conn->head_t0_ms = now;
	else if (phase == CONN_BODY) {
		conn->body_deadline_ms = now + conn->srv->lim.body_grace_ms;
		conn->body_frac = 0;
		conn->paused_at_ms = 0;
	}
	conn_arm(conn);
}

/*
 * n body bytes arrived: 1 s of credit per body_min_rate bytes (the
 * mod_reqtimeout MinRate rule), never banked more than body_credit_ms
 * ahead, so a fast start does not buy an endless trickle afterwards.
 */
static void
conn_body_progress(struct http_conn *conn, size_t n)
{
	const struct http_limits *lim = &conn->srv->lim;
	uint64_t cap;

	if (conn->phase != CONN_BODY || n == 0)
		return;
	conn->body_frac += (uint64_t)n * 1000;
	conn->body_deadline_ms += conn->body_frac / lim->body_min_rate;
	conn->body_frac %= lim->body_min_rate;
	cap = monotonic_ms() + lim->body_credit_ms;
	if (conn->body_deadline_ms > cap)
		conn->body_deadline_ms = cap;
}

static void
conn_body_paused(struct http_conn *conn, int paused)
{
	uint64_t now = monotonic_ms();

	if (ref_dead(&conn->ref) || conn->phase != CONN_BODY || (paused != 0) == (conn->paused_at_ms != 0))
		return;
	if (paused)
		conn->paused_at_ms = now != 0 ? now : 1;
	else {
		conn->body_deadline_ms += now - conn->paused_at_ms;
		conn->paused_at_ms = 0;
	}
	conn_arm(conn);
}

/* An IPv4 address (also v4-mapped) or an IPv6 /64; -1 for other peers. */
static int
addr_key(const struct sockaddr *sa, struct http_addr_key *k)
{
	memset(k, 0, sizeof(*k));
	if (sa->sa_family == AF_INET) {
		k->family = 4;
		memcpy(k->bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			k->family = 4;
			memcpy(k->bytes, a6->s6_addr + 12, 4);
		} else {
			k->family = 6;
			memcpy(k->bytes, a6->s6_addr, 8);
		}
		return 0;
	}
	return -1;
}

static struct http_addr *
addr_get(struct http_server *srv, const struct http_addr_key *k)
{
	uint32_t h = 2166136261u;	/* FNV-1a */
	struct http_addr *a;
	struct in6_addr a6;
	size_t i;

	h = (h ^ k->family) * 16777619u;
	for (i = 0; i < sizeof(k->bytes); i++)
		h = (h ^ k->bytes[i]) * 16777619u;
	LIST_FOREACH(a, &srv->addrs[h % HTTP_ADDR_BUCKETS], entry)
		if (a->key.family == k->family && memcmp(a->key.bytes, k->bytes, 8) == 0)
			return a;
	a = xcalloc(1, sizeof(*a));
	a->key = *k;
	TAILQ_INIT(&a->idle);
	if (k->family == 4)
		inet_ntop(AF_INET, k->bytes, a->name, sizeof(a->name));
	else {
		memset(&a6, 0, sizeof(a6));
		memcpy(a6.s6_addr, k->bytes, 8);
		inet_ntop(AF_INET6, &a6, a->name, INET6_ADDRSTRLEN);
		i = strlen(a->name);
		snprintf(a->name + i, sizeof(a->name) - i, "/64");
	}
	LIST_INSERT_HEAD(&srv->addrs[h % HTTP_ADDR_BUCKETS], a, entry);
	return a;
}

static void
addr_put(struct http_addr *a)
{
	if (a != NULL && a->nconns == 0) {
		LIST_REMOVE(a, entry);
		free(a);
	}
}

/* Sheds and refusals come in floods: one line per interval, with a count. */
static void
srv_log_limits(struct http_server *srv, uint64_t now)
{
	uint64_t every = (uint64_t)HTTP_LIMIT_LOG_INTERVAL_S * 1000;

	if (srv->shed > 0 && (srv->shed_logged_ms == 0 || now - srv->shed_logged_ms >= every)) {
		log_warnx("http: shed %u connections without a request in progress "
		    "(%zu open, cap %u)", srv->shed, srv->nconns, srv->lim.conns_max);
		srv->shed = 0;
		srv->shed_logged_ms = now;
	}
	if (srv->refused > 0 &&
	    (srv->refused_logged_ms == 0 || now - srv->refused_logged_ms >= every)) {
		log_warnx("http: refused %u connections: all %zu open have a request in "
		    "progress (cap %u)", srv->refused, srv->nconns, srv->lim.conns_max);
		srv->refused = 0;
		srv->refused_logged_ms = now;
	}
}

/*
 * Close the connection (of one address, or of all) that has been without a
 * request in progress the longest, unless it is younger than
 * shed_min_age_ms: a client that sends its request within that time is
 * never shed by a flood of new connections.
 */
static int
srv_shed(struct http_server *srv, struct http_addr *a, uint64_t now, unsigned min_age_ms)
{
	struct http_conn *c = a != NULL ? TAILQ_FIRST(&a->idle) : TAILQ_FIRST(&srv->idle);

	if (c == NULL || now - c->since_ms < min_age_ms)
		return 0;
	srv->shed++;
	conn_close(c, a != NULL ? "shed: per-address cap" : "shed: near the connection cap");
	srv_log_limits(srv, now);
	return 1;
}

/*
 * Refuse a connection we cannot take: a 503 the client can act on, sent
 * without waiting (it fits a fresh socket's buffer), then close. Over TLS
 * just close: plaintext would be noise inside a handshake, and a handshake
 * is the work a refusal must not cost.
 */
static void
srv_refuse(struct http_server *srv, evutil_socket_t fd, struct http_addr *a, int per_addr,
    uint64_t now)
{
#define REFUSE_BODY	"{\"error\":{\"code\":\"unavailable\",\"message\":\"too many connections\"}}"
	static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\nServer: airlock\r\n"
	    "Content-Type: application/json\r\nContent-Length: 65\r\nRetry-After: 1\r\n"
	    "Connection: close\r\n\r\n" REFUSE_BODY;
	_Static_assert(sizeof(REFUSE_BODY) - 1 == 65, "Content-Length of the 503");
#undef REFUSE_BODY

	if (srv->transport == NULL)
		(void)send(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	evutil_closesocket(fd);
	if (per_addr) {
		a->refused++;
		if (a->logged_ms == 0 || now - a->logged_ms >= (uint64_t)HTTP_LIMIT_LOG_INTERVAL_S * 1000) {
			log_warnx("http %s: refused %u connections: %u open from this address, "
			    "each with a request in progress (cap %u)", a->name, a->refused,
			    a->nconns - 1, srv->lim.conns_per_addr);
			a->refused = 0;
			a->logged_ms = now;
		}
	} else {
		srv->refused++;
		srv_log_limits(srv, now);
	}
	if (a != NULL) {
		a->nconns--;
		addr_put(a);
	}
}

void
http_limits_default(struct http_limits *lim)
{
	lim->conns_max = HTTP_CONNS_MAX;
	lim->conns_per_addr = HTTP_CONNS_PER_ADDR;
	lim->shed_min_age_ms = HTTP_SHED_MIN_AGE_MS;
	lim->head_ms = HTTP_HEAD_TIMEOUT_S * 1000;
	lim->idle_ms = HTTP_IDLE_TIMEOUT_S * 1000;
	lim->idle_pressure_ms = HTTP_IDLE_PRESSURE_S * 1000;
	lim->body_grace_ms = HTTP_BODY_GRACE_S * 1000;
	lim->body_min_rate = HTTP_BODY_MIN_RATE;
	lim->body_credit_ms = HTTP_BODY_CREDIT_S * 1000;
	lim->write_ms = HTTP_WRITE_TIMEOUT_S * 1000;
}

static unsigned
clamp(unsigned v, unsigned lo, unsigned hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void
http_server_set_limits(struct http_server *srv, const struct http_limits *lim)
{
	struct http_limits *l = &srv->lim;

	*l = *lim;
	l->conns_max = clamp(l->conns_max, 1, 1U << 20);
	l->conns_per_addr = clamp(l->conns_per_addr, 0, l->conns_max);
	l->head_ms = clamp(l->head_ms, 1, 3600 * 1000);
	l->idle_ms = clamp(l->idle_ms, 1, 3600 * 1000);
	l->idle_pressure_ms = clamp(l->idle_pressure_ms, 1, l->idle_ms);
	l->body_min_rate = clamp(l->body_min_rate, 1, UINT32_MAX / 1000);
	l->body_credit_ms = clamp(l->body_credit_ms, 1, 3600 * 1000);
	/* The credit cap must not pull the first deadline in (conn_arm relies on it). */
	l->body_grace_ms = clamp(l->body_grace_ms, 1, l->body_credit_ms);
	l->write_ms = clamp(l->write_ms, 0, 3600 * 1000);
}

/* --- connections ------------------------------------------------------ */

static void
conn_close(struct http_conn *conn, const char *why)
{
	struct http_server *srv = conn->srv;
	struct http_req *req = conn->req;

	if (ref_kill(&conn->ref))
		return;
	if (why != NULL)
		log_debug("http %s: close: %s", conn->peer, why);
	if (req != NULL) {
		conn->req = NULL;
		req->conn = NULL;
		if (req->resp != RESP_ENDED)
			req_abandon(req);
		req_detach(req);
	}
	bufferevent_free(conn->bev);
	conn->bev = NULL;
	conn_shed_unlink(conn);
	event_free(conn->timer);
	conn->timer = NULL;
	if (conn->addr != NULL) {
		conn->addr->nconns--;
		addr_put(conn->addr);
		conn->addr = NULL;
	}
	TAILQ_REMOVE(&srv->conns, conn, entry);
	srv->nconns--;
	/* Paused for want of fds: one is free again. */
	if (srv->accept_paused) {
		struct http_listener *l;
		TAILQ_FOREACH(l, &srv->listeners, entry)
			evconnlistener_enable(l->lev);
		srv->accept_paused = 0;
	}
	conn_put(conn);
}

/* Answer a protocol error and close after flushing. */
static void
conn_fail(struct http_conn *conn, int status, const char *why)
{
	struct evbuffer *out = bufferevent_get_output(conn->bev);
	http_error_fn fn = conn->srv->error_body != NULL ? conn->srv->error_body : default_error_body;
	json_t *j = fn(status, http_error_code(status), why);
	char *body = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nServer: airlock\r\nContent-Type: "
	    "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
	    status, http_status_text(status), body != NULL ? strlen(body) : 0,
	    body != NULL ? body : "");
	free(body);
	conn->closing = 1;
	conn->linger = 1;
	bufferevent_disable(conn->bev, EV_READ);
}

static void
body_sink(void *arg, const char *data, size_t n)
{
	struct http_req *req = arg;

	if (req->mode == HTTP_BODY_BUFFER)
		evbuffer_add(req->body, data, n);
	/* Once answered (req->conn gone) the rest of the body is not the handler's. */
	else if (req->body_cb != NULL && !req->closed && req->conn != NULL)
		req->body_cb(req, data, n, req->cb_arg);
}

static void
req_body_complete(struct http_req *req)
{
	struct http_conn *conn = req->conn;

	req->body_done = 1;
	if (conn != NULL)
		conn_set_phase(conn, CONN_BUSY);
	if (req->mode == HTTP_BODY_BUFFER && req->body != NULL) {
		size_t len = evbuffer_get_length(req->body);
		req->body_flat = xmalloc(len + 1);
		evbuffer_copyout(req->body, req->body_flat, len);
		req->body_flat[len] = '\0';
	}
	if (req->done_cb != NULL && req->resp == RESP_NONE)
		req->done_cb(req, req->cb_arg);
	else if (req->done_cb != NULL && req->mode == HTTP_BODY_STREAM)
		req->done_cb(req, req->cb_arg);
}

/* Feed the body decoder from the input buffer. */
static void
conn_read_body(struct http_conn *conn)
{
	struct http_req *req = conn->req;
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	char *cause = NULL;

	/* Handlers called from here may reply and detach req: hold it. */
	ref_get(&req->ref);
	while (req->conn != NULL && !req->body_done && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		enum http_body_state st;
		size_t consumed;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		st = http_body_feed(&req->dec, v.iov_base, v.iov_len, &consumed, body_sink, req,
		    &cause);
		evbuffer_drain(in, consumed);
		conn_body_progress(conn, consumed);
		if (st == HTTP_BODY_ERROR) {
			int status = strstr(cause, "too large") ? 413 : 400;
			if (req->resp == RESP_NONE) {
				char msg[1100];

				snprintf(msg, sizeof(msg), "request body: %s", cause);
				srv_reply_error(req, status, http_error_code(status),
				    msg);
				req_abandon(req);
			} else
				conn_close(conn, cause);
			free(cause);
			break;
		}
		if (st == HTTP_BODY_DONE)
			req_body_complete(req);
		/* The stream handler may pause us for back-pressure. */
		if (ref_dead(&conn->ref) || !(bufferevent_get_enabled(conn->bev) & EV_READ))
			break;
	}
	req_put(req);
}

/* After a 101: the client's bytes go to the stream handler as they are. */
static void
conn_read_tunnel(struct http_conn *conn)
{
	struct http_req *req = conn->req;
	struct evbuffer *in = bufferevent_get_input(conn->bev);

	ref_get(&req->ref);
	while (req->conn != NULL && !req->closed && evbuffer_get_length(in) > 0 &&
	    (bufferevent_get_enabled(conn->bev) & EV_READ)) {
		struct evbuffer_iovec v;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		if (req->body_cb != NULL)
			req->body_cb(req, v.iov_base, v.iov_len, req->cb_arg);
		if (ref_dead(&conn->ref))
			break;
		evbuffer_drain(in, v.iov_len);
	}
	req_put(req);
}

/* Start the next request from the input; -1 when no progress was possible. */
static int
conn_new_request(struct http_conn *conn)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	size_t len = evbuffer_get_length(in);
	size_t want = len < HTTP_HEAD_MAX + 8 ? len : HTTP_HEAD_MAX + 8;
	struct http_req *req;
	char *cause = NULL, *buf;
	ssize_t n;
	int status;

	buf = (char *)evbuffer_pullup(in, (ssize_t)want);
	req = xcalloc(1, sizeof(*req));
	TAILQ_INIT(&req->rheaders);
	n = http_parse_head(buf, want, &req->head, &status, &cause);
	if (n <= 0) {
		free(req);
		if (n == -1) {
			conn_fail(conn, status, cause);
			free(cause);
		}
		return -1;
	}
	evbuffer_drain(in, (size_t)n);
	ref_init(&req->ref);
	req->conn = conn;
	conn->req = req;
	memcpy(req->peer, conn->peer, sizeof(req->peer));
	req->keep_alive = req->head.keep_alive;
	conn_set_phase(conn, CONN_BUSY);
	if (http_split_target(req->head.target, &req->path, &req->query) == -1) {
		req->path = xstrdup("");
		req->query = xstrdup("");
		srv_reply_error(req, 400, "bad_request", "malformed request target");
		return 0;
	}
	http_body_init(&req->dec, &req->head, 0);
	/* Known before routing, so an immediate answer can keep the connection. */
	if (!req->head.chunked && req->head.content_length <= 0)
		req->body_done = 1;
	else
		conn_set_phase(conn, CONN_BODY);
	ref_get(&req->ref);
	conn->srv->router(req, conn->srv->arg);
	if (req_put(req))	/* answered (or closed) in the router: detached */
		return 0;
	if (!req->routed) {
		log_warnx("http %s %s %s: bug: the router set no handler", req->peer,
		    req->head.method, req->head.target);
		http_reply_error(req, 500, "internal", "no handler for %s %s", req->head.method,
		    req->head.target);
		return 0;
	}
	req->dec.max = req->body_max;
	if (req->resp == RESP_NONE && req->head.expect_continue)
		evbuffer_add_printf(bufferevent_get_output(conn->bev), "HTTP/1.1 100 Continue\r\n\r\n");
	if (req->body_done) {
		ref_get(&req->ref);
		req_body_complete(req);
		req_put(req);
	}
	return 0;
}

/* Parse and dispatch whatever the input buffer holds. */
static void
conn_process(struct http_conn *conn)
{
	struct evbuffer *in;

	conn->dispatching++;
	ref_get(&conn->ref);
	while (!ref_dead(&conn->ref) && !conn->closing) {
		in = bufferevent_get_input(conn->bev);
		if (conn->req == NULL) {
			if (evbuffer_get_length(in) == 0)
				break;
			/* The next request's first byte: its head deadline starts now. */
			if (conn->phase == CONN_IDLE)
				conn_set_phase(conn, CONN_HEAD);
			if (conn_new_request(conn) == -1)
				break;	/* need more bytes, or failed */
			continue;
		}
		if (conn->req->tunnel) {
			conn_read_tunnel(conn);
			break;
		}
		if (conn->req->body_done || evbuffer_get_length(in) == 0)
			break;
		conn_read_body(conn);
		if (ref_dead(&conn->ref) || conn->req == NULL || conn->req->body_done ||
		    !(bufferevent_get_enabled(conn->bev) & EV_READ))
			continue;
		break;
	}
	conn->dispatching--;
	if (conn_put(conn))
		return;
	if (conn->closing && conn->req == NULL &&
	    evbuffer_get_length(bufferevent_get_output(conn->bev)) == 0)
		conn_flushed(conn);
}

/*
 * The last answer is out. After an early answer (an error on the head, a
 * reply before the body was read) the client may still be sending:
 * closing a socket with unread input makes the kernel reset the
 * connection (TCP; a unix socket's peer gets ECONNRESET), which can lose
 * the answer before the client reads it. So shut our side and discard
 * what comes until the client closes too, for at most HTTP_LINGER_S
 * (Apache's lingering close). Over TLS just close.
 */
static void
conn_flushed(struct http_conn *conn)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);

	if (!conn->linger || conn->srv->transport != NULL || conn->phase == CONN_LINGER) {
		conn_close(conn, NULL);
		return;
	}
	evbuffer_drain(in, evbuffer_get_length(in));
	if (shutdown(bufferevent_getfd(conn->bev), SHUT_WR) == -1) {
		conn_close(conn, NULL);
		return;
	}
	conn_set_phase(conn, CONN_LINGER);
	bufferevent_enable(conn->bev, EV_READ);
}

static void
conn_readcb(struct bufferevent *bev, void *arg)
{
	struct http_conn *conn = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (conn->phase == CONN_LINGER) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	conn_process(conn);
}

static void
conn_writecb(struct bufferevent *bev, void *arg)
{
	struct http_conn *conn = arg;
	struct http_req *req = conn->req;

	if (conn->phase == CONN_LINGER)
		return;
	if (conn->closing && conn->req == NULL) {
		conn_flushed(conn);
		return;
	}
	if (req != NULL && req->drain_cb != NULL && req->resp == RESP_STREAMING &&
	    evbuffer_get_length(bufferevent_get_output(bev)) < HTTP_OUTPUT_HIGH_WATER) {
		ref_get(&req->ref);
		req->drain_cb(req, req->drain_arg);
		req_put(req);
	}
}

static void
conn_eventcb(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn *conn = arg;

	if (what & BEV_EVENT_TIMEOUT)	/* reads have conn->timer; this is output */
		conn_close(conn, "write timeout");
	else if (what & BEV_EVENT_EOF)
		conn_close(conn, "eof");
	else if (what & BEV_EVENT_ERROR)
		conn_close(conn, strerror(EVUTIL_SOCKET_ERROR()));
}

/*
 * Take a connection, or make room for it: past the per-address cap the
 * address's oldest connection without a request in progress goes, near the
 * total cap the server's oldest such connection does. Only when every
 * connection has a request in progress is the newcomer refused (503).
 */
/* A unix peer of the one uid the server accepts (SO_PEERCRED); logged when not. */
static int
peer_uid_ok(struct http_server *srv, evutil_socket_t fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == -1) {
		log_warn("http accept: SO_PEERCRED");
		return 0;
	}
	if (uc.uid == srv->peer_uid)
		return 1;
	log_warnx("http accept: refused a peer of uid %u pid %d (only uid %u may connect)",
	    (unsigned)uc.uid, (int)uc.pid, (unsigned)srv->peer_uid);
	return 0;
}

void
http_tcp_nodelay(int fd, int family)
{
	int one = 1;

	/*
	 * An answer is a head and a body, and TLS records: written in pieces.
	 * With Nagle the second piece waits for the peer's delayed ACK (40 ms
	 * on Linux) on every request of a kept-alive connection.
	 */
	if (family == AF_INET || family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void
server_accept(struct evconnlistener *lev, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	struct http_server *srv = arg;
	const struct http_limits *lim = &srv->lim;
	struct http_addr_key key;
	struct http_addr *a = NULL;
	char host[INET6_ADDRSTRLEN] = "?";
	uint64_t now = monotonic_ms();

	if (srv->peer_uid_set && !peer_uid_ok(srv, fd)) {
		evutil_closesocket(fd);
		return;
	}
	if (addr_key(sa, &key) == 0) {
		a = addr_get(srv, &key);
		a->nconns++;	/* counted now: shedding its others cannot free a */
	}
	if (a != NULL && lim->conns_per_addr != 0 && a->nconns > lim->conns_per_addr &&
	    !srv_shed(srv, a, now, lim->shed_min_age_ms)) {
		srv_refuse(srv, fd, a, 1, now);
		return;
	}
	if (srv->nconns >= lim->conns_max - lim->conns_max / HTTP_SHED_RESERVE_DIV)
		srv_shed(srv, NULL, now, lim->shed_min_age_ms);
	if (srv->nconns >= lim->conns_max) {
		srv_refuse(srv, fd, a, 0, now);
		return;
	}
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, host, sizeof(host));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof(host));
	else if (sa->sa_family == AF_UNIX)
		snprintf(host, sizeof(host), "unix");
	if (srv->nodelay)
		http_tcp_nodelay(fd, sa->sa_family);
	(void)conn_start(srv, fd, a, host);
}

/* A connection on fd (owned: closed on failure), counted against a when set. */
static int
conn_start(struct http_server *srv, evutil_socket_t fd, struct http_addr *a, const char *peer)
{
	struct http_conn *conn = xcalloc(1, sizeof(*conn));
	struct timeval write_tv;

	ref_init(&conn->ref);
	conn->srv = srv;
	conn->addr = a;
	snprintf(conn->peer, sizeof(conn->peer), "%s", peer);
	if (srv->transport != NULL)
		conn->bev = srv->transport(srv->base, fd, srv->transport_arg);
	else
		conn->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	conn->timer = evtimer_new(srv->base, conn_timer_cb, conn);
	if (conn->bev == NULL || conn->timer == NULL) {
		if (conn->bev != NULL)
			bufferevent_free(conn->bev);
		else
			evutil_closesocket(fd);
		if (conn->timer != NULL)
			event_free(conn->timer);
		if (a != NULL) {
			a->nconns--;
			addr_put(a);
		}
		free(conn);
		return -1;
	}
	bufferevent_setcb(conn->bev, conn_readcb, conn_writecb, conn_eventcb, conn);
	/*
	 * Unread input is bounded: while a handler works (a stream, a slow
	 * commit) a client may pipeline its next requests, and without a high
	 * watermark every byte it sends would be read into memory. At the mark
	 * libevent stops reading (TCP pushes back on the client) until
	 * conn_process drains the buffer.
	 */
	bufferevent_setwatermark(conn->bev, EV_READ, 0, HTTP_INPUT_MAX);
	/* Read deadlines are conn->timer's: bytes must not restart them. */
	write_tv.tv_sec = (time_t)(srv->lim.write_ms / 1000);
	write_tv.tv_usec = (suseconds_t)(srv->lim.write_ms % 1000) * 1000;
	bufferevent_set_timeouts(conn->bev, NULL, srv->lim.write_ms != 0 ? &write_tv : NULL);
	TAILQ_INSERT_TAIL(&srv->conns, conn, entry);
	srv->nconns++;
	conn_set_phase(conn, CONN_HEAD);	/* the first head counts from accept */
	bufferevent_enable(conn->bev, EV_READ);
	return 0;
}

int
http_server_adopt(struct http_server *srv, evutil_socket_t fd, const char *peer)
{
	if (srv->nconns >= srv->lim.conns_max) {
		srv->refused++;
		srv_log_limits(srv, monotonic_ms());
		evutil_closesocket(fd);
		return -1;
	}
	if (evutil_make_socket_nonblocking(fd) == -1) {
		evutil_closesocket(fd);
		return -1;
	}
	return conn_start(srv, fd, NULL, peer);
}

void
http_server_set_error_body(struct http_server *srv, http_error_fn fn)
{
	srv->error_body = fn;
}

static void
server_accept_error(struct evconnlistener *lev, void *arg)
{
	struct http_server *srv = arg;
	struct http_listener *l;
	int err = EVUTIL_SOCKET_ERROR();

	if (err != EMFILE && err != ENFILE) {
		log_warnx("http accept: %s", evutil_socket_error_to_string(err));
		return;
	}
	/* Out of fds: free one held without a request, whatever its age, and retry. */
	if (srv_shed(srv, NULL, monotonic_ms(), 0))
		return;
	/* Nothing to shed: libevent would spin on the listener; wait for a close instead. */
	log_warnx("http accept: %s", evutil_socket_error_to_string(err));
	TAILQ_FOREACH(l, &srv->listeners, entry)
		evconnlistener_disable(l->lev);
	srv->accept_paused = 1;
}

void
http_server_set_transport(struct http_server *srv, http_transport_fn fn, void *arg)
{
	srv->transport = fn;
	srv->transport_arg = arg;
}

struct http_server *
http_server_new(struct event_base *base, http_router_cb router, void *arg)
{
	struct http_server *srv = xcalloc(1, sizeof(*srv));

	srv->base = base;
	srv->router = router;
	srv->arg = arg;
	TAILQ_INIT(&srv->conns);
	TAILQ_INIT(&srv->listeners);
	TAILQ_INIT(&srv->idle);
	for (size_t i = 0; i < HTTP_ADDR_BUCKETS; i++)
		LIST_INIT(&srv->addrs[i]);
	http_limits_default(&srv->lim);
	return srv;
}

int
http_listen_socket(const char *host, int port, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, on = 1;

	memset(&ss, 0, sizeof(ss));
	if (port < 0 || port > 65535) {
		cause_set(cause, "listen: port %d out of range", port);
		return -1;
	}
	if (evutil_inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		((struct sockaddr_in *)&ss)->sin_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
		len = sizeof(struct sockaddr_in);
	} else if (evutil_inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		len = sizeof(struct sockaddr_in6);
	} else {
		cause_set(cause, "listen: \"%s\" is not an IPv4 or IPv6 address", host);
		return -1;
	}
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) == -1 ||
	    bind(fd, (struct sockaddr *)&ss, len) == -1 || listen(fd, HTTP_LISTEN_BACKLOG) == -1) {
		cause_set(cause, "listen on %s:%d: %s", host, port, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	return fd;
}

int
http_server_listen_fd(struct http_server *srv, int fd, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	struct http_listener *l;

	if (evutil_make_socket_nonblocking(fd) == -1 || evutil_make_socket_closeonexec(fd) == -1) {
		cause_set(cause, "listening socket %d: %s", fd, strerror(errno));
		close(fd);
		return -1;
	}
	l = xcalloc(1, sizeof(*l));
	l->lev = evconnlistener_new(srv->base, server_accept, srv,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (l->lev == NULL) {
		cause_set(cause, "listening socket %d: %s", fd, strerror(errno));
		close(fd);
		free(l);
		return -1;
	}
	evconnlistener_set_error_cb(l->lev, server_accept_error);
	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) == 0 &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
		l->port = ntohs(ss.ss_family == AF_INET6 ?
		    ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
	TAILQ_INSERT_TAIL(&srv->listeners, l, entry);
	return 0;
}

int
http_server_listen(struct http_server *srv, const char *host, int port, char **cause)
{
	int fd = http_listen_socket(host, port, cause);

	return fd == -1 ? -1 : http_server_listen_fd(srv, fd, cause);
}

void
http_server_set_nodelay(struct http_server *srv)
{
	srv->nodelay = 1;
}

void
http_server_set_peer_uid(struct http_server *srv, uid_t uid)
{
	srv->peer_uid_set = 1;
	srv->peer_uid = uid;
}

int
http_server_port(const struct http_server *srv)
{
	const struct http_listener *l = TAILQ_FIRST(&srv->listeners);

	return l != NULL ? l->port : 0;
}

void
http_server_free(struct http_server *srv)
{
	struct http_listener *l;
	struct http_conn *conn;

	while ((l = TAILQ_FIRST(&srv->listeners)) != NULL) {
		TAILQ_REMOVE(&srv->listeners, l, entry);
		evconnlistener_free(l->lev);
		free(l);
	}
	while ((conn = TAILQ_FIRST(&srv->conns)) != NULL)
		conn_close(conn, "server shutdown");
	free(srv);
}
