/* The cluster CA and its role certificates (see cluster_ca.h), on ca.c's helpers. */
#include <sys/stat.h>

#include <arpa/inet.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/cluster_ca.h"
#include "common/util.h"

static const char *const cluster_roles[] = { "api", "worker", NULL };

static const char cluster_namechars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";

int
cluster_role_known(const char *role)
{
	const char *const *r;

	for (r = cluster_roles; role != NULL && *r != NULL; r++)
		if (strcmp(*r, role) == 0)
			return 1;
	return 0;
}

/* dir made 0700 if missing; an existing one keeps its mode. */
static int
cluster_mkdir(const char *dir, char **cause)
{
	struct stat st;

	if (mkdir_p(dir, 0700, cause) == -1)
		return -1;
	if (stat(dir, &st) == -1 || !S_ISDIR(st.st_mode)) {
		cause_set(cause, "%s is not a directory", dir);
		return -1;
	}
	return 0;
}

int
cluster_ca_init(const char *dir, int force, char **cause)
{
	static const struct ca_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:TRUE,pathlen:0" },
		{ NID_key_usage, "critical,keyCertSign" },
		{ NID_subject_key_identifier, "hash" },
		{ 0, NULL },
	};
	const struct ca_ext *e;
	char *crt, *key, cn[64];
	time_t now = time(NULL);
	struct tm tm;
	EVP_PKEY *k = NULL;
	X509 *x = NULL;
	int rc = -1;

	xasprintf(&crt, "%s/%s", dir, CLUSTER_CA_CRT);
	xasprintf(&key, "%s/%s", dir, CLUSTER_CA_KEY);
	if (!force && (path_exists(crt) || path_exists(key))) {
		cause_set(cause, "%s exists: a cluster CA is already there (--force replaces it; "
		    "every certificate it issued is then refused once peers trust only the new one)",
		    path_exists(crt) ? crt : key);
		goto out;
	}
	if (cluster_mkdir(dir, cause) == -1)
		goto out;
	if ((k = EVP_EC_gen("P-256")) == NULL) {
		cause_set(cause, "EC key generation failed");
		goto out;
	}
	/* The time in the name tells two CAs apart while both are trusted (a rotation). */
	gmtime_r(&now, &tm);
	strftime(cn, sizeof(cn), "airlock cluster CA %Y-%m-%dT%H:%M:%SZ", &tm);
	x = ca_new_cert(NULL, k, cn, CLUSTER_CA_DAYS);
	for (e = exts; e->nid != 0; e++) {
		if (ca_add_ext(x, x, e->nid, e->value) == -1) {
			cause_set(cause, "cannot add the CA extension %s", OBJ_nid2sn(e->nid));
			goto out;
		}
	}
	if (X509_sign(x, k, EVP_sha256()) == 0) {
		cause_set(cause, "signing the CA certificate failed");
		goto out;
	}
	/* The key first: a certificate without its key is never left behind. */
	if (ca_write_pem(key, 1, k, cause) == -1 || ca_write_pem(crt, 0, x, cause) == -1)
		goto out;
	rc = 0;
out:
	X509_free(x);
	EVP_PKEY_free(k);
	free(crt);
	free(key);
	return rc;
}

/* "URI:airlock:role:<role>[,DNS:<name>|,IP:<addr>]...", or NULL with a cause naming the bad name. */
static char *
cluster_san(const struct cluster_cert_spec *s, char **cause)
{
	const char *const *n;
	unsigned char a[16];
	char *san, *more;
	size_t len;
	int ip;

	xasprintf(&san, "URI:%s%s", CLUSTER_ROLE_URI, s->role);
	for (n = s->names; n != NULL && *n != NULL; n++) {
		len = strlen(*n);
		ip = inet_pton(AF_INET, *n, a) == 1 || inet_pton(AF_INET6, *n, a) == 1;
		/* The charset also keeps a name from adding entries of its own (",URI:..."). */
		if (!ip && (len == 0 || len > 253 || strspn(*n, cluster_namechars) != len ||
		    (*n)[0] == '.' || (*n)[0] == '-' || (*n)[len - 1] == '.' ||
		    strstr(*n, "..") != NULL)) {
			cause_set(cause, "name \"%s\" is neither an IP address nor a DNS name", *n);
			free(san);
			return NULL;
		}
		xasprintf(&more, "%s,%s:%s", san, ip ? "IP" : "DNS", *n);
		free(san);
		san = more;
	}
	return san;
}

/* The CA in ca_dir can issue for days: its key matches, it is a CA, and it outlives the leaf. */
static int
cluster_ca_usable(const char *ca_dir, int days, X509 **root, char **cause)
{
	char *crt, *key;
	EVP_PKEY *k = NULL;
	time_t until = time(NULL) + (time_t)days * 86400;
	int rc = -1;

	xasprintf(&crt, "%s/%s", ca_dir, CLUSTER_CA_CRT);
	xasprintf(&key, "%s/%s", ca_dir, CLUSTER_CA_KEY);
	if ((*root = ca_read_cert(crt, cause)) == NULL || (k = ca_read_key(key, cause)) == NULL)
		goto out;
	if (X509_check_private_key(*root, k) != 1) {
		cause_set(cause, "%s is not the key of %s", key, crt);
		goto out;
	}
	if (X509_check_ca(*root) < 1) {
		cause_set(cause, "%s is not a CA certificate", crt);
		goto out;
	}
	if (X509_cmp_time(X509_get0_notAfter(*root), &until) < 0) {
		cause_set(cause, "%s expires before a certificate of %d days would (issue fewer "
		    "days, or rotate the CA: docs/operations.md \"Cluster certificates\")", crt, days);
		goto out;
	}
	rc = 0;
out:
	ERR_clear_error();
	EVP_PKEY_free(k);
	free(crt);
	free(key);
	if (rc == -1) {
		X509_free(*root);
		*root = NULL;
	}
	return rc;
}

/* still_good for ca_mint: issuing always makes a new key and certificate. */
static int
cluster_never_keep(const char *crt, const void *arg)
{
	return 0;
}

/* out_dir must not be ca_dir: a role key beside the CA key ends up in the same Secret. */
static int
cluster_same_dir(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	    sa.st_ino == sb.st_ino;
}

/* out_dir/tls.crt and tls.key through ca_mint, the one mint sequence. */
static int
cluster_mint(const char *ca_dir, const char *out_dir, const struct cluster_cert_spec *s,
    const char *san, char **cause)
{
	const struct ca_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:FALSE" },
		{ NID_key_usage, "critical,digitalSignature" },
		{ NID_ext_key_usage, "serverAuth,clientAuth" },
		{ NID_subject_alt_name, san },
		{ NID_subject_key_identifier, "hash" },
		{ NID_authority_key_identifier, "keyid:always" },
		{ 0, NULL },
	};
	struct ca_mint m = { .days = s->days, .renew_days = 0, .exts = exts,
	    .still_good = cluster_never_keep };
	char *crt, *key, *cn;
	int renewed, rc;

	xasprintf(&cn, "airlock-%s", s->role);
	xasprintf(&crt, "%s/%s", out_dir, CLUSTER_TLS_CRT);
	xasprintf(&key, "%s/%s", out_dir, CLUSTER_TLS_KEY);
	m.cn = cn;
	rc = ca_mint(ca_dir, crt, key, &m, &renewed, cause);
	free(cn);
	free(crt);
	free(key);
	return rc;
}

int
cluster_cert_issue(const char *ca_dir, const char *out_dir, const struct cluster_cert_spec *s,
    char **cause)
{
	char *san, *cacopy = NULL;
	X509 *root = NULL;
	int rc = -1;

	if (!cluster_role_known(s->role)) {
		cause_set(cause, "role \"%s\": want api or worker", s->role != NULL ? s->role : "");
		return -1;
	}
	if ((san = cluster_san(s, cause)) == NULL)
		return -1;
	if (cluster_ca_usable(ca_dir, s->days, &root, cause) == -1 ||
	    cluster_mkdir(out_dir, cause) == -1)
		goto out;
	if (cluster_same_dir(ca_dir, out_dir)) {
		cause_set(cause, "%s is the CA's own directory: give the role certificate a "
		    "directory of its own (its files go to the role's pods, the CA key must not)",
		    out_dir);
		goto out;
	}
	if (cluster_mint(ca_dir, out_dir, s, san, cause) == -1)
		goto out;
	/* The trust file the role's pods get: the CA certificate, never more. */
	xasprintf(&cacopy, "%s/%s", out_dir, CLUSTER_CA_CRT);
	if (ca_write_pem(cacopy, 0, root, cause) == -1)
		goto out;
	rc = 0;
out:
	X509_free(root);
	free(san);
	free(cacopy);
	return rc;
}

int
cluster_cert_facts(const char *crt, struct cluster_cert_facts *f, char **cause)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0, i;
	struct tm tm;
	X509 *x;

	memset(f, 0, sizeof(*f));
	if ((x = ca_read_cert(crt, cause)) == NULL)
		return -1;
	X509_NAME_oneline(X509_get_subject_name(x), f->subject, sizeof(f->subject));
	if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) == 1)
		f->not_after_ms = (int64_t)timegm(&tm) * 1000;
	if (X509_digest(x, EVP_sha256(), md, &mdlen) == 1)
		for (i = 0; i < mdlen && i * 3 + 3 <= sizeof(f->sha256); i++)
			snprintf(f->sha256 + i * 3, sizeof(f->sha256) - i * 3, "%02X%s", md[i],
			    i + 1 < mdlen ? ":" : "");
	X509_free(x);
	return 0;
}
