/*
 * The island's drop counters: the parser of what libnftables prints, and,
 * as root, a real island whose tap gets frames a hostile guest would send
 * (written to the tap from the host side is the guest sending them): each
 * lands in its own counter, a read resets them, and allowed traffic counts
 * nothing.
 */
#include <sys/uio.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>

#include <stdint.h>
#include <unistd.h>

#include "common/util.h"
#include "net/net_drops.h"
#include "net/net_island.h"
#include "t.h"

static void
test_parse(void)
{
	struct net_drops d;
	char *cause = NULL;

	CHECK(net_drops_parse("{\"nftables\":[{\"metainfo\":{\"version\":\"1.0.6\"}},"
	    "{\"counter\":{\"family\":\"netdev\",\"name\":\"drop_spoofed\",\"table\":\"airlock\","
	    "\"handle\":2,\"packets\":3,\"bytes\":180}},"
	    "{\"counter\":{\"family\":\"inet\",\"name\":\"drop_spoofed\",\"table\":\"airlock\","
	    "\"handle\":7,\"packets\":4,\"bytes\":240}},"
	    "{\"counter\":{\"family\":\"inet\",\"name\":\"drop_udp\",\"table\":\"airlock\","
	    "\"packets\":10,\"bytes\":1}},"
	    "{\"counter\":{\"family\":\"inet\",\"name\":\"drop_udp\",\"table\":\"other\","
	    "\"packets\":99,\"bytes\":1}},"
	    "{\"counter\":{\"family\":\"inet\",\"name\":\"mine\",\"table\":\"airlock\","
	    "\"packets\":99,\"bytes\":1}},"
	    "{\"counter\":{\"family\":\"inet\",\"name\":\"drop_icmp\",\"table\":\"airlock\","
	    "\"packets\":-1}},"
	    "{\"counter\":{\"name\":\"drop_icmp\",\"table\":\"airlock\",\"packets\":\"7\"}},"
	    "{\"table\":{\"name\":\"airlock\"}}]}", &d, &cause) == 0);
	/* Summed over families; other tables, unknown names, bad counts ignored. */
	CHECK(d.packets[NET_DROP_SPOOFED] == 7);
	CHECK(d.packets[NET_DROP_UDP] == 10);
	CHECK(d.packets[NET_DROP_ICMP] == 0);
	CHECK(net_drops_total(&d) == 17);
	CHECK(net_drops_parse("{\"nftables\":[]}", &d, &cause) == 0 && net_drops_total(&d) == 0);
	CHECK(net_drops_parse("", &d, &cause) == -1);
	CHECK_CAUSE(cause, "nftables counters");
	free(cause);
	cause = NULL;
	CHECK(net_drops_parse("{\"counters\":[]}", &d, &cause) == -1);
	CHECK_CAUSE(cause, "no \"nftables\" array");
	free(cause);
	cause = NULL;
	CHECK(net_drops_parse("[1]", &d, &cause) == -1);
	free(cause);
	/* Every reason has a counter name, a kind and a text, and names are distinct. */
	for (int i = 0; i < NET_DROP_N; i++) {
		CHECK(net_drop_what[i].counter != NULL && net_drop_what[i].kind != NULL &&
		    net_drop_what[i].reason != NULL);
		for (int k = 0; k < i; k++)
			CHECK(strcmp(net_drop_what[i].counter, net_drop_what[k].counter) != 0);
	}
}

/* --- a real island ---------------------------------------------------------- */

static const uint8_t guest_mac[6] = { 0x52, 0x54, 0x00, 0x0a, 0x00, 0x02 };
static const uint8_t host_mac[6] = NET_HOST_MAC_BYTES;

static uint16_t
csum(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* One frame as the guest would send it: vnet header, ethernet, then what. */
static void
send_frame(int tap, const uint8_t *src_mac, uint16_t ethertype, const void *l3, size_t len)
{
	uint8_t f[1600] = { 0 };
	size_t off = 10;	/* struct virtio_net_hdr, all zero: no offloads */

	memcpy(f + off, host_mac, 6);
	memcpy(f + off + 6, src_mac, 6);
	f[off + 12] = (uint8_t)(ethertype >> 8);
	f[off + 13] = (uint8_t)ethertype;
	memcpy(f + off + 14, l3, len);
	CHECK(write(tap, f, off + 14 + len) == (ssize_t)(off + 14 + len));
}

/* IPv4 from src to dst with protocol proto and payload (UDP: dport). */
static void
send_ip(int tap, const uint8_t *mac, const char *src, const char *dst, int proto, int dport,
    int icmp_type)
{
	uint8_t p[64] = { 0 };
	struct iphdr *ip = (struct iphdr *)p;
	size_t len = sizeof *ip + 8 + 4;

	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = (uint8_t)proto;
	ip->tot_len = htons((uint16_t)len);
	inet_pton(AF_INET, src, &ip->saddr);
	inet_pton(AF_INET, dst, &ip->daddr);
	ip->check = htons(csum(ip, sizeof *ip));
	if (proto == IPPROTO_UDP) {
		struct udphdr *u = (struct udphdr *)(p + sizeof *ip);

		u->source = htons(40000);
		u->dest = htons((uint16_t)dport);
		u->len = htons(8 + 4);
	} else if (proto == IPPROTO_ICMP) {
		p[sizeof *ip] = (uint8_t)icmp_type;
		uint16_t c = htons(csum(p + sizeof *ip, 12));
		memcpy(p + sizeof *ip + 2, &c, 2);
	}
	send_frame(tap, mac, 0x0800, p, len);
}

static void
test_island(void)
{
	struct net_island ni;
	struct net_drops d;
	char name[32], *cause = NULL;
	uint8_t v6[40] = { 0x60 }, other_mac[6] = { 0x52, 0x54, 0x00, 0x66, 0x66, 0x66 };
	int tap, nsfd;

	if (geteuid() != 0) {
		fprintf(stderr, "   (skipped: not root)\n");
		return;
	}
	snprintf(name, sizeof name, "unitdrops%d", (int)getpid());
	if (net_island_create(name, &ni, &cause) == -1) {
		fprintf(stderr, "island: %s\n", cause);
		CHECK(0);
		free(cause);
		return;
	}
	CHECK((tap = net_island_open_tap(&ni, &cause)) != -1);
	CHECK((nsfd = net_island_open_ns(&ni, &cause)) != -1);
	if (tap == -1 || nsfd == -1)
		goto out;
	CHECK(net_island_drops(nsfd, &d, &cause) == 0 && net_drops_total(&d) == 0);

	for (int i = 0; i < 3; i++)
		send_ip(tap, guest_mac, NET_GUEST_ADDR, "192.0.2.7", IPPROTO_UDP, 9999, 0);
	send_ip(tap, guest_mac, NET_GUEST_ADDR, "192.0.2.7", IPPROTO_UDP, 443, 0);
	send_ip(tap, guest_mac, NET_GUEST_ADDR, "192.0.2.7", IPPROTO_ICMP, 0, 8);
	send_ip(tap, guest_mac, NET_GUEST_ADDR, NET_HOST_ADDR, IPPROTO_ICMP, 0, 13);
	send_ip(tap, guest_mac, NET_GUEST_ADDR, "192.0.2.7", 47 /* GRE */, 0, 0);
	send_ip(tap, guest_mac, "10.0.0.3", "192.0.2.7", IPPROTO_UDP, 53, 0);
	send_ip(tap, other_mac, NET_GUEST_ADDR, "192.0.2.7", IPPROTO_UDP, 53, 0);
	v6[6] = 17;
	v6[7] = 64;
	send_frame(tap, guest_mac, 0x86dd, v6, sizeof v6);
	send_frame(tap, guest_mac, 0x86dd, v6, sizeof v6);
	send_frame(tap, guest_mac, 0x8100, v6, sizeof v6);	/* a VLAN tag */
	/* Allowed: a DNS query to the gateway address counts as no drop. */
	send_ip(tap, guest_mac, NET_GUEST_ADDR, NET_HOST_ADDR, IPPROTO_UDP, 53, 0);
	usleep(100 * 1000);

	CHECK(net_island_drops(nsfd, &d, &cause) == 0);
	CHECK(d.packets[NET_DROP_UDP] == 3);
	CHECK(d.packets[NET_DROP_QUIC] == 1);
	CHECK(d.packets[NET_DROP_ICMP] == 2);
	CHECK(d.packets[NET_DROP_PROTO] == 1);
	CHECK(d.packets[NET_DROP_SPOOFED] == 2);
	CHECK(d.packets[NET_DROP_IPV6] == 2);
	CHECK(d.packets[NET_DROP_ETHER] == 1);
	CHECK(d.packets[NET_DROP_DNS_RATE] == 0 && d.packets[NET_DROP_TCP_RATE] == 0);
	CHECK(net_drops_total(&d) == 12);
	for (int i = 0; i < NET_DROP_N; i++)
		if (d.packets[i] != 0)
			fprintf(stderr, "   %s: %llu\n", net_drop_what[i].counter,
			    (unsigned long long)d.packets[i]);
	/* The read reset them. */
	CHECK(net_island_drops(nsfd, &d, &cause) == 0 && net_drops_total(&d) == 0);

	/* A DNS flood: beyond the island's burst the excess is dropped and counted. */
	for (int i = 0; i < 1000; i++)
		send_ip(tap, guest_mac, NET_GUEST_ADDR, NET_HOST_ADDR, IPPROTO_UDP, 53, 0);
	usleep(100 * 1000);
	CHECK(net_island_drops(nsfd, &d, &cause) == 0);
	fprintf(stderr, "   dns flood of 1000: %llu over the island's rate\n",
	    (unsigned long long)d.packets[NET_DROP_DNS_RATE]);
	CHECK(d.packets[NET_DROP_DNS_RATE] >= 400 && d.packets[NET_DROP_DNS_RATE] < 1000);

	/* What one read costs the reader thread (reported, not asserted: shared machine). */
	{
		uint64_t t0 = monotonic_ms();

		for (int i = 0; i < 100; i++)
			CHECK(net_island_drops(nsfd, &d, NULL) == 0);
		fprintf(stderr, "   100 reads: %.2f ms each\n", (double)(monotonic_ms() - t0) / 100);
	}
out:
	if (cause != NULL)
		fprintf(stderr, "cause: %s\n", cause);
	free(cause);
	cause = NULL;
	if (tap != -1)
		close(tap);
	if (nsfd != -1)
		close(nsfd);
	CHECK(net_island_delete(&ni, &cause) == 0);
	free(cause);
}

int
main(void)
{
	T_RUN(test_parse);
	T_RUN(test_island);
	return t_done();
}
