/* TLS transport for http_server, and the cluster's mTLS both ends (see http_tls.h). */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "ca/cluster_ca.h"
#include "common/log.h"
#include "common/util.h"
#include "http/http_server.h"
#include "http/http_tls.h"

/* Peers remembered for the refusal log; a 65th address evicts the quietest. */
#define TLS_PEERLOG_N		64

struct tls_peerlog {
	char		peer[64];
	uint64_t	last_ms;
	unsigned	more;		/* refusals since that line, not logged */
};

/* One mTLS context's policy and refusal log (server or client end). */
struct tls_mtls {
	char			 role[CLUSTER_ROLE_MAX];	/* the role the peer must have */
	unsigned long		 refused;
	struct tls_peerlog	 log[TLS_PEERLOG_N];
};

/* Per connection of an mTLS context (SSL ex_data, freed with the SSL). */
struct tls_conn {
	struct tls_mtls	*m;
	char		 peer[64];	/* an address (server end) or whom we dialled */
	char		 reason[256];	/* why the handshake failed, once known */
	int		 ended;		/* a fatal alert went by: logged already */
};

struct http_tls {
	SSL_CTX		*ctx;
	struct tls_mtls	*mtls;		/* NULL: the API's plain server TLS */
};

struct http_tls_client {
	SSL_CTX		*ctx;
	struct tls_mtls	 mtls;
};

static CRYPTO_ONCE tls_once = CRYPTO_ONCE_STATIC_INIT;
static int tls_conn_idx = -1;

static void
tls_conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	free(ptr);
}

static void
tls_idx_init(void)
{
	tls_conn_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, tls_conn_free);
}

static struct tls_conn *
tls_conn_get(const SSL *ssl)
{
	return ssl != NULL && tls_conn_idx != -1 ? SSL_get_ex_data(ssl, tls_conn_idx) : NULL;
}

/* Attach a connection's state to ssl (freed with it). */
static void
tls_conn_attach(SSL *ssl, struct tls_mtls *m, const char *peer)
{
	struct tls_conn *c = xcalloc(1, sizeof(*c));

	c->m = m;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	if (!CRYPTO_THREAD_run_once(&tls_once, tls_idx_init) || tls_conn_idx == -1 ||
	    SSL_set_ex_data(ssl, tls_conn_idx, c) != 1)
		fatalx("tls: SSL ex_data: out of memory");
}

static int
http_tls_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";

	/* Only HTTP/1.1 is spoken; a client offering h2 alone gets no ALPN. */
	if (SSL_select_next_proto((unsigned char **)out, outlen, h11, sizeof(h11) - 1, in,
	    inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	return SSL_TLSEXT_ERR_OK;
}

/* OpenSSL's reason for the last error, or what. */
static const char *
tls_err(const char *what)
{
	const char *r = ERR_reason_error_string(ERR_get_error());

	return r != NULL ? r : what;
}

/* Certificate chain and key into ctx; the causes name the files as the settings call them. */
static int
tls_load_pair(SSL_CTX *ctx, const char *cert, const char *key, const char *cert_name,
    const char *key_name, char **cause)
{
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		cause_set(cause, "%s %s: %s", cert_name, cert, tls_err("unreadable"));
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		cause_set(cause, "%s %s: %s", key_name, key,
		    tls_err("unreadable or not the certificate's key"));
		return -1;
	}
	return 0;
}

struct http_tls *
http_tls_new(const char *cert, const char *key, char **cause)
{
	struct http_tls *tls = xcalloc(1, sizeof(*tls));

	if ((tls->ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		fatalx("SSL_CTX_new");
	SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(tls->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* Fewer idle buffers per kept-alive connection. */
	SSL_CTX_set_mode(tls->ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_select_cb(tls->ctx, http_tls_alpn, NULL);
	if (tls_load_pair(tls->ctx, cert, key, "tls_cert", "tls_key", cause) == -1) {
		ERR_clear_error();
		http_tls_free(tls);
		return NULL;
	}
	return tls;
}

/*
 * The refusal log: the first refusal of a peer is logged, later ones
 * within the interval only counted and reported with the next line, so a
 * misconfigured peer retrying in a loop costs a line a minute.
 */
static void
tls_log(struct tls_conn *c, int by_us)
{
	struct tls_mtls *m = c->m;
	struct tls_peerlog *e = NULL, *old = &m->log[0];
	uint64_t now = monotonic_ms();
	char more[64] = "";
	size_t i;

	if (by_us)
		m->refused++;
	for (i = 0; i < TLS_PEERLOG_N && e == NULL; i++) {
		if (m->log[i].peer[0] != '\0' && strcmp(m->log[i].peer, c->peer) == 0)
			e = &m->log[i];
		else if (m->log[i].last_ms < old->last_ms)
			old = &m->log[i];
	}
	if (e != NULL && now - e->last_ms < (uint64_t)HTTP_LIMIT_LOG_INTERVAL_S * 1000) {
		e->more++;
		return;
	}
	if (e == NULL) {
		e = old;
		memset(e, 0, sizeof(*e));
		snprintf(e->peer, sizeof(e->peer), "%s", c->peer);
	}
	if (e->more > 0)
		snprintf(more, sizeof(more), " (and %u more from there since the last line)",
		    e->more);
	e->more = 0;
	e->last_ms = now;
	if (by_us)
		log_warnx("cluster tls: refused %s (want role %s): %s%s", c->peer, m->role,
		    c->reason, more);
	else
		log_warnx("cluster tls: %s: %s%s", c->peer, c->reason, more);
}

/* An alert's name: OpenSSL 3.0 has none for TLS 1.3's certificate_required. */
static const char *
tls_alert_name(int alert)
{
	if ((alert & 0xff) == SSL_AD_CERTIFICATE_REQUIRED)
		return "certificate required";
	return SSL_alert_desc_string_long(alert);
}

/*
 * The reason for an alert we send without a verification failure of our
 * own: what the alert says, else OpenSSL's error (a record it could not
 * read, ...).
 */
static void
tls_alert_reason(struct tls_conn *c, int alert)
{
	const char *what = NULL;

	switch (alert & 0xff) {
	case SSL_AD_CERTIFICATE_REQUIRED:
		what = "no client certificate";
		break;
	case SSL_AD_PROTOCOL_VERSION:
		what = "not TLS 1.3";
		break;
	default:
		what = ERR_reason_error_string(ERR_peek_last_error());
		break;
	}
	snprintf(c->reason, sizeof(c->reason), "%s (alert %s)",
	    what != NULL ? what : "handshake failed", tls_alert_name(alert));
}

/*
 * Fatal alerts end a handshake (or a connection) either way: one we send
 * is our refusal, one we read is the peer's. In TLS 1.3 a client learns
 * that the server refused its certificate only from the alert, after its
 * own side of the handshake finished.
 */
static void
tls_info(const SSL *ssl, int where, int ret)
{
	struct tls_conn *c;

	if (!(where & SSL_CB_ALERT) || (ret >> 8) != SSL3_AL_FATAL ||
	    (c = tls_conn_get(ssl)) == NULL || c->ended)
		return;
	c->ended = 1;
	if (where & SSL_CB_WRITE) {
		if (c->reason[0] == '\0')
			tls_alert_reason(c, ret);
		tls_log(c, 1);
	} else {
		snprintf(c->reason, sizeof(c->reason), "%s refused the handshake: alert %s",
		    SSL_is_server(ssl) ? "the client" : "the server", tls_alert_name(ret));
		tls_log(c, 0);
	}
}

/*
 * The peer's role: every SAN URI under CLUSTER_ROLE_URI must name want,
 * and there must be one. 0, or -1 with why in c->reason.
 */
static int
tls_role_check(X509 *x, struct tls_conn *c)
{
	GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	const size_t plen = sizeof(CLUSTER_ROLE_URI) - 1, wlen = strlen(c->m->role);
	const unsigned char *s;
	char got[CLUSTER_ROLE_MAX];
	int i, n = 0, len;
	size_t j;

	got[0] = '\0';
	for (i = 0; i < sk_GENERAL_NAME_num(gens); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);

		if (g->type != GEN_URI)
			continue;
		s = ASN1_STRING_get0_data(g->d.uniformResourceIdentifier);
		len = ASN1_STRING_length(g->d.uniformResourceIdentifier);
		if (len < 0 || (size_t)len < plen || memcmp(s, CLUSTER_ROLE_URI, plen) != 0)
			continue;
		n++;
		if ((size_t)len - plen == wlen && memcmp(s + plen, c->m->role, wlen) == 0)
			continue;
		/* Another role: quoted in the log, so printable and short. */
		for (j = 0; j < (size_t)len - plen && j < sizeof(got) - 1; j++)
			got[j] = s[plen + j] > 0x20 && s[plen + j] < 0x7f ? (char)s[plen + j] : '?';
		got[j] = '\0';
		n = -1;
		break;
	}
	GENERAL_NAMES_free(gens);
	if (n > 0)
		return 0;
	if (n == 0)
		snprintf(c->reason, sizeof(c->reason), "its certificate names no role "
		    "(no SAN URI %s...)", CLUSTER_ROLE_URI);
	else
		snprintf(c->reason, sizeof(c->reason), "its certificate is for role %s", got);
	return -1;
}

/*
 * Verification of the peer's chain (OpenSSL's: CA file, validity, key
 * usage and, by the default purpose, EKU), then its role at depth 0. The
 * first failure becomes the connection's reason.
 */
static int
tls_verify(int ok, X509_STORE_CTX *xs)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct tls_conn *c = tls_conn_get(ssl);
	X509 *x = X509_STORE_CTX_get_current_cert(xs);
	int depth = X509_STORE_CTX_get_error_depth(xs);
	char subject[128] = "?";

	if (c == NULL)
		return 0;
	if (!ok) {
		if (x != NULL)
			X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
		if (c->reason[0] == '\0')
			snprintf(c->reason, sizeof(c->reason), "%s (%s, depth %d)",
			    X509_verify_cert_error_string(X509_STORE_CTX_get_error(xs)), subject,
			    depth);
		return 0;
	}
	if (depth == 0 && x != NULL && tls_role_check(x, c) == -1) {
		X509_STORE_CTX_set_error(xs, X509_V_ERR_APPLICATION_VERIFICATION);
		return 0;
	}
	return 1;
}

/* Our own certificate must pass what peers will check of it (but its role). */
static int
tls_own_chain(SSL_CTX *ctx, const char *cert, const char *ca, char **cause)
{
	X509_STORE_CTX *xs = xnonnull(X509_STORE_CTX_new(), "X509_STORE_CTX_new");
	STACK_OF(X509) *chain = NULL;
	int rc = 0;

	SSL_CTX_get0_chain_certs(ctx, &chain);
	if (X509_STORE_CTX_init(xs, SSL_CTX_get_cert_store(ctx), SSL_CTX_get0_certificate(ctx),
	    chain) != 1 || X509_verify_cert(xs) != 1) {
		cause_set(cause, "cluster cert %s: %s (checked against the cluster CA in %s)", cert,
		    X509_verify_cert_error_string(X509_STORE_CTX_get_error(xs)), ca);
		rc = -1;
	}
	X509_STORE_CTX_free(xs);
	return rc;
}

/* What both ends of cluster mTLS share: TLS 1.3, the pair, the CA, the checks. */
static int
tls_mtls_setup(SSL_CTX *ctx, struct tls_mtls *m, const char *cert, const char *key,
    const char *ca, const char *role, char **cause)
{
	size_t rlen = role != NULL ? strlen(role) : 0;

	if (rlen == 0 || rlen >= sizeof(m->role) ||
	    strspn(role, "abcdefghijklmnopqrstuvwxyz") != rlen) {
		cause_set(cause, "cluster role \"%s\": want a role name such as api or worker",
		    role != NULL ? role : "");
		return -1;
	}
	memcpy(m->role, role, rlen + 1);
	/* Cluster members are ours, all current: no reason to speak anything older. */
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
	/* No resumption: a ticket would skip the verification below. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_num_tickets(ctx, 0);
	/* Only the certificate itself goes out: every peer holds the CA already. */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_NO_AUTO_CHAIN);
	if (tls_load_pair(ctx, cert, key, "cluster cert", "cluster key", cause) == -1)
		return -1;
	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
		cause_set(cause, "cluster CA %s: %s", ca, tls_err("unreadable or no certificate"));
		return -1;
	}
	if (tls_own_chain(ctx, cert, ca, cause) == -1)
		return -1;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, tls_verify);
	SSL_CTX_set_info_callback(ctx, tls_info);
	return 0;
}

struct http_tls *
http_tls_new_mtls(const char *cert, const char *key, const char *ca, const char *want_role,
    char **cause)
{
	struct http_tls *tls = xcalloc(1, sizeof(*tls));
	STACK_OF(X509_NAME) *names;

	if ((tls->ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		fatalx("SSL_CTX_new");
	tls->mtls = xcalloc(1, sizeof(*tls->mtls));
	if (tls_mtls_setup(tls->ctx, tls->mtls, cert, key, ca, want_role, cause) == -1) {
		ERR_clear_error();
		http_tls_free(tls);
		return NULL;
	}
	/* Tell clients which CA to answer with (a client with several picks this one). */
	if ((names = SSL_load_client_CA_file(ca)) != NULL)
		SSL_CTX_set_client_CA_list(tls->ctx, names);
	SSL_CTX_set_alpn_select_cb(tls->ctx, http_tls_alpn, NULL);
	ERR_clear_error();
	return tls;
}

void
http_tls_free(struct http_tls *tls)
{
	if (tls == NULL)
		return;
	SSL_CTX_free(tls->ctx);
	free(tls->mtls);
	free(tls);
}

unsigned long
http_tls_refused(const struct http_tls *tls)
{
	return tls->mtls != NULL ? tls->mtls->refused : 0;
}

/* "1.2.3.4" or "2001:db8::1": the refusal log's key on the server end (ports change). */
static void
tls_peer_addr(evutil_socket_t fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const void *a = NULL;

	snprintf(buf, len, "an unknown peer");
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == -1)
		return;
	if (ss.ss_family == AF_INET)
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	else if (ss.ss_family == AF_INET6)
		a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	if (a == NULL || inet_ntop(ss.ss_family, a, buf, (socklen_t)len) == NULL)
		snprintf(buf, len, "a peer of family %d", (int)ss.ss_family);
}

static struct bufferevent *
http_tls_bev(struct event_base *base, evutil_socket_t fd, void *arg)
{
	struct http_tls *tls = arg;
	struct bufferevent *bev;
	char peer[64];
	SSL *ssl;

	if ((ssl = SSL_new(tls->ctx)) == NULL)
		return NULL;
	if (tls->mtls != NULL) {
		tls_peer_addr(fd, peer, sizeof(peer));
		tls_conn_attach(ssl, tls->mtls, peer);
	}
	/* Frees ssl with the bufferevent, and closes fd. */
	bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	/* Clients that close without close_notify still end a close-delimited exchange. */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

void
http_tls_attach(struct http_tls *tls, struct http_server *srv)
{
	http_server_set_transport(srv, http_tls_bev, tls);
}

struct http_tls_client *
http_tls_client_new(const char *cert, const char *key, const char *ca, const char *want_role,
    char **cause)
{
	static const unsigned char h11[] = "\x08http/1.1";
	struct http_tls_client *c = xcalloc(1, sizeof(*c));

	if ((c->ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		fatalx("SSL_CTX_new");
	if (tls_mtls_setup(c->ctx, &c->mtls, cert, key, ca, want_role, cause) == -1) {
		ERR_clear_error();
		http_tls_client_free(c);
		return NULL;
	}
	/* No SSL_set1_host: the role is the identity (see http_tls.h). */
	if (SSL_CTX_set_alpn_protos(c->ctx, h11, sizeof(h11) - 1) != 0)
		fatalx("SSL_CTX_set_alpn_protos: out of memory");
	return c;
}

void
http_tls_client_free(struct http_tls_client *c)
{
	if (c == NULL)
		return;
	SSL_CTX_free(c->ctx);
	free(c);
}

/* A client SSL of c's, with its connection state. */
static SSL *
tls_client_ssl(struct http_tls_client *c, const char *peer)
{
	SSL *ssl = xnonnull(SSL_new(c->ctx), "SSL_new");

	tls_conn_attach(ssl, &c->mtls, peer != NULL && *peer != '\0' ? peer : "the server");
	return ssl;
}

struct bufferevent *
http_tls_client_wrap(struct http_tls_client *c, struct bufferevent *under, const char *peer)
{
	struct bufferevent *bev;
	SSL *ssl = tls_client_ssl(c, peer);

	/*
	 * A filter over the caller's bufferevent: the handshake starts into its
	 * output and goes out once it connects; its errors (refused, reset)
	 * come up as ours. Freeing the result frees ssl and under.
	 */
	bev = xnonnull(bufferevent_openssl_filter_new(bufferevent_get_base(under), under, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE), "bufferevent_openssl_filter_new");
	/* Servers that close without close_notify still end a close-delimited answer. */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

struct bufferevent *
http_tls_client_connect(struct http_tls_client *c, struct event_base *base, const char *addr,
    char **cause)
{
	struct sockaddr_storage ss;
	struct bufferevent *bev;
	int sl = sizeof(ss), fd;

	memset(&ss, 0, sizeof(ss));
	if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sl) == -1 ||
	    (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) ||
	    ((struct sockaddr_in *)&ss)->sin_port == 0) {
		cause_set(cause, "\"%s\" is not IP:PORT", addr);
		return NULL;
	}
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) != -1)
		http_tcp_nodelay(fd, ss.ss_family);
	if (fd == -1 ||
	    (connect(fd, (struct sockaddr *)&ss, (socklen_t)sl) == -1 && errno != EINPROGRESS)) {
		cause_set(cause, "connect %s: %s", addr, strerror(errno));
		if (fd != -1)
			close(fd);
		return NULL;
	}
	/*
	 * OpenSSL on the socket itself, not a filter: the handshake starts
	 * once the connect completes, and an alert we send on refusing the
	 * server is written to the socket at once, so the server learns why
	 * even when the caller frees this in its failure callback.
	 */
	bev = xnonnull(bufferevent_openssl_socket_new(base, fd, tls_client_ssl(c, addr),
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE), "bufferevent_openssl_socket_new");
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

const char *
http_tls_client_error(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	struct tls_conn *c = tls_conn_get(ssl);
	unsigned long e;

	if (c == NULL)
		return NULL;
	/* No alert either way (a reset, a bad record): OpenSSL's own error, if it kept one. */
	if (c->reason[0] == '\0' && (e = bufferevent_get_openssl_error(bev)) != 0)
		ERR_error_string_n(e, c->reason, sizeof(c->reason));
	return c->reason[0] != '\0' ? c->reason : NULL;
}
