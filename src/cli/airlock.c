/* airlock: the command-line client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"

static const struct cli_cmd airlock_cmds[] = {
	{ "create", "create [--template T] [--network M] [--allow H]... [--json]",
	  "create a sandbox and print its id", cmd_create, cmd_create_usage },
	{ "ls", "ls [--state S] [--meta K=V]... [--json]", "list sandboxes", cmd_ls, NULL },
	{ "get", "get ID [--json]", "show one sandbox", cmd_get, NULL },
	{ "exec", "exec [-i] [-t] [--user U] [--cwd D] [--env K=V] ID -- CMD...",
	  "run a command in a sandbox; exits with its exit code", cmd_exec, cmd_exec_usage },
	{ "ps", "ps ID [--json]", "list the processes running in a sandbox", cmd_ps, NULL },
	{ "attach", "attach [-i] [-t] ID PID", "follow a running process again (after a detach)",
	  cmd_attach, NULL },
	{ "shell", "shell ID", "interactive login shell in a sandbox (bash -l)",
	  cmd_shell, NULL },
	{ "cp", "cp SRC DST", "copy a file in or out (one side is ID:PATH)", cmd_cp, NULL },
	{ "pause", "pause ID...", "stop a sandbox's vCPUs, memory stays resident",
	  cmd_pause, NULL },
	{ "resume", "resume ID...", "resume a paused or suspended sandbox", cmd_resume, NULL },
	{ "suspend", "suspend ID...", "snapshot a sandbox to disk and stop its VM",
	  cmd_suspend, NULL },
	{ "rm", "rm ID...", "delete sandboxes", cmd_rm, NULL },
	{ "logs", "logs [--tail N] [--json] ID", "print a sandbox's serial console", cmd_logs, NULL },
	{ "events", "events [--after SEQ] [--json] [ID]", "follow lifecycle events",
	  cmd_events, NULL },
	{ "key", "key create|ls|rm ...", "manage API keys (admin)", cmd_key, NULL },
	{ "secret", "secret set|ls|rm ...", "manage credentials the egress gateway injects",
	  cmd_secret, NULL },
	{ "audit", "audit [--sandbox ID] [--decision allow|deny] [--since T] [--json]",
	  "show the egress gateway's decisions, newest first", cmd_audit, NULL },
	{ "template", "template build|ls|rm ...", "build and manage templates",
	  cmd_template, NULL },
	{ "pool", "pool ls|set ...", "show and size the warm pools", cmd_pool, NULL },
	{ "worker", "worker ls|drain ...", "a cluster's workers (through an API replica)",
	    cmd_worker, NULL },
	{ "quota", "quota get|set|rm ...", "a project's limits on its sandboxes (admin)", cmd_quota,
	    NULL },
	{ "fork", "fork ID [-n N] [--json]", "fork a sandbox into N that continue from its "
	  "memory, processes and disk", cmd_fork, NULL },
	{ "snapshot", "snapshot create|ls|rm ...", "named snapshots new sandboxes start from",
	  cmd_snapshot, NULL },
	{ "volume", "volume create|ls|rm ...", "manage persistent volumes", cmd_volume, NULL },
	{ "boot", "boot [--template NAME] [--timeout S] [--keep]",
	  "boot a template in the foreground until the agent is ready", cmd_boot, NULL },
	{ "doctor", "doctor", "show accelerator, TSC and data dir checks", cmd_doctor, NULL },
	{ "cluster", "cluster ca init|cert ...",
	  "the cluster CA and the API/worker certificates (mTLS between them)", cmd_cluster,
	  NULL },
	{ "initramfs", "initramfs --init BIN --modules DIR --out FILE",
	  "write the guest initramfs (used by setup)", cmd_initramfs, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
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
