/*
 * filesystem.Filesystem (envd internal/services/filesystem): Stat,
 * MakeDir, Move, ListDir, Remove, and directory watches (WatchDir stream,
 * CreateWatcher/GetWatcherEvents/RemoveWatcher) on inotify.
 * Paths follow envd's rules (path_resolve); answers carry absolute paths.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "guest/agent/agent_http.h"

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
	json_t *j;

	if (lstat(path, &lst) == -1)
		return NULL;
	st = lst;
	if (S_ISLNK(lst.st_mode)) {
		tl = readlink(path, target, sizeof(target) - 1);
		/* The SDK knows FILE and DIRECTORY only: report the target's type. */
		if (stat(path, &st) == -1)
			st = lst;
	}
	if (S_ISREG(st.st_mode))
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
	return j;
}

/* Parse the request and resolve its "path" for the acting user. */
static json_t *
fs_request(struct http_conn *hc, struct agent_user *u, const char *key, char **path)
{
	json_t *j, *v;
	const char *why = NULL;

	if ((j = connect_request(hc, 0)) == NULL)
		return NULL;
	if (api_user(http_request(hc), NULL, u, &why) == -1) {
		json_decref(j);
		connect_error(hc, "unauthenticated", "%s", why);
		return NULL;
	}
	if (key != NULL) {
		v = jget(j, key, NULL);
		if (v != NULL && !json_is_string(v)) {
			json_decref(j);
			connect_error(hc, "invalid_argument", "%s must be a string", key);
			return NULL;
		}
		if ((*path = path_resolve(v != NULL ? json_string_value(v) : "", u)) == NULL) {
			json_decref(j);
			connect_error(hc, "invalid_argument", "invalid path");
			return NULL;
		}
	}
	return j;
}

static void
fs_errno(struct http_conn *hc, const char *what, const char *path, int err)
{
	if (err == ENOENT || err == ENOTDIR)
		connect_error(hc, "not_found", "%s '%s': no such file or directory", what, path);
	else if (err == EACCES || err == EPERM)
		connect_error(hc, "permission_denied", "%s '%s': %s", what, path, strerror(err));
	else if (err == EEXIST)
		connect_error(hc, "already_exists", "%s '%s': already exists", what, path);
	else if (err == ENOSPC)
		connect_error(hc, "resource_exhausted", "%s '%s': no space left", what, path);
	else
		connect_error(hc, "internal", "%s '%s': %s", what, path, strerror(err));
}

static void
fs_stat_end(struct http_conn *hc)
{
	struct agent_user u;
	char *path = NULL;
	json_t *j, *e;

	if ((j = fs_request(hc, &u, "path", &path)) == NULL)
		return;
	json_decref(j);
	if ((e = fs_entry(path)) == NULL)
		fs_errno(hc, "stat", path, errno);
	else
		connect_reply(hc, json_pack("{s:o}", "entry", e));
	free(path);
}

static void
fs_makedir_end(struct http_conn *hc)
{
	struct agent_user u;
	char *path = NULL;
	struct stat st;
	json_t *j, *e;

	if ((j = fs_request(hc, &u, "path", &path)) == NULL)
		return;
	json_decref(j);
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			connect_error(hc, "already_exists", "directory '%s' already exists", path);
		else
			connect_error(hc, "invalid_argument", "'%s' exists and is not a directory", path);
	} else if (mkdir_parents(path, &u) == -1 || (mkdir(path, 0755) == -1 && errno != EEXIST))
		fs_errno(hc, "mkdir", path, errno);
	else {
		if (lchown(path, u.uid, u.gid) == -1 && geteuid() == 0)
			alog("mkdir: chown %s: %s", path, strerror(errno));
		if ((e = fs_entry(path)) == NULL)
			fs_errno(hc, "stat", path, errno);
		else
			connect_reply(hc, json_pack("{s:o}", "entry", e));
	}
	free(path);
}

static void
fs_move_end(struct http_conn *hc)
{
	struct agent_user u;
	char *src = NULL, *dst = NULL;
	json_t *j, *e, *v;

	if ((j = fs_request(hc, &u, "source", &src)) == NULL)
		return;
	v = jget(j, "destination", NULL);
	dst = json_is_string(v) ? path_resolve(json_string_value(v), &u) : NULL;
	json_decref(j);
	if (dst == NULL) {
		connect_error(hc, "invalid_argument", "destination is required");
	} else if (mkdir_parents(dst, &u) == -1 || rename(src, dst) == -1)
		fs_errno(hc, "move", src, errno);
	else if ((e = fs_entry(dst)) == NULL)
		fs_errno(hc, "stat", dst, errno);
	else
		connect_reply(hc, json_pack("{s:o}", "entry", e));
	free(src);
	free(dst);
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
fs_listdir_end(struct http_conn *hc)
{
	struct agent_user u;
	char *path = NULL;
	struct stat st;
	json_t *j, *arr;
	int64_t depth;

	if ((j = fs_request(hc, &u, "path", &path)) == NULL)
		return;
	depth = jint(jget(j, "depth", NULL), 1);
	json_decref(j);
	if (depth <= 0)
		depth = 1;
	if (depth > FS_MAX_DEPTH)
		depth = FS_MAX_DEPTH;
	if (stat(path, &st) == -1)
		fs_errno(hc, "list", path, errno);
	else if (!S_ISDIR(st.st_mode))
		connect_error(hc, "invalid_argument", "'%s' is not a directory", path);
	else {
		arr = json_array();
		if (fs_list(path, (int)depth, arr) == -1) {
			json_decref(arr);
			fs_errno(hc, "list", path, errno);
		} else
			connect_reply(hc, json_pack("{s:o}", "entries", arr));
	}
	free(path);
}

/* rm -rf without following symlinks. */
static int
fs_remove_tree(int dirfd, const char *name)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0);
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fs_remove_tree(fd, de->d_name) == -1)
			rc = -1;
	}
	closedir(d);
	if (rc == 0)
		rc = unlinkat(dirfd, name, AT_REMOVEDIR);
	return rc;
}

static void
fs_remove_end(struct http_conn *hc)
{
	struct agent_user u;
	char *path = NULL;
	json_t *j;

	if ((j = fs_request(hc, &u, "path", &path)) == NULL)
		return;
	json_decref(j);
	if (strcmp(path, "/") == 0)
		connect_error(hc, "invalid_argument", "refusing to remove /");
	else if (fs_remove_tree(AT_FDCWD, path) == -1)
		fs_errno(hc, "remove", path, errno);
	else
		connect_reply(hc, json_object());
	free(path);
}

/* ---- watches ---- */

struct watcher {
	TAILQ_ENTRY(watcher)	 w_entry;
	char			 w_id[40];
	char			*w_root;
	int			 w_recursive;
	int			 w_fd;		/* inotify */
	struct event		*w_ev;
	char			**w_dirs;	/* watch descriptor -> path */
	int			 w_ndirs;
	struct http_conn	*w_hc;		/* WatchDir stream, or NULL when polled */
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

static void
watcher_emit(struct watcher *w, const char *name, const char *type)
{
	json_t *ev = json_pack("{s:s, s:s}", "name", name, "type", type);

	if (w->w_hc != NULL) {
		connect_stream_msg(w->w_hc, json_pack("{s:o}", "filesystem", ev));
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
		if (asprintf(&full, "%s/%s", w->w_dirs[ie->wd], ie->name) == -1)
			continue;
		rel = strncmp(full, w->w_root, rl) == 0 ? full + rl : full;
		while (*rel == '/')
			rel++;
		if (ie->mask & IN_CREATE || ie->mask & IN_MOVED_TO)
			type = ie->mask & IN_CREATE ? "EVENT_TYPE_CREATE" : "EVENT_TYPE_RENAME";
		else if (ie->mask & (IN_MODIFY | IN_CLOSE_WRITE))
			type = "EVENT_TYPE_WRITE";
		else if (ie->mask & IN_DELETE)
			type = "EVENT_TYPE_REMOVE";
		else if (ie->mask & IN_MOVED_FROM)
			type = "EVENT_TYPE_RENAME";
		else
			type = "EVENT_TYPE_CHMOD";
		if (!(ie->mask & IN_CLOSE_WRITE))
			watcher_emit(w, rel, type);
		if ((ie->mask & (IN_CREATE | IN_MOVED_TO)) && (ie->mask & IN_ISDIR) && w->w_recursive)
			watcher_add_dir(w, full, 1);
		free(full);
	}
}

static void
watcher_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct watcher *w = arg;

	connect_stream_msg(w->w_hc, json_pack("{s:{}}", "keepalive"));
	evtimer_add(w->w_keepalive, &w->w_interval);
}

static struct watcher *
watcher_new(struct http_conn *hc, const char *root, int recursive)
{
	struct watcher *w;

	if (nwatchers >= FS_MAX_WATCHERS) {
		connect_error(hc, "resource_exhausted", "too many watchers");
		return NULL;
	}
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	TAILQ_INSERT_TAIL(&watchers, w, w_entry);
	nwatchers++;
	snprintf(w->w_id, sizeof(w->w_id), "w%u-%llu", ++watcher_seq,
	    (unsigned long long)(agent_now_ns() % 1000000007ull));
	w->w_root = strdup(root);
	w->w_recursive = recursive;
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
fs_watch_common(struct http_conn *hc, int streaming)
{
	struct agent_user u;
	const char *why = NULL;
	char *path;
	struct stat st;
	struct watcher *w = NULL;
	json_t *j;
	int rec;

	if ((j = connect_request(hc, streaming)) == NULL)
		return NULL;
	if (api_user(http_request(hc), NULL, &u, &why) == -1) {
		json_decref(j);
		streaming ? connect_stream_end(hc, "unauthenticated", why) :
		    connect_error(hc, "unauthenticated", "%s", why);
		return NULL;
	}
	path = path_resolve(json_string_value(jget(j, "path", NULL)), &u);
	rec = json_is_true(jget(j, "recursive", NULL));
	json_decref(j);
	if (path == NULL || stat(path, &st) == -1 || !S_ISDIR(st.st_mode)) {
		if (streaming)
			connect_stream_end(hc, path != NULL && stat(path, &st) == -1 ? "not_found" :
			    "invalid_argument", "path is not a directory");
		else
			connect_error(hc, path != NULL && stat(path, &st) == -1 ? "not_found" :
			    "invalid_argument", "path is not a directory");
		free(path);
		return NULL;
	}
	if ((w = watcher_new(hc, path, rec)) == NULL && !http_responded(hc)) {
		if (streaming)
			connect_stream_end(hc, "internal", "cannot watch");
		else
			connect_error(hc, "internal", "cannot watch");
	}
	free(path);
	return w;
}

static void
fs_watchdir_abort(struct http_conn *hc)
{
	struct watcher *w = http_ctx(hc);

	if (w != NULL)
		watcher_free(w);
}

static void
fs_watchdir_end(struct http_conn *hc);

static const struct http_handler fs_watch_stream = { .abort = fs_watchdir_abort };

static void
fs_watchdir_end(struct http_conn *hc)
{
	const char *ka = http_req_header(http_request(hc), "Keepalive-Ping-Interval");
	struct watcher *w;
	long secs = 90;

	if ((w = fs_watch_common(hc, 1)) == NULL)
		return;
	if (ka != NULL && (secs = strtol(ka, NULL, 10)) <= 0)
		secs = 90;
	w->w_hc = hc;
	w->w_interval.tv_sec = secs > 3600 ? 3600 : secs;
	w->w_keepalive = evtimer_new(ag.ag_base, watcher_keepalive, w);
	evtimer_add(w->w_keepalive, &w->w_interval);
	http_set_handler(hc, &fs_watch_stream, w);
	connect_stream_start(hc);
	connect_stream_msg(hc, json_pack("{s:{}}", "start"));
}

static void
fs_create_watcher_end(struct http_conn *hc)
{
	struct watcher *w;

	if ((w = fs_watch_common(hc, 0)) != NULL)
		connect_reply(hc, json_pack("{s:s}", "watcherId", w->w_id));
}

static struct watcher *
fs_watcher_lookup(struct http_conn *hc)
{
	struct watcher *w;
	json_t *j, *id;

	if ((j = connect_request(hc, 0)) == NULL)
		return NULL;
	id = jget(j, "watcherId", "watcher_id");
	TAILQ_FOREACH(w, &watchers, w_entry) {
		if (w->w_hc == NULL && json_is_string(id) &&
		    strcmp(w->w_id, json_string_value(id)) == 0)
			break;
	}
	json_decref(j);
	if (w == NULL)
		connect_error(hc, "not_found", "watcher not found");
	return w;
}

static void
fs_get_events_end(struct http_conn *hc)
{
	struct watcher *w;
	json_t *ev;

	if ((w = fs_watcher_lookup(hc)) == NULL)
		return;
	/* Pick up anything the kernel queued since the last poll. */
	watcher_read(w->w_fd, EV_READ, w);
	ev = w->w_events;
	w->w_events = json_array();
	connect_reply(hc, json_pack("{s:o}", "events", ev));
}

static void
fs_remove_watcher_end(struct http_conn *hc)
{
	struct watcher *w;

	if ((w = fs_watcher_lookup(hc)) == NULL)
		return;
	watcher_free(w);
	connect_reply(hc, json_object());
}

static const struct {
	const char		*name;
	struct http_handler	 h;
} fs_methods[] = {
	{ "Stat", { .end = fs_stat_end } },
	{ "MakeDir", { .end = fs_makedir_end } },
	{ "Move", { .end = fs_move_end } },
	{ "ListDir", { .end = fs_listdir_end } },
	{ "Remove", { .end = fs_remove_end } },
	{ "WatchDir", { .end = fs_watchdir_end, .abort = fs_watchdir_abort } },
	{ "CreateWatcher", { .end = fs_create_watcher_end } },
	{ "GetWatcherEvents", { .end = fs_get_events_end } },
	{ "RemoveWatcher", { .end = fs_remove_watcher_end } },
};

void
fs_route(struct http_conn *hc, const char *method)
{
	size_t i;

	for (i = 0; i < sizeof(fs_methods) / sizeof(fs_methods[0]); i++) {
		if (strcmp(method, fs_methods[i].name) == 0) {
			http_set_handler(hc, &fs_methods[i].h, NULL);
			return;
		}
	}
	connect_error(hc, "unimplemented", "no method filesystem.Filesystem/%s", method);
}
