/*
 * The REST API: routing, authentication, JSON validation, and the handlers
 * (api_<resource>.c). Handlers validate input and call the sandbox manager;
 * they never touch VMs directly.
 */
#ifndef AIRLOCK_API_H
#define AIRLOCK_API_H

#include <stdint.h>

#include <jansson.h>

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
};

/* One API call: the request, who made it, the path parameters, the JSON body. */
struct api_call {
	struct api		*api;
	struct http_req		*req;
	struct store_key	 key;
	const char		*params[API_PARAMS_MAX];
	char			*pbuf;		/* storage behind params */
	struct http_query	 query;		/* checked against the route's table */
	json_t			*body;		/* parsed JSON object, or NULL */
	int64_t			 start_ns;
	const char		*route;		/* pattern, for metrics */
	struct api_err		 err;
	/*
	 * One reference for the reply (dropped by api_call_done) and one
	 * while the router or body callback runs the handler, so a handler
	 * that replied can still be returned into: the call (and its request
	 * and body) are freed only when both are gone.
	 */
	int			 refs;
	int			 done;		/* replied, or the client left */
};

typedef void (*api_handler)(struct api_call *call);

struct api *api_new(struct event_base *base, struct store *store, const struct config *cfg,
    struct sbm *sbm, struct metrics *metrics);
void api_free(struct api *api);
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
void api_templates_build(struct api_call *c);
void api_events_stream(struct api_call *c);
void api_sandboxes_create(struct api_call *c);
void api_sandboxes_list(struct api_call *c);
void api_sandboxes_get(struct api_call *c);
void api_sandboxes_patch(struct api_call *c);
void api_sandboxes_delete(struct api_call *c);
void api_sandboxes_pause(struct api_call *c);
void api_sandboxes_resume(struct api_call *c);
void api_sandboxes_suspend(struct api_call *c);
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

#endif
