/* Strict HTTP/1.1 request parsing (RFC 9112) for untrusted peers. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <strings.h>

#include "http/http_parse.h"
#include "common/util.h"

enum { CH_SIZE, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_DONE };

int
http_tchar(unsigned char c)
{
	if (isalnum(c))
		return 1;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int
http_token_valid(const char *s, size_t maxlen)
{
	size_t n;

	for (n = 0; s[n] != '\0'; n++)
		if (n == maxlen || !http_tchar((unsigned char)s[n]))
			return 0;
	return n > 0;
}

/*
 * Copy n bytes of a buffer that is not NUL-terminated. strndup() may look
 * past n for the terminator (ASan's strict_string_checks flags exactly
 * that on network buffers), so copy by length instead.
 */
static char *
http_strndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static int
bad(int *status, int code, char **cause, const char *msg)
{
	*status = code;
	cause_set(cause, "%s", msg);
	return -1;
}

static const char *
find_crlfcrlf(const char *buf, size_t len)
{
	return memmem(buf, len, "\r\n\r\n", 4);
}

/* Does a comma-separated header value contain token (case-insensitive)? */
static int
has_token(const char *value, const char *token)
{
	size_t tl = strlen(token);
	const char *p = value;

	while (*p != '\0') {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
			m--;
		if (m == tl && strncasecmp(p, token, tl) == 0)
			return 1;
		p += n;
	}
	return 0;
}

static int
parse_request_line(const char *line, size_t len, struct http_head *h, int *status,
    char **cause)
{
	const char *sp1, *sp2, *end = line + len;
	size_t i;

	if ((sp1 = memchr(line, ' ', len)) == NULL || sp1 == line)
		return bad(status, 400, cause, "malformed request line");
	for (i = 0; line + i < sp1; i++)
		if (!http_tchar((unsigned char)line[i]))
			return bad(status, 400, cause, "invalid method");
	if ((sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1))) == NULL || sp2 == sp1 + 1)
		return bad(status, 400, cause, "malformed request line");
	if ((size_t)(sp2 - sp1 - 1) > HTTP_TARGET_MAX)
		return bad(status, 414, cause, "request target too long");
	for (i = 1; sp1 + i < sp2; i++) {
		unsigned char c = (unsigned char)sp1[i];
		if (c <= 0x20 || c >= 0x7f)
			return bad(status, 400, cause, "invalid character in request target");
	}
	/*
	 * 505 only for a well-formed version we do not speak (HTTP/2.0): a raw
	 * space in the target leaves a second space before the version, and a
	 * lower-case or garbled version is a malformed request line (400).
	 */
	if (memchr(sp2 + 1, ' ', (size_t)(end - sp2 - 1)) != NULL)
		return bad(status, 400, cause, "space in request target (send it as %20)");
	if (end - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/", 5) != 0 ||
	    !isdigit((unsigned char)sp2[6]) || sp2[7] != '.' || !isdigit((unsigned char)sp2[8]))
		return bad(status, 400, cause, "malformed HTTP version (want HTTP/1.1)");
	if (sp2[6] != '1' || (sp2[8] != '0' && sp2[8] != '1'))
		return bad(status, 505, cause, "only HTTP/1.0 and HTTP/1.1 are supported");
	h->method = http_strndup(line, (size_t)(sp1 - line));
	h->target = http_strndup(sp1 + 1, (size_t)(sp2 - sp1 - 1));
	if (h->method == NULL || h->target == NULL)
		return bad(status, 500, cause, "out of memory");
	h->minor = sp2[8] - '0';
	return 0;
}

static int
parse_header_line(const char *line, size_t len, struct http_head *h, int *status,
    char **cause)
{
	const char *colon = memchr(line, ':', len), *v, *ve;
	size_t i;

	if (len > 0 && (line[0] == ' ' || line[0] == '\t'))
		return bad(status, 400, cause, "obsolete header line folding");
	if (colon == NULL || colon == line)
		return bad(status, 400, cause, "malformed header line");
	for (i = 0; line + i < colon; i++)
		if (!http_tchar((unsigned char)line[i]))
			return bad(status, 400, cause, "invalid header name");
	v = colon + 1;
	ve = line + len;
	for (const char *p = v; p < ve; p++) {
		unsigned char c = (unsigned char)*p;
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return bad(status, 400, cause, "invalid character in header value");
	}
	while (v < ve && (*v == ' ' || *v == '\t'))
		v++;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;
	if (h->nheaders >= HTTP_HEADERS_MAX)
		return bad(status, 431, cause, "too many headers");
	h->headers = xreallocarray(h->headers, h->nheaders + 1, sizeof(*h->headers));
	h->headers[h->nheaders].name = http_strndup(line, (size_t)(colon - line));
	h->headers[h->nheaders].value = http_strndup(v, (size_t)(ve - v));
	h->nheaders++;
	return 0;
}

static int
parse_content_length(const char *v, int64_t *out)
{
	int64_t n = 0;

	if (*v == '\0')
		return -1;
	for (; *v != '\0'; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		if (n > (INT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (*v - '0');
	}
	*out = n;
	return 0;
}

/* Interpret the framing and connection headers. */
static int
head_semantics(struct http_head *h, int *status, char **cause)
{
	const char *conn = NULL;
	int have_te = 0, have_cl = 0, have_host = 0;
	size_t i;

	h->content_length = -1;
	for (i = 0; i < h->nheaders; i++) {
		const char *n = h->headers[i].name, *v = h->headers[i].value;

		if (strcasecmp(n, "content-length") == 0) {
			int64_t cl;
			if (parse_content_length(v, &cl) == -1)
				return bad(status, 400, cause, "invalid Content-Length");
			if (have_cl && cl != h->content_length)
				return bad(status, 400, cause, "conflicting Content-Length headers");
			have_cl = 1;
			h->content_length = cl;
		} else if (strcasecmp(n, "transfer-encoding") == 0) {
			if (have_te || strcasecmp(v, "chunked") != 0)
				return bad(status, 501, cause, "only Transfer-Encoding: chunked is supported");
			have_te = 1;
			h->chunked = 1;
		} else if (strcasecmp(n, "connection") == 0)
			conn = v;
		else if (strcasecmp(n, "host") == 0) {
			if (have_host)
				return bad(status, 400, cause, "duplicate Host header");
			have_host = 1;
		} else if (strcasecmp(n, "expect") == 0) {
			if (strcasecmp(v, "100-continue") != 0)
				return bad(status, 417, cause, "unsupported Expect");
			h->expect_continue = 1;
		}
	}
	if (have_te && have_cl)
		return bad(status, 400, cause, "both Transfer-Encoding and Content-Length");
	if (h->minor == 1 && !have_host)
		return bad(status, 400, cause, "HTTP/1.1 request without Host");
	if (h->chunked && h->minor == 0)
		return bad(status, 400, cause, "chunked encoding in an HTTP/1.0 request");
	h->keep_alive = h->minor == 1;
	if (conn != NULL) {
		if (has_token(conn, "close"))
			h->keep_alive = 0;
		else if (has_token(conn, "keep-alive"))
			h->keep_alive = 1;
		if (has_token(conn, "upgrade") && http_head_get(h, "upgrade") != NULL)
			h->upgrade = 1;
	}
	return 0;
}

ssize_t
http_parse_head(const char *buf, size_t len, struct http_head *h, int *status, char **cause)
{
	const char *end, *line, *eol;
	size_t scan, skip = 0;

	memset(h, 0, sizeof(*h));
	*status = 0;
	/* Tolerate a few empty lines before the request line (RFC 9112 2.2). */
	while (skip < 8 && skip + 1 < len && buf[skip] == '\r' && buf[skip + 1] == '\n')
		skip += 2;
	buf += skip;
	len -= skip;
	scan = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
	if ((end = find_crlfcrlf(buf, scan)) == NULL) {
		if (len >= HTTP_HEAD_MAX)
			return bad(status, 431, cause, "request head too large");
		if (memchr(buf, '\0', len) != NULL)
			return bad(status, 400, cause, "NUL byte in request head");
		return 0;
	}
	if (memchr(buf, '\0', (size_t)(end - buf)) != NULL)
		return bad(status, 400, cause, "NUL byte in request head");
	line = buf;
	eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
	if (memchr(line, '\n', (size_t)(eol - line)) != NULL)
		goto bare_lf;
	if (parse_request_line(line, (size_t)(eol - line), h, status, cause) == -1)
		goto fail;
	for (line = eol + 2; line < end + 2; line = eol + 2) {
		eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
		if (memchr(line, '\n', (size_t)(eol - line)) != NULL ||
		    memchr(line, '\r', (size_t)(eol - line)) != NULL)
			goto bare_lf;
		if (parse_header_line(line, (size_t)(eol - line), h, status, cause) == -1)
			goto fail;
	}
	if (head_semantics(h, status, cause) == -1)
		goto fail;
	return (ssize_t)(end + 4 - buf + (ptrdiff_t)skip);
bare_lf:
	bad(status, 400, cause, "bare CR or LF in request head");
fail:
	http_head_free(h);
	return -1;
}

void
http_head_free(struct http_head *h)
{
	size_t i;

	for (i = 0; i < h->nheaders; i++) {
		free(h->headers[i].name);
		free(h->headers[i].value);
	}
	free(h->headers);
	free(h->method);
	free(h->target);
	memset(h, 0, sizeof(*h));
}

const char *
http_head_get(const struct http_head *h, const char *name)
{
	size_t i;

	for (i = 0; i < h->nheaders; i++)
		if (strcasecmp(h->headers[i].name, name) == 0)
			return h->headers[i].value;
	return NULL;
}

void
http_body_init(struct http_body *b, const struct http_head *h, uint64_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
	b->chunked = h->chunked;
	if (h->chunked)
		b->cstate = CH_SIZE;
	else
		b->remaining = h->content_length > 0 ? h->content_length : 0;
}

static int
parse_chunk_size(const char *line, int64_t *out)
{
	int64_t n = 0;
	size_t digits = 0;

	for (; isxdigit((unsigned char)*line); line++, digits++) {
		int d = isdigit((unsigned char)*line) ? *line - '0' :
		    (tolower((unsigned char)*line) - 'a' + 10);
		if (n > (INT64_MAX >> 4))
			return -1;
		n = (n << 4) | d;
	}
	if (digits == 0)
		return -1;
	/* Chunk extensions are allowed and ignored; whitespace before ';' too. */
	while (*line == ' ' || *line == '\t')
		line++;
	if (*line != '\0' && *line != ';')
		return -1;
	*out = n;
	return 0;
}

static enum http_body_state
body_error(char **cause, const char *msg)
{
	cause_set(cause, "%s", msg);
	return HTTP_BODY_ERROR;
}

/* Collect one CRLF-terminated line into b->line; 1 when complete. */
static int
chunk_line(struct http_body *b, const char *in, size_t len, size_t *pos, char **cause,
    int *err)
{
	while (*pos < len) {
		char c = in[(*pos)++];
		if (c == '\n') {
			if (b->linelen == 0 || b->line[b->linelen - 1] != '\r') {
				*err = 1;
				cause_set(cause, "chunk line not terminated by CRLF");
				return 0;
			}
			b->line[--b->linelen] = '\0';
			return 1;
		}
		/*
		 * A proxy passes chunk lines on as they are: a bare CR (a line
		 * end to a lenient parser) or another control byte would let
		 * it and the next hop disagree where the body ends.
		 */
		if ((b->linelen > 0 && b->line[b->linelen - 1] == '\r') ||
		    ((unsigned char)c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
			*err = 1;
			cause_set(cause, "control character in chunk line");
			return 0;
		}
		if (b->linelen >= sizeof(b->line) - 1) {
			*err = 1;
			cause_set(cause, "chunk line too long");
			return 0;
		}
		b->line[b->linelen++] = c;
	}
	return 0;
}

enum http_body_state
http_body_feed(struct http_body *b, const char *in, size_t len, size_t *consumed,
    void (*cb)(void *arg, const char *data, size_t n), void *arg, char **cause)
{
	size_t pos = 0, n;
	int err = 0;

	*consumed = 0;
	if (!b->chunked) {
		n = (uint64_t)b->remaining < len ? (size_t)b->remaining : len;
		if (b->max != 0 && b->total + n > b->max)
			return body_error(cause, "request body too large");
		if (n > 0)
			cb(arg, in, n);
		b->remaining -= (int64_t)n;
		b->total += n;
		*consumed = n;
		return b->remaining == 0 ? HTTP_BODY_DONE : HTTP_BODY_MORE;
	}
	while (pos < len || b->cstate == CH_DONE) {
		switch (b->cstate) {
		case CH_SIZE:
			if (!chunk_line(b, in, len, &pos, cause, &err)) {
				if (err)
					return HTTP_BODY_ERROR;
				break;
			}
			if (parse_chunk_size(b->line, &b->remaining) == -1)
				return body_error(cause, "invalid chunk size");
			b->linelen = 0;
			b->cstate = b->remaining == 0 ? CH_TRAILER : CH_DATA;
			continue;
		case CH_DATA:
			n = (uint64_t)b->remaining < len - pos ? (size_t)b->remaining : len - pos;
			if (b->max != 0 && b->total + n > b->max)
				return body_error(cause, "request body too large");
			cb(arg, in + pos, n);
			pos += n;
			b->total += n;
			b->remaining -= (int64_t)n;
			if (b->remaining == 0)
				b->cstate = CH_DATA_CR;
			continue;
		case CH_DATA_CR:
			if (in[pos++] != '\r')
				return body_error(cause, "chunk data not followed by CRLF");
			b->cstate = CH_DATA_LF;
			continue;
		case CH_DATA_LF:
			if (in[pos++] != '\n')
				return body_error(cause, "chunk data not followed by CRLF");
			b->cstate = CH_SIZE;
			continue;
		case CH_TRAILER:
			/* Trailer fields are read and dropped; an empty line ends the body. */
			if (!chunk_line(b, in, len, &pos, cause, &err)) {
				if (err)
					return HTTP_BODY_ERROR;
				break;
			}
			if (b->linelen == 0)
				b->cstate = CH_DONE;
			b->linelen = 0;
			continue;
		case CH_DONE:
			*consumed = pos;
			return HTTP_BODY_DONE;
		}
		break;
	}
	*consumed = pos;
	return HTTP_BODY_MORE;
}

const char *
http_status_text(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 417: return "Expectation Failed";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
}

/*
 * The JSON error code for a status the server itself answers (framing,
 * limits): each status its own code, as docs/api.md lists them, so a
 * client can tell "not HTTP/1.x" from "headers too large" without reading
 * the message.
 */
const char *
http_error_code(int status)
{
	switch (status) {
	case 408: return "timeout";
	case 413: return "too_large";
	case 414: return "uri_too_long";
	case 417: return "expectation_failed";
	case 431: return "headers_too_large";
	case 500: return "internal";
	case 501: return "not_implemented";
	case 503: return "unavailable";
	case 505: return "http_version_not_supported";
	default: return status >= 500 ? "internal" : "bad_request";
	}
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
http_pct_decode(const char *in, size_t len, char **out)
{
	char *o = xmalloc(len + 1), *p = o;
	size_t i;

	for (i = 0; i < len; i++) {
		if (in[i] == '%') {
			int hi, lo;
			/* %00 would truncate the string under the caller: refuse it. */
			if (i + 2 >= len || (hi = hexval(in[i + 1])) < 0 ||
			    (lo = hexval(in[i + 2])) < 0 || (hi == 0 && lo == 0)) {
				free(o);
				return -1;
			}
			*p++ = (char)(hi << 4 | lo);
			i += 2;
		} else if (in[i] == '\0') {
			free(o);
			return -1;
		} else
			*p++ = in[i] == '+' ? ' ' : in[i];
	}
	*p = '\0';
	*out = o;
	return 0;
}

char *
http_pct_encode(const char *s, const char *keep)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(strlen(s) * 3 + 1), *o = out;

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;
		/* ASCII ranges, not isalnum(): locales would let high bytes through. */
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr(keep, ch) != NULL)
			*o++ = (char)ch;
		else {
			*o++ = '%';
			*o++ = hex[ch >> 4];
			*o++ = hex[ch & 15];
		}
	}
	*o = '\0';
	return out;
}

int
http_split_target(const char *target, char **path, char **query)
{
	const char *q = strchr(target, '?');
	size_t plen = q ? (size_t)(q - target) : strlen(target);

	*path = *query = NULL;
	if (target[0] != '/')
		return -1;
	/* '+' is literal in paths: decode it back after the shared decoder. */
	char *raw = xstrndup(target, plen), *r;
	for (r = raw; *r != '\0'; r++)
		if (*r == '+')
			*r = '\x01';
	if (http_pct_decode(raw, plen, path) == -1) {
		free(raw);
		return -1;
	}
	free(raw);
	for (r = *path; *r != '\0'; r++)
		if (*r == '\x01')
			*r = '+';
	*query = xstrdup(q ? q + 1 : "");
	return 0;
}

/* Decode one query name or value: form style ('+' is a space), UTF-8, no NUL. */
static int
query_decode(const char *in, size_t len, char **out)
{
	if (http_pct_decode(in, len, out) == -1)
		return -1;
	if (!utf8_valid(*out, strlen(*out))) {
		free(*out);
		*out = NULL;
		return -2;
	}
	return 0;
}

int
http_query_parse(const char *query, struct http_query *q, char **cause)
{
	const char *p = query;
	char *name, *value, *bad = NULL;
	size_t i;
	int rc;

	memset(q, 0, sizeof(*q));
	while (*p != '\0') {
		size_t n = strcspn(p, "&");
		const char *eq = memchr(p, '=', n);
		size_t nlen = eq != NULL ? (size_t)(eq - p) : n;

		if (n == 0) {		/* "a=1&&b=2", a trailing '&': nothing there */
			p++;
			continue;
		}
		if (q->n == HTTP_QUERY_PARAMS_MAX) {
			cause_set(cause, "query: more than %d parameters", HTTP_QUERY_PARAMS_MAX);
			goto fail;
		}
		if (nlen == 0) {
			cause_set(cause, "query: a parameter without a name");
			goto fail;
		}
		if (query_decode(p, nlen, &name) != 0) {
			cause_set(cause, "query: a parameter name with bad percent-encoding, a NUL "
			    "or invalid UTF-8");
			goto fail;
		}
		for (i = 0; i < q->n; i++)
			if (strcmp(q->params[i].name, name) == 0)
				break;
		if (i < q->n) {
			cause_set(cause, "%s: query parameter given more than once", name);
			bad = name;
			goto fail;
		}
		rc = query_decode(eq != NULL ? eq + 1 : p + n, eq != NULL ? n - nlen - 1 : 0, &value);
		if (rc != 0) {
			cause_set(cause, "%s: %s", name, rc == -1 ? "bad percent-encoding (%XX with "
			    "two hex digits, never %00)" : "not valid UTF-8");
			bad = name;
			goto fail;
		}
		q->params = xreallocarray(q->params, q->n + 1, sizeof(*q->params));
		q->params[q->n].name = name;
		q->params[q->n].value = value;
		q->n++;
		p += n;
		if (*p == '&')
			p++;
	}
	return 0;
fail:
	http_query_free(q);
	q->bad = bad;
	return -1;
}

const char *
http_query_value(const struct http_query *q, const char *name)
{
	size_t i;

	for (i = 0; i < q->n; i++)
		if (strcmp(q->params[i].name, name) == 0)
			return q->params[i].value;
	return NULL;
}

void
http_query_free(struct http_query *q)
{
	size_t i;

	for (i = 0; i < q->n; i++) {
		free(q->params[i].name);
		free(q->params[i].value);
	}
	free(q->params);
	free(q->bad);
	memset(q, 0, sizeof(*q));
}

/* "HTTP/1.x NNN reason": the reason phrase is optional and ignored. */
static int
parse_status_line(const char *line, size_t len, struct http_head *h, int *code, char **cause)
{
	int status = 0, i;

	if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 || (line[7] != '0' && line[7] != '1') ||
	    line[8] != ' ') {
		cause_set(cause, "malformed status line");
		return -1;
	}
	for (i = 9; i < 12; i++) {
		if (line[i] < '0' || line[i] > '9') {
			cause_set(cause, "malformed status code");
			return -1;
		}
		status = status * 10 + (line[i] - '0');
	}
	if (status < 100 || (len > 12 && line[12] != ' ')) {
		cause_set(cause, "malformed status code");
		return -1;
	}
	for (i = 13; (size_t)i < len; i++) {
		unsigned char c = (unsigned char)line[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			cause_set(cause, "invalid character in reason phrase");
			return -1;
		}
	}
	h->minor = line[7] - '0';
	*code = status;
	return 0;
}

ssize_t
http_parse_response_head(const char *buf, size_t len, struct http_head *h, int *code,
    char **cause)
{
	const char *end, *line, *eol, *conn;
	size_t scan, i;
	int status, have_cl = 0;

	memset(h, 0, sizeof(*h));
	h->content_length = -1;
	*code = 0;
	scan = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
	if ((end = find_crlfcrlf(buf, scan)) == NULL) {
		if (len >= HTTP_HEAD_MAX) {
			cause_set(cause, "response head too large");
			return -1;
		}
		if (memchr(buf, '\0', len) != NULL) {
			cause_set(cause, "NUL byte in response head");
			return -1;
		}
		return 0;
	}
	if (memchr(buf, '\0', (size_t)(end - buf)) != NULL) {
		cause_set(cause, "NUL byte in response head");
		return -1;
	}
	line = buf;
	eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
	if (memchr(line, '\n', (size_t)(eol - line)) != NULL ||
	    parse_status_line(line, (size_t)(eol - line), h, code, cause) == -1)
		goto fail;
	for (line = eol + 2; line < end + 2; line = eol + 2) {
		eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
		if (memchr(line, '\n', (size_t)(eol - line)) != NULL ||
		    memchr(line, '\r', (size_t)(eol - line)) != NULL) {
			cause_set(cause, "bare CR or LF in response head");
			goto fail;
		}
		if (parse_header_line(line, (size_t)(eol - line), h, &status, cause) == -1)
			goto fail;
	}
	/* Same framing rules as for requests: ambiguity is an error, not a guess. */
	for (i = 0; i < h->nheaders; i++) {
		const char *n = h->headers[i].name, *v = h->headers[i].value;
		int64_t cl;

		if (strcasecmp(n, "content-length") == 0) {
			if (parse_content_length(v, &cl) == -1 ||
			    (have_cl && cl != h->content_length)) {
				cause_set(cause, "invalid Content-Length in response");
				goto fail;
			}
			have_cl = 1;
			h->content_length = cl;
		} else if (strcasecmp(n, "transfer-encoding") == 0) {
			if (h->chunked || strcasecmp(v, "chunked") != 0) {
				cause_set(cause, "unsupported Transfer-Encoding in response");
				goto fail;
			}
			h->chunked = 1;
		}
	}
	if (h->chunked && have_cl) {
		cause_set(cause, "both Transfer-Encoding and Content-Length in response");
		goto fail;
	}
	h->keep_alive = h->minor == 1;
	if ((conn = http_head_get(h, "connection")) != NULL) {
		if (has_token(conn, "close"))
			h->keep_alive = 0;
		else if (has_token(conn, "keep-alive"))
			h->keep_alive = 1;
	}
	return end + 4 - buf;
fail:
	http_head_free(h);
	*code = 0;
	return -1;
}

int
http_response_has_body(const char *method, int code)
{
	if (method != NULL && strcmp(method, "HEAD") == 0)
		return 0;
	return !(code < 200 || code == 204 || code == 304);
}
