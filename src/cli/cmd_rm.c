/* airlock rm ID...: DELETE /v1/sandboxes/{id}; the VM and its disk go away. */
#include "cli/cli.h"

int
cmd_rm(int argc, char **argv)
{
	return cli_sandbox_op(argc, argv, "DELETE", "", "removing", "removed");
}
