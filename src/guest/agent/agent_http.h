/*
 * The agent's HTTP/1.1 server: one struct http_conn per channel stream to
 * port 49983 (a socketpair end). Written for the agent rather than using
 * evhttp because request bodies must stream (a 100 MB upload into a 256 MiB
 * guest cannot be buffered) and Connect server streams must be flushed
 * frame by frame with chunked encoding.
 *
 * Bounded everywhere: head HTTP_MAX_HEAD bytes and HTTP_MAX_HEADERS lines
 * (431), chunk-size lines HTTP_MAX_LINE, buffered bodies HTTP_MAX_BODY
 * (413); streamed bodies go to the handler as they arrive.
 */
#ifndef AIRLOCK_AGENT_HTTP_H
#define AIRLOCK_AGENT_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct bufferevent;
struct evbuffer;
struct event_base;

#define HTTP_MAX_HEAD		(64 * 1024)
#define HTTP_MAX_HEADERS	100
#define HTTP_MAX_LINE		256		/* chunk-size line */
#define HTTP_MAX_BODY		(4 * 1024 * 1024)	/* buffered (RPC) bodies */
#define HTTP_OUT_HIGH		(1024 * 1024)	/* a streaming handler pauses above this */
#define HTTP_LINGER_S		5	/* discard an unread body this long after an early answer */

struct http_header {
	char	*name;
	char	*value;
};

struct http_req {
	char			*method;
	char			*target;	/* as sent: path?query */
	char			*path;		/* percent-decoded path, no query */
	char			*query;		/* raw query or NULL */
	int			 minor;		/* HTTP/1.minor */
	struct http_header	 hdrs[HTTP_MAX_HEADERS];
	int			 nhdrs;
	int64_t			 content_length; /* -1: none */
	int			 chunked;
	int			 keepalive;
	int			 expect_continue;
	char			*buf;		/* owns every string above */
};

/*
 * Parse a complete request head (through the empty line). 0, or -1 with
 * *status (400, 431, 501, 505) and *err. Pure: the fuzzer calls it.
 */
int http_parse_head(const char *buf, size_t len, struct http_req *req, int *status,
    const char **err);
void http_req_clear(struct http_req *req);
/* Case-insensitive header lookup; first match or NULL. */
const char *http_req_header(const struct http_req *req, const char *name);
/* Percent-decoded value of a query parameter (malloc'd), or NULL. */
char *http_query_get(const char *query, const char *name);
/* Percent-decode len bytes into a new string; NULL on a bad escape or NUL byte. */
char *http_pct_decode(const char *s, size_t len, int plus_is_space);

/* Incremental chunked-body decoder over evbuffers. */
struct http_chunked {
	int		 state;
	uint64_t	 left;		/* bytes left in the current chunk */
};
/*
 * Move decoded body bytes from in to out. Returns 1 when the last chunk
 * and trailers were read, 0 when it needs more input, -1 on bad framing.
 */
int http_chunked_step(struct http_chunked *c, struct evbuffer *in, struct evbuffer *out,
    const char **err);

struct http_conn;

/* What a route does with one request; every member may be NULL. */
struct http_handler {
	/*
	 * Body bytes as they arrive (dechunked). Return -1 after replying to
	 * stop reading. NULL: the server buffers up to HTTP_MAX_BODY and the
	 * handler reads it with http_body() in end.
	 */
	int	(*body)(struct http_conn *, struct evbuffer *);
	/* The whole request is in; reply now or later. */
	void	(*end)(struct http_conn *);
	/* Output fell below HTTP_OUT_HIGH (streaming responses resume). */
	void	(*drain)(struct http_conn *);
	/* The connection goes away: forget the conn pointer. */
	void	(*abort)(struct http_conn *);
};

/* Route a parsed head: set the handler (and optionally reply at once). */
typedef void http_route_fn(struct http_conn *, const struct http_req *);

/* Serve HTTP on fd (a connected socket, owned from now on). */
int http_conn_new(struct event_base *base, int fd, http_route_fn *route);

void http_set_handler(struct http_conn *, const struct http_handler *, void *ctx);
void *http_ctx(struct http_conn *);
const struct http_req *http_request(struct http_conn *);
struct evbuffer *http_body(struct http_conn *);

/* Whole responses. An empty body always goes out with Content-Length: 0. */
void http_reply(struct http_conn *, int status, const char *ctype, const void *body,
    size_t len);
void http_reply_buf(struct http_conn *, int status, const char *ctype, struct evbuffer *);
/* Stream fd's bytes (len of them); the fd is closed after. */
void http_reply_file(struct http_conn *, int status, const char *ctype, int fd,
    uint64_t len);
/* Streaming: chunked encoding, each write flushed as one chunk. */
void http_stream_start(struct http_conn *, int status, const char *ctype);
void http_stream_write(struct http_conn *, const void *data, size_t len);
void http_stream_end(struct http_conn *);
/* Bytes queued for the client (for back-pressure). */
size_t http_out_len(struct http_conn *);
int http_responded(struct http_conn *);
const char *http_status_text(int status);

#endif
