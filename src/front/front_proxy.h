/*
 * One client request passed on to the worker as it comes: the head
 * re-written from what the strict parser accepted (hop-by-hop headers and
 * any forwarding header the client sent dropped, X-Forwarded-For and
 * X-Forwarded-Proto set), the body streamed with its own framing, the
 * answer streamed back chunk by chunk (SSE included) with back-pressure
 * both ways, an upgrade (WebSocket) turned into a tunnel. Nothing is
 * buffered beyond the high-water marks and nothing has a stream timeout.
 */
#ifndef AIRLOCK_FRONT_PROXY_H
#define AIRLOCK_FRONT_PROXY_H

struct bufferevent;
struct http_req;

/*
 * Pass req to the server at the other end of up (a connecting or
 * connected bufferevent, owned from now on). proto is "http" or "https",
 * the scheme the client used. Answers 503 itself when up fails before the
 * worker answered.
 */
void front_proxy(struct http_req *req, struct bufferevent *up, const char *proto);

/*
 * The headers a request is passed on with: the client's end-to-end ones
 * (hop-by-hop, forwarding and Host dropped), Upgrade when it asks for one,
 * then X-Forwarded-For and X-Forwarded-Proto. NULL-terminated, malloc'd.
 */
char **front_request_headers(struct http_req *req, const char *proto);
void front_headers_free(char **v);

/*
 * The front's own error answer, in both error shapes the API's clients
 * read: airlock's {"error":{"code","message"}} and E2B's {"code","message"}.
 */
void front_reply_error(struct http_req *req, int status, const char *code, const char *msg);

#endif
