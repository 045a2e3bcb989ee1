/* The gateway's intermediate issuer: minted from the root, reused while fresh, replaced when not ours. */
#include <sys/stat.h>

#include <stdlib.h>
#include <unistd.h>

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
	return t_done();
}
