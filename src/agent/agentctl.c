/*
 * airlock-agentctl: talk to a guest agent over its channel socket, for
 * tests and debugging.
 *
 *   airlock-agentctl -s SOCK ping [-n COUNT]
 *       round trips of PING frames; prints min/median/p90/max in ms
 *   airlock-agentctl -s SOCK forward -L unix:PATH|[ADDR:]PORT GUEST_PORT
 *       every connection to the local listener becomes a stream to
 *       GUEST_PORT in the guest (49983 = the envd API). Prints
 *       "forwarding ready" on stdout once the channel is up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "agent/agent_client.h"
#include "common/log.h"
#include "common/util.h"

struct ctl {
	struct event_base	*base;
	struct agent_client	*ac;
	const char		*listen_spec;
	uint16_t		 guest_port;
	int			 lfd;
	struct event		*lev;
	int			 ping_left, ping_n;
	double			*rtts;
	int			 announced;
};

static int
ctl_dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void ctl_ping_next(struct ctl *);

static void
ctl_pong(uint64_t ns, void *arg)
{
	struct ctl *c = arg;

	c->rtts[c->ping_n++] = (double)ns / 1e6;
	if (--c->ping_left > 0) {
		ctl_ping_next(c);
		return;
	}
	qsort(c->rtts, (size_t)c->ping_n, sizeof(double), ctl_dcmp);
	printf("ping: n=%d min=%.3f median=%.3f p90=%.3f max=%.3f ms\n", c->ping_n, c->rtts[0],
	    c->rtts[c->ping_n / 2], c->rtts[c->ping_n * 9 / 10], c->rtts[c->ping_n - 1]);
	event_base_loopexit(c->base, NULL);
}

static void
ctl_ping_next(struct ctl *c)
{
	if (agent_client_ping(c->ac, ctl_pong, c) == -1) {
		fprintf(stderr, "airlock-agentctl: ping failed: channel down\n");
		event_base_loopexit(c->base, NULL);
	}
}

static void
ctl_opened(int err, const char *reason, void *arg)
{
	if (err != 0)
		log_warnx("stream refused: %s", reason != NULL ? reason : strerror(err));
}

static void
ctl_accept(evutil_socket_t fd, short what, void *arg)
{
	struct ctl *c = arg;
	char *cause = NULL;
	int s;

	if ((s = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) == -1)
		return;
	if (agent_client_open_fd(c->ac, c->guest_port, s, ctl_opened, c, &cause) == -1) {
		log_warnx("%s", cause);
		free(cause);
	}
}

static int
ctl_listen(const char *spec, char **cause)
{
	struct sockaddr_storage ss;
	struct sockaddr_un *sun = (struct sockaddr_un *)&ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	socklen_t len;
	const char *colon;
	char host[64] = "127.0.0.1";
	int s, one = 1;
	long port;

	memset(&ss, 0, sizeof(ss));
	if (strncmp(spec, "unix:", 5) == 0) {
		sun->sun_family = AF_UNIX;
		if (strlen(spec + 5) >= sizeof(sun->sun_path)) {
			cause_set(cause, "unix socket path too long");
			return -1;
		}
		strcpy(sun->sun_path, spec + 5);
		unlink(sun->sun_path);
		len = sizeof(*sun);
	} else {
		if ((colon = strrchr(spec, ':')) != NULL) {
			snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
			spec = colon + 1;
		}
		port = strtol(spec, NULL, 10);
		if (port <= 0 || port > 65535) {
			cause_set(cause, "bad port %s", spec);
			return -1;
		}
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
			cause_set(cause, "bad address %s", host);
			return -1;
		}
		len = sizeof(*sin);
	}
	if ((s = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1) {
		cause_set(cause, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&ss, len) == -1 || listen(s, 128) == -1) {
		cause_set(cause, "listen: %s", strerror(errno));
		close(s);
		return -1;
	}
	return s;
}

static void
ctl_up(struct agent_client *ac, void *arg)
{
	struct ctl *c = arg;

	if (c->ping_left > 0) {
		ctl_ping_next(c);
		return;
	}
	if (!c->announced) {
		printf("forwarding ready\n");
		fflush(stdout);
		c->announced = 1;
	}
}

static void
ctl_down(struct agent_client *ac, const char *reason, void *arg)
{
	log_warnx("channel down: %s (reconnecting)", reason);
}

static void
ctl_signal(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopexit(arg, NULL);
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: airlock-agentctl -s SOCKET ping [-n COUNT]\n"
	    "       airlock-agentctl -s SOCKET forward -L unix:PATH|[ADDR:]PORT GUEST_PORT\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct agent_client_cb cb = { .up = ctl_up, .down = ctl_down };
	struct ctl c;
	struct event *sigev, *sigev2;
	const char *sock = NULL, *cmd;
	char *cause = NULL;
	int ch, count = 20;

	log_init("airlock-agentctl", LOG_LVL_INFO);
	memset(&c, 0, sizeof(c));
	c.lfd = -1;
	while ((ch = getopt(argc, argv, "+s:")) != -1) {
		if (ch == 's')
			sock = optarg;
		else
			usage();
	}
	argc -= optind;
	argv += optind;
	if (sock == NULL || argc < 1)
		usage();
	cmd = argv[0];
	optind = 1;
	while ((ch = getopt(argc, argv, "n:L:")) != -1) {
		if (ch == 'n')
			count = atoi(optarg);
		else if (ch == 'L')
			c.listen_spec = optarg;
		else
			usage();
	}
	argc -= optind;
	argv += optind;
	signal(SIGPIPE, SIG_IGN);
	c.base = event_base_new();
	if (strcmp(cmd, "ping") == 0) {
		if (count <= 0 || count > 1000000)
			usage();
		c.ping_left = count;
		c.rtts = xcalloc((size_t)count, sizeof(double));
	} else if (strcmp(cmd, "forward") == 0) {
		if (c.listen_spec == NULL || argc != 1 || atoi(argv[0]) <= 0 || atoi(argv[0]) > 65535)
			usage();
		c.guest_port = (uint16_t)atoi(argv[0]);
		if ((c.lfd = ctl_listen(c.listen_spec, &cause)) == -1)
			fatalx("%s: %s", c.listen_spec, cause);
		c.lev = event_new(c.base, c.lfd, EV_READ | EV_PERSIST, ctl_accept, &c);
		event_add(c.lev, NULL);
	} else
		usage();
	sigev = evsignal_new(c.base, SIGTERM, ctl_signal, c.base);
	sigev2 = evsignal_new(c.base, SIGINT, ctl_signal, c.base);
	evsignal_add(sigev, NULL);
	evsignal_add(sigev2, NULL);
	c.ac = agent_client_new(c.base, sock, &cb, &c);
	event_base_dispatch(c.base);
	agent_client_free(c.ac);
	if (c.lev != NULL)
		event_free(c.lev);
	if (c.lfd != -1)
		close(c.lfd);
	if (c.listen_spec != NULL && strncmp(c.listen_spec, "unix:", 5) == 0)
		unlink(c.listen_spec + 5);
	event_free(sigev);
	event_free(sigev2);
	free(c.rtts);
	event_base_free(c.base);
	return 0;
}
