/* Sandbox manager: attaching islands to the egress gateway and pushing policies. */
#include "sandbox/sbm_impl.h"
#include "egress/egress_gw.h"

/* --- egress gateway ----------------------------------------------------- */

int
sb_has_network(const struct sandbox *sb)
{
	const char *mode = json_string_value(json_object_get(sb->rec.network, "mode"));

	return mode != NULL && strcmp(mode, "none") != 0;
}

/* (Re)attach a live sandbox's island: new gateway sockets, current policy. */
static int
sb_egress_reattach(struct sandbox *sb, char **cause)
{
	if (!sb->have_island) {
		/* Adopted after a restart: the pinned island is still there. */
		sb->island.ni_name = xstrdup(sb->rec.id);
		sb->island.ni_path = net_island_path(sb->rec.id);
		sb->have_island = 1;
	}
	/* Asynchronous: a failure is logged; the next gateway restart tries again. */
	if (sbm_egress_attach(sb->m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
	    &sb->island, NULL, NULL, cause) == -1)
		return -1;
	sb->gw_attached = 1;
	return 0;
}

void
sbm_egress_restarted(void *arg)
{
	struct sbm *m = arg;
	struct sandbox *sb;
	char *cause = NULL;

	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (!sb->gw_attached)
			continue;
		if (sb_egress_reattach(sb, &cause) == -1) {
			log_warnx("sandbox %s: re-attach to the gateway: %s", sb->rec.id, cause);
			free(cause);
			cause = NULL;
		}
	}
}

/* The gateway's answer to hello: which sandboxes it already serves. */
static void
sbm_egress_reconciled(void *arg, const json_t *ids, const char *cause)
{
	struct sbm *m = arg;
	struct sandbox *sb;
	json_t *v;
	size_t i;

	if (ids == NULL) {
		/* The sweep's health check starts a gateway; its restart hook re-attaches. */
		log_warnx("gateway: reconcile: %s", cause);
		return;
	}
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		char *why = NULL;
		int attached = 0;

		if (sb->vm == NULL || !sb_has_network(sb) || sb->pool_member)
			continue;
		json_array_foreach(ids, i, v)
			if (strcmp(json_string_value(v), sb->rec.id) == 0)
				attached = 1;
		/* Still served (the gateway outlived us): refresh the policy; else attach anew. */
		if (attached && sbm_egress_update(m->egress, sb->rec.id, sb->rec.project,
		    sb->rec.network, NULL, NULL, &why) == 0)
			sb->gw_attached = 1;
		else if (sb_egress_reattach(sb, &why) == -1) {
			log_warnx("sandbox %s: gateway: %s", sb->rec.id, why);
			free(why);
		}
	}
	/* Served by the gateway but not live here: a leftover of a crash. */
	json_array_foreach(ids, i, v) {
		sb = sbm_find(m, json_string_value(v), NULL);
		if (sb == NULL || sb->vm == NULL || sb->pool_member)
			sbm_egress_detach(m->egress, json_string_value(v));
	}
}

int
sbm_egress_reconcile(struct sbm *m, char **cause)
{
	struct sandbox *sb;
	int need = 0;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->vm != NULL && sb_has_network(sb) && !sb->pool_member)
			need = 1;
	if (!need) {
		char *ctl = paths_data("run/gateway.sock");

		need = path_exists(ctl);
		free(ctl);
		if (!need)
			return 0;
	}
	/* Asynchronous: the API serves while the gateway answers (or is started). */
	sbm_egress_attached(m->egress, sbm_egress_reconciled, m);
	return 0;
}

void
sbm_secrets_changed(struct sbm *m, const char *scope, const char *scope_id)
{
	struct sandbox *sb;
	char *cause = NULL;

	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (!sb->gw_attached)
			continue;
		if (strcmp(scope, "global") != 0 &&
		    !(strcmp(scope, "project") == 0 && strcmp(sb->rec.project, scope_id) == 0) &&
		    !(strcmp(scope, "sandbox") == 0 && strcmp(sb->rec.id, scope_id) == 0))
			continue;
		if (sbm_egress_update(m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
		    NULL, NULL, &cause) == -1) {
			log_warnx("sandbox %s: push credentials to the gateway: %s", sb->rec.id,
			    cause);
			free(cause);
			cause = NULL;
		}
	}
}

struct sb_netset {
	struct sandbox	*sb;
	json_t		*network;
	void		(*done)(void *, const char *);
	void		*arg;
};

static void
sb_netset_done(void *arg, const char *cause)
{
	struct sb_netset *ns = arg;
	struct sandbox *sb = ns->sb;

	if (cause == NULL && !ref_dead(&sb->ref)) {
		json_decref(sb->rec.network);
		sb->rec.network = json_incref(ns->network);
		sb_save(sb);
	}
	if (cause != NULL && strstr(cause, EGRESS_GW_GONE) != NULL)
		cause = SB_SHUTDOWN_CAUSE;
	ns->done(ns->arg, cause != NULL ? cause : ref_dead(&sb->ref) ? "sandbox deleted" : NULL);
	json_decref(ns->network);
	sb_unref(sb);
	free(ns);
}

int
sb_set_network(struct sandbox *sb, json_t *network, void (*done)(void *, const char *),
    void *arg, char **cause)
{
	const char *now = json_string_value(json_object_get(sb->rec.network, "mode"));
	const char *want = json_string_value(json_object_get(network, "mode"));
	struct sb_netset *ns;

	/* The NIC exists or not from boot: none ↔ other needs a new sandbox. */
	if (now == NULL || want == NULL || (strcmp(now, "none") == 0) != (strcmp(want, "none") == 0)) {
		cause_set(cause, "network.mode: cannot change between none and %s on a live sandbox",
		    strcmp(want != NULL ? want : "none", "none") == 0 ? now : want);
		return -1;
	}
	ns = xcalloc(1, sizeof *ns);
	ns->sb = sb;
	sb_ref(sb);
	ns->network = json_incref(network);
	ns->done = done;
	ns->arg = arg;
	if (!sb->gw_attached) {
		sb_netset_done(ns, NULL);
		return 0;
	}
	if (sbm_egress_update(sb->m->egress, sb->rec.id, sb->rec.project, network,
	    sb_netset_done, ns, cause) == -1) {
		json_decref(ns->network);
		sb_unref(sb);
		free(ns);
		return -1;
	}
	return 0;
}

json_t *
sbm_egress_info(struct sbm *m, const char *id, char **cause)
{
	return sbm_egress_stats(m->egress, id, cause);
}

json_t *
sb_egress_counters(struct sandbox *sb)
{
	json_t *st, *one;
	char *cause = NULL;

	if (!sb->gw_attached)
		return NULL;
	if ((st = sbm_egress_stats(sb->m->egress, sb->rec.id, &cause)) == NULL) {
		log_debug("sandbox %s: gateway stats: %s", sb->rec.id, cause);
		free(cause);
		return NULL;
	}
	one = json_incref(json_object_get(json_object_get(st, "sandboxes"), sb->rec.id));
	json_decref(st);
	return one;
}

void
sbm_egress_stop(struct sbm *m)
{
	struct sandbox *sb;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->gw_attached)
			return;
	sbm_egress_shutdown(m->egress);
}
