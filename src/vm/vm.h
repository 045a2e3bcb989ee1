/*
 * The VM driver: one microVM per struct vm, asynchronous on libevent.
 * Operations: boot, restore (or spawn a spare + restore into it), pause,
 * resume, snapshot, stop, stats; events:
 * console lines, the guest stopping, the VMM exiting. Nothing above this
 * interface knows it is QEMU (vm.c, vm_qmp.c, vm_jail.c, qemu_argv.c do).
 *
 * Process model (tmux job.c): a VM is finished only when its process has
 * been reaped (pidfd) *and* its QMP connection has closed; whichever comes
 * second releases the cgroup, emits VM_EVENT_EXITED and completes any
 * operation still in flight.
 *
 * One operation at a time: starting another while one runs fails with
 * "busy". Every operation ends in exactly one done callback.
 * vm_free() may be called at any time, also from a callback: it kills and
 * reaps a live VMM synchronously and calls no more callbacks.
 */
#ifndef AIRLOCK_VM_H
#define AIRLOCK_VM_H

#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "images/stor_sandbox.h"
#include "vm/accel.h"
#include "vm/vm_cgroup.h"

#define VM_QMP_TIMEOUT_MS	60000	/* spawn to QMP ready: 22 ms typical, seconds on a loaded TCG host */
#define VM_CMD_TIMEOUT_MS	10000	/* one QMP command */
#define VM_MIGRATE_TIMEOUT_MS	120000	/* device state stream / restore: waits for the MIGRATION event */
#define VM_QUIT_TIMEOUT_MS	3000	/* quit to exit, before SIGKILL */
#define VM_CONSOLE_MAX		(1024 * 1024)	/* retained console bytes (console.log + .1) */
#define VM_MEM_OVERHEAD		(384ULL << 20)	/* cgroup limit = guest RAM + this */
#define VM_TCG_TB_MB		64		/* TCG code cache cap (default 1 GiB) */

enum vm_state { VM_STARTING, VM_RUNNING, VM_PAUSED, VM_STOPPING, VM_EXITED };

enum vm_event_type {
	VM_EVENT_CONSOLE,	/* line, line_len: one console line (if console_events) */
	VM_EVENT_GUEST_STOPPED,	/* reason: guest powered off, reset or panicked (QMP SHUTDOWN,
				   GUEST_PANICKED with a pvpanic device) */
	VM_EVENT_EXITED,	/* the VMM is gone and its resources are released */
};

struct vm_event {
	enum vm_event_type	 type;
	const char		*line;		/* CONSOLE: NUL-terminated, may hold NULs too */
	size_t			 line_len;
	const char		*reason;	/* GUEST_STOPPED, EXITED */
	int			 expected;	/* EXITED: vm_stop/vm_snapshot asked for it */
	const char		*console_tail;	/* EXITED: last console lines */
};

struct vm;
typedef void (*vm_event_cb)(struct vm *, const struct vm_event *, void *);
typedef void (*vm_done_cb)(struct vm *, const char *error, void *);

/* A volume to attach as an extra virtio-blk disk (qemu_argv.h). */
struct vm_volume {
	int		 fd;		/* opened by the caller, O_RDWR or O_RDONLY; kept by it */
	int		 fd_ro;		/* read-write ones: also an O_RDONLY fd (QEMU asks both) */
	const char	*serial;
	int		 read_only;
	int		 slot;		/* -1: its own disk; else its slot (qemu_argv.h) */
};

struct vm_config {
	const char			*name;		/* sandbox name */
	const char			*template_name;	/* recorded in / checked against snapshots */
	const char			*kernel_id;	/* e.g. the vmlinux sha256 */
	const char			*kernel;	/* cold boot only */
	const char			*initrd;
	const char			*append;	/* extra kernel arguments */
	enum vm_accel			 accel;
	unsigned long			 tsc_khz;
	unsigned			 vcpus;
	unsigned			 memory_mb;
	const struct stor_sandbox	*sandbox;	/* dirs, disk, memory file, uid */
	int				 netns_fd;	/* island netns, or -1 */
	int				 tap_fd;	/* tap in that netns, or -1: no NIC */
	struct vm_limits		 limits;	/* zero fields get defaults */
	const char			*cgroup_root;	/* NULL: detect under /sys/fs/cgroup */
	size_t				 console_max;	/* retained console cap; 0: VM_CONSOLE_MAX */
	int				 console_events; /* emit VM_EVENT_CONSOLE per line */
	const struct vm_volume		*volumes;	/* boot and restore; part of the devices */
	unsigned			 nvolumes;
	int				 slots;		/* boot the volume slots (qemu_argv.h) */
};

enum vm_restore_mem {
	VM_RESTORE_OWN,		/* reflink the snapshot's RAM file, share=on: cheap re-snapshot */
	VM_RESTORE_SHARED,	/* MAP_PRIVATE of a sealed base memfd: pages shared by clones */
};

struct vm_stats {
	enum vm_state	 state;
	pid_t		 pid;
	uint64_t	 rss_kb, pss_kb;	/* of the VMM process */
	long long	 cgroup_bytes;		/* -1 if unknown */
	long long	 cgroup_limit;
	double		 cpu_seconds;
	uint64_t	 console_bytes;		/* read from the serial console */
	uint64_t	 console_dropped;	/* ... and not kept (console_file.h) */
};

/* Spawn a jailed VMM and boot the kernel; done runs when the guest is running. */
struct vm *vm_boot(struct event_base *base, const struct vm_config *cfg,
    vm_event_cb ev, vm_done_cb done, void *arg, char **cause);

/*
 * Restore from a snapshot directory. The header, device state checksum and
 * the config (template, kernel, memory, vcpus, devices) are checked before
 * anything starts: a mismatch fails here with a cause and starts nothing.
 * The sandbox's rootfs must be a reflink of the snapshot's rootfs.
 * base_memfd: VM_RESTORE_SHARED only (stor_snapshot_memfd); dup'd.
 * Same as vm_spawn_incoming + vm_incoming, with the checks moved first.
 */
struct vm *vm_restore(struct event_base *base, const struct vm_config *cfg,
    const char *snapdir, enum vm_restore_mem mode, int base_memfd,
    vm_event_cb ev, vm_done_cb done, void *arg, char **cause);

/*
 * Spare VMMs (fast create Tier 1): the first half of a restore, done ahead.
 *
 * vm_spawn_incoming starts the jailed QEMU of cfg (shape: memory_mb, vcpus;
 * template_name and kernel_id it will accept; cfg->sandbox storage; the
 * optional netns_fd/tap_fd, which decide the device list) with
 * -incoming defer, connects QMP and sets the migration capabilities
 * x-ignore-shared and events. done(vm, NULL) runs when it waits; an error
 * there means it is gone. What QEMU opens at start is fixed from then on:
 *   - the disk: cfg->sandbox->ss_rootfs must already be a reflink of the
 *     rootfs of the snapshot(s) it will be given (stor_sandbox_create from
 *     the snapshot's rootfs.ext4);
 *   - RAM, VM_RESTORE_SHARED: base_memfd (dup'd) is mapped now, so the
 *     spare serves only snapshots of that base (same file; checked);
 *   - RAM, VM_RESTORE_OWN: an empty sparse RAM file; vm_incoming reflinks
 *     the snapshot's RAM into that same inode (base_memfd ignored).
 * QEMU 7.2 cannot take RAM or disks later (-machine memory-backend is
 * resolved before --preconfig), hence a spare per (base, shape).
 *
 * While it waits the VM is VM_STARTING and vm_is_spare() is true. If the
 * VMM dies meanwhile, VM_EVENT_EXITED says why (expected = 0) and
 * vm_incoming refuses it with that reason; vm_free/vm_stop end a spare.
 * A spare is never adopted after a daemon restart: vm_adopt fails on an
 * "inmigrate" VMM and kills it, as any failed adopt.
 *
 * vm_incoming is the second half: checks the snapshot header against the
 * spare's config (template, kernel, memory, vcpus, devices), the mode and
 * the base against what it was started on, and the device state checksum;
 * a mismatch returns -1 with a cause and changes nothing: the spare still
 * waits (the caller decides whether to free it). Otherwise the sealed
 * device state goes to QEMU by getfd, migrate-incoming fd:, QMP MIGRATION
 * "completed", cont; done(vm, NULL) when the guest runs, or done(vm, error)
 * and the VMM is killed (a half-loaded VMM is never reused). From then on
 * it is a VM like any restored one; vm_timings counts from this call.
 */
#define VM_SPARE_API	1	/* this driver has the three below (bench/bench_spare.c builds without) */
struct vm *vm_spawn_incoming(struct event_base *base, const struct vm_config *cfg,
    enum vm_restore_mem mode, int base_memfd, vm_event_cb ev, vm_done_cb done, void *arg,
    char **cause);
int vm_incoming(struct vm *vm, const char *snapdir, enum vm_restore_mem mode,
    int base_memfd, vm_done_cb done, char **cause);
int vm_is_spare(const struct vm *vm);

/*
 * Take over the VMM of cfg->sandbox that a previous airlockd started and
 * left running (SIGKILL, crash: QEMU has no parent-death signal). It is
 * found by the sandbox's jail uid and checked (executable, command line,
 * uids, cgroup, memory and vCPUs as in cfg); then QMP and the console are
 * reconnected and query-status tells running or paused. done runs when it
 * is known; from then on the VM behaves as one from vm_boot, except that
 * the VMM is not our child: its exit is seen through a pidfd, but its exit
 * status is not. On a synchronous failure (no such VMM, a mismatch)
 * nothing is changed: the caller decides what happens to the process.
 * Console output from while no daemon was connected is lost (QEMU drops it).
 */
struct vm *vm_adopt(struct event_base *base, const struct vm_config *cfg,
    vm_event_cb ev, vm_done_cb done, void *arg, char **cause);
/*
 * Whether the live VMM vm_adopt would take (found and checked the same
 * way) runs with the volume slots: 1 or 0 (a sandbox resumed from a
 * snapshot taken before slots existed runs without), -1 with a cause.
 * vm_adopt refuses a VMM whose slots differ from cfg->slots.
 */
int vm_adopt_slots(const struct vm_config *cfg, char **cause);
/*
 * 1 when the snapshot in snapdir was taken before VMs had the volume
 * slots (its header's device list names none): it restores only with
 * cfg->slots 0, its volumes (if any) as disks of their own.
 */
int vm_snapshot_slotless(const char *snapdir);

int vm_pause(struct vm *vm, vm_done_cb done, char **cause);
/*
 * Put a volume into the empty slot (qemu_argv.h) of a paused or running VM
 * booted with slots (vm_slot.c): fd (and for a read-write slot fd_ro, an
 * O_RDONLY one) stay the caller's; size is the file's. done(vm, NULL) once
 * QEMU serves it and told the guest its size; -1: done is not called.
 */
int vm_slot_fill(struct vm *vm, unsigned slot, int fd, int fd_ro, uint64_t size,
    vm_done_cb done, void *arg, char **cause);
int vm_resume(struct vm *vm, vm_done_cb done, char **cause);

/*
 * Write snapshot <id> (stor_snapshot.h layout). The guest is stopped for
 * the device state stream and the reflinks of its RAM file and disk, then
 * continues, or the VMM exits when then_exit (suspend). On failure the
 * partial snapshot is removed and a running guest continues.
 * Needs guest RAM in its own file (booted, or restored VM_RESTORE_OWN).
 */
int vm_snapshot(struct vm *vm, const char *id, int then_exit, vm_done_cb done, char **cause);

/*
 * QEMU's run state ("running", "paused", "guest-panicked", "io-error",
 * "internal-error", "shutdown", ...) outside any operation, for health
 * checks: the VMM answers even when the guest is wedged. One at a time;
 * cb runs once with status or error, never after vm_free.
 */
typedef void (*vm_status_cb)(struct vm *, const char *status, const char *error, void *arg);
int vm_query_status(struct vm *vm, int timeout_ms, vm_status_cb cb, void *arg, char **cause);

/* Ask the guest to power off (ACPI), after grace_ms quit QEMU, then kill. */
int vm_stop(struct vm *vm, int grace_ms, vm_done_cb done, char **cause);

/*
 * Where boot/restore time went, in ms since the vm_boot/vm_restore/
 * vm_spawn_incoming call (vm_incoming: since that call; spawned and
 * qmp_ready are then 0).
 */
struct vm_timings {
	double	 checked;	/* restore: header + device state checksum done */
	double	 spawned;	/* jail set up, QEMU exec'd */
	double	 qmp_ready;	/* QMP greeting + capabilities */
	double	 running;	/* cont answered */
	/*
	 * The last vm_snapshot of a running guest that continued: how long
	 * the guest was stopped (stop sent .. cont answered) and its parts.
	 */
	double	 snap_paused, snap_stop, snap_stream, snap_reflink, snap_cont;
	/* QMP commands sent and MIGRATION events seen since then, in order,
	 * comma-separated ("..." once full): diagnostics and tests. */
	char	 qmp_trace[256];
};

void vm_stats(struct vm *vm, struct vm_stats *st);
void vm_timings(const struct vm *vm, struct vm_timings *t);
enum vm_state vm_state(const struct vm *vm);
const char *vm_state_name(enum vm_state s);
pid_t vm_pid(const struct vm *vm);
const char *vm_name(const struct vm *vm);
/*
 * Host path of the guest agent's virtio-serial socket. The directory is
 * writable by the (untrusted) VMM, which could swap the socket for a
 * symlink to another sandbox's: connect with vm_agent_connect, or check
 * the peer with vm_check_peer.
 */
const char *vm_agent_socket(const struct vm *vm);
/* Connect to the agent socket and verify the listener is this VMM. */
int vm_agent_connect(const struct vm *vm, char **cause);
/* 0 when the peer of a connected unix socket runs as the sandbox's uid. */
int vm_check_peer(const struct vm *vm, int fd, char **cause);
const struct vm_cgroup *vm_cgroup(const struct vm *vm);

void vm_free(struct vm *vm);

#endif
