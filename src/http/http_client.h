/*
 * The HTTP/1.1 client: one request on a connection the caller opened (a
 * guest agent channel stream, a unix socket to the worker, a TLS socket to
 * another host), answered by the strict parser of http_parse. Request
 * bodies are fixed, streamed with a known length, or chunked; the response
 * streams to the caller as it is decoded, with back-pressure both ways.
 * After a 101 (an upgrade the caller asked for) the connection is a raw
 * tunnel. Connection: close: one request per connection.
 *
 * Used by link/envd_client (airlockd to the guest agent) and front/ (the
 * API front to the worker): one implementation of the client side.
 */
#ifndef AIRLOCK_HTTP_CLIENT_H
#define AIRLOCK_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bufferevent;
struct http_creq;
struct http_head;

struct http_client_cb {
	/* The response head arrived: status and its Content-Type ("" if none). */
	void	(*head)(struct http_creq *, int status, const char *ctype, void *arg);
	/* Decoded response body bytes (raw bytes after a 101). */
	void	(*data)(struct http_creq *, const char *data, size_t n, void *arg);
	/* Exactly once, last: error NULL when the response ended cleanly. */
	void	(*done)(struct http_creq *, const char *error, void *arg);
	/* Output toward the server drained (streamed request bodies). */
	void	(*drain)(struct http_creq *, void *arg);
};

/* Ask to switch protocols (WebSocket): a 101 turns the connection into a tunnel. */
#define HTTP_CREQ_UPGRADE	0x01

struct http_creq_spec {
	const char		*method;
	const char		*target;	/* origin-form, already encoded */
	const char		*host;
	const char		*ctype;		/* NULL: no Content-Type */
	/*
	 * body_len >= 0: body is the whole body. body_len == -1: chunked,
	 * written with http_creq_write and ended with http_creq_end.
	 * body_len == -2: stream_len bytes written with http_creq_write
	 * (Content-Length framing; nothing past stream_len is sent).
	 */
	const void		*body;
	ssize_t			 body_len;
	uint64_t		 stream_len;
	const char *const	*headers;	/* "Name: value" strings, NULL-terminated */
	int			 flags;		/* HTTP_CREQ_* */
	const char		*peer;		/* who answers, in error causes ("the guest agent") */
};

/*
 * Send the request on bev (owned from now on: freed with the request).
 * Callbacks run from the event loop, never from inside this call.
 */
struct http_creq *http_client_start(struct bufferevent *bev, const struct http_creq_spec *spec,
    const struct http_client_cb *cb, void *arg);
/* Valid inside the head callback only: the response head with every header. */
const struct http_head *http_creq_response_head(const struct http_creq *r);
void http_creq_write(struct http_creq *r, const void *data, size_t n);
/* The end of a chunked body (no-op for other framings). */
void http_creq_end(struct http_creq *r);
size_t http_creq_pending(const struct http_creq *r);
/* Stop reading the response (back-pressure) or continue. */
void http_creq_pause(struct http_creq *r, int paused);
/* Abort: no more callbacks (done included); the connection is closed. */
void http_creq_cancel(struct http_creq *r);
/*
 * The transport failed before or while answering (say, the agent refused
 * the stream): done runs with error unless it already ran.
 */
void http_creq_fail(struct http_creq *r, const char *error);
/* Runs once when r is freed (after done or a cancel): the owner's cleanup. */
void http_creq_on_release(struct http_creq *r, void (*fn)(void *), void *arg);
/* The bufferevent the request runs on (to set timeouts; never free it). */
struct bufferevent *http_creq_bev(const struct http_creq *r);

#endif
