/*
 * Spare VMMs: the create tier between the warm pool and the base restore
 * (docs/architecture.md "Create tiers", issue 13 item 2).
 *
 * A spare is a hidden sandbox of a pool, made as a member is (pre-generated
 * id, a "pooled" row with airlock.role "spare", its own jail uid and
 * cgroup, an island for a NIC shape), whose disk is already a reflink of the
 * pool base's rootfs and whose jailed QEMU already waits with -incoming
 * defer (vm_spawn_incoming, VM_RESTORE_OWN: its RAM file is empty, so it
 * holds no guest RAM, only the VMM's own memory). A create served by it
 * skips the jail, QEMU's start and QMP; it pays vm_incoming (the base's RAM
 * reflinked into that file, device state by fd, migrate-incoming, cont),
 * the agent's first answer and /init.
 *
 * The claim is the pool's (pool_claim_take, SB_OP_CLAIM in sbm_pool.c): the
 * owner's fields and a new token in the row, the owner's policy on the
 * island, then vm_incoming here where a member gets cont, then the agent
 * connects and the same /init with the new identity. A spare is bound to
 * the base it was started for (its disk is that base's rootfs, its devices
 * that base's): one whose base changed is destroyed, never restored into.
 * A claim that fails destroys the spare and the create goes on at the base
 * tier under a new record, with a tier_fallback event. After a daemon
 * restart a spare is never adopted (vm_adopt refuses an inmigrate VMM, and
 * nothing of the guest ran to verify): sbm_pool_recover removes its row and
 * cleans its uid, cgroup, island and files from the host.
 */
#include "sandbox/sbm_pool_impl.h"

static void
spare_waiting(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	struct sbm_pool *p = sb->pool;
	struct vm_stats st;
	char *msg;

	if (error != NULL) {
		xasprintf(&msg, "spare: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb_deadline_clear(sb);
	if (p->base != PB_READY || strcmp(sb->pool_base, p->base_sum) != 0) {
		sb_pool_discard(sb, "its base changed while it started");
		return;
	}
	pool_unbusy(sb);
	p->spawns++;
	p->spawn_ms_sum += (double)(pool_now() - sb->pool_t0);
	vm_stats(sb->vm, &st);
	if (st.pss_kb > 0)
		p->spare_kb_each = st.pss_kb;
	p->spare_kb += st.pss_kb;	/* until the next tick measures them all */
	TAILQ_INSERT_TAIL(&p->spares, sb, pool_entry);
	p->nspares++;
	sb->pool_ready = 1;
	log_info("pool %s: spare %s waits (pid %d, PSS %llu KiB) after %lld ms", p->name,
	    sb->rec.id, (int)vm_pid(sb->vm), (unsigned long long)st.pss_kb,
	    (long long)(pool_now() - sb->pool_t0));
	sb_op_finish(sb, NULL, 0);
}

void
pool_spare_spawn(struct sandbox *sb)
{
	struct sbm_pool *p = sb->pool;
	struct template_paths tp;
	struct vm_config vc;
	char *cause = NULL, *msg, *dir = pool_base_dir(p), *rootfs;
	int nsfd = -1, tapfd = -1;

	snprintf(sb->pool_base, sizeof(sb->pool_base), "%s", p->base_sum);
	memset(&tp, 0, sizeof(tp));
	xasprintf(&rootfs, "%s/%s", dir, STOR_SNAP_ROOTFS);
	if (p->base != PB_READY)
		cause_set(&cause, "pool %s has no ready base", p->name);
	else if (template_paths(sb->rec.template_name, &tp, &cause) == 0 &&
	    sb_prepare(sb, rootfs, 0, &vc, &tp, &nsfd, &tapfd, &cause) == 0)
		sb->vm = vm_spawn_incoming(sb->m->base, &vc, VM_RESTORE_OWN, -1, sb_vm_event,
		    spare_waiting, sb, &cause);
	close_fds(nsfd, tapfd);
	template_paths_free(&tp);
	free(rootfs);
	free(dir);
	if (sb->vm == NULL) {
		xasprintf(&msg, "spare: %s", cause ? cause : "failed");
		free(cause);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	pool_nice(sb, POOL_NICE);
	sb_deadline_set(sb, POOL_SPARE_SPAWN_TIMEOUT_MS);
}

/* The guest runs the base's memory: the agent's first session carries /init. */
static void
spare_restored(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	if (error != NULL) {
		xasprintf(&msg, "claim: restore into the spare: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb->pool_resumed = 1;
	sb->pool_ts[CLAIM_T_RESUMED] = monotonic_msf();
	/*
	 * /init goes once the agent is up and the volumes are in their slots
	 * (sb_init_ready: a claim whose guest runs), as for a member.
	 */
	sb_guest_up(sb);
}

int
pool_spare_incoming(struct sandbox *sb, char **cause)
{
	struct sbm_pool *p = sb->pool;
	char *dir;
	int rc;

	/* The base may have been rejected while the owner's policy was attached. */
	if (p == NULL || p->base != PB_READY || strcmp(sb->pool_base, p->base_sum) != 0) {
		cause_set(cause, "the spare's base is no longer the pool's");
		return -1;
	}
	dir = pool_base_dir(p);
	rc = vm_incoming(sb->vm, dir, VM_RESTORE_OWN, -1, spare_restored, cause);
	free(dir);
	return rc;
}

struct sandbox *
sbm_spare_claim(struct sbm *m, const struct sb_spec *sp, sb_done_cb done, void *arg,
    int *status, char **cause)
{
	struct sbm_pool *p = pool_for(m, sp->template_name, sp->vcpus, sp->memory_mb,
	    sp->network);
	struct sandbox *sb;

	if (p == NULL || (p->spares_target == 0 && p->nspares == 0))
		return NULL;
	/* A spare whose VMM died is discarded by its exit event; this catches the rest. */
	while ((sb = TAILQ_FIRST(&p->spares)) != NULL && (sb->vm == NULL ||
	    !vm_is_spare(sb->vm) || sb->cur != NULL || !TAILQ_EMPTY(&sb->ops) ||
	    strcmp(sb->pool_base, p->base_sum) != 0))
		sb_pool_discard(sb, "not a waiting spare of the current base");
	if (sb == NULL || p->base != PB_READY) {
		p->spare_misses++;
		return NULL;
	}
	if ((sb = pool_claim_take(sb, sp, done, arg, status, cause)) != NULL)
		p->spare_hits++;
	return sb;
}

void
pool_spare_claim_failed(struct sandbox *sb, const char *why)
{
	struct sbm *m = sb->m;
	struct sbm_pool *p = sb->pool;
	sb_done_cb done = sb->cur->done;
	void *arg = sb->cur->arg;
	struct sandbox *next;
	struct sb_spec sp;
	int vols = json_array_size(sb->claim_vols) > 0, st;
	const char *to = p != NULL && p->base == PB_READY && !vols ? "base" : "boot";
	char *cause = NULL;

	if (p != NULL)
		p->spare_failures++;
	sb->cur->done = NULL;
	sb_ref(sb);	/* sp borrows its fields */
	pool_claim_spec(sb, &sp);
	/* Its volumes go to the create that serves the request instead (as sb_pool_fail). */
	if (vols) {
		sb_release(sb);
		sb_volumes_detach(sb);
	}
	pool_destroy(sb, why);
	/*
	 * A new record (the spare's id was never announced): the create goes on
	 * as any create that found no spare, at the base tier, then a boot;
	 * with volumes a cold boot (the base would fill the slots the same way).
	 */
	if ((next = sb_record_volumes(m, &sp, NULL, NULL, &st, &cause)) == NULL) {
		if (done != NULL)
			done(sb, cause, st, arg);
		free(cause);
	} else {
		next->base_failed = vols;
		m->tier_fallbacks++;
		log_warnx("sandbox %s: spare %s failed: %s; %s tier", next->rec.id, sb->rec.id, why,
		    to);
		sb_event(next, "tier_fallback", json_pack("{s:s,s:s,s:s}", "from", "spare", "to", to,
		    "reason", why));
		sb_enqueue(next, SB_OP_CREATE, done, arg);
	}
	sb_unref(sb);
}

void
pool_spares_drop(struct sbm_pool *p, const char *why)
{
	struct sandbox *sb;

	while ((sb = TAILQ_FIRST(&p->spares)) != NULL)
		sb_pool_discard(sb, why);
}

uint64_t
pool_spares_mb(const struct sbm_pool *p)
{
	uint64_t each = p->spare_kb_each ? p->spare_kb_each : POOL_SPARE_EST_KB;

	return (p->spare_kb + (uint64_t)p->spawning * each + 1023) >> 10;
}

/*
 * Measure, trim, refill. Spawns obey the pool's refill rules (sbm_pool.c
 * pool_tick): none while a create or resume boots or waits for a slot, at
 * most pool_limit fills, builds and spawns at once, within the memory
 * budget, at the lowest CPU priority (pool_nice).
 */
void
pool_spares_tick(struct sbm *m, struct sbm_pool *p)
{
	struct sandbox *sb;
	struct vm_stats st;
	uint64_t each;

	p->spare_kb = 0;
	TAILQ_FOREACH(sb, &p->spares, pool_entry)
		if (sb->vm != NULL) {
			vm_stats(sb->vm, &st);
			p->spare_kb += st.pss_kb;
		}
	while (p->nspares > p->spares_target && (sb = TAILQ_FIRST(&p->spares)) != NULL)
		sb_pool_discard(sb, "above the pool's spares target");
	each = ((p->spare_kb_each ? p->spare_kb_each : POOL_SPARE_EST_KB) + 1023) >> 10;
	if (p->base != PB_READY || m->booting > 0 || !TAILQ_EMPTY(&m->boot_wait))
		return;
	while (p->nspares + p->spawning < p->spares_target && m->pool_busy < m->pool_limit &&
	    pool_members_mb(m) + each <= m->pool_budget_mb)
		if (pool_member_new(m, p, SB_OP_SPARE) == NULL)
			break;
}

json_t *
pool_spares_json(const struct sbm_pool *p)
{
	const struct sandbox *sb;
	json_t *ids = json_array(), *steps = json_object();
	double h = (double)p->spare_claimed;
	int i;

	for (i = 1; i < CLAIM_T_N; i++)
		json_object_set_new(steps, claim_t_names[i], json_real(h > 0 ?
		    p->spare_step_sum[i] / h : 0.0));
	TAILQ_FOREACH(sb, &p->spares, pool_entry)
		json_array_append_new(ids, json_pack("{s:s,s:i}", "id", sb->rec.id, "pid",
		    sb->vm ? (int)vm_pid(sb->vm) : 0));
	return json_pack("{s:i,s:i,s:i,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:o,s:I}",
	    "target", p->spares_target, "ready", p->nspares, "spawning", p->spawning,
	    "members", ids, "hits", (json_int_t)p->spare_hits,
	    "misses", (json_int_t)p->spare_misses, "claim_failures", (json_int_t)p->spare_failures,
	    "spawns", (json_int_t)p->spawns, "spawn_failures", (json_int_t)p->spawn_failures,
	    "discards", (json_int_t)p->spare_discards, "claimed", (json_int_t)p->spare_claimed,
	    "spawn_ms_avg", p->spawns ? p->spawn_ms_sum / (double)p->spawns : 0.0,
	    "claim_ms_avg", h ? p->spare_claim_ms_sum / h : 0.0, "claim_steps_ms_avg", steps,
	    "pss_bytes", (json_int_t)(p->spare_kb * 1024));
}
