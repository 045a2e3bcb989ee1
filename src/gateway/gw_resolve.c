/*
 * Upstream resolution (evdns) and the per-sandbox pin table.
 *
 * A request runs one evdns lookup per address family. evdns delivers every
 * callback from the event loop (deferred), exactly once per lookup, even
 * after evdns_cancel_request (then with DNS_ERR_CANCEL, or with the real
 * answer if it was already queued). So a request is freed only when its
 * last evdns callback has come in; cancelling just forgets the sandbox and
 * the user's callback. Nothing here touches a sandbox after cancel.
 *
 * The answer is filtered when both lookups are done: addresses in denied
 * ranges (gw_addr_denied, with the host's own addresses) are dropped unless
 * an operator internal rule of the sandbox's policy covers them on some
 * port, so a name that resolves to 127.0.0.1, 10.x or 169.254.169.254
 * (rebinding) yields nothing usable. What survives is pinned.
 */
#include <sys/socket.h>

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/gw_resolve.h"

struct gw_resolve_req {
	struct evdns_base	*dns;
	struct gw_sandbox	*sb;		/* NULL once cancelled */
	gw_resolve_cb		 cb;
	void			*arg;
	char			 name[256];
	struct evdns_request	*h4;		/* NULL once its callback ran, or cancelled */
	struct evdns_request	*h6;
	int			 pending;	/* evdns callbacks still to come */
	int			 err4;
	int			 err6;
	uint32_t		 ttl;
	int			 have_ttl;
	struct sockaddr_storage	 raw[2 * GW_RESOLVE_MAX_ADDRS];
	size_t			 nraw;
};

static void	gw_resolve_finish(struct gw_resolve_req *);

struct evdns_base *
gw_resolver_new(struct event_base *base, const char *resolver, char **cause)
{
	struct evdns_base	*dns;
	int			 r;

	/* No EVDNS_BASE_INITIALIZE_NAMESERVERS: search domains must never apply. */
	if ((dns = evdns_base_new(base, 0)) == NULL) {
		cause_set(cause, "evdns_base_new failed");
		return NULL;
	}
	if (resolver != NULL) {
		if (evdns_base_nameserver_ip_add(dns, resolver) != 0) {
			cause_set(cause, "bad resolver address \"%s\"", resolver);
			goto bad;
		}
	} else {
		r = evdns_base_resolv_conf_parse(dns,
		    DNS_OPTION_NAMESERVERS | DNS_OPTION_MISC, "/etc/resolv.conf");
		if (r != 0 && r != 6) {		/* 6: no nameserver line, checked below */
			cause_set(cause, "/etc/resolv.conf: evdns error %d", r);
			goto bad;
		}
	}
	if (evdns_base_count_nameservers(dns) == 0) {
		cause_set(cause, "no nameserver configured");
		goto bad;
	}
	/*
	 * A slow upstream holds a guest's query, and the guest retries on its
	 * own: fail within ~4 s rather than evdns's 5 s x 3 attempts.
	 */
	evdns_base_set_option(dns, "timeout", "2");
	evdns_base_set_option(dns, "attempts", "2");
	evdns_base_set_option(dns, "max-inflight", "256");
	evdns_base_set_option(dns, "randomize-case", "1");
	return dns;
bad:
	evdns_base_free(dns, 0);
	return NULL;
}

/* One family's evdns answer (or error, or cancel). */
static void
gw_resolve_done(struct gw_resolve_req *req, int family, int result, int count, int ttl,
    const void *addresses)
{
	struct sockaddr_in	*sin;
	struct sockaddr_in6	*sin6;
	int			 i;

	if (family == AF_INET) {
		req->h4 = NULL;
		req->err4 = result;
	} else {
		req->h6 = NULL;
		req->err6 = result;
	}
	req->pending--;
	if (result == DNS_ERR_NONE && req->sb != NULL) {
		if (ttl >= 0 && (!req->have_ttl || (uint32_t)ttl < req->ttl)) {
			req->ttl = (uint32_t)ttl;
			req->have_ttl = 1;
		}
		for (i = 0; i < count && i < GW_RESOLVE_MAX_ADDRS; i++) {
			memset(&req->raw[req->nraw], 0, sizeof req->raw[0]);
			if (family == AF_INET) {
				sin = (struct sockaddr_in *)&req->raw[req->nraw];
				sin->sin_family = AF_INET;
				memcpy(&sin->sin_addr, (const uint8_t *)addresses + 4 * i, 4);
			} else {
				sin6 = (struct sockaddr_in6 *)&req->raw[req->nraw];
				sin6->sin6_family = AF_INET6;
				memcpy(&sin6->sin6_addr, (const uint8_t *)addresses + 16 * i, 16);
			}
			req->nraw++;
		}
	}
	if (req->pending > 0)
		return;
	if (req->sb != NULL)
		gw_resolve_finish(req);
	free(req);
}

static void
gw_resolve_cb4(int result, char type, int count, int ttl, void *addresses, void *arg)
{
	if (type != DNS_IPv4_A)
		count = 0;
	gw_resolve_done(arg, AF_INET, result, count, ttl, addresses);
}

static void
gw_resolve_cb6(int result, char type, int count, int ttl, void *addresses, void *arg)
{
	if (type != DNS_IPv6_AAAA)
		count = 0;
	gw_resolve_done(arg, AF_INET6, result, count, ttl, addresses);
}

/* An operator internal rule of the policy covers sa on some port. */
static int
gw_resolve_internal(const struct gw_policy *p, const struct sockaddr *sa)
{
	size_t i;

	for (i = 0; i < p->ninternal; i++)
		if (gw_cidr_contains(&p->internal[i], sa))
			return 1;
	return 0;
}

/* evdns errors of the two lookups as one: any answer wins, then "no such name". */
static int
gw_resolve_err(const struct gw_resolve_req *req, int want6)
{
	if (req->err4 == DNS_ERR_NONE || (want6 && req->err6 == DNS_ERR_NONE))
		return DNS_ERR_NONE;
	if (req->err4 == DNS_ERR_NODATA || (want6 && req->err6 == DNS_ERR_NODATA))
		return DNS_ERR_NONE;
	if (req->err4 == DNS_ERR_NOTEXIST || (want6 && req->err6 == DNS_ERR_NOTEXIST))
		return DNS_ERR_NOTEXIST;
	return req->err4;
}

/* Filter, pin and report; the request is still live (not cancelled). */
static void
gw_resolve_finish(struct gw_resolve_req *req)
{
	struct gw_sandbox	*sb = req->sb;
	struct sockaddr_storage	 ok[2 * GW_RESOLVE_MAX_ADDRS];
	struct gw_addrs		 res;
	const struct sockaddr	*sa;
	const char		*reason;
	size_t			 i;
	int			 err;

	memset(&res, 0, sizeof res);
	res.addrs = ok;
	for (i = 0; i < req->nraw; i++) {
		sa = (const struct sockaddr *)&req->raw[i];
		if (gw_addr_denied(sb->gw->host_addrs, sa, &reason) &&
		    !gw_resolve_internal(sb->policy, sa)) {
			if (res.dropped++ == 0)
				res.drop_reason = reason;
			continue;
		}
		ok[res.n++] = req->raw[i];
	}
	res.ttl = req->have_ttl ? req->ttl : 0;
	if (res.ttl > GW_DNS_TTL_MAX)
		res.ttl = GW_DNS_TTL_MAX;
	err = gw_resolve_err(req, req->err6 != -1);
	if (err == DNS_ERR_NONE && res.n > 0 && sb->pins != NULL)
		gw_pins_add(sb->pins, req->name, &res);
	if (req->cb != NULL)
		req->cb(err, &res, req->arg);
}

struct gw_resolve_req *
gw_resolve(struct gw_sandbox *sb, const char *name, int want6, gw_resolve_cb cb, void *arg,
    char **cause)
{
	struct gw_resolve_req *req;

	if (strlen(name) >= sizeof req->name) {
		cause_set(cause, "name too long");
		return NULL;
	}
	req = xcalloc(1, sizeof *req);
	req->dns = sb->w->dns;
	req->sb = sb;
	req->cb = cb;
	req->arg = arg;
	req->err6 = -1;			/* not asked */
	memcpy(req->name, name, strlen(name) + 1);

	/* NO_SEARCH: a guest's name is never completed with the host's domains. */
	req->h4 = evdns_base_resolve_ipv4(req->dns, name, DNS_QUERY_NO_SEARCH,
	    gw_resolve_cb4, req);
	if (req->h4 == NULL) {
		cause_set(cause, "evdns could not start a lookup for %s", name);
		free(req);
		return NULL;
	}
	req->pending = 1;
	req->err4 = DNS_ERR_UNKNOWN;
	if (want6) {
		req->h6 = evdns_base_resolve_ipv6(req->dns, name, DNS_QUERY_NO_SEARCH,
		    gw_resolve_cb6, req);
		if (req->h6 != NULL)
			req->pending++;
		req->err6 = DNS_ERR_UNKNOWN;
	}
	return req;
}

void
gw_resolve_cancel(struct gw_resolve_req *req)
{
	req->sb = NULL;
	req->cb = NULL;
	/*
	 * Each evdns callback still comes, once; the last one frees req. The
	 * handles are forgotten here so a second cancel does nothing.
	 */
	if (req->h4 != NULL)
		evdns_cancel_request(req->dns, req->h4);
	if (req->h6 != NULL)
		evdns_cancel_request(req->dns, req->h6);
	req->h4 = req->h6 = NULL;
}
