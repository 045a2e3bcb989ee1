/* airlock suspend ID...: POST .../suspend (snapshot memory and disk, then stop the VM). */
#include "cli/cli.h"

int
cmd_suspend(int argc, char **argv)
{
	return cli_sandbox_op(argc, argv, "POST", "/suspend", "suspending", "suspended");
}
