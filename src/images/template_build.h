/* Building a template (rootfs image + metadata) from a recipe. */
#ifndef AIRLOCK_TEMPLATE_BUILD_H
#define AIRLOCK_TEMPLATE_BUILD_H

#include <jansson.h>

#include "images/recipe.h"

/* What a staged build (opts.stage) leaves for the run steps. */
struct template_stage {
	char	 base_key[65];	/* the base image in the step cache (template_steps.h) */
	json_t	*meta;		/* template.json so far (the caller completes and installs it) */
};

struct template_build_opts {
	const char	*name;		/* template name (paths_valid_name) */
	const char	*recipe_path;	/* for messages */
	const char	*agent_bin;	/* NULL: search (see template_find_agent) */
	int		 no_cache;	/* rebuild the debootstrap tree (and the base image) */
	/*
	 * Non-NULL: build only the base image (no run steps) into the step
	 * cache and fill this in; airlockd runs the steps in a build VM.
	 */
	struct template_stage	*stage;
	/* Progress: called at the start of each step and with free-form detail. */
	void		(*progress)(void *arg, int step, int nsteps, const char *msg);
	void		*progress_arg;
};

/*
 * Build the template atomically: the new image and template.json replace the
 * old ones only when every step succeeded, so a failed build leaves the
 * previous template intact.
 */
int template_build(const struct recipe *r, const struct template_build_opts *o, char **cause);

/*
 * Install image (renamed away) with metadata m (sizes added) as
 * templates/<name>, atomically replacing an old one; workdir is the
 * build's own directory (the old template ends up there and goes with it).
 */
int template_install(const char *name, const char *workdir, const char *image, json_t *m,
    char **cause);
/*
 * The same build from a root tree the caller prepared (an imported OCI
 * image) instead of debootstrap: r supplies env, start, workdir, user and
 * disk size; extra (may be NULL) is merged into template.json.
 */
int template_build_tree(const struct recipe *r, const struct template_build_opts *o,
    const char *tree, json_t *extra, char **cause);

/* Locate the guest agent binary: $AIRLOCK_AGENT_BIN, $DATA/bin, next to this program. */
char *template_find_agent(void);

#endif
