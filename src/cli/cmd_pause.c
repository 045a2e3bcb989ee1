/* airlock pause ID...: POST .../pause (stop the vCPUs; memory stays resident). */
#include "cli/cli.h"

int
cmd_pause(int argc, char **argv)
{
	return cli_sandbox_op(argc, argv, "POST", "/pause", "pausing", "paused");
}
