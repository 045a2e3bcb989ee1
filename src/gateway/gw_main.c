/*
 * airlock-gateway: setup (upstream netns, resolver, TLS contexts, control
 * socket), privilege drop and seccomp, then the event loop. Started and
 * supervised by airlockd; outlives it (airlockd reconnects on restart).
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/thread.h>
#include <openssl/err.h>

#include "common/confine.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/shared/gw_addr.h"
#include "gateway/shared/gw_audit.h"
#include "gateway/shared/gw_ctl.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_server.h"
#include "gateway/gw_tls.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_worker.h"

static void
usage(void)
{
	fprintf(stderr,
	    "usage: airlock-gateway --ctl PATH --audit-dir DIR --ca-cert PEM --ca-key PEM\n"
	    "           [--upstream-ca PEM] [--resolver IP[:PORT]] [--netns PATH]\n"
	    "           [--uid UID --gid GID] [--audit-max-bytes N] [--audit-keep N]\n"
	    "           [--threads N] [--log-json] [--debug]\n");
	exit(2);
}

/*
 * A number option, strictly: "--uid abc" read as 0 would mean running as
 * root instead of the intended user.
 */
static long long
gw_opt_num(const char *opt, const char *s, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v < min || v > max)
		fatalx("%s: \"%s\" is not a number in %lld..%lld", opt, s, min, max);
	return v;
}

/* Enter the upstream netns before anything opens a socket: every dial leaves from there. */
static void
gw_enter_netns(const char *path)
{
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		fatal("open netns %s", path);
	if (setns(fd, CLONE_NEWNET) == -1)
		fatal("setns %s", path);
	close(fd);
}

static SSL_CTX *
gw_upstream_ctx(const char *extra_ca)
{
	SSL_CTX *ctx;

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL)
		fatalx("SSL_CTX_new failed");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_default_verify_paths(ctx) != 1)
		fatalx("cannot load the system trust store");
	if (extra_ca != NULL && SSL_CTX_load_verify_locations(ctx, extra_ca, NULL) != 1)
		fatalx("cannot load the upstream CA bundle %s", extra_ca);
	return ctx;
}

/* Rotation renames inside the audit dir after the privilege drop: hand it over. */
static void
gw_audit_chown(const char *dir, int keep, uid_t uid, gid_t gid)
{
	char *p;

	if (chown(dir, uid, gid) == -1)
		fatal("chown %s", dir);
	for (int i = 0; i <= keep; i++) {
		if (i == 0)
			xasprintf(&p, "%s/audit.log", dir);
		else
			xasprintf(&p, "%s/audit.log.%d", dir, i);
		if (chown(p, uid, gid) == -1 && errno != ENOENT)
			fatal("chown %s", p);
		free(p);
	}
}

static void
gw_signal(evutil_socket_t sig, short what, void *arg)
{
	struct gw *gw = arg;

	log_info("gateway: signal %d, exiting", (int)sig);
	event_base_loopexit(gw->base, NULL);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl", required_argument, NULL, 'c' },
		{ "audit-dir", required_argument, NULL, 'a' },
		{ "ca-cert", required_argument, NULL, 'C' },
		{ "ca-key", required_argument, NULL, 'K' },
		{ "upstream-ca", required_argument, NULL, 'U' },
		{ "resolver", required_argument, NULL, 'r' },
		{ "netns", required_argument, NULL, 'n' },
		{ "uid", required_argument, NULL, 'u' },
		{ "gid", required_argument, NULL, 'g' },
		{ "audit-max-bytes", required_argument, NULL, 'm' },
		{ "audit-keep", required_argument, NULL, 'k' },
		{ "threads", required_argument, NULL, 't' },
		{ "log-json", no_argument, NULL, 'j' },
		{ "debug", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	struct gw gw = { 0 };
	struct event *sigterm, *sigint;
	long uid = 0, gid = 0;
	char *cause = NULL;
	int ch, debug = 0;

	log_init("airlock-gateway", LOG_LVL_INFO);
	gw.cfg.audit_max_bytes = 64 * 1024 * 1024;
	gw.cfg.audit_keep = 5;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': gw.cfg.ctl_path = optarg; break;
		case 'a': gw.cfg.audit_dir = optarg; break;
		case 'C': gw.cfg.ca_cert = optarg; break;
		case 'K': gw.cfg.ca_key = optarg; break;
		case 'U': gw.cfg.upstream_ca = optarg; break;
		case 'r': gw.cfg.resolver = optarg; break;
		case 'n': gw.cfg.netns = optarg; break;
		case 'u': uid = gw_opt_num("--uid", optarg, 0, 0x7fffffff); break;
		case 'g': gid = gw_opt_num("--gid", optarg, 0, 0x7fffffff); break;
		case 'm':
			gw.cfg.audit_max_bytes = (uint64_t)gw_opt_num("--audit-max-bytes", optarg,
			    4096, (long long)1 << 40);
			break;
		case 'k': gw.cfg.audit_keep = (int)gw_opt_num("--audit-keep", optarg, 1, 100); break;
		case 't':
			gw.cfg.threads = (int)gw_opt_num("--threads", optarg, 1, GW_THREADS_MAX);
			break;
		case 'j': log_set_json(1); break;
		case 'd': debug = 1; break;
		default: usage();
		}
	}
	if (optind != argc || gw.cfg.ctl_path == NULL || gw.cfg.audit_dir == NULL ||
	    gw.cfg.ca_cert == NULL || gw.cfg.ca_key == NULL || uid < 0 || gid < 0)
		usage();
	if (debug)
		log_setlevel(LOG_LVL_DEBUG);
	signal(SIGPIPE, SIG_IGN);
	if (gw.cfg.threads == 0) {
		/* One event loop per online core: TLS both ways is CPU-bound. */
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		gw.cfg.threads = n < 1 ? 1 : n > GW_THREADS_MAX ? GW_THREADS_MAX : (int)n;
	}
	/* Before any base exists: every base gets locks, event_active works across threads. */
	if (evthread_use_pthreads() == -1)
		fatalx("evthread_use_pthreads failed");
	/* jansson seeds its hash once; do it before threads race for it. */
	json_object_seed(0);

	if (gw.cfg.netns != NULL)
		gw_enter_netns(gw.cfg.netns);
	if ((gw.base = event_base_new()) == NULL)
		fatalx("event_base_new failed");
	if ((gw.host_addrs = gw_addrset_local(&cause)) == NULL)
		fatalx("%s", cause);
	/* Bases and resolvers (resolv.conf read) now, before the privilege drop. */
	if (gw_workers_init(&gw, gw.cfg.threads, &cause) == -1)
		fatalx("workers: %s", cause);
	gw.upstream_ctx = gw_upstream_ctx(gw.cfg.upstream_ca);
	if ((gw.certs = gw_certs_new(gw.cfg.ca_cert, gw.cfg.ca_key, &cause)) == NULL)
		fatalx("leaf issuer: %s", cause);
	if ((gw.audit = gw_audit_open(gw.cfg.audit_dir, gw.cfg.audit_max_bytes,
	    gw.cfg.audit_keep, &cause)) == NULL)
		fatalx("audit: %s", cause);
	if (uid != 0)
		gw_audit_chown(gw.cfg.audit_dir, gw.cfg.audit_keep, (uid_t)uid, (gid_t)gid);
	if (gw_server_listen(&gw, gw.cfg.ctl_path, &cause) == -1)
		fatalx("control socket: %s", cause);

	confine_drop((uid_t)uid, (gid_t)gid);
	confine_seccomp(1);
	if (gw_workers_start(&gw, &cause) == -1)
		fatalx("workers: %s", cause);

	sigterm = evsignal_new(gw.base, SIGTERM, gw_signal, &gw);
	sigint = evsignal_new(gw.base, SIGINT, gw_signal, &gw);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	log_info("gateway: ready (pid %ld, control %s, %d worker%s)", (long)getpid(),
	    gw.cfg.ctl_path, gw.nworkers, gw.nworkers == 1 ? " on the main thread" : "s");
	event_base_dispatch(gw.base);

	/* Every sandbox detached on its worker (summaries flushed), threads joined. */
	gw_workers_stop(&gw);
	/* Lookups cancelled by the detaches get their last callback on one more pass. */
	event_base_loop(gw.base, EVLOOP_NONBLOCK);
	gw_server_close(&gw);
	event_free(sigterm);
	event_free(sigint);
	gw_certs_free(gw.certs);
	SSL_CTX_free(gw.upstream_ctx);
	gw_audit_close(gw.audit);
	gw_addrset_free(gw.host_addrs);
	event_base_free(gw.base);
	return 0;
}
