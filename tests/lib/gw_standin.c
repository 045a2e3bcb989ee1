/*
 * gw_standin: airlockd's side of the egress gateway for tests, built on the
 * product code (net_island.c for the island and the gateway's sockets in
 * it, egress_gw.c for the control connection airlockd uses) so the egress
 * matrix exercises the real island rules, sockets and protocol without a
 * daemon or a VM.
 *
 *   gw_standin create --name N            island netns airlock-N (lo, tap0, rules)
 *   gw_standin delete --name N
 *   gw_standin attach --ctl SOCK --name N --policy FILE [--project P]
 *   gw_standin update --ctl SOCK --name N --policy FILE
 *   gw_standin detach --ctl SOCK --name N
 *   gw_standin hello|stats --ctl SOCK [--name N]
 *
 * attach opens the gateway's TCP listener and DNS socket inside the island
 * (net_island_gateway_sockets) and sends them with the policy. The gateway
 * must already run (the test starts it): gw_standin never starts one. The
 * outcome is printed as one JSON line ({"ok":true,...} or {"ok":false,
 * "error":...}); exit 0 if ok. The test replaces the island's tap with a
 * veth to a guest netns between create and attach.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include <event2/event.h>

#include "common/util.h"
#include "egress/egress_gw.h"
#include "net/net_island.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr,
	    "usage: gw_standin create|delete --name N\n"
	    "       gw_standin attach|update --ctl SOCK --name N --policy FILE [--project P]\n"
	    "       gw_standin detach --ctl SOCK --name N\n"
	    "       gw_standin hello|stats --ctl SOCK [--name N]\n");
	exit(2);
}

static void __attribute__((noreturn))
die(const char *what, char *cause)
{
	fprintf(stderr, "gw_standin: %s: %s\n", what, cause != NULL ? cause : "failed");
	free(cause);
	exit(1);
}

/* egress_gw_open would start a gateway when none answers: check first. */
static void
gw_check_running(const char *ctl)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(ctl) >= sizeof sun.sun_path)
		die("control socket", xstrdup("path too long"));
	strcpy(sun.sun_path, ctl);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1)
		die("socket", xstrdup(strerror(errno)));
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		printf("{\"ok\":false,\"error\":\"no gateway on %s: %s\"}\n", ctl, strerror(errno));
		exit(1);
	}
	close(fd);
}

static struct egress_gw *
gw_open(struct event_base *base, const char *ctl)
{
	struct egress_gw_config cfg;

	gw_check_running(ctl);
	memset(&cfg, 0, sizeof cfg);
	cfg.bin = "/nonexistent/airlock-gateway";	/* never start one */
	cfg.ctl_path = ctl;
	cfg.log_path = "/dev/null";
	return egress_gw_new(&cfg, base, NULL, NULL);
}

/* The product's client is asynchronous: run the loop until the one call is answered. */
struct gw_wait {
	struct event_base	*base;
	json_t			*reply;
	char			*cause;
	int			 done;
};

static void
gw_wait_done(const json_t *reply, const char *cause, void *arg)
{
	struct gw_wait *w = arg;

	w->done = 1;
	w->reply = reply != NULL ? json_deep_copy(reply) : NULL;
	w->cause = cause != NULL ? xstrdup(cause) : NULL;
	event_base_loopbreak(w->base);
}

static int
report(json_t *reply, char *cause)
{
	char *text;
	int ok = reply != NULL;

	if (reply == NULL)
		reply = json_pack("{s:b,s:s}", "ok", 0, "error", cause != NULL ? cause : "failed");
	else if (json_object_get(reply, "ok") == NULL)
		json_object_set_new(reply, "ok", json_true());
	json_object_del(reply, "seq");
	text = json_dumps(reply, JSON_COMPACT);
	printf("%s\n", text);
	free(text);
	json_decref(reply);
	free(cause);
	return ok ? 0 : 1;
}

static int
gw_wait(struct gw_wait *w)
{
	while (!w->done)
		event_base_loop(w->base, EVLOOP_ONCE);
	return report(w->reply, w->cause);
}

static json_t *
load_policy(const char *file)
{
	json_error_t err;
	json_t *p;

	if ((p = json_load_file(file, JSON_REJECT_DUPLICATES, &err)) == NULL) {
		fprintf(stderr, "gw_standin: %s:%d: %s\n", file, err.line, err.text);
		exit(1);
	}
	return p;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "policy", required_argument, NULL, 'p' },
		{ "project", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd, *ctl = NULL, *name = NULL, *policy = NULL, *project = "standin";
	struct net_island ni;
	struct egress_gw *g;
	struct event_base *base;
	struct gw_wait w = { 0 };
	char *cause = NULL;
	json_t *pol;
	int c, fds[2], rc = 1;

	if (argc < 2)
		usage();
	cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': ctl = optarg; break;
		case 'n': name = optarg; break;
		case 'p': policy = optarg; break;
		case 'P': project = optarg; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();

	if (strcmp(cmd, "create") == 0 || strcmp(cmd, "delete") == 0) {
		if (name == NULL)
			usage();
		if (strcmp(cmd, "create") == 0) {
			if (net_island_create(name, &ni, &cause) == -1)
				die("create", cause);
			printf("%s\n", ni.ni_path);
			net_island_free(&ni);
			return 0;
		}
		ni.ni_name = xstrdup(name);
		ni.ni_path = net_island_path(name);
		if (net_island_delete(&ni, &cause) == -1)
			die("delete", cause);
		return 0;
	}

	if (ctl == NULL)
		usage();
	base = event_base_new();
	w.base = base;
	g = gw_open(base, ctl);
	if (strcmp(cmd, "hello") == 0) {
		egress_gw_hello(g, gw_wait_done, &w);
	} else if (strcmp(cmd, "stats") == 0) {
		egress_gw_stats(g, name, gw_wait_done, &w);
	} else if (strcmp(cmd, "detach") == 0) {
		if (name == NULL)
			usage();
		egress_gw_detach(g, name, gw_wait_done, &w);
	} else if (strcmp(cmd, "attach") == 0 || strcmp(cmd, "update") == 0) {
		if (name == NULL || policy == NULL)
			usage();
		pol = load_policy(policy);
		if (strcmp(cmd, "update") == 0) {
			egress_gw_update(g, name, pol, NULL, gw_wait_done, &w);
		} else {
			ni.ni_name = xstrdup(name);
			ni.ni_path = net_island_path(name);
			if (net_island_gateway_sockets(&ni, &fds[0], &fds[1], &cause) == -1)
				die("gateway sockets", cause);
			egress_gw_attach(g, name, project, pol, NULL, fds[0], fds[1], gw_wait_done,
			    &w);
			close(fds[0]);
			close(fds[1]);
			net_island_free(&ni);
		}
	} else
		usage();
	rc = gw_wait(&w);
	egress_gw_free(g);
	event_base_free(base);
	return rc;
}
