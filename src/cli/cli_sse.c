/* text/event-stream parsing and base64 for the CLI (see cli_sse.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_sse.h"
#include "common/util.h"

void
cli_sse_init(struct cli_sse *s, cli_sse_cb cb, void *arg)
{
	memset(s, 0, sizeof(*s));
	s->cb = cb;
	s->arg = arg;
}

void
cli_sse_free(struct cli_sse *s)
{
	free(s->line);
	free(s->data);
	s->line = s->data = NULL;
	s->linelen = s->linecap = s->datalen = s->datacap = 0;
}

/* Grow *buf to hold need bytes plus a NUL, doubling to keep appends linear. */
static void
cli_sse_reserve(char **buf, size_t *cap, size_t need)
{
	size_t ncap = *cap == 0 ? 256 : *cap;

	if (need + 1 <= *cap)
		return;
	while (ncap < need + 1)
		ncap *= 2;
	*buf = xreallocarray(*buf, 1, ncap);
	*cap = ncap;
}

static int
cli_sse_dispatch(struct cli_sse *s, char **cause)
{
	int rv = 0;

	/* An event with no data lines is not dispatched (per the SSE spec). */
	if (s->have_data) {
		cli_sse_reserve(&s->data, &s->datacap, s->datalen);
		s->data[s->datalen] = '\0';
		s->nevents++;
		if (s->cb(s->arg, s->event[0] != '\0' ? s->event : "message", s->data,
		    s->datalen) == -1) {
			cause_set(cause, "stream processing stopped");
			rv = -1;
		}
	}
	s->event[0] = '\0';
	s->datalen = 0;
	s->have_data = 0;
	return rv;
}

/* One complete line (without its terminator). */
static int
cli_sse_line(struct cli_sse *s, const char *line, size_t len, char **cause)
{
	const char *colon, *v;
	size_t nlen, vlen;

	if (len == 0)
		return cli_sse_dispatch(s, cause);
	if (line[0] == ':')
		return 0;	/* comment: heartbeats */
	colon = memchr(line, ':', len);
	nlen = colon != NULL ? (size_t)(colon - line) : len;
	v = colon != NULL ? colon + 1 : line + len;
	vlen = colon != NULL ? len - nlen - 1 : 0;
	if (vlen > 0 && *v == ' ') {
		v++;
		vlen--;
	}
	if (nlen == 5 && memcmp(line, "event", 5) == 0) {
		if (vlen > CLI_SSE_EVENT_NAME_MAX || memchr(v, '\0', vlen) != NULL) {
			cause_set(cause, "event name too long or invalid");
			return -1;
		}
		memcpy(s->event, v, vlen);
		s->event[vlen] = '\0';
	} else if (nlen == 4 && memcmp(line, "data", 4) == 0) {
		size_t add = vlen + (s->have_data ? 1 : 0);
		if (s->datalen + add > CLI_SSE_DATA_MAX) {
			cause_set(cause, "event data over %d bytes", CLI_SSE_DATA_MAX);
			return -1;
		}
		cli_sse_reserve(&s->data, &s->datacap, s->datalen + add);
		if (s->have_data)
			s->data[s->datalen++] = '\n';
		memcpy(s->data + s->datalen, v, vlen);
		s->datalen += vlen;
		s->have_data = 1;
	}
	/* id, retry and unknown fields: nothing the CLI needs. */
	return 0;
}

int
cli_sse_feed(struct cli_sse *s, const char *buf, size_t len, char **cause)
{
	size_t i = 0, start;

	while (i < len) {
		if (s->last_cr) {
			s->last_cr = 0;
			if (buf[i] == '\n') {
				i++;
				continue;
			}
		}
		start = i;
		while (i < len && buf[i] != '\n' && buf[i] != '\r')
			i++;
		if (s->linelen + (i - start) > CLI_SSE_LINE_MAX) {
			cause_set(cause, "event stream line over %d bytes", CLI_SSE_LINE_MAX);
			return -1;
		}
		if (i == len) {
			/* Incomplete: keep it for the next piece. */
			cli_sse_reserve(&s->line, &s->linecap, s->linelen + (i - start));
			memcpy(s->line + s->linelen, buf + start, i - start);
			s->linelen += i - start;
			break;
		}
		s->last_cr = buf[i] == '\r';
		if (s->linelen == 0) {
			if (cli_sse_line(s, buf + start, i - start, cause) == -1)
				return -1;
		} else {
			cli_sse_reserve(&s->line, &s->linecap, s->linelen + (i - start));
			memcpy(s->line + s->linelen, buf + start, i - start);
			s->linelen += i - start;
			/* The callback may not re-enter; line is ours until reset. */
			if (cli_sse_line(s, s->line, s->linelen, cause) == -1) {
				s->linelen = 0;
				return -1;
			}
			s->linelen = 0;
		}
		i++;
	}
	return 0;
}

static const char cli_b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t
cli_b64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

void
cli_b64_encode(const void *in, size_t n, char *out)
{
	const unsigned char *p = in;
	size_t i;
	char *o = out;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = cli_b64_alphabet[v >> 18 & 63];
		*o++ = cli_b64_alphabet[v >> 12 & 63];
		*o++ = cli_b64_alphabet[v >> 6 & 63];
		*o++ = cli_b64_alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = cli_b64_alphabet[v >> 18 & 63];
		*o++ = cli_b64_alphabet[v >> 12 & 63];
		*o++ = i + 1 < n ? cli_b64_alphabet[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
}

static int
cli_b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
cli_b64_decode(const char *in, size_t len, unsigned char *out, size_t *outlen)
{
	size_t i, o = 0;

	*outlen = 0;
	if (len % 4 != 0)
		return -1;
	for (i = 0; i < len; i += 4) {
		int a = cli_b64_value((unsigned char)in[i]);
		int b = cli_b64_value((unsigned char)in[i + 1]);
		int c = cli_b64_value((unsigned char)in[i + 2]);
		int d = cli_b64_value((unsigned char)in[i + 3]);
		int last = i + 4 == len;

		if (a < 0 || b < 0)
			return -1;
		if (c < 0 && !(last && in[i + 2] == '=' && in[i + 3] == '='))
			return -1;
		if (d < 0 && !(last && in[i + 3] == '='))
			return -1;
		out[o++] = (unsigned char)(a << 2 | b >> 4);
		if (c >= 0)
			out[o++] = (unsigned char)((b & 15) << 4 | c >> 2);
		if (c >= 0 && d >= 0)
			out[o++] = (unsigned char)((c & 3) << 6 | d);
	}
	*outlen = o;
	return 0;
}
