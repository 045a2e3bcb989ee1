/*
 * Event-loop workers: N threads, each with its own event_base and upstream
 * resolver, each owning the sandboxes sharded to it (gw.h). The main thread
 * keeps the registry of which worker serves which sandbox id and hands
 * control operations over as jobs (gw_worker.h); a worker never reads the
 * registry and the main thread never touches a sandbox.
 *
 * Sharding: a new id goes to the worker with the fewest sandboxes routed to
 * it (ties: the lowest index); an id keeps its worker for as long as it is
 * in the registry, so every job for one sandbox runs in order on one loop.
 */
#include <sys/queue.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/thread.h>

#include "common/log.h"
#include "common/util.h"
#include "gateway/gw.h"
#include "gateway/gw_resolve.h"
#include "gateway/gw_sandbox.h"
#include "gateway/gw_worker.h"

/* A sandbox id and the worker serving it; main thread only. */
struct gw_shard {
	char			*id;
	struct gw_worker	*w;
	int			 inflight;	/* jobs posted, not answered */
	int			 attached;	/* as of the last answer */
	TAILQ_ENTRY(gw_shard)	 entry;
};

struct gw_job *
gw_job_new(enum gw_job_op op, const char *id)
{
	struct gw_job *j = xcalloc(1, sizeof *j);

	j->op = op;
	j->id = id != NULL ? xstrdup(id) : NULL;
	j->fds[0] = j->fds[1] = -1;
	return j;
}

void
gw_job_free(struct gw_job *j)
{
	if (j == NULL)
		return;
	/* Only a job that never reached a worker still holds these. */
	if (j->policy != NULL)
		gw_policy_unref(j->policy);
	for (int i = 0; i < 2; i++)
		if (j->fds[i] != -1)
			close(j->fds[i]);
	json_decref(j->result);
	free(j->cause);
	free(j->project);
	free(j->id);
	free(j);
}

/* Worker thread: one job. What it carries is adopted or released here. */
static void
gw_job_run(struct gw_worker *w, struct gw_job *j)
{
	struct gw_sandbox *sb;
	json_t *all;

	switch (j->op) {
	case GW_JOB_ATTACH:
		if (gw_sandbox_attach(w, j->id, j->project, j->policy, j->fds[0], j->fds[1],
		    &j->cause) == 0) {
			j->fds[0] = j->fds[1] = -1;	/* the sandbox owns them */
			j->result = json_object();
		} else
			gw_policy_unref(j->policy);
		j->policy = NULL;
		break;
	case GW_JOB_UPDATE:
		if ((sb = gw_sandbox_find(w, j->id)) == NULL) {
			gw_policy_unref(j->policy);
			cause_set(&j->cause, "sandbox %s is not attached", j->id);
		} else {
			gw_sandbox_update(sb, j->policy);
			j->result = json_object();
		}
		j->policy = NULL;
		break;
	case GW_JOB_DETACH:
		if ((sb = gw_sandbox_find(w, j->id)) == NULL)
			cause_set(&j->cause, "sandbox %s is not attached", j->id);
		else {
			gw_sandbox_detach(sb);
			j->result = json_object();
		}
		break;
	case GW_JOB_STATS:
		all = json_object();
		TAILQ_FOREACH(sb, &w->sandboxes, entry)
			if (j->id == NULL || strcmp(j->id, sb->id) == 0)
				json_object_set_new(all, sb->id, gw_sandbox_stats(sb));
		j->result = all;
		break;
	case GW_JOB_EXIT:
		while (!TAILQ_EMPTY(&w->sandboxes))
			gw_sandbox_detach(TAILQ_FIRST(&w->sandboxes));
		w->stopping = 1;
		event_base_loopbreak(w->base);
		break;
	}
	j->attached = j->id != NULL && gw_sandbox_find(w, j->id) != NULL;
}

/* Worker thread: take everything queued, run it, hand each answer back. */
static void
gw_worker_inbox_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_worker *w = arg;
	struct gw *gw = w->gw;
	TAILQ_HEAD(, gw_job) todo = TAILQ_HEAD_INITIALIZER(todo);
	struct gw_job *j;

	pthread_mutex_lock(&w->inbox_mtx);
	TAILQ_CONCAT(&todo, &w->inbox, entry);
	pthread_mutex_unlock(&w->inbox_mtx);
	while ((j = TAILQ_FIRST(&todo)) != NULL) {
		TAILQ_REMOVE(&todo, j, entry);
		gw_job_run(w, j);
		if (j->op == GW_JOB_EXIT) {
			gw_job_free(j);	/* the main thread waits in pthread_join, not for this */
			continue;
		}
		pthread_mutex_lock(&gw->done_mtx);
		TAILQ_INSERT_TAIL(&gw->done, j, entry);
		pthread_mutex_unlock(&gw->done_mtx);
		event_active(gw->done_ev, EV_READ, 1);
	}
}

/* Main thread: answers from workers. */
static void
gw_worker_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw *gw = arg;
	TAILQ_HEAD(, gw_job) todo = TAILQ_HEAD_INITIALIZER(todo);
	struct gw_job *j;

	pthread_mutex_lock(&gw->done_mtx);
	TAILQ_CONCAT(&todo, &gw->done, entry);
	pthread_mutex_unlock(&gw->done_mtx);
	while ((j = TAILQ_FIRST(&todo)) != NULL) {
		TAILQ_REMOVE(&todo, j, entry);
		if (j->shard != NULL)
			gw_shard_settle(gw, j->shard, j->attached);
		j->shard = NULL;
		if (j->done != NULL)
			j->done(j);
		gw_job_free(j);
	}
}

void
gw_job_post(struct gw *gw, struct gw_job *j)
{
	struct gw_worker *w = j->w;

	if (j->shard != NULL)
		j->shard->inflight++;
	pthread_mutex_lock(&w->inbox_mtx);
	TAILQ_INSERT_TAIL(&w->inbox, j, entry);
	pthread_mutex_unlock(&w->inbox_mtx);
	event_active(w->inbox_ev, EV_READ, 1);
}

static void *
gw_worker_main(void *arg)
{
	struct gw_worker *w = arg;

	log_debug("gateway: worker %d running", w->idx);
	while (!w->stopping)
		if (event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY) == -1)
			break;
	/* Lookups cancelled by the detaches get their last callback on one more pass. */
	event_base_loop(w->base, EVLOOP_NONBLOCK);
	return NULL;
}

void
gw_worker_init_inline(struct gw_worker *w, struct gw *gw, struct event_base *base)
{
	memset(w, 0, sizeof *w);
	w->gw = gw;
	w->base = base;
	TAILQ_INIT(&w->sandboxes);
	TAILQ_INIT(&w->inbox);
	pthread_mutex_init(&w->inbox_mtx, NULL);
}

int
gw_workers_init(struct gw *gw, int n, char **cause)
{
	struct gw_worker *w;

	if (n < 1 || n > GW_THREADS_MAX) {
		cause_set(cause, "threads: %d is not in 1..%d", n, GW_THREADS_MAX);
		return -1;
	}
	TAILQ_INIT(&gw->shards);
	TAILQ_INIT(&gw->done);
	pthread_mutex_init(&gw->done_mtx, NULL);
	/* Out of memory is fatal here, as in xcalloc: event_new fails for nothing else. */
	gw->done_ev = xnonnull(event_new(gw->base, -1, 0, gw_worker_done_cb, gw), "event_new");
	gw->workers = xcalloc((size_t)n, sizeof *gw->workers);
	gw->nworkers = n;
	for (int i = 0; i < n; i++) {
		w = &gw->workers[i];
		gw_worker_init_inline(w, gw, gw->base);
		w->idx = i;
		w->threaded = n > 1;
		/* evthread_use_pthreads() ran first (main): these bases have locks. */
		if (w->threaded)
			w->base = xnonnull(event_base_new(), "event_base_new");
		/* A resolver can fail for its configuration: that is an error, with a cause. */
		if ((w->dns = gw_resolver_new(w->base, gw->cfg.resolver, cause)) == NULL)
			return -1;
		w->inbox_ev = xnonnull(event_new(w->base, -1, 0, gw_worker_inbox_cb, w), "event_new");
	}
	return 0;
}

int
gw_workers_start(struct gw *gw, char **cause)
{
	sigset_t all, old;
	int rc = 0;

	if (gw->nworkers <= 1)
		return 0;
	/* Signals are the main loop's (evsignal): workers block them all. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (int i = 0; i < gw->nworkers && rc == 0; i++) {
		struct gw_worker *w = &gw->workers[i];

		if ((rc = pthread_create(&w->thread, NULL, gw_worker_main, w)) != 0) {
			cause_set(cause, "worker %d: pthread_create: %s", i, strerror(rc));
			w->threaded = 0;	/* never started: nothing to join */
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0 ? 0 : -1;
}

void
gw_workers_stop(struct gw *gw)
{
	struct gw_shard *s;

	for (int i = 0; i < gw->nworkers; i++) {
		struct gw_worker *w = &gw->workers[i];

		if (w->threaded) {
			struct gw_job *j = gw_job_new(GW_JOB_EXIT, NULL);

			j->w = w;
			gw_job_post(gw, j);
			pthread_join(w->thread, NULL);
		} else {
			while (!TAILQ_EMPTY(&w->sandboxes))
				gw_sandbox_detach(TAILQ_FIRST(&w->sandboxes));
		}
	}
	/* Answers still queued (jobs ahead of the exits) go to their callers. */
	event_base_loop(gw->base, EVLOOP_NONBLOCK);
	gw_worker_done_cb(-1, 0, gw);
	for (int i = 0; i < gw->nworkers; i++) {
		struct gw_worker *w = &gw->workers[i];
		struct gw_job *j;

		while ((j = TAILQ_FIRST(&w->inbox)) != NULL) {
			TAILQ_REMOVE(&w->inbox, j, entry);
			gw_job_free(j);
		}
		event_free(w->inbox_ev);
		evdns_base_free(w->dns, 1);
		if (w->base != gw->base)
			event_base_free(w->base);
		pthread_mutex_destroy(&w->inbox_mtx);
	}
	while ((s = TAILQ_FIRST(&gw->shards)) != NULL) {
		TAILQ_REMOVE(&gw->shards, s, entry);
		free(s->id);
		free(s);
	}
	event_free(gw->done_ev);
	pthread_mutex_destroy(&gw->done_mtx);
	free(gw->workers);
	gw->workers = NULL;
	gw->nworkers = 0;
}

struct gw_shard *
gw_shard_find(struct gw *gw, const char *id)
{
	struct gw_shard *s;

	TAILQ_FOREACH(s, &gw->shards, entry)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

struct gw_shard *
gw_shard_route(struct gw *gw, const char *id)
{
	struct gw_shard *s;
	struct gw_worker *best = &gw->workers[0];

	if ((s = gw_shard_find(gw, id)) != NULL)
		return s;
	for (int i = 1; i < gw->nworkers; i++)
		if (gw->workers[i].nshards < best->nshards)
			best = &gw->workers[i];
	s = xcalloc(1, sizeof *s);
	s->id = xstrdup(id);
	s->w = best;
	best->nshards++;
	TAILQ_INSERT_TAIL(&gw->shards, s, entry);
	return s;
}

void
gw_shard_settle(struct gw *gw, struct gw_shard *s, int attached)
{
	s->inflight--;
	s->attached = attached;
	/* A job still queued may attach it again on the same worker: keep the route. */
	if (s->attached || s->inflight > 0)
		return;
	TAILQ_REMOVE(&gw->shards, s, entry);
	s->w->nshards--;
	free(s->id);
	free(s);
}

json_t *
gw_shard_ids(struct gw *gw)
{
	struct gw_shard *s;
	json_t *ids = json_array();

	TAILQ_FOREACH(s, &gw->shards, entry)
		if (s->attached)
			json_array_append_new(ids, json_string(s->id));
	return ids;
}

struct gw_worker *
gw_shard_worker(const struct gw_shard *s)
{
	return s->w;
}
