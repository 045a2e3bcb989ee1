/* Island netns per sandbox: create, configure (libnl, libnftables), open tap, delete. */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/if_tun.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <nftables/libnftables.h>

#include "common/paths.h"
#include "common/util.h"
#include "net/net_drops.h"
#include "net/net_island.h"

/*
 * The island ruleset, the same in every island (each is alone in its
 * namespace).
 *
 * ingress (netdev, on the tap, before any protocol): only frames from the
 * guest's MAC, IPv4 from the guest's IP and ARP get further. IPv6 is
 * counted here because the island's IPv6 is off and the kernel would drop
 * it before any inet hook, unseen.
 * guard: the same source check again for what reaches the IP stack (belt
 * and braces; before conntrack).
 * classify (after conntrack, before NAT): what may become a gateway socket,
 * within the island's own rates, so one guest's flood costs its own island
 * and reaches the gateway bounded: new TCP connections (a SYN flood
 * included: a dropped SYN never confirms a conntrack entry) and DNS
 * datagrams. Everything else the guest sends (other UDP, QUIC, ICMP but a
 * ping of 10.0.0.1, other protocols) is dropped here: with no route out it
 * would die in routing, uncounted.
 * nat: every guest TCP connection, whatever its destination, is redirected
 * to the gateway's listener on 10.0.0.1 (it reads the original destination
 * with SO_ORIGINAL_DST), and every UDP 53 query to the gateway's DNS
 * socket, so a custom resolver in the guest is answered by the gateway too.
 * input: only those two sockets and small, rate-limited pings of 10.0.0.1.
 * Nothing is forwarded: there is no route out; the only way out is a
 * gateway socket. In mode none the guest has no NIC at all.
 *
 * Every rule that drops something the guest sent counts it into a named
 * counter (net_drops.h); airlockd reads and resets them (net_island_drops)
 * so the audit log shows them as deny_summary lines.
 */
#define NET_CTR(name)	"  counter " name " { }\n"
#define NET_DROP(name)	" counter name \"" name "\" drop;\n"
#define NET_TCP_RATE	"200/second burst 400 packets"	/* above the gateway's 100/s, 200 */
#define NET_DNS_RATE	"200/second burst 400 packets"	/* above the gateway's 50/s, 200 */

static const char net_base_ruleset[] =
	"table netdev " NET_NFT_TABLE " {\n"
	NET_CTR("drop_spoofed") NET_CTR("drop_ipv6") NET_CTR("drop_ether")
	"  chain ingress { type filter hook ingress device \"" NET_TAP_NAME "\" priority -500;"
	" policy accept;\n"
	"    ether saddr != " NET_GUEST_MAC NET_DROP("drop_spoofed")
	"    ether type ip6" NET_DROP("drop_ipv6")
	"    ether type ip ip saddr != " NET_GUEST_ADDR NET_DROP("drop_spoofed")
	"    ether type { ip, arp } accept;\n"
	"   " NET_DROP("drop_ether")
	"  }\n"
	"}\n"
	"table inet " NET_NFT_TABLE " {\n"
	NET_CTR("drop_spoofed") NET_CTR("drop_quic") NET_CTR("drop_udp") NET_CTR("drop_icmp")
	NET_CTR("drop_proto") NET_CTR("drop_tcp_rate") NET_CTR("drop_dns_rate")
	NET_CTR("drop_ping_rate") NET_CTR("drop_input")
	"  chain guard { type filter hook prerouting priority -300; policy drop;\n"
	"    iif lo accept;\n"
	"    iifname \"" NET_TAP_NAME "\" ether saddr " NET_GUEST_MAC
	" ip saddr " NET_GUEST_ADDR " accept;\n"
	"    iifname \"" NET_TAP_NAME "\"" NET_DROP("drop_spoofed")
	"  }\n"
	"  chain classify { type filter hook prerouting priority -150; policy accept;\n"
	"    iifname != \"" NET_TAP_NAME "\" accept;\n"
	"    meta l4proto tcp ct state new limit rate over " NET_TCP_RATE
	NET_DROP("drop_tcp_rate")
	"    meta l4proto tcp accept;\n"
	"    udp dport 53 limit rate over " NET_DNS_RATE NET_DROP("drop_dns_rate")
	"    udp dport 53 accept;\n"
	"    udp dport 443" NET_DROP("drop_quic")
	"    meta l4proto udp" NET_DROP("drop_udp")
	"    ip daddr " NET_HOST_ADDR " icmp type echo-request accept;\n"
	"    meta l4proto icmp" NET_DROP("drop_icmp")
	"   " NET_DROP("drop_proto")
	"  }\n"
	"  chain nat { type nat hook prerouting priority dstnat; policy accept;\n"
	"    iifname \"" NET_TAP_NAME "\" meta l4proto tcp redirect to :" NET_GW_TCP_PORT ";\n"
	"    iifname \"" NET_TAP_NAME "\" udp dport 53 redirect to :" NET_GW_DNS_PORT "; }\n"
	"  chain input { type filter hook input priority 0; policy drop;\n"
	"    iif lo accept;\n"
	"    iifname \"" NET_TAP_NAME "\" ip daddr " NET_HOST_ADDR " tcp dport "
	NET_GW_TCP_PORT " accept;\n"
	"    iifname \"" NET_TAP_NAME "\" ip daddr " NET_HOST_ADDR " udp dport "
	NET_GW_DNS_PORT " accept;\n"
	"    iifname \"" NET_TAP_NAME "\" ip daddr " NET_HOST_ADDR " icmp type echo-request"
	" ip length <= 128 limit rate 10/second burst 20 packets accept;\n"
	"    iifname \"" NET_TAP_NAME "\" icmp type echo-request" NET_DROP("drop_ping_rate")
	"    iifname \"" NET_TAP_NAME "\"" NET_DROP("drop_input")
	"  }\n"
	"  chain forward { type filter hook forward priority 0; policy drop; }\n"
	"  chain output { type filter hook output priority 0; policy drop;\n"
	"    oif lo accept;\n"
	"    oifname \"" NET_TAP_NAME "\" ip saddr " NET_HOST_ADDR " ip daddr " NET_GUEST_ADDR
	" ct state established,related accept; }\n"
	"}\n"
	"table arp " NET_NFT_TABLE " {\n"
	NET_CTR("drop_arp")
	"  chain input { type filter hook input priority 0; policy drop;\n"
	"    iifname \"" NET_TAP_NAME "\" arp saddr ether " NET_GUEST_MAC
	" arp saddr ip " NET_GUEST_ADDR " arp daddr ip " NET_HOST_ADDR " accept;\n"
	"    iifname \"" NET_TAP_NAME "\"" NET_DROP("drop_arp")
	"  }\n"
	"  chain output { type filter hook output priority 0; policy drop;\n"
	"    oifname \"" NET_TAP_NAME "\" arp saddr ip " NET_HOST_ADDR
	" arp daddr ip " NET_GUEST_ADDR " accept; }\n"
	"}\n";

char *
net_island_path(const char *name)
{
	char *p;

	xasprintf(&p, "%s/%s%s", NET_NETNS_DIR, NET_NETNS_PREFIX, name);
	return p;
}

/* Write a sysctl of the current netns (/proc/sys/net is per reader's netns). */
static int
net_sysctl(const char *path, const char *value, char **cause)
{
	int fd;
	ssize_t n;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		return -1;
	}
	n = write(fd, value, strlen(value));
	close(fd);
	if (n != (ssize_t)strlen(value)) {
		cause_set(cause, "write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The host side gets a fixed MAC, the same in every island: a restored
 * guest still has 10.0.0.1 in its neighbour cache, and a new random MAC on
 * the new tap would black-hole its traffic until the entry expires.
 */
static int
net_tap_set_mac(char **cause)
{
	static const unsigned char mac[6] = NET_HOST_MAC_BYTES;
	struct ifreq ifr;
	int s, rc = 0;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1) {
		cause_set(cause, "socket: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", NET_TAP_NAME);
	ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
	memcpy(ifr.ifr_hwaddr.sa_data, mac, sizeof(mac));
	if (ioctl(s, SIOCSIFHWADDR, &ifr) == -1) {
		cause_set(cause, "set %s MAC: %s", NET_TAP_NAME, strerror(errno));
		rc = -1;
	}
	close(s);
	return rc;
}

/* Create the tap in the current netns; returns its fd. */
static int
net_tap_open(int persist, char **cause)
{
	struct ifreq ifr;
	int fd;

	if ((fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)) == -1) {
		cause_set(cause, "open /dev/net/tun: %s", strerror(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", NET_TAP_NAME);
	if (ioctl(fd, TUNSETIFF, &ifr) == -1) {
		cause_set(cause, "TUNSETIFF %s: %s", NET_TAP_NAME, strerror(errno));
		close(fd);
		return -1;
	}
	if (persist && ioctl(fd, TUNSETPERSIST, 1) == -1) {
		cause_set(cause, "TUNSETPERSIST %s: %s", NET_TAP_NAME, strerror(errno));
		close(fd);
		return -1;
	}
	if (persist && net_tap_set_mac(cause) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
net_link_up(struct nl_sock *sk, const char *ifname, char **cause)
{
	struct rtnl_link *link = NULL, *change;
	int err;

	if ((err = rtnl_link_get_kernel(sk, 0, ifname, &link)) < 0) {
		cause_set(cause, "link %s: %s", ifname, nl_geterror(err));
		return -1;
	}
	change = rtnl_link_alloc();
	rtnl_link_set_flags(change, IFF_UP);
	err = rtnl_link_change(sk, link, change, 0);
	rtnl_link_put(change);
	rtnl_link_put(link);
	if (err < 0) {
		cause_set(cause, "set %s up: %s", ifname, nl_geterror(err));
		return -1;
	}
	return 0;
}

static int
net_addr_add(struct nl_sock *sk, const char *ifname, const char *cidr, char **cause)
{
	struct rtnl_addr *addr;
	struct nl_addr *local = NULL;
	int ifindex, err;

	if ((ifindex = (int)if_nametoindex(ifname)) == 0) {
		cause_set(cause, "%s: %s", ifname, strerror(errno));
		return -1;
	}
	if ((err = nl_addr_parse(cidr, AF_INET, &local)) < 0) {
		cause_set(cause, "address %s: %s", cidr, nl_geterror(err));
		return -1;
	}
	addr = rtnl_addr_alloc();
	rtnl_addr_set_ifindex(addr, ifindex);
	rtnl_addr_set_family(addr, AF_INET);
	err = rtnl_addr_set_local(addr, local);
	if (err == 0)
		err = rtnl_addr_add(sk, addr, 0);
	rtnl_addr_put(addr);
	nl_addr_put(local);
	if (err < 0) {
		cause_set(cause, "add %s to %s: %s", cidr, ifname, nl_geterror(err));
		return -1;
	}
	return 0;
}

static int
net_nft_load(char **cause)
{
	struct nft_ctx *nft;
	int rc;

	if ((nft = nft_ctx_new(NFT_CTX_DEFAULT)) == NULL) {
		cause_set(cause, "nft_ctx_new failed");
		return -1;
	}
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	rc = nft_run_cmd_from_buffer(nft, net_base_ruleset);
	if (rc != 0)
		cause_set(cause, "nftables base ruleset: %s", nft_ctx_get_error_buffer(nft));
	nft_ctx_free(nft);
	return rc == 0 ? 0 : -1;
}

/* Configure the netns we are in: sysctls first so the tap never gets IPv6. */
static int
net_configure(char **cause)
{
	struct nl_sock *sk;
	int tapfd, rc = -1, err;

	if (net_sysctl("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1", cause) == -1 ||
	    net_sysctl("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1", cause) == -1 ||
	    net_sysctl("/proc/sys/net/ipv4/ip_forward", "0", cause) == -1 ||
	    net_sysctl("/proc/sys/net/ipv4/conf/all/forwarding", "0", cause) == -1)
		return -1;
	/* Persistent: QEMU gets its own fd per spawn; the tap dies with the netns. */
	if ((tapfd = net_tap_open(1, cause)) == -1)
		return -1;
	close(tapfd);
	sk = nl_socket_alloc();
	if ((err = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		cause_set(cause, "netlink: %s", nl_geterror(err));
		goto out;
	}
	if (net_link_up(sk, "lo", cause) == -1)
		goto out;
	if (net_addr_add(sk, NET_TAP_NAME, NET_HOST_ADDR "/30", cause) == -1)
		goto out;
	if (net_link_up(sk, NET_TAP_NAME, cause) == -1)
		goto out;
	if (net_nft_load(cause) == -1)
		goto out;
	rc = 0;
out:
	nl_socket_free(sk);
	return rc;
}

/* Enter ns; returns the fd of the namespace we came from, -1 on error. */
static int
net_enter(int nsfd, char **cause)
{
	int self;

	if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open own netns: %s", strerror(errno));
		return -1;
	}
	if (setns(nsfd, CLONE_NEWNET) == -1) {
		cause_set(cause, "setns: %s", strerror(errno));
		close(self);
		return -1;
	}
	return self;
}

/* Back to the namespace we came from. Failing here would leave the daemon
 * in a sandbox's network: there is no safe way to continue. */
static void
net_leave(int self)
{
	if (setns(self, CLONE_NEWNET) == -1)
		abort();
	close(self);
}

int
net_island_create(const char *name, struct net_island *ni, char **cause)
{
	char *path;
	int self = -1, fd, rc = -1, mounted = 0;

	memset(ni, 0, sizeof(*ni));
	if (!paths_valid_name(name)) {
		cause_set(cause, "invalid sandbox name \"%s\"", name);
		return -1;
	}
	if (mkdir_p(NET_NETNS_DIR, 0755, cause) == -1)
		return -1;
	path = net_island_path(name);
	if ((fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) == -1) {
		cause_set(cause, "create %s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	close(fd);
	if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open own netns: %s", strerror(errno));
		goto out;
	}
	if (unshare(CLONE_NEWNET) == -1) {
		cause_set(cause, "unshare(CLONE_NEWNET): %s", strerror(errno));
		close(self);
		self = -1;
		goto out;
	}
	if (mount("/proc/thread-self/ns/net", path, NULL, MS_BIND, NULL) == -1) {
		cause_set(cause, "pin netns at %s: %s", path, strerror(errno));
		goto out;
	}
	mounted = 1;
	if (net_configure(cause) == -1)
		goto out;
	rc = 0;
out:
	if (self != -1)
		net_leave(self);
	if (rc == -1) {
		cause_wrap(cause, "island %s", name);
		if (mounted)
			umount2(path, MNT_DETACH);
		unlink(path);
		free(path);
		return -1;
	}
	ni->ni_name = xstrdup(name);
	ni->ni_path = path;
	return 0;
}

int
net_island_open_ns(const struct net_island *ni, char **cause)
{
	int fd;

	if ((fd = open(ni->ni_path, O_RDONLY | O_CLOEXEC)) == -1)
		cause_set(cause, "open netns %s: %s", ni->ni_path, strerror(errno));
	return fd;
}

int
net_island_open_tap(const struct net_island *ni, char **cause)
{
	int nsfd, self, tapfd;

	if ((nsfd = net_island_open_ns(ni, cause)) == -1)
		return -1;
	self = net_enter(nsfd, cause);
	close(nsfd);
	if (self == -1)
		return -1;
	tapfd = net_tap_open(0, cause);
	net_leave(self);
	if (tapfd == -1)
		cause_wrap(cause, "island %s", ni->ni_name);
	return tapfd;
}

int
net_island_delete(struct net_island *ni, char **cause)
{
	int rc = 0;

	if (ni->ni_path == NULL)
		return 0;
	if (umount2(ni->ni_path, MNT_DETACH) == -1 && errno != EINVAL && errno != ENOENT) {
		cause_set(cause, "unmount %s: %s", ni->ni_path, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && unlink(ni->ni_path) == -1 && errno != ENOENT) {
		cause_set(cause, "remove %s: %s", ni->ni_path, strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		net_island_free(ni);
	return rc;
}

void
net_island_free(struct net_island *ni)
{
	free(ni->ni_name);
	free(ni->ni_path);
	ni->ni_name = ni->ni_path = NULL;
}

static int
net_bind_host(int type, const char *port, char **cause)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd, one = 1;

	sin.sin_port = htons((uint16_t)atoi(port));
	inet_pton(AF_INET, NET_HOST_ADDR, &sin.sin_addr);
	if ((fd = socket(AF_INET, type | SOCK_CLOEXEC, 0)) == -1) {
		cause_set(cause, "socket: %s", strerror(errno));
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof sin) == -1 ||
	    (type == SOCK_STREAM && listen(fd, 128) == -1)) {
		cause_set(cause, "%s %s:%s: %s", type == SOCK_STREAM ? "listen" : "bind",
		    NET_HOST_ADDR, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int
net_island_gateway_sockets(const struct net_island *ni, int *tcp_fd, int *dns_fd,
    char **cause)
{
	int nsfd, self;

	*tcp_fd = *dns_fd = -1;
	if ((nsfd = net_island_open_ns(ni, cause)) == -1)
		return -1;
	self = net_enter(nsfd, cause);
	close(nsfd);
	if (self == -1)
		return -1;
	if ((*tcp_fd = net_bind_host(SOCK_STREAM, NET_GW_TCP_PORT, cause)) != -1 &&
	    (*dns_fd = net_bind_host(SOCK_DGRAM, NET_GW_DNS_PORT, cause)) == -1) {
		close(*tcp_fd);
		*tcp_fd = -1;
	}
	net_leave(self);
	if (*tcp_fd == -1) {
		cause_wrap(cause, "island %s", ni->ni_name);
		return -1;
	}
	return 0;
}

/*
 * Read and reset the island's drop counters (one `reset counters`: what
 * was counted since the previous read, none lost or counted twice between
 * the read and the reset). Enters the namespace from the calling thread
 * only (setns of a network namespace is per thread), so a worker thread
 * can do it while the event loop runs on another.
 */
int
net_island_drops(int nsfd, struct net_drops *d, char **cause)
{
	struct nft_ctx *nft;
	int self, rc = -1;

	memset(d, 0, sizeof *d);
	if ((self = net_enter(nsfd, cause)) == -1)
		return -1;
	if ((nft = nft_ctx_new(NFT_CTX_DEFAULT)) == NULL) {
		cause_set(cause, "nft_ctx_new failed");
		net_leave(self);
		return -1;
	}
	nft_ctx_output_set_flags(nft, NFT_CTX_OUTPUT_JSON);
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	if (nft_run_cmd_from_buffer(nft, "reset counters") != 0)
		cause_set(cause, "nftables reset counters: %s", nft_ctx_get_error_buffer(nft));
	else
		rc = net_drops_parse(nft_ctx_get_output_buffer(nft), d, cause);
	nft_ctx_free(nft);
	net_leave(self);
	return rc;
}
