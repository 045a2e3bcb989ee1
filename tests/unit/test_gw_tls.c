/* gw_tls: minted leaves verify against the CA, carry the right SAN, are cached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "common/util.h"
#include "gateway/gw_tls.h"
#include "gw_testca.h"
#include "t.h"

static struct tca ca;

static int
verify_leaf(X509 *leaf, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	STACK_OF(X509) *untrusted = sk_X509_new_null();
	int ok;

	X509_STORE_add_cert(store, ca.root);
	sk_X509_push(untrusted, ca.inter);
	X509_STORE_CTX_init(ctx, store, leaf, untrusted);
	X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0);
	X509_VERIFY_PARAM_set_purpose(X509_STORE_CTX_get0_param(ctx), X509_PURPOSE_SSL_SERVER);
	ok = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	sk_X509_free(untrusted);
	return ok == 1;
}

static void
test_mint(void)
{
	struct gw_certs *c;
	X509 *leaf, *again;
	char *cause = NULL, group[64];
	EVP_PKEY *pub;
	time_t na;
	struct tm tm;

	c = gw_certs_new(ca.int_pem, ca.int_key, &cause);
	CHECK(c != NULL);
	if (c == NULL) {
		fprintf(stderr, "%s\n", cause);
		return;
	}
	leaf = gw_certs_leaf(c, "api.example.com", &cause);
	CHECK(leaf != NULL);
	CHECK(verify_leaf(leaf, "api.example.com"));
	CHECK(!verify_leaf(leaf, "evil.example.com"));
	CHECK(X509_check_host(leaf, "api.example.com", 0, 0, NULL) == 1);
	CHECK(X509_check_host(leaf, "x.api.example.com", 0, 0, NULL) != 1);
	CHECK(X509_check_ca(leaf) == 0);
	pub = X509_get0_pubkey(leaf);
	CHECK(EVP_PKEY_get_id(pub) == EVP_PKEY_EC);
	CHECK(EVP_PKEY_get_utf8_string_param(pub, "group", group, sizeof(group), NULL) == 1);
	CHECK_STR(group, "prime256v1");
	ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm);
	na = timegm(&tm);
	CHECK(na > time(NULL) + GW_LEAF_LIFETIME - 60 && na <= time(NULL) + GW_LEAF_LIFETIME);
	CHECK(gw_certs_minted(c) == 1);

	/* Cache hit: same certificate, nothing minted. */
	again = gw_certs_leaf(c, "api.example.com", &cause);
	CHECK(again == leaf);
	CHECK(gw_certs_minted(c) == 1);

	/* Long names: SAN only (CN is capped at 64). */
	const char *longname = "a-very-long-label-that-goes-on-and-on-and-on.and-another-long-"
	    "label.example.com";
	leaf = gw_certs_leaf(c, longname, &cause);
	CHECK(leaf != NULL && verify_leaf(leaf, longname));

	/* Only normalized DNS names get a certificate. */
	CHECK(gw_certs_leaf(c, "Upper.example.com", &cause) == NULL);
	CHECK_CAUSE(cause, "not a certificate name");
	free(cause);
	cause = NULL;
	CHECK(gw_certs_leaf(c, "a,DNS:evil.com", &cause) == NULL);
	free(cause);
	cause = NULL;
	gw_certs_free(c);
}

static void
test_lru(void)
{
	struct gw_certs *c = gw_certs_new(ca.int_pem, ca.int_key, NULL);
	char n[64];
	int i;

	for (i = 0; i <= GW_LEAF_CACHE_MAX; i++) {
		snprintf(n, sizeof(n), "h%d.example", i);
		if (gw_certs_leaf(c, n, NULL) == NULL)
			break;
	}
	CHECK(gw_certs_minted(c) == GW_LEAF_CACHE_MAX + 1);
	/* h1 is in the cache, h0 (least recently used) was evicted. */
	CHECK(gw_certs_leaf(c, "h1.example", NULL) != NULL);
	CHECK(gw_certs_minted(c) == GW_LEAF_CACHE_MAX + 1);
	CHECK(gw_certs_leaf(c, "h0.example", NULL) != NULL);
	CHECK(gw_certs_minted(c) == GW_LEAF_CACHE_MAX + 2);
	gw_certs_free(c);
}

static void
test_bad_issuer(void)
{
	char *cause = NULL, cert[256], key[256];

	/* Key of another certificate. */
	CHECK(gw_certs_new(ca.int_pem, ca.int_pem, &cause) == NULL);
	free(cause);
	cause = NULL;
	tca_server(&ca, "leaf.example", cert, key, sizeof(cert));
	CHECK(gw_certs_new(cert, key, &cause) == NULL);
	CHECK_CAUSE(cause, "not a CA");
	free(cause);
	cause = NULL;
	CHECK(gw_certs_new("/nonexistent", key, &cause) == NULL);
	CHECK_CAUSE(cause, "/nonexistent");
	free(cause);
}

/* Run a handshake between client and server over a BIO pair. */
static int
handshake(SSL *cli, SSL *srv)
{
	BIO *b1, *b2;
	int i, rc = 0, rs = 0;

	BIO_new_bio_pair(&b1, 0, &b2, 0);
	SSL_set_bio(cli, b1, b1);
	SSL_set_bio(srv, b2, b2);
	SSL_set_connect_state(cli);
	SSL_set_accept_state(srv);
	for (i = 0; i < 20 && (rc != 1 || rs != 1); i++) {
		if (rc != 1) {
			rc = SSL_do_handshake(cli);
			if (rc != 1 && SSL_get_error(cli, rc) != SSL_ERROR_WANT_READ)
				return -1;
		}
		if (rs != 1) {
			rs = SSL_do_handshake(srv);
			if (rs != 1 && SSL_get_error(srv, rs) != SSL_ERROR_WANT_READ)
				return -1;
		}
	}
	return rc == 1 && rs == 1 ? 0 : -1;
}

static SSL *
client(SSL_CTX *ctx, const char *sni)
{
	SSL *ssl = SSL_new(ctx);

	SSL_set_tlsext_host_name(ssl, sni);
	SSL_set1_host(ssl, sni);
	SSL_set_verify(ssl, SSL_VERIFY_PEER, NULL);
	SSL_set_alpn_protos(ssl, (const unsigned char *)"\x02h2\x08http/1.1", 12);
	return ssl;
}

static void
test_handshake(void)
{
	struct gw_certs *c = gw_certs_new(ca.int_pem, ca.int_key, NULL);
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *cli, *srv;
	const unsigned char *alpn;
	unsigned int alpnlen;

	SSL_CTX_load_verify_locations(cctx, ca.root_pem, NULL);

	cli = client(cctx, "api.example.com");
	srv = gw_certs_ssl(c, "api.example.com", NULL);
	CHECK(srv != NULL);
	CHECK(handshake(cli, srv) == 0);
	CHECK(SSL_get_verify_result(cli) == X509_V_OK);
	SSL_get0_alpn_selected(cli, &alpn, &alpnlen);
	CHECK(alpnlen == 8 && memcmp(alpn, "http/1.1", 8) == 0);
	/* Leaf, issuer and root: the guest needs the issuer to build the path. */
	CHECK(sk_X509_num(SSL_get_peer_cert_chain(cli)) >= 2);
	SSL_free(cli);
	SSL_free(srv);

	/* A client offering h2 only gets no ALPN (and speaks HTTP/1.1 or fails). */
	cli = client(cctx, "api.example.com");
	SSL_set_alpn_protos(cli, (const unsigned char *)"\x02h2", 3);
	srv = gw_certs_ssl(c, "api.example.com", NULL);
	CHECK(handshake(cli, srv) == 0);
	SSL_get0_alpn_selected(cli, &alpn, &alpnlen);
	CHECK(alpnlen == 0);
	SSL_free(cli);
	SSL_free(srv);

	/* The SNI OpenSSL sees differs from the name the leaf was minted for. */
	cli = client(cctx, "evil.example.com");
	srv = gw_certs_ssl(c, "api.example.com", NULL);
	CHECK(handshake(cli, srv) == -1);
	SSL_free(cli);
	SSL_free(srv);
	ERR_clear_error();

	SSL_CTX_free(cctx);
	gw_certs_free(c);
}

int
main(void)
{
	tca_init(&ca);
	T_RUN(test_mint);
	T_RUN(test_lru);
	T_RUN(test_bad_issuer);
	T_RUN(test_handshake);
	tca_free(&ca);
	return t_done();
}
