/* airlock ps ID: the processes the agent runs in a sandbox (GET .../processes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

static const struct cli_col ps_cols[] = { { "PID", 8 }, { "PTY", 4 }, { "CWD", 20 },
    { "CMD", 0 }, { NULL, 0 } };

/* The row by hand: CMD is the argv, each argument a cell, unpadded. */
static void
ps_row(const json_t *p)
{
	char t[32];
	json_t *a, *c;
	size_t n;

	cli_cell(stdout, cli_field(p, "pid", t, sizeof(t)), ps_cols[0].width);
	fputc(' ', stdout);
	cli_cell(stdout, json_is_true(json_object_get(p, "pty")) ? "yes" : "no",
	    ps_cols[1].width);
	fputc(' ', stdout);
	cli_cell(stdout, cli_field(p, "cwd", t, sizeof(t)), ps_cols[2].width);
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

int
cmd_ps(int argc, char **argv)
{
	const char *id = NULL;
	int i, json_out = 0;
	char *path;
	json_t *r;

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
	r = cli_list(path, "processes", json_out, ps_cols, ps_row);
	free(path);
	if (r == NULL)
		return CLI_EXIT_FAIL;
	json_decref(r);
	return CLI_EXIT_OK;
}
