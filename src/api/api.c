/* Routing, authentication and the call lifecycle of the REST API. */
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
#include "api/metrics.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/util.h"

enum {
	R_NOAUTH	= 0x01,
	R_ADMIN		= 0x02,
	R_JSON		= 0x04,	/* JSON object body required */
	R_JSON_OPT	= 0x08,	/* JSON object body optional (empty = {}) */
	R_STREAM	= 0x10,	/* the handler streams the body itself */
};

struct api_route {
	const char	*method;
	const char	*pattern;	/* ':' segments match one path segment */
	api_handler	 handler;
	int		 flags;
};

static const struct api_route api_routes[] = {
	{ "GET", "/healthz", api_system_healthz, R_NOAUTH },
	{ "GET", "/metrics", api_system_metrics, R_NOAUTH },
	{ "GET", "/v1/openapi.json", api_system_openapi, R_NOAUTH },
	{ "POST", "/v1/keys", api_keys_create, R_ADMIN | R_JSON },
	{ "GET", "/v1/keys", api_keys_list, R_ADMIN },
	{ "DELETE", "/v1/keys/:", api_keys_delete, R_ADMIN },
	{ "PUT", "/v1/secrets/:", api_secrets_put, R_JSON },
	{ "GET", "/v1/secrets", api_secrets_list, 0 },
	{ "GET", "/v1/secrets/:", api_secrets_get, 0 },
	{ "DELETE", "/v1/secrets/:", api_secrets_delete, 0 },
	{ "GET", "/v1/audit", api_audit_list, 0 },
	{ "GET", "/v1/templates", api_templates_list, 0 },
	{ "POST", "/v1/templates", api_templates_build, R_ADMIN | R_JSON },
	{ "DELETE", "/v1/templates/:", api_templates_delete, R_ADMIN },
	{ "GET", "/v1/events", api_events_stream, 0 },
	{ "GET", "/v1/sandboxes/:/events", api_events_stream, 0 },
	{ "POST", "/v1/sandboxes", api_sandboxes_create, R_JSON_OPT },
	{ "GET", "/v1/sandboxes", api_sandboxes_list, 0 },
	{ "GET", "/v1/sandboxes/:", api_sandboxes_get, 0 },
	{ "PATCH", "/v1/sandboxes/:", api_sandboxes_patch, R_JSON },
	{ "DELETE", "/v1/sandboxes/:", api_sandboxes_delete, 0 },
	{ "POST", "/v1/sandboxes/:/pause", api_sandboxes_pause, R_JSON_OPT },
	{ "POST", "/v1/sandboxes/:/resume", api_sandboxes_resume, R_JSON_OPT },
	{ "POST", "/v1/sandboxes/:/suspend", api_sandboxes_suspend, R_JSON_OPT },
	{ "GET", "/v1/sandboxes/:/logs", api_sandboxes_logs, 0 },
	{ "GET", "/v1/sandboxes/:/metrics", api_sandboxes_metrics, 0 },
	{ "POST", "/v1/sandboxes/:/exec", api_exec_start, R_JSON },
	{ "GET", "/v1/sandboxes/:/processes", api_exec_list, 0 },
	{ "GET", "/v1/sandboxes/:/processes/:/stream", api_exec_stream, 0 },
	{ "POST", "/v1/sandboxes/:/processes/:/stdin", api_exec_stdin, R_JSON },
	{ "POST", "/v1/sandboxes/:/processes/:/signal", api_exec_signal, R_JSON },
	{ "POST", "/v1/sandboxes/:/processes/:/resize", api_exec_resize, R_JSON },
	{ "GET", "/v1/sandboxes/:/files", api_files_get, 0 },
	{ "PUT", "/v1/sandboxes/:/files", api_files_put, R_STREAM },
	{ "GET", "/v1/sandboxes/:/files/list", api_files_list, 0 },
	{ "GET", "/v1/sandboxes/:/files/stat", api_files_stat, 0 },
	{ "POST", "/v1/sandboxes/:/files/mkdir", api_files_mkdir, R_JSON },
	{ "POST", "/v1/sandboxes/:/files/move", api_files_move, R_JSON },
	{ "POST", "/v1/sandboxes/:/files/remove", api_files_remove, R_JSON },
	{ "GET", "/v1/sandboxes/:/files/watch", api_files_watch, 0 },
	{ NULL, NULL, NULL, 0 }
};

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- call lifecycle ---------------------------------------------------- */

double
api_elapsed(const struct api_call *c)
{
	return (double)(now_ns() - c->start_ns) / 1e9;
}

void
api_call_done(struct api_call *c)
{
	metrics_observe_request(c->api->metrics, c->route, http_req_method(c->req),
	    api_elapsed(c));
	http_req_unref(c->req);
	json_decref(c->body);
	free(c->pbuf);
	free(c);
}

void
api_error(struct api_call *c, int status, const char *code, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (status >= 500)
		log_warnx("api %s %s: %d %s", http_req_method(c->req), http_req_path(c->req), status,
		    msg ? msg : "");
	metrics_count_error(c->api->metrics, status);
	/* Messages may quote a guest (an agent's refusal): json_text keeps them valid JSON. */
	http_reply_json(c->req, status, json_pack("{s:{s:s,s:o}}", "error", "code", code,
	    "message", json_text(msg ? msg : code)));
	free(msg);
	api_call_done(c);
}

void
api_json(struct api_call *c, int status, json_t *body)
{
	http_reply_json(c->req, status, body);
	api_call_done(c);
}

void
api_no_content(struct api_call *c)
{
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
			api_error(c, 400, "bad_request", "%s%sunknown field \"%s\"", where,
			    *where ? ": " : "", key);
			return -1;
		}
	}
	return 0;
}

int
api_get_string(struct api_call *c, json_t *obj, const char *field, int required, size_t maxlen,
    const char **out)
{
	json_t *v = json_object_get(obj, field);

	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		if (required) {
			api_error(c, 400, "bad_request", "%s: required", field);
			return -1;
		}
		return 0;
	}
	if (!json_is_string(v)) {
		api_error(c, 400, "bad_request", "%s: must be a string", field);
		return -1;
	}
	if (json_string_length(v) > maxlen || strlen(json_string_value(v)) != json_string_length(v)) {
		api_error(c, 400, "bad_request", "%s: must be at most %zu bytes, without NUL",
		    field, maxlen);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

int
api_get_int(struct api_call *c, json_t *obj, const char *field, long long min, long long max,
    long long def, long long *out)
{
	json_t *v = json_object_get(obj, field);

	*out = def;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_integer(v)) {
		api_error(c, 400, "bad_request", "%s: must be an integer", field);
		return -1;
	}
	if (json_integer_value(v) < min || json_integer_value(v) > max) {
		api_error(c, 400, "bad_request", "%s: must be in %lld..%lld", field, min, max);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

int
api_get_bool(struct api_call *c, json_t *obj, const char *field, int def, int *out)
{
	json_t *v = json_object_get(obj, field);

	*out = def;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_boolean(v)) {
		api_error(c, 400, "bad_request", "%s: must be true or false", field);
		return -1;
	}
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
	if (v == NULL || json_is_null(v)) {
		*out = json_object();
		return 0;
	}
	if (!json_is_object(v) || json_object_size(v) > maxkeys) {
		api_error(c, 400, "bad_request", "%s: must be an object of at most %zu string values",
		    field, maxkeys);
		return -1;
	}
	json_object_foreach(v, k, x) {
		if (env_keys && !env_key_ok(k)) {
			api_error(c, 400, "bad_request", "%s: \"%s\" is not a valid variable name",
			    field, k);
			return -1;
		}
		if (strlen(k) > 256) {
			api_error(c, 400, "bad_request", "%s: keys must be at most 256 bytes", field);
			return -1;
		}
		if (!json_is_string(x) || json_string_length(x) > 65536 ||
		    strlen(json_string_value(x)) != json_string_length(x)) {
			api_error(c, 400, "bad_request", "%s.%s: must be a string of at most 65536 "
			    "bytes without NUL", field, k);
			return -1;
		}
	}
	*out = json_deep_copy(v);
	return 0;
}

int
api_query_int(struct api_call *c, const char *key, long long min, long long max, long long def,
    long long *out)
{
	char *v = http_req_query_get(c->req, key), *end;
	long long n;

	*out = def;
	if (v == NULL)
		return 0;
	n = strtoll(v, &end, 10);
	if (*v == '\0' || *end != '\0' || n < min || n > max) {
		api_error(c, 400, "bad_request", "%s: must be an integer in %lld..%lld", key, min, max);
		free(v);
		return -1;
	}
	free(v);
	*out = n;
	return 0;
}

/* --- routing ----------------------------------------------------------- */

/* Match path against pattern; fills params (copied into *pbuf). */
static int
route_match(const char *pattern, const char *path, struct api_call *c)
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
			p++;
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

static int
api_authenticate(struct api_call *c, int flags)
{
	const char *h = http_req_header(c->req, "authorization");
	char hash[65], *cause = NULL;
	int rc;

	if (flags & R_NOAUTH)
		return 0;
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 || h[7] == '\0') {
		api_error(c, 401, "unauthorized", "missing API key: send Authorization: Bearer <key>");
		return -1;
	}
	api_key_hash(h + 7, hash);
	rc = store_key_find(c->api->store, hash, &c->key, &cause);
	if (rc == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		return -1;
	}
	if (rc == 0) {
		api_error(c, 401, "unauthorized", "unknown API key");
		return -1;
	}
	if ((flags & R_ADMIN) && strcmp(c->key.role, "admin") != 0) {
		api_error(c, 403, "forbidden", "this needs an admin key");
		return -1;
	}
	return 0;
}

static void
api_body_ready(struct http_req *req, void *arg)
{
	struct api_call *c = arg;
	const struct api_route *r = http_req_data(req);
	json_error_t err;
	size_t len;
	const char *body = http_req_body(req, &len);

	/* The body is in: from here on the handler owns c (and its own on_close). */
	http_req_on_close(req, NULL, NULL);
	if (!(r->flags & (R_JSON | R_JSON_OPT))) {
		r->handler(c);
		return;
	}
	if (len == 0 && (r->flags & R_JSON_OPT))
		c->body = json_object();
	else if (len == 0) {
		api_error(c, 400, "bad_request", "a JSON object body is required");
		return;
	} else {
		c->body = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
		if (c->body == NULL) {
			api_error(c, 400, "bad_request", "invalid JSON at line %d column %d: %s",
			    err.line, err.column, err.text);
			return;
		}
		if (!json_is_object(c->body)) {
			api_error(c, 400, "bad_request", "the body must be a JSON object");
			return;
		}
	}
	r->handler(c);
}

static void
api_body_abandoned(struct http_req *req, void *arg)
{
	api_call_done(arg);
}

static int
content_type_json(const char *ct)
{
	if (ct == NULL)
		return 0;
	return strncasecmp(ct, "application/json", 16) == 0 && (ct[16] == '\0' || ct[16] == ';' ||
	    ct[16] == ' ');
}

void
api_router(struct http_req *req, void *arg)
{
	struct api *api = arg;
	const struct api_route *r, *found = NULL;
	struct api_call *c = xcalloc(1, sizeof(*c));
	const char *method = http_req_method(req);
	int path_matched = 0;

	c->api = api;
	c->req = req;
	c->start_ns = now_ns();
	c->route = "unmatched";
	http_req_ref(req);
	for (r = api_routes; r->method != NULL; r++) {
		if (!route_match(r->pattern, http_req_path(req), c))
			continue;
		path_matched = 1;
		if (strcmp(r->method, method) == 0 ||
		    (strcmp(method, "HEAD") == 0 && strcmp(r->method, "GET") == 0)) {
			found = r;
			break;
		}
	}
	if (found == NULL) {
		if (path_matched)
			api_error(c, 405, "method_not_allowed", "%s is not allowed on %s", method,
			    http_req_path(req));
		else
			api_error(c, 404, "not_found", "no route for %s", http_req_path(req));
		return;
	}
	c->route = found->pattern;
	/*
	 * Routes open to clients without a key take no body: one would hold its
	 * connection as a request in progress, which is never shed, for as long
	 * as it trickles at the minimum rate (docs/security.md "Connection limits").
	 */
	if ((found->flags & R_NOAUTH) && (http_req_head(req)->chunked ||
	    http_req_head(req)->content_length > 0)) {
		api_error(c, 413, "too_large", "%s %s takes no request body", method,
		    http_req_path(req));
		return;
	}
	if (api_authenticate(c, found->flags) == -1)
		return;
	/* Streaming handlers take the body themselves, as it arrives. */
	if (found->flags & R_STREAM) {
		found->handler(c);
		return;
	}
	if (found->flags & (R_JSON | R_JSON_OPT)) {
		const struct http_head *h = http_req_head(req);
		int has_body = h->chunked || h->content_length > 0;
		if (has_body && !content_type_json(http_req_header(req, "content-type"))) {
			api_error(c, 415, "unsupported_media_type",
			    "send the body as Content-Type: application/json");
			return;
		}
	}
	/*
	 * Everything else runs once the (bounded) body is in, even when it is
	 * empty. If it never arrives (client gone, over the limit, bad framing,
	 * shutdown), the server has answered or nobody listens: just end c.
	 */
	http_req_set_data(req, (void *)found);
	http_req_on_close(req, api_body_abandoned, c);
	http_req_buffer(req, HTTP_JSON_BODY_MAX, api_body_ready, c);
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
	return api;
}

void
api_free(struct api *api)
{
	if (api == NULL)
		return;
	api_subs_free(api->subs);
	free(api);
}
