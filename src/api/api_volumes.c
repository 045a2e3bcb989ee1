/*
 * /v1/volumes: create, list, get, delete (docs/volumes.md). A volume is an
 * ext4 image in the data dir, $DATA/volumes/<project>/<name>.ext4, sparse
 * and made by mkfs.ext4 in a child process (the event loop waits on its
 * pidfd, never on the child). The name is the caller's, the path never:
 * nothing a client sends names a host file.
 *
 * Create order: the file under a temporary name (O_EXCL: two creates of
 * one name cannot both format it), mkfs, the store record (the name's
 * real owner: 409 if it exists), then the rename into place. A crash
 * leaves at most a .tmp file, which the next create of that name replaces.
 */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "api/api.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subproc.h"
#include "common/util.h"
#include "config/config.h"
#include "db/store.h"
#include "images/stor_sandbox.h"
#include "sandbox/sbm.h"
#include "sandbox/sbm_volume.h"

struct vol_mkfs {
	struct api_call		*call;
	struct event		*ev;
	pid_t			 pid;
	int			 pidfd;
	struct store_volume	 v;
	char			*tmp, *file;
};

static json_t *
vol_json(const struct store_volume *v)
{
	char *file = sbm_volume_file(v->project, v->name);
	struct stat st;
	json_t *j = json_pack("{s:s, s:s, s:I, s:o, s:o, s:i}", "name", v->name, "project",
	    v->project, "size_mb", (json_int_t)v->size_mb, "created_at",
	    json_time_ms(v->created_at), "last_used_at", v->last_used_at > 0 ?
	    json_time_ms(v->last_used_at) : json_null(), "attached", v->attached);

	if (stat(file, &st) == 0)
		json_object_set_new(j, "allocated_bytes", json_integer((json_int_t)st.st_blocks * 512));
	if (v->worker[0] != '\0')
		json_object_set_new(j, "worker", json_string(v->worker));
	free(file);
	return j;
}

static void
vol_mkfs_free(struct vol_mkfs *m)
{
	if (m->ev != NULL)
		event_free(m->ev);
	if (m->pidfd != -1)
		close(m->pidfd);
	if (m->tmp != NULL)
		unlink(m->tmp);
	free(m->tmp);
	free(m->file);
	free(m);
}

static void
vol_mkfs_done(evutil_socket_t fd, short what, void *arg)
{
	struct vol_mkfs *m = arg;
	struct api_call *c = m->call;
	char *cause = NULL;
	int status = 0, rc;

	(void)fd;
	(void)what;
	if (waitpid(m->pid, &status, WNOHANG) != m->pid)
		return;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		api_error(c, 500, "internal", "volume %s: mkfs.ext4 failed (status %d)", m->v.name,
		    status);
		vol_mkfs_free(m);
		return;
	}
	rc = store_volume_insert(c->api->store, &m->v, &cause);
	if (rc == 1 && rename(m->tmp, m->file) == -1) {
		cause_set(&cause, "rename %s: %s", m->file, strerror(errno));
		store_volume_delete(c->api->store, m->v.project, m->v.name, NULL);
		rc = -1;
	}
	if (rc == 0)
		api_error(c, 409, "conflict", "volume \"%s\" exists", m->v.name);
	else if (rc == -1)
		api_error(c, 500, "internal", "%s", cause);
	else {
		free(m->tmp);
		m->tmp = NULL;
		struct store_volume got;
		if (store_volume_get(c->api->store, m->v.project, m->v.name, &got, NULL) == 1)
			m->v = got;
		api_json(c, 201, vol_json(&m->v));
	}
	free(cause);
	vol_mkfs_free(m);
}

/* The child: format the image. Owner 1000 (the sandbox's user) so it can write at once. */
static void __attribute__((noreturn))
vol_mkfs_child(const char *file, const char *label)
{
	const char *argv[] = { "mkfs.ext4", "-q", "-F", "-L", label, "-m", "0", "-E",
	    "lazy_itable_init=1,lazy_journal_init=1,root_owner=1000:1000", file, NULL };

	_exit(subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, NULL) == 0 ? 0 : 1);
}

void
api_volumes_create(struct api_call *c)
{
	static const char *const fields[] = { "name", "size_mb", NULL };
	struct store_volume v, old;
	struct vol_mkfs *m;
	const char *name;
	char *dir, *cause = NULL;
	long long size;
	int fd;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "name", 1, 63, &name) == -1 ||
	    api_get_int(c, c->body, "size_mb", SBM_VOLUME_SIZE_MB_MIN, c->api->cfg->max_disk_mb,
	    1024, &size) == -1)
		return;
	if (!sbm_volume_valid_name(name)) {
		api_fail(c, 400, "bad_request", "name", "name: must match [a-z0-9][a-z0-9._-]{0,62}");
		return;
	}
	memset(&v, 0, sizeof(v));
	snprintf(v.project, sizeof(v.project), "%s", c->key.project);
	snprintf(v.name, sizeof(v.name), "%s", name);
	v.size_mb = size;
	snprintf(v.worker, sizeof(v.worker), "%s", sbm_worker_name(c->api->sbm));
	if (store_volume_get(c->api->store, v.project, v.name, &old, NULL) == 1) {
		api_error(c, 409, "conflict", "volume \"%s\" exists", name);
		return;
	}
	if (stor_floor_check((uint64_t)c->api->cfg->disk_free_floor_mb << 20, "volume create",
	    &cause) == -1) {
		api_error(c, 507, "insufficient_storage", "%s", cause);
		free(cause);
		return;
	}
	dir = paths_data("volumes/%s", v.project);
	if (mkdir_p(dir, 0700, &cause) == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		free(dir);
		return;
	}
	free(dir);
	m = xcalloc(1, sizeof(*m));
	m->call = c;
	m->v = v;
	m->pidfd = -1;
	m->file = sbm_volume_file(v.project, v.name);
	xasprintf(&m->tmp, "%s.tmp", m->file);
	unlink(m->tmp);	/* a crashed create's leftover */
	if ((fd = open(m->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1 ||
	    ftruncate(fd, (off_t)size << 20) == -1) {
		api_error(c, errno == EEXIST ? 409 : 500, errno == EEXIST ? "conflict" : "internal",
		    "volume %s: %s", name, strerror(errno));
		if (fd != -1)
			close(fd);
		else {
			free(m->tmp);
			m->tmp = NULL;
		}
		vol_mkfs_free(m);
		return;
	}
	close(fd);
	if ((m->pid = fork()) == -1) {
		api_error(c, 500, "internal", "fork: %s", strerror(errno));
		vol_mkfs_free(m);
		return;
	}
	if (m->pid == 0)
		vol_mkfs_child(m->tmp, "airlock-vol");
	m->pidfd = (int)syscall(SYS_pidfd_open, m->pid, 0);
	if (m->pidfd == -1) {
		/* No pidfd (old kernel): wait here; mkfs of a sparse image is quick. */
		vol_mkfs_done(-1, 0, m);
		return;
	}
	m->ev = event_new(c->api->base, m->pidfd, EV_READ | EV_PERSIST, vol_mkfs_done, m);
	event_add(m->ev, NULL);
}

void
api_volumes_list(struct api_call *c)
{
	struct store_volume *all = NULL;
	char *cause = NULL;
	json_t *arr;
	size_t n = 0, i;

	if (store_volume_list(c->api->store, c->key.project, &all, &n, &cause) == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		return;
	}
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(arr, vol_json(&all[i]));
	free(all);
	api_json(c, 200, json_pack("{s:o}", "volumes", arr));
}

static int
vol_name_param(struct api_call *c)
{
	if (!sbm_volume_valid_name(c->params[0])) {
		api_fail(c, 400, "bad_request", "name", "name: must match [a-z0-9][a-z0-9._-]{0,62}");
		return -1;
	}
	return 0;
}

void
api_volumes_get(struct api_call *c)
{
	struct store_volume v;
	char *cause = NULL;
	int rc;

	if (vol_name_param(c) == -1)
		return;
	rc = store_volume_get(c->api->store, c->key.project, c->params[0], &v, &cause);
	if (rc == 1)
		api_json(c, 200, vol_json(&v));
	else if (rc == 0)
		api_error(c, 404, "not_found", "volume \"%s\" not found", c->params[0]);
	else
		api_error(c, 500, "internal", "%s", cause);
	free(cause);
}

void
api_volumes_delete(struct api_call *c)
{
	char *cause = NULL, *file;
	int rc, status;

	if (vol_name_param(c) == -1)
		return;
	if (sbm_volume_elsewhere(c->api->store, sbm_worker_name(c->api->sbm), c->key.project,
	    c->params[0], &status, &cause)) {
		api_error(c, status, "conflict", "%s", cause);
		free(cause);
		return;
	}
	rc = store_volume_delete(c->api->store, c->key.project, c->params[0], &cause);
	if (rc == 1) {
		file = sbm_volume_file(c->key.project, c->params[0]);
		if (unlink(file) == -1 && errno != ENOENT)
			log_warnx("volume %s: unlink %s: %s", c->params[0], file, strerror(errno));
		free(file);
		api_no_content(c);
	} else if (rc == 0)
		api_error(c, 404, "not_found", "volume \"%s\" not found", c->params[0]);
	else if (rc == 2)
		api_error(c, 409, "conflict", "volume \"%s\" is attached to a sandbox (delete the "
		    "sandbox first; its data stays until the volume is deleted)", c->params[0]);
	else
		api_error(c, 500, "internal", "%s", cause);
	free(cause);
}
