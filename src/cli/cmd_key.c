/* airlock key create|ls|rm: API keys (admin only, POST/GET/DELETE /v1/keys). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

#define KEY_NFIELDS	7	/* key ls's columns */

static int
key_create(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "project", required_argument, NULL, 'p' },
		{ "role", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "e2b", no_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 }
	};
	const char *project = "default", *role = "user";
	char t[32];
	json_t *body, *k;
	int ch, json_out = 0, e2b = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			project = optarg;
			break;
		case 'r':
			role = optarg;
			if (strcmp(role, "user") != 0 && strcmp(role, "admin") != 0) {
				fprintf(stderr, "airlock key create: --role must be user or "
				    "admin\n");
				goto usage;
			}
			break;
		case 'j':
			json_out = 1;
			break;
		case 'e':
			e2b = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	body = json_pack("{s:s,s:s,s:s}", "name", argv[optind], "project", project, "role", role);
	/* E2B's format (e2b_ + 40 hex), which E2B SDKs check before sending it. */
	if (e2b)
		json_object_set_new(body, "format", json_string("e2b"));
	k = cli_call("POST", "/v1/keys", body, NULL);
	json_decref(body);
	if (k == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(k);
	else {
		/* The key on stdout alone, so `K=$(airlock key create x)` works. */
		cli_cell(stdout, cli_field(k, "key", t, sizeof(t)), 0);
		fputc('\n', stdout);
		fprintf(stderr, "created key %s (project %s, role %s); "
		    "it is shown only this once\n",
		    cli_field(k, "id", t, sizeof(t)), project, role);
	}
	json_decref(k);
	return CLI_EXIT_OK;
usage:
	fprintf(stderr, "usage: airlock key create NAME [--project P] [--role user|admin] "
	    "[--e2b] [--json]\n");
	return CLI_EXIT_USAGE;
}

/* key ls's columns: the answer's fields, in upper case. */
static const char *key_fields[KEY_NFIELDS] = { "id", "name", "project", "role", "prefix",
    "created_at", "last_used_at" };
static const struct cli_col key_cols[] = { { "ID", 22 }, { "NAME", 16 }, { "PROJECT", 12 },
    { "ROLE", 6 }, { "PREFIX", 10 }, { "CREATED_AT", 25 }, { "LAST_USED_AT", 0 },
    { NULL, 0 } };

static void
key_row(const json_t *k)
{
	const char *cells[KEY_NFIELDS];
	char t[KEY_NFIELDS][32];
	size_t c;

	for (c = 0; c < KEY_NFIELDS; c++)
		cells[c] = cli_field(k, key_fields[c], t[c], sizeof(t[c]));
	cli_table_row(key_cols, cells);
}

static int
key_ls(int argc, char **argv)
{
	return cli_list_cmd(argc, argv, "airlock key ls [--json]",
	    "/v1/keys", "keys", key_cols, key_row);
}

static int
key_rm(int argc, char **argv)
{
	return cli_delete_each(argc, argv, "/v1/keys", "key", "id", "airlock key rm [--json] ID...");
}

static const struct cli_cmd key_cmds[] = {
	{ "create", "create NAME [--project P] [--role user|admin] [--json]",
	  "create a key and print it (only time it is shown)", key_create, NULL },
	{ "ls", "ls [--json]", "list keys (prefixes only)", key_ls, NULL },
	{ "rm", "rm [--json] ID...", "revoke keys", key_rm, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_key(int argc, char **argv)
{
	return cli_dispatch("airlock key", key_cmds, argc - 1, argv + 1);
}
