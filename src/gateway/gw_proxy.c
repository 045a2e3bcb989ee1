/*
 * The gateway's TCP data path (DESIGN §6, docs/security.md "Egress proxy").
 *
 * Every guest TCP connection is REDIRECTed by the island's nftables to the
 * sandbox's listener. The proxy takes the original destination, reads the
 * first bytes (a short deadline lets server-speaks-first protocols through
 * where an L4 rule could allow them) and decides:
 *
 *   TLS to 443 with an allowed SNI   terminate TLS (leaf minted for the SNI),
 *                                    then check every HTTP request (gw_proxy_http.c)
 *   plain HTTP to 80                 check every request by its Host
 *   anything else                    L4: only an explicit host:port rule whose
 *                                    name the gateway resolved to this very
 *                                    address for this sandbox, or a cidr:port rule
 *   full mode                        TLS spliced by SNI (dialled by name) unless a
 *                                    credential needs interception; no SNI: the
 *                                    original destination
 *
 * Upstream connections always leave from the gateway, to a name it resolves
 * itself (never the guest's choice of IP for names) or, for L4, to the
 * original destination; denied ranges are refused in every mode unless the
 * operator made an internal exception. Each decision is audited.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/gw_proxy.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_sni.h"
#include "gateway/gw_tls.h"

#define BEV_OPTS	(BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS)

static void	gw_conn_free_cb(evutil_socket_t, short, void *);
static void	gw_peek_read_cb(struct bufferevent *, void *);
static void	gw_peek_event_cb(struct bufferevent *, short, void *);
static void	gw_peek_timer_cb(evutil_socket_t, short, void *);
static void	gw_decide_l4(struct gw_conn *, const char *why);

void
gw_tv(struct timeval *tv, int secs)
{
	tv->tv_sec = secs;
	tv->tv_usec = 0;
}

struct bufferevent *
gw_other(struct gw_conn *c, struct bufferevent *bev)
{
	return bev == c->in ? c->out : c->in;
}

void
gw_conn_audit(struct gw_conn *c, struct gw_audit_rec *r)
{
	r->sandbox = c->sb->id;
	if (r->kind == NULL)
		r->kind = c->kind;
	if (r->sni == NULL && c->sni[0] != '\0')
		r->sni = c->sni;
	if (r->ip == NULL && c->ip[0] != '\0')
		r->ip = c->ip;
	if (r->host == NULL && c->name[0] != '\0')
		r->host = c->name;
	if (r->port == 0)
		r->port = c->dport;
	r->dst = c->dst_str;
	if (r->rule == NULL)
		r->rule = c->rule;
	gw_audit_log(c->sb->gw->audit, r);
}

/* Refuse the whole connection: audit, count, close. */
static void
gw_conn_deny(struct gw_conn *c, const char *reason)
{
	struct gw_audit_rec r = { .allow = 0, .reason = reason };

	gw_conn_audit(c, &r);
	c->sb->counters.conns_denied++;
	gw_conn_close(c, reason);
}

static void
gw_conn_release(void *c)
{
	free(c);
}

/* The end of the loop turn in which the connection closed: its frames are gone. */
static void
gw_conn_free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;

	ref_put(&c->ref, gw_conn_release, c);
}

/*
 * XXX libevent 2.1 reads at most 4096 bytes per readable event
 * (EVBUFFER_MAX_READ in buffer.c, after an FIONREAD ioctl), so a 16 KiB TLS
 * record costs four loop turns, four ioctls and four readv: under bulk
 * downloads most of the gateway's time went to syscalls (perf: 59% kernel,
 * 23% crypto). 2.2 has evbuffer_set_max_read; until then, whenever libevent
 * has added bytes to the raw socket's input, read what else the socket has
 * (up to GW_TOPUP_MAX) into the same buffer. Only under a TLS filter: rate
 * limits and watermarks apply to the filter above it (plaintext), and the
 * filter stops the raw side's reads when it is full, which stops these too.
 * A frozen buffer (reserve fails) is left alone. EOF and errors are left
 * for libevent's next read of the socket, which sees them again.
 */
static void
gw_topup_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct gw_topup *t = arg;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	ssize_t n, left;
	int nv;

	/*
	 * libevent read min(FIONREAD, 4096): less than that means the socket
	 * is drained, and a readv would only say EAGAIN (small requests and
	 * answers pay nothing).
	 */
	if (info->n_added < GW_LIBEVENT_MAX_READ || t->busy || t->fd == -1)
		return;
	if ((nv = evbuffer_reserve_space(buf, GW_TOPUP_MAX, v, 2)) <= 0)
		return;
	for (int i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
	}
	do
		n = readv(t->fd, iov, nv);
	while (n == -1 && errno == EINTR);
	left = n > 0 ? n : 0;
	for (int i = 0; i < nv; i++) {
		v[i].iov_len = (size_t)left < v[i].iov_len ? (size_t)left : v[i].iov_len;
		left -= (ssize_t)v[i].iov_len;
	}
	t->busy = 1;	/* the commit calls us again */
	evbuffer_commit_space(buf, v, n > 0 ? nv : 0);
	t->busy = 0;
}

void
gw_topup_add(struct gw_topup *t, struct bufferevent *raw, struct bufferevent *tls)
{
	t->fd = bufferevent_getfd(raw);
	t->busy = 0;
	evbuffer_add_cb(bufferevent_get_input(raw), gw_topup_cb, t);
	/*
	 * The other 16 KiB defaults: one writev per turn on the socket, and
	 * one SSL_read/SSL_write pass per turn on the filter. Rate limits
	 * still cap each of them (libevent takes the smaller).
	 */
	bufferevent_set_max_single_write(raw, GW_TOPUP_MAX);
	bufferevent_set_max_single_read(tls, GW_TOPUP_MAX);
	bufferevent_set_max_single_write(tls, GW_TOPUP_MAX);
}

/* Take a bufferevent out of any rate-limit group before it is freed (groups assert empty). */
void
gw_bev_free(struct bufferevent *bev)
{
	if (bev == NULL)
		return;
	bufferevent_remove_from_rate_limit_group(bev);
	bufferevent_free(bev);
}

void
gw_conn_close(struct gw_conn *c, const char *reason)
{
	struct gw_sandbox *sb = c->sb;

	if (ref_kill(&c->ref))
		return;
	if (c->audit_on_close) {
		struct gw_audit_rec r = { .allow = 1, .bytes_up = c->bytes_up,
		    .bytes_down = c->bytes_down };

		gw_conn_audit(c, &r);
	}
	log_debug("gateway: sandbox %s conn %llu (%s): closed: %s", sb->id,
	    (unsigned long long)c->id, c->dst_str, reason);
	if (c->http != NULL)
		gw_http_free(c);
	if (c->resolve != NULL)
		gw_resolve_cancel(c->resolve);
	gw_bev_free(c->in);
	gw_bev_free(c->out);
	c->in = c->out = NULL;
	if (c->timer != NULL)
		event_free(c->timer);
	c->timer = NULL;
	gw_ratelim_unref(c->rl);
	c->rl = NULL;
	free(c->rule);
	c->rule = NULL;
	TAILQ_REMOVE(&sb->conns, c, entry);
	/*
	 * Callers up the stack may still look at gw_conn_closed(c): the owner's
	 * reference goes with this loop turn (never the struct before it).
	 */
	if (event_base_once(sb->w->base, -1, EV_TIMEOUT, gw_conn_free_cb, c, NULL) == -1)
		log_warnx("gateway: conn %llu: cannot defer its free: kept",
		    (unsigned long long)c->id);
}

/*
 * Closing after a last answer: wait until the guest has it (for TLS, the
 * underlying socket buffer too), then keep reading and discarding until
 * the guest closes or the deadline, so unread pipelined bytes do not turn
 * our close into a reset that destroys the answer.
 */
static void
gw_finish_check(struct gw_conn *c)
{
	struct bufferevent *u = bufferevent_get_underlying(c->in);
	struct timeval tv = { 0, 20000 };

	if (evbuffer_get_length(bufferevent_get_output(c->in)) != 0)
		return;
	if (u != NULL && !c->tls_closing) {
		/* close_notify, written by OpenSSL through the filter's BIO. */
		c->tls_closing = 1;
		(void)SSL_shutdown(bufferevent_openssl_get_ssl(c->in));
		ERR_clear_error();
	}
	if (u != NULL && evbuffer_get_length(bufferevent_get_output(u)) != 0) {
		event_del(c->timer);
		evtimer_add(c->timer, &tv);	/* poll: the filter hides the socket's drain */
		return;
	}
	shutdown(bufferevent_getfd(c->in), SHUT_WR);
	evbuffer_drain(bufferevent_get_input(c->in), evbuffer_get_length(bufferevent_get_input(c->in)));
	bufferevent_enable(c->in, EV_READ);
}

static void
gw_finish_write_cb(struct bufferevent *bev, void *arg)
{
	gw_finish_check(arg);
}

static void
gw_finish_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	evbuffer_drain(in, evbuffer_get_length(in));
}

static void
gw_finish_event_cb(struct bufferevent *bev, short what, void *arg)
{
	gw_conn_close(arg, "closed after answer");
}

static void
gw_finish_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;

	if (monotonic_ms() - c->t_io > GW_FLUSH_SECS * 1000) {
		gw_conn_close(c, "flush deadline");
		return;
	}
	gw_finish_check(c);
	if (!evtimer_pending(c->timer, NULL)) {
		struct timeval tv;

		gw_tv(&tv, GW_FLUSH_SECS);
		evtimer_add(c->timer, &tv);
	}
}

void
gw_conn_finish(struct gw_conn *c, const char *reason)
{
	struct timeval tv;

	if (gw_conn_closed(c))
		return;
	log_debug("gateway: sandbox %s conn %llu: finishing: %s", c->sb->id,
	    (unsigned long long)c->id, reason);
	c->state = GW_CONN_CLOSING;
	if (c->http != NULL)
		gw_http_free(c);
	if (c->resolve != NULL)
		gw_resolve_cancel(c->resolve);
	c->resolve = NULL;
	gw_bev_free(c->out);
	c->out = NULL;
	c->t_io = monotonic_ms();
	if (c->timer != NULL)
		event_free(c->timer);
	c->timer = evtimer_new(c->sb->w->base, gw_finish_timer_cb, c);
	gw_tv(&tv, GW_FLUSH_SECS);
	evtimer_add(c->timer, &tv);
	bufferevent_disable(c->in, EV_READ);
	bufferevent_setwatermark(c->in, EV_WRITE, 0, 0);
	bufferevent_setcb(c->in, gw_finish_read_cb, gw_finish_write_cb, gw_finish_event_cb, c);
	bufferevent_set_timeouts(c->in, NULL, NULL);
	bufferevent_enable(c->in, EV_WRITE);
	gw_finish_check(c);
}

/* Heads and bodies leave in separate writes: do not let Nagle hold the second. */
void
gw_nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The guest's destination before REDIRECT. */
static int
gw_original_dst(int fd, struct sockaddr_in *sin)
{
	socklen_t len = sizeof(*sin);

	if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, sin, &len) == 0 &&
	    sin->sin_family == AF_INET)
		return 0;
	/*
	 * No NAT entry: the guest connected to the listener address itself
	 * (10.0.0.1, denied like every island address), or a test runs
	 * without nftables. The socket's own address is the destination.
	 */
	len = sizeof(*sin);
	if (getsockname(fd, (struct sockaddr *)sin, &len) == 0 && sin->sin_family == AF_INET)
		return 0;
	return -1;
}

/* Denied range, unless the operator made an internal exception for it. */
int
gw_conn_addr_denied(struct gw_conn *c, const struct sockaddr_in *sin, const char **reason)
{
	const struct sockaddr *sa = (const struct sockaddr *)sin;

	if (!gw_addr_denied(c->sb->gw->host_addrs, sa, reason))
		return 0;
	return !gw_policy_internal_allowed(c->sb->policy, sa, ntohs(sin->sin_port));
}

void
gw_proxy_accept(struct gw_sandbox *sb, int fd)
{
	struct gw_worker *w = sb->w;
	struct gw_conn *c;
	struct timeval tv;
	char ip[INET_ADDRSTRLEN];
	int l4_possible, n = 0;

	TAILQ_FOREACH(c, &sb->conns, entry)
		n++;
	if (n >= GW_CONNS_MAX || !tbucket_take(&sb->accept_bucket, 1, monotonic_ms())) {
		close(fd);
		sb->counters.conns++;
		sb->counters.conns_denied++;
		/*
		 * A guest looping on connect must not flood the audit log, nor
		 * vanish from it: counted, one summary line a second per reason.
		 */
		gw_sandbox_deny(sb, n >= GW_CONNS_MAX ? GW_DENY_CONN_CAP : GW_DENY_ACCEPT_RATE);
		return;
	}
	c = xcalloc(1, sizeof(*c));
	ref_init(&c->ref);
	c->sb = sb;
	/* Unique in the process: the worker's index in the top bits. */
	c->id = (uint64_t)w->idx << 56 | ++w->conn_seq;
	c->t_start = c->t_io = monotonic_ms();
	c->mode = sb->policy->mode;
	c->kind = "tcp";
	TAILQ_INSERT_TAIL(&sb->conns, c, entry);
	sb->counters.conns++;
	evutil_make_socket_nonblocking(fd);
	gw_nodelay(fd);
	if ((c->in = bufferevent_socket_new(w->base, fd, BEV_OPTS)) == NULL) {
		close(fd);
		gw_conn_close(c, "bufferevent_socket_new failed");
		return;
	}
	if (gw_original_dst(fd, &c->dst) == -1) {
		gw_conn_deny(c, "no IPv4 original destination");
		return;
	}
	c->dport = ntohs(c->dst.sin_port);
	inet_ntop(AF_INET, &c->dst.sin_addr, ip, sizeof(ip));
	snprintf(c->dst_str, sizeof(c->dst_str), "%s:%d", ip, c->dport);
	if (c->mode == GW_MODE_NONE) {
		gw_conn_deny(c, "network mode none");
		return;
	}
	c->timer = evtimer_new(w->base, gw_peek_timer_cb, c);

	/* Allowlist, other ports: only L4 rules apply, whatever the bytes. */
	if (c->mode == GW_MODE_ALLOWLIST && c->dport != 80 && c->dport != 443) {
		c->kind = "l4";
		gw_decide_l4(c, "no L4 rule for this destination");
		return;
	}
	/*
	 * Wait briefly for the first bytes only where an L4 rule could let a
	 * server-speaks-first protocol through; elsewhere nothing is allowed
	 * without a ClientHello or a request, so a slow guest gets the full
	 * handshake deadline. In full mode 80 and 443 are taken to be
	 * client-first: a slow ClientHello must still be seen (credentials).
	 */
	if (c->mode == GW_MODE_FULL)
		l4_possible = c->dport != 80 && c->dport != 443;
	else
		l4_possible = gw_policy_l4_rule(sb->policy, NULL, (struct sockaddr *)&c->dst,
		    c->dport) != NULL;
	if (l4_possible) {
		tv.tv_sec = GW_PEEK_SHORT_MS / 1000;
		tv.tv_usec = (GW_PEEK_SHORT_MS % 1000) * 1000;
	} else
		gw_tv(&tv, GW_HANDSHAKE_SECS);
	evtimer_add(c->timer, &tv);
	bufferevent_setwatermark(c->in, EV_READ, 0, GW_PEEK_MAX);
	bufferevent_setcb(c->in, gw_peek_read_cb, NULL, gw_peek_event_cb, c);
	bufferevent_enable(c->in, EV_READ);
}

/* Put the guest side into the sandbox's byte-rate group (if there is a limit). */
static void
gw_conn_join_group(struct gw_conn *c)
{
	if (c->sb->bytes_group != NULL && c->in != NULL)
		bufferevent_add_to_rate_limit_group(c->in, c->sb->bytes_group);
}

/* Spliced: the allow is logged when the connection ends, with its bytes. */
static void
gw_splice_to_dst_connected(struct gw_conn *c)
{
	c->audit_on_close = 1;
	gw_conn_splice(c);
}

static void
gw_splice_dial_failed(struct gw_conn *c, const char *reason)
{
	gw_conn_deny(c, reason);
}

/* Full mode lets everything through a static rule: name it in the audit log. */
static void
gw_full_rule_text(struct gw_conn *c)
{
	const struct gw_rule *r;

	if (c->rule == NULL && c->mode == GW_MODE_FULL &&
	    (r = gw_policy_l4_rule(c->sb->policy, NULL, NULL, c->dport)) != NULL)
		c->rule = xstrdup(r->text);
}

/* Splice to the original destination (full mode, or an L4 rule). */
static void
gw_splice_to_dst(struct gw_conn *c)
{
	const char *reason;

	gw_full_rule_text(c);
	if (gw_conn_addr_denied(c, &c->dst, &reason)) {
		gw_conn_deny(c, reason);
		return;
	}
	gw_conn_join_group(c);
	evtimer_del(c->timer);
	c->state = GW_CONN_DIAL;
	c->on_connected = gw_splice_to_dst_connected;
	c->on_dial_failed = gw_splice_dial_failed;
	gw_conn_dial(c, NULL, 0);
}

/* Full mode, TLS not intercepted: dial the SNI name, splice. */
static void
gw_splice_by_name(struct gw_conn *c)
{
	gw_full_rule_text(c);
	gw_conn_join_group(c);
	evtimer_del(c->timer);
	c->state = GW_CONN_DIAL;
	c->on_connected = gw_splice_to_dst_connected;
	c->on_dial_failed = gw_splice_dial_failed;
	gw_conn_dial(c, c->sni, 0);
}

static void
gw_handshake_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;
	unsigned long e;
	char buf[160];

	if (what & BEV_EVENT_CONNECTED) {
		evtimer_del(c->timer);
		gw_http_start(c, c->sni);
		return;
	}
	if ((e = bufferevent_get_openssl_error(bev)) != 0) {
		ERR_error_string_n(e, buf, sizeof(buf));
		log_debug("gateway: sandbox %s: guest TLS handshake: %s", c->sb->id, buf);
	}
	gw_conn_close(c, "guest TLS handshake failed");
}

/* Terminate TLS toward the guest with a leaf for the SNI. */
static void
gw_intercept(struct gw_conn *c, const struct gw_rule *rule)
{
	struct gw *gw = c->sb->gw;
	struct bufferevent *raw = c->in, *tls;
	struct gw_audit_rec r = { .allow = 1 };
	char *cause = NULL;
	SSL *ssl;

	free(c->rule);
	c->rule = xstrdup(rule->text);
	if ((ssl = gw_certs_ssl(gw->certs, c->sni, &cause)) == NULL) {
		log_warnx("gateway: sandbox %s: %s", c->sb->id, cause);
		free(cause);
		gw_conn_deny(c, "no certificate for the SNI");
		return;
	}
	/*
	 * A filter over the socket bufferevent: the ClientHello is already in
	 * its input buffer (read, not peeked) and OpenSSL reads it from there.
	 */
	tls = bufferevent_openssl_filter_new(c->sb->w->base, raw, ssl, BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPTS);
	if (tls == NULL) {
		SSL_free(ssl);
		gw_conn_close(c, "bufferevent_openssl_filter_new failed");
		return;
	}
	c->in = tls;
	c->tls = 1;
	c->state = GW_CONN_HANDSHAKE;
	gw_topup_add(&c->topup_in, raw, tls);
	bufferevent_openssl_set_allow_dirty_shutdown(tls, 1);
	bufferevent_setcb(tls, NULL, NULL, gw_handshake_event_cb, c);
	bufferevent_enable(tls, EV_READ | EV_WRITE);
	gw_conn_join_group(c);
	gw_conn_audit(c, &r);
	/* The hello arrived before the filter existed: let it look now. */
	bufferevent_trigger(raw, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

static void
gw_decide_tls(struct gw_conn *c, const char *why)
{
	const struct gw_policy *p = c->sb->policy;
	const struct gw_rule *rule;

	c->kind = "tls";
	if (c->sni[0] != '\0' && c->dport == 443) {
		if (c->mode == GW_MODE_FULL) {
			if (gw_policy_needs_intercept(p, c->sni))
				gw_intercept(c, gw_policy_http_rule(p, c->sni, 443));
			else
				gw_splice_by_name(c);
			return;
		}
		if ((rule = gw_policy_http_rule(p, c->sni, 443)) != NULL) {
			gw_intercept(c, rule);
			return;
		}
		why = "SNI not allowed";
	} else if (c->mode == GW_MODE_FULL) {
		if (c->sni[0] != '\0')
			gw_splice_by_name(c);
		else
			gw_splice_to_dst(c);
		return;
	}
	gw_decide_l4(c, why);
}

static void
gw_decide_http(struct gw_conn *c)
{
	c->kind = "http";
	if (c->dport == 80) {
		gw_conn_join_group(c);
		evtimer_del(c->timer);
		gw_http_start(c, NULL);
		return;
	}
	if (c->mode == GW_MODE_FULL)
		gw_splice_to_dst(c);
	else
		gw_decide_l4(c, "HTTP to a port without an L4 rule");
}

static void
gw_decide_opaque(struct gw_conn *c, const char *why)
{
	c->kind = "l4";
	if (c->mode == GW_MODE_FULL)
		gw_splice_to_dst(c);
	else
		gw_decide_l4(c, why);
}

/*
 * The L4 rule for the original destination: a host:port rule for a name
 * this sandbox resolved through the gateway to exactly this address (a
 * guest's own /etc/hosts entry gains nothing), or a cidr:port rule.
 */
static const struct gw_rule *
gw_l4_lookup(struct gw_conn *c, const char **host)
{
	const struct gw_policy *p = c->sb->policy;
	const struct sockaddr *sa = (const struct sockaddr *)&c->dst;
	const struct gw_rule *rule;
	const char *names[16];
	size_t n, i;

	*host = NULL;
	/*
	 * On 80 and 443 a host rule means full HTTP(S) checks, never a raw
	 * splice (a hello our parser refuses must not reach a shared CDN
	 * address uninspected): only cidr rules count there.
	 */
	if (c->dport == 80 || c->dport == 443)
		return gw_policy_l4_rule(p, NULL, sa, c->dport);
	n = gw_pins_names_for(c->sb->pins, sa, names, 16);
	for (i = 0; i < n; i++)
		if ((rule = gw_policy_l4_rule(p, names[i], sa, c->dport)) != NULL) {
			*host = names[i];
			return rule;
		}
	return gw_policy_l4_rule(p, NULL, sa, c->dport);
}

static void
gw_decide_l4(struct gw_conn *c, const char *why)
{
	const struct gw_rule *rule;
	const char *host;

	if ((rule = gw_l4_lookup(c, &host)) == NULL) {
		gw_conn_deny(c, why != NULL ? why : "no rule for this destination");
		return;
	}
	c->l4 = 1;
	free(c->rule);
	c->rule = xstrdup(rule->text);
	if (host != NULL)
		snprintf(c->name, sizeof(c->name), "%s", host);
	gw_conn_set_ratelim(c, gw_ratelim_get(c->sb, rule));
	if (c->rl != NULL && !tbucket_take(&c->rl->req, 1, monotonic_ms())) {
		gw_conn_deny(c, "rule rate limit");
		return;
	}
	if (!tbucket_take(&c->sb->req_bucket, 1, monotonic_ms())) {
		gw_conn_deny(c, "sandbox rate limit");
		return;
	}
	gw_splice_to_dst(c);
}

/* What did the guest send first? Decide once there is enough to tell. */
static void
gw_classify(struct gw_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->in);
	size_t len = evbuffer_get_length(in);
	char sni[GW_SNI_NAME_MAX + 1];
	const unsigned char *buf;
	int full = len >= GW_PEEK_MAX;

	if (len == 0)
		return;
	buf = evbuffer_pullup(in, (ssize_t)(full ? GW_PEEK_MAX : len));
	bufferevent_disable(c->in, EV_READ);
	if (buf[0] == 0x16) {
		switch (gw_sni_parse(buf, len, sni, sizeof(sni))) {
		case GW_SNI_MORE:
			if (full)
				break;
			bufferevent_enable(c->in, EV_READ);
			return;
		case GW_SNI_FOUND:
			if (gw_name_normalize(sni, c->sni, sizeof(c->sni)) == -1) {
				c->sni[0] = '\0';
				gw_decide_tls(c, "invalid SNI");
			} else
				gw_decide_tls(c, NULL);
			return;
		case GW_SNI_NONE:
			gw_decide_tls(c, "no SNI");
			return;
		default:
			break;
		}
		gw_decide_opaque(c, "malformed or oversized ClientHello");
		return;
	}
	switch (gw_http_sniff((const char *)buf, len)) {
	case 1:
		gw_decide_http(c);
		return;
	case -1:
		if (!full) {
			bufferevent_enable(c->in, EV_READ);
			return;
		}
		break;
	default:
		break;
	}
	gw_decide_opaque(c, "neither TLS nor HTTP, and no L4 rule");
}

static void
gw_peek_read_cb(struct bufferevent *bev, void *arg)
{
	gw_classify(arg);
}

static void
gw_peek_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;

	if ((what & BEV_EVENT_EOF) && evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
		/* Sent a little and half-closed: judge what there is. */
		gw_decide_opaque(c, "incomplete first message");
		return;
	}
	gw_conn_close(c, "guest closed before sending");
}

static void
gw_peek_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;
	uint64_t waited = monotonic_ms() - c->t_start;
	struct timeval tv;

	if (c->state == GW_CONN_PEEK &&
	    evbuffer_get_length(bufferevent_get_input(c->in)) == 0 &&
	    waited < GW_HANDSHAKE_SECS * 1000) {
		/* Nothing yet: the client waits for the server to speak. */
		bufferevent_disable(c->in, EV_READ);
		gw_decide_opaque(c, "server-speaks-first protocol without an L4 rule");
		return;
	}
	if (waited < GW_HANDSHAKE_SECS * 1000) {
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		tv.tv_sec = (time_t)((GW_HANDSHAKE_SECS * 1000 - waited) / 1000);
		tv.tv_usec = (suseconds_t)((GW_HANDSHAKE_SECS * 1000 - waited) % 1000) * 1000;
		evtimer_add(c->timer, &tv);
		return;
	}
	gw_conn_deny(c, c->state == GW_CONN_HANDSHAKE ? "guest TLS handshake timeout" :
	    "no complete first message in time");
}

/*
 * The policy was set or swapped. Per-rule limits start over (rule indexes
 * refer to the new policy); the sandbox's byte limit follows policy->rate
 * (the lead's attach/update set req_bucket). A mode change closes every
 * connection; a spliced connection whose rule is gone is closed; HTTP
 * connections re-check on their next request anyway.
 */
void
gw_proxy_policy_changed(struct gw_sandbox *sb)
{
	const struct gw_policy *p = sb->policy;
	struct gw_conn *c, *next;
	const struct gw_rule *rule;
	const char *host;

	gw_ratelim_drop_all(sb);
	sb->nrule_limits = p->nrules;
	sb->rule_limits = xcalloc(p->nrules > 0 ? p->nrules : 1, sizeof(*sb->rule_limits));

	if (p->rate.bps > 0) {
		int fresh = sb->bytes_group == NULL;

		sb->bytes_group = gw_ratelim_group(sb->w->base, p->rate.bps, sb->bytes_group);
		if (fresh && sb->bytes_group != NULL)
			TAILQ_FOREACH(c, &sb->conns, entry)
				if (c->state != GW_CONN_PEEK)
					gw_conn_join_group(c);
	} else if (sb->bytes_group != NULL) {
		TAILQ_FOREACH(c, &sb->conns, entry)
			if (c->in != NULL)
				bufferevent_remove_from_rate_limit_group(c->in);
		bufferevent_rate_limit_group_free(sb->bytes_group);
		sb->bytes_group = NULL;
	}

	for (c = TAILQ_FIRST(&sb->conns); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (c->mode != p->mode) {
			gw_conn_close(c, "policy mode changed");
			continue;
		}
		if (c->state != GW_CONN_SPLICE && c->state != GW_CONN_DIAL)
			continue;
		if (c->l4)
			rule = gw_l4_lookup(c, &host);
		else if (c->mode == GW_MODE_ALLOWLIST && c->name[0] != '\0')
			rule = gw_policy_http_rule(p, c->name, c->dport);	/* a WebSocket */
		else
			continue;
		if (rule == NULL) {
			struct gw_audit_rec r = { .allow = 0, .reason = "rule removed by a policy update",
			    .bytes_up = c->bytes_up, .bytes_down = c->bytes_down };

			c->audit_on_close = 0;
			gw_conn_audit(c, &r);
			gw_conn_close(c, "rule removed");
		}
	}
}

void
gw_proxy_close_all(struct gw_sandbox *sb)
{
	struct gw_conn *c;

	while ((c = TAILQ_FIRST(&sb->conns)) != NULL)
		gw_conn_close(c, "sandbox detached");
}

/* After gw_proxy_close_all: the sandbox's rate-limit state. */
void
gw_proxy_sandbox_free(struct gw_sandbox *sb)
{
	gw_proxy_close_all(sb);
	gw_ratelim_drop_all(sb);
	if (sb->bytes_group != NULL)
		bufferevent_rate_limit_group_free(sb->bytes_group);
	sb->bytes_group = NULL;
}
