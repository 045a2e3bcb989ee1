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
#include "egress/egress_gw.h"
#include "egress/egress_policy.h"
#include "net/net_island.h"
#include "egress/sbm_egress.h"
#include "egress/secrets.h"
#include "db/store.h"

struct sbm_egress {
	struct event_base	*base;
	const struct config	*cfg;
	struct store		*store;
	struct egress_gw	*gw;
	char			*bin, *ctl, *audit, *log, *ca_cert, *ca_key;
	void			(*restarted)(void *);
	void			*arg;
	time_t			 ca_checked;	/* last issuer check */
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
	return e;
}

void
sbm_egress_free(struct sbm_egress *e)
{
	if (e == NULL)
		return;
	egress_gw_free(e->gw);
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

/* The gateway handle, created on first use (with its issuer and dirs). */
static struct egress_gw *
sbm_egress_gw(struct sbm_egress *e, char **cause)
{
	struct egress_gw_config gc = { 0 };
	char *dir, *ca;
	int renewed, rc;
	json_t *ids = NULL;

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
	if (egress_gw_open(e->gw, &ids, cause) == -1) {
		egress_gw_free(e->gw);
		e->gw = NULL;
		return NULL;
	}
	json_decref(ids);
	if (renewed)
		log_info("gateway: new leaf issuer minted (a running gateway keeps its old one until restarted)");
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

int
sbm_egress_attach(struct sbm_egress *e, const char *id, const char *project,
    const json_t *network, const struct net_island *ni, char **cause)
{
	struct egress_gw *gw;
	json_t *policy;
	int tcp_fd, dns_fd, rc;

	if ((gw = sbm_egress_gw(e, cause)) == NULL)
		return -1;
	if ((policy = sbm_egress_policy(e, id, project, network, cause)) == NULL)
		return -1;
	if (net_island_gateway_sockets(ni, &tcp_fd, &dns_fd, cause) == -1) {
		sbm_egress_policy_free(policy);
		return -1;
	}
	/* The gateway gets its own copies over SCM_RIGHTS; ours close either way. */
	rc = egress_gw_attach(gw, id, project, policy, tcp_fd, dns_fd, cause);
	close(tcp_fd);
	close(dns_fd);
	sbm_egress_policy_free(policy);
	return rc;
}

int
sbm_egress_update(struct sbm_egress *e, const char *id, const char *project,
    const json_t *network, char **cause)
{
	struct egress_gw *gw;
	json_t *policy;
	int rc;

	if ((gw = sbm_egress_gw(e, cause)) == NULL)
		return -1;
	if ((policy = sbm_egress_policy(e, id, project, network, cause)) == NULL)
		return -1;
	rc = egress_gw_update(gw, id, policy, cause);
	sbm_egress_policy_free(policy);
	return rc;
}

void
sbm_egress_detach(struct sbm_egress *e, const char *id)
{
	char *cause = NULL;

	if (e->gw == NULL)
		return;
	if (egress_gw_detach(e->gw, id, &cause) == -1) {
		log_warnx("sandbox %s: %s", id, cause);
		free(cause);
	}
}

json_t *
sbm_egress_attached(struct sbm_egress *e, char **cause)
{
	json_t *st, *ids, *v;
	const char *k;

	if (sbm_egress_gw(e, cause) == NULL)
		return NULL;
	if ((st = egress_gw_stats(e->gw, NULL, cause)) == NULL)
		return NULL;
	ids = json_array();
	json_object_foreach(json_object_get(st, "sandboxes"), k, v)
		json_array_append_new(ids, json_string(k));
	json_decref(st);
	return ids;
}

json_t *
sbm_egress_stats(struct sbm_egress *e, const char *id, char **cause)
{
	/* Observability never starts a gateway that nothing needs. */
	if (e->gw == NULL) {
		cause_set(cause, "no gateway running");
		return NULL;
	}
	return egress_gw_stats(e->gw, id, cause);
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
	if (egress_gw_ping(e->gw, &cause) == -1) {
		log_warnx("gateway: %s", cause);
		free(cause);
		cause = NULL;
	}
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
	log_info("gateway: new leaf issuer; restarting airlock-gateway onto it");
	if (egress_gw_restart(e->gw, &cause) == -1) {
		/* The next control call starts one and re-attaches everything. */
		log_warnx("gateway: restart: %s", cause);
		free(cause);
		return;
	}
	if (e->restarted != NULL)
		e->restarted(e->arg);
}

void
sbm_egress_shutdown(struct sbm_egress *e)
{
	if (e != NULL && e->gw != NULL)
		egress_gw_shutdown(e->gw);
}
