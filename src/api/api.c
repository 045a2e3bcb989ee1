/* Routing, authentication and the call lifecycle of the REST API. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "api/api.h"
#include "api/api_events.h"
#include "api/api_ratelimit.h"
#include "config/config.h"
#include "api/metrics.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/sbm.h"

enum {
	R_NOAUTH	= 0x01,
	R_ADMIN		= 0x02,
	R_JSON		= API_ROUTE_JSON,
	R_JSON_OPT	= API_ROUTE_JSON_OPT,
	R_STREAM	= 0x10,	/* the handler streams the body itself */
};

static const char *const q_scopes[] = { "global", "project", "sandbox", NULL };
static const char *const q_decisions[] = { "allow", "deny", NULL };
static const char *const q_kinds[] = { "dns", "tls", "http", "l4", NULL };

static const struct api_qparam q_sandboxes[] = {
	{ "state", API_Q_ENUMLIST, 0, 0, 0, sb_state_names },
	{ "metadata", API_Q_STR, 0, 1, 65536, NULL },
	{ "limit", API_Q_INT, 0, 1, 1000, NULL },
	{ "after", API_Q_STR, 0, 1, STORE_ID_MAX - 1, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_secret[] = {
	{ "scope", API_Q_ENUM, 0, 0, 0, q_scopes },
	{ "sandbox", API_Q_STR, 0, 1, STORE_ID_MAX - 1, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_audit[] = {
	{ "sandbox", API_Q_STR, 0, 1, STORE_ID_MAX - 1, NULL },
	{ "decision", API_Q_ENUM, 0, 0, 0, q_decisions },
	{ "kind", API_Q_ENUM, 0, 0, 0, q_kinds },
	{ "since", API_Q_STR, 0, 1, 64, NULL },
	{ "until", API_Q_STR, 0, 1, 64, NULL },
	{ "limit", API_Q_INT, 0, 1, 1000, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_snapshots[] = {
	{ "source", API_Q_STR, 0, 1, STORE_ID_MAX - 1, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_events[] = {
	{ "after", API_Q_INT, 0, 0, INT64_MAX, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_logs[] = {
	{ "tail", API_Q_INT, 0, 1, API_LOG_TAIL_MAX, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_path[] = {
	{ "path", API_Q_STR, 1, 1, API_FILES_PATH_MAX, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_put[] = {
	{ "path", API_Q_STR, 1, 1, API_FILES_PATH_MAX, NULL },
	{ "mode", API_Q_STR, 0, 1, 5, NULL },	/* octal, checked by the handler */
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_list[] = {
	{ "path", API_Q_STR, 1, 1, API_FILES_PATH_MAX, NULL },
	{ "depth", API_Q_INT, 0, 1, 64, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_watch[] = {
	{ "path", API_Q_STR, 1, 1, API_FILES_PATH_MAX, NULL },
	{ "recursive", API_Q_BOOL, 0, 0, 0, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};

static const struct api_qparam q_tbuild[] = {
	{ "dockerfile", API_Q_STR, 0, 1, 255, NULL },
	{ "no_cache", API_Q_BOOL, 0, 0, 0, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};

static const struct api_route api_routes[] = {
	{ "GET", "/healthz", api_system_healthz, R_NOAUTH, NULL },
	{ "GET", "/metrics", api_system_metrics, R_NOAUTH, NULL },
	{ "GET", "/v1/openapi.json", api_system_openapi, R_NOAUTH, NULL },
	{ "POST", "/v1/keys", api_keys_create, R_ADMIN | R_JSON, NULL },
	{ "GET", "/v1/keys", api_keys_list, R_ADMIN, NULL },
	{ "DELETE", "/v1/keys/:id", api_keys_delete, R_ADMIN, NULL },
	{ "PUT", "/v1/secrets/:name", api_secrets_put, R_JSON, NULL },
	{ "GET", "/v1/secrets", api_secrets_list, 0, q_secret },
	{ "GET", "/v1/secrets/:name", api_secrets_get, 0, q_secret },
	{ "DELETE", "/v1/secrets/:name", api_secrets_delete, 0, q_secret },
	{ "GET", "/v1/audit", api_audit_list, 0, q_audit },
	{ "GET", "/v1/templates", api_templates_list, 0, NULL },
	{ "POST", "/v1/templates", api_templates_build, R_ADMIN | R_JSON, NULL },
	{ "DELETE", "/v1/templates/:name", api_templates_delete, R_ADMIN, NULL },
	{ "POST", "/v1/templates/:name/build", api_templates_build_context, R_ADMIN | R_STREAM,
	  q_tbuild },
	{ "PUT", "/v1/templates/:name/image", api_templates_import, R_ADMIN | R_STREAM, NULL },
	{ "POST", "/v1/volumes", api_volumes_create, R_JSON, NULL },
	{ "GET", "/v1/volumes", api_volumes_list, 0, NULL },
	{ "GET", "/v1/volumes/:name", api_volumes_get, 0, NULL },
	{ "DELETE", "/v1/volumes/:name", api_volumes_delete, 0, NULL },
	{ "GET", "/v1/pools", api_pools_list, 0, NULL },
	{ "POST", "/v1/workers/:name/drain", api_workers_drain, R_ADMIN | R_JSON_OPT, NULL },
	{ "PUT", "/v1/projects/:project/quota", api_quota_put, R_ADMIN | R_JSON, NULL },
	{ "GET", "/v1/projects/:project/quota", api_quota_get, R_ADMIN, NULL },
	{ "DELETE", "/v1/projects/:project/quota", api_quota_delete, R_ADMIN, NULL },
	{ "PUT", "/v1/pools/:template", api_pools_put, R_ADMIN | R_JSON, NULL },
	{ "GET", "/v1/events", api_events_stream, 0, q_events },
	{ "GET", "/v1/sandboxes/:id/events", api_events_stream, 0, q_events },
	{ "POST", "/v1/sandboxes", api_sandboxes_create, R_JSON_OPT, NULL },
	{ "GET", "/v1/sandboxes", api_sandboxes_list, 0, q_sandboxes },
	{ "GET", "/v1/sandboxes/:id", api_sandboxes_get, 0, NULL },
	{ "PATCH", "/v1/sandboxes/:id", api_sandboxes_patch, R_JSON, NULL },
	{ "DELETE", "/v1/sandboxes/:id", api_sandboxes_delete, 0, NULL },
	{ "POST", "/v1/sandboxes/:id/pause", api_sandboxes_pause, R_JSON_OPT, NULL },
	{ "POST", "/v1/sandboxes/:id/resume", api_sandboxes_resume, R_JSON_OPT, NULL },
	{ "POST", "/v1/sandboxes/:id/suspend", api_sandboxes_suspend, R_JSON_OPT, NULL },
	{ "POST", "/v1/sandboxes/:id/fork", api_sandboxes_fork, R_JSON_OPT, NULL },
	{ "POST", "/v1/sandboxes/:id/snapshots", api_snapshots_create, R_JSON, NULL },
	{ "GET", "/v1/snapshots", api_snapshots_list, 0, q_snapshots },
	{ "DELETE", "/v1/snapshots/:name", api_snapshots_delete, 0, NULL },
	{ "GET", "/v1/sandboxes/:id/logs", api_sandboxes_logs, 0, q_logs },
	{ "GET", "/v1/sandboxes/:id/metrics", api_sandboxes_metrics, 0, NULL },
	{ "POST", "/v1/sandboxes/:id/exec", api_exec_start, R_JSON, NULL },
	{ "GET", "/v1/sandboxes/:id/processes", api_exec_list, 0, NULL },
	{ "GET", "/v1/sandboxes/:id/processes/:pid/stream", api_exec_stream, 0, NULL },
	{ "POST", "/v1/sandboxes/:id/processes/:pid/stdin", api_exec_stdin, R_JSON, NULL },
	{ "POST", "/v1/sandboxes/:id/processes/:pid/signal", api_exec_signal, R_JSON, NULL },
	{ "POST", "/v1/sandboxes/:id/processes/:pid/resize", api_exec_resize, R_JSON, NULL },
	{ "GET", "/v1/sandboxes/:id/files", api_files_get, 0, q_path },
	{ "PUT", "/v1/sandboxes/:id/files", api_files_put, R_STREAM, q_put },
	{ "GET", "/v1/sandboxes/:id/files/list", api_files_list, 0, q_list },
	{ "GET", "/v1/sandboxes/:id/files/stat", api_files_stat, 0, q_path },
	{ "POST", "/v1/sandboxes/:id/files/mkdir", api_files_mkdir, R_JSON, NULL },
	{ "POST", "/v1/sandboxes/:id/files/move", api_files_move, R_JSON, NULL },
	{ "POST", "/v1/sandboxes/:id/files/remove", api_files_remove, R_JSON, NULL },
	{ "GET", "/v1/sandboxes/:id/files/watch", api_files_watch, 0, q_watch },
	{ NULL, NULL, NULL, 0, NULL }
};

/* --- call lifecycle ---------------------------------------------------- */

double
api_elapsed(const struct api_call *c)
{
	return (double)(monotonic_ns() - c->start_ns) / 1e9;
}

static void
api_call_release(void *arg)
{
	struct api_call *c = arg;

	http_req_unref(c->req);
	json_decref(c->body);
	http_query_free(&c->query);
	free(c->err.message);
	free(c->pbuf);
	free(c);
}

static void
api_call_unref(struct api_call *c)
{
	ref_put(&c->ref, api_call_release, c);
}

/* A reply to a finished call is a bug in its handler: say so, send nothing. */
static int
api_call_finished(struct api_call *c, int status)
{
	if (!ref_dead(&c->ref))
		return 0;
	log_warnx("api %s %s: bug: reply %d after the call finished, dropped",
	    http_req_method(c->req), c->route, status);
	return 1;
}

void
api_call_done(struct api_call *c)
{
	if (api_call_finished(c, 0))
		return;
	(void)ref_kill(&c->ref);
	metrics_observe_request(c->api->metrics, c->route, http_req_method(c->req),
	    api_elapsed(c));
	api_call_unref(c);
}

/* The one error reply: {"error":{"code","message","field"?}}, every string made UTF-8. */
static void
api_send_error(struct api_call *c, int status, const char *code, const char *field,
    const char *msg)
{
	const char *text = msg != NULL ? msg : code;
	json_t *err;

	if (api_call_finished(c, status))
		return;
	/*
	 * A 5xx is ours, never the client's: it must leave a trace with its
	 * cause, on one line (a cause may quote what a guest agent sent).
	 */
	if (status >= 500) {
		char *line = utf8_escape(text, strlen(text), 0), *p;
		for (p = line; *p != '\0'; p++)
			if (*p == '\n' || *p == '\t')
				*p = ' ';
		log_warnx("api %s %s: %d %s", http_req_method(c->req), c->route, status, line);
		free(line);
	}
	metrics_count_error(c->api->metrics, status);
	if (c->err.retry_after_s > 0) {
		char ra[16];

		snprintf(ra, sizeof(ra), "%d", c->err.retry_after_s);
		http_req_add_header(c->req, "Retry-After", ra);
	}
	if (c->style == API_STYLE_E2B) {
		/* E2B's Error: {"code": <HTTP status>, "message"}; the SDKs read code. */
		err = json_pack("{s:i,s:o}", "code", status,
		    "message", json_text(text));
		if (field != NULL && *field != '\0' && utf8_valid(field, strlen(field)))
			json_object_set_new(err, "field", json_string(field));
		http_reply_json(c->req, status, err);
		api_call_done(c);
		return;
	}
	/* Messages may quote a guest (an agent's refusal): json_text keeps its bytes visible. */
	err = json_pack("{s:s,s:o}", "code", code, "message", json_text(text));
	if (field != NULL && *field != '\0' && utf8_valid(field, strlen(field)))
		json_object_set_new(err, "field", json_string(field));
	http_reply_json(c->req, status, json_pack("{s:o}", "error", err));
	api_call_done(c);
}

void
api_error(struct api_call *c, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	api_send_error(c, status, code, NULL, msg);
	free(msg);
}

int
api_fail(struct api_call *c, int status, const char *code, const char *field,
    const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (c->err.status != 0)
		return -1;
	va_start(ap, fmt);
	xvasprintf(&msg, fmt, ap);
	va_end(ap);
	c->err.status = status;
	c->err.code = code;
	snprintf(c->err.field, sizeof(c->err.field), "%s", field != NULL ? field : "");
	c->err.message = msg;
	return -1;
}

/*
 * Run a handler with the call held. A check that failed recorded its error
 * and the handler returned: this is the one reply for it.
 */
void
api_dispatch(struct api_call *c, api_handler handler)
{
	ref_get(&c->ref);
	if (handler != NULL && c->err.status == 0)
		handler(c);
	if (c->err.status != 0 && !ref_dead(&c->ref))
		api_send_error(c, c->err.status, c->err.code, c->err.field, c->err.message);
	api_call_unref(c);
}

void
api_json(struct api_call *c, int status, json_t *body)
{
	if (api_call_finished(c, status)) {
		json_decref(body);
		return;
	}
	http_reply_json(c->req, status, body);
	api_call_done(c);
}

void
api_no_content(struct api_call *c)
{
	if (api_call_finished(c, 204))
		return;
	http_reply(c->req, 204, NULL, NULL, 0);
	api_call_done(c);
}

/* --- validation helpers ------------------------------------------------ */

int
api_check_fields(struct api_call *c, json_t *obj, const char *where, const char *const *allowed)
{
	const char *key, *const *a;
	json_t *v;

	json_object_foreach(obj, key, v) {
		for (a = allowed; *a != NULL; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (*a == NULL) {
			char field[64];
			snprintf(field, sizeof(field), "%s%s%s", where, *where ? "." : "", key);
			return api_fail(c, 400, "bad_request", field, "%s%sunknown field \"%s\"",
			    where, *where ? ": " : "", key);
		}
	}
	return 0;
}

/* A field that is there but null: refused, since leaving it out is how to say "default". */
static int
api_null(struct api_call *c, const char *field)
{
	return api_fail(c, 400, "bad_request", field, "%s: must not be null (leave the field "
	    "out for the default)", field);
}

int
api_get_string(struct api_call *c, json_t *obj, const char *field, int required, size_t maxlen,
    const char **out)
{
	json_t *v = json_object_get(obj, field);

	*out = NULL;
	if (v == NULL) {
		if (required)
			return api_fail(c, 400, "bad_request", field, "%s: required", field);
		return 0;
	}
	if (json_is_null(v))
		return api_null(c, field);
	if (!json_is_string(v))
		return api_fail(c, 400, "bad_request", field, "%s: must be a string", field);
	if (json_string_length(v) > maxlen || strlen(json_string_value(v)) != json_string_length(v))
		return api_fail(c, 400, "bad_request", field, "%s: must be at most %zu bytes, "
		    "without NUL", field, maxlen);
	*out = json_string_value(v);
	return 0;
}

int
api_get_int(struct api_call *c, json_t *obj, const char *field, long long min, long long max,
    long long def, long long *out)
{
	json_t *v = json_object_get(obj, field);

	*out = def;
	if (v == NULL)
		return 0;
	if (json_is_null(v))
		return api_null(c, field);
	if (!json_is_integer(v))
		return api_fail(c, 400, "bad_request", field, "%s: must be an integer", field);
	if (json_integer_value(v) < min || json_integer_value(v) > max)
		return api_fail(c, 400, "bad_request", field, "%s: must be in %lld..%lld", field,
		    min, max);
	*out = json_integer_value(v);
	return 0;
}

int
api_get_bool(struct api_call *c, json_t *obj, const char *field, int def, int *out)
{
	json_t *v = json_object_get(obj, field);

	*out = def;
	if (v == NULL)
		return 0;
	if (json_is_null(v))
		return api_null(c, field);
	if (!json_is_boolean(v))
		return api_fail(c, 400, "bad_request", field, "%s: must be true or false", field);
	*out = json_is_true(v);
	return 0;
}

static int
env_key_ok(const char *k)
{
	size_t i;

	if (*k == '\0' || (*k >= '0' && *k <= '9') || strlen(k) > 256)
		return 0;
	for (i = 0; k[i] != '\0'; i++)
		if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= 'a' && k[i] <= 'z') ||
		    (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
			return 0;
	return 1;
}

int
api_get_strmap(struct api_call *c, json_t *obj, const char *field, size_t maxkeys, int env_keys,
    json_t **out)
{
	json_t *v = json_object_get(obj, field), *x;
	const char *k;

	*out = NULL;
	if (v == NULL) {
		*out = json_object();
		return 0;
	}
	if (json_is_null(v))
		return api_null(c, field);
	if (!json_is_object(v) || json_object_size(v) > maxkeys)
		return api_fail(c, 400, "bad_request", field, "%s: must be an object of at most "
		    "%zu string values", field, maxkeys);
	json_object_foreach(v, k, x) {
		if (env_keys && !env_key_ok(k))
			return api_fail(c, 400, "bad_request", field, "%s: \"%s\" is not a valid "
			    "variable name", field, k);
		if (strlen(k) > 256)
			return api_fail(c, 400, "bad_request", field, "%s: keys must be at most 256 "
			    "bytes", field);
		if (!json_is_string(x) || json_string_length(x) > 65536 ||
		    strlen(json_string_value(x)) != json_string_length(x))
			return api_fail(c, 400, "bad_request", field, "%s.%s: must be a string of at "
			    "most 65536 bytes without NUL", field, k);
	}
	*out = json_deep_copy(v);
	return 0;
}

/* --- query parameters -------------------------------------------------- */

/* Decimal, optionally negative, nothing else (no '+', spaces or hex), in range. */
static int
query_int_parse(const char *s, long long min, long long max, long long *out)
{
	const char *d = *s == '-' ? s + 1 : s;
	char *end;
	long long n;

	if (*d == '\0' || strspn(d, "0123456789") != strlen(d))
		return -1;
	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno == ERANGE || *end != '\0' || n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

static int
query_in(const char *v, size_t len, const char *const *values)
{
	for (; *values != NULL; values++)
		if (strlen(*values) == len && strncmp(*values, v, len) == 0)
			return 1;
	return 0;
}

static char *
query_choices(const char *const *values)
{
	char *out = xstrdup(""), *t;

	for (; *values != NULL; values++) {
		xasprintf(&t, "%s%s%s", out, *out ? ", " : "", *values);
		free(out);
		out = t;
	}
	return out;
}

/* One value against its declaration; records a 400 naming it. */
static int
query_check_one(struct api_call *c, const struct api_qparam *q, const char *v)
{
	const char *p;
	long long n;
	size_t len;
	char *choices;
	int rc = 0;

	switch (q->type) {
	case API_Q_STR:
		if ((long long)strlen(v) < q->min || (long long)strlen(v) > q->max)
			return api_fail(c, 400, "bad_request", q->name, q->min > 0 ?
			    "%s: must be 1..%lld bytes" : "%s: must be at most %lld bytes", q->name,
			    q->max);
		return 0;
	case API_Q_INT:
		if (query_int_parse(v, q->min, q->max, &n) == -1)
			return api_fail(c, 400, "bad_request", q->name, "%s: must be an integer in "
			    "%lld..%lld", q->name, q->min, q->max);
		return 0;
	case API_Q_BOOL:
		if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
			return api_fail(c, 400, "bad_request", q->name, "%s: must be true or false",
			    q->name);
		return 0;
	case API_Q_ENUM:
		if (!query_in(v, strlen(v), q->values))
			rc = -1;
		break;
	case API_Q_ENUMLIST:
		for (p = v; rc == 0; p += len + 1) {
			len = strcspn(p, ",");
			if (!query_in(p, len, q->values))
				rc = -1;
			if (p[len] == '\0')
				break;
		}
		break;
	}
	if (rc == -1) {
		choices = query_choices(q->values);
		api_fail(c, 400, "bad_request", q->name, q->type == API_Q_ENUM ?
		    "%s: must be one of %s" : "%s: must be a comma-separated list of %s", q->name,
		    choices);
		free(choices);
	}
	return rc;
}

/* Parse the query strictly and check it against what the route accepts. */
int
api_query_check(struct api_call *c, const struct api_qparam *spec, int ignore_unknown)
{
	static const struct api_qparam none[] = { { NULL, 0, 0, 0, 0, NULL } };
	const struct api_qparam *q;
	char *cause = NULL;
	size_t i;

	if (http_query_parse(http_req_query(c->req), &c->query, &cause) == -1) {
		api_fail(c, 400, "bad_request", c->query.bad, "%s", cause);
		free(cause);
		return -1;
	}
	if (spec == NULL)
		spec = none;
	for (i = 0; i < c->query.n; i++) {
		for (q = spec; q->name != NULL; q++)
			if (strcmp(q->name, c->query.params[i].name) == 0)
				break;
		if (q->name == NULL && ignore_unknown)
			continue;
		if (q->name == NULL)
			return api_fail(c, 400, "bad_request", c->query.params[i].name,
			    "%s: unknown query parameter", c->query.params[i].name);
		if (query_check_one(c, q, c->query.params[i].value) == -1)
			return -1;
	}
	for (q = spec; q->name != NULL; q++)
		if (q->required && http_query_value(&c->query, q->name) == NULL)
			return api_fail(c, 400, "bad_request", q->name, "%s: required query "
			    "parameter", q->name);
	return 0;
}

const char *
api_query_str(const struct api_call *c, const char *name)
{
	return http_query_value(&c->query, name);
}

long long
api_query_int(const struct api_call *c, const char *name, long long def)
{
	const char *v = http_query_value(&c->query, name);

	/* Checked by query_check_one: digits in range. */
	return v != NULL ? strtoll(v, NULL, 10) : def;
}

int
api_query_bool(const struct api_call *c, const char *name, int def)
{
	const char *v = http_query_value(&c->query, name);

	return v != NULL ? strcmp(v, "true") == 0 : def;
}

/* --- routing ----------------------------------------------------------- */

/* Match path against pattern; fills params (copied into *pbuf). */
int
api_route_match(const char *pattern, const char *path, struct api_call *c)
{
	const char *p = pattern, *s = path;
	size_t np = 0, used = 0, plen = strlen(path) + API_PARAMS_MAX + 1;
	char *buf = xmalloc(plen);

	while (*p != '\0' && *s != '\0') {
		if (*p == ':') {
			size_t n = strcspn(s, "/");
			if (n == 0 || np == API_PARAMS_MAX)
				goto no;
			memcpy(buf + used, s, n);
			buf[used + n] = '\0';
			c->params[np++] = buf + used;
			used += n + 1;
			s += n;
			p += strcspn(p, "/");
			continue;
		}
		if (*p != *s)
			goto no;
		p++;
		s++;
	}
	if (*p != '\0' || *s != '\0')
		goto no;
	free(c->pbuf);
	c->pbuf = buf;
	/* Params point into buf, which now belongs to the call. */
	return 1;
no:
	free(buf);
	memset(c->params, 0, sizeof(c->params));
	return 0;
}

/*
 * Path parameters end up in JSON (answers, events, the store): each must
 * be UTF-8, or jansson refuses the answer that quotes it.
 */
int
api_params_check(struct api_call *c, const char *pattern)
{
	const char *p = pattern;
	char name[32];
	size_t i, n;

	for (i = 0; i < API_PARAMS_MAX && c->params[i] != NULL; i++) {
		p = strchr(p, ':') + 1;
		n = strcspn(p, "/");
		snprintf(name, sizeof(name), "%.*s", (int)n, p);
		if (!utf8_valid(c->params[i], strlen(c->params[i])))
			return api_fail(c, 400, "bad_request", name, "%s: path parameter is not "
			    "valid UTF-8", name);
	}
	return 0;
}

int
api_authenticate_key(struct api_call *c, const char *key)
{
	char hash[65], *cause = NULL;
	uint64_t retry_ms;
	int rc;

	api_key_hash(key, hash);
	rc = store_key_find(c->api->store, hash, &c->key, &cause);
	if (rc == -1) {
		api_fail(c, 500, "internal", NULL, "%s", cause);
		free(cause);
		return -1;
	}
	if (rc == 0)
		return api_fail(c, 401, "unauthorized", NULL, "unknown API key");
	if (api_ratelimit_take(c->api->rl, c->key.id, monotonic_ms(), &retry_ms) == -1) {
		api_fail(c, 429, "rate_limited", NULL, "this API key is over its request rate "
		    "(api_rate_per_key = %d/s, burst %d): retry after %llu ms",
		    c->api->cfg->api_rate_per_key, c->api->cfg->api_burst_per_key,
		    (unsigned long long)retry_ms);
		c->err.retry_after_s = (int)((retry_ms + 999) / 1000);
		return -1;
	}
	return 0;
}

static int
api_authenticate(struct api_call *c, int flags)
{
	const char *h = http_req_header(c->req, "authorization");

	if (flags & R_NOAUTH)
		return 0;
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0')
		return api_fail(c, 401, "unauthorized", NULL, "missing API key: send "
		    "Authorization: Bearer <key>");
	if (api_authenticate_key(c, h + 7) == -1)
		return -1;
	if ((flags & R_ADMIN) && strcmp(c->key.role, "admin") != 0)
		return api_fail(c, 403, "forbidden", NULL, "this needs an admin key");
	return 0;
}

/* The JSON body into c->body; records a 400 when it is not one object. */
int
api_parse_json_body(struct api_call *c, int optional)
{
	json_error_t err;
	size_t len;
	const char *body = http_req_body(c->req, &len);

	if (len == 0 && optional) {
		c->body = json_object();
		return 0;
	}
	if (len == 0)
		return api_fail(c, 400, "bad_request", NULL, "a JSON object body is required");
	c->body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
	/* jansson's excerpt may cut a character in two: api_send_error repairs it. */
	if (c->body == NULL)
		return api_fail(c, 400, "bad_request", NULL, "invalid JSON at line %d column %d: %s",
		    err.line, err.column, err.text);
	if (!json_is_object(c->body))
		return api_fail(c, 400, "bad_request", NULL, "the body must be a JSON object");
	return 0;
}

static void
api_body_ready(struct http_req *req, void *arg)
{
	struct api_call *c = arg;
	const struct api_route *r = http_req_data(req);

	/* The body is in: from here on the handler owns c (and its own on_close). */
	http_req_on_close(req, NULL, NULL);
	if (r->flags & (API_ROUTE_JSON | API_ROUTE_JSON_OPT))
		(void)api_parse_json_body(c, r->flags & API_ROUTE_JSON_OPT);
	api_dispatch(c, r->handler);
}

static void
api_body_abandoned(struct http_req *req, void *arg)
{
	api_call_done(arg);
}

int
api_content_type_json(const char *ct)
{
	if (ct == NULL)
		return 0;
	return strncasecmp(ct, "application/json", 16) == 0 && (ct[16] == '\0' || ct[16] == ';' ||
	    ct[16] == ' ');
}

/* Route, authenticate and check what the head carries; NULL with c->err set if refused. */
const struct api_route *
api_route_lookup(struct api_call *c, const struct api_route *routes, const char *front)
{
	const char *method = http_req_method(c->req), *path = http_req_path(c->req);
	const struct api_route *r;
	int path_matched = 0;

	for (r = routes; r->method != NULL; r++) {
		if (!api_route_match(r->pattern, path, c))
			continue;
		path_matched = 1;
		if (strcmp(r->method, method) == 0 ||
		    (strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0))
			break;
	}
	if (r->method == NULL) {
		if (path_matched)
			api_fail(c, 405, "method_not_allowed", NULL, "%s is not allowed on %s", method,
			    path);
		else
			api_fail(c, 404, "not_found", NULL, "no %sroute for %s", front, path);
		return NULL;
	}
	c->route = r->pattern;
	return r;
}

int
api_body_json_check(struct api_call *c)
{
	const struct http_head *h = http_req_head(c->req);

	if ((h->chunked || h->content_length > 0) &&
	    !api_content_type_json(http_req_header(c->req, "content-type")))
		return api_fail(c, 415, "unsupported_media_type", NULL,
		    "send the body as Content-Type: application/json");
	return 0;
}

static const struct api_route *
api_route_find(struct api_call *c)
{
	const char *method = http_req_method(c->req), *path = http_req_path(c->req);
	const struct api_route *r;

	if ((r = api_route_lookup(c, api_routes, "")) == NULL)
		return NULL;
	/*
	 * Routes open to clients without a key take no body: one would hold its
	 * connection as a request in progress, which is never shed, for as long
	 * as it trickles at the minimum rate (docs/security.md "Connection limits").
	 */
	if ((r->flags & R_NOAUTH) && (http_req_head(c->req)->chunked ||
	    http_req_head(c->req)->content_length > 0)) {
		api_fail(c, 413, "too_large", NULL, "%s %s takes no request body", method, path);
		return NULL;
	}
	if (api_authenticate(c, r->flags) == -1 || api_params_check(c, r->pattern) == -1 ||
	    api_query_check(c, r->query, 0) == -1)
		return NULL;
	if ((r->flags & (R_JSON | R_JSON_OPT)) && api_body_json_check(c) == -1)
		return NULL;
	return r;
}

struct api_call *
api_call_new(struct api *api, struct http_req *req)
{
	struct api_call *c = xcalloc(1, sizeof(*c));

	c->api = api;
	c->req = req;
	c->start_ns = monotonic_ns();
	c->route = "unmatched";
	ref_init(&c->ref);	/* the reply's */
	http_req_ref(req);
	return c;
}

void
api_router(struct http_req *req, void *arg)
{
	struct api *api = arg;
	const struct api_route *r;
	struct api_call *c = api_call_new(api, req);
	if ((r = api_route_find(c)) == NULL) {
		api_dispatch(c, NULL);
		return;
	}
	/* Streaming handlers take the body themselves, as it arrives. */
	if (r->flags & R_STREAM) {
		api_dispatch(c, r->handler);
		return;
	}
	/* Everything else runs once the (bounded) body is in, even when it is empty. */
	api_route_run_buffered(c, r);
}

void
api_route_run_buffered(struct api_call *c, const struct api_route *r)
{
	/* If the body never arrives (shutdown too), nobody listens: just end c. */
	http_req_set_data(c->req, (void *)r);
	http_req_on_close(c->req, api_body_abandoned, c);
	http_req_buffer(c->req, HTTP_JSON_BODY_MAX, api_body_ready, c);
}

struct api *
api_new(struct event_base *base, struct store *store, const struct config *cfg, struct sbm *sbm,
    struct metrics *metrics)
{
	struct api *api = xcalloc(1, sizeof(*api));

	api->base = base;
	api->store = store;
	api->cfg = cfg;
	api->sbm = sbm;
	api->metrics = metrics;
	api->started_ms = store_now_ms();
	api->subs = api_subs_new();
	api->rl = api_ratelimit_new(cfg->api_rate_per_key, cfg->api_burst_per_key);
	return api;
}

void
api_free(struct api *api)
{
	if (api == NULL)
		return;
	api_subs_free(api->subs);
	api_ratelimit_free(api->rl);
	free(api);
}
