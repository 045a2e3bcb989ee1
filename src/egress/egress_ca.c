/* Mint the gateway's intermediate CA from the host root CA (OpenSSL 3). */
#include <stdlib.h>

#include <openssl/ec.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "common/util.h"
#include "egress/egress_ca.h"

int
egress_ca_ensure(const char *dir, int *renewed, char **cause)
{
	char *rootcrt, *rootkey, *crt, *key;
	X509 *root = NULL, *x = NULL;
	EVP_PKEY *rk = NULL, *k = NULL;
	int rc = -1;

	*renewed = 0;
	xasprintf(&rootcrt, "%s/ca.crt", dir);
	xasprintf(&rootkey, "%s/ca.key", dir);
	xasprintf(&crt, "%s/gateway.crt", dir);
	xasprintf(&key, "%s/gateway.key", dir);
	if ((root = ca_read_cert(rootcrt, cause)) == NULL)
		goto out;
	if (ca_cert_usable(crt, key, root, EGRESS_CA_RENEW_DAYS)) {
		rc = 0;
		goto out;
	}
	if ((rk = ca_read_key(rootkey, cause)) == NULL)
		goto out;
	if ((k = EVP_EC_gen("P-256")) == NULL) {
		cause_set(cause, "EC key generation failed");
		goto out;
	}
	x = ca_new_cert(root, k, "airlock egress gateway issuer", EGRESS_CA_DAYS);
	if (ca_add_ext(root, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == -1 ||
	    ca_add_ext(root, x, NID_key_usage, "critical,keyCertSign,cRLSign") == -1 ||
	    ca_add_ext(root, x, NID_subject_key_identifier, "hash") == -1 ||
	    ca_add_ext(root, x, NID_authority_key_identifier, "keyid:always") == -1) {
		cause_set(cause, "cannot add certificate extensions");
		goto out;
	}
	if (X509_sign(x, rk, EVP_sha256()) == 0) {
		cause_set(cause, "signing the gateway issuer failed");
		goto out;
	}
	if (ca_write_pem(key, 1, k, cause) == -1 || ca_write_pem(crt, 0, x, cause) == -1)
		goto out;
	*renewed = 1;
	rc = 0;
out:
	if (rc == -1)
		cause_wrap(cause, "gateway issuer in %s", dir);
	X509_free(x);
	X509_free(root);
	EVP_PKEY_free(k);
	EVP_PKEY_free(rk);
	free(rootcrt);
	free(rootkey);
	free(crt);
	free(key);
	return rc;
}
