/*
 * The cluster CA and role certificates (src/ca/cluster_ca.c) and the
 * `airlock cluster` commands over them: what the files hold (checked with
 * the openssl command, not our own reader), their modes, and every refusal
 * naming its cause: an existing CA without --force, an unknown role, a name
 * that would smuggle SAN entries, a validity beyond the CA's, the CA's own
 * directory as the output, a CA key that is not its certificate's.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ca/cluster_ca.h"
#include "cli/cli.h"
#include "common/subproc.h"
#include "common/util.h"
#include "t.h"

static char dir[] = "/tmp/airlock-cluster-ca-XXXXXX";

static int
sh(const char *fmt, ...)
{
	const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	char *cmd, *cause = NULL;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	xvasprintf(&cmd, fmt, ap);
	va_end(ap);
	argv[2] = cmd;
	rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, &cause);
	if (rc == -1) {
		fprintf(stderr, "%s: %s\n", cmd, cause);
		free(cause);
	}
	free(cmd);
	return rc;
}

static char *
path(const char *rel)
{
	char *p;

	xasprintf(&p, "%s/%s", dir, rel);
	return p;
}

static int
mode_of(const char *rel)
{
	char *p = path(rel);
	struct stat st;
	int m = stat(p, &st) == 0 ? (int)(st.st_mode & 0777) : -1;

	free(p);
	return m;
}

static void
test_ca_init(void)
{
	char *ca = path("ca"), *cause = NULL;
	struct cluster_cert_facts a, b;
	char *crt = path("ca/ca.crt");
	int64_t days;

	CHECK(cluster_ca_init(ca, 0, &cause) == 0);
	CHECK(mode_of("ca") == 0700 && mode_of("ca/ca.key") == 0600 && mode_of("ca/ca.crt") == 0644);
	CHECK(sh("cd %s/ca && openssl x509 -in ca.crt -noout -ext basicConstraints,keyUsage | "
	    "tr -d ' \\n' | grep -qx 'X509v3BasicConstraints:criticalCA:TRUE,pathlen:0"
	    "X509v3KeyUsage:criticalCertificateSign'", dir) == 0);
	CHECK(sh("cd %s/ca && openssl x509 -in ca.crt -noout -subject | "
	    "grep -q 'O = airlock, CN = airlock cluster CA 20'", dir) == 0);
	CHECK(sh("cd %s/ca && openssl pkey -in ca.key -noout -text | grep -q prime256v1 && "
	    "openssl verify -CAfile ca.crt ca.crt >/dev/null", dir) == 0);
	CHECK(cluster_cert_facts(crt, &a, &cause) == 0);
	days = (a.not_after_ms / 1000 - (int64_t)time(NULL)) / 86400;
	CHECK(days >= CLUSTER_CA_DAYS - 1 && days <= CLUSTER_CA_DAYS);

	/* Kept without --force, with the file named; replaced with it. */
	CHECK(cluster_ca_init(ca, 0, &cause) == -1);
	CHECK_CAUSE(cause, "ca/ca.crt exists");
	free(cause);
	cause = NULL;
	CHECK(cluster_cert_facts(crt, &b, &cause) == 0 && strcmp(a.sha256, b.sha256) == 0);
	CHECK(cluster_ca_init(ca, 1, &cause) == 0);
	CHECK(cluster_cert_facts(crt, &b, &cause) == 0 && strcmp(a.sha256, b.sha256) != 0);
	/* A key alone (a half-copied dir) also stops a new CA. */
	CHECK(sh("mkdir %s/half && cp %s/ca/ca.key %s/half/", dir, dir, dir) == 0);
	free(ca);
	ca = path("half");
	CHECK(cluster_ca_init(ca, 0, &cause) == -1);
	CHECK_CAUSE(cause, "half/ca.key exists");
	free(cause);
	free(ca);
	free(crt);
}

static void
test_cert_issue(void)
{
	static const char *const names[] = { "api.example", "10.0.0.5", "fd00::7", NULL };
	const struct cluster_cert_spec s = { .role = "api", .names = names, .days = 30 };
	char *ca = path("ca"), *out = path("roles/api"), *cause = NULL, *k1 = NULL, *k2 = NULL, *kp;
	size_t len;

	CHECK(cluster_cert_issue(ca, out, &s, &cause) == 0);
	CHECK(mode_of("roles/api") == 0700 && mode_of("roles/api/tls.key") == 0600);
	CHECK(sh("cd %s/roles/api && openssl verify -CAfile ../../ca/ca.crt tls.crt >/dev/null && "
	    "cmp -s ca.crt ../../ca/ca.crt && ! grep -q PRIVATE ca.crt", dir) == 0);
	CHECK(sh("cd %s/roles/api && openssl x509 -in tls.crt -noout -subject -ext "
	    "subjectAltName,extendedKeyUsage,basicConstraints | tr -d ' \\n' | grep -qx "
	    "'subject=O=airlock,CN=airlock-apiX509v3BasicConstraints:criticalCA:FALSE"
	    "X509v3ExtendedKeyUsage:TLSWebServerAuthentication,TLSWebClientAuthentication"
	    "X509v3SubjectAlternativeName:URI:airlock:role:api,DNS:api.example,"
	    "IPAddress:10.0.0.5,IPAddress:FD00:0:0:0:0:0:0:7'", dir) == 0);
	CHECK(sh("cd %s/roles/api && openssl x509 -in tls.crt -noout -checkend %d >/dev/null && "
	    "! openssl x509 -in tls.crt -noout -checkend %d >/dev/null", dir, 29 * 86400,
	    31 * 86400) == 0);
	/* Issuing again is a rotation: a new key. */
	kp = path("roles/api/tls.key");
	CHECK(read_file(kp, 4096, &k1, &len, NULL) == 0);
	CHECK(cluster_cert_issue(ca, out, &s, &cause) == 0);
	CHECK(read_file(kp, 4096, &k2, &len, NULL) == 0);
	CHECK(k1 != NULL && k2 != NULL && strcmp(k1, k2) != 0);
	free(k1);
	free(k2);
	free(kp);
	free(ca);
	free(out);
}

static void
test_cert_refusals(void)
{
	static const char *const smuggle[] = { "a.example,URI:airlock:role:worker", NULL };
	static const char *const dotted[] = { "..", NULL };
	struct cluster_cert_spec s = { .role = "admin", .days = 30 };
	char *ca = path("ca"), *out = path("roles/x"), *cause = NULL;

	CHECK(cluster_cert_issue(ca, out, &s, &cause) == -1);
	CHECK_CAUSE(cause, "role \"admin\"");
	free(cause);
	cause = NULL;
	s.role = "worker";
	s.names = smuggle;
	CHECK(cluster_cert_issue(ca, out, &s, &cause) == -1);
	CHECK_CAUSE(cause, "neither an IP address nor a DNS name");
	free(cause);
	cause = NULL;
	s.names = dotted;
	CHECK(cluster_cert_issue(ca, out, &s, &cause) == -1);
	free(cause);
	cause = NULL;
	s.names = NULL;
	s.days = CLUSTER_CA_DAYS + 1;
	CHECK(cluster_cert_issue(ca, out, &s, &cause) == -1);
	CHECK_CAUSE(cause, "expires before a certificate of");
	free(cause);
	cause = NULL;
	CHECK(access(out, F_OK) == -1);	/* nothing made for any of these */
	s.days = 30;
	CHECK(cluster_cert_issue(ca, ca, &s, &cause) == -1);
	CHECK_CAUSE(cause, "the CA's own directory");
	free(cause);
	cause = NULL;
	CHECK(mode_of("ca/tls.key") == -1);
	/* A CA dir whose key is another CA's. */
	CHECK(sh("mkdir %s/mixed && cp %s/ca/ca.crt %s/mixed/ && cd %s/mixed && "
	    "openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null", dir, dir,
	    dir, dir) == 0);
	free(ca);
	ca = path("mixed");
	CHECK(cluster_cert_issue(ca, out, &s, &cause) == -1);
	CHECK_CAUSE(cause, "mixed/ca.key is not the key of");
	free(cause);
	cause = NULL;
	free(ca);
	ca = path("missing");
	CHECK(cluster_cert_issue(ca, out, &s, &cause) == -1);
	CHECK_CAUSE(cause, "missing/ca.crt");
	free(cause);
	free(ca);
	free(out);
}

/* Run `airlock cluster ARGS...`; its stdout into *out (malloc'd). */
static int
cli(char **out, ...)
{
	char *argv[32], *file = path("stdout"), *o = NULL;
	const char *a;
	va_list ap;
	size_t len;
	int argc = 0, fd, saved, rc;

	argv[argc++] = "cluster";
	va_start(ap, out);
	while ((a = va_arg(ap, const char *)) != NULL && argc < 31)
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	dup2(fd, STDOUT_FILENO);
	close(fd);
	rc = cmd_cluster(argc, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	if (read_file(file, 1 << 20, &o, &len, NULL) == -1)
		o = xstrdup("");
	free(file);
	if (out != NULL)
		*out = o;
	else
		free(o);
	return rc;
}

static void
test_cli(void)
{
	char *ca = path("cli/ca"), *role = path("cli/worker"), *out = NULL;
	json_t *j;

	CHECK(cli(&out, "ca", "init", "--out", ca, "--json", NULL) == CLI_EXIT_OK);
	j = json_loads(out, 0, NULL);
	CHECK(j != NULL && strstr(json_string_value(json_object_get(j, "ca_key")), "cli/ca/ca.key"));
	CHECK(j != NULL && strncmp(json_string_value(json_object_get(j, "not_after")), "20", 2) == 0);
	CHECK(j != NULL && strlen(json_string_value(json_object_get(j, "sha256"))) == 95);
	json_decref(j);
	free(out);
	CHECK(cli(NULL, "ca", "init", "--out", ca, NULL) == CLI_EXIT_FAIL);
	CHECK(cli(NULL, "cert", "--ca", ca, "--role", "worker", "--out", role, "--name",
	    "node-1", "--name", "192.0.2.9", "--days", "30", "--json", NULL) == CLI_EXIT_OK);
	CHECK(cli(&out, "cert", "--ca", ca, "--role", "worker", "--out", role, "--name",
	    "node-1", "--json", NULL) == CLI_EXIT_OK);
	j = json_loads(out, 0, NULL);
	CHECK(j != NULL && strcmp(json_string_value(json_object_get(j, "role")), "worker") == 0);
	CHECK(j != NULL && json_array_size(json_object_get(j, "names")) == 1);
	CHECK(j != NULL && strstr(json_string_value(json_object_get(j, "key")), "cli/worker/tls.key"));
	CHECK(j != NULL && strcmp(json_string_value(json_object_get(j, "subject")),
	    "/O=airlock/CN=airlock-worker") == 0);
	json_decref(j);
	free(out);
	CHECK(sh("cd %s/cli/worker && openssl verify -CAfile ca.crt tls.crt >/dev/null && "
	    "openssl x509 -in tls.crt -noout -ext subjectAltName | grep -q "
	    "'URI:airlock:role:worker, DNS:node-1'", dir) == 0);
	CHECK(cli(&out, "cert", "--ca", ca, "--role", "api", "--out", role, NULL) == CLI_EXIT_OK);
	CHECK(strstr(out, "role api, valid until 20") != NULL);
	free(out);
	/* Usage errors. */
	CHECK(cli(NULL, "cert", "--ca", ca, "--out", role, NULL) == CLI_EXIT_USAGE);
	CHECK(cli(NULL, "cert", "--ca", ca, "--role", "admin", "--out", role, NULL) ==
	    CLI_EXIT_USAGE);
	CHECK(cli(NULL, "cert", "--ca", ca, "--role", "api", "--out", role, "--days", "0", NULL) ==
	    CLI_EXIT_USAGE);
	CHECK(cli(NULL, "cert", "--ca", ca, "--role", "api", "--out", role, "--bogus", NULL) ==
	    CLI_EXIT_USAGE);
	CHECK(cli(NULL, "ca", "init", NULL) == CLI_EXIT_USAGE);
	CHECK(cli(NULL, "ca", "init", "--out", ca, "extra", NULL) == CLI_EXIT_USAGE);
	/* An operation failure: a bad name, exit 1 with the cause. */
	CHECK(cli(NULL, "cert", "--ca", ca, "--role", "api", "--out", role, "--name", "a b",
	    NULL) == CLI_EXIT_FAIL);
	CHECK(cli(&out, "cert", "--help", NULL) == CLI_EXIT_OK);
	CHECK(strstr(out, "--role api|worker") != NULL);
	free(out);
	free(ca);
	free(role);
}

int
main(void)
{
	CHECK(mkdtemp(dir) != NULL);
	T_RUN(test_ca_init);
	T_RUN(test_cert_issue);
	T_RUN(test_cert_refusals);
	T_RUN(test_cli);
	remove_tree(dir, NULL);
	return t_done();
}
