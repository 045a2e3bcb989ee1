/* airlock ps ID: the processes the agent runs in a sandbox (GET .../processes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

int
cmd_ps(int argc, char **argv)
{
	char *path, t[32];
	json_t *r, *p, *a, *c;
	const char *id = NULL;
	int i, json_out = 0;
	size_t k, n;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else if (id == NULL && argv[i][0] != '-')
			id = argv[i];
		else {
			fprintf(stderr, "usage: airlock ps ID [--json]\n");
			return CLI_EXIT_USAGE;
		}
	}
	if (id == NULL) {
		fprintf(stderr, "usage: airlock ps ID [--json]\n");
		return CLI_EXIT_USAGE;
	}
	path = cli_sandbox_path(id, "/processes");
	r = cli_call("GET", path, NULL, NULL);
	free(path);
	if (r == NULL)
		return CLI_EXIT_FAIL;
	if (json_out) {
		cli_print_json_list(r, "processes");
		json_decref(r);
		return CLI_EXIT_OK;
	}
	printf("%-8s %-4s %-20s %s\n", "PID", "PTY", "CWD", "CMD");
	json_array_foreach(json_object_get(r, "processes"), k, p) {
		cli_cell(stdout, cli_field(p, "pid", t, sizeof(t)), 8);
		fputc(' ', stdout);
		cli_cell(stdout, json_is_true(json_object_get(p, "pty")) ? "yes" : "no", 4);
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(p, "cwd", t, sizeof(t)), 20);
		/* cmd is an argv array; show it space-separated, as typed. */
		a = json_object_get(p, "cmd");
		if (json_is_array(a)) {
			json_array_foreach(a, n, c) {
				fputc(' ', stdout);
				cli_cell(stdout, json_is_string(c) ? json_string_value(c) : "?", 0);
			}
		} else {
			fputc(' ', stdout);
			cli_cell(stdout, cli_field(p, "cmd", t, sizeof(t)), 0);
		}
		fputc('\n', stdout);
	}
	json_decref(r);
	return CLI_EXIT_OK;
}
