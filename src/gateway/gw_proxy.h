/*
 * The proxy's connection object, shared by gw_proxy.c (accept, first-bytes
 * classification, decisions, teardown, policy updates), gw_proxy_dial.c
 * (upstream connections), gw_proxy_http.c (the per-request HTTP relay),
 * gw_splice.c (L4) and gw_ratelim.c (rate limits).
 *
 * Ownership: a gw_conn belongs to its sandbox's conns list from accept to
 * gw_conn_close(), which is the only way out: it frees every bufferevent,
 * timer and resolver request at once and drops the owner's reference of
 * conn->ref (common/ref.h). The reference of the frames up the stack is
 * held by the loop turn as a whole, not by each of the connection's
 * callbacks: the struct is freed on the next turn, so a caller still
 * holding the pointer after a close reads gw_conn_closed() instead of
 * freed memory.
 */
#ifndef AIRLOCK_GW_PROXY_H
#define AIRLOCK_GW_PROXY_H

#include <sys/queue.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <stdint.h>

#include <event2/bufferevent.h>

#include "common/ref.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/gw_http.h"

#define GW_PEEK_MAX		(16 * 1024 + 512)	/* first bytes read before deciding */
#define GW_PEEK_SHORT_MS	1000	/* no bytes by then: a server-speaks-first protocol */
#define GW_HANDSHAKE_SECS	10	/* first bytes and the guest TLS handshake */
#define GW_DIAL_SECS		10	/* connect + upstream TLS, per address */
#define GW_HTTP_IDLE_SECS	120	/* kept-alive guest connection between requests */
#define GW_RESPONSE_SECS	300	/* upstream silence while a response is due */
#define GW_SPLICE_IDLE_SECS	1800	/* no byte either way on a spliced connection */
#define GW_FLUSH_SECS		5	/* a last answer to the guest before closing */
#define GW_BUF_HIGH		(256 * 1024)	/* per direction: stop reading above this */
#define GW_MAX_ADDRS		8	/* upstream addresses tried per dial */
#define GW_TOPUP_MAX		(64 * 1024)	/* extra bytes read after libevent's 4 KiB (gw_topup) */
#define GW_LIBEVENT_MAX_READ	4096	/* libevent 2.1's EVBUFFER_MAX_READ: its reads stop there */
#define GW_CONNS_MAX		512	/* live connections per sandbox: one guest cannot take every fd */
/*
 * New connections per sandbox and second (burst): each may cost a TLS
 * handshake and a leaf signature on the worker thread its sandbox shares
 * with others (gw_worker.c), so one guest opening connections in a loop
 * must not starve the others.
 */
#define GW_ACCEPT_RATE		100
#define GW_ACCEPT_BURST		200

enum gw_conn_state {
	GW_CONN_PEEK,		/* reading the first bytes */
	GW_CONN_HANDSHAKE,	/* TLS toward the guest */
	GW_CONN_HTTP,		/* request/response relay (gw_proxy_http.c) */
	GW_CONN_DIAL,		/* resolving and connecting, then splice */
	GW_CONN_SPLICE,		/* bytes both ways, no inspection */
	GW_CONN_CLOSING,	/* flushing a last answer to the guest */
};

/* Per-rule limits of the current policy; connections hold references. */
struct gw_ratelim {
	int					 refs;
	struct tbucket			 req;
	struct bufferevent_rate_limit_group	*bytes;	/* NULL without a bps limit */
};

struct gw_http_state;

/* Larger socket reads under a TLS filter (gw_topup_add). */
struct gw_topup {
	int	 fd;
	int	 busy;		/* inside our own commit: do not recurse */
};

struct gw_conn {
	struct gw_sandbox	*sb;
	uint64_t		 id;
	enum gw_conn_state	 state;
	struct ref		 ref;		/* dead once closed; see above */
	TAILQ_ENTRY(gw_conn)	 entry;

	struct sockaddr_in	 dst;		/* the guest's original destination */
	int			 dport;
	char			 dst_str[32];	/* "ip:port", audit */
	enum gw_mode		 mode;		/* policy mode the connection was decided under */
	const char		*kind;		/* "tls", "http", "l4": audit */
	char			 sni[GW_NAME_MAX];	/* "" when none */
	char			 name[GW_NAME_MAX];	/* name dialled; "" = the original destination */
	char			*rule;		/* text of the rule that let it through */
	int			 l4;		/* decided by an L4 rule (re-checked on update) */
	int			 tls;		/* TLS terminated toward the guest */

	struct bufferevent	*in;		/* guest side */
	struct bufferevent	*out;		/* upstream side, NULL until dialled */
	struct event		*timer;		/* peek deadline, flush deadline */
	uint64_t		 t_start;	/* ms, accept */
	uint64_t		 t_io;		/* ms, last byte either way */

	/* Dialling. */
	struct gw_resolve_req	*resolve;
	struct sockaddr_in	 addrs[GW_MAX_ADDRS];
	size_t			 naddrs, nexta;
	char			 ip[INET6_ADDRSTRLEN];	/* address connected to, audit */
	int			 out_tls;	/* upstream speaks TLS */
	int			 out_wrapped;	/* the TLS filter is on (TCP connected) */
	int			 connected;
	const char		*dial_error;	/* why the last attempt failed */
	void			(*on_connected)(struct gw_conn *);
	void			(*on_dial_failed)(struct gw_conn *, const char *reason);

	struct gw_ratelim	*rl;		/* the rule's limits, or NULL */
	uint64_t		 bytes_up;	/* whole connection */
	uint64_t		 bytes_down;
	int			 in_eof, out_eof;	/* splice: half-closes seen */
	int			 tls_closing;	/* close_notify sent to the guest */
	int			 audit_on_close;	/* spliced: log the allow with its bytes at the end */
	struct gw_topup		 topup_in, topup_out;	/* the raw sockets under TLS filters */

	struct gw_http_state	*http;		/* GW_CONN_HTTP only */
};

/* gw_proxy.c */
void gw_conn_close(struct gw_conn *, const char *reason);
void gw_tv(struct timeval *, int secs);
void gw_nodelay(int fd);
/* Leave any rate-limit group, then free. */
void gw_bev_free(struct bufferevent *);
/*
 * Bulk tuning of a TLS filter tls over the socket bufferevent raw: read up
 * to GW_TOPUP_MAX more whenever libevent reads raw, larger single reads and
 * writes.
 */
void gw_topup_add(struct gw_topup *, struct bufferevent *raw, struct bufferevent *tls);
/* The other side of conn from bev. */
struct bufferevent *gw_other(struct gw_conn *, struct bufferevent *);
/* A denied range without an operator internal exception for it. */
int gw_conn_addr_denied(struct gw_conn *, const struct sockaddr_in *, const char **reason);
/* Send buf's contents (an answer) to the guest, then close. */
void gw_conn_finish(struct gw_conn *, const char *reason);
/* gw_proxy_dial.c: resolve name (NULL: dial conn->dst), connect, TLS if tls. */
void gw_conn_dial(struct gw_conn *, const char *name, int tls);

/* gw_splice.c: move to the L4 splice with both bufferevents set up. */
void gw_conn_splice(struct gw_conn *);
/* Count and move bytes from one side's input to the other's output. */
size_t gw_conn_move(struct gw_conn *, struct bufferevent *from, size_t max);

/* gw_ratelim.c: per-rule limits of rule under the sandbox's policy (a new reference, or NULL). */
struct gw_ratelim *gw_ratelim_get(struct gw_sandbox *, const struct gw_rule *);
void gw_ratelim_unref(struct gw_ratelim *);
/* Hold rl for conn and put its upstream side into rl's byte group. */
void gw_conn_set_ratelim(struct gw_conn *, struct gw_ratelim *);
/* A byte-rate group for bps per direction (g NULL: new; else reconfigured). */
struct bufferevent_rate_limit_group *gw_ratelim_group(struct event_base *, double bps,
    struct bufferevent_rate_limit_group *g);
/* Drop the sandbox's per-rule limits (a new policy starts over). */
void gw_ratelim_drop_all(struct gw_sandbox *);
/* Fill the connection's fields into r and log it. */
void gw_conn_audit(struct gw_conn *, struct gw_audit_rec *);

/* gw_proxy_http.c */
void gw_http_start(struct gw_conn *, const char *bound);
/* Audit a request still in flight and free the HTTP state. */
void gw_http_free(struct gw_conn *);

/* Closed (gw_conn_close ran): touch nothing but this until the loop turn ends. */
static inline int
gw_conn_closed(const struct gw_conn *c)
{
	return ref_dead(&c->ref);
}

#endif
