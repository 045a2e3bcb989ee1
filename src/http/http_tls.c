/* TLS transport for http_server (see http_tls.h). */
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "common/util.h"
#include "http/http_tls.h"

struct http_tls {
	SSL_CTX		*ctx;
};

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

struct http_tls *
http_tls_new(const char *cert, const char *key, char **cause)
{
	struct http_tls *tls = xcalloc(1, sizeof(*tls));
	unsigned long e;

	if ((tls->ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		fatalx("SSL_CTX_new");
	SSL_CTX_set_min_proto_version(tls->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(tls->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* Fewer idle buffers per kept-alive connection. */
	SSL_CTX_set_mode(tls->ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_select_cb(tls->ctx, http_tls_alpn, NULL);
	if (SSL_CTX_use_certificate_chain_file(tls->ctx, cert) != 1) {
		e = ERR_get_error();
		cause_set(cause, "tls_cert %s: %s", cert, ERR_reason_error_string(e) ?
		    ERR_reason_error_string(e) : "unreadable");
		goto bad;
	}
	if (SSL_CTX_use_PrivateKey_file(tls->ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(tls->ctx) != 1) {
		e = ERR_get_error();
		cause_set(cause, "tls_key %s: %s", key, ERR_reason_error_string(e) ?
		    ERR_reason_error_string(e) : "unreadable or not the certificate's key");
		goto bad;
	}
	return tls;
bad:
	ERR_clear_error();
	http_tls_free(tls);
	return NULL;
}

void
http_tls_free(struct http_tls *tls)
{
	if (tls == NULL)
		return;
	SSL_CTX_free(tls->ctx);
	free(tls);
}

static struct bufferevent *
http_tls_bev(struct event_base *base, evutil_socket_t fd, void *arg)
{
	struct http_tls *tls = arg;
	struct bufferevent *bev;
	SSL *ssl;

	if ((ssl = SSL_new(tls->ctx)) == NULL)
		return NULL;
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
