/* Health watcher of a running sandbox: agent PING with a deadline, then QMP query-status. */
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/util.h"
#include "link/agent_client.h"
#include "sandbox/sbm_health.h"
#include "vm/vm.h"

struct sbm_health {
	struct event_base	*hl_base;
	int			 hl_interval_ms;
	int			 hl_timeout_ms;
	sbm_health_fn		 hl_fn;
	void			*hl_arg;
	struct agent_client	*hl_ac;		/* borrowed while armed */
	struct vm		*hl_vm;
	struct event		*hl_tick;
	struct event		*hl_deadline;	/* of the PING in flight */
	int			 hl_armed;
	int			 hl_pinging;
	int			 hl_querying;	/* query-status in flight */
	unsigned		 hl_gen;	/* bumped by arm: older QMP answers are stale */
	unsigned		 hl_qgen;
	unsigned long		 hl_frames_in;	/* frames from the guest at the last look */
	char			*hl_down;	/* why the channel went down, if it did */
	char			*hl_why;	/* the agent's failure while QEMU is asked */
};

static void
health_timer(struct event *ev, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

static void
health_verdict(struct sbm_health *h, enum sbm_verdict v, const char *reason)
{
	if (h->hl_armed)
		h->hl_fn(h->hl_arg, v, reason);
}

/* QEMU's view decides between a wedged agent and a dead guest. */
static void
health_status(struct vm *vm, const char *status, const char *error, void *arg)
{
	struct sbm_health *h = arg;
	char *why = h->hl_why, *msg;

	h->hl_why = NULL;
	if (h->hl_qgen != h->hl_gen) {
		free(why);
		return;
	}
	h->hl_querying = 0;
	if (error != NULL) {
		xasprintf(&msg, "%s; the VMM did not answer query-status either: %s", why, error);
		health_verdict(h, SBM_HEALTH_BAD, msg);
	} else if (strcmp(status, "running") == 0) {
		msg = NULL;
		health_verdict(h, SBM_HEALTH_BAD, why);
	} else if (strcmp(status, "guest-panicked") == 0 || strcmp(status, "shutdown") == 0 ||
	    strcmp(status, "internal-error") == 0) {
		xasprintf(&msg, "the VMM reports the guest as %s (%s)", status, why);
		health_verdict(h, SBM_HEALTH_DEAD, msg);
	} else {
		/* io-error (host disk full), paused by QEMU itself: may come back. */
		xasprintf(&msg, "%s; the VMM reports the guest as %s", why, status);
		health_verdict(h, SBM_HEALTH_BAD, msg);
	}
	free(msg);
	free(why);
}

static void
health_bad(struct sbm_health *h, const char *why)
{
	char *cause = NULL, *msg;

	if (h->hl_querying)
		return;
	free(h->hl_why);
	h->hl_why = xstrdup(why);
	h->hl_qgen = h->hl_gen;
	if (h->hl_vm != NULL && vm_query_status(h->hl_vm, h->hl_timeout_ms, health_status, h,
	    &cause) == 0) {
		h->hl_querying = 1;
		return;
	}
	xasprintf(&msg, "%s; VMM: %s", why, cause ? cause : "none");
	free(cause);
	free(h->hl_why);
	h->hl_why = NULL;
	health_verdict(h, SBM_HEALTH_BAD, msg);
	free(msg);
}

static void
health_pong(uint64_t rtt_ns, void *arg)
{
	struct sbm_health *h = arg;
	struct chan_mux_stats st;

	/* Also a late answer to a PING whose deadline passed: the agent is back. */
	h->hl_pinging = 0;
	evtimer_del(h->hl_deadline);
	if (!h->hl_armed)
		return;
	agent_client_stats(h->hl_ac, &st);
	h->hl_frames_in = st.frames_in;
	health_verdict(h, SBM_HEALTH_OK, NULL);
}

static void
health_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct sbm_health *h = arg;
	char why[96];

	/* The PING stays with the channel: a late PONG still counts (health_pong). */
	h->hl_pinging = 0;
	snprintf(why, sizeof(why), "the guest agent did not answer a channel ping within %d s",
	    h->hl_timeout_ms / 1000);
	health_bad(h, why);
}

static void
health_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sbm_health *h = arg;
	struct chan_mux_stats st;
	char *why;

	if (!h->hl_armed)
		return;
	health_timer(h->hl_tick, h->hl_interval_ms);
	if (h->hl_pinging || h->hl_querying)
		return;	/* the deadline or QEMU's answer decides */
	if (!agent_client_is_up(h->hl_ac)) {
		xasprintf(&why, "the guest agent's channel is down%s%s",
		    h->hl_down ? ": " : "", h->hl_down ? h->hl_down : "");
		health_bad(h, why);
		free(why);
		return;
	}
	agent_client_stats(h->hl_ac, &st);
	if (st.frames_in != h->hl_frames_in) {
		/* The agent sent something since the last look: alive, no PING needed. */
		h->hl_frames_in = st.frames_in;
		health_verdict(h, SBM_HEALTH_OK, NULL);
		return;
	}
	/*
	 * -1 with the channel up means an earlier PING (from before a pause,
	 * or past its deadline) is still unanswered: wait for that one again.
	 */
	(void)agent_client_ping(h->hl_ac, health_pong, h);
	h->hl_pinging = 1;
	health_timer(h->hl_deadline, h->hl_timeout_ms);
}

struct sbm_health *
sbm_health_new(struct event_base *base, int interval_ms, int timeout_ms, sbm_health_fn fn,
    void *arg)
{
	struct sbm_health *h = xcalloc(1, sizeof(*h));

	h->hl_base = base;
	h->hl_interval_ms = interval_ms;
	h->hl_timeout_ms = timeout_ms;
	h->hl_fn = fn;
	h->hl_arg = arg;
	h->hl_tick = evtimer_new(base, health_tick, h);
	h->hl_deadline = evtimer_new(base, health_deadline, h);
	return h;
}

void
sbm_health_arm(struct sbm_health *h, struct agent_client *ac, struct vm *vm)
{
	struct chan_mux_stats st;
	unsigned r = 0;

	sbm_health_disarm(h);
	if (h->hl_interval_ms <= 0 || ac == NULL || vm == NULL)
		return;
	h->hl_ac = ac;
	h->hl_vm = vm;
	h->hl_armed = 1;
	h->hl_gen++;
	h->hl_querying = 0;
	free(h->hl_down);
	h->hl_down = NULL;
	agent_client_stats(ac, &st);
	h->hl_frames_in = st.frames_in;
	/* A random phase spreads the probes of many sandboxes over the interval. */
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = 0;
	health_timer(h->hl_tick, 1 + (int)(r % (unsigned)h->hl_interval_ms));
}

void
sbm_health_disarm(struct sbm_health *h)
{
	h->hl_armed = 0;
	h->hl_ac = NULL;
	h->hl_vm = NULL;
	h->hl_pinging = 0;
	evtimer_del(h->hl_tick);
	evtimer_del(h->hl_deadline);
}

void
sbm_health_channel_down(struct sbm_health *h, const char *reason)
{
	free(h->hl_down);
	h->hl_down = reason != NULL ? utf8_escape(reason, strlen(reason), 256) : NULL;
}

void
sbm_health_free(struct sbm_health *h)
{
	if (h == NULL)
		return;
	event_free(h->hl_tick);
	event_free(h->hl_deadline);
	free(h->hl_down);
	free(h->hl_why);
	free(h);
}

/* A guest up for window_ms since its last restart starts a new count. */
static void
restart_forgive(struct sbm_restarts *r, int64_t now_ms, int64_t window_ms)
{
	if (r->last_ms != 0 && now_ms - r->last_ms >= window_ms) {
		r->last_ms = 0;
		r->count = 0;
	}
}

int64_t
sbm_restart_grace(struct sbm_restarts *r, int64_t now_ms, int64_t grace_ms, int max,
    int64_t window_ms)
{
	int n;

	restart_forgive(r, now_ms, window_ms);
	/* The one that will fail waits only the plain grace: no point in waiting longer. */
	n = r->count < max ? r->count : 0;
	return grace_ms << (n < 16 ? n : 16);
}

int
sbm_restart_allow(struct sbm_restarts *r, int64_t now_ms, int max, int64_t window_ms)
{
	restart_forgive(r, now_ms, window_ms);
	if (r->count >= max)
		return 0;
	r->count++;
	r->last_ms = now_ms;
	return 1;
}
