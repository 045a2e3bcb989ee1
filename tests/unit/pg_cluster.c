/* See pg_cluster.h. */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/util.h"
#include "pg_cluster.h"

#define PG_START_SECONDS	90	/* two shared cores under load: be patient */
#define PG_STOP_SECONDS		30

/* The newest /usr/lib/postgresql/N/bin (or $AIRLOCK_PG_BINDIR); 0 found, 1 not. */
static int
find_bindir(char *out, size_t len)
{
	const char *env = getenv("AIRLOCK_PG_BINDIR");
	glob_t g;
	size_t i;
	long best = -1;

	if (env != NULL && *env != '\0') {
		snprintf(out, len, "%s", env);
		return 0;
	}
	if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0)
		return 1;
	for (i = 0; i < g.gl_pathc; i++) {
		const char *v = g.gl_pathv[i] + strlen("/usr/lib/postgresql/");
		long n = strtol(v, NULL, 10);
		char init[512];

		snprintf(init, sizeof(init), "%.*s/initdb", (int)(strrchr(g.gl_pathv[i], '/') -
		    g.gl_pathv[i]), g.gl_pathv[i]);
		if (n > best && access(init, X_OK) == 0) {
			best = n;
			snprintf(out, len, "%.*s", (int)(strrchr(g.gl_pathv[i], '/') -
			    g.gl_pathv[i]), g.gl_pathv[i]);
		}
	}
	globfree(&g);
	return best == -1 ? 1 : 0;
}

/*
 * Fork and exec bindir/argv[0] with output appended to server.log, as the
 * unprivileged user. The child dies with us (PR_SET_PDEATHSIG, set after
 * the uid change, which would clear it) so a crashed test leaks no server.
 */
static pid_t
spawn(struct pg_cluster *pc, const char *const argv[], char **cause)
{
	char prog[512], log[128];
	pid_t pid, parent = getpid();
	int fd;

	snprintf(prog, sizeof(prog), "%s/%s", pc->bindir, argv[0]);
	snprintf(log, sizeof(log), "%s/server.log", pc->dir);
	if ((pid = fork()) == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid > 0)
		return pid;
	if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644)) != -1) {
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
	if (pc->drop && (setgroups(0, NULL) == -1 || setgid(pc->gid) == -1 ||
	    setuid(pc->uid) == -1)) {
		fprintf(stderr, "pg_cluster: drop privileges: %s\n", strerror(errno));
		_exit(127);
	}
	prctl(PR_SET_PDEATHSIG, SIGQUIT);
	if (getppid() != parent)
		_exit(127);
	execv(prog, (char *const *)argv);
	fprintf(stderr, "pg_cluster: exec %s: %s\n", prog, strerror(errno));
	_exit(127);
}

/* The last lines of server.log, for a cause. */
static void
log_tail(struct pg_cluster *pc, char **cause, const char *what)
{
	char path[128], *text = NULL;
	size_t len = 0;
	const char *tail;

	snprintf(path, sizeof(path), "%s/server.log", pc->dir);
	if (read_file(path, 1 << 20, &text, &len, NULL) == -1) {
		cause_set(cause, "%s (no server.log)", what);
		return;
	}
	tail = len > 1500 ? text + len - 1500 : text;
	cause_set(cause, "%s; server.log ends:\n%s", what, tail);
	free(text);
}

int
pg_cluster_run(struct pg_cluster *pc, char **cause)
{
	char data[128];
	const char *argv[] = { "postgres", "-D", data, "-k", pc->dir,
	    "-c", "listen_addresses=", "-c", "fsync=off", "-c", "full_page_writes=off",
	    "-c", "synchronous_commit=off", NULL };
	time_t deadline = time(NULL) + PG_START_SECONDS;
	int status;

	snprintf(data, sizeof(data), "%s/data", pc->dir);
	if ((pc->pid = spawn(pc, argv, cause)) == -1)
		return -1;
	while (PQping(pc->conninfo) != PQPING_OK) {
		if (waitpid(pc->pid, &status, WNOHANG) == pc->pid) {
			pc->pid = -1;
			log_tail(pc, cause, "postgres exited during startup");
			return -1;
		}
		if (time(NULL) > deadline) {
			pg_cluster_stop(pc);
			log_tail(pc, cause, "postgres not ready in time");
			return -1;
		}
		usleep(100 * 1000);
	}
	return 0;
}

int
pg_cluster_start(struct pg_cluster *pc, char **cause)
{
	char data[128];
	const char *argv[] = { "initdb", "-D", data, "-U", "airlock", "-A", "trust", "-E", "UTF8",
	    "--no-sync", NULL };
	struct passwd *pw;
	int status;
	pid_t pid;

	memset(pc, 0, sizeof(*pc));
	pc->pid = -1;
	if (find_bindir(pc->bindir, sizeof(pc->bindir)) == 1)
		return 1;
	snprintf(pc->dir, sizeof(pc->dir), "/tmp/airlock-pg-XXXXXX");
	if (mkdtemp(pc->dir) == NULL) {
		cause_set(cause, "mkdtemp: %s", strerror(errno));
		pc->dir[0] = '\0';
		return -1;
	}
	/* initdb and postgres refuse to run as root. */
	if (geteuid() == 0) {
		if ((pw = getpwnam("postgres")) == NULL && (pw = getpwnam("nobody")) == NULL) {
			cause_set(cause, "no postgres or nobody user to run the server as");
			return -1;
		}
		pc->drop = 1;
		pc->uid = pw->pw_uid;
		pc->gid = pw->pw_gid;
		if (chown(pc->dir, pc->uid, pc->gid) == -1) {
			cause_set(cause, "chown %s: %s", pc->dir, strerror(errno));
			return -1;
		}
	}
	xasprintf(&pc->url, "postgresql://airlock@/postgres?host=%s", pc->dir);
	xasprintf(&pc->conninfo, "host=%s user=airlock dbname=postgres", pc->dir);
	snprintf(data, sizeof(data), "%s/data", pc->dir);
	if ((pid = spawn(pc, argv, cause)) == -1)
		return -1;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		log_tail(pc, cause, "initdb failed");
		return -1;
	}
	return pg_cluster_run(pc, cause);
}

void
pg_cluster_stop(struct pg_cluster *pc)
{
	time_t deadline = time(NULL) + PG_STOP_SECONDS;
	int status;

	if (pc->pid <= 0)
		return;
	kill(pc->pid, SIGINT);		/* fast shutdown: disconnect clients, checkpoint */
	while (waitpid(pc->pid, &status, WNOHANG) == 0) {
		if (time(NULL) > deadline) {
			kill(pc->pid, SIGKILL);
			waitpid(pc->pid, &status, 0);
			break;
		}
		usleep(50 * 1000);
	}
	pc->pid = -1;
}

void
pg_cluster_destroy(struct pg_cluster *pc)
{
	pg_cluster_stop(pc);
	if (pc->dir[0] != '\0')
		remove_tree(pc->dir, NULL);
	free(pc->url);
	free(pc->conninfo);
	memset(pc, 0, sizeof(*pc));
	pc->pid = -1;
}
