/* The airlock CLI: one cmd_<verb>.c per verb, dispatched from a table in airlock.c. */
#ifndef AIRLOCK_CLI_H
#define AIRLOCK_CLI_H

#include <stdio.h>

#include <jansson.h>

struct cli_api;

struct cli_cmd {
	const char	*name;
	const char	*usage;
	const char	*help;
	int		(*run)(int argc, char **argv);
	const char	*detail;	/* full usage for "VERB --help", or NULL */
};

/* Exit codes shared by every daemon-facing command. */
#define CLI_EXIT_OK		0
#define CLI_EXIT_FAIL		1	/* the operation failed (the message says why) */
#define CLI_EXIT_USAGE		2
#define CLI_EXIT_EXEC_FAIL	255	/* exec: airlock itself failed, as ssh does */

/* Dispatch argv[0] among cmds; prints usage on unknown verbs. */
int cli_dispatch(const char *group, const struct cli_cmd *cmds, int argc, char **argv);
void cli_usage(const char *group, const struct cli_cmd *cmds);

/* Print "airlock: <msg>" to stderr; returns CLI_EXIT_FAIL. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print cause as a failure and free it. */
int cli_fail_cause(char *cause);
/* The API client from the environment, or NULL after printing why. */
struct cli_api *cli_connect(void);
/* "<collection>/<name><suffix>" with name escaped as one segment (malloc'd). */
char *cli_named_path(const char *collection, const char *name, const char *suffix);
/* "/v1/sandboxes/<id><suffix>" with id escaped (malloc'd). */
char *cli_sandbox_path(const char *id, const char *suffix);
/*
 * Append key=value (value escaped) to the path or query *q, after '?' for
 * the first parameter and '&' after that; a NULL value adds nothing.
 */
void cli_query_add(char **q, const char *key, const char *value);
/*
 * The shared body of pause/resume/suspend/rm: method + suffix on each ID in
 * argv[1..], "doing ID..." progress on a terminal, "done ID" (or the
 * sandbox as JSON with --json) on stdout. Failures are reported per ID.
 */
int cli_sandbox_op(int argc, char **argv, const char *method, const char *suffix,
    const char *doing, const char *done);
/*
 * One request on a client of its own, for commands that make one call: the
 * answer, or NULL after printing why (the client or the request failed).
 */
json_t *cli_call(const char *method, const char *path, json_t *body, int *status);
/* cli_call on cli_named_path(collection, name, suffix); body (may be NULL) is consumed. */
json_t *cli_call_named(const char *method, const char *collection, const char *name,
    const char *suffix, json_t *body);
/*
 * One DELETE of an rm verb's NAMEs: prints "removed <what> NAME", or
 * {"<key>": NAME, "deleted": true} with json. CLI_EXIT_FAIL after printing why.
 */
int cli_delete(struct cli_api *api, const char *path, const char *what, const char *key,
    const char *name, int json);
/*
 * An rm verb whose arguments are NAMEs and --json: DELETE collection/NAME
 * (NAME escaped) for each, through cli_delete; usage when no NAME is given.
 */
int cli_delete_each(int argc, char **argv, const char *collection, const char *what,
    const char *key, const char *usage);
/* Pretty JSON on stdout, newline-terminated. */
void cli_print_json(const json_t *j);
/* A list answer's array under key as JSON (the whole answer if it has none). */
void cli_print_json_list(const json_t *r, const char *key);
/* A daemon-supplied value as text (strings as is, null as "-", numbers printed). */
const char *cli_field(const json_t *obj, const char *key, char *tmp, size_t tmplen);
/* Print s padded to width, with control characters replaced (no terminal escapes). */
void cli_cell(FILE *f, const char *s, int width);

/* A table's column; tables end with a NULL title. */
struct cli_col {
	const char	*title;
	int		 width;		/* 0 for the last: not padded */
};
/* The heading line, then rows of one cell per column (cli_cell), space-separated. */
void cli_table_head(const struct cli_col *cols);
void cli_table_row(const struct cli_col *cols, const char *const *cells);
/*
 * GET a list and print it: with json the array under key, else cols' heading
 * and row(item) for each item. Returns the answer (the caller frees it), or
 * NULL after printing why.
 */
json_t *cli_list(const char *path, const char *key, int json, const struct cli_col *cols,
    void (*row)(const json_t *));
/*
 * An ls verb whose only option is --json: cli_list, then CLI_EXIT_OK,
 * CLI_EXIT_FAIL (printed why) or CLI_EXIT_USAGE (usage printed).
 */
int cli_list_cmd(int argc, char **argv, const char *usage, const char *path, const char *key,
    const struct cli_col *cols, void (*row)(const json_t *));
/* "2026-11-30T08:00:00.000Z" -> "5m ago"-style age, or the input. */
const char *cli_age(const char *iso, char *buf, size_t len);

/* Argument helpers (pure, unit-tested). */
/* "K=V" with a non-empty K; malloc'd halves. */
int cli_args_kv(const char *s, char **key, char **val, char **cause);
/* "ID:PATH" names a sandbox path (1, malloc'd id/path); anything else is local (0). */
int cli_args_remote(const char *arg, char **id, char **path);
/* A decimal integer in [min, max]; what names it in the cause. */
int cli_args_num(const char *s, long long min, long long max, long long *out,
    const char *what, char **cause);

/* Full usage texts, for --help and usage errors. */
extern const char cmd_create_usage[];
extern const char cmd_exec_usage[];

/* Parsers and runners behind the commands, exposed for unit tests. */
/* create's options as the POST /v1/sandboxes body; 2 = usage error printed. */
int cmd_create_parse(int argc, char **argv, json_t **body, int *json_out, char **cause);

struct cli_exec_opts {
	const char	 *id;
	char		**cmd;		/* points into argv */
	int		  ncmd;
	int		  interactive;	/* -i: forward stdin */
	int		  tty;		/* -t: PTY, raw terminal, resize */
	int		  json;		/* events as JSON lines */
	const char	 *user;
	const char	 *cwd;
	json_t		 *env;
	long long	  timeout;
	long long	  attach;	/* > 0: follow this running process instead */
};
int cmd_exec_parse(int argc, char **argv, struct cli_exec_opts *o, char **cause);
void cmd_exec_opts_free(struct cli_exec_opts *o);
/* Run o in the sandbox; returns the exit code airlock should exit with. */
int cmd_exec_run(struct cli_api *api, struct cli_exec_opts *o, int in_fd, int out_fd,
    int err_fd);
/* cmd_exec_run on this process's stdio, on a client of its own; frees o. */
int cmd_exec_stdio(struct cli_exec_opts *o);

int cmd_template(int argc, char **argv);
int cmd_pool(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_quota(int argc, char **argv);
int cmd_fork(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_volume(int argc, char **argv);
int cmd_cluster(int argc, char **argv);
int cmd_initramfs(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_boot(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_shell(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_suspend(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_secret(int argc, char **argv);
int cmd_audit(int argc, char **argv);

#endif
