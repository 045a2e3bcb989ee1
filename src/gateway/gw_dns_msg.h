/*
 * DNS wire format (RFC 1035, EDNS0 from RFC 6891): a strict parser and the
 * small builder the gateway answers guests with. Pure functions on buffers:
 * no I/O, no allocation, no global state.
 *
 * Every byte a guest sends is hostile. The parser checks each length against
 * the buffer, accepts only backward compression pointers and counts them,
 * caps names at 255 octets and labels at 63, refuses the obsolete extended
 * label types, and fails on any byte past the last record it was told
 * about. A message it accepts has been walked completely.
 */
#ifndef AIRLOCK_GW_DNS_MSG_H
#define AIRLOCK_GW_DNS_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DNS_HDR_LEN		12
#define DNS_NAME_MAX		255	/* wire octets, length bytes and root included */
#define DNS_LABEL_MAX		63
#define DNS_PTR_MAX		64	/* compression jumps while reading one name */
#define DNS_TEXT_MAX		1024	/* presentation form: 4 chars per octet at worst */
#define DNS_MSG_MAX		65535
#define DNS_MSG_MAX_QD		4	/* questions kept by dns_msg_parse */
#define DNS_MSG_MAX_RR		64	/* records (all sections) kept by dns_msg_parse */
#define DNS_UDP_MIN		512	/* what a client without EDNS accepts */
#define DNS_UDP_OURS		1232	/* our EDNS payload size (no fragmentation) */

/* Header flags (second 16-bit word). */
#define DNS_F_QR		0x8000
#define DNS_F_OPCODE(f)		(((f) >> 11) & 0xf)
#define DNS_F_AA		0x0400
#define DNS_F_TC		0x0200
#define DNS_F_RD		0x0100
#define DNS_F_RA		0x0080
#define DNS_F_AD		0x0020
#define DNS_F_CD		0x0010
#define DNS_F_RCODE(f)		((f) & 0xf)

#define DNS_OP_QUERY		0

#define DNS_R_NOERROR		0
#define DNS_R_FORMERR		1
#define DNS_R_SERVFAIL		2
#define DNS_R_NXDOMAIN		3
#define DNS_R_NOTIMP		4
#define DNS_R_REFUSED		5
#define DNS_R_BADVERS		16	/* extended: needs an OPT record */

#define DNS_T_A			1
#define DNS_T_NS		2
#define DNS_T_CNAME		5
#define DNS_T_SOA		6
#define DNS_T_NULL		10
#define DNS_T_PTR		12
#define DNS_T_MX		15
#define DNS_T_TXT		16
#define DNS_T_AAAA		28
#define DNS_T_SRV		33
#define DNS_T_OPT		41
#define DNS_T_SVCB		64
#define DNS_T_HTTPS		65
#define DNS_T_ANY		255

#define DNS_C_IN		1

#define DNS_EDNS_DO		0x8000	/* OPT flags: DNSSEC OK */

/* A name in uncompressed wire form, octets as received (case kept). */
struct dns_name {
	uint8_t		 wire[DNS_NAME_MAX];
	size_t		 len;		/* octets used, root byte included (root alone: 1) */
	int		 nlabels;
};

struct dns_question {
	struct dns_name	 name;
	uint16_t	 type;
	uint16_t	 class;
};

/* One resource record; names and rdata stay in the message buffer. */
struct dns_rr {
	size_t		 name_off;	/* owner name, possibly compressed */
	uint16_t	 type;
	uint16_t	 class;
	uint32_t	 ttl;
	uint16_t	 rdlen;
	size_t		 rdata_off;
};

/* The OPT pseudo-record of a message, if it had one. */
struct dns_edns {
	int		 present;
	uint16_t	 udp_size;	/* requestor's payload size */
	uint8_t		 ext_rcode;	/* upper 8 bits of a 12-bit rcode */
	uint8_t		 version;
	uint16_t	 flags;		/* DNS_EDNS_DO, ... */
};

struct dns_msg {
	uint16_t	 id;
	uint16_t	 flags;
	uint16_t	 qdcount;
	uint16_t	 ancount;
	uint16_t	 nscount;
	uint16_t	 arcount;
	struct dns_question qd[DNS_MSG_MAX_QD];
	struct dns_rr	 rr[DNS_MSG_MAX_RR];	/* answer, then authority, then additional */
	struct dns_edns	 edns;
};

/*
 * Parse a whole message. Fails (cause set) on a short header, more than
 * DNS_MSG_MAX_QD questions or DNS_MSG_MAX_RR records, any malformed name or
 * record, A/AAAA rdata of the wrong size, a CNAME whose rdata is not exactly
 * one name, an OPT record outside the additional section, not owned by the
 * root, repeated, or with broken option framing, and trailing bytes.
 */
int dns_msg_parse(const uint8_t *buf, size_t len, struct dns_msg *, char **cause);

/*
 * Read the name at *off (compression allowed, pointers strictly backwards,
 * at most DNS_PTR_MAX jumps, never into the header). *off moves past the
 * name as it sits at *off (past the first pointer, if any).
 */
int dns_name_read(const uint8_t *buf, size_t len, size_t *off, struct dns_name *,
    char **cause);
/* Presentation form ("www.example.com", root "."), \. \\ \DDD escapes. 0 / -1 if it does not fit. */
int dns_name_text(const struct dns_name *, char *out, size_t outlen);
/*
 * The name as a lower-case host name without the trailing dot, if every
 * label holds only letters, digits, '-' and '_' (what a policy can match).
 * -1 for the root and anything else (spaces, dots or NULs inside labels).
 */
int dns_name_host(const struct dns_name *, char *out, size_t outlen);
/* From dotted text without escapes ("a.b.c" or "a.b.c."; "." is the root). */
int dns_name_from_text(const char *, struct dns_name *, char **cause);
/* Case-insensitive equality (ASCII only, as DNS compares). */
int dns_name_equal(const struct dns_name *, const struct dns_name *);

/* The records of a section of a parsed message: first index and count. */
size_t dns_msg_section(const struct dns_msg *, int section, size_t *count);
#define DNS_SEC_AN		0
#define DNS_SEC_NS		1
#define DNS_SEC_AR		2

/* Address of an A (family AF_INET, 4 octets) or AAAA (AF_INET6, 16) record. -1 otherwise. */
int dns_rr_addr(const uint8_t *buf, size_t len, const struct dns_rr *, int *family,
    uint8_t out[16]);
/* Target of a CNAME record. -1 otherwise. */
int dns_rr_cname(const uint8_t *buf, size_t len, const struct dns_rr *, struct dns_name *);
/* Owner name of a record. */
int dns_rr_name(const uint8_t *buf, size_t len, const struct dns_rr *, struct dns_name *);

/* One address to put in an answer. */
struct dns_addr {
	int		 family;	/* AF_INET or AF_INET6 */
	uint8_t		 addr[16];
};

/* What a reply to a query says. */
struct dns_reply {
	uint16_t	 id;
	uint16_t	 qflags;	/* the query's flags: opcode, RD and CD are echoed */
	int		 rcode;		/* DNS_R_*; above 15 only with edns */
	const struct dns_question *q;	/* echoed as the question, or NULL */
	const struct dns_edns *edns;	/* the query's OPT; the reply carries one; NULL = none */
	const struct dns_addr *addrs;	/* those of q's type become answers */
	size_t		 naddrs;
	uint32_t	 ttl;
};

/*
 * Build a reply into buf: header (QR, RA, the query's opcode/RD/CD, rcode),
 * the question echoed as received, one A/AAAA record per address of the
 * question's type named by a pointer to the question, and our own OPT
 * (payload DNS_UDP_OURS, no options, DO clear) when the query had one.
 * The message is kept within what the client accepts (512 octets, or its
 * EDNS size up to DNS_UDP_OURS): answers that do not fit are left out
 * rather than setting TC, because a shorter address list is still a
 * complete answer and TCP 53 is not served. Returns the length, or -1 with
 * a cause when not even the header, question and OPT fit.
 */
ssize_t dns_reply_build(uint8_t *buf, size_t cap, const struct dns_reply *, char **cause);

/* "A", "AAAA", "HTTPS", ... or "TYPE123" in buf. */
const char *dns_type_str(uint16_t type, char *buf, size_t len);

#endif
