/*
 * The sandbox manager: every sandbox of this host, its lifecycle state
 * machine, and the resources each one owns (VM, agent channel, storage,
 * island). Operations on one sandbox run one at a time from a queue;
 * different sandboxes proceed in parallel on the event loop. Every
 * transition is written to the store before the side effect starts and
 * after it ends, so a restart can tell what was in flight.
 *
 * States: creating → running ⇄ paused; running|paused → suspending →
 * suspended → resuming → running; any → deleting → (gone); failed.
 */
#ifndef AIRLOCK_SBM_H
#define AIRLOCK_SBM_H

#include <stdint.h>

#include <event2/event.h>
#include <jansson.h>

#include "db/store.h"

#define SBM_BOOT_TIMEOUT_MS	180000	/* cold boot to agent ready (TCG is slow) */
#define SBM_INIT_TIMEOUT_MS	30000
#define SBM_ADOPT_TIMEOUT_MS	60000	/* restart: QMP, console, agent /health of a live VM */
#define SBM_FREEZE_TIMEOUT_MS	10000	/* the guest freezing its volumes before a delete or suspend */
#define SBM_STOP_GRACE_MS	2000
#define SBM_CONSOLE_TAIL	4096	/* console bytes quoted when a guest dies */
#define SBM_VCPUS_MAX		16
#define SBM_MEMORY_MB_MIN	128
#define SBM_MEMORY_MB_MAX	65536
#define SBM_TIMEOUT_S_MAX	(30L * 86400)
#define SBM_ENV_MAX		256
#define SBM_METADATA_MAX	64
#define SBM_ALLOW_MAX		256
#define SBM_DISK_MB_MAX		(1 << 24)	/* 16 TiB; the operator's max_disk_mb is lower */

#define SBM_ID_LEN		20	/* lowercase alphanumerics, like E2B ids */

struct sbm;
struct sandbox;

/*
 * Lifecycle states. The store keeps their names (sb_state_names), so the
 * order here is free to change; the names are the API's and the schema's.
 */
enum sb_state {
	SB_CREATING, SB_RUNNING, SB_PAUSED, SB_SUSPENDING, SB_SUSPENDED, SB_RESUMING,
	SB_DELETING, SB_FAILED,
	SB_POOLED,	/* a warm pool member or base builder: hidden (sbm_pool.h) */
	SB_NSTATES
};
/* The names, indexed by enum sb_state and NULL-terminated (the API's state filter). */
extern const char *const sb_state_names[SB_NSTATES + 1];
const char *sb_state_name(enum sb_state s);
/* The state of a name, or -1 for a name that is none. */
int sb_state_parse(const char *name);
struct agent_client;
struct config;

/* Ends an operation: error NULL on success, else status is the HTTP status to report. */
typedef void (*sb_done_cb)(struct sandbox *sb, const char *error, int status, void *arg);

struct sb_spec {
	const char	*project;
	const char	*template_name;
	unsigned	 vcpus;
	unsigned	 memory_mb;
	unsigned	 disk_mb;	/* 0: the template image's size */
	json_t		*env;		/* borrowed */
	json_t		*metadata;	/* borrowed */
	json_t		*network;	/* borrowed, validated {mode, allow} */
	int64_t		 timeout_s;
	int64_t		 idle_timeout_s;
	int		 auto_pause;
	int		 auto_resume;	/* envd traffic resumes it when stopped (E2B's autoResume) */
	int		 private_traffic;	/* give it a traffic token (E2B allowPublicTraffic false) */
	/*
	 * A named snapshot (its name or id in the project) to restore instead
	 * of booting the template: its shape, template, env and network are
	 * the defaults. A template name that names no template but a snapshot
	 * is the same (E2B's Sandbox.create(snapshotId) sends it as templateID).
	 */
	const char	*snapshot;
	int		 vcpus_given, memory_given;	/* asked for: must match a snapshot's */
	/*
	 * Internal, never from a client: a template build's VM boots this image
	 * (the build's current rootfs) instead of the template's, cold and never
	 * from a pool or base (api_tbuild.c). template_name is the template
	 * being built, so it cannot be deleted meanwhile.
	 */
	const char	*rootfs;
	json_t		*volumes;	/* borrowed, sbm_volumes_check'ed; NULL: none */
	/*
	 * Internal: the fallback of a claim whose volumes failed boots cold
	 * (sbm_pool.c): no pool, spare or base, which would fill slots again.
	 */
	int		 cold_only;
};
/* The disk image of a sandbox with a VM (its own reflink), or NULL. */
const char *sb_disk_path(const struct sandbox *sb);

struct sbm *sbm_new(struct event_base *base, struct store *st, const struct config *cfg,
    char **cause);
/* Lifecycle events go to this sink (the API: store + live subscribers); it steals data. */
typedef void (*sbm_event_fn)(void *arg, const char *sandbox, const char *project,
    const char *type, json_t *data);
void sbm_set_events(struct sbm *m, sbm_event_fn fn, void *arg);
const char *sbm_accel_name(struct sbm *m);
/* What the sandboxes hold (VMs with their vCPUs and memory, pool members included). */
struct sbm_usage {
	unsigned	 sandboxes;	/* not counting pool members */
	unsigned	 vcpus;
	uint64_t	 memory_mb;
	unsigned	 pool_ready;
};
void sbm_usage(struct sbm *m, struct sbm_usage *u);
/* The guest memory the host's VMs may hold together (max_memory_mb, resolved). */
uint64_t sbm_memory_cap_mb(const struct sbm *m);
/*
 * Room for mb more MiB of guest memory beside what the host's VMs hold
 * and what creates and resumes in flight will: 0, else -1 with 503 and a
 * cause naming the numbers. Memory is never overcommitted: a pool claim
 * takes a member's memory, so it needs no room.
 */
int sbm_memory_admit(struct sbm *m, uint64_t mb, int *status, char **cause);
/* The snapshot ABI: QEMU build, machine, CPU model, accelerator, kernel (a new object). */
json_t *sbm_abi(struct sbm *m);
/* The worker this manager is (its sandboxes' store rows carry it): "" in direct mode. */
const char *sbm_worker_name(const struct sbm *m);
/* Load the store and reconcile it with what is on this host. */
int sbm_recover(struct sbm *m, char **cause);
/*
 * Graceful shutdown: suspend every running or paused sandbox (snapshot to
 * disk) so it survives the restart, then call done. Sandboxes still busy
 * after deadline_ms are left to sbm_free.
 */
void sbm_shutdown(struct sbm *m, int deadline_ms, void (*done)(void *), void *arg);
/*
 * Drain (a cluster worker leaving, docs/cluster.md): creates are refused
 * with 503 from now on and every running or paused sandbox is suspended to
 * disk, as at shutdown, but the manager keeps serving what is left (lists,
 * resumes elsewhere, deletes). A shutdown while it runs waits for it.
 */
void sbm_drain(struct sbm *m, int deadline_ms);
int sbm_is_draining(const struct sbm *m);
/* Stop every remaining VM; sandboxes stay in the store. */
void sbm_free(struct sbm *m);
/* Sandboxes in state s, or in any state for s = -1. */
int sbm_count(struct sbm *m, int s);
/* Running sandboxes whose guest agent is unhealthy. */
int sbm_count_unhealthy(struct sbm *m);
int sbm_live_vms(struct sbm *m);

/* Validates the spec (status 400/422 with a message) and starts the create. */
struct sandbox *sbm_create(struct sbm *m, const struct sb_spec *spec, sb_done_cb done,
    void *arg, int *status, char **cause);
/* A sandbox of project (NULL = any) by id, or NULL. */
struct sandbox *sbm_find(struct sbm *m, const char *id, const char *project);
/* The sandbox whose envd access token is token (compared in constant time), or NULL. */
struct sandbox *sbm_find_token(struct sbm *m, const char *token);
/* Sandboxes matching a filter, in id order; returns a json array of sandbox objects. */
json_t *sbm_list(struct sbm *m, const char *project, const char *states, json_t *metadata,
    const char *after, int limit, char **next);

/* SB_OP_RECOVER: the health policy's fail or restart of an unhealthy sandbox (internal). */
/* SB_OP_FILL, _BASE, _CLAIM, _SPARE: the warm pool's (sbm_pool.c, sbm_spare.c, internal). */
/* SB_OP_FORK, SB_OP_SNAPSHOT: the capture of sbm_fork and sbm_snap_create (internal). */
enum sb_op_kind { SB_OP_CREATE, SB_OP_PAUSE, SB_OP_RESUME, SB_OP_SUSPEND, SB_OP_DELETE,
	SB_OP_ADOPT, SB_OP_RECOVER, SB_OP_FILL, SB_OP_BASE, SB_OP_CLAIM, SB_OP_FORK,
	SB_OP_SNAPSHOT, SB_OP_SPARE };
/* Queue an operation; done runs when it completes (or is refused: 409 + state). */
void sb_enqueue(struct sandbox *sb, enum sb_op_kind kind, sb_done_cb done, void *arg);

/*
 * Change timeouts and metadata (validated by the caller); persisted. A new
 * timeout_s is counted from now, or from the next resume of a stopped one.
 */
int sb_patch(struct sandbox *sb, int64_t timeout_s, int64_t idle_timeout_s, int auto_pause,
    json_t *metadata, char **cause);
/*
 * Lifetime: timeout_s is running time (sbm_lifetime.h). Stopped time
 * (paused, suspended) is not counted; a sandbox stopped by its timeout
 * (auto_pause) gets timeout_s afresh when it runs again. sb_extend: the
 * end becomes now + timeout_s if that is later (E2B's connect), persisted.
 */
void sb_extend(struct sandbox *sb, int64_t timeout_s);
int sb_auto_resume(const struct sandbox *sb);

/*
 * Replace the network spec (validated by the caller) of a sandbox and push
 * the new policy to the gateway live. The mode cannot change between none
 * and the others (the NIC exists from boot or not): -1 with a 409-worthy
 * cause. Else 0, and done(arg, NULL) once the gateway has the policy and
 * the record is saved (at once without a gateway), or done(arg, cause)
 * when the gateway did not take it (the record keeps the old spec). The
 * push is asynchronous: the daemon's loop never waits on the gateway.
 */
int sb_set_network(struct sandbox *sb, json_t *network, void (*done)(void *, const char *),
    void *arg, char **cause);
/* The cause done gets when the daemon exits first: release, do not reply. */
#define SB_SHUTDOWN_CAUSE	"airlockd is shutting down"

/* After sbm_recover: make the gateway serve exactly the live networked sandboxes. */
int sbm_egress_reconcile(struct sbm *m, char **cause);
/* Secrets of scope ("global", "project", "sandbox") changed: re-push affected policies. */
void sbm_secrets_changed(struct sbm *m, const char *scope, const char *scope_id);
/* Gateway counters ({sandboxes:{id:{...}}, rss_kb}) for one sandbox or all. */
json_t *sbm_egress_info(struct sbm *m, const char *id, char **cause);
/* The gateway's counters of a networked sandbox (new reference), or NULL. */
json_t *sb_egress_counters(struct sandbox *sb);
/* Graceful exit: stop the gateway too when nothing is attached any more. */
void sbm_egress_stop(struct sbm *m);

/*
 * Warm pools (sbm_pool.c): per template, restored and paused members of
 * one shape, and spare VMMs for its base (sbm_spare.c). GET /v1/pools:
 * every pool with its counters; set: target size (0: drain), spares (-1:
 * keep) and optionally the shape (vcpus, memory_mb 0: keep).
 */
json_t *sbm_pools_json(struct sbm *m);
int sbm_pool_set(struct sbm *m, const char *template_name, int size, int spares,
    unsigned vcpus, unsigned memory_mb, int nic, char **cause);
/* Prometheus text for pools, bases and create tiers. */
struct evbuffer;
void sbm_pool_metrics(struct sbm *m, struct evbuffer *out);

/*
 * Fork (sbm_fork.c): the source, running or paused, is stopped only while
 * its device state is streamed and its RAM file and disk are reflinked
 * into one snapshot (the same vm_snapshot a suspend makes), then it
 * continues. count children restore from that one capture: each maps its
 * own reflink of the captured RAM (copy-on-write extents: a write by
 * anyone is private to the writer) and disk, gets its own id, access
 * token, hostname, machine-id, clock and entropy through /init, and its
 * own island with network (NULL: the source's; its mode must keep the
 * source's NIC or its absence) and metadata (NULL: the source's). The
 * capture is removed once the last child has restored from it.
 * Validation (count, state, capacity, memory) fails at once: -1, *status
 * 400/409/429 and a cause naming the field. Else done runs once, when
 * every child is running or failed.
 */
#define SBM_FORK_MAX	16
struct sb_fork_result {
	const char	 *source;	/* the source's id */
	const char	 *error;	/* the capture failed: no children */
	int		  error_status;
	double		  paused_ms;	/* the source stopped: stop .. cont answered */
	double		  capture_ms;	/* the fork's op start .. its capture committed */
	int		  count;
	struct sandbox	**kids;		/* [count], NULL where that child failed */
	char		**errors;	/* [count], the cause where it failed */
	int		 *statuses;
};
typedef void (*sb_fork_cb)(const struct sb_fork_result *r, void *arg);
int sbm_fork(struct sbm *m, struct sandbox *src, int count, json_t *network, json_t *metadata,
    int64_t timeout_s, sb_fork_cb done, void *arg, int *status, char **cause);

/*
 * Named snapshots (sbm_snap.c): the source's memory and disk captured the
 * same way as a fork's, kept in <data>/named/<id> with a store row, so
 * they survive restarts. Creates restore from them (sb_spec.snapshot).
 * A snapshot is in use while a sandbox made from it exists: delete is
 * refused (409). done gets the row (and the source's pause) or an error.
 */
typedef void (*sb_snap_cb)(const struct store_snap *sn, double paused_ms, const char *error,
    int status, void *arg);
int sbm_snap_create(struct sbm *m, struct sandbox *src, const char *name, sb_snap_cb done,
    void *arg, int *status, char **cause);
/* The project's snapshots (NULL: all), as a JSON array; NULL and a cause on a store error. */
json_t *sbm_snap_list(struct sbm *m, const char *project, const char *source, char **cause);
/* Delete by name or id: 0, or -1 with *status 404 (none), 409 (in use), 500. */
int sbm_snap_delete(struct sbm *m, const char *project, const char *name_or_id, int *status,
    char **cause);
json_t *sbm_snap_json(const struct store_snap *sn);
/* Restart: named/ dirs no row names are removed (a crash between rename and insert). */
void sbm_snap_recover(struct sbm *m);

json_t *sb_json(struct sandbox *sb);
const char *sb_id(const struct sandbox *sb);
enum sb_state sb_state(const struct sandbox *sb);
const char *sb_project(const struct sandbox *sb);
const char *sb_console_path(const struct sandbox *sb);
const char *sb_access_token(const struct sandbox *sb);
/* E2B's traffic access token, or NULL when its ports are public. */
const char *sb_traffic_token(const struct sandbox *sb);
json_t *sb_env(const struct sandbox *sb);
/*
 * Health of a running sandbox (a condition, not a state): unhealthy while
 * its guest agent does not answer the watcher's probes.
 */
enum sb_health { SB_HEALTHY, SB_UNHEALTHY };
const char *sb_health_name(enum sb_health h);
enum sb_health sb_health(const struct sandbox *sb);
/* The agent channel when the sandbox is running and healthy, else NULL. */
struct agent_client *sb_agent(struct sandbox *sb);
/* Why sb_agent gave NULL for a running sandbox (malloc'd, for a 503). */
char *sb_agent_error(const struct sandbox *sb);
/* VMM resource use for metrics (zeros when not running). */
void sb_host_stats(struct sandbox *sb, uint64_t *rss_bytes, double *cpu_seconds);

/* Activity for idle tracking: a request, or a stream that stays open. */
void sb_touch(struct sandbox *sb);
void sb_stream_begin(struct sandbox *sb);
void sb_stream_end(struct sandbox *sb);
/*
 * Admission (api_stream.c): open streams, and of those the exec starts
 * whose process the client still follows; the API refuses more than
 * max_streams_per_sandbox / max_execs_per_sandbox with a 429.
 */
void sb_exec_begin(struct sandbox *sb);
void sb_exec_end(struct sandbox *sb);
int sb_streams(const struct sandbox *sb);
int sb_execs(const struct sandbox *sb);
/*
 * The byte budget all of the sandbox's API streams share
 * (stream_rate_per_sandbox KiB/s, a second's worth of burst), for
 * envd_req_pace; valid as long as the caller holds a reference to sb.
 */
struct tbucket *sb_stream_budget(struct sandbox *sb);

/* Keep a sandbox struct alive across async work (it may be deleted meanwhile). */
void sb_ref(struct sandbox *sb);
void sb_unref(struct sandbox *sb);
int sb_gone(const struct sandbox *sb);

#endif
