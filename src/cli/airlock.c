/* airlock: the command-line client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"

static const struct cli_cmd airlock_cmds[] = {
	{ "create", "create [--template T] [--network M] [--allow H]... [--json]",
	  "create a sandbox and print its id", cmd_create },
	{ "ls", "ls [--state S] [--meta K=V]... [--json]", "list sandboxes", cmd_ls },
	{ "get", "get ID [--json]", "show one sandbox", cmd_get },
	{ "exec", "exec [-i] [-t] [--user U] [--cwd D] [--env K=V] ID -- CMD...",
	  "run a command in a sandbox; exits with its exit code", cmd_exec },
	{ "shell", "shell ID", "interactive login shell in a sandbox (bash -l)", cmd_shell },
	{ "cp", "cp SRC DST", "copy a file in or out (one side is ID:PATH)", cmd_cp },
	{ "pause", "pause ID...", "stop a sandbox's vCPUs, memory stays resident", cmd_pause },
	{ "resume", "resume ID...", "resume a paused or suspended sandbox", cmd_resume },
	{ "suspend", "suspend ID...", "snapshot a sandbox to disk and stop its VM", cmd_suspend },
	{ "rm", "rm ID...", "delete sandboxes", cmd_rm },
	{ "logs", "logs [--tail N] ID", "print a sandbox's serial console", cmd_logs },
	{ "events", "events [--after SEQ] [--json] [ID]", "follow lifecycle events", cmd_events },
	{ "key", "key create|ls|rm ...", "manage API keys (admin)", cmd_key },
	{ "template", "template build|ls|rm ...", "build and manage templates", cmd_template },
	{ "boot", "boot [--template NAME] [--timeout S] [--keep]",
	  "boot a template in the foreground until the agent is ready", cmd_boot },
	{ "doctor", "doctor", "show accelerator, TSC and data dir checks", cmd_doctor },
	{ "initramfs", "initramfs --init BIN --modules DIR --out FILE",
	  "write the guest initramfs (used by setup)", cmd_initramfs },
	{ NULL, NULL, NULL, NULL }
};

int
main(int argc, char *argv[])
{
	log_init("airlock", getenv("AIRLOCK_DEBUG") ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		printf("airlock %s\n", AIRLOCK_VERSION);
		return 0;
	}
	return cli_dispatch("airlock", airlock_cmds, argc - 1, argv + 1);
}
