/*
 * Audit log: one JSON line per decision, appended to audit_dir/audit.log,
 * rotated by size (audit.log.1 … .N). Secret values never reach it: only
 * credential names. Queried by airlockd (GET /v1/audit), which reads the
 * same files.
 */
#ifndef AIRLOCK_GW_AUDIT_H
#define AIRLOCK_GW_AUDIT_H

#include <stdint.h>

struct gw_audit;

struct gw_audit_rec {
	const char	*event;		/* NULL: a decision; "deny_summary": count refusals */
	uint64_t	 count;		/* deny_summary: refusals in the window */
	uint64_t	 window_ms;	/* deny_summary: from the first of them to the line */
	const char	*sandbox;
	const char	*kind;		/* "dns", "tls", "http", "l4" */
	const char	*qname;		/* dns */
	const char	*qtype;		/* dns: "A", "AAAA", ... */
	const char	*sni;
	const char	*host;
	const char	*method;
	const char	*path;
	const char	*ip;		/* resolved / dialled address */
	int		 port;
	const char	*dst;		/* the guest's original destination ip:port */
	const char	*rule;		/* matching rule text, or NULL */
	int		 allow;
	const char	*reason;	/* why denied (or NULL when allowed) */
	uint64_t	 bytes_up;
	uint64_t	 bytes_down;
	int		 status;	/* upstream HTTP status, 0 if none */
	const char	*credential;	/* name of an injected credential */
	const char	*headers_set;	/* names (never values) of policy.headers set, "A,B" */
};

struct gw_audit *gw_audit_open(const char *dir, uint64_t max_bytes, int keep, char **cause);
void gw_audit_close(struct gw_audit *);
/*
 * Never fails the caller: a write error is logged once and counted.
 * Thread-safe: lines from every worker go through one lock (size and
 * rotation are shared), each written whole with one write(2).
 */
void gw_audit_log(struct gw_audit *, const struct gw_audit_rec *);

#endif
