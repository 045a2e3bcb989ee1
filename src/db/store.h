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
	int64_t		 created_at;	/* unix ms */
	int64_t		 updated_at;
	int64_t		 expires_at;	/* 0 = never */
	int64_t		 last_active_at;
	char		*error;		/* last failure, NULL if none; owned */
	char		*access_token;	/* envd access token; owned */
	char		*snapshot;	/* snapshot id while suspended; owned */
	int64_t		 generation;	/* bumped by every update */
};

struct store_filter {
	const char	*project;	/* NULL: any */
	const char	*states;	/* comma list, NULL: any */
	json_t		*metadata;	/* all key=value must match; borrowed */
	const char	*after;		/* pagination cursor: id strictly greater */
	int		 limit;
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

int64_t store_now_ms(void);

#endif
