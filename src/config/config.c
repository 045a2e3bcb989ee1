/* Table-driven configuration with bounds (Redis config.c style). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "common/paths.h"
#include "common/util.h"
#include "http/http_server.h"

enum cfg_type { CFG_STR, CFG_INT, CFG_BOOL, CFG_ACCEL, CFG_ON_UNHEALTHY };

struct cfg_entry {
	const char	*key;
	const char	*env;
	enum cfg_type	 type;
	size_t		 off;
	long		 min, max;
};

#define OFF(f) offsetof(struct config, f)

static const struct cfg_entry cfg_table[] = {
	{ "listen_host", "AIRLOCK_LISTEN_HOST", CFG_STR, OFF(listen_host), 0, 0 },
	{ "listen_port", "AIRLOCK_LISTEN_PORT", CFG_INT, OFF(listen_port), 0, 65535 },	/* 0: any */
	{ "data_dir", "AIRLOCK_DATA_DIR", CFG_STR, OFF(data_dir), 0, 0 },
	{ "store", "AIRLOCK_STORE", CFG_STR, OFF(store_url), 0, 0 },
	{ "accel", "AIRLOCK_ACCEL", CFG_ACCEL, OFF(accel), 0, 0 },
	{ "default_vcpus", NULL, CFG_INT, OFF(default_vcpus), 1, 16 },
	{ "default_memory_mb", NULL, CFG_INT, OFF(default_memory_mb), 128, 65536 },
	{ "default_idle_timeout_s", NULL, CFG_INT, OFF(default_idle_timeout_s), 0, 30L * 86400 },
	{ "sweep_interval_s", "AIRLOCK_SWEEP_INTERVAL_S", CFG_INT, OFF(sweep_interval_s), 1, 3600 },
	{ "idle_cpu_pct", "AIRLOCK_IDLE_CPU_PCT", CFG_INT, OFF(idle_cpu_pct), 0, 100 },
	{ "max_sandboxes", "AIRLOCK_MAX_SANDBOXES", CFG_INT, OFF(max_sandboxes), 1, 100000 },
	{ "max_memory_mb", "AIRLOCK_MAX_MEMORY_MB", CFG_INT, OFF(max_memory_mb), 0, 1L << 30 },
	{ "max_parallel_boots", "AIRLOCK_MAX_PARALLEL_BOOTS", CFG_INT, OFF(max_parallel_boots), 0, 1024 },
	{ "http_conns_max", "AIRLOCK_HTTP_CONNS_MAX", CFG_INT, OFF(http_conns_max), 64, 262144 },
	{ "http_conns_per_addr", "AIRLOCK_HTTP_CONNS_PER_ADDR", CFG_INT, OFF(http_conns_per_addr),
	  0, 262144 },
	{ "log_json", "AIRLOCK_LOG_JSON", CFG_BOOL, OFF(log_json), 0, 1 },
	{ "health_interval_s", "AIRLOCK_HEALTH_INTERVAL_S", CFG_INT, OFF(health_interval_s), 0, 3600 },
	{ "health_timeout_s", "AIRLOCK_HEALTH_TIMEOUT_S", CFG_INT, OFF(health_timeout_s), 1, 600 },
	{ "unhealthy_grace_s", "AIRLOCK_UNHEALTHY_GRACE_S", CFG_INT, OFF(unhealthy_grace_s), 1,
	  86400 },
	{ "on_unhealthy", "AIRLOCK_ON_UNHEALTHY", CFG_ON_UNHEALTHY, OFF(on_unhealthy), 0, 0 },
	{ "restart_max", "AIRLOCK_RESTART_MAX", CFG_INT, OFF(restart_max), 1, 1000 },
	{ "restart_window_s", "AIRLOCK_RESTART_WINDOW_S", CFG_INT, OFF(restart_window_s), 1, 86400 },
	{ "gateway_bin", "AIRLOCK_GATEWAY_BIN", CFG_STR, OFF(gateway_bin), 0, 0 },
	{ "gateway_resolver", "AIRLOCK_GATEWAY_RESOLVER", CFG_STR, OFF(gateway_resolver), 0, 0 },
	{ "gateway_upstream_ca", "AIRLOCK_GATEWAY_UPSTREAM_CA", CFG_STR, OFF(gateway_upstream_ca),
	  0, 0 },
	{ "gateway_netns", "AIRLOCK_GATEWAY_NETNS", CFG_STR, OFF(gateway_netns), 0, 0 },
	{ "gateway_internal", "AIRLOCK_GATEWAY_INTERNAL", CFG_STR, OFF(gateway_internal), 0, 0 },
	{ "gateway_rate_rps", NULL, CFG_INT, OFF(gateway_rate_rps), 0, 1000000 },
	{ "gateway_rate_bps", NULL, CFG_INT, OFF(gateway_rate_bps), 0, 2000000000 },
	/* 0: one event loop per online core (the gateway decides). */
	{ "gateway_threads", "AIRLOCK_GATEWAY_THREADS", CFG_INT, OFF(gateway_threads), 0, 64 },
	{ "log_debug", "AIRLOCK_DEBUG", CFG_BOOL, OFF(log_debug), 0, 1 },
	{ "tls", "AIRLOCK_TLS", CFG_STR, OFF(tls), 0, 0 },
	{ "tls_cert", "AIRLOCK_TLS_CERT", CFG_STR, OFF(tls_cert), 0, 0 },
	{ "tls_key", "AIRLOCK_TLS_KEY", CFG_STR, OFF(tls_key), 0, 0 },
	{ "e2b_domain", "AIRLOCK_E2B_DOMAIN", CFG_STR, OFF(e2b_domain), 0, 0 },
	{ "role", "AIRLOCK_ROLE", CFG_STR, OFF(role), 0, 0 },
	{ "api_uid", "AIRLOCK_API_UID", CFG_INT, OFF(api_uid), 1, 0x7fffffff },
	{ "worker_name", "AIRLOCK_WORKER_NAME", CFG_STR, OFF(worker_name), 0, 0 },
	{ "worker_listen", "AIRLOCK_WORKER_LISTEN", CFG_STR, OFF(worker_listen), 0, 0 },
	{ "advertise", "AIRLOCK_ADVERTISE", CFG_STR, OFF(advertise), 0, 0 },
	{ "worker_labels", "AIRLOCK_WORKER_LABELS", CFG_STR, OFF(worker_labels), 0, 0 },
	{ "health_listen", "AIRLOCK_HEALTH_LISTEN", CFG_STR, OFF(health_listen), 0, 0 },
	{ "cluster_ca", "AIRLOCK_CLUSTER_CA", CFG_STR, OFF(cluster_ca), 0, 0 },
	{ "cluster_cert", "AIRLOCK_CLUSTER_CERT", CFG_STR, OFF(cluster_cert), 0, 0 },
	{ "cluster_key", "AIRLOCK_CLUSTER_KEY", CFG_STR, OFF(cluster_key), 0, 0 },
	{ "secrets_key", "AIRLOCK_SECRETS_KEY", CFG_STR, OFF(secrets_key), 0, 0 },
	{ "shutdown_deadline_s", "AIRLOCK_SHUTDOWN_DEADLINE_S", CFG_INT, OFF(shutdown_deadline_s),
	  1, 86400 },
	/* Retained serial console per sandbox, bytes (docs/vm-engine.md "Console"). */
	{ "console_max", "AIRLOCK_CONSOLE_MAX", CFG_INT, OFF(console_max), 8192, 1L << 30 },
	{ "disk_free_floor_mb", "AIRLOCK_DISK_FREE_FLOOR_MB", CFG_INT, OFF(disk_free_floor_mb),
	  0, 1L << 30 },
	{ "max_disk_mb", "AIRLOCK_MAX_DISK_MB", CFG_INT, OFF(max_disk_mb), 64, 1L << 24 },
	{ "template_cache_mb", "AIRLOCK_TEMPLATE_CACHE_MB", CFG_INT, OFF(template_cache_mb), 0,
	  1L << 24 },
	{ "template_context_max_mb", "AIRLOCK_TEMPLATE_CONTEXT_MAX_MB", CFG_INT,
	  OFF(template_context_max_mb), 1, 4096 },
	/* PUT /v1/templates/:name/image: the largest image tarball accepted. */
	{ "template_upload_max_mb", "AIRLOCK_TEMPLATE_UPLOAD_MAX_MB", CFG_INT,
	  OFF(template_upload_max_mb), 1, 1L << 24 },
	/* Warm pools: validated by config_pool_parse when set. */
	{ "pool", "AIRLOCK_POOL", CFG_STR, OFF(pool), 0, 0 },
	{ "pool_memory_mb", "AIRLOCK_POOL_MEMORY_MB", CFG_INT, OFF(pool_memory_mb), 0, 1L << 24 },
	{ "pool_refills", "AIRLOCK_POOL_REFILLS", CFG_INT, OFF(pool_refills), 0, 64 },
	{ "pool_spares", "AIRLOCK_POOL_SPARES", CFG_INT, OFF(pool_spares), 0,
	  CONFIG_POOL_SPARES_MAX },
	/* At most the channel's streams per link (CHAN_MAX_STREAMS). */
	{ "api_rate_per_key", "AIRLOCK_API_RATE_PER_KEY", CFG_INT, OFF(api_rate_per_key), 0, 1000000 },
	{ "api_burst_per_key", "AIRLOCK_API_BURST_PER_KEY", CFG_INT, OFF(api_burst_per_key), 1,
	  1000000 },
	{ "max_execs_per_sandbox", "AIRLOCK_MAX_EXECS_PER_SANDBOX", CFG_INT,
	  OFF(max_execs_per_sandbox), 1, 1024 },
	{ "max_streams_per_sandbox", "AIRLOCK_MAX_STREAMS_PER_SANDBOX", CFG_INT,
	  OFF(max_streams_per_sandbox), 1, 1024 },
	{ "stream_rate_per_sandbox", "AIRLOCK_STREAM_RATE_PER_SANDBOX", CFG_INT,
	  OFF(stream_rate_per_sandbox), 0, 1L << 22 },
	{ "cpu_weight", "AIRLOCK_CPU_WEIGHT", CFG_INT, OFF(cpu_weight), 1, 10000 },
	{ "cpu_limit_pct", "AIRLOCK_CPU_LIMIT_PCT", CFG_INT, OFF(cpu_limit_pct), 1, 100 },
};

/* Template names as templates/ has them: [a-z0-9][a-z0-9._-]* (template.h). */
static int
pool_name_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n >= sizeof(((struct config_pool *)0)->template_name))
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		    (i > 0 && (s[i] == '-' || s[i] == '_' || s[i] == '.'))))
			return 0;
	return 1;
}

int
config_pool_parse(const char *s, struct config_pool *out, size_t max, size_t *n,
    char **cause)
{
	const char *p = s, *eq, *end;
	char *e;
	long v;
	size_t i;

	*n = 0;
	if (*s == '\0' || strcmp(s, "none") == 0)
		return 0;
	if (strcmp(s, "auto") == 0) {
		snprintf(out[0].template_name, sizeof(out[0].template_name), "base");
		out[0].size = -1;
		*n = 1;
		return 0;
	}
	while (*p != '\0') {
		end = p + strcspn(p, ",");
		eq = memchr(p, '=', (size_t)(end - p));
		if (eq == NULL || !pool_name_ok(p, (size_t)(eq - p))) {
			cause_set(cause, "pool: \"%.*s\" is not TEMPLATE=SIZE", (int)(end - p), p);
			return -1;
		}
		errno = 0;
		v = strtol(eq + 1, &e, 10);
		if (e != end || eq + 1 == end || errno != 0 || v < 0 || v > CONFIG_POOL_SIZE_MAX) {
			cause_set(cause, "pool: %.*s: size must be 0..%d", (int)(eq - p), p,
			    CONFIG_POOL_SIZE_MAX);
			return -1;
		}
		for (i = 0; i < *n; i++)
			if (strlen(out[i].template_name) == (size_t)(eq - p) &&
			    strncmp(out[i].template_name, p, (size_t)(eq - p)) == 0) {
				cause_set(cause, "pool: template %.*s given twice", (int)(eq - p), p);
				return -1;
			}
		if (*n == max) {
			cause_set(cause, "pool: more than %zu templates", max);
			return -1;
		}
		snprintf(out[*n].template_name, sizeof(out[*n].template_name), "%.*s",
		    (int)(eq - p), p);
		out[*n].size = (int)v;
		(*n)++;
		p = *end == ',' ? end + 1 : end;
		if (*p == '\0' && *end == ',') {
			cause_set(cause, "pool: trailing comma");
			return -1;
		}
	}
	return 0;
}

void
config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	c->listen_host = xstrdup("127.0.0.1");
	c->listen_port = 7070;
	c->data_dir = xstrdup(paths_data_dir());
	c->accel = VM_ACCEL_AUTO;
	c->default_vcpus = 2;
	c->default_memory_mb = 512;
	c->default_idle_timeout_s = 6 * 3600;
	c->sweep_interval_s = 15;
	c->idle_cpu_pct = 2;
	c->max_sandboxes = 256;
	c->http_conns_max = HTTP_CONNS_MAX;
	c->http_conns_per_addr = HTTP_CONNS_PER_ADDR;
	c->health_interval_s = 10;
	c->health_timeout_s = 5;
	c->unhealthy_grace_s = 60;
	c->on_unhealthy = CONFIG_UNHEALTHY_FAIL;
	c->restart_max = 3;
	c->restart_window_s = 600;
	c->gateway_rate_rps = 100;
	c->gateway_rate_bps = 50 * 1024 * 1024;
	c->tls = xstrdup("off");
	c->e2b_domain = xstrdup("airlock.localhost");
	c->role = xstrdup("direct");
	c->shutdown_deadline_s = 60;
	c->api_uid = 399998;	/* beside the gateway's 399999, below the jail uids */
	c->disk_free_floor_mb = 2048;
	c->max_disk_mb = 65536;
	c->template_cache_mb = 20480;
	c->template_context_max_mb = 256;
	c->template_upload_max_mb = 4096;
	c->max_execs_per_sandbox = 64;
	c->api_rate_per_key = 200;
	c->api_burst_per_key = 1000;
	c->max_streams_per_sandbox = 64;
	c->stream_rate_per_sandbox = 2048;
	c->cpu_weight = 100;
	c->cpu_limit_pct = 100;
	c->pool_spares = 1;
}

/* "k=v,k=v": label keys like Kubernetes' (a-z0-9 . _ / -), values printable and short. */
json_t *
config_labels(const char *s, char **cause)
{
	json_t *o = json_object();
	char *copy, *tok, *save = NULL;

	if (s == NULL || *s == '\0')
		return o;
	copy = xstrdup(s);
	for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		size_t i;
		if (eq == NULL || eq == tok || eq - tok > 63 || strlen(eq + 1) > 63 ||
		    json_object_size(o) >= CONFIG_LABELS_MAX) {
			cause_set(cause, "worker_labels: \"%s\": want KEY=VALUE (at most %d, 63 "
			    "characters each)", tok, CONFIG_LABELS_MAX);
			goto bad;
		}
		*eq = '\0';
		for (i = 0; tok[i] != '\0'; i++)
			if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789._/-", tok[i])) {
				cause_set(cause, "worker_labels: key \"%s\": a-z 0-9 . _ / - only", tok);
				goto bad;
			}
		for (i = 0; eq[1 + i] != '\0'; i++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    eq[1 + i])) {
				cause_set(cause, "worker_labels: value of %s: A-Z a-z 0-9 . _ - only", tok);
				goto bad;
			}
		json_object_set_new(o, tok, json_string(eq + 1));
	}
	free(copy);
	return o;
bad:
	free(copy);
	json_decref(o);
	return NULL;
}

int
config_set(struct config *c, const char *key, const char *value, char **cause)
{
	const struct cfg_entry *e = NULL;
	size_t i;
	char *end;
	long v;

	for (i = 0; i < sizeof(cfg_table) / sizeof(cfg_table[0]); i++)
		if (strcmp(cfg_table[i].key, key) == 0)
			e = &cfg_table[i];
	if (e == NULL) {
		cause_set(cause, "%s: unknown setting", key);
		return -1;
	}
	switch (e->type) {
	case CFG_STR: {
		char **dst = (char **)((char *)c + e->off);
		if (*value == '\0') {
			cause_set(cause, "%s: empty value", key);
			return -1;
		}
		if (e->off == OFF(pool)) {
			struct config_pool tmp[CONFIG_POOL_MAX];
			size_t n;
			if (config_pool_parse(value, tmp, CONFIG_POOL_MAX, &n, cause) == -1)
				return -1;
		}
		if (e->off == OFF(worker_labels)) {
			json_t *l = config_labels(value, cause);
			if (l == NULL)
				return -1;
			json_decref(l);
		}
		if (e->off == OFF(role) && strcmp(value, "direct") != 0 &&
		    strcmp(value, "api") != 0 && strcmp(value, "worker") != 0) {
			cause_set(cause, "%s: \"%s\" must be direct, api or worker", key, value);
			return -1;
		}
		free(*dst);
		*dst = xstrdup(value);
		return 0;
	}
	case CFG_INT:
	case CFG_BOOL:
		if (e->type == CFG_BOOL && (strcmp(value, "true") == 0 || strcmp(value, "yes") == 0))
			v = 1;
		else if (e->type == CFG_BOOL && (strcmp(value, "false") == 0 || strcmp(value, "no") == 0))
			v = 0;
		else {
			errno = 0;
			v = strtol(value, &end, 10);
			if (errno != 0 || *end != '\0' || end == value) {
				cause_set(cause, "%s: \"%s\" is not a number", key, value);
				return -1;
			}
		}
		if (v < e->min || v > e->max) {
			cause_set(cause, "%s: %ld out of range %ld..%ld", key, v, e->min, e->max);
			return -1;
		}
		if (e->off == OFF(default_idle_timeout_s))
			c->default_idle_timeout_s = v;
		else
			*(int *)((char *)c + e->off) = (int)v;
		return 0;
	case CFG_ON_UNHEALTHY:
		if (strcmp(value, "fail") == 0)
			c->on_unhealthy = CONFIG_UNHEALTHY_FAIL;
		else if (strcmp(value, "restart") == 0)
			c->on_unhealthy = CONFIG_UNHEALTHY_RESTART;
		else {
			cause_set(cause, "%s: \"%s\" must be fail or restart", key, value);
			return -1;
		}
		return 0;
	case CFG_ACCEL:
		if (accel_parse(value, &c->accel) == -1) {
			cause_set(cause, "%s: \"%s\" must be auto, kvm or tcg", key, value);
			return -1;
		}
		return 0;
	}
	return -1;
}

int
config_load_file(struct config *c, const char *path, int must_exist, char **cause)
{
	char *text, *line, *next, *end, *nl, *key, *val, *p;
	int lineno = 0, rc = 0;
	size_t len;

	if (read_file(path, 1024 * 1024, &text, &len, cause) == -1) {
		if (!must_exist && errno == ENOENT) {
			free(*cause);
			*cause = NULL;
			return 0;
		}
		return -1;
	}
	/*
	 * Line by line, blank ones counted (errors name the line an editor
	 * shows); a NUL byte would silently end the file early, so it is refused.
	 */
	end = text + len;
	for (line = text; line < end; line = next) {
		if ((nl = memchr(line, '\n', (size_t)(end - line))) == NULL)
			nl = end;	/* read_file NUL-terminates: *end is already 0 */
		next = nl < end ? nl + 1 : end;
		lineno++;
		if (memchr(line, '\0', (size_t)(nl - line)) != NULL) {
			cause_set(cause, "%s:%d: NUL byte", path, lineno);
			rc = -1;
			break;
		}
		*nl = '\0';
		if ((p = strchr(line, '#')) != NULL)
			*p = '\0';
		/* CRLF files: a blank line is "\r". */
		key = line + strspn(line, " \t\r");
		if (*key == '\0')
			continue;
		if ((p = strchr(key, '=')) == NULL) {
			cause_set(cause, "%s:%d: expected key = value", path, lineno);
			rc = -1;
			break;
		}
		*p = '\0';
		val = p + 1 + strspn(p + 1, " \t");
		for (p = key + strlen(key); p > key && (p[-1] == ' ' || p[-1] == '\t'); p--)
			*(p - 1) = '\0';
		for (p = val + strlen(val); p > val && (p[-1] == ' ' || p[-1] == '\t' ||
		    p[-1] == '\r'); p--)
			*(p - 1) = '\0';
		if (config_set(c, key, val, cause) == -1) {
			cause_wrap(cause, "%s:%d", path, lineno);
			rc = -1;
			break;
		}
	}
	free(text);
	return rc;
}

int
config_load_env(struct config *c, char **cause)
{
	size_t i;
	const char *v;

	for (i = 0; i < sizeof(cfg_table) / sizeof(cfg_table[0]); i++) {
		if (cfg_table[i].env == NULL || (v = getenv(cfg_table[i].env)) == NULL || *v == '\0')
			continue;
		if (config_set(c, cfg_table[i].key, v, cause) == -1) {
			cause_wrap(cause, "environment %s", cfg_table[i].env);
			return -1;
		}
	}
	return 0;
}

void
config_free(struct config *c)
{
	free(c->listen_host);
	free(c->tls);
	free(c->e2b_domain);
	free(c->role);
	free(c->worker_name);
	free(c->worker_listen);
	free(c->advertise);
	free(c->worker_labels);
	free(c->health_listen);
	free(c->cluster_ca);
	free(c->cluster_cert);
	free(c->cluster_key);
	free(c->secrets_key);
	free(c->pool);
	free(c->tls_cert);
	free(c->tls_key);
	free(c->data_dir);
	free(c->store_url);
	free(c->gateway_bin);
	free(c->gateway_resolver);
	free(c->gateway_upstream_ca);
	free(c->gateway_netns);
	free(c->gateway_internal);
	memset(c, 0, sizeof(*c));
}
