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
};

struct sbm *sbm_new(struct event_base *base, struct store *st, const struct config *cfg,
    char **cause);
/* Lifecycle events go to this sink (the API: store + live subscribers); it steals data. */
typedef void (*sbm_event_fn)(void *arg, const char *sandbox, const char *project,
    const char *type, json_t *data);
void sbm_set_events(struct sbm *m, sbm_event_fn fn, void *arg);
const char *sbm_accel_name(struct sbm *m);
/* Load the store and reconcile it with what is on this host. */
int sbm_recover(struct sbm *m, char **cause);
/*
 * Graceful shutdown: suspend every running or paused sandbox (snapshot to
 * disk) so it survives the restart, then call done. Sandboxes still busy
 * after deadline_ms are left to sbm_free.
 */
void sbm_shutdown(struct sbm *m, int deadline_ms, void (*done)(void *), void *arg);
/* Stop every remaining VM; sandboxes stay in the store. */
void sbm_free(struct sbm *m);
int sbm_count(struct sbm *m, const char *state);
/* Running sandboxes whose guest agent is unhealthy. */
int sbm_count_unhealthy(struct sbm *m);
int sbm_live_vms(struct sbm *m);

/* Validates the spec (status 400/422 with a message) and starts the create. */
struct sandbox *sbm_create(struct sbm *m, const struct sb_spec *spec, sb_done_cb done,
    void *arg, int *status, char **cause);
/* A sandbox of project (NULL = any) by id, or NULL. */
struct sandbox *sbm_find(struct sbm *m, const char *id, const char *project);
/* Sandboxes matching a filter, in id order; returns a json array of sandbox objects. */
json_t *sbm_list(struct sbm *m, const char *project, const char *states, json_t *metadata,
    const char *after, int limit, char **next);

/* SB_OP_RECOVER: the health policy's fail or restart of an unhealthy sandbox (internal). */
enum sb_op_kind { SB_OP_CREATE, SB_OP_PAUSE, SB_OP_RESUME, SB_OP_SUSPEND, SB_OP_DELETE,
	SB_OP_ADOPT, SB_OP_RECOVER };
/* Queue an operation; done runs when it completes (or is refused: 409 + state). */
void sb_enqueue(struct sandbox *sb, enum sb_op_kind kind, sb_done_cb done, void *arg);

/* Change timeouts and metadata (validated by the caller); persisted. */
int sb_patch(struct sandbox *sb, int64_t timeout_s, int64_t idle_timeout_s, int auto_pause,
    json_t *metadata, char **cause);

/*
 * Replace the network spec (validated by the caller) of a sandbox and push
 * the new policy to the gateway live. The mode cannot change between none
 * and the others (the NIC exists from boot or not): 409-worthy cause.
 */
int sb_set_network(struct sandbox *sb, json_t *network, char **cause);

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

json_t *sb_json(struct sandbox *sb);
const char *sb_id(const struct sandbox *sb);
const char *sb_state(const struct sandbox *sb);
const char *sb_project(const struct sandbox *sb);
const char *sb_console_path(const struct sandbox *sb);
const char *sb_access_token(const struct sandbox *sb);
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

/* Keep a sandbox struct alive across async work (it may be deleted meanwhile). */
void sb_ref(struct sandbox *sb);
void sb_unref(struct sandbox *sb);
int sb_gone(const struct sandbox *sb);

#endif
