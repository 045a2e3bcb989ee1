/*
 * Per-project quotas (docs/api.md "Quotas"): a create is admitted when the
 * project's live sandboxes (STORE_LIVE_STATES, on every worker sharing the
 * store) plus this one stay within its quota. The check and the row the
 * create writes are one critical section per project across workers
 * (store_project_lock), so concurrent creates cannot both take the last
 * place.
 */
#include "sandbox/sbm_impl.h"

/* What would be over, as a cause; 0 when n more sandboxes of this shape fit. */
static int
quota_over(const struct store_quota *q, const struct store_usage *u, unsigned n, unsigned vcpus,
    uint64_t memory_mb, char **cause)
{
	if (q->max_sandboxes != 0 && u->sandboxes + n > q->max_sandboxes) {
		cause_set(cause, "quota: project %s holds %u of its %u live sandboxes", q->project,
		    u->sandboxes, q->max_sandboxes);
		return -1;
	}
	if (q->max_vcpus != 0 && u->vcpus + n * vcpus > q->max_vcpus) {
		cause_set(cause, "quota: project %s uses %u of its %u vCPUs; %u more do not fit",
		    q->project, u->vcpus, q->max_vcpus, n * vcpus);
		return -1;
	}
	if (q->max_memory_mb != 0 && u->memory_mb + (uint64_t)n * memory_mb > q->max_memory_mb) {
		cause_set(cause, "quota: project %s uses %llu of its %llu MiB; %llu more do not fit",
		    q->project, (unsigned long long)u->memory_mb,
		    (unsigned long long)q->max_memory_mb, (unsigned long long)n * memory_mb);
		return -1;
	}
	return 0;
}

int
sbm_quota_admit(struct sbm *m, const char *project, unsigned n, unsigned vcpus,
    uint64_t memory_mb, int lock, int *status, char **cause)
{
	struct store_quota q;
	struct store_usage u;
	int rc;

	if (lock && store_project_lock(m->store, project, cause) == -1) {
		*status = 503;
		return -1;
	}
	if ((rc = store_quota_get(m->store, project, &q, cause)) == 1 &&
	    (rc = store_usage(m->store, project, &u, cause)) == 0 &&
	    quota_over(&q, &u, n, vcpus, memory_mb, cause) == -1) {
		*status = 429;
		rc = -1;
	} else if (rc == -1)
		*status = 503;
	if (rc == -1 && lock)
		store_project_unlock(m->store, project);
	return rc == -1 ? -1 : 0;
}

void
sbm_quota_release(struct sbm *m, const char *project)
{
	store_project_unlock(m->store, project);
}
