/*
 * HTTP client for airlockd (see cli_http.h), on libcurl: http and https
 * (TLS verified against the system store, AIRLOCK_CA_FILE, or for a daemon
 * on this host the airlock CA), keep-alive, chunked uploads. One easy handle
 * per connection driven by its own multi handle, so a body can be read a
 * piece at a time beside other fds (exec -i polls the socket and stdin).
 */
#include <sys/select.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli_http.h"
#include "http/http_parse.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"

/* Body bytes held before the transfer is paused (back-pressure on the daemon). */
#define CLI_HTTP_HOLD_MAX	(1024 * 1024)
/* A TLS record can leave decrypted bytes in the library that poll() won't see. */
#define CLI_HTTP_DRAIN_ROUNDS	64

struct cli_api {
	char		*url;		/* as given, for messages */
	char		*base;		/* scheme://host[:port][/prefix], no trailing '/' */
	char		*host;		/* without brackets: decides whether the local key may go */
	int		 tls;
	char		*ca_file;	/* NULL: the system trust store */
	char		*key;		/* NULL: none found */
	char		*key_origin;	/* "AIRLOCK_API_KEY" or the key file */
	char		*key_problem;	/* why there is no key, for 401 hints */
	struct cli_conn	*conn;
};

struct cli_conn {
	struct cli_api	*api;
	CURLM		*multi;
	CURL		*easy;
	int		 timeout_ms;
	char		 errbuf[CURL_ERROR_SIZE];
	struct curl_slist *hdrs;

	/* The transfer in progress. */
	int		 active;	/* easy is in multi */
	int		 done;		/* curl finished it; result holds how */
	CURLcode	 result;
	int		 status;	/* of the final (non-1xx) response */
	int		 head_done;
	size_t		 head_bytes;
	int		 in_body;	/* a body is being read */
	int		 paused;
	char		*buf;		/* body bytes not yet given to a sink */
	size_t		 len, cap;
	size_t		 delivered;	/* body bytes seen in the last perform */

	/* Request body from a file descriptor (chunked). */
	int		 upload_fd;
	uint64_t	 sent;
	cli_http_progress progress;
	void		*parg;
	char		*read_cause;
};

/*
 * AIRLOCK_URL: http[s]://HOST[:PORT][/PREFIX]. Parsed by libcurl's URL
 * parser, then narrowed: no credentials, query or fragment.
 */
static int
cli_api_parse_url(struct cli_api *api, const char *url, char **cause)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL, *x = NULL;
	int rv = -1;

	if (u == NULL)
		fatalx("curl_url");
	for (const char *p = url; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			goto bad;
	if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
		goto bad;
	if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
		cause_set(cause, "AIRLOCK_URL %s: must start with http:// or https://", url);
		goto out;
	}
	if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0')
		goto bad;
	if (curl_url_get(u, CURLUPART_USER, &x, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_QUERY, &x, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_FRAGMENT, &x, 0) == CURLUE_OK)
		goto bad;
	if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
		port = NULL;
	if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		goto bad;
	api->tls = strcmp(scheme, "https") == 0;
	if (host[0] == '[') {
		size_t n = strlen(host);
		api->host = xstrndup(host + 1, n > 2 ? n - 2 : 0);
	} else
		api->host = xstrdup(host);
	/* "http://h:1/" and "http://h:1" are the same base. */
	size_t plen = strlen(path);
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	xasprintf(&api->base, "%s://%s%s%s%.*s", scheme, host, port ? ":" : "",
	    port ? port : "", (int)plen, path);
	rv = 0;
	goto out;
bad:
	cause_set(cause, "AIRLOCK_URL %s: expected http[s]://HOST[:PORT][/PREFIX]", url);
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(x);
	curl_url_cleanup(u);
	return rv;
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

/*
 * Which certificates a https daemon must chain to: AIRLOCK_CA_FILE when set;
 * for a daemon on this host the airlock CA when it is readable (airlockd's
 * own certificate is minted from it by default); else the system store.
 */
static int
cli_api_load_ca(struct cli_api *api, char **cause)
{
	const char *env = getenv("AIRLOCK_CA_FILE");
	char *path;

	if (env != NULL && *env != '\0') {
		if (access(env, R_OK) == -1) {
			cause_set(cause, "AIRLOCK_CA_FILE %s: %s", env, strerror(errno));
			return -1;
		}
		api->ca_file = xstrdup(env);
		return 0;
	}
	if (!api->tls || !cli_api_loopback(api->host))
		return 0;
	path = paths_data("ca/ca.crt");
	if (access(path, R_OK) == 0)
		api->ca_file = path;
	else
		free(path);
	return 0;
}

struct cli_api *
cli_api_new(char **cause)
{
	struct cli_api *api = xcalloc(1, sizeof(*api));
	const char *url = getenv("AIRLOCK_URL");

	/* Thread-safe since 7.84; the CLI calls it before any transfer. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		fatalx("curl_global_init");
	if (url == NULL || *url == '\0')
		url = CLI_HTTP_DEFAULT_URL;
	api->url = xstrdup(url);
	if (cli_api_parse_url(api, url, cause) == -1 || cli_api_load_ca(api, cause) == -1) {
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
	free(api->base);
	free(api->host);
	free(api->ca_file);
	if (api->key != NULL)
		explicit_bzero(api->key, strlen(api->key));
	free(api->key);
	free(api->key_origin);
	free(api->key_problem);
	free(api);
	curl_global_cleanup();
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
	c->timeout_ms = CLI_HTTP_TIMEOUT_MS;
	c->upload_fd = -1;
	if ((c->multi = curl_multi_init()) == NULL || (c->easy = curl_easy_init()) == NULL)
		fatalx("curl_multi_init");
	return c;
}

/* Stop the transfer in progress; curl drops its connection if it was unfinished. */
static void
cli_conn_stop(struct cli_conn *c)
{
	if (c->active)
		curl_multi_remove_handle(c->multi, c->easy);
	c->active = c->done = c->head_done = c->in_body = c->paused = 0;
	c->status = 0;
	c->head_bytes = c->len = 0;
	c->upload_fd = -1;
	c->progress = NULL;
	free(c->read_cause);
	c->read_cause = NULL;
	curl_slist_free_all(c->hdrs);
	c->hdrs = NULL;
}

void
cli_conn_free(struct cli_conn *c)
{
	if (c == NULL)
		return;
	cli_conn_stop(c);
	curl_easy_cleanup(c->easy);
	curl_multi_cleanup(c->multi);
	free(c->buf);
	free(c);
}

/*
 * The transfer's socket, from what curl says it waits on (CURLINFO_ACTIVESOCKET
 * names a socket only once a transfer is done or with CONNECT_ONLY). One easy
 * handle per multi handle: one socket at most. The CLI has few fds, so
 * fd_set's limit is far.
 */
int
cli_conn_fd(const struct cli_conn *c)
{
	fd_set r, w, e;
	int maxfd = -1;

	if (!c->active)
		return -1;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_ZERO(&e);
	if (curl_multi_fdset(c->multi, &r, &w, &e, &maxfd) != CURLM_OK)
		return -1;
	for (int fd = 0; fd <= maxfd; fd++)
		if (FD_ISSET(fd, &r) || FD_ISSET(fd, &w))
			return fd;
	return -1;
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

/* Each response's head, line by line; only the final one counts. */
static size_t
cli_conn_header_cb(char *data, size_t size, size_t n, void *arg)
{
	struct cli_conn *c = arg;
	long code = 0;

	n *= size;
	c->head_bytes += n;
	if (c->head_bytes > CLI_HTTP_BUF) {
		snprintf(c->errbuf, sizeof(c->errbuf), "oversized response head");
		return 0;
	}
	if (n <= 2 && (data[0] == '\r' || data[0] == '\n')) {
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200) {
			c->status = (int)code;
			c->head_done = 1;
		}
		c->head_bytes = 0;
	}
	return n;
}

static size_t
cli_conn_write_cb(char *data, size_t size, size_t n, void *arg)
{
	struct cli_conn *c = arg;

	n *= size;
	if (c->len + n > CLI_HTTP_HOLD_MAX && c->len > 0) {
		c->paused = 1;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (c->len + n > c->cap) {
		size_t ncap = c->cap == 0 ? CLI_HTTP_BUF : c->cap;
		while (ncap < c->len + n)
			ncap *= 2;
		c->buf = xreallocarray(c->buf, 1, ncap);
		c->cap = ncap;
	}
	memcpy(c->buf + c->len, data, n);
	c->len += n;
	c->delivered += n;
	return n;
}

static size_t
cli_conn_read_cb(char *out, size_t size, size_t n, void *arg)
{
	struct cli_conn *c = arg;
	ssize_t r;

	while ((r = read(c->upload_fd, out, size * n)) == -1 && errno == EINTR)
		;
	if (r == -1) {
		xasprintf(&c->read_cause, "read: %s", strerror(errno));
		return CURL_READFUNC_ABORT;
	}
	c->sent += (uint64_t)r;
	if (r > 0 && c->progress != NULL)
		c->progress(c->parg, c->sent);
	return (size_t)r;
}

/* Run curl without blocking; note when the transfer finished. */
static void
cli_conn_perform(struct cli_conn *c)
{
	CURLMsg *m;
	int running, left;

	for (int i = 0; i < CLI_HTTP_DRAIN_ROUNDS; i++) {
		c->delivered = 0;
		(void)curl_multi_perform(c->multi, &running);
		while ((m = curl_multi_info_read(c->multi, &left)) != NULL)
			if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy) {
				c->done = 1;
				c->result = m->data.result;
			}
		if (c->done || c->delivered == 0 || c->paused)
			break;
	}
}

/*
 * Block until the transfer has news (the final head when !body, body bytes
 * when body, or its end), at most timeout_ms of silence; -1 with a cause.
 */
static int
cli_conn_wait(struct cli_conn *c, int body, char **cause)
{
	uint64_t t0 = monotonic_ms();
	int numfds;

	for (;;) {
		if (curl_multi_poll(c->multi, NULL, 0, 1000, &numfds) != CURLM_OK) {
			cause_set(cause, "waiting for airlockd: curl_multi_poll failed");
			return -1;
		}
		/* Also on silence: curl's own timers (connect, retries) need a perform. */
		cli_conn_perform(c);
		if (c->done || (body ? c->len > 0 : c->head_done))
			return 0;
		(void)numfds;
		if (monotonic_ms() - t0 >= (uint64_t)c->timeout_ms) {
			cause_set(cause, "airlockd at %s did not answer within %d s", c->api->url,
			    c->timeout_ms / 1000);
			return -1;
		}
	}
}

/* Why a transfer failed, in words for the user. */
static void
cli_conn_failure(struct cli_conn *c, char **cause)
{
	const char *url = c->api->url, *detail = c->errbuf[0] ? c->errbuf :
	    curl_easy_strerror(c->result);

	if (c->read_cause != NULL) {
		cause_set(cause, "%s", c->read_cause);
		return;
	}
	switch (c->result) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
		if (!c->head_done && c->status == 0 && c->result != CURLE_OPERATION_TIMEDOUT) {
			cause_set(cause, "cannot connect to airlockd at %s: %s: is it running? "
			    "(make up)", url, detail);
			return;
		}
		cause_set(cause, "airlockd at %s: %s", url, detail);
		return;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CONNECT_ERROR:
		cause_set(cause, "TLS with airlockd at %s failed: %s (AIRLOCK_CA_FILE names "
		    "the CA to trust)", url, detail);
		return;
	case CURLE_PARTIAL_FILE:
		cause_set(cause, "airlockd at %s closed the connection in the middle of an "
		    "answer", url);
		return;
	case CURLE_GOT_NOTHING:
		cause_set(cause, "airlockd at %s closed the connection without answering", url);
		return;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_UNSUPPORTED_PROTOCOL:
		cause_set(cause, "bad response from airlockd at %s: %s", url, detail);
		return;
	case CURLE_RECV_ERROR:
		if (c->head_done) {
			cause_set(cause, "bad response body from airlockd: %s", detail);
			return;
		}
		break;
	default:
		break;
	}
	cause_set(cause, "airlockd at %s: %s", url, detail);
}

/* Configure the easy handle for one request. */
static void
cli_conn_setup(struct cli_conn *c, const char *method, const char *path,
    const char *content_type, const void *body, size_t len, int upload_fd)
{
	struct cli_api *api = c->api;
	CURL *e = c->easy;
	char *url, *h;

	/* Keeps the connection cache: the next request reuses the connection. */
	curl_easy_reset(e);
	xasprintf(&url, "%s%s", api->base, path);
	curl_easy_setopt(e, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CLI_HTTP_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "airlock/" AIRLOCK_VERSION);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, cli_conn_header_cb);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, cli_conn_write_cb);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	if (api->ca_file != NULL)
		curl_easy_setopt(e, CURLOPT_CAINFO, api->ca_file);
	/* The daemon's bodies are JSON or streams: no compression, no 100-continue wait. */
	c->hdrs = curl_slist_append(c->hdrs, "Expect:");
	if (api->key != NULL) {
		xasprintf(&h, "Authorization: Bearer %s", api->key);
		c->hdrs = curl_slist_append(c->hdrs, h);
		explicit_bzero(h, strlen(h));
		free(h);
	}
	if (content_type != NULL) {
		xasprintf(&h, "Content-Type: %s", content_type);
		c->hdrs = curl_slist_append(c->hdrs, h);
		free(h);
	}
	if (upload_fd >= 0) {
		c->upload_fd = upload_fd;
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, cli_conn_read_cb);
		curl_easy_setopt(e, CURLOPT_READDATA, c);
		c->hdrs = curl_slist_append(c->hdrs, "Transfer-Encoding: chunked");
	} else if (body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	    strcmp(method, "PATCH") == 0) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
		curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body ? (const char *)body : "");
	} else if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->hdrs);
}

/* Everything of an error answer, bounded, turned into the cause. */
static void
cli_conn_error_body(struct cli_conn *c, char **cause)
{
	struct cli_membuf m = { .max = CLI_HTTP_ERROR_MAX };
	char *bc = NULL;

	/* A truncated error body still has a status worth reporting. */
	if (cli_conn_body_all(c, cli_membuf_sink, &m, &bc) == -1) {
		free(bc);
		cli_conn_stop(c);
	}
	cli_api_error(c->api, c->status, m.data ? m.data : "", m.len, cause);
	free(m.data);
}

int
cli_conn_request(struct cli_conn *c, const char *method, const char *path,
    const char *content_type, const void *body, size_t len, int upload_fd,
    cli_http_progress progress, void *parg, int *status, char **cause)
{
	if (status != NULL)
		*status = 0;
	/* An abandoned body would confuse this answer: curl closes that connection. */
	cli_conn_stop(c);
	c->errbuf[0] = '\0';
	c->sent = 0;
	cli_conn_setup(c, method, path, content_type, body, len, upload_fd);
	c->progress = progress;
	c->parg = parg;
	if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
		fatalx("curl_multi_add_handle");
	c->active = 1;
	/*
	 * Until the final head is in. curl itself sends a request once more
	 * on a fresh connection when a kept-alive one turns out closed.
	 */
	cli_conn_perform(c);
	while (!c->head_done && !c->done)
		if (cli_conn_wait(c, 0, cause) == -1) {
			cli_conn_stop(c);
			return -1;
		}
	if (!c->head_done) {
		cli_conn_failure(c, cause);
		cli_conn_stop(c);
		return -1;
	}
	if (status != NULL)
		*status = c->status;
	/* AIRLOCK_DEBUG=1 shows the conversation, never the key. */
	log_debug("%s %s -> %d", method, path, c->status);
	c->in_body = 1;
	if (c->status >= 300) {
		/* The daemon may have answered before the upload was done: its answer wins. */
		cli_conn_error_body(c, cause);
		return -1;
	}
	return c->status;
}

/* Hand buffered bytes to the sink; -1 when it refused them. */
static int
cli_conn_consume(struct cli_conn *c, cli_http_sink sink, void *arg, char **cause)
{
	size_t n = c->len;

	if (n == 0)
		return 0;
	c->len = 0;
	if (sink(arg, c->buf, n, cause) == -1) {
		cli_conn_stop(c);
		return -1;
	}
	if (c->paused) {
		c->paused = 0;
		curl_easy_pause(c->easy, CURLPAUSE_CONT);
	}
	return 0;
}

/* The transfer ended: 1 complete, -1 failed (with a cause). */
static int
cli_conn_finish(struct cli_conn *c, char **cause)
{
	c->in_body = 0;
	if (c->result == CURLE_OK || (c->upload_fd >= 0 && c->status >= 300 &&
	    (c->result == CURLE_SEND_ERROR || c->result == CURLE_UPLOAD_FAILED)))
		return 1;
	cli_conn_failure(c, cause);
	cli_conn_stop(c);
	return -1;
}

int
cli_conn_body(struct cli_conn *c, cli_http_sink sink, void *arg, int wait, char **cause)
{
	if (!c->in_body)
		return 1;
	if (cli_conn_consume(c, sink, arg, cause) == -1)
		return -1;
	if (!c->done && c->len == 0) {
		if (wait) {
			if (cli_conn_wait(c, 1, cause) == -1) {
				cli_conn_stop(c);
				return -1;
			}
		} else
			cli_conn_perform(c);
		if (cli_conn_consume(c, sink, arg, cause) == -1)
			return -1;
	}
	if (c->done && c->len == 0)
		return cli_conn_finish(c, cause);
	return 0;
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

char *
cli_http_escape(const char *s)
{
	return http_pct_encode(s, "-._~/");
}

char *
cli_http_escape_segment(const char *s)
{
	/* No '/' and no '.': an id like "../keys" must stay one segment. */
	return http_pct_encode(s, "-_~");
}
