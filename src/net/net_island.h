/*
 * Island network namespaces: one per sandbox, holding only lo and a tap.
 * The guest is 10.0.0.2/30 and the host side 10.0.0.1 in every island (each
 * is alone in its namespace). Forwarding is off, IPv6 is disabled, and a
 * nftables ruleset validates the guest's source MAC/IP, redirects its TCP
 * and DNS to the gateway's sockets on 10.0.0.1 and drops everything else.
 *
 * Runs in the privileged parent. Every operation that enters the namespace
 * (setns, which moves only the calling thread) returns to the thread's own
 * namespace before it returns.
 *
 * The namespace is pinned by a bind mount at NET_NETNS_DIR/airlock-<name>,
 * so `ip netns` and the gateway can find it and it outlives any process.
 */
#ifndef AIRLOCK_NET_ISLAND_H
#define AIRLOCK_NET_ISLAND_H

#define NET_NETNS_DIR		"/run/netns"
#define NET_NETNS_PREFIX	"airlock-"
#define NET_TAP_NAME		"tap0"
#define NET_HOST_ADDR		"10.0.0.1"
#define NET_GUEST_ADDR		"10.0.0.2"
#define NET_PREFIXLEN		30
#define NET_GUEST_MAC		"52:54:00:0a:00:02"
#define NET_HOST_MAC_BYTES	{ 0x52, 0x54, 0x00, 0x0a, 0x00, 0x01 }	/* the tap */
#define NET_NFT_TABLE		"airlock"
#define NET_GW_TCP_PORT		"15001"	/* gateway listener (gateway/gw.h GW_LISTEN_PORT) */
#define NET_GW_DNS_PORT		"53"

struct net_island {
	char	*ni_name;	/* sandbox name */
	char	*ni_path;	/* NET_NETNS_DIR/airlock-<name> */
};

/* Create and configure the island; on failure nothing is left behind. */
int net_island_create(const char *name, struct net_island *ni, char **cause);

/* An O_RDONLY|O_CLOEXEC fd of the namespace, for setns by a jailed child. */
int net_island_open_ns(const struct net_island *ni, char **cause);

/*
 * Open the island's tap (IFF_TAP|IFF_NO_PI|IFF_VNET_HDR) from inside the
 * namespace and return the fd for QEMU's -netdev tap,fd=N. One queue: call
 * again after the previous holder closed it (QEMU restart, restore).
 */
int net_island_open_tap(const struct net_island *ni, char **cause);

/*
 * Open the gateway's sockets inside the island: a listening TCP socket on
 * 10.0.0.1:15001 and a UDP socket on 10.0.0.1:53 (CLOEXEC, blocking mode is
 * the gateway's business). Sent to airlock-gateway with the attach; they
 * keep the island's namespace whatever process holds them. Call again to
 * replace them (a gateway restart): SO_REUSEADDR.
 */
int net_island_gateway_sockets(const struct net_island *ni, int *tcp_fd, int *dns_fd,
    char **cause);

struct net_drops;
/*
 * Read and reset the drop counters of the island whose namespace fd is
 * nsfd (net_drops.h). Enters it from the calling thread only: safe in a
 * worker thread. 0 / -1 with cause.
 */
int net_island_drops(int nsfd, struct net_drops *, char **cause);

/* Unpin the namespace: the tap and rules go with it. Missing = done. */
int net_island_delete(struct net_island *ni, char **cause);

/* Release memory only (the namespace stays). */
void net_island_free(struct net_island *ni);

/* The bind-mount path for a sandbox name (malloc'd). */
char *net_island_path(const char *name);

#endif
