/*
 * Island network namespaces: created with only lo and the tap, the host
 * address on the tap, forwarding and IPv6 off, the drop-everything ruleset;
 * the tap can be opened for QEMU; deleting leaves no netns, mount or tap.
 * Inspection shells out to ip/nft/sysctl on purpose: an independent view.
 */
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/subproc.h"
#include "common/util.h"
#include "net/net_island.h"
#include "leftovers.h"
#include "../unit/t.h"

static char tag[32];

static char *
in_ns(const char *name, const char *const cmd[])
{
	const char *argv[16] = { "ip", "netns", "exec", NULL };
	char *ns, *out = NULL, *cause = NULL;
	int i;

	xasprintf(&ns, "%s%s", NET_NETNS_PREFIX, name);
	argv[3] = ns;
	for (i = 0; cmd[i] != NULL && i < 11; i++)
		argv[4 + i] = cmd[i];
	argv[4 + i] = NULL;
	if (subproc_capture(argv, 1 << 20, &out, &cause) == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
		out = xstrdup("");
	}
	free(ns);
	return out;
}

static void
test_island(void)
{
	static const char *const links[] = { "ip", "-o", "link", "show", NULL };
	static const char *const addrs[] = { "ip", "-o", "-4", "addr", "show", NULL };
	static const char *const v6[] = { "sysctl", "-n", "net.ipv6.conf.all.disable_ipv6", NULL };
	static const char *const fwd[] = { "sysctl", "-n", "net.ipv4.ip_forward", NULL };
	static const char *const nft[] = { "nft", "list", "ruleset", NULL };
	static const char *const routes[] = { "ip", "-4", "route", "show", NULL };
	struct net_island ni, dup;
	char *name, *before, *after, *out, *cause = NULL;
	int tapfd, tapfd2, n;

	xasprintf(&name, "%s-isl", tag);
	before = leftovers(tag);
	CHECK(if_nametoindex(NET_TAP_NAME) == 0);
	CHECK(net_island_create(name, &ni, &cause) == 0);
	if (cause) fprintf(stderr, "%s\n", cause);
	CHECK(access(ni.ni_path, F_OK) == 0);
	/* Still in our own netns afterwards. */
	CHECK(if_nametoindex(NET_TAP_NAME) == 0);
	/* A second island with the same name is refused, the first is intact. */
	CHECK(net_island_create(name, &dup, &cause) == -1);
	CHECK_CAUSE(cause, "File exists");
	free(cause);
	cause = NULL;

	out = in_ns(name, links);
	n = 1;	/* subproc_capture strips the last newline */
	for (char *p = out; (p = strchr(p, '\n')) != NULL; p++)
		n++;
	CHECK(n == 2);
	CHECK(strstr(out, ": lo:") != NULL && strstr(out, ": " NET_TAP_NAME ":") != NULL);
	free(out);
	out = in_ns(name, addrs);
	CHECK(strstr(out, NET_HOST_ADDR "/30") != NULL);
	free(out);
	out = in_ns(name, routes);
	/* Only the connected /30: no default route, nothing leads out. */
	CHECK(strstr(out, "default") == NULL);
	CHECK(strstr(out, "10.0.0.0/30") != NULL);
	free(out);
	out = in_ns(name, v6);
	CHECK(atoi(out) == 1);
	free(out);
	out = in_ns(name, fwd);
	CHECK(atoi(out) == 0);
	free(out);
	out = in_ns(name, nft);
	CHECK(strstr(out, "policy drop") != NULL);
	CHECK(strstr(out, "table inet " NET_NFT_TABLE) != NULL);
	CHECK(strstr(out, "table arp " NET_NFT_TABLE) != NULL);
	CHECK(strstr(out, "redirect to :" NET_GW_TCP_PORT) != NULL);
	CHECK(strstr(out, "ether saddr " NET_GUEST_MAC) != NULL);
	free(out);

	{
		static const char *const ss[] = { "ss", "-Hltun", NULL };
		int tfd, dfd;

		CHECK(net_island_gateway_sockets(&ni, &tfd, &dfd, &cause) == 0);
		out = in_ns(name, ss);
		CHECK(strstr(out, NET_HOST_ADDR ":" NET_GW_TCP_PORT) != NULL);
		CHECK(strstr(out, NET_HOST_ADDR ":" NET_GW_DNS_PORT) != NULL);
		free(out);
		/* Not in our own namespace: the sockets live in the island. */
		if (subproc_capture((const char **)ss, 1 << 20, &out, &cause) == 0)
			CHECK(strstr(out, NET_HOST_ADDR ":" NET_GW_TCP_PORT) == NULL);
		free(out);
		close(tfd);
		close(dfd);
	}

	tapfd = net_island_open_tap(&ni, &cause);
	CHECK(tapfd >= 0);
	/* One queue: a second opener is refused while the first holds it. */
	tapfd2 = net_island_open_tap(&ni, &cause);
	CHECK(tapfd2 == -1);
	free(cause);
	cause = NULL;
	close(tapfd);
	tapfd2 = net_island_open_tap(&ni, &cause);
	CHECK(tapfd2 >= 0);
	close(tapfd2);

	CHECK(net_island_delete(&ni, &cause) == 0);
	after = leftovers(tag);
	CHECK_STR(after, before);
	CHECK(if_nametoindex(NET_TAP_NAME) == 0);
	free(before);
	free(after);
	free(name);
}

static void
test_bad_name(void)
{
	struct net_island ni;
	char *cause = NULL;

	CHECK(net_island_create("../etc", &ni, &cause) == -1);
	CHECK_CAUSE(cause, "invalid sandbox name");
	free(cause);
}

int
main(void)
{
	snprintf(tag, sizeof(tag), "tnet%ld", (long)getpid());
	T_RUN(test_bad_name);
	T_RUN(test_island);
	return t_done();
}
