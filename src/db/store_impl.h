/* Backend interface behind store.h: each backend fills a store_ops table. */
#ifndef AIRLOCK_STORE_IMPL_H
#define AIRLOCK_STORE_IMPL_H

#include "db/store.h"

struct store_ops {
	const char *name;
	void (*close)(struct store *);
	int (*schema_version)(struct store *);
	int (*sandbox_insert)(struct store *, const struct store_sandbox *, char **);
	int (*sandbox_get)(struct store *, const char *, struct store_sandbox *, char **);
	int (*sandbox_update)(struct store *, struct store_sandbox *, char **);
	int (*sandbox_delete)(struct store *, const char *, char **);
	int (*sandbox_list)(struct store *, const struct store_filter *, struct store_sandbox **,
	    size_t *, char **);
	int (*key_insert)(struct store *, const struct store_key *, const char *, char **);
	int (*key_find)(struct store *, const char *, struct store_key *, char **);
	int (*key_list)(struct store *, const char *, struct store_key **, size_t *, char **);
	int (*key_delete)(struct store *, const char *, char **);
	int (*key_count)(struct store *, char **);
	int64_t (*event_append)(struct store *, const char *, const char *, const char *,
	    json_t *, char **);
	int (*event_list)(struct store *, const char *, int64_t, int, struct store_event **,
	    size_t *, char **);
	int (*secret_put)(struct store *, const struct store_secret *, char **);
	int (*secret_get)(struct store *, const char *, const char *, const char *,
	    struct store_secret *, char **);
	int (*secret_list)(struct store *, const char *, const char *, struct store_secret **,
	    size_t *, char **);
	int (*secret_delete)(struct store *, const char *, const char *, const char *, char **);
	int (*snap_insert)(struct store *, const struct store_snap *, char **);
	int (*snap_get)(struct store *, const char *, const char *, struct store_snap *, char **);
	int (*snap_list)(struct store *, const char *, struct store_snap **, size_t *, char **);
	int (*snap_delete)(struct store *, const char *, char **);
	int (*template_put)(struct store *, const struct store_template *, char **);
	int (*template_touch)(struct store *, const char *, int64_t, char **);
	int (*template_list)(struct store *, struct store_template **, size_t *, char **);
	int (*template_delete)(struct store *, const char *, char **);
	int (*volume_insert)(struct store *, const struct store_volume *, char **);
	int (*volume_get)(struct store *, const char *, const char *, struct store_volume *,
	    char **);
	int (*volume_list)(struct store *, const char *, struct store_volume **, size_t *,
	    char **);
	int (*volume_delete)(struct store *, const char *, const char *, char **);
	int (*volume_attach)(struct store *, const char *, const struct store_attachment *,
	    char **);
	int (*volume_detach)(struct store *, const char *, char **);
	int (*volume_attachments)(struct store *, const char *, struct store_attachment **,
	    size_t *, char **);
	int (*worker_register)(struct store *, struct store_worker *, char **);
	int (*worker_heartbeat)(struct store *, const struct store_worker *, char **);
	int (*worker_get)(struct store *, const char *, struct store_worker *, char **);
	int (*worker_list)(struct store *, struct store_worker **, size_t *, char **);
	int (*worker_delete)(struct store *, const char *, char **);
	int (*quota_put)(struct store *, const struct store_quota *, char **);
	int (*quota_get)(struct store *, const char *, struct store_quota *, char **);
	int (*quota_delete)(struct store *, const char *, char **);
	int (*usage)(struct store *, const char *, struct store_usage *, char **);
	int (*project_lock)(struct store *, const char *, char **);
	void (*project_unlock)(struct store *, const char *);
	int (*sandbox_by_token)(struct store *, const char *, struct store_sandbox *, char **);
};

struct store {
	const struct store_ops	*ops;
	void			*impl;
};

struct store *store_sqlite_open(const char *path, char **cause);
/* conninfo: a postgres:// or postgresql:// URL, or libpq keyword=value pairs. */
struct store *store_pg_open(const char *conninfo, char **cause);

/*
 * Shared by the backends so that both filter alike: does sb pass f's state
 * and metadata filters (project and cursor are the backend's WHERE clause)?
 */
int store_filter_match(const struct store_filter *f, const struct store_sandbox *sb);
/* A list's limit: 1..STORE_LIST_LIMIT_MAX, else the default. */
int store_limit(int limit);

/* Versioned schema migrations, shared by the backends (store_schema.c). */
struct store_migration {
	int		 version;
	const char	*name;
	const char	*sql;	/* portable SQL: both SQLite and PostgreSQL accept it */
	const char	*sql_pg; /* PostgreSQL's variant where none is portable, else NULL */
};
extern const struct store_migration store_migrations[];
extern const size_t store_nmigrations;

#endif
