/*
 * E2B's sandbox and template routes, mapped onto the sandbox manager the
 * /v1 API drives (sbm_create, sb_enqueue, sb_patch, sbm_list): the shapes
 * are E2B's (spec: shared/spec/e2b-compat.md §2, e2b-delta.md §1), the
 * lifecycle is airlock's. Options airlock cannot honour are refused with a
 * 400 naming them, never dropped.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_sandbox.h"
#include "api/api_stream.h"
#include "api/metrics.h"
#include "common/json_time.h"
#include "common/util.h"
#include "config/config.h"
#include "e2b/e2b.h"
#include "e2b/e2b_netmap.h"
#include "e2b/e2b_page.h"
#include "e2b/e2b_parse.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"
#include "sandbox/sbm_volume.h"


/* airlock's own sandbox domain (e2b_domain): getHost(port) and the host route use it. */
static const char *
e2b_domain(const struct api_call *c)
{
	return c->api->cfg != NULL ? c->api->cfg->e2b_domain : NULL;
}

/* Sandbox: what create, connect and fork answer. */
json_t *
e2b_sandbox(const struct api_call *c, struct sandbox *sb)
{
	json_t *j = sb_json(sb), *out;

	out = json_pack("{s:O,s:s,s:s,s:s,s:s?,s:s?,s:s?,s:O}",
	    "templateID", json_object_get(j, "template"), "sandboxID", sb_id(sb),
	    "clientID", E2B_CLIENT_ID, "envdVersion", E2B_ENVD_VERSION,
	    "envdAccessToken", sb_access_token(sb), "trafficAccessToken", sb_traffic_token(sb),
	    /* Never null: the SDKs would fall back to E2B_DOMAIN or e2b.app for getHost(). */
	    "domain", e2b_domain(c), "alias", json_object_get(j, "template"));
	json_decref(j);
	return out;
}

/* ListedSandbox (list) or SandboxDetail (get); NULL when E2B must not see it. */
static json_t *
e2b_listed(const struct api_call *c, json_t *j, int detail, struct sandbox *sb)
{
	const char *state = e2b_state_of(json_string_value(json_object_get(j, "state")));
	const char *mode = json_string_value(json_object_get(json_object_get(j, "network"), "mode"));
	json_t *out, *end = json_object_get(j, "expires_at"), *disk = json_object_get(j, "disk_mb");

	if (state == NULL)
		return NULL;
	out = json_pack("{s:O,s:O,s:O,s:s,s:O,s:O,s:O,s:O,s:o,s:s,s:s,s:O}",
	    "templateID", json_object_get(j, "template"), "alias", json_object_get(j, "template"),
	    "sandboxID", json_object_get(j, "id"), "clientID", E2B_CLIENT_ID,
	    "startedAt", json_object_get(j, "created_at"),
	    /* No lifetime (a /v1 sandbox made without one): it ends when killed. */
	    "endAt", json_is_string(end) ? end : json_object_get(j, "created_at"),
	    "cpuCount", json_object_get(j, "vcpus"), "memoryMB", json_object_get(j, "memory_mb"),
	    "diskSizeMB", json_is_integer(disk) ? json_incref(disk) : json_integer(0),
	    "state", state, "envdVersion", E2B_ENVD_VERSION,
	    "metadata", json_object_get(j, "metadata"));
	if (detail) {
		json_object_set_new(out, "envdAccessToken", json_string(sb_access_token(sb)));
		json_object_set_new(out, "domain", e2b_domain(c) != NULL ?
		    json_string(e2b_domain(c)) : json_null());
		/* An allowlist (internet off + allowOut) is not the internet (e2b_netmap.h). */
		json_object_set_new(out, "allowInternetAccess",
		    json_boolean(mode != NULL && strcmp(mode, "full") == 0));
		json_object_set_new(out, "lifecycle", json_pack("{s:s,s:b}", "onTimeout",
		    json_is_true(json_object_get(j, "auto_pause")) ? "pause" : "kill",
		    "autoResume", json_is_true(json_object_get(j, "auto_resume"))));
	}
	return out;
}

/* --- create ------------------------------------------------------------ */

static void
created(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct api_call *c = arg;

	metrics_observe(c->api->metrics, "sandbox_create", api_elapsed(c));
	if (error != NULL) {
		metrics_inc(c->api->metrics, "sandbox_create_failures");
		api_error(c, status ? status : 500, "internal", "%s", error);
		return;
	}
	api_json(c, 201, e2b_sandbox(c, sb));
}

/* A field present with anything but its "off" value is an option airlock cannot honour yet. */
static int
refuse_present(struct api_call *c, json_t *body, const char *field, const char *why)
{
	json_t *v = json_object_get(body, field);

	if (v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
	    (json_is_object(v) && json_object_size(v) == 0))
		return 0;
	return api_fail(c, 400, "bad_request", field, "%s: not supported by airlock yet (%s)",
	    field, why);
}

/* E2B's volumeMounts [{name, path, readOnly?}] as airlock's volumes (docs/volumes.md). */
static int
e2b_volume_mounts(struct api_call *c, json_t *vm, json_t **out)
{
	char field[48], *cause = NULL;
	json_t *e, *v;
	size_t i;

	*out = NULL;
	if (vm == NULL || json_is_null(vm))
		return 0;
	if (!json_is_array(vm))
		return api_fail(c, 400, "bad_request", "volumeMounts", "volumeMounts: must be an "
		    "array of {name, path}");
	*out = json_array();
	json_array_foreach(vm, i, e) {
		v = json_pack("{s:O?, s:O?, s:b}", "name", json_object_get(e, "name"), "path",
		    json_object_get(e, "path"), "read_only",
		    json_is_true(json_object_get(e, "readOnly")));
		json_array_append_new(*out, v != NULL ? v : json_object());
	}
	if (sbm_volumes_check(*out, field, sizeof(field), &cause) == -1) {
		char *f;
		xasprintf(&f, "volumeMounts%s", field + strlen("volumes"));
		api_fail(c, 400, "bad_request", f, "volumeMounts%s", cause + strlen("volumes"));
		free(f);
		free(cause);
		return -1;
	}
	return 0;
}

void
e2b_sandboxes_create(struct api_call *c)
{
	static const char *const fields[] = { "templateID", "timeout", "metadata", "envVars",
	    "secure", "allow_internet_access", "autoPause", "autoPauseMemory", "autoResume",
	    "network", "mcp", "volumeMounts", "egressProxy", "iam", NULL };
	const struct config *cfg = c->api->cfg;
	const char *tid;
	char name[E2B_NAME_MAX + 1], field[E2B_FIELD_MAX], *cause = NULL;
	long long timeout;
	int secure, internet, auto_pause, ap_memory, status, resume = 0;
	json_t *env = NULL, *meta = NULL, *net = NULL, *ar;
	struct sb_spec sp;
	json_t *vols = NULL;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "templateID", 0, 255, &tid) == -1 ||
	    api_get_int(c, c->body, "timeout", 1, SBM_TIMEOUT_S_MAX, E2B_DEFAULT_TIMEOUT_S,
	    &timeout) == -1 ||
	    api_get_bool(c, c->body, "secure", 1, &secure) == -1 ||
	    api_get_bool(c, c->body, "allow_internet_access", 1, &internet) == -1 ||
	    api_get_bool(c, c->body, "autoPause", 0, &auto_pause) == -1 ||
	    api_get_bool(c, c->body, "autoPauseMemory", 1, &ap_memory) == -1)
		return;
	if ((ar = json_object_get(c->body, "autoResume")) != NULL) {
		static const char *const arf[] = { "enabled", NULL };
		json_t *en = json_object_get(ar, "enabled");	/* NULL unless an object */

		if (!json_is_object(ar)) {
			api_fail(c, 400, "bad_request", "autoResume", "autoResume: must be an object "
			    "{enabled}");
			return;
		}
		if (api_check_fields(c, ar, "autoResume", arf) == -1)
			return;
		/* Named by its path: "enabled" alone would not say which object. */
		if (en != NULL && !json_is_boolean(en)) {
			api_fail(c, 400, "bad_request", "autoResume.enabled", "autoResume.enabled: "
			    "must be true or false");
			return;
		}
		resume = json_is_true(en);
		/* E2B's rule: only a sandbox its timeout pauses can be woken by traffic. */
		if (resume && !auto_pause) {
			api_fail(c, 400, "bad_request", "autoResume.enabled", "autoResume.enabled: "
			    "needs autoPause: true (lifecycle.onTimeout 'pause')");
			return;
		}
	}
	if (auto_pause && !ap_memory) {
		api_fail(c, 400, "bad_request", "autoPauseMemory", "autoPauseMemory: false is not "
		    "supported yet: at its timeout airlock suspends with memory");
		return;
	}
	if (refuse_present(c, c->body, "mcp", "no MCP gateway") == -1 ||
	    refuse_present(c, c->body, "egressProxy", "no SOCKS5 egress proxy") == -1 ||
	    refuse_present(c, c->body, "iam", "no workload identity tokens") == -1)
		return;
	if (tid == NULL)
		tid = "base";
	if (e2b_template_parse(tid, name, &cause) == -1) {
		api_fail(c, 400, "bad_request", "templateID", "%s", cause);
		free(cause);
		return;
	}
	if (api_get_strmap(c, c->body, "envVars", SBM_ENV_MAX, 1, &env) == -1 ||
	    api_get_strmap(c, c->body, "metadata", SBM_METADATA_MAX, 0, &meta) == -1 ||
	    e2b_volume_mounts(c, json_object_get(c->body, "volumeMounts"), &vols) == -1)
		goto out;
	/* Internet on is E2B's default: airlock's "full" egress (through the gateway). */
	if (e2b_network_map(json_object_get(c->body, "network"), internet, 0, &net, field,
	    &cause) == -1) {
		api_fail(c, 400, "bad_request", field, "%s", cause);
		free(cause);
		goto out;
	}
	memset(&sp, 0, sizeof(sp));
	sp.project = c->key.project;
	sp.template_name = name;
	sp.vcpus = (unsigned)cfg->default_vcpus;
	sp.memory_mb = (unsigned)cfg->default_memory_mb;
	sp.env = env;
	sp.metadata = meta;
	sp.network = net;
	sp.timeout_s = timeout;
	sp.idle_timeout_s = 0;	/* E2B has only the timeout: never suspend on idle */
	sp.auto_pause = auto_pause;
	sp.volumes = vols;
	sp.auto_resume = resume;
	/* allowPublicTraffic false (checked a boolean by e2b_network_map): a traffic token. */
	sp.private_traffic = json_is_false(json_object_get(json_object_get(c->body, "network"),
	    "allowPublicTraffic"));
	metrics_inc(c->api->metrics, "sandbox_creates");
	if (sbm_create(c->api->sbm, &sp, created, c, &status, &cause) == NULL) {
		/* A missing template is the client's: E2B answers 404 for it. */
		api_error(c, status == 422 ? 404 : status, "internal", "%s", cause);
		free(cause);
	}
out:
	json_decref(env);
	json_decref(meta);
	json_decref(net);
	json_decref(vols);
}

/* --- get, list --------------------------------------------------------- */

void
e2b_sandboxes_get(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, -1);
	json_t *j, *out;

	if (sb == NULL)
		return;
	j = sb_json(sb);
	out = e2b_listed(c, j, 1, sb);
	json_decref(j);
	if (out == NULL)
		api_fail(c, 404, "not_found", NULL, "sandbox \"%s\" not found", c->params[0]);
	else
		api_json(c, 200, out);
}

/* ListedSandbox for a page. */
static json_t *
listed_conv(struct api_call *c, json_t *j)
{
	return e2b_listed(c, j, 0, NULL);
}

static void
list_common(struct api_call *c, int v2)
{
	const char *metaq = api_query_str(c, "metadata"), *st = api_query_str(c, "state");
	const char *after = api_query_str(c, "startedAfter"), *tq = api_query_str(c, "template");
	const char *order = api_query_str(c, "order");
	char tname[E2B_NAME_MAX + 1], *cause = NULL, *next = NULL;
	const char *bad = NULL;
	json_t *meta = NULL, *all = NULL, *out, *x;
	struct e2b_item *v = NULL;
	struct e2b_page pg = { 0 };
	int64_t after_ms = 0;
	int mask = E2B_STATE_RUNNING | E2B_STATE_PAUSED;
	size_t n = 0, i;

	if (!v2)
		mask = E2B_STATE_RUNNING;	/* v1 lists the running ones */
	if (metaq != NULL && *metaq != '\0' && e2b_metadata_parse(metaq, &meta, &cause) == -1)
		bad = "metadata";
	else if (st != NULL && *st != '\0' && e2b_states_parse(st, &mask, &cause) == -1)
		bad = "state";
	else if (after != NULL && e2b_time_parse(after, &after_ms, &cause) == -1)
		bad = "startedAfter";
	else if (tq != NULL && e2b_template_parse(tq, tname, &cause) == -1)
		bad = "template";
	if (bad != NULL) {
		api_fail(c, 400, "bad_request", bad, "%s", cause);
		goto out;
	}
	if (e2b_page_init(c, &pg) == -1)
		goto out;
	/* v1 has one page (no limit, no token). */
	pg.limit = v2 ? api_query_int(c, "limit", E2B_LIST_LIMIT_MAX) : 0;
	pg.desc = order == NULL || strcmp(order, "desc") == 0;
	all = sbm_list(c->api->sbm, c->key.project, NULL, meta, NULL, INT_MAX, &next);
	v = xcalloc(json_array_size(all) + 1, sizeof(*v));
	json_array_foreach(all, i, x) {
		const char *s = e2b_state_of(json_string_value(json_object_get(x, "state")));
		struct e2b_item l = { x, e2b_item_ms(x, "created_at"),
		    json_string_value(json_object_get(x, "id")) };

		if (s == NULL || !(mask & (strcmp(s, "running") == 0 ? E2B_STATE_RUNNING :
		    E2B_STATE_PAUSED)))
			continue;
		if (after != NULL && l.ms < after_ms)
			continue;
		if (tq != NULL && strcmp(json_string_value(json_object_get(x, "template")),
		    tname) != 0)
			continue;
		v[n++] = l;
	}
	out = json_array();
	e2b_page_fill(c, &pg, v, n, listed_conv, out);
	api_json(c, 200, out);
out:
	free(cause);
	free(next);
	free(v);
	json_decref(all);
	json_decref(meta);
}

void e2b_sandboxes_list_v1(struct api_call *c) { list_common(c, 0); }
void e2b_sandboxes_list_v2(struct api_call *c) { list_common(c, 1); }

/* --- lifecycle ----------------------------------------------------------- */

/* A kill or pause is done: E2B answers either with 204 and no body. */
static void
op_done_no_content(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct api_call *c = arg;

	if (error != NULL)
		api_error(c, status, "internal", "%s", error);
	else
		api_no_content(c);
}

void
e2b_sandboxes_kill(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, -1);

	if (sb != NULL)
		sb_enqueue(sb, SB_OP_DELETE, op_done_no_content, c);
}

void
e2b_sandboxes_timeout(struct api_call *c)
{
	static const char *const fields[] = { "timeout", NULL };
	struct sandbox *sb;
	long long t;
	char *cause = NULL;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_int(c, c->body, "timeout", 1, SBM_TIMEOUT_S_MAX, -1, &t) == -1)
		return;
	if (t == -1) {
		api_fail(c, 400, "bad_request", "timeout", "timeout: required (seconds)");
		return;
	}
	if ((sb = api_sandbox(c, -1)) == NULL)
		return;
	/* E2B's setTimeout: the lifetime is now + timeout, shorter or longer. */
	if (sb_patch(sb, t, -1, -1, NULL, &cause) == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		return;
	}
	api_no_content(c);
}

struct connect_op {
	struct api_call	*call;
	long long	 timeout;
};

static void
resumed(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct connect_op *op = arg;
	struct api_call *c = op->call;

	if (error != NULL)
		api_error(c, status, "internal", "%s", error);
	else {
		/* What was left when it stopped is its again; connect only extends that. */
		sb_extend(sb, op->timeout);
		api_json(c, 201, e2b_sandbox(c, sb));
	}
	free(op);
}

/*
 * The path's sandbox as E2B knows it, with its E2B state; else the call has
 * failed (api_sandbox's 404, or 404 for a state E2B has no name for: gone).
 */
static struct sandbox *
e2b_known_sandbox(struct api_call *c, const char **state)
{
	struct sandbox *sb;

	if ((sb = api_sandbox(c, -1)) == NULL)
		return NULL;
	if ((*state = e2b_state_of(sb_state_name(sb_state(sb)))) == NULL) {
		api_fail(c, 404, "not_found", NULL, "sandbox \"%s\" not found", c->params[0]);
		return NULL;
	}
	return sb;
}

/* Resume sb for call c; resumed() answers it with the timeout applied. */
static void
resume_enqueue(struct api_call *c, struct sandbox *sb, long long timeout)
{
	struct connect_op *op = xcalloc(1, sizeof(*op));

	op->call = c;
	op->timeout = timeout;
	sb_enqueue(sb, SB_OP_RESUME, resumed, op);
}

void
e2b_sandboxes_connect(struct api_call *c)
{
	static const char *const fields[] = { "timeout", "memory", NULL };
	struct sandbox *sb;
	const char *state;
	long long timeout;
	int memory;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_int(c, c->body, "timeout", 1, SBM_TIMEOUT_S_MAX, E2B_DEFAULT_TIMEOUT_S,
	    &timeout) == -1 ||
	    api_get_bool(c, c->body, "memory", 1, &memory) == -1)
		return;
	if (!memory) {
		/* onResume 'reboot': a cold boot of the disk alone; airlock keeps memory. */
		api_fail(c, 400, "bad_request", "memory", "memory: false (resume by rebooting) is "
		    "not supported yet");
		return;
	}
	if ((sb = e2b_known_sandbox(c, &state)) == NULL)
		return;
	if (sb_state(sb) == SB_RUNNING) {
		sb_touch(sb);
		sb_extend(sb, timeout);
		api_json(c, 200, e2b_sandbox(c, sb));
		return;
	}
	resume_enqueue(c, sb, timeout);
}

/*
 * The deprecated POST /sandboxes/{id}/resume {timeout=15, autoPause}: a
 * connect that wants the sandbox paused. 201 resumed; 409 when it runs
 * already (E2B's answer; connect takes that case), 404 when it is gone.
 */
void
e2b_sandboxes_resume(struct api_call *c)
{
	static const char *const fields[] = { "timeout", "autoPause", NULL };
	struct sandbox *sb;
	const char *state;
	long long timeout;
	int auto_pause;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_int(c, c->body, "timeout", 1, SBM_TIMEOUT_S_MAX, E2B_RESUME_TIMEOUT_S,
	    &timeout) == -1 ||
	    api_get_bool(c, c->body, "autoPause", 0, &auto_pause) == -1)
		return;
	if ((sb = e2b_known_sandbox(c, &state)) == NULL)
		return;
	/* Creating counts as running, as E2B lists it: nothing to resume. */
	if (strcmp(state, "running") == 0) {
		api_fail(c, 409, "conflict", NULL, "sandbox \"%s\" is already running",
		    c->params[0]);
		return;
	}
	/* Given, autoPause sets what the timeout does next (pause rather than kill). */
	if (json_object_get(c->body, "autoPause") != NULL) {
		char *cause = NULL;

		if (sb_patch(sb, -1, -1, auto_pause, NULL, &cause) == -1) {
			api_error(c, 500, "internal", "%s", cause);
			free(cause);
			return;
		}
	}
	resume_enqueue(c, sb, timeout);
}

/*
 * POST /sandboxes/{id}/refreshes {duration=0 (0..3600 s)}: keep a running
 * sandbox alive at least that long from now (never shortens it). 204; 404
 * when it is not running, as E2B answers for a sandbox it cannot reach.
 */
void
e2b_sandboxes_refreshes(struct api_call *c)
{
	static const char *const fields[] = { "duration", NULL };
	struct sandbox *sb;
	long long duration;

	if ((c->body != NULL && api_check_fields(c, c->body, "", fields) == -1) ||
	    api_get_int(c, c->body, "duration", 0, E2B_REFRESH_MAX_S, 0, &duration) == -1)
		return;
	if ((sb = api_sandbox(c, -1)) == NULL)
		return;
	if (sb_state(sb) != SB_RUNNING) {
		api_fail(c, 404, "not_found", NULL, "sandbox \"%s\" is not running",
		    c->params[0]);
		return;
	}
	sb_touch(sb);
	if (duration > 0)
		sb_extend(sb, duration);
	api_no_content(c);
}

void
e2b_sandboxes_pause(struct api_call *c)
{
	static const char *const fields[] = { "memory", NULL };
	struct sandbox *sb;
	const char *state;
	int memory;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_bool(c, c->body, "memory", 1, &memory) == -1)
		return;
	if ((sb = e2b_known_sandbox(c, &state)) == NULL)
		return;
	if (strcmp(state, "paused") == 0) {
		api_fail(c, 409, "conflict", NULL, "sandbox %s is already paused", sb_id(sb));
		return;
	}
	/*
	 * memory true (E2B's default): airlock's suspend, a snapshot with memory
	 * that survives restarts and holds no RAM; false: airlock's pause, the VM
	 * stopped in place (it still keeps its memory: a superset of E2B's
	 * filesystem-only pause).
	 */
	sb_enqueue(sb, memory ? SB_OP_SUSPEND : SB_OP_PAUSE, op_done_no_content, c);
}

/* --- metrics ----------------------------------------------------------- */

struct metrics_op {
	struct api_call	*call;
	struct sandbox	*sb;
};

static void
metrics_done(int status, json_t *resp, const char *error, void *arg)
{
	struct metrics_op *m = arg;
	struct api_call *c = m->call;
	int64_t now = store_now_ms();

	if (error != NULL || status != 200 || !json_is_object(resp)) {
		api_error(c, 502, "agent_error", "guest metrics: %s", error ? error :
		    "the guest agent answered an error");
	} else {
		/*
		 * The guest writes these: each must be a number, or the answer
		 * says which the agent left out (a 502, never a broken body).
		 */
		static const char *const keys[][2] = { { "cpu_count", "cpuCount" },
		    { "cpu_used_pct", "cpuUsedPct" }, { "mem_used", "memUsed" },
		    { "mem_total", "memTotal" }, { "mem_cache", "memCache" },
		    { "disk_used", "diskUsed" }, { "disk_total", "diskTotal" } };
		json_t *item = json_pack("{s:o,s:I}", "timestamp", json_time_ms(now),
		    "timestampUnix", (json_int_t)(now / 1000));
		size_t i;

		for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			json_t *v = json_object_get(resp, keys[i][0]);
			/* Agents built before mem_cache existed: 0 (docs/e2b.md). */
			if (v == NULL && strcmp(keys[i][0], "mem_cache") == 0)
				v = json_integer(0);
			else if (json_is_number(v))
				json_incref(v);
			else {
				json_decref(item);
				item = NULL;
				api_error(c, 502, "agent_error", "guest metrics: %s is not a number",
				    keys[i][0]);
				break;
			}
			json_object_set_new(item, keys[i][1], v);
		}
		if (item != NULL)
			api_json(c, 200, json_pack("[o]", item));
	}
	sb_unref(m->sb);
	free(m);
}

void
e2b_sandboxes_metrics(struct api_call *c)
{
	struct sandbox *sb = api_sandbox(c, -1);
	long long start = api_query_int(c, "start", 0), end = api_query_int(c, "end", 1LL << 40);
	long long now = store_now_ms() / 1000;
	struct api_agent_headers ah;
	struct metrics_op *m;
	char *cause = NULL;

	if (sb == NULL)
		return;
	/* One sample, now: a window that does not hold now has none; nor has a paused sandbox. */
	if (now < start || now > end || sb_agent(sb) == NULL) {
		api_json(c, 200, json_array());
		return;
	}
	m = xcalloc(1, sizeof(*m));
	m->call = c;
	m->sb = sb;
	sb_ref(sb);
	api_agent_headers(&ah, sb, "root", 0);
	if (envd_call_json(sb_agent(sb), "GET", "/metrics", NULL, ah.h, metrics_done, m,
	    &cause) == NULL) {
		api_error(c, 502, "agent_error", "guest metrics: %s", cause);
		free(cause);
		sb_unref(sb);
		free(m);
	}
	api_agent_headers_free(&ah);
}

/* --- templates ----------------------------------------------------------- */

void
e2b_templates_list(struct api_call *c)
{
	const struct config *cfg = c->api->cfg;
	json_t *all = api_templates_all(), *out = json_array(), *t;
	size_t i;

	json_array_foreach(all, i, t) {
		json_t *name = json_object_get(t, "name"), *at = json_object_get(t, "built_at");
		json_t *disk = json_object_get(t, "disk_size_mb");

		if (!json_is_string(name))
			continue;
		json_array_append_new(out, json_pack("{s:O,s:O,s:i,s:i,s:o,s:b,s:[O],s:[O],s:O,"
		    "s:O,s:n,s:n,s:i,s:i,s:s,s:s}",
		    "templateID", name, "buildID", json_object_get(t, "recipe_sha256") ?
		    json_object_get(t, "recipe_sha256") : name,
		    "cpuCount", cfg->default_vcpus, "memoryMB", cfg->default_memory_mb,
		    "diskSizeMB", disk != NULL ? json_incref(disk) : json_integer(0), "public", 0,
		    "aliases", name, "names", name, "createdAt", at ? at : json_null(),
		    "updatedAt", at ? at : json_null(), "createdBy", "lastSpawnedAt",
		    "spawnCount", 0, "buildCount", 1, "envdVersion", E2B_ENVD_VERSION,
		    "buildStatus", "ready"));
	}
	json_decref(all);
	api_json(c, 200, out);
}
