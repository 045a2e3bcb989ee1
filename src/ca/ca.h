/*
 * The host's airlock root CA (DATA/ca/ca.crt + ca.key, made by scripts/ca.sh;
 * the key is root's, 0600, and only airlockd reads it). Certificates minted
 * from it: the egress gateway's intermediate issuer (egress/egress_ca.c) and
 * the API's own server certificate when airlockd serves https with tls = ca.
 */
#ifndef AIRLOCK_CA_H
#define AIRLOCK_CA_H

#include <openssl/evp.h>
#include <openssl/x509.h>

#define CA_API_DAYS		365
#define CA_API_RENEW_DAYS	30	/* mint a new one when fewer days remain */

X509 *ca_read_cert(const char *path, char **cause);
EVP_PKEY *ca_read_key(const char *path, char **cause);
/* Atomically (tmp + fsync + rename); keys 0600, certificates 0644. */
int ca_write_pem(const char *path, int is_key, void *obj, char **cause);
/* Add an extension given in openssl.cnf syntax ("critical,CA:TRUE"). */
int ca_add_ext(X509 *issuer, X509 *x, int nid, const char *value);
/*
 * A new X.509 v3 certificate for key, issued by issuer: random serial, valid
 * from an hour ago (guests and hosts with lagging clocks) for days, subject
 * O=airlock, CN=cn. Extensions and the signature are the caller's. issuer
 * NULL: self-issued (a root: the issuer name is its own subject).
 */
X509 *ca_new_cert(X509 *issuer, EVP_PKEY *key, const char *cn, int days);
/* Is crt signed by root, matching key, and valid for renew_days more? */
int ca_cert_usable(const char *crt, const char *key, X509 *root, int renew_days);

/* An extension in openssl.cnf syntax; a list ends with nid 0. */
struct ca_ext {
	int		 nid;
	const char	*value;
};

/* What ca_mint makes: subject CN, validity, extensions. */
struct ca_mint {
	const char		*cn;
	int			 days;
	int			 renew_days;	/* mint anew when fewer remain */
	const struct ca_ext	*exts;
	/* NULL, or a further test of an existing usable crt (1: keep it). */
	int			(*still_good)(const char *crt, const void *arg);
	const void		*arg;
};

/*
 * The one mint sequence: make sure crt/key hold a certificate from the root
 * CA in ca_dir (ca.crt, ca.key) as m says. An existing pair is kept while it
 * is signed by that root, matches, has renew_days left and still_good says
 * so; else a fresh P-256 key and certificate are written atomically (key
 * 0600 first) and *renewed = 1. The caller wraps the cause with its name.
 */
int ca_mint(const char *ca_dir, const char *crt, const char *key, const struct ca_mint *m,
    int *renewed, char **cause);

/*
 * Make sure crt/key hold a server certificate for the API signed by the
 * root CA in ca_dir, valid for at least CA_API_RENEW_DAYS, whose SAN lists
 * localhost, 127.0.0.1, ::1, this host's name and listen_host, and, for
 * the E2B SDKs, api.<e2b_domain> and *.<e2b_domain> (e2b_domain NULL:
 * none). *renewed = 1 when new ones were written.
 */
int ca_api_ensure(const char *ca_dir, const char *crt, const char *key,
    const char *listen_host, const char *e2b_domain, int *renewed, char **cause);

#endif
