/*
 * /v1/projects/{project}/quota (admin): a project's limits on its live
 * sandboxes, their vCPUs and their memory (0: no limit on that one), and
 * what it holds now. Creates beyond them answer 429 (sandbox/sbm_quota.c).
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "db/store.h"

static int
project_param(struct api_call *c)
{
	if (!api_project_valid(c->params[0]))
		return api_fail(c, 400, "bad_request", "project", "project: \"%s\" is not a project "
		    "name (1-63 of a-z 0-9 - _)", c->params[0]);
	return 0;
}

static json_t *
quota_json(const struct store_quota *q, const struct store_usage *u, const char *project)
{
	return json_pack("{s:s,s:o,s:{s:i,s:i,s:I}}", "project", project,
	    "quota", q == NULL ? json_null() : json_pack("{s:i,s:i,s:I,s:o}", "max_sandboxes",
	    (int)q->max_sandboxes, "max_vcpus", (int)q->max_vcpus, "max_memory_mb",
	    (json_int_t)q->max_memory_mb, "updated_at", json_time_ms(q->updated_at)),
	    "usage", "sandboxes", (int)u->sandboxes, "vcpus", (int)u->vcpus, "memory_mb",
	    (json_int_t)u->memory_mb);
}

static void
quota_answer(struct api_call *c, int status)
{
	struct store_quota q;
	struct store_usage u;
	char *cause = NULL;
	int rc;

	if ((rc = store_quota_get(c->api->store, c->params[0], &q, &cause)) == -1 ||
	    store_usage(c->api->store, c->params[0], &u, &cause) == -1) {
		api_fail(c, 500, "internal", NULL, "%s", cause);
		free(cause);
		return;
	}
	api_json(c, status, quota_json(rc == 1 ? &q : NULL, &u, c->params[0]));
}

void
api_quota_put(struct api_call *c)
{
	static const char *const fields[] = { "max_sandboxes", "max_vcpus", "max_memory_mb", NULL };
	struct store_quota q;
	long long n, v, mb;
	char *cause = NULL;

	if (project_param(c) == -1 || api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_int(c, c->body, "max_sandboxes", 0, 100000, 0, &n) == -1 ||
	    api_get_int(c, c->body, "max_vcpus", 0, 1000000, 0, &v) == -1 ||
	    api_get_int(c, c->body, "max_memory_mb", 0, 1LL << 40, 0, &mb) == -1)
		return;
	memset(&q, 0, sizeof(q));
	snprintf(q.project, sizeof(q.project), "%s", c->params[0]);
	q.max_sandboxes = (unsigned)n;
	q.max_vcpus = (unsigned)v;
	q.max_memory_mb = (uint64_t)mb;
	if (store_quota_put(c->api->store, &q, &cause) == -1) {
		api_fail(c, 500, "internal", NULL, "%s", cause);
		free(cause);
		return;
	}
	quota_answer(c, 200);
}

void
api_quota_get(struct api_call *c)
{
	if (project_param(c) == 0)
		quota_answer(c, 200);
}

void
api_quota_delete(struct api_call *c)
{
	char *cause = NULL;

	if (project_param(c) == -1)
		return;
	if (store_quota_delete(c->api->store, c->params[0], &cause) == -1) {
		api_fail(c, 500, "internal", NULL, "%s", cause);
		free(cause);
		return;
	}
	api_no_content(c);
}
