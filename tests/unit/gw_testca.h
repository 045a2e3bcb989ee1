/*
 * Test helpers for the gateway: a throwaway CA (root + intermediate) and
 * server certificates written as PEM into a temporary directory, and
 * ClientHello bytes produced by a real OpenSSL client.
 */
#ifndef AIRLOCK_GW_TESTCA_H
#define AIRLOCK_GW_TESTCA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static inline void
tca_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *e;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	if (e == NULL || X509_add_ext(x, e, -1) != 1) {
		fprintf(stderr, "tca_ext %d %s failed\n", nid, value);
		exit(2);
	}
	X509_EXTENSION_free(e);
}

/* A certificate for cn signed by issuer (self-signed when issuer is NULL). */
static inline X509 *
tca_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *ikey, int ca, const char *san)
{
	X509 *x = X509_new();
	static long serial = 1;

	X509_set_version(x, X509_VERSION_3);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 30L * 86400);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(issuer ? issuer : x));
	X509_set_pubkey(x, key);
	if (ca) {
		tca_ext(x, issuer ? issuer : x, NID_basic_constraints, "critical,CA:TRUE");
		tca_ext(x, issuer ? issuer : x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		tca_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
		tca_ext(x, issuer, NID_ext_key_usage, "serverAuth");
		tca_ext(x, issuer, NID_subject_alt_name, san);
	}
	tca_ext(x, issuer ? issuer : x, NID_subject_key_identifier, "hash");
	X509_sign(x, issuer ? ikey : key, EVP_sha256());
	return x;
}

static inline void
tca_write(const char *path, X509 *c1, X509 *c2, EVP_PKEY *key)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		perror(path);
		exit(2);
	}
	if (c1 != NULL)
		PEM_write_X509(f, c1);
	if (c2 != NULL)
		PEM_write_X509(f, c2);
	if (key != NULL)
		PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	fclose(f);
}

struct tca {
	char		 dir[64];
	char		 root_pem[128];		/* root certificate (trust anchor) */
	char		 int_pem[128];		/* intermediate + root (the gateway's issuer file) */
	char		 int_key[128];
	X509		*root, *inter;
	EVP_PKEY	*root_key, *int_key_p;
};

/* Root and intermediate in a fresh temporary directory. */
static inline void
tca_init(struct tca *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/gwtestca.XXXXXX");
	if (mkdtemp(t->dir) == NULL) {
		perror("mkdtemp");
		exit(2);
	}
	t->root_key = EVP_EC_gen("P-256");
	t->int_key_p = EVP_EC_gen("P-256");
	t->root = tca_cert("airlock test root", t->root_key, NULL, NULL, 1, NULL);
	t->inter = tca_cert("airlock test gateway issuer", t->int_key_p, t->root, t->root_key, 1,
	    NULL);
	snprintf(t->root_pem, sizeof(t->root_pem), "%s/root.pem", t->dir);
	snprintf(t->int_pem, sizeof(t->int_pem), "%s/issuer.pem", t->dir);
	snprintf(t->int_key, sizeof(t->int_key), "%s/issuer.key", t->dir);
	tca_write(t->root_pem, t->root, NULL, NULL);
	tca_write(t->int_pem, t->inter, t->root, NULL);
	tca_write(t->int_key, NULL, NULL, t->int_key_p);
}

/* A server certificate + key for an upstream, signed by the root, as PEM files. */
static inline void
tca_server(struct tca *t, const char *name, char *cert_path, char *key_path, size_t len)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	char san[300];
	X509 *x;

	snprintf(san, sizeof(san), "DNS:%s", name);
	x = tca_cert(name, k, t->root, t->root_key, 0, san);
	snprintf(cert_path, len, "%s/%s.pem", t->dir, name);
	snprintf(key_path, len, "%s/%s.key", t->dir, name);
	tca_write(cert_path, x, NULL, NULL);
	tca_write(key_path, NULL, NULL, k);
	X509_free(x);
	EVP_PKEY_free(k);
}

static inline void
tca_free(struct tca *t)
{
	char cmd[128];

	X509_free(t->root);
	X509_free(t->inter);
	EVP_PKEY_free(t->root_key);
	EVP_PKEY_free(t->int_key_p);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", t->dir);
}

/* The ClientHello a real OpenSSL client sends for sni (NULL: none). */
static inline size_t
tca_client_hello(const char *sni, unsigned char *out, size_t max)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = SSL_new(ctx);
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	int n;

	SSL_set_bio(ssl, rb, wb);
	if (sni != NULL)
		SSL_set_tlsext_host_name(ssl, sni);
	SSL_set_alpn_protos(ssl, (const unsigned char *)"\x02h2\x08http/1.1", 12);
	SSL_set_connect_state(ssl);
	(void)SSL_do_handshake(ssl);
	n = BIO_read(wb, out, (int)max);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return n > 0 ? (size_t)n : 0;
}

#endif
