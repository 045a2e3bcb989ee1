/* Mint the gateway's intermediate CA from the host root CA (OpenSSL 3). */
#include <stdlib.h>

#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "common/util.h"
#include "egress/egress_ca.h"

int
egress_ca_ensure(const char *dir, int *renewed, char **cause)
{
	static const struct ca_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:TRUE,pathlen:0" },
		{ NID_key_usage, "critical,keyCertSign,cRLSign" },
		{ NID_subject_key_identifier, "hash" },
		{ NID_authority_key_identifier, "keyid:always" },
		{ 0, NULL },
	};
	static const struct ca_mint m = { .cn = "airlock egress gateway issuer",
	    .days = EGRESS_CA_DAYS, .renew_days = EGRESS_CA_RENEW_DAYS, .exts = exts };
	char *crt, *key;
	int rc;

	xasprintf(&crt, "%s/gateway.crt", dir);
	xasprintf(&key, "%s/gateway.key", dir);
	if ((rc = ca_mint(dir, crt, key, &m, renewed, cause)) == -1)
		cause_wrap(cause, "gateway issuer in %s", dir);
	free(crt);
	free(key);
	return rc;
}
