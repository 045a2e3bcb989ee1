/*
 * E2B snapshots and fork onto airlock's named snapshots and fork
 * (sbm_snap.c, sbm_fork.c; docs/e2b.md):
 *   POST /sandboxes/{id}/snapshots {"name"?} -> 201 {"snapshotID", "names"}
 *   GET /snapshots?sandboxID=&name=&limit=    -> [{"snapshotID", "names"}]
 *   DELETE /templates/{snapshotID}            -> 204 (409 while in use)
 *   POST /sandboxes/{id}/fork {"count", "timeout"?}
 *                                   -> 201 [{"sandbox": Sandbox} | {"error": {code, message}}]
 * A snapshot's ID is "<name>:default" (E2B's name:tag); Sandbox.create(snapshotID)
 * sends it as templateID, which e2b_template_parse reduces to the name and
 * sbm_create finds as a snapshot when no template has that name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/util.h"
#include "e2b/e2b.h"
#include "e2b/e2b_page.h"
#include "e2b/e2b_parse.h"
#include "sandbox/sbm.h"

static json_t *
snap_info(json_t *s)
{
	char id[STORE_ID_MAX + 16];

	snprintf(id, sizeof(id), "%s:default", json_string_value(json_object_get(s, "name")));
	return json_pack("{s:s,s:[s]}", "snapshotID", id, "names", id);
}

static json_t *
snap_conv(struct api_call *c, json_t *s)
{
	return snap_info(s);
}

/* --- create ------------------------------------------------------------------ */

static void
snapped(const struct store_snap *sn, double paused_ms, const char *error, int status, void *arg)
{
	struct api_call *c = arg;
	json_t *j;

	if (error != NULL) {
		api_error(c, status ? status : 500, "internal", "%s", error);
		return;
	}
	j = sbm_snap_json(sn);
	api_json(c, 201, snap_info(j));
	json_decref(j);
}

void
e2b_snapshots_create(struct api_call *c)
{
	static const char *const fields[] = { "name", NULL };
	struct sandbox *sb = sbm_find(c->api->sbm, c->params[0], c->key.project);
	const char *given = NULL;
	char name[E2B_NAME_MAX + 1], gen[32], *cause = NULL;
	int status;

	if (sb == NULL) {
		api_fail(c, 404, "not_found", NULL, "sandbox \"%s\" not found", c->params[0]);
		return;
	}
	if ((c->body != NULL && api_check_fields(c, c->body, "", fields) == -1) ||
	    api_get_string(c, c->body, "name", 0, 255, &given) == -1)
		return;
	if (given != NULL) {
		/* E2B names may carry a tag ("snap1:v2"): the name part is airlock's. */
		if (e2b_template_parse(given, name, &cause) == -1) {
			api_fail(c, 400, "bad_request", "name", "name: %s", cause);
			free(cause);
			return;
		}
	} else {
		random_id(gen, 12);
		snprintf(name, sizeof(name), "snap-%s", gen);
	}
	sb_touch(sb);
	if (sbm_snap_create(c->api->sbm, sb, name, snapped, c, &status, &cause) == -1) {
		api_fail(c, status, "bad_request", strncmp(cause, "name", 4) == 0 ? "name" : NULL,
		    "%s", cause);
		free(cause);
	}
}

/* --- list, delete --------------------------------------------------------------- */

void
e2b_snapshots_list(struct api_call *c)
{
	const char *sid = api_query_str(c, "sandboxID"), *want = api_query_str(c, "name");
	char name[E2B_NAME_MAX + 1] = "", *cause = NULL;
	struct e2b_page pg = { .desc = 1 };	/* newest first, as E2B */
	struct e2b_item *v;
	json_t *list, *out, *s;
	size_t i, n = 0;

	if (want != NULL && e2b_template_parse(want, name, &cause) == -1) {
		api_fail(c, 400, "bad_request", "name", "name: %s", cause);
		free(cause);
		return;
	}
	if (e2b_page_init(c, &pg) == -1)
		return;
	pg.limit = api_query_int(c, "limit", E2B_LIST_LIMIT_MAX);
	if ((list = sbm_snap_list(c->api->sbm, c->key.project, sid, &cause)) == NULL) {
		api_fail(c, 500, "internal", NULL, "%s", cause);
		free(cause);
		return;
	}
	v = xcalloc(json_array_size(list) + 1, sizeof(*v));
	json_array_foreach(list, i, s)
		if (name[0] == '\0' ||
		    strcmp(json_string_value(json_object_get(s, "name")), name) == 0)
			v[n++] = (struct e2b_item){ s, e2b_item_ms(s, "created_at"),
			    json_string_value(json_object_get(s, "id")) };
	out = json_array();
	e2b_page_fill(c, &pg, v, n, snap_conv, out);
	free(v);
	json_decref(list);
	api_json(c, 200, out);
}

void
e2b_templates_delete(struct api_call *c)
{
	char name[E2B_NAME_MAX + 1], *cause = NULL;
	int status;

	if (e2b_template_parse(c->params[0], name, &cause) == -1) {
		api_fail(c, 400, "bad_request", "templateID", "%s", cause);
		free(cause);
		return;
	}
	/* Only snapshots are deleted here: templates are built and removed by the operator. */
	if (sbm_snap_delete(c->api->sbm, c->key.project, name, &status, &cause) == -1) {
		api_fail(c, status, status == 404 ? "not_found" : status == 409 ? "conflict" :
		    "internal", NULL, "%s", cause);
		free(cause);
		return;
	}
	api_no_content(c);
}

/* --- fork ------------------------------------------------------------------------ */

static void
forked(const struct sb_fork_result *r, void *arg)
{
	struct api_call *c = arg;
	json_t *out;
	int i;

	if (r->error != NULL) {
		api_error(c, r->error_status ? r->error_status : 500, "internal", "%s", r->error);
		return;
	}
	out = json_array();
	for (i = 0; i < r->count; i++)
		json_array_append_new(out, r->kids[i] != NULL ?
		    json_pack("{s:o}", "sandbox", e2b_sandbox(c, r->kids[i])) :
		    json_pack("{s:{s:i,s:s}}", "error", "code", r->statuses[i], "message",
		    r->errors[i] ? r->errors[i] : "failed"));
	api_json(c, 201, out);
}

void
e2b_sandboxes_fork(struct api_call *c)
{
	static const char *const fields[] = { "count", "timeout", NULL };
	struct sandbox *sb = sbm_find(c->api->sbm, c->params[0], c->key.project);
	long long count, timeout;
	char *cause = NULL;
	int status;

	if (sb == NULL) {
		api_fail(c, 404, "not_found", NULL, "sandbox \"%s\" not found", c->params[0]);
		return;
	}
	if ((c->body != NULL && api_check_fields(c, c->body, "", fields) == -1) ||
	    api_get_int(c, c->body, "count", 1, SBM_FORK_MAX, 1, &count) == -1 ||
	    api_get_int(c, c->body, "timeout", 1, SBM_TIMEOUT_S_MAX, -1, &timeout) == -1)
		return;
	sb_touch(sb);
	if (sbm_fork(c->api->sbm, sb, (int)count, NULL, NULL, timeout, forked, c, &status,
	    &cause) == -1) {
		api_fail(c, status, "bad_request", strncmp(cause, "count", 5) == 0 ? "count" : NULL,
		    "%s", cause);
		free(cause);
	}
}
