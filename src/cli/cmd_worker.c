/* airlock worker ls: a cluster's workers (GET /v1/workers, served by the API replicas). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"

static const struct cli_col worker_cols[] = { { "NAME", 16 }, { "STATE", 9 }, { "LIVE", 5 },
    { "ADDR", 22 }, { "SANDBOXES", 10 }, { "VCPUS", 8 }, { "MEM_MB", 14 }, { "POOL", 5 },
    { "HEARTBEAT", 0 }, { NULL, 0 } };

static void
worker_row(const json_t *w)
{
	const json_t *cap = json_object_get(w, "capacity"), *used = json_object_get(w, "used");
	char t[9][48];
	const char *cells[9];

	cells[0] = cli_field(w, "name", t[0], sizeof(t[0]));
	cells[1] = cli_field(w, "state", t[1], sizeof(t[1]));
	cells[2] = json_is_true(json_object_get(w, "live")) ? "yes" : "no";
	cells[3] = cli_field(w, "addr", t[3], sizeof(t[3]));
	cells[4] = cli_field(used, "sandboxes", t[4], sizeof(t[4]));
	snprintf(t[5], sizeof(t[5]), "%lld/%lld",
	    (long long)json_integer_value(json_object_get(used, "vcpus")),
	    (long long)json_integer_value(json_object_get(cap, "vcpus")));
	cells[5] = t[5];
	snprintf(t[6], sizeof(t[6]), "%lld/%lld",
	    (long long)json_integer_value(json_object_get(used, "memory_mb")),
	    (long long)json_integer_value(json_object_get(cap, "memory_mb")));
	cells[6] = t[6];
	cells[7] = cli_field(used, "pool_ready", t[7], sizeof(t[7]));
	cells[8] = cli_field(w, "heartbeat_at", t[8], sizeof(t[8]));
	cli_table_row(worker_cols, cells);
}

static int
worker_ls(int argc, char **argv)
{
	return cli_list_cmd(argc, argv, "airlock worker ls [--json]",
	    "/v1/workers", "workers", worker_cols, worker_row);
}

/* worker drain NAME [--json]: no new sandboxes there, every one suspended. */
static int
worker_drain(int argc, char **argv)
{
	int json_out = argc == 3 && strcmp(argv[2], "--json") == 0;
	json_t *r;

	if (argc < 2 || argc > 3 || (argc == 3 && !json_out)) {
		fprintf(stderr, "usage: airlock worker drain NAME [--json]\n");
		return CLI_EXIT_USAGE;
	}
	r = cli_call_named("POST", "/v1/workers", argv[1], "/drain", NULL);
	if (r == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(r);
	else
		printf("worker %s: draining (its sandboxes are being suspended)\n", argv[1]);
	json_decref(r);
	return CLI_EXIT_OK;
}

static const struct cli_cmd worker_cmds[] = {
	{ "ls", "ls [--json]", "the cluster's workers: state, capacity and use, heartbeat",
	    worker_ls, NULL },
	{ "drain", "drain NAME [--json]", "no new sandboxes on that worker, every one suspended "
	    "(admin)", worker_drain, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_worker(int argc, char **argv)
{
	return cli_dispatch("airlock worker", worker_cmds, argc - 1, argv + 1);
}
