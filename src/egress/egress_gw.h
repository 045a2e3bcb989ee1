/*
 * airlockd's side of the gateway: find the running airlock-gateway on its
 * control socket or start one, and drive it (attach/update/detach/stats).
 *
 * The gateway outlives airlockd (own session, not our child for long): a
 * restarted airlockd finds it on the socket, asks which sandboxes it serves
 * (hello) and reconciles. Calls are synchronous with a short deadline: the
 * gateway answers each from memory in microseconds, and the event loop
 * blocking for that is simpler and safer than a second asynchronous
 * protocol state machine. When the gateway is gone (crash, killed), a new
 * one is started and the restart hook re-attaches every sandbox: at once
 * when the connection, watched between calls on the event loop, reports
 * EOF; else by the next call or egress_gw_check.
 */
#ifndef AIRLOCK_EGRESS_GW_H
#define AIRLOCK_EGRESS_GW_H

#include <sys/types.h>

#include <jansson.h>

#define EGRESS_GW_CALL_MS	5000
#define EGRESS_GW_START_MS	10000
#define EGRESS_GW_UID		399999	/* just below the jail uid range (stor_sandbox.h) */

struct egress_gw_config {
	const char	*bin;		/* airlock-gateway */
	const char	*ctl_path;
	const char	*audit_dir;
	const char	*ca_cert;	/* the intermediate (egress_ca.h) */
	const char	*ca_key;
	const char	*upstream_ca;	/* extra CA bundle, or NULL */
	const char	*resolver;	/* or NULL */
	const char	*netns;		/* upstream netns path, or NULL */
	const char	*log_path;	/* the gateway's stderr */
	uid_t		 uid;
	gid_t		 gid;
	int		 log_json;
	int		 threads;	/* --threads; 0 = the gateway's default (online cores) */
};

struct egress_gw;
struct event_base;

/* Called after a new gateway instance was started: re-attach everything. */
typedef void (*egress_gw_restart_fn)(void *arg);

/* With a base and a restart hook, a gateway that dies is replaced without waiting for a call. */
struct egress_gw *egress_gw_new(const struct egress_gw_config *, struct event_base *,
    egress_gw_restart_fn, void *arg);
/*
 * Connect to a running gateway or start one. *ids gets the sandboxes it
 * already serves (new reference). 0 / -1 with cause.
 */
int egress_gw_open(struct egress_gw *, json_t **ids, char **cause);
int egress_gw_attach(struct egress_gw *, const char *id, const char *project,
    const json_t *policy, int tcp_fd, int dns_fd, char **cause);
int egress_gw_update(struct egress_gw *, const char *id, const json_t *policy, char **cause);
/* Not attached counts as done. */
int egress_gw_detach(struct egress_gw *, const char *id, char **cause);
/* Connected to a live gateway, or reconnect (and restart one) now. 0 / -1 with cause. */
int egress_gw_check(struct egress_gw *, char **cause);
json_t *egress_gw_stats(struct egress_gw *, const char *id, char **cause);
/*
 * Stop the running gateway, wait until its socket refuses, start a new one
 * (which picks up a renewed issuer). Everything attached is lost: the
 * caller re-attaches.
 */
int egress_gw_restart(struct egress_gw *, char **cause);
/*
 * Health check (the sweep): a hello must be answered within the call
 * deadline; a gateway that is gone is replaced, one that hangs is killed
 * and replaced (the restart hook re-attaches). 0 / -1 with cause.
 */
int egress_gw_ping(struct egress_gw *, char **cause);
/* Ask the gateway to exit (graceful airlockd shutdown with nothing attached). */
void egress_gw_shutdown(struct egress_gw *);
void egress_gw_free(struct egress_gw *);
/* The gateway's pid, 0 if unknown. */
long egress_gw_pid(struct egress_gw *);

#endif
