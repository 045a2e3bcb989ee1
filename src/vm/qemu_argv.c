/* QEMU microvm argv from a vm_spec; flags and their reasons in docs/architecture.md. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "vm/qemu_argv.h"

void
argv_init(struct argv *a)
{
	a->cap = 16;
	a->ac = 0;
	a->av = xcalloc(a->cap, sizeof(*a->av));
}

void
argv_add(struct argv *a, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	xvasprintf(&s, fmt, ap);
	va_end(ap);
	if (a->ac + 2 > a->cap) {
		a->cap *= 2;
		a->av = xreallocarray(a->av, a->cap, sizeof(*a->av));
	}
	a->av[a->ac++] = s;
	a->av[a->ac] = NULL;
}

void
argv_free(struct argv *a)
{
	size_t i;

	for (i = 0; i < a->ac; i++)
		free(a->av[i]);
	free(a->av);
	a->av = NULL;
	a->ac = a->cap = 0;
}

/* QEMU splits option values on ','; a path holding one would inject options. */
static int
qemu_safe_path(const char *field, const char *path, char **cause)
{
	if (path == NULL || *path == '\0') {
		cause_set(cause, "%s: missing", field);
		return -1;
	}
	if (strchr(path, ',') != NULL || strchr(path, '\n') != NULL) {
		cause_set(cause, "%s: path may not contain ',' or newlines: %s", field, path);
		return -1;
	}
	return 0;
}

/* The volume in slot k, or NULL: the slot holds its placeholder. */
static const struct vm_spec_volume *
qemu_slot_volume(const struct vm_spec *s, unsigned k)
{
	unsigned i;

	for (i = 0; i < s->nvolumes && i < VM_VOLUMES_MAX; i++)
		if (s->volumes[i].slot >= 0 && (unsigned)s->volumes[i].slot == k)
			return &s->volumes[i];
	return NULL;
}

/* The volume's fd set: -add-fd of its fd (and for read-write ones the read-only fd). */
static void
qemu_argv_fdset(struct argv *a, const struct vm_spec_volume *v, unsigned set)
{
	/* QEMU opens an image read-only first (probing, locks): the set holds both. */
	argv_add(a, "-add-fd");
	argv_add(a, "fd=%d,set=%u", v->fd, set);
	if (!v->read_only) {
		argv_add(a, "-add-fd");
		argv_add(a, "fd=%d,set=%u", v->fd_ro, set);
	}
}

/*
 * The slots (qemu_argv.h): node slotK is raw over slotKp (the null-co
 * placeholder, reads are zeros) or over slotKf (the volume's fd set, for a
 * restore of a sandbox that had the volume: its guest has it mounted).
 * vm_slot.c swaps the child of slotK at a claim; the device never changes.
 */
static void
qemu_argv_slots(const struct vm_spec *s, struct argv *a)
{
	const struct vm_spec_volume *v;
	unsigned k, i;
	int ro;

	for (k = 0; k < VM_SLOTS; k++) {
		ro = VM_SLOT_IS_RO(k);
		if ((v = qemu_slot_volume(s, k)) != NULL) {
			i = (unsigned)(v - s->volumes);
			qemu_argv_fdset(a, v, 10 + i);
			argv_add(a, "-blockdev");
			argv_add(a, "driver=file,node-name=slot%uf,filename=/dev/fdset/%u,"
			    "discard=unmap,read-only=%s", k, 10 + i, ro ? "on" : "off");
		} else {
			argv_add(a, "-blockdev");
			argv_add(a, "driver=null-co,node-name=slot%up,size=%llu,read-zeroes=on,"
			    "read-only=%s", k, ro ? VM_SLOT_RO_BYTES : VM_SLOT_RW_BYTES,
			    ro ? "on" : "off");
		}
		argv_add(a, "-blockdev");
		argv_add(a, "driver=raw,node-name=slot%u,file=slot%u%s,read-only=%s", k, k,
		    v != NULL ? "f" : "p", ro ? "on" : "off");
		argv_add(a, "-device");
		argv_add(a, "virtio-blk-device,drive=slot%u,serial=airlock-slot%u%s", k, k,
		    ro ? "" : ",werror=enospc,rerror=report");
	}
}

int
qemu_argv_build(const struct vm_spec *s, struct argv *a, char **cause)
{
	unsigned i;

	if (s->nvolumes > VM_VOLUMES_MAX) {
		cause_set(cause, "volumes: at most %d", VM_VOLUMES_MAX);
		return -1;
	}
	for (i = 0; i < s->nvolumes; i++) {
		const char *sr = s->volumes[i].serial;
		if (sr == NULL || *sr == '\0' || strlen(sr) > 20 ||
		    strspn(sr, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(sr) ||
		    s->volumes[i].fd < 3 || (!s->volumes[i].read_only && s->volumes[i].fd_ro < 3)) {
			cause_set(cause, "volumes[%u]: a serial of 1-20 [a-z0-9-] and an fd", i);
			return -1;
		}
		if (s->slots && s->volumes[i].slot >= 0 && (s->volumes[i].slot >= VM_SLOTS ||
		    !VM_SLOT_IS_RO(s->volumes[i].slot) != !s->volumes[i].read_only ||
		    qemu_slot_volume(s, (unsigned)s->volumes[i].slot) != &s->volumes[i])) {
			cause_set(cause, "volumes[%u]: slot %d is not a free slot of its kind", i,
			    s->volumes[i].slot);
			return -1;
		}
	}
	if (s->vcpus < 1 || s->vcpus > VM_VCPUS_MAX) {
		cause_set(cause, "vcpus: %u out of range 1..%d", s->vcpus, VM_VCPUS_MAX);
		return -1;
	}
	if (s->memory_mb < VM_MEMORY_MB_MIN || s->memory_mb > VM_MEMORY_MB_MAX) {
		cause_set(cause, "memory_mb: %u out of range %d..%d", s->memory_mb,
		    VM_MEMORY_MB_MIN, VM_MEMORY_MB_MAX);
		return -1;
	}
	if (s->accel == VM_ACCEL_TCG && s->tsc_khz == 0) {
		/* Without it ~8-10% of TCG boots hang calibrating against the (disabled) PIT. */
		cause_set(cause, "tsc_khz: unknown host TSC frequency, required under TCG");
		return -1;
	}
	if (s->accel == VM_ACCEL_AUTO) {
		cause_set(cause, "accel: must be resolved to kvm or tcg first");
		return -1;
	}
	if (qemu_safe_path("rootfs", s->rootfs, cause) == -1)
		return -1;
	if (s->console_socket != NULL) {
		if (qemu_safe_path("console_socket", s->console_socket, cause) == -1)
			return -1;
	} else if (qemu_safe_path("console_log", s->console_log, cause) == -1)
		return -1;
	if (s->mem_path != NULL && qemu_safe_path("mem_path", s->mem_path, cause) == -1)
		return -1;
	if (s->name != NULL && qemu_safe_path("name", s->name, cause) == -1)
		return -1;
	if (s->net && (s->tap_fd < 0 || s->guest_mac == NULL ||
	    qemu_safe_path("guest_mac", s->guest_mac, cause) == -1)) {
		cause_set(cause, "net: needs a tap fd and a guest MAC");
		return -1;
	}
	if (s->kernel != NULL && (qemu_safe_path("kernel", s->kernel, cause) == -1 ||
	    qemu_safe_path("initrd", s->initrd, cause) == -1))
		return -1;
	if (s->qmp_socket != NULL && qemu_safe_path("qmp_socket", s->qmp_socket, cause) == -1)
		return -1;
	if (s->agent_socket != NULL &&
	    qemu_safe_path("agent_socket", s->agent_socket, cause) == -1)
		return -1;
	if (s->append != NULL && strchr(s->append, '\n') != NULL) {
		cause_set(cause, "append: may not contain newlines");
		return -1;
	}

	argv_init(a);
	argv_add(a, QEMU_BINARY);
	argv_add(a, "-M");
	/* Keep ACPI (virtio-mmio discovery, poweroff) and the RTC (rtc=off costs 2 s). */
	argv_add(a, "microvm,x-option-roms=off,pit=off,pic=off,isa-serial=on");
	argv_add(a, "-accel");
	if (s->accel == VM_ACCEL_TCG && s->tcg_tb_mb != 0)
		/* The code cache otherwise grows towards 1 GiB of RSS per VMM. */
		argv_add(a, "tcg,tb-size=%u", s->tcg_tb_mb);
	else
		argv_add(a, "%s", s->accel == VM_ACCEL_KVM ? "kvm" : "tcg");
	/*
	 * TCG's default model, qemu64, stops at SSE3 and TCG refuses what the
	 * model lacks: Debian 12's Python stack (the code interpreter's
	 * matplotlib/pandas import) died of SIGILL on it. max is everything TCG
	 * emulates, less MONITOR/MWAIT: TCG's MWAIT only halts, and we believe
	 * nothing wakes it when another vCPU writes the monitored line, which
	 * is how a Linux guest that idles with MWAIT expects to be woken (no
	 * IPI); with it, guests here froze idle (functional:vm, twice in a few
	 * runs; docs/vm-engine.md "TCG CPU model"). A
	 * guest's CPU model is part of what a snapshot restores into: one
	 * taken before this change restores into a different model.
	 */
	argv_add(a, "-cpu");
	argv_add(a, s->accel == VM_ACCEL_KVM ? "host" : VM_TCG_CPU);
	argv_add(a, "-smp");
	argv_add(a, "%u", s->vcpus);
	argv_add(a, "-m");
	argv_add(a, "%u", s->memory_mb);
	if (s->mem_path != NULL) {
		/* File-backed RAM: snapshots skip it (x-ignore-shared), clones map it. */
		argv_add(a, "-object");
		argv_add(a, "memory-backend-file,id=mem,size=%uM,mem-path=%s,share=%s",
		    s->memory_mb, s->mem_path, s->mem_share ? "on" : "off");
		argv_add(a, "-machine");
		argv_add(a, "memory-backend=mem");
	}
	if (s->name != NULL) {
		argv_add(a, "-name");
		argv_add(a, "%s", s->name);
	}
	if (s->seccomp) {
		argv_add(a, "-sandbox");
		argv_add(a, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	}
	if (s->start_paused)
		argv_add(a, "-S");
	if (s->incoming) {
		argv_add(a, "-incoming");
		argv_add(a, "defer");
	}
	argv_add(a, "-nodefaults");
	argv_add(a, "-no-user-config");
	argv_add(a, "-display");
	argv_add(a, "none");
	if (s->no_reboot)
		argv_add(a, "-no-reboot");
	argv_add(a, "-chardev");
	if (s->console_socket != NULL)
		/* The host reads it (size-capped log, console events); output is
		 * dropped while nobody is connected, never blocks the guest. */
		argv_add(a, "socket,id=con0,path=%s,server=on,wait=off", s->console_socket);
	else
		argv_add(a, "file,id=con0,path=%s", s->console_log);
	argv_add(a, "-serial");
	argv_add(a, "chardev:con0");
	if (s->kernel != NULL) {
		argv_add(a, "-kernel");
		argv_add(a, "%s", s->kernel);
		argv_add(a, "-initrd");
		argv_add(a, "%s", s->initrd);
		argv_add(a, "-append");
		/*
		 * TCG: tsc_early_khz, or some boots hang calibrating the TSC;
		 * tsc=reliable, or the boot-time sync check finds the vCPUs'
		 * TSCs "unsynchronized", the guest falls back to the
		 * refined-jiffies clocksource and its wall clock loses ticks
		 * under host load (15 % slow measured: seconds a minute after
		 * /init set it). TCG's TSC is the host's, one offset for all
		 * vCPUs, and continues across snapshot/restore and stop/cont.
		 */
		if (s->accel == VM_ACCEL_TCG)
			argv_add(a, "console=ttyS0 panic=-1 quiet cryptomgr.notests "
			    "tsc_early_khz=%lu tsc=reliable%s%s", s->tsc_khz,
			    s->append ? " " : "", s->append ? s->append : "");
		else
			argv_add(a, "console=ttyS0 panic=-1 quiet cryptomgr.notests%s%s",
			    s->append ? " " : "", s->append ? s->append : "");
	}
	/*
	 * The guest's own full disk is ENOSPC from ext4 inside the guest; these
	 * only decide what a host-side failure does. werror=enospc: when the
	 * host filesystem runs out under a sparse image, QEMU stops the VM with
	 * the write pending (resumed with `cont` once space is freed: nothing
	 * lost) instead of handing the guest an EIO that makes ext4 abort its
	 * journal and remount read-only. Other write errors and every read
	 * error are reported to the guest (a stop would hide them). On btrfs
	 * the guest's RAM file usually hits ENOSPC first (SIGBUS): the
	 * free-space floor is the real guard (docs/vm-engine.md "Disk bounds").
	 */
	argv_add(a, "-drive");
	argv_add(a, "id=root,file=%s,format=raw,if=none,cache=unsafe,discard=unmap,"
	    "werror=enospc,rerror=report", s->rootfs);
	argv_add(a, "-device");
	argv_add(a, "virtio-blk-device,drive=root");
	if (s->slots)
		qemu_argv_slots(s, a);
	/*
	 * Volumes: QEMU gets an fd airlockd opened (O_RDONLY for read-only
	 * ones), never a path: the jail holds no volume file, and QEMU cannot
	 * open another. The guest finds each by its serial (docs/volumes.md).
	 */
	for (i = 0; i < s->nvolumes; i++) {
		const struct vm_spec_volume *v = &s->volumes[i];
		if (s->slots && v->slot >= 0)
			continue;
		qemu_argv_fdset(a, v, 10 + i);
		argv_add(a, "-drive");
		argv_add(a, "id=vol%u,file=/dev/fdset/%u,format=raw,if=none,cache=writeback,"
		    "discard=unmap,readonly=%s,werror=enospc,rerror=report", i, 10 + i,
		    v->read_only ? "on" : "off");
		argv_add(a, "-device");
		argv_add(a, "virtio-blk-device,drive=vol%u,serial=%s", i, v->serial);
	}
	argv_add(a, "-object");
	argv_add(a, "rng-random,id=rng0,filename=/dev/urandom");
	argv_add(a, "-device");
	argv_add(a, "virtio-rng-device,rng=rng0");
	if (s->agent_socket != NULL) {
		argv_add(a, "-chardev");
		argv_add(a, "socket,id=agent0,path=%s,server=on,wait=off", s->agent_socket);
		argv_add(a, "-device");
		argv_add(a, "virtio-serial-device");
		argv_add(a, "-device");
		argv_add(a, "virtserialport,chardev=agent0,name=org.airlock.agent");
	}
	if (s->net) {
		/* The host opened the tap inside the island; QEMU needs no privilege. */
		argv_add(a, "-netdev");
		argv_add(a, "tap,id=net0,fd=%d", s->tap_fd);
		argv_add(a, "-device");
		argv_add(a, "virtio-net-device,netdev=net0,mac=%s", s->guest_mac);
	}
	if (s->qmp_socket != NULL) {
		argv_add(a, "-qmp");
		argv_add(a, "unix:%s,server=on,wait=off", s->qmp_socket);
	}
	return 0;
}

void
qemu_argv_devices(const struct vm_spec *s, char *buf, size_t len)
{
	/* Same order as the command line: the migration stream depends on it. */
	int n = snprintf(buf, len, "virtio-blk");
	unsigned i;

	for (i = 0; s->slots && i < VM_SLOTS && n > 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - (size_t)n, ",virtio-blk:airlock-slot%u%s", i,
		    VM_SLOT_IS_RO(i) ? ":ro" : "");
	for (i = 0; i < s->nvolumes && n > 0 && (size_t)n < len; i++)
		if (!s->slots || s->volumes[i].slot < 0)
			n += snprintf(buf + n, len - (size_t)n, ",virtio-blk:%s%s",
			    s->volumes[i].serial, s->volumes[i].read_only ? ":ro" : "");
	if (n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ",virtio-rng%s%s",
		    s->agent_socket ? ",virtio-serial" : "", s->net ? ",virtio-net" : "");
}
