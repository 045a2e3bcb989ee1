/* Sandbox manager: create (validation and the record), find, list, count, patch. */
#include "sandbox/sbm_impl.h"
#include "sandbox/sbm_volume.h"

/* --- create, find, list ------------------------------------------------- */

struct sandbox *
sb_new(struct sbm *m)
{
	struct sandbox *sb = xcalloc(1, sizeof(*sb));

	sb->m = m;
	snprintf(sb->rec.worker, sizeof(sb->rec.worker), "%s", sbm_worker_name(m));
	ref_init(&sb->ref);	/* the manager's */
	TAILQ_INIT(&sb->ops);
	sb->hl = sbm_health_new(m->base, m->cfg->health_interval_s * 1000,
	    m->cfg->health_timeout_s * 1000, sb_health_verdict, sb);
	sb->hl_since = now_ms();
	return sb;
}

/* The template's last use, for listings (a store failure only costs that). */
static void
sbm_template_used(struct sbm *m, const char *name)
{
	char *cause = NULL;

	if (store_template_touch(m->store, name, now_ms(), &cause) == -1) {
		log_warnx("template %s: store: %s", name, cause);
		free(cause);
	}
}

int
sb_live_count(struct sbm *m)
{
	struct sandbox *sb;
	int live = 0;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (!sb_is(sb, SB_SUSPENDED) && !sb_is(sb, SB_FAILED) && !sb->pool_member)
			live++;
	return live;
}

struct sandbox *
sb_record_new(struct sbm *m, const struct sb_spec *sp, const char *origin,
    struct sb_snapsrc *from, char **cause)
{
	struct sandbox *sb;
	char token[33];

	sb = sb_new(m);
	do {
		random_id(sb->rec.id, SBM_ID_LEN);
	} while (sb_find_any(m, sb->rec.id) != NULL);
	snprintf(sb->rec.project, sizeof(sb->rec.project), "%s", sp->project);
	snprintf(sb->rec.template_name, sizeof(sb->rec.template_name), "%s", sp->template_name);
	sb->state = SB_CREATING;
	snprintf(sb->rec.state, sizeof(sb->rec.state), "%s", sb_state_name(SB_CREATING));
	sb->rec.vcpus = sp->vcpus;
	sb->rec.memory_mb = sp->memory_mb;
	sb->rec.env = sp->env != NULL ? json_incref(sp->env) : json_object();
	sb->rec.metadata = sp->metadata != NULL ? json_incref(sp->metadata) : json_object();
	sb->rec.network = sp->network != NULL ? json_incref(sp->network) :
	    json_pack("{s:s,s:[]}", "mode", "none", "allow");
	sb->rec.timeout_s = sp->timeout_s;
	sb->rec.idle_timeout_s = sp->idle_timeout_s;
	sb->rec.auto_pause = sp->auto_pause;
	sb->rec.auto_resume = sp->auto_resume;
	sb->rec.created_at = sb->rec.updated_at = now_ms();
	sb->last_active = sb->rec.last_active_at = sb->rec.created_at;
	sb->rec.origin = origin != NULL ? xstrdup(origin) : NULL;
	random_id(token, 32);
	sb->rec.access_token = xstrdup(token);
	if (sp->private_traffic) {
		random_id(token, 32);
		sb->rec.traffic_token = xstrdup(token);
	}
	/* Persisted before anything exists, so a restart sees the half-done create. */
	if (store_sandbox_insert(m->store, &sb->rec, cause) == -1) {
		sb_free(sb);
		return NULL;
	}
	if (from != NULL) {
		from->refs++;
		sb->from = from;
		sb->tier = from->tier;
	}
	TAILQ_INSERT_TAIL(&m->sandboxes, sb, entry);
	sb_event(sb, "created", json_pack("{s:s,s:s?}", "template", sp->template_name, "origin",
	    origin));
	return sb;
}

struct sandbox *
sb_record_volumes(struct sbm *m, const struct sb_spec *sp, const char *origin,
    struct sb_snapsrc *from, int *status, char **cause)
{
	struct sandbox *sb;

	if ((sb = sb_record_new(m, sp, origin, from, cause)) == NULL) {
		*status = 500;
		return NULL;
	}
	if (json_array_size(sp->volumes) > 0 &&
	    sb_volumes_attach(sb, sp->volumes, status, cause) == -1) {
		sb_event(sb, "deleted", NULL);
		TAILQ_REMOVE(&m->sandboxes, sb, entry);
		store_sandbox_delete(m->store, sb->rec.id, NULL);
		sb_free(sb);
		return NULL;
	}
	return sb;
}

static unsigned
spec_memory_mb(const struct sbm *m, const struct sb_spec *sp)
{
	return sp->memory_mb ? sp->memory_mb : (unsigned)m->cfg->default_memory_mb;
}

/* A template create; sp->network is set. */
static struct sandbox *
sb_create_template(struct sbm *m, const struct sb_spec *sp, const struct stat *st,
    sb_done_cb done, void *arg, int *status, char **cause)
{
	struct sandbox *sb;
	char *why = NULL;
	unsigned image_mb;
	size_t nvol;
	int fits, tiered;

	/*
	 * The guest sees exactly its image as /dev/vda: that size bounds what
	 * it can write on the host. It can be grown (sparse, then resize2fs in
	 * the guest), never shrunk below the template's filesystem.
	 */
	image_mb = (unsigned)(((uint64_t)st->st_size + (1 << 20) - 1) >> 20);
	if (sp->disk_mb != 0 && sp->disk_mb < image_mb) {
		cause_set(cause, "disk_mb: %u is below the %u MiB disk of template %s (disks can "
		    "grow, not shrink)", sp->disk_mb, image_mb, sp->template_name);
		return NULL;
	}
	if (sp->disk_mb > image_mb && sp->disk_mb > (unsigned)m->cfg->max_disk_mb) {
		cause_set(cause, "disk_mb: %u is above this host's max_disk_mb of %d", sp->disk_mb,
		    m->cfg->max_disk_mb);
		return NULL;
	}
	if (sb_live_count(m) >= m->cfg->max_sandboxes) {
		*status = 503;
		cause_set(cause, "this host runs its maximum of %d sandboxes", m->cfg->max_sandboxes);
		return NULL;
	}
	/* Before the record exists: a create refused for space leaves nothing behind. */
	if (stor_floor_check((uint64_t)m->cfg->disk_free_floor_mb << 20, "create", cause) == -1) {
		*status = 507;
		return NULL;
	}
	/*
	 * First tier: a warm member of this shape; second: a spare VMM for its
	 * base; the base tier is the create's op (sb_create_go). Not for a
	 * disk to grow (their size is fixed), never for a template build's VM
	 * (it boots its image). Volumes: each tier takes as many as the slots
	 * hold (filled once the restored guest runs, sbm_volslot.c); more boot
	 * cold, with the volumes on the command line. cold_only (the fallback
	 * of a claim whose volumes failed): no tier that fills slots again.
	 */
	nvol = json_array_size(sp->volumes);
	fits = nvol == 0 || sbm_volumes_fit(sp->volumes);
	if (nvol > 0 && !fits)
		log_info("create %s: %zu volumes do not fit the %d read-write and %d read-only "
		    "slots: cold boot", sp->template_name, nvol, VM_SLOTS_RW, VM_SLOTS_RO);
	tiered = sp->rootfs == NULL && sp->disk_mb <= image_mb && fits && !sp->cold_only;
	if (tiered) {
		if ((sb = sbm_pool_claim(m, sp, done, arg, status, &why)) != NULL)
			goto tier;
		if (why != NULL)
			goto refused;
	}
	/* Past a pool member, the create brings its own memory. */
	if (sbm_memory_admit(m, spec_memory_mb(m, sp), status, cause) == -1)
		return NULL;
	if (tiered) {
		if ((sb = sbm_spare_claim(m, sp, done, arg, status, &why)) != NULL)
			goto tier;
		if (why != NULL)
			goto refused;
	}
	/* The volumes' attachments, checked (one writer) before anything boots. */
	if ((sb = sb_record_volumes(m, sp, NULL, NULL, status, cause)) == NULL)
		return NULL;
	if (sp->rootfs != NULL)
		sb->build_rootfs = xstrdup(sp->rootfs);
	sb->disk_grows = sp->disk_mb > image_mb;
	sb->disk_mb = sb->disk_grows ? sp->disk_mb : 0;	/* else: the image's, from its file */
	sb->base_failed = sp->cold_only;	/* no base restore either */
	if (sp->rootfs == NULL)
		sbm_template_used(m, sp->template_name);
	sb_enqueue(sb, SB_OP_CREATE, done, arg);
	return sb;
tier:
	sbm_template_used(m, sp->template_name);
	return sb;
refused:
	free(*cause);
	*cause = why;
	return NULL;
}

static struct sandbox *sbm_create_admitted(struct sbm *, const struct sb_spec *, sb_done_cb,
    void *, int *, char **);

/* Within the project's quota (sbm_quota.c), counted with the row this create writes. */
struct sandbox *
sbm_create(struct sbm *m, const struct sb_spec *sp, sb_done_cb done, void *arg, int *status,
    char **cause)
{
	struct sandbox *sb;
	unsigned vcpus = sp->vcpus ? sp->vcpus : (unsigned)m->cfg->default_vcpus;
	unsigned mem = spec_memory_mb(m, sp);

	/* A template build's VM is the operator's, not a project's sandbox. */
	if (sp->rootfs != NULL)
		return sbm_create_admitted(m, sp, done, arg, status, cause);
	if (sbm_quota_admit(m, sp->project, 1, vcpus, mem, 1, status, cause) == -1)
		return NULL;
	sb = sbm_create_admitted(m, sp, done, arg, status, cause);
	sbm_quota_release(m, sp->project);
	return sb;
}

static struct sandbox *
sbm_create_admitted(struct sbm *m, const struct sb_spec *sp, sb_done_cb done, void *arg,
    int *status, char **cause)
{
	struct template_paths tp;
	struct sandbox *sb;
	struct sb_spec tsp;
	struct stat st;
	int rc;

	*status = 400;
	if (m->draining) {
		*status = 503;
		cause_set(cause, "this worker is draining: it takes no new sandboxes");
		return NULL;
	}
	if (sp->snapshot != NULL)
		return sb_create_from_snap(m, sp, sp->snapshot, done, arg, status, cause);
	/* A template build's VM (api_tbuild.c): its image is the build's current rootfs. */
	if (sp->rootfs != NULL) {
		if (stat(sp->rootfs, &st) == -1) {
			cause_set(cause, "build image %s: %s", sp->rootfs, strerror(errno));
			*status = 500;
			return NULL;
		}
		goto shaped;
	}
	memset(&tp, 0, sizeof(tp));
	rc = template_paths(sp->template_name, &tp, cause);
	if (rc == 0 && (rc = stat(tp.rootfs, &st)) == -1)
		cause_set(cause, "template %s: %s: %s", sp->template_name, tp.rootfs,
		    strerror(errno));
	if (rc == -1) {
		char *why = NULL;
		/* Not a template: a snapshot of that name (E2B sends snapshots as templateID). */
		if ((sb = sb_create_from_snap(m, sp, NULL, done, arg, status, &why)) != NULL ||
		    *status != 404) {
			template_paths_free(&tp);
			free(*cause);
			*cause = why;
			return sb;
		}
		free(why);
		*status = 422;
		template_paths_free(&tp);
		return NULL;
	}
	template_paths_free(&tp);
shaped:
	/* No network asked for: none (a snapshot's create keeps the snapshot's). */
	tsp = *sp;
	if (tsp.network == NULL)
		tsp.network = json_pack("{s:s,s:[]}", "mode", "none", "allow");
	else
		json_incref(tsp.network);
	sb = sb_create_template(m, &tsp, &st, done, arg, status, cause);
	json_decref(tsp.network);
	return sb;
}

struct sandbox *
sbm_find(struct sbm *m, const char *id, const char *project)
{
	struct sandbox *sb;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (strcmp(sb->rec.id, id) == 0 && !sb->pool_member)
			return project == NULL || strcmp(sb->rec.project, project) == 0 ? sb : NULL;
	return NULL;
}

struct sandbox *
sbm_find_token(struct sbm *m, const char *token)
{
	struct sandbox *sb, *found = NULL;

	/* Every one is compared, so the time does not tell which sandbox or prefix matched. */
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		const char *t = sb->rec.access_token;
		/* Members' tokens are nobody's: never matched. */
		if (t != NULL && !sb->pool_member && ct_streq(token, t))
			found = sb;
	}
	return found;
}

/* Any sandbox by id, pool members too: ids are unique across both. */
struct sandbox *
sb_find_any(struct sbm *m, const char *id)
{
	struct sandbox *sb;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (strcmp(sb->rec.id, id) == 0)
			return sb;
	return NULL;
}

static int
cmp_sb(const void *a, const void *b)
{
	return strcmp((*(struct sandbox *const *)a)->rec.id, (*(struct sandbox *const *)b)->rec.id);
}

json_t *
sbm_list(struct sbm *m, const char *project, const char *states, json_t *metadata,
    const char *after, int limit, char **next)
{
	struct sandbox *sb, **all = NULL;
	size_t n = 0, i;
	json_t *arr = json_array();
	const char *k;
	json_t *v;

	*next = NULL;
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (sb->pool_member ||
		    (project != NULL && strcmp(sb->rec.project, project) != 0))
			continue;
		/* No states given: every state. */
		if (states != NULL && *states != '\0' && !csv_has(states, sb_state_name(sb->state)))
			continue;
		if (after != NULL && strcmp(sb->rec.id, after) <= 0)
			continue;
		int ok = 1;
		if (metadata != NULL) {
			json_object_foreach(metadata, k, v) {
				json_t *h = json_object_get(sb->rec.metadata, k);
				if (h == NULL || !json_equal(h, v))
					ok = 0;
			}
		}
		if (!ok)
			continue;
		all = xreallocarray(all, n + 1, sizeof(*all));
		all[n++] = sb;
	}
	if (n > 0)
		qsort(all, n, sizeof(*all), cmp_sb);
	for (i = 0; i < n && (int)i < limit; i++)
		json_array_append_new(arr, sb_json(all[i]));
	if (n > (size_t)limit)
		*next = xstrdup(all[limit - 1]->rec.id);
	free(all);
	return arr;
}

int
sbm_count(struct sbm *m, int s)
{
	struct sandbox *sb;
	int n = 0;

	if (m == NULL)
		return 0;
	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (!sb->pool_member && (s == -1 || sb_is(sb, (enum sb_state)s)))
			n++;
	return n;
}

int
sbm_count_unhealthy(struct sbm *m)
{
	struct sandbox *sb;
	int n = 0;

	if (m == NULL)
		return 0;
	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb_is(sb, SB_RUNNING) && sb->hl_status == SB_UNHEALTHY)
			n++;
	return n;
}

int
sbm_live_vms(struct sbm *m)
{
	struct sandbox *sb;
	int n = 0;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->vm != NULL)
			n++;
	return n;
}

int
sb_patch(struct sandbox *sb, int64_t timeout_s, int64_t idle_timeout_s, int auto_pause,
    json_t *metadata, char **cause)
{
	if (timeout_s >= 0) {
		int64_t now = now_ms();

		sb->rec.timeout_s = timeout_s;
		sb->rec.expires_at = timeout_s > 0 ? now + timeout_s * 1000 : 0;
		/* Stopped: all of it is left, counted from the next resume. */
		sb->rec.paused_at = sb->rec.expires_at != 0 && sb_stopped(sb) ? now : 0;
	}
	if (idle_timeout_s >= 0)
		sb->rec.idle_timeout_s = idle_timeout_s;
	if (auto_pause >= 0)
		sb->rec.auto_pause = auto_pause;
	if (metadata != NULL) {
		json_decref(sb->rec.metadata);
		sb->rec.metadata = json_incref(metadata);
	}
	sb_save(sb);
	return 0;
}

void
sb_extend(struct sandbox *sb, int64_t timeout_s)
{
	int64_t end = sbl_extend(sb->rec.expires_at, timeout_s, now_ms());

	if (end == sb->rec.expires_at)
		return;
	sb->rec.expires_at = end;
	sb_save(sb);
}

int
sb_auto_resume(const struct sandbox *sb)
{
	return sb->rec.auto_resume;
}
