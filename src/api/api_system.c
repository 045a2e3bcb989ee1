/* /healthz, /metrics, /v1/openapi.json. */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "api/api.h"
#include "api/metrics.h"
#include "api/openapi.h"
#include "common/util.h"
#include "config/config.h"
#include "images/stor_sandbox.h"
#include "sandbox/sbm.h"

void
api_system_healthz(struct api_call *c)
{
	api_json(c, 200, json_pack("{s:s,s:s,s:s,s:i,s:I}", "status", "ok", "version",
	    AIRLOCK_VERSION, "accel", c->api->accel_name ? c->api->accel_name : "unknown",
	    "sandboxes", sbm_count(c->api->sbm, -1),
	    "uptime_s", (json_int_t)((store_now_ms() - c->api->started_ms) / 1000)));
}

/*
 * POST /v1/workers/{name}/drain (admin; the API replicas send it to that
 * worker): no new sandboxes here, every one suspended to disk. 202 at once;
 * GET /v1/workers says "draining", and the sandboxes' states say the rest.
 */
void
api_workers_drain(struct api_call *c)
{
	static const char *const none[] = { NULL };
	struct api *api = c->api;

	if (c->body != NULL && api_check_fields(c, c->body, "", none) == -1)
		return;
	if (api->worker_name == NULL || api->drain == NULL) {
		api_fail(c, 404, "not_found", "name", "this airlockd is not a cluster worker "
		    "(direct mode has no workers to drain)");
		return;
	}
	if (strcmp(c->params[0], api->worker_name) != 0) {
		api_fail(c, 404, "not_found", "name", "this is worker %s, not %s",
		    api->worker_name, c->params[0]);
		return;
	}
	api->drain(api->drain_arg);
	api_json(c, 202, json_pack("{s:s,s:s}", "worker", api->worker_name, "state",
	    "draining"));
}

/* Totals over every attached sandbox, from the gateway if one runs. */
static void
gateway_metrics(struct sbm *m, struct evbuffer *out)
{
	static const char *const counters[] = { "dns_queries", "dns_denied", "conns",
	    "conns_denied", "requests", "requests_denied", "bytes_up", "bytes_down", NULL };
	json_t *st, *one;
	const char *id;
	json_int_t sum;

	if ((st = sbm_egress_info(m, NULL, NULL)) == NULL)
		return;
	evbuffer_add_printf(out, "# TYPE airlock_gateway_rss_bytes gauge\n"
	    "airlock_gateway_rss_bytes %lld\n", (long long)json_integer_value(
	    json_object_get(st, "rss_kb")) * 1024);
	evbuffer_add_printf(out, "# TYPE airlock_gateway_sandboxes gauge\n"
	    "airlock_gateway_sandboxes %zu\n", json_object_size(json_object_get(st, "sandboxes")));
	for (size_t i = 0; counters[i] != NULL; i++) {
		sum = 0;
		json_object_foreach(json_object_get(st, "sandboxes"), id, one)
			sum += json_integer_value(json_object_get(one, counters[i]));
		/* Counters of detached sandboxes leave the sum: a gauge, not a counter. */
		evbuffer_add_printf(out, "# TYPE airlock_gateway_%s gauge\n"
		    "airlock_gateway_%s %lld\n", counters[i], counters[i], (long long)sum);
	}
	json_decref(st);
}

/* The data dir's filesystem (one statvfs) and the floor creates are refused below. */
static void
disk_metrics(const struct config *cfg, struct evbuffer *out)
{
	uint64_t avail, total;

	if (stor_space(&avail, &total, NULL) == -1)
		return;
	evbuffer_add_printf(out, "# TYPE airlock_data_free_bytes gauge\n"
	    "airlock_data_free_bytes %llu\n", (unsigned long long)avail);
	evbuffer_add_printf(out, "# TYPE airlock_data_size_bytes gauge\n"
	    "airlock_data_size_bytes %llu\n", (unsigned long long)total);
	evbuffer_add_printf(out, "# TYPE airlock_disk_free_floor_bytes gauge\n"
	    "airlock_disk_free_floor_bytes %llu\n",
	    (unsigned long long)cfg->disk_free_floor_mb << 20);
}

void
api_metrics_render(struct api *api, struct evbuffer *out)
{
	size_t i;

	metrics_render(api->metrics, out);
	evbuffer_add_printf(out, "# TYPE airlock_sandboxes gauge\n");
	for (i = 0; i < SB_POOLED; i++)	/* members: sbm_pool_metrics */
		evbuffer_add_printf(out, "airlock_sandboxes{state=\"%s\"} %d\n",
		    sb_state_names[i], sbm_count(api->sbm, (int)i));
	/* A condition of running sandboxes (their count above includes these). */
	evbuffer_add_printf(out, "# TYPE airlock_sandboxes_unhealthy gauge\n"
	    "airlock_sandboxes_unhealthy %d\n", sbm_count_unhealthy(api->sbm));
	gateway_metrics(api->sbm, out);
	sbm_pool_metrics(api->sbm, out);
	disk_metrics(api->cfg, out);
}

void
api_system_metrics(struct api_call *c)
{
	struct evbuffer *out = evbuffer_new();
	size_t len;
	char *text;

	api_metrics_render(c->api, out);
	len = evbuffer_get_length(out);
	text = xmalloc(len + 1);
	evbuffer_remove(out, text, len);
	evbuffer_free(out);
	http_reply(c->req, 200, "text/plain; version=0.0.4", text, len);
	free(text);
	api_call_done(c);
}

void
api_system_openapi(struct api_call *c)
{
	http_reply(c->req, 200, "application/json", openapi_json, strlen(openapi_json));
	api_call_done(c);
}
