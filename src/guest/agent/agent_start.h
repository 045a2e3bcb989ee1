/*
 * The template's start command (agent_start.c): started by the agent at
 * boot, watched until its ready check passes; POST /init answers only
 * then, so airlockd's create (and a pool's base snapshot) comes after
 * ready (docs/templates.md "Start command and ready check").
 */
#ifndef AIRLOCK_AGENT_START_H
#define AIRLOCK_AGENT_START_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

struct http_req;

#define START_CMD_MAX		4096
#define START_TIMEOUT_MAX	3600		/* s, recipe.h RECIPE_READY_TIMEOUT_MAX */
#define START_TAIL		2048		/* bytes of output kept for the error */
#define START_PORT_MS		100		/* ready.port: a connect every ... */
#define START_CMD_MS		250		/* ready.cmd: a pause between runs */
#define START_WAIT_MAX		16		/* /init requests parked at once */

/* /etc/airlock/start.json as written by template_build.c. */
struct start_cfg {
	char		*cmd;
	char		*user;
	char		*cwd;		/* NULL: the user's home */
	unsigned	 ready_port;	/* 0: none */
	char		*ready_cmd;	/* NULL: none; neither: ready once started */
	unsigned	 timeout_s;
};

/* Parse and validate (pure: the fuzzer calls it). 0, or -1 with err naming the field. */
int start_parse(const char *text, size_t len, struct start_cfg *c, char *err, size_t errlen);
void start_cfg_free(struct start_cfg *c);

/* At boot: read file (absent: no start command) and start it. */
void start_boot(const char *file);
/* SIGCHLD: 1 when pid was the start command or its ready check (reaped here). */
int start_reaped(pid_t pid, int status);
/* The end of POST /init: 204 once ready (at once if there is nothing to wait for), 500 if it failed. */
void start_init_reply(struct http_req *req);
/* After /init changed the env: /run/airlock/env.json for the start command's user. */
void start_write_env(void);
/* GET /airlock/start: state, pid, cause, output tail. */
json_t *start_status(void);

#endif
