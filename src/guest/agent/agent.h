/*
 * airlock-agent: the guest agent (PID 1 in every sandbox). Shared state and
 * the interfaces between its files:
 *   agent.c          PID 1 duties, the channel (virtio port or host socket)
 *   chan_*.c         channel protocol, shared with the host client
 *   http/http_*.c    the HTTP/1.1 parser and server airlockd's API runs on,
 *                    serving each stream to port 49983 (ag_http)
 *   agent_api.c      the route table, auth, /health /init /metrics, users and paths
 *   agent_init.c     POST /init: identity, clock, entropy after boot/restore
 *   agent_connect.c  Connect protocol envelopes and errors
 *   agent_proc.c     process.Process
 *   agent_fs.c       filesystem.Filesystem
 *   agent_files.c    GET/POST /files, agent_multipart.c its body parser
 *   agent_meta.c     E2B file metadata: X-Metadata-* headers <-> user.e2b.* xattrs
 *   agent_work.c     blocking filesystem work in threads, off the loop
 *   agent_errno.c    errno -> Connect code / HTTP status / name
 *   agent_start.c    the template's start command and its ready check
 */
#ifndef AIRLOCK_AGENT_H
#define AIRLOCK_AGENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

struct event_base;
struct http_req;
struct http_server;
struct http_req;

#define AGENT_ENV_FILE		"/etc/airlock/env"
#define AGENT_START_FILE	"/etc/airlock/start.json"	/* written by template_build.c */
#define AGENT_NET_IF		"eth0"		/* virtio-net, when the sandbox has a network */
#define AGENT_NET_ADDR		"10.0.0.2"	/* net/net_island.h NET_GUEST_ADDR */
#define AGENT_NET_GATEWAY	"10.0.0.1"
#define AGENT_DEFAULT_USER	"user"
#define AGENT_MAX_ENV		1024		/* sandbox env vars */
/* In the name of an upload's temporary file, ".<name>" AGENT_UPLOAD_TMP_MARK "<random>". */
#define AGENT_UPLOAD_TMP_MARK	".airlock-upload-"

struct agent {
	struct event_base	*ag_base;
	struct http_server	*ag_http;	/* every stream to port 49983 */
	int			 ag_pid1;	/* we are init: reap all, power off */
	const char		*ag_default_user;
	const char		*ag_passwd;	/* /etc/passwd (tests point elsewhere) */
	char			*ag_token;	/* X-Access-Token required when set */
	char			**ag_env;	/* sandbox env vars, "K=V" */
	size_t			 ag_nenv;
	uint64_t		 ag_started_ns;
};

extern struct agent ag;

void alog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agent_poweroff(const char *why);

/* Users, from ag_passwd parsed by hand (no NSS: we are static). */
struct agent_user {
	char	name[64];
	uid_t	uid;
	gid_t	gid;
	char	home[256];
	char	shell[256];
};
int user_lookup(const char *name, struct agent_user *u);
/*
 * The acting user of a request: Basic auth "<user>:" or ?username=, else
 * the default. -1 with *why when the user does not exist.
 */
int api_user(const struct http_req *req, const char *name, struct agent_user *u,
    const char **why);
/*
 * Resolve a request path like envd: "" = home (workdir), "~" and "~/x" =
 * home, relative = under home. Returns a malloc'd absolute, lexically
 * cleaned path, or NULL for a path that is too long.
 */
char *path_resolve(const char *path, const struct agent_user *u);
/* mkdir -p of path's parents, owned by u when created. */
int mkdir_parents(const char *path, const struct agent_user *u);
void env_set(char ***env, size_t *nenv, const char *key, const char *value);

/*
 * The agent's HTTP limits. Only airlockd reaches the agent (through the
 * channel), so these catch a stuck host, not an attacker: no write
 * timeout (a host that stops reading holds a process stream back, as a
 * slow client does), bodies may pause for long. Heads are capped by the
 * shared parser (HTTP_HEAD_MAX, 16 KiB: envd clients send a few hundred
 * bytes; the agent took 64 KiB before sharing it).
 */
#define AGENT_HTTP_CONNS_MAX	1024
#define AGENT_HTTP_HEAD_MS	(60 * 1000)
#define AGENT_HTTP_IDLE_MS	(300 * 1000)
#define AGENT_HTTP_BODY_MS	(3600 * 1000)	/* a body's first allowance, then 1 B/s */

/* Routing of one request (agent_api.c): the router of ag_http. */
void api_route(struct http_req *, void *arg);
/* The server's own errors (400, 413, 431, ...) in envd's {"code":N,"message":...}. */
json_t *api_error_body(int status, const char *code, const char *message);

/* Connect protocol (agent_connect.c). */
#define CONNECT_MAX_MSG		(4 * 1024 * 1024)
/*
 * Parse exactly one enveloped message: 0 with *flags, *msg and *msglen, or -1
 * with *err. Pure: the fuzzer calls it.
 */
int connect_env_parse(const uint8_t *buf, size_t len, uint8_t *flags, const uint8_t **msg,
    size_t *msglen, const char **err);
/* Unary answers. */
void connect_reply(struct http_req *, json_t *msg);	/* steals msg */
void connect_error(struct http_req *, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A failed syscall: the code from errno_connect_code, "<what>: ENAME (text)", "errno". */
void connect_error_errno(struct http_req *, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int connect_http_status(const char *code);
/* Server streams: 200 + message envelopes + one end-stream envelope. */
void connect_stream_start(struct http_req *);
void connect_stream_msg(struct http_req *, json_t *msg);	/* steals msg */
void connect_stream_end(struct http_req *, const char *code, const char *msg);
/*
 * The request message of a unary call (JSON body) or a stream (one
 * envelope). NULL after replying with the error.
 */
json_t *connect_request(struct http_req *, int streaming);
/*
 * A Connect service's methods (NULL-terminated): every request is one
 * message, buffered (at most CONNECT_MAX_MSG) before end runs; unknown
 * methods are "unimplemented".
 */
struct connect_method {
	const char	*name;
	void		(*end)(struct http_req *, void *);
};
void connect_route(struct http_req *, const char *service, const struct connect_method *table,
    const char *method);
/* JSON helpers: lowerCamel with snake_case accepted on input. */
json_t *jget(json_t *obj, const char *camel, const char *snake);
int64_t jint(json_t *v, int64_t def);	/* number or numeric string */

/*
 * File metadata (agent_meta.c). meta_from_head: the X-Metadata-* headers
 * of a request as {key: value} (NULL when there are none), or -1 with why.
 * meta_fset: set them as user.e2b.* xattrs on fd. meta_read: a path's
 * user.e2b.* xattrs, prefix stripped, or NULL when it has none.
 */
#define META_KEY_MAX	246	/* "user.e2b." + key within XATTR_NAME_MAX */
#define META_TOTAL_MAX	4096	/* "user.e2b." + key + value, summed over a file */
struct http_head;
int meta_from_head(const struct http_head *, json_t **out, char *why, size_t whylen);
int meta_fset(int fd, const json_t *m);
json_t *meta_read(const char *path);

void agent_sha256(const void *data, size_t len, uint8_t out[32]);

/*
 * Guest errno of a failed file operation, as the client should see it:
 * the Connect code (not_found, already_exists, invalid_argument,
 * failed_precondition, permission_denied, resource_exhausted, internal),
 * the HTTP status of the REST /files answer, and the symbolic name
 * ("EXDEV"), which every error message carries and error bodies repeat as
 * "errno" (airlockd maps on the code, people read the name).
 */
const char *errno_connect_code(int err);
int errno_http_status(int err);
const char *errno_name(int err);

/*
 * Blocking work off the event loop (agent_work.c). fn runs in a thread
 * and may only make syscalls on memory arg owns (no libevent, no
 * http_conn, no agent globals). done(arg, late) runs on the loop exactly
 * once: late = 0 when fn returned, 1 when deadline_ms passed first (fn is
 * still blocked; answer "deadline_exceeded"). release(arg) runs on the
 * loop after both. -1 with *why when the job cannot start (the caller
 * still owns arg).
 */
#define AGENT_WORK_MAX		32		/* threads at once */
#define AGENT_WORK_STACK	(1024 * 1024)
#define AGENT_FS_DEADLINE_MS	60000		/* per file operation */
typedef void work_fn(void *arg);
typedef void work_done_fn(void *arg, int late);
typedef void work_release_fn(void *arg);
int work_run(work_fn *fn, work_done_fn *done, work_release_fn *release, void *arg,
    int deadline_ms, const char **why);

/* Services. */
void proc_init(void);
/* Route handlers: method is the Connect method after the service prefix. */
void proc_route(struct http_req *, const char *method);
void proc_sigchld(void);
void proc_shutdown(int sig);
/*
 * /bin/sh -c cmd as u in cwd, outside the process table (agent_start.c
 * reaps it): stdin /dev/null, stdout and stderr non-blocking pipes in *out
 * and *err. The pid (a session leader), or -1 with why.
 */
pid_t proc_spawn_shell(const char *cmd, const struct agent_user *u, const char *cwd,
    char **envp, int *out, int *err, char *why, size_t whylen);
void fs_route(struct http_req *, const char *method);
void files_route(struct http_req *, const char *rest);

#endif
