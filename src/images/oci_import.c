/*
 * OCI image import (oci_import.h). Three steps of ours, then the template
 * build's own from "copy the tree" on (agent, CA, env, mkfs.ext4, atomic
 * install), so an imported template is the same kind of thing as a built
 * one:
 *   1. read the image: a tar is unpacked (files, dirs, symlinks only) into
 *      the import's own directory under $DATA/build; a directory is used
 *      in place; index.json / manifest / config (or docker save's
 *      manifest.json) are parsed, OCI blobs verified against their digests;
 *   2. check every layer without writing: names, link targets, types, size
 *      budget, digests. Any refusal here is the image's fault;
 *   3. apply the layers in order onto an empty root (oci_layer.c).
 * Nothing is written outside $DATA/build/<name>.oci.<pid>, which goes at
 * the end whatever happened.
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/digest.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/oci_import.h"
#include "images/oci_layer.h"
#include "images/oci_parse.h"
#include "images/recipe.h"
#include "images/template_build.h"

#define OI_STEPS	3
#define OI_TB_STEPS	7	/* template_build's */
#define OI_NEST_MAX	4	/* nested image indexes followed */

struct oi {
	const struct oci_import_opts	*o;
	char			*workdir;	/* $DATA/build/<name>.oci.<pid> */
	int			 imgfd;		/* the image dir (layout or unpacked tar) */
	int			 is_oci;
	struct oci_image	 img;
	struct oci_config	 cfg;
	char			*manifest_digest;
	struct oci_budget	 budget;
};

static void
oi_progress(struct oi *oi, int step, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (oi->o->progress != NULL)
		oi->o->progress(oi->o->arg, step, OI_STEPS + OI_TB_STEPS, msg);
}

/* The template build's steps follow ours. */
static void
oi_tb_progress(void *arg, int step, int nsteps, const char *msg)
{
	struct oi *oi = arg;

	(void)nsteps;
	if (oi->o->progress != NULL)
		oi->o->progress(oi->o->arg, OI_STEPS + step, OI_STEPS + OI_TB_STEPS, msg);
}

/* A small document inside the image dir, resolved inside it. */
static int
oi_read(struct oi *oi, const char *path, const char *digest, char **text, size_t *len,
    char **cause)
{
	struct stat st;
	char hex[65];
	ssize_t n;
	int fd;

	*text = NULL;
	if ((fd = oci_open_in(oi->imgfd, path, O_RDONLY)) == -1) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_size > OCI_JSON_MAX) {
		cause_set(cause, "%s: not a regular file of at most %d bytes", path, OCI_JSON_MAX);
		close(fd);
		return -1;
	}
	*text = xmalloc((size_t)st.st_size + 1);
	n = pread(fd, *text, (size_t)st.st_size, 0);
	close(fd);
	if (n != st.st_size) {
		cause_set(cause, "%s: short read", path);
		goto bad;
	}
	(*text)[n] = '\0';
	*len = (size_t)n;
	if (digest != NULL) {
		sha256_hex(*text, *len, hex);
		if (strcmp(hex, digest + 7) != 0) {
			cause_set(cause, "%s: digest mismatch (sha256 %s)", path, hex);
			goto bad;
		}
	}
	return 0;
bad:
	free(*text);
	*text = NULL;
	return -1;
}

static int
oi_open_image(struct oi *oi, char **cause)
{
	struct stat st;
	char *stage;
	int fd, rc;

	if (stat(oi->o->image, &st) == -1) {
		cause_set(cause, "image %s: %s", oi->o->image, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		if ((oi->imgfd = open(oi->o->image, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
			cause_set(cause, "image %s: %s", oi->o->image, strerror(errno));
			return -1;
		}
		return 0;
	}
	if ((fd = open(oi->o->image, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "image %s: %s", oi->o->image, strerror(errno));
		return -1;
	}
	xasprintf(&stage, "%s/image", oi->workdir);
	if (mkdir_p(stage, 0700, cause) == -1 ||
	    (oi->imgfd = open(stage, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		if (oi->imgfd == -1 && cause != NULL && *cause == NULL)
			cause_set(cause, "%s: %s", stage, strerror(errno));
		free(stage);
		close(fd);
		return -1;
	}
	free(stage);
	rc = oci_unpack_outer(fd, oi->imgfd, &oi->budget, cause);
	close(fd);
	oi->budget.bytes = oi->budget.entries = 0;	/* the layers get the whole budget */
	return rc;
}

static int
oi_find_oci(struct oi *oi, char **cause)
{
	char *text, *blob, *digest, *path = xstrdup("index.json"), *dg = NULL;
	size_t len;
	int is_index = 1, depth, rc;

	for (depth = 0; is_index; depth++) {
		if (depth > OI_NEST_MAX) {
			cause_set(cause, "index.json: image indexes nested more than %d deep",
			    OI_NEST_MAX);
			goto bad;
		}
		rc = oi_read(oi, path, dg, &text, &len, cause);
		if (rc == 0)
			rc = oci_parse_index(text, len, &blob, &digest, &is_index, cause);
		free(text);
		if (rc == -1)
			goto bad;
		if (depth > 0)
			cause_wrap(cause, "nested index %s", path);
		free(path);
		free(dg);
		path = blob;
		dg = digest;
	}
	rc = oi_read(oi, path, dg, &text, &len, cause);
	if (rc == 0)
		rc = oci_parse_manifest(text, len, &oi->img, cause);
	free(text);
	if (rc == -1) {
		cause_wrap(cause, "%s", path);
		goto bad;
	}
	oi->manifest_digest = dg;
	free(path);
	return 0;
bad:
	free(path);
	free(dg);
	return -1;
}

static int
oi_read_image(struct oi *oi, char **cause)
{
	char *text;
	size_t len;
	int fd, rc;

	oi_progress(oi, 1, "read the image %s", oi->o->image);
	if (oi_open_image(oi, cause) == -1)
		return -1;
	if ((fd = oci_open_in(oi->imgfd, "index.json", O_RDONLY)) != -1) {
		close(fd);
		oi->is_oci = 1;
		if (oi_find_oci(oi, cause) == -1)
			return -1;
	} else if (oi_read(oi, "manifest.json", NULL, &text, &len, NULL) == 0) {
		rc = oci_parse_docker_manifest(text, len, &oi->img, cause);
		free(text);
		if (rc == -1)
			return -1;
	} else {
		cause_set(cause, "image: neither index.json (an OCI image layout) nor "
		    "manifest.json (docker save) at its top");
		return -1;
	}
	if (oi_read(oi, oi->img.config_blob, oi->img.config_digest, &text, &len, cause) == -1)
		return -1;
	rc = oci_parse_config(text, len, &oi->cfg, cause);
	free(text);
	if (rc == -1)
		return -1;
	oi_progress(oi, 1, "%s image, %zu layer(s)", oi->is_oci ? "OCI" : "docker save",
	    oi->img.nlayers);
	return 0;
}

/* Check (rootfd -1) or apply every layer in order. */
static int
oi_layers(struct oi *oi, int rootfd, char **cause)
{
	char what[96];
	size_t i;
	int fd, rc;

	oi->budget.bytes = oi->budget.entries = 0;
	for (i = 0; i < oi->img.nlayers; i++) {
		const struct oci_layer_ref *l = &oi->img.layers[i];
		snprintf(what, sizeof(what), "layer %zu (%.60s)", i + 1, l->blob);
		if ((fd = oci_open_in(oi->imgfd, l->blob, O_RDONLY)) == -1) {
			cause_set(cause, "%s: %s", what, strerror(errno));
			return -1;
		}
		rc = oci_layer_read(fd, rootfd, what, rootfd == -1 ? l->digest : NULL,
		    &oi->budget, cause);
		close(fd);
		if (rc == -1)
			return -1;
		if (rootfd != -1)
			oi_progress(oi, 3, "%s applied", what);
	}
	return 0;
}

static void
oi_recipe_env(struct oi *oi, struct recipe *r)
{
	const char *eq;
	size_t i;

	r->env = xcalloc(oi->cfg.nenv + 1, sizeof(*r->env));
	for (i = 0; i < oi->cfg.nenv; i++) {
		const char *kv = oi->cfg.env[i];
		char *key;
		/* /etc/airlock/env is one KEY=value a line: what cannot be written so is dropped. */
		if ((eq = strchr(kv, '=')) == NULL || strchr(kv, '\n') != NULL)
			continue;
		key = xstrndup(kv, (size_t)(eq - kv));
		if (!recipe_valid_env_key(key)) {
			log_warnx("import: config.Env \"%s\": not a variable name, dropped", key);
			free(key);
			continue;
		}
		r->env[r->nenv].key = key;
		r->env[r->nenv++].value = xstrdup(eq + 1);
	}
}

/* nftw has no argument for its callback; imports run one at a time per process. */
static uint64_t oi_du_bytes;

static int
oi_du_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)ftw;
	if (flag == FTW_F)
		oi_du_bytes += (uint64_t)st->st_blocks * 512;
	return 0;
}

static unsigned
oi_disk_mb(const char *root)
{
	uint64_t mb;

	oi_du_bytes = 0;
	(void)nftw(root, oi_du_cb, 64, FTW_PHYS | FTW_MOUNT);
	/* ext4 metadata, the agent and the guest's own writes: half again, plus 512 MiB. */
	mb = (oi_du_bytes >> 20) * 3 / 2 + 512;
	if (mb < RECIPE_DISK_MB_DEFAULT)
		mb = RECIPE_DISK_MB_DEFAULT;
	return mb > RECIPE_DISK_MB_MAX ? RECIPE_DISK_MB_MAX : (unsigned)mb;
}

/* The config as the template records it, and the E2B user the sandbox API runs as. */
static int
oi_build(struct oi *oi, const char *root, char **cause)
{
	struct template_build_opts tbo;
	struct recipe r;
	json_t *extra, *oci, *a;
	char *passwd, *data = NULL;
	size_t i;
	int rc;

	memset(&r, 0, sizeof(r));
	r.distro = r.suite = "oci";
	r.variant = "-";
	r.mirror = "";
	oi_recipe_env(oi, &r);
	r.start = oci_start_command(&oi->cfg);
	/* No ready check in an image config: ready once started, within the default. */
	r.ready_timeout_s = RECIPE_READY_TIMEOUT_DEFAULT;
	r.workdir = oi->cfg.workdir != NULL && oi->cfg.workdir[0] == '/' ? oi->cfg.workdir : NULL;
	r.disk_size_mb = oi->o->disk_size_mb ? oi->o->disk_size_mb : oi_disk_mb(root);
	snprintf(r.sha256, sizeof(r.sha256), "%s", oi->manifest_digest ?
	    oi->manifest_digest + 7 : oi->img.config_blob);
	/* The sandbox API runs commands as "user" (as E2B): add it unless the image has it. */
	xasprintf(&passwd, "%s/etc/passwd", root);
	if (read_file(passwd, 4 << 20, &data, NULL, NULL) == 0 &&
	    strncmp(data, "user:", 5) != 0 && strstr(data, "\nuser:") == NULL &&
	    strstr(data, ":1000:") == NULL) {
		r.user_name = "user";
		r.user_uid = 1000;
		r.user_sudo = 1;
	}
	free(data);
	free(passwd);

	oci = json_object();
	json_object_set_new(oci, "format", json_string(oi->is_oci ? "oci-layout" : "docker-save"));
	if (oi->manifest_digest != NULL)
		json_object_set_new(oci, "manifest_digest", json_string(oi->manifest_digest));
	json_object_set_new(oci, "layers", json_integer((json_int_t)oi->img.nlayers));
	a = json_array();
	for (i = 0; i < oi->cfg.nentrypoint; i++)
		json_array_append_new(a, json_string(oi->cfg.entrypoint[i]));
	json_object_set_new(oci, "entrypoint", a);
	a = json_array();
	for (i = 0; i < oi->cfg.ncmd; i++)
		json_array_append_new(a, json_string(oi->cfg.cmd[i]));
	json_object_set_new(oci, "cmd", a);
	a = json_array();
	for (i = 0; i < oi->cfg.nenv; i++)
		json_array_append_new(a, json_string(oi->cfg.env[i]));
	json_object_set_new(oci, "env", a);
	json_object_set_new(oci, "workdir", oi->cfg.workdir ? json_string(oi->cfg.workdir) :
	    json_null());
	json_object_set_new(oci, "user", oi->cfg.user ? json_string(oi->cfg.user) : json_null());
	extra = json_pack("{s:s, s:o}", "source", "oci", "oci", oci);
	/*
	 * The image's USER (a name, UID or UID:GID; the agent resolves it) is
	 * who its start command runs as, root without one, as a container
	 * runtime would; "user" stays the sandbox API's login.
	 */
	r.start_user = oi->cfg.user && *oi->cfg.user ? oi->cfg.user : "root";
	json_object_set_new(extra, "start_user", json_string(r.start_user));

	memset(&tbo, 0, sizeof(tbo));
	tbo.name = oi->o->name;
	tbo.recipe_path = oi->o->image;
	tbo.agent_bin = oi->o->agent_bin;
	tbo.progress = oi_tb_progress;
	tbo.progress_arg = oi;
	rc = template_build_tree(&r, &tbo, root, extra, cause);
	json_decref(extra);
	for (i = 0; i < r.nenv; i++) {
		free(r.env[i].key);
		free(r.env[i].value);
	}
	free(r.env);
	free(r.start);
	return rc;
}

int
oci_import(const struct oci_import_opts *o, char **cause)
{
	struct oi oi;
	char *root = NULL;
	int rootfd = -1, rc = -1;

	memset(&oi, 0, sizeof(oi));
	oi.o = o;
	oi.imgfd = -1;
	oi.budget.max_bytes = o->max_bytes ? o->max_bytes : OCI_IMPORT_MAX_BYTES;
	oi.budget.max_entries = OCI_IMPORT_MAX_ENTRIES;
	if (!paths_valid_name(o->name)) {
		cause_set(cause, "name: \"%s\" must match [a-z0-9][a-z0-9._-]{0,62}", o->name);
		return -1;
	}
	oi.workdir = paths_data("build/%s.oci.%ld", o->name, (long)getpid());
	if (remove_tree(oi.workdir, cause) == -1 || mkdir_p(oi.workdir, 0700, cause) == -1)
		goto out;
	if (oi_read_image(&oi, cause) == -1)
		goto out;
	oi_progress(&oi, 2, "check %zu layer(s): names, links, types, digests", oi.img.nlayers);
	if (oi_layers(&oi, -1, cause) == -1)
		goto out;
	if (o->checked != NULL)
		o->checked(o->arg);
	oi_progress(&oi, 3, "apply %zu layer(s), %llu MiB", oi.img.nlayers,
	    (unsigned long long)(oi.budget.bytes >> 20));
	xasprintf(&root, "%s/root", oi.workdir);
	if (mkdir(root, 0755) == -1 ||
	    (rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
		cause_set(cause, "%s: %s", root, strerror(errno));
		goto out;
	}
	if (oi_layers(&oi, rootfd, cause) == -1 || oi_build(&oi, root, cause) == -1)
		goto out;
	rc = 0;
out:
	if (rootfd != -1)
		close(rootfd);
	if (oi.imgfd != -1)
		close(oi.imgfd);
	if (oi.workdir != NULL && remove_tree(oi.workdir, NULL) == -1)
		log_warnx("could not remove %s", oi.workdir);
	oci_image_free(&oi.img);
	oci_config_free(&oi.cfg);
	free(oi.manifest_digest);
	free(oi.workdir);
	free(root);
	return rc;
}
