/*
 * filesystem.Filesystem (envd internal/services/filesystem): Stat,
 * MakeDir, Move, ListDir, Remove, and directory watches (WatchDir stream,
 * CreateWatcher/GetWatcherEvents/RemoveWatcher) on inotify.
 * Paths follow envd's rules (path_resolve); answers carry absolute paths.
 * The unary calls run in worker threads with a deadline (agent_work.c):
 * a big remove or listing, or a filesystem that hangs, never stalls the
 * loop. fs_entry and fs_idname are called from those threads: they touch
 * only their arguments and ag_passwd, which is fixed at startup. Watches
 * stay on the loop (inotify calls, bounded by FS_MAX_WATCH_DIRS).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "guest/agent/agent.h"
#include "common/util.h"
#include "http/http_server.h"

#define FS_MAX_DEPTH		64
#define FS_MAX_ENTRIES		100000	/* ListDir answer size bound */
#define FS_MAX_WATCHERS		128
#define FS_MAX_WATCH_DIRS	8192	/* inotify watches per watcher */
#define FS_MAX_EVENTS		10000	/* queued per polled watcher */

/* Name of a uid/gid from passwd or group (by hand, as for users). */
static void
fs_idname(const char *file, unsigned id, char *out, size_t outlen)
{
	char path[PATH_MAX], line[1024], *name, *p;
	const char *slash = strrchr(ag.ag_passwd, '/');
	FILE *fp;

	snprintf(out, outlen, "%u", id);
	snprintf(path, sizeof(path), "%.*s/%s", slash != NULL ? (int)(slash - ag.ag_passwd) : 0,
	    ag.ag_passwd, file);
	if ((fp = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp) != NULL) {
		name = line;
		if ((p = strchr(line, ':')) == NULL)
			continue;
		*p++ = '\0';
		if ((p = strchr(p, ':')) == NULL)
			continue;
		if (strtoul(p + 1, NULL, 10) == id && strchr(p + 1, ':') != NULL) {
			if (strlen(name) < outlen)
				memcpy(out, name, strlen(name) + 1);
			break;
		}
	}
	fclose(fp);
}

static void
fs_perms(mode_t m, char out[11])
{
	out[0] = S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'L' : S_ISFIFO(m) ? 'p' : S_ISSOCK(m) ? 'S' :
	    S_ISCHR(m) ? 'c' : S_ISBLK(m) ? 'D' : '-';
	out[1] = m & S_IRUSR ? 'r' : '-';
	out[2] = m & S_IWUSR ? 'w' : '-';
	out[3] = m & S_IXUSR ? 'x' : '-';
	out[4] = m & S_IRGRP ? 'r' : '-';
	out[5] = m & S_IWGRP ? 'w' : '-';
	out[6] = m & S_IXGRP ? 'x' : '-';
	out[7] = m & S_IROTH ? 'r' : '-';
	out[8] = m & S_IWOTH ? 'w' : '-';
	out[9] = m & S_IXOTH ? 'x' : '-';
	out[10] = '\0';
}

/* EntryInfo of path; NULL when it cannot be stat'ed (errno set). */
static json_t *
fs_entry(const char *path)
{
	char perms[11], owner[64], group[64], mtime[96], size[32], target[PATH_MAX];
	const char *type = "FILE_TYPE_UNSPECIFIED", *name;
	struct stat lst, st;
	struct tm tm;
	ssize_t tl = -1;
	json_t *j, *meta;

	if (lstat(path, &lst) == -1)
		return NULL;
	st = lst;
	/*
	 * A symlink is FILE_TYPE_SYMLINK with its target, as envd 0.6 says it
	 * (lstat's size and mode); SDKs from 2.36 call it 'symlink', older
	 * ones drop such entries from list as they do against E2B.
	 */
	if (S_ISLNK(lst.st_mode)) {
		tl = readlink(path, target, sizeof(target) - 1);
		type = "FILE_TYPE_SYMLINK";
	} else if (S_ISREG(st.st_mode))
		type = "FILE_TYPE_FILE";
	else if (S_ISDIR(st.st_mode))
		type = "FILE_TYPE_DIRECTORY";
	fs_perms(lst.st_mode, perms);
	fs_idname("passwd", lst.st_uid, owner, sizeof(owner));
	fs_idname("group", lst.st_gid, group, sizeof(group));
	gmtime_r(&lst.st_mtim.tv_sec, &tm);
	snprintf(mtime, sizeof(mtime), "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, lst.st_mtim.tv_nsec);
	snprintf(size, sizeof(size), "%lld", (long long)st.st_size);
	name = strrchr(path, '/');
	name = name != NULL && name[1] != '\0' ? name + 1 : path;
	j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "name", name, "type", type,
	    "path", path, "size", size, "mode", (json_int_t)(lst.st_mode & 07777),
	    "permissions", perms, "owner", owner, "group", group, "modifiedTime", mtime);
	if (tl >= 0) {
		target[tl] = '\0';
		json_object_set_new(j, "symlinkTarget", json_string(target));
	}
	if ((meta = meta_read(path)) != NULL)
		json_object_set_new(j, "metadata", meta);
	return j;
}

/* ---- unary calls, each run by a worker thread (agent_work.c) ---- */

enum fs_op { FS_STAT, FS_MAKEDIR, FS_MOVE, FS_LISTDIR, FS_REMOVE };

/*
 * One unary call. The loop fills the request half and owns fj_req; the
 * worker thread reads the request and writes only the result half.
 */
struct fs_job {
	struct http_req	*fj_req;		/* NULL once the client left */
	enum fs_op		 fj_op;
	struct agent_user	 fj_user;
	char			*fj_path;
	char			*fj_dst;	/* Move */
	int			 fj_depth;	/* ListDir */
	int			 fj_recursive;	/* Remove; airlock's "recursive": false is one rmdir/unlink */
	/* Result: fj_reply, or fj_err (errno, with fj_what), or fj_code + fj_what. */
	json_t			*fj_reply;
	int			 fj_err;
	const char		*fj_code;
	char			 fj_what[PATH_MAX * 2 + 64];
};

static void fs_job_abort(struct http_req *req, void *arg);

static void
fs_job_fail(struct fs_job *j, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Record a failed syscall (err) or, with err 0, a refusal with fj_code set. */
static void
fs_job_fail(struct fs_job *j, int err, const char *fmt, ...)
{
	va_list ap;

	j->fj_err = err;
	va_start(ap, fmt);
	vsnprintf(j->fj_what, sizeof(j->fj_what), fmt, ap);
	va_end(ap);
}

static void
fs_do_stat(struct fs_job *j)
{
	json_t *e;

	if ((e = fs_entry(j->fj_path)) == NULL)
		fs_job_fail(j, errno, "stat '%s'", j->fj_path);
	else
		j->fj_reply = json_pack("{s:o}", "entry", e);
}

static void
fs_do_makedir(struct fs_job *j)
{
	struct stat st;
	json_t *e;

	if (stat(j->fj_path, &st) == 0) {
		/* envd: an existing directory is already_exists (the SDK returns false). */
		j->fj_code = S_ISDIR(st.st_mode) ? "already_exists" : "invalid_argument";
		fs_job_fail(j, 0, S_ISDIR(st.st_mode) ? "directory '%s' already exists" :
		    "'%s' exists and is not a directory", j->fj_path);
		return;
	}
	if (mkdir_parents(j->fj_path, &j->fj_user) == -1) {
		fs_job_fail(j, errno, "mkdir parents of '%s'", j->fj_path);
		return;
	}
	if (mkdir(j->fj_path, 0755) == -1 && errno != EEXIST) {
		fs_job_fail(j, errno, "mkdir '%s'", j->fj_path);
		return;
	}
	if (lchown(j->fj_path, j->fj_user.uid, j->fj_user.gid) == -1 && geteuid() == 0)
		alog("mkdir: chown %s: %s", j->fj_path, strerror(errno));
	if ((e = fs_entry(j->fj_path)) == NULL)
		fs_job_fail(j, errno, "stat '%s'", j->fj_path);
	else
		j->fj_reply = json_pack("{s:o}", "entry", e);
}

static void
fs_do_move(struct fs_job *j)
{
	json_t *e;

	if (mkdir_parents(j->fj_dst, &j->fj_user) == -1) {
		fs_job_fail(j, errno, "move '%s' to '%s': parents", j->fj_path, j->fj_dst);
		return;
	}
	/* A plain rename: across filesystems it is EXDEV, as with envd's os.Rename. */
	if (rename(j->fj_path, j->fj_dst) == -1) {
		fs_job_fail(j, errno, "move '%s' to '%s'", j->fj_path, j->fj_dst);
		return;
	}
	if ((e = fs_entry(j->fj_dst)) == NULL)
		fs_job_fail(j, errno, "stat '%s'", j->fj_dst);
	else
		j->fj_reply = json_pack("{s:o}", "entry", e);
}

static int
fs_list(const char *dir, int depth, json_t *out)
{
	struct dirent *de;
	char *child;
	struct stat st;
	json_t *e;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL && json_array_size(out) < FS_MAX_ENTRIES) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&child, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/",
		    de->d_name) == -1)
			break;
		if ((e = fs_entry(child)) != NULL)
			json_array_append_new(out, e);
		/* Walk real directories only: a symlink loop must not recurse. */
		if (depth > 1 && lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
			fs_list(child, depth - 1, out);
		free(child);
	}
	closedir(d);
	return 0;
}

static void
fs_do_listdir(struct fs_job *j)
{
	struct stat st;
	json_t *arr;

	if (stat(j->fj_path, &st) == -1) {
		fs_job_fail(j, errno, "list '%s'", j->fj_path);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		j->fj_code = "invalid_argument";
		fs_job_fail(j, 0, "'%s' is not a directory", j->fj_path);
		return;
	}
	arr = json_array();
	if (fs_list(j->fj_path, j->fj_depth, arr) == -1) {
		json_decref(arr);
		fs_job_fail(j, errno, "list '%s'", j->fj_path);
		return;
	}
	j->fj_reply = json_pack("{s:o}", "entries", arr);
}

/*
 * rm -rf without following symlinks; a missing path is no error. The
 * first errno wins, so a busy mount point reads as EBUSY, not as the
 * ENOTEMPTY of its parents.
 */
static int
fs_remove_tree(int dirfd, const char *name, int *first)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		goto fail;
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) == -1)
			goto fail;
		return 0;
	}
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		goto fail;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		goto fail;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fs_remove_tree(fd, de->d_name, first) == -1)
			rc = -1;
	}
	closedir(d);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) == -1)
		goto fail;
	return rc;
fail:
	/* Gone already (or never there) is removed: envd's os.RemoveAll answers success. */
	if (errno == ENOENT)
		return 0;
	if (*first == 0)
		*first = errno;
	return -1;
}

static void
fs_do_remove(struct fs_job *j)
{
	int first = 0;

	struct stat st;

	if (strcmp(j->fj_path, "/") == 0) {
		j->fj_code = "invalid_argument";
		fs_job_fail(j, 0, "refusing to remove /");
	} else if (!j->fj_recursive) {
		if (lstat(j->fj_path, &st) == -1 ||
		    (S_ISDIR(st.st_mode) ? rmdir(j->fj_path) : unlink(j->fj_path)) == -1)
			fs_job_fail(j, errno, "remove '%s'", j->fj_path);
		else
			j->fj_reply = json_object();
	} else if (fs_remove_tree(AT_FDCWD, j->fj_path, &first) == -1)
		fs_job_fail(j, first != 0 ? first : EIO, "remove '%s'", j->fj_path);
	else
		j->fj_reply = json_object();
}

/* In the worker thread. */
static void
fs_job_run(void *arg)
{
	struct fs_job *j = arg;

	switch (j->fj_op) {
	case FS_STAT:		fs_do_stat(j);		break;
	case FS_MAKEDIR:	fs_do_makedir(j);	break;
	case FS_MOVE:		fs_do_move(j);		break;
	case FS_LISTDIR:	fs_do_listdir(j);	break;
	case FS_REMOVE:		fs_do_remove(j);	break;
	}
}

/*
 * On the loop: answer the client (if it is still there). The request is
 * forgotten first: the answer may free it (nothing else holds it).
 */
static void
fs_job_done(void *arg, int late)
{
	struct fs_job *j = arg;
	struct http_req *req = j->fj_req;

	if (req == NULL)
		return;
	http_req_on_close(req, NULL, NULL);
	j->fj_req = NULL;
	if (late)
		connect_error(req, "deadline_exceeded", "'%s': no answer from the filesystem after "
		    "%d ms (the operation may still complete)", j->fj_path, AGENT_FS_DEADLINE_MS);
	else if (j->fj_reply != NULL) {
		connect_reply(req, j->fj_reply);
		j->fj_reply = NULL;
	} else if (j->fj_err != 0)
		connect_error_errno(req, j->fj_err, "%s", j->fj_what);
	else
		connect_error(req, j->fj_code != NULL ? j->fj_code : "internal", "%s", j->fj_what);
}

static void
fs_job_free(void *arg)
{
	struct fs_job *j = arg;

	json_decref(j->fj_reply);
	free(j->fj_path);
	free(j->fj_dst);
	free(j);
}

/* The client left: the thread finishes; fs_job_free releases the job. */
static void
fs_job_abort(struct http_req *req, void *arg)
{
	struct fs_job *j = arg;

	j->fj_req = NULL;
}

/* Parse the request, resolve its paths for the acting user, and start the job. */
static void
fs_job_start(struct http_req *req, enum fs_op op)
{
	const char *why = NULL;
	struct fs_job *j;
	json_t *msg, *v;

	if ((msg = connect_request(req, 0)) == NULL)
		return;
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		json_decref(msg);
		connect_error(req, "resource_exhausted", "out of memory");
		return;
	}
	j->fj_op = op;
	if (api_user(req, NULL, &j->fj_user, &why) == -1) {
		connect_error(req, "unauthenticated", "%s", why);
		goto fail;
	}
	v = jget(msg, op == FS_MOVE ? "source" : "path", NULL);
	if (v != NULL && !json_is_string(v)) {
		connect_error(req, "invalid_argument", "%s must be a string",
		    op == FS_MOVE ? "source" : "path");
		goto fail;
	}
	if ((j->fj_path = path_resolve(v != NULL ? json_string_value(v) : "", &j->fj_user)) == NULL) {
		connect_error(req, "invalid_argument", "invalid path: ENAMETOOLONG (longer than %d bytes)",
		    PATH_MAX);
		goto fail;
	}
	if (op == FS_MOVE) {
		v = jget(msg, "destination", NULL);
		if (!json_is_string(v) ||
		    (j->fj_dst = path_resolve(json_string_value(v), &j->fj_user)) == NULL) {
			connect_error(req, "invalid_argument", "destination is required (a path of at "
			    "most %d bytes)", PATH_MAX);
			goto fail;
		}
	}
	/* envd's Remove is always recursive; airlock's API may ask for one rmdir. */
	j->fj_recursive = !json_is_false(jget(msg, "recursive", NULL));
	if (op == FS_LISTDIR) {
		int64_t depth = jint(jget(msg, "depth", NULL), 1);

		j->fj_depth = depth <= 0 ? 1 : depth > FS_MAX_DEPTH ? FS_MAX_DEPTH : (int)depth;
	}
	json_decref(msg);
	msg = NULL;
	j->fj_req = req;
	http_req_on_close(req, fs_job_abort, j);
	if (work_run(fs_job_run, fs_job_done, fs_job_free, j, AGENT_FS_DEADLINE_MS, &why) == -1) {
		http_req_on_close(req, NULL, NULL);
		j->fj_req = NULL;
		connect_error(req, "resource_exhausted", "%s", why);
		goto fail;
	}
	return;
fail:
	json_decref(msg);
	fs_job_free(j);
}

static void fs_stat_end(struct http_req *req, void *arg) { fs_job_start(req, FS_STAT); }
static void fs_makedir_end(struct http_req *req, void *arg) { fs_job_start(req, FS_MAKEDIR); }
static void fs_move_end(struct http_req *req, void *arg) { fs_job_start(req, FS_MOVE); }
static void fs_listdir_end(struct http_req *req, void *arg) { fs_job_start(req, FS_LISTDIR); }
static void fs_remove_end(struct http_req *req, void *arg) { fs_job_start(req, FS_REMOVE); }

/* ---- watches ---- */

struct watcher {
	TAILQ_ENTRY(watcher)	 w_entry;
	char			 w_id[40];
	char			*w_root;
	int			 w_recursive;
	int			 w_entry_info;	/* includeEntry: events carry the entry */
	int			 w_fd;		/* inotify */
	struct event		*w_ev;
	char			**w_dirs;	/* watch descriptor -> path */
	int			 w_ndirs;
	struct http_req	*w_req;		/* WatchDir stream, or NULL when polled */
	struct event		*w_keepalive;
	struct timeval		 w_interval;
	json_t			*w_events;	/* polled: queued FilesystemEvents */
};
TAILQ_HEAD(watcher_list, watcher);
static struct watcher_list watchers = TAILQ_HEAD_INITIALIZER(watchers);
static unsigned nwatchers, watcher_seq;

static void
watcher_free(struct watcher *w)
{
	int i;

	TAILQ_REMOVE(&watchers, w, w_entry);
	nwatchers--;
	if (w->w_ev != NULL)
		event_free(w->w_ev);
	if (w->w_keepalive != NULL)
		event_free(w->w_keepalive);
	if (w->w_fd != -1)
		close(w->w_fd);
	for (i = 0; i < w->w_ndirs; i++)
		free(w->w_dirs[i]);
	free(w->w_dirs);
	free(w->w_root);
	json_decref(w->w_events);
	free(w);
}

static void
watcher_add_dir(struct watcher *w, const char *dir, int depth)
{
	struct dirent *de;
	struct stat st;
	char *child;
	DIR *d;
	int wd;

	wd = inotify_add_watch(w->w_fd, dir, IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM |
	    IN_MOVED_TO | IN_ATTRIB | IN_CLOSE_WRITE | IN_ONLYDIR);
	if (wd < 0 || wd >= FS_MAX_WATCH_DIRS)
		return;
	if (wd >= w->w_ndirs) {
		char **nd = realloc(w->w_dirs, (size_t)(wd + 1) * sizeof(*nd));

		if (nd == NULL)
			return;
		memset(nd + w->w_ndirs, 0, (size_t)(wd + 1 - w->w_ndirs) * sizeof(*nd));
		w->w_dirs = nd;
		w->w_ndirs = wd + 1;
	}
	free(w->w_dirs[wd]);
	w->w_dirs[wd] = strdup(dir);
	if (!w->w_recursive || depth >= FS_MAX_DEPTH || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&child, "%s/%s", dir, de->d_name) == -1)
			break;
		if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
			watcher_add_dir(w, child, depth + 1);
		free(child);
	}
	closedir(d);
}

/*
 * includeEntry (envd 0.6.3): the entry as Stat would give it, when the
 * path can still be stat'ed (not after a remove or a rename away).
 */
static void
watcher_emit(struct watcher *w, const char *name, const char *full, const char *type)
{
	json_t *ev = json_pack("{s:s, s:s}", "name", name, "type", type), *e;

	if (w->w_entry_info && (e = fs_entry(full)) != NULL)
		json_object_set_new(ev, "entry", e);

	if (w->w_req != NULL) {
		connect_stream_msg(w->w_req, json_pack("{s:o}", "filesystem", ev));
		evtimer_add(w->w_keepalive, &w->w_interval);
	} else if (json_array_size(w->w_events) < FS_MAX_EVENTS)
		json_array_append_new(w->w_events, ev);
	else
		json_decref(ev);
}

static void
watcher_read(evutil_socket_t fd, short what, void *arg)
{
	struct watcher *w = arg;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ie;
	char *full, *rel;
	const char *type;
	ssize_t n;
	size_t rl = strlen(w->w_root);

	n = read(fd, buf, sizeof(buf));
	if (n <= 0)
		return;
	for (char *p = buf; p < buf + n; p += sizeof(*ie) + ie->len) {
		ie = (const struct inotify_event *)p;
		if (ie->wd < 0 || ie->wd >= w->w_ndirs || w->w_dirs[ie->wd] == NULL || ie->len == 0)
			continue;
		/* An upload's temporary file (agent_files.c) is not the user's. */
		if (strstr(ie->name, AGENT_UPLOAD_TMP_MARK) != NULL)
			continue;
		if (asprintf(&full, "%s/%s", w->w_dirs[ie->wd], ie->name) == -1)
			continue;
		rel = strncmp(full, w->w_root, rl) == 0 ? full + rl : full;
		while (*rel == '/')
			rel++;
		/*
		 * A name moved in is a create, as envd's fsnotify reports it; an
		 * upload renamed over its target therefore reads as a create.
		 */
		if (ie->mask & (IN_CREATE | IN_MOVED_TO))
			type = "EVENT_TYPE_CREATE";
		else if (ie->mask & (IN_MODIFY | IN_CLOSE_WRITE))
			type = "EVENT_TYPE_WRITE";
		else if (ie->mask & IN_DELETE)
			type = "EVENT_TYPE_REMOVE";
		else if (ie->mask & IN_MOVED_FROM)
			type = "EVENT_TYPE_RENAME";
		else
			type = "EVENT_TYPE_CHMOD";
		if (!(ie->mask & IN_CLOSE_WRITE))
			watcher_emit(w, rel, full, type);
		if ((ie->mask & (IN_CREATE | IN_MOVED_TO)) && (ie->mask & IN_ISDIR) && w->w_recursive)
			watcher_add_dir(w, full, 1);
		free(full);
	}
}

static void
watcher_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct watcher *w = arg;

	connect_stream_msg(w->w_req, json_pack("{s:{}}", "keepalive"));
	evtimer_add(w->w_keepalive, &w->w_interval);
}

static struct watcher *
watcher_new(struct http_req *req, const char *root, int recursive, int entry_info)
{
	struct watcher *w;

	if (nwatchers >= FS_MAX_WATCHERS) {
		connect_error(req, "resource_exhausted", "too many watchers");
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	TAILQ_INSERT_TAIL(&watchers, w, w_entry);
	nwatchers++;
	snprintf(w->w_id, sizeof(w->w_id), "w%u-%llu", ++watcher_seq,
	    (unsigned long long)(monotonic_ns() % 1000000007ull));
	w->w_root = strdup(root);
	w->w_recursive = recursive;
	w->w_entry_info = entry_info;
	w->w_events = json_array();
	if ((w->w_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
		watcher_free(w);
		return NULL;
	}
	watcher_add_dir(w, root, 0);
	w->w_ev = event_new(ag.ag_base, w->w_fd, EV_READ | EV_PERSIST, watcher_read, w);
	event_add(w->w_ev, NULL);
	return w;
}

/* Shared by WatchDir and CreateWatcher: the watched path must be a directory. */
static struct watcher *
fs_watch_common(struct http_req *req, int streaming)
{
	struct agent_user u;
	const char *why = NULL;
	char *path;
	struct stat st;
	struct watcher *w = NULL;
	json_t *j;
	int rec, entry_info;

	if ((j = connect_request(req, streaming)) == NULL)
		return NULL;
	if (api_user(req, NULL, &u, &why) == -1) {
		json_decref(j);
		streaming ? connect_stream_end(req, "unauthenticated", why) :
		    connect_error(req, "unauthenticated", "%s", why);
		return NULL;
	}
	path = path_resolve(json_string_value(jget(j, "path", NULL)), &u);
	rec = json_is_true(jget(j, "recursive", NULL));
	entry_info = json_is_true(jget(j, "includeEntry", "include_entry"));
	/*
	 * allowNetworkMounts (envd 0.6.4) lets a watch cover NFS and the like;
	 * inotify watches any local mount, and a guest has no network mounts
	 * of airlock's making: accepted, nothing to change.
	 */
	json_decref(j);
	if (path == NULL || stat(path, &st) == -1 || !S_ISDIR(st.st_mode)) {
		if (streaming)
			connect_stream_end(req, path != NULL && stat(path, &st) == -1 ? "not_found" :
			    "invalid_argument", "path is not a directory");
		else
			connect_error(req, path != NULL && stat(path, &st) == -1 ? "not_found" :
			    "invalid_argument", "path is not a directory");
		free(path);
		return NULL;
	}
	if ((w = watcher_new(req, path, rec, entry_info)) == NULL && !http_req_replied(req)) {
		if (streaming)
			connect_stream_end(req, "internal", "cannot watch");
		else
			connect_error(req, "internal", "cannot watch");
	}
	free(path);
	return w;
}

/* The WatchDir client left: the watch goes with it. */
static void
fs_watchdir_abort(struct http_req *req, void *arg)
{
	watcher_free(arg);
}

static void
fs_watchdir_end(struct http_req *req, void *arg)
{
	const char *ka = http_req_header(req, "Keepalive-Ping-Interval");
	struct watcher *w;
	long secs = 90;

	if ((w = fs_watch_common(req, 1)) == NULL)
		return;
	if (ka != NULL && (secs = strtol(ka, NULL, 10)) <= 0)
		secs = 90;
	w->w_req = req;
	w->w_interval.tv_sec = secs > 3600 ? 3600 : secs;
	w->w_keepalive = evtimer_new(ag.ag_base, watcher_keepalive, w);
	evtimer_add(w->w_keepalive, &w->w_interval);
	http_req_on_close(req, fs_watchdir_abort, w);
	connect_stream_start(req);
	connect_stream_msg(req, json_pack("{s:{}}", "start"));
}

static void
fs_create_watcher_end(struct http_req *req, void *arg)
{
	struct watcher *w;

	if ((w = fs_watch_common(req, 0)) != NULL)
		connect_reply(req, json_pack("{s:s}", "watcherId", w->w_id));
}

static struct watcher *
fs_watcher_lookup(struct http_req *req)
{
	struct watcher *w;
	json_t *j, *id;

	if ((j = connect_request(req, 0)) == NULL)
		return NULL;
	id = jget(j, "watcherId", "watcher_id");
	TAILQ_FOREACH(w, &watchers, w_entry) {
		if (w->w_req == NULL && json_is_string(id) &&
		    strcmp(w->w_id, json_string_value(id)) == 0)
			break;
	}
	json_decref(j);
	if (w == NULL)
		connect_error(req, "not_found", "watcher not found");
	return w;
}

static void
fs_get_events_end(struct http_req *req, void *arg)
{
	struct watcher *w;
	json_t *ev;

	if ((w = fs_watcher_lookup(req)) == NULL)
		return;
	/* Pick up anything the kernel queued since the last poll. */
	watcher_read(w->w_fd, EV_READ, w);
	ev = w->w_events;
	w->w_events = json_array();
	connect_reply(req, json_pack("{s:o}", "events", ev));
}

static void
fs_remove_watcher_end(struct http_req *req, void *arg)
{
	struct watcher *w;

	if ((w = fs_watcher_lookup(req)) == NULL)
		return;
	watcher_free(w);
	connect_reply(req, json_object());
}

/* Unary calls, and WatchDir, a server stream. */
static const struct connect_method fs_methods[] = {
	{ "Stat", fs_stat_end },
	{ "MakeDir", fs_makedir_end },
	{ "Move", fs_move_end },
	{ "ListDir", fs_listdir_end },
	{ "Remove", fs_remove_end },
	{ "WatchDir", fs_watchdir_end },
	{ "CreateWatcher", fs_create_watcher_end },
	{ "GetWatcherEvents", fs_get_events_end },
	{ "RemoveWatcher", fs_remove_watcher_end },
	{ NULL, NULL },
};

void
fs_route(struct http_req *req, const char *method)
{
	connect_route(req, "filesystem.Filesystem", fs_methods, method);
}
