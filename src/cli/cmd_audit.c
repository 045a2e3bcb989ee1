/* airlock audit: the egress gateway's decisions (GET /v1/audit), newest first. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/util.h"

/*
 * --since/--until: RFC 3339 as is, or an age ("90s", "15m", "2h", "7d")
 * turned into the UTC time that long ago. The daemon validates the rest.
 */
static char *
audit_time_arg(const char *s)
{
	char *end, *out;
	long long n;
	struct tm tm;
	time_t t;

	n = strtoll(s, &end, 10);
	if (end == s || n < 0 || end[0] == '\0' || end[1] != '\0' ||
	    strchr("smhd", end[0]) == NULL)
		return xstrdup(s);
	n *= end[0] == 's' ? 1 : end[0] == 'm' ? 60 : end[0] == 'h' ? 3600 : 86400;
	t = time(NULL) - (time_t)n;
	gmtime_r(&t, &tm);
	out = xmalloc(32);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return out;
}

/* What the decision was about: host, SNI, DNS name, or address:port. */
static const char *
audit_target(const json_t *r, char *buf, size_t len)
{
	const char *keys[] = { "host", "sni", "qname", "ip" };
	const char *v;

	for (size_t i = 0; i < 4; i++) {
		if ((v = json_string_value(json_object_get(r, keys[i]))) == NULL)
			continue;
		if (json_is_integer(json_object_get(r, "port")) && strcmp(keys[i], "qname") != 0)
			snprintf(buf, len, "%s:%lld", v,
			    (long long)json_integer_value(json_object_get(r, "port")));
		else
			snprintf(buf, len, "%s", v);
		return buf;
	}
	return "-";
}

static const struct cli_col audit_cols[] = { { "TIME", 24 }, { "SANDBOX", 20 },
    { "KIND", 4 }, { "TARGET", 32 }, { "DECISION", 8 }, { "REASON", 24 }, { "RULE", 0 },
    { NULL, 0 } };

static void
audit_row(const json_t *r)
{
	char t[6][64], target[300];
	const char *cells[] = {
		cli_field(r, "time", t[0], sizeof t[0]),
		cli_field(r, "sandbox", t[1], sizeof t[1]),
		cli_field(r, "kind", t[2], sizeof t[2]),
		audit_target(r, target, sizeof target),
		cli_field(r, "decision", t[3], sizeof t[3]),
		cli_field(r, "reason", t[4], sizeof t[4]),
		cli_field(r, "rule", t[5], sizeof t[5]),
	};

	cli_table_row(audit_cols, cells);
}

int
cmd_audit(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "sandbox", required_argument, NULL, 'b' },
		{ "decision", required_argument, NULL, 'd' },
		{ "kind", required_argument, NULL, 'k' },
		{ "since", required_argument, NULL, 's' },
		{ "until", required_argument, NULL, 'u' },
		{ "limit", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	char *q = xstrdup(""), *path, *cause = NULL, *t;
	long long limit;
	json_t *r;
	int ch, json_out = 0;

	optind = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b':
			cli_query_add(&q, "sandbox", optarg);
			break;
		case 'd':
			if (strcmp(optarg, "allow") != 0 && strcmp(optarg, "deny") != 0) {
				fprintf(stderr, "airlock audit: --decision must be allow or deny\n");
				goto usage;
			}
			cli_query_add(&q, "decision", optarg);
			break;
		case 'k':
			cli_query_add(&q, "kind", optarg);
			break;
		case 's':
		case 'u':
			t = audit_time_arg(optarg);
			cli_query_add(&q, ch == 's' ? "since" : "until", t);
			free(t);
			break;
		case 'n':
			if (cli_args_num(optarg, 1, 1000, &limit, "--limit", &cause) == -1) {
				fprintf(stderr, "airlock audit: %s\n", cause);
				free(cause);
				goto usage;
			}
			cli_query_add(&q, "limit", optarg);
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
	xasprintf(&path, "/v1/audit%s", q);
	free(q);
	r = cli_list(path, "records", json_out, audit_cols, audit_row);
	free(path);
	if (r == NULL)
		return CLI_EXIT_FAIL;
	if (json_is_true(json_object_get(r, "truncated")))
		fprintf(stderr, "airlock audit: the daemon stopped scanning early; narrow the "
		    "search with --since/--until\n");
	json_decref(r);
	return CLI_EXIT_OK;
usage:
	free(q);
	fprintf(stderr, "usage: airlock audit [--sandbox ID] [--decision allow|deny] "
	    "[--kind dns|tls|http|l4]\n       [--since T] [--until T] [--limit N] [--json]   "
	    "(T: RFC 3339 or an age: 30s, 15m, 2h, 7d)\n");
	return CLI_EXIT_USAGE;
}
