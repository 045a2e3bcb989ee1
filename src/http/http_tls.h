/*
 * TLS for http_server: a transport that wraps each accepted socket in an
 * OpenSSL bufferevent. Kept apart from the server so that the HTTP core has
 * no OpenSSL dependency (the static guest agent is to link it).
 */
#ifndef AIRLOCK_HTTP_TLS_H
#define AIRLOCK_HTTP_TLS_H

#include "http/http_server.h"

struct http_tls;

/* Server certificate chain and key in PEM; TLS 1.2 and newer, HTTP/1.1 by ALPN. */
struct http_tls *http_tls_new(const char *cert, const char *key, char **cause);
void http_tls_free(struct http_tls *tls);
/* Serve srv's connections over TLS (tls must outlive srv). */
void http_tls_attach(struct http_tls *tls, struct http_server *srv);

#endif
