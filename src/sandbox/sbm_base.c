/*
 * Base snapshots of the warm pools (sbm_pool.c): the manifest that gates
 * them, installing a built one, and the create tier that restores one.
 */
#include <dirent.h>

#include "common/digest.h"
#include "sandbox/sbm_pool_impl.h"
#include "vm/vm_jail.h"

/* --- manifest ---------------------------------------------------------- */

/*
 * What a base of this pool must have been built with to be restored now:
 * the QEMU binary, machine, CPU model, accelerator, kernel, the template
 * (its template.json, which names the agent's sha256) and the shape. The
 * devices are the snapshot header's (vm_restore compares them again).
 */
static json_t *
pool_manifest_expect(struct sbm *m, const struct sbm_pool *p, char **cause)
{
	char *path = paths_data("templates/%s/template.json", p->tmpl), sum[65], slots[32];
	json_t *meta, *j;

	if (sha256_file_hex(path, sum, cause) == -1) {
		free(path);
		return NULL;
	}
	meta = json_load_file(path, 0, NULL);
	free(path);
	/* The volume slots are devices of the base: a base without them is rebuilt. */
	snprintf(slots, sizeof(slots), "%drw,%dro", VM_SLOTS_RW, VM_SLOTS_RO);
	j = json_pack("{s:i,s:s,s:s,s:s?,s:s,s:{s:s,s:s},s:s,s:s,s:s,s:i,s:i,s:b,s:s}",
	    "format", POOL_MANIFEST_FORMAT, "template", p->tmpl, "template_sha256", sum,
	    "agent_sha256", json_string_value(json_object_get(meta, "agent_sha256")),
	    "kernel", m->kernel_id, "qemu", "path", VM_JAIL_QEMU, "sha256", m->qemu_sha256,
	    "machine", POOL_MACHINE,
	    "cpu", m->accel.accel == VM_ACCEL_KVM ? "host" : VM_TCG_CPU,
	    "accel", accel_name(m->accel.accel), "vcpus", (int)p->vcpus,
	    "memory_mb", (int)p->memory_mb, "nic", p->nic, "volume_slots", slots);
	json_decref(meta);
	return j;
}

static void
pool_manifest_sum(json_t *expect, char out[65])
{
	char *text = json_dumps(expect, JSON_SORT_KEYS | JSON_COMPACT);

	sha256_hex(text, strlen(text), out);
	free(text);
}

/* 0 when bases/<name> is complete and its manifest is what would run now. */
int
pool_base_check(struct sbm *m, struct sbm_pool *p, char **cause)
{
	char *dir = pool_base_dir(p), *path;
	struct stor_snap_header h;
	json_t *want, *have = NULL, *v;
	const char *k;
	int rc = -1;

	memset(&h, 0, sizeof(h));
	xasprintf(&path, "%s/%s", dir, POOL_MANIFEST);
	if ((want = pool_manifest_expect(m, p, cause)) == NULL)
		goto out;
	if ((have = json_load_file(path, 0, NULL)) == NULL) {
		cause_set(cause, "%s: missing or not JSON", path);
		goto out;
	}
	json_object_foreach(want, k, v)
		if (!json_equal(v, json_object_get(have, k))) {
			char *a = json_dumps(json_object_get(have, k), JSON_ENCODE_ANY), *b =
			    json_dumps(v, JSON_ENCODE_ANY);
			cause_set(cause, "base %s: %s is %s, now %s", p->name, k, a ? a : "absent",
			    b ? b : "?");
			free(a);
			free(b);
			goto out;
		}
	if (stor_snapshot_load(dir, &h, cause) == -1)
		goto out;
	if (!json_is_string(json_object_get(have, "devices")) ||
	    strcmp(json_string_value(json_object_get(have, "devices")), h.devices) != 0) {
		cause_set(cause, "base %s: devices differ from its snapshot header", p->name);
		goto out;
	}
	pool_manifest_sum(want, p->base_sum);
	rc = 0;
out:
	stor_snap_header_free(&h);
	json_decref(want);
	json_decref(have);
	free(path);
	free(dir);
	return rc;
}

/* A base that is stale or broken: never used again, rebuilt on the next tick. */
void
pool_base_reject(struct sbm *m, struct sbm_pool *p, const char *why)
{
	char *dir = pool_base_dir(p), *cause = NULL;

	log_warnx("pool %s: base rejected, rebuilding: %s", p->name, why);
	p->rejected++;
	p->base = PB_NONE;
	p->base_sum[0] = '\0';
	/* A spare's disk is this base's rootfs and its devices are this base's. */
	pool_spares_drop(p, "its base was rejected");
	if (path_exists(dir) && remove_tree(dir, &cause) == -1) {
		log_warnx("pool %s: %s", p->name, cause);
		free(cause);
	}
	free(dir);
}


void
pool_clean_tmp(void)
{
	char *dir = paths_data("bases"), *path, *cause = NULL;
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strstr(de->d_name, ".tmp-") == NULL)
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		if (remove_tree(path, &cause) == -1) {
			log_warnx("pool: %s", cause);
			free(cause);
			cause = NULL;
		}
		free(path);
	}
	closedir(d);
	free(dir);
}


static int
pool_base_install(struct sandbox *sb, char **cause)
{
	struct sbm_pool *p = sb->pool;
	char *snap = paths_data("snapshots/%s", sb->rec.snapshot), *dir = pool_base_dir(p);
	char *tmp, *mpath, *text = NULL, *bases = paths_data("bases");
	struct stor_snap_header h;
	json_t *man = NULL;
	int rc = -1;

	memset(&h, 0, sizeof(h));
	xasprintf(&tmp, "%s.tmp-%lld", dir, (long long)pool_now());
	xasprintf(&mpath, "%s/%s", tmp, POOL_MANIFEST);
	if (mkdir_p(bases, 0755, cause) == -1 || stor_snapshot_load(snap, &h, cause) == -1 ||
	    (man = pool_manifest_expect(sb->m, p, cause)) == NULL)
		goto out;
	if (rename(snap, tmp) == -1) {
		cause_set(cause, "rename %s: %s", snap, strerror(errno));
		goto out;
	}
	free(sb->rec.snapshot);
	sb->rec.snapshot = NULL;
	pool_manifest_sum(man, p->base_sum);
	json_object_set_new(man, "devices", json_string(h.devices));
	json_object_set_new(man, "built_at", json_time_ms(pool_now()));
	json_object_set_new(man, "build_ms", json_integer(pool_now() - sb->pool_t0));
	text = json_dumps(man, JSON_SORT_KEYS | JSON_INDENT(2));
	if (write_file_atomic(mpath, text, strlen(text), 0444, cause) == -1)
		goto out;
	if (path_exists(dir) && remove_tree(dir, cause) == -1)
		goto out;
	if (rename(tmp, dir) == -1) {
		cause_set(cause, "rename %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (rc == -1 && path_exists(tmp))
		(void)remove_tree(tmp, NULL);
	stor_snap_header_free(&h);
	json_decref(man);
	free(text);
	free(bases);
	free(mpath);
	free(tmp);
	free(dir);
	free(snap);
	return rc;
}

void
pool_base_snapped(struct vm *vm, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	struct sbm_pool *p = sb->pool;
	char *cause = NULL, *msg;

	if (error != NULL || pool_base_install(sb, &cause) == -1) {
		xasprintf(&msg, "base snapshot: %s", error ? error : cause);
		free(cause);
		sb_fail(sb, msg, 500);
		free(msg);
		return;
	}
	/* Spares are started only for a ready base; any left are of the one before. */
	pool_spares_drop(p, "a new base was built");
	p->base = PB_READY;
	p->builds++;
	p->base_built_at = pool_now();
	p->base_build_ms = (double)(pool_now() - sb->pool_t0);
	free(p->base_error);
	p->base_error = NULL;
	log_info("pool %s: base built in %.0f ms", p->name, p->base_build_ms);
	pool_destroy(sb, "base built");
}


int
sb_pool_restore_base(struct sandbox *sb)
{
	struct sbm *m = sb->m;
	struct sbm_pool *p = pool_for(m, sb->rec.template_name, sb->rec.vcpus, sb->rec.memory_mb,
	    sb->rec.network);
	struct template_paths tp;
	struct vm_config vc;
	char *cause = NULL, *dir, *rootfs;
	int nsfd = -1, tapfd = -1;

	if (p == NULL || p->base != PB_READY || sb->base_failed)
		return -1;
	if (pool_base_check(m, p, &cause) == -1) {
		pool_base_reject(m, p, cause);
		goto fallback;
	}
	dir = pool_base_dir(p);
	xasprintf(&rootfs, "%s/%s", dir, STOR_SNAP_ROOTFS);
	memset(&tp, 0, sizeof(tp));
	/* The base's guest saw the placeholders: its volumes go into the slots once it runs. */
	sb->vol_fill = sb_volumes_slotted(sb) > 0;
	if (template_paths(sb->rec.template_name, &tp, &cause) == 0 &&
	    sb_prepare(sb, rootfs, 0, &vc, &tp, &nsfd, &tapfd, &cause) == 0)
		sb->vm = vm_restore(m->base, &vc, dir, VM_RESTORE_OWN, -1, sb_vm_event, sb_vm_ready,
		    sb, &cause);
	close_fds(nsfd, tapfd);
	template_paths_free(&tp);
	free(rootfs);
	free(dir);
	if (sb->vm != NULL) {
		sb->tier = "base";
		m->tier_creates[SBM_TIER_BASE]++;
		free(cause);
		return 0;
	}
	sb_release(sb);
fallback:
	m->tier_fallbacks++;
	log_warnx("sandbox %s: base restore: %s; cold boot", sb->rec.id, cause);
	sb_event(sb, "tier_fallback", json_pack("{s:s,s:s,s:s}", "from", "base", "to", "boot",
	    "reason", cause ? cause : "failed"));
	free(cause);
	return -1;
}

int
sb_pool_base_fallback(struct sandbox *sb, const char *why)
{
	struct sbm *m = sb->m;

	if (sb->cur == NULL || sb->cur->kind != SB_OP_CREATE || sb->tier == NULL ||
	    strcmp(sb->tier, "base") != 0 || sb->base_failed || ref_dead(&sb->ref))
		return 0;
	sb->base_failed = 1;
	m->tier_creates[SBM_TIER_BASE]--;	/* counted when the restore started: it served nothing */
	m->tier_fallbacks++;
	log_warnx("sandbox %s: base restore failed: %s; cold boot", sb->rec.id, why);
	sb_event(sb, "tier_fallback", json_pack("{s:s,s:s,s:s}", "from", "base", "to", "boot",
	    "reason", why));
	sb_deadline_clear(sb);
	sb_release(sb);
	sb->tier = NULL;
	sb_op_create(sb);	/* the boot slot is still this create's */
	return 1;
}

/* --- refill ------------------------------------------------------------------ */
