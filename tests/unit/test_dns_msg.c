/* DNS wire format: hostile names and records, reply builder round trips. */
#include <sys/socket.h>

#include <stdint.h>

#include "common/util.h"
#include "gateway/gw_dns_msg.h"
#include "t.h"

/* A message under construction. */
struct m {
	uint8_t	 b[4096];
	size_t	 n;
};

static void
put(struct m *m, const void *d, size_t n)
{
	memcpy(m->b + m->n, d, n);
	m->n += n;
}

static void
put8(struct m *m, uint8_t v)
{
	put(m, &v, 1);
}

static void
put16(struct m *m, uint16_t v)
{
	put8(m, (uint8_t)(v >> 8));
	put8(m, (uint8_t)v);
}

static void
put32(struct m *m, uint32_t v)
{
	put16(m, (uint16_t)(v >> 16));
	put16(m, (uint16_t)v);
}

static void
hdr(struct m *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns, uint16_t ar)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, qd);
	put16(m, an);
	put16(m, ns);
	put16(m, ar);
}

/* "www.example.com" as labels. */
static void
name(struct m *m, const char *s)
{
	struct dns_name n;

	if (dns_name_from_text(s, &n, NULL) != 0)
		abort();
	put(m, n.wire, n.len);
}

static void
label(struct m *m, size_t len, char fill)
{
	put8(m, (uint8_t)len);
	while (len-- > 0)
		put8(m, (uint8_t)fill);
}

static void
opt(struct m *m, uint16_t size, uint8_t version, uint16_t flags, uint16_t rdlen)
{
	put8(m, 0);
	put16(m, DNS_T_OPT);
	put16(m, size);
	put32(m, (uint32_t)version << 16 | flags);
	put16(m, rdlen);
}

static int
parse(struct m *m, struct dns_msg *msg, char **cause)
{
	free(*cause);
	*cause = NULL;
	return dns_msg_parse(m->b, m->n, msg, cause);
}

static void
test_query(void)
{
	struct m	 m;
	struct dns_msg	 msg;
	char		*cause = NULL, text[DNS_TEXT_MAX], host[256];

	hdr(&m, 0xbeef, DNS_F_RD, 1, 0, 0, 0);
	name(&m, "Www.Example.COM");
	put16(&m, DNS_T_AAAA);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == 0);
	CHECK(msg.id == 0xbeef && msg.flags == DNS_F_RD && msg.qdcount == 1);
	CHECK(msg.qd[0].type == DNS_T_AAAA && msg.qd[0].class == DNS_C_IN);
	CHECK(msg.qd[0].name.nlabels == 3 && msg.qd[0].name.len == 17);
	CHECK(dns_name_text(&msg.qd[0].name, text, sizeof text) == 0);
	CHECK_STR(text, "Www.Example.COM");
	CHECK(dns_name_host(&msg.qd[0].name, host, sizeof host) == 0);
	CHECK_STR(host, "www.example.com");
	CHECK(!msg.edns.present);

	/* Zero questions parse (the gateway answers FORMERR, not the parser). */
	hdr(&m, 1, 0, 0, 0, 0, 0);
	CHECK(parse(&m, &msg, &cause) == 0 && msg.qdcount == 0);

	/* EDNS0: size, version and DO are read. */
	hdr(&m, 2, 0, 1, 0, 0, 1);
	name(&m, "a.b");
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	opt(&m, 4096, 0, DNS_EDNS_DO, 8);
	put16(&m, 10);			/* COOKIE */
	put16(&m, 4);
	put32(&m, 0x01020304);
	CHECK(parse(&m, &msg, &cause) == 0);
	CHECK(msg.edns.present && msg.edns.udp_size == 4096 && msg.edns.version == 0 &&
	    msg.edns.flags == DNS_EDNS_DO);
	free(cause);
}

static void
test_truncated(void)
{
	struct m	 m;
	struct dns_msg	 msg;
	char		*cause = NULL;
	size_t		 full, i;

	hdr(&m, 1, 0, 1, 0, 0, 0);
	m.n = 11;
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "shorter than a header");

	/* Every strict prefix of a valid query is rejected. */
	hdr(&m, 1, 0, 1, 0, 0, 1);
	name(&m, "host.example");
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	opt(&m, 1232, 0, 0, 0);
	full = m.n;
	CHECK(parse(&m, &msg, &cause) == 0);
	for (i = DNS_HDR_LEN; i < full; i++) {
		m.n = i;
		CHECK(parse(&m, &msg, &cause) == -1);
	}
	m.n = full;
	put8(&m, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "trailing garbage");

	/* A label running past the end. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	put8(&m, 5);
	put(&m, "ab", 2);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "past the end");
	free(cause);
}

static void
test_compression(void)
{
	struct m	 m;
	struct dns_msg	 msg;
	struct dns_name	 n;
	char		*cause = NULL, text[DNS_TEXT_MAX];
	size_t		 off;

	/* A pointer to itself. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	put16(&m, 0xc00c);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "does not point backwards");

	/* A label, then a pointer back to the label: a loop. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	label(&m, 1, 'a');
	put16(&m, 0xc00c);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "does not point backwards");

	/* Two names pointing at each other: 19 → 21 and 21 → 19. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	name(&m, "x");			/* 12..14, type and class 15..18 */
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	put16(&m, 0xc000 | 21);
	put16(&m, 0xc000 | 19);
	off = 21;
	CHECK(dns_name_read(m.b, m.n, &off, &n, &cause) == -1);
	CHECK_CAUSE(cause, "does not point backwards");
	off = 19;
	CHECK(dns_name_read(m.b, m.n, &off, &n, &cause) == -1);

	/* A pointer past the end, and one cut in half. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	put16(&m, 0xc000 | 0x3fff);
	CHECK(parse(&m, &msg, &cause) == -1);
	hdr(&m, 1, 0, 1, 0, 0, 0);
	put8(&m, 0xc0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "pointer cut");

	/* Into the header. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	label(&m, 1, 'a');
	put16(&m, 0xc002);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "into the header");

	/* Extended label types 0x40 and 0x80 (a "label" longer than 63). */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	label(&m, 64, 'a');
	put8(&m, 0);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "label type");
	m.b[DNS_HDR_LEN] = 0x80;
	CHECK(parse(&m, &msg, &cause) == -1);

	/* A legitimate chain: each name reuses the one before it. */
	hdr(&m, 1, 0, 3, 0, 0, 0);
	name(&m, "example.com");	/* 12 */
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	off = m.n;			/* 29 */
	label(&m, 3, 'w');
	put16(&m, 0xc00c);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	label(&m, 1, 'z');
	put16(&m, (uint16_t)(0xc000 | off));
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == 0);
	CHECK(dns_name_text(&msg.qd[2].name, text, sizeof text) == 0);
	CHECK_STR(text, "z.www.example.com");
	free(cause);
}

static void
test_lengths(void)
{
	struct m	 m;
	struct dns_msg	 msg;
	struct dns_name	 n;
	char		*cause = NULL, long_name[300];
	size_t		 off[4];
	int		 i;

	/* 3 × 63 + 62: 255 octets with the root, the maximum. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	label(&m, 63, 'a');
	label(&m, 63, 'b');
	label(&m, 63, 'c');
	label(&m, 61, 'd');
	put8(&m, 0);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == 0 && msg.qd[0].name.len == 255);
	/* One more octet. */
	hdr(&m, 1, 0, 1, 0, 0, 0);
	label(&m, 63, 'a');
	label(&m, 63, 'b');
	label(&m, 63, 'c');
	label(&m, 62, 'd');
	put8(&m, 0);
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "longer than 255");

	/* Too long only once the pointers are followed: 4 × 64 + 1. */
	hdr(&m, 1, 0, 4, 0, 0, 0);
	for (i = 0; i < 4; i++) {
		off[i] = m.n;
		label(&m, 63, (char)('a' + i));
		if (i == 0)
			put8(&m, 0);
		else
			put16(&m, (uint16_t)(0xc000 | off[i - 1]));
		put16(&m, DNS_T_A);
		put16(&m, DNS_C_IN);
	}
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "question 4");
	CHECK_CAUSE(cause, "longer than 255");

	/* Text form. */
	CHECK(dns_name_from_text("a..b", &n, &cause) == -1);
	CHECK_CAUSE(cause, "empty label");
	memset(long_name, 'x', 64);
	long_name[64] = '\0';
	CHECK(dns_name_from_text(long_name, &n, &cause) == -1);
	CHECK_CAUSE(cause, "label longer");
	for (i = 0; i < 128; i++) {
		long_name[2 * i] = 'x';
		long_name[2 * i + 1] = '.';
	}
	long_name[253] = '\0';			/* 127 labels "x": 255 octets */
	CHECK(dns_name_from_text(long_name, &n, &cause) == 0 && n.len == 255);
	long_name[253] = 'x';
	long_name[254] = '\0';
	CHECK(dns_name_from_text(long_name, &n, &cause) == -1);
	CHECK(dns_name_from_text(".", &n, &cause) == 0 && n.len == 1);
	CHECK(dns_name_from_text("a.b.", &n, &cause) == 0 && n.len == 5);

	/* Counts beyond what the parser keeps. */
	hdr(&m, 1, 0, DNS_MSG_MAX_QD + 1, 0, 0, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "questions");
	hdr(&m, 1, 0, 0, DNS_MSG_MAX_RR, 0, 1);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "records");
	free(cause);
}

static void
test_names(void)
{
	struct dns_name	 n;
	char		 text[DNS_TEXT_MAX], host[256];

	n.len = 0;
	n.wire[n.len++] = 5;
	memcpy(n.wire + n.len, "a.b\0 ", 5);
	n.len += 5;
	n.wire[n.len++] = 1;
	n.wire[n.len++] = '\\';
	n.wire[n.len++] = 0;
	n.nlabels = 2;
	CHECK(dns_name_text(&n, text, sizeof text) == 0);
	CHECK_STR(text, "a\\.b\\000\\032.\\\\");
	CHECK(dns_name_text(&n, text, 5) == -1);
	/* A dot inside a label must never turn into a host name with more labels. */
	CHECK(dns_name_host(&n, host, sizeof host) == -1);

	CHECK(dns_name_from_text("_Acme-Challenge.EXAMPLE.org", &n, NULL) == 0);
	CHECK(dns_name_host(&n, host, sizeof host) == 0);
	CHECK_STR(host, "_acme-challenge.example.org");
	CHECK(dns_name_host(&n, host, 10) == -1);
	CHECK(dns_name_from_text(".", &n, NULL) == 0);
	CHECK(dns_name_host(&n, host, sizeof host) == -1);
	CHECK(dns_name_text(&n, text, sizeof text) == 0);
	CHECK_STR(text, ".");
}

static void
test_records(void)
{
	struct m	 m;
	struct dns_msg	 msg;
	struct dns_name	 n;
	char		*cause = NULL, text[DNS_TEXT_MAX];
	uint8_t		 a[16];
	size_t		 first, count, cname_at;
	int		 family;

	/* An upstream-style answer: CNAME to another zone, then its A record. */
	hdr(&m, 7, DNS_F_QR | DNS_F_RD | DNS_F_RA, 1, 2, 0, 0);
	name(&m, "www.example.com");
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	put16(&m, 0xc00c);
	put16(&m, DNS_T_CNAME);
	put16(&m, DNS_C_IN);
	put32(&m, 300);
	put16(&m, 6);
	cname_at = m.n;
	label(&m, 3, 'c');		/* "ccc" + pointer to "example.com" */
	put16(&m, 0xc010);
	put16(&m, (uint16_t)(0xc000 | cname_at));
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	put32(&m, 60);
	put16(&m, 4);
	put32(&m, 0xc0000201);		/* 192.0.2.1 */
	CHECK(parse(&m, &msg, &cause) == 0);
	first = dns_msg_section(&msg, DNS_SEC_AN, &count);
	CHECK(first == 0 && count == 2);
	CHECK(dns_rr_cname(m.b, m.n, &msg.rr[0], &n) == 0);
	CHECK(dns_name_text(&n, text, sizeof text) == 0);
	CHECK_STR(text, "ccc.example.com");
	CHECK(dns_rr_addr(m.b, m.n, &msg.rr[0], &family, a) == -1);
	CHECK(dns_rr_addr(m.b, m.n, &msg.rr[1], &family, a) == 0);
	CHECK(family == AF_INET && a[0] == 192 && a[3] == 1 && msg.rr[1].ttl == 60);
	CHECK(dns_rr_name(m.b, m.n, &msg.rr[1], &n) == 0);
	CHECK(dns_name_text(&n, text, sizeof text) == 0);
	CHECK_STR(text, "ccc.example.com");

	/* A record with 5 octets of rdata. */
	hdr(&m, 7, DNS_F_QR, 0, 1, 0, 0);
	name(&m, "x");
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	put32(&m, 1);
	put16(&m, 5);
	put32(&m, 0);
	put8(&m, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "A record of 5");

	/* CNAME with a byte after its name. */
	hdr(&m, 7, DNS_F_QR, 0, 1, 0, 0);
	name(&m, "x");
	put16(&m, DNS_T_CNAME);
	put16(&m, DNS_C_IN);
	put32(&m, 1);
	put16(&m, 4);
	name(&m, "y");
	put8(&m, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "exactly one name");

	/* rdlength past the end. */
	hdr(&m, 7, DNS_F_QR, 0, 1, 0, 0);
	name(&m, "x");
	put16(&m, DNS_T_TXT);
	put16(&m, DNS_C_IN);
	put32(&m, 1);
	put16(&m, 200);
	put32(&m, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "past the end");

	/* OPT: twice, in the answer section, not owned by the root, bad options. */
	hdr(&m, 7, 0, 0, 0, 0, 2);
	opt(&m, 512, 0, 0, 0);
	opt(&m, 512, 0, 0, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "more than one OPT");
	hdr(&m, 7, 0, 0, 1, 0, 0);
	opt(&m, 512, 0, 0, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "outside the additional");
	hdr(&m, 7, 0, 0, 0, 0, 1);
	name(&m, "x");
	put16(&m, DNS_T_OPT);
	put16(&m, 512);
	put32(&m, 0);
	put16(&m, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "not owned by the root");
	hdr(&m, 7, 0, 0, 0, 0, 1);
	opt(&m, 512, 0, 0, 6);
	put16(&m, 10);
	put16(&m, 8);			/* says 8, has 2 */
	put16(&m, 0);
	CHECK(parse(&m, &msg, &cause) == -1);
	CHECK_CAUSE(cause, "framing");
	free(cause);
}

/* Build a reply and read it back with the parser. */
static void
test_reply_roundtrip(void)
{
	struct m		 m;
	struct dns_msg		 q, r;
	struct dns_reply	 rep;
	struct dns_addr		 addrs[4];
	struct dns_name		 n;
	uint8_t			 out[2048], a[16];
	char			*cause = NULL;
	ssize_t			 len;
	size_t			 i;
	int			 family;

	hdr(&m, 0x1234, DNS_F_RD | DNS_F_CD | DNS_F_AD, 1, 0, 0, 1);
	name(&m, "WwW.Example.com");
	put16(&m, DNS_T_A);
	put16(&m, DNS_C_IN);
	opt(&m, 4096, 0, DNS_EDNS_DO, 0);
	CHECK(parse(&m, &q, &cause) == 0);

	memset(addrs, 0, sizeof addrs);
	for (i = 0; i < 4; i++) {
		addrs[i].family = i == 2 ? AF_INET6 : AF_INET;
		addrs[i].addr[0] = (uint8_t)(i == 2 ? 0x20 : 198);
		addrs[i].addr[3] = (uint8_t)i;
	}
	memset(&rep, 0, sizeof rep);
	rep.id = q.id;
	rep.qflags = q.flags;
	rep.rcode = DNS_R_NOERROR;
	rep.q = &q.qd[0];
	rep.edns = &q.edns;
	rep.addrs = addrs;
	rep.naddrs = 4;
	rep.ttl = 300;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0);
	CHECK(dns_msg_parse(out, (size_t)len, &r, &cause) == 0);
	CHECK(r.id == 0x1234 && r.qdcount == 1 && r.ancount == 3 && r.nscount == 0 &&
	    r.arcount == 1);
	/* QR and RA set, RD and CD echoed, AD (we validate nothing) and AA clear. */
	CHECK(r.flags == (DNS_F_QR | DNS_F_RA | DNS_F_RD | DNS_F_CD));
	/* The question comes back byte for byte (0x20 case randomisation survives). */
	CHECK(r.qd[0].name.len == q.qd[0].name.len &&
	    memcmp(r.qd[0].name.wire, q.qd[0].name.wire, q.qd[0].name.len) == 0);
	for (i = 0; i < 3; i++) {
		CHECK(r.rr[i].type == DNS_T_A && r.rr[i].ttl == 300);
		CHECK(dns_rr_addr(out, (size_t)len, &r.rr[i], &family, a) == 0);
		CHECK(family == AF_INET && a[0] == 198);
		CHECK(dns_rr_name(out, (size_t)len, &r.rr[i], &n) == 0 &&
		    dns_name_equal(&n, &q.qd[0].name));
	}
	CHECK(r.edns.present && r.edns.udp_size == DNS_UDP_OURS && r.edns.flags == 0);

	/* AAAA takes only the v6 address. */
	q.qd[0].type = DNS_T_AAAA;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0 && dns_msg_parse(out, (size_t)len, &r, &cause) == 0);
	CHECK(r.ancount == 1 && r.rr[0].type == DNS_T_AAAA && r.rr[0].rdlen == 16);

	/* HTTPS: no answers whatever addresses are passed. */
	q.qd[0].type = DNS_T_HTTPS;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0 && dns_msg_parse(out, (size_t)len, &r, &cause) == 0 && r.ancount == 0);

	/* Header only (FORMERR for something unparseable), no OPT. */
	rep.q = NULL;
	rep.edns = NULL;
	rep.rcode = DNS_R_FORMERR;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len == DNS_HDR_LEN && dns_msg_parse(out, (size_t)len, &r, &cause) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_FORMERR && r.qdcount == 0 && r.arcount == 0);

	/* BADVERS needs EDNS: its upper bits live in the OPT record. */
	rep.rcode = DNS_R_BADVERS;
	CHECK(dns_reply_build(out, sizeof out, &rep, &cause) == -1);
	CHECK_CAUSE(cause, "needs EDNS");
	rep.edns = &q.edns;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0 && dns_msg_parse(out, (size_t)len, &r, &cause) == 0);
	CHECK(DNS_F_RCODE(r.flags) == 0 && r.edns.present && r.edns.ext_rcode == 1);

	/* No room for even a header. */
	CHECK(dns_reply_build(out, 11, &rep, &cause) == -1);
	free(cause);
}

/* Replies stay within 512 octets without EDNS, and within the client's size with it. */
static void
test_reply_size(void)
{
	struct dns_question	 q;
	struct dns_edns		 e;
	struct dns_reply	 rep;
	struct dns_addr		 addrs[64];
	struct dns_msg		 r;
	uint8_t			 out[4096];
	char			*cause = NULL, longn[256];
	ssize_t			 len;
	size_t			 i;

	memset(longn, 'a', 250);
	longn[63] = longn[127] = longn[191] = '.';
	longn[250] = '\0';
	CHECK(dns_name_from_text(longn, &q.name, &cause) == 0);
	q.type = DNS_T_A;
	q.class = DNS_C_IN;
	memset(addrs, 0, sizeof addrs);
	for (i = 0; i < 64; i++) {
		addrs[i].family = AF_INET;
		addrs[i].addr[0] = 203;
		addrs[i].addr[3] = (uint8_t)i;
	}
	memset(&rep, 0, sizeof rep);
	rep.q = &q;
	rep.addrs = addrs;
	rep.naddrs = 64;
	rep.ttl = 1;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0 && len <= DNS_UDP_MIN);
	CHECK(dns_msg_parse(out, (size_t)len, &r, &cause) == 0);
	/* 512 - 12 - (252 + 4) = 244 → 15 records of 16 octets. */
	CHECK(r.ancount == 15 && !(r.flags & DNS_F_TC));

	memset(&e, 0, sizeof e);
	e.present = 1;
	e.udp_size = 65535;
	rep.edns = &e;
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0 && len <= DNS_UDP_OURS);
	CHECK(dns_msg_parse(out, (size_t)len, &r, &cause) == 0 && r.ancount == 59);
	e.udp_size = 100;		/* below 512 means 512 */
	len = dns_reply_build(out, sizeof out, &rep, &cause);
	CHECK(len > 0 && len <= DNS_UDP_MIN);
	free(cause);
}

static void
test_types(void)
{
	char b[16];

	CHECK_STR(dns_type_str(DNS_T_HTTPS, b, sizeof b), "HTTPS");
	CHECK_STR(dns_type_str(DNS_T_AAAA, b, sizeof b), "AAAA");
	CHECK_STR(dns_type_str(4242, b, sizeof b), "TYPE4242");
}

int
main(void)
{
	T_RUN(test_query);
	T_RUN(test_truncated);
	T_RUN(test_compression);
	T_RUN(test_lengths);
	T_RUN(test_names);
	T_RUN(test_records);
	T_RUN(test_reply_roundtrip);
	T_RUN(test_reply_size);
	T_RUN(test_types);
	return t_done();
}
