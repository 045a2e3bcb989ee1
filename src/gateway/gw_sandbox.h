/* Attach/update/detach of sandboxes in the gateway process (driven by gw_ctl ops). */
#ifndef AIRLOCK_GW_SANDBOX_H
#define AIRLOCK_GW_SANDBOX_H

#include <jansson.h>

#include "gateway/gw.h"

/*
 * Take over tcp_fd (listening, in the island) and dns_fd (UDP, in the
 * island) and the policy reference. Replaces an existing attach of the same
 * id on the same worker. Runs on w's thread. On failure the caller still
 * owns the fds and the policy.
 */
int gw_sandbox_attach(struct gw_worker *, const char *id, const char *project,
    struct gw_policy *, int tcp_fd, int dns_fd, char **cause);
/* Swap the policy (takes the reference); live connections re-check per request. */
void gw_sandbox_update(struct gw_sandbox *, struct gw_policy *);
/* Close everything of the sandbox and free it. */
void gw_sandbox_detach(struct gw_sandbox *);
json_t *gw_sandbox_stats(const struct gw_sandbox *);

/* Provided by the data paths (gw_dns.c, gw_proxy.c). */
void gw_dns_detach(struct gw_sandbox *);
void gw_proxy_policy_changed(struct gw_sandbox *);
void gw_proxy_sandbox_free(struct gw_sandbox *);

#endif
