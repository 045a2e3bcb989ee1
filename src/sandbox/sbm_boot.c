/* Sandbox manager: create and resume by boot or restore, then the agent and /init. */
#include "sandbox/sbm_impl.h"
#include "link/envd_init.h"

/* --- guest agent: connect and /init ------------------------------------ */

static void sb_agent_up(struct agent_client *ac, void *arg);
static void sb_agent_down(struct agent_client *ac, const char *reason, void *arg);

const struct agent_client_cb sb_agent_cbs = { sb_agent_up, sb_agent_down };

/* Create or resume is complete: the guest is initialized (and its disk grown). */
void
sb_running(struct sandbox *sb)
{
	/*
	 * A resumed guest runs on its own reflinks of the snapshot's disk and
	 * RAM: the snapshot is stale from now on, and kept it would pile up
	 * (a GiB-sized RAM file per suspend) until the sandbox is deleted.
	 * With on_unhealthy = restart it is the last good state to restart
	 * from: kept (one per sandbox; the next suspend replaces it, delete
	 * removes it).
	 */
	if (sb->cur != NULL && sb->cur->kind == SB_OP_RESUME &&
	    sb->m->cfg->on_unhealthy != CONFIG_UNHEALTHY_RESTART)
		sb_remove_snapshot(sb);
	sb_touch(sb);
	if (sb->rec.timeout_s > 0 && sb->rec.expires_at == 0)
		sb->rec.expires_at = now_ms() + sb->rec.timeout_s * 1000;
	sb_set_state(sb, SB_RUNNING, NULL);
	sb_op_finish(sb, NULL, 0);
}

static void
sb_grow_done(const char *error, void *arg)
{
	struct sandbox *sb = arg;

	sb->disk_grow = NULL;
	if (error != NULL) {
		/* The caller asked for disk_mb: a smaller filesystem is not what it asked for. */
		sb_fail(sb, error, 500);
		return;
	}
	sb->disk_grows = 0;
	sb_running(sb);
}

/* The guest's resize2fs ends the create (or fails it). */
static void
sb_grow_start(struct sandbox *sb)
{
	char *cause = NULL, *msg;

	sb->disk_grow = sbm_disk_grow_start(sb->agent, sb->rec.access_token, sb_grow_done, sb,
	    &cause);
	if (sb->disk_grow == NULL) {
		xasprintf(&msg, "growing the guest's root filesystem: %s", cause);
		sb_fail(sb, msg, 500);
		free(msg);
		free(cause);
		return;
	}
	sb_deadline_set(sb, SBM_INIT_TIMEOUT_MS * 4);
}

static void
sb_init_done(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char why[64 + 2600], *msg;
	const char *m = json_string_value(json_object_get(resp, "message"));

	sb->init_req = NULL;
	if (error == NULL && status >= 300) {
		/* A start command that never got ready says why (agent_start.c). */
		snprintf(why, sizeof(why), "guest agent /init answered %d%s%.2560s", status,
		    m != NULL ? ": " : "", m != NULL ? m : "");
		error = why;
	}
	if (error != NULL) {
		xasprintf(&msg, "initializing the guest: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	if (sb->cur != NULL && (sb->cur->kind == SB_OP_FILL || sb->cur->kind == SB_OP_BASE ||
	    sb->cur->kind == SB_OP_CLAIM)) {
		sb_pool_inited(sb);
		return;
	}
	if (sb->disk_grows) {
		sb_grow_start(sb);
		return;
	}
	sb_running(sb);
}

/*
 * The template's env (template.json), overridden by the sandbox's own; and
 * how long /init may take: the agent answers it only once the template's
 * start command is ready (agent_start.c), up to its ready timeout.
 */
static json_t *
sb_init_env(struct sandbox *sb, int *deadline_ms)
{
	char *path = paths_data("templates/%s/template.json", sb->rec.template_name);
	/* A build VM runs with the recipe's env only, not the previous template's. */
	json_t *meta = sb->build_rootfs ? NULL : json_load_file(path, 0, NULL);
	json_t *env = json_object();
	json_int_t tmo;

	free(path);
	if (json_is_object(json_object_get(meta, "env")))
		json_object_update(env, json_object_get(meta, "env"));
	json_object_update(env, sb->rec.env);
	tmo = json_integer_value(json_object_get(json_object_get(meta, "start_config"),
	    "timeout_s"));
	*deadline_ms = SBM_INIT_TIMEOUT_MS + (tmo > 0 && tmo <= 3600 ? (int)tmo * 1000 : 0);
	json_decref(meta);
	return env;
}

/* /init after every boot and restore: identity, clock, fresh entropy (envd_init.c). */
void
sb_send_init(struct sandbox *sb)
{
	struct envd_init in = { .sandbox_id = sb->rec.id, .access_token = sb->rec.access_token };
	char *cause = NULL, msg[512];
	json_t *body, *vols;
	int deadline_ms;

	in.env = sb_init_env(sb, &deadline_ms);
	body = envd_init_body(&in, &cause);
	json_decref(in.env);
	/* The agent mounts them (agent_volumes.c); again after a restore it finds them mounted. */
	if (body != NULL && (vols = sb_volumes_init(sb)) != NULL)
		json_object_set_new(body, "volumes", vols);
	if (body == NULL) {
		snprintf(msg, sizeof(msg), "initializing the guest: %s", cause);
		free(cause);
		sb_fail(sb, msg, 500);
		return;
	}
	sb->init_req = envd_call_json(sb->agent, "POST", "/init", body, NULL, sb_init_done, sb,
	    &cause);
	json_decref(body);
	sb->pool_ts[CLAIM_T_INIT_SENT] = monotonic_msf();
	if (sb->init_req == NULL) {
		snprintf(msg, sizeof(msg), "initializing the guest: %s", cause);
		free(cause);
		sb_fail(sb, msg, 500);
		return;
	}
	sb_deadline_set(sb, deadline_ms);
}

static void
sb_agent_up(struct agent_client *ac, void *arg)
{
	struct sandbox *sb = arg;

	sb->agent_up = 1;
	/* An adopted guest was initialized long ago: only check that it answers. */
	if (sb->cur != NULL && sb->cur->kind == SB_OP_ADOPT && sb->init_req == NULL) {
		sb_adopt_check(sb);
		return;
	}
	sb_init_ready(sb);
}

/*
 * The first session after a boot or restore carries /init, once the agent
 * is up and the guest's volumes are in their slots (vol_wait: a restore
 * with placeholders fills them first, sbm_volslot.c); whichever of the two
 * comes second sends it.
 */
void
sb_init_ready(struct sandbox *sb)
{
	if (!sb->agent_up || sb->vol_wait || sb->cur == NULL)
		return;
	if ((sb->cur->kind == SB_OP_CREATE || sb->cur->kind == SB_OP_RESUME) &&
	    sb->init_req == NULL && (sb_is(sb, SB_CREATING) || sb_is(sb, SB_RESUMING)))
		sb_send_init(sb);
	else if (sb_pool_take_init(sb))
		sb_send_init(sb);
}

static void
sb_agent_down(struct agent_client *ac, const char *reason, void *arg)
{
	struct sandbox *sb = arg;

	sb->agent_up = 0;
	sbm_health_channel_down(sb->hl, reason);
	log_debug("sandbox %s: agent channel down: %s", sb->rec.id, reason ? reason : "");
}

/* --- VM events --------------------------------------------------------- */

/*
 * The last SBM_CONSOLE_TAIL bytes of the retained console (both generations,
 * or the copy kept after release), from the first full line, escaped with
 * console_escape: the guest chooses these bytes, and they end up in JSON.
 */
static char *
sb_console_tail(const struct sandbox *sb)
{
	char *buf, *p, *tail;
	size_t len;

	if (sb->console == NULL)
		return xstrdup("");
	buf = console_file_read(sb->console, SBM_CONSOLE_TAIL, &len);
	p = buf;
	if (len == SBM_CONSOLE_TAIL && (p = memchr(buf, '\n', len)) != NULL)
		p++;
	else
		p = buf;
	tail = console_escape(p, len - (size_t)(p - buf), NULL);
	free(buf);
	return tail;
}

/* Release the VM and fail: why, then the console tail (the guest's last words). */
void
sb_fail_guest(struct sandbox *sb, const char *why, int in_op)
{
	char *tail = sb_console_tail(sb), *msg;

	xasprintf(&msg, "%s; console tail:\n%s", why, tail);
	free(tail);
	if (in_op)
		sb_fail(sb, msg, 500);	/* logs msg */
	else {
		log_warnx("sandbox %s: %s", sb->rec.id, why);
		sb_release(sb);
		sb_set_state(sb, SB_FAILED, msg);
	}
	free(msg);
}

void
sb_vm_event(struct vm *vm, const struct vm_event *ev, void *arg)
{
	struct sandbox *sb = arg;
	const char *reason = ev->reason ? ev->reason : "unknown", *what;
	char *msg, *tail;

	if (ev->type != VM_EVENT_EXITED || ev->expected)
		return;
	if (sb->pool_member && sb->cur == NULL) {
		/* A parked member died: it can serve nobody. */
		xasprintf(&msg, "the VM exited (%s)", reason);
		sb_pool_discard(sb, msg);
		free(msg);
		return;
	}
	/*
	 * Booted or restored, but the agent has not answered yet: the VM's own
	 * operation is over, so nothing else notices before the boot deadline
	 * (minutes). A failed resume keeps its snapshot and stays suspended.
	 */
	if (sb->cur != NULL && (sb_is(sb, SB_CREATING) || sb_is(sb, SB_RESUMING))) {
		xasprintf(&msg, "the VM exited before its guest agent answered (%s); console "
		    "tail:\n%s", ev->reason ? ev->reason : "unknown",
		    ev->console_tail ? ev->console_tail : "");
		if (sb_is(sb, SB_CREATING))
			sb_fail(sb, msg, 500);
		else {
			log_warnx("sandbox %s: resume: %s", sb->rec.id, msg);
			sb_release(sb);
			sb_set_state(sb, SB_SUSPENDED, msg);
			sb_op_finish(sb, msg, 500);
		}
		free(msg);
		return;
	}
	/* An operation in flight gets its own done callback with the error. */
	if (sb->cur != NULL && sb->cur->kind != SB_OP_DELETE)
		return;
	if (!sb_is(sb, SB_RUNNING) && !sb_is(sb, SB_PAUSED))
		return;
	/*
	 * With panic=-1 and -no-reboot a kernel panic is a reset that ends QEMU;
	 * the panic line comes before a long trace, so look at the whole tail.
	 */
	tail = sb_console_tail(sb);
	if (strstr(reason, "guest-panicked") != NULL || strstr(tail, "Kernel panic") != NULL ||
	    (ev->console_tail != NULL && strstr(ev->console_tail, "Kernel panic") != NULL))
		what = "the guest kernel panicked";
	else if (strstr(reason, "guest-shutdown") != NULL)
		what = "the guest powered off";
	else if (strstr(reason, "guest-reset") != NULL)
		what = "the guest reset itself";
	else
		what = "the VM exited unexpectedly";
	free(tail);
	xasprintf(&msg, "%s (%s)", what, reason);
	sb_fail_guest(sb, msg, 0);
	free(msg);
}

/* --- create and resume: boot or restore, then the agent ---------------- */

/*
 * The socket lives in a directory the (untrusted) VMM can write: dial it
 * through the driver, which checks the listener is this sandbox's VMM.
 */
int
sb_agent_dial(struct agent_client *ac, void *arg, char **cause)
{
	struct sandbox *sb = arg;

	if (sb->vm == NULL) {
		cause_set(cause, "no VM");
		return -1;
	}
	return vm_agent_connect(sb->vm, cause);
}

void
sb_vm_ready(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	char *msg;

	if (error != NULL) {
		xasprintf(&msg, "starting the VM: %s", error);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	sb_deadline_set(sb, SBM_BOOT_TIMEOUT_MS);
	sb_guest_up(sb);
}

/*
 * The guest runs (booted, restored, or a spare restored into): the agent's
 * first session, and meanwhile a VM restored with placeholders (vol_fill)
 * gets its volumes into the slots; sb_init_ready sends /init after both.
 */
void
sb_guest_up(struct sandbox *sb)
{
	sb->vol_wait = sb->vol_fill;
	sb->agent = agent_client_new_connect(sb->m->base, sb->rec.id, sb_agent_dial, &sb_agent_cbs,
	    sb);
	if (sb->vol_fill)
		sb_volumes_restored(sb);
}

size_t
sb_console_max(const struct sandbox *sb)
{
	return sb->m->cfg->console_max > 0 ? (size_t)sb->m->cfg->console_max : VM_CONSOLE_MAX;
}

/* The VM config of boot, restore and adopt; tp NULL: no kernel (adopt). */
void
sb_vm_config(struct sandbox *sb, const struct template_paths *tp, struct vm_config *vc)
{
	memset(vc, 0, sizeof(*vc));
	vc->name = sb->rec.id;
	vc->template_name = sb->rec.template_name;
	vc->kernel_id = sb->m->kernel_id;
	vc->kernel = tp ? tp->kernel : NULL;
	vc->initrd = tp ? tp->initrd : NULL;
	vc->accel = sb->m->accel.accel;
	vc->tsc_khz = sb->m->accel.tsc_khz;
	vc->vcpus = sb->rec.vcpus;
	vc->memory_mb = sb->rec.memory_mb;
	/* CPU fairness (vm_cgroup.h): equal weights, a cap of the vCPUs' worth. */
	vc->limits.cpu_weight = (unsigned)sb->m->cfg->cpu_weight;
	vc->limits.cpu_millis = (unsigned)(sb->rec.vcpus * sb->m->cfg->cpu_limit_pct * 10);
	vc->sandbox = &sb->stor;
	vc->netns_fd = vc->tap_fd = -1;
	vc->console_max = sb_console_max(sb);
	vc->slots = sb_slots(sb);
}

/*
 * Disk, island and VM config shared by boot and restore. disk_bytes: the
 * size to extend a new disk to (create), 0 to keep the source's (restore).
 */
int
sb_prepare(struct sandbox *sb, const char *rootfs_src, uint64_t disk_bytes,
    struct vm_config *vc, struct template_paths *tp, int *netns_fd, int *tap_fd, char **cause)
{
	const char *mode = json_string_value(json_object_get(sb->rec.network, "mode"));

	*netns_fd = *tap_fd = -1;
	if (stor_sandbox_create(sb->rec.id, rootfs_src, (uint64_t)sb->rec.memory_mb << 20,
	    &sb->stor, cause) == -1)
		return -1;
	sb->have_stor = 1;
	free(sb->console);
	sb->console = xstrdup(sb->stor.ss_console);
	if (disk_bytes != 0 && stor_sandbox_grow(&sb->stor, disk_bytes, cause) == -1)
		return -1;
	if (mode != NULL && strcmp(mode, "none") != 0) {
		/*
		 * A create or resume made the island and attached its policy in
		 * sb_net_begin, before the guest runs. A pool member or a base build
		 * makes it here: it serves nobody until a claim attaches the owner's
		 * policy (until then its nft drops everything).
		 */
		if (!sb->have_island) {
			if (net_island_create(sb->rec.id, &sb->island, cause) == -1)
				return -1;
			sb->have_island = 1;
		}
		if ((*netns_fd = net_island_open_ns(&sb->island, cause)) == -1 ||
		    (*tap_fd = net_island_open_tap(&sb->island, cause)) == -1)
			return -1;
	}
	sb_vm_config(sb, tp, vc);
	vc->netns_fd = *netns_fd;
	vc->tap_fd = *tap_fd;
	/* Volumes that go into the slots after the restore leave the placeholders on now. */
	return sb->vol_fill ? 0 : sb_volumes_open(sb, vc, cause);
}

void
close_fds(int a, int b)
{
	if (a != -1)
		close(a);
	if (b != -1)
		close(b);
}

/*
 * The island and its attach to the gateway, before the disk and the VM:
 * the attach is asynchronous (the event loop never waits on the gateway),
 * then(sb, NULL) once the gateway serves the island (at once without
 * network), then(sb, cause) when it failed. The op holds the sandbox.
 */
static void
sb_net_attached(void *arg, const char *cause)
{
	struct sandbox *sb = arg;
	void (*then)(struct sandbox *, const char *) = sb->net_then;

	sb->net_then = NULL;
	if (!ref_dead(&sb->ref)) {
		sb->gw_attached = cause == NULL;
		then(sb, cause);
	}
	sb_unref(sb);
}

static void
sb_net_begin(struct sandbox *sb, void (*then)(struct sandbox *, const char *))
{
	char *cause = NULL;

	if (!sb_has_network(sb)) {
		then(sb, NULL);
		return;
	}
	if (net_island_create(sb->rec.id, &sb->island, &cause) == 0) {
		sb->have_island = 1;
		sb->net_then = then;
		sb_ref(sb);
		if (sbm_egress_attach(sb->m->egress, sb->rec.id, sb->rec.project, sb->rec.network,
		    &sb->island, sb_net_attached, sb, &cause) == 0)
			return;
		sb->net_then = NULL;
		sb_unref(sb);
	}
	then(sb, cause);
	free(cause);
}

static void
sb_create_go(struct sandbox *sb, const char *neterr)
{
	struct template_paths tp;
	struct vm_config vc;
	char *cause = neterr != NULL ? xstrdup(neterr) : NULL, *msg;
	int nsfd = -1, tapfd = -1;

	/* A fork's child or a create from a named snapshot: that snapshot, no other tier. */
	if (sb->from != NULL) {
		sb_create_restore(sb, neterr);
		free(cause);
		return;
	}
	/*
	 * The base tier (pool and spare are claimed in sbm_create): restore the
	 * shape's base, its volumes (if they fit the slots) filled after.
	 */
	if (neterr == NULL && !sb->disk_grows && sb->build_rootfs == NULL &&
	    sb_volumes_slotted(sb) >= 0 && sb_pool_restore_base(sb) == 0) {
		free(cause);
		return;
	}
	sb->tier = "boot";
	sb->m->tier_creates[SBM_TIER_BOOT]++;
	memset(&tp, 0, sizeof(tp));
	if (neterr != NULL || (sb->build_rootfs != NULL ?
	    template_kernel_paths(&tp, &cause) :
	    template_paths(sb->rec.template_name, &tp, &cause)) == -1 ||
	    sb_prepare(sb, sb->build_rootfs != NULL ? sb->build_rootfs : tp.rootfs, sb->disk_grows ? (uint64_t)sb->disk_mb << 20 : 0, &vc, &tp,
	    &nsfd, &tapfd, &cause) == -1 ||
	    (sb->vm = vm_boot(sb->m->base, &vc, sb_vm_event, sb_vm_ready, sb, &cause)) == NULL) {
		close_fds(nsfd, tapfd);
		xasprintf(&msg, "create: %s", cause ? cause : "failed");
		sb_fail(sb, msg, cause && strstr(cause, "space") ? 507 : 500);
		free(msg);
		free(cause);
		template_paths_free(&tp);
		return;
	}
	close_fds(nsfd, tapfd);
	template_paths_free(&tp);
}

static void
sb_create_replayed(struct sandbox *sb, const char *error)
{
	if (error != NULL) {
		sb_fail(sb, error, 500);
		return;
	}
	sb_net_begin(sb, sb_create_go);
}

/* Read-only volumes whose journals need recovery are replayed first (sbm_volreplay.c). */
void
sb_op_create(struct sandbox *sb)
{
	sb_volumes_replay(sb, sb_create_replayed);
}

static void sb_resume_go(struct sandbox *, const char *);

void
sb_op_resume_suspended(struct sandbox *sb)
{
	char *cause = NULL;
	int status;

	/* A resume makes a new disk and RAM file: below the floor it stays suspended, untouched. */
	if (stor_floor_check((uint64_t)sb->m->cfg->disk_free_floor_mb << 20, "resume",
	    &cause) == -1) {
		sb_op_finish(sb, cause, 507);
		free(cause);
		return;
	}
	/* It gets its memory back: within what the host gives, or it stays suspended. */
	if (sbm_memory_admit(sb->m, sb->rec.memory_mb, &status, &cause) == -1) {
		sb_op_finish(sb, cause, status);
		free(cause);
		return;
	}
	sb_set_state(sb, SB_RESUMING, NULL);
	sb_net_begin(sb, sb_resume_go);
}

static void
sb_resume_go(struct sandbox *sb, const char *neterr)
{
	struct template_paths tp;
	struct vm_config vc;
	char *cause = neterr != NULL ? xstrdup(neterr) : NULL, *msg, *snapdir, *rootfs;
	int nsfd = -1, tapfd = -1;

	snapdir = paths_data("snapshots/%s", sb->rec.snapshot ? sb->rec.snapshot : "-");
	xasprintf(&rootfs, "%s/%s", snapdir, STOR_SNAP_ROOTFS);
	memset(&tp, 0, sizeof(tp));
	/*
	 * Suspended before VMs had volume slots: restored without them, its
	 * volumes (if any) as the disks of their own it had (airlock-volN).
	 */
	sb->slotless = vm_snapshot_slotless(snapdir);
	if (neterr != NULL || template_paths(sb->rec.template_name, &tp, &cause) == -1 ||
	    sb_prepare(sb, rootfs, 0, &vc, &tp, &nsfd, &tapfd, &cause) == -1 ||
	    (sb->vm = vm_restore(sb->m->base, &vc, snapdir, VM_RESTORE_OWN, -1, sb_vm_event,
	    sb_vm_ready, sb, &cause)) == NULL) {
		close_fds(nsfd, tapfd);
		xasprintf(&msg, "resume: %s", cause ? cause : "failed");
		/* The snapshot stays: a later resume may succeed (e.g. after freeing disk). */
		sb_release(sb);
		sb_set_state(sb, SB_SUSPENDED, msg);
		sb_op_finish(sb, msg, cause && strstr(cause, "space") ? 507 : 500);
		free(msg);
		free(cause);
	} else
		close_fds(nsfd, tapfd);
	template_paths_free(&tp);
	free(rootfs);
	free(snapdir);
}
