/*
 * Connect protocol v1 with JSON (the only variant the E2B SDKs use): unary
 * calls are a JSON body answered with JSON; server streams take one
 * enveloped request and answer with envelopes, always ending with exactly
 * one end-stream envelope (flag 0x02), errors included (HTTP stays 200).
 * Envelope: u8 flags, u32 big-endian length, message bytes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "guest/agent/agent.h"
#include "http/http_server.h"

#define CONNECT_FLAG_COMPRESSED	0x01
#define CONNECT_FLAG_END	0x02

int
connect_env_parse(const uint8_t *buf, size_t len, uint8_t *flags, const uint8_t **msg,
    size_t *msglen, const char **err)
{
	uint32_t n;

	if (len < 5) {
		*err = "short envelope";
		return -1;
	}
	*flags = buf[0];
	n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
	if (*flags & CONNECT_FLAG_COMPRESSED) {
		*err = "compressed envelopes are not supported";
		return -1;
	}
	if (*flags & ~(uint8_t)CONNECT_FLAG_END) {
		*err = "unknown envelope flags";
		return -1;
	}
	if (n > CONNECT_MAX_MSG) {
		*err = "message too large";
		return -1;
	}
	if ((size_t)n != len - 5) {
		*err = n > len - 5 ? "truncated envelope" : "trailing bytes after envelope";
		return -1;
	}
	*msg = buf + 5;
	*msglen = n;
	return 0;
}

int
connect_http_status(const char *code)
{
	static const struct { const char *code; int status; } map[] = {
		{ "canceled", 499 }, { "unknown", 500 }, { "invalid_argument", 400 },
		{ "deadline_exceeded", 504 }, { "not_found", 404 }, { "already_exists", 409 },
		{ "permission_denied", 403 }, { "resource_exhausted", 429 },
		{ "failed_precondition", 400 }, { "aborted", 409 }, { "out_of_range", 400 },
		{ "unimplemented", 501 }, { "internal", 500 }, { "unavailable", 503 },
		{ "data_loss", 500 }, { "unauthenticated", 401 },
	};
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		if (strcmp(map[i].code, code) == 0)
			return map[i].status;
	}
	return 500;
}

static void
connect_send_json(struct http_req *req, int status, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (s == NULL) {
		http_reply(req, 500, "application/json",
		    "{\"code\":\"internal\",\"message\":\"encoding failed\"}", 48);
		return;
	}
	http_reply(req, status, "application/json", s, strlen(s));
	free(s);
}

void
connect_reply(struct http_req *req, json_t *msg)
{
	connect_send_json(req, 200, msg);
}

void
connect_error(struct http_req *req, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	connect_send_json(req, connect_http_status(code),
	    json_pack("{s:s, s:s}", "code", code, "message", msg));
}

void
connect_error_errno(struct http_req *req, int err, const char *fmt, ...)
{
	char what[768], msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof(msg), "%s: %s (%s)", what, errno_name(err), strerror(err));
	connect_send_json(req, connect_http_status(errno_connect_code(err)),
	    json_pack("{s:s, s:s, s:s}", "code", errno_connect_code(err), "message", msg,
	    "errno", errno_name(err)));
}

void
connect_stream_start(struct http_req *req)
{
	http_reply_start(req, 200, "application/connect+json");
}

static void
connect_envelope(struct http_req *req, uint8_t flags, const char *s, size_t len)
{
	uint8_t *buf;

	if ((buf = malloc(len + 5)) == NULL)
		return;
	buf[0] = flags;
	buf[1] = (uint8_t)(len >> 24);
	buf[2] = (uint8_t)(len >> 16);
	buf[3] = (uint8_t)(len >> 8);
	buf[4] = (uint8_t)len;
	memcpy(buf + 5, s, len);
	/* One envelope = one chunk, so every message is flushed on its own. */
	http_reply_chunk(req, buf, len + 5);
	free(buf);
}

void
connect_stream_msg(struct http_req *req, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (s == NULL)
		return;
	connect_envelope(req, 0, s, strlen(s));
	free(s);
}

void
connect_stream_end(struct http_req *req, const char *code, const char *msg)
{
	json_t *end;
	char *s;

	if (!http_req_replied(req))
		connect_stream_start(req);
	if (code != NULL)
		end = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message",
		    msg != NULL ? msg : code);
	else
		end = json_object();
	s = json_dumps(end, JSON_COMPACT);
	json_decref(end);
	if (s != NULL) {
		connect_envelope(req, CONNECT_FLAG_END, s, strlen(s));
		free(s);
	}
	http_reply_end(req);
}

json_t *
connect_request(struct http_req *req, int streaming)
{
	const char *ctype = http_req_header(req, "Content-Type"), *err = NULL;
	size_t len, msglen;
	const uint8_t *body = (const uint8_t *)http_req_body(req, &len), *msg;
	json_error_t jerr;
	uint8_t flags;
	json_t *j;

	if (streaming) {
		if (ctype == NULL || strncasecmp(ctype, "application/connect+json", 24) != 0) {
			http_reply(req, 415, "application/json",
			    "{\"code\":\"unimplemented\",\"message\":\"content type must be application/connect+json\"}",
			    84);
			return NULL;
		}
		if (connect_env_parse(body, len, &flags, &msg, &msglen, &err) == -1) {
			connect_stream_end(req, "invalid_argument", err);
			return NULL;
		}
		if (flags & CONNECT_FLAG_END) {
			connect_stream_end(req, "invalid_argument", "request is an end-stream envelope");
			return NULL;
		}
	} else {
		if (ctype == NULL || strncasecmp(ctype, "application/json", 16) != 0) {
			connect_error(req, "unimplemented", "content type must be application/json");
			return NULL;
		}
		msg = body;
		msglen = len;
	}
	if (msglen == 0)
		return json_object();
	j = json_loadb((const char *)msg, msglen, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL || !json_is_object(j)) {
		json_decref(j);
		if (streaming)
			connect_stream_end(req, "invalid_argument", "request is not a JSON object");
		else
			connect_error(req, "invalid_argument", "request is not a JSON object: %s",
			    jerr.text);
		return NULL;
	}
	return j;
}

void
connect_route(struct http_req *req, const char *service, const struct connect_method *table,
    const char *method)
{
	for (; table->name != NULL; table++) {
		if (strcmp(method, table->name) == 0) {
			http_req_buffer(req, CONNECT_MAX_MSG + 5, table->end, NULL);
			return;
		}
	}
	connect_error(req, "unimplemented", "no method %s/%s", service, method);
}

json_t *
jget(json_t *obj, const char *camel, const char *snake)
{
	json_t *v;

	if (!json_is_object(obj))
		return NULL;
	if ((v = json_object_get(obj, camel)) != NULL)
		return v;
	return snake != NULL ? json_object_get(obj, snake) : NULL;
}

int64_t
jint(json_t *v, int64_t def)
{
	char *end;
	long long n;

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_real(v)) {
		double d = json_real_value(v);

		/* Out of range (or NaN) would be undefined behaviour to convert. */
		if (!(d > -9.2e18 && d < 9.2e18))
			return def;
		return (int64_t)d;
	}
	if (json_is_string(v)) {
		n = strtoll(json_string_value(v), &end, 10);
		if (*end == '\0' && end != json_string_value(v))
			return n;
	}
	return def;
}
