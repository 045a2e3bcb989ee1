/* airlock create: POST /v1/sandboxes, print the new sandbox's id. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

const char cmd_create_usage[] =
	"usage: airlock create [--template T | --snapshot NAME] [--vcpus N] [--memory MB] [--disk MB]\n"
	"                      [--network none|allowlist|full] [--allow HOST]...\n"
	"                      [--env K=V]... [--meta K=V]... [--timeout S]\n"
	"                      [--idle-timeout S] [--auto-pause] [--json]\n";

static int
create_kv(json_t *obj, const char *arg, char **cause)
{
	char *k, *v;

	if (cli_args_kv(arg, &k, &v, cause) == -1)
		return -1;
	json_object_set_new(obj, k, json_string(v));
	free(k);
	free(v);
	return 0;
}

int
cmd_create_parse(int argc, char **argv, json_t **bodyp, int *json_out, char **cause)
{
	static const struct option longopts[] = {
		{ "template", required_argument, NULL, 'T' },
		{ "snapshot", required_argument, NULL, 'S' },
		{ "vcpus", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "disk", required_argument, NULL, 'D' },
		{ "network", required_argument, NULL, 'n' },
		{ "allow", required_argument, NULL, 'a' },
		{ "env", required_argument, NULL, 'e' },
		{ "meta", required_argument, NULL, 'M' },
		{ "timeout", required_argument, NULL, 't' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "auto-pause", no_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	json_t *body = json_object(), *env = json_object(), *meta = json_object();
	json_t *allow = json_array();
	const char *mode = NULL;
	long long n;
	int ch;

	*bodyp = NULL;
	*json_out = 0;
	optind = 0;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		switch (ch) {
		case 'S':
			json_object_set_new(body, "snapshot", json_string(optarg));
			break;
		case 'T':
			json_object_set_new(body, "template", json_string(optarg));
			break;
		case 'c':
			if (cli_args_num(optarg, 1, 16, &n, "--vcpus", cause) == -1)
				goto bad;
			json_object_set_new(body, "vcpus", json_integer(n));
			break;
		case 'm':
			if (cli_args_num(optarg, 128, 65536, &n, "--memory (MB)", cause) == -1)
				goto bad;
			json_object_set_new(body, "memory_mb", json_integer(n));
			break;
		case 'D':
			/* The daemon checks it against the template and its max_disk_mb. */
			if (cli_args_num(optarg, 1, 1 << 24, &n, "--disk (MB)", cause) == -1)
				goto bad;
			json_object_set_new(body, "disk_mb", json_integer(n));
			break;
		case 'n':
			if (strcmp(optarg, "none") != 0 && strcmp(optarg, "allowlist") != 0 &&
			    strcmp(optarg, "full") != 0) {
				cause_set(cause, "--network: must be one of none, allowlist, full");
				goto bad;
			}
			mode = optarg;
			break;
		case 'a':
			json_array_append_new(allow, json_string(optarg));
			break;
		case 'e':
			if (create_kv(env, optarg, cause) == -1)
				goto bad;
			break;
		case 'M':
			if (create_kv(meta, optarg, cause) == -1)
				goto bad;
			break;
		case 't':
			if (cli_args_num(optarg, 0, 30LL * 86400, &n, "--timeout (s)", cause) == -1)
				goto bad;
			json_object_set_new(body, "timeout_s", json_integer(n));
			break;
		case 'I':
			if (cli_args_num(optarg, 0, 365LL * 86400, &n, "--idle-timeout (s)",
			    cause) == -1)
				goto bad;
			json_object_set_new(body, "idle_timeout_s", json_integer(n));
			break;
		case 'P':
			json_object_set_new(body, "auto_pause", json_true());
			break;
		case 'j':
			*json_out = 1;
			break;
		default:
			cause_set(cause, "unknown or incomplete option \"%s\"", argv[optind - 1]);
			goto bad;
		}
	}
	if (optind != argc) {
		cause_set(cause, "unexpected argument \"%s\"", argv[optind]);
		goto bad;
	}
	/* --allow alone means an allowlist; it makes no sense with none or full. */
	if (json_array_size(allow) > 0 && mode == NULL)
		mode = "allowlist";
	if (json_array_size(allow) > 0 && strcmp(mode, "allowlist") != 0) {
		cause_set(cause, "--allow needs --network allowlist (not %s)", mode);
		goto bad;
	}
	if (mode != NULL)
		json_object_set_new(body, "network", json_pack("{s:s,s:O}", "mode", mode,
		    "allow", allow));
	if (json_object_size(env) > 0)
		json_object_set(body, "env", env);
	if (json_object_size(meta) > 0)
		json_object_set(body, "metadata", meta);
	json_decref(env);
	json_decref(meta);
	json_decref(allow);
	*bodyp = body;
	return 0;
bad:
	json_decref(body);
	json_decref(env);
	json_decref(meta);
	json_decref(allow);
	return -1;
}

int
cmd_create(int argc, char **argv)
{
	struct cli_api *api;
	json_t *body, *sb;
	char *cause = NULL;
	int json_out, progress;
	double t0;

	if (cmd_create_parse(argc, argv, &body, &json_out, &cause) == -1) {
		fprintf(stderr, "airlock create: %s\n%s", cause, cmd_create_usage);
		free(cause);
		return CLI_EXIT_USAGE;
	}
	if ((api = cli_connect()) == NULL) {
		json_decref(body);
		return CLI_EXIT_FAIL;
	}
	/* Booting can take seconds (longer under TCG): say so on a terminal. */
	progress = !json_out && isatty(STDERR_FILENO);
	if (progress)
		fprintf(stderr, "creating sandbox from template \"%s\"...",
		    json_string_value(json_object_get(body, "template")) ?
		    json_string_value(json_object_get(body, "template")) : "base");
	t0 = monotonic_secs();
	sb = cli_api_json(api, "POST", "/v1/sandboxes", body, NULL, &cause);
	json_decref(body);
	if (progress)
		fprintf(stderr, sb != NULL ? " ready in %.1fs\n" : " failed\n", monotonic_secs() - t0);
	cli_api_free(api);
	if (sb == NULL)
		return cli_fail_cause(cause);
	if (json_out)
		cli_print_json(sb);
	else if (json_is_string(json_object_get(sb, "id"))) {
		cli_cell(stdout, json_string_value(json_object_get(sb, "id")), 0);
		fputc('\n', stdout);
	} else {
		json_decref(sb);
		return cli_fail("airlockd's answer has no sandbox id");
	}
	json_decref(sb);
	return CLI_EXIT_OK;
}
