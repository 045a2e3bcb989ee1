/*
 * A sandbox's egress policy as the gateway enforces it: mode, allow rules,
 * operator internal exceptions, credentials and rate limits. Parsed from the
 * JSON airlockd pushes (docs/api.md "network"); immutable once parsed and
 * refcounted, so a live update swaps the pointer and connections holding the
 * old one finish their current request under it.
 *
 * Host patterns: "api.example.com" (exact) or "*.example.com" (any depth
 * below example.com, not example.com itself). Names are compared in lower
 * case without a trailing dot. A rule without a port covers HTTP (80) and
 * HTTPS (443) with full request checks; a rule with a port other than
 * 80/443 is L4 (spliced after the dial-by-name/pin check, no inspection).
 */
#ifndef AIRLOCK_GW_POLICY_H
#define AIRLOCK_GW_POLICY_H

#include <sys/socket.h>

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum gw_mode {
	GW_MODE_NONE,
	GW_MODE_ALLOWLIST,
	GW_MODE_FULL,
};

struct gw_cidr {
	int		 family;	/* AF_INET or AF_INET6 */
	uint8_t		 addr[16];
	int		 prefix;
};

struct gw_rate {
	double		 rps;		/* requests per second, 0 = unlimited */
	double		 bps;		/* bytes per second (both directions), 0 = unlimited */
};

struct gw_rule {
	char		*text;		/* as given, for the audit log ("rule") */
	char		*host;		/* pattern, or NULL for a CIDR rule */
	int		 has_cidr;
	struct gw_cidr	 cidr;
	int		 port;		/* 0 = HTTP/HTTPS (80 and 443) */
	char		**methods;	/* upper case; NULL = any */
	size_t		 nmethods;
	char		**paths;	/* exact "/path", or a prefix ending in "/" + star; NULL = any */
	size_t		 npaths;
	struct gw_rate	 rate;		/* per rule, 0 = none */
};

struct gw_credential {
	char		*name;		/* placeholder is "airlock:" name */
	char		*value;		/* never logged */
	char		**hosts;	/* host patterns the value may go to */
	size_t		 nhosts;
	char		*header;	/* e.g. "Authorization" */
	char		*format;	/* e.g. "Bearer {value}" */
};

/*
 * Headers the gateway sets on every HTTP(S) request to host (E2B's
 * rules[host][].transform.headers): a guest-sent header of the same name
 * is replaced. The values are host-side secrets: never logged.
 */
struct gw_hdrset {
	char		*host;		/* pattern, as in rules */
	char		**names;
	char		**values;	/* never logged */
	size_t		 n;
};

struct gw_policy {
	int			 refs;
	enum gw_mode		 mode;
	struct gw_rule		*rules;
	size_t			 nrules;
	struct gw_cidr		*internal;	/* operator exceptions to the denied ranges */
	int			*internal_ports;/* 0 = any */
	size_t			 ninternal;
	struct gw_credential	*creds;
	size_t			 ncreds;
	struct gw_hdrset	*hdrsets;
	size_t			 nhdrsets;
	struct gw_rate		 rate;		/* whole sandbox */
};

#define GW_PLACEHOLDER_PREFIX	"airlock:"

/* Parse and validate; NULL with a cause naming the field on error. */
struct gw_policy *gw_policy_parse(const json_t *, char **cause);
struct gw_policy *gw_policy_ref(struct gw_policy *);
void gw_policy_unref(struct gw_policy *);

/* Lower-case, strip one trailing dot, check it is a valid DNS name. 0/-1. */
int gw_name_normalize(const char *in, char *out, size_t outlen);
/* Does host (normalized) match pattern? */
int gw_host_match(const char *pattern, const char *host);

/*
 * May the guest resolve name? Allowlist: any rule naming it (any port).
 * Full: always. None: never.
 */
int gw_policy_dns_allowed(const struct gw_policy *, const char *name);

/*
 * The rule allowing an HTTP(S) request to host on port (80 or 443), or NULL.
 * In full mode returns a static "full" rule for any host.
 */
const struct gw_rule *gw_policy_http_rule(const struct gw_policy *, const char *host, int port);

/* Method and path against a rule's optional lists: 1 allowed, 0 not. */
int gw_rule_request_allowed(const struct gw_rule *, const char *method, const char *path);

/*
 * The L4 rule for a connection to port on host (a name the gateway resolved
 * and pinned, may be NULL) or to the address sa (CIDR rules). Full mode: a
 * static "full" rule. NULL = denied.
 */
const struct gw_rule *gw_policy_l4_rule(const struct gw_policy *, const char *host,
    const struct sockaddr *sa, int port);

/* Operator internal exception for sa:port (exempts it from gw_addr_denied). */
int gw_policy_internal_allowed(const struct gw_policy *, const struct sockaddr *sa, int port);

/* Credential by placeholder name, or NULL. */
const struct gw_credential *gw_policy_credential(const struct gw_policy *, const char *name);
/* Does a credential or a header set bind to host (full mode: intercept TLS for it)? */
int gw_policy_needs_intercept(const struct gw_policy *, const char *host);

/*
 * policy.headers [{host, set:{Name: value}}]: 0, or -1 with a cause
 * naming the field below "headers" ("[2].set.X-A: ..."). gw_policy_headers.c.
 */
int gw_hdrsets_parse(const json_t *, struct gw_hdrset **out, size_t *n, char **cause);
void gw_hdrsets_free(struct gw_hdrset *, size_t n);
/* Does a header set apply to host (full mode: intercept TLS for it)? */
int gw_hdrsets_match(const struct gw_policy *, const char *host);

int gw_cidr_parse(const char *text, struct gw_cidr *out);
int gw_cidr_contains(const struct gw_cidr *, const struct sockaddr *sa);

#endif
