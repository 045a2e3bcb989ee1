/*
 * DNS wire format: strict parser and reply builder (see gw_dns_msg.h).
 *
 * Reads go through rd16/rd32 with an explicit bounds check each, so there is
 * no path that touches buf[len] or beyond. Name decompression terminates
 * because a pointer must point before itself (RFC 1035 4.1.4: "a prior
 * occurrence"), jumps are counted, and the decoded name is capped at 255
 * octets: every step either adds a label (bounded by 255) or jumps (bounded
 * by DNS_PTR_MAX).
 */
#include <sys/socket.h>

#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "gateway/gw_dns_msg.h"

static int
rd16(const uint8_t *buf, size_t len, size_t *off, uint16_t *v)
{
	if (*off > len || len - *off < 2)
		return -1;
	*v = (uint16_t)(buf[*off] << 8 | buf[*off + 1]);
	*off += 2;
	return 0;
}

static int
rd32(const uint8_t *buf, size_t len, size_t *off, uint32_t *v)
{
	if (*off > len || len - *off < 4)
		return -1;
	*v = (uint32_t)buf[*off] << 24 | (uint32_t)buf[*off + 1] << 16 |
	    (uint32_t)buf[*off + 2] << 8 | buf[*off + 3];
	*off += 4;
	return 0;
}

int
dns_name_read(const uint8_t *buf, size_t len, size_t *off, struct dns_name *n,
    char **cause)
{
	size_t	 pos = *off, end = 0, lowest = *off;
	int	 jumps = 0, jumped = 0;
	uint8_t	 c;

	n->len = 0;
	n->nlabels = 0;
	for (;;) {
		if (pos >= len) {
			cause_set(cause, "name runs past the end at %zu", pos);
			return -1;
		}
		c = buf[pos];
		if ((c & 0xc0) == 0xc0) {
			size_t target;

			if (pos + 1 >= len) {
				cause_set(cause, "compression pointer cut at %zu", pos);
				return -1;
			}
			target = (size_t)(c & 0x3f) << 8 | buf[pos + 1];
			/*
			 * Strictly before every place this name has been read
			 * from so far: a pointer can never lead back into
			 * bytes already decoded, so there is no loop.
			 */
			if (target >= lowest) {
				cause_set(cause, "compression pointer at %zu does not point "
				    "backwards (%zu)", pos, target);
				return -1;
			}
			if (target < DNS_HDR_LEN) {
				cause_set(cause, "compression pointer into the header (%zu)",
				    target);
				return -1;
			}
			if (++jumps > DNS_PTR_MAX) {
				cause_set(cause, "too many compression pointers");
				return -1;
			}
			if (!jumped) {
				end = pos + 2;
				jumped = 1;
			}
			pos = lowest = target;
			continue;
		}
		if (c & 0xc0) {
			cause_set(cause, "label type 0x%02x at %zu not supported", c & 0xc0, pos);
			return -1;
		}
		/* c <= 63 here: the two top bits are clear. */
		if (n->len + 1 + c > DNS_NAME_MAX) {
			cause_set(cause, "name longer than %d octets", DNS_NAME_MAX);
			return -1;
		}
		if (len - pos - 1 < c) {
			cause_set(cause, "label at %zu runs past the end", pos);
			return -1;
		}
		memcpy(n->wire + n->len, buf + pos, 1 + (size_t)c);
		n->len += 1 + (size_t)c;
		pos += 1 + (size_t)c;
		if (c == 0)
			break;
		n->nlabels++;
	}
	*off = jumped ? end : pos;
	return 0;
}

int
dns_name_text(const struct dns_name *n, char *out, size_t outlen)
{
	size_t	 i = 0, o = 0, k;
	uint8_t	 l, c;
	int	 w;

	if (n->len == 0 || n->len > DNS_NAME_MAX)
		return -1;
	if (n->wire[0] == 0) {
		if (outlen < 2)
			return -1;
		memcpy(out, ".", 2);
		return 0;
	}
	while (i < n->len && (l = n->wire[i]) != 0) {
		if (l > DNS_LABEL_MAX || i + 1 + l > n->len)
			return -1;
		if (o != 0) {
			if (o + 1 >= outlen)
				return -1;
			out[o++] = '.';
		}
		for (k = 0; k < l; k++) {
			c = n->wire[i + 1 + k];
			if (c == '.' || c == '\\')
				w = snprintf(out + o, outlen - o, "\\%c", c);
			else if (c <= ' ' || c >= 0x7f)
				w = snprintf(out + o, outlen - o, "\\%03u", c);
			else
				w = snprintf(out + o, outlen - o, "%c", c);
			if (w < 0 || (size_t)w >= outlen - o)
				return -1;
			o += (size_t)w;
		}
		i += 1 + l;
	}
	out[o] = '\0';		/* o < outlen: the last snprintf fit */
	return 0;
}

int
dns_name_host(const struct dns_name *n, char *out, size_t outlen)
{
	size_t	 i = 0, o = 0, k;
	uint8_t	 l, c;

	if (n->len < 2 || n->len > DNS_NAME_MAX || n->wire[0] == 0)
		return -1;
	while (i < n->len && (l = n->wire[i]) != 0) {
		if (l > DNS_LABEL_MAX || i + 1 + l > n->len)
			return -1;
		if (o != 0) {
			if (o + 1 >= outlen)
				return -1;
			out[o++] = '.';
		}
		for (k = 0; k < l; k++) {
			c = n->wire[i + 1 + k];
			if (c >= 'A' && c <= 'Z')
				c = (uint8_t)(c - 'A' + 'a');
			else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			    c == '-' || c == '_'))
				return -1;
			if (o + 1 >= outlen)
				return -1;
			out[o++] = (char)c;
		}
		i += 1 + l;
	}
	out[o] = '\0';
	return 0;
}

int
dns_name_from_text(const char *s, struct dns_name *n, char **cause)
{
	const char	*dot;
	size_t		 l;

	n->len = 0;
	n->nlabels = 0;
	if (strcmp(s, ".") == 0)
		s = "";
	while (*s != '\0') {
		dot = strchr(s, '.');
		l = dot != NULL ? (size_t)(dot - s) : strlen(s);
		if (l == 0) {
			cause_set(cause, "empty label");
			return -1;
		}
		if (l > DNS_LABEL_MAX) {
			cause_set(cause, "label longer than %d octets", DNS_LABEL_MAX);
			return -1;
		}
		if (n->len + 1 + l + 1 > DNS_NAME_MAX) {
			cause_set(cause, "name longer than %d octets", DNS_NAME_MAX);
			return -1;
		}
		n->wire[n->len++] = (uint8_t)l;
		memcpy(n->wire + n->len, s, l);
		n->len += l;
		n->nlabels++;
		s += l;
		if (*s == '.')
			s++;
	}
	n->wire[n->len++] = 0;
	return 0;
}

int
dns_name_equal(const struct dns_name *a, const struct dns_name *b)
{
	size_t	 i;
	uint8_t	 x, y;

	if (a->len != b->len)
		return 0;
	for (i = 0; i < a->len; i++) {
		x = a->wire[i];
		y = b->wire[i];
		if (x >= 'A' && x <= 'Z')
			x = (uint8_t)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'Z')
			y = (uint8_t)(y - 'A' + 'a');
		if (x != y)
			return 0;
	}
	return 1;
}

/* OPT rdata is a list of {code, length, data}; it must tile the rdata exactly. */
static int
opt_check(const uint8_t *buf, size_t off, size_t end, char **cause)
{
	uint16_t code, olen;

	while (off < end) {
		if (rd16(buf, end, &off, &code) != 0 || rd16(buf, end, &off, &olen) != 0 ||
		    end - off < olen) {
			cause_set(cause, "OPT option framing broken");
			return -1;
		}
		off += olen;
	}
	return 0;
}

/* Check rdata against its type; the record is already bounds-checked. */
static int
rdata_check(const uint8_t *buf, size_t len, const struct dns_rr *rr, char **cause)
{
	struct dns_name	 n;
	size_t		 off = rr->rdata_off;

	switch (rr->type) {
	case DNS_T_A:
		if (rr->class == DNS_C_IN && rr->rdlen != 4) {
			cause_set(cause, "A record of %u octets", rr->rdlen);
			return -1;
		}
		break;
	case DNS_T_AAAA:
		if (rr->class == DNS_C_IN && rr->rdlen != 16) {
			cause_set(cause, "AAAA record of %u octets", rr->rdlen);
			return -1;
		}
		break;
	case DNS_T_CNAME:
		/* Pointers may leave the rdata (backwards), but the name must end at its end. */
		if (dns_name_read(buf, len, &off, &n, cause) != 0) {
			cause_wrap(cause, "CNAME");
			return -1;
		}
		if (off != rr->rdata_off + rr->rdlen) {
			cause_set(cause, "CNAME rdata is not exactly one name");
			return -1;
		}
		break;
	case DNS_T_OPT:
		return opt_check(buf, rr->rdata_off, rr->rdata_off + rr->rdlen, cause);
	}
	return 0;
}

static int
rr_read(const uint8_t *buf, size_t len, size_t *off, struct dns_rr *rr, char **cause)
{
	struct dns_name n;

	rr->name_off = *off;
	if (dns_name_read(buf, len, off, &n, cause) != 0)
		return -1;
	if (rd16(buf, len, off, &rr->type) != 0 || rd16(buf, len, off, &rr->class) != 0 ||
	    rd32(buf, len, off, &rr->ttl) != 0 || rd16(buf, len, off, &rr->rdlen) != 0) {
		cause_set(cause, "record header cut at %zu", *off);
		return -1;
	}
	if (len - *off < rr->rdlen) {
		cause_set(cause, "rdata of %u octets runs past the end", rr->rdlen);
		return -1;
	}
	rr->rdata_off = *off;
	*off += rr->rdlen;
	if (rr->type == DNS_T_OPT && (n.len != 1 || n.wire[0] != 0)) {
		cause_set(cause, "OPT record not owned by the root");
		return -1;
	}
	return rdata_check(buf, len, rr, cause);
}

int
dns_msg_parse(const uint8_t *buf, size_t len, struct dns_msg *m, char **cause)
{
	struct dns_rr	*rr;
	size_t		 off = 0, i, nrr, first_ar;

	memset(m, 0, sizeof *m);
	if (len < DNS_HDR_LEN) {
		cause_set(cause, "message of %zu octets is shorter than a header", len);
		return -1;
	}
	if (len > DNS_MSG_MAX) {
		cause_set(cause, "message of %zu octets is too long", len);
		return -1;
	}
	(void)rd16(buf, len, &off, &m->id);
	(void)rd16(buf, len, &off, &m->flags);
	(void)rd16(buf, len, &off, &m->qdcount);
	(void)rd16(buf, len, &off, &m->ancount);
	(void)rd16(buf, len, &off, &m->nscount);
	(void)rd16(buf, len, &off, &m->arcount);
	if (m->qdcount > DNS_MSG_MAX_QD) {
		cause_set(cause, "%u questions", m->qdcount);
		return -1;
	}
	nrr = (size_t)m->ancount + m->nscount + m->arcount;
	if (nrr > DNS_MSG_MAX_RR) {
		cause_set(cause, "%zu records", nrr);
		return -1;
	}
	for (i = 0; i < m->qdcount; i++) {
		if (dns_name_read(buf, len, &off, &m->qd[i].name, cause) != 0) {
			cause_wrap(cause, "question %zu", i + 1);
			return -1;
		}
		if (rd16(buf, len, &off, &m->qd[i].type) != 0 ||
		    rd16(buf, len, &off, &m->qd[i].class) != 0) {
			cause_set(cause, "question %zu cut short", i + 1);
			return -1;
		}
	}
	first_ar = (size_t)m->ancount + m->nscount;
	for (i = 0; i < nrr; i++) {
		rr = &m->rr[i];
		if (rr_read(buf, len, &off, rr, cause) != 0) {
			cause_wrap(cause, "record %zu", i + 1);
			return -1;
		}
		if (rr->type != DNS_T_OPT)
			continue;
		if (i < first_ar) {
			cause_set(cause, "OPT record outside the additional section");
			return -1;
		}
		if (m->edns.present) {
			cause_set(cause, "more than one OPT record");
			return -1;
		}
		m->edns.present = 1;
		m->edns.udp_size = rr->class;
		m->edns.ext_rcode = (uint8_t)(rr->ttl >> 24);
		m->edns.version = (uint8_t)(rr->ttl >> 16);
		m->edns.flags = (uint16_t)rr->ttl;
	}
	if (off != len) {
		cause_set(cause, "%zu octets of trailing garbage", len - off);
		return -1;
	}
	return 0;
}

size_t
dns_msg_section(const struct dns_msg *m, int section, size_t *count)
{
	switch (section) {
	case DNS_SEC_AN:
		*count = m->ancount;
		return 0;
	case DNS_SEC_NS:
		*count = m->nscount;
		return m->ancount;
	default:
		*count = m->arcount;
		return (size_t)m->ancount + m->nscount;
	}
}

int
dns_rr_addr(const uint8_t *buf, size_t len, const struct dns_rr *rr, int *family,
    uint8_t out[16])
{
	if (rr->class != DNS_C_IN || rr->rdata_off > len || len - rr->rdata_off < rr->rdlen)
		return -1;
	if (rr->type == DNS_T_A && rr->rdlen == 4)
		*family = AF_INET;
	else if (rr->type == DNS_T_AAAA && rr->rdlen == 16)
		*family = AF_INET6;
	else
		return -1;
	memcpy(out, buf + rr->rdata_off, rr->rdlen);
	return 0;
}

int
dns_rr_cname(const uint8_t *buf, size_t len, const struct dns_rr *rr, struct dns_name *n)
{
	size_t off = rr->rdata_off;

	if (rr->type != DNS_T_CNAME || rr->rdata_off > len || len - rr->rdata_off < rr->rdlen)
		return -1;
	if (dns_name_read(buf, len, &off, n, NULL) != 0 || off != rr->rdata_off + rr->rdlen)
		return -1;
	return 0;
}

int
dns_rr_name(const uint8_t *buf, size_t len, const struct dns_rr *rr, struct dns_name *n)
{
	size_t off = rr->name_off;

	return dns_name_read(buf, len, &off, n, NULL);
}

/* Builder: a cursor that remembers overflow instead of checking every put. */
struct dns_wbuf {
	uint8_t		*p;
	size_t		 cap;
	size_t		 len;
	int		 overflow;
};

static void
wr_bytes(struct dns_wbuf *w, const void *d, size_t n)
{
	if (w->overflow || w->cap - w->len < n) {
		w->overflow = 1;
		return;
	}
	memcpy(w->p + w->len, d, n);
	w->len += n;
}

static void
wr16(struct dns_wbuf *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	wr_bytes(w, b, 2);
}

static void
wr32(struct dns_wbuf *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };

	wr_bytes(w, b, 4);
}

static void
wr_opt(struct dns_wbuf *w, int rcode)
{
	wr_bytes(w, "", 1);			/* root owner */
	wr16(w, DNS_T_OPT);
	wr16(w, DNS_UDP_OURS);			/* class: our payload size */
	wr32(w, (uint32_t)((rcode >> 4) & 0xff) << 24);	/* ext rcode, version 0, DO clear */
	wr16(w, 0);				/* no options */
}

ssize_t
dns_reply_build(uint8_t *buf, size_t cap, const struct dns_reply *r, char **cause)
{
	struct dns_wbuf	 w = { buf, cap, 0, 0 };
	size_t		 limit, i, an = 0, opt_len, alen;
	uint16_t	 flags, atype = 0;
	int		 family = 0;

	if (r->rcode < 0 || r->rcode > 0xfff || (r->rcode > 15 && r->edns == NULL)) {
		cause_set(cause, "rcode %d needs EDNS", r->rcode);
		return -1;
	}
	/* What the client said it can take, and never more than we offer. */
	limit = DNS_UDP_MIN;
	if (r->edns != NULL && r->edns->udp_size > DNS_UDP_MIN)
		limit = r->edns->udp_size < DNS_UDP_OURS ? r->edns->udp_size : DNS_UDP_OURS;
	if (limit < cap)
		w.cap = limit;
	opt_len = r->edns != NULL ? 11 : 0;

	flags = DNS_F_QR | DNS_F_RA | (r->qflags & (0xf << 11)) |
	    (r->qflags & (DNS_F_RD | DNS_F_CD)) | (uint16_t)(r->rcode & 0xf);
	wr16(&w, r->id);
	wr16(&w, flags);
	wr16(&w, r->q != NULL ? 1 : 0);
	wr16(&w, 0);				/* answers: patched below */
	wr16(&w, 0);
	wr16(&w, r->edns != NULL ? 1 : 0);
	if (r->q != NULL) {
		wr_bytes(&w, r->q->name.wire, r->q->name.len);
		wr16(&w, r->q->type);
		wr16(&w, r->q->class);
		if (r->q->type == DNS_T_A) {
			atype = DNS_T_A;
			family = AF_INET;
		} else if (r->q->type == DNS_T_AAAA) {
			atype = DNS_T_AAAA;
			family = AF_INET6;
		}
	}
	if (w.overflow || w.cap - w.len < opt_len) {
		cause_set(cause, "reply header and question do not fit %zu octets", w.cap);
		return -1;
	}
	for (i = 0; atype != 0 && i < r->naddrs; i++) {
		if (r->addrs[i].family != family)
			continue;
		alen = family == AF_INET ? 4 : 16;
		/* 12 octets of record header (pointer name) + address, OPT still to come. */
		if (w.cap - w.len < 12 + alen + opt_len)
			break;
		wr16(&w, 0xc000 | DNS_HDR_LEN);	/* the question's name */
		wr16(&w, atype);
		wr16(&w, DNS_C_IN);
		wr32(&w, r->ttl);
		wr16(&w, (uint16_t)alen);
		wr_bytes(&w, r->addrs[i].addr, alen);
		an++;
	}
	if (r->edns != NULL)
		wr_opt(&w, r->rcode);
	if (w.overflow) {
		cause_set(cause, "reply does not fit %zu octets", w.cap);
		return -1;
	}
	buf[6] = (uint8_t)(an >> 8);
	buf[7] = (uint8_t)an;
	return (ssize_t)w.len;
}

const char *
dns_type_str(uint16_t type, char *buf, size_t len)
{
	static const struct { uint16_t t; const char *s; } names[] = {
		{ DNS_T_A, "A" }, { DNS_T_NS, "NS" }, { DNS_T_CNAME, "CNAME" },
		{ DNS_T_SOA, "SOA" }, { DNS_T_NULL, "NULL" }, { DNS_T_PTR, "PTR" },
		{ DNS_T_MX, "MX" }, { DNS_T_TXT, "TXT" }, { DNS_T_AAAA, "AAAA" },
		{ DNS_T_SRV, "SRV" }, { DNS_T_OPT, "OPT" }, { DNS_T_SVCB, "SVCB" },
		{ DNS_T_HTTPS, "HTTPS" }, { DNS_T_ANY, "ANY" },
	};
	size_t i;

	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		if (names[i].t == type) {
			snprintf(buf, len, "%s", names[i].s);
			return buf;
		}
	}
	snprintf(buf, len, "TYPE%u", type);
	return buf;
}
