/* Sandbox manager: the idle and lifetime sweep. */
#include "sandbox/sbm_impl.h"

/* --- idle and lifetime sweep -------------------------------------------- */

static void
sb_sweep_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	if (error != NULL)
		log_warnx("sandbox %s: %s: %s", sb->rec.id, (const char *)arg, error);
}

/* Idle by what the host sees: no request and no open stream for idle_timeout_s. */
static int
sb_idle_due(const struct sandbox *sb, int64_t now)
{
	/* An unhealthy one is the health policy's: a suspend would snapshot a wedged guest. */
	return sb->cur == NULL && TAILQ_EMPTY(&sb->ops) && sb_is(sb, SB_RUNNING) &&
	    sb->hl_status == SB_HEALTHY &&
	    sb->rec.idle_timeout_s > 0 && sb->streams == 0 &&
	    now - sb->last_active >= sb->rec.idle_timeout_s * 1000;
}

static void
sb_idle_suspend(struct sandbox *sb, int64_t now, double cpu_pct)
{
	json_t *data = json_pack("{s:I}", "idle_s", (json_int_t)((now - sb->last_active) / 1000));

	if (cpu_pct >= 0)
		json_object_set_new(data, "guest_cpu_pct", json_real(cpu_pct));
	sb_event(sb, "idle_suspend", data);
	sb_enqueue(sb, SB_OP_SUSPEND, sb_sweep_done, "idle suspend");
}

/*
 * The guest's CPU use since the previous GET /metrics (the agent keeps the
 * last sample), as a percentage of one vCPU. When the previous ask was ours,
 * one sweep ago, that is the guest's use over the last interval.
 */
static void
sb_idle_cpu_done(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	int64_t now = now_ms();
	double pct;

	sb->cpu_req = NULL;
	if (!sb_idle_due(sb, now) || !sb->cpu_decides)
		return;
	if (error != NULL || status != 200 || !json_is_object(resp)) {
		/* A guest that cannot say it is busy is treated as idle. */
		log_warnx("sandbox %s: idle check: guest metrics: %s", sb->rec.id,
		    error != NULL ? error : "unexpected answer");
		sb_idle_suspend(sb, now, -1);
		return;
	}
	pct = json_number_value(json_object_get(resp, "cpu_used_pct")) *
	    (double)json_integer_value(json_object_get(resp, "cpu_count"));
	if (pct < sb->m->cfg->idle_cpu_pct) {
		sb_idle_suspend(sb, now, pct);
		return;
	}
	log_debug("sandbox %s: guest busy (%.1f%% of a vCPU): not idle", sb->rec.id, pct);
	sb->last_active = now;
}

/*
 * A guest busy with a background job (started by an exec that has since
 * returned) is not idle. Before suspending a sandbox that is idle by the
 * host's measure, ask its agent for CPU use: the first ask only opens an
 * interval, the next sweep's answer decides (at least idle_cpu_pct of one
 * vCPU counts as activity). One agent call per sweep, only for sandboxes
 * otherwise due.
 */
static void
sb_idle_check(struct sandbox *sb, int64_t now)
{
	int sweep_ms = sb->m->cfg->sweep_interval_s * 1000;
	const char *hdrs[2] = { NULL, NULL };
	char *tok = NULL, *cause = NULL;

	if (sb->m->cfg->idle_cpu_pct == 0 || sb_agent(sb) == NULL) {
		sb_idle_suspend(sb, now, -1);
		return;
	}
	if (sb->cpu_req != NULL)
		return;
	sb->cpu_decides = sb->cpu_asked_ms != 0 && now - sb->cpu_asked_ms <= 2 * sweep_ms;
	sb->cpu_asked_ms = now;
	if (sb->rec.access_token != NULL) {
		xasprintf(&tok, "X-Access-Token: %s", sb->rec.access_token);
		hdrs[0] = tok;
	}
	sb->cpu_req = envd_call_json(sb->agent, "GET", "/metrics", NULL, hdrs, sb_idle_cpu_done,
	    sb, &cause);
	free(tok);
	if (sb->cpu_req == NULL) {
		log_warnx("sandbox %s: idle check: %s", sb->rec.id, cause);
		free(cause);
		sb_idle_suspend(sb, now, -1);
	}
}

void
sbm_sweep(evutil_socket_t fd, short ev, void *arg)
{
	struct sbm *m = arg;
	struct sandbox *sb;
	int64_t now = now_ms();

	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (sb->cur != NULL || !TAILQ_EMPTY(&sb->ops))
			continue;
		/*
		 * Only running time counts (sbm_lifetime.h): a paused or
		 * suspended sandbox does not expire. A suspend by the timeout
		 * keeps expires_at, so it stops with nothing left and gets its
		 * timeout afresh when it runs again.
		 */
		if (sb->rec.expires_at != 0 && now >= sb->rec.expires_at && sb_is(sb, SB_RUNNING)) {
			sb_event(sb, "timeout", json_pack("{s:s}", "action",
			    sb->rec.auto_pause ? "suspend" : "delete"));
			sb_enqueue(sb, sb->rec.auto_pause ? SB_OP_SUSPEND : SB_OP_DELETE,
			    sb_sweep_done, "lifetime timeout");
			break;	/* the list may change under a delete: next sweep continues */
		}
		if (sb_idle_due(sb, now))
			sb_idle_check(sb, now);
	}
	sbm_egress_maintain(m->egress);
}
