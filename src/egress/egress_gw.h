/*
 * airlockd's side of the gateway: find the running airlock-gateway on its
 * control socket or start one, and drive it (attach/update/detach/stats).
 *
 * The gateway outlives airlockd (own session, not our child for long): a
 * restarted airlockd finds it on the socket, asks which sandboxes it serves
 * (hello) and reconciles.
 *
 * Every call is asynchronous on airlockd's event loop: a request gets an id
 * ("seq"), is queued, sent when the connection is up (non-blocking, with
 * its fds), and answered by a callback with the reply or a cause, exactly
 * once and never from inside the call that queued it. Each call has a
 * deadline (EGRESS_GW_CALL_MS once connected; while the gateway is being
 * started, EGRESS_GW_START_MS more). Nothing waits on the gateway, so a
 * create of a sandbox without network, or a GET, never waits on a slow or
 * stopped gateway; a call that needs the gateway fails with a cause when
 * its deadline passes.
 *
 * A gateway that closes the connection (crash, killed) is replaced: a new
 * one is started and the calls in flight are sent again (once: attach,
 * update and detach are idempotent). One that holds a call past its deadline
 * (stopped, livelocked) is killed and replaced the same way. A new, empty
 * instance gets the restart hook (re-attach everything).
 *
 * Not a bufferevent: the socket is SOCK_SEQPACKET with SCM_RIGHTS, one
 * message per record; a bufferevent is a byte stream without ancillary
 * data. The connection is a read event plus a write event when the socket
 * is full (gw_ctl's GW_CTL_AGAIN).
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
	int		 call_ms;	/* 0 = EGRESS_GW_CALL_MS */
};

struct egress_gw;
struct event_base;

/* Called after a new gateway instance was started: re-attach everything. */
typedef void (*egress_gw_restart_fn)(void *arg);
/*
 * The answer to one call: reply is the gateway's ok:true object (borrowed,
 * valid during the callback), or NULL with cause (a refusal by the gateway,
 * or no answer: deadline, connection lost, not started).
 */
typedef void (*egress_gw_done_fn)(const json_t *reply, const char *cause, void *arg);
/* Frees a request message (policies carry secrets: wipe them). NULL: json_decref. */
typedef void (*egress_gw_msg_free_fn)(json_t *msg);

struct egress_gw *egress_gw_new(const struct egress_gw_config *, struct event_base *,
    egress_gw_restart_fn, void *arg);
/*
 * Queue one request (msg taken; "seq" is set here) with fds (duplicated:
 * the caller closes its own). done may be NULL (fire and forget; failures
 * are logged). Connects, or starts a gateway, if none is up.
 */
void egress_gw_call(struct egress_gw *, json_t *msg, egress_gw_msg_free_fn, const int *fds,
    size_t nfds, egress_gw_done_fn done, void *arg);
/* Policy taken (freed with msg_free). */
void egress_gw_attach(struct egress_gw *, const char *id, const char *project, json_t *policy,
    egress_gw_msg_free_fn, int tcp_fd, int dns_fd, egress_gw_done_fn, void *arg);
void egress_gw_update(struct egress_gw *, const char *id, json_t *policy, egress_gw_msg_free_fn,
    egress_gw_done_fn, void *arg);
/* Not attached counts as done (cause NULL). */
void egress_gw_detach(struct egress_gw *, const char *id, egress_gw_done_fn, void *arg);
void egress_gw_stats(struct egress_gw *, const char *id, egress_gw_done_fn, void *arg);
/* hello: reply has version, pid and "sandboxes" (the ids it serves). */
void egress_gw_hello(struct egress_gw *, egress_gw_done_fn, void *arg);
/*
 * Health check (the sweep): start one if none is up, else a hello with the
 * call deadline; one that does not answer is killed and replaced (the
 * restart hook re-attaches).
 */
void egress_gw_ping(struct egress_gw *);
/*
 * Stop the running gateway, wait until its socket refuses, start a new one
 * (which picks up a renewed issuer); the restart hook re-attaches.
 */
void egress_gw_restart(struct egress_gw *);
/*
 * Ask the gateway to exit (graceful airlockd shutdown with nothing
 * attached). The daemon's exit path: waits up to 1 s for the answer.
 */
void egress_gw_shutdown(struct egress_gw *);
/*
 * Calls still pending are answered now, from inside this function, with
 * the cause EGRESS_GW_GONE (their callbacks release what they hold and do
 * nothing else: the daemon is going away).
 */
#define EGRESS_GW_GONE	"airlockd is shutting down"

void egress_gw_free(struct egress_gw *);
/* The gateway's pid, 0 if unknown. */
long egress_gw_pid(struct egress_gw *);
/* 1 when connected and past hello. */
int egress_gw_up(struct egress_gw *);

#endif
