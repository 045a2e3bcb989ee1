/* airlock shell ID: an interactive login shell, i.e. exec -i -t ID -- bash -l. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

int
cmd_shell(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "user", required_argument, NULL, 'u' },
		{ "cwd", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 }
	};
	static char *shell_cmd[] = { "bash", "-l", NULL };
	struct cli_exec_opts o;
	int ch;

	memset(&o, 0, sizeof(o));
	optind = 0;
	while ((ch = getopt_long(argc, argv, "u:w:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			o.user = optarg;
			break;
		case 'w':
			o.cwd = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	o.id = argv[optind];
	o.cmd = shell_cmd;
	o.ncmd = 2;
	o.interactive = 1;
	/* Piped input (echo ls | airlock shell ID) wants no PTY echo. */
	o.tty = isatty(STDIN_FILENO);
	o.env = json_object();
	return cmd_exec_stdio(&o);
usage:
	fprintf(stderr, "usage: airlock shell [--user U] [--cwd DIR] ID\n");
	return CLI_EXIT_USAGE;
}
