/*
 * Cluster mTLS over loopback, end to end: certificates made by the code
 * `airlock cluster` runs (cluster_ca_init, cluster_cert_issue) in a temp
 * dir, a real http_server behind http_tls_new_mtls, and http_client over
 * the TLS client bufferevent. The API's certificate reaches a worker; every
 * other peer is refused in the handshake: no client certificate, another
 * CA, the wrong role (either way), an expired certificate, no role at all,
 * TLS 1.2. A refusal is no HTTP answer at all (no response head, the
 * handler never ran), and the server logs it once per peer address with
 * the reason. Hostile clients are raw OpenSSL, not our client.
 */
#include <arpa/inet.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/cluster_ca.h"
#include "common/log.h"
#include "common/util.h"
#include "http/http_client.h"
#include "http/http_server.h"
#include "http/http_tls.h"
#include "t.h"

static struct event_base *base;
static char dir[] = "/tmp/airlock-cluster-tls-XXXXXX";

/* DIR/<name>/{tls.crt,tls.key,ca.crt} */
static char *
f(const char *name, const char *file)
{
	static char buf[8][512];
	static int n;
	char *p = buf[n++ % 8];

	snprintf(p, sizeof(buf[0]), "%s/%s/%s", dir, name, file);
	return p;
}

static void
issue(const char *ca, const char *name, const char *role, int days)
{
	char *cadir, *out, *cause = NULL;
	const struct cluster_cert_spec s = { .role = role, .days = days };

	xasprintf(&cadir, "%s/%s", dir, ca);
	xasprintf(&out, "%s/%s", dir, name);
	if (cluster_cert_issue(cadir, out, &s, &cause) == -1) {
		fprintf(stderr, "issue %s: %s\n", name, cause);
		exit(2);
	}
	free(cadir);
	free(out);
}

/* A certificate from ca whose SAN names no role (a DNS name only). */
static void
issue_roleless(const char *name)
{
	static const struct ca_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:FALSE" },
		{ NID_ext_key_usage, "serverAuth,clientAuth" },
		{ NID_subject_alt_name, "DNS:api.example" },
		{ NID_authority_key_identifier, "keyid:always" },
		{ 0, NULL },
	};
	const struct ca_mint m = { .cn = "airlock-api", .days = 10, .exts = exts };
	char *cadir, *out, *cause = NULL;
	int renewed;

	xasprintf(&cadir, "%s/ca", dir);
	xasprintf(&out, "%s/%s", dir, name);
	CHECK(mkdir_p(out, 0700, NULL) == 0);
	if (ca_mint(cadir, f(name, "tls.crt"), f(name, "tls.key"), &m, &renewed, &cause) == -1) {
		fprintf(stderr, "roleless: %s\n", cause);
		exit(2);
	}
	free(cadir);
	free(out);
}

/* The server: a worker-like handler that counts what reaches it. */
struct srv {
	struct http_server	*http;
	struct http_tls		*tls;
	int			 port;
	int			 requests;
};

static void
srv_route(struct http_req *req, void *arg)
{
	struct srv *s = arg;
	static const char hello[] = "hello from the worker\n";

	s->requests++;
	http_reply(req, 200, "text/plain", hello, sizeof(hello) - 1);
}

static void
srv_start(struct srv *s, const char *name, const char *want)
{
	char *cause = NULL;

	memset(s, 0, sizeof(*s));
	s->tls = http_tls_new_mtls(f(name, "tls.crt"), f(name, "tls.key"), f(name, "ca.crt"), want,
	    &cause);
	if (s->tls == NULL) {
		fprintf(stderr, "server %s: %s\n", name, cause);
		exit(2);
	}
	s->http = http_server_new(base, srv_route, s);
	http_tls_attach(s->tls, s->http);
	if (http_server_listen(s->http, "127.0.0.1", 0, &cause) == -1) {
		fprintf(stderr, "listen: %s\n", cause);
		exit(2);
	}
	s->port = http_server_port(s->http);
}

static void
srv_stop(struct srv *s)
{
	http_server_free(s->http);
	http_tls_free(s->tls);
}

/* What one request saw. */
struct res {
	int		 status;		/* 0: no response head */
	char		 body[256];
	size_t		 blen;
	char		*error;			/* done's */
	char		*tls_error;		/* http_tls_client_error at done */
	int		 done;
	int		 tls13, alpn_h11;
};

static void
res_head(struct http_creq *r, int status, const char *ctype, void *arg)
{
	struct res *res = arg;
	SSL *ssl = bufferevent_openssl_get_ssl(http_creq_bev(r));
	const unsigned char *alpn = NULL;
	unsigned int alen = 0;

	res->status = status;
	if (ssl != NULL) {
		res->tls13 = SSL_version(ssl) == TLS1_3_VERSION;
		SSL_get0_alpn_selected(ssl, &alpn, &alen);
		res->alpn_h11 = alen == 8 && memcmp(alpn, "http/1.1", 8) == 0;
	}
}

static void
res_data(struct http_creq *r, const char *data, size_t n, void *arg)
{
	struct res *res = arg;

	if (n > sizeof(res->body) - 1 - res->blen)
		n = sizeof(res->body) - 1 - res->blen;
	memcpy(res->body + res->blen, data, n);
	res->blen += n;
}

static void
res_done(struct http_creq *r, const char *error, void *arg)
{
	struct res *res = arg;
	const char *te = http_tls_client_error(http_creq_bev(r));

	res->done = 1;
	res->error = error != NULL ? xstrdup(error) : NULL;
	res->tls_error = te != NULL ? xstrdup(te) : NULL;
	event_base_loopbreak(base);
}

static void
res_free(struct res *res)
{
	free(res->error);
	free(res->tls_error);
}

/* GET / over bev (a TLS client bufferevent); waits up to 10 s for the end. */
static void
request(struct bufferevent *bev, struct res *res)
{
	static const struct http_client_cb cb = { res_head, res_data, res_done, NULL };
	const struct http_creq_spec spec = { .method = "GET", .target = "/", .host = "worker",
	    .body_len = 0, .peer = "the worker" };
	struct timeval tv = { 10, 0 };
	struct http_creq *r;

	memset(res, 0, sizeof(*res));
	r = http_client_start(bev, &spec, &cb, res);
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
	if (!res->done) {
		fprintf(stderr, "request: no end within 10 s\n");
		http_creq_cancel(r);
	}
	/* Let the server's side of the exchange run to its end too. */
	tv.tv_sec = 0;
	tv.tv_usec = 100000;
	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/*
 * Our client, presenting name's certificate and wanting want from the
 * server, over http_tls_client_connect or (wrap) over a socket bufferevent
 * of the caller's.
 */
static void
request_via(struct srv *s, const char *name, const char *want, int wrap, struct res *res)
{
	struct http_tls_client *c;
	struct bufferevent *bev;
	char *cause = NULL;

	c = http_tls_client_new(f(name, "tls.crt"), f(name, "tls.key"), f(name, "ca.crt"), want,
	    &cause);
	if (c == NULL) {
		fprintf(stderr, "client %s: %s\n", name, cause);
		exit(2);
	}
	if (wrap) {
		struct sockaddr_in sin;
		struct bufferevent *under = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);

		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(0x7f000001);
		sin.sin_port = htons((uint16_t)s->port);
		CHECK(bufferevent_socket_connect(under, (struct sockaddr *)&sin, sizeof(sin)) == 0);
		bev = http_tls_client_wrap(c, under, "the test's worker");
	} else {
		char addr[32];

		snprintf(addr, sizeof(addr), "127.0.0.1:%d", s->port);
		bev = http_tls_client_connect(c, base, addr, &cause);
	}
	if (bev != NULL)
		request(bev, res);
	else {
		/* A connect refused at once (loopback may): the same failure, earlier. */
		memset(res, 0, sizeof(*res));
		res->done = 1;
		res->error = cause;
	}
	http_tls_client_free(c);
}

static void
request_as(struct srv *s, const char *name, const char *want, struct res *res)
{
	request_via(s, name, want, 0, res);
}

/*
 * A hostile client: raw OpenSSL with any certificate (or none), verifying
 * nothing, at most TLS version max (0: any).
 */
static void
request_raw(struct srv *s, const char *name, int max, struct res *res)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	struct bufferevent *under, *bev;
	struct sockaddr_in sin;
	SSL *ssl;

	if (name != NULL) {
		CHECK(SSL_CTX_use_certificate_chain_file(ctx, f(name, "tls.crt")) == 1);
		CHECK(SSL_CTX_use_PrivateKey_file(ctx, f(name, "tls.key"), SSL_FILETYPE_PEM) == 1);
	}
	if (max != 0)
		SSL_CTX_set_max_proto_version(ctx, max);
	SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9);
	ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x7f000001);
	sin.sin_port = htons((uint16_t)s->port);
	under = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	CHECK(bufferevent_socket_connect(under, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	bev = bufferevent_openssl_filter_new(base, under, ssl, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE);
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	request(bev, res);
}

/* stderr into a file while a case runs: the server's refusal lines. */
static int saved_stderr = -1;
static char logpath[600];

static void
capture_start(void)
{
	int fd;

	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* The captured lines (malloc'd), echoed to the real stderr. */
static char *
capture_end(void)
{
	char *log = NULL;
	size_t len;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	if (read_file(logpath, 1 << 20, &log, &len, NULL) == -1)
		log = xstrdup("");
	fputs(log, stderr);
	return log;
}

/* Lines of log that contain needle. */
static int
count_lines(const char *log, const char *needle)
{
	const char *p = log;
	int n = 0;

	while ((p = strstr(p, needle)) != NULL) {
		n++;
		p += strlen(needle);
	}
	return n;
}

/* A refused handshake: no response head, the handler never ran, done with an error. */
static void
check_refused(const struct srv *s, const struct res *res)
{
	CHECK(res->done);
	CHECK(res->status == 0);
	CHECK(res->blen == 0);
	CHECK(res->error != NULL);
	CHECK(s->requests == 0);
}

/* The server refused client name (raw or ours) and said why, once. */
static void
refused_by_server(const char *what, const char *name, int raw, int max, const char *why)
{
	struct srv s;
	struct res res;
	char *log, line[256];

	fprintf(stderr, "-- refused by the server: %s\n", what);
	srv_start(&s, "worker", "api");
	capture_start();
	if (raw)
		request_raw(&s, name, max, &res);
	else
		request_as(&s, name, "worker", &res);
	log = capture_end();
	check_refused(&s, &res);
	CHECK(http_tls_refused(s.tls) == 1);
	snprintf(line, sizeof(line), "refused 127.0.0.1 (want role api): %s", why);
	CHECK(count_lines(log, line) == 1);
	if (!raw)
		CHECK(res.tls_error != NULL && strstr(res.tls_error, "the server refused") != NULL);
	free(log);
	res_free(&res);
	srv_stop(&s);
}

/* The API's certificate reaches a worker over TLS 1.3 with ALPN http/1.1. */
static void
test_api_to_worker(void)
{
	struct srv s;
	struct res res;

	srv_start(&s, "worker", "api");
	request_as(&s, "api", "worker", &res);
	CHECK(res.done && res.error == NULL);
	CHECK(res.status == 200);
	CHECK(res.blen == 22 && memcmp(res.body, "hello from the worker\n", 22) == 0);
	CHECK(res.tls13 && res.alpn_h11);
	CHECK(s.requests == 1);
	CHECK(http_tls_refused(s.tls) == 0);
	CHECK(res.tls_error == NULL);
	res_free(&res);
	/* A second connection is verified in full again (no resumption) and works as well. */
	request_as(&s, "api", "worker", &res);
	CHECK(res.status == 200 && s.requests == 2);
	res_free(&res);
	/* Over a socket bufferevent of the caller's (http_tls_client_wrap). */
	request_via(&s, "api", "worker", 1, &res);
	CHECK(res.status == 200 && s.requests == 3 && res.tls13 && res.alpn_h11);
	CHECK(res.blen == 22 && memcmp(res.body, "hello from the worker\n", 22) == 0);
	res_free(&res);
	/* ... where a refusal is the request's failure as well. */
	request_via(&s, "worker", "worker", 1, &res);
	CHECK(res.done && res.status == 0 && res.error != NULL && s.requests == 3);
	CHECK(res.tls_error != NULL && strstr(res.tls_error, "the server refused"));
	CHECK(http_tls_refused(s.tls) == 1);
	res_free(&res);
	srv_stop(&s);
	/* Nobody listening any more: the request fails, cleanly. */
	request_as(&s, "api", "worker", &res);
	CHECK(res.done && res.status == 0 && res.error != NULL);
	res_free(&res);
}

static void
test_refused_by_server(void)
{
	refused_by_server("no client certificate", NULL, 1, 0, "no client certificate");
	refused_by_server("another CA", "api-other", 1, 0,
	    "unable to get local issuer certificate");
	refused_by_server("role worker presenting to a worker", "worker", 0, 0,
	    "its certificate is for role worker");
	refused_by_server("expired", "api-expired", 1, 0, "certificate has expired");
	refused_by_server("no role in the certificate", "roleless", 1, 0,
	    "its certificate names no role");
	refused_by_server("TLS 1.2", "api", 1, TLS1_2_VERSION, "not TLS 1.3");
}

/* The same peer refused again within the minute: counted, not logged again. */
static void
test_log_once(void)
{
	struct srv s;
	struct res res;
	char *log;

	srv_start(&s, "worker", "api");
	capture_start();
	request_raw(&s, NULL, 0, &res);
	res_free(&res);
	request_raw(&s, "api-expired", 0, &res);
	res_free(&res);
	request_raw(&s, "api-other", 0, &res);
	log = capture_end();
	check_refused(&s, &res);
	CHECK(http_tls_refused(s.tls) == 3);
	CHECK(count_lines(log, "cluster tls: refused 127.0.0.1") == 1);
	free(log);
	res_free(&res);
	srv_stop(&s);
}

/* Our client refuses a server that is not a worker of this cluster. */
static void
test_refused_by_client(void)
{
	struct srv s;
	struct res res;

	fprintf(stderr, "-- refused by the client: a server of role api\n");
	srv_start(&s, "api", "api");
	request_as(&s, "api", "worker", &res);
	check_refused(&s, &res);
	CHECK(res.tls_error != NULL && strstr(res.tls_error, "its certificate is for role api"));
	CHECK(http_tls_refused(s.tls) == 0);
	res_free(&res);
	srv_stop(&s);

	fprintf(stderr, "-- refused by the client: a worker of another CA\n");
	srv_start(&s, "worker-other", "api");
	request_as(&s, "api", "worker", &res);
	check_refused(&s, &res);
	CHECK(res.tls_error != NULL &&
	    strstr(res.tls_error, "unable to get local issuer certificate"));
	res_free(&res);
	srv_stop(&s);
}

/* What the contexts refuse at load, each naming the file or the setting. */
static void
test_load(void)
{
	struct http_tls_client *c;
	struct http_tls *t;
	struct bufferevent *bev;
	char *cause = NULL;

	t = http_tls_new_mtls(f("api-expired", "tls.crt"), f("api-expired", "tls.key"),
	    f("api-expired", "ca.crt"), "worker", &cause);
	CHECK(t == NULL);
	CHECK_CAUSE(cause, "certificate has expired");
	CHECK_CAUSE(cause, "api-expired/tls.crt");
	free(cause);
	cause = NULL;
	/* The right files of another cluster: its cert does not chain to our CA. */
	c = http_tls_client_new(f("api-other", "tls.crt"), f("api-other", "tls.key"),
	    f("api", "ca.crt"), "worker", &cause);
	CHECK(c == NULL);
	CHECK_CAUSE(cause, "unable to get local issuer certificate");
	free(cause);
	cause = NULL;
	c = http_tls_client_new(f("api", "tls.crt"), f("worker", "tls.key"), f("api", "ca.crt"),
	    "worker", &cause);
	CHECK(c == NULL);
	CHECK_CAUSE(cause, "cluster key");
	free(cause);
	cause = NULL;
	c = http_tls_client_new(f("api", "tls.crt"), f("api", "tls.key"), f("api", "nothing"),
	    "worker", &cause);
	CHECK(c == NULL);
	CHECK_CAUSE(cause, "cluster CA");
	CHECK_CAUSE(cause, "api/nothing");
	free(cause);
	cause = NULL;
	c = http_tls_client_new(f("api", "tls.crt"), f("api", "tls.key"), f("api", "ca.crt"),
	    "Worker,api", &cause);
	CHECK(c == NULL);
	CHECK_CAUSE(cause, "cluster role");
	free(cause);
	cause = NULL;
	c = http_tls_client_new(f("api", "tls.crt"), f("api", "tls.key"), f("api", "ca.crt"),
	    "worker", &cause);
	CHECK(c != NULL);
	bev = http_tls_client_connect(c, base, "worker.example:7443", &cause);
	CHECK(bev == NULL);
	CHECK_CAUSE(cause, "is not IP:PORT");
	free(cause);
	cause = NULL;
	bev = http_tls_client_connect(c, base, "127.0.0.1", &cause);
	CHECK(bev == NULL);
	CHECK_CAUSE(cause, "is not IP:PORT");
	free(cause);
	http_tls_client_free(c);
}

int
main(void)
{
	char *cause = NULL, *p;

	log_init("test_cluster_tls", LOG_LVL_INFO);
	CHECK(mkdtemp(dir) != NULL);
	base = xnonnull(event_base_new(), "event_base_new");
	xasprintf(&p, "%s/ca", dir);
	CHECK(cluster_ca_init(p, 0, &cause) == 0);
	free(p);
	xasprintf(&p, "%s/other", dir);
	CHECK(cluster_ca_init(p, 0, &cause) == 0);
	free(p);
	issue("ca", "api", "api", 30);
	issue("ca", "worker", "worker", 30);
	issue("ca", "api-expired", "api", -1);
	issue("other", "api-other", "api", 30);
	issue("other", "worker-other", "worker", 30);
	issue_roleless("roleless");

	T_RUN(test_api_to_worker);
	T_RUN(test_refused_by_server);
	T_RUN(test_log_once);
	T_RUN(test_refused_by_client);
	T_RUN(test_load);

	event_base_free(base);
	remove_tree(dir, NULL);
	return t_done();
}
