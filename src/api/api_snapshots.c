/* /v1: fork a sandbox, named snapshots (create, list, delete). The work is sbm_fork.c, sbm_snap.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_sandbox.h"
#include "common/util.h"
#include "sandbox/sbm.h"

static const char *
err_code(int status)
{
	return status == 400 ? "bad_request" : status == 404 ? "not_found" : status == 409 ?
	    "conflict" : status == 429 ? "too_many" : status == 503 ? "unavailable" :
	    status == 507 ? "insufficient_storage" : "internal";
}

/* --- fork -------------------------------------------------------------------- */

/*
 * 201 {"source", "paused_ms", "capture_ms", "sandboxes": [...], "errors": [...]}:
 * every child that runs; one that failed is an error entry {index, code, message}.
 * If none runs, the reply is the first child's error.
 */
static void
forked(const struct sb_fork_result *r, void *arg)
{
	struct api_call *c = arg;
	json_t *kids, *errs;
	int i, ok = 0, first = -1;

	if (r->error != NULL) {
		api_error(c, r->error_status ? r->error_status : 500, err_code(r->error_status), "%s",
		    r->error);
		return;
	}
	kids = json_array();
	errs = json_array();
	for (i = 0; i < r->count; i++) {
		if (r->kids[i] != NULL) {
			json_array_append_new(kids, sb_json(r->kids[i]));
			ok++;
		} else {
			if (first == -1)
				first = i;
			json_array_append_new(errs, json_pack("{s:i,s:i,s:s}", "index", i, "status",
			    r->statuses[i], "message", r->errors[i] ? r->errors[i] : "failed"));
		}
	}
	if (ok == 0 && first != -1) {
		api_error(c, r->statuses[first], err_code(r->statuses[first]), "%s",
		    r->errors[first] ? r->errors[first] : "fork failed");
		json_decref(kids);
		json_decref(errs);
		return;
	}
	api_json(c, 201, json_pack("{s:s,s:f,s:f,s:o,s:o}", "source", r->source,
	    "paused_ms", r->paused_ms, "capture_ms", r->capture_ms, "sandboxes", kids, "errors",
	    errs));
}

void
api_sandboxes_fork(struct api_call *c)
{
	static const char *const fields[] = { "count", "network", "metadata", "timeout_s", NULL };
	struct sandbox *sb;
	long long count, timeout;
	json_t *net = NULL, *meta = NULL;
	char *cause = NULL;
	int status;

	if ((sb = api_sandbox(c, -1)) == NULL)
		return;
	if ((c->body != NULL && api_check_fields(c, c->body, "", fields) == -1) ||
	    api_get_int(c, c->body, "count", 1, SBM_FORK_MAX, 1, &count) == -1 ||
	    api_get_int(c, c->body, "timeout_s", 0, SBM_TIMEOUT_S_MAX, -1, &timeout) == -1)
		return;
	if (json_object_get(c->body, "metadata") != NULL &&
	    api_get_strmap(c, c->body, "metadata", SBM_METADATA_MAX, 0, &meta) == -1)
		return;
	if (json_object_get(c->body, "network") != NULL &&
	    api_parse_network_value(c, json_object_get(c->body, "network"), &net) == -1)
		goto out;
	sb_touch(sb);
	if (sbm_fork(c->api->sbm, sb, (int)count, net, meta, timeout, forked, c, &status,
	    &cause) == -1) {
		api_fail(c, status, err_code(status), strncmp(cause, "count", 5) == 0 ? "count" :
		    strncmp(cause, "network", 7) == 0 ? "network.mode" : NULL, "%s", cause);
		free(cause);
	}
out:
	json_decref(net);
	json_decref(meta);
}

/* --- named snapshots --------------------------------------------------------- */

static void
snapped(const struct store_snap *sn, double paused_ms, const char *error, int status, void *arg)
{
	struct api_call *c = arg;
	json_t *j;

	if (error != NULL) {
		api_error(c, status ? status : 500, err_code(status), "%s", error);
		return;
	}
	j = sbm_snap_json(sn);
	json_object_set_new(j, "paused_ms", json_real(paused_ms));
	api_json(c, 201, j);
}

void
api_snapshots_create(struct api_call *c)
{
	static const char *const fields[] = { "name", NULL };
	struct sandbox *sb;
	const char *name;
	char *cause = NULL;
	int status;

	if ((sb = api_sandbox(c, -1)) == NULL)
		return;
	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "name", 1, STORE_ID_MAX - 1, &name) == -1)
		return;
	sb_touch(sb);
	if (sbm_snap_create(c->api->sbm, sb, name, snapped, c, &status, &cause) == -1) {
		api_fail(c, status, err_code(status), strncmp(cause, "name", 4) == 0 ? "name" : NULL,
		    "%s", cause);
		free(cause);
	}
}

void
api_snapshots_list(struct api_call *c)
{
	char *cause = NULL;
	json_t *list = sbm_snap_list(c->api->sbm, c->key.project, api_query_str(c, "source"),
	    &cause);

	if (list == NULL) {
		api_fail(c, 500, "internal", NULL, "%s", cause);
		free(cause);
		return;
	}
	api_json(c, 200, json_pack("{s:o}", "snapshots", list));
}

void
api_snapshots_delete(struct api_call *c)
{
	char *cause = NULL;
	int status;

	if (sbm_snap_delete(c->api->sbm, c->key.project, c->params[0], &status, &cause) == -1) {
		api_fail(c, status, err_code(status), NULL, "%s", cause);
		free(cause);
		return;
	}
	api_no_content(c);
}
