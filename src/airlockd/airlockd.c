/*
 * airlockd: the sandbox daemon (direct mode: one host, embedded SQLite).
 * Parses the configuration, opens the store, recovers sandboxes left by a
 * previous run, and serves the REST API until SIGTERM/SIGINT.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "airlockd/front_spawn.h"
#include "airlockd/worker_role.h"
#include "config/config.h"
#include "front/front.h"
#include "api/api.h"
#include "e2b/e2b.h"
#include "e2b/e2b_parse.h"
#include "http/http_server.h"
#include "api/metrics.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "sandbox/sbm.h"
#include "egress/secrets.h"
#include "db/store.h"

/* Sandbox lifecycle events into the store and to live SSE subscribers. */
static void
forward_event(void *arg, const char *sandbox, const char *project, const char *type, json_t *data)
{
	api_event(arg, sandbox, project, type, data);
}

static void
usage(void)
{
	fprintf(stderr, "usage: airlockd [-n] [-d] [-c config] [--role direct|api|worker] "
	    "[--listen HOST:PORT] [--data-dir DIR] [--store URL]\n");
	exit(2);
}

/* The first start creates an admin key, readable only by root, for the CLI. */
static int
bootstrap_admin_key(struct store *st, const char *data_dir, char **cause)
{
	char *path, *key;
	int n;

	if ((n = store_key_count(st, cause)) == -1)
		return -1;
	xasprintf(&path, "%s/admin.key", data_dir);
	if (n > 0 && path_exists(path)) {
		free(path);
		return 0;
	}
	if (n > 0) {
		log_info("API keys exist but %s is missing; not creating another admin key", path);
		free(path);
		return 0;
	}
	if ((key = api_key_create(st, "admin (bootstrap)", "default", "admin", NULL, cause)) == NULL) {
		free(path);
		return -1;
	}
	n = write_file_atomic(path, key, strlen(key), 0600, cause);
	if (n == 0)
		log_info("wrote the admin API key to %s (mode 0600)", path);
	explicit_bzero(key, strlen(key));
	free(key);
	free(path);
	return n;
}

struct daemon {
	struct event_base	*base;
	struct http_server	*srv;		/* the worker's side of the front's socket */
	struct front_spawn	*front;		/* direct mode */
	struct worker_role	*worker;	/* role worker */
	struct sbm		*sbm;
	int			 shutdown_ms;	/* shutdown_deadline_s */
	int			 stopping;
};

/* GET /metrics on a worker's health_listen: what the API's /metrics shows. */
static void
worker_metrics(struct evbuffer *out, void *arg)
{
	api_metrics_render(arg, out);
}

/* POST /v1/workers/{name}/drain: placement skips us, every sandbox is suspended. */
static void
worker_drain(void *arg)
{
	struct daemon *d = arg;

	worker_role_drain(d->worker);
	sbm_drain(d->sbm, d->shutdown_ms);
}

static void
shutdown_done(void *arg)
{
	struct daemon *d = arg;

	/* Every sandbox is suspended: nothing needs the gateway until the next start. */
	sbm_egress_stop(d->sbm);
	event_base_loopexit(d->base, NULL);
}

/*
 * SIGTERM/SIGINT: stop taking requests, suspend every live sandbox to disk
 * so it survives the restart, then exit. A second signal exits at once.
 */
static void
on_signal(evutil_socket_t sig, short ev, void *arg)
{
	struct daemon *d = arg;

	if (d->stopping++) {
		log_info("signal %d again: exiting now", (int)sig);
		event_base_loopexit(d->base, NULL);
		return;
	}
	log_info("signal %d: suspending sandboxes, then exiting", (int)sig);
	if (d->front != NULL)
		front_spawn_stop(d->front);
	if (d->worker != NULL)
		worker_role_drain(d->worker);
	http_server_free(d->srv);
	d->srv = NULL;
	sbm_shutdown(d->sbm, d->shutdown_ms, shutdown_done, d);
}

/*
 * Enough descriptors for the API's connection cap beside every sandbox, so
 * the cap is what limits connections, not EMFILE. Without room to raise
 * the hard limit, the cap shrinks to fit and says so.
 */
static void
raise_nofile(struct config *c)
{
	rlim_t other = (rlim_t)c->max_sandboxes * AIRLOCKD_FDS_PER_SANDBOX + AIRLOCKD_FDS_BASE;
	rlim_t want = (rlim_t)c->http_conns_max + other;
	struct rlimit rl, nl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1) {
		log_warn("getrlimit(RLIMIT_NOFILE)");
		return;
	}
	if (rl.rlim_cur >= want)
		return;
	nl.rlim_cur = want;
	nl.rlim_max = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &nl) == 0) {
		log_info("file descriptor limit raised to %llu (%d API connections, %d sandboxes)",
		    (unsigned long long)want, c->http_conns_max, c->max_sandboxes);
		return;
	}
	/* The hard limit (or fs.nr_open) stops us: take all of it. */
	nl = rl;
	nl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &nl) == -1)
		nl.rlim_cur = rl.rlim_cur;
	if (nl.rlim_cur < other + 64)
		c->http_conns_max = 64;
	else if (nl.rlim_cur - other < (rlim_t)c->http_conns_max)
		c->http_conns_max = (int)(nl.rlim_cur - other);
	log_warnx("file descriptor limit %llu is below the %llu wanted: API connections capped "
	    "at %d", (unsigned long long)nl.rlim_cur, (unsigned long long)want, c->http_conns_max);
}

static int
parse_listen(struct config *c, const char *s, char **cause)
{
	const char *colon = strrchr(s, ':');
	char *host;
	int rc;

	if (colon == NULL) {
		cause_set(cause, "--listen: want HOST:PORT");
		return -1;
	}
	host = xstrndup(s, (size_t)(colon - s));
	if (*host == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	rc = config_set(c, "listen_host", host, cause);
	if (rc == 0)
		rc = config_set(c, "listen_port", colon + 1, cause);
	free(host);
	return rc;
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "data-dir", required_argument, NULL, 'D' },
		{ "store", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "role", required_argument, NULL, 'r' },
		{ NULL, 0, NULL, 0 }
	};
	const char *cfgfile = CONFIG_DEFAULT_FILE;
	struct event *sigterm, *sigint;
	struct daemon d;
	struct http_server *srv;
	struct http_limits lim;
	const char *scheme;
	struct event_base *base;
	struct metrics *metrics;
	struct config cfg;
	struct store *st;
	struct sbm *sbm;
	struct api *api;
	char *cause = NULL, *url;
	int ch, check = 0, debug = 0, explicit_cfg = 0, port;
	const char *flag_listen = NULL, *flag_data = NULL, *flag_store = NULL, *flag_role = NULL;

	log_init("airlockd", LOG_LVL_INFO);
	while ((ch = getopt_long(argc, argv, "c:dnl:D:s:r:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c': cfgfile = optarg; explicit_cfg = 1; break;
		case 'd': debug = 1; break;
		case 'n': check = 1; break;
		case 'l': flag_listen = optarg; break;
		case 'D': flag_data = optarg; break;
		case 's': flag_store = optarg; break;
		case 'r': flag_role = optarg; break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	config_defaults(&cfg);
	if (config_load_file(&cfg, cfgfile, explicit_cfg, &cause) == -1 ||
	    config_load_env(&cfg, &cause) == -1 ||
	    (flag_listen && parse_listen(&cfg, flag_listen, &cause) == -1) ||
	    (flag_data && config_set(&cfg, "data_dir", flag_data, &cause) == -1) ||
	    (flag_store && config_set(&cfg, "store", flag_store, &cause) == -1) ||
	    (flag_role && config_set(&cfg, "role", flag_role, &cause) == -1))
		fatalx("configuration: %s", cause);
	if (!e2b_domain_valid(cfg.e2b_domain))
		fatalx("configuration: e2b_domain: \"%s\" is not a lowercase DNS name of two "
		    "labels or more (e.g. sandboxes.example.com)", cfg.e2b_domain);
	if (debug)
		cfg.log_debug = 1;
	log_setlevel(cfg.log_debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	log_set_json(cfg.log_json);
	if (check) {
		printf("configuration OK\n");
		return 0;
	}
	if (strcmp(cfg.role, "api") == 0) {
		log_init("airlockd-front", cfg.log_debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
		log_set_json(cfg.log_json);
		ch = front_main(&cfg);
		config_free(&cfg);
		return ch;
	}
	if (strcmp(cfg.role, "worker") == 0) {
		char host[256];
		if (cfg.store_url == NULL || strncmp(cfg.store_url, "sqlite:", 7) == 0 ||
		    strchr(cfg.store_url, ':') == NULL)
			fatalx("role worker: the workers and API replicas share a PostgreSQL store; "
			    "set store = postgresql://...");
		if (cfg.worker_name == NULL) {
			if (gethostname(host, sizeof(host)) == -1)
				fatal("gethostname");
			host[sizeof(host) - 1] = '\0';
			cfg.worker_name = xstrdup(host);
		}
		/* It names rows, URL paths (/v1/workers/{name}) and metric labels. */
		if (cfg.worker_name[0] == '\0' || strlen(cfg.worker_name) >= STORE_ID_MAX ||
		    cfg.worker_name[strspn(cfg.worker_name, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")] != '\0')
			fatalx("worker_name \"%s\": want 1 to %d of A-Z a-z 0-9 . _ -",
			    cfg.worker_name, STORE_ID_MAX - 1);
	}
	if (geteuid() != 0)
		fatalx("airlockd needs root (VM jails, network namespaces, nftables)");
	/* Everything below resolves data paths through the environment. */
	setenv("AIRLOCK_DATA_DIR", cfg.data_dir, 1);
	if (mkdir_p(cfg.data_dir, 0755, &cause) == -1)
		fatalx("%s", cause);
	signal(SIGPIPE, SIG_IGN);
	umask(022);
	raise_nofile(&cfg);

	if (cfg.store_url != NULL)
		url = xstrdup(cfg.store_url);
	else
		xasprintf(&url, "sqlite:%s/state.db", cfg.data_dir);
	if ((st = store_open(url, &cause)) == NULL)
		fatalx("%s", cause);
	if (bootstrap_admin_key(st, cfg.data_dir, &cause) == -1)
		fatalx("admin key: %s", cause);
	if ((cfg.secrets_key != NULL ? secrets_init_path(cfg.secrets_key, &cause) :
	    secrets_init(cfg.data_dir, &cause)) == -1)
		fatalx("secrets key: %s", cause);

	base = event_base_new();
	if (base == NULL)
		fatalx("event_base_new failed");
	if ((sbm = sbm_new(base, st, &cfg, &cause)) == NULL)
		fatalx("%s", cause);
	metrics = metrics_new();
	api = api_new(base, st, &cfg, sbm, metrics);
	api->accel_name = sbm_accel_name(sbm);
	sbm_set_events(sbm, forward_event, api);
	if (sbm_recover(sbm, &cause) == -1)
		fatalx("recovery: %s", cause);
	/* Not fatal: sandboxes without a network work without the gateway. */
	if (sbm_egress_reconcile(sbm, &cause) == -1) {
		log_warnx("gateway: %s", cause);
		free(cause);
		cause = NULL;
	}

	/*
	 * E2B's routes and envd proxy first (src/e2b/); the rest is airlock's
	 * API. Served to the API front alone, on a unix socket: the front
	 * (an unprivileged process of its own) holds the clients' connections.
	 */
	srv = http_server_new(base, e2b_front, api);
	http_limits_default(&lim);
	lim.conns_max = (unsigned)cfg.http_conns_max;
	lim.conns_per_addr = 0;
	http_server_set_limits(srv, &lim);
	api->srv = srv;
	memset(&d, 0, sizeof(d));
	if (strcmp(cfg.role, "worker") == 0) {
		/* The API replicas connect here; the front runs apart (their own hosts). */
		if ((d.worker = worker_role_new(base, &cfg, st, sbm, srv, &cause)) == NULL)
			fatalx("%s", cause);
		worker_role_set_metrics(d.worker, worker_metrics, api);
		api->worker_name = cfg.worker_name;
		api->drain = worker_drain;
		api->drain_arg = &d;
		port = worker_role_port(d.worker);
		scheme = "https";	/* mutual TLS, for the API replicas */
	} else {
		if ((d.front = front_spawn_new(base, &cfg, srv, argv, &cause)) == NULL)
			fatalx("%s", cause);
		port = front_spawn_port(d.front);
		scheme = strcmp(cfg.tls, "off") != 0 ? "https" : "http";
	}
	d.base = base;
	d.shutdown_ms = cfg.shutdown_deadline_s * 1000;
	d.srv = srv;
	d.sbm = sbm;
	sigterm = evsignal_new(base, SIGTERM, on_signal, &d);
	sigint = evsignal_new(base, SIGINT, on_signal, &d);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);

	log_info("listening on %s://%s:%d (accel %s, store %s, data %s)", scheme, cfg.listen_host,
	    port, api->accel_name, url, cfg.data_dir);
	printf("airlockd %s ready: %s://%s:%d\n", AIRLOCK_VERSION, scheme, cfg.listen_host, port);
	fflush(stdout);
	event_base_dispatch(base);

	front_spawn_free(d.front);
	if (d.srv != NULL)
		http_server_free(d.srv);
	worker_role_free(d.worker);	/* after the server: its TLS transport is the worker's */
	api_free(api);
	sbm_free(sbm);
	metrics_free(metrics);
	event_free(sigterm);
	event_free(sigint);
	event_base_free(base);
	store_close(st);
	secrets_shutdown();
	free(url);
	config_free(&cfg);
	return 0;
}
