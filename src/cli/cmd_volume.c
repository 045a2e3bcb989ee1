/*
 * airlock volume create|ls|rm: persistent volumes (POST/GET/DELETE
 * /v1/volumes, docs/volumes.md). Attach one at create:
 * airlock create --volume NAME:/guest/path[:ro].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

#define VOLUME_NFIELDS	5

static const char *const volume_fields[VOLUME_NFIELDS] = { "name", "size_mb", "attached",
    "last_used_at", "created_at" };
static const struct cli_col volume_cols[] = { { "NAME", 20 }, { "SIZE_MB", 8 },
    { "ATTACHED", 9 }, { "LAST_USED", 25 }, { "CREATED", 0 }, { NULL, 0 } };

static void
volume_row(const json_t *v)
{
	char t[VOLUME_NFIELDS][64];
	const char *cells[VOLUME_NFIELDS];
	int c;

	for (c = 0; c < VOLUME_NFIELDS; c++)
		cells[c] = cli_field(v, volume_fields[c], t[c], sizeof(t[c]));
	cli_table_row(volume_cols, cells);
}

static int
volume_create(int argc, char **argv)
{
	struct cli_api *api;
	const char *name = NULL;
	char *cause = NULL, *end;
	long long size = 1024;
	json_t *r;
	int i, json_out = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else if (strcmp(argv[i], "--size-mb") == 0 && i + 1 < argc) {
			size = strtoll(argv[++i], &end, 10);
			if (*end != '\0')
				goto usage;
		} else if (name == NULL && argv[i][0] != '-')
			name = argv[i];
		else
			goto usage;
	}
	if (name == NULL)
		goto usage;
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	r = cli_api_json(api, "POST", "/v1/volumes", json_pack("{s:s, s:I}", "name", name,
	    "size_mb", (json_int_t)size), NULL, &cause);
	cli_api_free(api);
	if (r == NULL)
		return cli_fail_cause(cause);
	if (json_out)
		cli_print_json(r);
	else
		printf("created volume \"%s\" (%lld MiB)\n", name, size);
	json_decref(r);
	return CLI_EXIT_OK;
usage:
	fprintf(stderr, "usage: airlock volume create NAME [--size-mb N] [--json]\n");
	return CLI_EXIT_USAGE;
}

static int
volume_ls(int argc, char **argv)
{
	return cli_list_cmd(argc, argv, "airlock volume ls [--json]",
	    "/v1/volumes", "volumes", volume_cols, volume_row);
}

static int
volume_rm(int argc, char **argv)
{
	return cli_delete_each(argc, argv, "/v1/volumes", "volume", "name",
	    "airlock volume rm [--json] NAME...");
}

static const struct cli_cmd volume_cmds[] = {
	{ "create", "create NAME [--size-mb N] [--json]", "create a volume (ext4, sparse)",
	  volume_create, NULL },
	{ "ls", "ls [--json]", "list volumes: size, attachments, last use", volume_ls, NULL },
	{ "rm", "rm [--json] NAME...", "delete volumes (refused while attached)", volume_rm,
	  NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_volume(int argc, char **argv)
{
	return cli_dispatch("airlock volume", volume_cmds, argc - 1, argv + 1);
}
