/* SQLite backend: WAL, one connection owned by the daemon's event loop thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/log.h"
#include "common/util.h"
#include "db/store_impl.h"

#define SQLITE_BUSY_MS	5000

struct sq {
	sqlite3	*db;
};

static sqlite3 *
DB(struct store *st)
{
	return ((struct sq *)st->impl)->db;
}

static int
sq_fail(sqlite3 *db, char **cause, const char *what)
{
	cause_set(cause, "store: %s: %s", what, sqlite3_errmsg(db));
	return -1;
}

static int
sq_exec(sqlite3 *db, const char *sql, char **cause)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		cause_set(cause, "store: %s", err ? err : "exec failed");
		sqlite3_free(err);
		return -1;
	}
	return 0;
}

static sqlite3_stmt *
sq_prepare(sqlite3 *db, const char *sql, char **cause)
{
	sqlite3_stmt *s;

	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		sq_fail(db, cause, "prepare");
		return NULL;
	}
	return s;
}

static void
bind_text(sqlite3_stmt *s, int i, const char *v)
{
	if (v == NULL)
		sqlite3_bind_null(s, i);
	else
		sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
}

static void
bind_json(sqlite3_stmt *s, int i, json_t *v)
{
	char *t = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	sqlite3_bind_text(s, i, t != NULL ? t : xstrdup("{}"), -1, free);
}

static void
col_copy(sqlite3_stmt *s, int i, char *dst, size_t len)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

static char *
col_dup(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);

	return t ? xstrdup((const char *)t) : NULL;
}

static json_t *
col_json(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	json_t *j = t ? json_loads((const char *)t, 0, NULL) : NULL;

	return j ? j : json_object();
}

/* Fills one record from the statement's current row. */
typedef void (*sq_read_cb)(sqlite3_stmt *, void *);

/* How one table's rows become records, for sq_list. */
struct sq_record {
	size_t		  size;
	sq_read_cb	  read;
	void		(*clear)(void *);	/* NULL when a record owns no memory */
};

/* A query without parameters whose one row holds one integer; -1 on error. */
static int
sq_int(struct store *st, const char *sql, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), sql, cause);
	int v = -1;

	if (s == NULL)
		return -1;
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* Run a bound INSERT/UPDATE/DELETE to completion and finalize it: 0 or -1. */
static int
sq_done(struct store *st, sqlite3_stmt *s, const char *what, char **cause)
{
	int rc = sqlite3_step(s);

	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		return sq_fail(DB(st), cause, what);
	return 0;
}

/* Run a bound DELETE: 1 when it removed a row, 0 when there was none, -1 on error. */
static int
sq_delete(struct store *st, sqlite3_stmt *s, const char *what, char **cause)
{
	if (sq_done(st, s, what, cause) == -1)
		return -1;
	return sqlite3_changes(DB(st)) > 0 ? 1 : 0;
}

/* A bound query for at most one record: 1 found (read into out), 0 not found, -1 error. */
static int
sq_get(struct store *st, sqlite3_stmt *s, sq_read_cb read, void *out, const char *what,
    char **cause)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		read(s, out);
	sqlite3_finalize(s);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sq_fail(DB(st), cause, what);
}

/* A bound query for every matching record: *out is an array of *n records. */
static int
sq_list(struct store *st, sqlite3_stmt *s, const struct sq_record *rec, void **out, size_t *n,
    const char *what, char **cause)
{
	char *arr = NULL;
	size_t cnt = 0;
	int rc;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		arr = xreallocarray(arr, cnt + 1, rec->size);
		rec->read(s, arr + cnt++ * rec->size);
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		while (rec->clear != NULL && cnt > 0)
			rec->clear(arr + --cnt * rec->size);
		free(arr);
		return sq_fail(DB(st), cause, what);
	}
	*out = arr;
	*n = cnt;
	return 0;
}

static int
sq_schema_version(struct store *st)
{
	return sq_int(st, "SELECT COALESCE(MAX(version),0) FROM schema_migrations", NULL);
}

static int
sq_migrate(struct store *st, char **cause)
{
	sqlite3 *db = DB(st);
	size_t i;
	int have;

	if (sq_exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
	    " name TEXT NOT NULL, applied_at BIGINT NOT NULL)", cause) == -1)
		return -1;
	have = sq_schema_version(st);
	for (i = 0; i < store_nmigrations; i++) {
		const struct store_migration *m = &store_migrations[i];
		char *ins;

		if (m->version <= have)
			continue;
		if (sq_exec(db, "BEGIN IMMEDIATE", cause) == -1)
			return -1;
		xasprintf(&ins, "INSERT INTO schema_migrations VALUES (%d, '%s', %lld)", m->version,
		    m->name, (long long)store_now_ms());
		if (sq_exec(db, m->sql, cause) == -1 || sq_exec(db, ins, cause) == -1) {
			free(ins);
			sq_exec(db, "ROLLBACK", NULL);
			cause_wrap(cause, "migration %d (%s)", m->version, m->name);
			return -1;
		}
		free(ins);
		if (sq_exec(db, "COMMIT", cause) == -1)
			return -1;
		log_info("store: applied migration %d (%s)", m->version, m->name);
	}
	if (have > (int)store_migrations[store_nmigrations - 1].version) {
		cause_set(cause, "store: schema version %d is newer than this airlockd knows (%d)",
		    have, store_migrations[store_nmigrations - 1].version);
		return -1;
	}
	return 0;
}

static void
sq_close(struct store *st)
{
	struct sq *q = st->impl;

	sqlite3_close(q->db);
	free(q);
	free(st);
}

#define SB_COLS "id, project, template, state, vcpus, memory_mb, env, metadata, network," \
	" timeout_s, idle_timeout_s, auto_pause, created_at, updated_at, expires_at," \
	" last_active_at, error, access_token, snapshot, generation"

static void
sb_bind(sqlite3_stmt *s, const struct store_sandbox *sb)
{
	bind_text(s, 1, sb->id);
	bind_text(s, 2, sb->project);
	bind_text(s, 3, sb->template_name);
	bind_text(s, 4, sb->state);
	sqlite3_bind_int(s, 5, (int)sb->vcpus);
	sqlite3_bind_int(s, 6, (int)sb->memory_mb);
	bind_json(s, 7, sb->env);
	bind_json(s, 8, sb->metadata);
	bind_json(s, 9, sb->network);
	sqlite3_bind_int64(s, 10, sb->timeout_s);
	sqlite3_bind_int64(s, 11, sb->idle_timeout_s);
	sqlite3_bind_int(s, 12, sb->auto_pause);
	sqlite3_bind_int64(s, 13, sb->created_at);
	sqlite3_bind_int64(s, 14, sb->updated_at);
	sqlite3_bind_int64(s, 15, sb->expires_at);
	sqlite3_bind_int64(s, 16, sb->last_active_at);
	bind_text(s, 17, sb->error);
	bind_text(s, 18, sb->access_token);
	bind_text(s, 19, sb->snapshot);
	sqlite3_bind_int64(s, 20, sb->generation);
}

static void
sb_read(sqlite3_stmt *s, void *rec)
{
	struct store_sandbox *sb = rec;

	memset(sb, 0, sizeof(*sb));
	col_copy(s, 0, sb->id, sizeof(sb->id));
	col_copy(s, 1, sb->project, sizeof(sb->project));
	col_copy(s, 2, sb->template_name, sizeof(sb->template_name));
	col_copy(s, 3, sb->state, sizeof(sb->state));
	sb->vcpus = (unsigned)sqlite3_column_int(s, 4);
	sb->memory_mb = (unsigned)sqlite3_column_int(s, 5);
	sb->env = col_json(s, 6);
	sb->metadata = col_json(s, 7);
	sb->network = col_json(s, 8);
	sb->timeout_s = sqlite3_column_int64(s, 9);
	sb->idle_timeout_s = sqlite3_column_int64(s, 10);
	sb->auto_pause = sqlite3_column_int(s, 11);
	sb->created_at = sqlite3_column_int64(s, 12);
	sb->updated_at = sqlite3_column_int64(s, 13);
	sb->expires_at = sqlite3_column_int64(s, 14);
	sb->last_active_at = sqlite3_column_int64(s, 15);
	sb->error = col_dup(s, 16);
	sb->access_token = col_dup(s, 17);
	sb->snapshot = col_dup(s, 18);
	sb->generation = sqlite3_column_int64(s, 19);
}

static int
sq_sandbox_insert(struct store *st, const struct store_sandbox *sb, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO sandboxes (" SB_COLS ") VALUES"
	    " (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", cause);

	if (s == NULL)
		return -1;
	sb_bind(s, sb);
	return sq_done(st, s, "insert sandbox", cause);
}

static int
sq_sandbox_get(struct store *st, const char *id, struct store_sandbox *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " SB_COLS " FROM sandboxes WHERE id = ?",
	    cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, id);
	return sq_get(st, s, sb_read, out, "get sandbox", cause);
}

static int
sq_sandbox_update(struct store *st, struct store_sandbox *sb, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "UPDATE sandboxes SET id=?1, project=?2, template=?3,"
	    " state=?4, vcpus=?5, memory_mb=?6, env=?7, metadata=?8, network=?9, timeout_s=?10,"
	    " idle_timeout_s=?11, auto_pause=?12, created_at=?13, updated_at=?14, expires_at=?15,"
	    " last_active_at=?16, error=?17, access_token=?18, snapshot=?19, generation=?20 + 1"
	    " WHERE id=?1 AND generation=?20", cause);

	if (s == NULL)
		return -1;
	sb->updated_at = store_now_ms();
	sb_bind(s, sb);
	if (sq_done(st, s, "update sandbox", cause) == -1)
		return -1;
	if (sqlite3_changes(DB(st)) == 0)
		return 0;
	sb->generation++;
	return 1;
}

static int
sq_sandbox_delete(struct store *st, const char *id, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM sandboxes WHERE id = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, id);
	return sq_delete(st, s, "delete sandbox", cause);
}

static int
sq_sandbox_list(struct store *st, const struct store_filter *f, struct store_sandbox **out,
    size_t *n, char **cause)
{
	sqlite3_stmt *s;
	struct store_sandbox *arr = NULL;
	size_t cnt = 0;
	int limit = store_limit(f->limit), rc;

	s = sq_prepare(DB(st), "SELECT " SB_COLS " FROM sandboxes WHERE (?1 IS NULL OR project = ?1)"
	    " AND id > ?2 ORDER BY id", cause);
	if (s == NULL)
		return -1;
	bind_text(s, 1, f->project);
	bind_text(s, 2, f->after ? f->after : "");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && cnt < (size_t)limit) {
		struct store_sandbox sb;

		sb_read(s, &sb);
		if (!store_filter_match(f, &sb)) {
			store_sandbox_clear(&sb);
			continue;
		}
		arr = xreallocarray(arr, cnt + 1, sizeof(*arr));
		arr[cnt++] = sb;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		while (cnt > 0)
			store_sandbox_clear(&arr[--cnt]);
		free(arr);
		return sq_fail(DB(st), cause, "list sandboxes");
	}
	*out = arr;
	*n = cnt;
	return 0;
}

#define KEY_COLS "id, project, name, prefix, role, created_at, last_used_at"

static void
key_read(sqlite3_stmt *s, void *rec)
{
	struct store_key *k = rec;

	memset(k, 0, sizeof(*k));
	col_copy(s, 0, k->id, sizeof(k->id));
	col_copy(s, 1, k->project, sizeof(k->project));
	col_copy(s, 2, k->name, sizeof(k->name));
	col_copy(s, 3, k->prefix, sizeof(k->prefix));
	col_copy(s, 4, k->role, sizeof(k->role));
	k->created_at = sqlite3_column_int64(s, 5);
	k->last_used_at = sqlite3_column_int64(s, 6);
}

static int
sq_key_insert(struct store *st, const struct store_key *k, const char *hash, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO api_keys (" KEY_COLS ", hash) VALUES"
	    " (?,?,?,?,?,?,?,?)", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, k->id);
	bind_text(s, 2, k->project);
	bind_text(s, 3, k->name);
	bind_text(s, 4, k->prefix);
	bind_text(s, 5, k->role);
	sqlite3_bind_int64(s, 6, k->created_at);
	sqlite3_bind_int64(s, 7, k->last_used_at);
	bind_text(s, 8, hash);
	return sq_done(st, s, "insert key", cause);
}

static int
sq_key_find(struct store *st, const char *hash, struct store_key *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " KEY_COLS " FROM api_keys WHERE hash = ?",
	    cause);
	int found;

	if (s == NULL)
		return -1;
	bind_text(s, 1, hash);
	if ((found = sq_get(st, s, key_read, out, "find key", cause)) != 1)
		return found;
	/* Coarse (one write a minute per key) so auth does not write on every request. */
	if (store_now_ms() - out->last_used_at > 60000) {
		s = sq_prepare(DB(st), "UPDATE api_keys SET last_used_at = ? WHERE id = ?", NULL);
		if (s != NULL) {
			sqlite3_bind_int64(s, 1, store_now_ms());
			bind_text(s, 2, out->id);
			sqlite3_step(s);
			sqlite3_finalize(s);
		}
	}
	return 1;
}

static int
sq_key_list(struct store *st, const char *project, struct store_key **out, size_t *n,
    char **cause)
{
	static const struct sq_record key_record = { sizeof(**out), key_read, NULL };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " KEY_COLS " FROM api_keys"
	    " WHERE (?1 IS NULL OR project = ?1) ORDER BY created_at, id", cause);
	void *arr;

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	if (sq_list(st, s, &key_record, &arr, n, "list keys", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
sq_key_delete(struct store *st, const char *id, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM api_keys WHERE id = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, id);
	return sq_delete(st, s, "delete key", cause);
}

static int
sq_key_count(struct store *st, char **cause)
{
	return sq_int(st, "SELECT COUNT(*) FROM api_keys", cause);
}

static int64_t
sq_event_append(struct store *st, const char *sandbox, const char *project, const char *type,
    json_t *data, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO events (at, sandbox, project, type, data)"
	    " VALUES (?,?,?,?,?)", cause);

	if (s == NULL) {
		json_decref(data);
		return -1;
	}
	sqlite3_bind_int64(s, 1, store_now_ms());
	bind_text(s, 2, sandbox ? sandbox : "");
	bind_text(s, 3, project ? project : "");
	bind_text(s, 4, type);
	bind_json(s, 5, data);
	json_decref(data);
	if (sq_done(st, s, "append event", cause) == -1)
		return -1;
	return sqlite3_last_insert_rowid(DB(st));
}

static void
event_read(sqlite3_stmt *s, void *rec)
{
	struct store_event *ev = rec;

	memset(ev, 0, sizeof(*ev));
	ev->seq = sqlite3_column_int64(s, 0);
	ev->at = sqlite3_column_int64(s, 1);
	col_copy(s, 2, ev->sandbox, sizeof(ev->sandbox));
	col_copy(s, 3, ev->project, sizeof(ev->project));
	col_copy(s, 4, ev->type, sizeof(ev->type));
	ev->data = col_json(s, 5);
}

static void
event_clear(void *rec)
{
	store_event_clear(rec);
}

static int
sq_event_list(struct store *st, const char *sandbox, int64_t after, int limit,
    struct store_event **out, size_t *n, char **cause)
{
	static const struct sq_record event_record = { sizeof(**out), event_read, event_clear };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT seq, at, sandbox, project, type, data"
	    " FROM events WHERE seq > ?1 AND (?2 IS NULL OR sandbox = ?2) ORDER BY seq LIMIT ?3",
	    cause);
	void *arr;

	if (s == NULL)
		return -1;
	sqlite3_bind_int64(s, 1, after);
	bind_text(s, 2, sandbox);
	sqlite3_bind_int(s, 3, store_limit(limit));
	if (sq_list(st, s, &event_record, &arr, n, "list events", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

#define SECRET_COLS "scope, scope_id, name, sealed, hosts, header, format, created_at," \
	" updated_at"

static void
secret_read(sqlite3_stmt *s, void *rec)
{
	struct store_secret *sec = rec;
	const void *b = sqlite3_column_blob(s, 3);
	const unsigned char *t;

	memset(sec, 0, sizeof(*sec));
	sec->scope = col_dup(s, 0);
	sec->scope_id = col_dup(s, 1);
	sec->name = col_dup(s, 2);
	sec->sealedlen = (size_t)sqlite3_column_bytes(s, 3);
	/* One byte more so that an empty secret still has a non-NULL buffer. */
	sec->sealed = xmalloc(sec->sealedlen + 1);
	if (sec->sealedlen > 0)
		memcpy(sec->sealed, b, sec->sealedlen);
	t = sqlite3_column_text(s, 4);
	sec->hosts = t ? json_loads((const char *)t, 0, NULL) : NULL;
	if (!json_is_array(sec->hosts)) {
		json_decref(sec->hosts);
		sec->hosts = json_array();
	}
	sec->header = col_dup(s, 5);
	sec->format = col_dup(s, 6);
	sec->created_at = sqlite3_column_int64(s, 7);
	sec->updated_at = sqlite3_column_int64(s, 8);
}

static void
secret_clear(void *rec)
{
	store_secret_clear(rec);
}

static int
sq_secret_put(struct store *st, const struct store_secret *sec, char **cause)
{
	/* ON CONFLICT leaves created_at alone: it is the first put's time. */
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO secrets (" SECRET_COLS ") VALUES"
	    " (?1,?2,?3,?4,?5,?6,?7,?8,?8) ON CONFLICT (scope, scope_id, name) DO UPDATE SET"
	    " sealed = excluded.sealed, hosts = excluded.hosts, header = excluded.header,"
	    " format = excluded.format, updated_at = excluded.updated_at", cause);
	char *hosts;

	if (s == NULL)
		return -1;
	if (sec->hosts != NULL && !json_is_array(sec->hosts)) {
		sqlite3_finalize(s);
		cause_set(cause, "store: put secret: hosts is not a JSON array");
		return -1;
	}
	hosts = sec->hosts != NULL ? json_dumps(sec->hosts, JSON_COMPACT) : NULL;
	bind_text(s, 1, sec->scope);
	bind_text(s, 2, sec->scope_id);
	bind_text(s, 3, sec->name);
	sqlite3_bind_blob(s, 4, sec->sealedlen > 0 ? (const void *)sec->sealed : "",
	    (int)sec->sealedlen, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 5, hosts != NULL ? hosts : xstrdup("[]"), -1, free);
	bind_text(s, 6, sec->header);
	bind_text(s, 7, sec->format);
	sqlite3_bind_int64(s, 8, store_now_ms());
	return sq_done(st, s, "put secret", cause);
}

static int
sq_secret_get(struct store *st, const char *scope, const char *scope_id, const char *name,
    struct store_secret *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " SECRET_COLS " FROM secrets"
	    " WHERE scope = ? AND scope_id = ? AND name = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, scope);
	bind_text(s, 2, scope_id);
	bind_text(s, 3, name);
	return sq_get(st, s, secret_read, out, "get secret", cause);
}

static int
sq_secret_list(struct store *st, const char *scope, const char *scope_id,
    struct store_secret **out, size_t *n, char **cause)
{
	static const struct sq_record secret_record = { sizeof(**out), secret_read, secret_clear };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " SECRET_COLS " FROM secrets"
	    " WHERE (?1 IS NULL OR scope = ?1) AND (?2 IS NULL OR scope_id = ?2)"
	    " ORDER BY scope, scope_id, name", cause);
	void *arr;

	if (s == NULL)
		return -1;
	bind_text(s, 1, scope);
	bind_text(s, 2, scope_id);
	if (sq_list(st, s, &secret_record, &arr, n, "list secrets", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
sq_secret_delete(struct store *st, const char *scope, const char *scope_id, const char *name,
    char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM secrets"
	    " WHERE scope = ? AND scope_id = ? AND name = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, scope);
	bind_text(s, 2, scope_id);
	bind_text(s, 3, name);
	return sq_delete(st, s, "delete secret", cause);
}

static const struct store_ops sq_ops = {
	"sqlite", sq_close, sq_schema_version,
	sq_sandbox_insert, sq_sandbox_get, sq_sandbox_update, sq_sandbox_delete, sq_sandbox_list,
	sq_key_insert, sq_key_find, sq_key_list, sq_key_delete, sq_key_count,
	sq_event_append, sq_event_list,
	sq_secret_put, sq_secret_get, sq_secret_list, sq_secret_delete,
};

struct store *
store_sqlite_open(const char *path, char **cause)
{
	struct store *st;
	struct sq *q;
	sqlite3 *db;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		cause_set(cause, "store: open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, SQLITE_BUSY_MS);
	/* WAL: readers never block the writer; NORMAL sync is durable across process crashes. */
	if (sq_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
	    " PRAGMA foreign_keys=ON;", cause) == -1) {
		sqlite3_close(db);
		return NULL;
	}
	q = xcalloc(1, sizeof(*q));
	q->db = db;
	st = xcalloc(1, sizeof(*st));
	st->ops = &sq_ops;
	st->impl = q;
	if (sq_migrate(st, cause) == -1) {
		sq_close(st);
		return NULL;
	}
	return st;
}
