/*
 * The cluster CA and the role certificates API replicas and workers
 * present to each other over mTLS (http/http_tls.h, docs/operations.md
 * "Cluster certificates"). Made by the operator with `airlock cluster ca
 * init` and `airlock cluster cert`, never by airlockd: its key belongs on
 * the operator's machine or in a Secret no pod mounts, not on a worker.
 *
 * A role certificate says what its holder is in one SAN URI,
 * CLUSTER_ROLE_URI<role> ("airlock:role:api"); the peers check that, the
 * chain to the CA file and the validity, and nothing else: one
 * certificate per role is shared by all its replicas, so its host names
 * (optional) identify no one.
 */
#ifndef AIRLOCK_CLUSTER_CA_H
#define AIRLOCK_CLUSTER_CA_H

#include <stddef.h>
#include <stdint.h>

#define CLUSTER_ROLE_URI	"airlock:role:"
#define CLUSTER_ROLE_MAX	32		/* a role name's bytes, NUL included */
#define CLUSTER_CA_DAYS		3650
#define CLUSTER_CERT_DAYS	365

/* The files of a CA dir (ca init) and of a role dir (cert: what a Secret carries). */
#define CLUSTER_CA_CRT		"ca.crt"
#define CLUSTER_CA_KEY		"ca.key"
#define CLUSTER_TLS_CRT		"tls.crt"
#define CLUSTER_TLS_KEY		"tls.key"

/* Is role one a certificate may name ("api", "worker")? */
int cluster_role_known(const char *role);

/*
 * A new cluster CA in dir (made 0700 if missing): ca.key (P-256, 0600) and
 * ca.crt (self-signed, CLUSTER_CA_DAYS, CA:TRUE pathlen:0, keyCertSign).
 * Refused when either file exists unless force.
 */
int cluster_ca_init(const char *dir, int force, char **cause);

struct cluster_cert_spec {
	const char		*role;		/* cluster_role_known */
	const char *const	*names;		/* DNS names or IP addresses, NULL-terminated; may be NULL */
	int			 days;		/* < 0 makes an expired one (tests) */
};

/*
 * A role certificate from the CA in ca_dir, written to out_dir (made 0700
 * if missing; never the CA dir itself): tls.key (a fresh P-256 key, 0600),
 * tls.crt (O=airlock, CN=airlock-<role>, SAN URI airlock:role:<role> and
 * the names, EKU serverAuth + clientAuth) and ca.crt (the CA certificate
 * alone). Existing files there are replaced: issuing again is how role
 * certificates rotate. Refused: an unknown role, a name that is neither an
 * address nor a DNS name, a CA whose key is not its certificate's, or a
 * validity beyond the CA's.
 */
int cluster_cert_issue(const char *ca_dir, const char *out_dir,
    const struct cluster_cert_spec *spec, char **cause);

/* What the CLI prints about a certificate it wrote. */
struct cluster_cert_facts {
	char		subject[256];
	int64_t		not_after_ms;	/* unix milliseconds */
	char		sha256[96];	/* "AB:CD:..." */
};
int cluster_cert_facts(const char *crt, struct cluster_cert_facts *f, char **cause);

#endif
