/*
 * The E2B front: E2B's control-plane API (/sandboxes, /v2/sandboxes,
 * /templates) and envd routing (E2b-Sandbox-Id + E2b-Sandbox-Port) on
 * airlockd's listener, so programs written for the E2B SDKs run against
 * airlock with environment variables only (docs/e2b.md). Its own trust
 * boundary: E2B-shaped client HTTP in, the same sandbox-manager calls the
 * /v1 API makes out (src/api/ does the validation helpers and the call
 * lifecycle; this folder only maps shapes).
 */
#ifndef AIRLOCK_E2B_H
#define AIRLOCK_E2B_H

#include "api/api.h"

/* The listener's router: E2B routes here, everything else to api_router (arg: struct api). */
void e2b_front(struct http_req *req, void *arg);

#define E2B_ENVD_VERSION	"0.6.4"	/* the top gate whose features the agent has: docs/e2b.md */
#define E2B_ENVD_PORT		49983
#define E2B_CLIENT_ID		"airlock"
#define E2B_DEFAULT_TIMEOUT_S	300
#define E2B_LIST_LIMIT_MAX	100
#define E2B_RESUME_TIMEOUT_S	15	/* ResumedSandbox.timeout's default in E2B's API */
#define E2B_REFRESH_MAX_S	3600	/* the refreshes duration's maximum in E2B's API */

/* Handlers (e2b_sandboxes.c, e2b_envd.c). */
void e2b_sandboxes_create(struct api_call *c);
void e2b_sandboxes_connect(struct api_call *c);
void e2b_sandboxes_resume(struct api_call *c);
void e2b_sandboxes_refreshes(struct api_call *c);
void e2b_sandboxes_get(struct api_call *c);
void e2b_sandboxes_list_v1(struct api_call *c);
void e2b_sandboxes_list_v2(struct api_call *c);
void e2b_sandboxes_kill(struct api_call *c);
void e2b_sandboxes_timeout(struct api_call *c);
void e2b_sandboxes_pause(struct api_call *c);
void e2b_sandboxes_metrics(struct api_call *c);
void e2b_templates_list(struct api_call *c);
/* e2b_snapshots.c */
void e2b_snapshots_create(struct api_call *c);
void e2b_snapshots_list(struct api_call *c);
void e2b_templates_delete(struct api_call *c);
void e2b_sandboxes_fork(struct api_call *c);
/* E2B's Sandbox object of a sandbox (e2b_sandboxes.c): what create, connect and fork answer. */
struct sandbox;
json_t *e2b_sandbox(const struct api_call *c, struct sandbox *sb);
void e2b_sandboxes_network(struct api_call *c);	/* e2b_network.c */

/*
 * Proxy one request to a sandbox (id NULL: find it by X-Access-Token):
 * port E2B_ENVD_PORT goes to its guest agent (envd), any other port to
 * that port in the guest over the agent channel (getHost(port), the code
 * interpreter on 49999). port 0: E2b-Sandbox-Port, else envd.
 */
void e2b_envd_proxy(struct api *api, struct http_req *req, const char *id, unsigned port);

#endif
