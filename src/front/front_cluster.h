/*
 * The API front as a cluster replica (airlockd --role api on its own,
 * issue 16, docs/cluster.md): it reads the workers and where each sandbox
 * runs from the shared PostgreSQL store and sends every request to a worker:
 *   - a request naming a sandbox (/v1/sandboxes/{id}..., E2B's
 *     /sandboxes/{id}... and /v2/sandboxes/{id}..., envd traffic by its
 *     E2b-Sandbox-Id header or a {port}-{id}.{domain} Host) to the worker
 *     that runs it (or, for envd's own paths with only X-Access-Token,
 *     the one whose sandbox has that token);
 *   - a create to the worker placement picks (front_place.h), or to the
 *     worker that holds the named snapshot or volume it uses;
 *   - a named snapshot's or volume's delete (and a volume's GET) to the
 *     worker that holds it;
 *   - a list to every live worker, the answers merged;
 *   - GET /v1/workers (an admin key) and /metrics are answered here, from
 *     the store;
 *   - anything else to one live worker (they share keys and secrets).
 * Workers are live while their heartbeat is younger than FRONT_WORKER_STALE_MS.
 */
#ifndef AIRLOCK_FRONT_CLUSTER_H
#define AIRLOCK_FRONT_CLUSTER_H

#include <event2/event.h>

struct config;
struct http_req;
struct front_cluster;

#define FRONT_WORKERS_REFRESH_MS 1000
#define FRONT_FANOUT_BODY_MAX	(16 * 1024 * 1024)

struct front_cluster *front_cluster_new(struct event_base *base, const struct config *cfg,
    char **cause);
void front_cluster_route(struct front_cluster *fc, struct http_req *req, const char *proto);
void front_cluster_free(struct front_cluster *fc);

#endif
