/*
 * The API's server certificate minted from the host's root CA (tls = ca):
 * a client on this host trusts it through DATA/ca/ca.crt, which the CLI
 * picks up by itself; remote clients are given that file (AIRLOCK_CA_FILE).
 */
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "common/util.h"

static const char ca_api_namechars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";

/*
 * Does listen_host go into the SAN? Not the loopback names (always there),
 * not the wildcard addresses (no client dials them), not anything that is
 * neither an address nor a plain DNS name. *ip says which kind it is.
 */
static int
ca_api_listen_named(const char *h, int *ip)
{
	unsigned char a[16];

	if (h == NULL || *h == '\0' || strcmp(h, "localhost") == 0 ||
	    strcmp(h, "127.0.0.1") == 0 || strcmp(h, "::1") == 0 ||
	    strcmp(h, "0.0.0.0") == 0 || strcmp(h, "::") == 0)
		return 0;
	*ip = inet_pton(AF_INET, h, a) == 1 || inet_pton(AF_INET6, h, a) == 1;
	return *ip || strspn(h, ca_api_namechars) == strlen(h);
}

/* "DNS:localhost,IP:127.0.0.1,IP:::1[,DNS:<hostname>][,<listen_host>]" */
static char *
ca_api_san(const char *listen_host)
{
	char host[256] = "", *san, *more;
	int ip;

	xasprintf(&san, "DNS:localhost,IP:127.0.0.1,IP:::1");
	if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' &&
	    strcmp(host, "localhost") != 0 && strspn(host, ca_api_namechars) == strlen(host)) {
		xasprintf(&more, "%s,DNS:%s", san, host);
		free(san);
		san = more;
	}
	if (ca_api_listen_named(listen_host, &ip) && strcmp(listen_host, host) != 0) {
		xasprintf(&more, "%s,%s:%s", san, ip ? "IP" : "DNS", listen_host);
		free(san);
		san = more;
	}
	return san;
}

/* Does the certificate already name what a client of listen_host will check? */
static int
ca_api_covers(const char *crt, const char *listen_host)
{
	X509 *x = ca_read_cert(crt, NULL);
	int ip, ok;

	if (x == NULL)
		return 0;
	ok = X509_check_host(x, "localhost", 0, 0, NULL) == 1;
	if (ok && ca_api_listen_named(listen_host, &ip))
		ok = ip ? X509_check_ip_asc(x, listen_host, 0) == 1 :
		    X509_check_host(x, listen_host, 0, 0, NULL) == 1;
	X509_free(x);
	return ok;
}

int
ca_api_ensure(const char *ca_dir, const char *crt, const char *key,
    const char *listen_host, int *renewed, char **cause)
{
	char *rootcrt, *rootkey, *san = NULL;
	X509 *root = NULL, *x = NULL;
	EVP_PKEY *rk = NULL, *k = NULL;
	int rc = -1;

	*renewed = 0;
	xasprintf(&rootcrt, "%s/ca.crt", ca_dir);
	xasprintf(&rootkey, "%s/ca.key", ca_dir);
	if ((root = ca_read_cert(rootcrt, cause)) == NULL)
		goto out;
	/* A changed listen_host needs a new SAN. */
	if (ca_cert_usable(crt, key, root, CA_API_RENEW_DAYS) && ca_api_covers(crt, listen_host)) {
		rc = 0;
		goto out;
	}
	if ((rk = ca_read_key(rootkey, cause)) == NULL)
		goto out;
	if ((k = EVP_EC_gen("P-256")) == NULL) {
		cause_set(cause, "EC key generation failed");
		goto out;
	}
	x = ca_new_cert(root, k, "airlockd API", CA_API_DAYS);
	san = ca_api_san(listen_host);
	if (ca_add_ext(root, x, NID_basic_constraints, "critical,CA:FALSE") == -1 ||
	    ca_add_ext(root, x, NID_key_usage, "critical,digitalSignature") == -1 ||
	    ca_add_ext(root, x, NID_ext_key_usage, "serverAuth") == -1 ||
	    ca_add_ext(root, x, NID_subject_alt_name, san) == -1 ||
	    ca_add_ext(root, x, NID_subject_key_identifier, "hash") == -1 ||
	    ca_add_ext(root, x, NID_authority_key_identifier, "keyid:always") == -1) {
		cause_set(cause, "cannot add certificate extensions (%s)", san);
		goto out;
	}
	if (X509_sign(x, rk, EVP_sha256()) == 0) {
		cause_set(cause, "signing the API certificate failed");
		goto out;
	}
	if (ca_write_pem(key, 1, k, cause) == -1 || ca_write_pem(crt, 0, x, cause) == -1)
		goto out;
	*renewed = 1;
	rc = 0;
out:
	if (rc == -1)
		cause_wrap(cause, "API certificate from %s", ca_dir);
	free(san);
	X509_free(x);
	X509_free(root);
	EVP_PKEY_free(k);
	EVP_PKEY_free(rk);
	free(rootcrt);
	free(rootkey);
	return rc;
}
