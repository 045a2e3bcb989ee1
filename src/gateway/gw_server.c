/* Control socket server: one JSON request per SEQPACKET message, replies in order. */
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
#include "gateway/shared/gw_ctl.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_server.h"

struct gw_client {
	struct gw		*gw;
	int			 fd;
	struct event		*ev;
	LIST_ENTRY(gw_client)	 entry;
};

static int		 gw_listen_fd = -1;
static struct event	*gw_listen_ev;
static char		*gw_listen_path;
static LIST_HEAD(, gw_client) gw_clients = LIST_HEAD_INITIALIZER(gw_clients);

static void
gw_client_free(struct gw_client *c)
{
	LIST_REMOVE(c, entry);
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
	struct gw_sandbox *sb;
	json_t *ids = json_array();

	TAILQ_FOREACH(sb, &gw->sandboxes, entry)
		json_array_append_new(ids, json_string(sb->id));
	return json_pack("{s:i,s:I,s:o}", "version", GW_CTL_VERSION,
	    "pid", (json_int_t)getpid(), "sandboxes", ids);
}

static json_t *
gw_op_stats(struct gw *gw, const char *id)
{
	struct gw_sandbox *sb;
	json_t *all = json_object();

	TAILQ_FOREACH(sb, &gw->sandboxes, entry)
		if (id == NULL || strcmp(id, sb->id) == 0)
			json_object_set_new(all, sb->id, gw_sandbox_stats(sb));
	return json_pack("{s:o,s:I,s:I}", "sandboxes", all, "rss_kb", (json_int_t)gw_rss_kb(),
	    "attached", (json_int_t)json_object_size(all));
}

static int
gw_valid_id(const char *id)
{
	return id != NULL && *id != '\0' && strlen(id) <= 64 &&
	    strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-_") == strlen(id);
}

/* Runs one request; returns the reply body (ok added by the caller) or NULL + cause. */
static json_t *
gw_dispatch(struct gw_client *c, json_t *req, int *fds, size_t nfds, int *quit, char **cause)
{
	struct gw *gw = c->gw;
	const char *op = json_string_value(json_object_get(req, "op"));
	const char *id = json_string_value(json_object_get(req, "sandbox"));
	struct gw_sandbox *sb;
	struct gw_policy *p;

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
	if (strcmp(op, "stats") == 0)
		return gw_op_stats(gw, id);
	if (strcmp(op, "shutdown") == 0) {
		*quit = 1;
		return json_object();
	}
	if (!gw_valid_id(id)) {
		cause_set(cause, "sandbox: required, [a-z0-9_-]{1,64}");
		return NULL;
	}
	if (strcmp(op, "detach") == 0) {
		if ((sb = gw_sandbox_find(gw, id)) == NULL) {
			cause_set(cause, "sandbox %s is not attached", id);
			return NULL;
		}
		gw_sandbox_detach(sb);
		return json_object();
	}
	if (strcmp(op, "attach") != 0 && strcmp(op, "update") != 0) {
		cause_set(cause, "unknown op %s", op);
		return NULL;
	}
	if ((p = gw_policy_parse(json_object_get(req, "policy"), cause)) == NULL)
		return NULL;
	if (strcmp(op, "update") == 0) {
		if ((sb = gw_sandbox_find(gw, id)) == NULL) {
			gw_policy_unref(p);
			cause_set(cause, "sandbox %s is not attached", id);
			return NULL;
		}
		gw_sandbox_update(sb, p);
		return json_object();
	}
	if (nfds != 2) {
		gw_policy_unref(p);
		cause_set(cause, "attach: needs 2 fds (tcp listener, dns socket), got %zu", nfds);
		return NULL;
	}
	if (gw_sandbox_attach(gw, id, json_string_value(json_object_get(req, "project")), p,
	    fds[0], fds[1], cause) == -1) {
		gw_policy_unref(p);
		return NULL;
	}
	fds[0] = fds[1] = -1;	/* the sandbox owns them now */
	return json_object();
}

static void
gw_client_read(evutil_socket_t fd, short what, void *arg)
{
	struct gw_client *c = arg;
	int fds[GW_CTL_MAX_FDS];
	size_t nfds = 0;
	json_t *req = NULL, *reply, *seq;
	char *cause = NULL;
	int rc, quit = 0;

	rc = gw_ctl_recv(c->fd, &req, fds, &nfds, &cause);
	if (rc == -1 && cause != NULL && strcmp(cause, "again") == 0) {
		free(cause);
		return;
	}
	if (rc == 0) {
		log_debug("gateway: control client left");
		gw_client_free(c);
		return;
	}
	if (rc == -1) {
		reply = json_pack("{s:b,s:s}", "ok", 0, "error", cause);
		free(cause);
		cause = NULL;
		goto send;
	}
	seq = json_object_get(req, "seq");
	reply = gw_dispatch(c, req, fds, nfds, &quit, &cause);
	for (size_t i = 0; i < nfds; i++)
		if (fds[i] != -1)
			close(fds[i]);
	if (reply == NULL) {
		log_warnx("gateway: %s: %s", json_string_value(json_object_get(req, "op")) ?: "?",
		    cause);
		reply = json_pack("{s:b,s:s}", "ok", 0, "error", cause);
		free(cause);
		cause = NULL;
	} else
		json_object_set_new(reply, "ok", json_true());
	if (seq != NULL)
		json_object_set(reply, "seq", seq);
send:
	if (gw_ctl_send(c->fd, reply, NULL, 0, &cause) == -1) {
		log_warnx("gateway: control reply: %s", cause);
		free(cause);
	}
	json_decref(reply);
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
