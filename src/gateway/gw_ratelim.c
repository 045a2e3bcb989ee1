/*
 * Rate limits of the proxy. Requests per second: token buckets (common/tbucket.h)
 * (the sandbox's in gw_sandbox, one per rule here). Bytes per second:
 * libevent rate-limit groups, the sandbox's on the guest side of every
 * connection and a rule's on the upstream side, so every byte passes both.
 * A group must be empty when freed: bufferevents leave it before their free.
 */
#include <stdlib.h>

#include <event2/bufferevent.h>

#include "common/util.h"
#include "gateway/gw_proxy.h"

struct bufferevent_rate_limit_group *
gw_ratelim_group(struct event_base *base, double bps, struct bufferevent_rate_limit_group *g)
{
	struct timeval tick = { 0, 100000 };
	struct ev_token_bucket_cfg *cfg;
	size_t per_tick, burst;

	/* Ten ticks a second; up to one second's worth in a burst, per direction. */
	per_tick = bps / 10 >= 1 ? (size_t)(bps / 10) : 1;
	burst = bps >= (double)per_tick ? (size_t)bps : per_tick;
	if ((cfg = ev_token_bucket_cfg_new(per_tick, burst, per_tick, burst, &tick)) == NULL)
		return g;
	if (g == NULL)
		g = bufferevent_rate_limit_group_new(base, cfg);
	else
		bufferevent_rate_limit_group_set_cfg(g, cfg);
	ev_token_bucket_cfg_free(cfg);
	return g;
}

struct gw_ratelim *
gw_ratelim_get(struct gw_sandbox *sb, const struct gw_rule *rule)
{
	const struct gw_policy *p = sb->policy;
	struct gw_ratelim *rl;
	size_t i;

	if (rule == NULL || p->nrules == 0 || rule < p->rules || rule >= p->rules + p->nrules)
		return NULL;	/* the static full-mode rule has no limits */
	if (rule->rate.rps <= 0 && rule->rate.bps <= 0)
		return NULL;
	i = (size_t)(rule - p->rules);
	if (i >= sb->nrule_limits)
		return NULL;
	if ((rl = sb->rule_limits[i]) == NULL) {
		rl = xcalloc(1, sizeof(*rl));
		rl->refs = 1;	/* the sandbox's, until the next policy */
		tbucket_init(&rl->req, rule->rate.rps, rule->rate.rps, monotonic_ms());
		if (rule->rate.bps > 0)
			rl->bytes = gw_ratelim_group(sb->w->base, rule->rate.bps, NULL);
		sb->rule_limits[i] = rl;
	}
	rl->refs++;
	return rl;
}

void
gw_ratelim_unref(struct gw_ratelim *rl)
{
	if (rl == NULL || --rl->refs > 0)
		return;
	if (rl->bytes != NULL)
		bufferevent_rate_limit_group_free(rl->bytes);
	free(rl);
}

void
gw_conn_set_ratelim(struct gw_conn *c, struct gw_ratelim *rl)
{
	if (rl == c->rl) {
		gw_ratelim_unref(rl);
		return;
	}
	if (c->out != NULL && c->connected) {
		bufferevent_remove_from_rate_limit_group(c->out);
		if (rl != NULL && rl->bytes != NULL)
			bufferevent_add_to_rate_limit_group(c->out, rl->bytes);
	}
	gw_ratelim_unref(c->rl);
	c->rl = rl;
}

void
gw_ratelim_drop_all(struct gw_sandbox *sb)
{
	size_t i;

	for (i = 0; i < sb->nrule_limits; i++)
		gw_ratelim_unref(sb->rule_limits[i]);
	free(sb->rule_limits);
	sb->rule_limits = NULL;
	sb->nrule_limits = 0;
}
