/* Shared by the per-sandbox handlers (exec, files). */
#ifndef AIRLOCK_API_SANDBOX_H
#define AIRLOCK_API_SANDBOX_H

#include "api/api.h"

struct sandbox;

/*
 * The sandbox in the path (params[0]) of the caller's project, optionally in
 * a required state (an enum sb_state, -1: any); otherwise replies 404/409
 * and returns NULL.
 */
struct sandbox *api_sandbox(struct api_call *c, int need_state);
/*
 * The running sandbox in the path whose agent is connected and healthy
 * (else a 503 naming why), marked active: what exec and files work on.
 */
struct sandbox *api_sandbox_agent(struct api_call *c);

#endif
