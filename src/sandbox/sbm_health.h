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

#endif
