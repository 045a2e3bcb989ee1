/*
 * The E2B front's router: which way a request goes, E2B API keys
 * (X-API-KEY), and the call lifecycle of src/api/ with E2B's error shape
 * ({"code": status, "message"}) and E2B's query rule (unknown parameters
 * are ignored: the SDKs add their own, such as ?source=ci).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api.h"
#include "config/config.h"
#include "e2b/e2b.h"
#include "e2b/e2b_parse.h"
#include "sandbox/sbm.h"

enum { E_JSON = API_ROUTE_JSON, E_JSON_OPT = API_ROUTE_JSON_OPT };

static const char *const q_order[] = { "asc", "desc", NULL };

/* Values are read by the handler (e2b_parse.c); here only their size and type. */
static const struct api_qparam q_list_v2[] = {
	{ "metadata", API_Q_STR, 0, 0, 65536, NULL },
	{ "state", API_Q_STR, 0, 0, 64, NULL },
	{ "startedAfter", API_Q_STR, 0, 1, 64, NULL },
	{ "template", API_Q_STR, 0, 1, 200, NULL },
	{ "order", API_Q_ENUM, 0, 0, 0, q_order },
	{ "limit", API_Q_INT, 0, 1, E2B_LIST_LIMIT_MAX, NULL },
	{ "nextToken", API_Q_STR, 0, 0, 64, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_list_v1[] = {
	{ "metadata", API_Q_STR, 0, 0, 65536, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};
static const struct api_qparam q_metrics[] = {
	{ "start", API_Q_INT, 0, 0, 1LL << 40, NULL },
	{ "end", API_Q_INT, 0, 0, 1LL << 40, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};

static const struct api_qparam q_snapshots[] = {
	{ "sandboxID", API_Q_STR, 0, 1, 64, NULL },
	{ "name", API_Q_STR, 0, 1, 255, NULL },
	{ "limit", API_Q_INT, 0, 1, E2B_LIST_LIMIT_MAX, NULL },
	{ "nextToken", API_Q_STR, 0, 0, 64, NULL },
	{ NULL, 0, 0, 0, 0, NULL }
};

static const struct api_route e2b_routes[] = {
	{ "POST", "/sandboxes", e2b_sandboxes_create, E_JSON, NULL },
	{ "POST", "/v2/sandboxes", e2b_sandboxes_create, E_JSON, NULL },
	{ "GET", "/sandboxes", e2b_sandboxes_list_v1, 0, q_list_v1 },
	{ "GET", "/v2/sandboxes", e2b_sandboxes_list_v2, 0, q_list_v2 },
	{ "GET", "/sandboxes/:id", e2b_sandboxes_get, 0, NULL },
	{ "DELETE", "/sandboxes/:id", e2b_sandboxes_kill, 0, NULL },
	{ "POST", "/sandboxes/:id/connect", e2b_sandboxes_connect, E_JSON_OPT, NULL },
	{ "POST", "/v2/sandboxes/:id/connect", e2b_sandboxes_connect, E_JSON_OPT, NULL },
	{ "POST", "/sandboxes/:id/timeout", e2b_sandboxes_timeout, E_JSON, NULL },
	{ "POST", "/sandboxes/:id/pause", e2b_sandboxes_pause, E_JSON_OPT, NULL },
	{ "GET", "/sandboxes/:id/metrics", e2b_sandboxes_metrics, 0, q_metrics },
	{ "GET", "/templates", e2b_templates_list, 0, NULL },
	{ "POST", "/sandboxes/:id/fork", e2b_sandboxes_fork, E_JSON_OPT, NULL },
	{ "POST", "/sandboxes/:id/snapshots", e2b_snapshots_create, E_JSON_OPT, NULL },
	{ "GET", "/snapshots", e2b_snapshots_list, 0, q_snapshots },
	{ "DELETE", "/templates/:id", e2b_templates_delete, 0, NULL },
	{ "PUT", "/sandboxes/:id/network", e2b_sandboxes_network, E_JSON_OPT, NULL },
	{ "POST", "/sandboxes/:id/resume", e2b_sandboxes_resume, E_JSON_OPT, NULL },
	{ "POST", "/sandboxes/:id/refreshes", e2b_sandboxes_refreshes, E_JSON_OPT, NULL },
	{ NULL, NULL, NULL, 0, NULL }
};

/* E2B sends X-API-KEY; Authorization: Bearer (E2B_ACCESS_TOKEN, airlock's own form) also works. */
static int
e2b_authenticate(struct api_call *c)
{
	const char *k = http_req_header(c->req, "x-api-key");
	const char *h = http_req_header(c->req, "authorization");

	if (k == NULL && h != NULL && strncasecmp(h, "Bearer ", 7) == 0 && h[7] != '\0')
		k = h + 7;
	if (k == NULL || *k == '\0')
		return api_fail(c, 401, "unauthorized", NULL, "missing API key: send X-API-KEY "
		    "(E2B_API_KEY) with an airlock key (airlock key create --e2b)");
	return api_authenticate_key(c, k);
}

static const struct api_route *
e2b_route_find(struct api_call *c)
{
	const struct api_route *r;

	if ((r = api_route_lookup(c, e2b_routes, "E2B ")) == NULL)
		return NULL;
	if (e2b_authenticate(c) == -1 || api_params_check(c, r->pattern) == -1 ||
	    api_query_check(c, r->query, 1) == -1)
		return NULL;
	if ((r->flags & (E_JSON | E_JSON_OPT)) && api_body_json_check(c) == -1)
		return NULL;
	return r;
}

static void
e2b_control(struct api *api, struct http_req *req)
{
	struct api_call *c = api_call_new(api, req);
	const struct api_route *r;

	c->style = API_STYLE_E2B;
	if ((r = e2b_route_find(c)) == NULL) {
		api_dispatch(c, NULL);
		return;
	}
	/* Bodies are small JSON, chunked (e2b >= 2.23) or not: the server decodes both. */
	api_route_run_buffered(c, r);
}

void
e2b_front(struct http_req *req, void *arg)
{
	struct api *api = arg;
	const char *id = http_req_header(req, "e2b-sandbox-id");
	char hid[E2B_TOKEN_ID_MAX + 1];
	unsigned port;

	/*
	 * "{port}-{id}.{domain}" is that sandbox's, whatever the path: the
	 * SDKs' host route (no E2B_SANDBOX_URL), getHost(port), signed URLs.
	 * HTTP/1.1 only (no h2 is offered), so Host is the :authority.
	 */
	if (api->cfg != NULL && e2b_host_parse(http_req_header(req, "host"),
	    api->cfg->e2b_domain, &port, hid) == E2B_HOST_SANDBOX) {
		e2b_envd_proxy(api, req, hid, port);
		return;
	}
	switch (e2b_classify(http_req_path(req), id)) {
	case E2B_WAY_CONTROL:
		e2b_control(api, req);
		break;
	case E2B_WAY_ENVD:
		e2b_envd_proxy(api, req, id, 0);
		break;
	case E2B_WAY_AIRLOCK:
		api_router(req, arg);
		break;
	}
}
