/* Store front end: picks the backend from the URL and forwards. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "db/store_impl.h"

int64_t
store_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Does the comma-separated list contain state? */
static int
state_in(const char *list, const char *state)
{
	size_t n = strlen(state);
	const char *p = list;

	while (*p != '\0') {
		size_t m = strcspn(p, ",");
		if (m == n && strncmp(p, state, n) == 0)
			return 1;
		p += m;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int
metadata_match(json_t *want, json_t *have)
{
	const char *k;
	json_t *v;

	if (want == NULL)
		return 1;
	json_object_foreach(want, k, v) {
		json_t *h = json_object_get(have, k);
		if (h == NULL || !json_equal(h, v))
			return 0;
	}
	return 1;
}

int
store_filter_match(const struct store_filter *f, const struct store_sandbox *sb)
{
	if (f->states != NULL && !state_in(f->states, sb->state))
		return 0;
	return metadata_match(f->metadata, sb->metadata);
}

int
store_limit(int limit)
{
	return limit > 0 && limit <= STORE_LIST_LIMIT_MAX ? limit : STORE_LIST_LIMIT_DEFAULT;
}

/* libpq keyword=value form: starts with a keyword, then '=' ("host=/run/postgresql ..."). */
static int
is_conninfo(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz_");

	return n > 0 && s[n + strspn(s + n, " ")] == '=';
}

/*
 * sqlite:PATH or a plain path: SQLite. A postgres:// or postgresql:// URL,
 * or a libpq keyword=value string: PostgreSQL. Any other scheme is refused
 * rather than taken for a file name.
 */
struct store *
store_open(const char *url, char **cause)
{
	if (strncmp(url, "sqlite:", 7) == 0)
		return store_sqlite_open(url + 7, cause);
	if (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0 ||
	    is_conninfo(url))
		return store_pg_open(url, cause);
	if (*url == '\0' || strstr(url, "://") != NULL) {
		cause_set(cause, "store: unknown URL \"%s\" (want sqlite:PATH, a path,"
		    " postgres://... or host=... dbname=...)", url);
		return NULL;
	}
	return store_sqlite_open(url, cause);
}

void
store_close(struct store *st)
{
	if (st != NULL)
		st->ops->close(st);
}

int
store_schema_version(struct store *st)
{
	return st->ops->schema_version(st);
}

int
store_sandbox_insert(struct store *st, const struct store_sandbox *sb, char **cause)
{
	return st->ops->sandbox_insert(st, sb, cause);
}

int
store_sandbox_get(struct store *st, const char *id, struct store_sandbox *out, char **cause)
{
	return st->ops->sandbox_get(st, id, out, cause);
}

int
store_sandbox_update(struct store *st, struct store_sandbox *sb, char **cause)
{
	return st->ops->sandbox_update(st, sb, cause);
}

int
store_sandbox_delete(struct store *st, const char *id, char **cause)
{
	return st->ops->sandbox_delete(st, id, cause);
}

int
store_sandbox_list(struct store *st, const struct store_filter *f, struct store_sandbox **out,
    size_t *n, char **cause)
{
	return st->ops->sandbox_list(st, f, out, n, cause);
}

void
store_sandbox_clear(struct store_sandbox *sb)
{
	json_decref(sb->env);
	json_decref(sb->metadata);
	json_decref(sb->network);
	free(sb->error);
	free(sb->access_token);
	free(sb->snapshot);
	memset(sb, 0, sizeof(*sb));
}

int
store_key_insert(struct store *st, const struct store_key *k, const char *hash, char **cause)
{
	return st->ops->key_insert(st, k, hash, cause);
}

int
store_key_find(struct store *st, const char *hash, struct store_key *out, char **cause)
{
	return st->ops->key_find(st, hash, out, cause);
}

int
store_key_list(struct store *st, const char *project, struct store_key **out, size_t *n,
    char **cause)
{
	return st->ops->key_list(st, project, out, n, cause);
}

int
store_key_delete(struct store *st, const char *id, char **cause)
{
	return st->ops->key_delete(st, id, cause);
}

int
store_key_count(struct store *st, char **cause)
{
	return st->ops->key_count(st, cause);
}

int64_t
store_event_append(struct store *st, const char *sandbox, const char *project,
    const char *type, json_t *data, char **cause)
{
	return st->ops->event_append(st, sandbox, project, type, data, cause);
}

int
store_event_list(struct store *st, const char *sandbox, int64_t after, int limit,
    struct store_event **out, size_t *n, char **cause)
{
	return st->ops->event_list(st, sandbox, after, limit, out, n, cause);
}

void
store_event_clear(struct store_event *ev)
{
	json_decref(ev->data);
	memset(ev, 0, sizeof(*ev));
}

int
store_secret_put(struct store *st, const struct store_secret *sec, char **cause)
{
	return st->ops->secret_put(st, sec, cause);
}

int
store_secret_get(struct store *st, const char *scope, const char *scope_id, const char *name,
    struct store_secret *out, char **cause)
{
	return st->ops->secret_get(st, scope, scope_id, name, out, cause);
}

int
store_secret_list(struct store *st, const char *scope, const char *scope_id,
    struct store_secret **out, size_t *n, char **cause)
{
	return st->ops->secret_list(st, scope, scope_id, out, n, cause);
}

int
store_secret_delete(struct store *st, const char *scope, const char *scope_id,
    const char *name, char **cause)
{
	return st->ops->secret_delete(st, scope, scope_id, name, cause);
}

void
store_secret_clear(struct store_secret *sec)
{
	free(sec->scope);
	free(sec->scope_id);
	free(sec->name);
	/* Ciphertext only, but there is no reason to leave it in freed memory. */
	if (sec->sealed != NULL)
		explicit_bzero(sec->sealed, sec->sealedlen);
	free(sec->sealed);
	json_decref(sec->hosts);
	free(sec->header);
	free(sec->format);
	memset(sec, 0, sizeof(*sec));
}
