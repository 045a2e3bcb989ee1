/*
 * Leaf certificate minting and cache, and the guest-facing SSL_CTX.
 */
#include <sys/queue.h>

#include <pthread.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/util.h"
#include "gateway/gw_tls.h"

#define GW_LEAF_BUCKETS		256
#define GW_LEAF_BACKDATE	3600	/* tolerate guest clocks a little behind */

struct gw_leaf {
	char			*name;
	X509			*cert;
	EVP_PKEY		*key;
	time_t			 not_after;
	TAILQ_ENTRY(gw_leaf)	 lru;		/* most recently used first */
	LIST_ENTRY(gw_leaf)	 link;		/* hash bucket */
};

/*
 * Shared by every worker. ctx, issuer, issuer_key and chain are fixed after
 * gw_certs_new (SSL_new and signing with a shared key are thread-safe in
 * OpenSSL 3); the cache (buckets, lru, nleaves, minted) is under mtx.
 */
struct gw_certs {
	pthread_mutex_t		 mtx;
	SSL_CTX			*ctx;
	X509			*issuer;
	EVP_PKEY		*issuer_key;
	STACK_OF(X509)		*chain;		/* sent after the leaf: issuer first */
	time_t			 issuer_not_after;
	LIST_HEAD(, gw_leaf)	 buckets[GW_LEAF_BUCKETS];
	TAILQ_HEAD(gw_leaf_lru, gw_leaf) lru;
	size_t			 nleaves;
	unsigned long		 minted;
};

/* The first OpenSSL error on the queue, for a cause string. */
static const char *
ssl_err(void)
{
	static __thread char buf[256];	/* per thread: workers fail independently */
	unsigned long e = ERR_get_error();

	if (e == 0)
		return "unknown error";
	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return buf;
}

static unsigned int
name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % GW_LEAF_BUCKETS;
}

/* Only what a normalized DNS name may hold: the name goes into a SAN. */
static int
name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 253)
		return 0;
	for (; *name != '\0'; name++)
		if (!((*name >= 'a' && *name <= 'z') || (*name >= '0' && *name <= '9') ||
		    *name == '-' || *name == '.' || *name == '_'))
			return 0;
	return 1;
}

static int
asn1_to_time(const ASN1_TIME *t, time_t *out)
{
	struct tm tm;

	if (ASN1_TIME_to_tm(t, &tm) != 1)
		return -1;
	*out = timegm(&tm);
	return 0;
}

/* Offer http/1.1 only; a client that does not offer it gets no ALPN. */
static int
alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned int i = 0;

	while (i < inlen) {
		unsigned int n = in[i];
		if (i + 1 + n > inlen)
			break;
		if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = (unsigned char)n;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + n;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

/*
 * The certificate was chosen from the gateway's own parse of the
 * ClientHello; OpenSSL's view of the SNI must name the same host, or two
 * parsers disagree and the handshake stops here.
 */
static int
servername_check(SSL *ssl, int *alert, void *arg)
{
	const char *sn = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	X509 *leaf = SSL_get_certificate(ssl);

	if (sn == NULL || leaf == NULL || X509_check_host(leaf, sn, 0, 0, NULL) != 1) {
		*alert = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	}
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *
server_ctx(char **cause)
{
	SSL_CTX *ctx;

	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		cause_set(cause, "SSL_CTX_new: %s", ssl_err());
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* No resumption: every connection shows its SNI and gets a fresh check. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION |
	    SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	SSL_CTX_set_tlsext_servername_callback(ctx, servername_check);
	return ctx;
}

static int
load_issuer(struct gw_certs *c, const char *cert_path, const char *key_path, char **cause)
{
	BIO *bio;
	X509 *x;

	if ((bio = BIO_new_file(cert_path, "r")) == NULL) {
		cause_set(cause, "%s: %s", cert_path, ssl_err());
		return -1;
	}
	c->chain = sk_X509_new_null();
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
		if (c->issuer == NULL) {
			c->issuer = x;
			X509_up_ref(x);
		}
		sk_X509_push(c->chain, x);
	}
	ERR_clear_error();	/* the loop ends on "no start line" */
	BIO_free(bio);
	if (c->issuer == NULL) {
		cause_set(cause, "%s: no certificate", cert_path);
		return -1;
	}
	if (X509_check_ca(c->issuer) == 0) {
		cause_set(cause, "%s: not a CA certificate", cert_path);
		return -1;
	}
	if (asn1_to_time(X509_get0_notAfter(c->issuer), &c->issuer_not_after) == -1) {
		cause_set(cause, "%s: bad notAfter", cert_path);
		return -1;
	}
	if ((bio = BIO_new_file(key_path, "r")) == NULL) {
		cause_set(cause, "%s: %s", key_path, ssl_err());
		return -1;
	}
	c->issuer_key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
	BIO_free(bio);
	if (c->issuer_key == NULL) {
		cause_set(cause, "%s: %s", key_path, ssl_err());
		return -1;
	}
	if (X509_check_private_key(c->issuer, c->issuer_key) != 1) {
		cause_set(cause, "%s does not match %s", key_path, cert_path);
		ERR_clear_error();
		return -1;
	}
	return 0;
}

struct gw_certs *
gw_certs_new(const char *cert_path, const char *key_path, char **cause)
{
	struct gw_certs *c = xcalloc(1, sizeof(*c));
	size_t i;

	pthread_mutex_init(&c->mtx, NULL);
	for (i = 0; i < GW_LEAF_BUCKETS; i++)
		LIST_INIT(&c->buckets[i]);
	TAILQ_INIT(&c->lru);
	if (load_issuer(c, cert_path, key_path, cause) == -1 ||
	    (c->ctx = server_ctx(cause)) == NULL) {
		gw_certs_free(c);
		return NULL;
	}
	return c;
}

static void
leaf_free(struct gw_certs *c, struct gw_leaf *l)
{
	LIST_REMOVE(l, link);
	TAILQ_REMOVE(&c->lru, l, lru);
	c->nleaves--;
	X509_free(l->cert);
	EVP_PKEY_free(l->key);
	free(l->name);
	free(l);
}

void
gw_certs_free(struct gw_certs *c)
{
	struct gw_leaf *l;

	if (c == NULL)
		return;
	while ((l = TAILQ_FIRST(&c->lru)) != NULL)
		leaf_free(c, l);
	SSL_CTX_free(c->ctx);
	X509_free(c->issuer);
	EVP_PKEY_free(c->issuer_key);
	if (c->chain != NULL)
		sk_X509_pop_free(c->chain, X509_free);
	pthread_mutex_destroy(&c->mtx);
	free(c);
}

static int
add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value)) == NULL)
		return -1;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

/*
 * subjectAltName = DNS:name, built as ASN.1 (no config-string parsing);
 * critical when the subject is empty (RFC 5280 4.2.1.6).
 */
static int
add_san(X509 *x, const char *name, int critical)
{
	GENERAL_NAMES *gens = GENERAL_NAMES_new();
	GENERAL_NAME *gen = GENERAL_NAME_new();
	ASN1_IA5STRING *ia5 = ASN1_IA5STRING_new();
	int ok;

	if (gens == NULL || gen == NULL || ia5 == NULL ||
	    ASN1_STRING_set(ia5, name, (int)strlen(name)) != 1) {
		GENERAL_NAMES_free(gens);
		GENERAL_NAME_free(gen);
		ASN1_IA5STRING_free(ia5);
		return -1;
	}
	GENERAL_NAME_set0_value(gen, GEN_DNS, ia5);
	sk_GENERAL_NAME_push(gens, gen);
	ok = X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical, X509V3_ADD_DEFAULT);
	GENERAL_NAMES_free(gens);
	return ok == 1 ? 0 : -1;
}

static int
set_serial(X509 *x)
{
	BIGNUM *bn = BN_new();
	int ok;

	/* 127 random bits: positive, unique enough that no two leaves collide. */
	ok = bn != NULL && BN_rand(bn, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
	    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok ? 0 : -1;
}

static struct gw_leaf *
mint(struct gw_certs *c, const char *name, char **cause)
{
	struct gw_leaf *l;
	EVP_PKEY *key;
	X509 *x;
	X509_NAME *subj;
	const EVP_MD *md = EVP_sha256();
	time_t now = time(NULL), na = now + GW_LEAF_LIFETIME;
	int id;

	if (na > c->issuer_not_after)
		na = c->issuer_not_after;
	if (na <= now + GW_LEAF_RENEW) {
		cause_set(cause, "issuer certificate expires too soon");
		return NULL;
	}
	if ((key = EVP_EC_gen("P-256")) == NULL) {
		cause_set(cause, "leaf key: %s", ssl_err());
		return NULL;
	}
	if ((x = X509_new()) == NULL)
		goto bad;
	subj = X509_get_subject_name(x);
	/* CN is capped at 64 characters; the SAN is what clients check. */
	if (X509_set_version(x, X509_VERSION_3) != 1 || set_serial(x) == -1 ||
	    X509_time_adj_ex(X509_getm_notBefore(x), 0, -GW_LEAF_BACKDATE, &now) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), 0, na - now, &now) == NULL ||
	    (strlen(name) <= 64 && X509_NAME_add_entry_by_txt(subj, "CN", MBSTRING_ASC,
	    (const unsigned char *)name, -1, -1, 0) != 1) ||
	    X509_set_issuer_name(x, X509_get_subject_name(c->issuer)) != 1 ||
	    X509_set_pubkey(x, key) != 1 ||
	    add_ext(x, c->issuer, NID_basic_constraints, "critical,CA:FALSE") == -1 ||
	    add_ext(x, c->issuer, NID_key_usage, "critical,digitalSignature") == -1 ||
	    add_ext(x, c->issuer, NID_ext_key_usage, "serverAuth") == -1 ||
	    add_ext(x, c->issuer, NID_subject_key_identifier, "hash") == -1 ||
	    add_ext(x, c->issuer, NID_authority_key_identifier, "keyid:always") == -1 ||
	    add_san(x, name, strlen(name) > 64) == -1)
		goto bad;
	id = EVP_PKEY_get_id(c->issuer_key);
	if (id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448)
		md = NULL;
	if (X509_sign(x, c->issuer_key, md) == 0)
		goto bad;
	l = xcalloc(1, sizeof(*l));
	l->name = xstrdup(name);
	l->cert = x;
	l->key = key;
	l->not_after = na;
	c->minted++;
	return l;
bad:
	cause_set(cause, "leaf for %s: %s", name, ssl_err());
	X509_free(x);
	EVP_PKEY_free(key);
	return NULL;
}

static struct gw_leaf *
leaf_get(struct gw_certs *c, const char *name, char **cause)
{
	struct gw_leaf *l;
	unsigned int h;

	if (!name_ok(name)) {
		cause_set(cause, "not a certificate name: %s", name);
		return NULL;
	}
	h = name_hash(name);
	LIST_FOREACH(l, &c->buckets[h], link) {
		if (strcmp(l->name, name) != 0)
			continue;
		if (l->not_after - time(NULL) > GW_LEAF_RENEW) {
			TAILQ_REMOVE(&c->lru, l, lru);
			TAILQ_INSERT_HEAD(&c->lru, l, lru);
			return l;
		}
		leaf_free(c, l);	/* about to expire: mint a fresh one */
		break;
	}
	if ((l = mint(c, name, cause)) == NULL)
		return NULL;
	/* SSLs already using an evicted leaf hold their own references. */
	while (c->nleaves >= GW_LEAF_CACHE_MAX)
		leaf_free(c, TAILQ_LAST(&c->lru, gw_leaf_lru));
	LIST_INSERT_HEAD(&c->buckets[h], l, link);
	TAILQ_INSERT_HEAD(&c->lru, l, lru);
	c->nleaves++;
	return l;
}

X509 *
gw_certs_leaf(struct gw_certs *c, const char *name, char **cause)
{
	struct gw_leaf *l;
	X509 *x = NULL;

	pthread_mutex_lock(&c->mtx);
	if ((l = leaf_get(c, name, cause)) != NULL)
		x = l->cert;
	pthread_mutex_unlock(&c->mtx);
	return x;
}

unsigned long
gw_certs_minted(struct gw_certs *c)
{
	unsigned long n;

	pthread_mutex_lock(&c->mtx);
	n = c->minted;
	pthread_mutex_unlock(&c->mtx);
	return n;
}

SSL *
gw_certs_ssl(struct gw_certs *c, const char *name, char **cause)
{
	struct gw_leaf *l;
	SSL *ssl;

	if ((ssl = SSL_new(c->ctx)) == NULL) {
		cause_set(cause, "SSL_new: %s", ssl_err());
		return NULL;
	}
	/*
	 * Under the lock until the SSL holds its own references to the leaf:
	 * another worker may evict it right after. A miss mints under the lock
	 * too (one P-256 key and signature, well under a millisecond), which
	 * also keeps two workers from minting the same name at once.
	 */
	pthread_mutex_lock(&c->mtx);
	if ((l = leaf_get(c, name, cause)) == NULL) {
		pthread_mutex_unlock(&c->mtx);
		SSL_free(ssl);
		return NULL;
	}
	if (SSL_use_cert_and_key(ssl, l->cert, l->key, c->chain, 1) != 1) {
		pthread_mutex_unlock(&c->mtx);
		cause_set(cause, "leaf for %s: %s", name, ssl_err());
		SSL_free(ssl);
		return NULL;
	}
	pthread_mutex_unlock(&c->mtx);
	return ssl;
}
