/* The island's drop counters: names, reasons, and parsing what libnftables prints. */
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "net/net_drops.h"
#include "net/net_island.h"

const struct net_drop_what net_drop_what[NET_DROP_N] = {
	[NET_DROP_SPOOFED] = { "drop_spoofed", "island", "source is not the guest's MAC and IP" },
	[NET_DROP_IPV6] = { "drop_ipv6", "ipv6", "IPv6 is not routed" },
	[NET_DROP_ETHER] = { "drop_ether", "island", "frame neither IPv4 nor ARP" },
	[NET_DROP_ARP] = { "drop_arp", "arp", "ARP other than for the gateway address" },
	[NET_DROP_QUIC] = { "drop_quic", "udp", "QUIC (UDP 443) is not proxied" },
	[NET_DROP_UDP] = { "drop_udp", "udp", "UDP other than DNS" },
	[NET_DROP_ICMP] = { "drop_icmp", "icmp", "ICMP other than ping of the gateway" },
	[NET_DROP_PING_RATE] = { "drop_ping_rate", "icmp", "ping over rate" },
	[NET_DROP_PROTO] = { "drop_proto", "island", "IP protocol other than TCP, UDP, ICMP" },
	[NET_DROP_TCP_RATE] = { "drop_tcp_rate", "tcp", "new connections over island rate" },
	[NET_DROP_DNS_RATE] = { "drop_dns_rate", "dns", "DNS over island rate" },
	[NET_DROP_INPUT] = { "drop_input", "island", "to the gateway address off its ports" },
};

int
net_drops_parse(const char *text, struct net_drops *d, char **cause)
{
	json_error_t err;
	json_t *root, *list, *item, *c;
	size_t i;

	memset(d, 0, sizeof *d);
	if ((root = json_loads(text, 0, &err)) == NULL) {
		cause_set(cause, "nftables counters: %s", err.text);
		return -1;
	}
	if (!json_is_array(list = json_object_get(root, "nftables"))) {
		cause_set(cause, "nftables counters: no \"nftables\" array");
		json_decref(root);
		return -1;
	}
	json_array_foreach(list, i, item) {
		const char *name, *table;
		json_t *pk;

		if ((c = json_object_get(item, "counter")) == NULL)
			continue;
		name = json_string_value(json_object_get(c, "name"));
		table = json_string_value(json_object_get(c, "table"));
		pk = json_object_get(c, "packets");
		if (name == NULL || table == NULL || strcmp(table, NET_NFT_TABLE) != 0 ||
		    !json_is_integer(pk) || json_integer_value(pk) < 0)
			continue;
		for (int k = 0; k < NET_DROP_N; k++)
			if (strcmp(name, net_drop_what[k].counter) == 0)
				d->packets[k] += (uint64_t)json_integer_value(pk);
	}
	json_decref(root);
	return 0;
}

uint64_t
net_drops_total(const struct net_drops *d)
{
	uint64_t n = 0;

	for (int k = 0; k < NET_DROP_N; k++)
		n += d->packets[k];
	return n;
}
