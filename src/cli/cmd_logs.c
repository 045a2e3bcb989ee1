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
	 * The console is the guest's own output: written as is, like cat
	 * would, since that is what someone debugging a boot wants to see.
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

int
cmd_logs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tail", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 }
	};
	struct cli_api *api;
	long long tail = -1;
	char *path, *suffix, *cause = NULL;
	int ch, st;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
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
	fprintf(stderr, "usage: airlock logs [--tail N] ID\n");
	return CLI_EXIT_USAGE;
}
