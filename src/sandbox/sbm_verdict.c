/* Sandbox manager: the health watcher's verdicts and what an unhealthy guest comes to. */
#include "sandbox/sbm_impl.h"

/* --- health: verdicts, and what an unhealthy guest comes to ------------- */

/* Back to healthy without an event: the sandbox leaves running or is released. */
void
sb_health_reset(struct sandbox *sb)
{
	if (sb->hl != NULL)
		sbm_health_disarm(sb->hl);
	sb->hl_status = SB_HEALTHY;
	free(sb->hl_reason);
	sb->hl_reason = NULL;
	sb->hl_since = now_ms();
	sb->hl_dead = 0;
}

static void
sb_health_set(struct sandbox *sb, enum sb_health h, const char *reason)
{
	int64_t now = now_ms();
	json_t *data;

	if (h == SB_UNHEALTHY) {
		data = json_pack("{s:s}", "reason", reason);
		log_warnx("sandbox %s: unhealthy: %s", sb->rec.id, reason);
	} else {
		data = json_pack("{s:s?,s:I}", "was", sb->hl_reason,
		    "unhealthy_s", (json_int_t)((now - sb->hl_since) / 1000));
		log_info("sandbox %s: healthy again after %lld s", sb->rec.id,
		    (long long)(now - sb->hl_since) / 1000);
	}
	sb->hl_status = h;
	free(sb->hl_reason);
	sb->hl_reason = reason != NULL ? xstrdup(reason) : NULL;
	sb->hl_since = now;
	sb_event(sb, sb_health_name(h), data);
}

static void
sb_recover_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	/* A fail was logged with its console tail already; this is for a failed restart. */
	if (error != NULL)
		log_warnx("sandbox %s: after being unhealthy: %.200s", sb->rec.id, error);
}

/*
 * The watcher's verdict on a running sandbox. Only the state of the
 * condition changes here; failing or restarting is SB_OP_RECOVER, queued
 * behind whatever operation the sandbox has (and skipped if that operation
 * made the question moot).
 */
void
sb_health_verdict(void *arg, enum sbm_verdict v, const char *reason)
{
	struct sandbox *sb = arg;
	const struct config *cfg = sb->m->cfg;
	int64_t grace_ms = (int64_t)cfg->unhealthy_grace_s * 1000;

	/* An operation owns the sandbox meanwhile (a suspend stops the guest). */
	if (ref_dead(&sb->ref) || sb->cur != NULL || !TAILQ_EMPTY(&sb->ops) || !sb_is(sb, SB_RUNNING))
		return;
	if (v == SBM_HEALTH_OK) {
		if (sb->hl_status == SB_UNHEALTHY)
			sb_health_set(sb, SB_HEALTHY, NULL);
		return;
	}
	if (sb->hl_status == SB_HEALTHY)
		sb_health_set(sb, SB_UNHEALTHY, reason);
	else if (strcmp(sb->hl_reason, reason) != 0) {
		free(sb->hl_reason);
		sb->hl_reason = xstrdup(reason);
	}
	if (v == SBM_HEALTH_DEAD)
		sb->hl_dead = 1;
	if (cfg->on_unhealthy == CONFIG_UNHEALTHY_RESTART)
		grace_ms = sbm_restart_grace(&sb->hl_restarts, now_ms(), grace_ms,
		    cfg->restart_max, (int64_t)cfg->restart_window_s * 1000);
	if (!sb->hl_acting && (sb->hl_dead || now_ms() - sb->hl_since >= grace_ms)) {
		sb->hl_acting = 1;
		sb_enqueue(sb, SB_OP_RECOVER, sb_recover_done, NULL);
	}
}

/* A snapshot to restart from: with on_unhealthy = restart a resume keeps its own. */
static int
sb_has_snapshot(const struct sandbox *sb)
{
	char *dir;
	int ok;

	if (sb->rec.snapshot == NULL)
		return 0;
	dir = paths_data("snapshots/%s/%s", sb->rec.snapshot, STOR_SNAP_HEADER);
	ok = path_exists(dir);
	free(dir);
	return ok;
}

/* SB_OP_RECOVER: the grace is over (or the guest is dead): fail, or restart. */
void
sb_op_recover(struct sandbox *sb)
{
	char *why;

	sb->hl_acting = 0;
	if (!sb_is(sb, SB_RUNNING) || (sb->hl_status == SB_HEALTHY && !sb->hl_dead)) {
		sb_op_finish(sb, NULL, 0);	/* recovered, or moved on meanwhile */
		return;
	}
	if (sb->hl_dead)
		why = xstrdup(sb->hl_reason);
	else
		xasprintf(&why, "the guest agent was unhealthy for %d s: %s",
		    sb->m->cfg->unhealthy_grace_s, sb->hl_reason);
	/*
	 * A restart rolls the guest back to its last snapshot, but not its
	 * read-write volumes: their filesystems would be older in its memory
	 * than on the disk, which corrupts them. Failed instead.
	 */
	if (sb->hl_dead || sb->m->cfg->on_unhealthy == CONFIG_UNHEALTHY_FAIL ||
	    !sb_has_snapshot(sb) || sb_volumes_rw(sb) > 0 ||
	    !sbm_restart_allow(&sb->hl_restarts, now_ms(),
	    sb->m->cfg->restart_max, (int64_t)sb->m->cfg->restart_window_s * 1000)) {
		if (!sb->hl_dead && sb->m->cfg->on_unhealthy == CONFIG_UNHEALTHY_RESTART) {
			char *n;
			if (!sb_has_snapshot(sb))
				xasprintf(&n, "%s (on_unhealthy = restart, but it has no snapshot)",
				    why);
			else if (sb_volumes_rw(sb) > 0)
				xasprintf(&n, "%s (on_unhealthy = restart, but it has read-write "
				    "volumes, which a restart from its snapshot would roll back under "
				    "its filesystems)", why);
			else
				xasprintf(&n, "%s (restarted %d times already, each within %d s "
				    "of the one before: restart_max)", why, sb->hl_restarts.count,
				    sb->m->cfg->restart_window_s);
			free(why);
			why = n;
		}
		sb_fail_guest(sb, why, 1);
		free(why);
		return;
	}
	/* Back to its last snapshot: what the guest did since then is lost. */
	sb_event(sb, "restart", json_pack("{s:s,s:s}", "reason", why, "snapshot",
	    sb->rec.snapshot));
	log_warnx("sandbox %s: restarting from snapshot %s: %s", sb->rec.id, sb->rec.snapshot,
	    why);
	sb_release(sb);
	sb_set_state(sb, SB_SUSPENDED, why);
	free(why);
	sb_op_finish(sb, NULL, 0);
	sb_enqueue(sb, SB_OP_RESUME, sb_recover_done, NULL);
}
