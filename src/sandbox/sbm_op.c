/* Sandbox manager: the per-sandbox operation queue, boot slots, completion and release. */
#include "sandbox/sbm_impl.h"

/* --- operations: queue and completion ----------------------------------- */

void
sb_deadline_clear(struct sandbox *sb)
{
	if (sb->deadline != NULL)
		event_del(sb->deadline);
}

static void
sb_op_next_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sandbox *sb = arg;

	sb_run_next(sb);
	sb_unref(sb);
}

/* End the current operation and schedule the next one off this stack. */
void
sb_op_finish(struct sandbox *sb, const char *error, int status)
{
	struct sb_op *op = sb->cur;
	struct timeval zero = { 0, 0 };

	sb_deadline_clear(sb);
	sb_boot_slot_release(sb);
	if (op == NULL)
		return;
	sb->cur = NULL;
	sb_ref(sb);
	if (op->done != NULL)
		op->done(sb, error, error ? status : 0, op->arg);
	free(op);
	sb_ref(sb);
	event_base_once(sb->m->base, -1, EV_TIMEOUT, sb_op_next_cb, sb, &zero);
	sb_unref(sb);
}

/* Something failed on the way: release resources, record why, end the op. */
void
sb_fail(struct sandbox *sb, const char *why, int status)
{
	/* A hidden member or builder is destroyed, not failed; a claim tries the next tier. */
	if (sb->pool_member) {
		sb_pool_fail(sb, why, status);
		return;
	}
	if (sb_pool_base_fallback(sb, why))
		return;
	log_warnx("sandbox %s: %s", sb->rec.id, why);
	sb_release(sb);
	sb_set_state(sb, SB_FAILED, why);
	sb_op_finish(sb, why, status);
}

static void
sb_deadline_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct sandbox *sb = arg;

	if (sb->cur != NULL && sb->cur->kind == SB_OP_ADOPT) {
		sb_adopt_fail(sb, "timed out waiting for the VM and its guest agent");
		return;
	}
	sb_fail(sb, "timed out waiting for the guest agent", 504);
}

void
sb_deadline_set(struct sandbox *sb, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (sb->deadline == NULL)
		sb->deadline = evtimer_new(sb->m->base, sb_deadline_cb, sb);
	event_add(sb->deadline, &tv);
}

/* Free the VM, agent channel, island and disk; the record stays. */
void
sb_release(struct sandbox *sb)
{
	char *cause = NULL;

	sb_health_reset(sb);
	if (sb->init_req != NULL) {
		envd_req_cancel(sb->init_req);
		sb->init_req = NULL;
	}
	if (sb->cpu_req != NULL) {
		envd_req_cancel(sb->cpu_req);
		sb->cpu_req = NULL;
	}
	sbm_disk_grow_cancel(sb->disk_grow);
	sb->disk_grow = NULL;
	sb_volumes_freeze_cancel(sb);
	sb_pool_release(sb);
	sb->cpu_asked_ms = 0;
	if (sb->agent != NULL) {
		agent_client_free(sb->agent);
		sb->agent = NULL;
		sb->agent_up = 0;
	}
	if (sb->vm != NULL) {
		vm_free(sb->vm);	/* kills and reaps a live VMM */
		sb->vm = NULL;
	}
	sb_volumes_close(sb);
	sb->vol_fill = sb->vol_wait = sb->slotless = 0;
	/*
	 * Attached, or an attach that failed or never answered (its deadline
	 * passed, airlockd restarted mid-create): the gateway may hold it or
	 * take it late, so detach either way. The detach follows the attach
	 * on the control connection, and detaching what is not attached is
	 * not an error.
	 */
	if (sb->gw_attached || (sb->have_island && sb_has_network(sb))) {
		sbm_egress_detach(sb->m->egress, sb->rec.id);
		sb->gw_attached = 0;
	}
	if (sb->have_island) {
		if (net_island_delete(&sb->island, &cause) == -1) {
			log_warnx("sandbox %s: %s", sb->rec.id, cause);
			free(cause);
			cause = NULL;
		}
		net_island_free(&sb->island);
		sb->have_island = 0;
	}
	if (sb->have_stor) {
		/*
		 * Keep the retained console (both generations, NULs and all) for
		 * GET .../logs after the VM is gone (suspend, failure).
		 */
		char *dst = paths_data("logs/%s.console", sb->rec.id), *dir = paths_data("logs");
		if (mkdir_p(dir, 0700, NULL) == 0 && console_file_save(sb->stor.ss_console, dst,
		    sb_console_max(sb), NULL) == 0) {
			free(sb->console);
			sb->console = xstrdup(dst);
		}
		free(dir);
		free(dst);
		if (stor_sandbox_destroy(&sb->stor, &cause) == -1) {
			log_warnx("sandbox %s: %s", sb->rec.id, cause);
			free(cause);
		}
		stor_sandbox_free(&sb->stor);
		sb->have_stor = 0;
	}
}



static const char *
op_name(enum sb_op_kind k)
{
	static const char *const names[] = { "create", "pause", "resume", "suspend", "delete",
	    "adopt", "recover", "fill", "base", "claim", "fork", "snapshot", "spare" };

	return names[k];
}

/*
 * VM starts are CPU-bound (a cold boot under TCG takes seconds of CPU):
 * beyond a few at a time they only slow each other down until timeouts
 * fire, so creates and resumes wait here for one of boot_limit slots.
 */
static int
sb_boot_slot_take(struct sandbox *sb)
{
	struct sbm *m = sb->m;

	if (sb->boot_slot)
		return 1;
	if (m->booting < m->boot_limit) {
		m->booting++;
		sb->boot_slot = 1;
		return 1;
	}
	if (!sb->boot_waiting) {
		sb->boot_waiting = 1;
		sb_ref(sb);
		TAILQ_INSERT_TAIL(&m->boot_wait, sb, wait_entry);
	}
	return 0;
}

void
sb_boot_slot_release(struct sandbox *sb)
{
	struct sbm *m = sb->m;
	struct sandbox *next;

	if (!sb->boot_slot)
		return;
	sb->boot_slot = 0;
	m->booting--;
	while ((next = TAILQ_FIRST(&m->boot_wait)) != NULL && m->booting < m->boot_limit) {
		TAILQ_REMOVE(&m->boot_wait, next, wait_entry);
		next->boot_waiting = 0;
		if (!ref_dead(&next->ref) && next->cur != NULL) {
			m->booting++;
			next->boot_slot = 1;
			if (next->cur->kind == SB_OP_CREATE)
				sb_op_create(next);
			else
				sb_op_resume_suspended(next);
		}
		sb_unref(next);
	}
}

/* Start the next queued operation if the sandbox is idle. */
void
sb_run_next(struct sandbox *sb)
{
	struct sb_op *op;
	char msg[160];

	while (sb->cur == NULL && (op = TAILQ_FIRST(&sb->ops)) != NULL) {
		TAILQ_REMOVE(&sb->ops, op, entry);
		if (ref_dead(&sb->ref)) {
			if (op->done != NULL)
				op->done(sb, "sandbox was deleted", 404, op->arg);
			free(op);
			continue;
		}
		sb->cur = op;
		op->start_ms = now_ms();
		switch (op->kind) {
		case SB_OP_CREATE:
			/*
			 * A fork's children restore from a capture in the page
			 * cache, as many as the fork asked for (SBM_FORK_MAX):
			 * they do not queue behind cold boots for a slot.
			 */
			if ((sb->from != NULL && sb->from->remove) || sb_boot_slot_take(sb))
				sb_op_create(sb);
			break;
		case SB_OP_PAUSE:
			if (sb_is(sb, SB_PAUSED)) {
				sb_op_finish(sb, NULL, 0);
				break;
			}
			if (!sb_is(sb, SB_RUNNING))
				goto conflict;
			if (vm_pause(sb->vm, sb_paused, NULL) == -1)
				sb_op_finish(sb, "pause failed", 500);
			break;
		case SB_OP_RESUME:
			if (sb_is(sb, SB_RUNNING)) {
				sb_op_finish(sb, NULL, 0);
				break;
			}
			if (sb_is(sb, SB_PAUSED)) {
				if (vm_resume(sb->vm, sb_resumed, NULL) == -1)
					sb_op_finish(sb, "resume failed", 500);
				break;
			}
			if (!sb_is(sb, SB_SUSPENDED))
				goto conflict;
			if (sb_boot_slot_take(sb))
				sb_op_resume_suspended(sb);
			break;
		case SB_OP_SUSPEND:
			if (sb_is(sb, SB_SUSPENDED)) {
				sb_op_finish(sb, NULL, 0);
				break;
			}
			if (!sb_is(sb, SB_RUNNING) && !sb_is(sb, SB_PAUSED))
				goto conflict;
			sb_op_suspend(sb);
			break;
		case SB_OP_DELETE:
			sb_op_delete(sb);
			break;
		case SB_OP_ADOPT:
			sb_op_adopt(sb);
			break;
		case SB_OP_RECOVER:
			sb_op_recover(sb);
			break;
		case SB_OP_FILL:
		case SB_OP_BASE:
		case SB_OP_CLAIM:
		case SB_OP_SPARE:
			sb_op_pool(sb);
			break;
		case SB_OP_FORK:
		case SB_OP_SNAPSHOT:
			if (!sb_is(sb, SB_RUNNING) && !sb_is(sb, SB_PAUSED))
				goto conflict;
			sb_op_capture(sb);
			break;
		}
		continue;
conflict:
		snprintf(msg, sizeof(msg), "cannot %s a sandbox in state %s", op_name(op->kind),
		    sb_state_name(sb->state));
		sb_op_finish(sb, msg, 409);
	}
}

void
sb_enqueue(struct sandbox *sb, enum sb_op_kind kind, sb_done_cb done, void *arg)
{
	struct sb_op *op = xcalloc(1, sizeof(*op));

	op->kind = kind;
	op->done = done;
	op->arg = arg;
	TAILQ_INSERT_TAIL(&sb->ops, op, entry);
	sb_run_next(sb);
}
