/*
 * Volumes into the slots of a VM restored with placeholders
 * (sb_volumes_restored, docs/volumes.md "Pools and snapshots"): a claimed
 * pool member or spare, a base-tier create, a create from a named
 * snapshot. Each was restored from a snapshot whose guest saw every slot
 * on its placeholder; the create or claim wrote the attachments (one
 * writer, as for any create), so they are opened here like for a boot,
 * and once the guest runs each volume's slot is filled over QMP
 * (vm_slot.c). The guest's agent then waits for the new capacity and
 * drops the placeholder's cached blocks before it mounts
 * (agent_volumes.c). The slots are filled one after another; /init goes
 * when the last answers and the agent is up (sb_init_ready). On a failure the op
 * fails (sb_fail): a claimed member or spare is destroyed (its VMM takes
 * the fd sets and nodes, sb_release closes the fds) and the create boots
 * cold after its attachments were dropped (sb_pool_fail); a base-tier
 * create boots cold on its own record (sb_pool_base_fallback).
 */
#include <sys/stat.h>

#include <errno.h>

#include "sandbox/sbm_impl.h"

static void sb_volslot_done(struct vm *, const char *, void *);

/*
 * The next volume's slot, one after another: a fill's first command
 * carries an fd (add-fd, SCM_RIGHTS), which QMP can send only while no
 * earlier command is still queued. then() once the last is in or one failed.
 */
static void
sb_volslot_next(struct sandbox *sb)
{
	const struct vm_volume *v;
	struct stat st;
	char *cause = NULL, *msg;

	if (sb->vol_filling == sb->nvolfds) {
		sb->vol_then(sb, NULL);
		return;
	}
	v = &sb->vmvols[sb->vol_filling++];
	if (fstat(v->fd, &st) == -1) {
		xasprintf(&msg, "volumes: slot %d: fstat: %s", v->slot, strerror(errno));
		sb->vol_then(sb, msg);
		free(msg);
		return;
	}
	sb_ref(sb);
	if (vm_slot_fill(sb->vm, (unsigned)v->slot, v->fd, v->fd_ro, (uint64_t)st.st_size,
	    sb_volslot_done, sb, &cause) == -1) {
		sb_unref(sb);
		xasprintf(&msg, "volumes: %s", cause ? cause : "a slot could not be filled");
		free(cause);
		sb->vol_then(sb, msg);
		free(msg);
	}
}

static void
sb_volslot_done(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	(void)vm;
	if (!ref_dead(&sb->ref)) {
		if (error != NULL) {
			xasprintf(&msg, "volumes: %s", error);
			sb->vol_then(sb, msg);
			free(msg);
		} else
			sb_volslot_next(sb);
	}
	sb_unref(sb);
}

void
sb_volumes_fill(struct sandbox *sb, void (*then)(struct sandbox *, const char *))
{
	struct vm_config vc;
	char *cause = NULL, *msg;
	unsigned i;

	memset(&vc, 0, sizeof(vc));
	vc.slots = 1;
	if (sb->vm == NULL || sb_volumes_open(sb, &vc, &cause) == -1) {
		xasprintf(&msg, "volumes: %s", cause ? cause : "no VM");
		then(sb, msg);
		free(msg);
		free(cause);
		return;
	}
	/* All in slots (the create checked they fit), or the guest has no disk for one. */
	for (i = 0; i < vc.nvolumes; i++)
		if (vc.volumes[i].slot < 0) {
			then(sb, "volumes: more than the slots hold");
			return;
		}
	sb->vol_then = then;
	sb->vol_filling = 0;
	sb_volslot_next(sb);
}

static void
sb_volumes_filled(struct sandbox *sb, const char *error)
{
	char *msg;

	if (error != NULL) {
		log_warnx("sandbox %s: %s", sb->rec.id, error);
		xasprintf(&msg, "%s%s", sb->cur != NULL && sb->cur->kind == SB_OP_CLAIM ?
		    "claim: " : "", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb->vol_wait = 0;
	sb_init_ready(sb);
}

void
sb_volumes_restored(struct sandbox *sb)
{
	if (!sb->vol_fill) {
		sb_volumes_filled(sb, NULL);
		return;
	}
	sb->vol_wait = 1;
	sb_volumes_fill(sb, sb_volumes_filled);
}
