/*
 * gw_proxy end to end on loopback, in a private network namespace: the real
 * gateway code (attach with listeners standing in for the island's, DNS,
 * interception, relay, splice) between a "guest" client thread and
 * upstream servers in child processes. The island listener sits on
 * 127.0.0.2:PORT, so the original destination (getsockname; no nftables
 * here) has the port the upstream listens on at 127.0.0.1 (or 127.0.0.3).
 * Loopback is a denied range: the policies carry an operator internal
 * exception for 127.0.0.0/8, except where the deny itself is tested.
 *
 * Upstream names: api.test, other.test, ws.test → 127.0.0.1 (certificate
 * from the test root); bad.test → 127.0.0.3 (self-signed, must be refused);
 * db.test → 127.0.0.1 (L4 echo on 5432).
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <jansson.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "http/http_parse.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/gw_proxy.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_worker.h"
#include "gateway/gw_server.h"
#include "gateway/shared/gw_ctl.h"
#include "gateway/gw_tls.h"
#include "gw_testca.h"
#include "t.h"

#define SECRET	"s3cret-token-value"
#define T_RUN_ARG(fn, a) do { fprintf(stderr, "-- %s\n", #fn); fn(a); } while (0)
#define T_RUN_ARG2(fn, a, b) do { fprintf(stderr, "-- %s\n", #fn); fn(a, b); } while (0)

static struct tca	 ca;
static struct gw	 gw;
static struct gw_worker	 w;	/* every sandbox here, on gw.base */
static char		 audit_dir[64];
static pid_t		 servers[8];
static int		 nservers;
static char		 api_cert[256], api_key[256], bad_cert[256], bad_key[256];

/* --- Helpers ------------------------------------------------------------- */

static int
tcp_listen(const char *ip, int port, int type)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, type, 0), one = 1;

	inet_pton(AF_INET, ip, &sin.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 16) == -1)) {
		fprintf(stderr, "bind %s:%d: %s\n", ip, port, strerror(errno));
		exit(2);
	}
	return fd;
}

static int
tcp_connect(const char *ip, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, ip, &sin.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* One side of a connection, plain or TLS, with a read buffer. */
struct peer {
	int	 fd;
	SSL	*ssl;
	char	 buf[1 << 16];
	size_t	 len;
};

static ssize_t
peer_read(struct peer *p)
{
	ssize_t n;

	if (p->len == sizeof(p->buf))
		return -1;
	if (p->ssl != NULL)
		n = SSL_read(p->ssl, p->buf + p->len, (int)(sizeof(p->buf) - p->len));
	else
		n = read(p->fd, p->buf + p->len, sizeof(p->buf) - p->len);
	if (n > 0)
		p->len += (size_t)n;
	return n;
}

static int
peer_write(struct peer *p, const void *data, size_t len)
{
	if (p->ssl != NULL)
		return SSL_write(p->ssl, data, (int)len) == (int)len ? 0 : -1;
	return write(p->fd, data, len) == (ssize_t)len ? 0 : -1;
}

static void
peer_consume(struct peer *p, size_t n)
{
	memmove(p->buf, p->buf + n, p->len - n);
	p->len -= n;
}

static void
peer_close(struct peer *p)
{
	if (p->ssl != NULL) {
		SSL_shutdown(p->ssl);
		SSL_free(p->ssl);
	}
	if (p->fd != -1)
		close(p->fd);
	free(p);
}

static void
collect(void *arg, const char *data, size_t n)
{
	struct evbuffer *b = arg;

	evbuffer_add(b, data, n);
}

/* Read a body framed by h (chunked, length, or until close) into out. */
static int
peer_body(struct peer *p, const struct http_head *h, int until_close, struct evbuffer *out)
{
	struct http_body b;
	size_t used;
	char *cause = NULL;
	enum http_body_state st = HTTP_BODY_MORE;

	if (until_close) {
		while (peer_read(p) > 0)
			;
		evbuffer_add(out, p->buf, p->len);
		p->len = 0;
		return 0;
	}
	if (!h->chunked && h->content_length <= 0)
		return 0;
	http_body_init(&b, h, 0);
	for (;;) {
		st = http_body_feed(&b, p->buf, p->len, &used, collect, out, &cause);
		peer_consume(p, used);
		if (st == HTTP_BODY_DONE)
			return 0;
		if (st == HTTP_BODY_ERROR || peer_read(p) <= 0) {
			free(cause);
			return -1;
		}
	}
}

/* --- Upstream servers (child processes, blocking) ------------------------ */

static void
srv_respond(struct peer *p, const struct http_head *h, const char *body, size_t blen)
{
	char *out, *t = h->target;

	if (strcmp(t, "/chunked") == 0) {
		const char *r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
		peer_write(p, r, strlen(r));
		return;
	}
	if (strcmp(t, "/slow") == 0) {
		/* Answer late: a guest's next request and FIN arrive while this is in flight. */
		const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow";
		usleep(300 * 1000);
		peer_write(p, r, strlen(r));
		return;
	}
	if (strcmp(t, "/extra") == 0) {
		/* A response followed by bytes nobody asked for. */
		const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		    "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n";
		peer_write(p, r, strlen(r));
		return;
	}
	if (strcmp(t, "/big") == 0) {
		size_t n = 4 << 20;
		char *big = xmalloc(n);

		memset(big, 'x', n);
		xasprintf(&out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);
		peer_write(p, out, strlen(out));
		peer_write(p, big, n);
		free(big);
		free(out);
		return;
	}
	if (strcmp(t, "/echo-body") == 0) {
		xasprintf(&out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", blen);
		peer_write(p, out, strlen(out));
		peer_write(p, body, blen);
		free(out);
		return;
	}
	if (strcmp(t, "/echo-headers") == 0) {
		struct evbuffer *b = evbuffer_new();
		size_t i;

		for (i = 0; i < h->nheaders; i++)
			evbuffer_add_printf(b, "%s: %s\n", h->headers[i].name, h->headers[i].value);
		xasprintf(&out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
		    evbuffer_get_length(b));
		peer_write(p, out, strlen(out));
		peer_write(p, evbuffer_pullup(b, -1), evbuffer_get_length(b));
		evbuffer_free(b);
		free(out);
		return;
	}
	xasprintf(&out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\nhello %s",
	    strlen("hello ") + strlen(t), t);
	peer_write(p, out, strlen(out));
	free(out);
}

/* Serve requests on one connection until it closes. */
static void
srv_http(struct peer *p)
{
	struct http_head h;
	struct evbuffer *body;
	char *cause = NULL;
	ssize_t n;
	int status;

	for (;;) {
		while ((n = http_parse_head(p->buf, p->len, &h, &status, &cause)) == 0)
			if (peer_read(p) <= 0)
				return;
		if (n < 0)
			return;
		peer_consume(p, (size_t)n);
		if (strcmp(h.target, "/ws-h2c") == 0) {
			/* An upstream that switches to a protocol other than the one asked. */
			const char *r = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
			    "Connection: Upgrade\r\n\r\n";
			peer_write(p, r, strlen(r));
			http_head_free(&h);
			continue;
		}
		if (strcmp(h.target, "/ws") == 0 && h.upgrade) {
			const char *r = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			    "Connection: Upgrade\r\n\r\n";
			peer_write(p, r, strlen(r));
			for (;;) {
				if (p->len > 0) {
					peer_write(p, p->buf, p->len);
					p->len = 0;
				}
				if (peer_read(p) <= 0)
					return;
			}
		}
		body = evbuffer_new();
		if (peer_body(p, &h, 0, body) == -1)
			return;
		if (strcmp(h.target, "/close") == 0) {
			const char *r = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close";
			peer_write(p, r, strlen(r));
			evbuffer_free(body);
			http_head_free(&h);
			return;
		}
		srv_respond(p, &h, (const char *)evbuffer_pullup(body, -1), evbuffer_get_length(body));
		evbuffer_free(body);
		http_head_free(&h);
	}
}

static int
srv_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
    unsigned int inlen, void *arg)
{
	return SSL_select_next_proto((unsigned char **)out, outlen,
	    (const unsigned char *)"\x08http/1.1", 9, in, inlen) == OPENSSL_NPN_NEGOTIATED ?
	    SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_NOACK;
}

/* mode: "https", "http", "echo". */
static void
server(const char *ip, int port, const char *mode, const char *cert, const char *key)
{
	int lfd = tcp_listen(ip, port, SOCK_STREAM), fd;
	SSL_CTX *ctx = NULL;
	pid_t pid;

	if ((pid = fork()) != 0) {
		close(lfd);
		servers[nservers++] = pid;
		return;
	}
	if (cert != NULL) {
		ctx = SSL_CTX_new(TLS_server_method());
		SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM);
		SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM);
		SSL_CTX_set_alpn_select_cb(ctx, srv_alpn, NULL);
	}
	while ((fd = accept(lfd, NULL, NULL)) != -1) {
		struct peer *p = xcalloc(1, sizeof(*p));
		char buf[4096];
		ssize_t n;

		p->fd = fd;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		if (ctx != NULL) {
			p->ssl = SSL_new(ctx);
			SSL_set_fd(p->ssl, fd);
			if (SSL_accept(p->ssl) != 1) {
				peer_close(p);
				continue;
			}
		}
		if (strcmp(mode, "echo") == 0) {
			/* Echo until EOF, then a last line: proves half-close travels. */
			while ((n = read(fd, buf, sizeof(buf))) > 0)
				if (write(fd, buf, (size_t)n) != n)
					break;
			if (write(fd, "bye\n", 4) != 4)
				break;
		} else
			srv_http(p);
		peer_close(p);
	}
	_exit(0);
}

/* --- DNS upstream (in the gateway's loop) --------------------------------- */

static void
dns_cb(struct evdns_server_request *req, void *arg)
{
	struct evdns_server_question *q = req->questions[0];
	uint8_t lo1[4] = { 127, 0, 0, 1 }, lo3[4] = { 127, 0, 0, 3 }, priv[4] = { 10, 9, 9, 9 };
	char name[256];
	size_t i;

	for (i = 0; q->name[i] != '\0' && i < sizeof(name) - 1; i++)
		name[i] = (char)(q->name[i] | 0x20);
	name[i] = '\0';
	if (req->nquestions != 1 || q->type != EVDNS_TYPE_A) {
		evdns_server_request_respond(req, 0);
		return;
	}
	if (strcmp(name, "api.test") == 0 || strcmp(name, "other.test") == 0 ||
	    strcmp(name, "ws.test") == 0 || strcmp(name, "db.test") == 0)
		evdns_server_request_add_a_reply(req, q->name, 1, lo1, 60);
	else if (strcmp(name, "bad.test") == 0)
		evdns_server_request_add_a_reply(req, q->name, 1, lo3, 60);
	else if (strcmp(name, "private.test") == 0)
		evdns_server_request_add_a_reply(req, q->name, 1, priv, 60);
	else {
		evdns_server_request_respond(req, DNS_ERR_NOTEXIST);
		return;
	}
	evdns_server_request_respond(req, 0);
}

/* --- The gateway and the guest thread ------------------------------------ */

static struct gw_policy *
policy(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	char *cause = NULL;
	struct gw_policy *p;

	if (j == NULL || (p = gw_policy_parse(j, &cause)) == NULL) {
		fprintf(stderr, "test policy: %s\n", j == NULL ? jerr.text : cause);
		exit(2);
	}
	json_decref(j);
	return p;
}

/* A sandbox whose island listener is ip:port, with its DNS socket on dnsip:53. */
static struct gw_sandbox *
attach(const char *id, const char *ip, int port, const char *dnsip, const char *pol)
{
	char *cause = NULL;

	if (gw_sandbox_attach(&w, id, "p", policy(pol), tcp_listen(ip, port, SOCK_STREAM),
	    tcp_listen(dnsip, 53, SOCK_DGRAM), &cause) == -1) {
		fprintf(stderr, "attach: %s\n", cause);
		exit(2);
	}
	return gw_sandbox_find(&w, id);
}

static void
update(struct gw_sandbox *sb, const char *pol)
{
	gw_sandbox_update(sb, policy(pol));
}

static int done_pipe[2];

static void
done_cb(evutil_socket_t fd, short what, void *arg)
{
	char c;

	if (read(fd, &c, 1) == 1)
		event_base_loopbreak(gw.base);
}

struct guest_run {
	void	(*fn)(void *);
	void	*arg;
};

static void *
guest_thread(void *arg)
{
	struct guest_run *r = arg;

	r->fn(r->arg);
	if (write(done_pipe[1], "x", 1) != 1)
		abort();
	return NULL;
}

/* Run fn in a guest thread while the gateway's loop runs here. */
static void
as_guest(void (*fn)(void *), void *arg)
{
	struct guest_run r = { fn, arg };
	pthread_t t;

	pthread_create(&t, NULL, guest_thread, &r);
	event_base_dispatch(gw.base);
	pthread_join(t, NULL);
	/* Let closes and deferred frees settle. */
	for (int i = 0; i < 5; i++)
		event_base_loop(gw.base, EVLOOP_NONBLOCK);
}

static SSL_CTX *guest_ctx;

/* Guest: TLS to ip:port with sni, verifying against the test root. */
static struct peer *
guest_tls_at(const char *ip, int port, const char *sni)
{
	struct peer *p = xcalloc(1, sizeof(*p));

	if ((p->fd = tcp_connect(ip, port)) == -1) {
		free(p);
		return NULL;
	}
	p->ssl = SSL_new(guest_ctx);
	SSL_set_fd(p->ssl, p->fd);
	if (sni != NULL) {
		SSL_set_tlsext_host_name(p->ssl, sni);
		SSL_set1_host(p->ssl, sni);
	}
	SSL_set_alpn_protos(p->ssl, (const unsigned char *)"\x02h2\x08http/1.1", 12);
	if (SSL_connect(p->ssl) != 1) {
		ERR_clear_error();
		peer_close(p);
		return NULL;
	}
	return p;
}

static struct peer *
guest_tls(int port, const char *sni)
{
	return guest_tls_at("127.0.0.2", port, sni);
}

static struct peer *
guest_plain(int port)
{
	struct peer *p = xcalloc(1, sizeof(*p));

	if ((p->fd = tcp_connect("127.0.0.2", port)) == -1) {
		free(p);
		return NULL;
	}
	return p;
}

/* Send req, read one response: status (0 on EOF/garbage) and body. */
static int
exchange(struct peer *p, const char *req, char **body)
{
	struct http_head h;
	struct evbuffer *b;
	char *cause = NULL;
	ssize_t n;
	int code = 0, until_close;

	if (body != NULL)
		*body = NULL;
	if (req != NULL && peer_write(p, req, strlen(req)) == -1)
		return 0;
	while ((n = http_parse_response_head(p->buf, p->len, &h, &code, &cause)) == 0)
		if (peer_read(p) <= 0)
			return 0;
	if (n < 0) {
		free(cause);
		return 0;
	}
	peer_consume(p, (size_t)n);
	until_close = !h.chunked && h.content_length < 0 && code >= 200 && code != 204 &&
	    code != 304;
	b = evbuffer_new();
	if (code != 101 && peer_body(p, &h, until_close, b) == -1)
		code = 0;
	if (body != NULL) {
		evbuffer_add(b, "", 1);
		*body = xstrdup((const char *)evbuffer_pullup(b, -1));
	}
	evbuffer_free(b);
	http_head_free(&h);
	return code;
}

/* The peer closed (EOF or reset) without sending anything more. */
static int
closed(struct peer *p)
{
	return peer_read(p) <= 0;
}

static char *
audit_text(void)
{
	char path[128], *out = NULL;
	size_t len;

	snprintf(path, sizeof(path), "%s/audit.log", audit_dir);
	if (read_file(path, 1 << 24, &out, &len, NULL) == -1)
		return xstrdup("");
	return out;
}

/* Does the audit log have a line containing all of the given fragments? */
static int
audited(const char *a, const char *b, const char *c)
{
	char *text = audit_text(), *line, *save = NULL;
	int found = 0;

	for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, a) && (b == NULL || strstr(line, b)) &&
		    (c == NULL || strstr(line, c)))
			found = 1;
	free(text);
	return found;
}

/* The sum of the deny_summary counts for a sandbox (every reason). */
static uint64_t
summary_total(const char *id, int *lines)
{
	char *text = audit_text(), *line, *save = NULL, needle[96];
	uint64_t total = 0;
	json_t *j;

	*lines = 0;
	snprintf(needle, sizeof needle, "\"sandbox\":\"%s\"", id);
	for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, "\"event\":\"deny_summary\"") == NULL || strstr(line, needle) == NULL)
			continue;
		if ((j = json_loads(line, 0, NULL)) != NULL) {
			total += (uint64_t)json_integer_value(json_object_get(j, "count"));
			CHECK(json_integer_value(json_object_get(j, "count")) > 0);
			CHECK(strcmp(json_string_value(json_object_get(j, "decision")) ?: "", "deny") == 0);
			json_decref(j);
			(*lines)++;
		}
	}
	free(text);
	return total;
}

/* --- Scenarios ------------------------------------------------------------ */

#define POL_BASE "\"internal\":[\"127.0.0.0/8\"],\"credentials\":[{\"name\":\"TOKEN\"," \
	"\"value\":\"" SECRET "\",\"hosts\":[\"api.test\"],\"header\":\"Authorization\"," \
	"\"format\":\"Bearer {value}\"}]"

static void
g_https_keepalive(void *arg)
{
	struct peer *p = guest_tls(443, "api.test");
	X509 *leaf;
	char *body;

	CHECK(p != NULL);
	if (p == NULL)
		return;
	/* The guest saw a leaf for api.test from the gateway's issuer, ALPN http/1.1. */
	leaf = SSL_get1_peer_certificate(p->ssl);
	CHECK(X509_check_issued(ca.inter, leaf) == X509_V_OK);
	X509_free(leaf);
	{
		const unsigned char *alpn;
		unsigned int alen;

		SSL_get0_alpn_selected(p->ssl, &alpn, &alen);
		CHECK(alen == 8 && memcmp(alpn, "http/1.1", 8) == 0);
	}
	CHECK(exchange(p, "GET /echo-headers HTTP/1.1\r\nHost: api.test\r\n"
	    "Authorization: Bearer airlock:TOKEN\r\n\r\n", &body) == 200);
	CHECK(body != NULL && strstr(body, "Authorization: Bearer " SECRET) != NULL);
	CHECK(body != NULL && strstr(body, "Host: api.test") != NULL);
	free(body);
	/* Kept alive: a second request, with a body, then a chunked response. */
	CHECK(exchange(p, "POST /echo-body HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\n\r\n"
	    "abcde", &body) == 200);
	CHECK_STR(body, "abcde");
	free(body);
	CHECK(exchange(p, "POST /echo-body HTTP/1.1\r\nHost: api.test\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", &body) == 200);
	CHECK_STR(body, "abcde");
	free(body);
	CHECK(exchange(p, "GET /chunked HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
	CHECK_STR(body, "hello world");
	free(body);
	/* Then another Host on the same connection: refused, and closed. */
	CHECK(exchange(p, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", &body) == 403);
	CHECK(body != NULL && strstr(body, "Host differs from SNI") != NULL);
	free(body);
	CHECK(closed(p));
	peer_close(p);
	/* A response delimited by the upstream closing its TLS connection. */
	p = guest_tls(443, "api.test");
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(exchange(p, "GET /close HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
		CHECK_STR(body, "until close");
		free(body);
		peer_close(p);
	}
}

static void
test_https_keepalive(struct gw_sandbox *sb)
{
	as_guest(g_https_keepalive, NULL);
	CHECK(audited("\"kind\":\"tls\"", "\"sni\":\"api.test\"", "\"decision\":\"allow\""));
	CHECK(audited("\"path\":\"/echo-headers\"", "\"credential\":\"TOKEN\"", "\"status\":200"));
	CHECK(audited("\"host\":\"other.test\"", "\"decision\":\"deny\"",
	    "\"reason\":\"Host differs from SNI\""));
	CHECK(!audited(SECRET, NULL, NULL));
	CHECK(sb->counters.requests_denied >= 1);
}

static void
g_https_denied(void *arg)
{
	struct peer *p;
	char *body;

	/* SNI not in the allowlist: no certificate, no connection. */
	CHECK(guest_tls(443, "evil.test") == NULL);
	/* CONNECT tunnel through an allowed name. */
	p = guest_tls(443, "api.test");
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(exchange(p, "CONNECT evil.test:443 HTTP/1.1\r\nHost: api.test\r\n\r\n",
		    NULL) == 403);
		peer_close(p);
	}
	/* The placeholder sent to a header it is not bound to. */
	p = guest_tls(443, "api.test");
	if (p != NULL) {
		CHECK(exchange(p, "GET /echo-headers HTTP/1.1\r\nHost: api.test\r\n"
		    "X-Leak: airlock:TOKEN\r\n\r\n", &body) == 403);
		CHECK(body == NULL || strstr(body, SECRET) == NULL);
		free(body);
		peer_close(p);
	}
	/* Allowed name whose upstream certificate is not trusted. */
	p = guest_tls(443, "bad.test");
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(exchange(p, "GET / HTTP/1.1\r\nHost: bad.test\r\n\r\n", &body) == 502);
		CHECK(body != NULL && strstr(body, "certificate") != NULL);
		free(body);
		peer_close(p);
	}
	/* Allowed name resolving into a denied range (rebinding to 10/8). */
	p = guest_tls(443, "private.test");
	CHECK(p != NULL);
	if (p != NULL) {
		CHECK(exchange(p, "GET / HTTP/1.1\r\nHost: private.test\r\n\r\n", NULL) == 502);
		peer_close(p);
	}
}

static void
test_https_denied(struct gw_sandbox *sb)
{
	as_guest(g_https_denied, NULL);
	CHECK(audited("\"sni\":\"evil.test\"", "\"decision\":\"deny\"", "SNI not allowed"));
	CHECK(audited("\"method\":\"CONNECT\"", "\"decision\":\"deny\"", "CONNECT refused"));
	CHECK(audited("\"credential\":\"TOKEN\"", "\"decision\":\"deny\"", "another header"));
	CHECK(audited("\"host\":\"bad.test\"", "\"decision\":\"deny\"", "certificate not verified"));
	CHECK(audited("\"host\":\"private.test\"", "\"decision\":\"deny\"", "denied"));
}

static void
g_plain(void *arg)
{
	struct peer *p = guest_plain(80);
	char *body;

	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK(exchange(p, "GET /x HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
	CHECK_STR(body, "hello /x");
	free(body);
	/* Response delimited by the upstream closing. */
	CHECK(exchange(p, "GET /close HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
	CHECK_STR(body, "until close");
	free(body);
	peer_close(p);

	p = guest_plain(80);
	CHECK(exchange(p, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", NULL) == 403);
	peer_close(p);
	/* A credential never travels in clear text. */
	p = guest_plain(80);
	CHECK(exchange(p, "GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: airlock:TOKEN\r\n\r\n",
	    NULL) == 403);
	peer_close(p);
	/* Garbage that is not HTTP, to port 80, without an L4 rule. */
	p = guest_plain(80);
	peer_write(p, "\x01\x02\x03 hello\r\n", 10);
	CHECK(closed(p));
	peer_close(p);
}

static void
test_plain(void)
{
	as_guest(g_plain, NULL);
	CHECK(audited("\"kind\":\"http\"", "\"host\":\"evil.test\"", "host not allowed"));
	CHECK(audited("\"host\":\"api.test\"", "\"path\":\"/close\"", "\"status\":200"));
}

static void
g_pipeline_halfclose(void *arg)
{
	struct peer *p = guest_plain(80);
	char *body;

	/* Two requests in one write: answered in order, each checked. */
	CHECK(exchange(p, "GET /a HTTP/1.1\r\nHost: api.test\r\n\r\nGET /b HTTP/1.1\r\n"
	    "Host: api.test\r\n\r\n", &body) == 200);
	CHECK_STR(body, "hello /a");
	free(body);
	CHECK(exchange(p, NULL, &body) == 200);
	CHECK_STR(body, "hello /b");
	free(body);
	/* Extra bytes after a response are not the next request's answer. */
	CHECK(exchange(p, "GET /extra HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
	CHECK_STR(body, "ok");
	free(body);
	CHECK(exchange(p, "GET /after HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
	CHECK_STR(body, "hello /after");
	free(body);
	/* A guest that half-closes after its request still gets the answer. */
	peer_write(p, "GET /c HTTP/1.1\r\nHost: api.test\r\n\r\n", 35);
	shutdown(p->fd, SHUT_WR);
	CHECK(exchange(p, NULL, &body) == 200);
	CHECK_STR(body, "hello /c");
	free(body);
	CHECK(closed(p));
	peer_close(p);

	/*
	 * A request pipelined behind one whose answer is still in flight,
	 * then a half-close: both are answered, in order, then the close.
	 */
	p = guest_plain(80);
	peer_write(p, "GET /slow HTTP/1.1\r\nHost: api.test\r\n\r\n", 38);
	usleep(100 * 1000);
	peer_write(p, "GET /d HTTP/1.1\r\nHost: api.test\r\n\r\n", 35);
	shutdown(p->fd, SHUT_WR);
	CHECK(exchange(p, NULL, &body) == 200);
	CHECK_STR(body, "slow");
	free(body);
	CHECK(exchange(p, NULL, &body) == 200);
	CHECK_STR(body, "hello /d");
	free(body);
	CHECK(closed(p));
	peer_close(p);
}

static void
g_big(void *arg)
{
	struct peer *p = guest_tls(443, "api.test");
	uint64_t t0 = monotonic_ms();
	char *body;

	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK(exchange(p, "GET /big HTTP/1.1\r\nHost: api.test\r\n\r\n", &body) == 200);
	CHECK(body != NULL && strlen(body) == (4 << 20));
	free(body);
	*(uint64_t *)arg = monotonic_ms() - t0;
	peer_close(p);
}

static void
g_websocket(void *arg)
{
	struct peer *p = guest_tls(443, "ws.test");
	char buf[16];

	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK(exchange(p, "GET /ws HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\n"
	    "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: eA==\r\n\r\n",
	    NULL) == 101);
	peer_write(p, "ping-frame", 10);
	while (p->len < 10 && peer_read(p) > 0)
		;
	memcpy(buf, p->buf, 10);
	buf[10] = '\0';
	CHECK_STR(buf, "ping-frame");
	peer_close(p);
	/* A 101 must switch to WebSocket, the protocol the gateway let through. */
	p = guest_tls(443, "ws.test");
	CHECK(p != NULL);
	if (p == NULL)
		return;
	CHECK(exchange(p, "GET /ws-h2c HTTP/1.1\r\nHost: ws.test\r\nConnection: Upgrade\r\n"
	    "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: eA==\r\n\r\n",
	    NULL) == 502);
	CHECK(closed(p));
	peer_close(p);
}

static void
g_rate(void *arg)
{
	struct peer *p = guest_plain(80);

	CHECK(exchange(p, "GET /1 HTTP/1.1\r\nHost: api.test\r\n\r\n", NULL) == 200);
	CHECK(exchange(p, "GET /2 HTTP/1.1\r\nHost: api.test\r\n\r\n", NULL) == 429);
	CHECK(closed(p));
	peer_close(p);
	usleep(1100 * 1000);
	p = guest_plain(80);
	CHECK(exchange(p, "GET /3 HTTP/1.1\r\nHost: api.test\r\n\r\n", NULL) == 200);
	peer_close(p);
}

/* A guest opening connections in a loop is cut off above the accept rate. */
static void
g_accept_rate(void *arg)
{
	/*
	 * Past the burst, and on until the gateway has refused some: on a
	 * loaded host the bucket refills (100/s) while we connect, so a fixed
	 * count proves nothing. A refused connection is closed at once (EOF);
	 * an accepted one waits for its first bytes.
	 */
	enum { N = GW_ACCEPT_BURST + 60, NMAX = 800 };
	struct peer *ps[NMAX];
	int opened = 0, refused = 0, n = 0;
	char ch;

	while (n < NMAX && (n < N || refused == 0)) {
		if ((ps[n] = guest_plain(80)) != NULL)
			opened++;
		n++;
		if (n >= N && n % 20 == 0) {
			usleep(50 * 1000);	/* the gateway's loop accepts and closes */
			refused = 0;
			for (int i = 0; i < n; i++)
				if (ps[i] != NULL &&
				    recv(ps[i]->fd, &ch, 1, MSG_DONTWAIT | MSG_PEEK) == 0)
					refused++;
		}
	}
	*(int *)arg = refused;
	CHECK(opened > 0);
	CHECK(refused > 0);
	for (int i = 0; i < n; i++)
		if (ps[i] != NULL)
			peer_close(ps[i]);
	usleep(2100 * 1000);	/* refilled: the next one is served */
	ps[0] = guest_plain(80);
	CHECK(ps[0] != NULL && exchange(ps[0], "GET /x HTTP/1.1\r\nHost: api.test\r\n\r\n",
	    NULL) == 200);
	if (ps[0] != NULL)
		peer_close(ps[0]);
}

static void
g_mode_none(void *arg)
{
	struct peer *p = guest_plain(80);

	CHECK(p != NULL);
	if (p == NULL)
		return;
	peer_write(p, "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n", 34);
	CHECK(closed(p));
	peer_close(p);
}

static void
test_http_more(struct gw_sandbox *s443, struct gw_sandbox *s80)
{
	uint64_t ms = 0, limited = 0, denied;
	int lines, refused = 0;

	as_guest(g_pipeline_halfclose, NULL);
	as_guest(g_big, &ms);
	update(s443, "{\"mode\":\"allowlist\",\"allow\":[\"api.test\",\"ws.test\"],"
	    "\"rate\":{\"bps\":2000000}," POL_BASE "}");
	as_guest(g_big, &limited);
	/* 4 MiB at 2 MB/s, after a one-second burst: well over a second. */
	CHECK(limited >= 1000);
	CHECK(limited > ms);
	fprintf(stderr, "4 MiB unlimited %llu ms, at 2 MB/s %llu ms\n", (unsigned long long)ms,
	    (unsigned long long)limited);
	/* The same limit on the rule instead (a group on the upstream side). */
	update(s443, "{\"mode\":\"allowlist\",\"allow\":[{\"host\":\"api.test\","
	    "\"rate\":{\"bps\":2000000}},\"ws.test\"]," POL_BASE "}");
	limited = 0;
	as_guest(g_big, &limited);
	CHECK(limited >= 1000);
	as_guest(g_websocket, NULL);
	CHECK(audited("\"host\":\"ws.test\"", "\"status\":101", "\"decision\":\"allow\""));

	/* Per rule, then per sandbox: one request a second. */
	update(s80, "{\"mode\":\"allowlist\",\"allow\":[{\"host\":\"api.test\",\"rate\":{\"rps\":1}}],"
	    POL_BASE "}");
	as_guest(g_rate, NULL);
	update(s80, "{\"mode\":\"allowlist\",\"allow\":[\"api.test\"],\"rate\":{\"rps\":1}," POL_BASE
	    "}");
	as_guest(g_rate, NULL);
	CHECK(audited("\"status\":429", "\"reason\":\"rate limit\"", "\"sandbox\":\"s80\""));

	update(s80, "{\"mode\":\"allowlist\",\"allow\":[\"api.test\"]," POL_BASE "}");
	denied = s80->counters.conns_denied;
	as_guest(g_accept_rate, &refused);
	denied = s80->counters.conns_denied - denied;
	CHECK(denied >= (uint64_t)refused);
	/* The guest's 2 s pause closed the window: every refusal is in a summary line. */
	CHECK(denied > 0);
	CHECK(audited("\"sandbox\":\"s80\"", "\"event\":\"deny_summary\"",
	    "\"reason\":\"new connections over rate\""));
	CHECK(summary_total("s80", &lines) == denied && lines >= 1);

	update(s80, "{\"mode\":\"none\"}");
	as_guest(g_mode_none, NULL);
	CHECK(audited("\"sandbox\":\"s80\"", "network mode none", NULL));
}

/* --- Full mode ---------------------------------------------------------- */

static void
g_full(void *arg)
{
	struct peer *p;
	X509 *leaf;
	char *body;

	/* No credential bound to other.test: spliced, the upstream's own certificate. */
	p = guest_tls_at("127.0.0.4", 443, "other.test");
	CHECK(p != NULL);
	if (p != NULL) {
		leaf = SSL_get1_peer_certificate(p->ssl);
		CHECK(X509_check_issued(ca.root, leaf) == X509_V_OK);
		X509_free(leaf);
		CHECK(exchange(p, "GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n", &body) == 200);
		CHECK_STR(body, "hello /x");
		free(body);
		peer_close(p);
	}
	/* A credential is bound to api.test: intercepted, so it can be put in. */
	p = guest_tls_at("127.0.0.4", 443, "api.test");
	CHECK(p != NULL);
	if (p != NULL) {
		leaf = SSL_get1_peer_certificate(p->ssl);
		CHECK(X509_check_issued(ca.inter, leaf) == X509_V_OK);
		X509_free(leaf);
		CHECK(exchange(p, "GET /echo-headers HTTP/1.1\r\nHost: api.test\r\n"
		    "Authorization: airlock:TOKEN\r\n\r\n", &body) == 200);
		CHECK(body != NULL && strstr(body, "Bearer " SECRET) != NULL);
		free(body);
		peer_close(p);
	}
}

static void
g_full_denied(void *arg)
{
	/* Without the internal exception loopback is denied in full mode too. */
	CHECK(guest_tls_at("127.0.0.4", 443, "other.test") == NULL);
	/* No SNI: the original destination, 127.0.0.4, is loopback. */
	CHECK(guest_tls_at("127.0.0.4", 443, NULL) == NULL);
}

static void
test_full(void)
{
	struct gw_sandbox *sb = attach("sfull", "127.0.0.4", 443, "127.0.4.2",
	    "{\"mode\":\"full\"," POL_BASE "}");

	as_guest(g_full, NULL);
	CHECK(audited("\"sandbox\":\"sfull\"", "\"sni\":\"other.test\"", "\"rule\":\"mode:full\""));
	update(sb, "{\"mode\":\"full\"}");
	as_guest(g_full_denied, NULL);
	CHECK(audited("\"sandbox\":\"sfull\"", "\"decision\":\"deny\"", "denied addresses"));
	CHECK(audited("\"sandbox\":\"sfull\"", "\"dst\":\"127.0.0.4:443\"", "\"reason\":\"loopback\""));
	gw_sandbox_detach(sb);
}

/* --- L4 (needs nftables for a real REDIRECT) ------------------------------ */

static int l4_fd = -1;

static int
guest_marked(const char *ip, int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0), mark = 1;

	inet_pton(AF_INET, ip, &sin.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A guest's A query to its sandbox's DNS; returns the answer count. */
static int
guest_dns(const char *server, const char *name)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(53) };
	struct timeval tv = { 5, 0 };
	uint8_t q[300] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 }, r[512];
	size_t n = 12;
	const char *l = name;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	ssize_t got;

	while (*l != '\0') {
		size_t len = strcspn(l, ".");
		q[n++] = (uint8_t)len;
		memcpy(q + n, l, len);
		n += len;
		l += len;
		if (*l == '.')
			l++;
	}
	memcpy(q + n, "\0\0\1\0\1", 5);
	n += 5;
	inet_pton(AF_INET, server, &sin.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	sendto(fd, q, n, 0, (struct sockaddr *)&sin, sizeof(sin));
	got = recv(fd, r, sizeof(r), 0);
	close(fd);
	return got >= 12 ? (r[6] << 8 | r[7]) : -1;
}

static int
fd_closed(int fd)
{
	char c;

	return read(fd, &c, 1) <= 0;
}

static void
g_l4(void *arg)
{
	char buf[64];
	ssize_t n, got = 0;
	int fd;

	/* db.test:5432 is allowed, but the guest has not resolved it here yet. */
	fd = guest_marked("127.0.0.1", 5432);
	CHECK(fd != -1 && fd_closed(fd));
	close(fd);
	CHECK(guest_dns("127.0.5.2", "db.test") == 1);
	fd = guest_marked("127.0.0.1", 5432);
	CHECK(write(fd, "hello", 5) == 5);
	shutdown(fd, SHUT_WR);
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	buf[got] = '\0';
	CHECK_STR(buf, "hellobye\n");	/* echoed, then the EOF came through */
	close(fd);
	/* Same address, a port without a rule. */
	fd = guest_marked("127.0.0.1", 5433);
	CHECK(fd != -1 && fd_closed(fd));
	close(fd);
	/* One left open for the policy update. */
	l4_fd = guest_marked("127.0.0.1", 5432);
	CHECK(write(l4_fd, "x", 1) == 1);
	CHECK(read(l4_fd, buf, 1) == 1);
}

static void
g_l4_after_update(void *arg)
{
	CHECK(fd_closed(l4_fd));
	close(l4_fd);
}

static void
test_l4(void)
{
	const char *rules = "table ip gwtest {\n chain out {\n"
	    "  type nat hook output priority -100; policy accept;\n"
	    "  meta mark 0x1 tcp dport { 5432, 5433 } redirect to :15001\n }\n}\n";
	char path[128];
	struct gw_sandbox *sb;
	FILE *f;

	snprintf(path, sizeof(path), "%s/nft.rules", ca.dir);
	f = fopen(path, "w");
	fputs(rules, f);
	fclose(f);
	snprintf(path, sizeof(path), "nft -f %s/nft.rules 2>/dev/null", ca.dir);
	if (system(path) != 0) {
		fprintf(stderr, "nft unavailable: L4 scenarios skipped\n");
		return;
	}
	sb = attach("sl4", "127.0.0.1", 15001, "127.0.5.2",
	    "{\"mode\":\"allowlist\",\"allow\":[\"db.test:5432\"],\"internal\":[\"127.0.0.0/8\"]}");
	as_guest(g_l4, NULL);
	CHECK(audited("\"kind\":\"l4\"", "\"dst\":\"127.0.0.1:5432\"", "\"rule\":\"db.test:5432\""));
	CHECK(audited("\"dst\":\"127.0.0.1:5433\"", "\"decision\":\"deny\"", NULL));
	/* The rule goes away: the open splice is closed. */
	update(sb, "{\"mode\":\"allowlist\",\"allow\":[\"api.test\"],\"internal\":[\"127.0.0.0/8\"]}");
	as_guest(g_l4_after_update, NULL);
	CHECK(audited("\"dst\":\"127.0.0.1:5432\"", "rule removed", NULL));
	gw_sandbox_detach(sb);
}

/* --- Workers: one sandbox's flood, another's service ---------------------- */

/*
 * A second gateway in this process, run as airlock-gateway runs it: two
 * worker threads, the control server on this test's loop (gw.base, also
 * the main thread's here), attach/stats/detach over the real control
 * socket. It shares the issuer, the audit writer and the upstream context
 * with gw: those are the shared objects the threads must not race on.
 */
static struct gw	 gwt;
static char		 ctl_path[96];

/* One control request (blocking, as airlockd does) and its reply. */
static json_t *
ctl_call(int fd, json_t *req, const int *fds, size_t nfds)
{
	int rfds[GW_CTL_MAX_FDS];
	size_t nr = 0;
	json_t *reply = NULL;
	char *cause = NULL;

	if (gw_ctl_send(fd, req, fds, nfds, &cause) == -1 ||
	    gw_ctl_recv(fd, &reply, rfds, &nr, &cause) != 1) {
		fprintf(stderr, "control: %s\n", cause ?: "closed");
		free(cause);
		reply = NULL;
	}
	json_decref(req);
	if (reply != NULL && !json_is_true(json_object_get(reply, "ok")))
		fprintf(stderr, "control: %s\n", json_string_value(json_object_get(reply, "error")));
	return reply;
}

static int
ctl_attach(int fd, const char *id, const char *ip, const char *dnsip)
{
	int fds[2] = { tcp_listen(ip, 443, SOCK_STREAM), tcp_listen(dnsip, 53, SOCK_DGRAM) };
	json_t *pol = json_loads("{\"mode\":\"allowlist\",\"allow\":[\"api.test\"],"
	    "\"internal\":[\"127.0.0.0/8\"]}", 0, NULL);
	json_t *r = ctl_call(fd, json_pack("{s:s,s:s,s:s,s:o}", "op", "attach", "sandbox", id,
	    "project", "p", "policy", pol), fds, 2);
	int ok = r != NULL && json_is_true(json_object_get(r, "ok"));

	close(fds[0]);	/* the gateway has its own copies */
	close(fds[1]);
	json_decref(r);
	return ok;
}

/* A sandbox's counter (or worker) from a stats reply. */
static json_int_t
ctl_stat(int fd, const char *id, const char *name)
{
	json_t *r = ctl_call(fd, json_pack("{s:s,s:s}", "op", "stats", "sandbox", id), NULL, 0);
	json_int_t v = json_integer_value(json_object_get(json_object_get(
	    json_object_get(r, "sandboxes"), id), name));

	json_decref(r);
	return v;
}

struct flood {
	volatile int	 stop;
	int		 connects;
};

/*
 * The attacker: connect to its own island listener as fast as it can, the
 * first 300 held open without a byte (a slowloris of TLS handshakes that
 * never start), the rest closed at once.
 */
static void *
flooder(void *arg)
{
	struct flood *f = arg;
	int held[300], nheld = 0, fd;

	while (!f->stop) {
		if ((fd = tcp_connect("127.0.0.7", 443)) == -1)
			continue;
		f->connects++;
		if (nheld < 300)
			held[nheld++] = fd;
		else
			close(fd);
	}
	while (nheld > 0)
		close(held[--nheld]);
	return NULL;
}

#define FLOOD_VICTIM_REQS	20

static void
g_flood(void *arg)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct flood f = { 0 };
	pthread_t t;
	json_t *r;
	int fd, served = 0, lines = 0;
	json_int_t denied;
	uint64_t total;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", ctl_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		CHECK(!"control connect");
		return;
	}
	r = ctl_call(fd, json_pack("{s:s}", "op", "hello"), NULL, 0);
	CHECK(json_integer_value(json_object_get(r, "threads")) == 2);
	json_decref(r);
	CHECK(ctl_attach(fd, "attacker", "127.0.0.7", "127.0.4.2"));
	CHECK(ctl_attach(fd, "victim", "127.0.0.8", "127.0.5.2"));
	/* Least-loaded sharding: two sandboxes, two workers. */
	CHECK(ctl_stat(fd, "attacker", "worker") != ctl_stat(fd, "victim", "worker"));

	pthread_create(&t, NULL, flooder, &f);
	usleep(300 * 1000);	/* the bucket's burst is gone: refusals from here on */
	/* Meanwhile the victim is served: full TLS interception and an upstream request each. */
	for (int i = 0; i < FLOOD_VICTIM_REQS; i++) {
		struct peer *p = guest_tls_at("127.0.0.8", 443, "api.test");

		if (p != NULL && exchange(p, "GET /v HTTP/1.1\r\nHost: api.test\r\n\r\n", NULL) == 200)
			served++;
		if (p != NULL)
			peer_close(p);
	}
	/*
	 * On until the gateway has refused some (its own count, asked over the
	 * control socket): how fast the flooder connects depends on the host's
	 * load, so a fixed duration proves nothing (10 s at most).
	 */
	for (int i = 0; i < 100 && (f.connects < 3 * GW_ACCEPT_BURST ||
	    ctl_stat(fd, "attacker", "conns_denied") == 0); i++)
		usleep(100 * 1000);
	f.stop = 1;
	pthread_join(t, NULL);
	fprintf(stderr, "flood: %d connects by the attacker, victim served %d/%d\n", f.connects,
	    served, FLOOD_VICTIM_REQS);
	CHECK(served == FLOOD_VICTIM_REQS);
	CHECK(f.connects > GW_ACCEPT_BURST + GW_ACCEPT_RATE);

	/* Wait out the summary window, then compare the audit with the counters. */
	usleep((GW_DENY_WINDOW_MS + 300) * 1000);
	denied = ctl_stat(fd, "attacker", "conns_denied");
	total = summary_total("attacker", &lines);
	fprintf(stderr, "flood: attacker conns_denied %lld, deny_summary lines %d, total %llu\n",
	    (long long)denied, lines, (unsigned long long)total);
	CHECK(denied > 0);
	CHECK(total == (uint64_t)denied);	/* every refusal is in the audit log, none twice */
	CHECK(lines >= 1);
	CHECK(audited("\"sandbox\":\"attacker\"", "\"event\":\"deny_summary\"",
	    "\"reason\":\"new connections over rate\""));
	CHECK(summary_total("victim", &lines) == 0 && lines == 0);
	CHECK(ctl_stat(fd, "victim", "requests") == FLOOD_VICTIM_REQS);

	json_decref(ctl_call(fd, json_pack("{s:s,s:s}", "op", "detach", "sandbox", "attacker"),
	    NULL, 0));
	json_decref(ctl_call(fd, json_pack("{s:s,s:s}", "op", "detach", "sandbox", "victim"),
	    NULL, 0));
	r = ctl_call(fd, json_pack("{s:s}", "op", "hello"), NULL, 0);
	CHECK(json_array_size(json_object_get(r, "sandboxes")) == 0);
	json_decref(r);
	close(fd);
}

/* threads=1: the one worker runs on the main base, control still goes through jobs. */
static void
g_inline_ctl(void *arg)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct peer *p;
	json_t *r;
	int fd;

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", ctl_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		CHECK(!"control connect");
		return;
	}
	r = ctl_call(fd, json_pack("{s:s}", "op", "hello"), NULL, 0);
	CHECK(json_integer_value(json_object_get(r, "threads")) == 1);
	json_decref(r);
	CHECK(ctl_attach(fd, "inline", "127.0.0.9", "127.0.6.2"));
	CHECK(ctl_stat(fd, "inline", "worker") == 0);
	p = guest_tls_at("127.0.0.9", 443, "api.test");
	CHECK(p != NULL && exchange(p, "GET /i HTTP/1.1\r\nHost: api.test\r\n\r\n", NULL) == 200);
	if (p != NULL)
		peer_close(p);
	CHECK(ctl_stat(fd, "inline", "requests") == 1);
	/* Update and detach of an unknown id are refused by the main thread itself. */
	r = ctl_call(fd, json_pack("{s:s,s:s}", "op", "detach", "sandbox", "nobody"), NULL, 0);
	CHECK(r != NULL && json_is_false(json_object_get(r, "ok")));
	json_decref(r);
	json_decref(ctl_call(fd, json_pack("{s:s,s:s}", "op", "detach", "sandbox", "inline"),
	    NULL, 0));
	r = ctl_call(fd, json_pack("{s:s}", "op", "hello"), NULL, 0);
	CHECK(json_array_size(json_object_get(r, "sandboxes")) == 0);
	json_decref(r);

	/*
	 * The island's drops, counted by airlockd: one deny_summary line per
	 * reason in the gateway's audit, also for a sandbox no longer attached
	 * (the last count comes after the detach); a malformed count is refused.
	 */
	r = ctl_call(fd, json_pack("{s:s,s:s,s:i,s:[{s:s,s:s,s:i},{s:s,s:s,s:i}]}", "op", "drops",
	    "sandbox", "inline", "window_ms", 5000, "drops", "kind", "udp", "reason",
	    "UDP other than DNS", "count", 321, "kind", "ipv6", "reason", "IPv6 is not routed",
	    "count", 4), NULL, 0);
	CHECK(r != NULL && json_is_true(json_object_get(r, "ok")));
	json_decref(r);
	CHECK(audited("\"sandbox\":\"inline\"", "\"reason\":\"UDP other than DNS\"",
	    "\"count\":321"));
	CHECK(audited("\"event\":\"deny_summary\"", "\"kind\":\"ipv6\"", "\"window_ms\":5000"));
	{
		int lines;

		CHECK(summary_total("inline", &lines) == 325 && lines == 2);
	}
	r = ctl_call(fd, json_pack("{s:s,s:s,s:i,s:[{s:s,s:s,s:i}]}", "op", "drops", "sandbox",
	    "inline", "window_ms", 5000, "drops", "kind", "udp", "reason", "x", "count", 0), NULL, 0);
	CHECK(r != NULL && json_is_false(json_object_get(r, "ok")));
	json_decref(r);
	r = ctl_call(fd, json_pack("{s:s,s:s,s:[]}", "op", "drops", "sandbox", "inline", "drops"),
	    NULL, 0);
	CHECK(r != NULL && json_is_false(json_object_get(r, "ok")));
	json_decref(r);
	close(fd);
}

static void
test_inline_ctl(void)
{
	char *cause = NULL;

	memset(&gwt, 0, sizeof gwt);
	gwt.base = gw.base;
	gwt.certs = gw.certs;
	gwt.audit = gw.audit;
	gwt.upstream_ctx = gw.upstream_ctx;
	gwt.host_addrs = gw.host_addrs;
	gwt.cfg.resolver = "127.0.0.53";
	snprintf(ctl_path, sizeof ctl_path, "%s/ctl1.sock", audit_dir);
	if (gw_workers_init(&gwt, 1, &cause) == -1 || gw_workers_start(&gwt, &cause) == -1 ||
	    gw_server_listen(&gwt, ctl_path, &cause) == -1) {
		fprintf(stderr, "workers: %s\n", cause);
		CHECK(0);
		return;
	}
	as_guest(g_inline_ctl, NULL);
	gw_workers_stop(&gwt);
	gw_server_close(&gwt);
	unlink(ctl_path);
}

static void
test_flood(void)
{
	char *cause = NULL;

	gwt.base = gw.base;
	gwt.certs = gw.certs;
	gwt.audit = gw.audit;
	gwt.upstream_ctx = gw.upstream_ctx;
	gwt.host_addrs = gw.host_addrs;
	gwt.cfg.resolver = "127.0.0.53";
	snprintf(ctl_path, sizeof ctl_path, "%s/ctl.sock", audit_dir);
	if (gw_workers_init(&gwt, 2, &cause) == -1 || gw_workers_start(&gwt, &cause) == -1 ||
	    gw_server_listen(&gwt, ctl_path, &cause) == -1) {
		fprintf(stderr, "workers: %s\n", cause);
		CHECK(0);
		return;
	}
	as_guest(g_flood, NULL);
	gw_workers_stop(&gwt);
	gw_server_close(&gwt);
	unlink(ctl_path);
}

int
main(void)
{
	struct evdns_server_port *dnsport;
	struct gw_sandbox *s443, *s80;
	char *cause = NULL, resolver[64];
	struct event *done_ev;
	int dnsfd;

	signal(SIGPIPE, SIG_IGN);
	log_init("test_gw_proxy", getenv("GW_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_WARN);
	/* A private loopback: ports 80/443 and 127.0.0.x are ours alone. */
	if (unshare(CLONE_NEWNET) == -1 && unshare(CLONE_NEWUSER | CLONE_NEWNET) == -1) {
		fprintf(stderr, "no network namespace (%s): skipped\n", strerror(errno));
		return 77;
	}
	{
		struct ifreq ifr = { 0 };
		int s = socket(AF_INET, SOCK_DGRAM, 0);

		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
		ioctl(s, SIOCGIFFLAGS, &ifr);
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1) {
			perror("lo up");
			return 2;
		}
		close(s);
	}
	tca_init(&ca);
	snprintf(api_cert, sizeof(api_cert), "%s/api.pem", ca.dir);
	snprintf(api_key, sizeof(api_key), "%s/api.key", ca.dir);
	{
		/* bad.test: self-signed, not from any trusted CA. */
		EVP_PKEY *k = EVP_EC_gen("P-256");
		X509 *x = tca_cert("bad.test", k, NULL, NULL, 1, NULL);

		snprintf(bad_cert, sizeof(bad_cert), "%s/bad.pem", ca.dir);
		snprintf(bad_key, sizeof(bad_key), "%s/bad.key", ca.dir);
		tca_write(bad_cert, x, NULL, NULL);
		tca_write(bad_key, NULL, NULL, k);
		X509_free(x);
		EVP_PKEY_free(k);
	}
	{
		/* One certificate for every 127.0.0.1 name. */
		EVP_PKEY *k = EVP_EC_gen("P-256");
		X509 *x = tca_cert("api.test", k, ca.root, ca.root_key, 0,
		    "DNS:api.test,DNS:other.test,DNS:ws.test,DNS:private.test");

		tca_write(api_cert, x, NULL, NULL);
		tca_write(api_key, NULL, NULL, k);
		X509_free(x);
		EVP_PKEY_free(k);
	}
	server("127.0.0.1", 443, "https", api_cert, api_key);
	server("127.0.0.3", 443, "https", bad_cert, bad_key);
	server("127.0.0.1", 80, "http", NULL, NULL);
	server("127.0.0.1", 5432, "echo", NULL, NULL);

	memset(&gw, 0, sizeof(gw));
	/* The flood test runs threaded workers beside this loop: bases need locks. */
	evthread_use_pthreads();
	gw.base = event_base_new();
	gw_worker_init_inline(&w, &gw, gw.base);
	dnsfd = tcp_listen("127.0.0.53", 53, SOCK_DGRAM);
	evutil_make_socket_nonblocking(dnsfd);
	dnsport = evdns_add_server_port_with_base(gw.base, dnsfd, 0, dns_cb, NULL);
	snprintf(resolver, sizeof(resolver), "127.0.0.53");
	if ((w.dns = gw_resolver_new(gw.base, resolver, &cause)) == NULL ||
	    (gw.certs = gw_certs_new(ca.int_pem, ca.int_key, &cause)) == NULL ||
	    (gw.host_addrs = gw_addrset_local(&cause)) == NULL) {
		fprintf(stderr, "setup: %s\n", cause);
		return 2;
	}
	gw.upstream_ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_verify(gw.upstream_ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_load_verify_locations(gw.upstream_ctx, ca.root_pem, NULL);
	snprintf(audit_dir, sizeof(audit_dir), "/tmp/test_gw_proxy.XXXXXX");
	if (mkdtemp(audit_dir) == NULL ||
	    (gw.audit = gw_audit_open(audit_dir, 1 << 24, 1, &cause)) == NULL)
		return 2;
	guest_ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_verify(guest_ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_load_verify_locations(guest_ctx, ca.root_pem, NULL);
	if (pipe(done_pipe) == -1)
		return 2;
	done_ev = event_new(gw.base, done_pipe[0], EV_READ | EV_PERSIST, done_cb, NULL);
	event_add(done_ev, NULL);

	s443 = attach("s443", "127.0.0.2", 443, "127.0.1.2", "{\"mode\":\"allowlist\",\"allow\":[\"api.test\",\"bad.test\","
	    "\"private.test\"]," POL_BASE "}");
	s80 = attach("s80", "127.0.0.2", 80, "127.0.2.2", "{\"mode\":\"allowlist\",\"allow\":[\"api.test\"]," POL_BASE "}");

	T_RUN_ARG(test_https_keepalive, s443);
	T_RUN_ARG(test_https_denied, s443);
	T_RUN(test_plain);
	T_RUN_ARG2(test_http_more, s443, s80);
	T_RUN(test_full);
	T_RUN(test_l4);
	T_RUN(test_flood);
	T_RUN(test_inline_ctl);

	while (!TAILQ_EMPTY(&w.sandboxes))
		gw_sandbox_detach(TAILQ_FIRST(&w.sandboxes));
	for (int i = 0; i < 5; i++)
		event_base_loop(gw.base, EVLOOP_NONBLOCK);
	for (int i = 0; i < nservers; i++) {
		kill(servers[i], SIGTERM);
		waitpid(servers[i], NULL, 0);
	}
	event_free(done_ev);
	evdns_close_server_port(dnsport);
	evdns_base_free(w.dns, 0);
	close(dnsfd);
	gw_certs_free(gw.certs);
	gw_addrset_free(gw.host_addrs);
	SSL_CTX_free(gw.upstream_ctx);
	SSL_CTX_free(guest_ctx);
	gw_audit_close(gw.audit);
	event_base_free(gw.base);
	if (getenv("KEEP_AUDIT") == NULL)
		(void)remove_tree(audit_dir, NULL);
	else
		fprintf(stderr, "audit log in %s\n", audit_dir);
	tca_free(&ca);
	return t_done();
}
