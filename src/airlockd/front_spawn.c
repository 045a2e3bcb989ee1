/* Starting and supervising the API front (see front_spawn.h). */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>

#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "airlockd/api_tls.h"
#include "airlockd/front_spawn.h"
#include "common/log.h"
#include "common/util.h"
#include "config/config.h"
#include "front/front.h"
#include "http/http_server.h"

#define FRONT_BACKOFF_MAX_S	30
#define FRONT_STOP_WAIT_MS	2000
#define FRONT_READY_WAIT_MS	30000	/* a sanitizer build on a loaded host starts slowly */

struct front_spawn {
	struct event_base	*base;
	const struct config	*cfg;
	char			 exe[4096];
	char			**argv;		/* airlockd's, then --role api */
	char			*sock;		/* DATA/run/front.sock */
	char			*env_up, *env_uid, *env_tls;
	/*
	 * The front's environment, made before any fork: airlockd has a
	 * reader thread, so the child only dups, closes and execs.
	 */
	char			**envp, **envp_ready;
	int			 port;
	pid_t			 pid;		/* 0: not running */
	int			 pidfd;
	struct event		*ev_exit, *ev_restart;
	int			 stopping;
	int			 backoff_s;
	int64_t			 started_ms;
};

static int fs_start(struct front_spawn *fs, int wait, char **cause);

/* The worker's unix socket: root:front-gid 0660 in a 0755 dir; only the front's uid is served. */
static int
fs_socket(struct front_spawn *fs, struct http_server *worker, char **cause)
{
	struct sockaddr_un sun;
	char *dir;
	int fd;

	xasprintf(&dir, "%s/run", fs->cfg->data_dir);
	if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
		cause_set(cause, "mkdir %s: %s", dir, strerror(errno));
		free(dir);
		return -1;
	}
	free(dir);
	xasprintf(&fs->sock, "%s/run/front.sock", fs->cfg->data_dir);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(fs->sock) >= sizeof(sun.sun_path)) {
		cause_set(cause, "%s: path too long for a unix socket", fs->sock);
		return -1;
	}
	memcpy(sun.sun_path, fs->sock, strlen(fs->sock) + 1);
	(void)unlink(fs->sock);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    chown(fs->sock, 0, (gid_t)fs->cfg->api_uid) == -1 || chmod(fs->sock, 0660) == -1 ||
	    listen(fd, 1024) == -1) {
		cause_set(cause, "%s: %s", fs->sock, strerror(errno));
		if (fd != -1)
			close(fd);
		return -1;
	}
	http_server_set_peer_uid(worker, (uid_t)fs->cfg->api_uid);
	return http_server_listen_fd(worker, fd, cause);
}

static void
fs_restart_cb(evutil_socket_t fd, short what, void *arg)
{
	struct front_spawn *fs = arg;
	char *cause = NULL;

	if (fs->stopping || fs->pid != 0)
		return;
	if (fs_start(fs, 0, &cause) == -1) {
		struct timeval tv = { fs->backoff_s, 0 };
		log_warnx("front: %s; trying again in %d s", cause, fs->backoff_s);
		free(cause);
		fs->backoff_s = fs->backoff_s * 2 > FRONT_BACKOFF_MAX_S ? FRONT_BACKOFF_MAX_S :
		    fs->backoff_s * 2;
		evtimer_add(fs->ev_restart, &tv);
	}
}

/* Reap the front; start it again unless airlockd is stopping. */
static void
fs_reap(struct front_spawn *fs, int log_exit)
{
	int status = 0;

	if (fs->pid == 0)
		return;
	if (waitpid(fs->pid, &status, 0) == -1)
		log_warn("front: waitpid %d", (int)fs->pid);
	if (log_exit)
		log_warnx("front: pid %d %s %d", (int)fs->pid, WIFSIGNALED(status) ?
		    "killed by signal" : "exited", WIFSIGNALED(status) ? WTERMSIG(status) :
		    WEXITSTATUS(status));
	event_free(fs->ev_exit);
	fs->ev_exit = NULL;
	close(fs->pidfd);
	fs->pidfd = -1;
	fs->pid = 0;
}

static void
fs_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct front_spawn *fs = arg;
	struct timeval tv;

	fs_reap(fs, !fs->stopping);
	if (fs->stopping)
		return;
	/* A front that lived a minute was not failing: start it again at once-ish. */
	if (monotonic_ms() - (uint64_t)fs->started_ms > 60000)
		fs->backoff_s = 1;
	tv.tv_sec = fs->backoff_s;
	tv.tv_usec = 0;
	evtimer_add(fs->ev_restart, &tv);
}

/*
 * In the child: the listener on fd 3, the ready pipe (if any) on 4, nothing
 * else of ours, then the front.
 */
static void __attribute__((noreturn))
fs_child(struct front_spawn *fs, int lfd, int readyfd)
{
	/* Out of the way of 3 and 4 first, then dup2 (which clears close-on-exec). */
	if ((lfd = fcntl(lfd, F_DUPFD, 10)) == -1 ||
	    (readyfd != -1 && (readyfd = fcntl(readyfd, F_DUPFD, 10)) == -1) ||
	    dup2(lfd, 3) == -1 || (readyfd != -1 && dup2(readyfd, 4) == -1))
		_exit(126);
	if (syscall(SYS_close_range, readyfd != -1 ? 5U : 4U, ~0U, 0) == -1) {
		for (int fd = readyfd != -1 ? 5 : 4; fd < 65536; fd++)
			(void)close(fd);
	}
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1)
		_exit(126);
	execve(fs->exe, fs->argv, readyfd != -1 ? fs->envp_ready : fs->envp);
	dprintf(2, "airlockd: exec %s: %s\n", fs->exe, strerror(errno));
	_exit(127);
}

/*
 * The first start waits (before the event loop runs) until the front says
 * it serves, confined: "ready" is only printed then. A restart does not
 * wait; the listener queues connections meanwhile.
 */
static int
fs_wait_ready(int fd, char **cause)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char c;
	int n;

	do
		n = poll(&pfd, 1, FRONT_READY_WAIT_MS);
	while (n == -1 && errno == EINTR);
	if (n == 1 && read(fd, &c, 1) == 1)
		return 0;
	cause_set(cause, "the API front did not start within %d ms (its log says why)",
	    FRONT_READY_WAIT_MS);
	return -1;
}

static int
fs_start(struct front_spawn *fs, int wait, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	int lfd, rp[2] = { -1, -1 };
	pid_t pid;

	if ((lfd = http_listen_socket(fs->cfg->listen_host, fs->port, cause)) == -1)
		return -1;
	if (wait && pipe2(rp, O_CLOEXEC) == -1) {
		cause_set(cause, "pipe: %s", strerror(errno));
		close(lfd);
		return -1;
	}
	memset(&ss, 0, sizeof(ss));
	if (fs->port == 0 && getsockname(lfd, (struct sockaddr *)&ss, &sslen) == 0)
		fs->port = ntohs(ss.ss_family == AF_INET6 ?
		    ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
	if ((pid = fork()) == -1) {
		cause_set(cause, "fork: %s", strerror(errno));
		close(lfd);
		if (wait) {
			close(rp[0]);
			close(rp[1]);
		}
		return -1;
	}
	if (pid == 0)
		fs_child(fs, lfd, rp[1]);
	close(lfd);	/* the listener is the front's alone: no root process holds it */
	if (wait) {
		close(rp[1]);
		if (fs_wait_ready(rp[0], cause) == -1) {
			close(rp[0]);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return -1;
		}
		close(rp[0]);
	}
	fs->pid = pid;
	fs->started_ms = (int64_t)monotonic_ms();
	if ((fs->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) == -1) {
		cause_set(cause, "pidfd_open: %s", strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fs->pid = 0;
		return -1;
	}
	fs->ev_exit = event_new(fs->base, fs->pidfd, EV_READ, fs_exit_cb, fs);
	event_add(fs->ev_exit, NULL);
	log_info("front: started pid %d (uid %d) on %s:%d", (int)pid, fs->cfg->api_uid,
	    fs->cfg->listen_host, fs->port);
	return 0;
}

/* Our environment less the front's variables, then those (the ready fd if asked). */
static char **
fs_envp(const struct front_spawn *fs, int ready)
{
	extern char **environ;
	char **v;
	int n = 0, k = 0, i;

	while (environ[n] != NULL)
		n++;
	v = xcalloc((size_t)n + 6, sizeof(*v));
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "AIRLOCK_FRONT_", 14) != 0)
			v[k++] = xstrdup(environ[i]);
	xasprintf(&v[k++], "%s=3", FRONT_ENV_LISTEN_FD);
	if (ready)
		xasprintf(&v[k++], "%s=4", FRONT_ENV_READY_FD);
	xasprintf(&v[k++], "%s=%s", FRONT_ENV_UPSTREAM, fs->env_up);
	xasprintf(&v[k++], "%s=%s", FRONT_ENV_UID, fs->env_uid);
	if (fs->env_tls != NULL)
		xasprintf(&v[k++], "%s=%s", FRONT_ENV_TLS, fs->env_tls);
	return v;
}

static void
fs_strv_free(char **v)
{
	int i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

static char **
fs_argv(char *const argv[])
{
	char **v;
	int n = 0, i, k = 0;

	while (argv[n] != NULL)
		n++;
	v = xcalloc((size_t)n + 3, sizeof(*v));
	for (i = 0; i < n; i++)
		v[k++] = xstrdup(argv[i]);
	v[k++] = xstrdup("--role");
	v[k++] = xstrdup("api");
	return v;
}

struct front_spawn *
front_spawn_new(struct event_base *base, const struct config *cfg, struct http_server *worker,
    char *const argv[], char **cause)
{
	struct front_spawn *fs = xcalloc(1, sizeof(*fs));
	char *cert = NULL, *key = NULL;
	ssize_t n;

	fs->base = base;
	fs->cfg = cfg;
	fs->pidfd = -1;
	fs->backoff_s = 1;
	fs->port = cfg->listen_port;
	fs->ev_restart = evtimer_new(base, fs_restart_cb, fs);
	/* Resolved now: the exec happens after the front's environment is set. */
	if ((n = readlink("/proc/self/exe", fs->exe, sizeof(fs->exe) - 1)) == -1) {
		cause_set(cause, "readlink /proc/self/exe: %s", strerror(errno));
		goto fail;
	}
	fs->exe[n] = '\0';
	fs->argv = fs_argv(argv);
	if (fs_socket(fs, worker, cause) == -1 || api_tls_files(cfg, &cert, &key, cause) == -1)
		goto fail;
	xasprintf(&fs->env_up, "unix:%s", fs->sock);
	xasprintf(&fs->env_uid, "%d:%d", cfg->api_uid, cfg->api_uid);
	if (cert != NULL)
		xasprintf(&fs->env_tls, "%s:%s", cert, key);
	free(cert);
	free(key);
	fs->envp = fs_envp(fs, 0);
	fs->envp_ready = fs_envp(fs, 1);
	if (fs_start(fs, 1, cause) == -1)
		goto fail;
	return fs;
fail:
	front_spawn_free(fs);
	return NULL;
}

int
front_spawn_port(const struct front_spawn *fs)
{
	return fs->port;
}

void
front_spawn_stop(struct front_spawn *fs)
{
	fs->stopping = 1;
	evtimer_del(fs->ev_restart);
	if (fs->pid != 0)
		kill(fs->pid, SIGTERM);
}

void
front_spawn_free(struct front_spawn *fs)
{

	if (fs == NULL)
		return;
	front_spawn_stop(fs);
	if (fs->pid != 0) {
		/* It exits on SIGTERM at once; past the wait it is killed. */
		uint64_t t0 = monotonic_ms();
		pid_t r;
		while ((r = waitpid(fs->pid, NULL, WNOHANG)) == 0 &&
		    monotonic_ms() - t0 < FRONT_STOP_WAIT_MS)
			usleep(10000);
		if (r == 0) {
			kill(fs->pid, SIGKILL);
			waitpid(fs->pid, NULL, 0);
		}
	}
	if (fs->ev_exit != NULL)
		event_free(fs->ev_exit);
	if (fs->pidfd != -1)
		close(fs->pidfd);
	if (fs->ev_restart != NULL)
		event_free(fs->ev_restart);
	if (fs->sock != NULL)
		(void)unlink(fs->sock);
	fs_strv_free(fs->argv);
	fs_strv_free(fs->envp);
	fs_strv_free(fs->envp_ready);
	free(fs->sock);
	free(fs->env_up);
	free(fs->env_uid);
	free(fs->env_tls);
	free(fs);
}
