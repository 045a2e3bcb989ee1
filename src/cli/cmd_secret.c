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
	char *q = xstrdup(""), *e, *t;

	if (scope != NULL) {
		e = cli_http_escape(scope);
		xasprintf(&t, "?scope=%s", e);
		free(e);
		free(q);
		q = t;
	}
	if (sandbox != NULL) {
		e = cli_http_escape(sandbox);
		xasprintf(&t, "%s%csandbox=%s", q, *q != '\0' ? '&' : '?', e);
		free(e);
		free(q);
		q = t;
	}
	return q;
}

static char *
secret_path(const char *name, const char *scope, const char *sandbox)
{
	char *e = cli_http_escape_segment(name), *q = secret_query(scope, sandbox), *p;

	xasprintf(&p, "/v1/secrets/%s%s", e, q);
	free(e);
	free(q);
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
	struct cli_api *api;
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
	r = NULL;
	if ((api = cli_connect()) != NULL) {
		path = secret_path(argv[optind], NULL, NULL);
		r = cli_api_json(api, "PUT", path, body, &status, &cause);
		free(path);
		cli_api_free(api);
	}
	explicit_bzero((char *)json_string_value(json_object_get(body, "value")),
	    json_string_length(json_object_get(body, "value")));
	json_decref(body);
	if (api == NULL)
		return CLI_EXIT_FAIL;
	if (r == NULL)
		return cli_fail_cause(cause);
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

static int
secret_ls(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "scope", required_argument, NULL, 's' },
		{ "sandbox", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const char *scope = NULL, *sandbox = NULL;
	char *cause = NULL, *q, *path, t[64], hosts[256];
	struct cli_api *api;
	json_t *r, *s, *h;
	size_t i, k;
	int ch, json_out = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': scope = optarg; break;
		case 'b': sandbox = optarg; break;
		case 'j': json_out = 1; break;
		default: goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	q = secret_query(scope, sandbox);
	xasprintf(&path, "/v1/secrets%s", q);
	free(q);
	r = cli_api_json(api, "GET", path, NULL, NULL, &cause);
	free(path);
	cli_api_free(api);
	if (r == NULL)
		return cli_fail_cause(cause);
	if (json_out) {
		cli_print_json(json_object_get(r, "secrets") ? json_object_get(r, "secrets") : r);
		json_decref(r);
		return CLI_EXIT_OK;
	}
	printf("%-24s %-8s %-22s %-32s %-16s %s\n", "NAME", "SCOPE", "SCOPE_ID", "HOSTS",
	    "HEADER", "UPDATED");
	json_array_foreach(json_object_get(r, "secrets"), i, s) {
		hosts[0] = '\0';
		json_array_foreach(json_object_get(s, "hosts"), k, h)
			snprintf(hosts + strlen(hosts), sizeof hosts - strlen(hosts), "%s%s",
			    k ? "," : "", json_is_string(h) ? json_string_value(h) : "?");
		cli_cell(stdout, cli_field(s, "name", t, sizeof t), 24);
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(s, "scope", t, sizeof t), 8);
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(s, "scope_id", t, sizeof t), 22);
		fputc(' ', stdout);
		cli_cell(stdout, hosts, 32);
		fputc(' ', stdout);
		cli_cell(stdout, cli_field(s, "header", t, sizeof t), 16);
		fputc(' ', stdout);
		cli_cell(stdout, cli_age(json_string_value(json_object_get(s, "updated_at")), t,
		    sizeof t), 0);
		fputc('\n', stdout);
	}
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
	static const struct option longopts[] = {
		{ "scope", required_argument, NULL, 's' },
		{ "sandbox", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const char *scope = NULL, *sandbox = NULL;
	char *cause = NULL, *path;
	struct cli_api *api;
	int ch, i, json_out = 0, rv = CLI_EXIT_OK;
	json_t *r;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 's': scope = optarg; break;
		case 'b': sandbox = optarg; break;
		case 'j': json_out = 1; break;
		default: goto usage;
		}
	}
	if (optind == argc)
		goto usage;
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	for (i = optind; i < argc; i++) {
		path = secret_path(argv[i], scope, sandbox);
		r = cli_api_json(api, "DELETE", path, NULL, NULL, &cause);
		free(path);
		if (r == NULL) {
			rv = cli_fail_cause(cause);
			cause = NULL;
			continue;
		}
		json_decref(r);
		if (json_out) {
			r = json_pack("{s:s,s:b}", "name", argv[i], "deleted", 1);
			cli_print_json(r);
			json_decref(r);
		} else {
			printf("removed secret ");
			cli_cell(stdout, argv[i], 0);
			fputc('\n', stdout);
		}
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
