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

json_t *
sbm_abi(struct sbm *m)
{
	/* The parts of pool_manifest_expect that are the host's, not a template's. */
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "qemu", m->qemu_sha256 ? m->qemu_sha256 : "",
	    "machine", POOL_MACHINE, "cpu", m->accel.accel == VM_ACCEL_KVM ? "host" : VM_TCG_CPU,
	    "accel", accel_name(m->accel.accel), "kernel", m->kernel_id);
}
