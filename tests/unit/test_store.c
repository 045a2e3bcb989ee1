/*
 * The store, one set of cases for both backends: migrations, sandboxes with
 * compare-and-set, filters and pagination, keys, events, secrets. "sqlite"
 * runs them on a temp file; "pg" on a private PostgreSQL started for the run.
 */
#include <unistd.h>

#include "common/util.h"
#include "db/store.h"
#include "pg_cluster.h"
#include "t.h"

static void
mk(struct store_sandbox *sb, const char *id, const char *state, const char *k, const char *v)
{
	memset(sb, 0, sizeof(*sb));
	snprintf(sb->id, sizeof(sb->id), "%s", id);
	snprintf(sb->project, sizeof(sb->project), "default");
	snprintf(sb->template_name, sizeof(sb->template_name), "base");
	snprintf(sb->state, sizeof(sb->state), "%s", state);
	sb->vcpus = 2;
	sb->memory_mb = 512;
	sb->env = json_pack("{s:s}", "A", "1");
	sb->metadata = json_pack("{s:s}", k, v);
	sb->network = json_pack("{s:s}", "mode", "none");
	sb->created_at = store_now_ms();
	sb->access_token = xstrdup("tok");
}

static void
test_sandboxes(struct store *st)
{
	struct store_sandbox a, b, c, got, *list;
	struct store_filter f;
	char *cause = NULL;
	size_t n, i;

	mk(&a, "aaa", "running", "team", "x");
	mk(&b, "bbb", "paused", "team", "y");
	mk(&c, "ccc", "running", "team", "x");
	CHECK(store_sandbox_insert(st, &a, &cause) == 0);
	CHECK(store_sandbox_insert(st, &b, &cause) == 0);
	CHECK(store_sandbox_insert(st, &c, &cause) == 0);
	CHECK(store_sandbox_insert(st, &a, &cause) == -1);	/* duplicate id */
	CHECK_CAUSE(cause, "insert sandbox");

	CHECK(store_sandbox_get(st, "bbb", &got, &cause) == 1);
	CHECK_STR(got.state, "paused");
	CHECK_STR(json_string_value(json_object_get(got.metadata, "team")), "y");
	CHECK_STR(got.access_token, "tok");
	CHECK(got.vcpus == 2 && got.memory_mb == 512);

	/* Compare-and-set: the second writer with a stale generation loses. */
	struct store_sandbox stale;
	CHECK(store_sandbox_get(st, "bbb", &stale, &cause) == 1);
	snprintf(got.state, sizeof(got.state), "running");
	CHECK(store_sandbox_update(st, &got, &cause) == 1);
	snprintf(stale.state, sizeof(stale.state), "deleting");
	CHECK(store_sandbox_update(st, &stale, &cause) == 0);
	store_sandbox_clear(&stale);
	store_sandbox_clear(&got);
	CHECK(store_sandbox_get(st, "bbb", &got, &cause) == 1);
	CHECK_STR(got.state, "running");
	CHECK(got.generation == 1);
	store_sandbox_clear(&got);
	CHECK(store_sandbox_get(st, "zzz", &got, &cause) == 0);

	/* Filters and pagination. */
	memset(&f, 0, sizeof(f));
	f.metadata = json_pack("{s:s}", "team", "x");
	CHECK(store_sandbox_list(st, &f, &list, &n, &cause) == 0 && n == 2);
	json_decref(f.metadata);
	for (i = 0; i < n; i++)
		store_sandbox_clear(&list[i]);
	free(list);
	memset(&f, 0, sizeof(f));
	f.states = "paused,running";
	f.limit = 2;
	CHECK(store_sandbox_list(st, &f, &list, &n, &cause) == 0 && n == 2);
	CHECK_STR(list[1].id, "bbb");
	f.after = "bbb";
	for (i = 0; i < n; i++)
		store_sandbox_clear(&list[i]);
	free(list);
	CHECK(store_sandbox_list(st, &f, &list, &n, &cause) == 0 && n == 1);
	CHECK_STR(list[0].id, "ccc");
	store_sandbox_clear(&list[0]);
	free(list);
	/* A page that filters everything out does not end the list early. */
	memset(&f, 0, sizeof(f));
	f.metadata = json_pack("{s:s}", "team", "x");
	f.limit = 1;
	f.after = "aaa";
	CHECK(store_sandbox_list(st, &f, &list, &n, &cause) == 0 && n == 1);
	if (n == 1)
		CHECK_STR(list[0].id, "ccc");
	for (i = 0; i < n; i++)
		store_sandbox_clear(&list[i]);
	free(list);
	f.project = "other";
	CHECK(store_sandbox_list(st, &f, &list, &n, &cause) == 0 && n == 0);
	free(list);
	json_decref(f.metadata);

	CHECK(store_sandbox_delete(st, "aaa", &cause) == 1);
	CHECK(store_sandbox_delete(st, "aaa", &cause) == 0);
	store_sandbox_clear(&a);
	store_sandbox_clear(&b);
	store_sandbox_clear(&c);
	free(cause);
}

static void
test_keys_events(struct store *st)
{
	struct store_key k, got, *keys;
	struct store_event *ev;
	char *cause = NULL;
	size_t n;

	memset(&k, 0, sizeof(k));
	snprintf(k.id, sizeof(k.id), "key1");
	snprintf(k.project, sizeof(k.project), "default");
	snprintf(k.name, sizeof(k.name), "admin");
	snprintf(k.prefix, sizeof(k.prefix), "al_abc");
	snprintf(k.role, sizeof(k.role), "admin");
	CHECK(store_key_insert(st, &k, "hash1", &cause) == 0);
	CHECK(store_key_find(st, "hash1", &got, &cause) == 1);
	CHECK_STR(got.name, "admin");
	CHECK(store_key_find(st, "nope", &got, &cause) == 0);
	CHECK(store_key_count(st, &cause) == 1);
	CHECK(store_key_list(st, NULL, &keys, &n, &cause) == 0 && n == 1);
	free(keys);
	CHECK(store_key_delete(st, "key1", &cause) == 1);
	CHECK(store_key_count(st, &cause) == 0);

	CHECK(store_event_append(st, "s1", "default", "created", json_pack("{s:i}", "x", 1), &cause) > 0);
	CHECK(store_event_append(st, "s2", "default", "created", NULL, &cause) > 0);
	CHECK(store_event_append(st, "s1", "default", "deleted", NULL, &cause) > 0);
	CHECK(store_event_list(st, "s1", 0, 10, &ev, &n, &cause) == 0 && n == 2);
	CHECK_STR(ev[1].type, "deleted");
	CHECK(json_integer_value(json_object_get(ev[0].data, "x")) == 1);
	int64_t after = ev[0].seq;
	store_event_clear(&ev[0]);
	store_event_clear(&ev[1]);
	free(ev);
	CHECK(store_event_list(st, NULL, after, 10, &ev, &n, &cause) == 0 && n == 2);
	store_event_clear(&ev[0]);
	store_event_clear(&ev[1]);
	free(ev);
	free(cause);
}

static void
mksecret(struct store_secret *sec, const char *scope, const char *scope_id, const char *name,
    const char *value)
{
	memset(sec, 0, sizeof(*sec));
	sec->scope = xstrdup(scope);
	sec->scope_id = xstrdup(scope_id);
	sec->name = xstrdup(name);
	sec->sealedlen = strlen(value);
	sec->sealed = xmalloc(sec->sealedlen + 1);
	memcpy(sec->sealed, value, sec->sealedlen);
	sec->hosts = json_pack("[s,s]", "api.example.com", "*.example.org");
	sec->header = xstrdup("Authorization");
	sec->format = xstrdup("Bearer {value}");
}

static void
test_secrets(struct store *st)
{
	/* Bytes a text column would mangle: NUL, high bit, a quote. */
	static const uint8_t bin[] = { 0x00, 0xff, 0x27, 0x80, 0x00, 0x5c, 0x01 };
	struct store_secret a, got, *list;
	char *cause = NULL;
	int64_t created;
	size_t n, i;

	mksecret(&a, "global", "", "OPENAI_KEY", "sealed-1");
	CHECK(store_secret_put(st, &a, &cause) == 0);
	CHECK(store_secret_get(st, "global", "", "OPENAI_KEY", &got, &cause) == 1);
	CHECK_STR(got.scope, "global");
	CHECK_STR(got.scope_id, "");
	CHECK_STR(got.name, "OPENAI_KEY");
	CHECK(got.sealedlen == 8 && memcmp(got.sealed, "sealed-1", 8) == 0);
	CHECK(json_array_size(got.hosts) == 2);
	CHECK_STR(json_string_value(json_array_get(got.hosts, 1)), "*.example.org");
	CHECK_STR(got.header, "Authorization");
	CHECK_STR(got.format, "Bearer {value}");
	CHECK(got.created_at > 0 && got.updated_at == got.created_at);
	created = got.created_at;
	store_secret_clear(&got);
	CHECK(got.sealed == NULL && got.hosts == NULL);

	/* Same key again: replaced in place, created_at kept. */
	usleep(5000);
	free(a.sealed);
	a.sealed = xmalloc(sizeof(bin));
	memcpy(a.sealed, bin, sizeof(bin));
	a.sealedlen = sizeof(bin);
	json_decref(a.hosts);
	a.hosts = NULL;				/* stored as [] */
	free(a.format);
	a.format = NULL;
	CHECK(store_secret_put(st, &a, &cause) == 0);
	CHECK(store_secret_get(st, "global", "", "OPENAI_KEY", &got, &cause) == 1);
	CHECK(got.sealedlen == sizeof(bin) && memcmp(got.sealed, bin, sizeof(bin)) == 0);
	CHECK(json_is_array(got.hosts) && json_array_size(got.hosts) == 0);
	CHECK(got.format == NULL);
	CHECK(got.created_at == created && got.updated_at > created);
	store_secret_clear(&got);
	store_secret_clear(&a);

	/* Keyed by all three: the same name in other scopes is another secret. */
	mksecret(&a, "project", "p1", "OPENAI_KEY", "sealed-p1");
	CHECK(store_secret_put(st, &a, &cause) == 0);
	store_secret_clear(&a);
	mksecret(&a, "project", "p2", "OPENAI_KEY", "sealed-p2");
	CHECK(store_secret_put(st, &a, &cause) == 0);
	store_secret_clear(&a);
	mksecret(&a, "sandbox", "sb1", "GITHUB_TOKEN", "");	/* empty is allowed */
	CHECK(store_secret_put(st, &a, &cause) == 0);
	store_secret_clear(&a);
	CHECK(store_secret_get(st, "sandbox", "sb1", "GITHUB_TOKEN", &got, &cause) == 1);
	CHECK(got.sealedlen == 0 && got.sealed != NULL);
	store_secret_clear(&got);
	CHECK(store_secret_get(st, "project", "p3", "OPENAI_KEY", &got, &cause) == 0);
	CHECK(store_secret_get(st, "global", "", "openai_key", &got, &cause) == 0);

	CHECK(store_secret_list(st, NULL, NULL, &list, &n, &cause) == 0 && n == 4);
	if (n == 4) {
		/* Ordered by scope, scope_id, name. */
		CHECK_STR(list[0].scope, "global");
		CHECK_STR(list[1].scope_id, "p1");
		CHECK_STR(list[2].scope_id, "p2");
		CHECK_STR(list[3].name, "GITHUB_TOKEN");
		CHECK(memcmp(list[1].sealed, "sealed-p1", 9) == 0);
	}
	for (i = 0; i < n; i++)
		store_secret_clear(&list[i]);
	free(list);
	CHECK(store_secret_list(st, "project", NULL, &list, &n, &cause) == 0 && n == 2);
	for (i = 0; i < n; i++)
		store_secret_clear(&list[i]);
	free(list);
	CHECK(store_secret_list(st, "project", "p2", &list, &n, &cause) == 0 && n == 1);
	if (n == 1)
		CHECK(memcmp(list[0].sealed, "sealed-p2", 9) == 0);
	for (i = 0; i < n; i++)
		store_secret_clear(&list[i]);
	free(list);
	CHECK(store_secret_list(st, "sandbox", "nope", &list, &n, &cause) == 0 && n == 0);
	free(list);

	/* The schema refuses what the API should never send. */
	mksecret(&a, "galaxy", "", "X", "v");
	CHECK(store_secret_put(st, &a, &cause) == -1);
	CHECK_CAUSE(cause, "put secret");
	json_decref(a.hosts);
	a.hosts = json_pack("{s:s}", "not", "an array");
	free(a.scope);
	a.scope = xstrdup("global");
	CHECK(store_secret_put(st, &a, &cause) == -1);
	CHECK_CAUSE(cause, "array");
	store_secret_clear(&a);

	CHECK(store_secret_delete(st, "project", "p1", "OPENAI_KEY", &cause) == 1);
	CHECK(store_secret_delete(st, "project", "p1", "OPENAI_KEY", &cause) == 0);
	CHECK(store_secret_get(st, "project", "p2", "OPENAI_KEY", &got, &cause) == 1);
	store_secret_clear(&got);
	free(cause);
}

/* A second handle on the same database: CAS and event ids hold across connections. */
static void
test_two_handles(const char *url)
{
	struct store *st1, *st2;
	struct store_sandbox one, two;
	char *cause = NULL;
	int64_t e1, e2;

	st1 = store_open(url, &cause);
	st2 = store_open(url, &cause);
	CHECK(st1 != NULL && st2 != NULL);
	if (st1 == NULL || st2 == NULL) {
		store_close(st1);
		store_close(st2);
		free(cause);
		return;
	}
	CHECK(store_sandbox_get(st1, "ccc", &one, &cause) == 1);
	CHECK(store_sandbox_get(st2, "ccc", &two, &cause) == 1);
	snprintf(one.state, sizeof(one.state), "paused");
	snprintf(two.state, sizeof(two.state), "deleting");
	CHECK(store_sandbox_update(st2, &two, &cause) == 1);
	CHECK(store_sandbox_update(st1, &one, &cause) == 0);
	store_sandbox_clear(&one);
	CHECK(store_sandbox_get(st1, "ccc", &one, &cause) == 1);
	CHECK_STR(one.state, "deleting");
	CHECK(one.generation == two.generation);
	store_sandbox_clear(&one);
	store_sandbox_clear(&two);
	e1 = store_event_append(st1, "ccc", "default", "a", NULL, &cause);
	e2 = store_event_append(st2, "ccc", "default", "b", NULL, &cause);
	CHECK(e1 > 0 && e2 > e1);
	store_close(st1);
	store_close(st2);
	free(cause);
}

/* Everything a backend must do alike, on a fresh database at url. */
static int
run_cases(const char *url, const char *reopen_url)
{
	struct store *st;
	struct store_sandbox got;
	struct store_secret sec;
	char *cause = NULL;

	st = store_open(url, &cause);
	CHECK(st != NULL);
	if (st == NULL) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
		return -1;
	}
	CHECK(store_schema_version(st) >= 2);
	test_sandboxes(st);
	test_keys_events(st);
	test_secrets(st);
	store_close(st);
	test_two_handles(url);

	/* Reopening applies nothing twice and keeps the data. */
	st = store_open(reopen_url, &cause);
	CHECK(st != NULL);
	if (st == NULL) {
		fprintf(stderr, "%s\n", cause);
		free(cause);
		return -1;
	}
	CHECK(store_sandbox_get(st, "ccc", &got, &cause) == 1);
	store_sandbox_clear(&got);
	CHECK(store_schema_version(st) >= 2);
	CHECK(store_secret_get(st, "global", "", "OPENAI_KEY", &sec, &cause) == 1);
	store_secret_clear(&sec);
	store_close(st);
	free(cause);
	return 0;
}

static int
main_sqlite(void)
{
	char dir[] = "/tmp/airlock-store-XXXXXX", *url, *path, *cause = NULL;

	CHECK(mkdtemp(dir) != NULL);
	xasprintf(&url, "sqlite:%s/state.db", dir);
	xasprintf(&path, "%s/state.db", dir);	/* a plain path is SQLite too */
	run_cases(url, path);
	CHECK(store_open("mysql://x", &cause) == NULL);
	CHECK_CAUSE(cause, "unknown URL");
	CHECK(store_open("", &cause) == NULL);
	CHECK_CAUSE(cause, "unknown URL");
	CHECK(store_open("sqlite:/nonexistent/dir/x.db", &cause) == NULL);
	CHECK_CAUSE(cause, "open");
	remove_tree(dir, NULL);
	free(url);
	free(path);
	free(cause);
	return t_done();
}

/*
 * The server goes away under an open store: the next call fails saying so,
 * calls while it is down fail, and the first call after it is back works.
 */
static void
test_pg_reconnect(struct pg_cluster *pc)
{
	struct store_sandbox got;
	struct store *st;
	char *cause = NULL;

	st = store_open(pc->url, &cause);
	CHECK(st != NULL);
	if (st == NULL)
		return;
	pg_cluster_stop(pc);
	CHECK(store_sandbox_get(st, "ccc", &got, &cause) == -1);
	CHECK_CAUSE(cause, "get sandbox");
	CHECK_CAUSE(cause, "connection lost");
	CHECK(store_key_count(st, &cause) == -1);
	CHECK_CAUSE(cause, "unreachable");
	CHECK(pg_cluster_run(pc, &cause) == 0);
	CHECK(store_sandbox_get(st, "ccc", &got, &cause) == 1);
	store_sandbox_clear(&got);
	CHECK(store_event_append(st, "ccc", "default", "after-restart", NULL, &cause) > 0);
	store_close(st);
	free(cause);
}

static int
main_pg(void)
{
	struct pg_cluster pc;
	char *cause = NULL, *bad;
	int rc;

	if ((rc = pg_cluster_start(&pc, &cause)) == 1) {
		fprintf(stderr, "PostgreSQL binaries not found under /usr/lib/postgresql: skip\n");
		return 77;
	}
	CHECK(rc == 0);
	if (rc == -1) {
		fprintf(stderr, "pg cluster: %s\n", cause);
		pg_cluster_destroy(&pc);
		free(cause);
		return 1;
	}
	run_cases(pc.url, pc.conninfo);
	test_pg_reconnect(&pc);
	/* A server that is not there: an error naming the backend, no crash. */
	xasprintf(&bad, "host=%s/nonexistent user=airlock dbname=postgres connect_timeout=2", pc.dir);
	CHECK(store_open(bad, &cause) == NULL);
	CHECK_CAUSE(cause, "connect to PostgreSQL");
	free(bad);
	pg_cluster_destroy(&pc);
	free(cause);
	return t_done();
}

/* test_store sqlite | pg: the same cases against either backend. */
int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "sqlite") == 0)
		return main_sqlite();
	if (argc == 2 && strcmp(argv[1], "pg") == 0)
		return main_pg();
	fprintf(stderr, "usage: test_store sqlite|pg\n");
	return 2;
}
