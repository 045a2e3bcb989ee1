/*
 * Template builds. debootstrap runs on the host (Debian's own packages and
 * maintainer scripts, from the configured mirror); recipe "run" steps are
 * arbitrary commands and run only inside a build microVM, never as host
 * root: with opts.stage this file builds the bootable base image (the
 * recipe without its run steps) into the step cache and stops there, and
 * airlockd's api_tbuild.c boots it and runs the steps.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/log.h"
#include "common/paths.h"
#include "common/subproc.h"
#include "common/digest.h"
#include "common/util.h"
#include "images/template_build.h"
#include "images/template_steps.h"

#define TB_STEPS		7
#define TB_STAGE_STEPS		5	/* check, debootstrap, copy, configure, mkfs */
#define TB_BUNDLE		"/etc/ssl/certs/ca-certificates.crt"
#define TB_AGENT_PATH		"/usr/local/bin/airlock-agent"
#define TB_START_PATH		"/etc/airlock/start.json"	/* agent.h AGENT_START_FILE */

struct tb {
	const struct recipe			*r;
	const struct template_build_opts	*o;
	char	*workdir;	/* $DATA/build/<name>.<pid> */
	char	*root;		/* workdir/root */
	char	*image;		/* workdir/rootfs.ext4 */
	char	*kernel_release;
	char	*agent;
	char	 agent_sha[65];
	char	 ca_sha[65];	/* the airlock CA the image trusts */
	char	 boot_key[65];
	char	 base_key[65];	/* stage: the base image's step-cache key */
	int	 step, nsteps;
};

static void
tb_progress(struct tb *tb, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (tb->o->progress != NULL)
		tb->o->progress(tb->o->progress_arg, tb->step, tb->nsteps, msg);
}

char *
template_find_agent(void)
{
	char self[PATH_MAX], *p, *path;
	const char *env = getenv("AIRLOCK_AGENT_BIN");
	ssize_t n;

	if (env != NULL && *env != '\0')
		return xstrdup(env);
	path = paths_data("bin/airlock-agent");
	if (access(path, X_OK) == 0)
		return path;
	free(path);
	/* In the build tree the CLI is build/src/cli/airlock and the agent build/src/guest/agent/. */
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) > 0) {
		self[n] = '\0';
		if ((p = strrchr(self, '/')) != NULL) {
			*p = '\0';
			xasprintf(&path, "%s/../guest/agent/airlock-agent", self);
			if (access(path, X_OK) == 0)
				return path;
			free(path);
		}
	}
	return NULL;
}

static int
tb_kernel_release(struct tb *tb, char **cause)
{
	char *path = paths_data("kernel/current/kernel.json");
	json_error_t err;
	json_t *k;
	const char *rel, *ver;

	if ((k = json_load_file(path, 0, &err)) == NULL) {
		cause_set(cause, "no guest kernel (%s: %s); run make up or scripts/kernel.sh",
		    path, err.text);
		free(path);
		return -1;
	}
	free(path);
	rel = json_string_value(json_object_get(k, "release"));
	ver = json_string_value(json_object_get(k, "version"));
	if (rel == NULL || ver == NULL) {
		cause_set(cause, "kernel.json: release or version missing");
		json_decref(k);
		return -1;
	}
	xasprintf(&tb->kernel_release, "%s (%s)", rel, ver);
	json_decref(k);
	return 0;
}

/* debootstrap names missing packages in "Couldn't find these debs: a b". */
static void
tb_explain_debootstrap(char **cause)
{
	const char *p;
	char *pk;

	if (cause == NULL || *cause == NULL)
		return;
	if ((p = strstr(*cause, "Couldn't find these debs:")) != NULL) {
		p += strlen("Couldn't find these debs:");
		pk = xstrdup(p);
		pk[strcspn(pk, "\n")] = '\0';
		cause_set(cause, "packages: not found in the distribution:%s", pk);
		free(pk);
	}
}

static int
tb_bootstrap(struct tb *tb, char **tree, char **cause)
{
	const struct recipe *r = tb->r;
	char *dir, *tmp, *include = NULL, *s, *variant, *done;
	size_t i;
	int rc;

	recipe_bootstrap_key(r, tb->boot_key);
	dir = paths_cache("rootfs/%s-%s-%.16s", r->suite, r->variant, tb->boot_key);
	xasprintf(&done, "%s/.airlock-complete", dir);
	if (!tb->o->no_cache && path_exists(done)) {
		tb_progress(tb, "debootstrap %s: cached (%s)", r->suite, dir);
		free(done);
		*tree = dir;
		return 0;
	}
	free(done);
	if (mkdir_p(paths_cache_dir(), 0755, cause) == -1) {
		free(dir);
		return -1;
	}
	xasprintf(&tmp, "%s.tmp", dir);
	if (remove_tree(tmp, cause) == -1 || remove_tree(dir, cause) == -1)
		goto fail;
	for (i = 0; i < r->npackages; i++) {
		xasprintf(&s, "%s%s%s", include ? include : "", include ? "," : "", r->packages[i]);
		free(include);
		include = s;
	}
	xasprintf(&variant, "--variant=%s", r->variant);
	xasprintf(&s, "--include=%s", include ? include : "");
	tb_progress(tb, "debootstrap %s %s with %zu packages (about a minute)",
	    r->suite, r->variant, r->npackages);
	{
		const char *argv[9];
		int ac = 0;

		argv[ac++] = "debootstrap";
		argv[ac++] = variant;
		if (include != NULL)
			argv[ac++] = s;
		argv[ac++] = "--components=main";
		argv[ac++] = r->suite;
		argv[ac++] = tmp;
		argv[ac++] = r->mirror;
		argv[ac] = NULL;
		rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, cause);
	}
	free(variant);
	free(s);
	free(include);
	if (rc == -1) {
		tb_explain_debootstrap(cause);
		cause_wrap(cause, "debootstrap");
		remove_tree(tmp, NULL);
		goto fail;
	}
	/* The .debs stay in the cache tree otherwise and bloat every image. */
	{
		const char *argv[] = { "find", NULL, "-type", "f", "-name", "*.deb", "-delete", NULL };
		char *archives;
		xasprintf(&archives, "%s/var/cache/apt/archives", tmp);
		argv[1] = archives;
		rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, cause);
		free(archives);
		if (rc == -1)
			goto fail;
	}
	xasprintf(&done, "%s/.airlock-complete", tmp);
	rc = write_file_atomic(done, "", 0, 0644, cause);
	free(done);
	if (rc == -1 || rename(tmp, dir) == -1) {
		if (rc != -1)
			cause_set(cause, "rename %s: %s", dir, strerror(errno));
		goto fail;
	}
	free(tmp);
	*tree = dir;
	return 0;
fail:
	free(tmp);
	free(dir);
	return -1;
}

static int
tb_copy_tree(struct tb *tb, const char *tree, char **cause)
{
	char *src;
	int rc;

	tb_progress(tb, "copy the root tree into %s", tb->workdir);
	if (remove_tree(tb->workdir, cause) == -1 ||
	    mkdir_p(tb->workdir, 0700, cause) == -1)
		return -1;
	xasprintf(&src, "%s/.", tree);
	{
		const char *argv[] = { "cp", "-a", "--reflink=auto", src, tb->root, NULL };
		if (mkdir(tb->root, 0755) == -1) {
			cause_set(cause, "mkdir %s: %s", tb->root, strerror(errno));
			free(src);
			return -1;
		}
		rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, cause);
	}
	free(src);
	if (rc == 0) {
		char *marker;
		xasprintf(&marker, "%s/.airlock-complete", tb->root);
		unlink(marker);
		free(marker);
	}
	return rc;
}

/* Path inside the tree for a normalized absolute guest path. */
static char *
tb_path(struct tb *tb, const char *guest)
{
	char *p;

	xasprintf(&p, "%s%s", tb->root, guest);
	return p;
}

static int
tb_write(struct tb *tb, const char *guest, const char *data, mode_t mode, uid_t uid,
    gid_t gid, char **cause)
{
	char *path = tb_path(tb, guest), *dir, *slash;
	int rc;

	dir = xstrdup(path);
	if ((slash = strrchr(dir, '/')) != NULL)
		*slash = '\0';
	rc = mkdir_p(dir, 0755, cause);
	free(dir);
	if (rc == 0)
		rc = write_file_atomic(path, data, strlen(data), mode, cause);
	if (rc == 0 && chown(path, uid, gid) == -1) {
		cause_set(cause, "chown %s: %s", path, strerror(errno));
		rc = -1;
	}
	free(path);
	return rc;
}

static int
tb_append(struct tb *tb, const char *guest, const char *line, char **cause)
{
	char *path = tb_path(tb, guest);
	int fd, rc = 0;

	if ((fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) == -1 ||
	    write(fd, line, strlen(line)) != (ssize_t)strlen(line)) {
		cause_set(cause, "append to %s: %s", guest, strerror(errno));
		rc = -1;
	}
	if (fd != -1)
		close(fd);
	free(path);
	return rc;
}

/* Does a colon-separated database (passwd/group) already have name? */
static int
tb_db_has(struct tb *tb, const char *guest, const char *name)
{
	char *path = tb_path(tb, guest), *data, *needle;
	int found = 0;

	if (read_file(path, 4 * 1024 * 1024, &data, NULL, NULL) == 0) {
		xasprintf(&needle, "\n%s:", name);
		found = strncmp(data, needle + 1, strlen(needle + 1)) == 0 ||
		    strstr(data, needle) != NULL;
		free(needle);
		free(data);
	}
	free(path);
	return found;
}

/* Add a user to an existing group's member list in /etc/group. */
static int
tb_group_add_member(struct tb *tb, const char *group, const char *user, char **cause)
{
	char *path = tb_path(tb, "/etc/group"), *data, *out, *line, *save, *next;
	size_t glen = strlen(group);
	int rc = -1, found = 0;

	if (read_file(path, 4 * 1024 * 1024, &data, NULL, cause) == -1) {
		free(path);
		return -1;
	}
	out = xstrdup("");
	for (line = strtok_r(data, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, group, glen) == 0 && line[glen] == ':') {
			found = 1;
			xasprintf(&next, "%s%s%s%s\n", out, line,
			    line[strlen(line) - 1] == ':' ? "" : ",", user);
		} else
			xasprintf(&next, "%s%s\n", out, line);
		free(out);
		out = next;
	}
	if (!found)
		cause_set(cause, "/etc/group has no group \"%s\"", group);
	else
		rc = write_file_atomic(path, out, strlen(out), 0644, cause);
	free(out);
	free(data);
	free(path);
	return rc;
}

static int
tb_user(struct tb *tb, char **cause)
{
	const struct recipe *r = tb->r;
	char *line, *home, *homedir;
	unsigned id = r->user_uid;
	int rc;

	if (r->user_name == NULL)
		return 0;
	if (tb_db_has(tb, "/etc/passwd", r->user_name)) {
		cause_set(cause, "user.name: \"%s\" already exists in the base system", r->user_name);
		return -1;
	}
	xasprintf(&home, "/home/%s", r->user_name);
	xasprintf(&line, "%s:x:%u:%u::%s:/bin/bash\n", r->user_name, id, id, home);
	rc = tb_append(tb, "/etc/passwd", line, cause);
	free(line);
	if (rc == 0) {
		xasprintf(&line, "%s:x:%u:\n", r->user_name, id);
		rc = tb_append(tb, "/etc/group", line, cause);
		free(line);
	}
	if (rc == 0) {
		/* '*': no password login; sudo below needs none. */
		xasprintf(&line, "%s:*:19000:0:99999:7:::\n", r->user_name);
		rc = tb_append(tb, "/etc/shadow", line, cause);
		free(line);
	}
	if (rc == 0 && r->user_sudo) {
		char *sudoers;
		xasprintf(&sudoers, "%s ALL=(ALL:ALL) NOPASSWD: ALL\n", r->user_name);
		xasprintf(&line, "/etc/sudoers.d/%s", r->user_name);
		rc = tb_write(tb, line, sudoers, 0440, 0, 0, cause);
		free(line);
		free(sudoers);
		if (rc == 0 && tb_db_has(tb, "/etc/group", "sudo"))
			rc = tb_group_add_member(tb, "sudo", r->user_name, cause);
	}
	if (rc == 0) {
		homedir = tb_path(tb, home);
		if ((mkdir(homedir, 0750) == -1 && errno != EEXIST) ||
		    chown(homedir, id, id) == -1) {
			cause_set(cause, "home %s: %s", home, strerror(errno));
			rc = -1;
		}
		free(homedir);
	}
	if (rc == 0) {
		/* Skeleton dotfiles, owned by the user. */
		static const char *const skel[] = { ".bashrc", ".profile", ".bash_logout" };
		size_t i;
		for (i = 0; i < 3 && rc == 0; i++) {
			char *src, *data, *dst;
			xasprintf(&src, "%s/etc/skel/%s", tb->root, skel[i]);
			if (read_file(src, 1024 * 1024, &data, NULL, NULL) == 0) {
				xasprintf(&dst, "%s/%s", home, skel[i]);
				rc = tb_write(tb, dst, data, 0644, id, id, cause);
				free(dst);
				free(data);
			}
			free(src);
		}
	}
	free(home);
	return rc;
}

static int
tb_copy_file(struct tb *tb, const char *src, const char *guest, mode_t mode, char **cause)
{
	char *data;
	size_t len;
	int rc;

	if (read_file(src, 512 * 1024 * 1024, &data, &len, cause) == -1)
		return -1;
	if (strlen(data) != len) {
		/* Binary content: write it without tb_write's strlen. */
		char *path = tb_path(tb, guest), *dir = xstrdup(path), *slash = strrchr(dir, '/');
		*slash = '\0';
		rc = mkdir_p(dir, 0755, cause);
		if (rc == 0)
			rc = write_file_atomic(path, data, len, mode, cause);
		if (rc == 0 && chown(path, 0, 0) == -1) {
			cause_set(cause, "chown %s: %s", path, strerror(errno));
			rc = -1;
		}
		free(dir);
		free(path);
	} else
		rc = tb_write(tb, guest, data, mode, 0, 0, cause);
	free(data);
	return rc;
}

/*
 * The start command's config for the agent (agent_start.c reads it at
 * boot): who runs it where, and how it is known to be ready.
 */
static json_t *
tb_start_json(const struct recipe *r)
{
	json_t *j, *ready = json_null();

	if (r->start == NULL)
		return NULL;
	if (r->ready_port != 0)
		ready = json_pack("{s:i}", "port", (int)r->ready_port);
	else if (r->ready_cmd != NULL)
		ready = json_pack("{s:s}", "cmd", r->ready_cmd);
	j = json_pack("{s:i,s:s,s:s,s:o,s:i}", "format", 1, "cmd", r->start,
	    "user", r->start_user ? r->start_user : r->user_name ? r->user_name : "root", "ready", ready,
	    "timeout_s", (int)r->ready_timeout_s);
	if (r->workdir != NULL)
		json_object_set_new(j, "cwd", json_string(r->workdir));
	return j;
}

static int
tb_start(struct tb *tb, char **cause)
{
	json_t *j = tb_start_json(tb->r);
	char *text;
	int rc;

	if (j == NULL)
		return 0;
	text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(j);
	rc = tb_write(tb, TB_START_PATH, text, 0644, 0, 0, cause);
	free(text);
	return rc;
}

static int
tb_customize(struct tb *tb, char **cause)
{
	const struct recipe *r = tb->r;
	char *ca, *pem, *env = xstrdup(""), *s;
	size_t i;
	int rc;

	tb_progress(tb, "configure: user, agent, CA, files, env");
	if (tb_user(tb, cause) == -1)
		goto bad;
	if (tb_copy_file(tb, tb->agent, TB_AGENT_PATH, 0755, cause) == -1) {
		cause_wrap(cause, "agent");
		goto bad;
	}
	ca = paths_data("ca/ca.crt");
	rc = read_file(ca, 64 * 1024, &pem, NULL, cause);
	free(ca);
	if (rc == -1) {
		cause_wrap(cause, "airlock CA (run scripts/ca.sh or make up)");
		goto bad;
	}
	sha256_hex(pem, strlen(pem), tb->ca_sha);
	/* What update-ca-certificates would do, without running anything in the tree. */
	rc = tb_write(tb, "/usr/local/share/ca-certificates/airlock-ca.crt", pem, 0644, 0, 0, cause);
	if (rc == 0)
		rc = tb_write(tb, "/etc/ssl/certs/airlock-ca.pem", pem, 0644, 0, 0, cause);
	if (rc == 0) {
		s = tb_path(tb, TB_BUNDLE);
		if (path_exists(s))
			rc = tb_append(tb, TB_BUNDLE, pem, cause);
		else
			rc = tb_write(tb, TB_BUNDLE, pem, 0644, 0, 0, cause);
		free(s);
	}
	free(pem);
	if (rc == -1)
		goto bad;
	if (tb_write(tb, "/etc/hostname", "airlock\n", 0644, 0, 0, cause) == -1 ||
	    tb_write(tb, "/etc/hosts", "127.0.0.1\tlocalhost airlock\n::1\tlocalhost\n",
	    0644, 0, 0, cause) == -1 ||
	    tb_write(tb, "/etc/resolv.conf", "nameserver 10.0.0.1\n", 0644, 0, 0, cause) == -1)
		goto bad;
	for (i = 0; i < r->nfiles; i++) {
		if (tb_copy_file(tb, r->files[i].src, r->files[i].dst, r->files[i].mode,
		    cause) == -1) {
			cause_wrap(cause, "files[%zu]", i);
			goto bad;
		}
	}
	/*
	 * TLS clients that ignore the system store still trust the gateway's
	 * certificates (node, python requests' certifi); a recipe may override.
	 */
	free(env);
	env = xstrdup("SSL_CERT_FILE=" TB_BUNDLE "\nREQUESTS_CA_BUNDLE=" TB_BUNDLE "\n"
	    "CURL_CA_BUNDLE=" TB_BUNDLE "\n"
	    "NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/airlock-ca.crt\n");
	for (i = 0; i < r->nenv; i++) {
		xasprintf(&s, "%s%s=%s\n", env, r->env[i].key, r->env[i].value);
		free(env);
		env = s;
	}
	if (tb_write(tb, "/etc/airlock/env", env, 0644, 0, 0, cause) == -1 ||
	    tb_start(tb, cause) == -1)
		goto bad;
	free(env);
	return 0;
bad:
	free(env);
	return -1;
}

static int
tb_mkfs(struct tb *tb, char **cause)
{
	char size[32];
	int rc;

	tb_progress(tb, "mkfs.ext4 -d: %u MiB sparse image", tb->r->disk_size_mb);
	snprintf(size, sizeof(size), "%uM", tb->r->disk_size_mb);
	{
		const char *argv[] = { "mkfs.ext4", "-q", "-F", "-L", "airlock-root",
		    "-E", "lazy_itable_init=1,lazy_journal_init=1", "-d", tb->root,
		    tb->image, size, NULL };
		rc = subproc_run(argv, NULL, SUBPROC_OUTPUT_TAIL, cause);
	}
	if (rc == -1) {
		cause_wrap(cause, "mkfs.ext4 (is disk_size_mb large enough for the tree?)");
		return -1;
	}
	return 0;
}

static json_t *
tb_metadata(struct tb *tb, const char *name, json_t *extra)
{
	const struct recipe *r = tb->r;
	json_t *m, *pk, *env;
	char when[32];
	time_t now = time(NULL);
	size_t i;

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	pk = json_array();
	for (i = 0; i < r->npackages; i++)
		json_array_append_new(pk, json_string(r->packages[i]));
	env = json_object();
	for (i = 0; i < r->nenv; i++)
		json_object_set_new(env, r->env[i].key, json_string(r->env[i].value));
	m = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:i}",
	    "format", 1, "name", name, "built_at", when, "kernel_release", tb->kernel_release,
	    "recipe_sha256", r->sha256, "bootstrap_key", tb->boot_key,
	    "agent_sha256", tb->agent_sha, "distro", r->suite,
	    "packages", pk, "env", env, "disk_size_mb", (json_int_t)r->disk_size_mb);
	json_object_set_new(m, "ca_sha256", json_string(tb->ca_sha));
	/* What the recipe's files held (make prepare rebuilds when one changed). */
	{
		json_t *files = json_object();
		char sum[65];

		for (i = 0; i < r->nfiles; i++)
			if (sha256_file_hex(r->files[i].src, sum, NULL) == 0)
				json_object_set_new(files, r->files[i].dst, json_string(sum));
		json_object_set_new(m, "files_sha256", files);
	}
	json_object_set_new(m, "user", r->user_name ? json_string(r->user_name) : json_null());
	json_object_set_new(m, "start", r->start ? json_string(r->start) : json_null());
	/* airlockd waits up to timeout_s for /init (sbm_boot.c): the agent answers once ready. */
	json_object_set_new(m, "start_config", r->start ? tb_start_json(r) : json_null());
	json_object_set_new(m, "workdir", r->workdir ? json_string(r->workdir) :
	    r->user_name ? json_sprintf("/home/%s", r->user_name) : json_string("/"));
	if (extra != NULL)
		json_object_update(m, extra);
	return m;
}

/* Move the finished build into templates/<name>, keeping the old one until then. */
static int
tb_install(struct tb *tb, const char *name, json_t *extra, char **cause)
{
	json_t *m;
	int rc;

	tb_progress(tb, "install template \"%s\"", name);
	m = tb_metadata(tb, name, extra);
	rc = template_install(name, tb->workdir, tb->image, m, cause);
	json_decref(m);
	return rc;
}

int
template_install(const char *name, const char *workdir, const char *image, json_t *m,
    char **cause)
{
	char *dst, *meta, *old, *newdir, *img, *text;
	struct stat st;
	int rc = -1;

	if (stat(image, &st) == 0) {
		json_object_set_new(m, "image_size_bytes", json_integer(st.st_size));
		json_object_set_new(m, "image_allocated_bytes",
		    json_integer((json_int_t)st.st_blocks * 512));
	}
	text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
	xasprintf(&newdir, "%s/new", workdir);
	xasprintf(&meta, "%s/template.json", newdir);
	xasprintf(&img, "%s/rootfs.ext4", newdir);
	dst = paths_data("templates/%s", name);
	xasprintf(&old, "%s/old", workdir);
	if (mkdir(newdir, 0755) == -1) {
		cause_set(cause, "mkdir %s: %s", newdir, strerror(errno));
		goto out;
	}
	if (rename(image, img) == -1) {
		cause_set(cause, "rename %s: %s", img, strerror(errno));
		goto out;
	}
	if (write_file_atomic(meta, text, strlen(text), 0644, cause) == -1)
		goto out;
	if (mkdir_p(paths_data_dir(), 0755, cause) == -1)
		goto out;
	{
		char *tdir = paths_data("templates");
		rc = mkdir_p(tdir, 0755, cause);
		free(tdir);
		if (rc == -1)
			goto out;
		rc = -1;
	}
	/* Swap atomically when an old template exists, else a plain rename. */
	if (path_exists(dst)) {
		if (renameat2(AT_FDCWD, newdir, AT_FDCWD, dst, RENAME_EXCHANGE) == -1) {
			cause_set(cause, "swap %s: %s", dst, strerror(errno));
			goto out;
		}
		/* newdir now holds the previous template; it goes with the workdir. */
	} else if (rename(newdir, dst) == -1) {
		cause_set(cause, "rename %s: %s", dst, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(text);
	free(newdir);
	free(meta);
	free(img);
	free(dst);
	free(old);
	return rc;
}

/*
 * The key of the base image a recipe's run steps start from: everything
 * that goes into it (the debootstrap tree's key, agent, CA, user, files'
 * contents, env, disk size, start command, workdir), not the run steps.
 */
static int
tb_base_key(struct tb *tb, char **cause)
{
	const struct recipe *r = tb->r;
	char *buf, *tmp, *ca, *pem, fsha[65];
	size_t i;
	int rc;

	ca = paths_data("ca/ca.crt");
	rc = read_file(ca, 64 * 1024, &pem, NULL, cause);
	free(ca);
	if (rc == -1) {
		cause_wrap(cause, "airlock CA (run scripts/ca.sh or make up)");
		return -1;
	}
	sha256_hex(pem, strlen(pem), tb->ca_sha);
	free(pem);
	recipe_bootstrap_key(r, tb->boot_key);
	xasprintf(&buf, "base v1\n%s\n%s\n%s\n%s:%u:%d\n%u\n", tb->boot_key, tb->agent_sha,
	    tb->ca_sha, r->user_name ? r->user_name : "", r->user_uid, r->user_sudo,
	    r->disk_size_mb);
	for (i = 0; i < r->nfiles; i++) {
		if (sha256_file_hex(r->files[i].src, fsha, cause) == -1) {
			free(buf);
			return -1;
		}
		xasprintf(&tmp, "%sfile %s %o %s\n", buf, r->files[i].dst, r->files[i].mode, fsha);
		free(buf);
		buf = tmp;
	}
	for (i = 0; i < r->nenv; i++) {
		xasprintf(&tmp, "%senv %zu %s=%s\n", buf, strlen(r->env[i].value), r->env[i].key,
		    r->env[i].value);
		free(buf);
		buf = tmp;
	}
	/* The start command and workdir may be written into the image's config too. */
	xasprintf(&tmp, "%sstart %zu %s\nworkdir %s\n", buf, r->start ? strlen(r->start) : 0,
	    r->start ? r->start : "", r->workdir ? r->workdir : "");
	free(buf);
	buf = tmp;
	sha256_hex(buf, strlen(buf), tb->base_key);
	free(buf);
	return 0;
}

/* From debootstrap (tree_in NULL) or from a root tree prepared by the caller. */
static int
tb_run(const struct recipe *r, const struct template_build_opts *o, const char *tree_in,
    json_t *extra, char **cause)
{
	struct tb tb;
	char *tree = NULL;
	int rc = -1;

	memset(&tb, 0, sizeof(tb));
	tb.r = r;
	tb.o = o;
	tb.nsteps = o->stage ? TB_STAGE_STEPS + (int)r->nrun + 1 : TB_STEPS;
	if (!paths_valid_name(o->name)) {
		cause_set(cause, "name: \"%s\" must match [a-z0-9][a-z0-9._-]{0,62}", o->name);
		return -1;
	}
	if (r->nrun > 0 && !o->stage) {
		cause_set(cause, "run: recipe has %zu run step(s); run steps execute only inside "
		    "a build microVM that airlockd hosts: build through the daemon (airlock "
		    "template build --remote, or POST /v1/templates)", r->nrun);
		return -1;
	}
	if (r->base_template != NULL) {
		cause_set(cause, "template: building on template \"%s\" needs airlockd (its run "
		    "steps execute in a build microVM)", r->base_template);
		return -1;
	}
	tb.step = 1;
	tb_progress(&tb, "check kernel, agent and CA");
	if (tb_kernel_release(&tb, cause) == -1)
		goto out;
	tb.agent = o->agent_bin ? xstrdup(o->agent_bin) : template_find_agent();
	if (tb.agent == NULL || access(tb.agent, X_OK) == -1) {
		cause_set(cause, "agent: airlock-agent binary not found (set AIRLOCK_AGENT_BIN "
		    "or build it: make)");
		goto out;
	}
	if (sha256_file_hex(tb.agent, tb.agent_sha, cause) == -1)
		goto out;
	tb.workdir = paths_data("build/%s.%ld", o->name, (long)getpid());
	xasprintf(&tb.root, "%s/root", tb.workdir);
	xasprintf(&tb.image, "%s/rootfs.ext4", tb.workdir);
	if (o->stage) {
		if (tb_base_key(&tb, cause) == -1)
			goto out;
		memcpy(o->stage->base_key, tb.base_key, sizeof(tb.base_key));
		if (!o->no_cache && tsteps_lookup(tb.base_key)) {
			tb.step = TB_STAGE_STEPS;
			tb_progress(&tb, "base image: cached (%.16s)", tb.base_key);
			o->stage->meta = tb_metadata(&tb, o->name, extra);
			rc = 0;
			goto out;
		}
	}

	tb.step = 2;
	if (tree_in != NULL) {
		tree = xstrdup(tree_in);
		tb_progress(&tb, "root tree: %s", tree);
	} else if (tb_bootstrap(&tb, &tree, cause) == -1)
		goto out;
	tb.step = 3;
	if (tb_copy_tree(&tb, tree, cause) == -1)
		goto out;
	tb.step = 4;
	if (tb_customize(&tb, cause) == -1)
		goto out;
	tb.step = 5;
	if (tb_mkfs(&tb, cause) == -1)
		goto out;
	if (o->stage) {
		/* The run steps go on in a build VM booted from this image (api_tbuild.c). */
		if (tsteps_store(tb.image, tb.base_key, cause) == -1)
			goto out;
		o->stage->meta = tb_metadata(&tb, o->name, extra);
		rc = 0;
		goto out;
	}
	tb.step = 6;
	if (tb_install(&tb, o->name, extra, cause) == -1)
		goto out;
	tb.step = 7;
	tb_progress(&tb, "clean up");
	rc = 0;
out:
	if (tb.workdir != NULL && remove_tree(tb.workdir, NULL) == -1)
		log_warnx("could not remove %s", tb.workdir);
	free(tree);
	free(tb.workdir);
	free(tb.root);
	free(tb.image);
	free(tb.kernel_release);
	free(tb.agent);
	return rc;
}

int
template_build(const struct recipe *r, const struct template_build_opts *o, char **cause)
{
	return tb_run(r, o, NULL, NULL, cause);
}

int
template_build_tree(const struct recipe *r, const struct template_build_opts *o,
    const char *tree, json_t *extra, char **cause)
{
	return tb_run(r, o, tree, extra, cause);
}
