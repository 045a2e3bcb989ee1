/* X.509 helpers over the host's root CA (OpenSSL 3), see ca.h. */
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
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "common/log.h"
#include "common/util.h"

X509 *
ca_read_cert(const char *path, char **cause)
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

EVP_PKEY *
ca_read_key(const char *path, char **cause)
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

int
ca_cert_usable(const char *crt, const char *key, X509 *root, int renew_days)
{
	X509 *x;
	EVP_PKEY *k, *rootpub;
	time_t limit = time(NULL) + (time_t)renew_days * 86400;
	int ok = 0;

	if ((x = ca_read_cert(crt, NULL)) == NULL)
		return 0;
	if ((k = ca_read_key(key, NULL)) == NULL) {
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

int
ca_add_ext(X509 *issuer, X509 *x, int nid, const char *value)
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

int
ca_write_pem(const char *path, int is_key, void *obj, char **cause)
{
	char *tmp;
	FILE *f;
	int fd, ok;

	xasprintf(&tmp, "%s.tmp", path);
	/* fchmod: a leftover .tmp keeps its own mode through O_CREAT; a key must not. */
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, is_key ? 0600 : 0644)) == -1 ||
	    fchmod(fd, is_key ? 0600 : 0644) == -1 || (f = fdopen(fd, "w")) == NULL) {
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

X509 *
ca_new_cert(X509 *issuer, EVP_PKEY *key, const char *cn, int days)
{
	X509 *x = X509_new();
	X509_NAME *name;
	BIGNUM *serial = BN_new();

	if (x == NULL || serial == NULL)
		fatalx("out of memory");
	X509_set_version(x, 2);
	BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
	BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x));
	BN_free(serial);
	/* An hour of slack for clocks that lag (guests are resynced on /init). */
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400);
	name = X509_NAME_new();
	X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"airlock", -1,
	    -1, 0);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_subject_name(x, name);
	X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer) : name);
	X509_NAME_free(name);
	X509_set_pubkey(x, key);
	return x;
}

/* Add the extensions of m: 0, or -1 with a cause naming the one refused. */
static int
ca_mint_exts(X509 *root, X509 *x, const struct ca_mint *m, char **cause)
{
	const struct ca_ext *e;

	for (e = m->exts; e->nid != 0; e++) {
		if (ca_add_ext(root, x, e->nid, e->value) == -1) {
			cause_set(cause, "cannot add the certificate extension %s = %s",
			    OBJ_nid2sn(e->nid), e->value);
			return -1;
		}
	}
	return 0;
}

int
ca_mint(const char *ca_dir, const char *crt, const char *key, const struct ca_mint *m,
    int *renewed, char **cause)
{
	char *rootcrt, *rootkey;
	X509 *root = NULL, *x = NULL;
	EVP_PKEY *rk = NULL, *k = NULL;
	int rc = -1;

	*renewed = 0;
	xasprintf(&rootcrt, "%s/ca.crt", ca_dir);
	xasprintf(&rootkey, "%s/ca.key", ca_dir);
	if ((root = ca_read_cert(rootcrt, cause)) == NULL)
		goto out;
	if (ca_cert_usable(crt, key, root, m->renew_days) &&
	    (m->still_good == NULL || m->still_good(crt, m->arg))) {
		rc = 0;
		goto out;
	}
	if ((rk = ca_read_key(rootkey, cause)) == NULL)
		goto out;
	if ((k = EVP_EC_gen("P-256")) == NULL) {
		cause_set(cause, "EC key generation failed");
		goto out;
	}
	x = ca_new_cert(root, k, m->cn, m->days);
	if (ca_mint_exts(root, x, m, cause) == -1)
		goto out;
	if (X509_sign(x, rk, EVP_sha256()) == 0) {
		cause_set(cause, "signing the certificate \"%s\" failed", m->cn);
		goto out;
	}
	/* The key first: a certificate without its key is never left behind. */
	if (ca_write_pem(key, 1, k, cause) == -1 || ca_write_pem(crt, 0, x, cause) == -1)
		goto out;
	*renewed = 1;
	rc = 0;
out:
	X509_free(x);
	X509_free(root);
	EVP_PKEY_free(k);
	EVP_PKEY_free(rk);
	free(rootcrt);
	free(rootkey);
	return rc;
}
