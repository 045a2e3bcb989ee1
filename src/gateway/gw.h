/*
 * airlock-gateway: the egress gateway process (DESIGN §6).
 *
 * One process serves every sandbox of the host. airlockd (privileged) opens
 * a TCP listener and a UDP DNS socket on 10.0.0.1 inside each sandbox's
 * island netns and hands them over the control socket (gw_ctl.c) together
 * with the sandbox's policy. The gateway itself runs unprivileged in the
 * upstream netns (the host's, or a test "internet" in make check), so every
 * upstream connection and DNS query leaves from there, never from an island.
 * It keeps serving while airlockd restarts; airlockd reconnects and
 * reconciles (docs/architecture.md, "Gateway").
 *
 * Single-threaded libevent loop; nothing here blocks.
 */
#ifndef AIRLOCK_GW_H
#define AIRLOCK_GW_H

#include <sys/queue.h>
#include <sys/socket.h>

#include <stdint.h>

#include <event2/event.h>
#include <event2/dns.h>
#include <event2/listener.h>
#include <event2/bufferevent.h>
#include <openssl/ssl.h>

#include "gateway/shared/gw_policy.h"

#define GW_LISTEN_PORT		15001	/* TCP listener in every island (nft redirect target) */
#define GW_DNS_PORT		53	/* UDP DNS on 10.0.0.1 in every island */

struct gw_addrset;
struct gw_audit;
struct gw_certs;
struct gw_pins;
struct gw_conn;
struct gw_dns;
struct gw_ratelim;

/* Counters per sandbox, reported by the `stats` control op. */
struct gw_counters {
	uint64_t	 dns_queries;
	uint64_t	 dns_denied;
	uint64_t	 conns;
	uint64_t	 conns_denied;
	uint64_t	 requests;
	uint64_t	 requests_denied;
	uint64_t	 bytes_up;		/* guest → upstream */
	uint64_t	 bytes_down;		/* upstream → guest */
};

/* Token bucket (requests/s), refilled lazily from the monotonic clock. */
struct gw_bucket {
	double		 rate;		/* tokens per second; 0 = unlimited */
	double		 burst;
	double		 tokens;
	uint64_t	 last_ms;
};

struct gw_sandbox {
	struct gw			*gw;
	char				*id;
	char				*project;
	struct gw_policy		*policy;	/* refcounted; swapped on `update` */

	int				 tcp_fd;	/* listening, inside the island */
	int				 dns_fd;	/* UDP, inside the island */
	struct evconnlistener		*listener;
	struct event			*dns_ev;
	struct gw_dns			*dns;		/* gw_dns.c: its rate bucket and pending lookups */

	struct gw_pins			*pins;		/* names this sandbox resolved (gw_resolve.h) */
	struct gw_bucket		 req_bucket;	/* policy->rate.rps */
	struct gw_bucket		 accept_bucket;	/* new connections (GW_ACCEPT_RATE) */
	uint64_t			 refused_logged_ms; /* last audit line for refused accepts */
	struct bufferevent_rate_limit_group *bytes_group; /* policy->rate.bps, all conns */
	struct gw_ratelim		**rule_limits;	/* per rule index of policy (gw_proxy.c) */
	size_t				 nrule_limits;

	struct gw_counters		 counters;
	TAILQ_HEAD(, gw_conn)		 conns;		/* live proxied connections */
	TAILQ_ENTRY(gw_sandbox)		 entry;
};
TAILQ_HEAD(gw_sandboxes, gw_sandbox);

struct gw_config {
	char		*ctl_path;		/* control socket (unix, SOCK_SEQPACKET) */
	char		*audit_dir;		/* audit.log + rotated audit.log.N */
	uint64_t	 audit_max_bytes;	/* rotate above this */
	int		 audit_keep;		/* rotated files kept */
	char		*ca_cert;		/* PEM: leaf issuer certificate (+ chain) */
	char		*ca_key;		/* PEM: its key (an intermediate, never the root) */
	char		*upstream_ca;		/* extra CA bundle trusted upstream, or NULL */
	char		*resolver;		/* "IP" or "IP:port"; NULL = /etc/resolv.conf */
	char		*netns;			/* upstream netns path, NULL = inherited */
	char		*user;			/* drop to this user after setup */
};

struct gw {
	struct event_base	*base;
	struct evdns_base	*dns;		/* upstream resolver */
	struct gw_config	 cfg;
	struct gw_addrset	*host_addrs;	/* the upstream netns's own addresses: denied */
	struct gw_audit		*audit;
	struct gw_certs		*certs;		/* leaf minting + cache (gw_tls.h) */
	SSL_CTX			*upstream_ctx;	/* client side, verifying */
	struct gw_sandboxes	 sandboxes;
	uint64_t		 conn_seq;
};

struct gw_sandbox *gw_sandbox_find(struct gw *, const char *id);
/* Take one token; 1 if allowed, 0 if the bucket is empty. */
int gw_bucket_take(struct gw_bucket *, double n);
void gw_bucket_init(struct gw_bucket *, double rate, double burst);

/* Entry points of the two data paths, called by gw_sandbox.c. */
void gw_dns_readable(struct gw_sandbox *);		/* gw_dns.c */
void gw_proxy_accept(struct gw_sandbox *, int fd);	/* gw_proxy.c: fd is the accepted guest socket */
/* Tear down every connection of a sandbox (detach, policy mode change). */
void gw_proxy_close_all(struct gw_sandbox *);

#endif
