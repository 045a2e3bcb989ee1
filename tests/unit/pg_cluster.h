/*
 * A private, throwaway PostgreSQL for tests: initdb in a temp dir, the
 * server on a unix socket there (no TCP), as an unprivileged user when run
 * as root. Nothing outside the temp dir is touched.
 */
#ifndef AIRLOCK_PG_CLUSTER_H
#define AIRLOCK_PG_CLUSTER_H

#include <sys/types.h>

struct pg_cluster {
	char	 dir[64];	/* data/, the socket, server.log */
	char	 bindir[256];	/* /usr/lib/postgresql/N/bin */
	pid_t	 pid;		/* the postmaster, -1 when stopped */
	int	 drop;		/* run the server as uid/gid (we are root) */
	uid_t	 uid;
	gid_t	 gid;
	char	*url;		/* postgresql://airlock@/postgres?host=DIR */
	char	*conninfo;	/* the same as keyword=value pairs */
};

/* 0 running, 1 PostgreSQL is not installed, -1 error (*cause). */
int pg_cluster_start(struct pg_cluster *pc, char **cause);
/* Stop the server, keeping the data (for restart tests). */
void pg_cluster_stop(struct pg_cluster *pc);
/* Start the stopped server again. */
int pg_cluster_run(struct pg_cluster *pc, char **cause);
/* Stop and remove everything. */
void pg_cluster_destroy(struct pg_cluster *pc);

#endif
