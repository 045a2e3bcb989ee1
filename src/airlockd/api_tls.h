/* The API's TLS setting (tls = off | ca | file) turned into a transport. */
#ifndef AIRLOCK_API_TLS_H
#define AIRLOCK_API_TLS_H

#include "config/config.h"

/*
 * The certificate and key files the API front serves (malloc'd; both NULL
 * for tls = off). tls = ca mints DATA/tls/api.crt + api.key from the
 * host's root CA (renewed when close to expiry or when listen_host is not
 * in it); tls = file names tls_cert and tls_key. Run as root, by the
 * worker: the front reads the files before it drops its privileges.
 */
int api_tls_files(const struct config *cfg, char **cert, char **key, char **cause);

#endif
