/* airlock logs: the sandbox's serial console (GET .../logs), streamed to stdout. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

static int
logs_write(void *arg, const char *data, size_t n, char **cause)
{
	ssize_t w;

	/*
	 * Written as received: the API has already escaped every control
	 * byte (NUL, ESC, ...) and invalid UTF-8, so a hostile guest can
	 * neither hide lines nor drive the user's terminal.
	 */
	while (n > 0) {
		w = write(STDOUT_FILENO, data, n);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0) {
			cause_set(cause, "write: %s", strerror(w == 0 ? EIO : errno));
			return -1;
		}
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

struct logs_buf {
	char	*data;
	size_t	 len;
};

static int
logs_collect(void *arg, const char *data, size_t n, char **cause)
{
	struct logs_buf *b = arg;

	if (b->len + n > CLI_HTTP_JSON_MAX) {
		cause_set(cause, "console log larger than %d bytes; use --tail", CLI_HTTP_JSON_MAX);
		return -1;
	}
	b->data = xreallocarray(b->data, 1, b->len + n + 1);
	memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

static int
logs_json(struct cli_api *api, const char *path, const char *id, json_t **out, char **cause)
{
	struct logs_buf b = { NULL, 0 };
	struct cli_conn *c = cli_api_conn(api);

	if (cli_conn_request(c, "GET", path, NULL, NULL, 0, -1, NULL, NULL, NULL, cause) == -1)
		return -1;
	if (cli_conn_body_all(c, logs_collect, &b, cause) == -1) {
		free(b.data);
		return -1;
	}
	/*
	 * The API sends escaped UTF-8; a daemon from before that sent raw
	 * bytes, which jansson refuses when they are not UTF-8.
	 */
	*out = json_pack("{s:s,s:s#}", "id", id, "logs", b.data ? b.data : "", b.len);
	if (*out == NULL) {
		for (size_t i = 0; i < b.len; i++)
			if ((unsigned char)b.data[i] >= 0x80)
				b.data[i] = '?';
		*out = json_pack("{s:s,s:s#}", "id", id, "logs", b.data ? b.data : "", b.len);
	}
	free(b.data);
	if (*out == NULL) {
		cause_set(cause, "console log cannot be represented as JSON");
		return -1;
	}
	return 0;
}

int
cmd_logs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tail", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct cli_api *api;
	long long tail = -1;
	char *path, *suffix, *cause = NULL;
	int ch, st, json_out = 0;
	json_t *j;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		if (ch == 'j') {
			json_out = 1;
			continue;
		}
		if (ch != 'n')
			goto usage;
		if (cli_args_num(optarg, 0, 1000000000, &tail, "--tail", &cause) == -1) {
			fprintf(stderr, "airlock logs: %s\n", cause);
			free(cause);
			goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	if (tail >= 0)
		xasprintf(&suffix, "/logs?tail=%lld", tail);
	else
		suffix = xstrdup("/logs");
	path = cli_sandbox_path(argv[optind], suffix);
	if (json_out) {
		/* The console as one JSON string (bounded like any JSON answer). */
		st = logs_json(api, path, argv[optind], &j, &cause);
		if (st == 0) {
			cli_print_json(j);
			json_decref(j);
		} else
			cli_fail_cause(cause);
		free(path);
		free(suffix);
		cli_api_free(api);
		return st == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
	}
	st = cli_conn_request(cli_api_conn(api), "GET", path, NULL, NULL, 0, -1, NULL, NULL,
	    NULL, &cause);
	if (st != -1 && cli_conn_body_all(cli_api_conn(api), logs_write, NULL, &cause) == 1)
		st = CLI_EXIT_OK;
	else
		st = cli_fail_cause(cause);
	free(path);
	free(suffix);
	cli_api_free(api);
	return st;
usage:
	fprintf(stderr, "usage: airlock logs [--tail N] [--json] ID\n");
	return CLI_EXIT_USAGE;
}
