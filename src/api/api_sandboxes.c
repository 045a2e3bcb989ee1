/* /v1/sandboxes: create, list, get, patch, delete, pause, resume, suspend, logs, metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "config/config.h"
#include "api/api.h"
#include "api/api_sandbox.h"
#include "api/api_stream.h"
#include "api/metrics.h"
#include "http/http_parse.h"
#include "common/paths.h"
#include "common/util.h"
#include "egress/egress_policy.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"
#include "sandbox/sbm_volume.h"
#include "vm/console_file.h"

struct sandbox *
api_sandbox(struct api_call *c, int need_state)
{
	struct sandbox *sb = sbm_find(c->api->sbm, c->params[0], c->key.project);

	if (sb == NULL) {
		api_fail(c, 404, "not_found", NULL, "sandbox \"%s\" not found", c->params[0]);
		return NULL;
	}
	if (need_state != -1 && sb_state(sb) != (enum sb_state)need_state) {
		api_fail(c, 409, "conflict", NULL, "sandbox %s is %s, not %s", sb_id(sb),
		    sb_state_name(sb_state(sb)), sb_state_name((enum sb_state)need_state));
		return NULL;
	}
	return sb;
}

struct sandbox *
api_sandbox_agent(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, SB_RUNNING);

	if (sb != NULL && sb_agent(sb) == NULL) {
		char *why = sb_agent_error(sb);	/* unhealthy (with the reason) or not connected */

		api_fail(c, 503, "unavailable", NULL, "%s", why);
		free(why);
		return NULL;
	}
	if (sb != NULL)
		sb_touch(sb);
	return sb;
}

/*
 * Validate {mode, allow[], rate, headers[]} exactly as the gateway will parse it
 * (egress_network_check), so a sandbox never starts with a policy the
 * gateway would refuse. Rules are kept as given.
 */
int
api_parse_network_value(struct api_call *c, json_t *n, json_t **out)
{
	static const char *const fields[] = { "mode", "allow", "rate", "headers", NULL };
	json_t *allow, *v, *net;
	const char *mode = "none";
	char *cause = NULL;

	*out = NULL;
	if (n != NULL && json_is_null(n))
		return api_fail(c, 400, "bad_request", "network", "network: must not be null (leave "
		    "the field out for no network)");
	if (n != NULL) {
		if (!json_is_object(n))
			return api_fail(c, 400, "bad_request", "network", "network: must be an object "
			    "{mode, allow, rate}");
		if (api_check_fields(c, n, "network", fields) == -1)
			return -1;
		v = json_object_get(n, "mode");
		if (v != NULL && !json_is_string(v))
			return api_fail(c, 400, "bad_request", "network.mode", "network.mode: must be "
			    "a string");
		if (v != NULL)
			mode = json_string_value(v);
	}
	if (strcmp(mode, "none") != 0 && strcmp(mode, "allowlist") != 0 &&
	    strcmp(mode, "full") != 0)
		return api_fail(c, 400, "bad_request", "network.mode", "network.mode: must be one "
		    "of none, allowlist, full");
	allow = n != NULL ? json_object_get(n, "allow") : NULL;
	if (allow != NULL && (!json_is_array(allow) || json_array_size(allow) > SBM_ALLOW_MAX))
		return api_fail(c, 400, "bad_request", "network.allow", "network.allow: must be an "
		    "array of at most %d rules", SBM_ALLOW_MAX);
	if (allow != NULL && json_array_size(allow) > 0 && strcmp(mode, "allowlist") != 0)
		return api_fail(c, 400, "bad_request", "network.allow", "network.allow: only "
		    "meaningful with mode allowlist");
	net = json_pack("{s:s,s:o}", "mode", mode, "allow",
	    allow != NULL ? json_deep_copy(allow) : json_array());
	if (n != NULL && (v = json_object_get(n, "rate")) != NULL)
		json_object_set_new(net, "rate", json_deep_copy(v));
	if (n != NULL && (v = json_object_get(n, "headers")) != NULL)
		json_object_set_new(net, "headers", json_deep_copy(v));
	if (egress_network_check(net, &cause) == -1) {
		api_fail(c, 400, "bad_request", NULL, "%s", cause);
		free(cause);
		json_decref(net);
		return -1;
	}
	*out = net;
	return 0;
}

/* NULL when the body has none: the template's default (none) or a snapshot's own. */
static int
parse_network(struct api_call *c, json_t **out)
{
	*out = NULL;
	if (json_object_get(c->body, "network") == NULL)
		return 0;
	return api_parse_network_value(c, json_object_get(c->body, "network"), out);
}

static void
created(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct api_call *c = arg;

	metrics_observe(c->api->metrics, "sandbox_create", api_elapsed(c));
	if (error != NULL) {
		metrics_inc(c->api->metrics, "sandbox_create_failures");
		api_error(c, status ? status : 500, status == 507 ? "insufficient_storage" :
		    status == 409 ? "conflict" : "internal", "%s", error);
		return;
	}
	api_json(c, 201, sb_json(sb));
}

void
api_sandboxes_create(struct api_call *c)
{
	static const char *const fields[] = { "template", "vcpus", "memory_mb", "disk_mb", "env",
	    "metadata", "timeout_s", "idle_timeout_s", "auto_pause", "network", "snapshot", "volumes",
	    NULL };
	const struct config *cfg = c->api->cfg;
	struct sb_spec sp;
	const char *tmpl, *snap;
	long long vcpus, mem, disk, timeout, idle;
	json_t *env = NULL, *meta = NULL, *net = NULL;
	char *cause = NULL;
	int auto_pause, status;

	memset(&sp, 0, sizeof(sp));
	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "template", 0, 63, &tmpl) == -1 ||
	    api_get_string(c, c->body, "snapshot", 0, STORE_ID_MAX - 1, &snap) == -1 ||
	    api_get_int(c, c->body, "vcpus", 1, SBM_VCPUS_MAX, cfg->default_vcpus, &vcpus) == -1 ||
	    api_get_int(c, c->body, "memory_mb", SBM_MEMORY_MB_MIN, SBM_MEMORY_MB_MAX,
	    cfg->default_memory_mb, &mem) == -1 ||
	    api_get_int(c, c->body, "disk_mb", 1, SBM_DISK_MB_MAX, 0, &disk) == -1 ||
	    api_get_int(c, c->body, "timeout_s", 0, SBM_TIMEOUT_S_MAX, 0, &timeout) == -1 ||
	    api_get_int(c, c->body, "idle_timeout_s", 0, SBM_TIMEOUT_S_MAX,
	    cfg->default_idle_timeout_s, &idle) == -1 ||
	    api_get_bool(c, c->body, "auto_pause", 0, &auto_pause) == -1 ||
	    api_get_strmap(c, c->body, "env", SBM_ENV_MAX, 1, &env) == -1)
		goto out;
	if (api_get_strmap(c, c->body, "metadata", SBM_METADATA_MAX, 0, &meta) == -1 ||
	    parse_network(c, &net) == -1)
		goto out;
	if ((sp.volumes = json_object_get(c->body, "volumes")) != NULL) {
		char field[48];
		if (sbm_volumes_check(sp.volumes, field, sizeof(field), &cause) == -1) {
			api_fail(c, 400, "bad_request", field, "%s", cause);
			free(cause);
			goto out;
		}
	}
	if (snap != NULL && tmpl != NULL) {
		api_fail(c, 400, "bad_request", "snapshot", "snapshot: give a template or a "
		    "snapshot, not both (a snapshot names its template)");
		goto out;
	}
	if (tmpl == NULL)
		tmpl = "base";
	if (!paths_valid_name(tmpl)) {
		api_fail(c, 400, "bad_request", "template", "template: \"%s\" is not a valid "
		    "template name", tmpl);
		goto out;
	}
	sp.project = c->key.project;
	sp.template_name = tmpl;
	sp.snapshot = snap;
	sp.vcpus = (unsigned)vcpus;
	sp.memory_mb = (unsigned)mem;
	sp.vcpus_given = json_object_get(c->body, "vcpus") != NULL;
	sp.memory_given = json_object_get(c->body, "memory_mb") != NULL;
	sp.disk_mb = (unsigned)disk;
	sp.env = env;
	sp.metadata = meta;
	sp.network = net;
	sp.timeout_s = timeout;
	sp.idle_timeout_s = idle;
	sp.auto_pause = auto_pause;
	metrics_inc(c->api->metrics, "sandbox_creates");
	if (sbm_create(c->api->sbm, &sp, created, c, &status, &cause) == NULL) {
		api_error(c, status, status == 400 ? "bad_request" : status == 422 ? "unprocessable" :
		    status == 404 ? "not_found" : status == 503 ? "unavailable" : status == 507 ? "insufficient_storage" :
		    status == 409 ? "conflict" : status == 429 ? "quota_exceeded" : "internal", "%s",
		    cause);
		free(cause);
	}
out:
	json_decref(env);
	json_decref(meta);
	json_decref(net);
}

void
api_sandboxes_list(struct api_call *c)
{
	const char *metaq = api_query_str(c, "metadata");
	char *copy = NULL, *next = NULL;
	json_t *meta = NULL, *list;

	if (metaq != NULL) {
		/* metadata=k%3Dv%26k2%3Dv2: a form-encoded string of its own. */
		char *pair, *save;
		copy = xstrdup(metaq);
		meta = json_object();
		for (pair = strtok_r(copy, "&", &save); pair != NULL;
		    pair = strtok_r(NULL, "&", &save)) {
			char *eq = strchr(pair, '='), *k, *v;
			if (eq == NULL) {
				api_fail(c, 400, "bad_request", "metadata", "metadata: want k=v pairs "
				    "joined by &");
				goto out;
			}
			*eq = '\0';
			if (http_pct_decode(pair, strlen(pair), &k) == -1) {
				api_fail(c, 400, "bad_request", "metadata", "metadata: bad "
				    "percent-encoding");
				goto out;
			}
			if (http_pct_decode(eq + 1, strlen(eq + 1), &v) == -1) {
				free(k);
				api_fail(c, 400, "bad_request", "metadata", "metadata: bad "
				    "percent-encoding");
				goto out;
			}
			if (!utf8_valid(k, strlen(k)) || !utf8_valid(v, strlen(v)) ||
			    json_object_set_new(meta, k, json_string(v)) == -1)
				api_fail(c, 400, "bad_request", "metadata", "metadata: keys and values "
				    "must be UTF-8");
			free(k);
			free(v);
			if (c->err.status != 0)
				goto out;
		}
	}
	list = sbm_list(c->api->sbm, c->key.project, api_query_str(c, "state"), meta,
	    api_query_str(c, "after"), (int)api_query_int(c, "limit", 100), &next);
	api_json(c, 200, json_pack("{s:o,s:s?}", "sandboxes", list, "next", next));
out:
	json_decref(meta);
	free(copy);
	free(next);
}

void
api_sandboxes_get(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, -1);

	if (sb != NULL)
		api_json(c, 200, sb_json(sb));
}

/* A PATCH in progress while the gateway takes a new network policy. */
struct patch_call {
	struct api_call	*call;
	struct sandbox	*sb;
	long long	 timeout, idle;
	int		 ap;
	json_t		*meta;
};

/* The rest of a PATCH, once the network part (if any) is done. */
static void
patch_finish(void *arg, const char *neterr)
{
	struct patch_call *p = arg;
	char *cause = NULL;

	if (neterr != NULL && strcmp(neterr, SB_SHUTDOWN_CAUSE) == 0)
		;	/* the daemon is exiting: no reply, as for its other pending operations */
	else if (neterr != NULL)
		api_error(p->call, 502, "gateway", "%s", neterr);
	else if (sb_patch(p->sb, p->timeout, p->idle, p->ap, p->meta, &cause) == -1) {
		api_error(p->call, 500, "internal", "%s", cause);
		free(cause);
	} else
		api_json(p->call, 200, sb_json(p->sb));
	json_decref(p->meta);
	sb_unref(p->sb);
	free(p);
}

void
api_sandboxes_patch(struct api_call *c)
{
	static const char *const fields[] = { "timeout_s", "idle_timeout_s", "auto_pause",
	    "metadata", "network", NULL };
	struct sandbox *sb;
	struct patch_call *p;
	long long timeout, idle;
	json_t *meta = NULL, *net = NULL;
	int ap, rc;
	char *cause = NULL;

	if ((sb = api_sandbox(c, -1)) == NULL)
		return;
	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_int(c, c->body, "timeout_s", 0, SBM_TIMEOUT_S_MAX, -1, &timeout) == -1 ||
	    api_get_int(c, c->body, "idle_timeout_s", 0, SBM_TIMEOUT_S_MAX, -1, &idle) == -1 ||
	    api_get_bool(c, c->body, "auto_pause", -1, &ap) == -1)
		return;
	if (json_object_get(c->body, "metadata") != NULL &&
	    api_get_strmap(c, c->body, "metadata", SBM_METADATA_MAX, 0, &meta) == -1)
		return;
	if (json_object_get(c->body, "network") != NULL &&
	    api_parse_network_value(c, json_object_get(c->body, "network"), &net) == -1) {
		json_decref(meta);
		return;
	}
	p = xcalloc(1, sizeof *p);
	p->call = c;
	p->sb = sb;
	sb_ref(sb);
	p->timeout = timeout;
	p->idle = idle;
	p->ap = ap;
	p->meta = meta;
	if (net == NULL) {
		patch_finish(p, NULL);
		return;
	}
	/* The policy is pushed to the gateway live; the reply waits for it to take it. */
	rc = sb_set_network(sb, net, patch_finish, p, &cause);
	json_decref(net);
	if (rc == -1) {
		api_error(c, strstr(cause, "network.mode") != NULL ? 409 : 502,
		    strstr(cause, "network.mode") != NULL ? "conflict" : "gateway", "%s", cause);
		free(cause);
		json_decref(meta);
		sb_unref(sb);
		free(p);
	}
}

static void
op_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct api_call *c = arg;

	if (error != NULL)
		api_error(c, status, status == 409 ? "conflict" : status == 404 ? "not_found" :
		    status == 507 ? "insufficient_storage" : "internal", "%s", error);
	else if (strcmp(http_req_method(c->req), "DELETE") == 0)
		api_no_content(c);
	else
		api_json(c, 200, sb_json(sb));
}

static void
lifecycle(struct api_call *c, enum sb_op_kind kind)
{
	/* pause, resume and suspend take no options (yet): an empty object or no body. */
	static const char *const fields[] = { NULL };
	struct sandbox *sb;

	if (c->body != NULL && api_check_fields(c, c->body, "", fields) == -1)
		return;
	if ((sb = api_sandbox(c, -1)) == NULL)
		return;
	if (kind != SB_OP_DELETE)
		sb_touch(sb);
	sb_enqueue(sb, kind, op_done, c);
}

void api_sandboxes_delete(struct api_call *c) { lifecycle(c, SB_OP_DELETE); }
void api_sandboxes_pause(struct api_call *c) { lifecycle(c, SB_OP_PAUSE); }
void api_sandboxes_resume(struct api_call *c) { lifecycle(c, SB_OP_RESUME); }
void api_sandboxes_suspend(struct api_call *c) { lifecycle(c, SB_OP_SUSPEND); }

void
api_sandboxes_logs(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, -1);
	long long tail = api_query_int(c, "tail", 65536);
	char *raw, *text;
	size_t len = 0, tlen;

	if (sb == NULL)
		return;
	/* Both generations; NUL, ESC and invalid UTF-8 shown escaped, never cut or passed raw. */
	raw = sb_console_path(sb) ? console_file_read(sb_console_path(sb), (size_t)tail, &len) :
	    xstrdup("");
	text = console_escape(raw, len, &tlen);
	http_reply(c->req, 200, "text/plain; charset=utf-8", text, tlen);
	free(raw);
	free(text);
	api_call_done(c);
}

struct metrics_call {
	struct api_call	*call;
	struct sandbox	*sb;
};

static json_t *
host_metrics(struct sandbox *sb)
{
	uint64_t rss;
	double cpu;
	json_t *out, *egress;

	sb_host_stats(sb, &rss, &cpu);
	out = json_pack("{s:s,s:I,s:f}", "state", sb_state_name(sb_state(sb)), "host_rss_bytes",
	    (json_int_t)rss, "host_cpu_seconds", cpu);
	if ((egress = sb_egress_counters(sb)) != NULL)
		json_object_set_new(out, "egress", egress);
	return out;
}

/* The guest's own view (cpu, memory, disk) from the agent, beside the host's. */
static void
metrics_done(int status, json_t *resp, const char *error, void *arg)
{
	struct metrics_call *m = arg;
	json_t *out = host_metrics(m->sb);
	static const char *const keys[] = { "cpu_count", "cpu_used_pct", "mem_total", "mem_used",
	    "disk_total", "disk_used", NULL };
	size_t i;

	if (error == NULL && status == 200 && json_is_object(resp)) {
		for (i = 0; keys[i] != NULL; i++)
			if (json_object_get(resp, keys[i]) != NULL)
				json_object_set(out, keys[i], json_object_get(resp, keys[i]));
	} else
		json_object_set_new(out, "guest_error", json_string(error ? error :
		    "guest agent answered an error"));
	api_json(m->call, 200, out);
	sb_unref(m->sb);
	free(m);
}

void
api_sandboxes_metrics(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, -1);
	struct metrics_call *m;
	struct api_agent_headers ah;
	char *cause = NULL;
	struct envd_req *r;

	if (sb == NULL)
		return;
	if (sb_agent(sb) == NULL) {
		api_json(c, 200, host_metrics(sb));
		return;
	}
	m = xcalloc(1, sizeof(*m));
	m->call = c;
	m->sb = sb;
	sb_ref(sb);
	api_agent_headers(&ah, sb, "root", 0);
	r = envd_call_json(sb_agent(sb), "GET", "/metrics", NULL, ah.h, metrics_done, m, &cause);
	api_agent_headers_free(&ah);
	if (r == NULL) {
		free(cause);
		sb_unref(sb);
		free(m);
		api_json(c, 200, host_metrics(sb));
	}
}
