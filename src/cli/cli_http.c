/*
 * HTTP/1.1 client for airlockd (see cli_http.h). Heads are parsed with the
 * strict common parser, bodies decoded with the shared streaming decoder.
 */
#include <sys/socket.h>
#include <sys/types.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli_http.h"
#include "http/http_parse.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"

struct cli_api {
	char		*url;		/* base URL as given, for messages */
	char		*host;
	char		*port;
	char		*prefix;	/* path prefix, "" or "/x" */
	char		*hosthdr;
	char		*key;		/* NULL: none found */
	char		*key_origin;	/* "AIRLOCK_API_KEY" or the key file */
	char		*key_problem;	/* why there is no key, for 401 hints */
	struct cli_conn	*conn;
};

struct cli_conn {
	struct cli_api	*api;
	int		 fd;
	int		 timeout_ms;
	int		 reused;	/* fd already carried a response */
	char		*buf;		/* read, not yet consumed */
	size_t		 len;

	/* The response being read. */
	int		 status;
	struct http_head head;
	struct http_body body;
	int		 in_body;
	int		 until_close;	/* body delimited by the connection closing */
	int		 keep;
	cli_http_sink	 sink;
	void		*sink_arg;
	char		*sink_cause;
	int		 sink_failed;
};

/* Result of one read attempt. */
#define CLI_READ_EOF	0
#define CLI_READ_AGAIN	(-2)
#define CLI_READ_ERR	(-1)

static int
cli_api_parse_url(struct cli_api *api, const char *url, char **cause)
{
	const char *p, *hend, *slash;
	char *hostport;

	if (strncasecmp(url, "https://", 8) == 0) {
		cause_set(cause, "AIRLOCK_URL %s: https is not supported by the CLI; "
		    "reach a remote daemon through an SSH tunnel", url);
		return -1;
	}
	if (strncasecmp(url, "http://", 7) != 0) {
		cause_set(cause, "AIRLOCK_URL %s: must start with http://", url);
		return -1;
	}
	p = url + 7;
	slash = strchr(p, '/');
	hostport = slash ? xstrndup(p, (size_t)(slash - p)) : xstrdup(p);
	if (hostport[0] == '[') {
		if ((hend = strchr(hostport, ']')) == NULL)
			goto bad;
		api->host = xstrndup(hostport + 1, (size_t)(hend - hostport - 1));
		hend++;
	} else {
		hend = strchr(hostport, ':');
		if (hend == NULL)
			hend = hostport + strlen(hostport);
		api->host = xstrndup(hostport, (size_t)(hend - hostport));
	}
	if (*hend == ':') {
		char *end;
		long port = strtol(hend + 1, &end, 10);
		if (hend[1] == '\0' || *end != '\0' || port < 1 || port > 65535)
			goto bad;
		xasprintf(&api->port, "%ld", port);
	} else if (*hend == '\0')
		api->port = xstrdup("80");
	else
		goto bad;
	if (api->host[0] == '\0')
		goto bad;
	for (const char *h = hostport; *h != '\0'; h++)
		if ((unsigned char)*h <= 0x20 || *h == 0x7f)
			goto bad;
	api->hosthdr = hostport;
	api->prefix = xstrdup(slash ? slash : "");
	/* "http://h:1/" and "http://h:1" are the same base. */
	while (api->prefix[0] != '\0' && api->prefix[strlen(api->prefix) - 1] == '/')
		api->prefix[strlen(api->prefix) - 1] = '\0';
	for (const char *q = api->prefix; *q != '\0'; q++)
		if ((unsigned char)*q <= 0x20 || *q == 0x7f || *q == '?' || *q == '#')
			goto bad;
	return 0;
bad:
	free(hostport);
	cause_set(cause, "AIRLOCK_URL %s: expected http://HOST[:PORT]", url);
	return -1;
}

/* A key goes into a header line: printable ASCII without spaces only. */
static int
cli_api_key_ok(const char *k)
{
	if (*k == '\0')
		return 0;
	for (; *k != '\0'; k++)
		if ((unsigned char)*k <= 0x20 || (unsigned char)*k >= 0x7f)
			return 0;
	return 1;
}

/* Is the daemon on this host? Only then may the local admin key go to it. */
static int
cli_api_loopback(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (strcasecmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

static void
cli_api_load_key(struct cli_api *api)
{
	const char *env = getenv("AIRLOCK_API_KEY");
	char *path, *data = NULL, *cause = NULL;
	size_t len;

	if (env != NULL && *env != '\0') {
		api->key_origin = xstrdup("AIRLOCK_API_KEY");
		if (!cli_api_key_ok(env)) {
			api->key_problem = xstrdup("AIRLOCK_API_KEY contains spaces or "
			    "control characters");
			return;
		}
		api->key = xstrdup(env);
		return;
	}
	if (!cli_api_loopback(api->host)) {
		api->key_origin = xstrdup("nowhere");
		xasprintf(&api->key_problem, "no API key: set AIRLOCK_API_KEY (this host's admin "
		    "key is only sent to a daemon on this host, not %s)", api->host);
		return;
	}
	path = paths_data("admin.key");
	api->key_origin = xstrdup(path);
	if (read_file(path, CLI_HTTP_KEY_MAX, &data, &len, &cause) == -1) {
		xasprintf(&api->key_problem, "no API key: set AIRLOCK_API_KEY, or run as root "
		    "so the CLI can read the admin key (%s)", cause);
		free(cause);
		free(path);
		return;
	}
	free(path);
	while (len > 0 && isspace((unsigned char)data[len - 1]))
		data[--len] = '\0';
	if (!cli_api_key_ok(data)) {
		xasprintf(&api->key_problem, "%s does not hold a valid key", api->key_origin);
		free(data);
		return;
	}
	api->key = data;
}

struct cli_api *
cli_api_new(char **cause)
{
	struct cli_api *api = xcalloc(1, sizeof(*api));
	const char *url = getenv("AIRLOCK_URL");

	if (url == NULL || *url == '\0')
		url = CLI_HTTP_DEFAULT_URL;
	api->url = xstrdup(url);
	if (cli_api_parse_url(api, url, cause) == -1) {
		cli_api_free(api);
		return NULL;
	}
	cli_api_load_key(api);
	api->conn = cli_conn_new(api);
	return api;
}

void
cli_api_free(struct cli_api *api)
{
	if (api == NULL)
		return;
	cli_conn_free(api->conn);
	free(api->url);
	free(api->host);
	free(api->port);
	free(api->prefix);
	free(api->hosthdr);
	if (api->key != NULL)
		explicit_bzero(api->key, strlen(api->key));
	free(api->key);
	free(api->key_origin);
	free(api->key_problem);
	free(api);
}

const char *
cli_api_url(const struct cli_api *api)
{
	return api->url;
}

int
cli_api_has_key(const struct cli_api *api)
{
	return api->key != NULL;
}

int
cli_api_local(const struct cli_api *api)
{
	return cli_api_loopback(api->host);
}

struct cli_conn *
cli_api_conn(struct cli_api *api)
{
	return api->conn;
}

struct cli_conn *
cli_conn_new(struct cli_api *api)
{
	struct cli_conn *c = xcalloc(1, sizeof(*c));

	c->api = api;
	c->fd = -1;
	c->timeout_ms = CLI_HTTP_TIMEOUT_MS;
	c->buf = xmalloc(CLI_HTTP_BUF);
	return c;
}

static void
cli_conn_reset(struct cli_conn *c)
{
	http_head_free(&c->head);
	c->status = 0;
	c->in_body = c->until_close = c->keep = 0;
	c->sink = NULL;
	c->sink_arg = NULL;
	free(c->sink_cause);
	c->sink_cause = NULL;
	c->sink_failed = 0;
}

static void
cli_conn_close(struct cli_conn *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->len = 0;
	c->reused = 0;
}

void
cli_conn_free(struct cli_conn *c)
{
	if (c == NULL)
		return;
	cli_conn_close(c);
	cli_conn_reset(c);
	free(c->buf);
	free(c);
}

int
cli_conn_fd(const struct cli_conn *c)
{
	return c->fd;
}

size_t
cli_conn_buffered(const struct cli_conn *c)
{
	return c->len;
}

void
cli_conn_set_timeout(struct cli_conn *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

static int
cli_conn_connect(struct cli_conn *c, char **cause)
{
	struct addrinfo hints, *res, *ai;
	struct pollfd pfd;
	socklen_t sl;
	int fd = -1, err = 0, gai;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if ((gai = getaddrinfo(c->api->host, c->api->port, &hints, &res)) != 0) {
		cause_set(cause, "cannot connect to airlockd at %s: %s", c->api->url,
		    gai_strerror(gai));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
		    ai->ai_protocol);
		if (fd == -1) {
			err = errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			pfd.fd = fd;
			pfd.events = POLLOUT;
			int n;
			while ((n = poll(&pfd, 1, CLI_HTTP_CONNECT_TIMEOUT_MS)) == -1 &&
			    errno == EINTR)
				;
			sl = sizeof(err);
			if (n == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 &&
			    err == 0)
				break;
			if (n == 0)
				err = ETIMEDOUT;
		} else
			err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1) {
		cause_set(cause, "cannot connect to airlockd at %s: %s: is it running? (make up)",
		    c->api->url, strerror(err));
		return -1;
	}
	c->fd = fd;
	c->len = 0;
	c->reused = 0;
	return 0;
}

/* Wait for events on the socket; -1 with a cause on timeout. */
static int
cli_conn_wait(struct cli_conn *c, short events, char **cause)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };
	int n;

	while ((n = poll(&pfd, 1, c->timeout_ms)) == -1 && errno == EINTR)
		;
	if (n == 0) {
		cause_set(cause, "airlockd at %s did not answer within %d s", c->api->url,
		    c->timeout_ms / 1000);
		return -1;
	}
	if (n == -1) {
		cause_set(cause, "poll: %s", strerror(errno));
		return -1;
	}
	return pfd.revents;
}

static int
cli_conn_send(struct cli_conn *c, const void *data, size_t len, char **cause)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		n = send(c->fd, p, len, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (cli_conn_wait(c, POLLOUT, cause) == -1)
					return -1;
				continue;
			}
			cause_set(cause, "sending to airlockd at %s: %s", c->api->url,
			    strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One read into the buffer: bytes read, CLI_READ_EOF, _AGAIN or _ERR. */
static ssize_t
cli_conn_fill(struct cli_conn *c, int wait, char **cause)
{
	ssize_t n;

	if (c->len == CLI_HTTP_BUF) {
		cause_set(cause, "airlockd sent an oversized response head");
		return CLI_READ_ERR;
	}
	for (;;) {
		n = read(c->fd, c->buf + c->len, CLI_HTTP_BUF - c->len);
		if (n > 0) {
			c->len += (size_t)n;
			return n;
		}
		if (n == 0)
			return CLI_READ_EOF;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			cause_set(cause, "reading from airlockd at %s: %s", c->api->url,
			    strerror(errno));
			return CLI_READ_ERR;
		}
		if (!wait)
			return CLI_READ_AGAIN;
		if (cli_conn_wait(c, POLLIN, cause) == -1)
			return CLI_READ_ERR;
	}
}

/*
 * Stream upload_fd as a chunked body. Stops early (returning 1) when the
 * daemon answers before the body is complete: an error we should show
 * rather than a broken pipe.
 */
static int
cli_conn_upload(struct cli_conn *c, int fd, cli_http_progress progress, void *parg,
    char **cause)
{
	char *chunk = xmalloc(CLI_HTTP_BUF + 32);
	uint64_t sent = 0;
	struct pollfd pfd;
	ssize_t n;
	int hl, rv = -1;

	for (;;) {
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) == 1) {
			rv = 1;
			goto out;
		}
		hl = 0;
		n = read(fd, chunk + 16, CLI_HTTP_BUF);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			cause_set(cause, "read: %s", strerror(errno));
			goto out;
		}
		if (n == 0) {
			rv = cli_conn_send(c, "0\r\n\r\n", 5, cause);
			goto out;
		}
		/* The size line goes right before the data, so one send per chunk. */
		char line[16];
		hl = snprintf(line, sizeof(line), "%zx\r\n", (size_t)n);
		memcpy(chunk + 16 - hl, line, (size_t)hl);
		memcpy(chunk + 16 + n, "\r\n", 2);
		if (cli_conn_send(c, chunk + 16 - hl, (size_t)hl + (size_t)n + 2, cause) == -1) {
			/* The daemon may have answered and closed: prefer its answer. */
			if (cause != NULL) {
				free(*cause);
				*cause = NULL;
			}
			rv = 1;
			goto out;
		}
		sent += (uint64_t)n;
		if (progress != NULL)
			progress(parg, sent);
	}
out:
	free(chunk);
	return rv;
}

/* Make the daemon's text safe for a terminal: no escape sequences. */
static void
cli_http_sanitize(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* Turn an error answer into a cause, with a hint for the common cases. */
static void
cli_api_error(struct cli_api *api, int status, const char *body, size_t len, char **cause)
{
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *msg = json_string_value(json_object_get(json_object_get(j, "error"),
	    "message"));
	char *m;

	if (msg != NULL && *msg != '\0')
		m = xstrdup(msg);
	else
		xasprintf(&m, "airlockd answered %d %s", status, http_status_text(status));
	cli_http_sanitize(m);
	json_decref(j);
	if (status == 401 && api->key == NULL && api->key_problem != NULL)
		cause_set(cause, "%s: %s", m, api->key_problem);
	else if (status == 401)
		cause_set(cause, "%s (the key came from %s)", m, api->key_origin);
	else
		cause_set(cause, "%s", m);
	free(m);
}

struct cli_membuf {
	char	*data;
	size_t	 len, cap, max;
};

static int
cli_membuf_sink(void *arg, const char *data, size_t n, char **cause)
{
	struct cli_membuf *m = arg;

	if (m->len + n > m->max) {
		cause_set(cause, "airlockd's answer is larger than %zu bytes", m->max);
		return -1;
	}
	if (m->len + n + 1 > m->cap) {
		size_t ncap = m->cap == 0 ? 4096 : m->cap;
		while (ncap < m->len + n + 1)
			ncap *= 2;
		m->data = xreallocarray(m->data, 1, ncap);
		m->cap = ncap;
	}
	memcpy(m->data + m->len, data, n);
	m->len += n;
	m->data[m->len] = '\0';
	return 0;
}

static int
cli_conn_read_head(struct cli_conn *c, char **cause)
{
	ssize_t used, n;
	char *pc = NULL;

	for (;;) {
		used = http_parse_response_head(c->buf, c->len, &c->head, &c->status, &pc);
		if (used == -1) {
			cause_set(cause, "bad response from airlockd at %s: %s", c->api->url, pc);
			free(pc);
			return -1;
		}
		if (used > 0) {
			memmove(c->buf, c->buf + used, c->len - (size_t)used);
			c->len -= (size_t)used;
			if (c->status >= 200)
				return 0;
			/* 1xx interim answers precede the real one. */
			http_head_free(&c->head);
			continue;
		}
		n = cli_conn_fill(c, 1, cause);
		if (n == CLI_READ_ERR)
			return -1;
		if (n == CLI_READ_EOF) {
			cause_set(cause, "airlockd at %s closed the connection without answering",
			    c->api->url);
			return c->len == 0 ? -2 : -1;
		}
	}
}

/* The request head (malloc'd); the key is wiped from temporaries. */
static char *
cli_conn_head(struct cli_conn *c, const char *method, const char *path,
    const char *content_type, const void *body, size_t len, int chunked)
{
	struct cli_api *api = c->api;
	char *head, *auth = NULL, *ctype = NULL, *framing;

	if (api->key != NULL)
		xasprintf(&auth, "Authorization: Bearer %s\r\n", api->key);
	if (content_type != NULL)
		xasprintf(&ctype, "Content-Type: %s\r\n", content_type);
	if (chunked)
		framing = xstrdup("Transfer-Encoding: chunked\r\n");
	else if (body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	    strcmp(method, "PATCH") == 0)
		xasprintf(&framing, "Content-Length: %zu\r\n", body != NULL ? len : 0);
	else
		framing = xstrdup("");
	xasprintf(&head, "%s %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: airlock/%s\r\n"
	    "%s%s%s\r\n", method, api->prefix, path, api->hosthdr, AIRLOCK_VERSION,
	    auth ? auth : "", ctype ? ctype : "", framing);
	if (auth != NULL)
		explicit_bzero(auth, strlen(auth));
	free(auth);
	free(ctype);
	free(framing);
	return head;
}

/* The head is in: set up reading the body, or read an error body into *cause. */
static int
cli_conn_begin_body(struct cli_conn *c, const char *method, int early, char **cause)
{
	c->keep = c->head.keep_alive && !early;
	c->in_body = http_response_has_body(method, c->status);
	if (c->in_body) {
		if (c->head.chunked || c->head.content_length >= 0)
			http_body_init(&c->body, &c->head, 0);
		else {
			c->until_close = 1;
			c->keep = 0;
		}
	} else if (!c->keep)
		cli_conn_close(c);
	else
		c->reused = 1;
	if (c->status >= 300) {
		struct cli_membuf m = { .max = CLI_HTTP_ERROR_MAX };
		char *bc = NULL;
		if (cli_conn_body_all(c, cli_membuf_sink, &m, &bc) == -1) {
			/* A truncated error body still has a status worth reporting. */
			free(bc);
			cli_conn_close(c);
		}
		cli_api_error(c->api, c->status, m.data ? m.data : "", m.len, cause);
		free(m.data);
		return -1;
	}
	return c->status;
}

int
cli_conn_request(struct cli_conn *c, const char *method, const char *path,
    const char *content_type, const void *body, size_t len, int upload_fd,
    cli_http_progress progress, void *parg, int *status, char **cause)
{
	char *head;
	int retried = 0, r, early = 0;

	if (status != NULL)
		*status = 0;
	if (c->in_body) {
		/* The previous body was abandoned: its bytes would confuse this answer. */
		cli_conn_close(c);
	}
again:
	cli_conn_reset(c);
	if (c->fd == -1 && cli_conn_connect(c, cause) == -1)
		return -1;
	head = cli_conn_head(c, method, path, content_type, body, len, upload_fd >= 0);
	r = cli_conn_send(c, head, strlen(head), cause);
	explicit_bzero(head, strlen(head));
	free(head);
	if (r == 0 && body != NULL && len > 0)
		r = cli_conn_send(c, body, len, cause);
	if (r == 0 && upload_fd >= 0) {
		r = cli_conn_upload(c, upload_fd, progress, parg, cause);
		early = r == 1;
		r = r == -1 ? -1 : 0;
	}
	if (r == 0)
		r = cli_conn_read_head(c, cause);
	if (r != 0) {
		/*
		 * The daemon closes idle keep-alive connections without a
		 * word; a request on such a connection that got no answer at
		 * all goes out once more on a fresh one. (Were the daemon to
		 * take a request and die before answering, it is repeated:
		 * the same risk any HTTP client with keep-alive takes.)
		 * Uploads are never repeated: their source is consumed.
		 */
		if (c->reused && !retried && upload_fd < 0 && (r == -2 || c->len == 0)) {
			if (cause != NULL) {
				free(*cause);
				*cause = NULL;
			}
			cli_conn_close(c);
			retried = 1;
			goto again;
		}
		cli_conn_close(c);
		return -1;
	}
	if (status != NULL)
		*status = c->status;
	/* AIRLOCK_DEBUG=1 shows the conversation, never the key. */
	log_debug("%s %s%s -> %d", method, c->api->prefix, path, c->status);
	return cli_conn_begin_body(c, method, early, cause);
}

static void
cli_conn_feed_cb(void *arg, const char *data, size_t n)
{
	struct cli_conn *c = arg;

	if (c->sink_failed)
		return;
	if (c->sink(c->sink_arg, data, n, &c->sink_cause) == -1)
		c->sink_failed = 1;
}

/* The body is complete: keep the connection for the next request or close it. */
static int
cli_conn_body_done(struct cli_conn *c)
{
	c->in_body = 0;
	if (c->keep && !c->until_close)
		c->reused = 1;
	else
		cli_conn_close(c);
	return 1;
}

/* Hand buffered bytes to the sink: 1 done, 0 more, -1 error. */
static int
cli_conn_consume(struct cli_conn *c, char **cause)
{
	enum http_body_state st;
	size_t consumed = 0;
	char *bc = NULL;

	if (c->until_close) {
		if (c->len > 0)
			cli_conn_feed_cb(c, c->buf, c->len);
		c->len = 0;
		st = HTTP_BODY_MORE;
	} else {
		st = http_body_feed(&c->body, c->buf, c->len, &consumed, cli_conn_feed_cb, c, &bc);
		memmove(c->buf, c->buf + consumed, c->len - consumed);
		c->len -= consumed;
	}
	if (c->sink_failed) {
		cause_set(cause, "%s", c->sink_cause ? c->sink_cause : "transfer aborted");
		free(bc);
		cli_conn_close(c);
		c->in_body = 0;
		return -1;
	}
	if (st == HTTP_BODY_ERROR) {
		cause_set(cause, "bad response body from airlockd: %s", bc);
		free(bc);
		cli_conn_close(c);
		c->in_body = 0;
		return -1;
	}
	if (st == HTTP_BODY_DONE)
		return cli_conn_body_done(c);
	return 0;
}

int
cli_conn_body(struct cli_conn *c, cli_http_sink sink, void *arg, int wait, char **cause)
{
	ssize_t n;
	int r;

	if (!c->in_body)
		return 1;
	c->sink = sink;
	c->sink_arg = arg;
	if ((r = cli_conn_consume(c, cause)) != 0)
		return r;
	n = cli_conn_fill(c, wait, cause);
	if (n == CLI_READ_AGAIN)
		return 0;
	if (n == CLI_READ_ERR) {
		cli_conn_close(c);
		c->in_body = 0;
		return -1;
	}
	if (n == CLI_READ_EOF) {
		if (c->until_close)
			return cli_conn_body_done(c);
		cause_set(cause, "airlockd at %s closed the connection in the middle of an answer",
		    c->api->url);
		cli_conn_close(c);
		c->in_body = 0;
		return -1;
	}
	return cli_conn_consume(c, cause);
}

int
cli_conn_body_all(struct cli_conn *c, cli_http_sink sink, void *arg, char **cause)
{
	int r;

	while ((r = cli_conn_body(c, sink, arg, 1, cause)) == 0)
		;
	return r;
}

json_t *
cli_conn_json(struct cli_conn *c, char **cause)
{
	struct cli_membuf m = { .max = CLI_HTTP_JSON_MAX };
	json_error_t err;
	json_t *j;

	if (cli_conn_body_all(c, cli_membuf_sink, &m, cause) == -1) {
		free(m.data);
		return NULL;
	}
	if (m.len == 0) {
		free(m.data);
		return json_object();
	}
	if ((j = json_loadb(m.data, m.len, 0, &err)) == NULL)
		cause_set(cause, "airlockd sent invalid JSON: %s", err.text);
	free(m.data);
	return j;
}

json_t *
cli_api_json(struct cli_api *api, const char *method, const char *path, json_t *body,
    int *status, char **cause)
{
	char *text = NULL;
	int st;

	if (body != NULL)
		text = json_dumps(body, JSON_COMPACT);
	st = cli_conn_request(api->conn, method, path, text ? "application/json" : NULL, text,
	    text ? strlen(text) : 0, -1, NULL, NULL, status, cause);
	free(text);
	if (st == -1)
		return NULL;
	return cli_conn_json(api->conn, cause);
}

static char *
cli_http_pct(const char *s, const char *keep)
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

char *
cli_http_escape(const char *s)
{
	return cli_http_pct(s, "-._~/");
}

char *
cli_http_escape_segment(const char *s)
{
	/* No '/' and no '.': an id like "../keys" must stay one segment. */
	return cli_http_pct(s, "-_~");
}
