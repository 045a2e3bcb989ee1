/*
 * The jail QEMU runs in (the role of Firecracker's jailer), set up by the
 * privileged parent between fork and exec (also the jail of a helper that
 * must read guest-written bytes on the host, e.g. the journal replay of a
 * volume: exe names it, with an address-space and a CPU-time limit):
 *   - its own cgroups (joined first, so everything after is accounted),
 *   - the sandbox's island netns, or a fresh empty one when it has no NIC,
 *   - new pid (QEMU is PID 1), mount, ipc and uts namespaces,
 *   - a private root: a small tmpfs holding read-only /usr, the ld.so
 *     cache, /dev/{null,zero,urandom[,kvm]}, its own /proc, the sandbox
 *     directory at /sandbox and read-only binds of the few host files it
 *     needs (kernel, initrd) — no other sandbox's files exist in it,
 *   - rlimits (core 0, nofile, nproc), no supplementary groups, a
 *     dedicated unprivileged uid/gid, no_new_privs; QEMU itself then adds
 *     -sandbox on,... (seccomp) before it runs the guest.
 * Only the fds listed are inherited, renumbered from 3.
 */
#ifndef AIRLOCK_VM_JAIL_H
#define AIRLOCK_VM_JAIL_H

#include <sys/types.h>

#include "vm/qemu_argv.h"

#define VM_JAIL_SANDBOX		"/sandbox"	/* the sandbox dir inside the jail */
#define VM_JAIL_BINDS_MAX	8
/* A restore's tap and device state, and two fds per read-write volume. */
#define VM_JAIL_FDS_MAX		(2 + 2 * VM_VOLUMES_MAX)
#define VM_JAIL_NOFILE		4096
#define VM_JAIL_NPROC		1024		/* QEMU threads count: per uid, one uid per sandbox */
#define VM_JAIL_QEMU		"/usr/bin/qemu-system-x86_64"
#define VM_JAIL_TMPFS_SIZE	"1m"

struct vm_jail_bind {
	const char	*src;		/* host path (file) */
	const char	*dst;		/* absolute path inside the jail, below / */
};

struct vm_jail {
	const char		*root;		/* empty host dir the jail tmpfs is mounted on */
	const char		*sandbox_dir;	/* bound read-write at VM_JAIL_SANDBOX */
	uid_t			 uid;
	gid_t			 gid;
	int			 netns_fd;	/* -1: new empty netns */
	int			 kvm;		/* expose /dev/kvm */
	struct vm_jail_bind	 binds[VM_JAIL_BINDS_MAX];	/* read-only files */
	int			 nbinds;
	int			 fds[VM_JAIL_FDS_MAX];	/* become 3, 4, ... */
	int			 nfds;
	int			 stderr_fd;	/* QEMU's stdout+stderr */
	char *const		*cgroup_procs;	/* NULL-terminated cgroup.procs paths */
	const char		*exe;		/* NULL: VM_JAIL_QEMU; else a program under /usr */
	unsigned long long	 as_bytes;	/* RLIMIT_AS when not 0 */
	unsigned		 cpu_s;		/* RLIMIT_CPU when not 0 */
};

/*
 * Fork the jailed child and exec argv (argv[0] is ignored; exe or
 * VM_JAIL_QEMU is run). Returns after exec succeeded or failed; on failure
 * the child is reaped and the cause names the setup step.
 */
int vm_jail_spawn(const struct vm_jail *j, char *const argv[], pid_t *pid, char **cause);

#endif
