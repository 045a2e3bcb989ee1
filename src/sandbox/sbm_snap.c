/*
 * Named snapshots: a sandbox's memory and disk at one instant, kept so new
 * sandboxes start from it (E2B's createSnapshot). The capture is a fork's
 * (sb_op_capture in sbm_fork.c); the committed snapshot directory is then
 * renamed from snapshots/ (where suspend snapshots and captures live, and
 * a restart removes what no record names) to named/<id>, and a store row
 * (both backends) records it, so it survives restarts. A create from it
 * is a restore like a fork child's (sb_create_restore).
 *
 * In use: a sandbox whose origin is "snapshot:<id>" (persisted with the
 * sandbox) keeps the snapshot from being deleted; the restored guest runs
 * on its own reflinks, so this is the user's contract (what a sandbox was
 * made from stays listable), not a storage need.
 */
#include <dirent.h>

#include "sandbox/sbm_impl.h"
#include "sandbox/sbm_volume.h"

#define SNAP_ID_LEN	20

json_t *
sbm_snap_json(const struct store_snap *sn)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:O,s:o?,s:o}", "id", sn->id,
	    "name", sn->name, "source", sn->source, "template", sn->template_name,
	    "vcpus", (int)sn->vcpus, "memory_mb", (int)sn->memory_mb, "env", sn->env,
	    "network", egress_network_redact(sn->network),	/* header values stay host-side */
	    "created_at", json_time_ms(sn->created_at));

	if (j != NULL && sn->worker[0] != '\0')
		json_object_set_new(j, "worker", json_string(sn->worker));
	return j;
}

/* A live sandbox made from snapshot id, or NULL. */
static struct sandbox *
snap_user(struct sbm *m, const char *id)
{
	struct sandbox *sb;
	char origin[STORE_ID_MAX + 16];

	snprintf(origin, sizeof(origin), "snapshot:%s", id);
	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (!ref_dead(&sb->ref) && sb->rec.origin != NULL && strcmp(sb->rec.origin, origin) == 0)
			return sb;
	return NULL;
}

/* --- create ---------------------------------------------------------------- */

struct sb_named {
	struct sb_capture	 cap;		/* first: the op's arg */
	struct sbm		*m;
	char			 name[STORE_ID_MAX];
	sb_snap_cb		 done;
	void			*arg;
};

static void
sb_named_captured(struct sandbox *src, const char *error, int status, void *arg)
{
	struct sb_named *n = arg;
	struct store_snap sn;
	char *from = NULL, *to = NULL, *parent = paths_data("named"), *cause = NULL;

	memset(&sn, 0, sizeof(sn));
	if (error != NULL) {
		n->done(NULL, n->cap.paused_ms, error, status, n->arg);
		goto out;
	}
	random_id(sn.id, SNAP_ID_LEN);
	snprintf(sn.project, sizeof(sn.project), "%s", src->rec.project);
	snprintf(sn.name, sizeof(sn.name), "%s", n->name);
	snprintf(sn.source, sizeof(sn.source), "%s", src->rec.id);
	snprintf(sn.template_name, sizeof(sn.template_name), "%s", src->rec.template_name);
	sn.vcpus = src->rec.vcpus;
	sn.memory_mb = src->rec.memory_mb;
	sn.env = json_incref(src->rec.env);
	sn.network = json_incref(src->rec.network);
	sn.created_at = now_ms();
	snprintf(sn.worker, sizeof(sn.worker), "%s", sbm_worker_name(n->m));
	from = paths_data("snapshots/%s", n->cap.snap_id);
	to = paths_data("named/%s", sn.id);
	if (mkdir_p(parent, 0755, &cause) == -1 || (rename(from, to) == -1 &&
	    (cause_set(&cause, "rename %s to %s: %s", from, to, strerror(errno)), 1))) {
		(void)remove_tree(from, NULL);
		n->done(NULL, n->cap.paused_ms, cause, 500, n->arg);
		goto out;
	}
	/* The name was free when asked; a second create of it may have won meanwhile. */
	if (store_snap_insert(n->m->store, &sn, &cause) == -1) {
		(void)remove_tree(to, NULL);
		n->done(NULL, n->cap.paused_ms, cause, 500, n->arg);
		goto out;
	}
	log_info("snapshot %s (%s) of %s: source paused %.1f ms", sn.id, sn.name, src->rec.id,
	    n->cap.paused_ms);
	n->done(&sn, n->cap.paused_ms, NULL, 0, n->arg);
out:
	store_snap_clear(&sn);
	free(cause);
	free(parent);
	free(from);
	free(to);
	free(n);
}

int
sbm_snap_create(struct sbm *m, struct sandbox *src, const char *name, sb_snap_cb done,
    void *arg, int *status, char **cause)
{
	struct store_snap sn;
	struct sb_named *n;
	int rc;

	*status = 400;
	if (name == NULL || !paths_valid_name(name) || strlen(name) >= STORE_ID_MAX) {
		cause_set(cause, "name: want 1 to %d lowercase letters, digits, '.', '_' or '-' "
		    "(not first)", STORE_ID_MAX - 1);
		return -1;
	}
	/* As a fork (sbm_fork.c): its sandboxes would have the mounts without the volumes. */
	if (sb_has_volumes(src)) {
		*status = 409;
		cause_set(cause, "sandbox %s has volumes: a sandbox with volumes cannot be kept as "
		    "a named snapshot (docs/volumes.md)", src->rec.id);
		return -1;
	}
	if ((rc = store_snap_get(m->store, src->rec.project, name, &sn, cause)) == -1) {
		*status = 500;
		return -1;
	}
	if (rc == 1) {
		*status = 409;
		cause_set(cause, "name: snapshot \"%s\" already exists (id %s)", name, sn.id);
		store_snap_clear(&sn);
		return -1;
	}
	*status = 409;
	if (!sb_is(src, SB_RUNNING) && !sb_is(src, SB_PAUSED)) {
		cause_set(cause, "sandbox %s is %s: only a running or paused sandbox can be "
		    "snapshotted", src->rec.id, sb_state_name(src->state));
		return -1;
	}
	*status = 507;
	if (stor_floor_check((uint64_t)m->cfg->disk_free_floor_mb << 20, "snapshot", cause) == -1)
		return -1;
	n = xcalloc(1, sizeof(*n));
	n->m = m;
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->done = done;
	n->arg = arg;
	sb_enqueue(src, SB_OP_SNAPSHOT, sb_named_captured, n);
	return 0;
}

/* --- list, delete, recover --------------------------------------------------- */

json_t *
sbm_snap_list(struct sbm *m, const char *project, const char *source, char **cause)
{
	struct store_snap *list;
	size_t n, i;
	json_t *arr;

	if (store_snap_list(m->store, project, &list, &n, cause) == -1)
		return NULL;
	arr = json_array();
	for (i = 0; i < n; i++) {
		if (source == NULL || strcmp(list[i].source, source) == 0)
			json_array_append_new(arr, sbm_snap_json(&list[i]));
		store_snap_clear(&list[i]);
	}
	free(list);
	return arr;
}

/*
 * A snapshot's files are in one worker's data dir: another worker can
 * neither restore nor remove them (a replica places creates from it and
 * routes its delete there).
 */
static int
snap_is_here(const struct sbm *m, const struct store_snap *sn)
{
	return sn->worker[0] == '\0' || strcmp(sn->worker, sbm_worker_name(m)) == 0;
}

/* 0 if the snapshot is this host's, else -1 with a 409 that says whose. */
static int
snap_here(const struct sbm *m, const struct store_snap *sn, int *status, char **cause)
{
	if (snap_is_here(m, sn))
		return 0;
	*status = 409;
	cause_set(cause, "snapshot %s is on worker %s, not this one (go through an API replica: "
	    "it sends the call there)", sn->name, sn->worker);
	return -1;
}

int
sbm_snap_delete(struct sbm *m, const char *project, const char *name_or_id, int *status,
    char **cause)
{
	struct store_snap sn;
	struct sandbox *user;
	char *dir;
	int rc;

	*status = 500;
	if ((rc = store_snap_get(m->store, project, name_or_id, &sn, cause)) == -1)
		return -1;
	if (rc == 0) {
		*status = 404;
		cause_set(cause, "snapshot \"%s\" not found", name_or_id);
		return -1;
	}
	if (snap_here(m, &sn, status, cause) == -1) {
		store_snap_clear(&sn);
		return -1;
	}
	if ((user = snap_user(m, sn.id)) != NULL) {
		*status = 409;
		cause_set(cause, "snapshot %s is in use by sandbox %s (delete the sandboxes made "
		    "from it first)", sn.name, user->rec.id);
		store_snap_clear(&sn);
		return -1;
	}
	/* The row first: a crash between the two leaves a dir sbm_snap_recover removes. */
	if (store_snap_delete(m->store, sn.id, cause) == -1) {
		store_snap_clear(&sn);
		return -1;
	}
	dir = paths_data("named/%s", sn.id);
	if (path_exists(dir) && stor_snapshot_remove(dir, cause) == -1)
		log_warnx("snapshot %s: %s", sn.id, *cause);
	free(*cause);
	*cause = NULL;
	free(dir);
	store_snap_clear(&sn);
	return 0;
}

void
sbm_snap_recover(struct sbm *m)
{
	char *dir = paths_data("named"), *path, *cause = NULL;
	struct store_snap *list = NULL;
	size_t n = 0, i;
	struct dirent *de;
	DIR *d;

	if (store_snap_list(m->store, NULL, &list, &n, &cause) == -1) {
		log_warnx("recover: snapshots: %s", cause);
		free(cause);
		free(dir);
		return;
	}
	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			for (i = 0; i < n; i++)
				if (strcmp(list[i].id, de->d_name) == 0)
					break;
			if (i < n)
				continue;
			xasprintf(&path, "%s/%s", dir, de->d_name);
			log_info("recover: removing snapshot %s (no record names it)", de->d_name);
			if (remove_tree(path, &cause) == -1) {
				log_warnx("recover: %s", cause);
				free(cause);
				cause = NULL;
			}
			free(path);
		}
		closedir(d);
	}
	for (i = 0; i < n; i++) {
		xasprintf(&path, "%s/%s/%s", dir, list[i].id, STOR_SNAP_HEADER);
		if (snap_is_here(m, &list[i]) && !path_exists(path))
			log_warnx("snapshot %s (%s): its files are missing; creates from it fail",
			    list[i].id, list[i].name);
		free(path);
		store_snap_clear(&list[i]);
	}
	free(list);
	free(dir);
}

/* --- create from one --------------------------------------------------------- */

struct sandbox *
sb_create_from_snap(struct sbm *m, const struct sb_spec *sp, const char *name, sb_done_cb done,
    void *arg, int *status, char **cause)
{
	const char *want = name != NULL ? name : sp->template_name;
	struct store_snap sn;
	struct sb_snapsrc *src;
	struct sandbox *sb = NULL;
	struct sb_spec s2;
	json_t *env = NULL;
	char *dir, origin[STORE_ID_MAX + 16];
	int rc, slotless;

	*status = 500;
	if ((rc = store_snap_get(m->store, sp->project, want, &sn, cause)) == -1)
		return NULL;
	*status = 404;
	if (rc == 0) {
		cause_set(cause, "snapshot: \"%s\" not found", want);
		return NULL;
	}
	if (snap_here(m, &sn, status, cause) == -1)
		goto out;
	*status = 400;
	/*
	 * Volumes go into the snapshot's slots after the restore (its source had
	 * none: sbm_snap_create refuses one with volumes), so only as many as
	 * the slots hold, and only a snapshot that has them.
	 */
	if (json_array_size(sp->volumes) > 0 && !sbm_volumes_fit(sp->volumes)) {
		cause_set(cause, "volumes: a sandbox made from snapshot %s takes at most %d "
		    "read-write and %d read-only volumes (its volume slots; docs/volumes.md)",
		    sn.name, VM_SLOTS_RW, VM_SLOTS_RO);
		goto out;
	}
	dir = paths_data("named/%s", sn.id);
	slotless = vm_snapshot_slotless(dir);
	free(dir);
	if (json_array_size(sp->volumes) > 0 && slotless) {
		*status = 409;
		cause_set(cause, "volumes: snapshot %s was taken before sandboxes had volume slots, "
		    "so its sandboxes cannot take volumes (docs/volumes.md)", sn.name);
		goto out;
	}
	if (sp->vcpus_given && sp->vcpus != sn.vcpus) {
		cause_set(cause, "vcpus: snapshot %s has %u (a restore keeps its shape)", sn.name,
		    sn.vcpus);
		goto out;
	}
	if (sp->memory_given && sp->memory_mb != sn.memory_mb) {
		cause_set(cause, "memory_mb: snapshot %s has %u (a restore keeps its shape)",
		    sn.name, sn.memory_mb);
		goto out;
	}
	if (sp->disk_mb != 0) {
		cause_set(cause, "disk_mb: a sandbox made from snapshot %s keeps its disk", sn.name);
		goto out;
	}
	if (sp->network != NULL && sb_network_has_nic(sp->network) !=
	    sb_network_has_nic(sn.network)) {
		cause_set(cause, "network.mode: snapshot %s was taken %s a network device, so its "
		    "sandboxes must have %s", sn.name, sb_network_has_nic(sn.network) ? "with" :
		    "without", sb_network_has_nic(sn.network) ? "mode allowlist or full" :
		    "mode none");
		goto out;
	}
	*status = 503;
	if (sb_live_count(m) >= m->cfg->max_sandboxes) {
		cause_set(cause, "this host runs its maximum of %d sandboxes", m->cfg->max_sandboxes);
		goto out;
	}
	if (sbm_memory_admit(m, sn.memory_mb, status, cause) == -1)
		goto out;
	*status = 507;
	if (stor_floor_check((uint64_t)m->cfg->disk_free_floor_mb << 20, "create", cause) == -1)
		goto out;
	/* The snapshot's env, then the create's own on top (/init sets the lot). */
	env = json_deep_copy(sn.env);
	if (!json_is_object(env)) {
		json_decref(env);
		env = json_object();
	}
	if (sp->env != NULL)
		json_object_update(env, sp->env);
	s2 = *sp;
	s2.template_name = sn.template_name;
	s2.vcpus = sn.vcpus;
	s2.memory_mb = sn.memory_mb;
	s2.env = env;
	s2.network = sp->network != NULL ? sp->network : sn.network;
	dir = paths_data("named/%s", sn.id);
	src = sb_snapsrc_new(dir, 0, "snapshot");
	free(dir);
	snprintf(origin, sizeof(origin), "snapshot:%s", sn.id);
	if ((sb = sb_record_volumes(m, &s2, origin, src, status, cause)) != NULL)
		sb_enqueue(sb, SB_OP_CREATE, done, arg);
	sb_snapsrc_unref(src);
out:
	json_decref(env);
	store_snap_clear(&sn);
	return sb;
}
