/*
 * GET/POST /files (envd's upload.go/download.go): download a file, or
 * upload one or more (multipart with the full path as filename, or a raw
 * octet-stream body). Answers list exactly {name,type,path} per file, and
 * errors are REST-shaped {"code":<int>,"message":...,"errno":"ENAME"}.
 * X-Metadata-* headers become the files' user.e2b.* xattrs (agent_meta.c).
 * ?path= names the target of every file (a second file to it is a 400, as
 * envd's); without it each multipart part's file name is its target.
 * Extension for airlock's own API: POST /files?mode=0640 sets the mode of
 * every file written (E2B's SDKs never send it).
 *
 * An upload never replaces a file with part of a body. Each file is
 * written to a temporary file beside its target (O_EXCL, a random name,
 * the owner and mode the target gets), and only when its body is complete
 * (the request body for octet-stream, its part for multipart) is it
 * fsync'd and renamed over the target by a worker thread. A body cut off
 * by the client (reset, EOF before Content-Length or the last chunk, no
 * closing boundary) removes the temporary file and leaves the old one.
 * Multipart parts are committed one by one as each completes, as envd
 * writes them one after the other: a request cut off in its third part
 * has committed the first two. The rename replaces the target's inode, so
 * other hard links keep the old content; a symlink target is followed
 * (the file it points to is replaced, as envd's O_TRUNC writes through it).
 *
 * Nothing here opens a FIFO, socket or device: targets are checked with
 * lstat/stat first and refused (400), downloads open with O_NONBLOCK and
 * check again with fstat, uploads create a new file with O_EXCL.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "guest/agent/agent.h"
#include "common/base64.h"
#include "common/util.h"
#include "http/http_server.h"
#include "guest/agent/agent_multipart.h"

#define FILES_MAX_PER_REQUEST	1024
#define FILES_MAX_SYMLINKS	40	/* as the kernel's MAXSYMLINKS */

struct upload;

/* One file of an upload: written to uf_tmp, renamed to uf_final when complete. */
struct upfile {
	struct upload		*uf_up;		/* NULL once the upload went away */
	TAILQ_ENTRY(upfile)	 uf_entry;	/* on up_commits while its commit runs */
	char			*uf_path;	/* the target as answered */
	char			*uf_final;	/* the target with its symlinks followed */
	char			*uf_tmp;
	int			 uf_fd;
	int			 uf_meta;	/* the upload's metadata is on uf_tmp */
	/* Commit result, written by the worker thread. */
	int			 uf_err;
	char			 uf_what[64];
};

struct upload {
	struct http_req	*up_req;		/* NULL once the connection went away */
	struct agent_user	 up_user;
	char			*up_qpath;	/* ?path=: every file's target (envd's) */
	json_t			*up_meta;	/* X-Metadata-*, or NULL */
	int			 up_nfiles;
	struct upfile		*up_cur;	/* file being written */
	struct mp_parser	 up_mp;
	int			 up_multipart;
	int			 up_skip;	/* part that is not a file */
	int			 up_mode;	/* ?mode= (octal, airlock's), -1: unset */
	TAILQ_HEAD(, upfile)	 up_commits;	/* in flight */
	int			 up_pending;
	int			 up_ended;	/* the body is complete: answer after the commits */
	int			 up_failed;	/* a commit failed: answer with that */
	int			 up_fail_status;
	int			 up_fail_err;	/* its errno, or 0 */
	char			 up_fail_msg[PATH_MAX + 256];
	json_t			*up_entries;
};

static void
files_reply_error(struct http_req *req, int status, const char *errname, const char *msg)
{
	json_t *j;
	char *s;

	if (http_req_replied(req))
		return;
	j = json_pack("{s:i, s:s}", "code", status, "message", msg);
	if (errname != NULL)
		json_object_set_new(j, "errno", json_string(errname));
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	http_reply(req, status, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}

static void
files_error(struct http_req *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
files_error(struct http_req *req, int status, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	files_reply_error(req, status, NULL, msg);
}

/* A failed syscall: status from the errno (or status when non-zero), errno named. */
static void
files_errno(struct http_req *req, int status, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
files_errno(struct http_req *req, int status, int err, const char *fmt, ...)
{
	char what[PATH_MAX + 128], msg[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof(msg), "%s: %s (%s)", what, errno_name(err), strerror(err));
	files_reply_error(req, status != 0 ? status : errno_http_status(err), errno_name(err), msg);
}

static const char *
files_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" :
	    S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device" : "not a regular file";
}

/* Resolve the acting user: ?username=, Basic auth, default. */
static int
files_user(struct http_req *req, const struct http_query *q, struct agent_user *u)
{
	const char *why = NULL;
	int rc;

	rc = api_user(req, http_query_value(q, "username"), u, &why);
	if (rc == -1)
		files_error(req, 401, "%s", why);
	return rc;
}

/*
 * Download. Only a regular file is opened: a FIFO would block open() (and
 * with it the agent) until a writer came, a device could do anything.
 * stat first; O_NONBLOCK and fstat again cover a swap in between.
 */
static void
files_get(struct http_req *req, const struct http_query *q)
{
	const char *qp = http_query_value(q, "path");
	struct agent_user u;
	struct stat st;
	char *path;
	int fd;

	if (files_user(req, q, &u) == -1)
		return;
	path = path_resolve(qp != NULL ? qp : "", &u);
	if (path == NULL) {
		files_error(req, 400, "invalid path: ENAMETOOLONG (longer than %d bytes)", PATH_MAX);
		return;
	}
	if (stat(path, &st) == -1) {
		files_errno(req, 0, errno, "download '%s'", path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		files_errno(req, 400, EISDIR, "download '%s'", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		files_error(req, 400, "download '%s': is %s, only regular files can be downloaded",
		    path, files_kind(st.st_mode));
		goto out;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) == -1) {
		files_errno(req, 0, errno, "download '%s'", path);
		goto out;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		files_error(req, 400, "download '%s': not a regular file any more", path);
		goto out;
	}
	http_reply_file(req, 200, "application/octet-stream", fd, (uint64_t)st.st_size);
out:
	free(path);
}

/* ---- upload ---- */

static void
upfile_free(struct upfile *uf)
{
	if (uf->uf_fd != -1)
		close(uf->uf_fd);
	free(uf->uf_path);
	free(uf->uf_final);
	free(uf->uf_tmp);
	free(uf);
}

/* Drop a file whose body did not complete: the target stays as it was. */
static void
upfile_discard(struct upfile *uf)
{
	if (uf->uf_tmp != NULL && uf->uf_fd != -1 && unlink(uf->uf_tmp) == -1 && errno != ENOENT)
		alog("upload: remove %s: %s", uf->uf_tmp, strerror(errno));
	upfile_free(uf);
}

/*
 * The connection went away or was answered. Commits in flight finish on
 * their own (a completed file is committed all the same); they no longer
 * point at the upload.
 */
static void
upload_free(struct upload *up)
{
	struct upfile *uf;

	while ((uf = TAILQ_FIRST(&up->up_commits)) != NULL) {
		TAILQ_REMOVE(&up->up_commits, uf, uf_entry);
		uf->uf_up = NULL;
	}
	if (up->up_cur != NULL)
		upfile_discard(up->up_cur);
	up->up_cur = NULL;
	if (up->up_multipart)
		mp_free(&up->up_mp);
	json_decref(up->up_entries);
	json_decref(up->up_meta);
	free(up->up_qpath);
	free(up);
}

/* Every commit is in and the body is complete: answer. */
static void
upload_maybe_reply(struct upload *up)
{
	char *s;

	if (!up->up_ended || up->up_pending > 0 || up->up_req == NULL ||
	    http_req_replied(up->up_req))
		return;
	if (up->up_failed) {
		files_reply_error(up->up_req, up->up_fail_status,
		    up->up_fail_err != 0 ? errno_name(up->up_fail_err) : NULL, up->up_fail_msg);
		return;
	}
	if (json_array_size(up->up_entries) == 0) {
		files_error(up->up_req, 400, "no file in the request");
		return;
	}
	s = json_dumps(up->up_entries, JSON_COMPACT);
	http_reply(up->up_req, 200, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}

/*
 * Follow the target's symlinks (a relative one from its own directory) to
 * the path the rename must replace; leaves *st of what is there, or
 * st_mode 0 when nothing is. Refuses directories and special files.
 */
static int
upload_target(struct upload *up, const char *path, char **final, struct stat *st)
{
	char *p = strdup(path), *q, link[PATH_MAX], *slash;
	ssize_t n;
	int i;

	for (i = 0; p != NULL; i++) {
		if (lstat(p, st) == -1) {
			if (errno != ENOENT) {
				files_errno(up->up_req, errno == ENOTDIR ? 400 : 0, errno, "upload '%s'", path);
				break;
			}
			st->st_mode = 0;
			*final = p;
			return 0;
		}
		if (!S_ISLNK(st->st_mode)) {
			if (S_ISREG(st->st_mode)) {
				*final = p;
				return 0;
			}
			if (S_ISDIR(st->st_mode))
				files_errno(up->up_req, 400, EISDIR, "upload '%s'", p);
			else
				files_error(up->up_req, 400, "upload '%s': '%s' is %s, only regular "
				    "files can be written", path, p, files_kind(st->st_mode));
			break;
		}
		if (i == FILES_MAX_SYMLINKS) {
			files_errno(up->up_req, 400, ELOOP, "upload '%s'", path);
			break;
		}
		if ((n = readlink(p, link, sizeof(link) - 1)) == -1) {
			files_errno(up->up_req, 0, errno, "upload '%s': readlink '%s'", path, p);
			break;
		}
		link[n] = '\0';
		slash = strrchr(p, '/');
		if (link[0] == '/' || slash == NULL)
			q = strdup(link);
		else if (asprintf(&q, "%.*s/%s", (int)(slash - p), p, link) == -1)
			q = NULL;
		free(p);
		p = q;
	}
	if (p == NULL)
		files_error(up->up_req, 500, "out of memory");
	free(p);
	return -1;
}

/* Create the temporary file beside final: O_EXCL, a name no one can guess. */
static int
upload_tmp_open(struct upfile *uf)
{
	const char *slash = strrchr(uf->uf_final, '/');
	const char *base = slash != NULL ? slash + 1 : uf->uf_final;
	int dirlen = slash != NULL ? (int)(slash - uf->uf_final) : 0;
	uint64_t rnd;
	int tries;

	for (tries = 0; tries < 8; tries++) {
		/* getrandom never blocks with GRND_NONBLOCK; O_EXCL keeps a guessed name harmless. */
		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = monotonic_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^
			    (uint64_t)tries;
		free(uf->uf_tmp);
		/* Base names are capped so the temporary name stays within NAME_MAX. */
		if (asprintf(&uf->uf_tmp, "%.*s/.%.200s" AGENT_UPLOAD_TMP_MARK "%016llx", dirlen,
		    uf->uf_final, base, (unsigned long long)rnd) == -1) {
			uf->uf_tmp = NULL;
			errno = ENOMEM;
			return -1;
		}
		uf->uf_fd = open(uf->uf_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600);
		if (uf->uf_fd != -1 || errno != EEXIST)
			return uf->uf_fd == -1 ? -1 : 0;
	}
	return -1;
}

/* Open the next target; replies and returns -1 on failure. */
static int
upload_open(struct upload *up, const char *want)
{
	struct upfile *uf;
	struct stat st;
	mode_t mode;
	size_t i;

	if (up->up_nfiles >= FILES_MAX_PER_REQUEST) {
		files_error(up->up_req, 400, "too many files in one request");
		return -1;
	}
	if ((uf = calloc(1, sizeof(*uf))) == NULL) {
		files_error(up->up_req, 500, "out of memory");
		return -1;
	}
	uf->uf_fd = -1;
	if (want == NULL || (uf->uf_path = path_resolve(want, &up->up_user)) == NULL) {
		files_error(up->up_req, 400, "no target path (set ?path= or a file name of at most "
		    "%d bytes)", PATH_MAX);
		goto fail;
	}
	/* envd refuses a second file to one path: the first one is written, the rest is not. */
	for (i = 0; i < json_array_size(up->up_entries); i++) {
		if (strcmp(json_string_value(json_object_get(json_array_get(up->up_entries, i),
		    "path")), uf->uf_path) == 0) {
			files_error(up->up_req, 400, "you cannot upload multiple files to the same "
			    "path '%s' in one upload request, only the first specified file was "
			    "uploaded", uf->uf_path);
			goto fail;
		}
	}
	if (upload_target(up, uf->uf_path, &uf->uf_final, &st) == -1)
		goto fail;
	/* The mode the target would have: ?mode=, else the existing file's, else 0644. */
	mode = up->up_mode != -1 ? (mode_t)up->up_mode : st.st_mode != 0 ? st.st_mode & 07777 :
	    0644;
	if (mkdir_parents(uf->uf_final, &up->up_user) == -1) {
		files_errno(up->up_req, errno == ENOTDIR || errno == EEXIST ? 400 : 0, errno,
		    "upload '%s': create parents", uf->uf_path);
		goto fail;
	}
	if (upload_tmp_open(uf) == -1) {
		files_errno(up->up_req, errno == ENOTDIR ? 400 : 0, errno, "upload '%s': create a "
		    "temporary file in its directory", uf->uf_path);
		goto fail;
	}
	/* Owner first: chown clears set-id bits that fchmod then sets. */
	if (fchown(uf->uf_fd, up->up_user.uid, up->up_user.gid) == -1 && geteuid() == 0) {
		files_errno(up->up_req, 500, errno, "upload '%s': chown", uf->uf_path);
		upfile_discard(uf);
		return -1;
	}
	if (fchmod(uf->uf_fd, mode) == -1) {
		files_errno(up->up_req, 500, errno, "upload '%s': chmod", uf->uf_path);
		upfile_discard(uf);
		return -1;
	}
	/*
	 * On the new inode before the rename: the file's metadata set is the
	 * request's, whole. A filesystem without user xattrs (tmpfs without
	 * them, /proc) keeps the body and says nothing of metadata, as envd.
	 */
	if (up->up_meta != NULL) {
		if (meta_fset(uf->uf_fd, up->up_meta) == 0)
			uf->uf_meta = 1;
		else if (errno == ENOTSUP || errno == EOPNOTSUPP)
			alog("upload %s: no user xattrs here, metadata not kept", uf->uf_path);
		else {
			files_errno(up->up_req, errno == ENOSPC || errno == EDQUOT ? 507 : 500, errno,
			    "upload '%s': set metadata", uf->uf_path);
			upfile_discard(uf);
			return -1;
		}
	}
	uf->uf_up = up;
	up->up_cur = uf;
	up->up_nfiles++;
	return 0;
fail:
	upfile_free(uf);
	return -1;
}

static int
upload_write(struct upload *up, const void *data, size_t len)
{
	struct upfile *uf = up->up_cur;
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		n = write(uf->uf_fd, p, len);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			files_errno(up->up_req, 0, errno, "upload '%s': write", uf->uf_path);
			upfile_discard(uf);
			up->up_cur = NULL;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* In a worker thread: make the body durable, then put it in place. */
static void
upfile_commit_run(void *arg)
{
	struct upfile *uf = arg;

	if (fsync(uf->uf_fd) == -1) {
		uf->uf_err = errno;
		snprintf(uf->uf_what, sizeof(uf->uf_what), "fsync");
	}
	if (close(uf->uf_fd) == -1 && uf->uf_err == 0) {
		uf->uf_err = errno;
		snprintf(uf->uf_what, sizeof(uf->uf_what), "close");
	}
	uf->uf_fd = -1;
	if (uf->uf_err == 0 && rename(uf->uf_tmp, uf->uf_final) == -1) {
		uf->uf_err = errno;
		snprintf(uf->uf_what, sizeof(uf->uf_what), "rename into place");
	}
	if (uf->uf_err != 0)
		unlink(uf->uf_tmp);
}

static void
upload_fail(struct upload *up, int status, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Remember the first failed commit; the answer waits for the others. */
static void
upload_fail(struct upload *up, int status, int err, const char *fmt, ...)
{
	va_list ap;

	if (up->up_failed)
		return;
	up->up_failed = 1;
	up->up_fail_status = status;
	up->up_fail_err = err;
	va_start(ap, fmt);
	vsnprintf(up->up_fail_msg, sizeof(up->up_fail_msg), fmt, ap);
	va_end(ap);
}

/* On the loop: one commit is in. */
static void
upfile_commit_done(void *arg, int late)
{
	struct upfile *uf = arg;
	struct upload *up = uf->uf_up;

	if (up == NULL)
		return;	/* the client left; the file is committed all the same */
	TAILQ_REMOVE(&up->up_commits, uf, uf_entry);
	uf->uf_up = NULL;
	up->up_pending--;
	if (late)
		upload_fail(up, 504, 0, "upload '%s': the guest filesystem did not finish writing it "
		    "within %d ms (it may still appear)", uf->uf_path, AGENT_FS_DEADLINE_MS);
	else if (uf->uf_err != 0)
		upload_fail(up, errno_http_status(uf->uf_err), uf->uf_err, "upload '%s': %s: %s (%s)",
		    uf->uf_path, uf->uf_what, errno_name(uf->uf_err), strerror(uf->uf_err));
	upload_maybe_reply(up);
}

static void
upfile_commit_free(void *arg)
{
	upfile_free(arg);
}

/* The current file's body is complete: list it and commit it off the loop. */
static int
upload_done_file(struct upload *up)
{
	struct upfile *uf = up->up_cur;
	const char *why = NULL, *base = strrchr(uf->uf_path, '/');

	up->up_cur = NULL;
	/*
	 * Exactly these three keys (Python 2.21.1 builds WriteInfo(**entry)),
	 * plus "metadata" only when the request set some (SDKs that send
	 * X-Metadata read it).
	 */
	json_array_append_new(up->up_entries, json_pack("{s:s, s:s, s:s}",
	    "name", base != NULL ? base + 1 : uf->uf_path, "type", "file", "path", uf->uf_path));
	if (uf->uf_meta)
		json_object_set(json_array_get(up->up_entries, json_array_size(up->up_entries) - 1),
		    "metadata", up->up_meta);
	up->up_pending++;
	TAILQ_INSERT_TAIL(&up->up_commits, uf, uf_entry);
	if (work_run(upfile_commit_run, upfile_commit_done, upfile_commit_free, uf,
	    AGENT_FS_DEADLINE_MS, &why) == -1) {
		up->up_pending--;
		TAILQ_REMOVE(&up->up_commits, uf, uf_entry);
		files_error(up->up_req, 503, "upload '%s': %s", uf->uf_path, why);
		upfile_discard(uf);
		return -1;
	}
	return 0;
}


static int
mp_cb_begin(void *arg, const char *name, const char *filename)
{
	struct upload *up = arg;
	const char *want = filename;

	up->up_skip = strcmp(name, "file") != 0;
	if (up->up_skip)
		return 0;
	/* ?path= wins over every part's file name (envd's resolvePath); a second part is then a 400. */
	if (up->up_qpath != NULL)
		want = up->up_qpath;
	return upload_open(up, want);
}

static int
mp_cb_data(void *arg, const void *data, size_t len)
{
	struct upload *up = arg;

	return up->up_skip ? 0 : upload_write(up, data, len);
}

/* The part's closing delimiter came: this file is complete. */
static int
mp_cb_end(void *arg)
{
	struct upload *up = arg;

	return up->up_skip ? 0 : upload_done_file(up);
}

static const struct mp_callbacks upload_mp_cb = { mp_cb_begin, mp_cb_data, mp_cb_end };

/* Body bytes as they arrive (dechunked); an error is answered and ends the upload. */
static void
upload_body(struct http_req *req, const char *data, size_t len, void *arg)
{
	struct upload *up = arg;

	if (up->up_multipart) {
		if (mp_feed(&up->up_mp, data, len) == -1 && !http_req_replied(req))
			files_error(req, 400, "bad multipart body: %s",
			    up->up_mp.err != NULL ? up->up_mp.err : "parse error");
		return;
	}
	(void)upload_write(up, data, len);
}

/* The whole request body is in (the last chunk, or Content-Length bytes). */
static void
upload_end(struct http_req *req, void *arg)
{
	struct upload *up = arg;

	if (http_req_replied(req))
		return;		/* answered with an error while the body came */
	if (up->up_multipart && !mp_done(&up->up_mp)) {
		/* A part cut off before its delimiter is dropped; completed ones stand. */
		if (up->up_cur != NULL)
			upfile_discard(up->up_cur);
		up->up_cur = NULL;
		files_error(req, 400, "multipart body ends before its closing boundary");
		return;
	}
	if (!up->up_multipart && upload_done_file(up) == -1)
		return;
	up->up_ended = 1;
	upload_maybe_reply(up);
}

/* The request is gone (answered, or the client left): so is the upload. */
static void
upload_release(struct http_req *req, void *arg)
{
	struct upload *up = arg;

	up->up_req = NULL;
	upload_free(up);
}

static void
files_post(struct http_req *req, const struct http_query *q)
{
	const char *ctype = http_req_header(req, "Content-Type"), *qpath, *mode;
	const struct http_head *h = http_req_head(req);
	char boundary[MP_MAX_BOUNDARY + 1];
	struct upload *up;

	if ((up = calloc(1, sizeof(*up))) == NULL) {
		files_error(req, 500, "out of memory");
		return;
	}
	up->up_req = req;
	TAILQ_INIT(&up->up_commits);
	up->up_entries = json_array();
	if ((qpath = http_query_value(q, "path")) != NULL && (up->up_qpath = strdup(qpath)) == NULL) {
		upload_free(up);
		files_error(req, 500, "out of memory");
		return;
	}
	up->up_mode = -1;
	if ((mode = http_query_value(q, "mode")) != NULL) {
		char *end;
		long m = strtol(mode, &end, 8);
		int bad = *end != '\0' || end == mode || m < 0 || m > 07777;

		if (bad) {
			upload_free(up);
			files_error(req, 400, "mode must be octal, 0 to 7777");
			return;
		}
		up->up_mode = (int)m;
	}
	if (files_user(req, q, &up->up_user) == -1) {
		upload_free(up);
		return;
	}
	{
		char why[320];

		if (meta_from_head(h, &up->up_meta, why, sizeof(why)) == -1) {
			upload_free(up);
			files_error(req, 400, "invalid metadata: %s", why);
			return;
		}
	}
	if (h->content_length == -1 && !h->chunked) {
		upload_free(up);
		files_error(req, 411, "a body with Content-Length or chunked encoding is required");
		return;
	}
	if (mp_boundary(ctype, boundary, sizeof(boundary)) == 0) {
		up->up_multipart = 1;
		if (mp_init(&up->up_mp, boundary, &upload_mp_cb, up) == -1) {
			upload_free(up);
			files_error(req, 400, "bad multipart boundary");
			return;
		}
	} else if (ctype != NULL && strncasecmp(ctype, "application/octet-stream", 24) == 0) {
		const char *ce = http_req_header(req, "Content-Encoding");

		if (ce != NULL && strcasecmp(ce, "identity") != 0) {
			upload_free(up);
			files_error(req, 400, "Content-Encoding %s is not supported", ce);
			return;
		}
		if (up->up_qpath == NULL) {
			upload_free(up);
			files_error(req, 400, "octet-stream uploads need ?path=");
			return;
		}
		if (upload_open(up, up->up_qpath) == -1) {
			upload_free(up);
			return;
		}
	} else {
		upload_free(up);
		files_error(req, 400, "unsupported content type %s", ctype != NULL ? ctype : "(none)");
		return;
	}
	/* No size limit but the disk's; the body is written as it arrives. */
	http_req_stream(req, 0, upload_body, upload_end, up);
	http_req_on_free(req, upload_release, up);
}

/*
 * With an access token set, /files takes the X-Access-Token header or an
 * E2B signed URL: signature = "v1_" + base64(sha256("<path>:<read|write>:
 * <username>:<token>[:<expiration>]")) without '=' padding.
 */
static int
files_authorized(struct http_req *req, const struct http_query *q, const char *op)
{
	const char *tok = http_req_header(req, "X-Access-Token");
	const char *path = http_query_value(q, "path"), *user = http_query_value(q, "username");
	const char *sig = http_query_value(q, "signature");
	const char *exp = http_query_value(q, "signature_expiration");
	char *msg = NULL, want[BASE64_LEN(32) + 1];
	uint8_t digest[32];
	int ok = 0, n;

	if (ag.ag_token == NULL || (tok != NULL && ct_streq(tok, ag.ag_token)))
		return 1;
	if (sig == NULL) {
		files_error(req, 401, "missing access token or signature");
		return 0;
	}
	if (exp != NULL && (strspn(exp, "0123456789") != strlen(exp) || *exp == '\0' ||
	    strtoll(exp, NULL, 10) < (long long)time(NULL))) {
		files_error(req, 401, "signature expired");
		return 0;
	}
	n = asprintf(&msg, "%s:%s:%s:%s%s%s", path != NULL ? path : "", op,
	    user != NULL ? user : "", ag.ag_token, exp != NULL ? ":" : "", exp != NULL ? exp : "");
	if (n < 0) {
		files_error(req, 500, "out of memory");
		return 0;
	}
	agent_sha256(msg, (size_t)n, digest);
	explicit_bzero(msg, (size_t)n);
	free(msg);
	base64_encode(digest, sizeof(digest), want);
	want[strcspn(want, "=")] = '\0';
	ok = strncmp(sig, "v1_", 3) == 0 && ct_streq(sig + 3, want);
	if (!ok)
		files_error(req, 401, "invalid signature");
	return ok;
}

void
files_route(struct http_req *req, const char *rest)
{
	const char *m = http_req_method(req);
	struct http_query q;
	char *cause = NULL;

	if (strcmp(m, "GET") != 0 && strcmp(m, "POST") != 0) {
		files_error(req, 405, "method not allowed");
		return;
	}
	/* One strict query parser: a bad escape or a repeated name is a 400, never a guess. */
	if (http_query_parse(http_req_query(req), &q, &cause) == -1) {
		files_error(req, 400, "%s", cause);
		free(cause);
		http_query_free(&q);
		return;
	}
	if (files_authorized(req, &q, strcmp(m, "GET") == 0 ? "read" : "write")) {
		if (strcmp(m, "GET") == 0)
			files_get(req, &q);
		else
			files_post(req, &q);
	}
	http_query_free(&q);
}
