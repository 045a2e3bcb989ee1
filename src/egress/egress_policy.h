/*
 * The policy airlockd pushes to the gateway for one sandbox (gw_ctl.h):
 * its network spec (mode, allow, rate) + the operator's internal
 * exceptions and default rates + the credentials in scope.
 */
#ifndef AIRLOCK_EGRESS_POLICY_H
#define AIRLOCK_EGRESS_POLICY_H

#include <jansson.h>

struct egress_defaults {
	const char	*internal;	/* "cidr[:port],..." or NULL */
	double		 rps;
	double		 bps;
};

/* New reference. credentials may be NULL. */
json_t *egress_policy_build(const json_t *network, const json_t *credentials,
    const struct egress_defaults *d);

/*
 * A copy of a network spec for API answers: the values of headers[].set
 * (host-side secrets the gateway injects) replaced by EGRESS_REDACTED,
 * the names kept. New reference; NULL for NULL.
 */
#define EGRESS_REDACTED	"[redacted]"
json_t *egress_network_redact(const json_t *network);

/*
 * Validate a sandbox's network spec exactly as the gateway will, with
 * "network." field names in the cause. 0 / -1.
 */
int egress_network_check(const json_t *network, char **cause);

#endif
