/*
 * airlock fork ID [-n N] [--json]: N sandboxes continuing from ID's memory,
 * processes and disk (POST /v1/sandboxes/ID/fork); airlock snapshot
 * create|ls|rm: named snapshots (POST /v1/sandboxes/ID/snapshots,
 * GET /v1/snapshots, DELETE /v1/snapshots/NAME). Create from one with
 * airlock create --snapshot NAME.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

int
cmd_fork(int argc, char **argv)
{
	long long n = 1;
	char *cause = NULL;
	const char *id = NULL;
	json_t *body, *r, *kids, *errs, *v;
	int i, json_out = 0;
	size_t k;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else if ((strcmp(argv[i], "-n") == 0 || strcmp(argv[i], "--count") == 0) &&
		    i + 1 < argc) {
			if (cli_args_num(argv[++i], 1, 16, &n, "-n", &cause) == -1)
				return cli_fail("fork: %s", cause);
		} else if (argv[i][0] != '-' && id == NULL)
			id = argv[i];
		else
			goto usage;
	}
	if (id == NULL)
		goto usage;
	body = json_pack("{s:I}", "count", (json_int_t)n);
	if ((r = cli_call_named("POST", "/v1/sandboxes", id, "/fork", body)) == NULL)
		return CLI_EXIT_FAIL;
	if (json_out) {
		cli_print_json(r);
		json_decref(r);
		return CLI_EXIT_OK;
	}
	kids = json_object_get(r, "sandboxes");
	errs = json_object_get(r, "errors");
	json_array_foreach(kids, k, v)
		printf("%s\n", json_string_value(json_object_get(v, "id")));
	fprintf(stderr, "forked %s into %zu (source paused %.1f ms)\n", id, json_array_size(kids),
	    json_number_value(json_object_get(r, "paused_ms")));
	json_array_foreach(errs, k, v)
		fprintf(stderr, "airlock: fork: child %lld: %s\n",
		    (long long)json_integer_value(json_object_get(v, "index")),
		    json_string_value(json_object_get(v, "message")));
	i = json_array_size(errs) > 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
	json_decref(r);
	return i;
usage:
	fprintf(stderr, "usage: airlock fork ID [-n N] [--json]\n");
	return CLI_EXIT_USAGE;
}

/* --- snapshot ---------------------------------------------------------------- */

static const struct cli_col snap_cols[] = { { "NAME", 20 }, { "ID", 22 }, { "SOURCE", 22 },
    { "TEMPLATE", 12 }, { "MEMORY", 7 }, { "CREATED", 0 }, { NULL, 0 } };

static void
snap_row(const json_t *s)
{
	char t[6][48], age[32];
	const char *cells[6];

	cells[0] = cli_field(s, "name", t[0], sizeof(t[0]));
	cells[1] = cli_field(s, "id", t[1], sizeof(t[1]));
	cells[2] = cli_field(s, "source", t[2], sizeof(t[2]));
	cells[3] = cli_field(s, "template", t[3], sizeof(t[3]));
	cells[4] = cli_field(s, "memory_mb", t[4], sizeof(t[4]));
	cells[5] = cli_age(cli_field(s, "created_at", t[5], sizeof(t[5])), age, sizeof(age));
	cli_table_row(snap_cols, cells);
}

static int
snap_create(int argc, char **argv)
{
	int json_out = argc == 4 && strcmp(argv[3], "--json") == 0;
	json_t *body, *r;

	if (argc != 3 && !json_out) {
		fprintf(stderr, "usage: airlock snapshot create ID NAME [--json]\n");
		return CLI_EXIT_USAGE;
	}
	body = json_pack("{s:s}", "name", argv[2]);
	if ((r = cli_call_named("POST", "/v1/sandboxes", argv[1], "/snapshots", body)) == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(r);
	else
		printf("snapshot %s (%s) of %s: source paused %.1f ms\n",
		    json_string_value(json_object_get(r, "name")),
		    json_string_value(json_object_get(r, "id")), argv[1],
		    json_number_value(json_object_get(r, "paused_ms")));
	json_decref(r);
	return CLI_EXIT_OK;
}

static int
snap_ls(int argc, char **argv)
{
	return cli_list_cmd(argc, argv, "airlock snapshot ls [--json]",
	    "/v1/snapshots", "snapshots", snap_cols, snap_row);
}

static int
snap_rm(int argc, char **argv)
{
	return cli_delete_each(argc, argv, "/v1/snapshots", "snapshot", "name", "airlock snapshot rm NAME... [--json]");
}

static const struct cli_cmd snap_cmds[] = {
	{ "create", "create ID NAME [--json]", "save a sandbox's memory and disk as NAME",
	  snap_create, NULL },
	{ "ls", "ls [--json]", "list named snapshots", snap_ls, NULL },
	{ "rm", "rm NAME... [--json]", "delete snapshots (refused while a sandbox uses one)",
	  snap_rm, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_snapshot(int argc, char **argv)
{
	return cli_dispatch("airlock snapshot", snap_cmds, argc - 1, argv + 1);
}
