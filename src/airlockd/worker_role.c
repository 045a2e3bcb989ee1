/* The worker role: registration, heartbeat, the replicas' and the probes' listeners. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "airlockd/worker_role.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "config/config.h"
#include "db/store.h"
#include "http/http_server.h"
#include "http/http_tls.h"
#include "sandbox/sbm.h"


struct worker_role {
	struct http_tls		*tls;		/* mTLS: only API replicas (role api) are served */
	struct event_base	*base;
	const struct config	*cfg;
	struct store		*st;
	struct sbm		*sbm;
	struct store_worker	 w;
	struct event		*tick;
	struct http_server	*health;
	int			 port;
	int64_t			 beat_ok_ms;	/* the last heartbeat the store took */
	worker_metrics_fn	 metrics;	/* GET /metrics on health_listen, if set */
	void			*metrics_arg;
};

/* The templates this host holds (templates/<name>/template.json). */
static json_t *
worker_templates(void)
{
	char *dir = paths_data("templates"), *meta;
	json_t *a = json_array();
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			xasprintf(&meta, "%s/%s/template.json", dir, de->d_name);
			if (access(meta, R_OK) == 0)
				json_array_append_new(a, json_string(de->d_name));
			free(meta);
		}
		closedir(d);
	}
	free(dir);
	return a;
}

/* Capacity, use, templates and state, as of now. */
static void
worker_measure(struct worker_role *wr)
{
	struct sbm_usage u;

	sbm_usage(wr->sbm, &u);
	wr->w.vcpus = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	/* What it gives its VMs, as its creates are admitted (placement sees the same). */
	wr->w.memory_mb = sbm_memory_cap_mb(wr->sbm);
	wr->w.used_vcpus = u.vcpus;
	wr->w.used_memory_mb = u.memory_mb;
	wr->w.sandboxes = u.sandboxes;
	wr->w.pool_ready = u.pool_ready;
	json_decref(wr->w.templates);
	wr->w.templates = worker_templates();
	wr->w.heartbeat_at = store_now_ms();
}

static void
worker_beat(struct worker_role *wr)
{
	char *cause = NULL;
	int rc;

	worker_measure(wr);
	if ((rc = store_worker_heartbeat(wr->st, &wr->w, &cause)) == 1) {
		wr->beat_ok_ms = store_now_ms();
		return;
	}
	if (rc == 0)
		fatalx("worker %s: the store holds a newer registration of this name (epoch > %lld): "
		    "another worker took it; stopping so that two never serve under one name",
		    wr->w.name, (long long)wr->w.epoch);
	log_warnx("worker %s: heartbeat: %s", wr->w.name, cause);
	free(cause);
}

static void
worker_tick(evutil_socket_t fd, short what, void *arg)
{
	worker_beat(arg);
}

/* Probes: /healthz (the loop runs), /readyz (registered and heard by the store lately). */
static void
worker_health(struct http_req *req, void *arg)
{
	struct worker_role *wr = arg;
	const char *path = http_req_path(req);
	int ready = store_now_ms() - wr->beat_ok_ms < 5 * WORKER_HEARTBEAT_MS;

	if (strcmp(http_req_method(req), "GET") != 0 && strcmp(http_req_method(req), "HEAD") != 0)
		http_reply_error(req, 405, "method_not_allowed", "GET only");
	else if (strcmp(path, "/healthz") == 0)
		http_reply_json(req, 200, json_pack("{s:s,s:s}", "status", "ok", "worker",
		    wr->w.name));
	else if (strcmp(path, "/readyz") == 0)
		http_reply_json(req, ready ? 200 : 503, json_pack("{s:s,s:s,s:s}", "status",
		    ready ? "ready" : "not ready", "worker", wr->w.name, "state", wr->w.state));
	else if (strcmp(path, "/metrics") == 0 && wr->metrics != NULL) {
		struct evbuffer *out = evbuffer_new();

		wr->metrics(out, wr->metrics_arg);
		http_reply(req, 200, "text/plain; version=0.0.4", (const char *)evbuffer_pullup(out,
		    -1), evbuffer_get_length(out));
		evbuffer_free(out);
	} else
		http_reply_error(req, 404, "not_found", "only /healthz, /readyz and /metrics here");
}

void
worker_role_set_metrics(struct worker_role *wr, worker_metrics_fn fn, void *arg)
{
	wr->metrics = fn;
	wr->metrics_arg = arg;
}

/* HOST:PORT into its parts (IPv6 in brackets). */
static int
split_hostport(const char *what, const char *s, char **host, int *port, char **cause)
{
	const char *colon = s != NULL ? strrchr(s, ':') : NULL;
	char *end;
	long p;

	if (colon == NULL || colon == s) {
		cause_set(cause, "%s: want HOST:PORT", what);
		return -1;
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || end == colon + 1 || p < 0 || p > 65535) {
		cause_set(cause, "%s: bad port in \"%s\"", what, s);
		return -1;
	}
	*host = xstrndup(s, (size_t)(colon - s));
	if (**host == '[' && (*host)[strlen(*host) - 1] == ']') {
		memmove(*host, *host + 1, strlen(*host));
		(*host)[strlen(*host) - 1] = '\0';
	}
	*port = (int)p;
	return 0;
}

/* worker_listen, or the API's listen address when it is not set. */
static int
worker_listen(struct worker_role *wr, struct http_server *api, char **cause)
{
	char *host;
	int port, rc;

	if (wr->cfg->cluster_ca == NULL || wr->cfg->cluster_cert == NULL ||
	    wr->cfg->cluster_key == NULL) {
		cause_set(cause, "role worker: the API replicas are served over mutual TLS only: set "
		    "cluster_ca, cluster_cert and cluster_key (airlock cluster cert --role worker)");
		return -1;
	}
	if ((wr->tls = http_tls_new_mtls(wr->cfg->cluster_cert, wr->cfg->cluster_key,
	    wr->cfg->cluster_ca, "api", cause)) == NULL)
		return -1;
	http_tls_attach(wr->tls, api);
	http_server_set_nodelay(api);	/* the replicas' hop (docs/performance.md) */
	if (wr->cfg->worker_listen == NULL) {
		host = xstrdup(wr->cfg->listen_host);
		port = wr->cfg->listen_port;
	} else if (split_hostport("worker_listen", wr->cfg->worker_listen, &host, &port,
	    cause) == -1)
		return -1;
	rc = http_server_listen(api, host, port, cause);
	free(host);
	if (rc == -1)
		return -1;
	wr->port = http_server_port(api);
	if (wr->cfg->health_listen == NULL)
		return 0;
	if (split_hostport("health_listen", wr->cfg->health_listen, &host, &port, cause) == -1)
		return -1;
	wr->health = http_server_new(wr->base, worker_health, wr);
	rc = http_server_listen(wr->health, host, port, cause);
	free(host);
	return rc;
}

/* Without advertise: the listen address with the bound port (a wildcard: loopback). */
static int
worker_advertise_default(const struct config *cfg, int port, char *out, size_t len,
    char **cause)
{
	char *host;
	int p;

	if (cfg->worker_listen == NULL)
		host = xstrdup(cfg->listen_host);
	else if (split_hostport("worker_listen", cfg->worker_listen, &host, &p, cause) == -1)
		return -1;
	if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 || *host == '\0')
		snprintf(out, len, "127.0.0.1:%d", port);
	else if (strchr(host, ':') != NULL)
		snprintf(out, len, "[%s]:%d", host, port);
	else
		snprintf(out, len, "%s:%d", host, port);
	free(host);
	return 0;
}

struct worker_role *
worker_role_new(struct event_base *base, const struct config *cfg, struct store *st,
    struct sbm *sbm, struct http_server *api, char **cause)
{
	struct worker_role *wr = xcalloc(1, sizeof(*wr));
	struct timeval tv = { WORKER_HEARTBEAT_MS / 1000, (WORKER_HEARTBEAT_MS % 1000) * 1000 };

	wr->base = base;
	wr->cfg = cfg;
	wr->st = st;
	wr->sbm = sbm;
	snprintf(wr->w.name, sizeof(wr->w.name), "%s", sbm_worker_name(sbm));
	if ((wr->w.labels = config_labels(cfg->worker_labels, cause)) == NULL ||
	    worker_listen(wr, api, cause) == -1)
		goto fail;
	if (cfg->advertise != NULL)
		snprintf(wr->w.addr, sizeof(wr->w.addr), "%s", cfg->advertise);
	else if (worker_advertise_default(cfg, wr->port, wr->w.addr, sizeof(wr->w.addr),
	    cause) == -1)
		goto fail;
	wr->w.abi = sbm_abi(sbm);
	snprintf(wr->w.state, sizeof(wr->w.state), "up");
	worker_measure(wr);
	wr->w.started_at = wr->w.heartbeat_at;
	if (store_worker_register(st, &wr->w, cause) == -1) {
		cause_wrap(cause, "register worker %s", wr->w.name);
		goto fail;
	}
	wr->beat_ok_ms = store_now_ms();
	log_info("worker %s: registered at epoch %lld, serving the API replicas on port %d "
	    "(advertised as %s)", wr->w.name, (long long)wr->w.epoch, wr->port, wr->w.addr);
	wr->tick = event_new(base, -1, EV_PERSIST, worker_tick, wr);
	event_add(wr->tick, &tv);
	return wr;
fail:
	worker_role_free(wr);
	return NULL;
}

int
worker_role_port(const struct worker_role *w)
{
	return w->port;
}

void
worker_role_drain(struct worker_role *wr)
{
	if (strcmp(wr->w.state, "draining") == 0)
		return;
	snprintf(wr->w.state, sizeof(wr->w.state), "draining");
	log_info("worker %s: draining: no new sandboxes are placed here", wr->w.name);
	worker_beat(wr);
}

void
worker_role_free(struct worker_role *wr)
{
	if (wr == NULL)
		return;
	if (wr->tick != NULL)
		event_free(wr->tick);
	if (wr->health != NULL)
		http_server_free(wr->health);
	store_worker_clear(&wr->w);
	/* airlockd frees the API server first: nothing uses the transport now. */
	http_tls_free(wr->tls);
	free(wr);
}
