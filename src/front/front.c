/* The API front's process: inherited listener, TLS, privilege drop, the proxy loop. */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/confine.h"
#include "common/log.h"
#include "common/util.h"
#include "config/config.h"
#include "front/front.h"
#include "front/front_cluster.h"
#include "front/front_proxy.h"
#include "http/http_server.h"
#include "http/http_tls.h"

struct front {
	struct event_base	*base;
	struct http_server	*srv;
	struct front_cluster	*cluster;	/* an API replica: workers from the store */
	struct sockaddr_un	 worker;	/* the worker's unix socket */
	const char		*proto;		/* "http" or "https" */
};

/* A connection to the worker, connecting: errors show up as the request's failure. */
static struct bufferevent *
front_connect(struct front *f)
{
	struct bufferevent *bev = bufferevent_socket_new(f->base, -1, BEV_OPT_CLOSE_ON_FREE);

	if (bev == NULL)
		return NULL;
	if (bufferevent_socket_connect(bev, (struct sockaddr *)&f->worker,
	    sizeof(f->worker)) == -1) {
		bufferevent_free(bev);
		return NULL;
	}
	return bev;
}

static void
front_route(struct http_req *req, void *arg)
{
	struct front *f = arg;
	struct bufferevent *up;

	if (f->cluster != NULL) {
		front_cluster_route(f->cluster, req, f->proto);
		return;
	}
	if ((up = front_connect(f)) == NULL) {
		log_warn("front: connect to the worker");
		front_reply_error(req, 503, "unavailable",
		    "the sandbox worker is not available; try again");
		return;
	}
	front_proxy(req, up, f->proto);
}

static void
front_stop(evutil_socket_t sig, short what, void *arg)
{
	struct front *f = arg;

	log_info("front: signal %d: closing", (int)sig);
	event_base_loopexit(f->base, NULL);
}

/* A number from the environment, strictly (an unset or bad value is fatal). */
static long
env_num(const char *name, const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = s != NULL ? strtol(s, &end, 10) : -1;
	if (s == NULL || errno != 0 || end == s || v < 0 || v > max)
		fatalx("front: %s: want a number up to %ld", name, max);
	return v;
}

static void
front_env(struct front *f, int *lfd, uid_t *uid, gid_t *gid, char **cert, char **key)
{
	const char *up = getenv(FRONT_ENV_UPSTREAM), *ids = getenv(FRONT_ENV_UID);
	const char *tls = getenv(FRONT_ENV_TLS), *colon;

	*lfd = (int)env_num(FRONT_ENV_LISTEN_FD, getenv(FRONT_ENV_LISTEN_FD), 1 << 20);
	if (up == NULL || strncmp(up, "unix:", 5) != 0 ||
	    strlen(up + 5) >= sizeof(f->worker.sun_path))
		fatalx("front: %s: want unix:PATH", FRONT_ENV_UPSTREAM);
	f->worker.sun_family = AF_UNIX;
	memcpy(f->worker.sun_path, up + 5, strlen(up + 5) + 1);
	if (ids == NULL || (colon = strchr(ids, ':')) == NULL)
		fatalx("front: %s: want UID:GID", FRONT_ENV_UID);
	*uid = (uid_t)env_num(FRONT_ENV_UID, ids, 0x7fffffff);
	*gid = (gid_t)env_num(FRONT_ENV_UID, colon + 1, 0x7fffffff);
	*cert = *key = NULL;
	if (tls != NULL && *tls != '\0') {
		if ((colon = strchr(tls, ':')) == NULL)
			fatalx("front: %s: want CERT:KEY", FRONT_ENV_TLS);
		*cert = xstrndup(tls, (size_t)(colon - tls));
		*key = xstrdup(colon + 1);
	}
}

/* Tell the worker we serve, confined (its first start waits for this). */
static void
front_ready(void)
{
	const char *v = getenv(FRONT_ENV_READY_FD);
	int fd;

	if (v == NULL)
		return;
	fd = (int)env_num(FRONT_ENV_READY_FD, v, 1 << 20);
	if (write(fd, "R", 1) != 1)
		log_warn("front: telling the worker we are ready");
	close(fd);
}

/*
 * An API replica on its own (no worker started us): it binds the API's
 * address itself, serves TLS from tls_cert/tls_key (tls = file; no CA
 * here to mint from), and drops to api_uid when started as root.
 */
static void
front_cluster_env(const struct config *cfg, int *lfd, uid_t *uid, gid_t *gid, char **cert,
    char **key)
{
	char *cause = NULL;

	*cert = *key = NULL;
	if (strcmp(cfg->tls, "ca") == 0)
		fatalx("front: tls = ca needs the host CA, which an API replica does not hold; "
		    "use tls = file");
	if (strcmp(cfg->tls, "file") == 0) {
		if (cfg->tls_cert == NULL || cfg->tls_key == NULL)
			fatalx("front: tls = file needs tls_cert and tls_key");
		*cert = xstrdup(cfg->tls_cert);
		*key = xstrdup(cfg->tls_key);
	}
	if ((*lfd = http_listen_socket(cfg->listen_host, cfg->listen_port, &cause)) == -1)
		fatalx("front: %s", cause);
	*uid = geteuid() == 0 ? (uid_t)cfg->api_uid : geteuid();
	*gid = geteuid() == 0 ? (gid_t)cfg->api_uid : getegid();
}

int
front_main(const struct config *cfg)
{
	struct front f;
	struct http_limits lim;
	struct http_tls *tls = NULL;
	struct event *sigterm, *sigint;
	char *cert, *key, *cause = NULL;
	uid_t uid;
	gid_t gid;
	pid_t ppid;
	int lfd, direct = getenv(FRONT_ENV_UPSTREAM) != NULL;

	memset(&f, 0, sizeof(f));
	ppid = getppid();
	if (direct)
		front_env(&f, &lfd, &uid, &gid, &cert, &key);
	else
		front_cluster_env(cfg, &lfd, &uid, &gid, &cert, &key);
	if (uid == 0)
		fatalx("front: refusing to serve clients as root");
	signal(SIGPIPE, SIG_IGN);
	if (chdir("/") == -1)
		fatal("front: chdir /");
	if ((f.base = event_base_new()) == NULL)
		fatalx("front: event_base_new failed");
	f.srv = http_server_new(f.base, front_route, &f);
	http_limits_default(&lim);
	lim.conns_max = (unsigned)cfg->http_conns_max;
	lim.conns_per_addr = (unsigned)cfg->http_conns_per_addr;
	http_server_set_limits(f.srv, &lim);
	/* The key is read now, as root; after the drop nothing can open it again. */
	if (cert != NULL && (tls = http_tls_new(cert, key, &cause)) == NULL)
		fatalx("front: tls: %s", cause);
	if (tls != NULL)
		http_tls_attach(tls, f.srv);
	f.proto = tls != NULL ? "https" : "http";
	if (http_server_listen_fd(f.srv, lfd, &cause) == -1)
		fatalx("front: %s", cause);
	if (!direct && (f.cluster = front_cluster_new(f.base, cfg, &cause)) == NULL)
		fatalx("front: %s", cause);
	if (!direct)
		http_server_set_nodelay(f.srv);	/* behind a balancer: its hop, as the workers' */
	if (geteuid() == 0)
		confine_drop(uid, gid);
	/* Dropping clears the parent-death signal: set it again; a worker already gone ends us. */
	if (direct && (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1 || getppid() != ppid))
		fatalx("front: the worker that started us is gone");
	confine_seccomp(0);
	sigterm = evsignal_new(f.base, SIGTERM, front_stop, &f);
	sigint = evsignal_new(f.base, SIGINT, front_stop, &f);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	if (direct) {
		log_info("front: serving %s as uid %u for the worker at %s", f.proto,
		    (unsigned)getuid(), f.worker.sun_path);
		front_ready();
	} else {
		log_info("front: API replica serving %s on %s:%d as uid %u", f.proto,
		    cfg->listen_host, http_server_port(f.srv), (unsigned)getuid());
		printf("airlockd %s ready: %s://%s:%d\n", AIRLOCK_VERSION, f.proto, cfg->listen_host,
		    http_server_port(f.srv));
		fflush(stdout);
	}
	event_base_dispatch(f.base);
	http_server_free(f.srv);
	front_cluster_free(f.cluster);
	http_tls_free(tls);
	event_free(sigterm);
	event_free(sigint);
	event_base_free(f.base);
	free(cert);
	free(key);
	return 0;
}
