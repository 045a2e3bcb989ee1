/*
 * What an island's nftables rules drop, by reason: every drop rule of the
 * island ruleset (net_island.c) counts into a named counter, and these are
 * the names. airlockd reads and resets them per island (net_island_drops)
 * and the gateway writes them as deny_summary lines (docs/security.md
 * "Audit under flood"), one per reason with a count above zero.
 */
#ifndef AIRLOCK_NET_DROPS_H
#define AIRLOCK_NET_DROPS_H

#include <stdint.h>

enum net_drop {
	NET_DROP_SPOOFED,	/* a frame or packet not from the guest's MAC and IP */
	NET_DROP_IPV6,
	NET_DROP_ETHER,		/* neither IPv4 nor ARP (VLAN tags, other ethertypes) */
	NET_DROP_ARP,		/* ARP other than the guest asking for 10.0.0.1 */
	NET_DROP_QUIC,		/* UDP 443 */
	NET_DROP_UDP,		/* UDP other than DNS */
	NET_DROP_ICMP,		/* ICMP other than a ping of 10.0.0.1 */
	NET_DROP_PING_RATE,	/* pings of 10.0.0.1 over their rate or size */
	NET_DROP_PROTO,		/* IP protocols other than TCP, UDP, ICMP */
	NET_DROP_TCP_RATE,	/* new TCP connections over the island's rate */
	NET_DROP_DNS_RATE,	/* DNS datagrams over the island's rate */
	NET_DROP_INPUT,		/* to 10.0.0.1 off the gateway's ports */
	NET_DROP_N
};

struct net_drop_what {
	const char	*counter;	/* the nftables counter's name */
	const char	*kind;		/* the audit line's kind */
	const char	*reason;	/* and its reason */
};

extern const struct net_drop_what net_drop_what[NET_DROP_N];

struct net_drops {
	uint64_t	packets[NET_DROP_N];
};

/*
 * The JSON libnftables prints for `reset counters` / `list counters`
 * ({"nftables":[{"metainfo":…},{"counter":{"family","name","table",
 * "packets","bytes"}}…]}): the packets of every counter of table "airlock"
 * with a name above, summed over families (the same reason may count in the
 * netdev and inet tables). Unknown counters and other tables are ignored.
 * 0 / -1 with cause (not that shape).
 */
int net_drops_parse(const char *json, struct net_drops *, char **cause);

/* Sum of every reason. */
uint64_t net_drops_total(const struct net_drops *);

#endif
