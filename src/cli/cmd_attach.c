/*
 * airlock attach ID PID: follow a process that is still running (after exec
 * detached, or one started elsewhere) through GET .../processes/{pid}/stream:
 * its buffered output, then live output and its exit code, as exec would.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"

int
cmd_attach(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "interactive", no_argument, NULL, 'i' },
		{ "tty", no_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 }
	};
	struct cli_exec_opts o;
	char *cause = NULL;
	int ch;

	memset(&o, 0, sizeof(o));
	optind = 0;
	while ((ch = getopt_long(argc, argv, "it", longopts, NULL)) != -1) {
		switch (ch) {
		case 'i':
			o.interactive = 1;
			break;
		case 't':
			o.tty = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 2 ||
	    cli_args_num(argv[optind + 1], 1, INT32_MAX, &o.attach, "PID", &cause) == -1) {
		if (cause != NULL)
			fprintf(stderr, "airlock attach: %s\n", cause);
		free(cause);
		goto usage;
	}
	o.id = argv[optind];
	o.env = json_object();
	return cmd_exec_stdio(&o);
usage:
	fprintf(stderr, "usage: airlock attach [-i] [-t] ID PID\n");
	return CLI_EXIT_USAGE;
}
