/* The sandbox state table: every state has one name, and the names parse back. */
#include <string.h>

#include "sandbox/sbm.h"
#include "t.h"

static void
test_round_trip(void)
{
	int i;

	for (i = 0; i < SB_NSTATES; i++) {
		CHECK(sb_state_names[i] != NULL);
		CHECK(strcmp(sb_state_name((enum sb_state)i), sb_state_names[i]) == 0);
		CHECK(sb_state_parse(sb_state_names[i]) == i);
	}
	CHECK(sb_state_names[SB_NSTATES] == NULL);
}

static void
test_names(void)
{
	/* The store and the API keep these exact names: changing one is a schema change. */
	CHECK(strcmp(sb_state_name(SB_CREATING), "creating") == 0);
	CHECK(strcmp(sb_state_name(SB_RUNNING), "running") == 0);
	CHECK(strcmp(sb_state_name(SB_PAUSED), "paused") == 0);
	CHECK(strcmp(sb_state_name(SB_SUSPENDING), "suspending") == 0);
	CHECK(strcmp(sb_state_name(SB_SUSPENDED), "suspended") == 0);
	CHECK(strcmp(sb_state_name(SB_RESUMING), "resuming") == 0);
	CHECK(strcmp(sb_state_name(SB_DELETING), "deleting") == 0);
	CHECK(strcmp(sb_state_name(SB_FAILED), "failed") == 0);
	CHECK(sb_state_parse("Running") == -1);
	CHECK(sb_state_parse("") == -1);
	CHECK(strcmp(sb_state_name((enum sb_state)SB_NSTATES), "unknown") == 0);
}

int
main(void)
{
	T_RUN(test_round_trip);
	T_RUN(test_names);
	return t_done();
}
