/*
 * DNS for guests: the gateway answers every query itself and never forwards
 * one. Only A and AAAA of names the policy allows cause an upstream lookup,
 * made by the gateway's own resolver for the bare name (gw_resolve.c); what
 * comes back is filtered (denied ranges), pinned for the sandbox and
 * flattened into A/AAAA records for the name the guest asked, with our TTL.
 * No upstream byte reaches the guest: no CNAME, no TXT, no HTTPS/SVCB (ECH
 * keys, alternative endpoints), no authority or additional records. That is
 * what defeats DNS tunnelling: an attacker's authoritative server is never
 * asked for TXT/NULL/anything and its answers never come back.
 *
 * Decisions, in order (docs/security.md "DNS"):
 *   rate limit exceeded                        REFUSED (counted: one deny_summary
 *                                              line a second, gw_sandbox_deny)
 *   shorter than a header, or QR=1 (a response) dropped, no answer (no loops)
 *   malformed (gw_dns_msg.c parser)            FORMERR, header only
 *   opcode other than QUERY                    NOTIMP
 *   not exactly 1 question, records in an/ns,
 *   additional other than one OPT              FORMERR
 *   EDNS version > 0                           BADVERS
 *   class other than IN                        REFUSED
 *   mode none                                  REFUSED
 *   not a host name / not allowed by policy    NXDOMAIN
 *   A, AAAA                                    upstream: NOERROR + addresses,
 *                                              NXDOMAIN, or SERVFAIL
 *   HTTPS, SVCB                                NOERROR, no records (stripped)
 *   anything else (TXT, MX, NULL, ANY, ...)    NOERROR, no records
 *
 * Empty NOERROR rather than NOTIMP for other types: it is what a resolver
 * says for a name without such records, and stub resolvers treat NOTIMP as
 * a broken server and give up on the A lookup that came with it.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/gw_dns.h"
#include "gateway/gw_dns_msg.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_sandbox.h"

/* A query waiting for the upstream; owned by its sandbox's gw_dns. */
struct gw_dns_query {
	struct gw_dns			*dns;
	struct gw_resolve_req		*req;
	struct sockaddr_storage		 from;
	socklen_t			 fromlen;
	uint16_t			 id;
	uint16_t			 qflags;
	struct dns_question		 q;
	struct dns_edns			 edns;
	char				 host[256];	/* normalized, for policy and upstream */
	char				 qname[DNS_TEXT_MAX];	/* as asked, for the audit log */
	TAILQ_ENTRY(gw_dns_query)	 entry;
};

struct gw_dns {
	struct gw_sandbox		*sb;
	struct tbucket		 bucket;
	TAILQ_HEAD(, gw_dns_query)	 pending;
	size_t				 npending;
};

/* What one query came to, for the reply and the audit line. */
struct gw_dns_verdict {
	int		 rcode;
	int		 allow;
	const char	*reason;
	const char	*ip;
};

static struct gw_dns *
gw_dns_state(struct gw_sandbox *sb)
{
	struct gw_dns *d;

	if (sb->dns == NULL) {
		d = xcalloc(1, sizeof *d);
		d->sb = sb;
		TAILQ_INIT(&d->pending);
		tbucket_init(&d->bucket, GW_DNS_RATE, GW_DNS_BURST, monotonic_ms());
		sb->dns = d;
	}
	return sb->dns;
}

static void
gw_dns_send(struct gw_sandbox *sb, const uint8_t *buf, size_t len,
    const struct sockaddr_storage *to, socklen_t tolen)
{
	/* UDP: a full socket buffer loses the answer and the guest retries. */
	if (sendto(sb->dns_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL,
	    (const struct sockaddr *)to, tolen) == -1)
		log_debug("gateway: dns reply to sandbox %s: %s", sb->id, strerror(errno));
}

/* One audit line; counting is the caller's. */
static void
gw_dns_audit_line(struct gw_sandbox *sb, const char *qname, uint16_t qtype,
    const struct gw_dns_verdict *v)
{
	struct gw_audit_rec	 r;
	char			 tbuf[16];

	memset(&r, 0, sizeof r);
	r.sandbox = sb->id;
	r.kind = "dns";
	r.qname = qname;
	r.qtype = qname != NULL ? dns_type_str(qtype, tbuf, sizeof tbuf) : NULL;
	r.ip = v->ip;
	r.allow = v->allow;
	r.reason = v->reason;
	gw_audit_log(sb->gw->audit, &r);
}

/* A query decided: count and audit it. */
static void
gw_dns_audit(struct gw_sandbox *sb, const char *qname, uint16_t qtype,
    const struct gw_dns_verdict *v)
{
	if (!v->allow)
		sb->counters.dns_denied++;
	gw_dns_audit_line(sb, qname, qtype, v);
}

/*
 * Reply with rcode and no answers, and audit. m may be NULL (unparseable:
 * header only, from the raw id and flags); q echoes its question if set.
 */
static void
gw_dns_refuse(struct gw_sandbox *sb, const uint8_t *buf, const struct dns_msg *m,
    const struct dns_question *q, const struct sockaddr_storage *from, socklen_t fromlen,
    const char *qname, const struct gw_dns_verdict *v)
{
	struct dns_reply	 rep;
	uint8_t			 out[DNS_UDP_OURS];
	ssize_t			 n;
	char			*cause = NULL;

	memset(&rep, 0, sizeof rep);
	rep.id = (uint16_t)(buf[0] << 8 | buf[1]);
	rep.qflags = (uint16_t)(buf[2] << 8 | buf[3]);
	rep.rcode = v->rcode;
	rep.q = q;
	rep.edns = m != NULL && m->edns.present ? &m->edns : NULL;
	if ((n = dns_reply_build(out, sizeof out, &rep, &cause)) == -1) {
		log_warnx("gateway: dns reply: %s", cause);
		free(cause);
	} else
		gw_dns_send(sb, out, (size_t)n, from, fromlen);
	gw_dns_audit(sb, qname, q != NULL ? q->type : 0, v);
}

/* The guest's query has its answer: reply, audit, forget it. */
static void
gw_dns_resolved(int err, const struct gw_addrs *a, void *arg)
{
	struct gw_dns_query	*qy = arg;
	struct gw_dns		*d = qy->dns;
	struct gw_sandbox	*sb = d->sb;
	struct gw_dns_verdict	 v = { DNS_R_NOERROR, 1, NULL, NULL };
	struct dns_addr		 addrs[2 * GW_RESOLVE_MAX_ADDRS];
	struct dns_reply	 rep;
	uint8_t			 out[DNS_UDP_OURS];
	char			 ips[2 * GW_RESOLVE_MAX_ADDRS * 48], one[64], *cause = NULL;
	const struct sockaddr	*sa;
	size_t			 i, n = 0, used = 0;
	int			 family;
	ssize_t			 len;

	TAILQ_REMOVE(&d->pending, qy, entry);
	d->npending--;

	family = qy->q.type == DNS_T_AAAA ? AF_INET6 : AF_INET;
	ips[0] = '\0';
	for (i = 0; err == DNS_ERR_NONE && i < a->n && n < sizeof addrs / sizeof addrs[0]; i++) {
		sa = (const struct sockaddr *)&a->addrs[i];
		if (sa->sa_family != family)
			continue;
		addrs[n].family = family;
		memcpy(addrs[n].addr, family == AF_INET ?
		    (const void *)&((const struct sockaddr_in *)sa)->sin_addr :
		    (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
		    family == AF_INET ? 4 : 16);
		n++;
		gw_addr_str(sa, one, sizeof one);
		if (used + strlen(one) + 2 <= sizeof ips)
			used += (size_t)snprintf(ips + used, sizeof ips - used, "%s%s",
			    used != 0 ? "," : "", one);
	}
	if (!gw_policy_dns_allowed(sb->policy, qy->host)) {
		/* The policy changed while the lookup ran. */
		v.rcode = DNS_R_NXDOMAIN;
		v.allow = 0;
		v.reason = "not allowed";
		n = 0;
		ips[0] = '\0';
	} else if (err == DNS_ERR_NOTEXIST) {
		v.rcode = DNS_R_NXDOMAIN;
		v.reason = "upstream: no such name";
	} else if (err != DNS_ERR_NONE) {
		v.rcode = DNS_R_SERVFAIL;
		v.reason = "upstream failed";
		log_debug("gateway: dns %s for sandbox %s: %s", qy->host, sb->id,
		    evdns_err_to_string(err));
	} else if (n == 0 && a->dropped > 0) {
		/* Every address was in a denied range: rebinding, or an internal name. */
		v.allow = 0;
		v.reason = a->drop_reason != NULL ? a->drop_reason : "denied address";
	}
	if (ips[0] != '\0')
		v.ip = ips;

	memset(&rep, 0, sizeof rep);
	rep.id = qy->id;
	rep.qflags = qy->qflags;
	rep.rcode = v.rcode;
	rep.q = &qy->q;
	rep.edns = qy->edns.present ? &qy->edns : NULL;
	rep.addrs = addrs;
	rep.naddrs = n;
	rep.ttl = a->ttl;
	if ((len = dns_reply_build(out, sizeof out, &rep, &cause)) == -1) {
		log_warnx("gateway: dns reply: %s", cause);
		free(cause);
	} else
		gw_dns_send(sb, out, (size_t)len, &qy->from, qy->fromlen);
	gw_dns_audit(sb, qy->qname, qy->q.type, &v);
	free(qy);
}

/* A retransmission of a query already waiting for the upstream. */
static int
gw_dns_duplicate(struct gw_dns *d, const struct dns_msg *m,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct gw_dns_query *qy;

	TAILQ_FOREACH(qy, &d->pending, entry) {
		if (qy->id == m->id && qy->q.type == m->qd[0].type && qy->fromlen == fromlen &&
		    memcmp(&qy->from, from, fromlen) == 0 &&
		    dns_name_equal(&qy->q.name, &m->qd[0].name))
			return 1;
	}
	return 0;
}

/* A or AAAA of an allowed name: ask upstream; the answer comes in gw_dns_resolved. */
static void
gw_dns_lookup(struct gw_dns *d, const uint8_t *buf, const struct dns_msg *m,
    const char *host, const char *qname, const struct sockaddr_storage *from,
    socklen_t fromlen)
{
	struct gw_sandbox	*sb = d->sb;
	struct gw_dns_query	*qy;
	struct gw_dns_verdict	 v = { DNS_R_SERVFAIL, 1, NULL, NULL };
	char			*cause = NULL;

	if (gw_dns_duplicate(d, m, from, fromlen))
		return;
	if (d->npending >= GW_DNS_PENDING_MAX) {
		v.allow = 0;
		v.reason = "too many lookups in flight";
		gw_dns_refuse(sb, buf, m, &m->qd[0], from, fromlen, qname, &v);
		return;
	}
	qy = xcalloc(1, sizeof *qy);
	qy->dns = d;
	qy->from = *from;
	qy->fromlen = fromlen;
	qy->id = m->id;
	qy->qflags = m->flags;
	qy->q = m->qd[0];
	qy->edns = m->edns;
	snprintf(qy->host, sizeof qy->host, "%s", host);
	snprintf(qy->qname, sizeof qy->qname, "%s", qname);
	qy->req = gw_resolve(sb, host, m->qd[0].type == DNS_T_AAAA, gw_dns_resolved, qy, &cause);
	if (qy->req == NULL) {
		log_warnx("gateway: dns: %s", cause);
		free(cause);
		free(qy);
		v.reason = "resolver unavailable";
		gw_dns_refuse(sb, buf, m, &m->qd[0], from, fromlen, qname, &v);
		return;
	}
	TAILQ_INSERT_TAIL(&d->pending, qy, entry);
	d->npending++;
}

/* The shape of a query we answer: one question, nothing else but an OPT. */
static const char *
gw_dns_shape(const struct dns_msg *m)
{
	if (m->qdcount != 1)
		return "not exactly one question";
	if (m->ancount != 0 || m->nscount != 0)
		return "records in a query";
	if (m->arcount > (m->edns.present ? 1 : 0))
		return "additional records other than OPT";
	return NULL;
}

/*
 * Rate limited: REFUSED, and counted into the sandbox's deny_summary line
 * for the second (gw_sandbox_deny), so a flood costs the audit log one
 * line a second and loses no count.
 */
static void
gw_dns_limited(struct gw_dns *d, const uint8_t *buf, size_t len,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct dns_reply	 rep;
	uint8_t			 out[DNS_HDR_LEN];

	d->sb->counters.dns_denied++;
	if (len >= DNS_HDR_LEN && !(buf[2] & 0x80)) {
		memset(&rep, 0, sizeof rep);
		rep.id = (uint16_t)(buf[0] << 8 | buf[1]);
		rep.qflags = (uint16_t)(buf[2] << 8 | buf[3]);
		rep.rcode = DNS_R_REFUSED;
		if (dns_reply_build(out, sizeof out, &rep, NULL) == DNS_HDR_LEN)
			gw_dns_send(d->sb, out, sizeof out, from, fromlen);
	}
	gw_sandbox_deny(d->sb, GW_DENY_DNS_RATE);
}

/* One datagram from the guest. */
static void
gw_dns_query(struct gw_sandbox *sb, const uint8_t *buf, size_t len,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct gw_dns		*d = gw_dns_state(sb);
	struct gw_dns_verdict	 v = { DNS_R_NOERROR, 0, NULL, NULL };
	struct dns_msg		 m;
	const struct dns_question *q;
	char			*cause = NULL, qname[DNS_TEXT_MAX], host[256], why[128];

	sb->counters.dns_queries++;
	if (!tbucket_take(&d->bucket, 1, monotonic_ms())) {
		gw_dns_limited(d, buf, len, from, fromlen);
		return;
	}
	if (len < DNS_HDR_LEN || (buf[2] & 0x80)) {
		/* Never answer a response: two gateways would echo forever. */
		v.reason = len < DNS_HDR_LEN ? "malformed: short" : "not a query";
		gw_dns_audit(sb, NULL, 0, &v);
		return;
	}
	if (dns_msg_parse(buf, len, &m, &cause) != 0) {
		snprintf(why, sizeof why, "malformed: %s", cause);
		free(cause);
		v.rcode = DNS_R_FORMERR;
		v.reason = why;
		gw_dns_refuse(sb, buf, NULL, NULL, from, fromlen, NULL, &v);
		return;
	}
	q = m.qdcount == 1 ? &m.qd[0] : NULL;
	if (q == NULL || dns_name_text(&q->name, qname, sizeof qname) != 0)
		qname[0] = '\0';
	if (DNS_F_OPCODE(m.flags) != DNS_OP_QUERY) {
		v.rcode = DNS_R_NOTIMP;
		v.reason = "opcode not QUERY";
		gw_dns_refuse(sb, buf, &m, q, from, fromlen, q ? qname : NULL, &v);
		return;
	}
	if ((v.reason = gw_dns_shape(&m)) != NULL) {
		v.rcode = DNS_R_FORMERR;
		gw_dns_refuse(sb, buf, &m, q, from, fromlen, q ? qname : NULL, &v);
		return;
	}
	if (m.edns.present && m.edns.version != 0) {
		v.rcode = DNS_R_BADVERS;
		v.reason = "EDNS version";
		gw_dns_refuse(sb, buf, &m, q, from, fromlen, qname, &v);
		return;
	}
	if (q->class != DNS_C_IN) {
		v.rcode = DNS_R_REFUSED;
		v.reason = "class not IN";
	} else if (sb->policy->mode == GW_MODE_NONE) {
		v.rcode = DNS_R_REFUSED;
		v.reason = "network mode none";
	} else if (dns_name_host(&q->name, host, sizeof host) != 0 ||
	    gw_name_normalize(host, host, sizeof host) != 0) {
		v.rcode = DNS_R_NXDOMAIN;
		v.reason = "not a host name";
	} else if (!gw_policy_dns_allowed(sb->policy, host)) {
		v.rcode = DNS_R_NXDOMAIN;
		v.reason = "not allowed";
	} else if (q->type == DNS_T_A || q->type == DNS_T_AAAA) {
		gw_dns_lookup(d, buf, &m, host, qname, from, fromlen);
		return;
	} else if (q->type == DNS_T_HTTPS || q->type == DNS_T_SVCB) {
		v.reason = "HTTPS/SVCB stripped";
	} else
		v.reason = "type not served";
	gw_dns_refuse(sb, buf, &m, q, from, fromlen, qname, &v);
}

void
gw_dns_readable(struct gw_sandbox *sb)
{
	uint8_t			 buf[GW_DNS_DATAGRAM_MAX];
	struct sockaddr_storage	 from;
	socklen_t		 fromlen;
	ssize_t			 n;
	int			 i;

	/* A bounded batch: a flooding guest must not starve the other sandboxes. */
	for (i = 0; i < GW_DNS_DRAIN_MAX; i++) {
		fromlen = sizeof from;
		n = recvfrom(sb->dns_fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC,
		    (struct sockaddr *)&from, &fromlen);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("gateway: dns recvfrom (sandbox %s)", sb->id);
			return;
		}
		/* MSG_TRUNC returns the real length; the parser sees the cut copy and fails. */
		if ((size_t)n > sizeof buf)
			n = sizeof buf;
		gw_dns_query(sb, buf, (size_t)n, &from, fromlen);
	}
}

void
gw_dns_detach(struct gw_sandbox *sb)
{
	struct gw_dns		*d = sb->dns;
	struct gw_dns_query	*qy;

	if (d == NULL)
		return;
	while ((qy = TAILQ_FIRST(&d->pending)) != NULL) {
		TAILQ_REMOVE(&d->pending, qy, entry);
		gw_resolve_cancel(qy->req);
		free(qy);
	}
	free(d);
	sb->dns = NULL;
}
