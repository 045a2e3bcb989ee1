/*
 * The state store: one schema, two backends (SQLite embedded by default,
 * PostgreSQL for multi-node) behind one interface. Every lifecycle
 * transition is a compare-and-set on the sandbox's state inside a
 * transaction, so two writers cannot both move a sandbox.
 */
#ifndef AIRLOCK_STORE_H
#define AIRLOCK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define STORE_ID_MAX		64
#define STORE_STATE_MAX		16
#define STORE_LIST_LIMIT_MAX	1000
#define STORE_LIST_LIMIT_DEFAULT 100	/* when a list asks for <= 0 or > MAX */

struct store;

struct store_sandbox {
	char		 id[STORE_ID_MAX];
	char		 project[STORE_ID_MAX];
	char		 template_name[STORE_ID_MAX];
	char		 state[STORE_STATE_MAX];
	unsigned	 vcpus;
	unsigned	 memory_mb;
	json_t		*env;		/* object, owned */
	json_t		*metadata;	/* object, owned */
	json_t		*network;	/* object, owned */
	int64_t		 timeout_s;	/* lifetime; 0 = none */
	int64_t		 idle_timeout_s;
	int		 auto_pause;	/* at lifetime end: suspend instead of delete */
	int		 auto_resume;	/* E2B autoResume: envd traffic resumes it when stopped */
	int64_t		 created_at;	/* unix ms */
	int64_t		 updated_at;
	int64_t		 expires_at;	/* 0 = never */
	/*
	 * When it stopped running (paused or suspended), 0 while it runs:
	 * stopped time is not counted against timeout_s (sbm_lifetime.h).
	 */
	int64_t		 paused_at;
	int64_t		 last_active_at;
	char		*error;		/* last failure, NULL if none; owned */
	char		*access_token;	/* envd access token; owned */
	/*
	 * E2B's traffic access token (allowPublicTraffic false): envd-routed
	 * traffic to any port but envd's must carry it. NULL = public. Owned.
	 */
	char		*traffic_token;
	char		*snapshot;	/* snapshot id while suspended; owned */
	int64_t		 generation;	/* bumped by every update */
	/*
	 * Where its memory came from, NULL for a template: "fork:<source id>"
	 * or "snapshot:<snapshot id>" (a named snapshot is in use while a
	 * sandbox names it). Owned.
	 */
	char		*origin;
	/* The worker that runs it (its name, issue 16); "" in direct mode. */
	char		 worker[STORE_ID_MAX];
};

struct store_filter {
	const char	*project;	/* NULL: any */
	const char	*states;	/* comma list, NULL: any */
	json_t		*metadata;	/* all key=value must match; borrowed */
	const char	*after;		/* pagination cursor: id strictly greater */
	const char	*worker;	/* NULL: any; "" : direct mode's */
	int		 limit;
};

/*
 * A worker (airlockd --role worker, or direct mode's one) as it registered
 * and last reported. Capacity and use are what placement reads; the ABI
 * says which snapshots it can restore; epoch fences a worker that was
 * declared gone (docs/architecture.md "Beyond one host").
 */
#define STORE_WORKER_ADDR_MAX	256
struct store_worker {
	char		 name[STORE_ID_MAX];
	char		 addr[STORE_WORKER_ADDR_MAX];	/* host:port the API replicas dial */
	json_t		*labels;	/* object of strings, owned */
	json_t		*abi;		/* object: qemu, machine, cpu, accel, kernel, agent; owned */
	json_t		*templates;	/* array of the template names it holds, owned */
	unsigned	 vcpus;		/* capacity */
	uint64_t	 memory_mb;
	unsigned	 used_vcpus;	/* what its sandboxes take */
	uint64_t	 used_memory_mb;
	unsigned	 sandboxes;
	unsigned	 pool_ready;	/* warm pool members ready to claim */
	char		 state[16];	/* "up" or "draining" */
	int64_t		 epoch;
	int64_t		 started_at;	/* unix ms */
	int64_t		 heartbeat_at;
};

struct store_key {
	char		 id[STORE_ID_MAX];
	char		 project[STORE_ID_MAX];
	char		 name[128];
	char		 prefix[16];	/* first characters of the key, for display */
	char		 role[16];	/* "admin" or "user" */
	int64_t		 created_at;
	int64_t		 last_used_at;
};

/*
 * A credential the egress gateway injects into matching requests. The store
 * never sees the plaintext: sealed is ciphertext (nonce+tag+data) made and
 * opened by the secrets layer above. Keyed by (scope, scope_id, name).
 */
struct store_secret {
	char		*scope;		/* "global" | "project" | "sandbox"; owned */
	char		*scope_id;	/* "" for global, else the project or sandbox id; owned */
	char		*name;		/* [A-Z_][A-Z0-9_]{0,63}, validated by the API; owned */
	uint8_t		*sealed;	/* ciphertext, opaque here; owned */
	size_t		 sealedlen;
	json_t		*hosts;		/* array of host patterns, owned; NULL stores [] */
	char		*header;	/* e.g. "Authorization"; NULL if none; owned */
	char		*format;	/* e.g. "Bearer {value}"; NULL if none; owned */
	int64_t		 created_at;	/* unix ms, set by the store */
	int64_t		 updated_at;
};

struct store_event {
	int64_t		 seq;
	int64_t		 at;
	char		 sandbox[STORE_ID_MAX];
	char		 project[STORE_ID_MAX];
	char		 type[32];
	json_t		*data;		/* owned */
};

/* "sqlite:/path/file.db" or "postgres://..." */
struct store *store_open(const char *url, char **cause);
void store_close(struct store *st);
int store_schema_version(struct store *st);

int store_sandbox_insert(struct store *st, const struct store_sandbox *sb, char **cause);
/* 1 found, 0 not found, -1 error. */
int store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out, char **cause);
/* The sandbox whose envd access token is token: 1 found, 0 not, -1 error. */
int store_sandbox_by_token(struct store *st, const char *token, struct store_sandbox *out,
    char **cause);
/*
 * Write sb back if the stored generation still equals sb->generation
 * (and bump it). Returns 1 on success, 0 on a lost race, -1 on error.
 */
int store_sandbox_update(struct store *st, struct store_sandbox *sb, char **cause);
int store_sandbox_delete(struct store *st, const char *id, char **cause);
/* Fills *out with n records (caller frees each with store_sandbox_clear, then the array). */
int store_sandbox_list(struct store *st, const struct store_filter *f,
    struct store_sandbox **out, size_t *n, char **cause);
void store_sandbox_clear(struct store_sandbox *sb);

int store_key_insert(struct store *st, const struct store_key *k, const char *hash, char **cause);
/* Look up by the sha256 of the presented key; 1 found, 0 not, -1 error. Touches last_used_at. */
int store_key_find(struct store *st, const char *hash, struct store_key *out, char **cause);
int store_key_list(struct store *st, const char *project, struct store_key **out, size_t *n,
    char **cause);
/* 1 deleted, 0 not found, -1 error. */
int store_key_delete(struct store *st, const char *id, char **cause);
int store_key_count(struct store *st, char **cause);

/* Steals data (may be NULL). Returns the new sequence number or -1. */
int64_t store_event_append(struct store *st, const char *sandbox, const char *project,
    const char *type, json_t *data, char **cause);
/* Events with seq > after (for a sandbox if not NULL), oldest first, at most limit. */
int store_event_list(struct store *st, const char *sandbox, int64_t after, int limit,
    struct store_event **out, size_t *n, char **cause);
void store_event_clear(struct store_event *ev);

/*
 * Insert or replace the secret at (scope, scope_id, name). The store stamps
 * the times: created_at on first insert (kept by later puts), updated_at on
 * every put; the ones in sec are ignored. 0 ok, -1 error.
 */
int store_secret_put(struct store *st, const struct store_secret *sec, char **cause);
/* 1 found (caller clears *out), 0 not found, -1 error. */
int store_secret_get(struct store *st, const char *scope, const char *scope_id,
    const char *name, struct store_secret *out, char **cause);
/*
 * Secrets of a scope (NULL: any) and scope id (NULL: any), ordered by scope,
 * scope_id, name. Caller clears each with store_secret_clear, then frees the array.
 */
int store_secret_list(struct store *st, const char *scope, const char *scope_id,
    struct store_secret **out, size_t *n, char **cause);
/* 1 deleted, 0 not found, -1 error. */
int store_secret_delete(struct store *st, const char *scope, const char *scope_id,
    const char *name, char **cause);
/* Frees the members (the sealed bytes are wiped first) and zeroes *sec. */
void store_secret_clear(struct store_secret *sec);

/*
 * A named snapshot (sbm_snap.c): memory + disk of a sandbox at one instant,
 * in <data>/named/<id>, that new sandboxes are created from. Its name is
 * unique within its project; the shape, template, env and network are the
 * source's (a create from it restores that shape and device list).
 */
struct store_snap {
	char		 id[STORE_ID_MAX];
	char		 project[STORE_ID_MAX];
	char		 name[STORE_ID_MAX];
	char		 source[STORE_ID_MAX];	/* the sandbox it was taken of */
	char		 template_name[STORE_ID_MAX];
	unsigned	 vcpus;
	unsigned	 memory_mb;
	json_t		*env;		/* object, owned */
	json_t		*network;	/* object, owned */
	int64_t		 created_at;
	char		 worker[STORE_ID_MAX];	/* whose data dir holds it; "" in direct mode */
};

int store_snap_insert(struct store *st, const struct store_snap *sn, char **cause);
/* By project and name, or by id when name_or_id is one; 1 found, 0 not, -1 error. */
int store_snap_get(struct store *st, const char *project, const char *name_or_id,
    struct store_snap *out, char **cause);
/* A project's snapshots (NULL: every project's), oldest first. */
int store_snap_list(struct store *st, const char *project, struct store_snap **out, size_t *n,
    char **cause);
/* 1 deleted, 0 not found, -1 error. */
int store_snap_delete(struct store *st, const char *id, char **cause);
void store_snap_clear(struct store_snap *sn);

/*
 * Templates this store knows were built (the images themselves are files in
 * the data dir): sizes and the last time a sandbox was created from one.
 */
#define STORE_TEMPLATE_NAME_MAX	64
struct store_template {
	char		 name[STORE_TEMPLATE_NAME_MAX];
	int64_t		 image_bytes;
	int64_t		 allocated_bytes;
	int64_t		 built_at;
	int64_t		 last_used_at;	/* 0: never used */
};
/* Insert or replace (a rebuild keeps last_used_at). */
int store_template_put(struct store *st, const struct store_template *t, char **cause);
/* last_used_at = now; 0 when the template has no record (built elsewhere), 1 when touched. */
int store_template_touch(struct store *st, const char *name, int64_t now, char **cause);
/* All records in name order; *out malloc'd (free it). */
int store_template_list(struct store *st, struct store_template **out, size_t *n, char **cause);
/* 1 deleted, 0 none, -1 error. */
int store_template_delete(struct store *st, const char *name, char **cause);

/*
 * Volumes (docs/volumes.md): a name per project, a size; the file itself
 * is the sandbox manager's. Attachments tie a volume to a sandbox at a
 * guest path; one read-write attachment or any number of read-only ones.
 */
#define STORE_VOLUME_PATH_MAX	256

struct store_volume {
	char		 project[STORE_ID_MAX];
	char		 name[STORE_ID_MAX];
	int64_t		 size_mb;
	int64_t		 created_at;	/* unix ms, set by the store */
	int64_t		 last_used_at;	/* the last attach */
	int		 attached;	/* attachments now (list and get) */
	char		 worker[STORE_ID_MAX];	/* whose data dir holds it; "" in direct mode */
};

struct store_attachment {
	char		 volume[STORE_ID_MAX];
	char		 sandbox[STORE_ID_MAX];
	char		 path[STORE_VOLUME_PATH_MAX];
	int		 read_only;
};

/* 1 created, 0 the name exists in the project, -1 error. */
int store_volume_insert(struct store *st, const struct store_volume *v, char **cause);
/* 1 found, 0 not, -1 error. */
int store_volume_get(struct store *st, const char *project, const char *name,
    struct store_volume *out, char **cause);
/* project NULL: every project. Caller frees *out. */
int store_volume_list(struct store *st, const char *project, struct store_volume **out,
    size_t *n, char **cause);
/* 1 deleted, 0 not found, 2 attached (kept), -1 error. */
int store_volume_delete(struct store *st, const char *project, const char *name,
    char **cause);
/*
 * Attach a's volume (of project) to a's sandbox, in one transaction with the
 * check: 1 attached (last_used_at touched), 0 refused (the volume is
 * attached read-write, or read-only while a read-write one is asked for;
 * cause says which sandbox holds it), 2 no such volume, -1 error.
 */
int store_volume_attach(struct store *st, const char *project,
    const struct store_attachment *a, char **cause);
/* Drop every attachment of sandbox. 0 or -1. */
int store_volume_detach(struct store *st, const char *sandbox, char **cause);
/* The attachments of sandbox, in attach order of volume name. Caller frees *out. */
int store_volume_attachments(struct store *st, const char *sandbox,
    struct store_attachment **out, size_t *n, char **cause);

/*
 * A worker registers at start: its row is written (or replaced) with
 * epoch one more than before, which w->epoch says afterwards.
 */
int store_worker_register(struct store *st, struct store_worker *w, char **cause);
/*
 * Its heartbeat: capacity, use, state and heartbeat_at, under the epoch it
 * registered with. 1: written; 0: fenced (another registration of that name
 * moved the epoch: this worker must stop serving); -1: error.
 */
int store_worker_heartbeat(struct store *st, const struct store_worker *w, char **cause);
/* 1 found, 0 not found, -1 error. */
int store_worker_get(struct store *st, const char *name, struct store_worker *out, char **cause);
/* Every worker, by name. */
int store_worker_list(struct store *st, struct store_worker **out, size_t *n, char **cause);
int store_worker_delete(struct store *st, const char *name, char **cause);
void store_worker_clear(struct store_worker *w);

/* A project's quota (0: no limit on that one) and what it holds now. */
struct store_quota {
	char		 project[STORE_ID_MAX];
	unsigned	 max_sandboxes, max_vcpus;
	uint64_t	 max_memory_mb;
	int64_t		 updated_at;
};
struct store_usage {
	unsigned	 sandboxes, vcpus;
	uint64_t	 memory_mb;
};
/* The states that hold a host's resources: what a quota counts. */
#define STORE_LIVE_STATES	"creating,running,paused,suspending,resuming"

int store_quota_put(struct store *st, const struct store_quota *q, char **cause);
/* 1 found, 0 none (no limit), -1 error. */
int store_quota_get(struct store *st, const char *project, struct store_quota *out, char **cause);
int store_quota_delete(struct store *st, const char *project, char **cause);
/* What the project's live sandboxes hold, on every worker sharing the store. */
int store_usage(struct store *st, const char *project, struct store_usage *out, char **cause);
/*
 * Serialize admissions of one project across every process sharing the
 * store, from the quota check to the row that uses it: PostgreSQL takes a
 * session advisory lock keyed by the project; SQLite has one writer and
 * the caller's loop, so nothing to do. Every lock is followed by an unlock.
 */
int store_project_lock(struct store *st, const char *project, char **cause);
void store_project_unlock(struct store *st, const char *project);

int64_t store_now_ms(void);

#endif
