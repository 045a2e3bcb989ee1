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
	" last_active_at, error, access_token, snapshot, generation, origin, paused_at, auto_resume," \
	" traffic_token, worker"

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
	bind_text(s, 21, sb->origin);
	sqlite3_bind_int64(s, 22, sb->paused_at);
	sqlite3_bind_int(s, 23, sb->auto_resume);
	bind_text(s, 24, sb->traffic_token);
	bind_text(s, 25, sb->worker);
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
	sb->origin = col_dup(s, 20);
	sb->paused_at = sqlite3_column_int64(s, 21);
	sb->auto_resume = sqlite3_column_int(s, 22);
	sb->traffic_token = col_dup(s, 23);
	col_copy(s, 24, sb->worker, sizeof(sb->worker));
}

static int
sq_sandbox_insert(struct store *st, const struct store_sandbox *sb, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO sandboxes (" SB_COLS ") VALUES"
	    " (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", cause);

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
sq_sandbox_by_token(struct store *st, const char *token, struct store_sandbox *out,
    char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " SB_COLS " FROM sandboxes WHERE"
	    " access_token = ? LIMIT 1", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, token);
	return sq_get(st, s, sb_read, out, "get sandbox by token", cause);
}

static int
sq_sandbox_update(struct store *st, struct store_sandbox *sb, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "UPDATE sandboxes SET id=?1, project=?2, template=?3,"
	    " state=?4, vcpus=?5, memory_mb=?6, env=?7, metadata=?8, network=?9, timeout_s=?10,"
	    " idle_timeout_s=?11, auto_pause=?12, created_at=?13, updated_at=?14, expires_at=?15,"
	    " last_active_at=?16, error=?17, access_token=?18, snapshot=?19, generation=?20 + 1,"
	    " origin=?21, paused_at=?22, auto_resume=?23, traffic_token=?24, worker=?25"
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

/* --- named snapshots --------------------------------------------------- */

#define SNAP_COLS "id, project, name, source, template, vcpus, memory_mb, env, network," \
	" created_at, worker"

static void
snap_read(sqlite3_stmt *s, void *rec)
{
	struct store_snap *sn = rec;

	memset(sn, 0, sizeof(*sn));
	col_copy(s, 0, sn->id, sizeof(sn->id));
	col_copy(s, 1, sn->project, sizeof(sn->project));
	col_copy(s, 2, sn->name, sizeof(sn->name));
	col_copy(s, 3, sn->source, sizeof(sn->source));
	col_copy(s, 4, sn->template_name, sizeof(sn->template_name));
	sn->vcpus = (unsigned)sqlite3_column_int(s, 5);
	sn->memory_mb = (unsigned)sqlite3_column_int(s, 6);
	sn->env = col_json(s, 7);
	sn->network = col_json(s, 8);
	sn->created_at = sqlite3_column_int64(s, 9);
	col_copy(s, 10, sn->worker, sizeof(sn->worker));
}

static void
snap_clear(void *rec)
{
	store_snap_clear(rec);
}

static int
sq_snap_insert(struct store *st, const struct store_snap *sn, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO snapshots (" SNAP_COLS ") VALUES"
	    " (?,?,?,?,?,?,?,?,?,?,?)", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, sn->id);
	bind_text(s, 2, sn->project);
	bind_text(s, 3, sn->name);
	bind_text(s, 4, sn->source);
	bind_text(s, 5, sn->template_name);
	sqlite3_bind_int(s, 6, (int)sn->vcpus);
	sqlite3_bind_int(s, 7, (int)sn->memory_mb);
	bind_json(s, 8, sn->env);
	bind_json(s, 9, sn->network);
	sqlite3_bind_int64(s, 10, sn->created_at);
	bind_text(s, 11, sn->worker);
	return sq_done(st, s, "insert snapshot", cause);
}

static int
sq_snap_get(struct store *st, const char *project, const char *name_or_id,
    struct store_snap *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE (?1 IS NULL OR project = ?1) AND (name = ?2 OR id = ?2)"
	    " ORDER BY (name = ?2) DESC LIMIT 1", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	bind_text(s, 2, name_or_id);
	return sq_get(st, s, snap_read, out, "get snapshot", cause);
}

static int
sq_snap_list(struct store *st, const char *project, struct store_snap **out, size_t *n,
    char **cause)
{
	static const struct sq_record snap_record = { sizeof(**out), snap_read, snap_clear };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE (?1 IS NULL OR project = ?1) ORDER BY created_at, id", cause);
	void *arr;

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	if (sq_list(st, s, &snap_record, &arr, n, "list snapshots", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
sq_snap_delete(struct store *st, const char *id, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM snapshots WHERE id = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, id);
	return sq_delete(st, s, "delete snapshot", cause);
}

/* --- templates ----------------------------------------------------------- */

#define TEMPLATE_COLS "name, image_bytes, allocated_bytes, built_at, last_used_at"

static void
template_read(sqlite3_stmt *s, void *rec)
{
	struct store_template *t = rec;
	const unsigned char *name = sqlite3_column_text(s, 0);

	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name ? (const char *)name : "");
	t->image_bytes = sqlite3_column_int64(s, 1);
	t->allocated_bytes = sqlite3_column_int64(s, 2);
	t->built_at = sqlite3_column_int64(s, 3);
	t->last_used_at = sqlite3_column_int64(s, 4);
}

static int
sq_template_put(struct store *st, const struct store_template *t, char **cause)
{
	/* A rebuild keeps the last use: the name is what sandboxes ask for. */
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO templates (" TEMPLATE_COLS ") VALUES"
	    " (?1,?2,?3,?4,NULL) ON CONFLICT (name) DO UPDATE SET image_bytes = excluded.image_bytes,"
	    " allocated_bytes = excluded.allocated_bytes, built_at = excluded.built_at", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, t->name);
	sqlite3_bind_int64(s, 2, t->image_bytes);
	sqlite3_bind_int64(s, 3, t->allocated_bytes);
	sqlite3_bind_int64(s, 4, t->built_at);
	return sq_done(st, s, "put template", cause);
}

static int
sq_template_touch(struct store *st, const char *name, int64_t now, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "UPDATE templates SET last_used_at = ?2"
	    " WHERE name = ?1", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, name);
	sqlite3_bind_int64(s, 2, now);
	return sq_delete(st, s, "touch template", cause);
}

static int
sq_template_list(struct store *st, struct store_template **out, size_t *n, char **cause)
{
	static const struct sq_record template_record = { sizeof(**out), template_read, NULL };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " TEMPLATE_COLS " FROM templates"
	    " ORDER BY name", cause);
	void *arr;

	if (s == NULL)
		return -1;
	if (sq_list(st, s, &template_record, &arr, n, "list templates", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
sq_template_delete(struct store *st, const char *name, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM templates WHERE name = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, name);
	return sq_delete(st, s, "delete template", cause);
}

/* --- volumes ------------------------------------------------------------ */

#define VOL_COLS "v.project, v.name, v.size_mb, v.created_at, v.last_used_at," \
	" (SELECT COUNT(*) FROM volume_attachments a WHERE a.project = v.project" \
	" AND a.volume = v.name), v.worker"

static void
vol_read(sqlite3_stmt *s, void *rec)
{
	struct store_volume *v = rec;

	col_copy(s, 0, v->project, sizeof(v->project));
	col_copy(s, 1, v->name, sizeof(v->name));
	v->size_mb = sqlite3_column_int64(s, 2);
	v->created_at = sqlite3_column_int64(s, 3);
	v->last_used_at = sqlite3_column_int64(s, 4);
	v->attached = sqlite3_column_int(s, 5);
	col_copy(s, 6, v->worker, sizeof(v->worker));
}

static void
att_read(sqlite3_stmt *s, void *rec)
{
	struct store_attachment *a = rec;

	col_copy(s, 0, a->volume, sizeof(a->volume));
	col_copy(s, 1, a->sandbox, sizeof(a->sandbox));
	col_copy(s, 2, a->path, sizeof(a->path));
	a->read_only = sqlite3_column_int(s, 3);
}

static int
sq_volume_insert(struct store *st, const struct store_volume *v, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO volumes (project, name, size_mb,"
	    " created_at, last_used_at, worker) VALUES (?,?,?,?,0,?) ON CONFLICT DO NOTHING", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, v->project);
	bind_text(s, 2, v->name);
	sqlite3_bind_int64(s, 3, v->size_mb);
	sqlite3_bind_int64(s, 4, store_now_ms());
	bind_text(s, 5, v->worker);
	return sq_delete(st, s, "insert volume", cause);	/* 1: a row went in */
}

static int
sq_volume_get(struct store *st, const char *project, const char *name,
    struct store_volume *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " VOL_COLS " FROM volumes v"
	    " WHERE v.project = ? AND v.name = ?", cause);
	int rc;

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	bind_text(s, 2, name);
	memset(out, 0, sizeof(*out));
	if ((rc = sqlite3_step(s)) == SQLITE_ROW)
		vol_read(s, out);
	sqlite3_finalize(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_fail(DB(st), cause, "get volume");
	return rc == SQLITE_ROW;
}

static int
sq_volume_list(struct store *st, const char *project, struct store_volume **out, size_t *n,
    char **cause)
{
	static const struct sq_record vol_record = { sizeof(**out), vol_read, NULL };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " VOL_COLS " FROM volumes v"
	    " WHERE (?1 IS NULL OR v.project = ?1) ORDER BY v.project, v.name", cause);
	void *arr;

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	if (sq_list(st, s, &vol_record, &arr, n, "list volumes", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
sq_volume_delete(struct store *st, const char *project, const char *name, char **cause)
{
	sqlite3_stmt *s;
	int rc;

	/* One statement: an attach between a check and the delete cannot slip in. */
	s = sq_prepare(DB(st), "DELETE FROM volumes WHERE project = ?1 AND name = ?2 AND NOT"
	    " EXISTS (SELECT 1 FROM volume_attachments WHERE project = ?1 AND volume = ?2)",
	    cause);
	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	bind_text(s, 2, name);
	if ((rc = sq_delete(st, s, "delete volume", cause)) != 0)
		return rc;
	s = sq_prepare(DB(st), "SELECT COUNT(*) FROM volumes WHERE project = ? AND name = ?",
	    cause);
	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	bind_text(s, 2, name);
	rc = sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int(s, 0) > 0 ? 2 : 0;
	sqlite3_finalize(s);
	return rc;
}

/* Who holds the volume so that a is refused (for the cause), "" when nobody. */
static void
sq_volume_holder(struct store *st, const char *project, const struct store_attachment *a,
    char *holder, size_t len, int *exists)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT (SELECT COUNT(*) FROM volumes WHERE"
	    " project = ?1 AND name = ?2), (SELECT sandbox FROM volume_attachments WHERE"
	    " project = ?1 AND volume = ?2 AND (read_only = 0 OR ?3 = 0) ORDER BY read_only"
	    " LIMIT 1)", NULL);

	*holder = '\0';
	*exists = 0;
	if (s == NULL)
		return;
	bind_text(s, 1, project);
	bind_text(s, 2, a->volume);
	sqlite3_bind_int(s, 3, a->read_only);
	if (sqlite3_step(s) == SQLITE_ROW) {
		*exists = sqlite3_column_int(s, 0) > 0;
		col_copy(s, 1, holder, len);
	}
	sqlite3_finalize(s);
}

static int
sq_volume_attach(struct store *st, const char *project, const struct store_attachment *a,
    char **cause)
{
	char holder[STORE_ID_MAX];
	sqlite3_stmt *s;
	int exists, rc = -1;

	/* BEGIN IMMEDIATE takes the write lock first: the check and the insert are one step. */
	if (sq_exec(DB(st), "BEGIN IMMEDIATE", cause) == -1)
		return -1;
	sq_volume_holder(st, project, a, holder, sizeof(holder), &exists);
	if (!exists) {
		rc = 2;
		cause_set(cause, "volume \"%s\" not found", a->volume);
		goto out;
	}
	if (*holder != '\0') {
		rc = 0;
		cause_set(cause, "volume \"%s\" is attached %s by sandbox %s", a->volume,
		    a->read_only ? "read-write" : "already", holder);
		goto out;
	}
	s = sq_prepare(DB(st), "INSERT INTO volume_attachments (project, volume, sandbox, path,"
	    " read_only) VALUES (?,?,?,?,?)", cause);
	if (s == NULL)
		goto out;
	bind_text(s, 1, project);
	bind_text(s, 2, a->volume);
	bind_text(s, 3, a->sandbox);
	bind_text(s, 4, a->path);
	sqlite3_bind_int(s, 5, a->read_only);
	if (sq_done(st, s, "attach volume", cause) == -1)
		goto out;
	s = sq_prepare(DB(st), "UPDATE volumes SET last_used_at = ? WHERE project = ? AND name = ?",
	    cause);
	if (s == NULL)
		goto out;
	sqlite3_bind_int64(s, 1, store_now_ms());
	bind_text(s, 2, project);
	bind_text(s, 3, a->volume);
	if (sq_done(st, s, "touch volume", cause) == -1)
		goto out;
	rc = 1;
out:
	if (rc == 1)
		return sq_exec(DB(st), "COMMIT", cause) == -1 ? -1 : 1;
	sq_exec(DB(st), "ROLLBACK", NULL);
	return rc;
}

static int
sq_volume_detach(struct store *st, const char *sandbox, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM volume_attachments WHERE sandbox = ?",
	    cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, sandbox);
	return sq_done(st, s, "detach volumes", cause);
}

static int
sq_volume_attachments(struct store *st, const char *sandbox, struct store_attachment **out,
    size_t *n, char **cause)
{
	static const struct sq_record att_record = { sizeof(**out), att_read, NULL };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT volume, sandbox, path, read_only FROM"
	    " volume_attachments WHERE sandbox = ? ORDER BY volume", cause);
	void *arr;

	if (s == NULL)
		return -1;
	bind_text(s, 1, sandbox);
	if (sq_list(st, s, &att_record, &arr, n, "list attachments", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

#define WORKER_COLS "name, addr, labels, abi, templates, vcpus, memory_mb, used_vcpus," \
	" used_memory_mb, sandboxes, pool_ready, state, epoch, started_at, heartbeat_at"

static void
worker_bind(sqlite3_stmt *s, const struct store_worker *w)
{
	char *t = w->templates != NULL ? json_dumps(w->templates, JSON_COMPACT) : NULL;

	bind_text(s, 1, w->name);
	bind_text(s, 2, w->addr);
	bind_json(s, 3, w->labels);
	bind_json(s, 4, w->abi);
	sqlite3_bind_text(s, 5, t != NULL ? t : xstrdup("[]"), -1, free);
	sqlite3_bind_int(s, 6, (int)w->vcpus);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)w->memory_mb);
	sqlite3_bind_int(s, 8, (int)w->used_vcpus);
	sqlite3_bind_int64(s, 9, (sqlite3_int64)w->used_memory_mb);
	sqlite3_bind_int(s, 10, (int)w->sandboxes);
	sqlite3_bind_int(s, 11, (int)w->pool_ready);
	bind_text(s, 12, w->state[0] != '\0' ? w->state : "up");
	sqlite3_bind_int64(s, 13, w->epoch);
	sqlite3_bind_int64(s, 14, w->started_at);
	sqlite3_bind_int64(s, 15, w->heartbeat_at);
}

static void
worker_read(sqlite3_stmt *s, void *rec)
{
	struct store_worker *w = rec;
	const unsigned char *t;

	memset(w, 0, sizeof(*w));
	col_copy(s, 0, w->name, sizeof(w->name));
	col_copy(s, 1, w->addr, sizeof(w->addr));
	w->labels = col_json(s, 2);
	w->abi = col_json(s, 3);
	t = sqlite3_column_text(s, 4);
	w->templates = t != NULL ? json_loads((const char *)t, 0, NULL) : NULL;
	if (!json_is_array(w->templates)) {
		json_decref(w->templates);
		w->templates = json_array();
	}
	w->vcpus = (unsigned)sqlite3_column_int(s, 5);
	w->memory_mb = (uint64_t)sqlite3_column_int64(s, 6);
	w->used_vcpus = (unsigned)sqlite3_column_int(s, 7);
	w->used_memory_mb = (uint64_t)sqlite3_column_int64(s, 8);
	w->sandboxes = (unsigned)sqlite3_column_int(s, 9);
	w->pool_ready = (unsigned)sqlite3_column_int(s, 10);
	col_copy(s, 11, w->state, sizeof(w->state));
	w->epoch = sqlite3_column_int64(s, 12);
	w->started_at = sqlite3_column_int64(s, 13);
	w->heartbeat_at = sqlite3_column_int64(s, 14);
}

static void
worker_clear(void *rec)
{
	store_worker_clear(rec);
}

/* One statement: a new row at epoch 1, or the old one replaced at its epoch + 1. */
static int
sq_worker_register(struct store *st, struct store_worker *w, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO workers (" WORKER_COLS ") VALUES"
	    " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,1,?14,?15) ON CONFLICT (name) DO UPDATE SET"
	    " addr=?2, labels=?3, abi=?4, templates=?5, vcpus=?6, memory_mb=?7, used_vcpus=?8,"
	    " used_memory_mb=?9, sandboxes=?10, pool_ready=?11, state=?12,"
	    " epoch=workers.epoch + 1, started_at=?14, heartbeat_at=?15 RETURNING epoch", cause);
	int rc;

	if (s == NULL)
		return -1;
	worker_bind(s, w);
	if ((rc = sqlite3_step(s)) == SQLITE_ROW)
		w->epoch = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : sq_fail(DB(st), cause, "register worker");
}

static int
sq_worker_heartbeat(struct store *st, const struct store_worker *w, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "UPDATE workers SET addr=?2, labels=?3, abi=?4,"
	    " templates=?5, vcpus=?6, memory_mb=?7, used_vcpus=?8, used_memory_mb=?9,"
	    " sandboxes=?10, pool_ready=?11, state=?12, heartbeat_at=?15"
	    " WHERE name=?1 AND epoch=?13", cause);

	if (s == NULL)
		return -1;
	worker_bind(s, w);
	if (sq_done(st, s, "worker heartbeat", cause) == -1)
		return -1;
	return sqlite3_changes(DB(st)) > 0 ? 1 : 0;
}

static int
sq_worker_get(struct store *st, const char *name, struct store_worker *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " WORKER_COLS " FROM workers WHERE name = ?",
	    cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, name);
	return sq_get(st, s, worker_read, out, "get worker", cause);
}

static int
sq_worker_list(struct store *st, struct store_worker **out, size_t *n, char **cause)
{
	static const struct sq_record worker_record = { sizeof(**out), worker_read, worker_clear };
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT " WORKER_COLS " FROM workers ORDER BY name",
	    cause);
	void *arr;

	if (s == NULL)
		return -1;
	if (sq_list(st, s, &worker_record, &arr, n, "list workers", cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
sq_worker_delete(struct store *st, const char *name, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM workers WHERE name = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, name);
	return sq_delete(st, s, "delete worker", cause);
}

#define LIVE_STATES_SQL "('creating','running','paused','suspending','resuming')"

static int
sq_quota_put(struct store *st, const struct store_quota *q, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "INSERT INTO quotas (project, max_sandboxes,"
	    " max_vcpus, max_memory_mb, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)"
	    " ON CONFLICT (project) DO UPDATE SET max_sandboxes = ?2, max_vcpus = ?3,"
	    " max_memory_mb = ?4, updated_at = ?5", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, q->project);
	sqlite3_bind_int(s, 2, (int)q->max_sandboxes);
	sqlite3_bind_int(s, 3, (int)q->max_vcpus);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)q->max_memory_mb);
	sqlite3_bind_int64(s, 5, store_now_ms());
	return sq_done(st, s, "put quota", cause);
}

static void
quota_read(sqlite3_stmt *s, void *rec)
{
	struct store_quota *q = rec;

	memset(q, 0, sizeof(*q));
	col_copy(s, 0, q->project, sizeof(q->project));
	q->max_sandboxes = (unsigned)sqlite3_column_int(s, 1);
	q->max_vcpus = (unsigned)sqlite3_column_int(s, 2);
	q->max_memory_mb = (uint64_t)sqlite3_column_int64(s, 3);
	q->updated_at = sqlite3_column_int64(s, 4);
}

static int
sq_quota_get(struct store *st, const char *project, struct store_quota *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT project, max_sandboxes, max_vcpus,"
	    " max_memory_mb, updated_at FROM quotas WHERE project = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	return sq_get(st, s, quota_read, out, "get quota", cause);
}

static int
sq_quota_delete(struct store *st, const char *project, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "DELETE FROM quotas WHERE project = ?", cause);

	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	return sq_delete(st, s, "delete quota", cause);
}

static void
usage_read(sqlite3_stmt *s, void *rec)
{
	struct store_usage *u = rec;

	u->sandboxes = (unsigned)sqlite3_column_int(s, 0);
	u->vcpus = (unsigned)sqlite3_column_int(s, 1);
	u->memory_mb = (uint64_t)sqlite3_column_int64(s, 2);
}

static int
sq_usage(struct store *st, const char *project, struct store_usage *out, char **cause)
{
	sqlite3_stmt *s = sq_prepare(DB(st), "SELECT count(*), coalesce(sum(vcpus), 0),"
	    " coalesce(sum(memory_mb), 0) FROM sandboxes WHERE project = ? AND state IN "
	    LIVE_STATES_SQL, cause);

	memset(out, 0, sizeof(*out));
	if (s == NULL)
		return -1;
	bind_text(s, 1, project);
	return sq_get(st, s, usage_read, out, "project usage", cause) == -1 ? -1 : 0;
}

/* One writer, and the caller's loop runs the check and the insert back to back. */
static int
sq_project_lock(struct store *st, const char *project, char **cause)
{
	return 0;
}

static void
sq_project_unlock(struct store *st, const char *project)
{
}

static const struct store_ops sq_ops = {
	"sqlite", sq_close, sq_schema_version,
	sq_sandbox_insert, sq_sandbox_get, sq_sandbox_update, sq_sandbox_delete, sq_sandbox_list,
	sq_key_insert, sq_key_find, sq_key_list, sq_key_delete, sq_key_count,
	sq_event_append, sq_event_list,
	sq_secret_put, sq_secret_get, sq_secret_list, sq_secret_delete,
	sq_snap_insert, sq_snap_get, sq_snap_list, sq_snap_delete,
	sq_template_put, sq_template_touch, sq_template_list, sq_template_delete,
	sq_volume_insert, sq_volume_get, sq_volume_list, sq_volume_delete, sq_volume_attach,
	sq_volume_detach, sq_volume_attachments,
	sq_worker_register, sq_worker_heartbeat, sq_worker_get, sq_worker_list, sq_worker_delete,
	sq_quota_put, sq_quota_get, sq_quota_delete, sq_usage, sq_project_lock, sq_project_unlock,
	sq_sandbox_by_token,
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
