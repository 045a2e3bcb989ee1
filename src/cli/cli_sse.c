/* text/event-stream parsing for the CLI (see cli_sse.h). */
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
