/* Building the QEMU microvm command line from a spec: an argv, never a shell string. */
#ifndef AIRLOCK_QEMU_ARGV_H
#define AIRLOCK_QEMU_ARGV_H

#include <stddef.h>

#include "vm/accel.h"

#define QEMU_BINARY		"qemu-system-x86_64"
#define QEMU_ARGV_MAX		128
#define VM_VCPUS_MAX		64
#define VM_MEMORY_MB_MIN	128
#define VM_MEMORY_MB_MAX	(256 * 1024)

struct argv {
	char	**av;
	size_t	  ac, cap;
};

void argv_init(struct argv *a);
void argv_add(struct argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void argv_free(struct argv *a);

/* The CPU model under TCG (qemu_argv.c says why); a base manifest names it. */
#define VM_TCG_CPU		"max,-monitor"
#define VM_VOLUMES_MAX		8

/*
 * Volume slots (docs/volumes.md "Pools and snapshots"): every template VM
 * has VM_SLOTS_RW read-write and VM_SLOTS_RO read-only virtio-blk disks
 * from boot, so a pool member or a base snapshot (whose devices are fixed
 * at boot: microvm has no hot-plug) can be given volumes at claim. An
 * empty slot is raw over a null-co placeholder (no host file); a claim
 * swaps the placeholder for the volume (vm_slot.c). The read-write
 * placeholder is tiny and block_resize'd to the volume (QEMU refuses to
 * resize a read-only node): the read-only one is as large as any volume
 * may be, so the guest's capacity already covers the volume's filesystem.
 */
#define VM_SLOTS_RW		2
#define VM_SLOTS_RO		1
#define VM_SLOTS		(VM_SLOTS_RW + VM_SLOTS_RO)
#define VM_SLOT_RW_BYTES	(1ULL << 20)
#define VM_SLOT_RO_BYTES	(1ULL << 40)
#define VM_SLOT_FDSET		20	/* fd set of slot K at claim: VM_SLOT_FDSET + K */
/* Slot K is read-only iff K >= VM_SLOTS_RW. */
#define VM_SLOT_IS_RO(k)	((k) >= VM_SLOTS_RW)

/* An extra disk (a volume): an fd QEMU inherited, a serial the guest finds it by. */
struct vm_spec_volume {
	int		 fd;		/* in QEMU's fd table */
	int		 fd_ro;		/* read-write volumes: an O_RDONLY one in the same set */
	const char	*serial;	/* [a-z0-9-], at most 20 (virtio-blk's limit) */
	int		 read_only;
	int		 slot;		/* -1: a disk of its own after the slots; else its slot */
};

struct vm_spec {
	enum vm_accel	 accel;		/* KVM or TCG, already detected */
	unsigned long	 tsc_khz;	/* required under TCG */
	unsigned	 vcpus;
	unsigned	 memory_mb;
	const char	*kernel;	/* PVH ELF; NULL on restore */
	const char	*initrd;
	const char	*append;	/* extra kernel arguments, may be NULL */
	const char	*rootfs;	/* raw ext4 image for virtio-blk */
	const char	*console_log;	/* serial console goes to this file */
	const char	*qmp_socket;	/* NULL: no QMP */
	const char	*agent_socket;	/* virtio-serial org.airlock.agent; NULL: none */
	int		 no_reboot;	/* guest reboot = QEMU exit */

	/* Driver (vm.c) additions; all zero = the plain boot above. */
	const char	*name;		/* -name, also how tests find the process */
	const char	*console_socket; /* serial to a unix socket instead of console_log */
	const char	*mem_path;	/* guest RAM as memory-backend-file */
	int		 mem_share;	/* share=on (own file) or off (MAP_PRIVATE of a base) */
	int		 start_paused;	/* -S: the driver connects, then sends cont */
	int		 incoming;	/* -incoming defer (restore) */
	int		 net;		/* virtio-net on the tap fd below */
	int		 tap_fd;
	const char	*guest_mac;
	int		 seccomp;	/* -sandbox on with everything denied */
	unsigned	 tcg_tb_mb;	/* TCG translation cache cap; 0: QEMU's 1 GiB */
	struct vm_spec_volume	 volumes[VM_VOLUMES_MAX];	/* after the root disk */
	unsigned		 nvolumes;
	int			 slots;		/* the VM_SLOTS slot disks (empty or a volume's) */
};

/* The device list recorded in snapshot headers; must match to restore. */
void qemu_argv_devices(const struct vm_spec *spec, char *buf, size_t len);

/* Fill a with the full command line, or return -1 with a cause naming the bad field. */
int qemu_argv_build(const struct vm_spec *spec, struct argv *a, char **cause);

#endif
