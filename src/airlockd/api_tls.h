/* The API's TLS setting (tls = off | ca | file) turned into a transport. */
#ifndef AIRLOCK_API_TLS_H
#define AIRLOCK_API_TLS_H

#include "config/config.h"
#include "http/http_tls.h"

/*
 * *out = NULL for tls = off. tls = ca mints DATA/tls/api.crt + api.key
 * from the host's root CA (renewed when close to expiry or when
 * listen_host is not in it); tls = file uses tls_cert and tls_key.
 */
int api_tls_setup(const struct config *cfg, struct http_tls **out, char **cause);

#endif
