/*
 * TLS for http_server: a transport that wraps each accepted socket in an
 * OpenSSL bufferevent. Kept apart from the server so that the HTTP core has
 * no OpenSSL dependency (the static guest agent is to link it).
 *
 * Also the cluster's mTLS, both ends: API replicas and workers present a
 * role certificate from the cluster CA (ca/cluster_ca.h) and each checks
 * the other's chain to the CA file, its validity, and its role, the SAN
 * URI "airlock:role:<role>" (the worker accepts role api, the API wants
 * role worker). TLS 1.3 only, ALPN http/1.1, no session resumption (every
 * connection is verified in full, so a trust file or a role is never
 * outlived by a ticket). Host names are not checked: all replicas of a
 * role share one certificate (one Kubernetes Secret), so a name in it
 * proves nothing the role does not, and the address the API dials comes
 * from the worker's own registration in the database. Handshakes refused
 * either way are logged with the reason, once per peer address per
 * HTTP_LIMIT_LOG_INTERVAL_S (later ones counted into the next line).
 * Contexts belong to one event loop's thread.
 */
#ifndef AIRLOCK_HTTP_TLS_H
#define AIRLOCK_HTTP_TLS_H

#include "http/http_server.h"

struct bufferevent;
struct event_base;
struct http_tls;
struct http_tls_client;

/* Server certificate chain and key in PEM; TLS 1.2 and newer, HTTP/1.1 by ALPN. */
struct http_tls *http_tls_new(const char *cert, const char *key, char **cause);
/*
 * A cluster mTLS server: presents cert/key and accepts only clients whose
 * certificate chains to a CA in the PEM file ca (several during a CA
 * rotation) and names role want_role. Refused at load, naming the file:
 * unreadable files, a key that is not the certificate's, and a cert that
 * does not chain to ca or has expired.
 */
struct http_tls *http_tls_new_mtls(const char *cert, const char *key, const char *ca,
    const char *want_role, char **cause);
void http_tls_free(struct http_tls *tls);
/* Serve srv's connections over TLS (tls must outlive srv). */
void http_tls_attach(struct http_tls *tls, struct http_server *srv);
/* Handshakes this mTLS server refused (0 for http_tls_new's). */
unsigned long http_tls_refused(const struct http_tls *tls);

/*
 * The client end of cluster mTLS: presents cert/key and accepts only a
 * server whose certificate chains to ca and names role want_role. The
 * same checks at load as http_tls_new_mtls.
 */
struct http_tls_client *http_tls_client_new(const char *cert, const char *key, const char *ca,
    const char *want_role, char **cause);
/* c must outlive every bufferevent it made. */
void http_tls_client_free(struct http_tls_client *c);
/*
 * A TLS client bufferevent over under (a socket bufferevent, connecting or
 * connected, with no callbacks set; owned from now on and freed with the
 * result). peer names the server in logs ("10.0.0.5:7443"; NULL: "the
 * server"). Hand the result to http_client_start: the request is written
 * once the handshake is done, and a refused handshake is its failure (no
 * response head).
 */
struct bufferevent *http_tls_client_wrap(struct http_tls_client *c, struct bufferevent *under,
    const char *peer);
/*
 * The same over a new connection to addr, "IPv4:PORT" or "[IPv6]:PORT"
 * (a worker's registered address); NULL and a cause when the connect
 * cannot even start. Prefer this to wrap: OpenSSL then writes to the
 * socket itself, so the alert of a refusal reaches the server even when
 * the caller frees the bufferevent in its failure callback (over wrap's
 * filter it may still sit in under's output).
 */
struct bufferevent *http_tls_client_connect(struct http_tls_client *c, struct event_base *base,
    const char *addr, char **cause);
/*
 * Why the handshake on bev (made by http_tls_client_*) failed, for the
 * caller's error answer ("certificate has expired (...)", "the server
 * refused the handshake: alert ..."), or NULL. Valid while bev lives, so
 * in http_client's done callback: http_tls_client_error(http_creq_bev(r)).
 */
const char *http_tls_client_error(struct bufferevent *bev);

#endif
