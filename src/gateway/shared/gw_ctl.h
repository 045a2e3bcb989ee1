/*
 * Control protocol between airlockd (client) and airlock-gateway (server).
 *
 * Unix SOCK_SEQPACKET socket (gw_config.ctl_path, mode 0600, owned by
 * root): one message = one JSON object, possibly with file descriptors
 * (SCM_RIGHTS). Requests carry "op" and an optional "seq"; every request
 * gets exactly one reply {"seq":N,"ok":true,...} or
 * {"seq":N,"ok":false,"error":"message"}, in order.
 *
 *   hello                          → {version, pid, sandboxes:[id...]}
 *   attach  {sandbox, project, policy} + fds [tcp_listener, dns_udp]
 *                                  → {}   (replaces an existing attach)
 *   update  {sandbox, policy}      → {}   live policy swap
 *   detach  {sandbox}              → {}   closes its sockets and connections
 *   stats   {sandbox?}             → {sandboxes:{id:{counters...}}, rss_kb}
 *   drops   {sandbox, window_ms, drops:[{kind, reason, count}]}
 *                                  → {}   deny_summary lines for packets the
 *                                         island's nftables dropped (airlockd counts them)
 *   shutdown                       → {}   then the gateway exits
 *
 * (PREFIX: a path pattern, "/v1/" followed by a star.)
 * policy (see gw_policy.h; built by airlockd from the sandbox's network
 * spec and the secrets in scope):
 *   {"mode":"none"|"allowlist"|"full",
 *    "allow":["api.example.com", "*.example.org", "db.example.com:5432",
 *             "203.0.113.0/24:22",
 *             {"host":"api.x.com","port":443,"methods":["GET"],"paths":[PREFIX],
 *              "rate":{"rps":5,"bps":100000}}],
 *    "internal":["10.1.2.0/24:5432"],
 *    "credentials":[{"name":"GITHUB_TOKEN","value":"...","hosts":["api.github.com"],
 *                    "header":"Authorization","format":"Bearer {value}"}],
 *    "rate":{"rps":100,"bps":10485760}}
 *
 * The socket is the gateway's only input from airlockd; it trusts it (root
 * only). Messages are limited to GW_CTL_MSG_MAX bytes.
 */
#ifndef AIRLOCK_GW_CTL_H
#define AIRLOCK_GW_CTL_H

#include <stddef.h>

#include <jansson.h>

#define GW_CTL_VERSION		1
#define GW_CTL_MSG_MAX		(256 * 1024)
#define GW_CTL_MAX_FDS		4
/* A non-blocking socket had no room (send) or no message (recv): try later. No cause. */
#define GW_CTL_AGAIN		(-2)

/* Send one message with optional fds. 0, GW_CTL_AGAIN, or -1 with cause. */
int gw_ctl_send(int fd, const json_t *msg, const int *fds, size_t nfds, char **cause);
/*
 * Receive one message. Returns 1 with *msg (and fds, *nfds) set, 0 on EOF,
 * GW_CTL_AGAIN when nothing is queued, -1 on error (with cause). Received
 * fds are CLOEXEC.
 */
int gw_ctl_recv(int fd, json_t **msg, int *fds, size_t *nfds, char **cause);

#endif
