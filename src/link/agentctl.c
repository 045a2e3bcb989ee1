/*
 * airlock-agentctl: talk to a guest agent over its channel socket, for
 * tests and debugging.
 *
 *   airlock-agentctl -s SOCK ping [-n COUNT]
 *       round trips of PING frames; prints min/median/p90/max in ms
 *   airlock-agentctl -s SOCK forward -L LISTEN GUEST_PORT
 *   airlock-agentctl -s SOCK forward -L LISTEN=GUEST_PORT [-L LISTEN=GUEST_PORT ...]
 *       LISTEN is unix:PATH or [ADDR:]PORT. Every connection to a local
 *       listener becomes a stream to its GUEST_PORT in the guest (49983 =
 *       the envd API). Prints "forwarding ready" on stdout once the channel
 *       is up. QEMU's channel socket takes one host client at a time, so
 *       one agentctl carries every forward of a VM.
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

#include "link/agent_client.h"
#include "common/log.h"
#include "common/util.h"

#define CTL_MAX_FORWARDS	16

struct ctl;

struct fwd {
	struct ctl		*c;
	char			*spec;		/* local listener */
	uint16_t		 guest_port;
	int			 lfd;
	struct event		*lev;
};

struct ctl {
	struct event_base	*base;
	struct agent_client	*ac;
	struct fwd		 fwds[CTL_MAX_FORWARDS];
	int			 nfwds;
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
	struct fwd *f = arg;
	char *cause = NULL;
	int s;

	if ((s = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) == -1)
		return;
	if (agent_client_open_fd(f->c->ac, f->guest_port, s, ctl_opened, f, &cause) == -1) {
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
	    "       airlock-agentctl -s SOCKET forward -L LISTEN GUEST_PORT\n"
	    "       airlock-agentctl -s SOCKET forward -L LISTEN=GUEST_PORT ...\n"
	    "       (LISTEN: unix:PATH or [ADDR:]PORT)\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct agent_client_cb cb = { .up = ctl_up, .down = ctl_down };
	struct ctl c;
	struct event *sigev, *sigev2;
	const char *sock = NULL, *cmd, *specs[CTL_MAX_FORWARDS];
	char *cause = NULL, *eq;
	int ch, count = 20, nspecs = 0, i;
	long port;

	log_init("airlock-agentctl", LOG_LVL_INFO);
	memset(&c, 0, sizeof(c));
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
		else if (ch == 'L' && nspecs < CTL_MAX_FORWARDS)
			specs[nspecs++] = optarg;
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
		if (nspecs == 0 || argc > 1 || (argc == 1 && nspecs != 1))
			usage();
		for (i = 0; i < nspecs; i++) {
			struct fwd *f = &c.fwds[c.nfwds++];

			f->c = &c;
			f->spec = xstrdup(specs[i]);
			/* LISTEN=PORT; a unix path may contain '=', so split at the last. */
			if (argc == 1)
				port = strtol(argv[0], NULL, 10);
			else if ((eq = strrchr(f->spec, '=')) != NULL) {
				*eq = '\0';
				port = strtol(eq + 1, NULL, 10);
			} else
				usage();
			if (port <= 0 || port > 65535)
				usage();
			f->guest_port = (uint16_t)port;
			if ((f->lfd = ctl_listen(f->spec, &cause)) == -1)
				fatalx("%s: %s", f->spec, cause);
			f->lev = event_new(c.base, f->lfd, EV_READ | EV_PERSIST, ctl_accept, f);
			event_add(f->lev, NULL);
		}
	} else
		usage();
	sigev = evsignal_new(c.base, SIGTERM, ctl_signal, c.base);
	sigev2 = evsignal_new(c.base, SIGINT, ctl_signal, c.base);
	evsignal_add(sigev, NULL);
	evsignal_add(sigev2, NULL);
	c.ac = agent_client_new(c.base, sock, &cb, &c);
	event_base_dispatch(c.base);
	agent_client_free(c.ac);
	for (i = 0; i < c.nfwds; i++) {
		event_free(c.fwds[i].lev);
		close(c.fwds[i].lfd);
		if (strncmp(c.fwds[i].spec, "unix:", 5) == 0)
			unlink(c.fwds[i].spec + 5);
		free(c.fwds[i].spec);
	}
	event_free(sigev);
	event_free(sigev2);
	free(c.rtts);
	event_base_free(c.base);
	return 0;
}
