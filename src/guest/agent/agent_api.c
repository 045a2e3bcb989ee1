/*
 * Request routing and the small envd endpoints: /health, /init, /metrics, /envs,
 * plus users (parsed from /etc/passwd by hand: a static binary cannot use
 * the template's NSS modules) and envd's path rules.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/random.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_start.h"
#include "common/base64.h"
#include "common/util.h"
#include "guest/agent/agent_init.h"
#include "guest/agent/agent_volumes.h"
#include "http/http_server.h"

#define API_MAX_INIT_BODY	(1024 * 1024)	/* env vars, token, entropy */

/* "UID" or "UID:GID", as an image's USER may be: 0 and the ids, else -1. */
static int
user_numeric(const char *name, uid_t *uid, gid_t *gid, int *has_gid)
{
	unsigned long v;
	char *end;

	if (name[0] < '0' || name[0] > '9')
		return -1;
	errno = 0;
	v = strtoul(name, &end, 10);
	if (errno != 0 || v > 0x7fffffffUL)
		return -1;
	*uid = (uid_t)v;
	*has_gid = 0;
	if (*end == '\0')
		return 0;
	if (*end != ':' || end[1] < '0' || end[1] > '9')
		return -1;
	v = strtoul(end + 1, &end, 10);
	if (errno != 0 || v > 0x7fffffffUL || *end != '\0')
		return -1;
	*gid = (gid_t)v;
	*has_gid = 1;
	return 0;
}

/*
 * A user by passwd name, or by number ("UID", "UID:GID": an OCI image's
 * USER). A number with no passwd entry is still that uid, with home / and
 * /bin/sh, as a container runtime runs it.
 */
int
user_lookup(const char *name, struct agent_user *u)
{
	char line[1024], *f[7], *p;
	uid_t uid = 0;
	gid_t gid = 0;
	int i, found = 0, numeric, has_gid = 0;
	FILE *fp;

	if (name == NULL || *name == '\0' || strlen(name) >= sizeof(u->name))
		return -1;
	numeric = user_numeric(name, &uid, &gid, &has_gid) == 0;
	if ((fp = fopen(ag.ag_passwd, "re")) == NULL && !numeric)
		return -1;
	while (fp != NULL && !found && fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		for (i = 0, p = line; i < 7; i++) {
			f[i] = p;
			if (i < 6) {
				if ((p = strchr(p, ':')) == NULL)
					break;
				*p++ = '\0';
			}
		}
		if (i < 7)
			continue;
		if (numeric ? strtoul(f[2], NULL, 10) != (unsigned long)uid : strcmp(f[0], name) != 0)
			continue;
		if (strlen(f[5]) >= sizeof(u->home) || strlen(f[6]) >= sizeof(u->shell))
			continue;
		snprintf(u->name, sizeof(u->name), "%s", f[0]);
		u->uid = (uid_t)strtoul(f[2], NULL, 10);
		u->gid = (gid_t)strtoul(f[3], NULL, 10);
		snprintf(u->home, sizeof(u->home), "%s", *f[5] != '\0' ? f[5] : "/");
		snprintf(u->shell, sizeof(u->shell), "%s", *f[6] != '\0' ? f[6] : "/bin/sh");
		found = 1;
	}
	if (fp != NULL)
		fclose(fp);
	if (!found && numeric) {
		snprintf(u->name, sizeof(u->name), "%s", name);
		u->uid = uid;
		u->gid = has_gid ? gid : (gid_t)uid;
		snprintf(u->home, sizeof(u->home), "/");
		snprintf(u->shell, sizeof(u->shell), "/bin/sh");
		found = 1;
	}
	if (found && has_gid)
		u->gid = gid;
	return found ? 0 : -1;
}

int
api_user(const struct http_req *req, const char *name, struct agent_user *u, const char **why)
{
	const char *auth = http_req_header(req, "Authorization");
	char user[64];
	uint8_t dec[BASE64_DECODED_MAX(sizeof(user) / 3 * 4)];
	size_t len;
	char *colon;

	if (name == NULL && auth != NULL && strncasecmp(auth, "Basic ", 6) == 0) {
		auth += 6;
		if (strlen(auth) > sizeof(user) / 3 * 4 ||
		    base64_decode(auth, strlen(auth), dec, &len) == -1 || len >= sizeof(user)) {
			*why = "malformed Basic authorization";
			return -1;
		}
		memcpy(user, dec, len);
		user[len] = '\0';
		if ((colon = strchr(user, ':')) != NULL)
			*colon = '\0';
		name = user;
	}
	if (name == NULL || *name == '\0')
		name = ag.ag_default_user;
	if (user_lookup(name, u) == -1) {
		*why = "unknown user";
		return -1;
	}
	return 0;
}

/* Lexically clean an absolute path: no "", ".", ".." components. */
static void
path_clean(char *p)
{
	char *out = p, *seg = p, *next;
	size_t len;

	while (*seg == '/')
		seg++;
	for (;;) {
		next = strchr(seg, '/');
		len = next != NULL ? (size_t)(next - seg) : strlen(seg);
		if (len == 0 || (len == 1 && seg[0] == '.')) {
			/* skip */
		} else if (len == 2 && seg[0] == '.' && seg[1] == '.') {
			while (out > p && *--out != '/')
				;
		} else {
			*out++ = '/';
			memmove(out, seg, len);
			out += len;
		}
		if (next == NULL)
			break;
		seg = next + 1;
	}
	if (out == p)
		*out++ = '/';
	*out = '\0';
}

char *
path_resolve(const char *path, const struct agent_user *u)
{
	char *out;
	size_t len;

	if (path == NULL || *path == '\0')
		path = "~";
	if (strlen(path) > PATH_MAX)
		return NULL;
	if (path[0] == '~' && (path[1] == '\0' || path[1] == '/'))
		len = (size_t)asprintf(&out, "%s/%s", u->home, path + 1);
	else if (path[0] == '/')
		len = (size_t)asprintf(&out, "%s", path);
	else
		len = (size_t)asprintf(&out, "%s/%s", u->home, path);
	if (len == (size_t)-1)
		return NULL;
	path_clean(out);
	return out;
}

int
mkdir_parents(const char *path, const struct agent_user *u)
{
	char *p = strdup(path), *s;
	int rc = 0;

	if (p == NULL)
		return -1;
	for (s = p + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		if (mkdir(p, 0755) == 0) {
			if (lchown(p, u->uid, u->gid) == -1)
				rc = -1;
		} else if (errno != EEXIST) {
			rc = -1;
			break;
		}
		*s = '/';
	}
	free(p);
	return rc;
}

void
env_set(char ***env, size_t *nenv, const char *key, const char *value)
{
	size_t i, kl = strlen(key);
	char *kv;

	if (asprintf(&kv, "%s=%s", key, value) == -1)
		return;
	for (i = 0; i < *nenv; i++) {
		if (strncmp((*env)[i], key, kl) == 0 && (*env)[i][kl] == '=') {
			free((*env)[i]);
			(*env)[i] = kv;
			return;
		}
	}
	if (*nenv >= AGENT_MAX_ENV) {
		free(kv);
		return;
	}
	*env = realloc(*env, (*nenv + 2) * sizeof(**env));
	if (*env == NULL)
		abort();
	(*env)[(*nenv)++] = kv;
	(*env)[*nenv] = NULL;
}

static void
api_reply_error(struct http_req *req, int status, const char *msg)
{
	json_t *j = json_pack("{s:i, s:s}", "code", status, "message", msg);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	http_reply(req, status, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}


static void
api_metrics(struct http_req *req, const char *rest)
{
	static uint64_t last_total, last_idle;
	unsigned long long user, nice, sys, idle, iow, irq, sirq, steal;
	unsigned long long mem_total = 0, mem_avail = 0, mem_cache = 0, v;
	uint64_t total = 0, idle_all = 0;
	double cpu_pct = 0;
	struct statvfs sv;
	char line[256], key[64];
	FILE *fp;
	json_t *j;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if ((fp = fopen("/proc/stat", "re")) != NULL) {
		if (fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys,
		    &idle, &iow, &irq, &sirq, &steal) == 8) {
			total = user + nice + sys + idle + iow + irq + sirq + steal;
			idle_all = idle + iow;
			if (total > last_total && last_total != 0)
				cpu_pct = 100.0 * (1.0 - (double)(idle_all - last_idle) /
				    (double)(total - last_total));
			last_total = total;
			last_idle = idle_all;
		}
		fclose(fp);
	}
	if ((fp = fopen("/proc/meminfo", "re")) != NULL) {
		while (fgets(line, sizeof(line), fp) != NULL) {
			if (sscanf(line, "%63[^:]: %llu", key, &v) != 2)
				continue;
			if (strcmp(key, "MemTotal") == 0)
				mem_total = v * 1024;
			else if (strcmp(key, "MemAvailable") == 0)
				mem_avail = v * 1024;
			else if (strcmp(key, "Cached") == 0)
				mem_cache = v * 1024;	/* page cache: E2B's memCache */
		}
		fclose(fp);
	}
	memset(&sv, 0, sizeof(sv));
	statvfs("/", &sv);
	j = json_pack("{s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I}",
	    "ts", (json_int_t)time(NULL), "cpu_count", (int)ncpu, "cpu_used_pct", cpu_pct,
	    "mem_total", (json_int_t)mem_total, "mem_used", (json_int_t)(mem_total - mem_avail),
	    "mem_cache", (json_int_t)mem_cache,
	    "disk_used", (json_int_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize),
	    "disk_total", (json_int_t)(sv.f_blocks * sv.f_frsize));
	connect_reply(req, j);
}

/*
 * GET /envs: the sandbox's env vars (/init's), as envd answers them; the
 * code interpreter reads them for its kernels (e2b-delta.md §3).
 */
static void
api_envs(struct http_req *req, const char *rest)
{
	json_t *j = json_object();
	const char *eq;
	char *key;
	size_t i;

	for (i = 0; i < ag.ag_nenv; i++) {
		if ((eq = strchr(ag.ag_env[i], '=')) == NULL ||
		    (key = strndup(ag.ag_env[i], (size_t)(eq - ag.ag_env[i]))) == NULL)
			continue;
		/* A value that is not UTF-8 cannot be a JSON string: left out. */
		json_object_set_new(j, key, json_string(eq + 1));
		free(key);
	}
	connect_reply(req, j);
}

static void
api_health(struct http_req *req, const char *rest)
{
	http_reply(req, 204, NULL, NULL, 0);
}

static void
api_init(struct http_req *req, const char *rest)
{
	http_req_buffer(req, API_MAX_INIT_BODY, init_end, NULL);
}

static void
api_start(struct http_req *req, const char *rest)
{
	http_reply_json(req, 200, start_status());
}

/*
 * POST /airlock/volumes/freeze and /airlock/volumes/thaw {"volumes": [...]}
 * (/init's list): airlockd freezes a sandbox's read-write volumes before
 * it deletes or suspends it, and thaws them when a suspend failed
 * (agent_volumes.h). FIFREEZE waits for writers: in a work thread.
 */
#define API_MAX_VOLUMES_BODY	(64 * 1024)

struct vol_job {
	struct http_req		*req;
	struct volumes_fz	 fz;
};

static void
vol_job_abort(struct http_req *req, void *arg)
{
	struct vol_job *j = arg;

	j->req = NULL;
}

static void
vol_job_run(void *arg)
{
	struct vol_job *j = arg;

	volumes_fz_run(&j->fz);
}

static void
vol_job_done(void *arg, int late)
{
	struct vol_job *j = arg;

	if (j->req == NULL)
		return;
	http_req_on_close(j->req, NULL, NULL);
	if (late)
		api_reply_error(j->req, 504, "volumes: the filesystem did not answer in time");
	else if (j->fz.rc == -1)
		api_reply_error(j->req, 500, j->fz.err);
	else
		http_reply_json(j->req, 200, json_pack("{s:i}", j->fz.thaw ? "thawed" : "frozen",
		    j->fz.done));
	j->req = NULL;
}

static void
vol_job_free(void *arg)
{
	free(arg);
}

static void
volumes_end(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len), *why = NULL;
	json_t *root = json_loadb(body != NULL ? body : "", len, JSON_REJECT_DUPLICATES, NULL);
	json_t *v = json_object_get(root, "volumes");
	struct vol_job *j;
	char err[256];

	if (!json_is_object(root) || v == NULL || volumes_parse(v, err, sizeof(err)) == -1) {
		api_reply_error(req, 400, json_is_object(root) && v != NULL ? err :
		    "body: must be a JSON object {\"volumes\": [...]}");
		json_decref(root);
		return;
	}
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		json_decref(root);
		api_reply_error(req, 503, "out of memory");
		return;
	}
	volumes_fz_load(v, arg != NULL, &j->fz);
	json_decref(root);
	j->req = req;
	http_req_on_close(req, vol_job_abort, j);
	if (work_run(vol_job_run, vol_job_done, vol_job_free, j, AGENT_FS_DEADLINE_MS, &why) == -1) {
		http_req_on_close(req, NULL, NULL);
		api_reply_error(req, 503, why);
		free(j);
	}
}

static void
api_volumes(struct http_req *req, const char *rest)
{
	static int thaw;

	if (strcmp(rest, "freeze") != 0 && strcmp(rest, "thaw") != 0) {
		api_reply_error(req, 404, "not found");
		return;
	}
	http_req_buffer(req, API_MAX_VOLUMES_BODY, volumes_end, strcmp(rest, "thaw") == 0 ?
	    &thaw : NULL);
}

static void
api_poweroff(struct http_req *req, const char *rest)
{
	http_reply(req, 204, NULL, NULL, 0);
	agent_poweroff("requested over the API");
}

/*
 * The routes, first match wins. A path ending in '/' is a prefix: the
 * handler gets the rest (the Connect method). R_NOAUTH routes are open
 * without X-Access-Token once /init set one, as envd's (auth.go): /files
 * checks the token or a signed URL itself. R_CONNECT routes answer
 * errors in the Connect shape.
 */
#define R_NOAUTH	0x1
#define R_CONNECT	0x2

static const struct agent_route {
	const char	*method;
	const char	*path;
	void		(*fn)(struct http_req *, const char *rest);
	int		 flags;
} api_routes[] = {
	{ "GET", "/health", api_health, R_NOAUTH },
	{ "HEAD", "/health", api_health, R_NOAUTH },
	{ "GET", "/files", files_route, R_NOAUTH },
	{ "POST", "/files", files_route, R_NOAUTH },
	{ "POST", "/init", api_init, R_NOAUTH },
	{ "GET", "/metrics", api_metrics, 0 },
	{ "GET", "/envs", api_envs, 0 },
	{ "POST", "/airlock/poweroff", api_poweroff, 0 },
	{ "POST", "/airlock/volumes/", api_volumes, 0 },
	{ "GET", "/airlock/start", api_start, 0 },
	{ "POST", "/process.Process/", proc_route, R_CONNECT },
	{ "POST", "/filesystem.Filesystem/", fs_route, R_CONNECT },
	{ NULL, NULL, NULL, 0 },
};

/* The route whose path matches (its method may not); *rest gets a prefix route's tail. */
static const struct agent_route *
api_route_find(const char *method, const char *path, const char **rest, int *method_ok)
{
	const struct agent_route *r, *found = NULL;
	size_t n;

	*method_ok = 0;
	for (r = api_routes; r->path != NULL; r++) {
		n = strlen(r->path);
		if (r->path[n - 1] == '/' ? strncmp(path, r->path, n) != 0 : strcmp(path, r->path) != 0)
			continue;
		if (found == NULL) {
			found = r;
			*rest = path + (r->path[n - 1] == '/' ? n : strlen(path));
		}
		if (strcmp(method, r->method) == 0) {
			*method_ok = 1;
			*rest = path + (r->path[n - 1] == '/' ? n : strlen(path));
			return r;
		}
	}
	return found;
}

/* X-Access-Token, once /init set one; compared in constant time. */
static int
api_authorized(const struct http_req *req)
{
	const char *tok = http_req_header(req, "X-Access-Token");

	return ag.ag_token == NULL || (tok != NULL && ct_streq(tok, ag.ag_token));
}

void
api_route(struct http_req *req, void *arg)
{
	const char *rest = NULL;
	const struct agent_route *r;
	int method_ok, connect;

	init_files_flush();	/* /init's files before anything else is served */
	r = api_route_find(http_req_method(req), http_req_path(req), &rest, &method_ok);
	connect = r != NULL && (r->flags & R_CONNECT);
	if ((r == NULL || !(r->flags & R_NOAUTH)) && !api_authorized(req)) {
		if (connect)
			connect_error(req, "unauthenticated", "missing or wrong access token");
		else
			api_reply_error(req, 401, "missing or wrong access token");
		return;
	}
	if (r == NULL)
		api_reply_error(req, 404, "not found");
	else if (!method_ok && connect)
		connect_error(req, "unimplemented", "method not allowed");
	else if (!method_ok)
		api_reply_error(req, 405, "method not allowed");
	else
		r->fn(req, rest);
}

/* Protocol errors the server answers itself, in envd's REST error shape. */
json_t *
api_error_body(int status, const char *code, const char *message)
{
	return json_pack("{s:i, s:s}", "code", status, "message", message);
}
