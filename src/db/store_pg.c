/*
 * PostgreSQL backend (libpq): the same schema and semantics as SQLite, for
 * control planes with several API replicas sharing one database.
 *
 * One blocking connection, used by the daemon's event loop thread like the
 * SQLite handle. Every value travels as a PQexecParams parameter, never in
 * the SQL text. When the server goes away the failing call returns an error
 * saying so and the next call reconnects (PQreset); nothing is retried
 * behind the caller's back, because an insert may or may not have committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/log.h"
#include "common/util.h"
#include "db/store_impl.h"

#define PG_MAXPARAMS	32
#define PG_CONNECT_TIMEOUT "10"		/* seconds; the URL may override it */

/*
 * Advisory lock keys (arbitrary, fixed): one serializes migrations across
 * replicas starting together, one serializes event appends (see there).
 */
#define PG_LOCK_MIGRATE	"7316851200001"
#define PG_LOCK_EVENTS	"7316851200002"

struct pg {
	PGconn	*conn;
};

/* Parameters of one statement: text unless marked binary; NULL is SQL NULL. */
struct pg_params {
	int		 n;
	const char	*v[PG_MAXPARAMS];
	int		 len[PG_MAXPARAMS];
	int		 fmt[PG_MAXPARAMS];
	char		*owned[PG_MAXPARAMS];
};

static void
pp_text(struct pg_params *pp, const char *v)
{
	pp->v[pp->n++] = v;
}

static void
pp_own(struct pg_params *pp, char *v)
{
	pp->owned[pp->n] = v;
	pp->v[pp->n++] = v;
}

static void
pp_int(struct pg_params *pp, int64_t v)
{
	char *s;

	xasprintf(&s, "%lld", (long long)v);
	pp_own(pp, s);
}

/* Compact JSON text, sorted keys like SQLite's; NULL stores dflt. */
static void
pp_json(struct pg_params *pp, json_t *v, const char *dflt)
{
	char *t = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	pp_own(pp, t != NULL ? t : xstrdup(dflt));
}

/* Borrowed bytes, sent in binary so that no escaping is involved. */
static void
pp_bytes(struct pg_params *pp, const void *v, size_t len)
{
	pp->v[pp->n] = len > 0 ? v : "";
	pp->len[pp->n] = (int)len;
	pp->fmt[pp->n++] = 1;
}

static void
pp_free(struct pg_params *pp)
{
	int i;

	for (i = 0; i < pp->n; i++)
		free(pp->owned[i]);
}

/* libpq's messages end in a newline; causes do not. */
static void
pg_cause(char **cause, const char *what, const char *msg)
{
	size_t len = strlen(msg);

	while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' '))
		len--;
	cause_set(cause, "store: %s: %.*s", what, (int)len, msg);
}

/* The connection, reconnected first if an earlier call found it broken. */
static PGconn *
pg_conn(struct store *st, const char *what, char **cause)
{
	PGconn *conn = ((struct pg *)st->impl)->conn;

	if (PQstatus(conn) == CONNECTION_OK)
		return conn;
	PQreset(conn);
	if (PQstatus(conn) != CONNECTION_OK) {
		pg_cause(cause, what, PQerrorMessage(conn));
		cause_wrap(cause, "PostgreSQL unreachable");
		return NULL;
	}
	log_info("store: reconnected to PostgreSQL");
	return conn;
}

/* Fill *cause from a failed call; says so when the connection was lost. */
static void
pg_fail(PGconn *conn, PGresult *r, const char *what, char **cause)
{
	if (PQstatus(conn) != CONNECTION_OK) {
		pg_cause(cause, what, PQerrorMessage(conn));
		cause_wrap(cause, "PostgreSQL connection lost (reconnecting on the next call)");
	} else
		pg_cause(cause, what, r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(conn));
}

/*
 * Run one statement with pp's parameters (consumed). Returns the result when
 * its status is want, else NULL with *cause set.
 */
static PGresult *
pg_run(struct store *st, const char *what, const char *sql, struct pg_params *pp,
    ExecStatusType want, char **cause)
{
	PGconn *conn;
	PGresult *r;

	if ((conn = pg_conn(st, what, cause)) == NULL) {
		pp_free(pp);
		return NULL;
	}
	r = PQexecParams(conn, sql, pp->n, NULL, pp->v, pp->len, pp->fmt, 0);
	pp_free(pp);
	if (r != NULL && PQresultStatus(r) == want)
		return r;
	pg_fail(conn, r, what, cause);
	PQclear(r);
	return NULL;
}

/* Statements without parameters or rows; PQexec because migrations hold several. */
static int
pg_exec(struct store *st, const char *what, const char *sql, char **cause)
{
	PGconn *conn;
	PGresult *r;
	int rc = 0;

	if ((conn = pg_conn(st, what, cause)) == NULL)
		return -1;
	r = PQexec(conn, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK) {
		pg_fail(conn, r, what, cause);
		rc = -1;
	}
	PQclear(r);
	return rc;
}

/* Run an INSERT/UPDATE/DELETE; returns the rows it changed, or -1. */
static long
pg_cmd(struct store *st, const char *what, const char *sql, struct pg_params *pp,
    char **cause)
{
	PGresult *r;
	long changed;

	if ((r = pg_run(st, what, sql, pp, PGRES_COMMAND_OK, cause)) == NULL)
		return -1;
	changed = strtol(PQcmdTuples(r), NULL, 10);
	PQclear(r);
	return changed;
}

static int64_t
col_int(PGresult *r, int row, int col)
{
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static void
col_copy(PGresult *r, int row, int col, char *dst, size_t len)
{
	snprintf(dst, len, "%s", PQgetvalue(r, row, col));
}

static char *
col_dup(PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : xstrdup(PQgetvalue(r, row, col));
}

static json_t *
col_json(PGresult *r, int row, int col)
{
	json_t *j = json_loads(PQgetvalue(r, row, col), 0, NULL);

	return j ? j : json_object();
}

/* Run a DELETE: 1 when it removed a row, 0 when there was none, -1 on error. */
static int
pg_delete(struct store *st, const char *what, const char *sql, struct pg_params *pp,
    char **cause)
{
	long changed = pg_cmd(st, what, sql, pp, cause);

	if (changed == -1)
		return -1;
	return changed > 0 ? 1 : 0;
}

/* Fills one record from one row of a result. */
typedef void (*pg_read_cb)(PGresult *, int, void *);

/* A query whose first column of its one row is a count or id; -1 on error. */
static int64_t
pg_scalar(struct store *st, const char *what, const char *sql, struct pg_params *pp,
    char **cause)
{
	PGresult *r;
	int64_t v;

	if ((r = pg_run(st, what, sql, pp, PGRES_TUPLES_OK, cause)) == NULL)
		return -1;
	v = col_int(r, 0, 0);
	PQclear(r);
	return v;
}

/* A query for at most one record: 1 found (read into out), 0 not found, -1 error. */
static int
pg_get(struct store *st, const char *what, const char *sql, struct pg_params *pp,
    pg_read_cb read, void *out, char **cause)
{
	PGresult *r;
	int found;

	if ((r = pg_run(st, what, sql, pp, PGRES_TUPLES_OK, cause)) == NULL)
		return -1;
	if ((found = PQntuples(r) > 0))
		read(r, 0, out);
	PQclear(r);
	return found;
}

/* A query for every matching record: *out is an array of *n records of size each. */
static int
pg_list(struct store *st, const char *what, const char *sql, struct pg_params *pp,
    pg_read_cb read, size_t size, void **out, size_t *n, char **cause)
{
	PGresult *r;
	char *arr;
	int rows, i;

	if ((r = pg_run(st, what, sql, pp, PGRES_TUPLES_OK, cause)) == NULL)
		return -1;
	rows = PQntuples(r);
	arr = rows > 0 ? xreallocarray(NULL, rows, size) : NULL;
	for (i = 0; i < rows; i++)
		read(r, i, arr + (size_t)i * size);
	PQclear(r);
	*out = arr;
	*n = (size_t)rows;
	return 0;
}

static int
pg_schema_version(struct store *st)
{
	struct pg_params pp = { 0 };

	return (int)pg_scalar(st, "schema version",
	    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations", &pp, NULL);
}

/* Apply what is missing, all in one transaction (PostgreSQL DDL is transactional). */
static int
pg_migrate_locked(struct store *st, char **cause)
{
	int have, last = store_migrations[store_nmigrations - 1].version;
	size_t i;

	if (pg_exec(st, "migrate", "SELECT pg_advisory_xact_lock(" PG_LOCK_MIGRATE ");"
	    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
	    " name TEXT NOT NULL, applied_at BIGINT NOT NULL)", cause) == -1)
		return -1;
	if ((have = pg_schema_version(st)) == -1) {
		cause_set(cause, "store: migrate: cannot read schema_migrations");
		return -1;
	}
	if (have > last) {
		cause_set(cause, "store: schema version %d is newer than this airlockd knows (%d)",
		    have, last);
		return -1;
	}
	for (i = 0; i < store_nmigrations; i++) {
		const struct store_migration *m = &store_migrations[i];
		struct pg_params pp = { 0 };

		if (m->version <= have)
			continue;
		if (pg_exec(st, "migrate", m->sql_pg != NULL ? m->sql_pg : m->sql, cause) == -1) {
			cause_wrap(cause, "migration %d (%s)", m->version, m->name);
			return -1;
		}
		pp_int(&pp, m->version);
		pp_text(&pp, m->name);
		pp_int(&pp, store_now_ms());
		if (pg_cmd(st, "migrate", "INSERT INTO schema_migrations (version, name, applied_at)"
		    " VALUES ($1, $2, $3)", &pp, cause) == -1)
			return -1;
		log_info("store: applied migration %d (%s)", m->version, m->name);
	}
	return 0;
}

static int
pg_migrate(struct store *st, char **cause)
{
	if (pg_exec(st, "migrate", "BEGIN", cause) == -1)
		return -1;
	if (pg_migrate_locked(st, cause) == -1) {
		pg_exec(st, "migrate", "ROLLBACK", NULL);
		return -1;
	}
	return pg_exec(st, "migrate", "COMMIT", cause);
}

static void
pg_close(struct store *st)
{
	struct pg *p = st->impl;

	PQfinish(p->conn);
	free(p);
	free(st);
}

#define SB_COLS "id, project, template, state, vcpus, memory_mb, env, metadata, network," \
	" timeout_s, idle_timeout_s, auto_pause, created_at, updated_at, expires_at," \
	" last_active_at, error, access_token, snapshot, generation, origin, paused_at, auto_resume," \
	" traffic_token, worker"

static void
sb_params(struct pg_params *pp, const struct store_sandbox *sb)
{
	pp_text(pp, sb->id);
	pp_text(pp, sb->project);
	pp_text(pp, sb->template_name);
	pp_text(pp, sb->state);
	pp_int(pp, sb->vcpus);
	pp_int(pp, sb->memory_mb);
	pp_json(pp, sb->env, "{}");
	pp_json(pp, sb->metadata, "{}");
	pp_json(pp, sb->network, "{}");
	pp_int(pp, sb->timeout_s);
	pp_int(pp, sb->idle_timeout_s);
	pp_int(pp, sb->auto_pause);
	pp_int(pp, sb->created_at);
	pp_int(pp, sb->updated_at);
	pp_int(pp, sb->expires_at);
	pp_int(pp, sb->last_active_at);
	pp_text(pp, sb->error);
	pp_text(pp, sb->access_token);
	pp_text(pp, sb->snapshot);
	pp_int(pp, sb->generation);
	pp_text(pp, sb->origin);
	pp_int(pp, sb->paused_at);
	pp_int(pp, sb->auto_resume);
	pp_text(pp, sb->traffic_token);
	pp_text(pp, sb->worker);
}

static void
sb_read(PGresult *r, int row, void *rec)
{
	struct store_sandbox *sb = rec;

	memset(sb, 0, sizeof(*sb));
	col_copy(r, row, 0, sb->id, sizeof(sb->id));
	col_copy(r, row, 1, sb->project, sizeof(sb->project));
	col_copy(r, row, 2, sb->template_name, sizeof(sb->template_name));
	col_copy(r, row, 3, sb->state, sizeof(sb->state));
	sb->vcpus = (unsigned)col_int(r, row, 4);
	sb->memory_mb = (unsigned)col_int(r, row, 5);
	sb->env = col_json(r, row, 6);
	sb->metadata = col_json(r, row, 7);
	sb->network = col_json(r, row, 8);
	sb->timeout_s = col_int(r, row, 9);
	sb->idle_timeout_s = col_int(r, row, 10);
	sb->auto_pause = (int)col_int(r, row, 11);
	sb->created_at = col_int(r, row, 12);
	sb->updated_at = col_int(r, row, 13);
	sb->expires_at = col_int(r, row, 14);
	sb->last_active_at = col_int(r, row, 15);
	sb->error = col_dup(r, row, 16);
	sb->access_token = col_dup(r, row, 17);
	sb->snapshot = col_dup(r, row, 18);
	sb->generation = col_int(r, row, 19);
	sb->origin = col_dup(r, row, 20);
	sb->paused_at = col_int(r, row, 21);
	sb->auto_resume = (int)col_int(r, row, 22);
	sb->traffic_token = col_dup(r, row, 23);
	col_copy(r, row, 24, sb->worker, sizeof(sb->worker));
}

static int
pg_sandbox_insert(struct store *st, const struct store_sandbox *sb, char **cause)
{
	struct pg_params pp = { 0 };

	sb_params(&pp, sb);
	if (pg_cmd(st, "insert sandbox", "INSERT INTO sandboxes (" SB_COLS ") VALUES ($1, $2, $3,"
	    " $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24,"
	    " $25)", &pp,
	    cause) == -1)
		return -1;
	return 0;
}

static int
pg_sandbox_get(struct store *st, const char *id, struct store_sandbox *out, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, id);
	return pg_get(st, "get sandbox", "SELECT " SB_COLS " FROM sandboxes WHERE id = $1", &pp,
	    sb_read, out, cause);
}

static int
pg_sandbox_by_token(struct store *st, const char *token, struct store_sandbox *out,
    char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, token);
	return pg_get(st, "get sandbox by token", "SELECT " SB_COLS " FROM sandboxes WHERE"
	    " access_token = $1 LIMIT 1", &pp, sb_read, out, cause);
}

/*
 * The compare-and-set: under READ COMMITTED a concurrent writer of the same
 * row waits for ours to commit, then re-checks the WHERE against the new
 * generation and updates nothing.
 */
static int
pg_sandbox_update(struct store *st, struct store_sandbox *sb, char **cause)
{
	struct pg_params pp = { 0 };
	long changed;

	sb->updated_at = store_now_ms();
	sb_params(&pp, sb);
	changed = pg_cmd(st, "update sandbox", "UPDATE sandboxes SET project = $2, template = $3,"
	    " state = $4, vcpus = $5, memory_mb = $6, env = $7, metadata = $8, network = $9,"
	    " timeout_s = $10, idle_timeout_s = $11, auto_pause = $12, created_at = $13,"
	    " updated_at = $14, expires_at = $15, last_active_at = $16, error = $17,"
	    " access_token = $18, snapshot = $19, generation = $20::bigint + 1, origin = $21,"
	    " paused_at = $22, auto_resume = $23, traffic_token = $24, worker = $25"
	    " WHERE id = $1 AND generation = $20::bigint", &pp, cause);
	if (changed == -1)
		return -1;
	if (changed == 0)
		return 0;
	sb->generation++;
	return 1;
}

static int
pg_sandbox_delete(struct store *st, const char *id, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, id);
	return pg_delete(st, "delete sandbox", "DELETE FROM sandboxes WHERE id = $1", &pp, cause);
}

/*
 * Pages through the ids after the cursor, filtering in C with the same code
 * as SQLite, until limit records pass or the table ends. COLLATE "C" orders
 * ids bytewise like SQLite, whatever the database's locale, so the cursor
 * means the same on both.
 */
static int
pg_sandbox_list(struct store *st, const struct store_filter *f, struct store_sandbox **out,
    size_t *n, char **cause)
{
	struct store_sandbox *arr = NULL;
	size_t cnt = 0;
	int limit = store_limit(f->limit), rows, i;
	char *cursor = xstrdup(f->after != NULL ? f->after : "");

	do {
		struct pg_params pp = { 0 };
		PGresult *r;

		pp_text(&pp, f->project);
		pp_text(&pp, cursor);
		pp_int(&pp, limit);
		r = pg_run(st, "list sandboxes", "SELECT " SB_COLS " FROM sandboxes"
		    " WHERE ($1::text IS NULL OR project = $1) AND id > $2 COLLATE \"C\""
		    " ORDER BY id COLLATE \"C\" LIMIT $3", &pp, PGRES_TUPLES_OK, cause);
		if (r == NULL) {
			while (cnt > 0)
				store_sandbox_clear(&arr[--cnt]);
			free(arr);
			free(cursor);
			return -1;
		}
		rows = PQntuples(r);
		for (i = 0; i < rows && cnt < (size_t)limit; i++) {
			struct store_sandbox sb;

			sb_read(r, i, &sb);
			if (!store_filter_match(f, &sb)) {
				store_sandbox_clear(&sb);
				continue;
			}
			arr = xreallocarray(arr, cnt + 1, sizeof(*arr));
			arr[cnt++] = sb;
		}
		if (rows > 0) {
			free(cursor);
			cursor = xstrdup(PQgetvalue(r, rows - 1, 0));
		}
		PQclear(r);
	} while (rows == limit && cnt < (size_t)limit);
	free(cursor);
	*out = arr;
	*n = cnt;
	return 0;
}

#define KEY_COLS "id, project, name, prefix, role, created_at, last_used_at"

static void
key_read(PGresult *r, int row, void *rec)
{
	struct store_key *k = rec;

	memset(k, 0, sizeof(*k));
	col_copy(r, row, 0, k->id, sizeof(k->id));
	col_copy(r, row, 1, k->project, sizeof(k->project));
	col_copy(r, row, 2, k->name, sizeof(k->name));
	col_copy(r, row, 3, k->prefix, sizeof(k->prefix));
	col_copy(r, row, 4, k->role, sizeof(k->role));
	k->created_at = col_int(r, row, 5);
	k->last_used_at = col_int(r, row, 6);
}

static int
pg_key_insert(struct store *st, const struct store_key *k, const char *hash, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, k->id);
	pp_text(&pp, k->project);
	pp_text(&pp, k->name);
	pp_text(&pp, k->prefix);
	pp_text(&pp, k->role);
	pp_int(&pp, k->created_at);
	pp_int(&pp, k->last_used_at);
	pp_text(&pp, hash);
	if (pg_cmd(st, "insert key", "INSERT INTO api_keys (" KEY_COLS ", hash) VALUES ($1, $2,"
	    " $3, $4, $5, $6, $7, $8)", &pp, cause) == -1)
		return -1;
	return 0;
}

static int
pg_key_find(struct store *st, const char *hash, struct store_key *out, char **cause)
{
	struct pg_params pp = { 0 };
	int found;

	pp_text(&pp, hash);
	found = pg_get(st, "find key", "SELECT " KEY_COLS " FROM api_keys WHERE hash = $1", &pp,
	    key_read, out, cause);
	/* Coarse (one write a minute per key) so auth does not write on every request. */
	if (found == 1 && store_now_ms() - out->last_used_at > 60000) {
		memset(&pp, 0, sizeof(pp));
		pp_int(&pp, store_now_ms());
		pp_text(&pp, out->id);
		pg_cmd(st, "touch key", "UPDATE api_keys SET last_used_at = $1 WHERE id = $2", &pp,
		    NULL);
	}
	return found;
}

static int
pg_key_list(struct store *st, const char *project, struct store_key **out, size_t *n,
    char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	pp_text(&pp, project);
	if (pg_list(st, "list keys", "SELECT " KEY_COLS " FROM api_keys"
	    " WHERE ($1::text IS NULL OR project = $1) ORDER BY created_at, id COLLATE \"C\"",
	    &pp, key_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
pg_key_delete(struct store *st, const char *id, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, id);
	return pg_delete(st, "delete key", "DELETE FROM api_keys WHERE id = $1", &pp, cause);
}

static int
pg_key_count(struct store *st, char **cause)
{
	struct pg_params pp = { 0 };

	return (int)pg_scalar(st, "count keys", "SELECT COUNT(*) FROM api_keys", &pp, cause);
}

/*
 * Readers page with "seq > last seen", which is only safe if events commit
 * in seq order. Sequence values are handed out before commit, so two
 * replicas appending at once could commit 6 before 5 and a reader would
 * skip 5. The transaction-scoped advisory lock, taken before nextval runs,
 * makes appends one at a time; events are rare enough for that.
 */
static int64_t
pg_event_append(struct store *st, const char *sandbox, const char *project, const char *type,
    json_t *data, char **cause)
{
	struct pg_params pp = { 0 };

	pp_int(&pp, store_now_ms());
	pp_text(&pp, sandbox ? sandbox : "");
	pp_text(&pp, project ? project : "");
	pp_text(&pp, type);
	pp_json(&pp, data, "{}");
	json_decref(data);
	return pg_scalar(st, "append event", "WITH l AS (SELECT pg_advisory_xact_lock("
	    PG_LOCK_EVENTS ")) INSERT INTO events (at, sandbox, project, type, data)"
	    " SELECT $1::bigint, $2::text, $3::text, $4::text, $5::text FROM l RETURNING seq", &pp,
	    cause);
}

static void
event_read(PGresult *r, int row, void *rec)
{
	struct store_event *ev = rec;

	memset(ev, 0, sizeof(*ev));
	ev->seq = col_int(r, row, 0);
	ev->at = col_int(r, row, 1);
	col_copy(r, row, 2, ev->sandbox, sizeof(ev->sandbox));
	col_copy(r, row, 3, ev->project, sizeof(ev->project));
	col_copy(r, row, 4, ev->type, sizeof(ev->type));
	ev->data = col_json(r, row, 5);
}

static int
pg_event_list(struct store *st, const char *sandbox, int64_t after, int limit,
    struct store_event **out, size_t *n, char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	pp_int(&pp, after);
	pp_text(&pp, sandbox);
	pp_int(&pp, store_limit(limit));
	if (pg_list(st, "list events", "SELECT seq, at, sandbox, project, type, data FROM events"
	    " WHERE seq > $1 AND ($2::text IS NULL OR sandbox = $2) ORDER BY seq LIMIT $3", &pp,
	    event_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

#define SECRET_COLS "scope, scope_id, name, sealed, hosts, header, format, created_at," \
	" updated_at"

static void
secret_read(PGresult *r, int row, void *rec)
{
	struct store_secret *sec = rec;
	unsigned char *b;
	size_t len = 0;

	memset(sec, 0, sizeof(*sec));
	sec->scope = col_dup(r, row, 0);
	sec->scope_id = col_dup(r, row, 1);
	sec->name = col_dup(r, row, 2);
	/* Text results carry bytea hex-escaped. */
	b = PQunescapeBytea((const unsigned char *)PQgetvalue(r, row, 3), &len);
	if (b == NULL)
		fatalx("store: out of memory unescaping a secret");
	sec->sealed = xmalloc(len + 1);
	memcpy(sec->sealed, b, len);
	sec->sealedlen = len;
	explicit_bzero(b, len);
	PQfreemem(b);
	sec->hosts = json_loads(PQgetvalue(r, row, 4), 0, NULL);
	if (!json_is_array(sec->hosts)) {
		json_decref(sec->hosts);
		sec->hosts = json_array();
	}
	sec->header = col_dup(r, row, 5);
	sec->format = col_dup(r, row, 6);
	sec->created_at = col_int(r, row, 7);
	sec->updated_at = col_int(r, row, 8);
}

static int
pg_secret_put(struct store *st, const struct store_secret *sec, char **cause)
{
	struct pg_params pp = { 0 };

	if (sec->hosts != NULL && !json_is_array(sec->hosts)) {
		cause_set(cause, "store: put secret: hosts is not a JSON array");
		return -1;
	}
	pp_text(&pp, sec->scope);
	pp_text(&pp, sec->scope_id);
	pp_text(&pp, sec->name);
	pp_bytes(&pp, sec->sealed, sec->sealedlen);
	pp_json(&pp, sec->hosts, "[]");
	pp_text(&pp, sec->header);
	pp_text(&pp, sec->format);
	pp_int(&pp, store_now_ms());
	/* ON CONFLICT leaves created_at alone: it is the first put's time. */
	if (pg_cmd(st, "put secret", "INSERT INTO secrets (" SECRET_COLS ") VALUES ($1, $2, $3,"
	    " $4, $5, $6, $7, $8, $8) ON CONFLICT (scope, scope_id, name) DO UPDATE SET"
	    " sealed = excluded.sealed, hosts = excluded.hosts, header = excluded.header,"
	    " format = excluded.format, updated_at = excluded.updated_at", &pp, cause) == -1)
		return -1;
	return 0;
}

static int
pg_secret_get(struct store *st, const char *scope, const char *scope_id, const char *name,
    struct store_secret *out, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, scope);
	pp_text(&pp, scope_id);
	pp_text(&pp, name);
	return pg_get(st, "get secret", "SELECT " SECRET_COLS " FROM secrets"
	    " WHERE scope = $1 AND scope_id = $2 AND name = $3", &pp, secret_read, out, cause);
}

static int
pg_secret_list(struct store *st, const char *scope, const char *scope_id,
    struct store_secret **out, size_t *n, char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	pp_text(&pp, scope);
	pp_text(&pp, scope_id);
	if (pg_list(st, "list secrets", "SELECT " SECRET_COLS " FROM secrets"
	    " WHERE ($1::text IS NULL OR scope = $1) AND ($2::text IS NULL OR scope_id = $2)"
	    " ORDER BY scope COLLATE \"C\", scope_id COLLATE \"C\", name COLLATE \"C\"", &pp,
	    secret_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
pg_secret_delete(struct store *st, const char *scope, const char *scope_id, const char *name,
    char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, scope);
	pp_text(&pp, scope_id);
	pp_text(&pp, name);
	return pg_delete(st, "delete secret", "DELETE FROM secrets"
	    " WHERE scope = $1 AND scope_id = $2 AND name = $3", &pp, cause);
}

/* --- named snapshots --------------------------------------------------- */

#define SNAP_COLS "id, project, name, source, template, vcpus, memory_mb, env, network," \
	" created_at, worker"

static void
snap_read(PGresult *r, int row, void *rec)
{
	struct store_snap *sn = rec;

	memset(sn, 0, sizeof(*sn));
	col_copy(r, row, 0, sn->id, sizeof(sn->id));
	col_copy(r, row, 1, sn->project, sizeof(sn->project));
	col_copy(r, row, 2, sn->name, sizeof(sn->name));
	col_copy(r, row, 3, sn->source, sizeof(sn->source));
	col_copy(r, row, 4, sn->template_name, sizeof(sn->template_name));
	sn->vcpus = (unsigned)col_int(r, row, 5);
	sn->memory_mb = (unsigned)col_int(r, row, 6);
	sn->env = col_json(r, row, 7);
	sn->network = col_json(r, row, 8);
	sn->created_at = col_int(r, row, 9);
	col_copy(r, row, 10, sn->worker, sizeof(sn->worker));
}

static int
pg_snap_insert(struct store *st, const struct store_snap *sn, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, sn->id);
	pp_text(&pp, sn->project);
	pp_text(&pp, sn->name);
	pp_text(&pp, sn->source);
	pp_text(&pp, sn->template_name);
	pp_int(&pp, sn->vcpus);
	pp_int(&pp, sn->memory_mb);
	pp_json(&pp, sn->env, "{}");
	pp_json(&pp, sn->network, "{}");
	pp_int(&pp, sn->created_at);
	pp_text(&pp, sn->worker);
	if (pg_cmd(st, "insert snapshot", "INSERT INTO snapshots (" SNAP_COLS ") VALUES ($1, $2,"
	    " $3, $4, $5, $6, $7, $8, $9, $10, $11)", &pp, cause) == -1)
		return -1;
	return 0;
}

static int
pg_snap_get(struct store *st, const char *project, const char *name_or_id,
    struct store_snap *out, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, project);
	pp_text(&pp, name_or_id);
	return pg_get(st, "get snapshot", "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE ($1::text IS NULL OR project = $1) AND (name = $2 OR id = $2)"
	    " ORDER BY (name = $2) DESC LIMIT 1", &pp, snap_read, out, cause);
}

static int
pg_snap_list(struct store *st, const char *project, struct store_snap **out, size_t *n,
    char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	pp_text(&pp, project);
	if (pg_list(st, "list snapshots", "SELECT " SNAP_COLS " FROM snapshots"
	    " WHERE ($1::text IS NULL OR project = $1) ORDER BY created_at, id COLLATE \"C\"",
	    &pp, snap_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
pg_snap_delete(struct store *st, const char *id, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, id);
	return pg_delete(st, "delete snapshot", "DELETE FROM snapshots WHERE id = $1", &pp, cause);
}

/* --- templates ----------------------------------------------------------- */

#define TEMPLATE_COLS "name, image_bytes, allocated_bytes, built_at, last_used_at"

static void
template_read(PGresult *r, int row, void *rec)
{
	struct store_template *t = rec;

	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", PQgetvalue(r, row, 0));
	t->image_bytes = strtoll(PQgetvalue(r, row, 1), NULL, 10);
	t->allocated_bytes = strtoll(PQgetvalue(r, row, 2), NULL, 10);
	t->built_at = strtoll(PQgetvalue(r, row, 3), NULL, 10);
	t->last_used_at = PQgetisnull(r, row, 4) ? 0 : strtoll(PQgetvalue(r, row, 4), NULL, 10);
}

static int
pg_template_put(struct store *st, const struct store_template *t, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, t->name);
	pp_int(&pp, t->image_bytes);
	pp_int(&pp, t->allocated_bytes);
	pp_int(&pp, t->built_at);
	/* A rebuild keeps the last use: the name is what sandboxes ask for. */
	return pg_cmd(st, "put template", "INSERT INTO templates (" TEMPLATE_COLS ") VALUES ($1,"
	    " $2, $3, $4, NULL) ON CONFLICT (name) DO UPDATE SET image_bytes = excluded.image_bytes,"
	    " allocated_bytes = excluded.allocated_bytes, built_at = excluded.built_at", &pp,
	    cause) == -1 ? -1 : 0;
}

static int
pg_template_touch(struct store *st, const char *name, int64_t now, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, name);
	pp_int(&pp, now);
	return pg_delete(st, "touch template", "UPDATE templates SET last_used_at = $2"
	    " WHERE name = $1", &pp, cause);
}

static int
pg_template_list(struct store *st, struct store_template **out, size_t *n, char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	if (pg_list(st, "list templates", "SELECT " TEMPLATE_COLS " FROM templates"
	    " ORDER BY name COLLATE \"C\"", &pp, template_read, sizeof(**out), &arr, n,
	    cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
pg_template_delete(struct store *st, const char *name, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, name);
	return pg_delete(st, "delete template", "DELETE FROM templates WHERE name = $1", &pp,
	    cause);
}

/* --- volumes ------------------------------------------------------------ */

#define VOL_COLS "v.project, v.name, v.size_mb, v.created_at, v.last_used_at," \
	" (SELECT COUNT(*) FROM volume_attachments a WHERE a.project = v.project" \
	" AND a.volume = v.name), v.worker"

static void
vol_read(PGresult *r, int row, void *rec)
{
	struct store_volume *v = rec;

	col_copy(r, row, 0, v->project, sizeof(v->project));
	col_copy(r, row, 1, v->name, sizeof(v->name));
	v->size_mb = col_int(r, row, 2);
	v->created_at = col_int(r, row, 3);
	v->last_used_at = col_int(r, row, 4);
	v->attached = (int)col_int(r, row, 5);
	col_copy(r, row, 6, v->worker, sizeof(v->worker));
}

static void
att_read(PGresult *r, int row, void *rec)
{
	struct store_attachment *a = rec;

	col_copy(r, row, 0, a->volume, sizeof(a->volume));
	col_copy(r, row, 1, a->sandbox, sizeof(a->sandbox));
	col_copy(r, row, 2, a->path, sizeof(a->path));
	a->read_only = (int)col_int(r, row, 3);
}

static int
pg_volume_insert(struct store *st, const struct store_volume *v, char **cause)
{
	struct pg_params pp = { 0 };
	long n;

	pp_text(&pp, v->project);
	pp_text(&pp, v->name);
	pp_int(&pp, v->size_mb);
	pp_int(&pp, store_now_ms());
	pp_text(&pp, v->worker);
	n = pg_cmd(st, "insert volume", "INSERT INTO volumes (project, name, size_mb, created_at,"
	    " last_used_at, worker) VALUES ($1, $2, $3, $4, 0, $5) ON CONFLICT DO NOTHING", &pp,
	    cause);
	return n == -1 ? -1 : n > 0;
}

static int
pg_volume_get(struct store *st, const char *project, const char *name,
    struct store_volume *out, char **cause)
{
	struct pg_params pp = { 0 };

	memset(out, 0, sizeof(*out));
	pp_text(&pp, project);
	pp_text(&pp, name);
	return pg_get(st, "get volume", "SELECT " VOL_COLS " FROM volumes v WHERE v.project = $1"
	    " AND v.name = $2", &pp, vol_read, out, cause);
}

static int
pg_volume_list(struct store *st, const char *project, struct store_volume **out, size_t *n,
    char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	pp_text(&pp, project);
	if (pg_list(st, "list volumes", "SELECT " VOL_COLS " FROM volumes v WHERE ($1::text IS"
	    " NULL OR v.project = $1) ORDER BY v.project COLLATE \"C\", v.name COLLATE \"C\"",
	    &pp, vol_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

/*
 * Attach and delete serialize on the volume's row (SELECT ... FOR UPDATE in
 * one transaction): under READ COMMITTED two replicas' checks could
 * otherwise both pass before either inserted.
 */
static int
pg_volume_lock(struct store *st, const char *project, const char *name, char **cause)
{
	struct pg_params pp = { 0 };

	if (pg_exec(st, "volume", "BEGIN", cause) == -1)
		return -1;
	pp_text(&pp, project);
	pp_text(&pp, name);
	return (int)pg_scalar(st, "lock volume", "SELECT COUNT(*) FROM (SELECT 1 FROM volumes"
	    " WHERE project = $1 AND name = $2 FOR UPDATE) l", &pp, cause);
}

static int
pg_volume_end(struct store *st, int rc, char **cause)
{
	if (rc == 1 || rc == 2) {
		if (pg_exec(st, "volume", "COMMIT", cause) == -1)
			return -1;
		return rc;
	}
	pg_exec(st, "volume", "ROLLBACK", NULL);
	return rc;
}

static int
pg_volume_delete(struct store *st, const char *project, const char *name, char **cause)
{
	struct pg_params pp = { 0 };
	int rc = pg_volume_lock(st, project, name, cause);
	int64_t n;

	if (rc <= 0)
		return pg_volume_end(st, rc, cause) == -1 ? -1 : rc;
	pp_text(&pp, project);
	pp_text(&pp, name);
	n = pg_scalar(st, "volume attachments", "SELECT COUNT(*) FROM volume_attachments"
	    " WHERE project = $1 AND volume = $2", &pp, cause);
	if (n != 0) {
		pg_volume_end(st, 0, NULL);
		return n == -1 ? -1 : 2;
	}
	memset(&pp, 0, sizeof(pp));
	pp_text(&pp, project);
	pp_text(&pp, name);
	rc = pg_delete(st, "delete volume", "DELETE FROM volumes WHERE project = $1 AND"
	    " name = $2", &pp, cause);
	return pg_volume_end(st, rc == 1 ? 1 : -1, cause);
}

static int
pg_volume_attach(struct store *st, const char *project, const struct store_attachment *a,
    char **cause)
{
	struct pg_params pp = { 0 };
	char holder[STORE_ID_MAX];
	PGresult *r;
	int rc = pg_volume_lock(st, project, a->volume, cause);

	if (rc == 0) {
		cause_set(cause, "volume \"%s\" not found", a->volume);
		pg_volume_end(st, 0, NULL);
		return 2;
	}
	if (rc == -1)
		return pg_volume_end(st, -1, NULL);
	pp_text(&pp, project);
	pp_text(&pp, a->volume);
	pp_int(&pp, a->read_only);
	if ((r = pg_run(st, "volume holder", "SELECT sandbox FROM volume_attachments WHERE"
	    " project = $1 AND volume = $2 AND (read_only = 0 OR $3::integer = 0) ORDER BY"
	    " read_only LIMIT 1", &pp, PGRES_TUPLES_OK, cause)) == NULL)
		return pg_volume_end(st, -1, NULL);
	if (PQntuples(r) > 0) {
		col_copy(r, 0, 0, holder, sizeof(holder));
		PQclear(r);
		cause_set(cause, "volume \"%s\" is attached %s by sandbox %s", a->volume,
		    a->read_only ? "read-write" : "already", holder);
		pg_volume_end(st, 0, NULL);
		return 0;
	}
	PQclear(r);
	memset(&pp, 0, sizeof(pp));
	pp_text(&pp, project);
	pp_text(&pp, a->volume);
	pp_text(&pp, a->sandbox);
	pp_text(&pp, a->path);
	pp_int(&pp, a->read_only);
	if (pg_cmd(st, "attach volume", "INSERT INTO volume_attachments (project, volume,"
	    " sandbox, path, read_only) VALUES ($1, $2, $3, $4, $5)", &pp, cause) == -1)
		return pg_volume_end(st, -1, NULL);
	memset(&pp, 0, sizeof(pp));
	pp_int(&pp, store_now_ms());
	pp_text(&pp, project);
	pp_text(&pp, a->volume);
	if (pg_cmd(st, "touch volume", "UPDATE volumes SET last_used_at = $1 WHERE project = $2"
	    " AND name = $3", &pp, cause) == -1)
		return pg_volume_end(st, -1, NULL);
	return pg_volume_end(st, 1, cause);
}

static int
pg_volume_detach(struct store *st, const char *sandbox, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, sandbox);
	return pg_cmd(st, "detach volumes", "DELETE FROM volume_attachments WHERE sandbox = $1",
	    &pp, cause) == -1 ? -1 : 0;
}

static int
pg_volume_attachments(struct store *st, const char *sandbox, struct store_attachment **out,
    size_t *n, char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	pp_text(&pp, sandbox);
	if (pg_list(st, "list attachments", "SELECT volume, sandbox, path, read_only FROM"
	    " volume_attachments WHERE sandbox = $1 ORDER BY volume COLLATE \"C\"", &pp,
	    att_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

#define WORKER_COLS "name, addr, labels, abi, templates, vcpus, memory_mb, used_vcpus," \
	" used_memory_mb, sandboxes, pool_ready, state, epoch, started_at, heartbeat_at"

static void
worker_params(struct pg_params *pp, const struct store_worker *w)
{
	pp_text(pp, w->name);
	pp_text(pp, w->addr);
	pp_json(pp, w->labels, "{}");
	pp_json(pp, w->abi, "{}");
	pp_json(pp, w->templates, "[]");
	pp_int(pp, w->vcpus);
	pp_int(pp, (int64_t)w->memory_mb);
	pp_int(pp, w->used_vcpus);
	pp_int(pp, (int64_t)w->used_memory_mb);
	pp_int(pp, w->sandboxes);
	pp_int(pp, w->pool_ready);
	pp_text(pp, w->state[0] != '\0' ? w->state : "up");
	pp_int(pp, w->epoch);
	pp_int(pp, w->started_at);
	pp_int(pp, w->heartbeat_at);
}

static void
worker_read(PGresult *r, int row, void *rec)
{
	struct store_worker *w = rec;

	memset(w, 0, sizeof(*w));
	col_copy(r, row, 0, w->name, sizeof(w->name));
	col_copy(r, row, 1, w->addr, sizeof(w->addr));
	w->labels = col_json(r, row, 2);
	w->abi = col_json(r, row, 3);
	w->templates = json_loads(PQgetvalue(r, row, 4), 0, NULL);
	if (!json_is_array(w->templates)) {
		json_decref(w->templates);
		w->templates = json_array();
	}
	w->vcpus = (unsigned)col_int(r, row, 5);
	w->memory_mb = (uint64_t)col_int(r, row, 6);
	w->used_vcpus = (unsigned)col_int(r, row, 7);
	w->used_memory_mb = (uint64_t)col_int(r, row, 8);
	w->sandboxes = (unsigned)col_int(r, row, 9);
	w->pool_ready = (unsigned)col_int(r, row, 10);
	col_copy(r, row, 11, w->state, sizeof(w->state));
	w->epoch = col_int(r, row, 12);
	w->started_at = col_int(r, row, 13);
	w->heartbeat_at = col_int(r, row, 14);
}

/* One statement: a new row at epoch 1, or the old one replaced at its epoch + 1. */
static int
pg_worker_register(struct store *st, struct store_worker *w, char **cause)
{
	struct pg_params pp = { 0 };
	int64_t epoch;

	worker_params(&pp, w);
	epoch = pg_scalar(st, "register worker", "INSERT INTO workers (" WORKER_COLS ") VALUES"
	    " ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 1, $14, $15)"
	    " ON CONFLICT (name) DO UPDATE SET addr = $2, labels = $3, abi = $4, templates = $5,"
	    " vcpus = $6, memory_mb = $7, used_vcpus = $8, used_memory_mb = $9, sandboxes = $10,"
	    " pool_ready = $11, state = $12, epoch = workers.epoch + 1 + 0 * $13::bigint,"
	    " started_at = $14, heartbeat_at = $15 RETURNING epoch", &pp, cause);
	if (epoch == -1)
		return -1;
	w->epoch = epoch;
	return 0;
}

static int
pg_worker_heartbeat(struct store *st, const struct store_worker *w, char **cause)
{
	struct pg_params pp = { 0 };
	long changed;

	worker_params(&pp, w);
	changed = pg_cmd(st, "worker heartbeat", "UPDATE workers SET addr = $2, labels = $3,"
	    " abi = $4, templates = $5, vcpus = $6, memory_mb = $7, used_vcpus = $8,"
	    " used_memory_mb = $9, sandboxes = $10, pool_ready = $11, state = $12,"
	    " heartbeat_at = $15 WHERE name = $1 AND epoch = $13::bigint"
	    " AND $14::bigint IS NOT NULL", &pp, cause);
	if (changed == -1)
		return -1;
	return changed > 0 ? 1 : 0;
}

static int
pg_worker_get(struct store *st, const char *name, struct store_worker *out, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, name);
	return pg_get(st, "get worker", "SELECT " WORKER_COLS " FROM workers WHERE name = $1",
	    &pp, worker_read, out, cause);
}

static int
pg_worker_list(struct store *st, struct store_worker **out, size_t *n, char **cause)
{
	struct pg_params pp = { 0 };
	void *arr;

	if (pg_list(st, "list workers", "SELECT " WORKER_COLS " FROM workers ORDER BY name"
	    " COLLATE \"C\"", &pp, worker_read, sizeof(**out), &arr, n, cause) == -1)
		return -1;
	*out = arr;
	return 0;
}

static int
pg_worker_delete(struct store *st, const char *name, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, name);
	return pg_delete(st, "delete worker", "DELETE FROM workers WHERE name = $1", &pp, cause);
}

#define LIVE_STATES_SQL "('creating','running','paused','suspending','resuming')"
#define PG_QUOTA_LOCK_CLASS	0x61697271	/* "airq": this lock class is airlock's quotas */

static int
pg_quota_put(struct store *st, const struct store_quota *q, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, q->project);
	pp_int(&pp, q->max_sandboxes);
	pp_int(&pp, q->max_vcpus);
	pp_int(&pp, (int64_t)q->max_memory_mb);
	pp_int(&pp, store_now_ms());
	return pg_cmd(st, "put quota", "INSERT INTO quotas (project, max_sandboxes, max_vcpus,"
	    " max_memory_mb, updated_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project) DO"
	    " UPDATE SET max_sandboxes = $2, max_vcpus = $3, max_memory_mb = $4, updated_at = $5",
	    &pp, cause) == -1 ? -1 : 0;
}

static void
quota_read(PGresult *r, int row, void *rec)
{
	struct store_quota *q = rec;

	memset(q, 0, sizeof(*q));
	col_copy(r, row, 0, q->project, sizeof(q->project));
	q->max_sandboxes = (unsigned)col_int(r, row, 1);
	q->max_vcpus = (unsigned)col_int(r, row, 2);
	q->max_memory_mb = (uint64_t)col_int(r, row, 3);
	q->updated_at = col_int(r, row, 4);
}

static int
pg_quota_get(struct store *st, const char *project, struct store_quota *out, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, project);
	return pg_get(st, "get quota", "SELECT project, max_sandboxes, max_vcpus, max_memory_mb,"
	    " updated_at FROM quotas WHERE project = $1", &pp, quota_read, out, cause);
}

static int
pg_quota_delete(struct store *st, const char *project, char **cause)
{
	struct pg_params pp = { 0 };

	pp_text(&pp, project);
	return pg_delete(st, "delete quota", "DELETE FROM quotas WHERE project = $1", &pp, cause);
}

static void
usage_read(PGresult *r, int row, void *rec)
{
	struct store_usage *u = rec;

	u->sandboxes = (unsigned)col_int(r, row, 0);
	u->vcpus = (unsigned)col_int(r, row, 1);
	u->memory_mb = (uint64_t)col_int(r, row, 2);
}

static int
pg_usage(struct store *st, const char *project, struct store_usage *out, char **cause)
{
	struct pg_params pp = { 0 };

	memset(out, 0, sizeof(*out));
	pp_text(&pp, project);
	return pg_get(st, "project usage", "SELECT count(*), coalesce(sum(vcpus), 0),"
	    " coalesce(sum(memory_mb), 0) FROM sandboxes WHERE project = $1 AND state IN "
	    LIVE_STATES_SQL, &pp, usage_read, out, cause) == -1 ? -1 : 0;
}

/*
 * A session advisory lock on (class, hash of the project): every worker's
 * admission of that project waits for the one before to have written its
 * row. Held for a quota check and one insert, a millisecond or two.
 */
static int
pg_project_lock(struct store *st, const char *project, char **cause)
{
	struct pg_params pp = { 0 };

	pp_int(&pp, PG_QUOTA_LOCK_CLASS);
	pp_text(&pp, project);
	return pg_scalar(st, "quota lock", "SELECT 1 FROM pg_advisory_lock($1::integer,"
	    " hashtext($2))", &pp, cause) == -1 ? -1 : 0;
}

static void
pg_project_unlock(struct store *st, const char *project)
{
	struct pg_params pp = { 0 };
	char *cause = NULL;

	pp_int(&pp, PG_QUOTA_LOCK_CLASS);
	pp_text(&pp, project);
	if (pg_scalar(st, "quota unlock", "SELECT 1 FROM (SELECT pg_advisory_unlock($1::integer,"
	    " hashtext($2))) AS u", &pp, &cause) == -1) {
		log_warnx("%s", cause);
		free(cause);
	}
}

static const struct store_ops pg_ops = {
	"postgres", pg_close, pg_schema_version,
	pg_sandbox_insert, pg_sandbox_get, pg_sandbox_update, pg_sandbox_delete, pg_sandbox_list,
	pg_key_insert, pg_key_find, pg_key_list, pg_key_delete, pg_key_count,
	pg_event_append, pg_event_list,
	pg_secret_put, pg_secret_get, pg_secret_list, pg_secret_delete,
	pg_snap_insert, pg_snap_get, pg_snap_list, pg_snap_delete,
	pg_template_put, pg_template_touch, pg_template_list, pg_template_delete,
	pg_volume_insert, pg_volume_get, pg_volume_list, pg_volume_delete, pg_volume_attach,
	pg_volume_detach, pg_volume_attachments,
	pg_worker_register, pg_worker_heartbeat, pg_worker_get, pg_worker_list, pg_worker_delete,
	pg_quota_put, pg_quota_get, pg_quota_delete, pg_usage, pg_project_lock, pg_project_unlock,
	pg_sandbox_by_token,
};

/* Server notices ("relation already exists, skipping") go to the debug log, not stderr. */
static void
pg_notice(void *arg, const char *msg)
{
	log_debug("store: PostgreSQL: %.*s", (int)strcspn(msg, "\n"), msg);
}

struct store *
store_pg_open(const char *conninfo, char **cause)
{
	/*
	 * Defaults first, then the user's string (expand_dbname expands it in
	 * place), so that anything it sets wins. Keepalives notice a peer that
	 * vanished without closing; they do nothing on a unix socket.
	 */
	static const char *const keys[] = { "connect_timeout", "application_name",
	    "keepalives_idle", "keepalives_interval", "keepalives_count", "dbname", NULL };
	const char *vals[] = { PG_CONNECT_TIMEOUT, "airlockd", "30", "10", "3", conninfo, NULL };
	struct store *st;
	struct pg *p;
	PGconn *conn;

	conn = PQconnectdbParams(keys, vals, 1);
	if (conn == NULL) {
		cause_set(cause, "store: PostgreSQL: out of memory");
		return NULL;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		pg_cause(cause, "connect to PostgreSQL", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	PQsetNoticeProcessor(conn, pg_notice, NULL);
	p = xcalloc(1, sizeof(*p));
	p->conn = conn;
	st = xcalloc(1, sizeof(*st));
	st->ops = &pg_ops;
	st->impl = p;
	if (pg_migrate(st, cause) == -1) {
		pg_close(st);
		return NULL;
	}
	return st;
}
