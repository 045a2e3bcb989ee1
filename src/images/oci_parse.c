/*
 * OCI image documents and layer entry names (oci_parse.h). Every document
 * comes from the user's image file, so each field is checked for type and
 * size, and errors name the field.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/util.h"
#include "images/oci_parse.h"

#define MT_OCI_INDEX	"application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST	"application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST	"application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MAN	"application/vnd.docker.distribution.manifest.v2+json"

static json_t *
oci_load(const char *text, size_t len, const char *what, char **cause)
{
	json_error_t err;
	json_t *j;

	if (len > OCI_JSON_MAX) {
		cause_set(cause, "%s: larger than %d bytes", what, OCI_JSON_MAX);
		return NULL;
	}
	if ((j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err)) == NULL) {
		cause_set(cause, "%s: not JSON (line %d: %s)", what, err.line, err.text);
		return NULL;
	}
	return j;
}

char *
oci_digest_blob(const char *digest)
{
	const char *hex;
	char *p;

	if (digest == NULL || strncmp(digest, "sha256:", 7) != 0)
		return NULL;
	hex = digest + 7;
	if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64)
		return NULL;
	xasprintf(&p, "blobs/sha256/%s", hex);
	return p;
}

int
oci_valid_member(const char *path)
{
	const char *p = path, *e;
	size_t n;

	if (path == NULL || *path == '\0' || *path == '/' || strlen(path) > OCI_PATH_MAX)
		return 0;
	for (;;) {
		e = strchr(p, '/');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (e == NULL)
			return 1;
		p = e + 1;
	}
}

/* A descriptor's digest: a valid sha256 digest, its blob path in *blob. */
static int
oci_descriptor(json_t *d, const char *what, char **blob, char **digest, char **cause)
{
	const char *dg;

	if (!json_is_object(d)) {
		cause_set(cause, "%s: must be a descriptor object", what);
		return -1;
	}
	dg = json_string_value(json_object_get(d, "digest"));
	if ((*blob = oci_digest_blob(dg)) == NULL) {
		cause_set(cause, "%s.digest: must be \"sha256:\" and 64 lowercase hex digits "
		    "(other algorithms are not supported)", what);
		return -1;
	}
	*digest = xstrdup(dg);
	return 0;
}

static int
oci_platform_ok(json_t *m)
{
	json_t *p = json_object_get(m, "platform");
	const char *os, *arch;

	if (p == NULL)
		return 1;
	os = json_string_value(json_object_get(p, "os"));
	arch = json_string_value(json_object_get(p, "architecture"));
	return (os == NULL || strcmp(os, "linux") == 0) &&
	    (arch == NULL || strcmp(arch, "amd64") == 0);
}

int
oci_parse_index(const char *text, size_t len, char **blob, char **digest, int *is_index,
    char **cause)
{
	json_t *j, *ms, *m;
	const char *mt;
	size_t i;
	int rc = -1;
	char what[48];

	*blob = *digest = NULL;
	*is_index = 0;
	if ((j = oci_load(text, len, "index.json", cause)) == NULL)
		return -1;
	if (!json_is_object(j) || json_integer_value(json_object_get(j, "schemaVersion")) != 2) {
		cause_set(cause, "index.json: schemaVersion must be 2");
		goto out;
	}
	ms = json_object_get(j, "manifests");
	if (!json_is_array(ms) || json_array_size(ms) == 0) {
		cause_set(cause, "index.json: manifests must be a non-empty array");
		goto out;
	}
	json_array_foreach(ms, i, m) {
		snprintf(what, sizeof(what), "index.json: manifests[%zu]", i);
		if (!json_is_object(m)) {
			cause_set(cause, "%s: must be an object", what);
			goto out;
		}
		mt = json_string_value(json_object_get(m, "mediaType"));
		if (mt == NULL || !oci_platform_ok(m))
			continue;
		if (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0)
			*is_index = 1;
		else if (strcmp(mt, MT_OCI_MANIFEST) != 0 && strcmp(mt, MT_DOCKER_MAN) != 0)
			continue;	/* attestations, signatures, other artifacts */
		rc = oci_descriptor(m, what, blob, digest, cause);
		goto out;
	}
	cause_set(cause, "index.json: no linux/amd64 image manifest among %zu entries",
	    json_array_size(ms));
out:
	json_decref(j);
	return rc;
}

static void
oci_image_add(struct oci_image *img, char *blob, char *digest)
{
	img->layers = xreallocarray(img->layers, img->nlayers + 1, sizeof(*img->layers));
	img->layers[img->nlayers].blob = blob;
	img->layers[img->nlayers].digest = digest;
	img->nlayers++;
}

/* Layer media types we can read: tar, optionally gzip or zstd; nothing foreign or encrypted. */
static int
oci_layer_type_ok(const char *mt)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar",
		"application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.v1.tar+zstd",
		"application/vnd.docker.image.rootfs.diff.tar.gzip",
		"application/vnd.docker.image.rootfs.diff.tar",
		NULL,
	};
	size_t i;

	for (i = 0; ok[i] != NULL; i++)
		if (strcmp(mt, ok[i]) == 0)
			return 1;
	return 0;
}

/*
 * The one unwind for both manifest formats: parse text as JSON, read its
 * fields into img with fields(), and on any failure leave img empty.
 */
static int
oci_parse_image(const char *text, size_t len, const char *what,
    int (*fields)(json_t *, struct oci_image *, char **), struct oci_image *img, char **cause)
{
	json_t *j;
	int rc;

	memset(img, 0, sizeof(*img));
	if ((j = oci_load(text, len, what, cause)) == NULL)
		return -1;
	if ((rc = fields(j, img, cause)) == -1)
		oci_image_free(img);
	json_decref(j);
	return rc;
}

static int
oci_manifest_fields(json_t *j, struct oci_image *img, char **cause)
{
	json_t *ls, *l;
	const char *mt;
	char *blob, *digest, what[48];
	size_t i;

	if (!json_is_object(j) || json_integer_value(json_object_get(j, "schemaVersion")) != 2) {
		cause_set(cause, "manifest: schemaVersion must be 2");
		return -1;
	}
	if (oci_descriptor(json_object_get(j, "config"), "manifest: config", &img->config_blob,
	    &img->config_digest, cause) == -1)
		return -1;
	ls = json_object_get(j, "layers");
	if (!json_is_array(ls) || json_array_size(ls) > OCI_LAYERS_MAX) {
		cause_set(cause, "manifest: layers must be an array of at most %d", OCI_LAYERS_MAX);
		return -1;
	}
	json_array_foreach(ls, i, l) {
		snprintf(what, sizeof(what), "manifest: layers[%zu]", i);
		mt = json_string_value(json_object_get(l, "mediaType"));
		if (json_is_object(l) && (mt == NULL || !oci_layer_type_ok(mt))) {
			cause_set(cause, "%s.mediaType: \"%s\" is not a tar layer (tar, tar+gzip, "
			    "tar+zstd)", what, mt != NULL ? mt : "(missing)");
			return -1;
		}
		if (oci_descriptor(l, what, &blob, &digest, cause) == -1)
			return -1;
		oci_image_add(img, blob, digest);
	}
	return 0;
}

int
oci_parse_manifest(const char *text, size_t len, struct oci_image *img, char **cause)
{
	return oci_parse_image(text, len, "manifest", oci_manifest_fields, img, cause);
}

static int
oci_docker_manifest_fields(json_t *j, struct oci_image *img, char **cause)
{
	json_t *first, *ls, *l;
	const char *cfg, *p;
	size_t i;

	if (!json_is_array(j) || (first = json_array_get(j, 0)) == NULL ||
	    !json_is_object(first)) {
		cause_set(cause, "manifest.json: must be a non-empty array of image objects");
		return -1;
	}
	cfg = json_string_value(json_object_get(first, "Config"));
	if (!oci_valid_member(cfg)) {
		cause_set(cause, "manifest.json: [0].Config must be a relative path inside the tar");
		return -1;
	}
	img->config_blob = xstrdup(cfg);
	ls = json_object_get(first, "Layers");
	if (!json_is_array(ls) || json_array_size(ls) > OCI_LAYERS_MAX) {
		cause_set(cause, "manifest.json: [0].Layers must be an array of at most %d",
		    OCI_LAYERS_MAX);
		return -1;
	}
	json_array_foreach(ls, i, l) {
		if (!oci_valid_member(p = json_string_value(l))) {
			cause_set(cause, "manifest.json: [0].Layers[%zu] must be a relative path "
			    "inside the tar", i);
			return -1;
		}
		oci_image_add(img, xstrdup(p), NULL);
	}
	return 0;
}

int
oci_parse_docker_manifest(const char *text, size_t len, struct oci_image *img, char **cause)
{
	return oci_parse_image(text, len, "manifest.json", oci_docker_manifest_fields, img,
	    cause);
}

/* An array of strings (NULL or missing: none); each at most OCI_PATH_MAX. */
static int
oci_strings(json_t *a, const char *what, size_t max, char ***out, size_t *n, char **cause)
{
	json_t *v;
	size_t i;

	*out = NULL;
	*n = 0;
	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a) || json_array_size(a) > max) {
		cause_set(cause, "config: %s must be an array of at most %zu strings", what, max);
		return -1;
	}
	*out = xcalloc(json_array_size(a) + 1, sizeof(**out));
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || json_string_length(v) > OCI_PATH_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			cause_set(cause, "config: %s[%zu] must be a string without NUL of at most "
			    "%d bytes", what, i, OCI_PATH_MAX);
			return -1;
		}
		(*out)[(*n)++] = xstrdup(json_string_value(v));
	}
	return 0;
}

static int
oci_string(json_t *o, const char *key, char **out, char **cause)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) > OCI_PATH_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		cause_set(cause, "config: %s must be a string without NUL", key);
		return -1;
	}
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int
oci_config_fields(json_t *j, struct oci_config *cfg, char **cause)
{
	json_t *c;

	if (!json_is_object(j)) {
		cause_set(cause, "config: must be an object");
		return -1;
	}
	if (oci_string(j, "os", &cfg->os, cause) == -1 ||
	    oci_string(j, "architecture", &cfg->arch, cause) == -1)
		return -1;
	if ((cfg->os != NULL && strcmp(cfg->os, "linux") != 0) ||
	    (cfg->arch != NULL && strcmp(cfg->arch, "amd64") != 0)) {
		cause_set(cause, "config: image is for %s/%s; only linux/amd64 runs here",
		    cfg->os ? cfg->os : "?", cfg->arch ? cfg->arch : "?");
		return -1;
	}
	c = json_object_get(j, "config");
	if (c != NULL && !json_is_null(c)) {
		if (!json_is_object(c)) {
			cause_set(cause, "config: config must be an object");
			return -1;
		}
		if (oci_strings(json_object_get(c, "Env"), "config.Env", OCI_ENV_MAX, &cfg->env,
		    &cfg->nenv, cause) == -1 ||
		    oci_strings(json_object_get(c, "Entrypoint"), "config.Entrypoint", OCI_ARGS_MAX,
		    &cfg->entrypoint, &cfg->nentrypoint, cause) == -1 ||
		    oci_strings(json_object_get(c, "Cmd"), "config.Cmd", OCI_ARGS_MAX, &cfg->cmd,
		    &cfg->ncmd, cause) == -1 ||
		    oci_string(c, "WorkingDir", &cfg->workdir, cause) == -1 ||
		    oci_string(c, "User", &cfg->user, cause) == -1)
			return -1;
	}
	return 0;
}

int
oci_parse_config(const char *text, size_t len, struct oci_config *cfg, char **cause)
{
	json_t *j;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if ((j = oci_load(text, len, "config", cause)) == NULL)
		return -1;
	if ((rc = oci_config_fields(j, cfg, cause)) == -1)
		oci_config_free(cfg);
	json_decref(j);
	return rc;
}

void
oci_image_free(struct oci_image *img)
{
	size_t i;

	for (i = 0; i < img->nlayers; i++) {
		free(img->layers[i].blob);
		free(img->layers[i].digest);
	}
	free(img->layers);
	free(img->config_blob);
	free(img->config_digest);
	memset(img, 0, sizeof(*img));
}

static void
oci_strv_free(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void
oci_config_free(struct oci_config *cfg)
{
	oci_strv_free(cfg->env, cfg->nenv);
	oci_strv_free(cfg->entrypoint, cfg->nentrypoint);
	oci_strv_free(cfg->cmd, cfg->ncmd);
	free(cfg->workdir);
	free(cfg->user);
	free(cfg->os);
	free(cfg->arch);
	memset(cfg, 0, sizeof(*cfg));
}

/* Collapse "//" and drop "./" components; refuse ".." anywhere. */
static int
oci_normalize(const char *name, char **out, char **cause)
{
	const char *p, *e;
	char *buf, *w;
	size_t n;

	*out = NULL;
	if (strlen(name) > OCI_PATH_MAX) {
		cause_set(cause, "path longer than %d bytes", OCI_PATH_MAX);
		return -1;
	}
	buf = w = xmalloc(strlen(name) + 1);
	for (p = name; *p != '\0'; p = e) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		e = p + strcspn(p, "/");
		n = (size_t)(e - p);
		if (n == 1 && p[0] == '.')
			continue;
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			cause_set(cause, "path has a \"..\" component");
			free(buf);
			return -1;
		}
		if (w != buf)
			*w++ = '/';
		memcpy(w, p, n);
		w += n;
	}
	*w = '\0';
	*out = buf;
	return 0;
}

int
oci_entry_path(const char *name, char **out, enum oci_entry_kind *kind, char **cause)
{
	char *norm, *base, *slash;

	*out = NULL;
	*kind = OCI_ENTRY_PLAIN;
	if (oci_normalize(name, &norm, cause) == -1)
		return -1;
	if (*norm == '\0') {
		*kind = OCI_ENTRY_ROOT;
		*out = norm;
		return 0;
	}
	slash = strrchr(norm, '/');
	base = slash != NULL ? slash + 1 : norm;
	if (strcmp(base, ".wh..wh..opq") == 0) {
		*kind = OCI_ENTRY_OPAQUE;
		if (slash != NULL)
			*slash = '\0';
		else
			*norm = '\0';	/* the root is opaque */
	} else if (strncmp(base, ".wh.", 4) == 0) {
		*kind = OCI_ENTRY_WHITEOUT;
		if (base[4] == '\0' || strcmp(base + 4, ".") == 0 || strcmp(base + 4, "..") == 0 ||
		    strncmp(base + 4, ".wh.", 4) == 0) {
			cause_set(cause, "whiteout \"%s\" names no file", base);
			free(norm);
			return -1;
		}
		memmove(base, base + 4, strlen(base + 4) + 1);
	}
	*out = norm;
	return 0;
}

int
oci_link_path(const char *target, char **out, char **cause)
{
	enum oci_entry_kind kind;

	if (oci_entry_path(target, out, &kind, cause) == -1)
		return -1;
	if (kind != OCI_ENTRY_PLAIN) {
		cause_set(cause, "hard link to \"%s\": not a file an entry can name", target);
		free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}

/* One shell word: safe characters as they are, anything else in single quotes. */
static void
oci_quote(char **s, const char *w)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789-_./=:,+@%";
	const char *p;
	char *n, *q;
	size_t len;

	if (*w != '\0' && strspn(w, safe) == strlen(w)) {
		xasprintf(&n, "%s%s%s", *s, **s ? " " : "", w);
	} else {
		len = strlen(w);
		q = xmalloc(len * 4 + 3);
		n = q;
		*q++ = '\'';
		for (p = w; *p != '\0'; p++) {
			if (*p == '\'') {
				memcpy(q, "'\\''", 4);
				q += 4;
			} else
				*q++ = *p;
		}
		*q++ = '\'';
		*q = '\0';
		xasprintf(&q, "%s%s%s", *s, **s ? " " : "", n);
		free(n);
		n = q;
	}
	free(*s);
	*s = n;
}

char *
oci_start_command(const struct oci_config *cfg)
{
	char *s;
	size_t i;

	if (cfg->nentrypoint == 0 && cfg->ncmd == 0)
		return NULL;
	s = xstrdup("");
	for (i = 0; i < cfg->nentrypoint; i++)
		oci_quote(&s, cfg->entrypoint[i]);
	for (i = 0; i < cfg->ncmd; i++)
		oci_quote(&s, cfg->cmd[i]);
	return s;
}
