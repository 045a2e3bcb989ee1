/* Denied destination ranges and the upstream netns's own addresses. */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "gateway/shared/gw_addr.h"

struct gw_addrset {
	struct sockaddr_storage	*addrs;
	size_t			 n;
};

struct gw_range {
	uint8_t		 addr[16];
	int		 prefix;
	const char	*reason;
};

#define V4(a, b, c, d)	{ a, b, c, d }
static const struct gw_range gw_denied4[] = {
	{ V4(0, 0, 0, 0), 8, "unspecified" },
	{ V4(10, 0, 0, 0), 8, "rfc1918" },	/* also every island (other sandboxes) */
	{ V4(100, 64, 0, 0), 10, "cgnat" },
	{ V4(127, 0, 0, 0), 8, "loopback" },
	{ V4(169, 254, 0, 0), 16, "link-local" },	/* cloud metadata lives here */
	{ V4(172, 16, 0, 0), 12, "rfc1918" },
	{ V4(192, 0, 0, 0), 24, "ietf-reserved" },
	{ V4(192, 168, 0, 0), 16, "rfc1918" },
	{ V4(198, 18, 0, 0), 15, "benchmarking" },
	{ V4(224, 0, 0, 0), 4, "multicast" },
	{ V4(240, 0, 0, 0), 4, "reserved" },	/* includes 255.255.255.255 */
};

static const struct gw_range gw_denied6[] = {
	{ { 0 }, 128, "unspecified" },				/* :: */
	{ { [15] = 1 }, 128, "loopback" },			/* ::1 */
	{ { 0xfc }, 7, "ula" },					/* incl. fd00:ec2::254 */
	{ { 0xfe, 0x80 }, 10, "link-local" },
	{ { 0xfe, 0xc0 }, 10, "site-local" },
	{ { 0xff }, 8, "multicast" },
	{ { 0x01, 0x00 }, 64, "discard" },			/* 100::/64 */
};

static int
gw_prefix_match(const uint8_t *a, const uint8_t *net, int prefix)
{
	int full = prefix / 8, rest = prefix % 8;

	if (memcmp(a, net, full) != 0)
		return 0;
	return rest == 0 || ((a[full] ^ net[full]) & (0xff << (8 - rest))) == 0;
}

static int
gw_denied_v4(const uint8_t *a, const char **reason)
{
	for (size_t i = 0; i < sizeof gw_denied4 / sizeof gw_denied4[0]; i++)
		if (gw_prefix_match(a, gw_denied4[i].addr, gw_denied4[i].prefix)) {
			*reason = gw_denied4[i].reason;
			return 1;
		}
	return 0;
}

static int
gw_denied_v6(const uint8_t *a, const char **reason)
{
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t nat64[12] = { 0x00, 0x64, 0xff, 0x9b };
	static const uint8_t compat[12] = { 0 };

	/*
	 * Forms that embed an IPv4 address are judged by that address:
	 * ::ffff:a.b.c.d, ::a.b.c.d, 64:ff9b::a.b.c.d, 6to4 2002:AABB:CCDD::,
	 * Teredo 2001:0::/32 (client address XORed in the last 32 bits).
	 */
	if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0 ||
	    (memcmp(a, compat, 12) == 0 && !(a[12] == 0 && a[13] == 0 && a[14] == 0)))
		return gw_denied_v4(a + 12, reason) ? 1 : 0;
	if (a[0] == 0x20 && a[1] == 0x02)
		return gw_denied_v4(a + 2, reason);
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		uint8_t v4[4] = { a[12] ^ 0xff, a[13] ^ 0xff, a[14] ^ 0xff, a[15] ^ 0xff };

		if (gw_denied_v4(v4, reason))
			return 1;
	}
	for (size_t i = 0; i < sizeof gw_denied6 / sizeof gw_denied6[0]; i++)
		if (gw_prefix_match(a, gw_denied6[i].addr, gw_denied6[i].prefix)) {
			*reason = gw_denied6[i].reason;
			return 1;
		}
	return 0;
}

static int
gw_sa_equal(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
		    &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
	if (a->sa_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		    &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
	return 0;
}

int
gw_addrset_contains(const struct gw_addrset *set, const struct sockaddr *sa)
{
	for (size_t i = 0; i < set->n; i++)
		if (gw_sa_equal((const struct sockaddr *)&set->addrs[i], sa))
			return 1;
	return 0;
}

struct gw_addrset *
gw_addrset_local(char **cause)
{
	struct ifaddrs *ifa, *i;
	struct gw_addrset *set;

	if (getifaddrs(&ifa) == -1) {
		cause_set(cause, "getifaddrs: %s", strerror(errno));
		return NULL;
	}
	set = xcalloc(1, sizeof *set);
	for (i = ifa; i != NULL; i = i->ifa_next) {
		size_t len;

		if (i->ifa_addr == NULL)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			len = sizeof(struct sockaddr_in);
		else if (i->ifa_addr->sa_family == AF_INET6)
			len = sizeof(struct sockaddr_in6);
		else
			continue;
		set->addrs = xreallocarray(set->addrs, set->n + 1, sizeof *set->addrs);
		memset(&set->addrs[set->n], 0, sizeof set->addrs[set->n]);
		memcpy(&set->addrs[set->n++], i->ifa_addr, len);
	}
	freeifaddrs(ifa);
	return set;
}

void
gw_addrset_free(struct gw_addrset *set)
{
	if (set == NULL)
		return;
	free(set->addrs);
	free(set);
}

int
gw_addr_denied(const struct gw_addrset *host, const struct sockaddr *sa, const char **reason)
{
	const char *dummy;

	if (reason == NULL)
		reason = &dummy;
	if (sa->sa_family == AF_INET) {
		if (gw_denied_v4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr,
		    reason))
			return 1;
	} else if (sa->sa_family == AF_INET6) {
		if (gw_denied_v6((const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr,
		    reason))
			return 1;
	} else {
		*reason = "family";
		return 1;
	}
	if (host != NULL && gw_addrset_contains(host, sa)) {
		*reason = "host";
		return 1;
	}
	*reason = NULL;
	return 0;
}

const char *
gw_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *a;

	if (sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)sa)->sin_addr;
	else if (sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
	else {
		snprintf(buf, len, "?");
		return buf;
	}
	if (inet_ntop(sa->sa_family, a, buf, len) == NULL)
		snprintf(buf, len, "?");
	return buf;
}
