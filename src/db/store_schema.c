/*
 * Schema migrations. Append only: a released migration never changes; a new
 * version adds a new entry. Times are unix milliseconds; JSON columns hold
 * compact JSON text. One list for both backends: sql runs on both, and
 * sql_pg replaces it on PostgreSQL only where no portable spelling exists.
 */
#include <stddef.h>

#include "db/store_impl.h"

/* Migration 1 up to the events' key column, then after it. */
#define M1_HEAD \
	"CREATE TABLE sandboxes (" \
	" id TEXT PRIMARY KEY," \
	" project TEXT NOT NULL," \
	" template TEXT NOT NULL," \
	" state TEXT NOT NULL," \
	" vcpus INTEGER NOT NULL," \
	" memory_mb INTEGER NOT NULL," \
	" env TEXT NOT NULL," \
	" metadata TEXT NOT NULL," \
	" network TEXT NOT NULL," \
	" timeout_s BIGINT NOT NULL," \
	" idle_timeout_s BIGINT NOT NULL," \
	" auto_pause INTEGER NOT NULL," \
	" created_at BIGINT NOT NULL," \
	" updated_at BIGINT NOT NULL," \
	" expires_at BIGINT NOT NULL," \
	" last_active_at BIGINT NOT NULL," \
	" error TEXT," \
	" access_token TEXT," \
	" snapshot TEXT," \
	" generation BIGINT NOT NULL);" \
	"CREATE INDEX sandboxes_project ON sandboxes (project, id);" \
	"CREATE INDEX sandboxes_state ON sandboxes (state);" \
	"CREATE TABLE api_keys (" \
	" id TEXT PRIMARY KEY," \
	" project TEXT NOT NULL," \
	" name TEXT NOT NULL," \
	" prefix TEXT NOT NULL," \
	" role TEXT NOT NULL," \
	" hash TEXT NOT NULL UNIQUE," \
	" created_at BIGINT NOT NULL," \
	" last_used_at BIGINT NOT NULL);" \
	"CREATE TABLE events ("
#define M1_TAIL \
	" at BIGINT NOT NULL," \
	" sandbox TEXT NOT NULL," \
	" project TEXT NOT NULL," \
	" type TEXT NOT NULL," \
	" data TEXT NOT NULL);" \
	"CREATE INDEX events_sandbox ON events (sandbox, seq);"

const struct store_migration store_migrations[] = {
	/*
	 * Event ids only grow, never reused: AUTOINCREMENT in SQLite, a
	 * sequence in PostgreSQL (neither accepts the other's spelling).
	 */
	{ 1, "initial",
	  M1_HEAD " seq INTEGER PRIMARY KEY AUTOINCREMENT," M1_TAIL,
	  M1_HEAD " seq BIGSERIAL PRIMARY KEY," M1_TAIL },
	/*
	 * BYTEA: PostgreSQL's binary type. SQLite takes any type name; this one
	 * gets NUMERIC affinity, which converts only text, so blobs stay as is.
	 */
	{ 2, "secrets",
	  "CREATE TABLE secrets ("
	  " scope TEXT NOT NULL CHECK (scope IN ('global', 'project', 'sandbox')),"
	  " scope_id TEXT NOT NULL,"
	  " name TEXT NOT NULL,"
	  " sealed BYTEA NOT NULL,"
	  " hosts TEXT NOT NULL,"
	  " header TEXT,"
	  " format TEXT,"
	  " created_at BIGINT NOT NULL,"
	  " updated_at BIGINT NOT NULL,"
	  " PRIMARY KEY (scope, scope_id, name));", NULL },
	/*
	 * Named snapshots (fork and snapshot work, issue 13), and which
	 * snapshot or source a sandbox was made from: a snapshot is in use,
	 * and cannot be deleted, while a sandbox names it.
	 */
	{ 3, "snapshots",
	  "CREATE TABLE snapshots ("
	  " id TEXT PRIMARY KEY,"
	  " project TEXT NOT NULL,"
	  " name TEXT NOT NULL,"
	  " source TEXT NOT NULL,"
	  " template TEXT NOT NULL,"
	  " vcpus INTEGER NOT NULL,"
	  " memory_mb INTEGER NOT NULL,"
	  " env TEXT NOT NULL,"
	  " network TEXT NOT NULL,"
	  " created_at BIGINT NOT NULL,"
	  " UNIQUE (project, name));"
	  "ALTER TABLE sandboxes ADD COLUMN origin TEXT;", NULL },
	/* Built templates: sizes for listings, last use for operators (docs/templates.md). */
	{ 4, "templates",
	  "CREATE TABLE templates ("
	  " name TEXT PRIMARY KEY,"
	  " image_bytes BIGINT NOT NULL,"
	  " allocated_bytes BIGINT NOT NULL,"
	  " built_at BIGINT NOT NULL,"
	  " last_used_at BIGINT);", NULL },
	/*
	 * Volumes (docs/volumes.md) and who has them attached. The attachments
	 * are rows of their own, not a column of sandboxes: attach and detach
	 * are the only writers, and the read-write exclusivity is checked
	 * against them in the attach's transaction.
	 */
	{ 5, "volumes",
	  "CREATE TABLE volumes ("
	  " project TEXT NOT NULL,"
	  " name TEXT NOT NULL,"
	  " size_mb BIGINT NOT NULL,"
	  " created_at BIGINT NOT NULL,"
	  " last_used_at BIGINT NOT NULL,"
	  " PRIMARY KEY (project, name));"
	  "CREATE TABLE volume_attachments ("
	  " project TEXT NOT NULL,"
	  " volume TEXT NOT NULL,"
	  " sandbox TEXT NOT NULL,"
	  " path TEXT NOT NULL,"
	  " read_only INTEGER NOT NULL,"
	  " PRIMARY KEY (sandbox, volume));"
	  "CREATE INDEX volume_attachments_volume ON volume_attachments (project, volume);", NULL },
	/*
	 * Lifetime accounting and E2B's autoResume (issue 14 item 7): when a
	 * sandbox stopped running, so stopped time is not counted against its
	 * timeout across restarts, and whether envd traffic resumes it.
	 */
	{ 6, "lifecycle",
	  "ALTER TABLE sandboxes ADD COLUMN paused_at BIGINT NOT NULL DEFAULT 0;"
	  "ALTER TABLE sandboxes ADD COLUMN auto_resume INTEGER NOT NULL DEFAULT 0;", NULL },
	/* E2B's allowPublicTraffic false: the token its sandbox ports ask for (docs/e2b.md). */
	{ 7, "traffic_token",
	  "ALTER TABLE sandboxes ADD COLUMN traffic_token TEXT;", NULL },
	/*
	 * Beyond one host (issue 16): the workers that share this store, each
	 * with its address, capacity, use and heartbeat, and the worker that
	 * runs each sandbox ("" in direct mode). A worker's epoch grows at every
	 * registration: its writes carry the epoch they were made under, so a
	 * worker that was declared gone and comes back is fenced.
	 */
	{ 8, "workers",
	  "ALTER TABLE sandboxes ADD COLUMN worker TEXT NOT NULL DEFAULT '';"
	  "CREATE INDEX sandboxes_worker ON sandboxes (worker, state);"
	  "CREATE TABLE workers ("
	  " name TEXT PRIMARY KEY,"
	  " addr TEXT NOT NULL,"
	  " labels TEXT NOT NULL,"
	  " abi TEXT NOT NULL,"
	  " templates TEXT NOT NULL,"
	  " vcpus INTEGER NOT NULL,"
	  " memory_mb BIGINT NOT NULL,"
	  " used_vcpus INTEGER NOT NULL,"
	  " used_memory_mb BIGINT NOT NULL,"
	  " sandboxes INTEGER NOT NULL,"
	  " pool_ready INTEGER NOT NULL,"
	  " state TEXT NOT NULL,"
	  " epoch BIGINT NOT NULL,"
	  " started_at BIGINT NOT NULL,"
	  " heartbeat_at BIGINT NOT NULL);", NULL },
	/*
	 * Per-project quotas (issue 16 item 3): live sandboxes, their vCPUs
	 * and memory; 0 is no limit. A project without a row has none.
	 */
	{ 9, "quotas",
	  "CREATE TABLE quotas ("
	  " project TEXT PRIMARY KEY,"
	  " max_sandboxes INTEGER NOT NULL,"
	  " max_vcpus INTEGER NOT NULL,"
	  " max_memory_mb BIGINT NOT NULL,"
	  " updated_at BIGINT NOT NULL);"
	  "CREATE INDEX sandboxes_project_state ON sandboxes (project, state);", NULL },
	/*
	 * The worker whose data dir holds a named snapshot's or a volume's
	 * files ("" in direct mode): replicas send creates from the snapshot,
	 * creates that attach the volume, and their deletes there; only that
	 * worker restores, attaches or deletes them.
	 */
	{ 10, "snapshot and volume worker, token index",
	  "ALTER TABLE snapshots ADD COLUMN worker TEXT NOT NULL DEFAULT '';"
	  "ALTER TABLE volumes ADD COLUMN worker TEXT NOT NULL DEFAULT '';"
	  /* A replica finds an envd call's sandbox by its access token alone. */
	  "CREATE INDEX sandboxes_access_token ON sandboxes (access_token);", NULL },
};
const size_t store_nmigrations = sizeof(store_migrations) / sizeof(store_migrations[0]);
