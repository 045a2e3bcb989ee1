/*
 * airlock exec: POST /v1/sandboxes/{id}/exec and follow its event stream.
 * stdout/stderr events go (base64-decoded) to our fds; the exit event
 * decides our exit code (128+N for a signal, as shells do). With -i, stdin
 * is forwarded through .../processes/{pid}/stdin on a second connection;
 * with -t the remote side gets a PTY, our terminal goes raw and SIGWINCH
 * becomes a resize. Ctrl-C without -t forwards SIGINT; a second one detaches
 * (the process keeps running, as the API documents).
 */
#include <sys/ioctl.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "cli/cli_sse.h"
#include "common/log.h"
#include "common/base64.h"
#include "common/util.h"

/* Bytes per stdin POST: base64 of it stays well under the API's 1 MiB JSON limit. */
#define EXEC_STDIN_CHUNK	(256 * 1024)
#define EXEC_EXIT_NOSTART	127		/* the command could not start, like a shell */
#define EXEC_EXIT_DETACHED	130
#define EXEC_EXIT_PIPE		(128 + SIGPIPE)	/* what a local pipeline would report */

const char cmd_exec_usage[] =
	"usage: airlock exec [-i] [-t] [--user U] [--cwd DIR] [--env K=V]... [--timeout S]\n"
	"                    [--json] ID [--] CMD [ARG...]\n"
	"  -i forwards stdin, -t gives the command a terminal; Ctrl-C forwards SIGINT,\n"
	"  a second one detaches. Exit status: the command's, 128+N if signal N\n"
	"  killed it, 127 if it could not start, 255 if airlock itself failed.\n";

struct exec_state {
	struct cli_api		*api;
	struct cli_exec_opts	*o;
	struct cli_sse		 sse;
	int			 out_fd, err_fd;
	long long		 pid;		/* -1 until the start event */
	int			 done;
	int			 code;
	int			 stdin_open;
	int			 raw;		/* our terminal is in raw mode */
	int			 broken;	/* our stdout reader went away */
	struct termios		 saved;
	int			 in_fd;
};

static int exec_sigpipe[2] = { -1, -1 };

static void
exec_sighandler(int sig)
{
	int saved = errno;
	unsigned char c = (unsigned char)sig;

	/* A full pipe just drops the signal: the loop has plenty queued already. */
	(void)!write(exec_sigpipe[1], &c, 1);
	errno = saved;
}

static const struct {
	const char	*name;
	int		 num;
} exec_signals[] = {
	{ "HUP", 1 }, { "INT", 2 }, { "QUIT", 3 }, { "ILL", 4 }, { "TRAP", 5 },
	{ "ABRT", 6 }, { "BUS", 7 }, { "FPE", 8 }, { "KILL", 9 }, { "USR1", 10 },
	{ "SEGV", 11 }, { "USR2", 12 }, { "PIPE", 13 }, { "ALRM", 14 }, { "TERM", 15 },
	{ "XCPU", 24 }, { "XFSZ", 25 }, { "SYS", 31 },
};

/* A signal as the daemon reports it (number or "SIGKILL"/"KILL") -> number, 0 if unknown. */
static int
exec_signum(const json_t *sig)
{
	const char *s;
	size_t i;

	if (json_is_integer(sig)) {
		json_int_t n = json_integer_value(sig);
		return n > 0 && n < 128 ? (int)n : 0;
	}
	if ((s = json_string_value(sig)) == NULL)
		return 0;
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < sizeof(exec_signals) / sizeof(exec_signals[0]); i++)
		if (strcmp(s, exec_signals[i].name) == 0)
			return exec_signals[i].num;
	return 0;
}

/* -1 when the reader is gone (EPIPE and the like). */
static int
exec_write_all(int fd, const unsigned char *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			(void)poll(&pfd, 1, 1000);
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
exec_output(int fd, const json_t *data)
{
	const char *b64 = json_string_value(json_object_get(data, "data"));
	uint8_t *buf;
	size_t len, n;

	int rv = 0;

	if (b64 == NULL)
		return 0;
	len = strlen(b64);
	buf = xmalloc(BASE64_DECODED_MAX(len));
	/* Garbage from the daemon is dropped rather than written half-decoded. */
	if (base64_decode(b64, len, buf, &n) == 0)
		rv = exec_write_all(fd, buf, n);
	free(buf);
	return rv;
}

static int
exec_event(void *arg, const char *event, const char *data, size_t len)
{
	struct exec_state *ex = arg;
	json_t *j = json_loadb(data, len, 0, NULL), *code, *sig;
	const char *msg;
	int signum;

	/*
	 * Once our reader is gone the rest of the stream is moot: locally the
	 * writer would have died of SIGPIPE before it exited (one read of the
	 * stream may carry the output and the exit together).
	 */
	if (ex->broken) {
		json_decref(j);
		return 0;
	}
	if (ex->o->json) {
		json_t *line = json_pack("{s:s,s:O?}", "event", event, "data", j);
		char *s = json_dumps(line, JSON_COMPACT);
		if (s != NULL && (exec_write_all(ex->out_fd, (unsigned char *)s, strlen(s)) == -1 ||
		    exec_write_all(ex->out_fd, (const unsigned char *)"\n", 1) == -1))
			ex->broken = 1;
		free(s);
		json_decref(line);
	}
	if (strcmp(event, "start") == 0) {
		if (json_is_integer(json_object_get(j, "pid")))
			ex->pid = json_integer_value(json_object_get(j, "pid"));
	} else if (strcmp(event, "stdout") == 0 && !ex->o->json) {
		if (exec_output(ex->out_fd, j) == -1)
			ex->broken = 1;
	} else if (strcmp(event, "stderr") == 0 && !ex->o->json)
		(void)exec_output(ex->err_fd, j);
	else if (strcmp(event, "exit") == 0) {
		code = json_object_get(j, "code");
		sig = json_object_get(j, "signal");
		if ((signum = exec_signum(sig)) != 0)
			ex->code = 128 + signum;
		else if (json_is_integer(code) && json_integer_value(code) >= 0 &&
		    json_integer_value(code) <= 255)
			ex->code = (int)json_integer_value(code);
		else
			ex->code = CLI_EXIT_EXEC_FAIL;
		ex->done = 1;
	} else if (strcmp(event, "error") == 0) {
		msg = json_string_value(json_object_get(j, "message"));
		if (!ex->o->json)
			cli_fail("exec: %s", msg != NULL ? msg : "the command could not start");
		ex->code = EXEC_EXIT_NOSTART;
		ex->done = 1;
	}
	json_decref(j);
	return 0;
}

static int
exec_sink(void *arg, const char *data, size_t n, char **cause)
{
	struct exec_state *ex = arg;

	if (ex->done || ex->broken)
		return 0;
	return cli_sse_feed(&ex->sse, data, n, cause);
}

static void
exec_winsize(int fd, int *cols, int *rows)
{
	struct winsize ws;

	*cols = 80;
	*rows = 24;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

/* POST .../processes/{pid}/<what> with body; 0 on success. */
static int
exec_process_post(struct exec_state *ex, const char *what, json_t *body, char **cause)
{
	char *suffix, *path;
	json_t *r;

	xasprintf(&suffix, "/processes/%lld/%s", ex->pid, what);
	path = cli_sandbox_path(ex->o->id, suffix);
	r = cli_api_json(ex->api, "POST", path, body, NULL, cause);
	free(suffix);
	free(path);
	json_decref(body);
	if (r == NULL)
		return -1;
	json_decref(r);
	return 0;
}

static void
exec_forward_stdin(struct exec_state *ex)
{
	static unsigned char buf[EXEC_STDIN_CHUNK];
	char *b64, *cause = NULL;
	ssize_t n;

	n = read(ex->in_fd, buf, sizeof(buf));
	if (n == -1 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		ex->stdin_open = 0;
		if (exec_process_post(ex, "stdin", json_pack("{s:b}", "eof", 1), &cause) == -1)
			free(cause);
		return;
	}
	b64 = xmalloc(BASE64_LEN((size_t)n) + 1);
	base64_encode(buf, (size_t)n, b64);
	if (exec_process_post(ex, "stdin", json_pack("{s:s}", "data", b64), &cause) == -1) {
		/* Most likely the process has exited; its exit event follows. */
		ex->stdin_open = 0;
		free(cause);
	}
	free(b64);
}

/* A signal reached us: 1 when we should stop following the stream. */
static int
exec_signal(struct exec_state *ex, int sig, int *interrupts)
{
	char *cause = NULL;
	int cols, rows;
	const char *name;

	if (sig == SIGWINCH) {
		if (ex->o->tty && ex->pid >= 0) {
			exec_winsize(ex->in_fd, &cols, &rows);
			if (exec_process_post(ex, "resize", json_pack("{s:i,s:i}", "cols", cols,
			    "rows", rows), &cause) == -1)
				free(cause);
		}
		return 0;
	}
	if (ex->pid < 0 || (sig == SIGINT && ++*interrupts > 1)) {
		if (ex->pid < 0)
			cli_fail("interrupted");
		else
			cli_fail("detached; process %lld keeps running (airlock attach %s %lld)",
			    ex->pid, ex->o->id, ex->pid);
		ex->code = EXEC_EXIT_DETACHED;
		return 1;
	}
	name = sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP" : "SIGTERM";
	if (exec_process_post(ex, "signal", json_pack("{s:s}", "signal", name), &cause) == 0)
		return 0;
	/*
	 * Someone asking to stop a command wants it stopped: when the signal
	 * itself is refused, SIGTERM is the closest one every agent takes.
	 */
	if (sig != SIGTERM) {
		free(cause);
		cause = NULL;
		if (exec_process_post(ex, "signal", json_pack("{s:s}", "signal", "SIGTERM"),
		    &cause) == 0)
			return 0;
	}
	cli_fail_cause(cause);
	return 0;
}

static json_t *
exec_body(struct cli_exec_opts *o, int in_fd)
{
	json_t *cmd = json_array(), *body, *env = json_deep_copy(o->env);
	int i, cols, rows;

	for (i = 0; i < o->ncmd; i++)
		json_array_append_new(cmd, json_string(o->cmd[i]));
	body = json_pack("{s:o,s:b}", "cmd", cmd, "stdin", o->interactive);
	if (o->tty) {
		/* The remote PTY should draw like the local terminal. */
		if (json_object_get(env, "TERM") == NULL && getenv("TERM") != NULL)
			json_object_set_new(env, "TERM", json_string(getenv("TERM")));
		exec_winsize(in_fd, &cols, &rows);
		json_object_set_new(body, "pty", json_pack("{s:i,s:i}", "cols", cols, "rows",
		    rows));
	}
	if (json_object_size(env) > 0)
		json_object_set(body, "env", env);
	json_decref(env);
	if (o->cwd != NULL)
		json_object_set_new(body, "cwd", json_string(o->cwd));
	if (o->user != NULL)
		json_object_set_new(body, "user", json_string(o->user));
	if (o->timeout > 0)
		json_object_set_new(body, "timeout_s", json_integer(o->timeout));
	return body;
}

static void
exec_signals_set(int on)
{
	static struct sigaction old[5];
	static const int sigs[5] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGPIPE };
	struct sigaction sa;
	int i;

	if (on) {
		if (pipe2(exec_sigpipe, O_CLOEXEC | O_NONBLOCK) == -1)
			fatal("pipe2");
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = exec_sighandler;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		for (i = 0; i < 4; i++)
			sigaction(sigs[i], &sa, &old[i]);
		/* A closed stdout shows up as EPIPE, handled in the loop. */
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, &old[4]);
	} else {
		for (i = 0; i < 5; i++)
			sigaction(sigs[i], &old[i], NULL);
		close(exec_sigpipe[0]);
		close(exec_sigpipe[1]);
		exec_sigpipe[0] = exec_sigpipe[1] = -1;
	}
}

/* Follow the stream until exit; returns our exit code. */
static int
exec_loop(struct exec_state *ex, struct cli_conn *conn)
{
	struct pollfd pfd[3];
	char *cause = NULL;
	double last = monotonic_secs();
	int r, n, nfd, interrupts = 0, ms;
	unsigned char sig;

	for (;;) {
		r = cli_conn_body(conn, exec_sink, ex, 0, &cause);
		if (ex->done)
			return ex->code;
		if (ex->broken) {
			/*
			 * `airlock exec ID -- yes | head -1`: locally the writer
			 * would die of SIGPIPE; remotely nothing would stop it.
			 */
			free(cause);
			cause = NULL;
			if (ex->pid >= 0 && exec_process_post(ex, "signal",
			    json_pack("{s:s}", "signal", "SIGTERM"), &cause) == -1)
				free(cause);
			return EXEC_EXIT_PIPE;
		}
		if (r == -1) {
			cli_fail("exec stream: %s", cause);
			free(cause);
			return CLI_EXIT_EXEC_FAIL;
		}
		if (r == 1) {
			cli_fail("the exec stream ended before the command exited");
			return CLI_EXIT_EXEC_FAIL;
		}
		nfd = 0;
		pfd[nfd++] = (struct pollfd){ .fd = cli_conn_fd(conn), .events = POLLIN };
		pfd[nfd++] = (struct pollfd){ .fd = exec_sigpipe[0], .events = POLLIN };
		if (ex->stdin_open && ex->pid >= 0)
			pfd[nfd++] = (struct pollfd){ .fd = ex->in_fd, .events = POLLIN };
		ms = (int)((last + CLI_HTTP_STREAM_TIMEOUT_MS / 1000.0 - monotonic_secs()) * 1000);
		if (ms <= 0) {
			cli_fail("no events or heartbeats from airlockd for %d s",
			    CLI_HTTP_STREAM_TIMEOUT_MS / 1000);
			return CLI_EXIT_EXEC_FAIL;
		}
		n = poll(pfd, (nfds_t)nfd, ms);
		if (n == -1 && errno != EINTR) {
			cli_fail("poll: %s", strerror(errno));
			return CLI_EXIT_EXEC_FAIL;
		}
		if (n <= 0)
			continue;
		if (pfd[0].revents != 0)
			last = monotonic_secs();
		if (pfd[1].revents != 0) {
			while (read(exec_sigpipe[0], &sig, 1) == 1)
				if (exec_signal(ex, sig, &interrupts))
					return ex->code;
		}
		if (nfd == 3 && pfd[2].revents != 0)
			exec_forward_stdin(ex);
	}
}

int
cmd_exec_run(struct cli_api *api, struct cli_exec_opts *o, int in_fd, int out_fd, int err_fd)
{
	struct exec_state ex;
	struct cli_conn *conn;
	struct termios raw;
	json_t *body;
	char *path, *text, *cause = NULL;
	int st;

	memset(&ex, 0, sizeof(ex));
	ex.api = api;
	ex.o = o;
	ex.in_fd = in_fd;
	ex.out_fd = out_fd;
	ex.err_fd = err_fd;
	ex.pid = o->attach > 0 ? o->attach : -1;
	ex.stdin_open = o->interactive;
	cli_sse_init(&ex.sse, exec_event, &ex);
	conn = cli_conn_new(api);
	if (o->attach > 0) {
		/* Reattach: the same event stream, buffered output first. */
		xasprintf(&text, "/processes/%lld/stream", o->attach);
		path = cli_sandbox_path(o->id, text);
		st = cli_conn_request(conn, "GET", path, NULL, NULL, 0, -1, NULL, NULL, NULL,
		    &cause);
	} else {
		body = exec_body(o, in_fd);
		text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		path = cli_sandbox_path(o->id, "/exec");
		st = cli_conn_request(conn, "POST", path, "application/json", text, strlen(text),
		    -1, NULL, NULL, NULL, &cause);
	}
	free(path);
	free(text);
	if (st == -1) {
		cli_conn_free(conn);
		cli_sse_free(&ex.sse);
		cli_fail_cause(cause);
		return CLI_EXIT_EXEC_FAIL;
	}
	cli_conn_set_timeout(conn, CLI_HTTP_STREAM_TIMEOUT_MS);
	/*
	 * Raw mode only when our keystrokes go to the remote PTY: with -t
	 * alone, Ctrl-C must stay a local SIGINT we can forward.
	 */
	if (o->tty && o->interactive && isatty(in_fd) && tcgetattr(in_fd, &ex.saved) == 0) {
		raw = ex.saved;
		cfmakeraw(&raw);
		/* Not TCSAFLUSH: keys typed ahead belong to the remote command. */
		if (tcsetattr(in_fd, TCSADRAIN, &raw) == 0)
			ex.raw = 1;
	}
	exec_signals_set(1);
	st = exec_loop(&ex, conn);
	exec_signals_set(0);
	if (ex.raw)
		tcsetattr(in_fd, TCSADRAIN, &ex.saved);
	cli_conn_free(conn);
	cli_sse_free(&ex.sse);
	return st;
}

void
cmd_exec_opts_free(struct cli_exec_opts *o)
{
	json_decref(o->env);
	memset(o, 0, sizeof(*o));
}

int
cmd_exec_parse(int argc, char **argv, struct cli_exec_opts *o, char **cause)
{
	static const struct option longopts[] = {
		{ "interactive", no_argument, NULL, 'i' },
		{ "tty", no_argument, NULL, 't' },
		{ "user", required_argument, NULL, 'u' },
		{ "cwd", required_argument, NULL, 'w' },
		{ "env", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	char *k, *v;
	int ch;

	memset(o, 0, sizeof(*o));
	o->env = json_object();
	optind = 0;
	opterr = 0;
	/* "+": options end at the sandbox id; everything after it is the command. */
	while ((ch = getopt_long(argc, argv, "+itu:w:e:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'i':
			o->interactive = 1;
			break;
		case 't':
			o->tty = 1;
			break;
		case 'u':
			o->user = optarg;
			break;
		case 'w':
			o->cwd = optarg;
			break;
		case 'e':
			if (cli_args_kv(optarg, &k, &v, cause) == -1)
				goto bad;
			json_object_set_new(o->env, k, json_string(v));
			free(k);
			free(v);
			break;
		case 'T':
			if (cli_args_num(optarg, 0, 30LL * 86400, &o->timeout, "--timeout (s)",
			    cause) == -1)
				goto bad;
			break;
		case 'j':
			o->json = 1;
			break;
		default:
			cause_set(cause, "unknown or incomplete option \"%s\"", argv[optind - 1]);
			goto bad;
		}
	}
	if (optind >= argc) {
		cause_set(cause, "missing sandbox id");
		goto bad;
	}
	o->id = argv[optind++];
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	if (optind >= argc) {
		cause_set(cause, "missing command");
		goto bad;
	}
	o->cmd = argv + optind;
	o->ncmd = argc - optind;
	return 0;
bad:
	cmd_exec_opts_free(o);
	return -1;
}

int
cmd_exec_stdio(struct cli_exec_opts *o)
{
	struct cli_api *api;
	int rv;

	if ((api = cli_connect()) == NULL) {
		cmd_exec_opts_free(o);
		return CLI_EXIT_EXEC_FAIL;
	}
	rv = cmd_exec_run(api, o, STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO);
	cli_api_free(api);
	cmd_exec_opts_free(o);
	return rv;
}

int
cmd_exec(int argc, char **argv)
{
	struct cli_exec_opts o;
	char *cause = NULL;

	if (cmd_exec_parse(argc, argv, &o, &cause) == -1) {
		fprintf(stderr, "airlock exec: %s\n%s", cause, cmd_exec_usage);
		free(cause);
		return CLI_EXIT_USAGE;
	}
	return cmd_exec_stdio(&o);
}
