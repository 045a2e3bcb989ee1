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
};

/* The device list recorded in snapshot headers; must match to restore. */
void qemu_argv_devices(const struct vm_spec *spec, char *buf, size_t len);

/* Fill a with the full command line, or return -1 with a cause naming the bad field. */
int qemu_argv_build(const struct vm_spec *spec, struct argv *a, char **cause);

#endif
