/*
 * multipart/form-data, streamed (see agent_multipart.h). The body is
 * treated as if it began with CRLF so that every delimiter, the first
 * included, is "\r\n--boundary".
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "guest/agent/agent_multipart.h"

enum { MP_PREAMBLE, MP_AFTER_DELIM, MP_HEADERS, MP_BODY, MP_DONE, MP_ERROR };

int
mp_boundary(const char *ctype, char *out, size_t outlen)
{
	const char *p, *end;
	size_t len;

	if (ctype == NULL || strncasecmp(ctype, "multipart/form-data", 19) != 0)
		return -1;
	for (p = ctype + 19; (p = strchr(p, ';')) != NULL; ) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9) != 0)
			continue;
		p += 9;
		if (*p == '"') {
			p++;
			if ((end = strchr(p, '"')) == NULL)
				return -1;
		} else
			end = p + strcspn(p, "; \t");
		len = (size_t)(end - p);
		if (len == 0 || len > MP_MAX_BOUNDARY || len >= outlen)
			return -1;
		memcpy(out, p, len);
		out[len] = '\0';
		return 0;
	}
	return -1;
}

int
mp_init(struct mp_parser *mp, const char *boundary, const struct mp_callbacks *cb, void *arg)
{
	size_t bl = strlen(boundary);

	memset(mp, 0, sizeof(*mp));
	if (bl == 0 || bl > MP_MAX_BOUNDARY)
		return -1;
	memcpy(mp->delim, "\r\n--", 4);
	memcpy(mp->delim + 4, boundary, bl);
	mp->dlen = 4 + bl;
	mp->cb = cb;
	mp->arg = arg;
	if ((mp->buf = evbuffer_new()) == NULL)
		return -1;
	evbuffer_add(mp->buf, "\r\n", 2);
	mp->state = MP_PREAMBLE;
	return 0;
}

void
mp_free(struct mp_parser *mp)
{
	if (mp->buf != NULL)
		evbuffer_free(mp->buf);
	mp->buf = NULL;
}

int
mp_done(const struct mp_parser *mp)
{
	return mp->state == MP_DONE;
}

/* Value of param (name= or filename=) in a Content-Disposition value; malloc'd. */
static char *
mp_param(const char *v, const char *param)
{
	size_t pl = strlen(param), n;
	const char *p = v;
	char *out, *o;

	while ((p = strchr(p, ';')) != NULL) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, param, pl) != 0 || p[pl] != '=')
			continue;
		p += pl + 1;
		if ((out = malloc(MP_MAX_NAME + 1)) == NULL)
			return NULL;
		o = out;
		n = 0;
		if (*p == '"') {
			for (p++; *p != '\0' && *p != '"'; p++) {
				if (*p == '\\' && p[1] != '\0')
					p++;
				if (n++ == MP_MAX_NAME) {
					free(out);
					return NULL;
				}
				*o++ = *p;
			}
			if (*p != '"') {
				free(out);
				return NULL;
			}
		} else {
			for (; *p != '\0' && *p != ';' && *p != ' ' && *p != '\t'; p++) {
				if (n++ == MP_MAX_NAME) {
					free(out);
					return NULL;
				}
				*o++ = *p;
			}
		}
		*o = '\0';
		return out;
	}
	return NULL;
}

static int
mp_headers(struct mp_parser *mp, char *head)
{
	char *line, *next, *colon, *v, *name = NULL, *filename = NULL;
	int rc;

	for (line = head; line != NULL && *line != '\0'; line = next) {
		if ((next = strstr(line, "\r\n")) != NULL) {
			*next = '\0';
			next += 2;
		}
		if ((colon = strchr(line, ':')) == NULL) {
			mp->err = "malformed part header";
			free(name);
			free(filename);
			return -1;
		}
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		if (strcasecmp(line, "Content-Disposition") != 0)
			continue;
		if (strncasecmp(v, "form-data", 9) != 0) {
			mp->err = "part is not form-data";
			free(name);
			free(filename);
			return -1;
		}
		free(name);
		free(filename);
		name = mp_param(v, "name");
		filename = mp_param(v, "filename");
	}
	if (name == NULL) {
		free(filename);
		mp->err = "part without a name";
		return -1;
	}
	rc = mp->cb->begin(mp->arg, name, filename);
	free(name);
	free(filename);
	return rc;
}

/* Hand the first n buffered bytes to the data callback, chain by chain. */
static int
mp_emit(struct mp_parser *mp, size_t n)
{
	struct evbuffer_iovec v;
	size_t len;

	while (n > 0) {
		if (evbuffer_peek(mp->buf, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
			return -1;
		len = v.iov_len < n ? v.iov_len : n;
		if (mp->cb->data(mp->arg, v.iov_base, len) == -1)
			return -1;
		evbuffer_drain(mp->buf, len);
		n -= len;
	}
	return 0;
}

int
mp_feed(struct mp_parser *mp, const void *data, size_t n)
{
	struct evbuffer_ptr pos;
	size_t len;
	char two[2], *head;

	if (mp->state == MP_ERROR)
		return -1;
	if (evbuffer_add(mp->buf, data, n) == -1)
		goto fail;
	for (;;) {
		len = evbuffer_get_length(mp->buf);
		switch (mp->state) {
		case MP_PREAMBLE:
		case MP_BODY:
			pos = evbuffer_search(mp->buf, mp->delim, mp->dlen, NULL);
			if (pos.pos < 0) {
				/* Keep what could still be the start of a delimiter. */
				if (len >= mp->dlen) {
					if (mp->state == MP_BODY) {
						if (mp_emit(mp, len - (mp->dlen - 1)) == -1)
							goto fail;
					} else
						evbuffer_drain(mp->buf, len - (mp->dlen - 1));
				}
				return 0;
			}
			if (mp->state == MP_BODY) {
				if (pos.pos > 0 && mp_emit(mp, (size_t)pos.pos) == -1)
					goto fail;
				if (mp->cb->end(mp->arg) == -1)
					goto fail;
			} else
				evbuffer_drain(mp->buf, (size_t)pos.pos);
			evbuffer_drain(mp->buf, mp->dlen);
			mp->state = MP_AFTER_DELIM;
			break;
		case MP_AFTER_DELIM:
			if (len < 2)
				return 0;
			evbuffer_copyout(mp->buf, two, 2);
			if (two[0] == '-' && two[1] == '-') {
				mp->state = MP_DONE;
				break;
			}
			if (two[0] != '\r' || two[1] != '\n') {
				mp->err = "garbage after a boundary";
				goto fail;
			}
			evbuffer_drain(mp->buf, 2);
			mp->state = MP_HEADERS;
			break;
		case MP_HEADERS:
			if (len >= 2) {
				evbuffer_copyout(mp->buf, two, 2);
				if (two[0] == '\r' && two[1] == '\n') {
					/* A part with no headers has no name: refuse it. */
					mp->err = "part without headers";
					goto fail;
				}
			}
			pos = evbuffer_search(mp->buf, "\r\n\r\n", 4, NULL);
			if (pos.pos < 0) {
				if (len > MP_MAX_HEAD) {
					mp->err = "part headers too large";
					goto fail;
				}
				return 0;
			}
			if ((size_t)pos.pos > MP_MAX_HEAD || (head = malloc((size_t)pos.pos + 1)) == NULL) {
				mp->err = "part headers too large";
				goto fail;
			}
			evbuffer_remove(mp->buf, head, (size_t)pos.pos);
			head[pos.pos] = '\0';
			evbuffer_drain(mp->buf, 4);
			if (strlen(head) != (size_t)pos.pos) {
				free(head);
				mp->err = "NUL in part headers";
				goto fail;
			}
			if (mp_headers(mp, head) == -1) {
				free(head);
				goto fail;
			}
			free(head);
			mp->state = MP_BODY;
			break;
		case MP_DONE:
			/* The epilogue is ignored. */
			evbuffer_drain(mp->buf, len);
			return 0;
		default:
			return -1;
		}
	}
fail:
	mp->state = MP_ERROR;
	return -1;
}
