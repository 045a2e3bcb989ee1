/*
 * The health watcher of one running sandbox: on a timer (first tick at a
 * random offset, so hundreds of sandboxes do not probe in step) it asks
 * whether the guest agent is alive and, when it is not, what the VMM says
 * about the guest. Every probe ends in one verdict callback.
 *
 * A probe costs nothing when the agent sent any frame since the last tick
 * (traffic is proof of life); otherwise it is one channel PING with a
 * deadline. Only when that fails is QEMU asked (query-status), to tell a
 * wedged agent (guest "running") from a dead guest ("guest-panicked",
 * "shutdown", "internal-error").
 *
 * Lifetime: the sandbox owns the watcher and frees it after its agent
 * client (a PING in flight holds the watcher as its callback argument, and
 * only freeing the agent client forgets it). Disarm before freeing the
 * agent client or the VM; no verdict runs while disarmed.
 */
#ifndef AIRLOCK_SBM_HEALTH_H
#define AIRLOCK_SBM_HEALTH_H

#include <stdint.h>

struct event_base;
struct agent_client;
struct vm;
struct sbm_health;

enum sbm_verdict {
	SBM_HEALTH_OK,		/* the agent answered */
	SBM_HEALTH_BAD,		/* the agent did not; the guest may still come back */
	SBM_HEALTH_DEAD,	/* the VMM says the guest is gone for good */
};

/* reason: NULL for OK, else why (host-written text, valid UTF-8). */
typedef void (*sbm_health_fn)(void *arg, enum sbm_verdict v, const char *reason);

struct sbm_health *sbm_health_new(struct event_base *base, int interval_ms, int timeout_ms,
    sbm_health_fn fn, void *arg);
/* Start (or restart) probing this agent client and VM; both borrowed. */
void sbm_health_arm(struct sbm_health *h, struct agent_client *ac, struct vm *vm);
void sbm_health_disarm(struct sbm_health *h);
/* The agent channel went down: the next probe says so without waiting for a PING. */
void sbm_health_channel_down(struct sbm_health *h, const char *reason);
void sbm_health_free(struct sbm_health *h);

/*
 * Restarts after unhealthy, rate-limited: a guest that keeps breaking its
 * agent would otherwise be restored from its snapshot every grace period
 * forever. Each restart waits longer than the one before (grace x 2^n for
 * the n-th, the doubling capped below max); once max restarts followed
 * each other with less than window_ms between them, the sandbox fails
 * with the cause instead. A guest that stays up for window_ms after a
 * restart is forgiven (the count starts again).
 */
struct sbm_restarts {
	int64_t		 last_ms;	/* the latest restart; 0: none */
	int		 count;		/* restarts in the current run */
};
/* How long an unhealthy sandbox waits before it is acted on (backed off). */
int64_t sbm_restart_grace(struct sbm_restarts *r, int64_t now_ms, int64_t grace_ms, int max,
    int64_t window_ms);
/* 1: restart now (counted); 0: max restarts were made in a row, fail. */
int sbm_restart_allow(struct sbm_restarts *r, int64_t now_ms, int max, int64_t window_ms);

#endif
