/*
 * Files: streamed download and upload through the agent's /files, and the
 * filesystem.Filesystem calls (list, stat, mkdir, move, remove, watch).
 * Bodies are never held whole: both directions pause the producer when the
 * consumer falls behind.
 */
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "api/api.h"
#include "api/api_sandbox.h"
#include "api/api_stream.h"
#include "http/http_parse.h"
#include "common/log.h"
#include "common/util.h"
#include "link/envd_client.h"
#include "sandbox/sbm.h"

#define FILES_PIPE_HIGH		(1024 * 1024)	/* pause the producer above this */
#define FILES_ERR_MAX		4096

/*
 * No component of a guest path may exceed NAME_MAX: refused here, naming
 * the field, rather than as the guest's ENAMETOOLONG (which cannot say
 * which field carried it). The guest checks everything else.
 */
static int
files_path_check(struct api_call *c, const char *field, const char *path)
{
	const char *p = path, *slash;

	while (*p != '\0') {
		slash = strchr(p, '/');
		size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
		if (n > NAME_MAX)
			return api_fail(c, 400, "bad_request", field, "%s: a path component is "
			    "%zu bytes, longer than %d (NAME_MAX)", field, n, NAME_MAX);
		if (slash == NULL)
			break;
		p = slash + 1;
	}
	return 0;
}

static struct sandbox *
files_sandbox(struct api_call *c)
{
	const char *qpath = api_query_str(c, "path");

	if (qpath != NULL && files_path_check(c, "path", qpath) == -1)
		return NULL;
	return api_sandbox_agent(c);
}

/* ?path=: required, 1..API_FILES_PATH_MAX bytes of UTF-8 (the router checked it). */
static const char *
files_path(struct api_call *c)
{
	return api_query_str(c, "path");
}

/*
 * Map an agent's REST error answer ({code,message,errno}) to ours: the
 * guest's refusals of the client's request are 4xx with its message
 * (which names the errno), see envd_error_from_status.
 */
static void
files_agent_error(struct api_call *c, int status, const char *body, size_t len)
{
	json_t *j = json_loadb(body, len, 0, NULL);
	const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
	struct envd_error e;

	envd_error_from_status(status, &e);
	if (msg != NULL)
		api_error(c, e.status, e.code, "%s", msg);
	else
		api_error(c, e.status, e.code, "the guest agent answered HTTP %d", status);
	json_decref(j);
}

/* --- download ----------------------------------------------------------- */

struct download {
	struct api_call	*call;
	struct sandbox	*sb;
	struct envd_req	*req;
	int		 status;
	struct evbuffer	*err;
};

static void
dl_free(struct download *d)
{
	sb_stream_end(d->sb);
	sb_unref(d->sb);
	evbuffer_free(d->err);
	free(d);
}

static void
dl_head(struct envd_req *r, int status, const char *ctype, void *arg)
{
	struct download *d = arg;

	d->status = status;
	if (status == 200)
		http_reply_start(d->call->req, 200, "application/octet-stream");
}

static void
dl_data(struct envd_req *r, const char *data, size_t n, void *arg)
{
	struct download *d = arg;

	if (d->status != 200) {
		if (evbuffer_get_length(d->err) < FILES_ERR_MAX)
			evbuffer_add(d->err, data, n);
		return;
	}
	http_reply_chunk(d->call->req, data, n);
	/* Back-pressure: stop reading from the guest until the client catches up. */
	if (http_req_output_pending(d->call->req) > FILES_PIPE_HIGH)
		envd_req_pause(r, 1);
}

static void
dl_drain(struct http_req *req, void *arg)
{
	struct download *d = arg;

	if (d->req != NULL)
		envd_req_pause(d->req, 0);
}

static void
dl_done(struct envd_req *r, const char *error, void *arg)
{
	struct download *d = arg;

	d->req = NULL;
	if (d->status == 200) {
		/* Too late for a status: a broken transfer ends without the final chunk. */
		if (error == NULL)
			http_reply_end(d->call->req);
		else
			log_warnx("download: %s", error);
		api_call_done(d->call);
	} else if (error != NULL)
		api_error(d->call, 502, "agent_unavailable", "guest agent: %s", error);
	else
		files_agent_error(d->call, d->status, (const char *)evbuffer_pullup(d->err, -1),
		    evbuffer_get_length(d->err));
	dl_free(d);
}

static void
dl_client_gone(struct http_req *req, void *arg)
{
	struct download *d = arg;

	if (d->req != NULL) {
		envd_req_cancel(d->req);
		d->req = NULL;
		api_call_done(d->call);
		dl_free(d);
	}
}

void
api_files_get(struct api_call *c)
{
	static const struct envd_cb cbs = { dl_head, dl_data, dl_done, NULL };
	struct sandbox *sb;
	struct download *d;
	const char *path = files_path(c);
	char *enc, *target, *cause = NULL;

	if ((sb = files_sandbox(c)) == NULL)
		return;
	enc = http_pct_encode(path, "-._~/");
	xasprintf(&target, "/files?path=%s&username=%s", enc, "user");
	d = xcalloc(1, sizeof(*d));
	d->call = c;
	d->sb = sb;
	d->err = evbuffer_new();
	sb_ref(sb);
	sb_stream_begin(sb);
	{
		struct api_agent_headers ah;
		api_agent_headers(&ah, sb, "user", 0);
		d->req = envd_request(sb_agent(sb), "GET", target, NULL, NULL, 0, ah.h, &cbs, d,
		    &cause);
		api_agent_headers_free(&ah);
	}
	if (d->req == NULL) {
		api_error(c, 502, "agent_unavailable", "guest agent: %s", cause);
		free(cause);
		dl_free(d);
	} else {
		http_req_on_close(c->req, dl_client_gone, d);
		http_req_on_drain(c->req, dl_drain, d);
	}
	free(target);
	free(enc);
}

/* --- upload ------------------------------------------------------------- */

struct upload {
	struct api_call	*call;
	struct sandbox	*sb;
	struct envd_req	*req;
	char		*path;
	uint64_t	 bytes;
	int		 status;
	struct evbuffer	*resp;
	int		 body_paused;
	int		 finished;	/* reply sent */
};

static void
ul_free(struct upload *u)
{
	sb_stream_end(u->sb);
	sb_unref(u->sb);
	evbuffer_free(u->resp);
	free(u->path);
	free(u);
}

static void
ul_body(struct http_req *req, const char *data, size_t n, void *arg)
{
	struct upload *u = arg;

	if (u->req == NULL)
		return;
	envd_req_write(u->req, data, n);
	u->bytes += n;
	if (envd_req_pending(u->req) > FILES_PIPE_HIGH && !u->body_paused) {
		u->body_paused = 1;
		http_req_pause_body(req, 1);
	}
}

static void
ul_body_end(struct http_req *req, void *arg)
{
	struct upload *u = arg;

	if (u->req != NULL)
		envd_req_end(u->req);
}

static void
ul_drain(struct envd_req *r, void *arg)
{
	struct upload *u = arg;

	if (u->body_paused) {
		u->body_paused = 0;
		http_req_pause_body(u->call->req, 0);
	}
}

static void
ul_head(struct envd_req *r, int status, const char *ctype, void *arg)
{
	((struct upload *)arg)->status = status;
}

static void
ul_data(struct envd_req *r, const char *data, size_t n, void *arg)
{
	struct upload *u = arg;

	if (evbuffer_get_length(u->resp) < FILES_ERR_MAX)
		evbuffer_add(u->resp, data, n);
}

static void
ul_done(struct envd_req *r, const char *error, void *arg)
{
	struct upload *u = arg;
	struct api_call *c = u->call;

	u->req = NULL;
	if (error != NULL)
		api_error(c, 502, "agent_unavailable", "guest agent: %s", error);
	else if (u->status != 200 && u->status != 201)
		files_agent_error(c, u->status, (const char *)evbuffer_pullup(u->resp, -1),
		    evbuffer_get_length(u->resp));
	else {
		json_t *j = json_loadb((const char *)evbuffer_pullup(u->resp, -1),
		    evbuffer_get_length(u->resp), 0, NULL);
		const char *gpath = json_string_value(json_object_get(json_array_get(j, 0), "path"));
		api_json(c, 201, json_pack("{s:s,s:I}", "path", gpath ? gpath : u->path, "size",
		    (json_int_t)u->bytes));
		json_decref(j);
	}
	ul_free(u);
}

static void
ul_client_gone(struct http_req *req, void *arg)
{
	struct upload *u = arg;

	if (u->req != NULL) {
		/* A half upload must not look complete: reset the stream. */
		envd_req_cancel(u->req);
		u->req = NULL;
		api_call_done(u->call);
		ul_free(u);
	}
}

void
api_files_put(struct api_call *c)
{
	static const struct envd_cb cbs = { ul_head, ul_data, ul_done, ul_drain };
	struct sandbox *sb;
	struct upload *u;
	const char *path = files_path(c), *mode = api_query_str(c, "mode");
	char *enc, *target, *cause = NULL;
	unsigned long m = 0;

	if ((sb = files_sandbox(c)) == NULL)
		return;
	if (mode != NULL) {
		/* Octal digits only: strtoul alone would take " 644", "+644" and "-1". */
		m = strtoul(mode, NULL, 8);
		if (strspn(mode, "01234567") != strlen(mode) || m > 07777) {
			api_fail(c, 400, "bad_request", "mode", "mode: must be octal permission bits "
			    "like 0644");
			return;
		}
	}
	enc = http_pct_encode(path, "-._~/");
	if (mode != NULL)
		xasprintf(&target, "/files?path=%s&username=%s&mode=%04lo", enc, "user", m);
	else
		xasprintf(&target, "/files?path=%s&username=%s", enc, "user");
	u = xcalloc(1, sizeof(*u));
	u->call = c;
	u->sb = sb;
	u->path = xstrdup(path);
	u->resp = evbuffer_new();
	sb_ref(sb);
	sb_stream_begin(sb);
	{
		struct api_agent_headers ah;
		api_agent_headers(&ah, sb, "user", 0);
		u->req = envd_request(sb_agent(sb), "POST", target, "application/octet-stream", NULL,
		    -1, ah.h, &cbs, u, &cause);
		api_agent_headers_free(&ah);
	}
	free(target);
	free(enc);
	if (u->req == NULL) {
		api_error(c, 502, "agent_unavailable", "guest agent: %s", cause);
		free(cause);
		ul_free(u);
		return;
	}
	http_req_on_close(c->req, ul_client_gone, u);
	http_req_stream(c->req, 0, ul_body, ul_body_end, u);
}

/* --- filesystem.Filesystem ---------------------------------------------- */

static json_t *
entry_json(json_t *e)
{
	const char *t = json_string_value(json_object_get(e, "type"));
	json_t *size = json_object_get(e, "size");
	const char *type = "file";
	json_int_t sz = 0;

	if (t != NULL && strstr(t, "DIR") != NULL)
		type = "dir";
	else if (json_object_get(e, "symlinkTarget") != NULL &&
	    !json_is_null(json_object_get(e, "symlinkTarget")))
		type = "symlink";
	if (json_is_string(size))
		sz = strtoll(json_string_value(size), NULL, 10);
	else if (json_is_integer(size))
		sz = json_integer_value(size);
	return json_pack("{s:O?,s:O?,s:s,s:I,s:O?,s:O?,s:O?}", "name", json_object_get(e, "name"),
	    "path", json_object_get(e, "path"), "type", type, "size", sz,
	    "mode", json_object_get(e, "mode"), "mtime", json_object_get(e, "modifiedTime"),
	    "symlink_target", json_object_get(e, "symlinkTarget"));
}

enum fs_kind { FS_LIST, FS_STAT, FS_MKDIR, FS_MOVE, FS_REMOVE };

static void
fs_ok(struct api_call *c, json_t *resp, int kind)
{
	json_t *out, *e;
	size_t i;

	if (kind == FS_LIST) {
		out = json_array();
		json_array_foreach(json_object_get(resp, "entries"), i, e)
			json_array_append_new(out, entry_json(e));
		api_json(c, 200, json_pack("{s:o}", "entries", out));
	} else if (kind == FS_REMOVE)
		api_no_content(c);
	else
		api_json(c, kind == FS_MKDIR ? 201 : 200, entry_json(json_object_get(resp, "entry")));
}

/* Steals body. */
static void
fs_call(struct api_call *c, struct sandbox *sb, enum fs_kind kind, const char *method,
    json_t *body)
{
	char *target;

	xasprintf(&target, "filesystem.Filesystem/%s", method);
	api_agent_unary(c, sb, "user", target, body, fs_ok, (int)kind);
	free(target);
	json_decref(body);
}

void
api_files_list(struct api_call *c)
{
	struct sandbox *sb;

	if ((sb = files_sandbox(c)) == NULL)
		return;
	fs_call(c, sb, FS_LIST, "ListDir", json_pack("{s:s,s:I}", "path", files_path(c), "depth",
	    (json_int_t)api_query_int(c, "depth", 1)));
}

void
api_files_stat(struct api_call *c)
{
	struct sandbox *sb;

	if ((sb = files_sandbox(c)) == NULL)
		return;
	fs_call(c, sb, FS_STAT, "Stat", json_pack("{s:s}", "path", files_path(c)));
}

static int
body_path(struct api_call *c, const char *field, const char **out)
{
	if (api_get_string(c, c->body, field, 1, API_FILES_PATH_MAX, out) == -1)
		return -1;
	if (**out == '\0')
		return api_fail(c, 400, "bad_request", field, "%s: must not be empty", field);
	return files_path_check(c, field, *out);
}

void
api_files_mkdir(struct api_call *c)
{
	static const char *const fields[] = { "path", NULL };
	struct sandbox *sb;
	const char *path;

	if ((sb = files_sandbox(c)) == NULL || api_check_fields(c, c->body, "", fields) == -1 ||
	    body_path(c, "path", &path) == -1)
		return;
	fs_call(c, sb, FS_MKDIR, "MakeDir", json_pack("{s:s}", "path", path));
}

void
api_files_move(struct api_call *c)
{
	static const char *const fields[] = { "from", "to", NULL };
	struct sandbox *sb;
	const char *from, *to;

	if ((sb = files_sandbox(c)) == NULL || api_check_fields(c, c->body, "", fields) == -1 ||
	    body_path(c, "from", &from) == -1 || body_path(c, "to", &to) == -1)
		return;
	fs_call(c, sb, FS_MOVE, "Move", json_pack("{s:s,s:s}", "source", from, "destination", to));
}

void
api_files_remove(struct api_call *c)
{
	static const char *const fields[] = { "path", "recursive", NULL };
	struct sandbox *sb;
	const char *path;
	int recursive;

	if ((sb = files_sandbox(c)) == NULL || api_check_fields(c, c->body, "", fields) == -1 ||
	    body_path(c, "path", &path) == -1 ||
	    api_get_bool(c, c->body, "recursive", 1, &recursive) == -1)
		return;
	/* false: one rmdir or unlink (a non-empty directory is a 409 naming ENOTEMPTY). */
	fs_call(c, sb, FS_REMOVE, "Remove", json_pack("{s:s,s:b}", "path", path, "recursive",
	    recursive));
}

/* --- watch --------------------------------------------------------------- */

static void
watch_msg(struct api_stream *st, json_t *msg)
{
	json_t *ev = json_object_get(msg, "filesystem");
	const char *type = json_string_value(json_object_get(ev, "type"));
	const char *t = "change";

	if (ev == NULL)
		return;
	if (type != NULL) {
		if (strstr(type, "CREATE")) t = "create";
		else if (strstr(type, "WRITE")) t = "write";
		else if (strstr(type, "REMOVE")) t = "remove";
		else if (strstr(type, "RENAME")) t = "rename";
		else if (strstr(type, "CHMOD")) t = "chmod";
	}
	http_sse_event(st->call->req, "fs", json_pack("{s:s,s:O?}", "type", t, "path",
	    json_object_get(ev, "name")));
}

void
api_files_watch(struct api_call *c)
{
	struct api_agent_headers ah;
	struct sandbox *sb;
	json_t *body;

	if ((sb = files_sandbox(c)) == NULL)
		return;
	body = json_pack("{s:s,s:b}", "path", files_path(c), "recursive",
	    api_query_bool(c, "recursive", 0));
	api_agent_headers(&ah, sb, "user", 0);
	api_stream_start(c, sb, "filesystem.Filesystem/WatchDir", body, ah.h, watch_msg, 0);
	api_agent_headers_free(&ah);
	json_decref(body);
}
