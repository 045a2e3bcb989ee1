/*
 * HTTP/1.1 request-head parser and streaming body decoder. Pure functions on
 * byte buffers (no I/O), shared by the API server and the egress gateway, and
 * fuzzed (fuzz/fuzz_http.c). Strict: anything ambiguous (obs-fold, both
 * Content-Length and Transfer-Encoding, duplicate Content-Length, bare LF in
 * the head) is rejected, because two parsers disagreeing on message
 * boundaries is how request smuggling works.
 */
#ifndef AIRLOCK_HTTP_PARSE_H
#define AIRLOCK_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_HEAD_MAX		(16 * 1024)	/* request line + headers */
#define HTTP_HEADERS_MAX	100
#define HTTP_TARGET_MAX		8192
#define HTTP_CHUNK_LINE_MAX	1024

struct http_header {
	char	*name;		/* as sent; compare with strcasecmp */
	char	*value;		/* leading/trailing whitespace trimmed */
};

struct http_head {
	char			*method;
	char			*target;	/* request-target as sent */
	int			 minor;		/* HTTP/1.<minor> */
	struct http_header	*headers;
	size_t			 nheaders;
	int			 chunked;	/* Transfer-Encoding: chunked */
	int64_t			 content_length;	/* -1 if absent */
	int			 keep_alive;
	int			 expect_continue;
	int			 upgrade;	/* Connection: upgrade + Upgrade header */
};

/* RFC 9110 tchar: a byte that may appear in a token (a method, a header name). */
int http_tchar(unsigned char c);
/* 1 if s is a token of 1 to maxlen tchars. */
int http_token_valid(const char *s, size_t maxlen);

/*
 * Parse a request head from buf. Returns the number of bytes consumed
 * (through the blank line) on success, 0 when more bytes are needed, -1 on
 * a malformed head with *status set (400, 414, 431, 501, 505) and a cause.
 */
ssize_t http_parse_head(const char *buf, size_t len, struct http_head *h, int *status,
    char **cause);
void http_head_free(struct http_head *h);
const char *http_head_get(const struct http_head *h, const char *name);

/* Streaming body decoder: Content-Length or chunked. */
enum http_body_state { HTTP_BODY_MORE, HTTP_BODY_DONE, HTTP_BODY_ERROR };

struct http_body {
	int		 chunked;
	int64_t		 remaining;	/* bytes left in the body or current chunk */
	int		 cstate;	/* chunked sub-state */
	char		 line[HTTP_CHUNK_LINE_MAX];
	size_t		 linelen;
	uint64_t	 total;		/* decoded bytes so far */
	uint64_t	 max;		/* 0 = unlimited */
};

void http_body_init(struct http_body *b, const struct http_head *h, uint64_t max);
/*
 * Decode from in; decoded payload bytes are handed to cb (which may be
 * called several times). *consumed tells how much of in was used; bytes
 * after the end of the body belong to the next request.
 */
enum http_body_state http_body_feed(struct http_body *b, const char *in, size_t len,
    size_t *consumed, void (*cb)(void *arg, const char *data, size_t n), void *arg,
    char **cause);

const char *http_status_text(int status);
/* The JSON error code for a status ("headers_too_large" for 431, ...). */
const char *http_error_code(int status);
/* Split target into a percent-decoded path and the raw query (malloc'd). */
int http_split_target(const char *target, char **path, char **query);
/*
 * A query string split into decoded parameters, strictly: a bad %-escape,
 * %00, invalid UTF-8, a parameter without a name or one given twice is an
 * error (with a cause naming the parameter), never a silently absent value.
 * Decoding is form style ('+' is a space). A bare name has the value "".
 */
#define HTTP_QUERY_PARAMS_MAX	32
struct http_qparam {
	char	*name;
	char	*value;
};
struct http_query {
	struct http_qparam	*params;
	size_t			 n;
	char			*bad;	/* after a failure: the parameter at fault, if named */
};
/* Free q with http_query_free after a failure too (it may hold bad). */
int http_query_parse(const char *query, struct http_query *q, char **cause);
/* The value of name, or NULL when absent; valid until http_query_free. */
const char *http_query_value(const struct http_query *q, const char *name);
void http_query_free(struct http_query *q);
/* Percent-decode; -1 on bad escapes or an embedded NUL. */
int http_pct_decode(const char *in, size_t len, char **out);
/*
 * s percent-encoded for a URL: ASCII letters, digits and the bytes in keep
 * stay, every other byte becomes %XX (malloc'd). keep "-._~/" for a path
 * or a query value, "-_~" for one path segment ("." and "/" encoded, so
 * an id like "../keys" stays one segment).
 */
char *http_pct_encode(const char *s, const char *keep);

/*
 * Parse a response head (client side, e.g. the CLI). Returns bytes consumed,
 * 0 when more are needed, -1 with a cause on a malformed head. *code gets the
 * status; h->method/target stay NULL. Framing is in h->chunked and
 * h->content_length (-1: delimited by close, unless http_response_has_body
 * says there is no body at all).
 */
ssize_t http_parse_response_head(const char *buf, size_t len, struct http_head *h, int *code,
    char **cause);
/* 1xx, 204 and 304 responses, and answers to HEAD, never carry a body. */
int http_response_has_body(const char *method, int code);

#endif
