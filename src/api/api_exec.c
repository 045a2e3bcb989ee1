/*
 * Exec and processes: the API's SSE stream (start, stdout, stderr, exit) on
 * top of the agent's process.Process Connect stream. A client that goes
 * away stops the stream, not the process (reattach with .../stream).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_sandbox.h"
#include "api/api_stream.h"
#include "api/metrics.h"
#include "common/log.h"
#include "common/util.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"

#define EXEC_ARGS_MAX		4096
#define EXEC_ARG_MAX		(128 * 1024)
#define EXEC_STDIN_MAX		(1024 * 1024)

/* "signal: killed" and friends from the agent's end event. */
static json_t *
signal_of(const char *status)
{
	static const struct { const char *word, *name; } sigs[] = {
		{ "killed", "SIGKILL" }, { "terminated", "SIGTERM" }, { "interrupt", "SIGINT" },
		{ "hangup", "SIGHUP" }, { "aborted", "SIGABRT" }, { "segmentation fault", "SIGSEGV" },
		{ "broken pipe", "SIGPIPE" }, { "quit", "SIGQUIT" },
	};
	size_t i;

	if (status == NULL || strncmp(status, "signal: ", 8) != 0)
		return json_null();
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strncmp(status + 8, sigs[i].word, strlen(sigs[i].word)) == 0)
			return json_string(sigs[i].name);
	return json_string(status + 8);
}

#define EXEC_STREAM_NEW	0x01	/* a new process (metrics), not a reattach */

static void
exec_msg(struct api_stream *es, json_t *msg)
{
	struct http_req *req = es->call->req;
	json_t *ev = json_object_get(msg, "event"), *x;

	if (ev == NULL)
		return;
	if ((x = json_object_get(ev, "start")) != NULL) {
		http_sse_event(req, "start", json_pack("{s:O}", "pid",
		    json_object_get(x, "pid") ? json_object_get(x, "pid") : json_null()));
		if (es->flags & EXEC_STREAM_NEW)
			metrics_observe(es->call->api->metrics, "sandbox_exec_start",
			    api_elapsed(es->call));
	} else if ((x = json_object_get(ev, "data")) != NULL) {
		json_t *d;
		if ((d = json_object_get(x, "stdout")) != NULL || (d = json_object_get(x, "pty")) != NULL)
			http_sse_event(req, "stdout", json_pack("{s:O}", "data", d));
		else if ((d = json_object_get(x, "stderr")) != NULL)
			http_sse_event(req, "stderr", json_pack("{s:O}", "data", d));
		sb_touch(es->sb);
	} else if ((x = json_object_get(ev, "end")) != NULL) {
		json_t *code = json_object_get(x, "exitCode");
		const char *status = json_string_value(json_object_get(x, "status"));
		int exited = json_is_true(json_object_get(x, "exited"));
		http_sse_event(req, "exit", json_pack("{s:o,s:o,s:s?}", "code",
		    exited && code != NULL ? json_incref(code) : exited ? json_integer(0) : json_null(),
		    "signal", exited ? json_null() : signal_of(status), "status", status));
	}
}

static void
exec_start_stream(struct api_call *c, struct sandbox *sb, const char *method, json_t *body,
    const char *user, long long timeout_s, int flags)
{
	struct api_agent_headers ah;

	api_agent_headers(&ah, sb, user, 0);
	api_agent_headers_add(&ah, "Keepalive-Ping-Interval: 15");
	/* The agent kills the process when this elapses (envd semantics). */
	if (timeout_s > 0)
		api_agent_headers_add(&ah, "Connect-Timeout-Ms: %lld", timeout_s * 1000);
	api_stream_start(c, sb, method, body, ah.h, exec_msg, flags);
	api_agent_headers_free(&ah);
}

static int
get_user(struct api_call *c, json_t *obj, const char **user)
{
	if (api_get_string(c, obj, "user", 0, 32, user) == -1)
		return -1;
	if (*user == NULL)
		*user = "user";
	if (strcmp(*user, "user") != 0 && strcmp(*user, "root") != 0)
		return api_fail(c, 400, "bad_request", "user", "user: must be \"user\" or \"root\"");
	return 0;
}

static struct sandbox *
running_sandbox(struct api_call *c)
{
	return api_sandbox_agent(c);
}

/* pty: {cols, rows}, each 1..1000 (80x24 when left out). */
static int
get_pty(struct api_call *c, json_t *pty, long long *cols, long long *rows)
{
	static const char *const pty_fields[] = { "cols", "rows", NULL };

	if (!json_is_object(pty))
		return api_fail(c, 400, "bad_request", "pty", "pty: must be an object {cols, rows}%s",
		    json_is_null(pty) ? ", not null (leave it out for no terminal)" : "");
	if (api_check_fields(c, pty, "pty", pty_fields) == -1 ||
	    api_get_int(c, pty, "cols", 1, 1000, 80, cols) == -1 ||
	    api_get_int(c, pty, "rows", 1, 1000, 24, rows) == -1)
		return -1;
	return 0;
}

/* cmd: the argv, a non-empty array of strings without NUL (argv[0] not empty). */
static int
get_cmd(struct api_call *c, json_t *cmd)
{
	json_t *v;
	size_t i;

	if (!json_is_array(cmd) || json_array_size(cmd) == 0 ||
	    json_array_size(cmd) > EXEC_ARGS_MAX)
		return api_fail(c, 400, "bad_request", "cmd", "cmd: must be a non-empty array of "
		    "strings (argv)");
	json_array_foreach(cmd, i, v) {
		if (!json_is_string(v) || json_string_length(v) > EXEC_ARG_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v) ||
		    (i == 0 && json_string_length(v) == 0))
			return api_fail(c, 400, "bad_request", "cmd", "cmd[%zu]: must be a string "
			    "without NUL (at most %d bytes)", i, EXEC_ARG_MAX);
	}
	return 0;
}

void
api_exec_start(struct api_call *c)
{
	static const char *const fields[] = { "cmd", "env", "cwd", "user", "stdin", "pty",
	    "timeout_s", NULL };
	json_t *cmd, *env = NULL, *args, *proc, *body, *pty;
	const char *cwd, *user;
	long long timeout, cols = 0, rows = 0;
	struct sandbox *sb;
	int want_stdin;
	size_t i;

	if ((sb = running_sandbox(c)) == NULL)
		return;
	cmd = json_object_get(c->body, "cmd");
	pty = json_object_get(c->body, "pty");
	/* Each check records its error and we return: the caller sends the one reply. */
	if (api_check_fields(c, c->body, "", fields) == -1 || get_cmd(c, cmd) == -1 ||
	    api_get_string(c, c->body, "cwd", 0, 4096, &cwd) == -1 ||
	    get_user(c, c->body, &user) == -1 ||
	    api_get_bool(c, c->body, "stdin", 0, &want_stdin) == -1 ||
	    api_get_int(c, c->body, "timeout_s", 0, 30L * 86400, 0, &timeout) == -1 ||
	    (pty != NULL && get_pty(c, pty, &cols, &rows) == -1) ||
	    api_get_strmap(c, c->body, "env", 256, 1, &env) == -1)
		return;
	args = json_array();
	for (i = 1; i < json_array_size(cmd); i++)
		json_array_append(args, json_array_get(cmd, i));
	proc = json_pack("{s:O,s:o,s:o}", "cmd", json_array_get(cmd, 0), "args", args, "envs", env);
	if (cwd != NULL)
		json_object_set_new(proc, "cwd", json_string(cwd));
	body = json_pack("{s:o,s:b}", "process", proc, "stdin", want_stdin);
	if (pty != NULL)
		json_object_set_new(body, "pty", json_pack("{s:{s:I,s:I}}", "size", "cols",
		    (json_int_t)cols, "rows", (json_int_t)rows));
	metrics_inc(c->api->metrics, "sandbox_execs");
	exec_start_stream(c, sb, "process.Process/Start", body, user, timeout,
	    EXEC_STREAM_NEW | API_STREAM_EXEC);
	json_decref(body);
}

static int
parse_pid(struct api_call *c, long long *pid)
{
	char *end;

	/* Digits only: strtoll alone would take " 7" and "+7". */
	*pid = strtoll(c->params[1], &end, 10);
	if (strspn(c->params[1], "0123456789") != strlen(c->params[1]) || *end != '\0' ||
	    *pid <= 0 || *pid > 4194304)
		return api_fail(c, 400, "bad_request", "pid", "pid: \"%s\" is not a process id",
		    c->params[1]);
	return 0;
}

void
api_exec_stream(struct api_call *c)
{
	struct sandbox *sb;
	long long pid;
	json_t *body;

	if ((sb = running_sandbox(c)) == NULL || parse_pid(c, &pid) == -1)
		return;
	body = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
	exec_start_stream(c, sb, "process.Process/Connect", body, "root", 0, 0);
	json_decref(body);
}

/* --- unary process calls ------------------------------------------------ */

/* The agent's List answer in the API's shape; other calls answer 204. */
static void
unary_ok(struct api_call *c, json_t *resp, int list)
{
	json_t *procs, *p, *out, *cmd, *a;
	size_t i, j;

	if (!list) {
		api_no_content(c);
		return;
	}
	procs = json_object_get(resp, "processes");
	out = json_array();
	json_array_foreach(procs, i, p) {
		json_t *cfg = json_object_get(p, "config");
		cmd = json_array();
		if (json_object_get(cfg, "cmd") != NULL)
			json_array_append(cmd, json_object_get(cfg, "cmd"));
		json_array_foreach(json_object_get(cfg, "args"), j, a)
			json_array_append(cmd, a);
		json_array_append_new(out, json_pack("{s:O,s:o,s:O?,s:O?}", "pid",
		    json_object_get(p, "pid"), "cmd", cmd, "cwd", json_object_get(cfg, "cwd"),
		    "tag", json_object_get(p, "tag")));
	}
	api_json(c, 200, json_pack("{s:o}", "processes", out));
}

static void
unary_call(struct api_call *c, struct sandbox *sb, const char *method, json_t *body, int list)
{
	api_agent_unary(c, sb, "root", method, body, unary_ok, list);
}

void
api_exec_list(struct api_call *c)
{
	struct sandbox *sb;
	json_t *body;

	if ((sb = running_sandbox(c)) == NULL)
		return;
	body = json_object();
	unary_call(c, sb, "process.Process/List", body, 1);
	json_decref(body);
}

void
api_exec_stdin(struct api_call *c)
{
	static const char *const fields[] = { "data", "eof", NULL };
	struct sandbox *sb;
	const char *data;
	long long pid;
	int eof;
	json_t *body;

	if ((sb = running_sandbox(c)) == NULL || parse_pid(c, &pid) == -1 ||
	    api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "data", 0, EXEC_STDIN_MAX, &data) == -1 ||
	    api_get_bool(c, c->body, "eof", 0, &eof) == -1)
		return;
	if ((data == NULL) == !eof) {
		api_fail(c, 400, "bad_request", NULL, "send exactly one of data (base64) or eof:true");
		return;
	}
	if (eof) {
		body = json_pack("{s:{s:I}}", "process", "pid", (json_int_t)pid);
		unary_call(c, sb, "process.Process/CloseStdin", body, 0);
	} else {
		body = json_pack("{s:{s:I},s:{s:s}}", "process", "pid", (json_int_t)pid, "input",
		    "stdin", data);
		unary_call(c, sb, "process.Process/SendInput", body, 0);
	}
	json_decref(body);
}

void
api_exec_signal(struct api_call *c)
{
	static const char *const fields[] = { "signal", NULL };
	static const struct { const char *name, *connect; } sigs[] = {
		{ "SIGKILL", "SIGNAL_SIGKILL" }, { "SIGTERM", "SIGNAL_SIGTERM" },
		{ "SIGINT", "SIGNAL_SIGINT" }, { "SIGHUP", "SIGNAL_SIGHUP" },
	};
	struct sandbox *sb;
	const char *sig;
	long long pid;
	json_t *body;
	size_t i;

	if ((sb = running_sandbox(c)) == NULL || parse_pid(c, &pid) == -1 ||
	    api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "signal", 1, 16, &sig) == -1)
		return;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcmp(sigs[i].name, sig) == 0)
			break;
	if (i == sizeof(sigs) / sizeof(sigs[0])) {
		api_fail(c, 400, "bad_request", "signal", "signal: must be SIGKILL, SIGTERM, SIGINT "
		    "or SIGHUP");
		return;
	}
	body = json_pack("{s:{s:I},s:s}", "process", "pid", (json_int_t)pid, "signal",
	    sigs[i].connect);
	unary_call(c, sb, "process.Process/SendSignal", body, 0);
	json_decref(body);
}

void
api_exec_resize(struct api_call *c)
{
	static const char *const fields[] = { "cols", "rows", NULL };
	struct sandbox *sb;
	long long pid, cols, rows;
	json_t *body;

	if ((sb = running_sandbox(c)) == NULL || parse_pid(c, &pid) == -1 ||
	    api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_int(c, c->body, "cols", 1, 1000, 80, &cols) == -1 ||
	    api_get_int(c, c->body, "rows", 1, 1000, 24, &rows) == -1)
		return;
	body = json_pack("{s:{s:I},s:{s:{s:I,s:I}}}", "process", "pid", (json_int_t)pid, "pty",
	    "size", "cols", (json_int_t)cols, "rows", (json_int_t)rows);
	unary_call(c, sb, "process.Process/Update", body, 0);
	json_decref(body);
}
