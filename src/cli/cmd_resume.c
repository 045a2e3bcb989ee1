/* airlock resume ID...: POST .../resume (run a paused or suspended sandbox again). */
#include "cli/cli.h"

int
cmd_resume(int argc, char **argv)
{
	return cli_sandbox_op(argc, argv, "POST", "/resume", "resuming", "resumed");
}
