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
	if (f->states != NULL && !csv_has(f->states, sb->state))
		return 0;
	if (f->worker != NULL && strcmp(f->worker, sb->worker) != 0)
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
store_sandbox_by_token(struct store *st, const char *token, struct store_sandbox *out,
    char **cause)
{
	return st->ops->sandbox_by_token(st, token, out, cause);
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
	free(sb->traffic_token);
	free(sb->snapshot);
	free(sb->origin);
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

int
store_snap_insert(struct store *st, const struct store_snap *sn, char **cause)
{
	return st->ops->snap_insert(st, sn, cause);
}

int
store_snap_get(struct store *st, const char *project, const char *name_or_id,
    struct store_snap *out, char **cause)
{
	return st->ops->snap_get(st, project, name_or_id, out, cause);
}

int
store_snap_list(struct store *st, const char *project, struct store_snap **out, size_t *n,
    char **cause)
{
	return st->ops->snap_list(st, project, out, n, cause);
}

int
store_snap_delete(struct store *st, const char *id, char **cause)
{
	return st->ops->snap_delete(st, id, cause);
}

void
store_snap_clear(struct store_snap *sn)
{
	json_decref(sn->env);
	json_decref(sn->network);
	memset(sn, 0, sizeof(*sn));
}

int
store_template_put(struct store *st, const struct store_template *t, char **cause)
{
	return st->ops->template_put(st, t, cause);
}

int
store_template_touch(struct store *st, const char *name, int64_t now, char **cause)
{
	return st->ops->template_touch(st, name, now, cause);
}

int
store_template_list(struct store *st, struct store_template **out, size_t *n, char **cause)
{
	return st->ops->template_list(st, out, n, cause);
}

int
store_template_delete(struct store *st, const char *name, char **cause)
{
	return st->ops->template_delete(st, name, cause);
}

int
store_volume_insert(struct store *st, const struct store_volume *v, char **cause)
{
	return st->ops->volume_insert(st, v, cause);
}

int
store_volume_get(struct store *st, const char *project, const char *name,
    struct store_volume *out, char **cause)
{
	return st->ops->volume_get(st, project, name, out, cause);
}

int
store_volume_list(struct store *st, const char *project, struct store_volume **out,
    size_t *n, char **cause)
{
	return st->ops->volume_list(st, project, out, n, cause);
}

int
store_volume_delete(struct store *st, const char *project, const char *name, char **cause)
{
	return st->ops->volume_delete(st, project, name, cause);
}

int
store_volume_attach(struct store *st, const char *project, const struct store_attachment *a,
    char **cause)
{
	return st->ops->volume_attach(st, project, a, cause);
}

int
store_volume_detach(struct store *st, const char *sandbox, char **cause)
{
	return st->ops->volume_detach(st, sandbox, cause);
}

int
store_volume_attachments(struct store *st, const char *sandbox, struct store_attachment **out,
    size_t *n, char **cause)
{
	return st->ops->volume_attachments(st, sandbox, out, n, cause);
}

int
store_worker_register(struct store *st, struct store_worker *w, char **cause)
{
	return st->ops->worker_register(st, w, cause);
}

int
store_worker_heartbeat(struct store *st, const struct store_worker *w, char **cause)
{
	return st->ops->worker_heartbeat(st, w, cause);
}

int
store_worker_get(struct store *st, const char *name, struct store_worker *out, char **cause)
{
	return st->ops->worker_get(st, name, out, cause);
}

int
store_worker_list(struct store *st, struct store_worker **out, size_t *n, char **cause)
{
	return st->ops->worker_list(st, out, n, cause);
}

int
store_worker_delete(struct store *st, const char *name, char **cause)
{
	return st->ops->worker_delete(st, name, cause);
}

void
store_worker_clear(struct store_worker *w)
{
	json_decref(w->labels);
	json_decref(w->abi);
	json_decref(w->templates);
	w->labels = w->abi = w->templates = NULL;
}

int
store_quota_put(struct store *st, const struct store_quota *q, char **cause)
{
	return st->ops->quota_put(st, q, cause);
}

int
store_quota_get(struct store *st, const char *project, struct store_quota *out, char **cause)
{
	return st->ops->quota_get(st, project, out, cause);
}

int
store_quota_delete(struct store *st, const char *project, char **cause)
{
	return st->ops->quota_delete(st, project, cause);
}

int
store_usage(struct store *st, const char *project, struct store_usage *out, char **cause)
{
	return st->ops->usage(st, project, out, cause);
}

int
store_project_lock(struct store *st, const char *project, char **cause)
{
	return st->ops->project_lock(st, project, cause);
}

void
store_project_unlock(struct store *st, const char *project)
{
	st->ops->project_unlock(st, project);
}
