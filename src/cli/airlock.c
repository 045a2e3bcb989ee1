/* airlock: the command-line client. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/log.h"

static const struct cli_cmd airlock_cmds[] = {
	{ "template", "template build|ls|rm ...", "build and manage templates", cmd_template },
	{ "boot", "boot [--template NAME] [--timeout S] [--keep]",
	  "boot a template in the foreground until the agent is ready", cmd_boot },
	{ "doctor", "doctor", "show accelerator, TSC and data dir checks", cmd_doctor },
	{ "initramfs", "initramfs --init BIN --modules DIR --out FILE",
	  "write the guest initramfs (used by setup)", cmd_initramfs },
	{ NULL, NULL, NULL, NULL }
};

void
cli_usage(const char *group, const struct cli_cmd *cmds)
{
	fprintf(stderr, "usage: %s <command> [args]\n\ncommands:\n", group);
	for (; cmds->name != NULL; cmds++)
		fprintf(stderr, "  %-48s %s\n", cmds->usage, cmds->help);
}

int
cli_dispatch(const char *group, const struct cli_cmd *cmds, int argc, char **argv)
{
	const struct cli_cmd *c;

	if (argc < 1 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0 ||
	    strcmp(argv[0], "help") == 0) {
		cli_usage(group, cmds);
		return argc < 1 ? 2 : 0;
	}
	for (c = cmds; c->name != NULL; c++)
		if (strcmp(c->name, argv[0]) == 0)
			return c->run(argc, argv);
	fprintf(stderr, "%s: unknown command \"%s\"\n\n", group, argv[0]);
	cli_usage(group, cmds);
	return 2;
}

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
