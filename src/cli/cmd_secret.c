/*
 * airlock secret set|ls|rm: credentials the egress gateway injects
 * (PUT/GET/DELETE /v1/secrets). The value is read from stdin or a file,
 * never from the command line: argv is readable by every user on the host
 * (ps, /proc/PID/cmdline) and lands in shell history.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

#define SECRET_VALUE_MAX	(64 * 1024)	/* the daemon's limit; more is refused here */

/* --scope and --sandbox as a query string ("" or "?scope=..&sandbox=.."), malloc'd. */
static char *
secret_query(const char *scope, const char *sandbox)
{
	char *q = xstrdup("");

	cli_query_add(&q, "scope", scope);
	cli_query_add(&q, "sandbox", sandbox);
	return q;
}

static char *
secret_path(const char *name, const char *scope, const char *sandbox)
{
	char *p = cli_named_path("/v1/secrets", name, "");

	cli_query_add(&p, "scope", scope);
	cli_query_add(&p, "sandbox", sandbox);
	return p;
}

/*
 * Read the value from fd: at most SECRET_VALUE_MAX bytes, one trailing
 * newline dropped (echo and editors add one). On a terminal, echo is off
 * and one line is read.
 */
static char *
secret_read(int fd, const char *what, char **cause)
{
	struct termios old, raw;
	size_t len = 0, cap = SECRET_VALUE_MAX + 2;
	char *buf = xmalloc(cap);
	int tty = isatty(fd);
	ssize_t n;

	if (tty) {
		fprintf(stderr, "value (not echoed): ");
		tcgetattr(fd, &old);
		raw = old;
		raw.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(fd, TCSAFLUSH, &raw);
	}
	while (len < cap - 1) {
		if ((n = read(fd, buf + len, cap - 1 - len)) <= 0)
			break;
		len += (size_t)n;
		if (tty && memchr(buf, '\n', len) != NULL)
			break;
	}
	if (tty) {
		tcsetattr(fd, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	buf[len] = '\0';
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len > 0 && buf[len - 1] == '\r')
		buf[--len] = '\0';
	if (len == 0 || len > SECRET_VALUE_MAX || strlen(buf) != len) {
		cause_set(cause, len == 0 ? "%s: the value is empty" :
		    "%s: the value must be at most %d bytes, without NUL", what, SECRET_VALUE_MAX);
		explicit_bzero(buf, cap);
		free(buf);
		return NULL;
	}
	return buf;
}

static void
secret_print(const json_t *s)
{
	char t[32];
	size_t i;
	json_t *h;

	printf("secret ");
	cli_cell(stdout, cli_field(s, "name", t, sizeof t), 0);
	printf(" (%s", cli_field(s, "scope", t, sizeof t));
	if (json_is_string(json_object_get(s, "scope_id"))) {
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(s, "scope_id", t, sizeof t), 0);
	}
	printf(") for");
	json_array_foreach(json_object_get(s, "hosts"), i, h) {
		fputc(' ', stdout);
		cli_cell(stdout, json_is_string(h) ? json_string_value(h) : "?", 0);
	}
	fputc('\n', stdout);
}

static int
secret_set(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "header", required_argument, NULL, 'h' },
		{ "format", required_argument, NULL, 'f' },
		{ "scope", required_argument, NULL, 's' },
		{ "sandbox", required_argument, NULL, 'b' },
		{ "value-file", required_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const char *header = NULL, *format = NULL, *scope = NULL, *sandbox = NULL, *file = NULL;
	json_t *hosts = json_array(), *body, *r;
	char *value, *cause = NULL, *path;
	int ch, json_out = 0, fd, status;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'H': json_array_append_new(hosts, json_string(optarg)); break;
		case 'h': header = optarg; break;
		case 'f': format = optarg; break;
		case 's': scope = optarg; break;
		case 'b': sandbox = optarg; break;
		case 'v': file = optarg; break;
		case 'j': json_out = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	if (json_array_size(hosts) == 0) {
		fprintf(stderr, "airlock secret set: --host is required: the value is only ever "
		    "sent to these hosts\n");
		goto usage;
	}
	if (file != NULL && (fd = open(file, O_RDONLY | O_CLOEXEC)) == -1) {
		json_decref(hosts);
		return cli_fail("--value-file %s: %s", file, strerror(errno));
	}
	if (file == NULL)
		fd = STDIN_FILENO;
	value = secret_read(fd, file != NULL ? file : "stdin", &cause);
	if (file != NULL)
		close(fd);
	if (value == NULL) {
		json_decref(hosts);
		return cli_fail_cause(cause);
	}
	body = json_pack("{s:s,s:o}", "value", value, "hosts", hosts);
	explicit_bzero(value, strlen(value));
	free(value);
	if (header != NULL)
		json_object_set_new(body, "header", json_string(header));
	if (format != NULL)
		json_object_set_new(body, "format", json_string(format));
	if (scope != NULL)
		json_object_set_new(body, "scope", json_string(scope));
	if (sandbox != NULL)
		json_object_set_new(body, "sandbox", json_string(sandbox));
	path = secret_path(argv[optind], NULL, NULL);
	r = cli_call("PUT", path, body, &status);
	free(path);
	explicit_bzero((char *)json_string_value(json_object_get(body, "value")),
	    json_string_length(json_object_get(body, "value")));
	json_decref(body);
	if (r == NULL)
		return CLI_EXIT_FAIL;
	if (json_out)
		cli_print_json(r);
	else {
		fputs(status == 201 ? "created " : "replaced ", stdout);
		secret_print(r);
	}
	json_decref(r);
	return CLI_EXIT_OK;
usage:
	json_decref(hosts);
	fprintf(stderr, "usage: airlock secret set NAME --host H [--host H2]... [--header H] "
	    "[--format F]\n       [--scope global|project|sandbox] [--sandbox ID] "
	    "[--value-file PATH] [--json]  (value on stdin)\n");
	return CLI_EXIT_USAGE;
}

/* The options ls and rm share; -1 on an unknown one. */
static int
secret_scope_opts(int argc, char **argv, const char **scope, const char **sandbox,
    int *json_out)
{
	static const struct option longopts[] = {
		{ "scope", required_argument, NULL, 's' },
		{ "sandbox", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': *scope = optarg; break;
		case 'b': *sandbox = optarg; break;
		case 'j': *json_out = 1; break;
		default: return -1;
		}
	}
	return 0;
}

static const struct cli_col secret_cols[] = { { "NAME", 24 }, { "SCOPE", 8 },
    { "SCOPE_ID", 22 }, { "HOSTS", 32 }, { "HEADER", 16 }, { "UPDATED", 0 }, { NULL, 0 } };

/* The hosts, comma-separated (cut at len). */
static const char *
secret_hosts(const json_t *s, char *buf, size_t len)
{
	json_t *h;
	size_t k;

	buf[0] = '\0';
	json_array_foreach(json_object_get(s, "hosts"), k, h)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", k ? "," : "",
		    json_is_string(h) ? json_string_value(h) : "?");
	return buf;
}

static void
secret_row(const json_t *s)
{
	char t[5][64], hosts[256];
	const char *cells[] = {
		cli_field(s, "name", t[0], sizeof t[0]),
		cli_field(s, "scope", t[1], sizeof t[1]),
		cli_field(s, "scope_id", t[2], sizeof t[2]),
		secret_hosts(s, hosts, sizeof hosts),
		cli_field(s, "header", t[3], sizeof t[3]),
		cli_age(json_string_value(json_object_get(s, "updated_at")), t[4], sizeof t[4]),
	};

	cli_table_row(secret_cols, cells);
}

static int
secret_ls(int argc, char **argv)
{
	const char *scope = NULL, *sandbox = NULL;
	char *q, *path;
	json_t *r;
	int json_out = 0;

	if (secret_scope_opts(argc, argv, &scope, &sandbox, &json_out) == -1 || optind != argc)
		goto usage;
	q = secret_query(scope, sandbox);
	xasprintf(&path, "/v1/secrets%s", q);
	free(q);
	r = cli_list(path, "secrets", json_out, secret_cols, secret_row);
	free(path);
	if (r == NULL)
		return CLI_EXIT_FAIL;
	json_decref(r);
	return CLI_EXIT_OK;
usage:
	fprintf(stderr, "usage: airlock secret ls [--scope global|project|sandbox] "
	    "[--sandbox ID] [--json]\n");
	return CLI_EXIT_USAGE;
}

static int
secret_rm(int argc, char **argv)
{
	const char *scope = NULL, *sandbox = NULL;
	struct cli_api *api;
	int i, json_out = 0, rv = CLI_EXIT_OK;
	char *path;

	if (secret_scope_opts(argc, argv, &scope, &sandbox, &json_out) == -1 || optind == argc)
		goto usage;
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	for (i = optind; i < argc; i++) {
		path = secret_path(argv[i], scope, sandbox);
		if (cli_delete(api, path, "secret", "name", argv[i], json_out) != CLI_EXIT_OK)
			rv = CLI_EXIT_FAIL;
		free(path);
	}
	cli_api_free(api);
	return rv;
usage:
	fprintf(stderr, "usage: airlock secret rm NAME... [--scope global|project|sandbox] "
	    "[--sandbox ID] [--json]\n");
	return CLI_EXIT_USAGE;
}

static const struct cli_cmd secret_cmds[] = {
	{ "set", "set NAME --host H... [--header H] [--format F] [--scope S] [--sandbox ID] "
	  "[--value-file PATH]", "create or replace a secret; the value comes from stdin",
	  secret_set, NULL },
	{ "ls", "ls [--scope S] [--sandbox ID] [--json]", "list secrets (never their values)",
	  secret_ls, NULL },
	{ "rm", "rm NAME... [--scope S] [--sandbox ID] [--json]", "delete secrets", secret_rm,
	  NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_secret(int argc, char **argv)
{
	return cli_dispatch("airlock secret", secret_cmds, argc - 1, argv + 1);
}
