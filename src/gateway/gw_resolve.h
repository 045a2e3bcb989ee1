/*
 * Upstream name resolution for the gateway and the per-sandbox pin table.
 *
 * Every name the gateway resolves for a sandbox (a guest DNS query it
 * answered, or a name it dials) is pinned with its addresses until the TTL
 * runs out, so an L4 rule for host:port can require that the guest's
 * original destination is an address the gateway itself resolved for that
 * host (a guest that edits /etc/hosts gains nothing). Addresses in denied
 * ranges (gw_addr.h) are dropped from every answer before anything sees them
 * (rebinding).
 */
#ifndef AIRLOCK_GW_RESOLVE_H
#define AIRLOCK_GW_RESOLVE_H

#include <sys/socket.h>

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct evdns_base;
struct gw;
struct gw_sandbox;
struct gw_resolve_req;

#define GW_RESOLVE_MAX_ADDRS	16	/* kept per address family and answer */
#define GW_DNS_TTL_MAX		300	/* TTL handed to guests, seconds */
#define GW_PIN_GRACE_S		60	/* pins outlive the TTL the guest was given */
#define GW_PINS_MAX		1024	/* names pinned per sandbox; oldest evicted */

struct gw_addrs {
	struct sockaddr_storage	*addrs;	/* port 0 */
	size_t			 n;
	uint32_t		 ttl;	/* seconds, the smallest of the answer, capped at GW_DNS_TTL_MAX */
	int			 dropped;	/* addresses removed as denied */
	const char		*drop_reason;	/* gw_addr_denied's reason for the first one, static */
};

/* err: 0 ok (n may be 0: nothing usable), else a DNS_ERR_* from evdns. */
typedef void (*gw_resolve_cb)(int err, const struct gw_addrs *, void *arg);

/*
 * Resolve name (normalized) for sb through the upstream resolver: A, and
 * AAAA when want6. Result is filtered (denied ranges, policy internal
 * exceptions kept) and pinned for sb. Callback runs later, never inside the
 * call, exactly once unless cancelled; the request is freed when it returns
 * and addrs is only valid during it. Returns NULL only on immediate failure
 * (cause set). The caller must cancel pending requests before sb goes away.
 */
struct gw_resolve_req *gw_resolve(struct gw_sandbox *sb, const char *name, int want6,
    gw_resolve_cb cb, void *arg, char **cause);
/* The callback will not run. Only before the callback has run. */
void gw_resolve_cancel(struct gw_resolve_req *);

/*
 * The gateway's upstream resolver: resolver is "IP" or "IP:port" ("[v6]:port"),
 * or NULL for the nameservers of /etc/resolv.conf (nothing else from it: no
 * search domains, no hosts file). NULL with a cause if there is no usable
 * nameserver.
 */
struct evdns_base *gw_resolver_new(struct event_base *, const char *resolver, char **cause);

struct gw_pins *gw_pins_new(void);
void gw_pins_free(struct gw_pins *);
void gw_pins_add(struct gw_pins *, const char *name, const struct gw_addrs *);
/* Is sa an unexpired address pinned for name? */
int gw_pins_has(struct gw_pins *, const char *name, const struct sockaddr *sa);
/*
 * The unexpired names sa is pinned for (a shared CDN address can serve
 * several): up to max pointers into the table, valid until the next
 * gw_pins_add/free. Returns how many.
 */
size_t gw_pins_names_for(struct gw_pins *, const struct sockaddr *sa, const char **names,
    size_t max);

#endif
