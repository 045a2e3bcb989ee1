/* The warm pools as the API and /metrics see them (sbm_pool.c, sbm_spare.c). */
#include <event2/buffer.h>

#include "sandbox/sbm_pool_impl.h"

const char *const sbm_tier_names[SBM_TIER_N] = { "pool", "spare", "base", "boot" };

/* --- API --------------------------------------------------------------------- */

static json_t *
pool_json(struct sbm *m, struct sbm_pool *p)
{
	struct sandbox *sb;
	struct vm_stats st;
	uint64_t pss = 0;
	json_t *ids = json_array(), *steps = json_object();
	double h = (double)p->claimed;
	int i;

	for (i = 1; i < CLAIM_T_N; i++)
		json_object_set_new(steps, claim_t_names[i], json_real(h > 0 ?
		    p->claim_step_sum[i] / h : 0.0));
	TAILQ_FOREACH(sb, &p->ready, pool_entry) {
		json_array_append_new(ids, json_pack("{s:s,s:i}", "id", sb->rec.id, "pid",
		    sb->vm ? (int)vm_pid(sb->vm) : 0));
		if (sb->vm != NULL) {
			vm_stats(sb->vm, &st);
			pss += st.pss_kb * 1024;
		}
	}
	return json_pack("{s:s,s:s,s:i,s:i,s:b,s:i,s:i,s:i,s:o,s:{s:s,s:s?,s:o,s:f,s:I},"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:o,s:I,s:I,s:o}",
	    "template", p->tmpl, "key", p->name, "vcpus", (int)p->vcpus,
	    "memory_mb", (int)p->memory_mb, "nic", p->nic, "size", p->target,
	    "ready", p->nready, "filling", p->filling, "members", ids,
	    "base", "state", pb_names[p->base], "error", p->base_error,
	    "built_at", p->base_built_at ? json_time_ms(p->base_built_at) : json_null(),
	    "build_ms", p->base_build_ms, "rejected", (json_int_t)p->rejected,
	    "hits", (json_int_t)p->hits, "misses", (json_int_t)p->misses,
	    "claim_failures", (json_int_t)p->claim_failures, "fills", (json_int_t)p->fills,
	    "fill_failures", (json_int_t)p->fill_failures, "discards", (json_int_t)p->discards,
	    "fill_ms_avg", p->fills ? p->fill_ms_sum / (double)p->fills : 0.0,
	    "claim_ms_avg", h ? p->claim_ms_sum / h : 0.0,
	    "claim_cont_ms_avg", h ? (p->claim_step_sum[CLAIM_T_ATTACHED] +
	    p->claim_step_sum[CLAIM_T_RESUMED]) / h : 0.0,
	    "claim_init_ms_avg", h ? (p->claim_step_sum[CLAIM_T_INIT_SENT] +
	    p->claim_step_sum[CLAIM_T_INITED]) / h : 0.0,
	    "claim_steps_ms_avg", steps, "claimed", (json_int_t)p->claimed,
	    "pss_bytes", (json_int_t)pss, "spares", pool_spares_json(p));
}

json_t *
sbm_pools_json(struct sbm *m)
{
	struct sbm_pool *p;
	json_t *a = json_array();

	json_t *creates = json_object();
	int i;

	TAILQ_FOREACH(p, &m->pools, entry)
		json_array_append_new(a, pool_json(m, p));
	for (i = 0; i < SBM_TIER_N; i++)
		json_object_set_new(creates, sbm_tier_names[i], json_integer(
		    (json_int_t)m->tier_creates[i]));
	return json_pack("{s:o,s:i,s:I,s:I,s:o,s:I}", "pools", a,
	    "refills_max", m->pool_limit, "memory_budget_mb", (json_int_t)m->pool_budget_mb,
	    "memory_used_mb", (json_int_t)pool_members_mb(m), "creates", creates,
	    "tier_fallbacks", (json_int_t)m->tier_fallbacks);
}

int
sbm_pool_set(struct sbm *m, const char *tmpl, int size, int spares, unsigned vcpus,
    unsigned memory_mb, int nic, char **cause)
{
	struct template_paths tp;
	struct sbm_pool *p;
	struct sandbox *sb;

	if (template_paths(tmpl, &tp, cause) == -1)
		return -1;
	template_paths_free(&tp);
	vcpus = vcpus ? vcpus : (unsigned)m->cfg->default_vcpus;
	memory_mb = memory_mb ? memory_mb : (unsigned)m->cfg->default_memory_mb;
	if ((p = pool_by_template(m, tmpl)) == NULL) {
		p = pool_new(m, tmpl, vcpus, memory_mb, nic, size);
		if (spares >= 0)
			p->spares_target = spares;
		return 0;
	}
	if (p->vcpus != vcpus || p->memory_mb != memory_mb || p->nic != nic) {
		/* Another shape: another base; the members and spares of the old one go. */
		while ((sb = TAILQ_FIRST(&p->ready)) != NULL)
			sb_pool_discard(sb, "the pool's shape changed");
		pool_spares_drop(p, "the pool's shape changed");
		p->vcpus = vcpus;
		p->memory_mb = memory_mb;
		p->nic = nic;
		pool_name(p);
		p->base = PB_NONE;
		if (pool_base_check(m, p, cause) == 0)
			p->base = PB_READY;
		free(*cause);
		*cause = NULL;
	}
	p->target = size;
	if (spares >= 0)
		p->spares_target = spares;
	return 0;
}

void
sbm_pool_metrics(struct sbm *m, struct evbuffer *out)
{
	struct sbm_pool *p;
	struct sandbox *sb;
	struct vm_stats st;
	uint64_t pss;
	size_t i;

	evbuffer_add_printf(out, "# TYPE airlock_creates_total counter\n");
	for (i = 0; i < SBM_TIER_N; i++)
		evbuffer_add_printf(out, "airlock_creates_total{tier=\"%s\"} %llu\n",
		    sbm_tier_names[i], (unsigned long long)m->tier_creates[i]);
	evbuffer_add_printf(out, "# TYPE airlock_create_tier_fallbacks_total counter\n"
	    "airlock_create_tier_fallbacks_total %llu\n", (unsigned long long)m->tier_fallbacks);
	evbuffer_add_printf(out, "# TYPE airlock_pool_members gauge\n");
	TAILQ_FOREACH(p, &m->pools, entry) {
		pss = 0;
		TAILQ_FOREACH(sb, &p->ready, pool_entry)
			if (sb->vm != NULL) {
				vm_stats(sb->vm, &st);
				pss += st.pss_kb * 1024;
			}
		evbuffer_add_printf(out,
		    "airlock_pool_members{pool=\"%s\",state=\"ready\"} %d\n"
		    "airlock_pool_members{pool=\"%s\",state=\"filling\"} %d\n"
		    "airlock_pool_target{pool=\"%s\"} %d\n"
		    "airlock_pool_hits_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_misses_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_claim_failures_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_fill_seconds_sum{pool=\"%s\"} %.3f\n"
		    "airlock_pool_fill_seconds_count{pool=\"%s\"} %llu\n"
		    "airlock_pool_memory_pss_bytes{pool=\"%s\"} %llu\n"
		    "airlock_pool_base_ready{pool=\"%s\"} %d\n"
		    "airlock_pool_base_rejected_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_spares{pool=\"%s\",state=\"ready\"} %d\n"
		    "airlock_pool_spares{pool=\"%s\",state=\"spawning\"} %d\n"
		    "airlock_pool_spares_target{pool=\"%s\"} %d\n"
		    "airlock_pool_spare_hits_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_spare_misses_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_spare_claim_failures_total{pool=\"%s\"} %llu\n"
		    "airlock_pool_spares_pss_bytes{pool=\"%s\"} %llu\n",
		    p->name, p->nready, p->name, p->filling, p->name, p->target,
		    p->name, (unsigned long long)p->hits, p->name, (unsigned long long)p->misses,
		    p->name, (unsigned long long)p->claim_failures,
		    p->name, p->fill_ms_sum / 1000.0, p->name, (unsigned long long)p->fills,
		    p->name, (unsigned long long)pss, p->name, p->base == PB_READY,
		    p->name, (unsigned long long)p->rejected, p->name, p->nspares,
		    p->name, p->spawning, p->name, p->spares_target,
		    p->name, (unsigned long long)p->spare_hits,
		    p->name, (unsigned long long)p->spare_misses,
		    p->name, (unsigned long long)p->spare_failures,
		    p->name, (unsigned long long)(p->spare_kb * 1024));
	}
}
