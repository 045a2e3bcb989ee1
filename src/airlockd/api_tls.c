/* See api_tls.h. */
#include <sys/stat.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "airlockd/api_tls.h"
#include "ca/ca.h"
#include "common/log.h"
#include "common/util.h"

int
api_tls_files(const struct config *cfg, char **cert, char **keyp, char **cause)
{
	char *dir = NULL, *cadir = NULL, *crt = NULL, *key = NULL;
	int renewed, rc = -1;

	*cert = *keyp = NULL;
	if (strcmp(cfg->tls, "off") == 0) {
		if (cfg->tls_cert != NULL || cfg->tls_key != NULL) {
			cause_set(cause, "tls_cert/tls_key are set but tls = off (want tls = file)");
			return -1;
		}
		return 0;
	}
	if (strcmp(cfg->tls, "file") == 0) {
		if (cfg->tls_cert == NULL || cfg->tls_key == NULL) {
			cause_set(cause, "tls = file needs tls_cert and tls_key");
			return -1;
		}
		*cert = xstrdup(cfg->tls_cert);
		*keyp = xstrdup(cfg->tls_key);
		return 0;
	}
	if (strcmp(cfg->tls, "ca") != 0) {
		cause_set(cause, "tls: \"%s\" must be off, ca or file", cfg->tls);
		return -1;
	}
	if (cfg->tls_cert != NULL || cfg->tls_key != NULL) {
		cause_set(cause, "tls = ca mints its own certificate: unset tls_cert/tls_key "
		    "or use tls = file");
		return -1;
	}
	xasprintf(&dir, "%s/tls", cfg->data_dir);
	xasprintf(&cadir, "%s/ca", cfg->data_dir);
	xasprintf(&crt, "%s/api.crt", dir);
	xasprintf(&key, "%s/api.key", dir);
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		cause_set(cause, "mkdir %s: %s", dir, strerror(errno));
		goto out;
	}
	if (ca_api_ensure(cadir, crt, key, cfg->listen_host, cfg->e2b_domain, &renewed,
	    cause) == -1)
		goto out;
	if (renewed)
		log_info("tls: minted %s from %s/ca.crt", crt, cadir);
	*cert = crt;
	*keyp = key;
	crt = key = NULL;
	rc = 0;
out:
	free(dir);
	free(cadir);
	free(crt);
	free(key);
	return rc;
}
