/* Sandboxes attached to the gateway: the island sockets, policy swaps, detach. */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/bufferevent.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/gw_proxy.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_sandbox.h"

struct gw_sandbox *
gw_sandbox_find(struct gw_worker *w, const char *id)
{
	struct gw_sandbox *sb;

	TAILQ_FOREACH(sb, &w->sandboxes, entry)
		if (strcmp(sb->id, id) == 0)
			return sb;
	return NULL;
}

static void
gw_sandbox_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	gw_proxy_accept(arg, fd);
}

static void
gw_sandbox_accept_error(struct evconnlistener *l, void *arg)
{
	struct gw_sandbox *sb = arg;

	/* EMFILE and friends: back off instead of spinning on a ready listener. */
	log_warn("gateway: accept on sandbox %s", sb->id);
}

static void
gw_sandbox_dns_cb(evutil_socket_t fd, short what, void *arg)
{
	gw_dns_readable(arg);
}

/* The island sockets must be what airlockd promised: a listening TCP and a UDP socket. */
static int
gw_check_socket(int fd, int type, int listening, char **cause)
{
	int v;
	socklen_t len = sizeof v;

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == -1 || v != type) {
		cause_set(cause, "fd %d is not a %s socket", fd, type == SOCK_STREAM ? "TCP" : "UDP");
		return -1;
	}
	len = sizeof v;
	if (listening && (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == -1 || !v)) {
		cause_set(cause, "fd %d is not listening", fd);
		return -1;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == -1) {
		cause_set(cause, "fcntl: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void
gw_sandbox_apply_policy(struct gw_sandbox *sb)
{
	const struct gw_policy *p = sb->policy;

	tbucket_init(&sb->req_bucket, p->rate.rps, p->rate.rps, monotonic_ms());
	gw_proxy_policy_changed(sb);
}

/* What a summary line says for each class. */
static const struct {
	const char	*kind;
	const char	*reason;
} gw_deny_what[GW_DENY_NCLASS] = {
	[GW_DENY_ACCEPT_RATE] = { "tcp", "new connections over rate" },
	[GW_DENY_CONN_CAP] = { "tcp", "too many connections" },
	[GW_DENY_DNS_RATE] = { "dns", "rate limited" },
};

void
gw_sandbox_deny_flush(struct gw_sandbox *sb)
{
	uint64_t now = monotonic_ms();

	for (int i = 0; i < GW_DENY_NCLASS; i++) {
		struct gw_audit_rec r = { .event = "deny_summary", .sandbox = sb->id,
		    .kind = gw_deny_what[i].kind, .reason = gw_deny_what[i].reason,
		    .count = sb->deny_count[i], .window_ms = now - sb->deny_since_ms };

		if (sb->deny_count[i] == 0)
			continue;
		gw_audit_log(sb->gw->audit, &r);
		sb->deny_count[i] = 0;
	}
	if (sb->deny_ev != NULL)
		evtimer_del(sb->deny_ev);
}

static void
gw_sandbox_deny_cb(evutil_socket_t fd, short what, void *arg)
{
	gw_sandbox_deny_flush(arg);
}

/*
 * The first refusal opens a window of GW_DENY_WINDOW_MS; when it closes,
 * one line per class with its count. A flood costs the audit log a few
 * lines a second per sandbox and loses no refusal; one guest's flood
 * neither hides nor delays another's lines (each sandbox has its own).
 */
void
gw_sandbox_deny(struct gw_sandbox *sb, enum gw_deny_class what)
{
	struct timeval tv = { GW_DENY_WINDOW_MS / 1000, (GW_DENY_WINDOW_MS % 1000) * 1000 };

	if (!evtimer_pending(sb->deny_ev, NULL)) {
		sb->deny_since_ms = monotonic_ms();
		evtimer_add(sb->deny_ev, &tv);
	}
	sb->deny_count[what]++;
}

int
gw_sandbox_attach(struct gw_worker *w, const char *id, const char *project, struct gw_policy *policy,
    int tcp_fd, int dns_fd, char **cause)
{
	struct gw_sandbox *sb;

	if (gw_check_socket(tcp_fd, SOCK_STREAM, 1, cause) == -1 ||
	    gw_check_socket(dns_fd, SOCK_DGRAM, 0, cause) == -1)
		return -1;
	if ((sb = gw_sandbox_find(w, id)) != NULL)
		gw_sandbox_detach(sb);

	sb = xcalloc(1, sizeof *sb);
	sb->gw = w->gw;
	sb->w = w;
	sb->id = xstrdup(id);
	sb->project = xstrdup(project != NULL ? project : "");
	sb->policy = policy;
	sb->tcp_fd = tcp_fd;
	sb->dns_fd = dns_fd;
	sb->pins = gw_pins_new();
	tbucket_init(&sb->accept_bucket, GW_ACCEPT_RATE, GW_ACCEPT_BURST, monotonic_ms());
	TAILQ_INIT(&sb->conns);
	/* LEV_OPT_CLOSE_ON_FREE: the listener owns tcp_fd from here. */
	sb->listener = evconnlistener_new(w->base, gw_sandbox_accept_cb, sb,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, tcp_fd);
	if (sb->listener == NULL) {
		cause_set(cause, "evconnlistener_new failed");
		sb->policy = NULL;
		sb->tcp_fd = -1;
		sb->dns_fd = -1;
		gw_pins_free(sb->pins);
		free(sb->project);
		free(sb->id);
		free(sb);
		return -1;
	}
	evconnlistener_set_error_cb(sb->listener, gw_sandbox_accept_error);
	sb->dns_ev = event_new(w->base, dns_fd, EV_READ | EV_PERSIST, gw_sandbox_dns_cb, sb);
	event_add(sb->dns_ev, NULL);
	sb->deny_ev = evtimer_new(w->base, gw_sandbox_deny_cb, sb);
	TAILQ_INSERT_TAIL(&w->sandboxes, sb, entry);
	gw_sandbox_apply_policy(sb);
	log_info("gateway: attached sandbox %s on worker %d (%s, %zu rules, %zu credentials)", id,
	    w->idx,
	    policy->mode == GW_MODE_FULL ? "full" :
	    policy->mode == GW_MODE_ALLOWLIST ? "allowlist" : "none",
	    policy->nrules, policy->ncreds);
	return 0;
}

void
gw_sandbox_update(struct gw_sandbox *sb, struct gw_policy *policy)
{
	gw_policy_unref(sb->policy);
	sb->policy = policy;
	gw_sandbox_apply_policy(sb);
	log_info("gateway: policy of sandbox %s updated", sb->id);
}

void
gw_sandbox_detach(struct gw_sandbox *sb)
{
	gw_proxy_close_all(sb);
	gw_dns_detach(sb);
	/* Refusals counted in the open window are written, not lost with the sandbox. */
	gw_sandbox_deny_flush(sb);
	event_free(sb->deny_ev);
	TAILQ_REMOVE(&sb->w->sandboxes, sb, entry);
	if (sb->listener != NULL)
		evconnlistener_free(sb->listener);
	if (sb->dns_ev != NULL)
		event_free(sb->dns_ev);
	if (sb->dns_fd != -1)
		close(sb->dns_fd);
	gw_proxy_sandbox_free(sb);
	gw_pins_free(sb->pins);
	gw_policy_unref(sb->policy);
	log_info("gateway: detached sandbox %s", sb->id);
	free(sb->project);
	free(sb->id);
	free(sb);
}

json_t *
gw_sandbox_stats(const struct gw_sandbox *sb)
{
	const struct gw_counters *c = &sb->counters;

	return json_pack("{s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "worker", sb->w->idx,
	    "dns_queries", (json_int_t)c->dns_queries, "dns_denied", (json_int_t)c->dns_denied,
	    "conns", (json_int_t)c->conns, "conns_denied", (json_int_t)c->conns_denied,
	    "requests", (json_int_t)c->requests, "requests_denied", (json_int_t)c->requests_denied,
	    "bytes_up", (json_int_t)c->bytes_up, "bytes_down", (json_int_t)c->bytes_down);
}
