/* Building a template (rootfs image + metadata) from a recipe. */
#ifndef AIRLOCK_TEMPLATE_BUILD_H
#define AIRLOCK_TEMPLATE_BUILD_H

#include "images/recipe.h"

struct template_build_opts {
	const char	*name;		/* template name (paths_valid_name) */
	const char	*recipe_path;	/* for messages */
	const char	*agent_bin;	/* NULL: search (see template_find_agent) */
	int		 no_cache;	/* rebuild the debootstrap tree */
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

/* Locate the guest agent binary: $AIRLOCK_AGENT_BIN, $DATA/bin, next to this program. */
char *template_find_agent(void);

#endif
