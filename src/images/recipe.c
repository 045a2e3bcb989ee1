/* Strict JSON recipe parser (jansson) with field-level errors. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/digest.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/recipe.h"

#define RECIPE_STR_MAX	4096

static const char *const recipe_top_fields[] = {
	"name", "description", "from", "packages", "user", "files", "env", "run",
	"start", "ready", "workdir", "disk_size_mb", "template", "allow", "step_timeout_s", NULL
};
static const char *const recipe_ready_fields[] = { "port", "cmd", "timeout_s", NULL };
static const char *const recipe_from_fields[] = { "distro", "suite", "variant", "mirror", NULL };
static const char *const recipe_user_fields[] = { "name", "uid", "sudo", NULL };
static const char *const recipe_file_fields[] = { "src", "dst", "mode", NULL };
static const char *const recipe_suites[] = { "bookworm", "trixie", "bullseye", NULL };
static const char *const recipe_variants[] = { "minbase", "buildd", "-", NULL };

static int
in_list(const char *s, const char *const *list)
{
	for (; *list != NULL; list++)
		if (strcmp(s, *list) == 0)
			return 1;
	return 0;
}

static int
check_fields(json_t *obj, const char *where, const char *const *allowed, char **cause)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		if (!in_list(key, allowed)) {
			cause_set(cause, "%s%sunknown field \"%s\"", where, *where ? ": " : "", key);
			return -1;
		}
	}
	return 0;
}

/* A string field: NULL when absent (if optional); errors name the field. */
static int
get_string(json_t *obj, const char *key, const char *where, int required, char **out,
    char **cause)
{
	json_t *v = json_object_get(obj, key);
	const char *s;

	*out = NULL;
	if (v == NULL) {
		if (required) {
			cause_set(cause, "%s%s: required", where, key);
			return -1;
		}
		return 0;
	}
	/* null is not "absent": leave the field out to get the default. */
	if (json_is_null(v)) {
		cause_set(cause, "%s%s: must not be null (leave it out for the default)", where, key);
		return -1;
	}
	if (!json_is_string(v)) {
		cause_set(cause, "%s%s: must be a string", where, key);
		return -1;
	}
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || strlen(s) > RECIPE_STR_MAX) {
		cause_set(cause, "%s%s: must be at most %d bytes without NUL", where, key,
		    RECIPE_STR_MAX);
		return -1;
	}
	*out = xstrdup(s);
	return 0;
}

int
recipe_valid_package(const char *name)
{
	size_t i, len = strlen(name);

	/* Debian policy 5.6.1, plus an optional =version is not accepted here. */
	if (len < 2 || len > 128)
		return 0;
	if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
		return 0;
	for (i = 1; i < len; i++) {
		char c = name[i];
		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
		    c == '-' || c == '.')
			continue;
		return 0;
	}
	return 1;
}

int
recipe_valid_env_key(const char *key)
{
	size_t i, len = strlen(key);

	if (len == 0 || len > 256 || (key[0] >= '0' && key[0] <= '9'))
		return 0;
	for (i = 0; i < len; i++) {
		char c = key[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '_'))
			return 0;
	}
	return 1;
}

char *
recipe_guest_path(const char *path)
{
	char *out, *o;
	const char *p = path, *seg;
	size_t n;

	if (path[0] != '/' || strlen(path) >= PATH_MAX)
		return NULL;
	out = o = xmalloc(strlen(path) + 2);
	while (*p != '\0') {
		while (*p == '/')
			p++;
		if (*p == '\0')
			break;
		seg = p;
		n = strcspn(p, "/");
		p += n;
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			free(out);
			return NULL;
		}
		*o++ = '/';
		memcpy(o, seg, n);
		o += n;
	}
	if (o == out)
		*o++ = '/';
	*o = '\0';
	if (strpbrk(out, "\n\r") != NULL) {
		free(out);
		return NULL;
	}
	return out;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
parse_from(json_t *root, struct recipe *r, char **cause)
{
	json_t *from = json_object_get(root, "from");

	if (from == NULL && json_object_get(root, "template") != NULL) {
		/* On a template: nothing is bootstrapped; the mirror is the default allowlist. */
		r->distro = xstrdup("debian");
		r->suite = xstrdup("bookworm");
		r->variant = xstrdup("minbase");
		r->mirror = xstrdup("http://deb.debian.org/debian");
		return 0;
	}
	if (from == NULL) {
		cause_set(cause, "from: required (e.g. {\"distro\":\"debian\",\"suite\":\"bookworm\"})");
		return -1;
	}
	if (!json_is_object(from)) {
		cause_set(cause, "from: must be an object");
		return -1;
	}
	if (check_fields(from, "from", recipe_from_fields, cause) == -1)
		return -1;
	if (get_string(from, "distro", "from.", 1, &r->distro, cause) == -1 ||
	    get_string(from, "suite", "from.", 1, &r->suite, cause) == -1 ||
	    get_string(from, "variant", "from.", 0, &r->variant, cause) == -1 ||
	    get_string(from, "mirror", "from.", 0, &r->mirror, cause) == -1)
		return -1;
	if (strcmp(r->distro, "debian") != 0) {
		cause_set(cause, "from.distro: \"%s\" not supported (only \"debian\")", r->distro);
		return -1;
	}
	if (!in_list(r->suite, recipe_suites)) {
		cause_set(cause, "from.suite: \"%s\" not supported (bookworm, trixie, bullseye)",
		    r->suite);
		return -1;
	}
	if (r->variant == NULL)
		r->variant = xstrdup("minbase");
	if (!in_list(r->variant, recipe_variants)) {
		cause_set(cause, "from.variant: \"%s\" not supported (minbase, buildd, -)",
		    r->variant);
		return -1;
	}
	if (r->mirror == NULL)
		r->mirror = xstrdup("http://deb.debian.org/debian");
	if (strncmp(r->mirror, "http://", 7) != 0 && strncmp(r->mirror, "https://", 8) != 0) {
		cause_set(cause, "from.mirror: must be an http:// or https:// URL");
		return -1;
	}
	if (strpbrk(r->mirror, " \t\n'\"") != NULL) {
		cause_set(cause, "from.mirror: may not contain spaces or quotes");
		return -1;
	}
	return 0;
}

static int
parse_packages(json_t *root, struct recipe *r, char **cause)
{
	json_t *pk = json_object_get(root, "packages"), *v;
	size_t i, n;

	if (pk == NULL)
		return 0;
	if (!json_is_array(pk)) {
		cause_set(cause, "packages: must be an array of package names");
		return -1;
	}
	if ((n = json_array_size(pk)) > RECIPE_PACKAGES_MAX) {
		cause_set(cause, "packages: at most %d", RECIPE_PACKAGES_MAX);
		return -1;
	}
	r->packages = xcalloc(n + 1, sizeof(char *));
	json_array_foreach(pk, i, v) {
		if (!json_is_string(v) || !recipe_valid_package(json_string_value(v))) {
			cause_set(cause, "packages[%zu]: not a valid Debian package name", i);
			return -1;
		}
		r->packages[r->npackages++] = xstrdup(json_string_value(v));
	}
	qsort(r->packages, r->npackages, sizeof(char *), cmp_str);
	for (i = 1; i < r->npackages; i++) {
		if (strcmp(r->packages[i], r->packages[i - 1]) == 0) {
			cause_set(cause, "packages: \"%s\" listed twice", r->packages[i]);
			return -1;
		}
	}
	return 0;
}

static int
parse_user(json_t *root, struct recipe *r, char **cause)
{
	json_t *u = json_object_get(root, "user"), *uid, *sudo;
	const char *n;
	size_t i;

	if (u == NULL)
		return 0;
	if (!json_is_object(u)) {
		cause_set(cause, "user: must be an object {name, uid, sudo}");
		return -1;
	}
	if (check_fields(u, "user", recipe_user_fields, cause) == -1)
		return -1;
	if (get_string(u, "name", "user.", 1, &r->user_name, cause) == -1)
		return -1;
	n = r->user_name;
	if (*n == '\0' || strlen(n) > 32 || strcmp(n, "root") == 0) {
		cause_set(cause, "user.name: must be 1..32 characters and not root");
		return -1;
	}
	for (i = 0; n[i] != '\0'; i++) {
		if (!((n[i] >= 'a' && n[i] <= 'z') || (i > 0 && ((n[i] >= '0' && n[i] <= '9') ||
		    n[i] == '-' || n[i] == '_')))) {
			cause_set(cause, "user.name: \"%s\" must match [a-z][a-z0-9_-]*", n);
			return -1;
		}
	}
	uid = json_object_get(u, "uid");
	if (uid == NULL)
		r->user_uid = 1000;
	else if (!json_is_integer(uid) || json_integer_value(uid) < 1000 ||
	    json_integer_value(uid) > 60000) {
		cause_set(cause, "user.uid: must be an integer in 1000..60000");
		return -1;
	} else
		r->user_uid = (unsigned)json_integer_value(uid);
	sudo = json_object_get(u, "sudo");
	if (sudo != NULL && !json_is_boolean(sudo)) {
		cause_set(cause, "user.sudo: must be true or false");
		return -1;
	}
	r->user_sudo = sudo != NULL && json_is_true(sudo);
	return 0;
}

static int
parse_mode(json_t *v, size_t i, unsigned *mode, char **cause)
{
	const char *s, *p;
	unsigned m = 0;

	if (v == NULL) {
		*mode = 0644;
		return 0;
	}
	if (!json_is_string(v) || *(s = json_string_value(v)) == '\0' || strlen(s) > 4) {
		cause_set(cause, "files[%zu].mode: must be an octal string like \"0755\"", i);
		return -1;
	}
	for (p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '7') {
			cause_set(cause, "files[%zu].mode: must be an octal string like \"0755\"", i);
			return -1;
		}
		m = m * 8 + (unsigned)(*p - '0');
	}
	*mode = m & 07777;
	return 0;
}

static int
parse_files(json_t *root, const char *base_dir, struct recipe *r, char **cause)
{
	json_t *fs = json_object_get(root, "files"), *f;
	char where[64], *src = NULL, *dst = NULL;
	size_t i, n;

	if (fs == NULL)
		return 0;
	if (!json_is_array(fs) || (n = json_array_size(fs)) > RECIPE_FILES_MAX) {
		cause_set(cause, "files: must be an array of at most %d {src, dst, mode}",
		    RECIPE_FILES_MAX);
		return -1;
	}
	r->files = xcalloc(n + 1, sizeof(*r->files));
	json_array_foreach(fs, i, f) {
		struct recipe_file *rf = &r->files[r->nfiles];

		if (!json_is_object(f)) {
			cause_set(cause, "files[%zu]: must be an object {src, dst, mode}", i);
			return -1;
		}
		snprintf(where, sizeof(where), "files[%zu]", i);
		if (check_fields(f, where, recipe_file_fields, cause) == -1)
			return -1;
		snprintf(where, sizeof(where), "files[%zu].", i);
		if (get_string(f, "src", where, 1, &src, cause) == -1 ||
		    get_string(f, "dst", where, 1, &dst, cause) == -1 ||
		    parse_mode(json_object_get(f, "mode"), i, &rf->mode, cause) == -1) {
			free(src);
			free(dst);
			return -1;
		}
		if (src[0] == '/')
			rf->src = src;
		else {
			xasprintf(&rf->src, "%s/%s", base_dir, src);
			free(src);
		}
		src = NULL;
		r->nfiles++;
		if ((rf->dst = recipe_guest_path(dst)) == NULL || strcmp(rf->dst, "/") == 0) {
			cause_set(cause, "files[%zu].dst: \"%s\" must be an absolute path "
			    "without . or .. components", i, dst);
			free(dst);
			return -1;
		}
		free(dst);
		dst = NULL;
		if (access(rf->src, R_OK) == -1) {
			cause_set(cause, "files[%zu].src: %s: %s", i, rf->src, strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int
parse_env(json_t *root, struct recipe *r, char **cause)
{
	json_t *env = json_object_get(root, "env"), *v;
	const char *key;

	if (env == NULL)
		return 0;
	if (!json_is_object(env) || json_object_size(env) > RECIPE_ENV_MAX) {
		cause_set(cause, "env: must be an object of at most %d string values",
		    RECIPE_ENV_MAX);
		return -1;
	}
	r->env = xcalloc(json_object_size(env) + 1, sizeof(*r->env));
	json_object_foreach(env, key, v) {
		if (!recipe_valid_env_key(key)) {
			cause_set(cause, "env: \"%s\" is not a valid variable name", key);
			return -1;
		}
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
		    strchr(json_string_value(v), '\n') != NULL) {
			cause_set(cause, "env.%s: must be a string without NUL or newlines", key);
			return -1;
		}
		r->env[r->nenv].key = xstrdup(key);
		r->env[r->nenv].value = xstrdup(json_string_value(v));
		r->nenv++;
	}
	return 0;
}

static int
parse_run(json_t *root, struct recipe *r, char **cause)
{
	json_t *run = json_object_get(root, "run"), *v;
	size_t i;

	if (run == NULL)
		return 0;
	if (!json_is_array(run) || json_array_size(run) > RECIPE_RUN_MAX) {
		cause_set(cause, "run: must be an array of at most %d command strings",
		    RECIPE_RUN_MAX);
		return -1;
	}
	r->run = xcalloc(json_array_size(run) + 1, sizeof(char *));
	json_array_foreach(run, i, v) {
		if (!json_is_string(v) || *json_string_value(v) == '\0') {
			cause_set(cause, "run[%zu]: must be a non-empty command string", i);
			return -1;
		}
		r->run[r->nrun++] = xstrdup(json_string_value(v));
	}
	return 0;
}

/* Run-step settings: the base template, the network allowlist, the time limit. */
static int
parse_steps(json_t *root, struct recipe *r, char **cause)
{
	json_t *t = json_object_get(root, "template"), *a = json_object_get(root, "allow"), *v;
	json_t *to = json_object_get(root, "step_timeout_s");
	const char *s;
	size_t i;

	if (t != NULL) {
		if (!json_is_string(t) || !paths_valid_name(json_string_value(t))) {
			cause_set(cause, "template: must be a template name ([a-z0-9][a-z0-9._-]*)");
			return -1;
		}
		if (json_object_get(root, "from") != NULL ||
		    json_object_get(root, "packages") != NULL) {
			cause_set(cause, "template: a recipe on a template has no \"from\" or "
			    "\"packages\" (install them with run steps)");
			return -1;
		}
		r->base_template = xstrdup(json_string_value(t));
	}
	if (a != NULL) {
		if (!json_is_array(a) || json_array_size(a) > RECIPE_ALLOW_MAX) {
			cause_set(cause, "allow: must be an array of at most %d host names",
			    RECIPE_ALLOW_MAX);
			return -1;
		}
		r->allow = xcalloc(json_array_size(a) + 1, sizeof(char *));
		json_array_foreach(a, i, v) {
			s = json_string_value(v);
			if (s == NULL || *s == '\0' || strlen(s) > 253 || strspn(s,
			    "abcdefghijklmnopqrstuvwxyz0123456789.-*") != strlen(s)) {
				cause_set(cause, "allow[%zu]: must be a lowercase host name "
				    "(\"*.example.com\" for subdomains)", i);
				return -1;
			}
			r->allow[r->nallow++] = xstrdup(s);
		}
	}
	r->step_timeout_s = RECIPE_STEP_TIMEOUT_S_DEFAULT;
	if (to != NULL) {
		if (!json_is_integer(to) || json_integer_value(to) < 1 ||
		    json_integer_value(to) > RECIPE_STEP_TIMEOUT_S_MAX) {
			cause_set(cause, "step_timeout_s: must be an integer in 1..%d",
			    RECIPE_STEP_TIMEOUT_S_MAX);
			return -1;
		}
		r->step_timeout_s = (unsigned)json_integer_value(to);
	}
	return 0;
}

/*
 * start and ready: what the agent starts at boot and how it knows the
 * service is up (docs/templates.md "Start command"). Both are guest
 * commands run by /bin/sh -c as the template's user; only their shape is
 * checked here.
 */
static int
parse_start(json_t *root, struct recipe *r, char **cause)
{
	json_t *rd = json_object_get(root, "ready"), *port, *tmo;

	if (get_string(root, "start", "", 0, &r->start, cause) == -1)
		return -1;
	if (r->start != NULL && (*r->start == '\0' || strpbrk(r->start, "\n\r") != NULL)) {
		cause_set(cause, "start: must be a non-empty one-line command");
		return -1;
	}
	r->ready_timeout_s = RECIPE_READY_TIMEOUT_DEFAULT;
	if (rd == NULL)
		return 0;
	if (r->start == NULL) {
		cause_set(cause, "ready: needs a start command (\"start\")");
		return -1;
	}
	if (!json_is_object(rd)) {
		cause_set(cause, "ready: must be an object {port | cmd, timeout_s}");
		return -1;
	}
	if (check_fields(rd, "ready", recipe_ready_fields, cause) == -1 ||
	    get_string(rd, "cmd", "ready.", 0, &r->ready_cmd, cause) == -1)
		return -1;
	port = json_object_get(rd, "port");
	if ((port == NULL) == (r->ready_cmd == NULL)) {
		cause_set(cause, "ready: exactly one of port (a guest TCP port that accepts) or "
		    "cmd (a command that exits 0)");
		return -1;
	}
	if (port != NULL && (!json_is_integer(port) || json_integer_value(port) < 1 ||
	    json_integer_value(port) > 65535)) {
		cause_set(cause, "ready.port: must be an integer in 1..65535");
		return -1;
	}
	if (port != NULL)
		r->ready_port = (unsigned)json_integer_value(port);
	if (r->ready_cmd != NULL && (*r->ready_cmd == '\0' ||
	    strpbrk(r->ready_cmd, "\n\r") != NULL)) {
		cause_set(cause, "ready.cmd: must be a non-empty one-line command");
		return -1;
	}
	if ((tmo = json_object_get(rd, "timeout_s")) != NULL) {
		if (!json_is_integer(tmo) || json_integer_value(tmo) < 1 ||
		    json_integer_value(tmo) > RECIPE_READY_TIMEOUT_MAX) {
			cause_set(cause, "ready.timeout_s: must be an integer in 1..%d",
			    RECIPE_READY_TIMEOUT_MAX);
			return -1;
		}
		r->ready_timeout_s = (unsigned)json_integer_value(tmo);
	}
	return 0;
}

static int
parse_disk(json_t *root, struct recipe *r, char **cause)
{
	json_t *d = json_object_get(root, "disk_size_mb");

	r->disk_size_mb = RECIPE_DISK_MB_DEFAULT;
	if (d == NULL)
		return 0;
	if (!json_is_integer(d) || json_integer_value(d) < RECIPE_DISK_MB_MIN ||
	    json_integer_value(d) > RECIPE_DISK_MB_MAX) {
		cause_set(cause, "disk_size_mb: must be an integer in %d..%d",
		    RECIPE_DISK_MB_MIN, RECIPE_DISK_MB_MAX);
		return -1;
	}
	r->disk_size_mb = (unsigned)json_integer_value(d);
	return 0;
}

int
recipe_parse(const char *text, size_t len, const char *base_dir, struct recipe *r,
    char **cause)
{
	json_error_t jerr;
	json_t *root;
	char *desc = NULL, *name = NULL, *wd = NULL;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	sha256_hex(text, len, r->sha256);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		cause_set(cause, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(root)) {
		cause_set(cause, "top level must be a JSON object");
		goto out;
	}
	if (check_fields(root, "", recipe_top_fields, cause) == -1)
		goto out;
	if (get_string(root, "name", "", 0, &name, cause) == -1 ||
	    get_string(root, "description", "", 0, &desc, cause) == -1)
		goto out;
	if (parse_from(root, r, cause) == -1 || parse_packages(root, r, cause) == -1 ||
	    parse_user(root, r, cause) == -1 || parse_files(root, base_dir, r, cause) == -1 ||
	    parse_env(root, r, cause) == -1 || parse_run(root, r, cause) == -1 ||
	    parse_disk(root, r, cause) == -1 || parse_steps(root, r, cause) == -1 ||
	    parse_start(root, r, cause) == -1)
		goto out;
	if (get_string(root, "workdir", "", 0, &wd, cause) == -1)
		goto out;
	if (wd != NULL && (r->workdir = recipe_guest_path(wd)) == NULL) {
		cause_set(cause, "workdir: \"%s\" must be an absolute path without . or ..", wd);
		goto out;
	}
	rc = 0;
out:
	free(wd);
	free(name);
	free(desc);
	json_decref(root);
	if (rc == -1)
		recipe_free(r);
	return rc;
}

int
recipe_load(const char *path, struct recipe *r, char **cause)
{
	char *text, *copy, *dir;
	size_t len;
	int rc;

	if (read_file(path, RECIPE_FILE_MAX, &text, &len, cause) == -1)
		return -1;
	copy = xstrdup(path);
	dir = realpath(dirname(copy), NULL);
	free(copy);
	if (dir == NULL) {
		cause_set(cause, "%s: %s", path, strerror(errno));
		free(text);
		return -1;
	}
	rc = recipe_parse(text, len, dir, r, cause);
	free(dir);
	free(text);
	return rc;
}

void
recipe_free(struct recipe *r)
{
	size_t i;

	free(r->distro);
	free(r->suite);
	free(r->variant);
	free(r->mirror);
	for (i = 0; i < r->npackages; i++)
		free(r->packages[i]);
	free(r->packages);
	free(r->user_name);
	for (i = 0; i < r->nfiles; i++) {
		free(r->files[i].src);
		free(r->files[i].dst);
	}
	free(r->files);
	for (i = 0; i < r->nenv; i++) {
		free(r->env[i].key);
		free(r->env[i].value);
	}
	free(r->env);
	for (i = 0; i < r->nrun; i++)
		free(r->run[i]);
	free(r->run);
	free(r->start);
	free(r->ready_cmd);
	free(r->workdir);
	free(r->base_template);
	for (i = 0; i < r->nallow; i++)
		free(r->allow[i]);
	free(r->allow);
	memset(r, 0, sizeof(*r));
}

void
recipe_bootstrap_key(const struct recipe *r, char out[65])
{
	char *buf, *tmp;
	size_t i;

	xasprintf(&buf, "v1\n%s\n%s\n%s\n%s\n", r->distro, r->suite, r->variant, r->mirror);
	for (i = 0; i < r->npackages; i++) {
		xasprintf(&tmp, "%s%s\n", buf, r->packages[i]);
		free(buf);
		buf = tmp;
	}
	sha256_hex(buf, strlen(buf), out);
	free(buf);
}
