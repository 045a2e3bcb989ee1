/*
 * airlock cluster ca init|cert: the cluster CA and the role certificates
 * API replicas and workers authenticate each other with (src/ca/cluster_ca.h,
 * docs/operations.md "Cluster certificates"). Local files only: no daemon.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ca/cluster_ca.h"
#include "cli/cli.h"
#include "common/json_time.h"
#include "common/util.h"

static const char cluster_ca_usage[] =
    "usage: airlock cluster ca init --out DIR [--force] [--json]\n"
    "  writes DIR/ca.crt and DIR/ca.key (mode 0600): a new cluster CA, P-256, 10 years.\n"
    "  An existing CA there is kept unless --force.\n";

static const char cluster_cert_usage[] =
    "usage: airlock cluster cert --ca DIR --role api|worker --out DIR2 [--name NAME]...\n"
    "           [--days N] [--json]\n"
    "  writes DIR2/tls.crt, DIR2/tls.key (mode 0600) and DIR2/ca.crt (the CA certificate\n"
    "  only): a certificate of that role from the CA in DIR, valid N days (default 365),\n"
    "  naming NAME (a DNS name or an IP address) as well. Replaces what DIR2 held.\n";

/* The facts of crt merged into out (a JSON object); -1 after printing why. */
static int
cluster_facts_json(const char *crt, json_t *out)
{
	struct cluster_cert_facts f;
	char *cause = NULL;

	if (cluster_cert_facts(crt, &f, &cause) == -1) {
		cli_fail_cause(cause);
		return -1;
	}
	json_object_set_new(out, "subject", json_string(f.subject));
	json_object_set_new(out, "not_after", json_time_ms(f.not_after_ms));
	json_object_set_new(out, "sha256", json_string(f.sha256));
	return 0;
}

/* not_after as text. */
static const char *
cluster_until(const json_t *j)
{
	const char *s = json_string_value(json_object_get(j, "not_after"));

	return s != NULL ? s : "?";
}

static int
cluster_ca_init_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "force", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	const char *out = NULL;
	char *crt = NULL, *key = NULL, *cause = NULL;
	int ch, force = 0, json_out = 0, rv = CLI_EXIT_FAIL;
	json_t *j = NULL;

	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o': out = optarg; break;
		case 'f': force = 1; break;
		case 'j': json_out = 1; break;
		default: goto usage;
		}
	}
	if (out == NULL || optind != argc)
		goto usage;
	if (cluster_ca_init(out, force, &cause) == -1)
		return cli_fail_cause(cause);
	xasprintf(&crt, "%s/%s", out, CLUSTER_CA_CRT);
	xasprintf(&key, "%s/%s", out, CLUSTER_CA_KEY);
	j = json_pack("{s:s,s:s}", "ca_cert", crt, "ca_key", key);
	if (cluster_facts_json(crt, j) == -1)
		goto out;
	if (json_out)
		cli_print_json(j);
	else
		printf("wrote %s and %s (mode 0600): %s, valid until %s\n", crt, key,
		    json_string_value(json_object_get(j, "subject")), cluster_until(j));
	rv = CLI_EXIT_OK;
out:
	json_decref(j);
	free(crt);
	free(key);
	return rv;
usage:
	fputs(cluster_ca_usage, stderr);
	return CLI_EXIT_USAGE;
}

static const struct cli_cmd cluster_ca_cmds[] = {
	{ "init", "init --out DIR [--force] [--json]", "make a new cluster CA",
	  cluster_ca_init_cmd, cluster_ca_usage },
	{ NULL, NULL, NULL, NULL, NULL }
};

static int
cluster_ca(int argc, char **argv)
{
	return cli_dispatch("airlock cluster ca", cluster_ca_cmds, argc - 1, argv + 1);
}

/* cert's options; CLI_EXIT_OK, or CLI_EXIT_USAGE after printing why. */
struct cluster_cert_opts {
	const char			*ca;
	const char			*out;
	const char			**names;	/* NULL-terminated */
	size_t				 nnames;
	int				 json;
	struct cluster_cert_spec	 spec;
};

static int
cluster_cert_parse(int argc, char **argv, struct cluster_cert_opts *o)
{
	static const struct option longopts[] = {
		{ "ca", required_argument, NULL, 'c' },
		{ "role", required_argument, NULL, 'r' },
		{ "out", required_argument, NULL, 'o' },
		{ "name", required_argument, NULL, 'n' },
		{ "days", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	char *cause = NULL;
	long long days;
	int ch;

	o->spec.days = CLUSTER_CERT_DAYS;
	o->names = xcalloc((size_t)argc + 1, sizeof(*o->names));
	optind = 1;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o->ca = optarg; break;
		case 'r': o->spec.role = optarg; break;
		case 'o': o->out = optarg; break;
		case 'n': o->names[o->nnames++] = optarg; break;
		case 'j': o->json = 1; break;
		case 'd':
			if (cli_args_num(optarg, 1, CLUSTER_CA_DAYS, &days, "--days", &cause) == -1) {
				fprintf(stderr, "airlock: %s\n", cause);
				free(cause);
				return CLI_EXIT_USAGE;
			}
			o->spec.days = (int)days;
			break;
		default:
			fputs(cluster_cert_usage, stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (o->ca == NULL || o->out == NULL || o->spec.role == NULL || optind != argc) {
		fputs(cluster_cert_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	if (!cluster_role_known(o->spec.role)) {
		fprintf(stderr, "airlock: --role %s: want api or worker\n", o->spec.role);
		return CLI_EXIT_USAGE;
	}
	o->spec.names = o->names;
	return CLI_EXIT_OK;
}

static int
cluster_cert(int argc, char **argv)
{
	struct cluster_cert_opts o;
	char *crt = NULL, *key = NULL, *ca = NULL, *cause = NULL;
	json_t *j = NULL, *names;
	size_t i;
	int rv;

	memset(&o, 0, sizeof(o));
	if ((rv = cluster_cert_parse(argc, argv, &o)) != CLI_EXIT_OK)
		goto out;
	rv = CLI_EXIT_FAIL;
	if (cluster_cert_issue(o.ca, o.out, &o.spec, &cause) == -1) {
		cli_fail("cluster cert: %s", cause);
		free(cause);
		goto out;
	}
	xasprintf(&crt, "%s/%s", o.out, CLUSTER_TLS_CRT);
	xasprintf(&key, "%s/%s", o.out, CLUSTER_TLS_KEY);
	xasprintf(&ca, "%s/%s", o.out, CLUSTER_CA_CRT);
	names = json_array();
	for (i = 0; i < o.nnames; i++)
		json_array_append_new(names, json_string(o.names[i]));
	j = json_pack("{s:s,s:s,s:s,s:s,s:o}", "role", o.spec.role, "cert", crt, "key", key,
	    "ca", ca, "names", names);
	if (cluster_facts_json(crt, j) == -1)
		goto out;
	if (o.json)
		cli_print_json(j);
	else
		printf("wrote %s, %s (mode 0600) and %s: role %s, valid until %s\n", crt, key, ca,
		    o.spec.role, cluster_until(j));
	rv = CLI_EXIT_OK;
out:
	json_decref(j);
	free(o.names);
	free(crt);
	free(key);
	free(ca);
	return rv;
}

static const struct cli_cmd cluster_cmds[] = {
	{ "ca", "ca init --out DIR [--force] [--json]",
	  "make the cluster CA (its key stays with the operator)", cluster_ca, cluster_ca_usage },
	{ "cert", "cert --ca DIR --role api|worker --out DIR2 [--name N]... [--days N] [--json]",
	  "issue a role certificate for API replicas or workers", cluster_cert,
	  cluster_cert_usage },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_cluster(int argc, char **argv)
{
	return cli_dispatch("airlock cluster", cluster_cmds, argc - 1, argv + 1);
}
