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

struct gw;
struct gw_sandbox;
struct gw_resolve_req;

struct gw_addrs {
	struct sockaddr_storage	*addrs;	/* port 0 */
	size_t			 n;
	uint32_t		 ttl;	/* seconds, the smallest of the answer */
	int			 dropped;	/* addresses removed as denied */
};

/* err: 0 ok (n may be 0: nothing usable), else a DNS_ERR_* from evdns. */
typedef void (*gw_resolve_cb)(int err, const struct gw_addrs *, void *arg);

/*
 * Resolve name (normalized) for sb through the upstream resolver: A, and
 * AAAA when want6. Result is filtered (denied ranges, policy internal
 * exceptions kept) and pinned for sb. Callback runs later, never inside the
 * call. Returns NULL only on immediate failure (cause set).
 */
struct gw_resolve_req *gw_resolve(struct gw_sandbox *sb, const char *name, int want6,
    gw_resolve_cb cb, void *arg, char **cause);
/* The callback will not run. */
void gw_resolve_cancel(struct gw_resolve_req *);

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
