/*
 * Upstream connections of the proxy: resolve the name through the gateway's
 * own resolver (gw_resolve, which pins what it returns for the sandbox),
 * skip denied addresses, connect from the gateway's netns, and for TLS
 * verify the chain and the name against the upstream trust store. Tries the
 * addresses in turn; reports through conn->on_connected / on_dial_failed.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/gw_proxy.h"
#include "gateway/gw_resolve.h"

#define BEV_OPTS	(BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS)

static void	gw_dial_next(struct gw_conn *);
static void	gw_dial_event_cb(struct bufferevent *, short, void *);

static void
gw_dial_fail(struct gw_conn *c, const char *reason)
{
	c->on_dial_failed(c, reason);
}

static void
gw_resolved_cb(int err, const struct gw_addrs *a, void *arg)
{
	struct gw_conn *c = arg;
	const char *reason = NULL;
	size_t i;

	c->resolve = NULL;
	if (err != 0 || a == NULL) {
		gw_dial_fail(c, "name does not resolve");
		return;
	}
	c->naddrs = c->nexta = 0;
	for (i = 0; i < a->n && c->naddrs < GW_MAX_ADDRS; i++) {
		struct sockaddr_in sin;

		if (a->addrs[i].ss_family != AF_INET)
			continue;
		memcpy(&sin, &a->addrs[i], sizeof(sin));
		sin.sin_port = htons((uint16_t)c->dport);
		if (gw_conn_addr_denied(c, &sin, &reason))
			continue;
		c->addrs[c->naddrs++] = sin;
	}
	if (c->naddrs == 0) {
		gw_dial_fail(c, reason != NULL || a->dropped ? "name resolves only to denied addresses" :
		    "name has no usable address");
		return;
	}
	gw_dial_next(c);
}

void
gw_conn_dial(struct gw_conn *c, const char *name, int tls)
{
	struct in_addr lit;
	const char *reason;
	char *cause = NULL;

	c->out_tls = tls;
	c->connected = 0;
	c->naddrs = c->nexta = 0;
	c->dial_error = NULL;
	if (name == NULL) {
		c->addrs[c->naddrs++] = c->dst;
		gw_dial_next(c);
		return;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	/* A literal address as the name (full mode): no lookup, same deny check. */
	if (inet_pton(AF_INET, name, &lit) == 1) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr = lit,
		    .sin_port = htons((uint16_t)c->dport) };

		if (gw_conn_addr_denied(c, &sin, &reason)) {
			gw_dial_fail(c, reason);
			return;
		}
		c->addrs[c->naddrs++] = sin;
		gw_dial_next(c);
		return;
	}
	c->resolve = gw_resolve(c->sb, name, 0, gw_resolved_cb, c, &cause);
	if (c->resolve == NULL) {
		log_warnx("gateway: sandbox %s: resolve %s: %s", c->sb->id, name, cause);
		free(cause);
		gw_dial_fail(c, "resolver failed");
	}
}

static SSL *
gw_upstream_ssl(struct gw_conn *c)
{
	SSL *ssl;

	if ((ssl = SSL_new(c->sb->gw->upstream_ctx)) == NULL)
		return NULL;
	/*
	 * Verification is set here as well as on the context: the gateway
	 * must refuse an unverified upstream whatever the context says.
	 */
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_set_tlsext_host_name(ssl, c->name) != 1 || SSL_set1_host(ssl, c->name) != 1 ||
	    SSL_set_alpn_protos(ssl, (const unsigned char *)"\x08http/1.1", 9) != 0) {
		SSL_free(ssl);
		return NULL;
	}
	return ssl;
}

static int
gw_upstream_ok(struct gw_conn *c)
{
	SSL *ssl = bufferevent_openssl_get_ssl(c->out);
	const unsigned char *alpn;
	unsigned int alpnlen;

	if (SSL_get_verify_result(ssl) != X509_V_OK || SSL_get0_peer_certificate(ssl) == NULL) {
		c->dial_error = "upstream certificate not verified";
		return 0;
	}
	SSL_get0_alpn_selected(ssl, &alpn, &alpnlen);
	if (alpnlen != 0 && (alpnlen != 8 || memcmp(alpn, "http/1.1", 8) != 0)) {
		c->dial_error = "upstream chose a protocol other than http/1.1";
		return 0;
	}
	return 1;
}

/*
 * Upstream TLS is an OpenSSL filter over a socket bufferevent, as on the
 * guest side, not a socket-based OpenSSL bufferevent: re-enabling reads on
 * the latter (after back-pressure or a rate limit) does not look at a
 * record OpenSSL already holds, and the end of a response would wait for
 * socket data that never comes.
 */
static int
gw_dial_wrap_tls(struct gw_conn *c)
{
	struct bufferevent *tls;
	struct timeval tv;
	SSL *ssl;

	if ((ssl = gw_upstream_ssl(c)) == NULL) {
		c->dial_error = "SSL_new failed";
		return -1;
	}
	tls = bufferevent_openssl_filter_new(c->sb->w->base, c->out, ssl,
	    BUFFEREVENT_SSL_CONNECTING, BEV_OPTS);
	if (tls == NULL) {
		SSL_free(ssl);
		c->dial_error = "bufferevent_openssl_filter_new failed";
		return -1;
	}
	gw_topup_add(&c->topup_out, c->out, tls);
	c->out = tls;
	c->out_wrapped = 1;
	bufferevent_openssl_set_allow_dirty_shutdown(tls, 1);
	gw_tv(&tv, GW_DIAL_SECS);
	bufferevent_set_timeouts(tls, &tv, &tv);
	bufferevent_setcb(tls, NULL, NULL, gw_dial_event_cb, c);
	bufferevent_enable(tls, EV_READ | EV_WRITE);
	return 0;
}

static void
gw_dial_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;
	SSL *ssl;
	long vr;

	if ((what & BEV_EVENT_CONNECTED) && c->out_tls && !c->out_wrapped) {
		/* TCP is up: TLS next. */
		gw_nodelay(bufferevent_getfd(c->out));
		if (gw_dial_wrap_tls(c) == 0)
			return;
		what = BEV_EVENT_ERROR;
	}
	if ((what & BEV_EVENT_CONNECTED) && (!c->out_tls || gw_upstream_ok(c))) {
		c->connected = 1;
		if (!c->out_tls)
			gw_nodelay(bufferevent_getfd(c->out));
		c->dial_error = NULL;
		bufferevent_setcb(c->out, NULL, NULL, NULL, NULL);
		if (c->rl != NULL && c->rl->bytes != NULL)
			bufferevent_add_to_rate_limit_group(c->out, c->rl->bytes);
		c->on_connected(c);
		return;
	}
	if (!(what & BEV_EVENT_CONNECTED)) {
		if (c->out_wrapped && (ssl = bufferevent_openssl_get_ssl(c->out)) != NULL &&
		    (vr = SSL_get_verify_result(ssl)) != X509_V_OK) {
			log_info("gateway: sandbox %s: upstream %s (%s): %s", c->sb->id, c->name,
			    c->ip, X509_verify_cert_error_string(vr));
			c->dial_error = "upstream certificate not verified";
		} else if (what & BEV_EVENT_TIMEOUT)
			c->dial_error = "upstream connect timeout";
		else if (c->dial_error == NULL)
			c->dial_error = c->out_wrapped ? "upstream TLS handshake failed" :
			    "upstream connect failed";
	}
	while (ERR_get_error() != 0)
		;
	gw_bev_free(c->out);
	c->out = NULL;
	gw_dial_next(c);
}

static void
gw_dial_next(struct gw_conn *c)
{
	struct event_base *base = c->sb->w->base;
	struct timeval tv;

	while (c->nexta < c->naddrs) {
		struct sockaddr_in *sin = &c->addrs[c->nexta++];

		gw_addr_str((struct sockaddr *)sin, c->ip, sizeof(c->ip));
		c->out_wrapped = 0;
		if ((c->out = bufferevent_socket_new(base, -1, BEV_OPTS)) == NULL) {
			c->dial_error = "bufferevent_socket_new failed";
			continue;
		}
		gw_tv(&tv, GW_DIAL_SECS);
		bufferevent_set_timeouts(c->out, &tv, &tv);
		bufferevent_setcb(c->out, NULL, NULL, gw_dial_event_cb, c);
		if (bufferevent_socket_connect(c->out, (struct sockaddr *)sin, sizeof(*sin)) == 0)
			return;
		c->dial_error = "socket failed";
		gw_bev_free(c->out);
		c->out = NULL;
	}
	gw_dial_fail(c, c->dial_error != NULL ? c->dial_error : "no address to dial");
}
