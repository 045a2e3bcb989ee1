/*
 * airlockd --role worker (issue 16, docs/cluster.md): one per host, sharing
 * a PostgreSQL store with the other workers and the API replicas. It
 * registers itself (name, the address the replicas dial, labels, capacity,
 * the snapshot ABI, the templates it holds), heartbeats every
 * WORKER_HEARTBEAT_MS with what its sandboxes use, serves the API to the
 * replicas on worker_listen (mutual TLS from the cluster CA) and a plain
 * /healthz, /readyz and /metrics for probes and scrapes on health_listen. A heartbeat refused
 * for a newer epoch (the name registered again elsewhere) ends the worker:
 * two workers must never serve under one name.
 */
#ifndef AIRLOCK_WORKER_ROLE_H
#define AIRLOCK_WORKER_ROLE_H

#include <event2/event.h>

struct config;
struct http_server;
struct sbm;
struct store;
struct worker_role;

#define WORKER_HEARTBEAT_MS	2000

/* Register and start the heartbeat and listeners; NULL and a cause on failure. */
struct worker_role *worker_role_new(struct event_base *base, const struct config *cfg,
    struct store *st, struct sbm *sbm, struct http_server *api, char **cause);
/*
 * What GET /metrics on health_listen serves (the worker's own Prometheus
 * text: its sandboxes, pools, gateway, disk; scraped per node, as the
 * replicas' /metrics has only the cluster's view).
 */
struct evbuffer;
typedef void (*worker_metrics_fn)(struct evbuffer *out, void *arg);
void worker_role_set_metrics(struct worker_role *w, worker_metrics_fn fn, void *arg);
/* The replicas' port (the one bound when worker_listen asked for port 0). */
int worker_role_port(const struct worker_role *w);
/* Refuse new work from now on: the next heartbeat (sent now) says draining. */
void worker_role_drain(struct worker_role *w);
void worker_role_free(struct worker_role *w);

#endif
