/*
 * Event-loop workers and the hand-off of control operations to them.
 *
 * The main thread owns the control socket. Each operation on a sandbox
 * becomes a gw_job posted to the worker that owns the sandbox (its inbox,
 * a locked list, plus event_active on the worker's base); the worker runs
 * it on its own loop and posts the job back (gw->done, locked, plus
 * event_active on the main base), where job->done runs on the main thread.
 * Neither loop ever waits for the other.
 *
 * Ownership of a job: the main thread until gw_job_post, the worker until
 * it posts the answer, then the main thread again, which frees it after
 * job->done (gw_job_free). Whatever the job carries (policy reference,
 * fds) belongs to the worker once posted: it adopts or releases them.
 */
#ifndef AIRLOCK_GW_WORKER_H
#define AIRLOCK_GW_WORKER_H

#include <sys/queue.h>

#include <jansson.h>

#include "gateway/gw.h"

enum gw_job_op {
	GW_JOB_ATTACH,		/* id, project, policy, fds[2] */
	GW_JOB_UPDATE,		/* id, policy */
	GW_JOB_DETACH,		/* id */
	GW_JOB_STATS,		/* id or NULL: every sandbox of the worker */
	GW_JOB_EXIT,		/* detach everything, stop the loop */
};

struct gw_job {
	enum gw_job_op		 op;
	struct gw_worker	*w;
	struct gw_shard		*shard;		/* main: the registry entry, or NULL */
	char			*id;
	char			*project;
	struct gw_policy	*policy;
	int			 fds[2];

	/* Answer, written by the worker, read by the main thread after the hand-back. */
	json_t			*result;	/* NULL with cause set on failure */
	char			*cause;
	int			 attached;	/* the id is attached on w after the job */

	void			(*done)(struct gw_job *);	/* main thread */
	void			*arg;
	TAILQ_ENTRY(gw_job)	 entry;
};

/*
 * Create n workers (1..GW_THREADS_MAX): bases, resolvers (cfg.resolver),
 * inboxes. n == 1 runs on gw->base. Threads are started separately, after
 * the seccomp filter is loaded, so they inherit it. NULL cause on success.
 */
int gw_workers_init(struct gw *, int n, char **cause);
/* Start the threads of a gateway from gw_workers_init (no-op for 1 worker). */
int gw_workers_start(struct gw *, char **cause);
/* Detach every sandbox on every worker, stop and join the threads, free. */
void gw_workers_stop(struct gw *);

/*
 * A worker on an existing base with no thread and no inbox: tests drive
 * gw_sandbox_* on it directly. The caller sets w->dns and frees the base.
 */
void gw_worker_init_inline(struct gw_worker *, struct gw *, struct event_base *);

struct gw_job *gw_job_new(enum gw_job_op, const char *id);
void gw_job_free(struct gw_job *);
/* Hand job to job->w; job->done runs later on the main thread. */
void gw_job_post(struct gw *, struct gw_job *);

/* The registry (main thread): which worker serves id, picking one for a new id. */
struct gw_shard *gw_shard_find(struct gw *, const char *id);
struct gw_shard *gw_shard_route(struct gw *, const char *id);
/* A job for shard finished: keep or drop the entry as the worker reported. */
void gw_shard_settle(struct gw *, struct gw_shard *, int attached);
/* Ids whose attach has been answered (hello). */
json_t *gw_shard_ids(struct gw *);
struct gw_worker *gw_shard_worker(const struct gw_shard *);

#endif
