/*
 * libFuzzer harness for the gateway's DNS wire format: parse anything; for
 * what parses, read every name and record back and build the gateway's reply
 * to it, which must parse again and echo the question exactly.
 */
#include <sys/socket.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_dns_msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
reply_check(const struct dns_msg *m, const uint8_t *data, size_t size)
{
	struct dns_reply	 rep;
	struct dns_addr		 addrs[8];
	struct dns_msg		 r;
	uint8_t			 out[2048];
	ssize_t			 len;
	size_t			 i;

	memset(addrs, 0, sizeof addrs);
	for (i = 0; i < 8; i++) {
		addrs[i].family = i & 1 ? AF_INET6 : AF_INET;
		if (i < size)
			memset(addrs[i].addr, data[i], sizeof addrs[i].addr);
	}
	memset(&rep, 0, sizeof rep);
	rep.id = m->id;
	rep.qflags = m->flags;
	rep.rcode = m->edns.present ? (m->id & 0xfff) : (m->id & 0xf);
	rep.q = m->qdcount > 0 ? &m->qd[0] : NULL;
	rep.edns = m->edns.present ? &m->edns : NULL;
	rep.addrs = addrs;
	rep.naddrs = 8;
	rep.ttl = m->id;
	len = dns_reply_build(out, sizeof out, &rep, NULL);
	if (len < 0) {
		/* Only possible when the question alone exceeds 512 octets: never. */
		if (rep.q == NULL || rep.q->name.len + 4 + 12 + 11 <= DNS_UDP_MIN)
			abort();
		return;
	}
	if (dns_msg_parse(out, (size_t)len, &r, NULL) != 0)
		abort();
	if (len > DNS_UDP_OURS || (!m->edns.present && len > DNS_UDP_MIN))
		abort();
	if (r.id != m->id || !(r.flags & DNS_F_QR) || r.nscount != 0)
		abort();
	if (rep.q != NULL && (r.qdcount != 1 || r.qd[0].name.len != rep.q->name.len ||
	    memcmp(r.qd[0].name.wire, rep.q->name.wire, rep.q->name.len) != 0 ||
	    r.qd[0].type != rep.q->type || r.qd[0].class != rep.q->class))
		abort();
	if (r.edns.present != m->edns.present)
		abort();
	if (m->edns.present && (((int)r.edns.ext_rcode << 4 | DNS_F_RCODE(r.flags)) != rep.rcode))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_msg	 m;
	struct dns_name	 n;
	char		 text[DNS_TEXT_MAX], host[256], *cause = NULL;
	uint8_t		 a[16];
	size_t		 i, off, nrr;
	int		 family;

	if (dns_msg_parse(data, size, &m, &cause) != 0) {
		free(cause);
		/* Names at every offset must fail or succeed, never run off. */
		for (off = 0; off < size && off < 64; off++) {
			size_t o = off;

			if (dns_name_read(data, size, &o, &n, NULL) == 0 &&
			    (o > size || n.len > DNS_NAME_MAX))
				abort();
		}
		return 0;
	}
	for (i = 0; i < m.qdcount; i++) {
		if (dns_name_text(&m.qd[i].name, text, sizeof text) != 0)
			abort();	/* the worst case always fits */
		if (dns_name_host(&m.qd[i].name, host, sizeof host) == 0 &&
		    (strlen(host) > 253 || strchr(host, '\\') != NULL))
			abort();
	}
	nrr = (size_t)m.ancount + m.nscount + m.arcount;
	for (i = 0; i < nrr; i++) {
		if (dns_rr_name(data, size, &m.rr[i], &n) != 0)
			abort();	/* parsed once already */
		(void)dns_rr_addr(data, size, &m.rr[i], &family, a);
		if (m.rr[i].type == DNS_T_CNAME && dns_rr_cname(data, size, &m.rr[i], &n) != 0)
			abort();
	}
	reply_check(&m, data, size);
	return 0;
}
