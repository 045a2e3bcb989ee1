/* The manager's link to airlock-gateway (see sbm_egress.h, egress/egress_gw.h). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "egress/egress_ca.h"
#include "egress/egress_drops.h"
#include "egress/egress_gw.h"
#include "egress/egress_policy.h"
#include "net/net_drops.h"
#include "net/net_island.h"
#include "egress/sbm_egress.h"
#include "egress/secrets.h"
#include "db/store.h"

#include <event2/event.h>

struct sbm_egress {
	struct event_base	*base;
	const struct config	*cfg;
	struct store		*store;
	struct egress_gw	*gw;
	char			*bin, *ctl, *audit, *log, *ca_cert, *ca_key;
	void			(*restarted)(void *);
	void			*arg;
	time_t			 ca_checked;	/* last issuer check */
	json_t			*attached;	/* id → true: what we attached (drops, stats) */
	json_t			*stats;		/* the gateway's last stats answer */
	uint64_t		 stats_ms;	/* when it was asked for */
	int			 stats_busy;
	struct event		*stats_tick;
	struct egress_drops	*drops;		/* island drop counters, on their thread */
	struct event		*drops_tick;
};

/* One asynchronous operation's caller and the id it is about (for logs). */
struct sbm_egress_op {
	struct sbm_egress	*e;
	char			*id;
	const char		*what;
	sbm_egress_done_fn	 done;
	void			*arg;
};

#define SBM_EGRESS_CA_CHECK_S	(12 * 3600)

/* airlock-gateway beside airlockd (installed), or in the build tree's src/gateway. */
static char *
sbm_egress_find_bin(const struct config *cfg)
{
	char exe[PATH_MAX], *dir, *p;
	ssize_t n;

	if (cfg->gateway_bin != NULL)
		return xstrdup(cfg->gateway_bin);
	if ((n = readlink("/proc/self/exe", exe, sizeof exe - 1)) <= 0)
		return xstrdup("airlock-gateway");
	exe[n] = '\0';
	dir = dirname(exe);
	xasprintf(&p, "%s/airlock-gateway", dir);
	if (access(p, X_OK) == 0)
		return p;
	free(p);
	xasprintf(&p, "%s/../gateway/airlock-gateway", dir);
	return p;
}

static void sbm_egress_stats_tick(evutil_socket_t, short, void *);
static void sbm_egress_drops_tick(evutil_socket_t, short, void *);

struct sbm_egress *
sbm_egress_new(struct event_base *base, const struct config *cfg, struct store *st,
    void (*restarted)(void *), void *arg)
{
	struct sbm_egress *e = xcalloc(1, sizeof *e);

	e->base = base;
	e->cfg = cfg;
	e->store = st;
	e->restarted = restarted;
	e->arg = arg;
	e->bin = sbm_egress_find_bin(cfg);
	e->ctl = paths_data("run/gateway.sock");
	e->audit = paths_data("audit");
	e->log = paths_data("logs/gateway.log");
	e->ca_cert = paths_data("ca/gateway.crt");
	e->ca_key = paths_data("ca/gateway.key");
	e->attached = json_object();
	e->stats_tick = event_new(base, -1, EV_PERSIST, sbm_egress_stats_tick, e);
	e->drops_tick = event_new(base, -1, EV_PERSIST, sbm_egress_drops_tick, e);
	return e;
}

void
sbm_egress_free(struct sbm_egress *e)
{
	if (e == NULL)
		return;
	egress_drops_free(e->drops);
	egress_gw_free(e->gw);
	event_free(e->stats_tick);
	event_free(e->drops_tick);
	json_decref(e->attached);
	json_decref(e->stats);
	free(e->bin);
	free(e->ctl);
	free(e->audit);
	free(e->log);
	free(e->ca_cert);
	free(e->ca_key);
	free(e);
}

static void
sbm_egress_restart_cb(void *arg)
{
	struct sbm_egress *e = arg;

	log_warnx("gateway: a new airlock-gateway instance; re-attaching sandboxes");
	if (e->restarted != NULL)
		e->restarted(e->arg);
}

/*
 * One island's drops since its previous read, to the gateway, which writes
 * them as deny_summary lines (its audit writer is the only one).
 */
static void
sbm_egress_drops_cb(void *arg, const char *id, const struct net_drops *d, uint64_t window_ms)
{
	struct sbm_egress *e = arg;
	json_t *list = json_array();

	for (int k = 0; k < NET_DROP_N; k++)
		if (d->packets[k] > 0)
			json_array_append_new(list, json_pack("{s:s,s:s,s:I}", "kind",
			    net_drop_what[k].kind, "reason", net_drop_what[k].reason, "count",
			    (json_int_t)d->packets[k]));
	egress_gw_call(e->gw, json_pack("{s:s,s:s,s:I,s:o}", "op", "drops", "sandbox", id,
	    "window_ms", (json_int_t)window_ms, "drops", list), NULL, NULL, 0, NULL, NULL);
}

/* Every SBM_EGRESS_DROPS_MS: a round of reads, unless the previous one still runs. */
static void
sbm_egress_drops_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sbm_egress *e = arg;
	const char *id;
	json_t *v;

	if (e->drops == NULL || egress_drops_busy(e->drops))
		return;
	json_object_foreach(e->attached, id, v)
		egress_drops_read(e->drops, id, 0);
}

/* The gateway handle, created on first use (with its issuer and dirs). */
static struct egress_gw *
sbm_egress_gw(struct sbm_egress *e, char **cause)
{
	struct egress_gw_config gc = { 0 };
	char *dir, *ca;
	int renewed, rc;

	if (e->gw != NULL)
		return e->gw;
	ca = paths_data("ca");
	rc = egress_ca_ensure(ca, &renewed, cause);
	free(ca);
	if (rc == -1)
		return NULL;
	dir = paths_data("run");
	rc = mkdir_p(dir, 0700, cause);
	free(dir);
	dir = paths_data("logs");
	if (rc == 0)
		rc = mkdir_p(dir, 0755, cause);
	free(dir);
	if (rc == 0)
		rc = mkdir_p(e->audit, 0750, cause);
	if (rc == -1)
		return NULL;
	gc.bin = e->bin;
	gc.ctl_path = e->ctl;
	gc.audit_dir = e->audit;
	gc.ca_cert = e->ca_cert;
	gc.ca_key = e->ca_key;
	gc.upstream_ca = e->cfg->gateway_upstream_ca;
	gc.resolver = e->cfg->gateway_resolver;
	gc.netns = e->cfg->gateway_netns;
	gc.log_path = e->log;
	gc.uid = EGRESS_GW_UID;
	gc.gid = EGRESS_GW_UID;
	gc.log_json = e->cfg->log_json;
	gc.threads = e->cfg->gateway_threads;
	e->ca_checked = time(NULL);
	e->gw = egress_gw_new(&gc, e->base, sbm_egress_restart_cb, e);
	if (renewed)
		log_info("gateway: new leaf issuer minted (a running gateway keeps its old one until restarted)");
	/* Connected (or started) by its first call, in the background. */
	{
		struct timeval tv = { SBM_EGRESS_STATS_MS / 1000, (SBM_EGRESS_STATS_MS % 1000) * 1000 };
		struct timeval dv = { SBM_EGRESS_DROPS_MS / 1000, (SBM_EGRESS_DROPS_MS % 1000) * 1000 };

		event_add(e->stats_tick, &tv);
		e->drops = egress_drops_new(e->base, sbm_egress_drops_cb, e);
		event_add(e->drops_tick, &dv);
	}
	return e->gw;
}

static json_t *
sbm_egress_policy(struct sbm_egress *e, const char *id, const char *project,
    const json_t *network, char **cause)
{
	struct egress_defaults d = {
		.internal = e->cfg->gateway_internal,
		.rps = e->cfg->gateway_rate_rps,
		.bps = e->cfg->gateway_rate_bps,
	};
	json_t *creds = NULL, *p;

	if (secrets_resolve(e->store, project, id, &creds, cause) == -1)
		return NULL;
	p = egress_policy_build(network, creds, &d);
	secrets_credentials_free(creds);
	return p;
}

/* Policies carry secret values: wipe them, not just free them. */
static void
sbm_egress_policy_free(json_t *p)
{
	json_t *creds = json_object_get(p, "credentials");

	if (creds != NULL) {
		json_incref(creds);
		json_object_del(p, "credentials");
		secrets_credentials_free(creds);
	}
	json_decref(p);
}

static struct sbm_egress_op *
sbm_egress_op_new(struct sbm_egress *e, const char *id, const char *what, sbm_egress_done_fn done,
    void *arg)
{
	struct sbm_egress_op *op = xcalloc(1, sizeof *op);

	op->e = e;
	op->id = xstrdup(id);
	op->what = what;
	op->done = done;
	op->arg = arg;
	return op;
}

static void
sbm_egress_op_done(const json_t *reply, const char *cause, void *arg)
{
	struct sbm_egress_op *op = arg;
	char *why = NULL;

	/* Served: its counters are read from now on (an update is how a restart adopts one). */
	if (strcmp(op->what, "detach") == 0)
		json_object_del(op->e->attached, op->id);	/* after any reply queued before it */
	else if (reply != NULL)
		json_object_set_new(op->e->attached, op->id, json_true());
	if (reply == NULL)
		xasprintf(&why, "gateway %s %s: %s", op->what, op->id, cause);
	if (op->done != NULL)
		op->done(op->arg, why);
	else if (why != NULL && strcmp(cause, EGRESS_GW_GONE) != 0)
		log_warnx("sandbox %s: %s", op->id, why);
	free(why);
	free(op->id);
	free(op);
}

/* A control message that carries a policy: its secret values are wiped. */
static void
sbm_egress_msg_free(json_t *msg)
{
	json_t *p = json_object_get(msg, "policy");

	if (p != NULL) {
		json_incref(p);
		json_object_del(msg, "policy");
		sbm_egress_policy_free(p);
	}
	json_decref(msg);
}

int
sbm_egress_attach(struct sbm_egress *e, const char *id, const char *project,
    const json_t *network, const struct net_island *ni, sbm_egress_done_fn done, void *arg,
    char **cause)
{
	struct egress_gw *gw;
	json_t *policy;
	int tcp_fd, dns_fd;

	if ((gw = sbm_egress_gw(e, cause)) == NULL)
		return -1;
	if ((policy = sbm_egress_policy(e, id, project, network, cause)) == NULL)
		return -1;
	if (net_island_gateway_sockets(ni, &tcp_fd, &dns_fd, cause) == -1) {
		sbm_egress_policy_free(policy);
		return -1;
	}
	/* The request holds its own copies until the gateway has them; ours close now. */
	egress_gw_attach(gw, id, project, policy, sbm_egress_msg_free, tcp_fd, dns_fd,
	    sbm_egress_op_done, sbm_egress_op_new(e, id, "attach", done, arg));
	close(tcp_fd);
	close(dns_fd);
	return 0;
}

int
sbm_egress_update(struct sbm_egress *e, const char *id, const char *project,
    const json_t *network, sbm_egress_done_fn done, void *arg, char **cause)
{
	struct egress_gw *gw;
	json_t *policy;

	if ((gw = sbm_egress_gw(e, cause)) == NULL)
		return -1;
	if ((policy = sbm_egress_policy(e, id, project, network, cause)) == NULL)
		return -1;
	egress_gw_update(gw, id, policy, sbm_egress_msg_free, sbm_egress_op_done,
	    sbm_egress_op_new(e, id, "update", done, arg));
	return 0;
}

void
sbm_egress_detach(struct sbm_egress *e, const char *id)
{
	/* The island's last counts: its namespace is held open until they are read. */
	if (e->drops != NULL && json_object_get(e->attached, id) != NULL)
		egress_drops_read(e->drops, id, 1);
	json_object_del(e->attached, id);
	if (e->gw == NULL)
		return;
	egress_gw_detach(e->gw, id, sbm_egress_op_done, sbm_egress_op_new(e, id, "detach", NULL,
	    NULL));
}

struct sbm_egress_ids {
	void	(*done)(void *, const json_t *, const char *);
	void	*arg;
};

static void
sbm_egress_hello_done(const json_t *reply, const char *cause, void *arg)
{
	struct sbm_egress_ids *q = arg;

	q->done(q->arg, reply != NULL ? json_object_get(reply, "sandboxes") : NULL, cause);
	free(q);
}

void
sbm_egress_attached(struct sbm_egress *e, void (*done)(void *, const json_t *, const char *),
    void *arg)
{
	struct sbm_egress_ids *q;
	char *cause = NULL;

	if (sbm_egress_gw(e, &cause) == NULL) {
		done(arg, NULL, cause);
		free(cause);
		return;
	}
	q = xcalloc(1, sizeof *q);
	q->done = done;
	q->arg = arg;
	egress_gw_hello(e->gw, sbm_egress_hello_done, q);
}

static void
sbm_egress_stats_done(const json_t *reply, const char *cause, void *arg)
{
	struct sbm_egress *e = arg;

	e->stats_busy = 0;
	if (reply == NULL) {
		if (strcmp(cause, EGRESS_GW_GONE) != 0)
			log_debug("gateway: stats: %s", cause);
		return;
	}
	json_decref(e->stats);
	e->stats = json_deep_copy(reply);
}

static void
sbm_egress_stats_refresh(struct sbm_egress *e)
{
	if (e->gw == NULL || e->stats_busy || !egress_gw_up(e->gw))
		return;
	e->stats_busy = 1;
	e->stats_ms = monotonic_ms();
	egress_gw_stats(e->gw, NULL, sbm_egress_stats_done, e);
}

/* While anything is attached, the counters are kept fresh in the background. */
static void
sbm_egress_stats_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sbm_egress *e = arg;

	if (json_object_size(e->attached) > 0)
		sbm_egress_stats_refresh(e);
}

json_t *
sbm_egress_stats(struct sbm_egress *e, const char *id, char **cause)
{
	json_t *out, *one;

	/* Observability never starts a gateway that nothing needs. */
	if (e->gw == NULL) {
		cause_set(cause, "no gateway running");
		return NULL;
	}
	if (monotonic_ms() - e->stats_ms >= 1000)	/* asked for: at most one refresh a second */
		sbm_egress_stats_refresh(e);
	if (e->stats == NULL) {
		cause_set(cause, "no answer from the gateway yet");
		return NULL;
	}
	if (id == NULL)
		return json_incref(e->stats);
	out = json_deep_copy(e->stats);
	json_object_set_new(out, "sandboxes", json_object());
	if ((one = json_object_get(json_object_get(e->stats, "sandboxes"), id)) != NULL)
		json_object_set(json_object_get(out, "sandboxes"), id, one);
	return out;
}

/*
 * The sweep's look at what the gateway serves: an id it serves that is not
 * attached here is one whose attach airlockd gave up on (its deadline
 * passed while the gateway was stopped or starting) and that the gateway
 * took later; nothing would ever detach it, so detach it now. Replies come
 * in order, so an attach sent before this hello has been counted already.
 */
static void
sbm_egress_swept(const json_t *reply, const char *cause, void *arg)
{
	struct sbm_egress *e = arg;
	json_t *v;
	size_t i;

	if (reply == NULL)
		return;		/* the ping's own hello decides whether the gateway is hung */
	json_array_foreach(json_object_get(reply, "sandboxes"), i, v) {
		const char *id = json_string_value(v);
		if (id == NULL || json_object_get(e->attached, id) != NULL)
			continue;
		log_warnx("gateway: serves %s, which is not attached here (an attach given up "
		    "on, taken late): detaching", id);
		sbm_egress_detach(e, id);
	}
}

void
sbm_egress_maintain(struct sbm_egress *e)
{
	char *ca, *cause = NULL;
	int renewed, rc;

	if (e->gw == NULL)
		return;
	/*
	 * Once per sweep: a gateway that died unnoticed or could not be
	 * restarted then, or one that hangs (answers no hello), is replaced.
	 */
	egress_gw_ping(e->gw);
	if (egress_gw_up(e->gw))
		egress_gw_hello(e->gw, sbm_egress_swept, e);
	if (time(NULL) - e->ca_checked < SBM_EGRESS_CA_CHECK_S)
		return;
	e->ca_checked = time(NULL);
	ca = paths_data("ca");
	rc = egress_ca_ensure(ca, &renewed, &cause);
	free(ca);
	if (rc == -1) {
		log_warnx("gateway: issuer renewal: %s", cause);
		free(cause);
		return;
	}
	if (!renewed)
		return;
	/* The new instance gets the restart hook: every sandbox is re-attached. */
	log_info("gateway: new leaf issuer; restarting airlock-gateway onto it");
	egress_gw_restart(e->gw);
}

void
sbm_egress_shutdown(struct sbm_egress *e)
{
	if (e != NULL && e->gw != NULL)
		egress_gw_shutdown(e->gw);
}
