/* airlock get: one sandbox, as "field: value" lines or JSON. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

static void
get_line(const char *name, const char *value)
{
	printf("%-15s ", name);
	cli_cell(stdout, value, 0);
	fputc('\n', stdout);
}

/* {"k":"v",...} as "k=v, k2=v2" (values of other types as JSON). */
static void
get_map(const char *name, const json_t *obj)
{
	const char *k;
	json_t *v;
	char *line = xstrdup(""), *tmp, *js;

	json_object_foreach((json_t *)obj, k, v) {
		tmp = line;
		js = json_is_string(v) ? xstrdup(json_string_value(v)) :
		    json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		xasprintf(&line, "%s%s%s=%s", tmp, *tmp ? ", " : "", k, js ? js : "?");
		free(js);
		free(tmp);
	}
	get_line(name, *line ? line : "-");
	free(line);
}

static void
get_print(const json_t *sb)
{
	static const char *plain[] = { "id", "state", "template", "vcpus", "memory_mb",
	    "timeout_s", "idle_timeout_s", "auto_pause", "created_at", "updated_at",
	    "expires_at", "last_active_at", NULL };
	const json_t *net = json_object_get(sb, "network"), *allow, *err;
	char tmp[64], *line;
	size_t i;
	json_t *a;

	for (i = 0; plain[i] != NULL; i++)
		get_line(plain[i], cli_field(sb, plain[i], tmp, sizeof(tmp)));
	if (net != NULL) {
		line = xstrdup(cli_field(net, "mode", tmp, sizeof(tmp)));
		allow = json_object_get(net, "allow");
		json_array_foreach(allow, i, a) {
			char *prev = line;
			xasprintf(&line, "%s%s%s", prev, i == 0 ? ": " : ", ",
			    json_is_string(a) ? json_string_value(a) : "?");
			free(prev);
		}
		get_line("network", line);
		free(line);
	}
	/* A condition of a running sandbox: "unhealthy since T: reason". */
	if (json_is_object(json_object_get(sb, "health"))) {
		const json_t *h = json_object_get(sb, "health");
		char t[64], r[512];

		xasprintf(&line, "%s since %s%s%s", cli_field(h, "status", tmp, sizeof(tmp)),
		    cli_field(h, "since", t, sizeof(t)), json_is_string(json_object_get(h, "reason")) ?
		    ": " : "", json_is_string(json_object_get(h, "reason")) ?
		    cli_field(h, "reason", r, sizeof(r)) : "");
		get_line("health", line);
		free(line);
	}
	get_map("env", json_object_get(sb, "env"));
	get_map("metadata", json_object_get(sb, "metadata"));
	err = json_object_get(sb, "error");
	if (err != NULL && !json_is_null(err))
		get_line("error", json_is_string(err) ? json_string_value(err) : "(see --json)");
}

int
cmd_get(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	json_t *sb;
	char *path;
	int ch, json_out = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch != 'j')
			goto usage;
		json_out = 1;
	}
	if (optind != argc - 1)
		goto usage;
	path = cli_sandbox_path(argv[optind], "");
	sb = cli_call("GET", path, NULL, NULL);
	free(path);
	if (sb == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(sb);
	else
		get_print(sb);
	json_decref(sb);
	return CLI_EXIT_OK;
usage:
	fprintf(stderr, "usage: airlock get ID [--json]\n");
	return CLI_EXIT_USAGE;
}
