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

/* What the certificate must name: the listener's host and the E2B sandbox domain. */
struct ca_api_names {
	const char	*listen_host;
	const char	*domain;	/* NULL: none */
};

/* "DNS:localhost,IP:127.0.0.1,IP:::1[,DNS:<hostname>][,<listen_host>][,DNS:api.<d>,DNS:*.<d>]" */
static char *
ca_api_san(const char *listen_host, const char *domain)
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
	/* The E2B SDKs' names without E2B_SANDBOX_URL: api.{d} and {port}-{id}.{d}. */
	if (domain != NULL && *domain != '\0' && strspn(domain, ca_api_namechars) == strlen(domain)) {
		xasprintf(&more, "%s,DNS:api.%s,DNS:*.%s", san, domain, domain);
		free(san);
		san = more;
	}
	return san;
}

/* Does the certificate already name what a client of listen_host (and of the domain) checks? */
static int
ca_api_covers(const char *crt, const struct ca_api_names *n)
{
	X509 *x = ca_read_cert(crt, NULL);
	char *api, *sbx;
	int ip, ok;

	if (x == NULL)
		return 0;
	ok = X509_check_host(x, "localhost", 0, 0, NULL) == 1;
	if (ok && ca_api_listen_named(n->listen_host, &ip))
		ok = ip ? X509_check_ip_asc(x, n->listen_host, 0) == 1 :
		    X509_check_host(x, n->listen_host, 0, 0, NULL) == 1;
	if (ok && n->domain != NULL && *n->domain != '\0') {
		xasprintf(&api, "api.%s", n->domain);
		xasprintf(&sbx, "49983-x.%s", n->domain);
		ok = X509_check_host(x, api, 0, 0, NULL) == 1 &&
		    X509_check_host(x, sbx, 0, 0, NULL) == 1;
		free(api);
		free(sbx);
	}
	X509_free(x);
	return ok;
}

/* still_good for ca_mint: a changed listen_host or domain needs a new SAN. */
static int
ca_api_still_good(const char *crt, const void *names)
{
	return ca_api_covers(crt, names);
}

int
ca_api_ensure(const char *ca_dir, const char *crt, const char *key,
    const char *listen_host, const char *e2b_domain, int *renewed, char **cause)
{
	const struct ca_api_names names = { listen_host, e2b_domain };
	char *san = ca_api_san(listen_host, e2b_domain);
	const struct ca_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:FALSE" },
		{ NID_key_usage, "critical,digitalSignature" },
		{ NID_ext_key_usage, "serverAuth" },
		{ NID_subject_alt_name, san },
		{ NID_subject_key_identifier, "hash" },
		{ NID_authority_key_identifier, "keyid:always" },
		{ 0, NULL },
	};
	const struct ca_mint m = { .cn = "airlockd API", .days = CA_API_DAYS,
	    .renew_days = CA_API_RENEW_DAYS, .exts = exts, .still_good = ca_api_still_good,
	    .arg = &names };
	int rc;

	if ((rc = ca_mint(ca_dir, crt, key, &m, renewed, cause)) == -1)
		cause_wrap(cause, "API certificate from %s", ca_dir);
	free(san);
	return rc;
}
