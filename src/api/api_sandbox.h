/* Shared by the per-sandbox handlers (exec, files). */
#ifndef AIRLOCK_API_SANDBOX_H
#define AIRLOCK_API_SANDBOX_H

#include "api/api.h"

struct sandbox;

/*
 * The sandbox in the path (params[0]) of the caller's project, optionally in
 * a required state; otherwise replies 404/409 and returns NULL.
 */
struct sandbox *api_sandbox(struct api_call *c, const char *need_state);

#endif
