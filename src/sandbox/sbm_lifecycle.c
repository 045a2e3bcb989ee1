/* Sandbox manager: pause, resume, suspend and delete. */
#include "sandbox/sbm_impl.h"

/* --- pause, resume, suspend, delete ------------------------------------ */

void
sb_paused(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;

	if (error != NULL) {
		sb_op_finish(sb, error, 500);
		return;
	}
	sb_set_state(sb, SB_PAUSED, NULL);
	sb_op_finish(sb, NULL, 0);
}

void
sb_resumed(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;

	if (error != NULL) {
		sb_op_finish(sb, error, 500);
		return;
	}
	sb_touch(sb);
	sb_set_state(sb, SB_RUNNING, NULL);
	sb_op_finish(sb, NULL, 0);
}

static void
sb_suspended(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	if (error != NULL) {
		/* vm_snapshot leaves a running guest running on failure: its volumes thawed. */
		xasprintf(&msg, "suspend: %s", error);
		free(sb->rec.snapshot);
		sb->rec.snapshot = NULL;
		if (sb->vm != NULL && vm_state(sb->vm) != VM_EXITED) {
			sb_set_state(sb, vm_state(sb->vm) == VM_PAUSED ? SB_PAUSED : SB_RUNNING, msg);
			sb_volumes_freeze(sb, 1, NULL);
		} else {
			sb_release(sb);
			sb_set_state(sb, SB_FAILED, msg);
		}
		sb_op_finish(sb, msg, 500);
		free(msg);
		return;
	}
	sb_release(sb);
	sb_set_state(sb, SB_SUSPENDED, NULL);
	sb_op_finish(sb, NULL, 0);
}

static void sb_suspend_go(struct sandbox *);

/*
 * The guest freezes its read-write volumes first: the snapshot keeps them
 * frozen in its memory (the resume's /init thaws them), and their files
 * are consistent meanwhile, should the sandbox be deleted while suspended.
 */
void
sb_op_suspend(struct sandbox *sb)
{
	sb_volumes_freeze(sb, 0, sb_suspend_go);
}

static void
sb_suspend_go(struct sandbox *sb)
{
	char *cause = NULL, *msg, id[80];

	snprintf(id, sizeof(id), "%s-%lld", sb->rec.id, (long long)now_ms());
	/* One left by a resume a crash cut short is stale: the guest has moved on. */
	sb_remove_snapshot(sb);
	sb->rec.snapshot = xstrdup(id);
	/* Persist the snapshot id first: a restart mid-suspend can then find it. */
	sb_set_state(sb, SB_SUSPENDING, NULL);
	if (vm_snapshot(sb->vm, id, 1, sb_suspended, &cause) == -1) {
		xasprintf(&msg, "suspend: %s", cause);
		free(cause);
		free(sb->rec.snapshot);
		sb->rec.snapshot = NULL;
		sb_set_state(sb, vm_state(sb->vm) == VM_PAUSED ? SB_PAUSED : SB_RUNNING, NULL);
		sb_volumes_freeze(sb, 1, NULL);
		sb_op_finish(sb, msg, 500);
		free(msg);
	}
}

void
sb_remove_snapshot(struct sandbox *sb)
{
	char *dir, *cause = NULL;

	if (sb->rec.snapshot == NULL)
		return;
	dir = paths_data("snapshots/%s", sb->rec.snapshot);
	if (path_exists(dir) && stor_snapshot_remove(dir, &cause) == -1) {
		log_warnx("sandbox %s: %s", sb->rec.id, cause);
		free(cause);
	}
	free(dir);
	free(sb->rec.snapshot);
	sb->rec.snapshot = NULL;
}

/* Sandbox-scoped secrets die with their sandbox (ids are never reused, but rows would pile up). */
static void
sb_remove_secrets(struct sandbox *sb)
{
	struct store_secret *list = NULL;
	size_t n = 0, i;
	char *cause = NULL;

	if (store_secret_list(sb->m->store, "sandbox", sb->rec.id, &list, &n, &cause) == -1) {
		log_warnx("sandbox %s: list its secrets: %s", sb->rec.id, cause);
		free(cause);
		return;
	}
	for (i = 0; i < n; i++) {
		if (store_secret_delete(sb->m->store, "sandbox", sb->rec.id, list[i].name,
		    &cause) == -1) {
			log_warnx("sandbox %s: delete secret %s: %s", sb->rec.id, list[i].name, cause);
			free(cause);
			cause = NULL;
		}
		store_secret_clear(&list[i]);
	}
	free(list);
}

static void sb_op_delete_rest(struct sandbox *);

/*
 * A running guest freezes its read-write volumes before its VMM is killed:
 * what it had not written back reaches the files, and their journals need
 * no replay (one a guest did not freeze is replayed at the next read-only
 * attach, sbm_volreplay.c).
 */
void
sb_op_delete(struct sandbox *sb)
{
	sb_set_state(sb, SB_DELETING, NULL);
	sb_volumes_freeze(sb, 0, sb_op_delete_rest);
}

static void
sb_op_delete_rest(struct sandbox *sb)
{
	char *cause = NULL, *saved;

	sb_release(sb);
	sb_remove_snapshot(sb);
	sb_remove_secrets(sb);
	/* The volumes are free for the next sandbox before the record goes (their data stays). */
	sb_volumes_detach(sb);
	if (store_sandbox_delete(sb->m->store, sb->rec.id, &cause) == -1) {
		log_warnx("sandbox %s: delete: %s", sb->rec.id, cause);
		sb_op_finish(sb, cause, 500);
		free(cause);
		return;
	}
	/* Nothing of the console stays: the saved copy, wherever console points. */
	saved = paths_data("logs/%s.console", sb->rec.id);
	console_file_remove(saved);
	free(saved);
	if (sb->console != NULL)
		console_file_remove(sb->console);
	sb_event(sb, "deleted", NULL);
	TAILQ_REMOVE(&sb->m->sandboxes, sb, entry);
	(void)ref_kill(&sb->ref);
	sb_op_finish(sb, NULL, 0);
	sb_unref(sb);	/* the manager's reference */
}
