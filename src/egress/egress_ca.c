/* Mint the gateway's intermediate CA from the host root CA (OpenSSL 3). */
#include <sys/stat.h>

#include <fcntl.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/util.h"
#include "egress/egress_ca.h"

static X509 *
egress_read_cert(const char *path, char **cause)
{
	FILE *f;
	X509 *x;

	if ((f = fopen(path, "re")) == NULL) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		return NULL;
	}
	x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (x == NULL)
		cause_set(cause, "%s: not a PEM certificate", path);
	return x;
}

static EVP_PKEY *
egress_read_key(const char *path, char **cause)
{
	FILE *f;
	EVP_PKEY *k;

	if ((f = fopen(path, "re")) == NULL) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		return NULL;
	}
	k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (k == NULL)
		cause_set(cause, "%s: not a PEM private key", path);
	return k;
}

/* Is the existing intermediate signed by root, matching its key, and fresh enough? */
static int
egress_ca_usable(const char *crt, const char *key, X509 *root)
{
	X509 *x;
	EVP_PKEY *k, *rootpub;
	time_t limit = time(NULL) + (time_t)EGRESS_CA_RENEW_DAYS * 86400;
	int ok = 0;

	if ((x = egress_read_cert(crt, NULL)) == NULL)
		return 0;
	if ((k = egress_read_key(key, NULL)) == NULL) {
		X509_free(x);
		return 0;
	}
	rootpub = X509_get0_pubkey(root);
	if (rootpub != NULL && X509_verify(x, rootpub) == 1 && X509_check_private_key(x, k) == 1 &&
	    X509_cmp_time(X509_get0_notAfter(x), &limit) > 0)
		ok = 1;
	X509_free(x);
	EVP_PKEY_free(k);
	return ok;
}

static int
egress_add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int rc;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)) == NULL)
		return -1;
	rc = X509_add_ext(x, ext, -1) == 1 ? 0 : -1;
	X509_EXTENSION_free(ext);
	return rc;
}

static int
egress_write_pem(const char *path, int is_key, void *obj, char **cause)
{
	char *tmp;
	FILE *f;
	int fd, ok;

	xasprintf(&tmp, "%s.tmp", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, is_key ? 0600 : 0644)) == -1 ||
	    (f = fdopen(fd, "w")) == NULL) {
		cause_set(cause, "create %s: %s", tmp, strerror(errno));
		if (fd != -1)
			close(fd);
		free(tmp);
		return -1;
	}
	ok = is_key ? PEM_write_PrivateKey(f, obj, NULL, NULL, 0, NULL, NULL) :
	    PEM_write_X509(f, obj);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		ok = 0;
	fclose(f);
	if (!ok || rename(tmp, path) == -1) {
		cause_set(cause, "write %s failed", path);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

int
egress_ca_ensure(const char *dir, int *renewed, char **cause)
{
	char *rootcrt, *rootkey, *crt, *key;
	X509 *root = NULL, *x = NULL;
	EVP_PKEY *rk = NULL, *k = NULL;
	X509_NAME *name;
	BIGNUM *serial = NULL;
	int rc = -1;

	*renewed = 0;
	xasprintf(&rootcrt, "%s/ca.crt", dir);
	xasprintf(&rootkey, "%s/ca.key", dir);
	xasprintf(&crt, "%s/gateway.crt", dir);
	xasprintf(&key, "%s/gateway.key", dir);
	if ((root = egress_read_cert(rootcrt, cause)) == NULL)
		goto out;
	if (egress_ca_usable(crt, key, root)) {
		rc = 0;
		goto out;
	}
	if ((rk = egress_read_key(rootkey, cause)) == NULL)
		goto out;
	if ((k = EVP_EC_gen("P-256")) == NULL) {
		cause_set(cause, "EC key generation failed");
		goto out;
	}
	x = X509_new();
	X509_set_version(x, 2);
	serial = BN_new();
	BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
	BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x));
	/* An hour of slack for guests whose clock lags (they are resynced on /init). */
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), (long)EGRESS_CA_DAYS * 86400);
	X509_set_issuer_name(x, X509_get_subject_name(root));
	name = X509_NAME_new();
	X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"airlock", -1,
	    -1, 0);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)"airlock egress gateway issuer", -1, -1, 0);
	X509_set_subject_name(x, name);
	X509_NAME_free(name);
	X509_set_pubkey(x, k);
	if (egress_add_ext(root, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") == -1 ||
	    egress_add_ext(root, x, NID_key_usage, "critical,keyCertSign,cRLSign") == -1 ||
	    egress_add_ext(root, x, NID_subject_key_identifier, "hash") == -1 ||
	    egress_add_ext(root, x, NID_authority_key_identifier, "keyid:always") == -1) {
		cause_set(cause, "cannot add certificate extensions");
		goto out;
	}
	if (X509_sign(x, rk, EVP_sha256()) == 0) {
		cause_set(cause, "signing the gateway issuer failed");
		goto out;
	}
	if (egress_write_pem(key, 1, k, cause) == -1 || egress_write_pem(crt, 0, x, cause) == -1)
		goto out;
	*renewed = 1;
	rc = 0;
out:
	if (rc == -1)
		cause_wrap(cause, "gateway issuer in %s", dir);
	BN_free(serial);
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
