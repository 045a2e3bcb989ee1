/*
 * Destinations the gateway never dials, in every mode, unless the policy
 * has an operator internal exception: loopback, unspecified, RFC 1918,
 * CGNAT (100.64/10), link-local (169.254/16, incl. cloud metadata;
 * fe80::/10), ULA (fc00::/7, incl. AWS IMDS fd00:ec2::254), multicast,
 * broadcast, reserved 240/4, benchmarking 198.18/15, IETF 192.0.0/24,
 * 0/8, NAT64/6to4/Teredo/v4-mapped forms of any of those, the island
 * range 10.0.0.0/8 (other sandboxes), and the upstream netns's own
 * addresses (the host).
 */
#ifndef AIRLOCK_GW_ADDR_H
#define AIRLOCK_GW_ADDR_H

#include <sys/socket.h>

struct gw_addrset;

/* The current netns's own addresses (getifaddrs). */
struct gw_addrset *gw_addrset_local(char **cause);
void gw_addrset_free(struct gw_addrset *);
int gw_addrset_contains(const struct gw_addrset *, const struct sockaddr *);

/*
 * 1 if sa must not be dialled (reason set to a short static string such as
 * "rfc1918", "loopback", "link-local", "host"), 0 if it may be.
 * host may be NULL (then the host's addresses are not checked).
 */
int gw_addr_denied(const struct gw_addrset *host, const struct sockaddr *sa,
    const char **reason);

/* "1.2.3.4" / "2001:db8::1" into buf; returns buf. */
const char *gw_addr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
