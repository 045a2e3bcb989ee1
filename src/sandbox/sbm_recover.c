/*
 * Restart recovery. The store says what each sandbox was doing when the
 * previous airlockd stopped; the host says what is left (jailed QEMU
 * processes under the sandbox's uid, island namespaces, sandbox dirs,
 * snapshots). A running or paused sandbox whose VMM outlived the daemon
 * (SIGKILL, crash) is adopted and keeps its state; suspended sandboxes
 * survive as they are; one caught mid-operation is finished (delete),
 * rolled back (resume → suspended), or failed with the reason, and every
 * leftover resource is released. The API serves only once all of this has
 * settled.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "net/net_island.h"
#include "sandbox/sbm.h"
#include "sandbox/sbm_recover.h"
#include "images/stor_sandbox.h"
#include "vm/console_file.h"
#include "vm/vm_cgroup.h"

/* The jail uid a sandbox held, from run/uids/<uid> (contains the name). */
static int
find_uid(const char *name, uid_t *uid)
{
	char *dir = paths_data("run/uids"), *path, *text;
	struct dirent *de;
	DIR *d;
	int found = 0;

	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return 0;
	}
	while (!found && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		if (read_file(path, 256, &text, NULL, NULL) == 0) {
			text[strcspn(text, "\n")] = '\0';
			if (strcmp(text, name) == 0) {
				*uid = (uid_t)strtoul(de->d_name, NULL, 10);
				found = 1;
			}
			free(text);
		}
		free(path);
	}
	closedir(d);
	free(dir);
	return found;
}

/* SIGKILL every process whose real uid is uid (the jailed VMM and helpers). */
static int
kill_uid(uid_t uid)
{
	struct dirent *de;
	DIR *d = opendir("/proc");
	char path[300], *text, *p;
	int killed = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
		if (read_file(path, 65536, &text, NULL, NULL) == -1)
			continue;
		if ((p = strstr(text, "\nUid:")) != NULL &&
		    (uid_t)strtoul(p + 5, NULL, 10) == uid) {
			if (kill((pid_t)atoi(de->d_name), SIGKILL) == 0)
				killed++;
		}
		free(text);
	}
	closedir(d);
	return killed;
}

void
sbm_cleanup_host(const char *name)
{
	struct net_island ni;
	char *path, *cause = NULL;
	uid_t uid;

	if (find_uid(name, &uid)) {
		int n = kill_uid(uid);
		if (n > 0)
			log_info("recover %s: killed %d leftover process(es) of uid %u", name, n,
			    (unsigned)uid);
		/* Give the kernel a moment to reap before the files go. */
		for (int i = 0; i < 50 && kill_uid(uid) > 0; i++)
			usleep(20000);
		stor_uid_release(uid);
	}
	if (vm_cgroup_remove_stale(NULL, name, &cause) == -1) {
		log_warnx("recover %s: %s", name, cause);
		free(cause);
		cause = NULL;
	}
	path = net_island_path(name);
	if (path_exists(path)) {
		memset(&ni, 0, sizeof(ni));
		ni.ni_name = xstrdup(name);
		ni.ni_path = xstrdup(path);
		if (net_island_delete(&ni, &cause) == -1) {
			log_warnx("recover %s: %s", name, cause);
			free(cause);
			cause = NULL;
		}
		net_island_free(&ni);
	}
	free(path);
	path = paths_data("sandboxes/%s", name);
	if (path_exists(path) && remove_tree(path, &cause) == -1) {
		log_warnx("recover %s: %s", name, cause);
		free(cause);
	}
	free(path);
}

static void
recover_adopted(struct sandbox *sb, const char *error, int status, void *arg)
{
	int *pending = arg;

	(*pending)--;
}

static void
recover_one(struct sbm *m, struct sandbox *sb, int *pending)
{
	enum sb_state st = sb_state(sb);
	const char *snap;
	char *why, *dir;
	uid_t uid;

	/* A pool member: adopted only if verified (sbm_pool.c), else destroyed. */
	if (st == SB_POOLED) {
		int have = find_uid(sb_id(sb), &uid);

		sbm_pool_recover(sb, have, uid, recover_adopted, pending, pending);
		return;
	}
	/* QEMU has no parent-death signal: after a SIGKILL its guest runs on. */
	if ((st == SB_RUNNING || st == SB_PAUSED) &&
	    find_uid(sb_id(sb), &uid)) {
		(*pending)++;
		sbm_recover_adopt(sb, uid, recover_adopted, pending);
		return;
	}

	if (st == SB_SUSPENDED) {
		snap = sbm_recover_snapshot(sb);
		dir = paths_data("snapshots/%s", snap ? snap : "-");
		if (snap == NULL || !path_exists(dir))
			sbm_recover_mark(sb, SB_FAILED, "its suspend snapshot is missing");
		free(dir);
		sbm_cleanup_host(sb_id(sb));
		return;
	}
	if (st == SB_FAILED) {
		sbm_cleanup_host(sb_id(sb));
		return;
	}
	sbm_cleanup_host(sb_id(sb));
	if (st == SB_DELETING) {
		sbm_recover_delete(sb);
		return;
	}
	if (st == SB_SUSPENDING || st == SB_RESUMING) {
		snap = sbm_recover_snapshot(sb);
		dir = paths_data("snapshots/%s", snap ? snap : "-");
		if (snap != NULL && path_exists(dir)) {
			/* The snapshot is complete (committed by rename): the sandbox is suspended. */
			sbm_recover_mark(sb, SB_SUSPENDED, NULL);
			free(dir);
			return;
		}
		free(dir);
		sbm_recover_drop_snapshot(sb);
	}
	xasprintf(&why, "airlockd restarted while the sandbox was %s; its VM was stopped%s",
	    sb_state_name(st),
	    st == SB_RUNNING || st == SB_PAUSED ?
	    " (no jail uid claim: it had no VM to adopt)" : "");
	sbm_recover_mark(sb, SB_FAILED, why);
	free(why);
}

/* Only names airlockd itself generates: never touch what tests or tools made. */
static int
is_sandbox_id(const char *name)
{
	size_t i;

	for (i = 0; name[i] != '\0'; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9')))
			return 0;
	return i == SBM_ID_LEN;
}

/*
 * The sandbox id of a suspend snapshot name "<id>-<unix ms>" (what
 * sb_op_suspend makes), or 0 for any other name, which is never ours.
 */
static int
snapshot_owner(const char *name, char id[SBM_ID_LEN + 1])
{
	const char *p;

	if (strlen(name) <= SBM_ID_LEN + 1)
		return 0;
	p = name + SBM_ID_LEN;
	if (*p != '-' || strspn(p + 1, "0123456789") != strlen(p + 1))
		return 0;
	memcpy(id, name, SBM_ID_LEN);
	id[SBM_ID_LEN] = '\0';
	return is_sandbox_id(id);
}

/*
 * Snapshots no record names: half-written ones (.tmp-*, from a daemon
 * killed mid-suspend; no suspend runs during recovery) and complete ones
 * whose sandbox is gone or has moved on to another snapshot. Each holds a
 * RAM file as large as the guest's memory.
 */
static void
recover_orphan_snapshots(struct sbm *m)
{
	char *dir = paths_data("snapshots"), *path, *cause = NULL, id[SBM_ID_LEN + 1];
	const char *name, *snap;
	struct sandbox *sb;
	struct dirent *de;
	int tmp;
	DIR *d;

	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		tmp = strncmp(de->d_name, ".tmp-", 5) == 0;
		name = tmp ? de->d_name + 5 : de->d_name;
		if (!snapshot_owner(name, id))
			continue;
		sb = sbm_recover_known(m, id);
		snap = sb != NULL ? sbm_recover_snapshot(sb) : NULL;
		if (!tmp && snap != NULL && strcmp(snap, name) == 0)
			continue;
		xasprintf(&path, "%s/%s", dir, de->d_name);
		log_info("recover: removing %s snapshot %s", tmp ? "unfinished" : "orphan",
		    de->d_name);
		if (remove_tree(path, &cause) == -1) {
			log_warnx("recover: %s", cause);
			free(cause);
			cause = NULL;
		}
		free(path);
	}
	closedir(d);
	free(dir);
}

/*
 * Consoles kept for sandboxes (logs/<id>.console and its older generation
 * .console.1) whose record is gone.
 */
static void
recover_orphan_logs(struct sbm *m)
{
	char *dir = paths_data("logs"), *path, id[SBM_ID_LEN + 1];
	struct dirent *de;
	const char *suffix;
	DIR *d;

	if ((d = opendir(dir)) == NULL) {
		free(dir);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strlen(de->d_name) <= SBM_ID_LEN)
			continue;
		suffix = de->d_name + SBM_ID_LEN;
		if (strcmp(suffix, ".console") != 0 && strcmp(suffix, ".console.1") != 0)
			continue;
		memcpy(id, de->d_name, SBM_ID_LEN);
		id[SBM_ID_LEN] = '\0';
		if (!is_sandbox_id(id) || sbm_recover_known(m, id))
			continue;
		xasprintf(&path, "%s/%s.console", dir, id);
		console_file_remove(path);
		free(path);
	}
	closedir(d);
	free(dir);
}

/* Sandbox dirs and islands that no record owns. */
static void
recover_orphans(struct sbm *m)
{
	char *dir = paths_data("sandboxes");
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (!is_sandbox_id(de->d_name) || sbm_recover_known(m, de->d_name))
				continue;
			log_info("recover: removing orphan sandbox dir %s", de->d_name);
			sbm_cleanup_host(de->d_name);
		}
		closedir(d);
	}
	free(dir);
	if ((d = opendir(NET_NETNS_DIR)) != NULL) {
		size_t plen = strlen(NET_NETNS_PREFIX);
		while ((de = readdir(d)) != NULL) {
			uid_t uid;

			if (strncmp(de->d_name, NET_NETNS_PREFIX, plen) != 0 ||
			    !is_sandbox_id(de->d_name + plen) ||
			    sbm_recover_known(m, de->d_name + plen))
				continue;
			/*
			 * /run/netns is host-wide: an island with neither a record nor a
			 * uid claim in this data dir belongs to another airlockd (a second
			 * instance with its own data dir), never to us: ours always have
			 * a record first and lose the island before the record.
			 */
			if (!find_uid(de->d_name + plen, &uid)) {
				log_info("recover: leaving island %s (not this data dir's)", de->d_name);
				continue;
			}
			log_info("recover: removing orphan island %s", de->d_name);
			sbm_cleanup_host(de->d_name + plen);
		}
		closedir(d);
	}
	recover_orphan_snapshots(m);
	sbm_snap_recover(m);
	recover_orphan_logs(m);
}

int
sbm_recover(struct sbm *m, char **cause)
{
	struct store_filter f;
	struct store_sandbox *recs;
	struct sandbox **adopted = NULL;
	char after[STORE_ID_MAX] = "";
	size_t n, i, nadopted = 0;
	int pending = 0;

	for (;;) {
		memset(&f, 0, sizeof(f));
		f.after = after;
		f.limit = STORE_LIST_LIMIT_MAX;
		f.worker = sbm_worker_name(m);	/* other workers' rows are theirs to recover */
		if (store_sandbox_list(sbm_store(m), &f, &recs, &n, cause) == -1)
			return -1;
		for (i = 0; i < n; i++) {
			snprintf(after, sizeof(after), "%s", recs[i].id);
			adopted = xreallocarray(adopted, nadopted + 1, sizeof(*adopted));
			adopted[nadopted++] = sbm_adopt_record(m, &recs[i]);
		}
		free(recs);
		if (n < STORE_LIST_LIMIT_MAX)
			break;
	}
	for (i = 0; i < nadopted; i++)
		recover_one(m, adopted[i], &pending);
	free(adopted);
	recover_orphans(m);
	/* Claims of sandboxes whose dir is gone; adopted ones keep theirs. */
	if ((n = (size_t)stor_uid_reconcile()) > 0)
		log_info("recover: released %zu stale jail uid claim(s)", n);
	sbm_recover_wait(m, &pending);
	log_info("recovered %zu sandbox(es) from the store (%zu running or paused)", nadopted,
	    (size_t)(sbm_count(m, SB_RUNNING) + sbm_count(m, SB_PAUSED)));
	return 0;
}
