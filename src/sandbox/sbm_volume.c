/*
 * Volumes on sandboxes (sbm_volume.h). A sandbox's volumes are its
 * attachment rows in the store: written at create (before anything boots,
 * refused with 409 when the read-write rule says no), read back by every
 * boot and restore (so they survive suspend/resume and a daemon restart),
 * dropped when the sandbox is deleted. The files are opened here by
 * airlockd and handed to QEMU as fds (read-only ones O_RDONLY), so the
 * jailed VMM never names a host path and cannot write a read-only volume
 * whatever the guest does.
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/recipe.h"
#include "sandbox/sbm_impl.h"
#include "sandbox/sbm_volume.h"
#include "vm/qemu_argv.h"

char *
sbm_volume_file(const char *project, const char *name)
{
	return paths_data("volumes/%s/%s.ext4", project, name);
}

int
sbm_volume_valid_name(const char *name)
{
	return name != NULL && paths_valid_name(name);
}

/* Guest paths a volume may not cover: the system the agent and the guest need. */
static int
sbm_volume_system_path(const char *p)
{
	static const char *const sys[] = { "/proc", "/sys", "/dev", "/etc", "/usr", "/bin",
	    "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/run", "/var/run", NULL };
	size_t i, n;

	if (strcmp(p, "/") == 0)
		return 1;
	for (i = 0; sys[i] != NULL; i++) {
		n = strlen(sys[i]);
		if (strncmp(p, sys[i], n) == 0 && (p[n] == '\0' || p[n] == '/'))
			return 1;
	}
	return 0;
}

int
sbm_volumes_check(json_t *v, char *field, size_t fieldlen, char **cause)
{
	static const char *const keys[] = { "name", "path", "read_only", NULL };
	const char *name, *path, *k, *pj;
	json_t *e, *x, *f;
	char *norm;
	size_t i, j, n, l;

	snprintf(field, fieldlen, "volumes");
	if (!json_is_array(v) || json_array_size(v) > VM_VOLUMES_MAX) {
		cause_set(cause, "volumes: must be an array of at most %d {name, path, read_only}",
		    VM_VOLUMES_MAX);
		return -1;
	}
	json_array_foreach(v, i, e) {
		snprintf(field, fieldlen, "volumes[%zu]", i);
		if (!json_is_object(e)) {
			cause_set(cause, "%s: must be an object {name, path, read_only}", field);
			return -1;
		}
		json_object_foreach(e, k, x) {
			for (j = 0; keys[j] != NULL && strcmp(keys[j], k) != 0; j++)
				;
			if (keys[j] == NULL) {
				snprintf(field, fieldlen, "volumes[%zu].%.32s", i, k);
				cause_set(cause, "%s: unknown field", field);
				return -1;
			}
		}
		name = json_string_value(json_object_get(e, "name"));
		path = json_string_value(json_object_get(e, "path"));
		f = json_object_get(e, "read_only");
		if (!sbm_volume_valid_name(name)) {
			snprintf(field, fieldlen, "volumes[%zu].name", i);
			cause_set(cause, "%s: must be a volume name ([a-z0-9][a-z0-9._-]{0,62})", field);
			return -1;
		}
		snprintf(field, fieldlen, "volumes[%zu].path", i);
		if (path == NULL || strlen(path) >= 200 || path[0] != '/' ||
		    (norm = recipe_guest_path(path)) == NULL) {
			cause_set(cause, "%s: must be an absolute guest path without \".\" or \"..\" "
			    "components, under 200 bytes", field);
			return -1;
		}
		if (strcmp(norm, path) != 0 || sbm_volume_system_path(norm)) {
			cause_set(cause, "%s: \"%s\" %s", field, path, strcmp(norm, path) != 0 ?
			    "is not normalized (no //, no trailing /)" :
			    "is / or a system directory (/proc /sys /dev /etc /usr /bin /sbin /lib* "
			    "/boot /run)");
			free(norm);
			return -1;
		}
		free(norm);
		if (f != NULL && !json_is_boolean(f)) {
			snprintf(field, fieldlen, "volumes[%zu].read_only", i);
			cause_set(cause, "%s: must be a boolean", field);
			return -1;
		}
		for (j = 0; j < i; j++) {
			json_t *o = json_array_get(v, j);
			pj = json_string_value(json_object_get(o, "path"));
			n = strlen(pj);
			l = strlen(path);
			if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0) {
				snprintf(field, fieldlen, "volumes[%zu].name", i);
				cause_set(cause, "%s: volume \"%s\" is listed twice", field, name);
				return -1;
			}
			if ((l >= n && strncmp(path, pj, n) == 0 && (path[n] == '/' || !path[n])) ||
			    (n > l && strncmp(pj, path, l) == 0 && pj[l] == '/')) {
				cause_set(cause, "%s: \"%s\" overlaps volumes[%zu].path \"%s\"", field,
				    path, j, pj);
				return -1;
			}
		}
	}
	return 0;
}

/* The guest-visible serial of the i-th volume (virtio-blk: at most 20 bytes). */
static void
sb_volume_serial(unsigned i, char out[24])
{
	snprintf(out, 24, "airlock-vol%u", i);
}

/*
 * Template VMs have the volume slots; a template build's VM (its image)
 * not, nor one resumed from a snapshot taken before slots existed.
 */
int
sb_slots(const struct sandbox *sb)
{
	return sb->build_rootfs == NULL && !sb->slotless;
}

/* Volumes that fit the slots (qemu_argv.h): a pool member can take them. */
static int
sb_volumes_fit(size_t rw, size_t ro)
{
	return rw <= VM_SLOTS_RW && ro <= VM_SLOTS_RO;
}

int
sbm_volumes_fit(json_t *v)
{
	size_t i, ro = 0;
	json_t *e;

	json_array_foreach(v, i, e)
		ro += json_is_true(json_object_get(e, "read_only"));
	return sb_volumes_fit(json_array_size(v) - ro, ro);
}

/*
 * Where each of a sandbox's volumes goes, a function of its attachments
 * alone (name order), so every boot and restore agrees with the device
 * list a snapshot recorded: all in the slots when they fit (read-write
 * ones in 0.., read-only ones after VM_SLOTS_RW), else each a disk of its
 * own after the slots (airlock-volN), as before slots existed.
 */
static void
sb_volumes_place(const struct store_attachment *atts, size_t n, int slots, int *slot,
    char serial[][24])
{
	size_t i, rw = 0, ro = 0;

	for (i = 0; i < n; i++)
		ro += atts[i].read_only;
	rw = n - ro;
	slots = slots && sb_volumes_fit(rw, ro);
	rw = ro = 0;
	for (i = 0; i < n; i++) {
		slot[i] = !slots ? -1 : atts[i].read_only ? VM_SLOTS_RW + (int)ro++ : (int)rw++;
		if (slot[i] >= 0)
			snprintf(serial[i], 24, "airlock-slot%d", slot[i]);
		else
			sb_volume_serial((unsigned)i, serial[i]);
	}
}

int
sbm_volume_elsewhere(struct store *st, const char *me, const char *project, const char *name,
    int *status, char **cause)
{
	struct store_volume vol;

	if (store_volume_get(st, project, name, &vol, NULL) != 1 || vol.worker[0] == '\0' ||
	    strcmp(vol.worker, me) == 0)
		return 0;	/* not found or a store error: the caller's own call says so */
	*status = 409;
	cause_set(cause, "volume %s is on worker %s, not this one (go through an API replica: "
	    "it sends the call there)", name, vol.worker);
	return 1;
}

int
sb_volumes_attach(struct sandbox *sb, json_t *v, int *status, char **cause)
{
	struct store_attachment a;
	json_t *e;
	size_t i;
	int rc;

	json_array_foreach(v, i, e) {
		memset(&a, 0, sizeof(a));
		snprintf(a.volume, sizeof(a.volume), "%s",
		    json_string_value(json_object_get(e, "name")));
		if (sbm_volume_elsewhere(sb->m->store, sbm_worker_name(sb->m), sb->rec.project,
		    a.volume, status, cause)) {
			cause_wrap(cause, "volumes[%zu]", i);
			sb_volumes_detach(sb);
			return -1;
		}
		snprintf(a.sandbox, sizeof(a.sandbox), "%s", sb->rec.id);
		snprintf(a.path, sizeof(a.path), "%s", json_string_value(json_object_get(e, "path")));
		a.read_only = json_is_true(json_object_get(e, "read_only"));
		rc = store_volume_attach(sb->m->store, sb->rec.project, &a, cause);
		if (rc == 1)
			continue;
		*status = rc == 0 ? 409 : rc == 2 ? 404 : 500;
		cause_wrap(cause, "volumes[%zu]", i);
		sb_volumes_detach(sb);
		return -1;
	}
	return 0;
}

void
sb_volumes_detach(struct sandbox *sb)
{
	char *cause = NULL;

	sb_volumes_close(sb);
	if (store_volume_detach(sb->m->store, sb->rec.id, &cause) == -1) {
		log_warnx("sandbox %s: detach volumes: %s", sb->rec.id, cause);
		free(cause);
	}
}

void
sb_volumes_close(struct sandbox *sb)
{
	unsigned i;

	for (i = 0; i < 2 * sb->nvolfds; i++)
		if (sb->volfds[i] != -1)
			close(sb->volfds[i]);
	sb->nvolfds = 0;
}

/*
 * This sandbox's volumes for a boot, restore or adoption into vc: the
 * store's rows in name order, placed (sb_volumes_place: the same serials
 * and device list every time, which a restore's device check needs), each
 * file opened when open is set (else its fds are -1: an adopted VMM has
 * them already).
 */
static int
sb_volumes_vc(struct sandbox *sb, struct vm_config *vc, int open_files, char **cause)
{
	struct store_attachment *atts = NULL;
	size_t n = 0, i;
	int slot[VM_VOLUMES_MAX];
	char *file;

	sb_volumes_close(sb);
	if (store_volume_attachments(sb->m->store, sb->rec.id, &atts, &n, cause) == -1)
		return -1;
	if (n > VM_VOLUMES_MAX) {
		cause_set(cause, "volumes: %zu attached, at most %d", n, VM_VOLUMES_MAX);
		free(atts);
		return -1;
	}
	sb_volumes_place(atts, n, vc->slots, slot, sb->volserial);
	for (i = 0; i < n; i++) {
		sb->volfds[2 * i] = sb->volfds[2 * i + 1] = -1;
		file = sbm_volume_file(sb->rec.project, atts[i].volume);
		if (open_files) {
			sb->volfds[2 * i] = open(file, (atts[i].read_only ? O_RDONLY : O_RDWR) |
			    O_CLOEXEC | O_NOFOLLOW);
			sb->volfds[2 * i + 1] = atts[i].read_only || sb->volfds[2 * i] == -1 ? -1 :
			    open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		}
		if (open_files && (sb->volfds[2 * i] == -1 ||
		    (!atts[i].read_only && sb->volfds[2 * i + 1] == -1))) {
			cause_set(cause, "volume %s: %s: %s", atts[i].volume, file, strerror(errno));
			free(file);
			sb->nvolfds = (unsigned)i + 1;
			sb_volumes_close(sb);
			free(atts);
			return -1;
		}
		free(file);
		sb->vmvols[i].slot = slot[i];
		sb->vmvols[i].fd = sb->volfds[2 * i];
		sb->vmvols[i].fd_ro = sb->volfds[2 * i + 1];
		sb->vmvols[i].serial = sb->volserial[i];
		sb->vmvols[i].read_only = atts[i].read_only;
		sb->nvolfds = (unsigned)i + 1;
	}
	free(atts);
	vc->volumes = sb->vmvols;
	vc->nvolumes = sb->nvolfds;
	return 0;
}

int
sb_volumes_open(struct sandbox *sb, struct vm_config *vc, char **cause)
{
	return sb_volumes_vc(sb, vc, 1, cause);
}

int
sb_volumes_layout(struct sandbox *sb, struct vm_config *vc, char **cause)
{
	return sb_volumes_vc(sb, vc, 0, cause);
}

/*
 * For /init: [{serial, path, read_only, size}], or NULL without volumes.
 * size (the file's bytes): the agent waits until its disk is that large,
 * since a slot filled at a claim grows in the guest only when virtio-blk's
 * config change reaches it.
 */
json_t *
sb_volumes_init(struct sandbox *sb)
{
	struct store_attachment *atts = NULL;
	char *cause = NULL, serial[VM_VOLUMES_MAX][24], *file;
	int slot[VM_VOLUMES_MAX];
	size_t n = 0, i;
	struct stat st;
	json_t *arr;

	if (store_volume_attachments(sb->m->store, sb->rec.id, &atts, &n, &cause) == -1) {
		log_warnx("sandbox %s: volumes: %s", sb->rec.id, cause);
		free(cause);
		return NULL;
	}
	if (n == 0) {
		free(atts);
		return NULL;
	}
	arr = json_array();
	if (n > VM_VOLUMES_MAX)
		n = VM_VOLUMES_MAX;
	sb_volumes_place(atts, n, sb_slots(sb), slot, serial);
	for (i = 0; i < n; i++) {
		file = sbm_volume_file(sb->rec.project, atts[i].volume);
		if (stat(file, &st) == -1)
			st.st_size = 0;
		free(file);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:b, s:I}", "serial", serial[i],
		    "path", atts[i].path, "read_only", atts[i].read_only, "size",
		    (json_int_t)st.st_size));
	}
	free(atts);
	return arr;
}

int
sb_volumes_slotted(struct sandbox *sb)
{
	struct store_attachment *atts = NULL;
	size_t n = 0, i, ro = 0;

	if (store_volume_attachments(sb->m->store, sb->rec.id, &atts, &n, NULL) == -1)
		return -1;	/* unknown: take the path that works with any (a cold boot) */
	for (i = 0; i < n; i++)
		ro += atts[i].read_only;
	free(atts);
	return n == 0 || (sb_slots(sb) && sb_volumes_fit(n - ro, ro)) ? (int)n : -1;
}

int
sb_volumes_rw(struct sandbox *sb)
{
	struct store_attachment *atts = NULL;
	size_t n = 0, i;
	int rw = 0;

	if (store_volume_attachments(sb->m->store, sb->rec.id, &atts, &n, NULL) == -1)
		return 0;
	for (i = 0; i < n; i++)
		rw += !atts[i].read_only;
	free(atts);
	return rw;
}

int
sb_has_volumes(struct sandbox *sb)
{
	struct store_attachment *atts = NULL;
	size_t n = 0;

	if (store_volume_attachments(sb->m->store, sb->rec.id, &atts, &n, NULL) == -1)
		return 1;	/* unknown: take the path that works with them */
	free(atts);
	return n > 0;
}

/* --- freeze before a delete or suspend ----------------------------------- */

void
sb_volumes_freeze_cancel(struct sandbox *sb)
{
	if (sb->fz_req != NULL) {
		envd_req_cancel(sb->fz_req);
		sb->fz_req = NULL;
	}
	if (sb->fz_timer != NULL) {
		event_free(sb->fz_timer);
		sb->fz_timer = NULL;
	}
	sb->fz_then = NULL;
}

static void
sb_volumes_frozen(struct sandbox *sb, const char *why)
{
	void (*then)(struct sandbox *) = sb->fz_then;

	if (why != NULL && sb->fz_thaw)
		log_warnx("sandbox %s: thawing its volumes: %s", sb->rec.id, why);
	else if (why != NULL)
		log_info("sandbox %s: its volumes were not frozen (%s): a later read-only attach "
		    "replays their journals", sb->rec.id, why);
	sb_volumes_freeze_cancel(sb);
	if (then != NULL)
		then(sb);
}

static void
sb_volumes_freeze_done(int status, json_t *resp, const char *error, void *arg)
{
	struct sandbox *sb = arg;
	const char *msg = json_string_value(json_object_get(resp, "message"));
	char why[300];

	sb->fz_req = NULL;
	snprintf(why, sizeof(why), "%s", error != NULL ? error : msg != NULL ? msg :
	    "the agent answered with an error");
	sb_volumes_frozen(sb, error == NULL && status == 200 ? NULL : why);
}

static void
sb_volumes_freeze_timeout(evutil_socket_t fd, short ev, void *arg)
{
	sb_volumes_frozen(arg, "no answer in time");
}

void
sb_volumes_freeze(struct sandbox *sb, int thaw, void (*then)(struct sandbox *))
{
	struct timeval tv = { SBM_FREEZE_TIMEOUT_MS / 1000, (SBM_FREEZE_TIMEOUT_MS % 1000) * 1000 };
	struct agent_client *ac = sb->agent_up && sb->hl_status != SB_UNHEALTHY ? sb->agent : NULL;
	const char *hdrs[2] = { NULL, NULL };
	char *tok, *cause = NULL;
	json_t *body, *vols;

	sb_volumes_freeze_cancel(sb);
	/* A paused guest cannot run to freeze: it keeps what a crash would (docs/volumes.md). */
	if (ac == NULL || sb->vm == NULL || vm_state(sb->vm) != VM_RUNNING ||
	    sb_volumes_rw(sb) == 0 || (vols = sb_volumes_init(sb)) == NULL) {
		if (then != NULL)
			then(sb);
		return;
	}
	body = json_pack("{s:o}", "volumes", vols);
	xasprintf(&tok, "X-Access-Token: %s", sb->rec.access_token);
	hdrs[0] = tok;
	sb->fz_then = then;
	sb->fz_thaw = thaw;
	sb->fz_req = envd_call_json(ac, "POST", thaw ? "/airlock/volumes/thaw" :
	    "/airlock/volumes/freeze", body, hdrs, sb_volumes_freeze_done, sb, &cause);
	json_decref(body);
	free(tok);
	if (sb->fz_req == NULL) {
		sb_volumes_frozen(sb, cause);
		free(cause);
		return;
	}
	sb->fz_timer = evtimer_new(sb->m->base, sb_volumes_freeze_timeout, sb);
	evtimer_add(sb->fz_timer, &tv);
}
