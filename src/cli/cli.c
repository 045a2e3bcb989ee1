/* Dispatch and the helpers every daemon-facing command shares. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/rfc3339.h"
#include "common/util.h"

void
cli_usage(const char *group, const struct cli_cmd *cmds)
{
	fprintf(stderr, "usage: %s <command> [args]\n\ncommands:\n", group);
	for (; cmds->name != NULL; cmds++)
		fprintf(stderr, "  %-48s %s\n", cmds->usage, cmds->help);
}

int
cli_dispatch(const char *group, const struct cli_cmd *cmds, int argc, char **argv)
{
	const struct cli_cmd *c;

	if (argc < 1 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0 ||
	    strcmp(argv[0], "help") == 0) {
		cli_usage(group, cmds);
		return argc < 1 ? 2 : 0;
	}
	for (c = cmds; c->name != NULL; c++) {
		if (strcmp(c->name, argv[0]) != 0)
			continue;
		/* "VERB --help"; groups (template, key, secret, ...) list their own subcommands. */
		if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) &&
		    c->run != cmd_template && c->run != cmd_key && c->run != cmd_secret &&
		    c->run != cmd_volume && c->run != cmd_cluster) {
			if (c->detail != NULL)
				fputs(c->detail, stdout);
			else
				printf("usage: %s %s\n", group, c->usage);
			printf("  %s\n", c->help);
			return 0;
		}
		return c->run(argc, argv);
	}
	fprintf(stderr, "%s: unknown command \"%s\"\n\n", group, argv[0]);
	cli_usage(group, cmds);
	return 2;
}

int
cli_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("airlock: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_EXIT_FAIL;
}

int
cli_fail_cause(char *cause)
{
	cli_fail("%s", cause != NULL ? cause : "failed");
	free(cause);
	return CLI_EXIT_FAIL;
}

struct cli_api *
cli_connect(void)
{
	struct cli_api *api;
	char *cause = NULL;

	if ((api = cli_api_new(&cause)) == NULL)
		cli_fail_cause(cause);
	return api;
}

char *
cli_named_path(const char *collection, const char *name, const char *suffix)
{
	char *e = cli_http_escape_segment(name), *p;

	xasprintf(&p, "%s/%s%s", collection, e, suffix);
	free(e);
	return p;
}

char *
cli_sandbox_path(const char *id, const char *suffix)
{
	return cli_named_path("/v1/sandboxes", id, suffix);
}

void
cli_query_add(char **q, const char *key, const char *value)
{
	char *e, *t;

	if (value == NULL)
		return;
	e = cli_http_escape(value);
	xasprintf(&t, "%s%c%s=%s", *q, strchr(*q, '?') != NULL ? '&' : '?', key, e);
	free(e);
	free(*q);
	*q = t;
}

json_t *
cli_call(const char *method, const char *path, json_t *body, int *status)
{
	struct cli_api *api;
	char *cause = NULL;
	json_t *r;

	if ((api = cli_connect()) == NULL)
		return NULL;
	r = cli_api_json(api, method, path, body, status, &cause);
	cli_api_free(api);
	if (r == NULL)
		cli_fail_cause(cause);
	return r;
}

json_t *
cli_call_named(const char *method, const char *collection, const char *name,
    const char *suffix, json_t *body)
{
	char *path = cli_named_path(collection, name, suffix);
	json_t *r;

	r = cli_call(method, path, body, NULL);
	free(path);
	json_decref(body);
	return r;
}

int
cli_delete(struct cli_api *api, const char *path, const char *what, const char *key,
    const char *name, int json)
{
	char *cause = NULL;
	json_t *r;

	if ((r = cli_api_json(api, "DELETE", path, NULL, NULL, &cause)) == NULL)
		return cli_fail_cause(cause);
	json_decref(r);
	if (json) {
		r = json_pack("{s:s,s:b}", key, name, "deleted", 1);
		cli_print_json(r);
		json_decref(r);
	} else {
		printf("removed %s ", what);
		cli_cell(stdout, name, 0);
		fputc('\n', stdout);
	}
	return CLI_EXIT_OK;
}

int
cli_delete_each(int argc, char **argv, const char *collection, const char *what,
    const char *key, const char *usage)
{
	struct cli_api *api;
	int i, json_out = 0, rv = CLI_EXIT_OK, names = 0;
	char *path;

	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else
			names++;
	if (names == 0) {
		fprintf(stderr, "usage: %s\n", usage);
		return CLI_EXIT_USAGE;
	}
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			continue;
		path = cli_named_path(collection, argv[i], "");
		if (cli_delete(api, path, what, key, argv[i], json_out) != CLI_EXIT_OK)
			rv = CLI_EXIT_FAIL;
		free(path);
	}
	cli_api_free(api);
	return rv;
}

void
cli_print_json(const json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
}

void
cli_print_json_list(const json_t *r, const char *key)
{
	const json_t *list = json_object_get(r, key);

	cli_print_json(list != NULL ? list : r);
}

const char *
cli_field(const json_t *obj, const char *key, char *tmp, size_t tmplen)
{
	const json_t *v = json_object_get(obj, key);

	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_integer(v)) {
		snprintf(tmp, tmplen, "%lld", (long long)json_integer_value(v));
		return tmp;
	}
	if (json_is_real(v)) {
		snprintf(tmp, tmplen, "%.1f", json_real_value(v));
		return tmp;
	}
	if (json_is_true(v))
		return "true";
	if (json_is_false(v))
		return "false";
	return "-";
}

void
cli_cell(FILE *f, const char *s, int width)
{
	int n = 0;

	for (; *s != '\0'; s++, n++) {
		unsigned char c = (unsigned char)*s;
		fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
	}
	for (; n < width; n++)
		fputc(' ', f);
}

void
cli_table_head(const struct cli_col *cols)
{
	for (; cols->title != NULL; cols++) {
		cli_cell(stdout, cols->title, cols->width);
		fputc(cols[1].title != NULL ? ' ' : '\n', stdout);
	}
}

void
cli_table_row(const struct cli_col *cols, const char *const *cells)
{
	for (; cols->title != NULL; cols++, cells++) {
		cli_cell(stdout, *cells, cols->width);
		fputc(cols[1].title != NULL ? ' ' : '\n', stdout);
	}
}

json_t *
cli_list(const char *path, const char *key, int json, const struct cli_col *cols,
    void (*row)(const json_t *))
{
	json_t *r, *item;
	size_t i;

	if ((r = cli_call("GET", path, NULL, NULL)) == NULL)
		return NULL;
	if (json)
		cli_print_json_list(r, key);
	else {
		cli_table_head(cols);
		json_array_foreach(json_object_get(r, key), i, item)
			row(item);
	}
	return r;
}

int
cli_list_cmd(int argc, char **argv, const char *usage, const char *path, const char *key,
    const struct cli_col *cols, void (*row)(const json_t *))
{
	int json_out = argc == 2 && strcmp(argv[1], "--json") == 0;
	json_t *r;

	if (argc > 2 || (argc == 2 && !json_out)) {
		fprintf(stderr, "usage: %s\n", usage);
		return CLI_EXIT_USAGE;
	}
	if ((r = cli_list(path, key, json_out, cols, row)) == NULL)
		return CLI_EXIT_FAIL;
	json_decref(r);
	return CLI_EXIT_OK;
}

const char *
cli_age(const char *iso, char *buf, size_t len)
{
	int64_t ms;
	long d;

	if (iso == NULL || rfc3339_parse_ms(iso, &ms) == -1)
		return iso != NULL ? iso : "-";
	d = (long)(time(NULL) - ms / 1000);
	if (d < 0)
		d = 0;
	if (d < 60)
		snprintf(buf, len, "%lds ago", d);
	else if (d < 3600)
		snprintf(buf, len, "%ldm ago", d / 60);
	else if (d < 86400)
		snprintf(buf, len, "%ldh ago", d / 3600);
	else
		snprintf(buf, len, "%ldd ago", d / 86400);
	return buf;
}

int
cli_sandbox_op(int argc, char **argv, const char *method, const char *suffix,
    const char *doing, const char *done)
{
	struct cli_api *api;
	char *path, *cause = NULL;
	int i, json_out = 0, rv = CLI_EXIT_OK, progress, nids = 0;
	double t0;
	json_t *sb;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json_out = 1;
		else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: airlock %s [--json] ID...\n", argv[0]);
			return CLI_EXIT_USAGE;
		} else
			nids++;
	}
	if (nids == 0) {
		fprintf(stderr, "usage: airlock %s [--json] ID...\n", argv[0]);
		return CLI_EXIT_USAGE;
	}
	if ((api = cli_connect()) == NULL)
		return CLI_EXIT_FAIL;
	progress = !json_out && isatty(STDERR_FILENO);
	for (i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue;
		path = cli_sandbox_path(argv[i], suffix);
		if (progress) {
			fprintf(stderr, "%s ", doing);
			cli_cell(stderr, argv[i], 0);
			fputs("...", stderr);
		}
		t0 = monotonic_secs();
		sb = cli_api_json(api, method, path, NULL, NULL, &cause);
		free(path);
		if (progress)
			fprintf(stderr, sb != NULL ? " done in %.1fs\n" : " failed\n",
			    monotonic_secs() - t0);
		if (sb == NULL) {
			cli_fail_cause(cause);
			cause = NULL;
			rv = CLI_EXIT_FAIL;
			continue;
		}
		if (json_out && json_object_size(sb) == 0) {
			/* 204 (rm): still one JSON object per ID, for scripts. */
			json_t *j = json_pack("{s:s,s:b}", "id", argv[i], "deleted", 1);
			cli_print_json(j);
			json_decref(j);
		} else if (json_out)
			cli_print_json(sb);
		else {
			printf("%s ", done);
			cli_cell(stdout, argv[i], 0);
			fputc('\n', stdout);
		}
		json_decref(sb);
	}
	cli_api_free(api);
	return rv;
}
