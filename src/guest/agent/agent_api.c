/*
 * Request routing and the small envd endpoints: /health, /init, /metrics,
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

#include <event2/buffer.h>

#include "guest/agent/agent.h"
#include "guest/agent/agent_http.h"

#define API_MAX_ENTROPY	4096	/* bytes of host entropy per /init */

int
user_lookup(const char *name, struct agent_user *u)
{
	char line[1024], *f[7], *p;
	FILE *fp;
	int i, found = 0;

	if (name == NULL || *name == '\0' || strlen(name) >= sizeof(u->name))
		return -1;
	if ((fp = fopen(ag.ag_passwd, "re")) == NULL)
		return -1;
	while (!found && fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		for (i = 0, p = line; i < 7; i++) {
			f[i] = p;
			if (i < 6) {
				if ((p = strchr(p, ':')) == NULL)
					break;
				*p++ = '\0';
			}
		}
		if (i < 7 || strcmp(f[0], name) != 0)
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
	fclose(fp);
	return found ? 0 : -1;
}

int
api_user(const struct http_req *req, const char *name, struct agent_user *u, const char **why)
{
	const char *auth = http_req_header(req, "Authorization");
	char user[64];
	uint8_t *dec = NULL;
	size_t len;
	char *colon;

	if (name == NULL && auth != NULL && strncasecmp(auth, "Basic ", 6) == 0) {
		if (b64_decode(auth + 6, &dec, &len) == -1 || len >= sizeof(user)) {
			free(dec);
			*why = "malformed Basic authorization";
			return -1;
		}
		memcpy(user, dec, len);
		user[len] = '\0';
		free(dec);
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
api_reply_error(struct http_conn *hc, int status, const char *msg)
{
	json_t *j = json_pack("{s:i, s:s}", "code", status, "message", msg);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	http_reply(hc, status, "application/json", s, s != NULL ? strlen(s) : 0);
	free(s);
}

/* Parse RFC 3339 (UTC "Z" or offset) or a number of seconds/ms since the epoch. */
static int
api_parse_time(json_t *v, struct timespec *ts)
{
	struct tm tm;
	const char *s, *p;
	char *end;
	double frac = 0;
	int64_t n;

	if (json_is_integer(v)) {
		n = json_integer_value(v);
		/* Milliseconds if it is too large to be seconds. */
		if (n > 100000000000ll) {
			ts->tv_sec = n / 1000;
			ts->tv_nsec = (n % 1000) * 1000000;
		} else {
			ts->tv_sec = n;
			ts->tv_nsec = 0;
		}
		return 0;
	}
	if (!json_is_string(v))
		return -1;
	s = json_string_value(v);
	memset(&tm, 0, sizeof(tm));
	if ((p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return -1;
	if (*p == '.') {
		frac = strtod(p, &end);
		p = end;
	}
	if (*p != 'Z' && *p != '\0')
		return -1;	/* offsets other than Z: not worth the code */
	ts->tv_sec = timegm(&tm);
	ts->tv_nsec = (long)(frac * 1e9);
	return 0;
}

/* POST /init: identity and fresh state after boot or restore. */
static void
api_init_end(struct http_conn *hc)
{
	struct evbuffer *body = http_body(hc);
	json_t *j, *env, *v, *tsv;
	const char *key;
	struct timespec ts;
	json_error_t jerr;
	uint8_t *ent = NULL;
	size_t entlen = 0;
	struct {
		int	entropy_count;
		int	buf_size;
		uint8_t	buf[API_MAX_ENTROPY];
	} rnd;
	int fd;

	j = json_loadb((const char *)evbuffer_pullup(body, -1), evbuffer_get_length(body), 0,
	    &jerr);
	if (evbuffer_get_length(body) == 0)
		j = json_object();
	if (!json_is_object(j)) {
		json_decref(j);
		api_reply_error(hc, 400, "body must be a JSON object");
		return;
	}
	if ((env = jget(j, "envVars", "env_vars")) != NULL && json_is_object(env)) {
		json_object_foreach(env, key, v) {
			if (json_is_string(v) && *key != '\0' && strchr(key, '=') == NULL)
				env_set(&ag.ag_env, &ag.ag_nenv, key, json_string_value(v));
		}
	}
	if ((v = jget(j, "accessToken", "access_token")) != NULL && json_is_string(v)) {
		free(ag.ag_token);
		ag.ag_token = *json_string_value(v) != '\0' ? strdup(json_string_value(v)) : NULL;
	}
	if ((tsv = json_object_get(j, "timestamp")) != NULL) {
		if (api_parse_time(tsv, &ts) == -1) {
			json_decref(j);
			api_reply_error(hc, 400, "bad timestamp");
			return;
		}
		/* Only PID 1 owns the clock; a host-run agent must not touch it. */
		if (ag.ag_pid1 && clock_settime(CLOCK_REALTIME, &ts) == -1)
			alog("init: clock_settime: %s", strerror(errno));
	}
	if ((v = json_object_get(j, "entropy")) != NULL && json_is_string(v)) {
		if (b64_decode(json_string_value(v), &ent, &entlen) == -1 ||
		    entlen > API_MAX_ENTROPY) {
			free(ent);
			json_decref(j);
			api_reply_error(hc, 400, "bad entropy");
			return;
		}
		if (ag.ag_pid1 && entlen > 0) {
			/* Credited: clones of one snapshot must not share RNG state. */
			rnd.entropy_count = (int)entlen * 8;
			rnd.buf_size = (int)entlen;
			memcpy(rnd.buf, ent, entlen);
			if ((fd = open("/dev/random", O_WRONLY | O_CLOEXEC)) == -1 ||
			    ioctl(fd, RNDADDENTROPY, &rnd) == -1)
				alog("init: RNDADDENTROPY: %s", strerror(errno));
			if (fd != -1)
				close(fd);
			explicit_bzero(&rnd, sizeof(rnd));
		}
		explicit_bzero(ent, entlen);
		free(ent);
	}
	json_decref(j);
	http_reply(hc, 204, NULL, NULL, 0);
}

static const struct http_handler api_init_handler = { .end = api_init_end };

static void
api_metrics(struct http_conn *hc)
{
	static uint64_t last_total, last_idle;
	unsigned long long user, nice, sys, idle, iow, irq, sirq, steal;
	unsigned long long mem_total = 0, mem_avail = 0, v;
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
		}
		fclose(fp);
	}
	memset(&sv, 0, sizeof(sv));
	statvfs("/", &sv);
	j = json_pack("{s:I, s:i, s:f, s:I, s:I, s:I, s:I}",
	    "ts", (json_int_t)time(NULL), "cpu_count", (int)ncpu, "cpu_used_pct", cpu_pct,
	    "mem_total", (json_int_t)mem_total, "mem_used", (json_int_t)(mem_total - mem_avail),
	    "disk_used", (json_int_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize),
	    "disk_total", (json_int_t)(sv.f_blocks * sv.f_frsize));
	connect_reply(hc, j);
}

/* Endpoints that need X-Access-Token once /init set one (envd auth.go). */
static int
api_authorized(const struct http_req *req)
{
	const char *tok;

	if (ag.ag_token == NULL)
		return 1;
	if (strcmp(req->path, "/health") == 0 || strcmp(req->path, "/files") == 0 ||
	    strcmp(req->path, "/init") == 0)
		return 1;
	tok = http_req_header(req, "X-Access-Token");
	return tok != NULL && strcmp(tok, ag.ag_token) == 0;
}

void
api_route(struct http_conn *hc, const struct http_req *req)
{
	const char *m = req->method, *p = req->path;

	if (!api_authorized(req)) {
		if (strncmp(p, "/process.Process/", 17) == 0 ||
		    strncmp(p, "/filesystem.Filesystem/", 23) == 0)
			connect_error(hc, "unauthenticated", "missing or wrong access token");
		else
			api_reply_error(hc, 401, "missing or wrong access token");
		return;
	}
	if (strcmp(p, "/health") == 0) {
		if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0)
			http_reply(hc, 204, NULL, NULL, 0);
		else
			api_reply_error(hc, 405, "method not allowed");
		return;
	}
	if (strcmp(p, "/files") == 0) {
		files_route(hc, req);
		return;
	}
	if (strncmp(p, "/process.Process/", 17) == 0) {
		if (strcmp(m, "POST") != 0) {
			connect_error(hc, "unimplemented", "method not allowed");
			return;
		}
		proc_route(hc, p + 17);
		return;
	}
	if (strncmp(p, "/filesystem.Filesystem/", 23) == 0) {
		if (strcmp(m, "POST") != 0) {
			connect_error(hc, "unimplemented", "method not allowed");
			return;
		}
		fs_route(hc, p + 23);
		return;
	}
	if (strcmp(p, "/init") == 0 && strcmp(m, "POST") == 0) {
		http_set_handler(hc, &api_init_handler, NULL);
		return;
	}
	if (strcmp(p, "/metrics") == 0 && strcmp(m, "GET") == 0) {
		api_metrics(hc);
		return;
	}
	if (strcmp(p, "/airlock/poweroff") == 0 && strcmp(m, "POST") == 0) {
		http_reply(hc, 204, NULL, NULL, 0);
		agent_poweroff("requested over the API");
		return;
	}
	api_reply_error(hc, 404, "not found");
}
