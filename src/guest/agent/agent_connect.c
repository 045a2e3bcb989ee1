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

#include <event2/buffer.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_http.h"

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
connect_send_json(struct http_conn *hc, int status, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (s == NULL) {
		http_reply(hc, 500, "application/json",
		    "{\"code\":\"internal\",\"message\":\"encoding failed\"}", 48);
		return;
	}
	http_reply(hc, status, "application/json", s, strlen(s));
	free(s);
}

void
connect_reply(struct http_conn *hc, json_t *msg)
{
	connect_send_json(hc, 200, msg);
}

void
connect_error(struct http_conn *hc, const char *code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	connect_send_json(hc, connect_http_status(code),
	    json_pack("{s:s, s:s}", "code", code, "message", msg));
}

void
connect_error_errno(struct http_conn *hc, int err, const char *fmt, ...)
{
	char what[768], msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof(msg), "%s: %s (%s)", what, errno_name(err), strerror(err));
	connect_send_json(hc, connect_http_status(errno_connect_code(err)),
	    json_pack("{s:s, s:s, s:s}", "code", errno_connect_code(err), "message", msg,
	    "errno", errno_name(err)));
}

void
connect_stream_start(struct http_conn *hc)
{
	http_stream_start(hc, 200, "application/connect+json");
}

static void
connect_envelope(struct http_conn *hc, uint8_t flags, const char *s, size_t len)
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
	http_stream_write(hc, buf, len + 5);
	free(buf);
}

void
connect_stream_msg(struct http_conn *hc, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (s == NULL)
		return;
	connect_envelope(hc, 0, s, strlen(s));
	free(s);
}

void
connect_stream_end(struct http_conn *hc, const char *code, const char *msg)
{
	json_t *end;
	char *s;

	if (!http_responded(hc))
		connect_stream_start(hc);
	if (code != NULL)
		end = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message",
		    msg != NULL ? msg : code);
	else
		end = json_object();
	s = json_dumps(end, JSON_COMPACT);
	json_decref(end);
	if (s != NULL) {
		connect_envelope(hc, CONNECT_FLAG_END, s, strlen(s));
		free(s);
	}
	http_stream_end(hc);
}

json_t *
connect_request(struct http_conn *hc, int streaming)
{
	const struct http_req *req = http_request(hc);
	struct evbuffer *body = http_body(hc);
	const char *ctype = http_req_header(req, "Content-Type"), *err = NULL;
	const uint8_t *msg;
	size_t len = evbuffer_get_length(body), msglen;
	json_error_t jerr;
	uint8_t flags, *p;
	json_t *j;

	if (streaming) {
		if (ctype == NULL || strncasecmp(ctype, "application/connect+json", 24) != 0) {
			http_reply(hc, 415, "application/json",
			    "{\"code\":\"unimplemented\",\"message\":\"content type must be application/connect+json\"}",
			    84);
			return NULL;
		}
		p = evbuffer_pullup(body, -1);
		if (connect_env_parse(p, len, &flags, &msg, &msglen, &err) == -1) {
			connect_stream_end(hc, "invalid_argument", err);
			return NULL;
		}
		if (flags & CONNECT_FLAG_END) {
			connect_stream_end(hc, "invalid_argument", "request is an end-stream envelope");
			return NULL;
		}
	} else {
		if (ctype == NULL || strncasecmp(ctype, "application/json", 16) != 0) {
			connect_error(hc, "unimplemented", "content type must be application/json");
			return NULL;
		}
		msg = evbuffer_pullup(body, -1);
		msglen = len;
	}
	if (msglen == 0)
		return json_object();
	j = json_loadb((const char *)msg, msglen, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL || !json_is_object(j)) {
		json_decref(j);
		if (streaming)
			connect_stream_end(hc, "invalid_argument", "request is not a JSON object");
		else
			connect_error(hc, "invalid_argument", "request is not a JSON object: %s",
			    jerr.text);
		return NULL;
	}
	return j;
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

static const char b64chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *
b64_encode(const void *data, size_t len)
{
	const uint8_t *p = data;
	char *out, *o;
	size_t i;
	uint32_t v;

	if ((out = malloc((len + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	for (i = 0, o = out; i + 2 < len; i += 3) {
		v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = b64chars[v >> 18];
		*o++ = b64chars[(v >> 12) & 63];
		*o++ = b64chars[(v >> 6) & 63];
		*o++ = b64chars[v & 63];
	}
	if (i < len) {
		v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = b64chars[v >> 18];
		*o++ = b64chars[(v >> 12) & 63];
		*o++ = i + 1 < len ? b64chars[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

int
b64_decode(const char *s, uint8_t **out, size_t *outlen)
{
	size_t len = strlen(s), i, n = 0;
	uint32_t acc = 0;
	int bits = 0, pad = 0;
	const char *c;
	uint8_t *o;

	if ((o = malloc(len / 4 * 3 + 3)) == NULL)
		return -1;
	for (i = 0; i < len; i++) {
		if (s[i] == '=') {
			pad++;
			continue;
		}
		/* Accept the URL-safe alphabet too; reject anything else. */
		if (pad > 0 || (c = strchr(b64chars, s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i])) == NULL ||
		    s[i] == '\0') {
			free(o);
			return -1;
		}
		acc = acc << 6 | (uint32_t)(c - b64chars);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[n++] = (uint8_t)(acc >> bits);
		}
	}
	if (pad > 2) {
		free(o);
		return -1;
	}
	*out = o;
	*outlen = n;
	return 0;
}
