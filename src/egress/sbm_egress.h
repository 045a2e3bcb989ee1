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

/* The end of an asynchronous egress operation: cause NULL when done. */
typedef void (*sbm_egress_done_fn)(void *arg, const char *cause);

/* restarted: a new gateway instance (it died, or was renewed) needs every sandbox again. */
struct sbm_egress *sbm_egress_new(struct event_base *, const struct config *, struct store *,
    void (*restarted)(void *), void *arg);
/* Pending calls are answered with EGRESS_GW_GONE (egress_gw.h) from inside. */
void sbm_egress_free(struct sbm_egress *);
/*
 * Open the gateway's sockets in the island (now: the guest's first packet
 * waits in them, nothing passes them) and attach with the current policy,
 * asynchronously: done(arg, NULL) once the gateway serves it, or with the
 * cause. -1 with cause when nothing was sent (done is not called). done
 * NULL: a failure is logged with the id.
 */
int sbm_egress_attach(struct sbm_egress *, const char *id, const char *project,
    const json_t *network, const struct net_island *, sbm_egress_done_fn, void *arg,
    char **cause);
/* Rebuild the policy (network spec, secrets in scope) and push it; as attach. */
int sbm_egress_update(struct sbm_egress *, const char *id, const char *project,
    const json_t *network, sbm_egress_done_fn, void *arg, char **cause);
/* Fire and forget (a failure is logged). */
void sbm_egress_detach(struct sbm_egress *, const char *id);
/*
 * The ids the gateway serves right now (opens/starts it): ids is borrowed
 * for the callback, NULL with cause when there is no answer.
 */
void sbm_egress_attached(struct sbm_egress *,
    void (*done)(void *arg, const json_t *ids, const char *cause), void *arg);
/*
 * The gateway's last stats (new reference; refreshed in the background
 * every SBM_EGRESS_STATS_MS while sandboxes are attached, and when read if
 * over a second old: the answer comes for the next reader), or NULL
 * with cause. Never waits on the gateway.
 */
#define SBM_EGRESS_STATS_MS	5000
/* How often each attached island's drop counters are read and audited. */
#define SBM_EGRESS_DROPS_MS	1000	/* per second, as the gateway's own deny_summary; ~1.3 ms a read per island, off the loop */
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
