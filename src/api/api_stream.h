/* Talking to a sandbox's agent on behalf of an API call: headers, SSE bridges. */
#ifndef AIRLOCK_API_STREAM_H
#define AIRLOCK_API_STREAM_H

#include <jansson.h>

#include "api/api.h"

struct sandbox;
struct envd_req;

#define API_AGENT_HEADERS_MAX	8

/*
 * Headers every agent call carries: Basic user and access token, plus the
 * Connect version for unary Connect calls (envd_stream adds its own).
 */
struct api_agent_headers {
	const char	*h[API_AGENT_HEADERS_MAX + 1];
	char		*auth, *token, *extra[3];
};
void api_agent_headers(struct api_agent_headers *ah, struct sandbox *sb, const char *user,
    int connect_unary);
/* One more "Name: value" (formatted and kept); at most three per set. */
void api_agent_headers_add(struct api_agent_headers *ah, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void api_agent_headers_free(struct api_agent_headers *ah);

/*
 * A Connect unary call to the agent for an API call. Transport failures
 * answer 502; a Connect error answer is mapped by envd_error_from_connect
 * (client mistakes the guest refuses are 4xx, naming the errno) with the
 * agent's message. Only a 200 reaches ok(c, resp, flag), which must reply.
 */
typedef void (*api_unary_fn)(struct api_call *c, json_t *resp, int flag);
void api_agent_unary(struct api_call *c, struct sandbox *sb, const char *user,
    const char *method, json_t *body, api_unary_fn ok, int flag);

/*
 * An SSE response fed by a Connect server stream from the agent: on_msg
 * turns each agent message into SSE events; the stream's end closes the
 * response (with an "error" event first when it failed). A client that
 * leaves cancels the stream, never the work in the guest. The stream
 * reads no faster than its client takes the events (nothing held beyond
 * HTTP_OUTPUT_HIGH_WATER) and than the sandbox's stream budget allows
 * (stream_rate_per_sandbox); either way the agent holds the process
 * writing the output.
 */
struct api_stream;
typedef void (*api_stream_msg_fn)(struct api_stream *st, json_t *msg);
struct api_stream {
	struct api_call		*call;
	struct sandbox		*sb;
	struct envd_req		*req;
	api_stream_msg_fn	 on_msg;
	int			 flags;		/* API_STREAM_EXEC, the rest for on_msg */
	int			 held;		/* the client's output is full: reading paused */
};
#define API_STREAM_EXEC	0x100	/* starts a process: counts against max_execs_per_sandbox */
/*
 * Replies 429 when the sandbox holds max_streams_per_sandbox streams (or
 * max_execs_per_sandbox exec starts), 502 (500 for a NULL body) when the
 * stream cannot start; returns -1 then.
 */
int api_stream_start(struct api_call *c, struct sandbox *sb, const char *method, json_t *body,
    const char *const *headers, api_stream_msg_fn on_msg, int flags);

#endif
