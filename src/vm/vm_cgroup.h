/*
 * Per-sandbox cgroups for QEMU: memory, cpu and pids limits.
 *
 * Hosts differ: pure cgroup v2 (/sys/fs/cgroup/cgroup.controllers), v1 with
 * one mount per controller (this development host: memory, cpu and pids
 * under /sys/fs/cgroup/<ctrl>, a controller-less v2 beside them at
 * /sys/fs/cgroup/unified), or hybrid with controllers on the unified
 * hierarchy. vm_cgroup_detect() picks v2 wherever the memory controller is
 * on a v2 hierarchy, else v1.
 *
 * Sandboxes nest below the cgroup the daemon itself runs in
 * (<own>/airlock/<name>), so limits an operator put on airlockd still bound
 * every sandbox. The jailed child joins by writing "0" to each cgroup.procs
 * listed in vc_procs before it execs QEMU.
 */
#ifndef AIRLOCK_VM_CGROUP_H
#define AIRLOCK_VM_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

#define VM_CGROUP_PARENT	"airlock"
#define VM_CGROUP_V1_MAX	3		/* memory, cpu, pids */
#define VM_CGROUP_CPU_PERIOD	100000		/* us */

enum vm_cgroup_mode { VM_CGROUP_NONE, VM_CGROUP_V1, VM_CGROUP_V2 };

/*
 * CPU fairness: cpu_millis caps a VMM at its vCPUs' worth of host time
 * (cfs quota), and cpu_weight makes sandboxes that all want CPU share it
 * equally whatever their thread count. Weight is in v2 units (1..10000,
 * 100 = the kernel's default); v1 gets cpu.shares = weight * 1024 / 100.
 */
#define VM_CGROUP_WEIGHT_DEFAULT	100
#define VM_CGROUP_WEIGHT_MAX		10000

struct vm_limits {
	uint64_t	 memory_bytes;	/* 0: no limit */
	unsigned	 cpu_millis;	/* CPU time per second x1000 (2000 = 2 CPUs); 0: none */
	unsigned	 pids_max;	/* threads and processes; 0: none */
	unsigned	 cpu_weight;	/* 1..10000 (v2 units); 0: leave the kernel's */
};

struct vm_cgroup {
	enum vm_cgroup_mode	 vc_mode;
	char			*vc_dirs[VM_CGROUP_V1_MAX];	/* v2 uses [0] */
	char			*vc_procs[VM_CGROUP_V1_MAX + 1];/* NULL-terminated */
	int			 vc_ndirs;
};

/* Which hierarchy to use under root (NULL: /sys/fs/cgroup or $AIRLOCK_CGROUP_ROOT). */
enum vm_cgroup_mode vm_cgroup_detect(const char *root);
const char *vm_cgroup_mode_name(enum vm_cgroup_mode m);

/* Create <own>/airlock/<name> in each hierarchy and write the limits. */
int vm_cgroup_create(const char *root, const char *name, const struct vm_limits *lim,
    struct vm_cgroup *cg, char **cause);

/* Set the CPU weight (v2 units; v1 gets the matching cpu.shares) of a live cgroup. */
int vm_cgroup_set_weight(const struct vm_cgroup *cg, unsigned weight, char **cause);

/* Remove the directories (the processes must be gone); retries briefly on EBUSY. */
int vm_cgroup_destroy(struct vm_cgroup *cg, char **cause);

/*
 * After a daemon crash: remove the cgroups of a sandbox whose VMM is gone
 * (empty cgroups only; a live VMM's cgroup stays). 0 when none remain.
 */
int vm_cgroup_remove_stale(const char *root, const char *name, char **cause);

/*
 * After a daemon restart: the cgroup of sandbox name's live VMM (pid), for
 * a VMM being adopted. Fails unless every directory exists and holds pid.
 */
int vm_cgroup_open(const char *root, const char *name, pid_t pid, struct vm_cgroup *cg,
    char **cause);

/* Free memory only (the directories stay). */
void vm_cgroup_clear(struct vm_cgroup *cg);

/* Number of OOM kills in this cgroup so far (0 if unknown). */
long vm_cgroup_oom_kills(const struct vm_cgroup *cg);
/* Memory charged to the cgroup in bytes, -1 if unknown. */
long long vm_cgroup_memory(const struct vm_cgroup *cg);
/* The memory limit as the kernel reports it, -1 if unknown. */
long long vm_cgroup_memory_limit(const struct vm_cgroup *cg);

#endif
