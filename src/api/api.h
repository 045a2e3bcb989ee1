/*
 * The REST API: routing, authentication, JSON validation, and the handlers
 * (api_<resource>.c). Handlers validate input and call the sandbox manager;
 * they never touch VMs directly.
 */
#ifndef AIRLOCK_API_H
#define AIRLOCK_API_H

#include <stdint.h>

#include <jansson.h>

#include "common/ref.h"
#include "http/http_server.h"
#include "common/json_time.h"
#include "db/store.h"

#define API_PARAMS_MAX	4
#define API_ID_LEN	20	/* sandbox ids: 20 lowercase alphanumerics, like E2B */
#define API_LOG_TAIL_MAX	(4 * 1024 * 1024)
#define API_FILES_PATH_MAX	4096

struct config;
struct sbm;
struct metrics;

struct api_ratelimit;

struct api {
	struct event_base	*base;
	struct store		*store;
	struct http_server	*srv;
	const struct config	*cfg;
	struct sbm		*sbm;
	struct metrics		*metrics;
	struct api_sub_list	*subs;		/* live event subscribers */
	const char		*accel_name;
	int64_t			 started_ms;
	struct api_ratelimit	*rl;		/* requests per key (api_ratelimit.h) */
	/*
	 * A cluster worker (airlockd --role worker): its name, and how it
	 * drains (POST /v1/workers/{name}/drain). NULL in direct mode.
	 */
	const char		*worker_name;
	void			(*drain)(void *arg);
	void			*drain_arg;
};

/*
 * The query parameters a route accepts, with their types: the router
 * refuses anything else (unknown names, bad values) with a 400 naming the
 * parameter before the handler runs, so handlers read checked values.
 */
enum api_qtype {
	API_Q_STR,		/* min..max bytes of UTF-8 */
	API_Q_INT,		/* decimal digits (optional '-'), in min..max */
	API_Q_BOOL,		/* true | false */
	API_Q_ENUM,		/* one of values */
	API_Q_ENUMLIST,		/* comma-separated values */
};
struct api_qparam {
	const char		*name;
	enum api_qtype		 type;
	int			 required;
	long long		 min, max;
	const char *const	*values;
};

/*
 * The error a check found: a validator records it and returns -1, it does
 * not reply. The call's owner sends the one reply (api_router and the body
 * callback send the recorded error once the handler has returned).
 */
struct api_err {
	int			 status;	/* 0: none */
	const char		*code;
	char			 field[64];	/* "" when not about one field */
	char			*message;
	int			 retry_after_s;	/* > 0: sent as Retry-After */
};

/* Which error shape a call answers in: airlock's, or E2B's (src/e2b/). */
enum api_style { API_STYLE_AIRLOCK, API_STYLE_E2B };

/* One API call: the request, who made it, the path parameters, the JSON body. */
struct api_call {
	enum api_style		 style;
	struct api		*api;
	struct http_req		*req;
	struct store_key	 key;
	const char		*params[API_PARAMS_MAX];
	char			*pbuf;		/* storage behind params */
	struct http_query	 query;		/* checked against the route's table */
	json_t			*body;		/* parsed JSON object, or NULL */
	uint64_t		 start_ns;
	const char		*route;		/* pattern, for metrics */
	struct api_err		 err;
	/*
	 * common/ref.h: the owner's reference is the reply's (dropped by
	 * api_call_done, which also marks the call dead: replied, or the
	 * client left), and one is held while the router or body callback
	 * runs the handler, so a handler that replied can still be returned
	 * into: the call (and its request and body) go at the last.
	 */
	struct ref		 ref;
};

typedef void (*api_handler)(struct api_call *call);

/*
 * The pieces of api_router, for a second front on the same calls (src/e2b/):
 * a call holding req, path matching into params (then checked as UTF-8),
 * the query against a table (unknown names refused or, for E2B, ignored),
 * a key's project and role, the JSON body, and the one dispatch that runs
 * a handler and sends the recorded error. Each check records and returns -1.
 */
struct api_call *api_call_new(struct api *api, struct http_req *req);

/* A route: method, path pattern (":name" segments match one segment), the front's flags. */
struct api_route {
	const char		*method;
	const char		*pattern;
	api_handler		 handler;
	int			 flags;		/* API_ROUTE_JSON*, and each front's own bits */
	const struct api_qparam	*query;		/* accepted query parameters; NULL: none */
};
#define API_ROUTE_JSON		0x04	/* a JSON object body is required */
#define API_ROUTE_JSON_OPT	0x08	/* a JSON object body is optional (empty = {}) */
/*
 * The one route matcher: the route for the call's method and path (HEAD
 * matches GET) in a table ending in a NULL method, with c->route set and
 * the path parameters in c->params; NULL with a 405 (the path is known) or
 * a 404 recorded, front naming the table in the 404 ("" for airlock's).
 */
const struct api_route *api_route_lookup(struct api_call *c, const struct api_route *routes,
    const char *front);
/* A request body, when there is one, must be JSON: 415 recorded otherwise. */
int api_body_json_check(struct api_call *c);
/*
 * Run r's handler once the call's (bounded) body is in, parsed into
 * c->body when r takes JSON. A body that never arrives (client gone, over
 * the limit, bad framing) just ends the call: the server has answered.
 */
void api_route_run_buffered(struct api_call *c, const struct api_route *r);
int api_route_match(const char *pattern, const char *path, struct api_call *c);
int api_params_check(struct api_call *c, const char *pattern);
int api_query_check(struct api_call *c, const struct api_qparam *spec, int ignore_unknown);
int api_authenticate_key(struct api_call *c, const char *key);
int api_parse_json_body(struct api_call *c, int optional);
int api_content_type_json(const char *ct);
void api_dispatch(struct api_call *c, api_handler handler);

struct api *api_new(struct event_base *base, struct store *store, const struct config *cfg,
    struct sbm *sbm, struct metrics *metrics);
void api_free(struct api *api);
struct evbuffer;
/* GET /metrics's text (Prometheus), also served on a worker's health_listen. */
void api_metrics_render(struct api *api, struct evbuffer *out);
void api_router(struct http_req *req, void *arg);

/* Seconds since the call started (monotonic). */
double api_elapsed(const struct api_call *c);
/* Finish a call: the reply was sent (or the client left); drops the reply's reference. */
void api_call_done(struct api_call *call);

/*
 * Record the call's error (the first one sticks) and return -1; nothing
 * is sent. field names the parameter or body field (NULL: none). A
 * handler returns as soon as a check fails: its caller replies.
 */
int api_fail(struct api_call *c, int status, const char *code, const char *field,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/*
 * JSON validation: on failure these record a 400 naming the field
 * (api_fail) and return -1. null is refused: a field is either absent
 * (the default) or has a value of its type.
 */
int api_check_fields(struct api_call *c, json_t *obj, const char *where,
    const char *const *allowed);
int api_get_string(struct api_call *c, json_t *obj, const char *field, int required,
    size_t maxlen, const char **out);
int api_get_int(struct api_call *c, json_t *obj, const char *field, long long min,
    long long max, long long def, long long *out);
int api_get_bool(struct api_call *c, json_t *obj, const char *field, int def, int *out);
/* An object of string values (env, metadata), at most maxkeys entries. */
int api_get_strmap(struct api_call *c, json_t *obj, const char *field, size_t maxkeys,
    int env_keys, json_t **out);

/* Query values, already checked by the router against the route's table. */
const char *api_query_str(const struct api_call *c, const char *name);	/* NULL if absent */
long long api_query_int(const struct api_call *c, const char *name, long long def);
int api_query_bool(const struct api_call *c, const char *name, int def);

/*
 * Replies; each finishes the call. After the call finished they are a
 * bug: logged and dropped, never a second answer (api_json frees body).
 */
void api_error(struct api_call *c, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void api_json(struct api_call *c, int status, json_t *body);
void api_no_content(struct api_call *c);

/* Record an event in the store and push it to live subscribers; steals data. */
void api_event(struct api *api, const char *sandbox, const char *project, const char *type,
    json_t *data);


/* Handlers by resource. */
void api_system_healthz(struct api_call *c);
void api_system_metrics(struct api_call *c);
void api_system_openapi(struct api_call *c);
void api_workers_drain(struct api_call *c);
void api_quota_put(struct api_call *c);
void api_quota_get(struct api_call *c);
void api_quota_delete(struct api_call *c);
/* A project name: 1-63 of a-z 0-9, then also - and _ (keys, quotas). */
int api_project_valid(const char *p);
void api_keys_create(struct api_call *c);
void api_keys_list(struct api_call *c);
void api_keys_delete(struct api_call *c);
void api_secrets_put(struct api_call *c);
void api_secrets_list(struct api_call *c);
void api_secrets_get(struct api_call *c);
void api_secrets_delete(struct api_call *c);
void api_audit_list(struct api_call *c);
void api_templates_list(struct api_call *c);
void api_templates_delete(struct api_call *c);
void api_pools_list(struct api_call *c);
void api_pools_put(struct api_call *c);
void api_templates_build(struct api_call *c);
/* POST /v1/templates/{name}/build: a context tar holding a Dockerfile (R_STREAM). */
void api_templates_build_context(struct api_call *c);
void api_templates_import(struct api_call *c);
void api_volumes_create(struct api_call *c);
void api_volumes_list(struct api_call *c);
void api_volumes_get(struct api_call *c);
void api_volumes_delete(struct api_call *c);
/*
 * A template build in a forked child (run(fd, name, arg) writes JSON lines
 * to fd with api_build_progress / api_build_result), its lines relayed as
 * SSE. deferred: the 200 stream starts only at the child's {"kind":"checked"}
 * line, and an error before it is a plain 400 (the client's input was bad).
 */
typedef void (*api_build_fn)(int fd, const char *name, void *arg);
void api_build_spawn(struct api_call *c, const char *name, api_build_fn run, void *arg,
    int deferred);
void api_build_progress(void *arg, int step, int nsteps, const char *msg);
void api_build_result(int fd, const char *error) __attribute__((noreturn));
/* Every built template's template.json, as an array (new reference). */
json_t *api_templates_all(void);
/* The same with the store's last use of each; and the store record after an install. */
json_t *api_templates_list_json(struct api *api);
void api_templates_record(struct api *api, const char *name);
void api_events_stream(struct api_call *c);
void api_sandboxes_create(struct api_call *c);
void api_sandboxes_list(struct api_call *c);
void api_sandboxes_get(struct api_call *c);
void api_sandboxes_patch(struct api_call *c);
void api_sandboxes_delete(struct api_call *c);
void api_sandboxes_pause(struct api_call *c);
void api_sandboxes_resume(struct api_call *c);
void api_sandboxes_suspend(struct api_call *c);
void api_sandboxes_fork(struct api_call *c);
void api_snapshots_create(struct api_call *c);
void api_snapshots_list(struct api_call *c);
void api_snapshots_delete(struct api_call *c);
/* network {mode, allow, rate} validated as the gateway will parse it (api_sandboxes.c). */
int api_parse_network_value(struct api_call *c, json_t *n, json_t **out);
void api_sandboxes_logs(struct api_call *c);
void api_sandboxes_metrics(struct api_call *c);
void api_exec_start(struct api_call *c);
void api_exec_list(struct api_call *c);
void api_exec_stream(struct api_call *c);
void api_exec_stdin(struct api_call *c);
void api_exec_signal(struct api_call *c);
void api_exec_resize(struct api_call *c);
void api_files_get(struct api_call *c);
void api_files_put(struct api_call *c);
void api_files_list(struct api_call *c);
void api_files_stat(struct api_call *c);
void api_files_mkdir(struct api_call *c);
void api_files_move(struct api_call *c);
void api_files_remove(struct api_call *c);
void api_files_watch(struct api_call *c);

/* Key hashing shared with bootstrap: hex sha256 of the presented key. */
void api_key_hash(const char *key, char out[65]);
/* Create a key; returns the secret (malloc'd) or NULL with a cause. */
char *api_key_create(struct store *st, const char *name, const char *project, const char *role,
    struct store_key *out, char **cause);
/* The same; e2b: in E2B's format, e2b_ + 40 hex (still an airlock key). */
char *api_key_create_fmt(struct store *st, const char *name, const char *project,
    const char *role, int e2b, struct store_key *out, char **cause);

#endif
