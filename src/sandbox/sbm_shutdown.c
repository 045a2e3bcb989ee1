/* Sandbox manager: graceful shutdown (suspend everything, then stop). */
#include "sandbox/sbm_impl.h"

/* --- graceful shutdown ---------------------------------------------------- */

static void
sbm_shutdown_finish(struct sbm *m)
{
	void (*done)(void *) = m->shutdown_done;

	if (done == NULL)
		return;
	m->shutdown_done = NULL;
	if (m->shutdown_timer != NULL) {
		event_free(m->shutdown_timer);
		m->shutdown_timer = NULL;
	}
	done(m->shutdown_arg);
}

static void
sb_shutdown_suspended(struct sandbox *sb, const char *error, int status, void *arg)
{
	struct sbm *m = arg;

	if (error != NULL)
		log_warnx("sandbox %s: suspend at shutdown: %s", sb->rec.id, error);
	if (--m->shutdown_pending == 0)
		sbm_shutdown_finish(m);
}

static void
sbm_shutdown_timeout(evutil_socket_t fd, short ev, void *arg)
{
	struct sbm *m = arg;

	log_warnx("shutdown: %d suspend(s) still running; stopping their VMs", m->shutdown_pending);
	sbm_shutdown_finish(m);
}

void
sbm_shutdown(struct sbm *m, int deadline_ms, void (*done)(void *), void *arg)
{
	struct timeval tv = { deadline_ms / 1000, (deadline_ms % 1000) * 1000 };
	struct sandbox *sb;

	if (m->shutdown_done != NULL) {
		/* A drain is suspending everything already: its end is this one's. */
		m->shutdown_done = done;
		m->shutdown_arg = arg;
		return;
	}
	m->shutdown_done = done;
	m->shutdown_arg = arg;
	m->shutdown_pending = 1;	/* held until every suspend is queued */
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		if (sb->vm == NULL || !(sb_is(sb, SB_RUNNING) || sb_is(sb, SB_PAUSED)))
			continue;
		m->shutdown_pending++;
		log_info("sandbox %s: suspending for shutdown", sb->rec.id);
		sb_enqueue(sb, SB_OP_SUSPEND, sb_shutdown_suspended, m);
	}
	m->shutdown_timer = evtimer_new(m->base, sbm_shutdown_timeout, m);
	event_add(m->shutdown_timer, &tv);
	if (--m->shutdown_pending == 0)
		sbm_shutdown_finish(m);
}

static void
sbm_drained(void *arg)
{
	log_info("drained: every sandbox of this worker is suspended");
}

void
sbm_drain(struct sbm *m, int deadline_ms)
{
	if (m->draining)
		return;
	m->draining = 1;
	sbm_shutdown(m, deadline_ms, sbm_drained, m);
}

int
sbm_is_draining(const struct sbm *m)
{
	return m->draining;
}
