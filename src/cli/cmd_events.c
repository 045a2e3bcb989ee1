/*
 * airlock events [ID]: follow GET /v1/events (or one sandbox's) and print
 * one line per event until interrupted: past events first, then live ones.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "cli/cli_sse.h"
#include "common/util.h"

struct events_state {
	struct cli_sse	sse;
	int		json;
};

/* One event as "SEQ AT SANDBOX TYPE DATA" (or its JSON). */
static int
events_event(void *arg, const char *event, const char *data, size_t len)
{
	struct events_state *es = arg;
	json_t *j = json_loadb(data, len, 0, NULL), *d;
	char t1[32], t2[32], *ds;

	if (j == NULL || !json_is_object(j)) {
		json_decref(j);
		return 0;	/* not an event record; nothing useful to print */
	}
	if (es->json) {
		ds = json_dumps(j, JSON_COMPACT);
		if (ds != NULL)
			puts(ds);
		free(ds);
	} else {
		cli_cell(stdout, cli_field(j, "seq", t1, sizeof(t1)), 6);
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(j, "at", t2, sizeof(t2)), 24);
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(j, "sandbox", t1, sizeof(t1)), 22);
		fputc(' ', stdout);
		cli_cell(stdout, json_is_string(json_object_get(j, "type")) ?
		    json_string_value(json_object_get(j, "type")) : event, 12);
		d = json_object_get(j, "data");
		if (d != NULL && !json_is_null(d) &&
		    !(json_is_object(d) && json_object_size(d) == 0)) {
			ds = json_dumps(d, JSON_COMPACT | JSON_ENCODE_ANY);
			fputc(' ', stdout);
			cli_cell(stdout, ds != NULL ? ds : "", 0);
			free(ds);
		}
		fputc('\n', stdout);
	}
	/* Line by line, so `airlock events | grep` sees events as they happen. */
	fflush(stdout);
	json_decref(j);
	return 0;
}

static int
events_sink(void *arg, const char *data, size_t n, char **cause)
{
	struct events_state *es = arg;

	return cli_sse_feed(&es->sse, data, n, cause);
}

int
cmd_events(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "after", required_argument, NULL, 'a' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct events_state es;
	struct cli_api *api;
	struct cli_conn *conn;
	long long after = -1;
	char *path, *suffix, *cause = NULL;
	int ch, st;

	memset(&es, 0, sizeof(es));
	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			if (cli_args_num(optarg, 0, INT64_MAX, &after, "--after", &cause) == -1) {
				fprintf(stderr, "airlock events: %s\n", cause);
				free(cause);
				goto usage;
			}
			break;
		case 'j':
			es.json = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind < argc - 1)
		goto usage;
	if (after >= 0)
		xasprintf(&suffix, "/events?after=%lld", after);
	else
		suffix = xstrdup("/events");
	if (optind == argc - 1)
		path = cli_sandbox_path(argv[optind], suffix);
	else
		xasprintf(&path, "/v1%s", suffix);
	free(suffix);
	if ((api = cli_connect()) == NULL) {
		free(path);
		return CLI_EXIT_FAIL;
	}
	cli_sse_init(&es.sse, events_event, &es);
	conn = cli_api_conn(api);
	st = cli_conn_request(conn, "GET", path, NULL, NULL, 0, -1, NULL, NULL, NULL, &cause);
	free(path);
	if (!es.json && st != -1)
		printf("%-6s %-24s %-22s %-12s %s\n", "SEQ", "AT", "SANDBOX", "TYPE", "DATA");
	/* Heartbeats arrive every 15 s; silence past the stream timeout means a dead daemon. */
	cli_conn_set_timeout(conn, CLI_HTTP_STREAM_TIMEOUT_MS);
	if (st != -1 && cli_conn_body_all(conn, events_sink, &es, &cause) == 1)
		st = CLI_EXIT_OK;
	else
		st = cli_fail_cause(cause);
	cli_sse_free(&es.sse);
	cli_api_free(api);
	return st;
usage:
	fprintf(stderr, "usage: airlock events [--after SEQ] [--json] [ID]\n");
	return CLI_EXIT_USAGE;
}
