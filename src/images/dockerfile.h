/*
 * Dockerfiles translated into recipes (docs/templates.md "Dockerfiles").
 * The translation is pure text → JSON: the recipe it produces goes through
 * recipe_parse like any other, so every limit and check is the recipe's.
 * Supported: FROM (an airlock template or debian:<suite>), RUN, COPY/ADD
 * (local sources from the build context), ENV, ARG, WORKDIR, USER,
 * CMD/ENTRYPOINT (the template's start command). Anything else is an error
 * naming its line.
 */
#ifndef AIRLOCK_DOCKERFILE_H
#define AIRLOCK_DOCKERFILE_H

#include <stddef.h>

#include <jansson.h>

#define DOCKERFILE_MAX		(256 * 1024)
#define DOCKERFILE_LINES_MAX	4096
/* Where a build VM sees the uploaded context (a tmpfs, never in the image). */
#define DOCKERFILE_CONTEXT_DIR	"/run/airlock-context/c"

/*
 * Translate text into a recipe object (new reference) or NULL with a
 * cause "line N: ...". Run steps that read the context name
 * DOCKERFILE_CONTEXT_DIR; *uses_context says whether any does.
 */
json_t *dockerfile_to_recipe(const char *text, size_t len, int *uses_context, char **cause);

#endif
