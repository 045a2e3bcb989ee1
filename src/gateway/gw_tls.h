/*
 * The guest-facing TLS side of the proxy: leaf certificates minted per SNI
 * from the issuer airlockd hands the gateway (an intermediate CA below the
 * host's airlock root, never the root itself), cached and short-lived, and
 * the server SSL_CTX that offers only http/1.1 over ALPN.
 *
 * Leaves: EC P-256, SAN = the one name, serverAuth, valid from an hour ago
 * for GW_LEAF_LIFETIME (never past the issuer's own notAfter), re-minted
 * when less than GW_LEAF_RENEW is left; at most GW_LEAF_CACHE_MAX names
 * cached, least recently used evicted. A leaf is minted only for a name the
 * caller has already allowed.
 */
#ifndef AIRLOCK_GW_TLS_H
#define AIRLOCK_GW_TLS_H

#include <openssl/ssl.h>
#include <openssl/x509.h>

#define GW_LEAF_LIFETIME	(24 * 3600)	/* seconds */
#define GW_LEAF_RENEW		(3600)		/* re-mint below this much validity */
#define GW_LEAF_CACHE_MAX	1024

struct gw_certs;

/* Load the issuer certificate (plus chain, PEM) and its key. */
struct gw_certs *gw_certs_new(const char *cert_path, const char *key_path, char **cause);
void gw_certs_free(struct gw_certs *);

/*
 * A server-side SSL for a guest connection to name (normalized), with the
 * leaf and chain set. NULL with a cause when minting fails.
 */
SSL *gw_certs_ssl(struct gw_certs *, const char *name, char **cause);

/*
 * The cached (or freshly minted) leaf for name; the reference belongs to
 * the cache and stays valid until the next gw_certs_* call from any thread.
 * For single-threaded tests and the cache-hit counter.
 */
X509 *gw_certs_leaf(struct gw_certs *, const char *name, char **cause);
/* Leaves minted since start (cache misses). */
unsigned long gw_certs_minted(struct gw_certs *);

#endif
