/* Connect to / start airlock-gateway and make synchronous control calls. */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "egress/egress_gw.h"
#include "gateway/shared/gw_ctl.h"

struct egress_gw {
	struct egress_gw_config	 cfg;
	struct event_base	*base;
	struct event		*watch;	/* the control fd between calls: EOF = gateway gone */
	egress_gw_restart_fn	 restart;
	void			*arg;
	int			 fd;
	long			 pid;
	int64_t			 seq;
	int			 hung;	/* the last call got no reply in time */
};

static void egress_watch_cb(evutil_socket_t, short, void *);

struct egress_gw *
egress_gw_new(const struct egress_gw_config *cfg, struct event_base *base,
    egress_gw_restart_fn restart, void *arg)
{
	struct egress_gw *g = xcalloc(1, sizeof *g);

	g->cfg = *cfg;
	g->base = base;
	g->restart = restart;
	g->arg = arg;
	g->fd = -1;
	return g;
}

static void
egress_unwatch(struct egress_gw *g)
{
	if (g->watch != NULL) {
		event_free(g->watch);
		g->watch = NULL;
	}
}

/* Watch the connection between calls, so a gateway that dies is noticed at once. */
static void
egress_watch(struct egress_gw *g)
{
	egress_unwatch(g);
	if (g->base == NULL || g->restart == NULL || g->fd == -1)
		return;
	g->watch = event_new(g->base, g->fd, EV_READ | EV_PERSIST, egress_watch_cb, g);
	event_add(g->watch, NULL);
}

static void
egress_close(struct egress_gw *g)
{
	egress_unwatch(g);
	if (g->fd != -1) {
		close(g->fd);
		g->fd = -1;
	}
}

static int
egress_connect(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof sun.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

#define EGRESS_REFUSED	(-1)	/* the gateway answered ok:false */
#define EGRESS_BROKEN	(-2)	/* no answer: connection gone or stuck */

/* One request, one reply, within EGRESS_GW_CALL_MS. 0 with *out (ok:true) or an error above. */
static int
egress_call_raw(struct egress_gw *g, json_t *req, const int *fds, size_t nfds, json_t **out,
    char **cause)
{
	struct pollfd pfd = { .fd = g->fd, .events = POLLIN };
	json_t *reply = NULL;
	int64_t seq = ++g->seq;
	uint64_t deadline = monotonic_ms() + EGRESS_GW_CALL_MS;
	int rc;

	*out = NULL;
	g->hung = 0;
	json_object_set_new(req, "seq", json_integer(seq));
	if (g->fd == -1) {
		cause_set(cause, "not connected");
		return EGRESS_BROKEN;
	}
	if (gw_ctl_send(g->fd, req, fds, nfds, cause) == -1)
		return EGRESS_BROKEN;
	for (;;) {
		uint64_t now = monotonic_ms();

		if (now >= deadline) {
			cause_set(cause, "no reply within %d ms", EGRESS_GW_CALL_MS);
			g->hung = 1;
			return EGRESS_BROKEN;
		}
		rc = poll(&pfd, 1, (int)(deadline - now));
		if (rc == -1 && errno == EINTR)
			continue;
		if (rc <= 0)
			continue;
		rc = gw_ctl_recv(g->fd, &reply, NULL, NULL, cause);
		if (rc == 0) {
			cause_set(cause, "gateway closed the control connection");
			return EGRESS_BROKEN;
		}
		if (rc == -1)
			return EGRESS_BROKEN;
		/* Replies come in order; an older seq is a reply to a call that timed out. */
		if (json_integer_value(json_object_get(reply, "seq")) != seq) {
			json_decref(reply);
			reply = NULL;
			continue;
		}
		break;
	}
	if (!json_is_true(json_object_get(reply, "ok"))) {
		cause_set(cause, "%s", json_string_value(json_object_get(reply, "error")) ?:
		    "gateway refused");
		json_decref(reply);
		return EGRESS_REFUSED;
	}
	*out = reply;
	return 0;
}

static json_t *
egress_call_fd(struct egress_gw *g, json_t *req, const int *fds, size_t nfds, char **cause)
{
	json_t *reply;

	egress_call_raw(g, req, fds, nfds, &reply, cause);
	return reply;
}

static int
egress_spawn(struct egress_gw *g, char **cause)
{
	char uid[32], gid[32], threads[16];
	const char *argv[32];
	int n = 0, logfd;
	pid_t pid;

	snprintf(uid, sizeof uid, "%u", (unsigned)g->cfg.uid);
	snprintf(gid, sizeof gid, "%u", (unsigned)g->cfg.gid);
	argv[n++] = g->cfg.bin;
	argv[n++] = "--ctl";
	argv[n++] = g->cfg.ctl_path;
	argv[n++] = "--audit-dir";
	argv[n++] = g->cfg.audit_dir;
	argv[n++] = "--ca-cert";
	argv[n++] = g->cfg.ca_cert;
	argv[n++] = "--ca-key";
	argv[n++] = g->cfg.ca_key;
	argv[n++] = "--uid";
	argv[n++] = uid;
	argv[n++] = "--gid";
	argv[n++] = gid;
	if (g->cfg.upstream_ca != NULL) {
		argv[n++] = "--upstream-ca";
		argv[n++] = g->cfg.upstream_ca;
	}
	if (g->cfg.resolver != NULL) {
		argv[n++] = "--resolver";
		argv[n++] = g->cfg.resolver;
	}
	if (g->cfg.netns != NULL) {
		argv[n++] = "--netns";
		argv[n++] = g->cfg.netns;
	}
	if (g->cfg.threads > 0) {
		snprintf(threads, sizeof threads, "%d", g->cfg.threads);
		argv[n++] = "--threads";
		argv[n++] = threads;
	}
	if (g->cfg.log_json)
		argv[n++] = "--log-json";
	argv[n] = NULL;

	/* Its own log: it outlives us, and must not hold our stderr pipe open. */
	logfd = open(g->cfg.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (logfd == -1) {
		cause_set(cause, "open %s: %s", g->cfg.log_path, strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		/* Double fork: the gateway is reparented away from airlockd and never a zombie of it. */
		if (fork() != 0)
			_exit(0);
		setsid();
		dup2(logfd, 1);
		dup2(logfd, 2);
		int nullfd = open("/dev/null", O_RDONLY);
		if (nullfd != -1)
			dup2(nullfd, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		execv(g->cfg.bin, (char *const *)argv);
		dprintf(2, "airlockd: exec %s: %s\n", g->cfg.bin, strerror(errno));
		_exit(127);
	}
	close(logfd);
	while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
		;
	return 0;
}

static int
egress_hello(struct egress_gw *g, json_t **ids, char **cause)
{
	json_t *req = json_pack("{s:s}", "op", "hello"), *reply;

	reply = egress_call_fd(g, req, NULL, 0, cause);
	json_decref(req);
	if (reply == NULL)
		return -1;
	if (json_integer_value(json_object_get(reply, "version")) != GW_CTL_VERSION) {
		cause_set(cause, "gateway speaks protocol %lld, airlockd %d",
		    (long long)json_integer_value(json_object_get(reply, "version")), GW_CTL_VERSION);
		json_decref(reply);
		return -1;
	}
	g->pid = (long)json_integer_value(json_object_get(reply, "pid"));
	if (ids != NULL)
		*ids = json_incref(json_object_get(reply, "sandboxes"));
	json_decref(reply);
	return 0;
}

int
egress_gw_open(struct egress_gw *g, json_t **ids, char **cause)
{
	uint64_t deadline;
	int started = 0;

	if (ids != NULL)
		*ids = NULL;
	egress_close(g);
	if ((g->fd = egress_connect(g->cfg.ctl_path)) == -1) {
		if (errno != ENOENT && errno != ECONNREFUSED) {
			cause_set(cause, "connect %s: %s", g->cfg.ctl_path, strerror(errno));
			return -1;
		}
		if (egress_spawn(g, cause) == -1)
			return -1;
		started = 1;
		deadline = monotonic_ms() + EGRESS_GW_START_MS;
		while ((g->fd = egress_connect(g->cfg.ctl_path)) == -1) {
			if (monotonic_ms() >= deadline) {
				cause_set(cause, "airlock-gateway did not come up within %d ms (see %s)",
				    EGRESS_GW_START_MS, g->cfg.log_path);
				return -1;
			}
			usleep(20 * 1000);
		}
	}
	if (egress_hello(g, ids, cause) == -1) {
		egress_close(g);
		return -1;
	}
	egress_watch(g);
	log_info("gateway: %s airlock-gateway pid %ld", started ? "started" : "connected to",
	    g->pid);
	return 0;
}

/* Reconnect, starting a new gateway if it is gone; a new, empty one gets the restart hook. */
/*
 * A gateway that holds its control socket but answers nothing (stopped,
 * livelocked) would keep every call waiting for its deadline and never be
 * replaced: kill it, if the pid still is the gateway of this socket.
 */
static void
egress_kill_hung(struct egress_gw *g)
{
	char path[64], *cmd = NULL;
	size_t len = 0;
	int ours = 0;

	if (g->pid <= 0)
		return;
	snprintf(path, sizeof path, "/proc/%ld/cmdline", g->pid);
	if (read_file(path, 1 << 16, &cmd, &len, NULL) == 0) {
		for (size_t i = 0; i < len; i += strlen(cmd + i) + 1)
			if (strcmp(cmd + i, g->cfg.ctl_path) == 0)
				ours = 1;
	}
	free(cmd);
	if (!ours)
		return;
	log_warnx("gateway: airlock-gateway pid %ld does not answer; killing it", g->pid);
	kill((pid_t)g->pid, SIGKILL);
	/* Not our child (double fork): wait for /proc to let go, briefly. */
	for (int i = 0; i < 100 && access(path, F_OK) == 0; i++)
		usleep(10 * 1000);
	egress_close(g);
}

static int
egress_reopen(struct egress_gw *g, char **cause)
{
	json_t *ids = NULL;
	long oldpid = g->pid;

	if (egress_gw_open(g, &ids, cause) == -1)
		return -1;
	if (g->pid != oldpid && g->restart != NULL && json_array_size(ids) == 0) {
		json_decref(ids);
		g->restart(g->arg);
	} else
		json_decref(ids);
	return 0;
}

/*
 * Between calls nothing may be readable but a late reply to a call that
 * timed out (dropped here) or EOF: the gateway is gone. 1 if connected.
 */
static int
egress_alive(struct egress_gw *g)
{
	struct pollfd pfd = { .events = POLLIN };
	json_t *late;
	char *cause = NULL;

	if (g->fd == -1)
		return 0;
	pfd.fd = g->fd;
	while (poll(&pfd, 1, 0) == 1) {
		if (gw_ctl_recv(g->fd, &late, NULL, NULL, &cause) != 1) {
			free(cause);
			return 0;
		}
		json_decref(late);
	}
	return 1;
}

int
egress_gw_check(struct egress_gw *g, char **cause)
{
	if (egress_alive(g))
		return 0;
	if (g->fd != -1)
		log_warnx("gateway: airlock-gateway pid %ld went away; starting a new one", g->pid);
	return egress_reopen(g, cause);
}

int
egress_gw_ping(struct egress_gw *g, char **cause)
{
	json_t *req, *reply;
	char *why = NULL;
	int rc;

	if (!egress_alive(g))
		return egress_gw_check(g, cause);
	egress_unwatch(g);
	req = json_pack("{s:s}", "op", "hello");
	rc = egress_call_raw(g, req, NULL, 0, &reply, &why);
	json_decref(req);
	json_decref(reply);
	if (rc == 0 || rc == EGRESS_REFUSED) {
		free(why);
		egress_watch(g);
		return 0;
	}
	log_warnx("gateway: health check: %s", why);
	free(why);
	if (g->hung)
		egress_kill_hung(g);
	else
		egress_close(g);
	return egress_reopen(g, cause);
}

static void
egress_watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egress_gw *g = arg;
	char *cause = NULL;

	if (egress_gw_check(g, &cause) == -1) {
		log_warnx("gateway: %s (retried by the sweep)", cause);
		free(cause);
	}
}

/*
 * A call that reconnects once when the gateway went away. If the gateway
 * we reach is a new instance (nothing attached), the restart hook re-attaches
 * every sandbox before the call is retried.
 */
static json_t *
egress_call(struct egress_gw *g, json_t *req, const int *fds, size_t nfds, char **cause)
{
	json_t *reply;
	char *why = NULL;
	int rc;

	/* A refusal is an answer; only a broken connection is retried. */
	if ((rc = egress_call_raw(g, req, fds, nfds, &reply, &why)) == 0)
		return reply;
	if (rc == EGRESS_REFUSED) {
		if (cause != NULL)
			*cause = why;
		else
			free(why);
		return NULL;
	}
	if (g->fd != -1)
		log_warnx("gateway: %s; reconnecting", why);
	free(why);
	if (g->hung)
		egress_kill_hung(g);
	if (egress_reopen(g, cause) == -1)
		return NULL;
	return egress_call_fd(g, req, fds, nfds, cause);
}

int
egress_gw_attach(struct egress_gw *g, const char *id, const char *project, const json_t *policy,
    int tcp_fd, int dns_fd, char **cause)
{
	int fds[2] = { tcp_fd, dns_fd };
	json_t *req, *reply;

	req = json_pack("{s:s,s:s,s:s,s:O}", "op", "attach", "sandbox", id, "project",
	    project != NULL ? project : "", "policy", policy);
	reply = egress_call(g, req, fds, 2, cause);
	json_decref(req);
	if (reply == NULL) {
		cause_wrap(cause, "gateway attach %s", id);
		return -1;
	}
	json_decref(reply);
	return 0;
}

int
egress_gw_update(struct egress_gw *g, const char *id, const json_t *policy, char **cause)
{
	json_t *req, *reply;

	req = json_pack("{s:s,s:s,s:O}", "op", "update", "sandbox", id, "policy", policy);
	reply = egress_call(g, req, NULL, 0, cause);
	json_decref(req);
	if (reply == NULL) {
		cause_wrap(cause, "gateway update %s", id);
		return -1;
	}
	json_decref(reply);
	return 0;
}

int
egress_gw_detach(struct egress_gw *g, const char *id, char **cause)
{
	json_t *req, *reply;
	char *why = NULL;

	req = json_pack("{s:s,s:s}", "op", "detach", "sandbox", id);
	reply = egress_call(g, req, NULL, 0, &why);
	json_decref(req);
	if (reply == NULL) {
		if (why != NULL && strstr(why, "not attached") != NULL) {
			free(why);
			return 0;
		}
		cause_set(cause, "gateway detach %s: %s", id, why);
		free(why);
		return -1;
	}
	json_decref(reply);
	return 0;
}

json_t *
egress_gw_stats(struct egress_gw *g, const char *id, char **cause)
{
	json_t *req, *reply;

	req = json_pack("{s:s}", "op", "stats");
	if (id != NULL)
		json_object_set_new(req, "sandbox", json_string(id));
	reply = egress_call(g, req, NULL, 0, cause);
	json_decref(req);
	return reply;
}

void
egress_gw_shutdown(struct egress_gw *g)
{
	json_t *req, *reply;
	char *cause = NULL;

	if (g->fd == -1)
		return;
	/* Its going away is wanted now, not a crash to recover from. */
	egress_unwatch(g);
	req = json_pack("{s:s}", "op", "shutdown");
	reply = egress_call_fd(g, req, NULL, 0, &cause);
	json_decref(req);
	if (reply == NULL) {
		log_warnx("gateway: shutdown: %s", cause);
		free(cause);
	}
	json_decref(reply);
}

int
egress_gw_restart(struct egress_gw *g, char **cause)
{
	uint64_t deadline = monotonic_ms() + EGRESS_GW_START_MS;
	int fd;

	egress_gw_shutdown(g);
	egress_close(g);
	/* Until the old instance has closed its listener, a connect would reach it. */
	while ((fd = egress_connect(g->cfg.ctl_path)) != -1) {
		close(fd);
		if (monotonic_ms() >= deadline) {
			cause_set(cause, "airlock-gateway pid %ld did not stop", g->pid);
			return -1;
		}
		usleep(20 * 1000);
	}
	return egress_gw_open(g, NULL, cause);
}

long
egress_gw_pid(struct egress_gw *g)
{
	return g->pid;
}

void
egress_gw_free(struct egress_gw *g)
{
	if (g == NULL)
		return;
	egress_close(g);
	free(g);
}
