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
 * Threads (docs/architecture.md "Gateway process model"): the main thread
 * runs the control socket (gw_server.c) and signals; N worker threads
 * (gw_worker.c) each run their own event_base and own every sandbox
 * sharded to them, with everything the sandbox has (island listener, DNS
 * socket, connections, rate limiters, pins, pending lookups, deny
 * summaries). A sandbox is touched by its worker only, so per-sandbox state
 * takes no lock. What the threads share is read-only after setup (config,
 * denied host addresses, the upstream SSL_CTX) or locked inside its module
 * (the leaf cache in gw_tls.c, the audit writer in gw_audit.c). With one
 * worker it runs on the main thread's base: no thread at all.
 *
 * Nothing here blocks an event loop.
 */
#ifndef AIRLOCK_GW_H
#define AIRLOCK_GW_H

#include <sys/queue.h>
#include <sys/socket.h>

#include <pthread.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/dns.h>
#include <event2/listener.h>
#include <event2/bufferevent.h>
#include <openssl/ssl.h>

#include "common/tbucket.h"
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
struct gw_job;
struct gw_shard;
struct gw_worker;

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

/*
 * Refusals that come in floods are not audited one by one: each is counted
 * here and written as one deny_summary line per sandbox, reason and second
 * (gw_sandbox_deny). Every other decision keeps its own line.
 */
enum gw_deny_class {
	GW_DENY_ACCEPT_RATE,	/* new connections over GW_ACCEPT_RATE */
	GW_DENY_CONN_CAP,	/* GW_CONNS_MAX live connections */
	GW_DENY_DNS_RATE,	/* DNS queries over GW_DNS_RATE */
	GW_DENY_NCLASS
};
#define GW_DENY_WINDOW_MS	1000	/* one summary line per class and window */

struct gw_sandbox {
	struct gw			*gw;
	struct gw_worker		*w;		/* the only thread that touches this sandbox */
	char				*id;
	char				*project;
	struct gw_policy		*policy;	/* refcounted; swapped on `update` */

	int				 tcp_fd;	/* listening, inside the island */
	int				 dns_fd;	/* UDP, inside the island */
	struct evconnlistener		*listener;
	struct event			*dns_ev;
	struct gw_dns			*dns;		/* gw_dns.c: its rate bucket and pending lookups */

	struct gw_pins			*pins;		/* names this sandbox resolved (gw_resolve.h) */
	struct tbucket		 req_bucket;	/* policy->rate.rps */
	struct tbucket		 accept_bucket;	/* new connections (GW_ACCEPT_RATE) */
	uint64_t			 deny_count[GW_DENY_NCLASS];	/* in the open window */
	uint64_t			 deny_since_ms;	/* window opened (first refusal) */
	struct event			*deny_ev;	/* closes the window: writes the summaries */
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
	int		 threads;		/* event-loop workers (1: all on the main thread) */
};

#define GW_THREADS_MAX		64

/*
 * One event loop and the sandboxes sharded to it. Fields marked (worker)
 * are touched only by the worker's thread once it runs; (main) only by the
 * main thread; (lock) under inbox_mtx.
 */
struct gw_worker {
	struct gw		*gw;
	int			 idx;
	struct event_base	*base;		/* (worker) its own loop */
	struct evdns_base	*dns;		/* (worker) its own upstream resolver */
	struct gw_sandboxes	 sandboxes;	/* (worker) */
	uint64_t		 conn_seq;	/* (worker) connection ids, idx in the top bits */
	int			 stopping;	/* (worker) an exit job ran */

	int			 threaded;	/* own thread (else runs on the main base) */
	pthread_t		 thread;
	pthread_mutex_t		 inbox_mtx;
	TAILQ_HEAD(, gw_job)	 inbox;		/* (lock) control jobs from the main thread */
	struct event		*inbox_ev;	/* activated by the main thread, runs on base */

	size_t			 nshards;	/* (main) sandboxes routed here: least-loaded pick */
};

/*
 * The process. After setup, workers read cfg, host_addrs and upstream_ctx
 * (SSL_new on a shared SSL_CTX is thread-safe in OpenSSL 3) and never
 * write them; certs and audit lock inside. The rest is the main thread's.
 */
struct gw {
	struct event_base	*base;		/* main thread: control socket, signals, replies */
	struct gw_config	 cfg;
	struct gw_addrset	*host_addrs;	/* the upstream netns's own addresses: denied */
	struct gw_audit		*audit;		/* one writer, locked (gw_audit.c) */
	struct gw_certs		*certs;		/* leaf minting + cache (gw_tls.h), locked */
	SSL_CTX			*upstream_ctx;	/* client side, verifying */

	struct gw_worker	*workers;	/* nworkers, fixed after gw_workers_start */
	int			 nworkers;
	TAILQ_HEAD(, gw_shard)	 shards;	/* main: which worker owns which sandbox id */
	pthread_mutex_t		 done_mtx;
	TAILQ_HEAD(, gw_job)	 done;		/* (done_mtx) jobs answered by workers */
	struct event		*done_ev;	/* activated by workers, runs on base */
};

/* The sandbox id on w (w's thread only). */
struct gw_sandbox *gw_sandbox_find(struct gw_worker *, const char *id);
/* Count one refusal of a flood class; the summary line follows within a window. */
void gw_sandbox_deny(struct gw_sandbox *, enum gw_deny_class);
/* Write the open window's summaries now (detach, tests). */
void gw_sandbox_deny_flush(struct gw_sandbox *);
/* Take one token; 1 if allowed, 0 if the bucket is empty. */

/* Entry points of the two data paths, called by gw_sandbox.c. */
void gw_dns_readable(struct gw_sandbox *);		/* gw_dns.c */
void gw_proxy_accept(struct gw_sandbox *, int fd);	/* gw_proxy.c: fd is the accepted guest socket */
/* Tear down every connection of a sandbox (detach, policy mode change). */
void gw_proxy_close_all(struct gw_sandbox *);

#endif
