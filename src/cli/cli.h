/* The airlock CLI: one cmd_<verb>.c per verb, dispatched from a table in airlock.c. */
#ifndef AIRLOCK_CLI_H
#define AIRLOCK_CLI_H

struct cli_cmd {
	const char	*name;
	const char	*usage;
	const char	*help;
	int		(*run)(int argc, char **argv);
};

/* Dispatch argv[0] among cmds; prints usage on unknown verbs. */
int cli_dispatch(const char *group, const struct cli_cmd *cmds, int argc, char **argv);
void cli_usage(const char *group, const struct cli_cmd *cmds);

int cmd_template(int argc, char **argv);
int cmd_initramfs(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_boot(int argc, char **argv);

#endif
