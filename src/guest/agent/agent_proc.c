/*
 * process.Process: start commands (pipes or a PTY), stream their output as
 * Connect server streams, and keep them running when the client goes away.
 *
 * A process is finished only when both its pid was reaped and its output
 * fds hit EOF (the tmux job pattern); then every attached stream gets the
 * end event and the end-stream envelope, and the record goes.
 * Output is also kept in a ring of PROC_RING_MAX bytes per process (oldest
 * records dropped first) so Connect can replay it after a reattach.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/close_range.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_start.h"
#include "common/base64.h"
#include "common/util.h"
#include "http/http_server.h"

#ifndef TAILQ_FOREACH_SAFE	/* glibc's sys/queue.h lacks it */
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)			\
	for ((var) = TAILQ_FIRST(head);					\
	    (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);	\
	    (var) = (tvar))
#endif

#define PROC_RING_MAX		(1024 * 1024)	/* output kept per process for Connect */
#define PROC_RING_MIN		(64 * 1024)	/* ... however many processes share the budget */
#define PROC_OUT_MIN		(64 * 1024)	/* a subscriber's queue before its process pauses */
#define PROC_READ_CHUNK		(32 * 1024)	/* as envd: 32 KiB pipes, 16 KiB PTY */
#define PROC_PTY_CHUNK		(16 * 1024)
/*
 * The agent's own admission (the host refuses first, at
 * max_execs_per_sandbox; these hold against a host that does not, and
 * count background processes the host no longer sees).
 */
#define PROC_MAX		256		/* processes tracked at once */
#define PROC_SUBS_MAX		256		/* output streams (Start + Connect) at once */
#define PROC_STDIN_MAX		(4 * 1024 * 1024)	/* queued, unwritten stdin */
#define PROC_MAX_ARGS		4096
#define PROC_KEEPALIVE_DEFAULT	90		/* s, without Keepalive-Ping-Interval */
#define PROC_MAX_GROUPS		64

enum { OUT_STDOUT = 1, OUT_STDERR, OUT_PTY };

struct proc;

struct proc_sub {
	TAILQ_ENTRY(proc_sub)	 sb_entry;
	struct proc		*sb_proc;
	struct http_req	*sb_req;
	struct event		*sb_keepalive;
	struct timeval		 sb_interval;
};
TAILQ_HEAD(sub_list, proc_sub);

struct proc {
	TAILQ_ENTRY(proc)	 pr_entry;
	pid_t			 pr_pid;
	char			*pr_tag;
	json_t			*pr_config;
	int			 pr_pty;	/* master fd is pr_out */
	int			 pr_in;		/* -1: no stdin */
	int			 pr_out, pr_err;
	struct event		*pr_ev_in, *pr_ev_out, *pr_ev_err;
	struct evbuffer		*pr_inbuf;
	int			 pr_close_in;	/* close stdin once inbuf drains */
	struct evbuffer		*pr_ring;
	int			 pr_reaped;
	int			 pr_status;
	int			 pr_paused;
	struct event		*pr_timeout;
	struct sub_list		 pr_subs;
};
TAILQ_HEAD(proc_list, proc);

static struct proc_list procs = TAILQ_HEAD_INITIALIZER(procs);
static unsigned nprocs, nsubs;
/*
 * Output memory is budgeted for the whole agent, not per process: 200
 * processes writing `yes` with a 1 MiB ring and a 1 MiB client queue each
 * ran a 256 MiB guest out of memory; the OOM killer spares the agent
 * (oom_score_adj -1000), so it starved instead and stopped answering
 * every stream and the health ping. budget = RAM/16 (4..128 MiB), shared
 * by the rings; the client queues get the same again.
 */
static size_t out_budget = 16 * 1024 * 1024;
static size_t ring_total;

static void proc_check_done(struct proc *);

void
proc_init(void)
{
	struct sysinfo si;
	unsigned long long ram;

	if (sysinfo(&si) == 0) {
		ram = (unsigned long long)si.totalram * si.mem_unit;
		out_budget = (size_t)(ram / 16);
		if (out_budget < 4 * 1024 * 1024)
			out_budget = 4 * 1024 * 1024;
		if (out_budget > 128 * 1024 * 1024)
			out_budget = 128 * 1024 * 1024;
	}
}

/* Each process's share of a budget: between min and max, smaller as more share it. */
static size_t
proc_share(size_t budget, unsigned n, size_t min, size_t max)
{
	size_t s = budget / (n > 0 ? n : 1);

	return s < min ? min : s > max ? max : s;
}

static struct proc *
proc_find(pid_t pid)
{
	struct proc *p;

	TAILQ_FOREACH(p, &procs, pr_entry) {
		if (p->pr_pid == pid)
			return p;
	}
	return NULL;
}

/* ProcessSelector {pid | tag}. */
static struct proc *
proc_select(json_t *sel)
{
	json_t *pid = jget(sel, "pid", NULL), *tag = jget(sel, "tag", NULL);
	struct proc *p;

	if (pid != NULL)
		return proc_find((pid_t)jint(pid, -1));
	if (json_is_string(tag)) {
		TAILQ_FOREACH(p, &procs, pr_entry) {
			if (p->pr_tag != NULL && strcmp(p->pr_tag, json_string_value(tag)) == 0)
				return p;
		}
	}
	return NULL;
}

static void
sub_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct proc_sub *sb = arg;

	connect_stream_msg(sb->sb_req, json_pack("{s:{s:{}}}", "event", "keepalive"));
	evtimer_add(sb->sb_keepalive, &sb->sb_interval);
}

static void
sub_free(struct proc_sub *sb)
{
	TAILQ_REMOVE(&sb->sb_proc->pr_subs, sb, sb_entry);
	nsubs--;
	event_free(sb->sb_keepalive);
	free(sb);
}

static void proc_resume(struct proc *);

/* The client of a stream went away. */
static void
sub_abort(struct http_req *req, void *arg)
{
	struct proc_sub *sb = arg;
	struct proc *p;

	p = sb->sb_proc;
	sub_free(sb);
	/* The client went away; the process keeps running (background use). */
	proc_resume(p);
}

static void
sub_drain(struct http_req *req, void *arg)
{
	struct proc_sub *sb = arg;

	proc_resume(sb->sb_proc);
}

/* The stream no longer refers to sb (it ends, or sb goes). */
static void
sub_detach(struct proc_sub *sb)
{
	http_req_on_close(sb->sb_req, NULL, NULL);
	http_req_on_drain(sb->sb_req, NULL, NULL);
}

static struct proc_sub *
sub_new(struct proc *p, struct http_req *req)
{
	const char *ka = http_req_header(req, "Keepalive-Ping-Interval");
	struct proc_sub *sb;
	long secs = PROC_KEEPALIVE_DEFAULT;

	if ((sb = calloc(1, sizeof(*sb))) == NULL)
		return NULL;
	if (ka != NULL && (secs = strtol(ka, NULL, 10)) <= 0)
		secs = PROC_KEEPALIVE_DEFAULT;
	if (secs > 3600)
		secs = 3600;
	sb->sb_proc = p;
	sb->sb_req = req;
	sb->sb_interval.tv_sec = secs;
	sb->sb_keepalive = evtimer_new(ag.ag_base, sub_keepalive, sb);
	evtimer_add(sb->sb_keepalive, &sb->sb_interval);
	TAILQ_INSERT_TAIL(&p->pr_subs, sb, sb_entry);
	nsubs++;
	http_req_on_close(req, sub_abort, sb);
	http_req_on_drain(req, sub_drain, sb);
	return sb;
}

static json_t *
proc_data_event(int kind, const uint8_t *data, size_t len)
{
	char *b = base64_encode_alloc(data, len);
	const char *key = kind == OUT_STDOUT ? "stdout" : kind == OUT_STDERR ? "stderr" : "pty";
	json_t *j = json_pack("{s:{s:{s:s}}}", "event", "data", key, b != NULL ? b : "");

	free(b);
	return j;
}

static void
sub_send(struct proc_sub *sb, json_t *ev)
{
	connect_stream_msg(sb->sb_req, ev);
	/* Keepalives only fill silence: restart the timer after real data. */
	evtimer_add(sb->sb_keepalive, &sb->sb_interval);
}

/* Drop p's oldest records until its ring holds at most max bytes. */
static void
ring_trim(struct proc *p, size_t max)
{
	uint8_t old[5];
	uint32_t olen;
	size_t before;

	while ((before = evbuffer_get_length(p->pr_ring)) > max) {
		evbuffer_copyout(p->pr_ring, old, 5);
		olen = (uint32_t)old[1] << 24 | (uint32_t)old[2] << 16 | (uint32_t)old[3] << 8 | old[4];
		evbuffer_drain(p->pr_ring, 5 + olen);
		ring_total -= before - evbuffer_get_length(p->pr_ring);
	}
}

static void
ring_add(struct proc *p, int kind, const uint8_t *data, size_t len)
{
	uint8_t hdr[5];
	size_t share = proc_share(out_budget, nprocs, PROC_RING_MIN, PROC_RING_MAX);
	struct proc *q;

	hdr[0] = (uint8_t)kind;
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
	evbuffer_add(p->pr_ring, hdr, 5);
	evbuffer_add(p->pr_ring, data, len);
	ring_total += 5 + len;
	ring_trim(p, share);
	/* Rings filled while fewer processes shared the budget give back the excess. */
	if (ring_total > out_budget)
		TAILQ_FOREACH(q, &procs, pr_entry)
			ring_trim(q, share);
}

static void
ring_replay(struct proc *p, struct proc_sub *sb)
{
	struct evbuffer *copy = evbuffer_new();
	uint8_t hdr[5], *data;
	uint32_t len;

	if (copy == NULL)
		return;
	evbuffer_add_buffer_reference(copy, p->pr_ring);
	while (evbuffer_remove(copy, hdr, 5) == 5) {
		len = (uint32_t)hdr[1] << 24 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 8 | hdr[4];
		if ((data = malloc(len > 0 ? len : 1)) == NULL)
			break;
		evbuffer_remove(copy, data, len);
		sub_send(sb, proc_data_event(hdr[0], data, len));
		free(data);
	}
	evbuffer_free(copy);
}

/*
 * Stop reading output while a client cannot keep up; resume when it
 * drains. The queue a client may hold shrinks as more clients share the
 * budget (the drain callback fires once the output is written out, so a
 * smaller threshold is still seen).
 */
static int
proc_congested(struct proc *p)
{
	size_t high = proc_share(out_budget, nsubs, PROC_OUT_MIN, HTTP_OUTPUT_HIGH_WATER);
	struct proc_sub *sb;

	TAILQ_FOREACH(sb, &p->pr_subs, sb_entry) {
		if (http_req_output_pending(sb->sb_req) > high)
			return 1;
	}
	return 0;
}

static void
proc_resume(struct proc *p)
{
	if (!p->pr_paused || proc_congested(p))
		return;
	p->pr_paused = 0;
	if (p->pr_ev_out != NULL)
		event_add(p->pr_ev_out, NULL);
	if (p->pr_ev_err != NULL)
		event_add(p->pr_ev_err, NULL);
}

static void
proc_output(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	struct proc_sub *sb;
	uint8_t buf[PROC_READ_CHUNK];
	int kind = p->pr_pty ? OUT_PTY : fd == p->pr_out ? OUT_STDOUT : OUT_STDERR;
	ssize_t n;

	n = read(fd, buf, p->pr_pty ? PROC_PTY_CHUNK : sizeof(buf));
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* EOF, or EIO on a PTY master once the last slave fd closed. */
		if (fd == p->pr_out) {
			event_free(p->pr_ev_out);
			p->pr_ev_out = NULL;
			close(p->pr_out);
			p->pr_out = -1;
		} else {
			event_free(p->pr_ev_err);
			p->pr_ev_err = NULL;
			close(p->pr_err);
			p->pr_err = -1;
		}
		proc_check_done(p);
		return;
	}
	ring_add(p, kind, buf, (size_t)n);
	TAILQ_FOREACH(sb, &p->pr_subs, sb_entry)
		sub_send(sb, proc_data_event(kind, buf, (size_t)n));
	if (proc_congested(p)) {
		p->pr_paused = 1;
		if (p->pr_ev_out != NULL)
			event_del(p->pr_ev_out);
		if (p->pr_ev_err != NULL)
			event_del(p->pr_ev_err);
	}
}

static void
proc_close_stdin(struct proc *p)
{
	if (p->pr_ev_in != NULL) {
		event_free(p->pr_ev_in);
		p->pr_ev_in = NULL;
	}
	if (p->pr_in != -1 && !p->pr_pty)
		close(p->pr_in);
	p->pr_in = -1;
	p->pr_close_in = 0;
}

static void
proc_stdin_write(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	ssize_t n;

	while (evbuffer_get_length(p->pr_inbuf) > 0) {
		n = evbuffer_write(p->pr_inbuf, fd);
		if (n == -1) {
			if (errno == EAGAIN || errno == EINTR) {
				event_add(p->pr_ev_in, NULL);
				return;
			}
			/* The reader is gone (EPIPE): drop what is queued. */
			evbuffer_drain(p->pr_inbuf, evbuffer_get_length(p->pr_inbuf));
			break;
		}
	}
	if (p->pr_close_in)
		proc_close_stdin(p);
}

static const char *
proc_signame(int sig)
{
	switch (sig) {
	case SIGKILL: return "killed";
	case SIGTERM: return "terminated";
	case SIGINT: return "interrupt";
	case SIGHUP: return "hangup";
	case SIGQUIT: return "quit";
	case SIGABRT: return "aborted";
	case SIGSEGV: return "segmentation fault";
	case SIGPIPE: return "broken pipe";
	case SIGBUS: return "bus error";
	case SIGFPE: return "floating point exception";
	case SIGILL: return "illegal instruction";
	case SIGUSR1: return "user defined signal 1";
	case SIGUSR2: return "user defined signal 2";
	case SIGALRM: return "alarm clock";
	default: return "unknown signal";
	}
}

static void
proc_free(struct proc *p)
{
	struct proc_sub *sb;

	while ((sb = TAILQ_FIRST(&p->pr_subs)) != NULL) {
		sub_detach(sb);
		sub_free(sb);
	}
	TAILQ_REMOVE(&procs, p, pr_entry);
	nprocs--;
	proc_close_stdin(p);
	if (p->pr_ev_out != NULL)
		event_free(p->pr_ev_out);
	if (p->pr_ev_err != NULL)
		event_free(p->pr_ev_err);
	if (p->pr_out != -1)
		close(p->pr_out);
	if (p->pr_err != -1)
		close(p->pr_err);
	if (p->pr_timeout != NULL)
		event_free(p->pr_timeout);
	evbuffer_free(p->pr_inbuf);
	ring_total -= evbuffer_get_length(p->pr_ring);
	evbuffer_free(p->pr_ring);
	json_decref(p->pr_config);
	free(p->pr_tag);
	free(p);
}

/* Both reaped and output closed: tell every stream and forget the process. */
static void
proc_check_done(struct proc *p)
{
	struct proc_sub *sb, *next;
	char status[64];
	json_t *end;
	int code;

	if (!p->pr_reaped || p->pr_out != -1 || p->pr_err != -1)
		return;
	if (WIFEXITED(p->pr_status)) {
		code = WEXITSTATUS(p->pr_status);
		snprintf(status, sizeof(status), "exit status %d", code);
		end = json_pack("{s:i, s:b, s:s}", "exitCode", code, "exited", 1, "status", status);
		if (code != 0)
			json_object_set_new(end, "error", json_string(status));
	} else {
		snprintf(status, sizeof(status), "signal: %s",
		    proc_signame(WIFSIGNALED(p->pr_status) ? WTERMSIG(p->pr_status) : 0));
		end = json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0,
		    "status", status, "error", status);
	}
	TAILQ_FOREACH_SAFE(sb, &p->pr_subs, sb_entry, next) {
		struct http_req *req = sb->sb_req;

		connect_stream_msg(req, json_pack("{s:{s:O}}", "event", "end", end));
		sub_detach(sb);
		sub_free(sb);
		connect_stream_end(req, NULL, NULL);
	}
	json_decref(end);
	proc_free(p);
}

void
proc_sigchld(void)
{
	struct proc *p;
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if ((p = proc_find(pid)) == NULL) {
			/* The start command or its ready check, else an orphan we inherited as PID 1. */
			(void)start_reaped(pid, st);
			continue;
		}
		p->pr_reaped = 1;
		p->pr_status = st;
		proc_check_done(p);
	}
}

void
proc_shutdown(int sig)
{
	struct proc *p;

	TAILQ_FOREACH(p, &procs, pr_entry) {
		kill(-p->pr_pid, sig);
		kill(p->pr_pid, sig);
	}
}

static void
proc_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;

	kill(-p->pr_pid, SIGKILL);
	kill(p->pr_pid, SIGKILL);
}

/* Supplementary groups of u from <passwd dir>/group, parsed by hand. */
static int
proc_groups(const struct agent_user *u, gid_t *gids, int max)
{
	char path[PATH_MAX], line[4096], *f[4], *p, *m;
	const char *slash = strrchr(ag.ag_passwd, '/');
	FILE *fp;
	int n = 0, i;

	gids[n++] = u->gid;
	snprintf(path, sizeof(path), "%.*s/group", slash != NULL ? (int)(slash - ag.ag_passwd) : 0,
	    ag.ag_passwd);
	if ((fp = fopen(path, "re")) == NULL)
		return n;
	while (n < max && fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		for (i = 0, p = line; i < 4; i++) {
			f[i] = p;
			if (i < 3) {
				if ((p = strchr(p, ':')) == NULL)
					break;
				*p++ = '\0';
			}
		}
		if (i < 4)
			continue;
		for (m = strtok(f[3], ","); m != NULL; m = strtok(NULL, ",")) {
			if (strcmp(m, u->name) == 0) {
				gids[n++] = (gid_t)strtoul(f[2], NULL, 10);
				break;
			}
		}
	}
	fclose(fp);
	return n;
}

/* Find cmd in the PATH of envp (execvpe would use our own PATH instead). */
static void
proc_exec(const char *cmd, char **argv, char **envp)
{
	const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	char buf[PATH_MAX], *dir, *save, *copy;
	int i, err = ENOENT;

	if (strchr(cmd, '/') != NULL) {
		execve(cmd, argv, envp);
		return;
	}
	for (i = 0; envp[i] != NULL; i++) {
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	}
	if ((copy = strdup(path)) == NULL)
		return;
	for (dir = strtok_r(copy, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
		snprintf(buf, sizeof(buf), "%s/%s", *dir != '\0' ? dir : ".", cmd);
		execve(buf, argv, envp);
		if (errno != ENOENT)
			err = errno;
	}
	errno = err;
}

struct spawn {
	const char		*cmd;
	char			**argv;
	char			**envp;
	const char		*cwd;
	struct agent_user	*user;
	int			 pty, cols, rows;
	int			 want_stdin;
};

static void __attribute__((noreturn))
proc_child(const struct spawn *sp, int in, int out, int err, const char *slave, int errfd,
    const gid_t *gids, int ngids)
{
	sigset_t set;
	int i, fd;

	sigemptyset(&set);
	sigprocmask(SIG_SETMASK, &set, NULL);
	for (i = 1; i < NSIG; i++)
		signal(i, SIG_DFL);
	setsid();
	/* The agent shields itself from the OOM killer; its commands must not inherit that. */
	if (ag.ag_pid1 && (fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC)) != -1) {
		if (write(fd, "0", 1) != 1)
			goto fail;
		close(fd);
	}
	if (sp->pty) {
		if ((fd = open(slave, O_RDWR)) == -1)
			goto fail;
		ioctl(fd, TIOCSCTTY, 0);
		in = out = err = fd;
	}
	if (dup2(in, 0) == -1 || dup2(out, 1) == -1 || dup2(err, 2) == -1)
		goto fail;
	/*
	 * libevent's sockets (forwarded TCP connections, the channel) are not
	 * all close-on-exec; a command must not inherit them, or a stream
	 * would stay open as long as the command runs.
	 */
	close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (geteuid() == 0 && (getuid() != sp->user->uid || getgid() != sp->user->gid)) {
		if (setgroups((size_t)ngids, gids) == -1 || setgid(sp->user->gid) == -1 ||
		    setuid(sp->user->uid) == -1)
			goto fail;
	}
	if (chdir(sp->cwd) == -1)
		goto fail;
	proc_exec(sp->cmd, sp->argv, sp->envp);
fail:
	i = errno;
	if (write(errfd, &i, sizeof(i)) < 0)
		_exit(127);
	_exit(127);
}

/* Fork and exec; fills p's fds. -1 with *why (static or errno text). */
static int
proc_spawn(struct proc *p, const struct spawn *sp, char *why, size_t whylen)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, ep[2] = { -1, -1 };
	int master = -1, e = 0, ngids;
	char slave[128] = "";
	struct winsize ws;
	gid_t gids[PROC_MAX_GROUPS];
	ssize_t n;
	pid_t pid;

	ngids = proc_groups(sp->user, gids, PROC_MAX_GROUPS);
	if (pipe2(ep, O_CLOEXEC) == -1)
		goto sysfail;
	if (sp->pty) {
		if ((master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1 ||
		    grantpt(master) == -1 || unlockpt(master) == -1 ||
		    ptsname_r(master, slave, sizeof(slave)) != 0)
			goto sysfail;
		memset(&ws, 0, sizeof(ws));
		ws.ws_col = (unsigned short)sp->cols;
		ws.ws_row = (unsigned short)sp->rows;
		ioctl(master, TIOCSWINSZ, &ws);
	} else {
		if (sp->want_stdin) {
			if (pipe2(in, O_CLOEXEC) == -1)
				goto sysfail;
		} else if ((in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1)
			goto sysfail;
		if (pipe2(out, O_CLOEXEC) == -1 || pipe2(err, O_CLOEXEC) == -1)
			goto sysfail;
	}
	if ((pid = fork()) == -1)
		goto sysfail;
	if (pid == 0)
		proc_child(sp, in[0], out[1], err[1], slave, ep[1], gids, ngids);
	close(ep[1]);
	ep[1] = -1;
	do
		n = read(ep[0], &e, sizeof(e));
	while (n == -1 && errno == EINTR);
	close(ep[0]);
	ep[0] = -1;
	if (in[0] != -1)
		close(in[0]);
	if (out[1] != -1)
		close(out[1]);
	if (err[1] != -1)
		close(err[1]);
	if (n == sizeof(e)) {
		/* exec failed; the child exits 127 and SIGCHLD reaps it as an orphan. */
		snprintf(why, whylen, "%s", strerror(e));
		if (master != -1)
			close(master);
		if (in[1] != -1)
			close(in[1]);
		if (out[0] != -1)
			close(out[0]);
		if (err[0] != -1)
			close(err[0]);
		return -1;
	}
	p->pr_pid = pid;
	p->pr_pty = sp->pty;
	if (sp->pty) {
		p->pr_out = master;
		p->pr_in = master;
		p->pr_err = -1;
	} else {
		p->pr_out = out[0];
		p->pr_err = err[0];
		p->pr_in = in[1];
	}
	return 0;
sysfail:
	snprintf(why, whylen, "%s", strerror(errno));
	for (int *fd = (int[]){ in[0], in[1], out[0], out[1], err[0], err[1], ep[0], ep[1],
	    master, -2 }; *fd != -2; fd++) {
		if (*fd != -1)
			close(*fd);
	}
	return -1;
}

pid_t
proc_spawn_shell(const char *cmd, const struct agent_user *u, const char *cwd, char **envp,
    int *out, int *err, char *why, size_t whylen)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };
	struct agent_user uc = *u;
	struct spawn sp = { .cmd = "/bin/sh", .argv = argv, .envp = envp, .cwd = cwd,
	    .user = &uc };
	struct proc p;

	memset(&p, 0, sizeof(p));
	p.pr_in = p.pr_out = p.pr_err = -1;
	if (proc_spawn(&p, &sp, why, whylen) == -1)
		return -1;
	evutil_make_socket_nonblocking(p.pr_out);
	evutil_make_socket_nonblocking(p.pr_err);
	*out = p.pr_out;
	*err = p.pr_err;
	return p.pr_pid;
}

static void
proc_start_events(struct proc *p)
{
	evutil_make_socket_nonblocking(p->pr_out);
	p->pr_ev_out = event_new(ag.ag_base, p->pr_out, EV_READ | EV_PERSIST, proc_output, p);
	event_add(p->pr_ev_out, NULL);
	if (p->pr_err != -1) {
		evutil_make_socket_nonblocking(p->pr_err);
		p->pr_ev_err = event_new(ag.ag_base, p->pr_err, EV_READ | EV_PERSIST, proc_output, p);
		event_add(p->pr_ev_err, NULL);
	}
	if (p->pr_in != -1) {
		if (!p->pr_pty)
			evutil_make_socket_nonblocking(p->pr_in);
		p->pr_ev_in = event_new(ag.ag_base, p->pr_in, EV_WRITE, proc_stdin_write, p);
	}
}

static void
proc_start_end(struct http_req *req, void *arg)
{
	json_t *j, *pj, *args, *envs, *v, *pty, *size, *tag;
	struct agent_user u;
	struct spawn sp;
	struct proc *p = NULL;
	const char *why = NULL, *key, *tmo;
	char **argv = NULL, **envp = NULL, *cwd = NULL, err[256];
	size_t i, nargs, nenv = 0;
	struct stat st;
	long long ms;

	if ((j = connect_request(req, 1)) == NULL)
		return;
	memset(&sp, 0, sizeof(sp));
	pj = jget(j, "process", NULL);
	v = jget(pj, "cmd", NULL);
	if (!json_is_string(v) || *json_string_value(v) == '\0') {
		connect_stream_end(req, "invalid_argument", "process.cmd is required");
		goto out;
	}
	sp.cmd = json_string_value(v);
	if (api_user(req, NULL, &u, &why) == -1) {
		connect_stream_end(req, "unauthenticated", why);
		goto out;
	}
	sp.user = &u;
	args = jget(pj, "args", NULL);
	nargs = json_is_array(args) ? json_array_size(args) : 0;
	if (nargs > PROC_MAX_ARGS) {
		connect_stream_end(req, "invalid_argument", "too many arguments");
		goto out;
	}
	if ((argv = calloc(nargs + 2, sizeof(*argv))) == NULL) {
		connect_stream_end(req, "resource_exhausted", "out of memory");
		goto out;
	}
	argv[0] = (char *)sp.cmd;
	for (i = 0; i < nargs; i++) {
		if (!json_is_string(json_array_get(args, i))) {
			connect_stream_end(req, "invalid_argument", "process.args must be strings");
			goto out;
		}
		argv[i + 1] = (char *)json_string_value(json_array_get(args, i));
	}
	/* envd: PATH HOME USER LOGNAME, then the sandbox's env, then the request's. */
	env_set(&envp, &nenv, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	env_set(&envp, &nenv, "HOME", u.home);
	env_set(&envp, &nenv, "USER", u.name);
	env_set(&envp, &nenv, "LOGNAME", u.name);
	for (i = 0; i < ag.ag_nenv; i++) {
		char *eq = strchr(ag.ag_env[i], '='), k[256];

		if (eq == NULL || (size_t)(eq - ag.ag_env[i]) >= sizeof(k))
			continue;
		snprintf(k, sizeof(k), "%.*s", (int)(eq - ag.ag_env[i]), ag.ag_env[i]);
		env_set(&envp, &nenv, k, eq + 1);
	}
	envs = jget(pj, "envs", NULL);
	if (json_is_object(envs)) {
		json_object_foreach(envs, key, v) {
			if (json_is_string(v) && *key != '\0' && strchr(key, '=') == NULL)
				env_set(&envp, &nenv, key, json_string_value(v));
		}
	}
	v = jget(pj, "cwd", NULL);
	if ((cwd = path_resolve(json_is_string(v) ? json_string_value(v) : "", &u)) == NULL ||
	    stat(cwd, &st) == -1 || !S_ISDIR(st.st_mode)) {
		connect_stream_end(req, "invalid_argument", "cwd does not exist or is not a directory");
		goto out;
	}
	sp.argv = argv;
	sp.envp = envp;
	sp.cwd = cwd;
	sp.want_stdin = json_is_true(jget(j, "stdin", NULL));
	if ((pty = jget(j, "pty", NULL)) != NULL && json_is_object(pty)) {
		size = jget(pty, "size", NULL);
		sp.pty = 1;
		sp.cols = (int)jint(jget(size, "cols", NULL), 80);
		sp.rows = (int)jint(jget(size, "rows", NULL), 24);
		if (sp.cols <= 0 || sp.cols > 10000 || sp.rows <= 0 || sp.rows > 10000) {
			connect_stream_end(req, "invalid_argument", "bad pty size");
			goto out;
		}
	}
	if (nprocs >= PROC_MAX || nsubs >= PROC_SUBS_MAX) {
		snprintf(err, sizeof(err), "too many %s: the agent tracks %u (its limit is %d)",
		    nprocs >= PROC_MAX ? "processes" : "output streams",
		    nprocs >= PROC_MAX ? nprocs : nsubs, nprocs >= PROC_MAX ? PROC_MAX : PROC_SUBS_MAX);
		connect_stream_end(req, "resource_exhausted", err);
		goto out;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		connect_stream_end(req, "internal", "out of memory");
		goto out;
	}
	p->pr_in = p->pr_out = p->pr_err = -1;
	TAILQ_INIT(&p->pr_subs);
	if (proc_spawn(p, &sp, err, sizeof(err)) == -1) {
		free(p);
		connect_stream_end(req, "internal", err);
		goto out;
	}
	p->pr_inbuf = evbuffer_new();
	p->pr_ring = evbuffer_new();
	p->pr_config = json_deep_copy(pj);
	tag = jget(j, "tag", NULL);
	if (json_is_string(tag))
		p->pr_tag = strdup(json_string_value(tag));
	TAILQ_INSERT_TAIL(&procs, p, pr_entry);
	nprocs++;
	/* The start event goes first and alone, so the SDK learns the pid at once. */
	connect_stream_start(req);
	connect_stream_msg(req, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)p->pr_pid));
	sub_new(p, req);
	tmo = http_req_header(req, "Connect-Timeout-Ms");
	if (tmo != NULL && (ms = strtoll(tmo, NULL, 10)) > 0) {
		struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

		p->pr_timeout = evtimer_new(ag.ag_base, proc_timeout, p);
		evtimer_add(p->pr_timeout, &tv);
	}
	proc_start_events(p);
out:
	free(argv);
	if (envp != NULL) {
		for (i = 0; i < nenv; i++)
			free(envp[i]);
		free(envp);
	}
	free(cwd);
	json_decref(j);
}

static void
proc_connect_end(struct http_req *req, void *arg)
{
	json_t *j;
	struct proc *p;
	struct proc_sub *sb;

	if ((j = connect_request(req, 1)) == NULL)
		return;
	p = proc_select(jget(j, "process", NULL));
	json_decref(j);
	if (p == NULL) {
		connect_stream_end(req, "not_found", "process not found");
		return;
	}
	if (nsubs >= PROC_SUBS_MAX) {
		char err[128];

		snprintf(err, sizeof(err), "too many output streams: the agent serves %u (its "
		    "limit is %d)", nsubs, PROC_SUBS_MAX);
		connect_stream_end(req, "resource_exhausted", err);
		return;
	}
	connect_stream_start(req);
	connect_stream_msg(req, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)p->pr_pid));
	if ((sb = sub_new(p, req)) != NULL)
		ring_replay(p, sb);
}

static void
proc_list_end(struct http_req *req, void *arg)
{
	json_t *j, *arr;
	struct proc *p;

	if ((j = connect_request(req, 0)) == NULL)
		return;
	json_decref(j);
	arr = json_array();
	TAILQ_FOREACH(p, &procs, pr_entry) {
		json_t *e = json_pack("{s:O, s:i}", "config", p->pr_config, "pid", (int)p->pr_pid);

		if (p->pr_tag != NULL)
			json_object_set_new(e, "tag", json_string(p->pr_tag));
		json_array_append_new(arr, e);
	}
	connect_reply(req, json_pack("{s:o}", "processes", arr));
}

static void
proc_input_end(struct http_req *req, void *arg)
{
	json_t *j, *in, *v;
	struct proc *p;
	uint8_t *data = NULL;
	size_t len = 0;

	if ((j = connect_request(req, 0)) == NULL)
		return;
	if ((p = proc_select(jget(j, "process", NULL))) == NULL) {
		connect_error(req, "not_found", "process not found");
		goto out;
	}
	in = jget(j, "input", NULL);
	v = jget(in, "stdin", NULL);
	if (v == NULL)
		v = jget(in, "pty", NULL);
	if (!json_is_string(v) || base64_decode_alloc(json_string_value(v), json_string_length(v), &data, &len) == -1) {
		connect_error(req, "invalid_argument", "input.stdin or input.pty must be base64");
		goto out;
	}
	if (p->pr_in == -1) {
		connect_error(req, "failed_precondition", "stdin is not open for this process");
		goto out;
	}
	if (evbuffer_get_length(p->pr_inbuf) + len > PROC_STDIN_MAX) {
		connect_error(req, "resource_exhausted", "too much unread stdin");
		goto out;
	}
	evbuffer_add(p->pr_inbuf, data, len);
	event_add(p->pr_ev_in, NULL);
	connect_reply(req, json_object());
out:
	free(data);
	json_decref(j);
}

static void
proc_close_stdin_end(struct http_req *req, void *arg)
{
	json_t *j;
	struct proc *p;

	if ((j = connect_request(req, 0)) == NULL)
		return;
	p = proc_select(jget(j, "process", NULL));
	json_decref(j);
	if (p == NULL) {
		connect_error(req, "not_found", "process not found");
		return;
	}
	if (p->pr_pty) {
		/* A terminal has no separate stdin to close: send EOF (^D) instead. */
		evbuffer_add(p->pr_inbuf, "\x04", 1);
		event_add(p->pr_ev_in, NULL);
	} else if (p->pr_in != -1) {
		p->pr_close_in = 1;
		if (evbuffer_get_length(p->pr_inbuf) == 0)
			proc_close_stdin(p);
	}
	connect_reply(req, json_object());
}

static void
proc_signal_end(struct http_req *req, void *arg)
{
	json_t *j, *v;
	struct proc *p;
	int sig = 0;

	if ((j = connect_request(req, 0)) == NULL)
		return;
	v = jget(j, "signal", NULL);
	/* E2B sends KILL and TERM; airlock's API (Ctrl-C, hangup) adds INT and HUP. */
	if (json_is_string(v)) {
		if (strcmp(json_string_value(v), "SIGNAL_SIGKILL") == 0)
			sig = SIGKILL;
		else if (strcmp(json_string_value(v), "SIGNAL_SIGTERM") == 0)
			sig = SIGTERM;
		else if (strcmp(json_string_value(v), "SIGNAL_SIGINT") == 0)
			sig = SIGINT;
		else if (strcmp(json_string_value(v), "SIGNAL_SIGHUP") == 0)
			sig = SIGHUP;
	} else if (json_is_integer(v) && (jint(v, 0) == SIGKILL || jint(v, 0) == SIGTERM ||
	    jint(v, 0) == SIGINT || jint(v, 0) == SIGHUP))
		sig = (int)jint(v, 0);
	if (sig == 0) {
		json_decref(j);
		connect_error(req, "invalid_argument",
		    "signal must be SIGNAL_SIGKILL, SIGNAL_SIGTERM, SIGNAL_SIGINT or SIGNAL_SIGHUP");
		return;
	}
	p = proc_select(jget(j, "process", NULL));
	json_decref(j);
	if (p == NULL || p->pr_reaped) {
		connect_error(req, "not_found", "process not found");
		return;
	}
	/* The whole group: `bash -c` children must not outlive a kill. */
	kill(-p->pr_pid, sig);
	kill(p->pr_pid, sig);
	connect_reply(req, json_object());
}

static void
proc_update_end(struct http_req *req, void *arg)
{
	json_t *j, *size;
	struct proc *p;
	struct winsize ws;

	if ((j = connect_request(req, 0)) == NULL)
		return;
	if ((p = proc_select(jget(j, "process", NULL))) == NULL) {
		json_decref(j);
		connect_error(req, "not_found", "process not found");
		return;
	}
	size = jget(jget(j, "pty", NULL), "size", NULL);
	if (!p->pr_pty || size == NULL) {
		json_decref(j);
		connect_error(req, "invalid_argument", "only a PTY process can be resized");
		return;
	}
	memset(&ws, 0, sizeof(ws));
	ws.ws_col = (unsigned short)jint(jget(size, "cols", NULL), 80);
	ws.ws_row = (unsigned short)jint(jget(size, "rows", NULL), 24);
	json_decref(j);
	if (ioctl(p->pr_out, TIOCSWINSZ, &ws) == -1) {
		connect_error(req, "internal", "resize: %s", strerror(errno));
		return;
	}
	connect_reply(req, json_object());
}

/* Start and Connect answer with a stream, the others with one message. */
static const struct connect_method proc_methods[] = {
	{ "Start", proc_start_end },
	{ "Connect", proc_connect_end },
	{ "List", proc_list_end },
	{ "SendInput", proc_input_end },
	{ "CloseStdin", proc_close_stdin_end },
	{ "SendSignal", proc_signal_end },
	{ "Update", proc_update_end },
	{ NULL, NULL },
};

void
proc_route(struct http_req *req, const char *method)
{
	if (strcmp(method, "StreamInput") == 0)
		connect_error(req, "unimplemented", "client streaming is not supported");
	else
		connect_route(req, "process.Process", proc_methods, method);
}
