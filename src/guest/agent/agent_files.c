/*
 * GET/POST /files (envd's upload.go/download.go): download a file, or
 * upload one or more (multipart with the full path as filename, or a raw
 * octet-stream body). Bodies are written to disk as they arrive; answers
 * list exactly {name,type,path} per file, and errors are REST-shaped
 * {"code":<int>,"message":...}.
 * Extension for airlock's own API: POST /files?mode=0640 sets the mode of
 * every file written (E2B's SDKs never send it; default 0644).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_http.h"
#include "guest/agent/agent_multipart.h"

#define FILES_MAX_PER_REQUEST	1024

struct upload {
	struct http_conn	*up_hc;
	struct agent_user	 up_user;
	char			*up_qpath;	/* ?path=, used for the first file */
	int			 up_nfiles;
	int			 up_fd;		/* file being written */
	char			*up_path;
	struct mp_parser	 up_mp;
	int			 up_multipart;
	int			 up_skip;	/* part that is not a file */
	int			 up_mode;	/* ?mode= (octal, airlock's), -1: 0644 */
	json_t			*up_entries;
};

static void
files_error(struct http_conn *hc, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
files_error(struct http_conn *hc, int status, const char *fmt, ...)
{
	char msg[512], *s;
	va_list ap;
	json_t *j;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	j = json_pack("{s:i, s:s}", "code", status, "message", msg);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	http_reply(hc, status, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}

/* Resolve the acting user: ?username=, Basic auth, default. */
static int
files_user(struct http_conn *hc, const struct http_req *req, struct agent_user *u)
{
	char *name = http_query_get(req->query, "username");
	const char *why = NULL;
	int rc;

	rc = api_user(req, name, u, &why);
	free(name);
	if (rc == -1)
		files_error(hc, 401, "%s", why);
	return rc;
}

static void
files_get(struct http_conn *hc, const struct http_req *req)
{
	struct agent_user u;
	char *qp, *path;
	struct stat st;
	int fd;

	if (files_user(hc, req, &u) == -1)
		return;
	qp = http_query_get(req->query, "path");
	path = path_resolve(qp != NULL ? qp : "", &u);
	free(qp);
	if (path == NULL) {
		files_error(hc, 400, "invalid path");
		return;
	}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		if (errno == ENOENT || errno == ENOTDIR)
			files_error(hc, 404, "path '%s' does not exist", path);
		else if (errno == EACCES)
			files_error(hc, 403, "cannot read '%s': %s", path, strerror(errno));
		else
			files_error(hc, 500, "cannot open '%s': %s", path, strerror(errno));
		free(path);
		return;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		files_error(hc, 400, "path '%s' is a directory or not a regular file", path);
		free(path);
		return;
	}
	free(path);
	http_reply_file(hc, 200, "application/octet-stream", fd, (uint64_t)st.st_size);
}

static void
upload_close_file(struct upload *up)
{
	if (up->up_fd != -1)
		close(up->up_fd);
	up->up_fd = -1;
	free(up->up_path);
	up->up_path = NULL;
}

static void
upload_free(struct upload *up)
{
	upload_close_file(up);
	if (up->up_multipart)
		mp_free(&up->up_mp);
	json_decref(up->up_entries);
	free(up->up_qpath);
	free(up);
}

/* Open the next target; replies and returns -1 on failure. */
static int
upload_open(struct upload *up, const char *want)
{
	struct stat st;

	if (up->up_nfiles >= FILES_MAX_PER_REQUEST) {
		files_error(up->up_hc, 400, "too many files in one request");
		return -1;
	}
	if (want == NULL || (up->up_path = path_resolve(want, &up->up_user)) == NULL) {
		files_error(up->up_hc, 400, "no target path (set ?path= or a file name)");
		return -1;
	}
	if (stat(up->up_path, &st) == 0 && S_ISDIR(st.st_mode)) {
		files_error(up->up_hc, 400, "path '%s' is a directory", up->up_path);
		return -1;
	}
	if (mkdir_parents(up->up_path, &up->up_user) == -1) {
		files_error(up->up_hc, errno == ENOSPC ? 507 : 500, "cannot create parents of '%s': %s",
		    up->up_path, strerror(errno));
		return -1;
	}
	up->up_fd = open(up->up_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    up->up_mode != -1 ? (mode_t)up->up_mode : 0644);
	if (up->up_fd == -1) {
		files_error(up->up_hc, errno == ENOSPC ? 507 : errno == EISDIR ? 400 : 500,
		    "cannot open '%s': %s", up->up_path, strerror(errno));
		return -1;
	}
	if (fchown(up->up_fd, up->up_user.uid, up->up_user.gid) == -1 && geteuid() == 0) {
		files_error(up->up_hc, 500, "chown '%s': %s", up->up_path, strerror(errno));
		return -1;
	}
	/* Also for an existing file, whose mode open() leaves alone. */
	if (up->up_mode != -1 && fchmod(up->up_fd, (mode_t)up->up_mode) == -1) {
		files_error(up->up_hc, 500, "chmod '%s': %s", up->up_path, strerror(errno));
		return -1;
	}
	up->up_nfiles++;
	return 0;
}

static int
upload_write(struct upload *up, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		n = write(up->up_fd, p, len);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			files_error(up->up_hc, errno == ENOSPC || errno == EDQUOT ? 507 : 500,
			    "write '%s': %s", up->up_path, strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void
upload_done_file(struct upload *up)
{
	char *copy = strdup(up->up_path);

	/* Exactly these three keys: the Python SDK builds WriteInfo(**entry). */
	json_array_append_new(up->up_entries, json_pack("{s:s, s:s, s:s}",
	    "name", copy != NULL ? basename(copy) : "", "type", "file", "path", up->up_path));
	free(copy);
	upload_close_file(up);
}

static int
mp_cb_begin(void *arg, const char *name, const char *filename)
{
	struct upload *up = arg;
	const char *want = filename;

	up->up_skip = strcmp(name, "file") != 0;
	if (up->up_skip)
		return 0;
	/* ?path= names a single file's target and wins over its file name. */
	if (up->up_qpath != NULL && up->up_nfiles == 0)
		want = up->up_qpath;
	return upload_open(up, want);
}

static int
mp_cb_data(void *arg, const void *data, size_t len)
{
	struct upload *up = arg;

	return up->up_skip ? 0 : upload_write(up, data, len);
}

static int
mp_cb_end(void *arg)
{
	struct upload *up = arg;

	if (!up->up_skip)
		upload_done_file(up);
	return 0;
}

static const struct mp_callbacks upload_mp_cb = { mp_cb_begin, mp_cb_data, mp_cb_end };

static int
upload_body(struct http_conn *hc, struct evbuffer *data)
{
	struct upload *up = http_ctx(hc);
	struct evbuffer_iovec v;
	size_t len;

	if (up->up_multipart) {
		if (mp_feed(&up->up_mp, data) == -1) {
			if (!http_responded(hc))
				files_error(hc, 400, "bad multipart body: %s",
				    up->up_mp.err != NULL ? up->up_mp.err : "parse error");
			return -1;
		}
		return 0;
	}
	while (evbuffer_get_length(data) > 0) {
		if (evbuffer_peek(data, -1, NULL, &v, 1) < 1)
			break;
		len = v.iov_len;
		if (upload_write(up, v.iov_base, len) == -1)
			return -1;
		evbuffer_drain(data, len);
	}
	return 0;
}

static void
upload_end(struct http_conn *hc)
{
	struct upload *up = http_ctx(hc);
	char *s;

	if (up->up_multipart && !mp_done(&up->up_mp)) {
		files_error(hc, 400, "multipart body ends before its closing boundary");
		return;
	}
	if (!up->up_multipart)
		upload_done_file(up);
	if (json_array_size(up->up_entries) == 0) {
		files_error(hc, 400, "no file in the request");
		return;
	}
	s = json_dumps(up->up_entries, JSON_COMPACT);
	http_reply(hc, 200, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}

static void
upload_abort(struct http_conn *hc)
{
	struct upload *up = http_ctx(hc);

	if (up != NULL)
		upload_free(up);
	http_set_handler(hc, NULL, NULL);
}

static const struct http_handler upload_handler = {
	.body = upload_body, .end = upload_end, .abort = upload_abort,
};

static void
files_post(struct http_conn *hc, const struct http_req *req)
{
	const char *ctype = http_req_header(req, "Content-Type");
	char boundary[MP_MAX_BOUNDARY + 1], *mode;
	struct upload *up;

	if ((up = calloc(1, sizeof(*up))) == NULL) {
		files_error(hc, 500, "out of memory");
		return;
	}
	up->up_hc = hc;
	up->up_fd = -1;
	up->up_entries = json_array();
	up->up_qpath = http_query_get(req->query, "path");
	up->up_mode = -1;
	if ((mode = http_query_get(req->query, "mode")) != NULL) {
		char *end;
		long m = strtol(mode, &end, 8);
		int bad = *end != '\0' || end == mode || m < 0 || m > 07777;

		free(mode);
		if (bad) {
			upload_free(up);
			files_error(hc, 400, "mode must be octal, 0 to 7777");
			return;
		}
		up->up_mode = (int)m;
	}
	if (files_user(hc, req, &up->up_user) == -1) {
		upload_free(up);
		return;
	}
	if (req->content_length == -1 && !req->chunked) {
		upload_free(up);
		files_error(hc, 411, "a body with Content-Length or chunked encoding is required");
		return;
	}
	if (mp_boundary(ctype, boundary, sizeof(boundary)) == 0) {
		up->up_multipart = 1;
		if (mp_init(&up->up_mp, boundary, &upload_mp_cb, up) == -1) {
			upload_free(up);
			files_error(hc, 400, "bad multipart boundary");
			return;
		}
	} else if (ctype != NULL && strncasecmp(ctype, "application/octet-stream", 24) == 0) {
		const char *ce = http_req_header(req, "Content-Encoding");

		if (ce != NULL && strcasecmp(ce, "identity") != 0) {
			upload_free(up);
			files_error(hc, 400, "Content-Encoding %s is not supported", ce);
			return;
		}
		if (up->up_qpath == NULL) {
			upload_free(up);
			files_error(hc, 400, "octet-stream uploads need ?path=");
			return;
		}
		if (upload_open(up, up->up_qpath) == -1) {
			upload_free(up);
			return;
		}
	} else {
		upload_free(up);
		files_error(hc, 400, "unsupported content type %s", ctype != NULL ? ctype : "(none)");
		return;
	}
	http_set_handler(hc, &upload_handler, up);
}

/*
 * With an access token set, /files takes the X-Access-Token header or an
 * E2B signed URL: signature = "v1_" + base64(sha256("<path>:<read|write>:
 * <username>:<token>[:<expiration>]")) without '=' padding.
 */
static int
files_authorized(struct http_conn *hc, const struct http_req *req, const char *op)
{
	const char *tok = http_req_header(req, "X-Access-Token");
	char *path, *user, *sig, *exp, *msg = NULL, *want = NULL;
	uint8_t digest[32];
	int ok = 0, n;

	if (ag.ag_token == NULL || (tok != NULL && strcmp(tok, ag.ag_token) == 0))
		return 1;
	path = http_query_get(req->query, "path");
	user = http_query_get(req->query, "username");
	sig = http_query_get(req->query, "signature");
	exp = http_query_get(req->query, "signature_expiration");
	if (sig == NULL) {
		files_error(hc, 401, "missing access token or signature");
		goto out;
	}
	if (exp != NULL && (strspn(exp, "0123456789") != strlen(exp) || *exp == '\0' ||
	    strtoll(exp, NULL, 10) < (long long)time(NULL))) {
		files_error(hc, 401, "signature expired");
		goto out;
	}
	n = asprintf(&msg, "%s:%s:%s:%s%s%s", path != NULL ? path : "", op,
	    user != NULL ? user : "", ag.ag_token, exp != NULL ? ":" : "", exp != NULL ? exp : "");
	if (n < 0) {
		msg = NULL;
		files_error(hc, 500, "out of memory");
		goto out;
	}
	agent_sha256(msg, (size_t)n, digest);
	if ((want = b64_encode(digest, sizeof(digest))) != NULL) {
		want[strcspn(want, "=")] = '\0';
		ok = strncmp(sig, "v1_", 3) == 0 && strcmp(sig + 3, want) == 0;
	}
	if (!ok)
		files_error(hc, 401, "invalid signature");
out:
	free(path);
	free(user);
	free(sig);
	free(exp);
	free(msg);
	free(want);
	return ok;
}

void
files_route(struct http_conn *hc, const struct http_req *req)
{
	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "POST") != 0) {
		files_error(hc, 405, "method not allowed");
		return;
	}
	if (!files_authorized(hc, req, strcmp(req->method, "GET") == 0 ? "read" : "write"))
		return;
	if (strcmp(req->method, "GET") == 0)
		files_get(hc, req);
	else if (strcmp(req->method, "POST") == 0)
		files_post(hc, req);
	else
		files_error(hc, 405, "method not allowed");
}
