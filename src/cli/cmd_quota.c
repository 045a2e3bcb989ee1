/* airlock quota get|set|rm PROJECT: a project's limits (/v1/projects/{project}/quota, admin). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"

/* "3 of 10", or "3 (no limit)". */
static void
quota_line(const char *what, const json_t *u, const json_t *q, const char *ukey, const char *qkey)
{
	json_int_t used = json_integer_value(json_object_get(u, ukey));
	json_int_t max = json_integer_value(json_object_get(q, qkey));

	if (max > 0)
		printf("  %-10s %lld of %lld\n", what, (long long)used, (long long)max);
	else
		printf("  %-10s %lld (no limit)\n", what, (long long)used);
}

static void
quota_print(const json_t *r)
{
	const json_t *q = json_object_get(r, "quota"), *u = json_object_get(r, "usage");

	printf("project %s%s\n", json_string_value(json_object_get(r, "project")),
	    json_is_null(q) ? ": no quota" : "");
	quota_line("sandboxes", u, q, "sandboxes", "max_sandboxes");
	quota_line("vcpus", u, q, "vcpus", "max_vcpus");
	quota_line("memory_mb", u, q, "memory_mb", "max_memory_mb");
}

static int
quota_show(const char *method, const char *project, json_t *body, int json_out)
{
	json_t *r = cli_call_named(method, "/v1/projects", project, "/quota", body);

	if (r == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(r);
	else
		quota_print(r);
	json_decref(r);
	return CLI_EXIT_OK;
}

static int
quota_get(int argc, char **argv)
{
	int json_out = argc == 3 && strcmp(argv[2], "--json") == 0;

	if (argc < 2 || argc > 3 || (argc == 3 && !json_out)) {
		fprintf(stderr, "usage: airlock quota get PROJECT [--json]\n");
		return CLI_EXIT_USAGE;
	}
	return quota_show("GET", argv[1], NULL, json_out);
}

/* quota set PROJECT [--sandboxes N] [--vcpus N] [--memory MB] [--json]: 0 or absent: no limit. */
static int
quota_set(int argc, char **argv)
{
	static const char *const flags[][2] = { { "--sandboxes", "max_sandboxes" },
	    { "--vcpus", "max_vcpus" }, { "--memory", "max_memory_mb" } };
	json_t *body;
	long long v;
	char *cause = NULL;
	int i, json_out = 0;
	size_t f;

	if (argc < 2)
		goto usage;
	body = json_object();
	for (i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json_out = 1;
			continue;
		}
		for (f = 0; f < 3 && strcmp(argv[i], flags[f][0]) != 0; f++)
			;
		if (f == 3 || i + 1 >= argc) {
			json_decref(body);
			goto usage;
		}
		if (cli_args_num(argv[i + 1], 0, 1LL << 40, &v, argv[i], &cause) == -1) {
			json_decref(body);
			return cli_fail("quota set: %s", cause);
		}
		json_object_set_new(body, flags[f][1], json_integer(v));
		i++;
	}
	return quota_show("PUT", argv[1], body, json_out);
usage:
	fprintf(stderr, "usage: airlock quota set PROJECT [--sandboxes N] [--vcpus N] "
	    "[--memory MB] [--json]\n");
	return CLI_EXIT_USAGE;
}

static int
quota_rm(int argc, char **argv)
{
	json_t *r;
	int i, rc = CLI_EXIT_OK;

	if (argc < 2) {
		fprintf(stderr, "usage: airlock quota rm PROJECT...\n");
		return CLI_EXIT_USAGE;
	}
	for (i = 1; i < argc; i++) {
		if ((r = cli_call_named("DELETE", "/v1/projects", argv[i], "/quota", NULL)) == NULL) {
			rc = CLI_EXIT_FAIL;
			continue;
		}
		printf("removed the quota of project %s\n", argv[i]);
		json_decref(r);
	}
	return rc;
}

static const struct cli_cmd quota_cmds[] = {
	{ "get", "get PROJECT [--json]", "a project's quota and what it uses now (admin)",
	    quota_get, NULL },
	{ "set", "set PROJECT [--sandboxes N] [--vcpus N] [--memory MB] [--json]",
	    "limit a project's live sandboxes, vCPUs and memory; 0 or absent: no limit (admin)",
	    quota_set, NULL },
	{ "rm", "rm PROJECT...", "remove a project's quota (admin)", quota_rm, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_quota(int argc, char **argv)
{
	return cli_dispatch("airlock quota", quota_cmds, argc - 1, argv + 1);
}
