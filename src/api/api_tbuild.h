/*
 * Template builds with run steps (docs/templates.md "What runs where"):
 * the base image comes from a forked builder (debootstrap, files, agent,
 * mkfs: images/template_build.c with opts.stage) or from an existing
 * template; then every run step not in the step cache runs as root in a
 * jailed build VM (a sandbox booted from the build's image, network
 * through the egress gateway limited to the recipe's allowlist), each
 * step's rootfs is kept in the cache, and the last one is installed.
 * Everything is asynchronous on airlockd's loop.
 */
#ifndef AIRLOCK_API_TBUILD_H
#define AIRLOCK_API_TBUILD_H

#include <jansson.h>

struct api_call;

struct tbuild_req {
	const char	*name;
	json_t		*recipe;	/* a checked recipe object (borrowed) */
	const char	*context;	/* checked context tar, moved into the build dir; or NULL */
	const char	*context_sha;	/* its sha256, hashed as it was uploaded */
	int		 uses_context;	/* a step reads DOCKERFILE_CONTEXT_DIR */
	int		 no_cache;
};

/*
 * Start the build and answer the call with an SSE stream: "progress"
 * {step, steps, message}, "output" {step, data} for run steps' output,
 * then "done" {template} or "error" {message}. A client that goes away
 * ends only the stream; the build runs on.
 */
void tbuild_start(struct api_call *c, const struct tbuild_req *rq);

#endif
