/* The gateway's intermediate issuer: minted from the root, reused while fresh, replaced when not ours. */
#include <sys/stat.h>

#include <stdlib.h>
#include <unistd.h>

#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "common/subproc.h"
#include "common/util.h"
#include "egress/egress_ca.h"
#include "t.h"

static int
sh(const char *cmd)
{
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	char *cause = NULL;
	int rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, &cause);

	if (rc == -1) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
	}
	return rc;
}

static void
make_root(const char *dir, const char *name)
{
	char *cmd;

	xasprintf(&cmd, "cd %s && openssl req -x509 -new -nodes -newkey ec "
	    "-pkeyopt ec_paramgen_curve:prime256v1 -keyout %s.key -out %s.crt -days 30 "
	    "-subj '/CN=%s' -addext 'basicConstraints=critical,CA:TRUE,pathlen:1' "
	    "-addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null", dir, name, name, name);
	CHECK(sh(cmd) == 0);
	free(cmd);
}

static int still_good_calls, still_good_answer;

static int
still_good(const char *crt, const void *arg)
{
	still_good_calls++;
	return still_good_answer;
}

/*
 * ca_mint itself, the sequence both the gateway issuer and the API's server
 * certificate use: the caller's extensions end up in the certificate, the
 * caller's still_good can force a new one, and a refused extension is a
 * cause naming it with nothing written.
 */
static void
test_ca_mint(void)
{
	char dir[] = "/tmp/airlock-ca-mint-XXXXXX", *crt, *key, *cmd, *cause = NULL;
	static const struct ca_ext leaf[] = {
		{ NID_basic_constraints, "critical,CA:FALSE" },
		{ NID_subject_alt_name, "DNS:mint.test,IP:192.0.2.7" },
		{ 0, NULL },
	};
	static const struct ca_ext broken[] = {
		{ NID_subject_alt_name, "NOTAKIND:x" },
		{ 0, NULL },
	};
	struct ca_mint m = { .cn = "mint test", .days = 10, .renew_days = 2, .exts = leaf,
	    .still_good = still_good };
	int renewed = -1;

	CHECK(mkdtemp(dir) != NULL);
	make_root(dir, "ca");
	xasprintf(&crt, "%s/leaf.crt", dir);
	xasprintf(&key, "%s/leaf.key", dir);
	CHECK(ca_mint(dir, crt, key, &m, &renewed, &cause) == 0 && renewed == 1);
	CHECK(still_good_calls == 0);	/* nothing there to keep */
	xasprintf(&cmd, "cd %s && openssl verify -CAfile ca.crt leaf.crt >/dev/null && "
	    "openssl x509 -in leaf.crt -noout -subject -ext subjectAltName | "
	    "tr -d ' ' | grep -c 'CN=minttest\\|DNS:mint.test,IPAddress:192.0.2.7' | grep -qx 2",
	    dir);
	CHECK(sh(cmd) == 0);
	free(cmd);
	still_good_answer = 1;
	CHECK(ca_mint(dir, crt, key, &m, &renewed, &cause) == 0 && renewed == 0);
	CHECK(still_good_calls == 1);
	still_good_answer = 0;
	CHECK(ca_mint(dir, crt, key, &m, &renewed, &cause) == 0 && renewed == 1);
	CHECK(still_good_calls == 2);
	/* Fewer than renew_days left: minted anew without asking still_good. */
	m.renew_days = 11;
	CHECK(ca_mint(dir, crt, key, &m, &renewed, &cause) == 0 && renewed == 1);
	CHECK(still_good_calls == 2);
	unlink(crt);
	unlink(key);
	m.exts = broken;
	CHECK(ca_mint(dir, crt, key, &m, &renewed, &cause) == -1 && renewed == 0);
	CHECK_CAUSE(cause, "subjectAltName = NOTAKIND:x");
	free(cause);
	CHECK(access(crt, F_OK) == -1 && access(key, F_OK) == -1);
	free(crt);
	free(key);
	remove_tree(dir, NULL);
}

int
main(void)
{
	char dir[] = "/tmp/airlock-egress-ca-XXXXXX", *cmd, *key, *cause = NULL;
	struct stat st;
	int renewed = -1;

	CHECK(mkdtemp(dir) != NULL);
	make_root(dir, "ca");
	CHECK(egress_ca_ensure(dir, &renewed, &cause) == 0 && renewed == 1);
	xasprintf(&key, "%s/gateway.key", dir);
	CHECK(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600);
	free(key);
	/* The chain verifies, and the intermediate may sign leaves but no further CAs. */
	xasprintf(&cmd, "cd %s && openssl verify -CAfile ca.crt gateway.crt >/dev/null && "
	    "openssl x509 -in gateway.crt -noout -ext basicConstraints | grep -q 'CA:TRUE, pathlen:0'",
	    dir);
	CHECK(sh(cmd) == 0);
	free(cmd);

	/* Fresh and ours: kept. */
	CHECK(egress_ca_ensure(dir, &renewed, &cause) == 0 && renewed == 0);

	/* Signed by another root (the root was replaced): minted again. */
	make_root(dir, "other");
	xasprintf(&cmd, "cd %s && mv ca.crt keep.crt && mv ca.key keep.key && "
	    "mv other.crt ca.crt && mv other.key ca.key", dir);
	CHECK(sh(cmd) == 0);
	free(cmd);
	CHECK(egress_ca_ensure(dir, &renewed, &cause) == 0 && renewed == 1);
	xasprintf(&cmd, "cd %s && openssl verify -CAfile ca.crt gateway.crt >/dev/null", dir);
	CHECK(sh(cmd) == 0);
	free(cmd);

	/* No root key: a clear error, nothing half-written. */
	xasprintf(&cmd, "cd %s && rm -f ca.key gateway.crt gateway.key", dir);
	CHECK(sh(cmd) == 0);
	free(cmd);
	CHECK(egress_ca_ensure(dir, &renewed, &cause) == -1);
	CHECK_CAUSE(cause, "ca.key");
	free(cause);
	remove_tree(dir, NULL);
	T_RUN(test_ca_mint);
	return t_done();
}
