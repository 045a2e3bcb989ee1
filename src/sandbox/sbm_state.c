/* The one table of sandbox state names (the store's and the API's). */
#include <string.h>

#include "sandbox/sbm.h"

const char *const sb_state_names[SB_NSTATES + 1] = {
	[SB_CREATING] = "creating", [SB_RUNNING] = "running", [SB_PAUSED] = "paused",
	[SB_SUSPENDING] = "suspending", [SB_SUSPENDED] = "suspended",
	[SB_RESUMING] = "resuming", [SB_DELETING] = "deleting", [SB_FAILED] = "failed",
	[SB_POOLED] = "pooled", [SB_NSTATES] = NULL,
};

const char *
sb_state_name(enum sb_state s)
{
	return (int)s >= 0 && s < SB_NSTATES ? sb_state_names[s] : "unknown";
}

int
sb_state_parse(const char *name)
{
	int i;

	for (i = 0; i < SB_NSTATES; i++)
		if (strcmp(sb_state_names[i], name) == 0)
			return i;
	return -1;
}
