/*
 * Internal to the VM driver: struct vm and the helpers its files share
 * (vm.c: lifecycle, spawn, QMP plumbing, boot, adopt, pause/resume, stop;
 * vm_restore.c; vm_snapshot.c). Nothing outside src/vm/ includes this.
 */
#ifndef AIRLOCK_VM_PRIV_H
#define AIRLOCK_VM_PRIV_H

#include <stdarg.h>
#include <time.h>

#include <event2/event.h>
#include <jansson.h>

#include "common/ref.h"
#include "images/stor_snapshot.h"
#include "vm/qemu_argv.h"
#include "vm/vm.h"
#include "vm/vm_jail.h"
#include "vm/vm_qmp.h"

#define VM_F_DEAD	0x1	/* process reaped */
#define VM_F_CLOSED	0x2	/* QMP closed (or never came up) */
#define VM_F_WANT_EXIT	0x4	/* stop/suspend asked for the exit */
#define VM_F_ADOPTED	0x8	/* not our child: init reaps it, its status is lost */

/*
 * VM_OP_SPAWN: vm_spawn_incoming until the spare waits. VM_OP_RESTORE: the
 * incoming half (device state in, MIGRATION completed, cont), after a spawn
 * (vm_restore) or on a waiting spare (vm_incoming).
 */
enum vm_op { VM_OP_NONE, VM_OP_BOOT, VM_OP_RESTORE, VM_OP_PAUSE, VM_OP_RESUME,
	VM_OP_SNAPSHOT, VM_OP_STOP, VM_OP_ADOPT, VM_OP_SPAWN };

#define VM_DEVSTATE_FDNAME	"airlock-devstate"	/* getfd name of the restore stream */
#define VM_SNAP_FDNAME		"airlock-snap"		/* getfd name of the snapshot stream */

struct vm {
	struct event_base	*vm_base;
	char			*vm_name;
	char			*vm_template;
	char			*vm_kernel_id;
	unsigned		 vm_memory_mb, vm_vcpus;
	char			 vm_devices[512];	/* volumes add a serial each */
	const struct stor_sandbox *vm_sb;	/* borrowed: the caller owns the sandbox */
	char			*vm_qmp_path, *vm_console_path, *vm_agent_path;
	enum vm_state		 vm_state;
	int			 vm_flags;
	int			 vm_own_mem;		/* RAM in vm/mem, share=on: can snapshot */

	pid_t			 vm_pid;
	int			 vm_pidfd;
	struct event		*vm_pidev;
	int			 vm_status;
	struct vm_cgroup	 vm_cg;

	struct qmp		*vm_qmp;
	struct vm_console	*vm_con;
	size_t			 vm_console_max;
	int			 vm_console_events;
	char			*vm_guest_stop;		/* SHUTDOWN reason, if any */
	char			*vm_qmp_err;		/* why QMP never came up */
	uint64_t		 vm_io_err_ms;		/* last BLOCK_IO_ERROR logged */
	vm_status_cb		 vm_status_cb;		/* vm_query_status in flight */
	void			*vm_status_arg;

	vm_event_cb		 vm_evcb;
	void			*vm_arg;

	enum vm_op		 vm_op;
	vm_done_cb		 vm_opcb;
	struct event		*vm_timer;		/* op timers: poll, grace, kill */
	int			 vm_stage;
	int			 vm_was_running;
	char			*vm_snap_id;
	int			 vm_snap_exit;
	int			 vm_snap_cont_tries;	/* cont refused while QEMU finalizes */
	struct stor_snapshot	 vm_snap;
	int			 vm_snapfd;
	double			 vm_snap_t[5];		/* snapshot: stop sent, stopped, stream done, reflinked, cont answered */
	int			 vm_mig_replied;	/* migrate(-incoming) answered */
	int			 vm_mig_done;		/* MIGRATION completed seen */

	/* -incoming defer VMMs (vm_restore, vm_spawn_incoming). */
	int			 vm_spare;		/* a spare waiting for vm_incoming */
	int			 vm_devfd;		/* sealed memfd of checked device state */
	enum vm_restore_mem	 vm_mem_mode;		/* the RAM it was started on ... */
	dev_t			 vm_mem_dev;		/* ... and that file's identity */
	ino_t			 vm_mem_ino;
	char			*vm_exit_why;		/* once exited: why (vm_incoming says it) */

	double			 vm_t0;			/* vm_boot/vm_restore called */
	struct vm_timings	 vm_times;

	struct ref		 vm_ref;		/* common/ref.h: the owner's + frames' */
};

/* vm.c */
/* A frame's reference across a user callback (ref.h); vm_put: 1 when vm is dead. */
void vm_hold(struct vm *vm);
int vm_put(struct vm *vm);
/* Append to vm_timings.qmp_trace: what this operation sent and saw. */
void vm_trace(struct vm *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vm_timer_in(struct vm *, int ms, event_callback_fn);
int vm_op_done(struct vm *, const char *error);
/* Fail the current operation; a VMM that never got going is killed. */
void vm_op_fail(struct vm *, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vm_op_start(struct vm *, enum vm_op, vm_done_cb, enum vm_state need1,
    enum vm_state need2, char **cause);
struct vm *vm_new(struct event_base *, const struct vm_config *, vm_event_cb, vm_done_cb,
    void *arg);
/* The config's volumes into spec, their fds appended to fds (vm_spec_common first). */
void vm_spec_volumes(const struct vm_config *cfg, struct vm_spec *s, int *fds, int *nfds);
void vm_spec_common(const struct vm_config *, struct vm_spec *);
int vm_spawn(struct vm *, const struct vm_config *, struct vm_spec *, int *fds, int nfds,
    struct vm_jail_bind *binds, int nbinds, char **cause);
int vm_cmd(struct vm *, const char *cmd, json_t *args, qmp_reply_cb);
void vm_resume_reply(struct qmp *, json_t *, const char *, void *);
void vm_stop_quit(struct vm *);

/* vm_restore.c: QMP is up on a VM_OP_RESTORE/VM_OP_SPAWN VMM; MIGRATION events. */
void vm_incoming_qmp_ready(struct vm *);
void vm_incoming_migration(struct vm *, const char *status);

/* vm_snapshot.c: MIGRATION events while VM_OP_SNAPSHOT runs. */
void vm_snap_migration(struct vm *, const char *status);

#endif
