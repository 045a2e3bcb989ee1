/*
 * The gateway's DNS for guests, end to end on loopback: a "guest" UDP socket
 * queries a sandbox attached with the real attach path; the gateway's evdns
 * resolver asks an upstream served by libevent's own DNS server code (an
 * independent implementation) on 127.0.0.1. Checks what the guest gets,
 * what the upstream saw (denied names and other types never reach it), the
 * audit lines, the pins, rate limiting, and cancellation on detach.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <jansson.h>

#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/gw_dns.h"
#include "gateway/gw_dns_msg.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_worker.h"
#include "t.h"

/*
 * The proxy data path is another part's; gw_sandbox.c calls into it. Weak, so
 * the real gw_proxy.o wins once it is in the library.
 */
__attribute__((weak)) void gw_proxy_accept(struct gw_sandbox *sb, int fd) { close(fd); }
__attribute__((weak)) void gw_proxy_close_all(struct gw_sandbox *sb) { }
__attribute__((weak)) void gw_proxy_policy_changed(struct gw_sandbox *sb) { }
__attribute__((weak)) void gw_proxy_sandbox_free(struct gw_sandbox *sb) { }

static struct gw		 gw;
static struct gw_worker		 w;	/* every sandbox here, on gw.base */
static int			 guest = -1;
static struct sockaddr_in	 gw_dns_addr;
static char			 audit_dir[64];

/* Upstream: what it was asked, and a request it keeps unanswered. */
static int			 up_queries;
static char			 up_last[256];
static struct evdns_server_request *up_held[4];
static int			 nheld;

static void
upstream_cb(struct evdns_server_request *req, void *arg)
{
	struct evdns_server_question	*q;
	char				 name[256];
	uint8_t				 a[2][4] = { { 192, 0, 2, 10 }, { 192, 0, 2, 11 } };
	uint8_t				 bad[2][4] = { { 127, 0, 0, 1 }, { 10, 1, 2, 3 } };
	uint8_t				 mixed[2][4] = { { 192, 0, 2, 20 }, { 169, 254, 169, 254 } };
	uint8_t				 tgt[4] = { 192, 0, 2, 30 };
	uint8_t				 six[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x10 };
	size_t				 i;

	if (req->nquestions != 1) {
		evdns_server_request_respond(req, DNS_ERR_FORMAT);
		return;
	}
	q = req->questions[0];
	up_queries++;
	/* evdns randomises the case of what it sends (0x20); compare folded. */
	for (i = 0; q->name[i] != '\0' && i < sizeof name - 1; i++)
		name[i] = (char)tolower((unsigned char)q->name[i]);
	name[i] = '\0';
	snprintf(up_last, sizeof up_last, "%s", name);

	if (strcmp(name, "slow.wild.test") == 0 && nheld < 4) {
		up_held[nheld++] = req;
		return;
	}
	if (strcmp(name, "nx.wild.test") == 0) {
		evdns_server_request_respond(req, DNS_ERR_NOTEXIST);
		return;
	}
	if (q->type == EVDNS_TYPE_AAAA) {
		if (strcmp(name, "allowed.test") == 0)
			evdns_server_request_add_aaaa_reply(req, q->name, 1, six, 60);
		evdns_server_request_respond(req, 0);
		return;
	}
	if (strcmp(name, "allowed.test") == 0)
		evdns_server_request_add_a_reply(req, q->name, 2, a, 3600);
	else if (strcmp(name, "rebind.wild.test") == 0)
		evdns_server_request_add_a_reply(req, q->name, 2, bad, 60);
	else if (strcmp(name, "mixed.wild.test") == 0)
		evdns_server_request_add_a_reply(req, q->name, 2, mixed, 60);
	else if (strcmp(name, "cname.wild.test") == 0) {
		evdns_server_request_add_cname_reply(req, q->name, "target.elsewhere", 60);
		evdns_server_request_add_a_reply(req, "target.elsewhere", 1, tgt, 45);
	}
	evdns_server_request_respond(req, 0);
}

static int
udp_socket(struct sockaddr_in *bound)
{
	socklen_t	 len = sizeof *bound;
	int		 fd;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1)
		abort();
	memset(bound, 0, sizeof *bound);
	bound->sin_family = AF_INET;
	bound->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)bound, sizeof *bound) == -1 ||
	    getsockname(fd, (struct sockaddr *)bound, &len) == -1)
		abort();
	return fd;
}

static struct gw_policy *
policy(const char *text)
{
	json_error_t	 err;
	json_t		*j = json_loads(text, 0, &err);
	struct gw_policy *p;
	char		*cause = NULL;

	if (j == NULL || (p = gw_policy_parse(j, &cause)) == NULL) {
		fprintf(stderr, "policy: %s\n", cause ? cause : err.text);
		exit(1);
	}
	json_decref(j);
	return p;
}

static struct gw_sandbox *
attach(const char *id, const char *pol)
{
	struct sockaddr_in	 sin;
	int			 tcp, dns;
	char			*cause = NULL;

	if ((tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		abort();
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(tcp, (struct sockaddr *)&sin, sizeof sin) == -1 || listen(tcp, 8) == -1)
		abort();
	dns = udp_socket(&gw_dns_addr);
	if (gw_sandbox_attach(&w, id, "p", policy(pol), tcp, dns, &cause) != 0) {
		fprintf(stderr, "attach: %s\n", cause);
		exit(1);
	}
	return gw_sandbox_find(&w, id);
}

/* A query in wire form. */
static size_t
query(uint8_t *b, uint16_t id, uint16_t flags, const char *name, uint16_t type,
    uint16_t class, int edns_version)
{
	struct dns_name	 n;
	size_t		 len = 0;

	if (dns_name_from_text(name, &n, NULL) != 0)
		abort();
	b[len++] = (uint8_t)(id >> 8);
	b[len++] = (uint8_t)id;
	b[len++] = (uint8_t)(flags >> 8);
	b[len++] = (uint8_t)flags;
	memcpy(b + len, "\0\1\0\0\0\0\0", 7);
	b[len + 7] = edns_version >= 0 ? 1 : 0;
	len += 8;
	memcpy(b + len, n.wire, n.len);
	len += n.len;
	b[len++] = (uint8_t)(type >> 8);
	b[len++] = (uint8_t)type;
	b[len++] = (uint8_t)(class >> 8);
	b[len++] = (uint8_t)class;
	if (edns_version >= 0) {
		/* root, OPT, 4096, ext-rcode 0, version, DO, no options */
		uint8_t opt[11] = { 0, 0, 41, 0x10, 0, 0, (uint8_t)edns_version, 0x80, 0, 0, 0 };

		memcpy(b + len, opt, sizeof opt);
		len += sizeof opt;
	}
	return len;
}

static void
send_raw(const uint8_t *b, size_t len)
{
	if (sendto(guest, b, len, 0, (struct sockaddr *)&gw_dns_addr, sizeof gw_dns_addr) !=
	    (ssize_t)len)
		abort();
}

/* Run the loop until the guest has a datagram or ms pass; its length or -1. */
static ssize_t
recv_reply(uint8_t *b, size_t cap, int ms)
{
	struct pollfd	 pfd = { guest, POLLIN, 0 };
	ssize_t		 n;
	int		 i;

	for (i = 0; i < ms / 5; i++) {
		event_base_loop(gw.base, EVLOOP_NONBLOCK);
		if ((n = recv(guest, b, cap, MSG_DONTWAIT)) >= 0)
			return n;
		pfd.revents = 0;
		(void)poll(&pfd, 1, 5);
	}
	return -1;
}

/* Ask and parse the answer; 0 if one came and parsed. */
static int
ask(struct dns_msg *r, uint8_t *out, size_t *outlen, uint16_t id, const char *name,
    uint16_t type)
{
	uint8_t	 b[512];
	ssize_t	 n;

	send_raw(b, query(b, id, DNS_F_RD, name, type, DNS_C_IN, -1));
	if ((n = recv_reply(out, 2048, 3000)) < 0)
		return -1;
	*outlen = (size_t)n;
	return dns_msg_parse(out, (size_t)n, r, NULL);
}

/* The audit log has a line with every needle. */
static int
audited(const char *n1, const char *n2, const char *n3)
{
	char	 path[128], *text = NULL, *line, *save = NULL;
	size_t	 len;
	int	 found = 0;

	snprintf(path, sizeof path, "%s/audit.log", audit_dir);
	if (read_file(path, 1 << 20, &text, &len, NULL) != 0)
		return 0;
	for (line = strtok_r(text, "\n", &save); line != NULL && !found;
	    line = strtok_r(NULL, "\n", &save))
		found = strstr(line, n1) != NULL && (n2 == NULL || strstr(line, n2) != NULL) &&
		    (n3 == NULL || strstr(line, n3) != NULL);
	free(text);
	return found;
}

static struct sockaddr *
sa4(const char *text)
{
	static struct sockaddr_in sin;

	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	inet_pton(AF_INET, text, &sin.sin_addr);
	return (struct sockaddr *)&sin;
}

static void
test_allowed(void)
{
	struct gw_sandbox	*sb = gw_sandbox_find(&w, "sb1");
	struct dns_msg		 r;
	struct dns_name		 n;
	uint8_t			 out[2048], a[16];
	size_t			 len;
	int			 family, before = up_queries;

	/* Mixed case as a 0x20 client sends it comes back byte for byte. */
	CHECK(ask(&r, out, &len, 0x1111, "AlLoWeD.TeSt", DNS_T_A) == 0);
	CHECK(r.id == 0x1111 && DNS_F_RCODE(r.flags) == DNS_R_NOERROR);
	CHECK((r.flags & DNS_F_QR) && (r.flags & DNS_F_RA) && (r.flags & DNS_F_RD));
	CHECK(r.qdcount == 1 && memcmp(r.qd[0].name.wire, "\7AlLoWeD\4TeSt", 13) == 0);
	CHECK(r.ancount == 2 && r.nscount == 0 && r.arcount == 0);
	CHECK(dns_rr_addr(out, len, &r.rr[0], &family, a) == 0 && family == AF_INET &&
	    memcmp(a, "\xc0\x00\x02\x0a", 4) == 0);
	/* Capped TTL, owner is the name asked. */
	CHECK(r.rr[0].ttl == GW_DNS_TTL_MAX && r.rr[1].ttl == GW_DNS_TTL_MAX);
	CHECK(dns_rr_name(out, len, &r.rr[1], &n) == 0 && dns_name_equal(&n, &r.qd[0].name));
	CHECK(up_queries == before + 1);
	CHECK(audited("\"qname\":\"AlLoWeD.TeSt\"", "\"decision\":\"allow\"",
	    "\"ip\":\"192.0.2.10,192.0.2.11\""));
	CHECK(gw_pins_has(sb->pins, "allowed.test", sa4("192.0.2.11")));
	CHECK(!gw_pins_has(sb->pins, "allowed.test", sa4("192.0.2.12")));

	CHECK(ask(&r, out, &len, 0x1112, "allowed.test", DNS_T_AAAA) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NOERROR && r.ancount == 1);
	CHECK(dns_rr_addr(out, len, &r.rr[0], &family, a) == 0 && family == AF_INET6 &&
	    a[0] == 0x20 && a[15] == 0x10 && r.rr[0].ttl <= 60);

	/* CNAME chains are flattened: one A record for the name asked, no CNAME. */
	CHECK(ask(&r, out, &len, 0x1113, "cname.wild.test", DNS_T_A) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NOERROR && r.ancount == 1);
	CHECK(r.rr[0].type == DNS_T_A && r.rr[0].ttl == 45);
	CHECK(dns_rr_addr(out, len, &r.rr[0], &family, a) == 0 && a[3] == 30);
	CHECK(dns_rr_name(out, len, &r.rr[0], &n) == 0 && dns_name_equal(&n, &r.qd[0].name));

	CHECK(ask(&r, out, &len, 0x1114, "nx.wild.test", DNS_T_A) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NXDOMAIN && r.ancount == 0);

	/* EDNS in (DO set), our OPT out (DO clear: nothing here is signed). */
	{
		uint8_t	 b[512];
		ssize_t	 m;

		send_raw(b, query(b, 0x1115, DNS_F_RD, "allowed.test", DNS_T_A, DNS_C_IN, 0));
		CHECK((m = recv_reply(out, sizeof out, 3000)) > 0 &&
		    dns_msg_parse(out, (size_t)m, &r, NULL) == 0);
		CHECK(r.ancount == 2 && r.arcount == 1 && r.edns.present &&
		    r.edns.udp_size == DNS_UDP_OURS && r.edns.flags == 0);
	}
}

/* Rebinding: answers in denied ranges never reach the guest. */
static void
test_rebinding(void)
{
	struct gw_sandbox	*sb = gw_sandbox_find(&w, "sb1");
	struct dns_msg		 r;
	uint8_t			 out[2048], a[16];
	size_t			 len;
	int			 family;

	CHECK(ask(&r, out, &len, 0x2221, "rebind.wild.test", DNS_T_A) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NOERROR && r.ancount == 0);
	CHECK(audited("rebind.wild.test", "\"decision\":\"deny\"", "\"reason\":\"loopback\""));
	CHECK(!gw_pins_has(sb->pins, "rebind.wild.test", sa4("127.0.0.1")));
	CHECK(!gw_pins_has(sb->pins, "rebind.wild.test", sa4("10.1.2.3")));

	CHECK(ask(&r, out, &len, 0x2222, "mixed.wild.test", DNS_T_A) == 0);
	CHECK(r.ancount == 1 && dns_rr_addr(out, len, &r.rr[0], &family, a) == 0 && a[3] == 20);
	CHECK(!gw_pins_has(sb->pins, "mixed.wild.test", sa4("169.254.169.254")));
	CHECK(gw_pins_has(sb->pins, "mixed.wild.test", sa4("192.0.2.20")));
}

/* What never reaches the upstream: names not allowed, and every other type. */
static void
test_not_forwarded(void)
{
	static const uint16_t types[] = { DNS_T_TXT, DNS_T_NULL, DNS_T_MX, DNS_T_ANY,
	    DNS_T_HTTPS, DNS_T_SVCB, DNS_T_CNAME, DNS_T_PTR };
	struct dns_msg	 r;
	uint8_t		 out[2048];
	size_t		 len, i;
	int		 before = up_queries;

	CHECK(ask(&r, out, &len, 0x3331, "evil.example", DNS_T_A) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NXDOMAIN && r.ancount == 0);
	CHECK(audited("evil.example", "\"decision\":\"deny\"", "not allowed"));
	/* A tunnel-shaped name under an allowed apex that is not itself allowed. */
	CHECK(ask(&r, out, &len, 0x3332, "aGVsbG8gd29ybGQ.wild.test.evil", DNS_T_TXT) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NXDOMAIN);
	/* The apex of a wildcard is not covered by it. */
	CHECK(ask(&r, out, &len, 0x3333, "wild.test", DNS_T_A) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_NXDOMAIN);
	for (i = 0; i < sizeof types / sizeof types[0]; i++) {
		CHECK(ask(&r, out, &len, (uint16_t)(0x3340 + i), "allowed.test", types[i]) == 0);
		CHECK(DNS_F_RCODE(r.flags) == DNS_R_NOERROR && r.ancount == 0 &&
		    r.qd[0].type == types[i]);
	}
	CHECK(audited("\"qtype\":\"HTTPS\"", "HTTPS/SVCB stripped", NULL));
	CHECK(audited("\"qtype\":\"TXT\"", "type not served", NULL));
	/* "allowed.test" as one label (a dot inside it) is no host name. */
	{
		uint8_t	 b[512];
		ssize_t	 m;

		memcpy(b, "\x33\x50\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
		    "\x0c" "allowed.test" "\x00\x00\x01\x00\x01", 30);
		send_raw(b, 30);
		CHECK((m = recv_reply(out, sizeof out, 3000)) > 0 &&
		    dns_msg_parse(out, (size_t)m, &r, NULL) == 0 &&
		    DNS_F_RCODE(r.flags) == DNS_R_NXDOMAIN);
		CHECK(audited("allowed\\\\.test", "not a host name", NULL));
	}
	CHECK(up_queries == before);
}

static void
test_malformed(void)
{
	struct dns_msg	 r;
	uint8_t		 b[512], out[2048];
	ssize_t		 n;
	size_t		 len;

	/* Shorter than a header: nothing to answer. */
	send_raw((const uint8_t *)"\x12\x34\x01", 3);
	CHECK(recv_reply(out, sizeof out, 200) == -1);
	/* A response (QR=1) is never answered. */
	len = query(b, 0x4441, DNS_F_QR | DNS_F_RD, "allowed.test", DNS_T_A, DNS_C_IN, -1);
	send_raw(b, len);
	CHECK(recv_reply(out, sizeof out, 200) == -1);
	/* Trailing garbage: FORMERR, header only. */
	len = query(b, 0x4442, DNS_F_RD, "allowed.test", DNS_T_A, DNS_C_IN, -1);
	b[len++] = 0;
	send_raw(b, len);
	CHECK((n = recv_reply(out, sizeof out, 3000)) == DNS_HDR_LEN);
	CHECK(n > 0 && dns_msg_parse(out, (size_t)n, &r, NULL) == 0 && r.id == 0x4442 &&
	    DNS_F_RCODE(r.flags) == DNS_R_FORMERR && r.qdcount == 0);
	CHECK(audited("malformed: 1 octets of trailing garbage", NULL, NULL));
	/* A compression loop in the question. */
	memcpy(b, "\x44\x43\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\xc0\x0c\x00\x01\x00\x01", 18);
	send_raw(b, 18);
	CHECK((n = recv_reply(out, sizeof out, 3000)) > 0 &&
	    dns_msg_parse(out, (size_t)n, &r, NULL) == 0 && DNS_F_RCODE(r.flags) == DNS_R_FORMERR);
	/* Two questions. */
	len = query(b, 0x4444, DNS_F_RD, "allowed.test", DNS_T_A, DNS_C_IN, -1);
	b[5] = 2;
	memcpy(b + len, b + 12, len - 12);
	send_raw(b, len + len - 12);
	CHECK((n = recv_reply(out, sizeof out, 3000)) > 0 &&
	    dns_msg_parse(out, (size_t)n, &r, NULL) == 0 && DNS_F_RCODE(r.flags) == DNS_R_FORMERR);
	/* Opcode STATUS (2): NOTIMP. */
	len = query(b, 0x4445, 2 << 11, "allowed.test", DNS_T_A, DNS_C_IN, -1);
	send_raw(b, len);
	CHECK((n = recv_reply(out, sizeof out, 3000)) > 0 &&
	    dns_msg_parse(out, (size_t)n, &r, NULL) == 0 && DNS_F_RCODE(r.flags) == DNS_R_NOTIMP &&
	    DNS_F_OPCODE(r.flags) == 2);
	/* EDNS version 1: BADVERS, whose upper bits ride in our OPT. */
	len = query(b, 0x4446, DNS_F_RD, "allowed.test", DNS_T_A, DNS_C_IN, 1);
	send_raw(b, len);
	CHECK((n = recv_reply(out, sizeof out, 3000)) > 0 &&
	    dns_msg_parse(out, (size_t)n, &r, NULL) == 0 && r.edns.present &&
	    r.edns.ext_rcode == 1 && DNS_F_RCODE(r.flags) == 0);
	/* Class CHAOS (version.bind and friends): REFUSED. */
	len = query(b, 0x4447, DNS_F_RD, "version.bind", DNS_T_TXT, 3, -1);
	send_raw(b, len);
	CHECK((n = recv_reply(out, sizeof out, 3000)) > 0 &&
	    dns_msg_parse(out, (size_t)n, &r, NULL) == 0 && DNS_F_RCODE(r.flags) == DNS_R_REFUSED);
}

/* The sum of the rate-limit summary lines' counts for a sandbox. */
static int
limited_total(const char *id)
{
	char		 path[128], needle[64], *text = NULL, *line, *save = NULL, *p;
	size_t		 len;
	unsigned	 n;
	int		 total = 0;

	snprintf(path, sizeof path, "%s/audit.log", audit_dir);
	snprintf(needle, sizeof needle, "\"sandbox\":\"%s\"", id);
	if (read_file(path, 1 << 20, &text, &len, NULL) != 0)
		return -1;
	for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, needle) != NULL &&
		    strstr(line, "\"event\":\"deny_summary\"") != NULL &&
		    strstr(line, "\"reason\":\"rate limited\"") != NULL &&
		    (p = strstr(line, "\"count\":")) != NULL &&
		    sscanf(p, "\"count\":%u", &n) == 1)
			total += (int)n;
	free(text);
	return total;
}

static void
count_reply(const uint8_t *out, ssize_t n, int *refused, int *answered)
{
	struct dns_msg r;

	if (dns_msg_parse(out, (size_t)n, &r, NULL) != 0)
		return;
	if (DNS_F_RCODE(r.flags) == DNS_R_REFUSED)
		(*refused)++;
	else
		(*answered)++;
}

/* A flood is refused past the burst, and the upstream is not flooded. */
static void
test_rate_limit(void)
{
	struct gw_sandbox	*sb = attach("sb2", "{\"mode\":\"allowlist\",\"allow\":[\"allowed.test\"]}");
	uint8_t			 b[512], out[2048];
	ssize_t			 n;
	int			 i, refused = 0, answered = 0;

	for (i = 0; i < GW_DNS_BURST + 60; i++) {
		send_raw(b, query(b, (uint16_t)i, DNS_F_RD, "allowed.test", DNS_T_TXT, DNS_C_IN, -1));
		/* Keep the socket buffers small: read what came back so far. */
		if (i % 20 == 19)
			while ((n = recv_reply(out, sizeof out, 5)) > 0)
				count_reply(out, n, &refused, &answered);
	}
	while ((n = recv_reply(out, sizeof out, 200)) > 0)
		count_reply(out, n, &refused, &answered);
	CHECK(answered >= GW_DNS_BURST && answered < GW_DNS_BURST + 60);
	CHECK(refused > 0 && refused + answered == GW_DNS_BURST + 60);
	CHECK(sb->counters.dns_queries == GW_DNS_BURST + 60);
	/* The window closes on its own timer: the summary comes without another query. */
	for (i = 0; i < (GW_DENY_WINDOW_MS + 300) / 5; i++) {
		event_base_loop(gw.base, EVLOOP_NONBLOCK);
		usleep(5000);
	}
	CHECK(audited("\"sandbox\":\"sb2\"", "\"event\":\"deny_summary\"", "rate limited"));
	CHECK(limited_total("sb2") == refused);
	gw_sandbox_detach(sb);
	/* Every refusal is accounted for once the sandbox is gone. */
	CHECK(limited_total("sb2") == refused);
}

/* Mode none: REFUSED, even for a name a rule would allow. */
static void
test_mode_none(void)
{
	struct gw_sandbox	*sb = attach("sb3", "{\"mode\":\"none\"}");
	struct dns_msg		 r;
	uint8_t			 out[2048];
	size_t			 len;

	CHECK(ask(&r, out, &len, 0x5551, "allowed.test", DNS_T_A) == 0);
	CHECK(DNS_F_RCODE(r.flags) == DNS_R_REFUSED && r.ancount == 0);
	CHECK(audited("\"sandbox\":\"sb3\"", "network mode none", NULL));
	gw_sandbox_detach(sb);
}

/* Detach with a lookup in flight: cancelled, nothing answers, nothing leaks. */
static void
test_detach_pending(void)
{
	struct gw_sandbox	*sb = attach("sb4",
	    "{\"mode\":\"allowlist\",\"allow\":[\"*.wild.test\"]}");
	uint8_t			 b[512], out[2048];
	int			 i;

	send_raw(b, query(b, 0x6661, DNS_F_RD, "slow.wild.test", DNS_T_AAAA, DNS_C_IN, -1));
	/* AAAA: the gateway asks for A and AAAA; hold both. */
	for (i = 0; i < 200 && nheld < 2; i++)
		(void)recv_reply(out, sizeof out, 5);
	CHECK(nheld == 2);
	CHECK(sb->dns != NULL);
	gw_sandbox_detach(sb);
	/* The cancelled evdns callbacks run now; ASan would see a use after free. */
	for (i = 0; i < 20; i++)
		event_base_loop(gw.base, EVLOOP_NONBLOCK);
	/* Answering late must not reach anything freed either. */
	for (i = 0; i < nheld; i++)
		evdns_server_request_respond(up_held[i], DNS_ERR_NOTEXIST);
	nheld = 0;
	CHECK(recv_reply(out, sizeof out, 300) == -1);
}

static int resolved_calls, resolved_err;
static size_t resolved_n;

static void
resolved(int err, const struct gw_addrs *a, void *arg)
{
	resolved_calls++;
	resolved_err = err;
	resolved_n = a->n;
}

/* gw_resolve alone: never calls back inside the call, once after, never after cancel. */
static void
test_resolve_api(void)
{
	struct gw_sandbox	*sb = gw_sandbox_find(&w, "sb1");
	struct gw_resolve_req	*req;
	uint8_t			 out[64];
	int			 i;

	resolved_calls = 0;
	req = gw_resolve(sb, "allowed.test", 1, resolved, NULL, NULL);
	CHECK(req != NULL && resolved_calls == 0);
	for (i = 0; i < 200 && resolved_calls == 0; i++)
		(void)recv_reply(out, sizeof out, 5);
	CHECK(resolved_calls == 1 && resolved_err == 0 && resolved_n == 3);
	(void)recv_reply(out, sizeof out, 100);
	CHECK(resolved_calls == 1);

	/* Cancelled twice (a close path that runs again): no call, no crash. */
	resolved_calls = 0;
	req = gw_resolve(sb, "mixed.wild.test", 0, resolved, NULL, NULL);
	CHECK(req != NULL);
	gw_resolve_cancel(req);
	gw_resolve_cancel(req);
	(void)recv_reply(out, sizeof out, 200);
	CHECK(resolved_calls == 0);
}

/* The pin table: per-address expiry, merge, LRU cap, reverse lookup. */
static void
test_pins(void)
{
	struct gw_pins		*p = gw_pins_new();
	struct sockaddr_storage	 ss[3];
	struct gw_addrs		 a;
	const char		*names[4];
	char			 name[32];
	int			 i;

	memset(ss, 0, sizeof ss);
	memcpy(&ss[0], sa4("192.0.2.1"), sizeof(struct sockaddr_in));
	memcpy(&ss[1], sa4("192.0.2.2"), sizeof(struct sockaddr_in));
	memcpy(&ss[2], sa4("192.0.2.3"), sizeof(struct sockaddr_in));
	memset(&a, 0, sizeof a);
	a.addrs = ss;
	a.n = 2;
	a.ttl = 30;
	gw_pins_add(p, "a.test", &a);
	CHECK(gw_pins_has(p, "a.test", sa4("192.0.2.1")));
	CHECK(!gw_pins_has(p, "a.test", sa4("192.0.2.3")));
	CHECK(!gw_pins_has(p, "b.test", sa4("192.0.2.1")));
	/* The name rotates: old addresses stay pinned until they expire. */
	a.addrs = &ss[2];
	a.n = 1;
	gw_pins_add(p, "a.test", &a);
	CHECK(gw_pins_has(p, "a.test", sa4("192.0.2.1")) && gw_pins_has(p, "a.test", sa4("192.0.2.3")));
	/* A shared address names both. */
	gw_pins_add(p, "cdn.test", &a);
	CHECK(gw_pins_names_for(p, sa4("192.0.2.3"), names, 4) == 2);
	CHECK_STR(names[0], "cdn.test");
	CHECK(gw_pins_names_for(p, sa4("192.0.2.3"), names, 1) == 1);
	CHECK(gw_pins_names_for(p, sa4("198.51.100.1"), names, 4) == 0);
	/* A million names cost at most GW_PINS_MAX entries; the oldest go first. */
	for (i = 0; i < 3 * GW_PINS_MAX; i++) {
		snprintf(name, sizeof name, "n%d.test", i);
		gw_pins_add(p, name, &a);
		if (i == 10)
			CHECK(gw_pins_has(p, "a.test", sa4("192.0.2.1")));	/* used: moves up */
	}
	CHECK(!gw_pins_has(p, "n0.test", sa4("192.0.2.3")));
	CHECK(gw_pins_has(p, "n3071.test", sa4("192.0.2.3")));
	snprintf(name, sizeof name, "n%d.test", 3 * GW_PINS_MAX - GW_PINS_MAX);
	CHECK(gw_pins_has(p, name, sa4("192.0.2.3")));
	snprintf(name, sizeof name, "n%d.test", 3 * GW_PINS_MAX - GW_PINS_MAX - 1);
	CHECK(!gw_pins_has(p, name, sa4("192.0.2.3")));
	CHECK(gw_pins_names_for(p, sa4("192.0.2.3"), names, 4) == 4);
	/* Full: a name in use survives, the least recently used goes. */
	snprintf(name, sizeof name, "n%d.test", 2 * GW_PINS_MAX);
	CHECK(gw_pins_has(p, name, sa4("192.0.2.3")));
	gw_pins_add(p, "one-more.test", &a);
	CHECK(gw_pins_has(p, name, sa4("192.0.2.3")));
	snprintf(name, sizeof name, "n%d.test", 2 * GW_PINS_MAX + 1);
	CHECK(!gw_pins_has(p, name, sa4("192.0.2.3")));
	gw_pins_free(p);
}

int
main(void)
{
	struct evdns_server_port	*up;
	struct sockaddr_in		 upaddr, gaddr;
	char				 resolver[64], *cause = NULL;
	int				 upfd;

	signal(SIGPIPE, SIG_IGN);
	T_RUN(test_pins);

	memset(&gw, 0, sizeof gw);
	if ((gw.base = event_base_new()) == NULL)
		abort();
	gw_worker_init_inline(&w, &gw, gw.base);
	upfd = udp_socket(&upaddr);
	up = evdns_add_server_port_with_base(gw.base, upfd, 0, upstream_cb, NULL);
	snprintf(resolver, sizeof resolver, "127.0.0.1:%u", ntohs(upaddr.sin_port));
	if ((w.dns = gw_resolver_new(gw.base, resolver, &cause)) == NULL) {
		fprintf(stderr, "resolver: %s\n", cause);
		return 1;
	}
	CHECK(gw_resolver_new(gw.base, "not an address", &cause) == NULL);
	CHECK_CAUSE(cause, "bad resolver address");
	free(cause);
	snprintf(audit_dir, sizeof audit_dir, "/tmp/test_gw_dns.XXXXXX");
	if (mkdtemp(audit_dir) == NULL || (gw.audit = gw_audit_open(audit_dir, 0, 1, NULL)) == NULL)
		abort();
	guest = udp_socket(&gaddr);
	attach("sb1", "{\"mode\":\"allowlist\",\"allow\":[\"allowed.test\",\"*.wild.test\"]}");

	T_RUN(test_allowed);
	T_RUN(test_rebinding);
	T_RUN(test_not_forwarded);
	T_RUN(test_malformed);
	T_RUN(test_resolve_api);
	T_RUN(test_rate_limit);
	T_RUN(test_mode_none);
	T_RUN(test_detach_pending);

	while (!TAILQ_EMPTY(&w.sandboxes))
		gw_sandbox_detach(TAILQ_FIRST(&w.sandboxes));
	event_base_loop(gw.base, EVLOOP_NONBLOCK);
	evdns_base_free(w.dns, 0);
	evdns_close_server_port(up);
	close(upfd);
	close(guest);
	gw_audit_close(gw.audit);
	event_base_free(gw.base);
	if (getenv("KEEP_AUDIT") == NULL)
		(void)remove_tree(audit_dir, NULL);
	return t_done();
}
