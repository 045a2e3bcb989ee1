/*
 * Fork: capture a running (or paused) sandbox once, then restore N
 * children from that one capture (fastcreate.md §5 "Fork(P, N)", the
 * shape E2B, CubeSandbox and microsandbox share).
 *
 * The capture is the snapshot a suspend makes (vm_snapshot: stop, device
 * state over a QMP fd with x-ignore-shared, RAM file and disk reflinked,
 * header committed), with the source continuing instead of exiting, so
 * there is one snapshot implementation for suspend, pool bases, named
 * snapshots and forks. Children restore it exactly as a pool fill or a
 * base-tier create restores a base (vm_restore, VM_RESTORE_OWN): each
 * maps its own reflink of the captured RAM file share=on, so captured
 * pages are shared on disk copy-on-write and a write by the parent or a
 * child after the fork reaches only the writer's extents. (MAP_PRIVATE of
 * a sealed memfd, VM_RESTORE_SHARED, would also share the page cache, but
 * a child on it could never be suspended: vm_snapshot needs RAM of its
 * own. A fork child is a sandbox like any other, so it gets its own file.)
 *
 * Identity: each child is a new sandbox record (id, access token) whose
 * create is the usual restore + agent + /init: hostname, machine-id, wall
 * clock, 64 bytes of host entropy and a CRNG reseed (envd_init.c), env.
 * Network: its own island, with the source's policy unless the fork gave
 * one. The capture is removed when the last child has reflinked it.
 */
#include "sandbox/sbm_impl.h"

/* --- snapshot sources ---------------------------------------------------- */

struct sb_snapsrc *
sb_snapsrc_new(const char *dir, int remove, const char *tier)
{
	struct sb_snapsrc *src = xcalloc(1, sizeof(*src));

	src->refs = 1;
	src->dir = xstrdup(dir);
	src->remove = remove;
	src->tier = tier;	/* a literal: sb->tier outlives the source */
	return src;
}

void
sb_snapsrc_unref(struct sb_snapsrc *src)
{
	char *cause = NULL;

	if (src == NULL || --src->refs > 0)
		return;
	if (src->remove && path_exists(src->dir) && stor_snapshot_remove(src->dir, &cause) == -1) {
		log_warnx("fork: remove capture %s: %s", src->dir, cause);
		free(cause);
	}
	free(src->dir);
	free(src);
}

int
sb_network_has_nic(json_t *network)
{
	const char *mode = json_string_value(json_object_get(network, "mode"));

	return mode != NULL && strcmp(mode, "none") != 0;
}

/* --- capture (SB_OP_FORK, SB_OP_SNAPSHOT) ---------------------------------- */

static void
sb_captured(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	struct sb_capture *cap = sb->cur->arg;
	struct vm_timings t;
	char *msg;

	/* The guest's own stop .. cont (0: it was paused already); else the whole call. */
	vm_timings(vm, &t);
	cap->paused_ms = t.snap_paused > 0 ? t.snap_paused : error != NULL ? monotonic_ms_since(cap->t0) : 0;
	if (error == NULL) {
		sb_touch(sb);
		sb_op_finish(sb, NULL, 0);
		return;
	}
	/* vm_snapshot leaves a guest that was running running; a VMM that died is a failure. */
	xasprintf(&msg, "capture: %s", error);
	if (sb->vm == NULL || vm_state(sb->vm) == VM_EXITED) {
		sb_release(sb);
		sb_set_state(sb, SB_FAILED, msg);
	}
	sb_op_finish(sb, msg, 500);
	free(msg);
}

void
sb_op_capture(struct sandbox *sb)
{
	struct sb_capture *cap = sb->cur->arg;
	char *cause = NULL, *msg;

	snprintf(cap->snap_id, sizeof(cap->snap_id), "%s-%lld", sb->rec.id, (long long)now_ms());
	if (sb->vm == NULL) {
		sb_op_finish(sb, "capture: the sandbox has no VM", 409);
		return;
	}
	cap->t0 = monotonic_msf();
	if (vm_snapshot(sb->vm, cap->snap_id, 0, sb_captured, &cause) == -1) {
		xasprintf(&msg, "capture: %s", cause);
		sb_op_finish(sb, msg, strstr(cause, "busy") != NULL ? 409 : 500);
		free(msg);
		free(cause);
	}
}

/* --- create's restore from a capture or a named snapshot ------------------ */

void
sb_create_restore(struct sandbox *sb, const char *neterr)
{
	struct sb_snapsrc *src = sb->from;
	struct template_paths tp;
	struct vm_config vc;
	char *cause = neterr != NULL ? xstrdup(neterr) : NULL, *rootfs, *msg;
	int nsfd = -1, tapfd = -1;

	xasprintf(&rootfs, "%s/%s", src->dir, STOR_SNAP_ROOTFS);
	memset(&tp, 0, sizeof(tp));
	/*
	 * A snapshot from before volume slots restores without them (it has no
	 * volumes: sb_create_from_snap refuses them). One with slots saw the
	 * placeholders: the create's volumes go into them once the guest runs.
	 */
	sb->slotless = vm_snapshot_slotless(src->dir);
	sb->vol_fill = sb_volumes_slotted(sb) > 0;
	if (neterr == NULL && template_paths(sb->rec.template_name, &tp, &cause) == 0 &&
	    sb_prepare(sb, rootfs, 0, &vc, &tp, &nsfd, &tapfd, &cause) == 0)
		sb->vm = vm_restore(sb->m->base, &vc, src->dir, VM_RESTORE_OWN, -1, sb_vm_event,
		    sb_vm_ready, sb, &cause);
	close_fds(nsfd, tapfd);
	template_paths_free(&tp);
	free(rootfs);
	/* RAM and disk are reflinked and the device state read: the capture is done with. */
	sb->from = NULL;
	sb_snapsrc_unref(src);
	if (sb->vm == NULL) {
		xasprintf(&msg, "create from %s: %s", sb->tier, cause ? cause : "failed");
		sb_fail(sb, msg, cause && strstr(cause, "space") ? 507 : 500);
		free(msg);
	}
	free(cause);
}

/* --- fork ------------------------------------------------------------------ */

struct sb_fork {
	struct sb_capture	 cap;		/* first: the op's arg */
	struct sbm		*m;
	char			 src_id[STORE_ID_MAX];
	int			 count, pending;
	json_t			*network, *metadata;
	int64_t			 timeout_s;
	sb_fork_cb		 done;
	void			*arg;
	double			 t0;
	double			 capture_ms;
	struct sandbox		**kids;
	char			**errors;
	int			*statuses;
};

static void
sb_fork_free(struct sb_fork *f)
{
	int i;

	for (i = 0; i < f->count; i++) {
		if (f->kids[i] != NULL)
			sb_unref(f->kids[i]);
		free(f->errors[i]);
	}
	free(f->kids);
	free(f->errors);
	free(f->statuses);
	json_decref(f->network);
	json_decref(f->metadata);
	free(f);
}

static void
sb_fork_end(struct sb_fork *f, const char *error, int status)
{
	struct sb_fork_result r;

	memset(&r, 0, sizeof(r));
	r.source = f->src_id;
	r.error = error;
	r.error_status = status;
	r.paused_ms = f->cap.paused_ms;
	r.capture_ms = f->capture_ms;
	r.count = f->count;
	r.kids = f->kids;
	r.errors = f->errors;
	r.statuses = f->statuses;
	log_info("fork %s: %d child(ren), source paused %.1f ms, capture %.1f ms, all done in "
	    "%.0f ms%s%s", f->src_id, f->count, f->cap.paused_ms, f->capture_ms, monotonic_ms_since(f->t0),
	    error ? ": " : "", error ? error : "");
	f->done(&r, f->arg);
	sb_fork_free(f);
}

static void
sb_fork_kid_done(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct sb_fork *f = arg;
	int i;

	for (i = 0; i < f->count; i++)
		if (f->kids[i] == sb)
			break;
	if (i < f->count && error != NULL) {
		f->errors[i] = xstrdup(error);
		f->statuses[i] = status ? status : 500;
		sb_unref(sb);
		f->kids[i] = NULL;
	}
	if (--f->pending == 0)
		sb_fork_end(f, NULL, 0);
}

/* The source's op is over (it runs again): make the children from the capture. */
static void
sb_fork_captured(struct sandbox *src, const char *error, int status, void *arg)
{
	struct sb_fork *f = arg;
	struct sb_snapsrc *cap;
	struct sb_spec sp;
	char *dir, *cause = NULL, origin[STORE_ID_MAX + 8];
	int i;

	f->capture_ms = monotonic_ms_since(f->t0);
	if (error != NULL) {
		sb_fork_end(f, error, status);
		return;
	}
	dir = paths_data("snapshots/%s", f->cap.snap_id);
	cap = sb_snapsrc_new(dir, 1, "fork");
	free(dir);
	memset(&sp, 0, sizeof(sp));
	sp.project = src->rec.project;
	sp.template_name = src->rec.template_name;
	sp.vcpus = src->rec.vcpus;
	sp.memory_mb = src->rec.memory_mb;
	sp.env = src->rec.env;
	sp.metadata = f->metadata != NULL ? f->metadata : src->rec.metadata;
	sp.network = f->network != NULL ? f->network : src->rec.network;
	sp.timeout_s = f->timeout_s >= 0 ? f->timeout_s : src->rec.timeout_s;
	sp.idle_timeout_s = src->rec.idle_timeout_s;
	sp.auto_pause = src->rec.auto_pause;
	sp.auto_resume = src->rec.auto_resume;
	sp.private_traffic = src->rec.traffic_token != NULL;	/* a token of its own */
	snprintf(origin, sizeof(origin), "fork:%s", src->rec.id);
	f->pending = 1;	/* held until every child is queued */
	for (i = 0; i < f->count; i++) {
		struct sandbox *kid = sb_record_new(f->m, &sp, origin, cap, &cause);

		if (kid == NULL) {
			f->errors[i] = cause;
			f->statuses[i] = 500;
			cause = NULL;
			continue;
		}
		sb_ref(kid);
		f->kids[i] = kid;
		f->pending++;
		sb_enqueue(kid, SB_OP_CREATE, sb_fork_kid_done, f);
	}
	sb_snapsrc_unref(cap);	/* the children hold it now */
	if (--f->pending == 0)
		sb_fork_end(f, NULL, 0);
}

/* Guest RAM the host could still give: MemAvailable, MiB (0: unknown). */
static uint64_t
host_available_mb(void)
{
	char line[128];
	unsigned long long kb = 0;
	FILE *fp = fopen("/proc/meminfo", "re");

	if (fp == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(fp);
	return kb / 1024;
}

int
sbm_fork(struct sbm *m, struct sandbox *src, int count, json_t *network, json_t *metadata,
    int64_t timeout_s, sb_fork_cb done, void *arg, int *status, char **cause)
{
	struct sb_fork *f;
	uint64_t avail;

	*status = 400;
	if (count < 1 || count > SBM_FORK_MAX) {
		cause_set(cause, "count: must be 1 to %d", SBM_FORK_MAX);
		return -1;
	}
	if (network != NULL && sb_network_has_nic(network) != sb_network_has_nic(src->rec.network)) {
		cause_set(cause, "network.mode: the source has %s network device, so its forks must "
		    "have %s (mode %s)", sb_network_has_nic(src->rec.network) ? "a" : "no",
		    sb_network_has_nic(src->rec.network) ? "one" : "none",
		    sb_network_has_nic(src->rec.network) ? "allowlist or full" : "none");
		return -1;
	}
	*status = 409;
	if (!sb_is(src, SB_RUNNING) && !sb_is(src, SB_PAUSED)) {
		cause_set(cause, "sandbox %s is %s: only a running or paused sandbox can be forked",
		    src->rec.id, sb_state_name(src->state));
		return -1;
	}
	/*
	 * A child's memory has the source's volumes mounted, but a volume has
	 * one writer and the child would restore with empty slots under those
	 * mounts: refused rather than a child whose filesystems fail.
	 */
	if (sb_has_volumes(src)) {
		cause_set(cause, "sandbox %s has volumes: a sandbox with volumes cannot be forked "
		    "(docs/volumes.md)", src->rec.id);
		return -1;
	}
	if (m->draining) {
		*status = 503;
		cause_set(cause, "this worker is draining: it takes no new sandboxes");
		return -1;
	}
	/* Checked now; the children's rows come after the capture (not under the lock). */
	if (sbm_quota_admit(m, src->rec.project, (unsigned)count, src->rec.vcpus,
	    src->rec.memory_mb, 0, status, cause) == -1)
		return -1;
	*status = 429;
	if (sb_live_count(m) + count > m->cfg->max_sandboxes) {
		cause_set(cause, "count: %d more sandboxes would exceed this host's maximum of %d "
		    "(%d live)", count, m->cfg->max_sandboxes, sb_live_count(m));
		return -1;
	}
	/* Each child's guest memory is committed, never overcommitted ... */
	if (sbm_memory_admit(m, (uint64_t)count * src->rec.memory_mb, status, cause) == -1)
		return -1;
	*status = 429;
	/* ... and each may come to touch all of it: admit what the host could hold now. */
	avail = host_available_mb();
	if (avail != 0 && (uint64_t)count * src->rec.memory_mb > avail) {
		cause_set(cause, "count: %d children of %u MiB need up to %llu MiB; the host has "
		    "%llu MiB available", count, src->rec.memory_mb,
		    (unsigned long long)count * src->rec.memory_mb, (unsigned long long)avail);
		return -1;
	}
	*status = 507;
	if (stor_floor_check((uint64_t)m->cfg->disk_free_floor_mb << 20, "fork", cause) == -1)
		return -1;
	f = xcalloc(1, sizeof(*f));
	f->m = m;
	snprintf(f->src_id, sizeof(f->src_id), "%s", src->rec.id);
	f->count = count;
	f->network = network != NULL ? json_incref(network) : NULL;
	f->metadata = metadata != NULL ? json_incref(metadata) : NULL;
	f->timeout_s = timeout_s;
	f->done = done;
	f->arg = arg;
	f->kids = xcalloc((size_t)count, sizeof(*f->kids));
	f->errors = xcalloc((size_t)count, sizeof(*f->errors));
	f->statuses = xcalloc((size_t)count, sizeof(*f->statuses));
	f->t0 = monotonic_msf();
	sb_enqueue(src, SB_OP_FORK, sb_fork_captured, f);
	return 0;
}
