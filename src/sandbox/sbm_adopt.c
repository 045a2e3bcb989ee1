/* Sandbox manager: adopt a live VM left by the previous airlockd. */
#include "sandbox/sbm_impl.h"

/* --- adopt: a live VM left by the previous airlockd --------------------- */

/*
 * Adoption failed: stop the VM and fail the sandbox, as recovery did before
 * adoption existed. Without a struct vm there is no pidfd to kill through:
 * the leftovers go by name and uid, as for any sandbox recovery gives up on.
 */
void
sb_adopt_fail(struct sandbox *sb, const char *why)
{
	char *msg;

	xasprintf(&msg, "airlockd restarted while the sandbox was %s and could not adopt its "
	    "VM, which was stopped: %s", sb_state_name(sb->state), why);
	if (sb->vm == NULL) {
		if (sb->have_island) {
			net_island_free(&sb->island);
			sb->have_island = 0;
		}
		if (sb->have_stor) {
			stor_sandbox_free(&sb->stor);
			sb->have_stor = 0;
		}
		sbm_cleanup_host(sb->rec.id);
	}
	sb_fail(sb, msg, 500);
	free(msg);
}

/* Adopted: the state is the VM's (a pause or resume may have been cut short). */
static void
sb_adopt_done(struct sandbox *sb)
{
	enum sb_state state = vm_state(sb->vm) == VM_PAUSED ? SB_PAUSED : SB_RUNNING;

	if (sb->pool_member) {
		sb_pool_adopted(sb);
		return;
	}
	log_info("sandbox %s: adopted its %s VM (pid %d)", sb->rec.id, sb_state_name(state),
	    (int)vm_pid(sb->vm));
	/* Nobody could use it while the daemon was down: idle time starts now. */
	sb_touch(sb);
	if (!sb_is(sb, state))
		sb_set_state(sb, state, NULL);
	else {
		sb_save(sb);
		/* sb_set_state arms the watcher; a record already running needs it too. */
		if (state == SB_RUNNING)
			sbm_health_arm(sb->hl, sb->agent, sb->vm);
	}
	sb_event(sb, "adopted", json_pack("{s:s}", "state", sb_state_name(state)));
	sb_op_finish(sb, NULL, 0);
}

static void
sb_adopt_health(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char why[64], *msg;

	sb->init_req = NULL;
	if (error == NULL && status >= 300) {
		snprintf(why, sizeof(why), "/health answered %d", status);
		error = why;
	}
	if (error != NULL) {
		xasprintf(&msg, "guest agent: %s", error);
		sb_adopt_fail(sb, msg);
		free(msg);
		return;
	}
	sb_adopt_done(sb);
}

/* The channel is up again (the agent reset its streams): does envd answer? */
void
sb_adopt_check(struct sandbox *sb)
{
	char *cause = NULL, *msg;

	sb->init_req = envd_call_json(sb->agent, "GET", "/health", NULL, NULL, sb_adopt_health,
	    sb, &cause);
	if (sb->init_req == NULL) {
		xasprintf(&msg, "guest agent: %s", cause);
		sb_adopt_fail(sb, msg);
		free(msg);
		free(cause);
	}
}

static void
sb_adopted_vm(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;

	if (error != NULL) {
		sb_adopt_fail(sb, error);
		return;
	}
	sb->agent = agent_client_new_connect(sb->m->base, sb->rec.id, sb_agent_dial, &sb_agent_cbs,
	    sb);
	/* A stopped guest cannot answer; its channel comes up once it resumes. */
	if (vm_state(vm) == VM_PAUSED)
		sb_adopt_done(sb);
}

/*
 * Its dir, uid claim, cgroup and island are in use by the live VMM: attach
 * to them instead of creating (and never reclaim them as stale).
 */
void
sb_op_adopt(struct sandbox *sb)
{
	const char *mode = json_string_value(json_object_get(sb->rec.network, "mode"));
	struct vm_config vc;
	char *cause = NULL;
	int rc;

	if (stor_sandbox_attach(sb->rec.id, sb->adopt_uid, &sb->stor, &cause) == -1)
		goto bad;
	sb->have_stor = 1;
	free(sb->console);
	sb->console = xstrdup(sb->stor.ss_console);
	if (mode != NULL && strcmp(mode, "none") != 0) {
		sb->island.ni_name = xstrdup(sb->rec.id);
		sb->island.ni_path = net_island_path(sb->rec.id);
		sb->have_island = 1;
		if (!path_exists(sb->island.ni_path)) {
			cause_set(&cause, "its island %s is gone", sb->island.ni_path);
			goto bad;
		}
	}
	sb_vm_config(sb, NULL, &vc);
	/*
	 * The devices a later snapshot records: slots or not as the VMM was
	 * started (resumed from a snapshot older than slots: without), and its
	 * volumes placed as at its boot or restore.
	 */
	if ((rc = vm_adopt_slots(&vc, &cause)) == -1)
		goto bad;
	sb->slotless = vc.slots && !rc;
	vc.slots = sb_slots(sb);
	if (sb_volumes_layout(sb, &vc, &cause) == -1 ||
	    (sb->vm = vm_adopt(sb->m->base, &vc, sb_vm_event, sb_adopted_vm, sb, &cause)) == NULL)
		goto bad;
	sb_deadline_set(sb, SBM_ADOPT_TIMEOUT_MS);
	return;
bad:
	sb_adopt_fail(sb, cause ? cause : "failed");
	free(cause);
}
