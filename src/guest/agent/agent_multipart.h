/*
 * Streaming multipart/form-data parser for POST /files. It keeps the
 * file-name exactly as sent (E2B sends the full target path there, which
 * generic parsers strip to a base name) and never holds more than one
 * part's header block (MP_MAX_HEAD) plus a delimiter's worth of body.
 */
#ifndef AIRLOCK_AGENT_MULTIPART_H
#define AIRLOCK_AGENT_MULTIPART_H

#include <stddef.h>

struct evbuffer;

#define MP_MAX_BOUNDARY		70	/* RFC 2046 */
#define MP_MAX_HEAD		8192	/* one part's headers */
#define MP_MAX_NAME		4096	/* name / filename values */

struct mp_callbacks {
	/* Return -1 to stop the parse (the caller has replied). */
	int	(*begin)(void *arg, const char *name, const char *filename);
	int	(*data)(void *arg, const void *data, size_t len);
	int	(*end)(void *arg);
};

struct mp_parser {
	char			 delim[MP_MAX_BOUNDARY + 5];	/* "\r\n--" boundary */
	size_t			 dlen;
	int			 state;
	struct evbuffer		*buf;
	const struct mp_callbacks *cb;
	void			*arg;
	const char		*err;
};

/* From a Content-Type value; -1 when it is not multipart/form-data with a boundary. */
int mp_boundary(const char *ctype, char *out, size_t outlen);
int mp_init(struct mp_parser *mp, const char *boundary, const struct mp_callbacks *cb,
    void *arg);
/* Feed n body bytes. -1 on a parse error (mp->err) or a callback's -1. */
int mp_feed(struct mp_parser *mp, const void *data, size_t n);
/* 1 when the closing delimiter was seen. */
int mp_done(const struct mp_parser *mp);
void mp_free(struct mp_parser *mp);

#endif
