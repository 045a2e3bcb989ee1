/*
 * HTTP/1.1 client for the guest agent's envd API, over one agent channel
 * stream per request (streams are cheap; no connection reuse needed).
 * Request bodies are fixed or streamed (chunked); responses stream to the
 * caller. Connect server streams are decoded into JSON messages.
 */
#ifndef AIRLOCK_ENVD_CLIENT_H
#define AIRLOCK_ENVD_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

struct agent_client;
struct envd_req;
struct http_head;

#define ENVD_PORT		49983
#define ENVD_JSON_MAX		(8 * 1024 * 1024)
#define ENVD_CONNECT_MSG_MAX	(4 * 1024 * 1024)

struct envd_cb {
	/* Response status and headers arrived (headers "Name: value\r\n..."). */
	void	(*head)(struct envd_req *, int status, const char *ctype, void *arg);
	/* Decoded response body bytes. */
	void	(*data)(struct envd_req *, const char *data, size_t n, void *arg);
	/* Exactly once, last: error NULL when the response ended cleanly. */
	void	(*done)(struct envd_req *, const char *error, void *arg);
	/* Output toward the guest drained (streamed request bodies). */
	void	(*drain)(struct envd_req *, void *arg);
};

/*
 * Start a request. body_len >= 0 sends body as the whole request body;
 * body_len == -1 sends a chunked body written later with envd_req_write()
 * and ended with envd_req_end(). extra_headers: "Name: value" strings, NULL-terminated.
 */
struct envd_req *envd_request(struct agent_client *ac, const char *method, const char *target,
    const char *ctype, const void *body, ssize_t body_len, const char *const *extra_headers,
    const struct envd_cb *cb, void *arg, char **cause);
/*
 * The same HTTP/1.1 client to any guest port (a server of the sandbox's
 * own, e.g. E2B's getHost(port)), sending host as the Host header. With
 * ENVD_REQ_UPGRADE the request asks to switch protocols (WebSocket): on a
 * 101 the head callback runs with status 101, and from then on the stream
 * is a tunnel: data gets every byte from the guest until it closes, and
 * envd_req_write sends raw bytes (no chunk framing).
 */
#define ENVD_REQ_UPGRADE	0x01
struct envd_req *envd_request_port(struct agent_client *ac, uint16_t port, const char *host,
    int flags, const char *method, const char *target, const char *ctype, const void *body,
    ssize_t body_len, const char *const *extra_headers, const struct envd_cb *cb, void *arg,
    char **cause);
/* Valid inside the head callback only: the response head with every header. */
const struct http_head *envd_req_response_head(const struct envd_req *r);
void envd_req_write(struct envd_req *r, const void *data, size_t n);
void envd_req_end(struct envd_req *r);
size_t envd_req_pending(const struct envd_req *r);
/* Stop reading the response (back-pressure) or continue. */
void envd_req_pause(struct envd_req *r, int paused);
/*
 * Pace r's answer by a byte budget it may share with other requests (a
 * sandbox's streams): each chunk read is charged to b, and while b is in
 * debt r stops reading until a timer finds it out, so the agent holds the
 * process writing it (back-pressure reaches the guest). Independent of
 * envd_req_pause: r reads when neither holds it. b must stay valid while
 * r can still deliver data (until its done callback or a cancel).
 */
struct tbucket;
void envd_req_pace(struct envd_req *r, struct tbucket *b);
/* Abort: no more callbacks; the stream is reset. */
void envd_req_cancel(struct envd_req *r);

/* Unary JSON call (envd REST or Connect unary): cb gets the status and parsed JSON (may be NULL). */
typedef void (*envd_json_cb)(int status, json_t *resp, const char *error, void *arg);
struct envd_req *envd_call_json(struct agent_client *ac, const char *method, const char *target,
    json_t *body, const char *const *extra_headers, envd_json_cb cb, void *arg, char **cause);

/*
 * Connect server stream: sends one enveloped request message and reports
 * every response message; end gets the end-stream error (NULL = clean).
 */
typedef void (*envd_msg_cb)(json_t *msg, void *arg);
typedef void (*envd_end_cb)(const char *error, void *arg);
struct envd_req *envd_stream(struct agent_client *ac, const char *service_method, json_t *req,
    const char *const *extra_headers, envd_msg_cb on_msg, envd_end_cb on_end, void *arg,
    char **cause);

/*
 * How airlockd answers when the guest agent answered with an error. A
 * client's mistake the guest refuses (a missing path, EXDEV, ENOTEMPTY,
 * a FIFO) is passed on as a 4xx with the agent's message, which names the
 * errno; 5xx are the guest's own failures (500 guest_error, 503 out of
 * resources, 504 a filesystem that stopped answering, 507 no space).
 * 502 agent_error is kept for answers that mean the agent link or the
 * agent itself is broken (unknown code, bad token, unknown method).
 * Pure; unit-tested.
 */
struct envd_error {
	int		 status;
	const char	*code;		/* airlockd's error code */
};
/* A Connect error (unary calls): its code and the "errno" name the agent adds (may be NULL). */
void envd_error_from_connect(const char *connect_code, const char *errname,
    struct envd_error *e);
/* A REST error answer (/files): its HTTP status. */
void envd_error_from_status(int status, struct envd_error *e);

/* Connect envelope decoder (pure; tested and fuzzed). */
struct connect_dec {
	unsigned char	 hdr[5];
	size_t		 hdrlen;
	unsigned char	*msg;
	size_t		 msglen, want;
	int		 flags;
};
/* Feed bytes; calls cb(flags, msg, len, arg) per complete envelope; -1 on a bad envelope. */
int connect_dec_feed(struct connect_dec *d, const char *data, size_t n,
    int (*cb)(int flags, const unsigned char *msg, size_t len, void *arg), void *arg,
    char **cause);
void connect_dec_free(struct connect_dec *d);

#endif
