/* Connect to / start airlock-gateway and make asynchronous control calls (see egress_gw.h). */
#include <sys/queue.h>
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

#define EGRESS_RETRY_MS		20	/* between connects while a gateway starts */

enum egress_state {
	EG_IDLE,	/* no connection, not trying (never started, or a start gave up) */
	EG_CONNECTING,	/* connecting, starting a gateway if none listens */
	EG_HELLO,	/* connected, our hello in flight */
	EG_UP,		/* requests flow */
	EG_STOPPING,	/* restart: shutdown sent, then wait for the socket to refuse */
};

enum egress_queue { EQ_NONE, EQ_PENDING, EQ_INFLIGHT, EQ_FAILING };

struct egress_req {
	TAILQ_ENTRY(egress_req)	 entry;
	struct egress_gw	*g;
	json_t			*msg;
	egress_gw_msg_free_fn	 msg_free;
	int			 fds[GW_CTL_MAX_FDS];
	size_t			 nfds;
	egress_gw_done_fn	 done;
	void			*arg;
	char			*op;		/* for logs */
	int64_t			 seq;
	struct event		*timer;		/* the deadline; or now, to deliver cause */
	uint64_t		 sent_ms;	/* on the current connection; 0 = not sent */
	int			 sends;
	int			 internal;	/* this connection's hello, a shutdown: never resent */
	int			 not_attached_ok;
	enum egress_queue	 queue;
	char			*cause;		/* set: fail with it when the timer fires */
};
TAILQ_HEAD(egress_reqs, egress_req);

struct egress_gw {
	struct egress_gw_config	 cfg;
	struct event_base	*base;
	egress_gw_restart_fn	 restart;
	void			*arg;
	int			 fd;
	struct event		*rd, *wr, *retry;
	enum egress_state	 state;
	long			 pid;
	int64_t			 seq;
	struct egress_reqs	 pending, inflight, failing;	/* failing: answer due now */
	uint64_t		 start_deadline;
	int			 spawned;	/* this start attempt started a process */
	long			 spawned_pid;	/* the last one we started, until it answers hello */
	uint64_t		 spawned_ms;
	int			 wait_refuse;	/* the old instance still listens: wait */
	int			 had_instance;	/* a gateway answered hello before */
	int			 pinging;
	int			 call_ms;
};

static void egress_read_cb(evutil_socket_t, short, void *);
static void egress_write_cb(evutil_socket_t, short, void *);
static void egress_retry_cb(evutil_socket_t, short, void *);
static void egress_timer_cb(evutil_socket_t, short, void *);
static void egress_lost(struct egress_gw *, const char *why);
static void egress_flush(struct egress_gw *);
static int egress_kill_ours(struct egress_gw *, long, const char *);
static int egress_is_ours(struct egress_gw *, long);

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
	g->call_ms = cfg->call_ms > 0 ? cfg->call_ms : EGRESS_GW_CALL_MS;
	g->retry = evtimer_new(base, egress_retry_cb, g);
	TAILQ_INIT(&g->pending);
	TAILQ_INIT(&g->inflight);
	TAILQ_INIT(&g->failing);
	return g;
}

/* --- requests -------------------------------------------------------------- */

static void
egress_unqueue(struct egress_req *r)
{
	struct egress_gw *g = r->g;

	if (r->queue == EQ_PENDING)
		TAILQ_REMOVE(&g->pending, r, entry);
	else if (r->queue == EQ_INFLIGHT)
		TAILQ_REMOVE(&g->inflight, r, entry);
	else if (r->queue == EQ_FAILING)
		TAILQ_REMOVE(&g->failing, r, entry);
	r->queue = EQ_NONE;
}

static void
egress_req_free(struct egress_req *r)
{
	egress_unqueue(r);
	if (r->msg_free != NULL)
		r->msg_free(r->msg);
	else
		json_decref(r->msg);
	for (size_t i = 0; i < r->nfds; i++)
		close(r->fds[i]);
	event_free(r->timer);
	free(r->op);
	free(r->cause);
	free(r);
}

/* Deliver the answer (once) and free the request. */
static void
egress_req_complete(struct egress_req *r, const json_t *reply, const char *cause)
{
	json_t *empty = NULL;

	egress_unqueue(r);
	if (reply == NULL && r->not_attached_ok && cause != NULL &&
	    strstr(cause, "not attached") != NULL)
		reply = empty = json_object();
	if (reply == NULL && cause == NULL)
		cause = "failed";
	if (r->done != NULL)
		r->done(reply, reply != NULL ? NULL : cause, r->arg);
	else if (reply == NULL)
		log_warnx("gateway: %s: %s", r->op, cause);
	json_decref(empty);
	egress_req_free(r);
}

/* Fail from the loop, never inside the caller's stack (no re-entrant callbacks). */
static void
egress_req_fail_later(struct egress_req *r, const char *cause)
{
	struct timeval now = { 0, 0 };

	egress_unqueue(r);
	TAILQ_INSERT_TAIL(&r->g->failing, r, entry);
	r->queue = EQ_FAILING;
	free(r->cause);
	r->cause = xstrdup(cause);
	evtimer_add(r->timer, &now);
}

static void
egress_fail_all(struct egress_gw *g, const char *cause)
{
	struct egress_req *r;

	while ((r = TAILQ_FIRST(&g->inflight)) != NULL)
		egress_req_fail_later(r, cause);
	while ((r = TAILQ_FIRST(&g->pending)) != NULL)
		egress_req_fail_later(r, cause);
}

static struct egress_req *
egress_req_new(struct egress_gw *g, json_t *msg, egress_gw_msg_free_fn msg_free, const int *fds,
    size_t nfds, egress_gw_done_fn done, void *arg)
{
	struct egress_req *r = xcalloc(1, sizeof *r);
	const char *op = json_string_value(json_object_get(msg, "op"));

	r->g = g;
	r->msg = msg;
	r->msg_free = msg_free;
	r->done = done;
	r->arg = arg;
	r->op = xstrdup(op != NULL ? op : "call");
	r->seq = ++g->seq;
	json_object_set_new(msg, "seq", json_integer(r->seq));
	r->timer = evtimer_new(g->base, egress_timer_cb, r);
	for (size_t i = 0; i < nfds && i < GW_CTL_MAX_FDS; i++) {
		if ((r->fds[r->nfds] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) == -1) {
			char *why;

			xasprintf(&why, "%s: dup: %s", r->op, strerror(errno));
			egress_req_fail_later(r, why);
			free(why);
			return r;
		}
		r->nfds++;
	}
	return r;
}

static void
egress_req_deadline(struct egress_req *r, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(r->timer, &tv);
}

/* --- the connection -------------------------------------------------------- */

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
	/* Non-blocking: a stopped gateway's full backlog must not block the connect. */
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void
egress_close(struct egress_gw *g)
{
	if (g->rd != NULL) {
		event_free(g->rd);
		g->rd = NULL;
	}
	if (g->wr != NULL) {
		event_free(g->wr);
		g->wr = NULL;
	}
	if (g->fd != -1) {
		close(g->fd);
		g->fd = -1;
	}
}

static int
egress_spawn(struct egress_gw *g, char **cause)
{
	char uid[32], gid[32], threads[16];
	const char *argv[32];
	int n = 0, logfd, pp[2];
	pid_t pid, gpid;

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
	if (pipe2(pp, O_CLOEXEC) == -1) {
		cause_set(cause, "pipe: %s", strerror(errno));
		close(logfd);
		return -1;
	}
	if ((pid = fork()) == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		close(logfd);
		close(pp[0]);
		close(pp[1]);
		return -1;
	}
	if (pid == 0) {
		/* Double fork: the gateway is reparented away from airlockd and never a zombie of it. */
		if ((gpid = fork()) != 0) {
			/* Its pid, so a start that never answers can be ended (egress_give_up). */
			if (write(pp[1], &gpid, sizeof gpid) != sizeof gpid)
				_exit(1);
			_exit(0);
		}
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
	close(pp[1]);
	/* The intermediate child exits at once (it only forks and writes the pid). */
	if (read(pp[0], &gpid, sizeof gpid) != sizeof gpid)
		gpid = 0;
	close(pp[0]);
	while (waitpid(pid, NULL, 0) == -1 && errno == EINTR)
		;
	g->spawned_pid = gpid > 0 ? (long)gpid : 0;
	g->spawned_ms = monotonic_ms();
	return 0;
}

/* A start attempt ends without a gateway: every waiting call fails with why. */
static void
egress_give_up(struct egress_gw *g, const char *why)
{
	log_warnx("gateway: %s", why);
	g->spawned = 0;
	egress_close(g);
	evtimer_del(g->retry);
	g->state = EG_IDLE;
	g->wait_refuse = 0;
	egress_fail_all(g, why);
}

static void
egress_retry_in(struct egress_gw *g, int ms)
{
	struct timeval tv = { 0, ms * 1000 };

	evtimer_add(g->retry, &tv);
}

/* Begin connecting (from the loop): start a gateway if none listens. */
static void
egress_start(struct egress_gw *g)
{
	egress_close(g);
	g->state = EG_CONNECTING;
	g->spawned = 0;
	g->start_deadline = monotonic_ms() + EGRESS_GW_START_MS;
	egress_retry_in(g, 0);
}

static void
egress_hello_done(const json_t *reply, const char *cause, void *arg)
{
	struct egress_gw *g = arg;
	json_t *ids;
	long oldpid = g->pid;
	int fresh;
	char *why;

	if (reply == NULL) {
		/* Lost or hung: egress_lost / the deadline already started over. */
		log_debug("gateway: hello: %s", cause);
		return;
	}
	if (json_integer_value(json_object_get(reply, "version")) != GW_CTL_VERSION) {
		xasprintf(&why, "gateway speaks protocol %lld, airlockd %d",
		    (long long)json_integer_value(json_object_get(reply, "version")),
		    GW_CTL_VERSION);
		egress_give_up(g, why);
		free(why);
		return;
	}
	g->pid = (long)json_integer_value(json_object_get(reply, "pid"));
	if (g->pid == g->spawned_pid)
		g->spawned_pid = 0;	/* it answered: no longer a start to clean up */
	ids = json_object_get(reply, "sandboxes");
	fresh = g->had_instance && g->pid != oldpid && json_array_size(ids) == 0;
	g->had_instance = 1;
	g->state = EG_UP;
	log_info("gateway: %s airlock-gateway pid %ld", g->spawned ? "started" : "connected to",
	    g->pid);
	egress_flush(g);
	if (fresh && g->restart != NULL)
		g->restart(g->arg);
}

/* Send r now (it becomes in flight). 0, GW_CTL_AGAIN, or -1 with cause. */
static int
egress_send(struct egress_gw *g, struct egress_req *r, char **cause)
{
	int rc = gw_ctl_send(g->fd, r->msg, r->fds, r->nfds, cause);

	if (rc != 0)
		return rc;
	egress_unqueue(r);
	TAILQ_INSERT_TAIL(&g->inflight, r, entry);
	r->queue = EQ_INFLIGHT;
	r->sent_ms = monotonic_ms();
	r->sends++;
	return 0;
}

static void
egress_connected(struct egress_gw *g, int fd)
{
	struct egress_req *r;
	char *cause = NULL;

	g->fd = fd;
	g->state = EG_HELLO;
	g->rd = event_new(g->base, fd, EV_READ | EV_PERSIST, egress_read_cb, g);
	g->wr = event_new(g->base, fd, EV_WRITE, egress_write_cb, g);
	event_add(g->rd, NULL);
	/* The connection's first message: which instance is this, what does it serve. */
	r = egress_req_new(g, json_pack("{s:s}", "op", "hello"), NULL, NULL, 0, egress_hello_done,
	    g);
	r->internal = 1;
	egress_req_deadline(r, g->call_ms);
	if (egress_send(g, r, &cause) != 0) {
		/* A fresh socket has room: this is a broken connection. */
		egress_req_free(r);
		egress_lost(g, cause != NULL ? cause : "hello: socket full");
		free(cause);
	}
}

/* The gateway we started last is alive and has not answered yet: 1 to keep waiting for it. */
static int
egress_starting(struct egress_gw *g)
{
	if (!egress_is_ours(g, g->spawned_pid)) {
		g->spawned_pid = 0;
		return 0;
	}
	if (monotonic_ms() - g->spawned_ms < 3 * EGRESS_GW_START_MS)
		return 1;
	if (egress_kill_ours(g, g->spawned_pid, "did not come up in 3 start deadlines"))
		g->spawned_pid = 0;
	return 0;
}

static void
egress_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egress_gw *g = arg;
	char *cause = NULL, *why;
	int cfd, e;

	if (g->state != EG_CONNECTING)
		return;
	cfd = egress_connect(g->cfg.ctl_path);
	e = errno;
	if (cfd != -1 && g->wait_refuse) {
		close(cfd);	/* the old instance, going away */
		cfd = -1;
		e = EAGAIN;
	} else if (cfd != -1) {
		egress_connected(g, cfd);
		return;
	}
	if (e == ENOENT || e == ECONNREFUSED) {
		g->wait_refuse = 0;
		/*
		 * One started earlier may still be coming up (a loaded host, a
		 * sanitizer build): wait for it rather than start a second that
		 * would take the socket from under it; one that has not bound
		 * its socket in 3 start deadlines is stuck and is replaced.
		 */
		if (!g->spawned && egress_starting(g))
			g->spawned = 1;
		if (!g->spawned) {
			if (egress_spawn(g, &cause) == -1) {
				xasprintf(&why, "start airlock-gateway: %s", cause);
				egress_give_up(g, why);
				free(why);
				free(cause);
				return;
			}
			g->spawned = 1;
		}
	} else if (e != EAGAIN) {
		xasprintf(&why, "connect %s: %s", g->cfg.ctl_path, strerror(e));
		egress_give_up(g, why);
		free(why);
		return;
	}
	if (monotonic_ms() >= g->start_deadline) {
		xasprintf(&why, "airlock-gateway did not come up within %d ms (see %s)",
		    EGRESS_GW_START_MS, g->cfg.log_path);
		egress_give_up(g, why);
		free(why);
		return;
	}
	egress_retry_in(g, EGRESS_RETRY_MS);
}

/*
 * The connection is gone: calls in flight go back to the head of the
 * queue (in order) for the next instance, once; a second loss fails them.
 */
static void
egress_lost(struct egress_gw *g, const char *why)
{
	struct egress_req *r;
	int stopping = g->state == EG_STOPPING;

	if (!stopping)
		log_warnx("gateway: %s; reconnecting", why);
	egress_close(g);
	g->pinging = 0;
	while ((r = TAILQ_LAST(&g->inflight, egress_reqs)) != NULL) {
		if (r->internal || r->sends >= 2) {
			egress_req_fail_later(r, why);
			continue;
		}
		egress_unqueue(r);
		r->sent_ms = 0;
		TAILQ_INSERT_HEAD(&g->pending, r, entry);
		r->queue = EQ_PENDING;
	}
	egress_start(g);
	g->wait_refuse = stopping;
}

/* pid is (still) a gateway of our control socket: pids are reused. */
static int
egress_is_ours(struct egress_gw *g, long pid)
{
	char path[64], *cmd = NULL;
	size_t len = 0;
	int ours = 0;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
	if (read_file(path, 1 << 16, &cmd, &len, NULL) == 0) {
		for (size_t i = 0; i < len; i += strlen(cmd + i) + 1)
			if (strcmp(cmd + i, g->cfg.ctl_path) == 0)
				ours = 1;
	}
	free(cmd);
	return ours;
}

/* Kill pid if it still is a gateway of our control socket. 1 if killed. */
static int
egress_kill_ours(struct egress_gw *g, long pid, const char *why)
{
	int ours = egress_is_ours(g, pid);

	if (ours) {
		log_warnx("gateway: airlock-gateway pid %ld %s; killing it", pid, why);
		kill((pid_t)pid, SIGKILL);
	}
	return ours;
}

/*
 * A gateway that holds its control socket but answers nothing (stopped,
 * livelocked) would keep every call waiting for its deadline and never be
 * replaced: kill it, if the pid still is the gateway of this socket, and
 * start over (the dying instance's socket is waited out, not waited for).
 */
static void
egress_hung(struct egress_gw *g, const char *why)
{
	char *what;
	int ours;

	xasprintf(&what, "does not answer (%s)", why);
	/* Stuck in hello: the instance may be one we started, whose pid hello would have told. */
	if (g->state == EG_HELLO && egress_kill_ours(g, g->spawned_pid, what))
		g->spawned_pid = 0;
	ours = egress_kill_ours(g, g->pid, what);
	free(what);
	egress_lost(g, why);
	g->wait_refuse = ours;
}

static void
egress_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egress_req *r = arg;
	struct egress_gw *g = r->g;
	char *why;
	int hung;

	if (r->cause != NULL) {
		why = r->cause;
		r->cause = NULL;
		egress_req_complete(r, NULL, why);
		free(why);
		return;
	}
	/* Sent a full call deadline ago and unanswered: the gateway is stuck. */
	hung = r->queue == EQ_INFLIGHT &&
	    monotonic_ms() - r->sent_ms + 10 >= (uint64_t)g->call_ms;
	if (r->queue == EQ_INFLIGHT)
		xasprintf(&why, "no reply within %d ms", g->call_ms);
	else
		xasprintf(&why, "no gateway answered within %d ms (%s)",
		    EGRESS_GW_START_MS + g->call_ms, g->state == EG_IDLE ? "not running" :
		    "still starting");
	egress_req_complete(r, NULL, why);
	if (hung && g->fd != -1)
		egress_hung(g, why);
	free(why);
}

static void
egress_flush(struct egress_gw *g)
{
	struct egress_req *r;
	char *cause = NULL;
	int rc;

	if (g->state != EG_UP)
		return;
	while ((r = TAILQ_FIRST(&g->pending)) != NULL) {
		if ((rc = egress_send(g, r, &cause)) == GW_CTL_AGAIN) {
			event_add(g->wr, NULL);
			return;
		}
		if (rc == -1) {
			egress_lost(g, cause);
			free(cause);
			return;
		}
	}
}

static void
egress_write_cb(evutil_socket_t fd, short what, void *arg)
{
	egress_flush(arg);
}

static void
egress_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct egress_gw *g = arg;
	struct egress_req *r;
	json_t *reply;
	char *cause = NULL;
	int64_t seq;
	int rc;

	while (g->fd == fd) {
		rc = gw_ctl_recv(fd, &reply, NULL, NULL, &cause);
		if (rc == GW_CTL_AGAIN)
			return;
		if (rc == 0) {
			egress_lost(g, g->state == EG_STOPPING ? "stopped" :
			    "gateway closed the control connection");
			return;
		}
		if (rc == -1) {
			egress_lost(g, cause);
			free(cause);
			return;
		}
		seq = json_integer_value(json_object_get(reply, "seq"));
		TAILQ_FOREACH(r, &g->inflight, entry)
			if (r->seq == seq)
				break;
		/* Not found: a late reply to a call whose deadline passed. */
		if (r != NULL) {
			if (json_is_true(json_object_get(reply, "ok")))
				egress_req_complete(r, reply, NULL);
			else
				egress_req_complete(r, NULL, json_string_value(json_object_get(reply,
				    "error")) ?: "gateway refused");
		}
		json_decref(reply);
	}
}

/* --- calls ----------------------------------------------------------------- */

static struct egress_req *
egress_queue(struct egress_gw *g, json_t *msg, egress_gw_msg_free_fn msg_free, const int *fds,
    size_t nfds, egress_gw_done_fn done, void *arg)
{
	struct egress_req *r = egress_req_new(g, msg, msg_free, fds, nfds, done, arg);

	if (r->cause != NULL)
		return r;	/* dup failed: already failing */
	egress_req_deadline(r, g->state == EG_UP ? g->call_ms : EGRESS_GW_START_MS + g->call_ms);
	TAILQ_INSERT_TAIL(&g->pending, r, entry);
	r->queue = EQ_PENDING;
	if (g->state == EG_IDLE)
		egress_start(g);
	else if (g->state == EG_UP && !event_pending(g->wr, EV_WRITE, NULL))
		egress_flush(g);
	return r;
}

void
egress_gw_call(struct egress_gw *g, json_t *msg, egress_gw_msg_free_fn msg_free, const int *fds,
    size_t nfds, egress_gw_done_fn done, void *arg)
{
	egress_queue(g, msg, msg_free, fds, nfds, done, arg);
}

void
egress_gw_attach(struct egress_gw *g, const char *id, const char *project, json_t *policy,
    egress_gw_msg_free_fn msg_free, int tcp_fd, int dns_fd, egress_gw_done_fn done, void *arg)
{
	int fds[2] = { tcp_fd, dns_fd };

	egress_queue(g, json_pack("{s:s,s:s,s:s,s:o}", "op", "attach", "sandbox", id, "project",
	    project != NULL ? project : "", "policy", policy), msg_free, fds, 2, done, arg);
}

void
egress_gw_update(struct egress_gw *g, const char *id, json_t *policy,
    egress_gw_msg_free_fn msg_free, egress_gw_done_fn done, void *arg)
{
	egress_queue(g, json_pack("{s:s,s:s,s:o}", "op", "update", "sandbox", id, "policy",
	    policy), msg_free, NULL, 0, done, arg);
}

void
egress_gw_detach(struct egress_gw *g, const char *id, egress_gw_done_fn done, void *arg)
{
	struct egress_req *r;

	r = egress_queue(g, json_pack("{s:s,s:s}", "op", "detach", "sandbox", id), NULL, NULL, 0,
	    done, arg);
	r->not_attached_ok = 1;
}

void
egress_gw_stats(struct egress_gw *g, const char *id, egress_gw_done_fn done, void *arg)
{
	json_t *msg = json_pack("{s:s}", "op", "stats");

	if (id != NULL)
		json_object_set_new(msg, "sandbox", json_string(id));
	egress_queue(g, msg, NULL, NULL, 0, done, arg);
}

void
egress_gw_hello(struct egress_gw *g, egress_gw_done_fn done, void *arg)
{
	egress_queue(g, json_pack("{s:s}", "op", "hello"), NULL, NULL, 0, done, arg);
}

static void
egress_ping_done(const json_t *reply, const char *cause, void *arg)
{
	struct egress_gw *g = arg;

	g->pinging = 0;
	if (reply == NULL)
		log_warnx("gateway: health check: %s", cause);
}

void
egress_gw_ping(struct egress_gw *g)
{
	switch (g->state) {
	case EG_IDLE:
		egress_start(g);	/* a start that gave up is retried by the sweep */
		break;
	case EG_UP:
		/* A deadline passed on it is the hung check (egress_timer_cb). */
		if (!g->pinging) {
			g->pinging = 1;
			egress_gw_hello(g, egress_ping_done, g);
		}
		break;
	default:
		break;	/* connecting or stopping: already on it */
	}
}

static void
egress_shutdown_done(const json_t *reply, const char *cause, void *arg)
{
	struct egress_gw *g = arg;

	/* Answered or not: wait for its socket to refuse, then start the new one. */
	if (g->state == EG_STOPPING)
		egress_lost(g, cause != NULL ? cause : "stopped");
}

void
egress_gw_restart(struct egress_gw *g)
{
	struct egress_req *r;
	char *cause = NULL;

	if (g->state != EG_UP) {
		egress_start(g);
		return;
	}
	r = egress_req_new(g, json_pack("{s:s}", "op", "shutdown"), NULL, NULL, 0,
	    egress_shutdown_done, g);
	r->internal = 1;
	egress_req_deadline(r, g->call_ms);
	g->state = EG_STOPPING;
	if (egress_send(g, r, &cause) != 0) {
		egress_req_free(r);
		egress_lost(g, cause != NULL ? cause : "shutdown: socket full");
		free(cause);
	}
}

void
egress_gw_shutdown(struct egress_gw *g)
{
	struct pollfd pfd = { .events = POLLIN };
	uint64_t deadline = monotonic_ms() + 1000;
	json_t *msg, *reply;
	int64_t seq = ++g->seq;
	char *cause = NULL;
	int done = 0;

	if (g->fd == -1 || g->state != EG_UP)
		return;
	/* Its going away is wanted now, not a crash to recover from. */
	event_del(g->rd);
	msg = json_pack("{s:s,s:I}", "op", "shutdown", "seq", (json_int_t)seq);
	if (gw_ctl_send(g->fd, msg, NULL, 0, &cause) != 0) {
		log_warnx("gateway: shutdown: %s", cause != NULL ? cause : "socket full");
		free(cause);
		done = 1;
	}
	json_decref(msg);
	pfd.fd = g->fd;
	while (!done) {
		uint64_t now = monotonic_ms();

		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) <= 0) {
			log_warnx("gateway: shutdown: no reply within 1000 ms");
			break;
		}
		switch (gw_ctl_recv(g->fd, &reply, NULL, NULL, &cause)) {
		case GW_CTL_AGAIN:
			continue;
		case 1:
			done = json_integer_value(json_object_get(reply, "seq")) == seq;
			json_decref(reply);
			continue;
		case -1:
			free(cause);
			cause = NULL;
			/* FALLTHROUGH */
		default:
			done = 1;
		}
	}
	egress_close(g);
	g->state = EG_IDLE;
}

long
egress_gw_pid(struct egress_gw *g)
{
	return g->pid;
}

int
egress_gw_up(struct egress_gw *g)
{
	return g->state == EG_UP;
}

static void
egress_quiet(const json_t *reply, const char *cause, void *arg)
{
}

void
egress_gw_free(struct egress_gw *g)
{
	struct egress_req *r;

	if (g == NULL)
		return;
	egress_close(g);
	/* Every call is answered once, even now: its caller may hold a reference. */
	egress_fail_all(g, EGRESS_GW_GONE);
	while ((r = TAILQ_FIRST(&g->failing)) != NULL) {
		r->done = r->done != NULL ? r->done : egress_quiet;
		egress_req_complete(r, NULL, EGRESS_GW_GONE);
	}
	event_free(g->retry);
	free(g);
}
