/*
 * Control socket server (main thread): one JSON request per SEQPACKET
 * message, replies in order. Operations on sandboxes are handed to the
 * worker that owns them (gw_worker.h) and answered when it has run them;
 * the main loop never waits.
 */
#include <sys/queue.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/shared/gw_ctl.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_server.h"
#include "gateway/gw_worker.h"

/*
 * One airlockd connection. Requests run one at a time per client: while
 * one is with the workers (call != NULL) the client's socket is not read,
 * so replies leave in request order without queueing them here.
 */
struct gw_client {
	struct gw		*gw;
	int			 fd;
	struct event		*ev;
	struct gw_call		*call;		/* the request in progress, or NULL */
	LIST_ENTRY(gw_client)	 entry;
};

/* A request waiting for worker answers (main thread). */
struct gw_call {
	struct gw_client	*client;	/* NULL once the client is gone */
	json_t			*seq;
	json_t			*reply;		/* merged answers; NULL after a failure */
	char			*cause;
	int			 waiting;	/* jobs not answered yet */
	int			 stats;		/* merge "sandboxes" maps, add rss_kb */
};

static int		 gw_listen_fd = -1;
static struct event	*gw_listen_ev;
static char		*gw_listen_path;
static LIST_HEAD(, gw_client) gw_clients = LIST_HEAD_INITIALIZER(gw_clients);

static void	gw_client_read(evutil_socket_t, short, void *);

static void
gw_client_free(struct gw_client *c)
{
	LIST_REMOVE(c, entry);
	if (c->call != NULL)
		c->call->client = NULL;	/* its answers still come; nobody to tell */
	event_free(c->ev);
	close(c->fd);
	free(c);
}

static long
gw_rss_kb(void)
{
	char *text = NULL, *p;
	long kb = -1;

	if (read_file("/proc/self/status", 1 << 16, &text, NULL, NULL) == 0 &&
	    (p = strstr(text, "VmRSS:")) != NULL)
		kb = strtol(p + 6, NULL, 10);
	free(text);
	return kb;
}

static json_t *
gw_op_hello(struct gw *gw)
{
	return json_pack("{s:i,s:I,s:o,s:i}", "version", GW_CTL_VERSION,
	    "pid", (json_int_t)getpid(), "sandboxes", gw_shard_ids(gw),
	    "threads", gw->nworkers);
}

static int
gw_valid_id(const char *id)
{
	return id != NULL && *id != '\0' && strlen(id) <= 64 &&
	    strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-_") == strlen(id);
}

/* Send reply (ok added here, seq echoed) and free it. */
static void
gw_client_reply(struct gw_client *c, json_t *reply, const char *cause, json_t *seq)
{
	char *err = NULL;

	if (reply == NULL)
		reply = json_pack("{s:b,s:s}", "ok", 0, "error", cause != NULL ? cause : "failed");
	else
		json_object_set_new(reply, "ok", json_true());
	if (seq != NULL)
		json_object_set(reply, "seq", seq);
	switch (gw_ctl_send(c->fd, reply, NULL, 0, &err)) {
	case GW_CTL_AGAIN:
		/* The client's deadline fails its call; it is not reading. */
		log_warnx("gateway: control reply dropped: the client's socket is full");
		break;
	case -1:
		log_warnx("gateway: control reply: %s", err);
		free(err);
		break;
	}
	json_decref(reply);
}

static void
gw_call_finish(struct gw_call *call)
{
	struct gw_client *c = call->client;

	if (c != NULL) {
		if (call->reply != NULL && call->stats) {
			json_object_set_new(call->reply, "rss_kb", json_integer(gw_rss_kb()));
			json_object_set_new(call->reply, "attached", json_integer((json_int_t)
			    json_object_size(json_object_get(call->reply, "sandboxes"))));
		}
		if (call->reply == NULL)
			log_warnx("gateway: control: %s", call->cause);
		gw_client_reply(c, call->reply, call->cause, call->seq);
		call->reply = NULL;
		c->call = NULL;
		event_add(c->ev, NULL);	/* the next request, if one is queued */
	}
	json_decref(call->reply);
	json_decref(call->seq);
	free(call->cause);
	free(call);
}

/* Main thread: a worker answered one job of a call. */
static void
gw_call_job_done(struct gw_job *j)
{
	struct gw_call *call = j->arg;

	if (j->result == NULL) {
		if (call->cause == NULL)
			call->cause = xstrdup(j->cause != NULL ? j->cause : "failed");
		json_decref(call->reply);
		call->reply = NULL;
	} else if (call->reply != NULL && call->stats)
		json_object_update(json_object_get(call->reply, "sandboxes"), j->result);
	if (--call->waiting == 0)
		gw_call_finish(call);
}

static struct gw_job *
gw_call_job(struct gw_call *call, enum gw_job_op op, const char *id, struct gw_worker *w)
{
	struct gw_job *j = gw_job_new(op, id);

	j->w = w;
	j->done = gw_call_job_done;
	j->arg = call;
	call->waiting++;
	return j;
}

/*
 * Packets the island's nftables dropped, counted and sent by airlockd (it
 * owns the rules; the gateway never sees those packets): written as the
 * same deny_summary lines as the gateway's own, by its one audit writer.
 * The sandbox need not be attached (a last count arrives after a detach).
 */
static json_t *
gw_op_drops(struct gw *gw, const char *id, json_t *req, char **cause)
{
	json_t *drops = json_object_get(req, "drops"), *d;
	json_int_t window = json_integer_value(json_object_get(req, "window_ms"));
	size_t i;

	if (!json_is_array(drops) || json_array_size(drops) > 64) {
		cause_set(cause, "drops: an array of at most 64 entries required");
		return NULL;
	}
	if (!json_is_integer(json_object_get(req, "window_ms")) || window < 0) {
		cause_set(cause, "window_ms: a non-negative integer required");
		return NULL;
	}
	json_array_foreach(drops, i, d) {
		const char *kind = json_string_value(json_object_get(d, "kind"));
		const char *reason = json_string_value(json_object_get(d, "reason"));
		json_int_t n = json_integer_value(json_object_get(d, "count"));

		if (kind == NULL || reason == NULL || strlen(kind) > 32 || strlen(reason) > 128 ||
		    !json_is_integer(json_object_get(d, "count")) || n <= 0) {
			cause_set(cause, "drops[%zu]: kind, reason and a positive count required", i);
			return NULL;
		}
	}
	json_array_foreach(drops, i, d) {
		struct gw_audit_rec r = { .event = "deny_summary", .sandbox = id,
		    .kind = json_string_value(json_object_get(d, "kind")),
		    .reason = json_string_value(json_object_get(d, "reason")),
		    .count = (uint64_t)json_integer_value(json_object_get(d, "count")),
		    .window_ms = (uint64_t)window };

		gw_audit_log(gw->audit, &r);
	}
	return json_object();
}

/*
 * Runs one request: an answer now (returned, or NULL + cause), or jobs
 * posted to the workers (*call set; the reply leaves when they answer).
 */
static json_t *
gw_dispatch(struct gw_client *c, json_t *req, int *fds, size_t nfds, struct gw_call **callp,
    int *quit, char **cause)
{
	struct gw *gw = c->gw;
	const char *op = json_string_value(json_object_get(req, "op"));
	const char *id = json_string_value(json_object_get(req, "sandbox"));
	struct gw_shard *s;
	struct gw_call *call;
	struct gw_policy *p = NULL;
	struct gw_job *j;
	enum gw_job_op jop;

	if (op == NULL) {
		cause_set(cause, "op: required");
		return NULL;
	}
	if (strcmp(op, "attach") != 0 && nfds > 0) {
		cause_set(cause, "%s: takes no file descriptors", op);
		return NULL;
	}
	if (strcmp(op, "hello") == 0)
		return gw_op_hello(gw);
	if (strcmp(op, "shutdown") == 0) {
		*quit = 1;
		return json_object();
	}
	if (strcmp(op, "stats") == 0) {
		call = xcalloc(1, sizeof *call);
		call->stats = 1;
		call->reply = json_pack("{s:o}", "sandboxes", json_object());
		if (id != NULL) {
			if ((s = gw_shard_find(gw, id)) != NULL)
				gw_job_post(gw, gw_call_job(call, GW_JOB_STATS, id, gw_shard_worker(s)));
		} else
			for (int i = 0; i < gw->nworkers; i++)
				gw_job_post(gw, gw_call_job(call, GW_JOB_STATS, NULL, &gw->workers[i]));
		*callp = call;
		return NULL;
	}
	if (!gw_valid_id(id)) {
		cause_set(cause, "sandbox: required, [a-z0-9_-]{1,64}");
		return NULL;
	}
	if (strcmp(op, "drops") == 0)
		return gw_op_drops(gw, id, req, cause);
	if (strcmp(op, "detach") == 0)
		jop = GW_JOB_DETACH;
	else if (strcmp(op, "update") == 0)
		jop = GW_JOB_UPDATE;
	else if (strcmp(op, "attach") == 0)
		jop = GW_JOB_ATTACH;
	else {
		cause_set(cause, "unknown op %s", op);
		return NULL;
	}
	/* Parsed here, on the main thread; the worker only adopts the result. */
	if (jop != GW_JOB_DETACH &&
	    (p = gw_policy_parse(json_object_get(req, "policy"), cause)) == NULL)
		return NULL;
	if (jop == GW_JOB_ATTACH && nfds != 2) {
		gw_policy_unref(p);
		cause_set(cause, "attach: needs 2 fds (tcp listener, dns socket), got %zu", nfds);
		return NULL;
	}
	s = jop == GW_JOB_ATTACH ? gw_shard_route(gw, id) : gw_shard_find(gw, id);
	if (s == NULL) {
		cause_set(cause, "sandbox %s is not attached", id);
		return NULL;
	}
	call = xcalloc(1, sizeof *call);
	call->reply = json_object();
	j = gw_call_job(call, jop, id, gw_shard_worker(s));
	j->shard = s;
	j->policy = p;
	if (jop == GW_JOB_ATTACH) {
		j->project = xstrdup(json_string_value(json_object_get(req, "project")) ?: "");
		j->fds[0] = fds[0];
		j->fds[1] = fds[1];
		fds[0] = fds[1] = -1;	/* the job owns them now */
	}
	gw_job_post(gw, j);
	*callp = call;
	return NULL;
}

static void
gw_client_read(evutil_socket_t fd, short what, void *arg)
{
	struct gw_client *c = arg;
	int fds[GW_CTL_MAX_FDS];
	size_t nfds = 0;
	json_t *req = NULL, *reply, *seq;
	struct gw_call *call = NULL;
	char *cause = NULL;
	int rc, quit = 0;

	if (c->call != NULL)
		return;	/* one request at a time; re-armed when it is answered */
	rc = gw_ctl_recv(c->fd, &req, fds, &nfds, &cause);
	if (rc == GW_CTL_AGAIN)
		return;
	if (rc == 0) {
		log_debug("gateway: control client left");
		gw_client_free(c);
		return;
	}
	if (rc == -1) {
		gw_client_reply(c, NULL, cause, NULL);
		free(cause);
		return;
	}
	seq = json_object_get(req, "seq");
	reply = gw_dispatch(c, req, fds, nfds, &call, &quit, &cause);
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] != -1)
			close(fds[i]);
	if (call != NULL) {
		/* Answered by the workers: stop reading until then. */
		call->client = c;
		call->seq = json_incref(seq);
		c->call = call;
		event_del(c->ev);
		if (call->waiting == 0)
			gw_call_finish(call);	/* stats of an id nobody serves */
		json_decref(req);
		return;
	}
	if (reply == NULL)
		log_warnx("gateway: %s: %s", json_string_value(json_object_get(req, "op")) ?: "?",
		    cause);
	gw_client_reply(c, reply, cause, seq);
	free(cause);
	json_decref(req);
	if (quit) {
		log_info("gateway: shutdown requested");
		event_base_loopexit(c->gw->base, NULL);
	}
}

static void
gw_server_accept(evutil_socket_t fd, short what, void *arg)
{
	struct gw *gw = arg;
	struct gw_client *c;
	int cfd;

	if ((cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) == -1) {
		if (errno != EAGAIN && errno != EINTR)
			log_warn("gateway: control accept");
		return;
	}
	c = xcalloc(1, sizeof *c);
	c->gw = gw;
	c->fd = cfd;
	c->ev = event_new(gw->base, cfd, EV_READ | EV_PERSIST, gw_client_read, c);
	event_add(c->ev, NULL);
	LIST_INSERT_HEAD(&gw_clients, c, entry);
}

int
gw_server_listen(struct gw *gw, const char *path, char **cause)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof sun.sun_path) {
		cause_set(cause, "%s: path too long", path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		cause_set(cause, "socket: %s", strerror(errno));
		return -1;
	}
	/* A live gateway on this path would answer: the caller checked; the file is stale. */
	if (unlink(path) == -1 && errno != ENOENT) {
		cause_set(cause, "unlink %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		umask(old);
		cause_set(cause, "bind %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (listen(fd, 16) == -1) {
		cause_set(cause, "listen %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	gw_listen_fd = fd;
	gw_listen_path = xstrdup(path);
	gw_listen_ev = event_new(gw->base, fd, EV_READ | EV_PERSIST, gw_server_accept, gw);
	event_add(gw_listen_ev, NULL);
	return 0;
}

void
gw_server_close(struct gw *gw)
{
	while (!LIST_EMPTY(&gw_clients))
		gw_client_free(LIST_FIRST(&gw_clients));
	if (gw_listen_ev != NULL)
		event_free(gw_listen_ev);
	if (gw_listen_fd != -1)
		close(gw_listen_fd);
	/* Only remove the path if it is still ours (a successor may have bound it). */
	free(gw_listen_path);
	gw_listen_ev = NULL;
	gw_listen_fd = -1;
	gw_listen_path = NULL;
}
