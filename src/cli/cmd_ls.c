/* airlock ls: GET /v1/sandboxes, following pagination, as a table or JSON. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

#define LS_PAGE		100
#define LS_PAGES_MAX	10000	/* a daemon that always says "next" must not loop us */

static const struct cli_col ls_cols[] = { { "ID", 22 }, { "STATE", 11 }, { "HEALTH", 10 },
    { "TEMPLATE", 14 }, { "VCPUS", 6 }, { "MEM_MB", 8 }, { "CREATED", 0 }, { NULL, 0 } };

static void
ls_row(const json_t *sb)
{
	const json_t *h = json_object_get(sb, "health");
	char t[7][32];
	const char *cells[] = {
		cli_field(sb, "id", t[0], sizeof(t[0])),
		cli_field(sb, "state", t[1], sizeof(t[1])),
		/* Only running sandboxes have a health ("-" otherwise). */
		json_is_object(h) ? cli_field(h, "status", t[6], sizeof(t[6])) : "-",
		cli_field(sb, "template", t[2], sizeof(t[2])),
		cli_field(sb, "vcpus", t[3], sizeof(t[3])),
		cli_field(sb, "memory_mb", t[4], sizeof(t[4])),
		cli_age(json_string_value(json_object_get(sb, "created_at")), t[5], sizeof(t[5])),
	};

	cli_table_row(ls_cols, cells);
}

int
cmd_ls(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "meta", required_argument, NULL, 'M' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const char *state = NULL;
	char *meta = NULL, *cause = NULL, *k, *v, *path, *after = NULL;
	struct cli_api *api;
	json_t *all = json_array(), *page, *sb;
	int ch, json_out = 0, pages;
	size_t i;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			state = optarg;
			break;
		case 'M':
			if (cli_args_kv(optarg, &k, &v, &cause) == -1) {
				fprintf(stderr, "airlock ls: --meta %s\n", cause);
				free(cause);
				goto usage;
			}
			char *prev = meta;
			xasprintf(&meta, "%s%s%s=%s", prev ? prev : "", prev ? "&" : "", k, v);
			free(prev);
			free(k);
			free(v);
			break;
		case 'j':
			json_out = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if ((api = cli_connect()) == NULL)
		goto fail;
	for (pages = 0; pages < LS_PAGES_MAX; pages++) {
		xasprintf(&path, "/v1/sandboxes?limit=%d", LS_PAGE);
		cli_query_add(&path, "state", state);
		/* The filter is itself k=v&k2=v2, escaped as one value. */
		cli_query_add(&path, "metadata", meta);
		cli_query_add(&path, "after", after);
		page = cli_api_json(api, "GET", path, NULL, NULL, &cause);
		free(path);
		if (page == NULL) {
			cli_api_free(api);
			cli_fail_cause(cause);
			goto fail;
		}
		json_array_foreach(json_object_get(page, "sandboxes"), i, sb)
			json_array_append(all, sb);
		free(after);
		after = NULL;
		if (json_is_string(json_object_get(page, "next")) &&
		    json_array_size(json_object_get(page, "sandboxes")) > 0)
			after = xstrdup(json_string_value(json_object_get(page, "next")));
		json_decref(page);
		if (after == NULL)
			break;
	}
	cli_api_free(api);
	if (json_out)
		cli_print_json(all);
	else {
		cli_table_head(ls_cols);
		json_array_foreach(all, i, sb)
			ls_row(sb);
	}
	free(after);
	free(meta);
	json_decref(all);
	return CLI_EXIT_OK;
usage:
	fprintf(stderr, "usage: airlock ls [--state S[,S...]] [--meta K=V]... [--json]\n");
	free(meta);
	json_decref(all);
	return CLI_EXIT_USAGE;
fail:
	free(after);
	free(meta);
	json_decref(all);
	return CLI_EXIT_FAIL;
}
