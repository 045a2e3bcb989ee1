/*
 * E2B's network settings onto airlock's network spec {"mode","allow"}
 * (docs/api.md "network", enforced by the egress gateway). Pure: the unit
 * tests and the fuzzer call it.
 *
 * - allow_internet_access true (E2B's default) and no denyOut: mode full
 *   (the gateway still refuses private and internal ranges); allowOut is
 *   checked but adds nothing.
 * - allow_internet_access false, or denyOut holding 0.0.0.0/0 or ::/0
 *   (E2B's ALL_TRAFFIC): mode allowlist with allowOut as its rules
 *   ("api.example.com", "*.example.com": HTTP and HTTPS; "1.2.3.0/24:443",
 *   "[2001:db8::/32]:443": that port). With no network setting at all,
 *   mode none (no interface).
 * - rules {host: [{transform: {headers}}]}: "headers" [{host, set}]
 *   (e2b_rules_map); they grant no access by themselves.
 * - Refused, with field naming E2B's field: a bare address or CIDR in
 *   allowOut (airlock's address rules are per port), names in denyOut
 *   (E2B's rule too), denyOut of part of the internet with the rest open,
 *   maskRequestHost, httpsPorts, egressProxy, unknown keys.
 *
 * n: the create body's "network" (NULL when absent), with internet its
 * allow_internet_access; or (put) the PUT /sandboxes/{id}/network body,
 * whose allow_internet_access (default true) overrides internet, and
 * where an omitted field is cleared. 0 with *out (new reference), or -1
 * with field (E2B_FIELD_MAX bytes) and *cause.
 */
#ifndef AIRLOCK_E2B_NETMAP_H
#define AIRLOCK_E2B_NETMAP_H

#include <jansson.h>

#define E2B_FIELD_MAX		96
#define E2B_NET_RULES_MAX	256

int e2b_network_map(const json_t *n, int internet, int put, json_t **out, char *field,
    char **cause);

/*
 * rules (named name: "network.rules" or "rules") into *headers, airlock's
 * network.headers (new reference; NULL when there are none). 0, or -1 with
 * field and *cause. e2b_netrules.c.
 */
int e2b_rules_map(const json_t *rules, const char *name, json_t **headers, char *field,
    char **cause);

#endif
