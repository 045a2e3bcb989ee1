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
};
const size_t store_nmigrations = sizeof(store_migrations) / sizeof(store_migrations[0]);
