/*
 * Sandboxes ↔ the egress gateway: attach a sandbox's island to
 * airlock-gateway with its policy, push updates, detach, and re-attach
 * everything when a new gateway instance appears. Owned by the manager.
 */
#ifndef AIRLOCK_SBM_EGRESS_H
#define AIRLOCK_SBM_EGRESS_H

#include <jansson.h>

struct config;
struct event_base;
struct net_island;
struct store;
struct sbm_egress;

/* restarted: a new gateway instance (it died, or was renewed) needs every sandbox again. */
struct sbm_egress *sbm_egress_new(struct event_base *, const struct config *, struct store *,
    void (*restarted)(void *), void *arg);
void sbm_egress_free(struct sbm_egress *);
/* Open the gateway's sockets in the island and attach with the current policy. */
int sbm_egress_attach(struct sbm_egress *, const char *id, const char *project,
    const json_t *network, const struct net_island *, char **cause);
/* Rebuild the policy (network spec, secrets in scope) and push it. */
int sbm_egress_update(struct sbm_egress *, const char *id, const char *project,
    const json_t *network, char **cause);
void sbm_egress_detach(struct sbm_egress *, const char *id);
/* Ids the gateway serves right now (opens/starts it). New reference or NULL + cause. */
json_t *sbm_egress_attached(struct sbm_egress *, char **cause);
json_t *sbm_egress_stats(struct sbm_egress *, const char *id, char **cause);
/*
 * Called from the sweep: restart a gateway that is gone (the restart hook
 * re-attaches every sandbox); at most twice a day, renew the gateway's issuer
 * when it nears expiry and restart a running gateway onto it (the restart
 * hook re-attaches every sandbox; connections in flight are cut).
 */
void sbm_egress_maintain(struct sbm_egress *);
/* Graceful daemon exit with nothing attached: let the gateway go too. */
void sbm_egress_shutdown(struct sbm_egress *);

#endif
