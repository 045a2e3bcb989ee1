/*
 * Private to src/sandbox/: the sandbox and manager structs and the functions
 * the manager's files call across each other. Nothing outside src/sandbox/
 * includes this.
 */
#ifndef AIRLOCK_SBM_IMPL_H
#define AIRLOCK_SBM_IMPL_H

#include "common/ref.h"
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <event2/event.h>
#include "link/agent_client.h"
#include "config/config.h"
#include "common/json_time.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/tbucket.h"
#include "common/util.h"
#include "net/net_island.h"
#include "egress/egress_policy.h"
#include "egress/sbm_egress.h"
#include "link/envd_client.h"
#include "sandbox/sbm_disk.h"
#include "sandbox/sbm.h"
#include "sandbox/sbm_health.h"
#include "sandbox/sbm_lifetime.h"
#include "sandbox/sbm_recover.h"
#include "images/stor_sandbox.h"
#include "images/stor_snapshot.h"
#include "images/template.h"
#include "vm/accel.h"
#include "vm/console_file.h"
#include "vm/qemu_argv.h"
#include "vm/vm.h"


struct sb_op {
	enum sb_op_kind		 kind;
	sb_done_cb		 done;
	void			*arg;
	int64_t			 start_ms;
	TAILQ_ENTRY(sb_op)	 entry;
};

/*
 * A snapshot directory creates restore from (sbm_fork.c): a fork's
 * capture (removed with its last reference: each child holds one until
 * vm_restore has reflinked the RAM and disk) or a named snapshot (kept).
 */
struct sb_snapsrc {
	int	 refs;
	char	*dir;
	int	 remove;
	const char *tier;	/* the children's tier: "fork" or "snapshot" (a literal) */
};
struct sb_snapsrc *sb_snapsrc_new(const char *dir, int remove, const char *tier);
void sb_snapsrc_unref(struct sb_snapsrc *src);

/*
 * SB_OP_FORK and SB_OP_SNAPSHOT: the op's arg starts with this. The guest
 * is captured into snapshots/<snap_id> (a suspend's name, "<id>-<ms>", so a
 * restart removes a capture a crash left behind), then the op's done runs.
 */
struct sb_capture {
	char		 snap_id[96];
	double		 t0;		/* monotonic_msf() when the capture started */
	double		 paused_ms;
};
void sb_op_capture(struct sandbox *sb);

/*
 * A claim's steps, in order (sbm_pool.c): each ends at a monotonic time
 * in pool_ts[]; GET /v1/pools reports the mean length of each.
 */
enum claim_t {
	CLAIM_T_CALL,		/* sbm_pool_claim: member picked */
	CLAIM_T_OP,		/* row saved, op started */
	CLAIM_T_ATTACHED,	/* the owner's policy on the island (or no island) */
	CLAIM_T_RESUMED,	/* QMP cont answered */
	CLAIM_T_INIT_SENT,	/* /init built and queued on the channel */
	CLAIM_T_INITED,		/* /init answered */
	CLAIM_T_DONE,		/* running: row saved, event sent, create answered */
	CLAIM_T_N
};
extern const char *const claim_t_names[CLAIM_T_N];

/* The create tiers a template create goes through, in order (docs/architecture.md). */
enum sbm_tier { SBM_TIER_POOL, SBM_TIER_SPARE, SBM_TIER_BASE, SBM_TIER_BOOT, SBM_TIER_N };
extern const char *const sbm_tier_names[SBM_TIER_N];

struct sandbox {
	struct sbm		*m;
	struct store_sandbox	 rec;	/* rec.state: the name of state, for the store */
	enum sb_state		 state;
	struct ref		 ref;		/* common/ref.h: the manager's + holders'; dead: deleted, no longer in the manager */
	TAILQ_HEAD(, sb_op)	 ops;
	struct sb_op		*cur;		/* the running operation */
	struct event		*deadline;	/* of the running operation */
	struct vm		*vm;
	struct agent_client	*agent;
	int			 agent_up;
	struct envd_req		*init_req;
	struct sbm_disk_grow	*disk_grow;	/* create: the guest's resize2fs in flight */
	unsigned		 disk_mb;	/* rootfs size, MiB (0: look it up) */
	char			*build_rootfs;	/* a template build's VM: boots this image (sbm.h) */
	int			 disk_grows;	/* create: disk_mb is above the template's */
	struct stor_sandbox	 stor;
	int			 have_stor;
	struct net_island	 island;
	int			 have_island;
	int			 gw_attached;	/* the gateway serves its island */
	void			(*net_then)(struct sandbox *, const char *);	/* attach pending */
	int			 streams;	/* open exec/watch/file streams */
	int			 execs;		/* of which exec starts (admission) */
	struct tbucket		 stream_budget;	/* sb_stream_budget: output bytes of its streams */
	int			 stream_budget_set;
	int64_t			 last_active;
	struct envd_req		*cpu_req;	/* idle check: GET /metrics in flight */
	int64_t			 cpu_asked_ms;	/* when the previous one was sent */
	int			 cpu_decides;	/* its answer closes a fresh interval */
	char			*console;	/* console log path (kept after release) */
	int			 boot_slot;	/* holds one of the manager's boot slots */
	int			 boot_waiting;	/* queued in boot_wait */
	uid_t			 adopt_uid;	/* SB_OP_ADOPT: the jail uid its claim names */
	/*
	 * Health is a condition of a running sandbox, not a lifecycle state:
	 * the watcher's verdicts change it, only SB_OP_RECOVER (queued like any
	 * operation) acts on it. Not persisted: it is an observation of the
	 * live guest, made again after a restart (adoption checks /health).
	 */
	struct sbm_health	*hl;
	enum sb_health		 hl_status;
	char			*hl_reason;	/* why unhealthy (valid UTF-8) */
	int64_t			 hl_since;	/* unix ms the status began */
	int			 hl_dead;	/* the VMM says the guest is gone */
	int			 hl_acting;	/* SB_OP_RECOVER queued */
	struct sbm_restarts	 hl_restarts;	/* on_unhealthy = restart, rate-limited */
	/*
	 * Warm pool (sbm_pool.c). A member or base builder is hidden: no
	 * events, not found, listed or counted, until a claim hands it over.
	 */
	int			 pool_member;
	struct sbm_pool		*pool;		/* its pool (members, builders, spares) */
	int			 pool_ready;	/* paused, in pool->ready (a spare: waiting, in
						   pool->spares) */
	int			 pool_spare;	/* a spare VMM (sbm_spare.c) until claimed */
	char			 pool_base[65];	/* a spare: the base it was started for */
	int			 pool_step;	/* 1 once its /init is sent */
	int			 pool_busy;	/* holds one of the manager's pool_limit */
	int			 pool_resumed;	/* claim: cont done */
	struct envd_req		*pool_req;	/* warm-up exec or file op */
	int64_t			 pool_t0;	/* fill/build/claim start, ms */
	double			 pool_ts[CLAIM_T_N];	/* claim: when each step ended (monotonic ms) */
	const char		*tier;		/* create: "pool", "spare", "base", "boot", "fork",
						   "snapshot" */
	struct sb_snapsrc	*from;		/* create: restore this instead of the template */
	int			 base_failed;	/* create: its base restore failed: cold boot */
	/* Volumes (sbm_volume.c): the files QEMU got for this boot or restore. */
	int			 volfds[2 * VM_VOLUMES_MAX];	/* rw, ro per volume */
	unsigned		 nvolfds;
	struct vm_volume	 vmvols[VM_VOLUMES_MAX];
	char			 volserial[VM_VOLUMES_MAX][24];
	json_t			*claim_vols;	/* a claim's "volumes", for its fallback create */
	/*
	 * This VM was restored (or claimed) with every slot on its placeholder:
	 * its volumes go into their slots once the guest runs (sb_volumes_restored),
	 * and /init waits for that (vol_wait). Reset by sb_release.
	 */
	int			 vol_fill;
	int			 vol_wait;
	int			 slotless;	/* resumed from a snapshot taken before slots existed */
	unsigned		 vol_filling;	/* the next volume to fill (sbm_volslot.c) */
	struct envd_req		*fz_req;	/* freeze or thaw of its volumes in flight */
	struct event		*fz_timer;
	void			(*fz_then)(struct sandbox *);
	int			 fz_thaw;
	/* Journal replays of its read-only volumes it waits for (sbm_volreplay.c). */
	unsigned		 replays;
	void			(*replay_then)(struct sandbox *, const char *);
	char			*replay_err;
	void			(*vol_then)(struct sandbox *, const char *);
	TAILQ_ENTRY(sandbox)	 pool_entry;
	TAILQ_ENTRY(sandbox)	 entry;
	TAILQ_ENTRY(sandbox)	 wait_entry;
};

struct sbm {
	struct event_base	*base;
	int			 shutdown_pending;	/* suspends still running */
	int			 draining;	/* sbm_drain: no new sandboxes, every one suspended */
	void			(*shutdown_done)(void *);
	void			*shutdown_arg;
	struct event		*shutdown_timer;
	struct store		*store;
	const struct config	*cfg;
	sbm_event_fn		 event_fn;
	void			*event_arg;
	TAILQ_HEAD(, sandbox)	 sandboxes;
	struct event		*sweep;
	struct accel_info	 accel;
	char			*kernel_id;
	int			 booting;	/* VM starts in flight (create, resume) */
	int			 boot_limit;
	TAILQ_HEAD(, sandbox)	 boot_wait;	/* creates/resumes waiting for a slot */
	struct sbm_egress	*egress;
	/* Warm pools and bases (sbm_pool.c). */
	TAILQ_HEAD(, sbm_pool)	 pools;
	struct event		*pool_timer;
	int			 pool_busy;	/* fills and base builds in flight */
	int			 pool_go;	/* recovery is over: refills may start */
	int			 pool_limit;	/* ... at most this many */
	uint64_t		 pool_budget_mb;
	char			*qemu_sha256;
	uint64_t		 tier_creates[SBM_TIER_N];
	uint64_t		 tier_fallbacks;	/* a spare or base restore failed: next tier */
	TAILQ_HEAD(, sb_replay)	 replays;	/* volume journal replays running (sbm_volreplay.c) */
};

static inline int64_t
now_ms(void)
{
	return store_now_ms();
}


/* sbm.c */
void sb_free(struct sandbox *sb);
void sb_save(struct sandbox *sb);
void sb_event(struct sandbox *sb, const char *type, json_t *data);
void sb_set_state(struct sandbox *sb, enum sb_state state, const char *error);
int sb_is(const struct sandbox *sb, enum sb_state state);
/* Paused, suspending, suspended or resuming: its lifetime clock is stopped. */
int sb_stopped(const struct sandbox *sb);

/* sbm_adopt.c */
void sb_adopt_fail(struct sandbox *sb, const char *why);
void sb_adopt_check(struct sandbox *sb);
void sb_op_adopt(struct sandbox *sb);

/* sbm_boot.c */
void sb_fail_guest(struct sandbox *sb, const char *why, int in_op);
void sb_vm_event(struct vm *vm, const struct vm_event *ev, void *arg);
int sb_agent_dial(struct agent_client *ac, void *arg, char **cause);
size_t sb_console_max(const struct sandbox *sb);
void sb_vm_config(struct sandbox *sb, const struct template_paths *tp, struct vm_config *vc);
void sb_op_create(struct sandbox *sb);
void sb_op_resume_suspended(struct sandbox *sb);

/* sbm_create.c */
struct sandbox *sb_new(struct sbm *m);
/* Sandboxes that count against max_sandboxes. */
int sb_live_count(struct sbm *m);
/*
 * The record of a new sandbox from sp (validated), inserted and announced
 * ("created"), not yet queued; origin and from may be NULL. NULL: *cause.
 */
struct sandbox *sb_record_new(struct sbm *m, const struct sb_spec *sp, const char *origin,
    struct sb_snapsrc *from, char **cause);
/*
 * The same with sp's volumes attached (the one-writer check, before
 * anything boots); refused: no record is left, NULL with *status (409,
 * 404, 500) and *cause.
 */
struct sandbox *sb_record_volumes(struct sbm *m, const struct sb_spec *sp, const char *origin,
    struct sb_snapsrc *from, int *status, char **cause);

/*
 * sbm_snap.c: create from a named snapshot (name NULL: sp->template_name
 * names one). NULL with *status 404 when there is no such snapshot.
 */
struct sandbox *sb_create_from_snap(struct sbm *m, const struct sb_spec *sp, const char *name,
    sb_done_cb done, void *arg, int *status, char **cause);

/* sbm_fork.c: create's restore from sb->from (after its island is attached). */
void sb_create_restore(struct sandbox *sb, const char *neterr);
/* The spec's network has a NIC (mode other than none). */
int sb_network_has_nic(json_t *network);

/* sbm_gateway.c */
void sbm_egress_restarted(void *arg);
/* Its network spec has a NIC (mode other than none). */
int sb_has_network(const struct sandbox *sb);

/* sbm_lifecycle.c */
void sb_paused(struct vm *vm, const char *error, void *arg);
void sb_resumed(struct vm *vm, const char *error, void *arg);
void sb_op_suspend(struct sandbox *sb);
void sb_remove_snapshot(struct sandbox *sb);
void sb_op_delete(struct sandbox *sb);

/* sbm_op.c */
void sb_op_finish(struct sandbox *sb, const char *error, int status);
void sb_fail(struct sandbox *sb, const char *why, int status);
void sb_deadline_set(struct sandbox *sb, int ms);
void sb_deadline_clear(struct sandbox *sb);
void sb_release(struct sandbox *sb);
void sb_boot_slot_release(struct sandbox *sb);
void sb_run_next(struct sandbox *sb);

/* sbm_sweep.c */
void sbm_sweep(evutil_socket_t fd, short ev, void *arg);

/* sbm_verdict.c */
void sb_health_reset(struct sandbox *sb);
void sb_health_verdict(void *arg, enum sbm_verdict v, const char *reason);
void sb_op_recover(struct sandbox *sb);

/* The agent channel callbacks of every sandbox (sbm_boot.c). */
extern const struct agent_client_cb sb_agent_cbs;
/* sbm_boot.c, shared with the pool */
void sb_send_init(struct sandbox *sb);
/* /init if the agent is up, the guest's volumes are in their slots and the op wants it. */
void sb_init_ready(struct sandbox *sb);
/* The guest runs: connect its agent; a restore with placeholders fills its slots. */
void sb_guest_up(struct sandbox *sb);
int sb_prepare(struct sandbox *sb, const char *rootfs_src, uint64_t disk_bytes,
    struct vm_config *vc, struct template_paths *tp, int *netns_fd, int *tap_fd, char **cause);
void sb_vm_ready(struct vm *vm, const char *error, void *arg);
void close_fds(int a, int b);
struct sandbox *sb_find_any(struct sbm *m, const char *id);

/* sbm_pool.c: warm pools, base snapshots and their hooks in the lifecycle. */
void sbm_pool_init(struct sbm *m);
void sbm_pool_free(struct sbm *m);
/*
 * A member for this spec, claimed (SB_OP_CLAIM queued), or NULL: no member,
 * or with *cause set the spec's volumes were refused (*status: 409, 404).
 */
struct sandbox *sbm_pool_claim(struct sbm *m, const struct sb_spec *sp, sb_done_cb done,
    void *arg, int *status, char **cause);
/*
 * sbm_spare.c: a spare VMM for this spec, claimed (SB_OP_CLAIM queued), or
 * NULL: none waits (the base tier is next), or with *cause set the spec's
 * volumes were refused (*status: 409, 404).
 */
struct sandbox *sbm_spare_claim(struct sbm *m, const struct sb_spec *sp, sb_done_cb done,
    void *arg, int *status, char **cause);
/* Create's base tier: 0 when the restore started, -1 (nothing left) to cold boot. */
int sb_pool_restore_base(struct sandbox *sb);
/*
 * A create whose base restore failed after it started (QEMU died, the
 * migration failed, the agent never answered, /init failed): 1 when it
 * was released and starts again as a cold boot; 0 when why is final.
 */
int sb_pool_base_fallback(struct sandbox *sb, const char *why);
void sb_op_pool(struct sandbox *sb);
/* The pool op in flight wants /init now (once): agent up, or a claim's cont done. */
int sb_pool_take_init(struct sandbox *sb);
void sb_running(struct sandbox *sb);
void sb_pool_inited(struct sandbox *sb);
void sb_pool_fail(struct sandbox *sb, const char *why, int status);
void sb_pool_discard(struct sandbox *sb, const char *why);
void sb_pool_release(struct sandbox *sb);
/* Recovery: adopt a pooled record's VM as a member, or remove it. */
void sb_pool_adopted(struct sandbox *sb);

/* Volumes (sbm_volume.c). */
int sb_volumes_attach(struct sandbox *sb, json_t *v, int *status, char **cause);
void sb_volumes_detach(struct sandbox *sb);
void sb_volumes_close(struct sandbox *sb);
/* Its volumes opened and placed into vc for a boot or restore (the fds are the sandbox's). */
int sb_volumes_open(struct sandbox *sb, struct vm_config *vc, char **cause);
/* Placed only (serials, slots; no fds): an adopted VMM's device list. */
int sb_volumes_layout(struct sandbox *sb, struct vm_config *vc, char **cause);
json_t *sb_volumes_init(struct sandbox *sb);
int sb_has_volumes(struct sandbox *sb);
/* How many of its volumes it holds read-write (0 also when the store fails). */
int sb_volumes_rw(struct sandbox *sb);
int sb_slots(const struct sandbox *sb);
/*
 * A claimed member's volumes into its empty slots (sbm_volslot.c): opens
 * them, fills each slot over QMP, then then(sb, NULL) or then(sb, why).
 * The op holds the sandbox; the fds are closed with the VM (sb_release).
 */
void sb_volumes_fill(struct sandbox *sb, void (*then)(struct sandbox *, const char *));
/*
 * The guest of a VM restored with placeholders (vol_fill: a claimed pool
 * member after cont, a spare, a base or a named snapshot) runs: its
 * volumes into their slots, then /init (sb_init_ready); a failure fails
 * the op (sb_fail: a claim goes to the next tier, a base restore boots).
 */
void sb_volumes_restored(struct sandbox *sb);
/* How many volumes the sandbox has when all of them go into the slots (0: none), else -1. */
int sb_volumes_slotted(struct sandbox *sb);
/*
 * A running guest freezes its read-write volumes (thaw 0: before a delete
 * or suspend) or thaws them (1: a suspend that failed), then then(sb)
 * (may be NULL) once it answered, failed, or SBM_FREEZE_TIMEOUT_MS passed;
 * at once without a running guest, a healthy agent or such volumes.
 */
void sb_volumes_freeze(struct sandbox *sb, int thaw, void (*then)(struct sandbox *));
/* A freeze or thaw in flight is dropped (release: the guest goes). */
void sb_volumes_freeze_cancel(struct sandbox *sb);
/*
 * Before a create or claim boots or fills: each read-only volume whose
 * journal needs recovery is replayed in a jail (sbm_volreplay.c), then
 * then(sb, NULL) or then(sb, why); at once when none needs it.
 */
void sb_volumes_replay(struct sandbox *sb, void (*then)(struct sandbox *, const char *));
/* airlockd exits: replays are killed, their waiters not told. */
void sb_volumes_replay_free(struct sbm *m);

/*
 * A create's admission under its project's quota (sbm_quota.c): 0 when n
 * sandboxes of this shape fit (with lock: the project stays locked until
 * sbm_quota_release, after the row is written); -1 with *status 429 and a
 * cause naming the limit (503: the store failed), nothing held.
 */
int sbm_quota_admit(struct sbm *m, const char *project, unsigned n, unsigned vcpus,
    uint64_t memory_mb, int lock, int *status, char **cause);
void sbm_quota_release(struct sbm *m, const char *project);

#endif
