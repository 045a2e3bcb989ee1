/*
 * PUT /v1/templates/:name/image: an OCI image (docker save tarball or OCI
 * layout tar) uploaded as the body, imported into a template. The body is
 * written to the import's own file under $DATA/build (capped at
 * template_upload_max_mb, the server answers 413 past it); the import runs
 * in a forked child like a recipe build. Until the child has read the image
 * and checked every layer the answer is not sent, so a hostile or broken
 * image is a 400 naming the layer and entry; after that it is the usual
 * progress stream (docs/templates.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "config/config.h"
#include "images/oci_import.h"
#include "images/stor_sandbox.h"

struct upload_img {
	struct api_call	*call;
	char		*name;
	char		*path;		/* $DATA/build/<name>.upload.<id>.tar */
	int		 fd;
	int		 failed;	/* a write failed: the rest is drained and dropped */
	int		 gone;
};

static void
img_free(struct upload_img *u)
{
	if (u->fd != -1)
		close(u->fd);
	if (u->path != NULL)
		unlink(u->path);
	free(u->path);
	free(u->name);
	free(u);
}

static void
img_checked(void *arg)
{
	int fd = *(int *)arg;

	dprintf(fd, "{\"kind\":\"checked\"}\n");
}

/* In the child: import the uploaded file, then remove it. */
static void
img_child(int fd, const char *name, void *arg)
{
	struct oci_import_opts o;
	const char *path = arg;
	char *cause = NULL;
	int rc;

	memset(&o, 0, sizeof(o));
	o.name = name;
	o.image = path;
	o.progress = api_build_progress;
	o.checked = img_checked;
	o.arg = &fd;
	rc = oci_import(&o, &cause);
	unlink(path);
	api_build_result(fd, rc == -1 ? cause : NULL);
}

static void
img_body(struct http_req *req, const char *data, size_t n, void *arg)
{
	struct upload_img *u = arg;
	ssize_t w;

	(void)req;
	while (!u->failed && n > 0) {
		if ((w = write(u->fd, data, n)) == -1) {
			if (errno == EINTR)
				continue;
			log_warnx("template import %s: write %s: %s", u->name, u->path,
			    strerror(errno));
			u->failed = errno;
			break;
		}
		data += w;
		n -= (size_t)w;
	}
}

static void
img_end(struct http_req *req, void *arg)
{
	struct upload_img *u = arg;
	struct api_call *c = u->call;

	http_req_on_close(req, NULL, NULL);
	if (u->failed) {
		api_error(c, 507, "insufficient_storage", "writing the upload: %s",
		    strerror(u->failed));
		img_free(u);
		return;
	}
	close(u->fd);
	u->fd = -1;
	/* The child imports and removes the file; ours is forgotten. */
	api_build_spawn(c, u->name, img_child, u->path, 1);
	free(u->path);
	u->path = NULL;
	img_free(u);
}

static void
img_gone(struct http_req *req, void *arg)
{
	/* Client gone, or the server refused the body (413, bad framing). */
	struct upload_img *u = arg;

	(void)req;
	api_call_done(u->call);
	img_free(u);
}

void
api_templates_import(struct api_call *c)
{
	const char *name = c->params[0];
	struct upload_img *u;
	char id[9], *cause = NULL;

	if (!paths_valid_name(name)) {
		api_fail(c, 400, "bad_request", "name", "name: must match [a-z0-9][a-z0-9._-]{0,62}");
		return;
	}
	if (stor_floor_check((uint64_t)c->api->cfg->disk_free_floor_mb << 20, "template import",
	    &cause) == -1) {
		api_error(c, 507, "insufficient_storage", "%s", cause);
		free(cause);
		return;
	}
	{
		char *dir = paths_data("build");
		int rc = mkdir_p(dir, 0700, &cause);
		free(dir);
		if (rc == -1) {
			api_error(c, 500, "internal", "%s", cause);
			free(cause);
			return;
		}
	}
	u = xcalloc(1, sizeof(*u));
	u->call = c;
	u->name = xstrdup(name);
	random_id(id, 8);
	u->path = paths_data("build/%s.upload.%s.tar", name, id);
	if ((u->fd = open(u->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1) {
		api_error(c, 500, "internal", "%s: %s", u->path, strerror(errno));
		free(u->path);
		u->path = NULL;
		img_free(u);
		return;
	}
	http_req_on_close(c->req, img_gone, u);
	http_req_stream(c->req, (uint64_t)c->api->cfg->template_upload_max_mb << 20, img_body,
	    img_end, u);
}
