/*
 * The template's start command and its ready check.
 *
 * A template may name a command to run at boot (a web server, the code
 * interpreter) and how to know it is up: a guest TCP port that accepts,
 * or a command that exits 0. The agent starts it once, right after boot,
 * as the template's user in its workdir, with the template's env (the
 * sandbox's own env comes later, with /init: the start command reads it
 * from /run/airlock/env.json, rewritten at every /init). Until the check
 * passes, POST /init is held; airlockd waits for that answer before a
 * create returns and before a pool takes its base snapshot, so every
 * sandbox, cold or pooled, comes with the service already answering. A
 * command that exits before it is ready, or is not ready within
 * timeout_s, fails every /init with the cause and the tail of its
 * output (and the create with it). It is not restarted when it exits
 * later: the sandbox is the user's from then on.
 *
 * Output (stdout and stderr) is drained always, so the service never
 * blocks on a full pipe; the last START_TAIL bytes are kept for errors
 * and GET /airlock/start, and copied to the console until ready.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_start.h"
#include "common/util.h"
#include "http/http_server.h"

#define START_ENV_FILE	"/run/airlock/env.json"

enum start_state { ST_NONE, ST_STARTING, ST_READY, ST_FAILED, ST_EXITED };
static const char *const st_names[] = { "none", "starting", "ready", "failed", "exited" };

static struct {
	struct start_cfg	 cfg;
	enum start_state	 state;
	pid_t			 pid;		/* the start command (a session leader) */
	pid_t			 check_pid;	/* a running ready.cmd */
	int			 status;	/* wait status once it exited */
	int			 fds[4];	/* stdout, stderr of the command, then of the check */
	struct event		*evs[4];
	struct event		*tick;		/* the next ready check */
	struct event		*deadline;
	char			 tail[START_TAIL];
	size_t			 tail_len;
	char			 cause[START_TAIL + 512];
	uint64_t		 t0_ns, ready_ns;
	struct http_req		*waiting[START_WAIT_MAX];
	int			 nwaiting;
} st = { .fds = { -1, -1, -1, -1 } };

/* --- config ------------------------------------------------------------ */

static int
sfail(char *err, size_t errlen, const char *what)
{
	snprintf(err, errlen, "%s", what);
	return -1;
}

static int
one_line(json_t *v, size_t max)
{
	const char *s = json_string_value(v);

	return s != NULL && *s != '\0' && strlen(s) == json_string_length(v) &&
	    strlen(s) <= max && strpbrk(s, "\n\r") == NULL;
}

int
start_parse(const char *text, size_t len, struct start_cfg *c, char *err, size_t errlen)
{
	json_t *root, *v, *ready;
	json_error_t jerr;
	int rc = -1;

	memset(c, 0, sizeof(*c));
	if ((root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		snprintf(err, errlen, "line %d: %s", jerr.line, jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		sfail(err, errlen, "must be an object");
		goto out;
	}
	if (json_integer_value(json_object_get(root, "format")) != 1) {
		sfail(err, errlen, "format: not 1 (a newer template builder?)");
		goto out;
	}
	if (!one_line(v = json_object_get(root, "cmd"), START_CMD_MAX)) {
		sfail(err, errlen, "cmd: must be a one-line command");
		goto out;
	}
	c->cmd = xstrdup(json_string_value(v));
	if (!one_line(v = json_object_get(root, "user"), 32)) {
		sfail(err, errlen, "user: must be a user name");
		goto out;
	}
	c->user = xstrdup(json_string_value(v));
	if ((v = json_object_get(root, "cwd")) != NULL) {
		if (!one_line(v, 4096) || json_string_value(v)[0] != '/') {
			sfail(err, errlen, "cwd: must be an absolute path");
			goto out;
		}
		c->cwd = xstrdup(json_string_value(v));
	}
	v = json_object_get(root, "timeout_s");
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > START_TIMEOUT_MAX) {
		sfail(err, errlen, "timeout_s: must be an integer in 1..3600");
		goto out;
	}
	c->timeout_s = (unsigned)json_integer_value(v);
	ready = json_object_get(root, "ready");
	if (ready != NULL && !json_is_null(ready)) {
		if (!json_is_object(ready)) {
			sfail(err, errlen, "ready: must be an object or null");
			goto out;
		}
		if ((v = json_object_get(ready, "port")) != NULL) {
			if (!json_is_integer(v) || json_integer_value(v) < 1 ||
			    json_integer_value(v) > 65535) {
				sfail(err, errlen, "ready.port: must be in 1..65535");
				goto out;
			}
			c->ready_port = (unsigned)json_integer_value(v);
		} else if (one_line(v = json_object_get(ready, "cmd"), START_CMD_MAX))
			c->ready_cmd = xstrdup(json_string_value(v));
		else {
			sfail(err, errlen, "ready: needs port or cmd");
			goto out;
		}
	}
	rc = 0;
out:
	json_decref(root);
	if (rc == -1)
		start_cfg_free(c);
	return rc;
}

void
start_cfg_free(struct start_cfg *c)
{
	free(c->cmd);
	free(c->user);
	free(c->cwd);
	free(c->ready_cmd);
	memset(c, 0, sizeof(*c));
}

/* --- output ------------------------------------------------------------ */

/* Printable ASCII and newlines only: the tail ends up in JSON and logs. */
static void
tail_add(const char *buf, size_t n)
{
	size_t i, keep;

	if (n >= START_TAIL) {
		buf += n - START_TAIL;
		n = START_TAIL;
	}
	if (st.tail_len + n > START_TAIL) {
		keep = START_TAIL - n;
		memmove(st.tail, st.tail + st.tail_len - keep, keep);
		st.tail_len = keep;
	}
	for (i = 0; i < n; i++) {
		char ch = buf[i];
		st.tail[st.tail_len++] = (ch == '\n' || (ch >= 0x20 && ch < 0x7f)) ? ch : '?';
	}
}

static void
start_output(evutil_socket_t fd, short what, void *arg)
{
	int i = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0) {
		tail_add(buf, (size_t)n);
		/* The console shows a boot that does not get ready; afterwards it stays quiet. */
		if (st.state == ST_STARTING && write(STDERR_FILENO, buf, (size_t)n) < 0)
			return;
		return;
	}
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	event_free(st.evs[i]);
	st.evs[i] = NULL;
	close(st.fds[i]);
	st.fds[i] = -1;
}

static void
watch_fds(int first, int out, int err)
{
	int i, fds[2] = { out, err };

	for (i = 0; i < 2; i++) {
		if (st.evs[first + i] != NULL) {
			event_free(st.evs[first + i]);
			close(st.fds[first + i]);
		}
		st.fds[first + i] = fds[i];
		st.evs[first + i] = event_new(ag.ag_base, fds[i], EV_READ | EV_PERSIST,
		    start_output, (void *)(intptr_t)(first + i));
		event_add(st.evs[first + i], NULL);
	}
}

/* --- state --------------------------------------------------------------- */

static void
answer(struct http_req *req)
{
	json_t *j;

	if (st.state != ST_FAILED) {
		http_reply(req, 204, NULL, NULL, 0);
		return;
	}
	j = json_pack("{s:i,s:s}", "code", 500, "message", st.cause);
	http_reply_json(req, 500, j);
}

static void
set_state(enum start_state s)
{
	int i;

	st.state = s;
	if (s == ST_STARTING)
		return;
	if (st.tick != NULL)
		evtimer_del(st.tick);
	if (st.deadline != NULL)
		evtimer_del(st.deadline);
	if (s == ST_READY) {
		st.ready_ns = monotonic_ns();
		alog("start: ready after %.1f s", (double)(st.ready_ns - st.t0_ns) / 1e9);
	} else if (s == ST_FAILED)
		alog("%s", st.cause);
	/* The parked /init requests (a closed one is only dropped). */
	for (i = 0; i < st.nwaiting; i++) {
		if (!http_req_closed(st.waiting[i]) && !http_req_replied(st.waiting[i]))
			answer(st.waiting[i]);
		http_req_unref(st.waiting[i]);
	}
	st.nwaiting = 0;
}

static void
fail(const char *why)
{
	size_t n = st.tail_len;

	snprintf(st.cause, sizeof(st.cause), "start command: %s%s%.*s", why,
	    n > 0 ? "; its output ends:\n" : " (it wrote nothing)", (int)n, st.tail);
	if (st.pid > 0)
		kill(-st.pid, SIGKILL);
	if (st.check_pid > 0)
		kill(-st.check_pid, SIGKILL);
	set_state(ST_FAILED);
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	char why[256];

	if (st.cfg.ready_port != 0)
		snprintf(why, sizeof(why), "not ready within %u s (nothing accepted on guest "
		    "port %u)", st.cfg.timeout_s, st.cfg.ready_port);
	else
		snprintf(why, sizeof(why), "not ready within %u s (the ready command never "
		    "exited 0)", st.cfg.timeout_s);
	fail(why);
}

static void
arm(int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(st.tick, &tv);
}

/* PATH HOME USER LOGNAME, then the agent's env (/etc/airlock/env and /init), as process.Start. */
static char **
start_env(const struct agent_user *u)
{
	char **envp = NULL, k[256], *eq;
	size_t n = 0, i;

	env_set(&envp, &n, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	env_set(&envp, &n, "HOME", u->home);
	env_set(&envp, &n, "USER", u->name);
	env_set(&envp, &n, "LOGNAME", u->name);
	for (i = 0; i < ag.ag_nenv; i++) {
		if ((eq = strchr(ag.ag_env[i], '=')) == NULL ||
		    (size_t)(eq - ag.ag_env[i]) >= sizeof(k))
			continue;
		snprintf(k, sizeof(k), "%.*s", (int)(eq - ag.ag_env[i]), ag.ag_env[i]);
		env_set(&envp, &n, k, eq + 1);
	}
	return envp;
}

static void
free_env(char **envp)
{
	size_t i;

	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		free(envp[i]);
	free(envp);
}

/* Run cmd as the configured user: its pid, its output watched at slot first. */
static pid_t
spawn(const char *cmd, int first, char *why, size_t whylen)
{
	struct agent_user u;
	char **envp;
	int out, err;
	pid_t pid;

	if (user_lookup(st.cfg.user, &u) == -1) {
		snprintf(why, whylen, "user \"%s\" does not exist", st.cfg.user);
		return -1;
	}
	envp = start_env(&u);
	pid = proc_spawn_shell(cmd, &u, st.cfg.cwd != NULL ? st.cfg.cwd : u.home, envp, &out,
	    &err, why, whylen);
	free_env(envp);
	if (pid > 0)
		watch_fds(first, out, err);
	return pid;
}

static void
check(evutil_socket_t fd, short what, void *arg)
{
	struct sockaddr_in sin;
	char why[256];
	int s, ok;

	if (st.state != ST_STARTING)
		return;
	if (st.cfg.ready_port != 0) {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons((uint16_t)st.cfg.ready_port);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		/* Loopback: a connect is answered at once, accepted or refused. */
		if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
			arm(START_PORT_MS);
			return;
		}
		ok = connect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0;
		/*
		 * A port in the ephemeral range (49999 is) connects to itself
		 * once the kernel picks it as the probe's own source port (TCP
		 * simultaneous open): after thousands of probes it does, and
		 * that is no listener. Seen: "ready" with nothing on 49999.
		 */
		if (ok) {
			struct sockaddr_in me;
			socklen_t len = sizeof(me);

			if (getsockname(s, (struct sockaddr *)&me, &len) == 0 &&
			    me.sin_port == sin.sin_port)
				ok = 0;
		}
		close(s);
		if (ok)
			set_state(ST_READY);
		else
			arm(START_PORT_MS);
		return;
	}
	if ((st.check_pid = spawn(st.cfg.ready_cmd, 2, why, sizeof(why))) == -1) {
		char msg[320];
		snprintf(msg, sizeof(msg), "ready command: %s", why);
		fail(msg);
	}
}

int
start_reaped(pid_t pid, int status)
{
	char why[128];

	if (pid <= 0)
		return 0;
	if (pid == st.check_pid) {
		st.check_pid = 0;
		if (st.state != ST_STARTING)
			return 1;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			set_state(ST_READY);
		else
			arm(START_CMD_MS);
		return 1;
	}
	if (pid != st.pid)
		return 0;
	st.pid = 0;
	st.status = status;
	if (WIFEXITED(status))
		snprintf(why, sizeof(why), "exited with status %d", WEXITSTATUS(status));
	else
		snprintf(why, sizeof(why), "killed by signal %d", WTERMSIG(status));
	if (st.state == ST_STARTING) {
		char msg[192];
		snprintf(msg, sizeof(msg), "%s before it was ready", why);
		fail(msg);
	} else if (st.state == ST_READY) {
		alog("start: the command %s (it is not restarted)", why);
		st.state = ST_EXITED;
	}
	return 1;
}

void
start_boot(const char *file)
{
	struct timeval tv;
	char *text = NULL, err[256], why[600];
	size_t len;

	st.t0_ns = monotonic_ns();
	if (read_file(file, 64 * 1024, &text, &len, NULL) == -1)
		return;		/* no start command */
	st.tick = evtimer_new(ag.ag_base, check, NULL);
	st.deadline = evtimer_new(ag.ag_base, on_deadline, NULL);
	st.state = ST_STARTING;
	if (start_parse(text, len, &st.cfg, err, sizeof(err)) == -1) {
		snprintf(why, sizeof(why), "%s: %s", file, err);
		free(text);
		fail(why);
		return;
	}
	free(text);
	if ((st.pid = spawn(st.cfg.cmd, 0, err, sizeof(err))) == -1) {
		st.pid = 0;
		snprintf(why, sizeof(why), "cannot start: %s", err);
		fail(why);
		return;
	}
	alog("start: pid %d: %s", (int)st.pid, st.cfg.cmd);
	if (st.cfg.ready_port == 0 && st.cfg.ready_cmd == NULL) {
		set_state(ST_READY);
		return;
	}
	tv.tv_sec = st.cfg.timeout_s;
	tv.tv_usec = 0;
	evtimer_add(st.deadline, &tv);
	arm(0);
}

void
start_init_reply(struct http_req *req)
{
	if (st.state != ST_STARTING) {
		answer(req);
		return;
	}
	if (st.nwaiting == START_WAIT_MAX) {
		http_reply_json(req, 503, json_pack("{s:i,s:s}", "code", 503, "message",
		    "start command not ready yet and too many /init requests waiting"));
		return;
	}
	http_req_ref(req);
	st.waiting[st.nwaiting++] = req;
}

void
start_write_env(void)
{
	struct agent_user u;
	json_t *j;
	char *text, *eq;
	size_t i;
	int fd;

	if (st.state == ST_NONE || !ag.ag_pid1 || user_lookup(st.cfg.user, &u) == -1)
		return;
	j = json_object();
	for (i = 0; i < ag.ag_nenv; i++) {
		if ((eq = strchr(ag.ag_env[i], '=')) == NULL)
			continue;
		*eq = '\0';
		json_object_set_new(j, ag.ag_env[i], json_string(eq + 1));
		*eq = '=';
	}
	text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (text == NULL)
		return;
	/* The values may be secrets: only the start command's user reads them. */
	(void)mkdir("/run/airlock", 0755);
	if ((fd = open(START_ENV_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600))
	    == -1 || fchown(fd, u.uid, u.gid) == -1 ||
	    write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
	    rename(START_ENV_FILE ".tmp", START_ENV_FILE) == -1)
		alog("%s: %s", START_ENV_FILE, strerror(errno));
	if (fd != -1)
		close(fd);
	free(text);
}

json_t *
start_status(void)
{
	json_t *j = json_pack("{s:s}", "state", st_names[st.state]);

	if (st.state == ST_NONE)
		return j;
	json_object_set_new(j, "cmd", json_string(st.cfg.cmd ? st.cfg.cmd : ""));
	json_object_set_new(j, "pid", json_integer(st.pid));
	if (st.ready_ns != 0)
		json_object_set_new(j, "ready_after_ms",
		    json_integer((json_int_t)((st.ready_ns - st.t0_ns) / 1000000)));
	if (st.state == ST_FAILED)
		json_object_set_new(j, "cause", json_string(st.cause));
	json_object_set_new(j, "output_tail", json_stringn(st.tail, st.tail_len));
	return j;
}
