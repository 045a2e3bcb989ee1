/* airlock pool ls|set: the warm pools per template (GET /v1/pools, PUT /v1/pools/T). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

#define POOL_NFIELDS	9
#define POOL_COL_BASE	5
#define POOL_COL_SPARES	6

/* NULL: BASE (the base's state) and SPARES (ready/target of the spare VMMs). */
static const char *pool_fields[POOL_NFIELDS] = { "template", "key", "size", "ready", "filling",
    NULL, NULL, "hits", "misses" };
static const struct cli_col pool_cols[] = { { "TEMPLATE", 14 }, { "SHAPE", 24 }, { "SIZE", 5 },
    { "READY", 6 }, { "FILLING", 8 }, { "BASE", 9 }, { "SPARES", 7 }, { "HITS", 7 },
    { "MISSES", 0 }, { NULL, 0 } };

static void
pool_row(const json_t *p)
{
	const json_t *sp = json_object_get(p, "spares");
	const char *cells[POOL_NFIELDS];
	char t[POOL_NFIELDS][32];
	size_t c;

	for (c = 0; c < POOL_NFIELDS; c++)
		cells[c] = pool_fields[c] != NULL ? cli_field(p, pool_fields[c], t[c],
		    sizeof(t[c])) : c == POOL_COL_BASE ? cli_field(json_object_get(p, "base"),
		    "state", t[c], sizeof(t[c])) : t[c];
	snprintf(t[POOL_COL_SPARES], sizeof(t[POOL_COL_SPARES]), "%lld/%lld",
	    (long long)json_integer_value(json_object_get(sp, "ready")),
	    (long long)json_integer_value(json_object_get(sp, "target")));
	cli_table_row(pool_cols, cells);
}

static int
pool_ls(int argc, char **argv)
{
	return cli_list_cmd(argc, argv, "airlock pool ls [--json]",
	    "/v1/pools", "pools", pool_cols, pool_row);
}

/* pool set TEMPLATE SIZE [--spares N] [--vcpus N] [--memory MB] [--nic] [--json] */
static int
pool_set(int argc, char **argv)
{
	long long size, v;
	char *cause = NULL;
	json_t *body, *r;
	int i, json_out = 0;

	if (argc < 3)
		goto usage;
	if (cli_args_num(argv[2], 0, 256, &size, "SIZE", &cause) == -1)
		return cli_fail("pool set: %s", cause);
	body = json_pack("{s:I}", "size", (json_int_t)size);
	for (i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else if (strcmp(argv[i], "--nic") == 0)
			json_object_set_new(body, "nic", json_true());
		else if ((strcmp(argv[i], "--vcpus") == 0 || strcmp(argv[i], "--memory") == 0 ||
		    strcmp(argv[i], "--spares") == 0) && i + 1 < argc) {
			if (cli_args_num(argv[i + 1], strcmp(argv[i], "--spares") == 0 ? 0 : 1, 65536,
			    &v, argv[i], &cause) == -1) {
				json_decref(body);
				return cli_fail("pool set: %s", cause);
			}
			json_object_set_new(body, strcmp(argv[i], "--vcpus") == 0 ? "vcpus" :
			    strcmp(argv[i], "--spares") == 0 ? "spares" : "memory_mb",
			    json_integer(v));
			i++;
		} else {
			json_decref(body);
			goto usage;
		}
	}
	if ((r = cli_call_named("PUT", "/v1/pools", argv[1], "", body)) == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(r);
	else
		printf("pool %s: size %lld\n", argv[1], size);
	json_decref(r);
	return CLI_EXIT_OK;
usage:
	fprintf(stderr, "usage: airlock pool set TEMPLATE SIZE [--spares N] [--vcpus N] "
	    "[--memory MB] [--nic] [--json]\n");
	return CLI_EXIT_USAGE;
}

static const struct cli_cmd pool_cmds[] = {
	{ "ls", "ls [--json]", "list warm pools, their bases and counters", pool_ls, NULL },
	{ "set", "set TEMPLATE SIZE [--spares N] [--vcpus N] [--memory MB] [--nic] [--json]",
	  "set a template's pool size (0 drains it), spare VMMs and shape (admin)", pool_set,
	  NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_pool(int argc, char **argv)
{
	return cli_dispatch("airlock pool", pool_cmds, argc - 1, argv + 1);
}
