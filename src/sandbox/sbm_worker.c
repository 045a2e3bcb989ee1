/*
 * What a worker reports about itself (airlockd/worker_role.c, issue 16):
 * the resources its sandboxes hold, its warm pool stock, and the snapshot
 * ABI: what a snapshot taken here needs from the worker that restores it.
 */
#include "sandbox/sbm_pool_impl.h"

void
sbm_usage(struct sbm *m, struct sbm_usage *u)
{
	struct sandbox *sb;
	struct sbm_pool *p;

	memset(u, 0, sizeof(*u));
	TAILQ_FOREACH(sb, &m->sandboxes, entry) {
		/* Members hold their memory too: placement must count it. */
		if (sb->vm != NULL) {
			u->vcpus += sb->rec.vcpus;
			u->memory_mb += sb->rec.memory_mb;
		}
		if (!sb->pool_member)
			u->sandboxes++;
	}
	TAILQ_FOREACH(p, &m->pools, entry)
		u->pool_ready += (unsigned)p->nready;
}

uint64_t
sbm_memory_cap_mb(const struct sbm *m)
{
	uint64_t ram_mb, keep;

	if (m->cfg->max_memory_mb > 0)
		return (uint64_t)m->cfg->max_memory_mb;
	ram_mb = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) >> 20;
	keep = ram_mb / 8 > 1024 ? ram_mb / 8 : 1024;
	return ram_mb > keep ? ram_mb - keep : 0;
}

/* What VMs hold, and what creates and resumes already admitted will. */
static uint64_t
memory_committed_mb(struct sbm *m)
{
	struct sandbox *sb;
	uint64_t mb = 0;

	TAILQ_FOREACH(sb, &m->sandboxes, entry)
		if (sb->vm != NULL || sb_is(sb, SB_CREATING) || sb_is(sb, SB_RESUMING))
			mb += sb->rec.memory_mb;
	return mb;
}

int
sbm_memory_admit(struct sbm *m, uint64_t mb, int *status, char **cause)
{
	uint64_t cap = sbm_memory_cap_mb(m), held = memory_committed_mb(m);

	if (held + mb <= cap)
		return 0;
	*status = 503;
	cause_set(cause, "this host's sandboxes hold %llu of the %llu MiB of guest memory it "
	    "gives (max_memory_mb): %llu MiB more would overcommit it",
	    (unsigned long long)held, (unsigned long long)cap, (unsigned long long)mb);
	return -1;
}

json_t *
sbm_abi(struct sbm *m)
{
	/* The parts of pool_manifest_expect that are the host's, not a template's. */
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "qemu", m->qemu_sha256 ? m->qemu_sha256 : "",
	    "machine", POOL_MACHINE, "cpu", m->accel.accel == VM_ACCEL_KVM ? "host" : VM_TCG_CPU,
	    "accel", accel_name(m->accel.accel), "kernel", m->kernel_id);
}
