/*
 * Finding a VMM that outlived the daemon. QEMU has no parent-death signal,
 * so after airlockd is SIGKILLed (or crashes) the jailed QEMU keeps running
 * with the guest intact. The next airlockd finds it by the sandbox's jail
 * uid (one uid per sandbox; nothing but its VMM runs as it) and checks it
 * before trusting it: executable, command line, all four uids.
 *
 * Internal to the driver: vm_adopt() (vm.h) uses it.
 */
#ifndef AIRLOCK_VM_ADOPT_H
#define AIRLOCK_VM_ADOPT_H

#include <stddef.h>
#include <sys/types.h>

#define VM_ADOPT_CMDLINE_MAX	8192	/* our QEMU command lines are ~1.5 KB */

struct vm_proc {
	pid_t		 vp_pid;
	int		 vp_pidfd;	/* owned by the caller on success */
	unsigned	 vp_memory_mb;
	unsigned	 vp_vcpus;
	int		 vp_net;	/* has a NIC (-netdev) */
	int		 vp_own_mem;	/* RAM is /sandbox/mem, share=on: can snapshot */
	int		 vp_slots;	/* has the volume slots (qemu_argv.h) */
};

/*
 * The live VMM of sandbox name, running as uid: exactly one process with
 * that uid, whose executable is the jail's QEMU and whose command line is
 * this sandbox's. Takes a pidfd first and checks the process is still the
 * one the pidfd refers to after reading /proc, so a recycled pid cannot
 * slip in between.
 */
int vm_proc_find(const char *name, uid_t uid, struct vm_proc *vp, char **cause);

/* Check a NUL-separated QEMU command line against name; fill vp (tests use it). */
int vm_proc_check_cmdline(const char *cmd, size_t len, const char *name,
    struct vm_proc *vp, char **cause);

#endif
