/*
 * The store, one set of cases for both backends: migrations, sandboxes with
 * compare-and-set, filters and pagination, keys, events, secrets. "sqlite"
 * runs them on a temp file; "pg" on a private PostgreSQL started for the run.
 */
#include <sys/wait.h>
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
	free(b.access_token);
	b.access_token = xstrdup("tok-b");
	CHECK(store_sandbox_insert(st, &a, &cause) == 0);
	CHECK(store_sandbox_insert(st, &b, &cause) == 0);
	CHECK(store_sandbox_insert(st, &c, &cause) == 0);
	CHECK(store_sandbox_insert(st, &a, &cause) == -1);	/* duplicate id */
	CHECK_CAUSE(cause, "insert sandbox");

	CHECK(store_sandbox_get(st, "bbb", &got, &cause) == 1);
	CHECK_STR(got.state, "paused");
	CHECK_STR(json_string_value(json_object_get(got.metadata, "team")), "y");
	CHECK_STR(got.access_token, "tok-b");
	CHECK(got.vcpus == 2 && got.memory_mb == 512);
	store_sandbox_clear(&got);
	CHECK(store_sandbox_by_token(st, "tok-b", &got, &cause) == 1);
	CHECK_STR(got.id, "bbb");
	store_sandbox_clear(&got);
	CHECK(store_sandbox_by_token(st, "tok-nope", &got, &cause) == 0);
	CHECK(store_sandbox_get(st, "bbb", &got, &cause) == 1);

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

/* Named snapshots: insert, get by name or id within a project, list, delete; origin. */
static void
test_snaps(struct store *st)
{
	struct store_snap a, b, got, *list;
	struct store_sandbox sb, sbgot;
	char *cause = NULL;
	size_t n, i;

	memset(&a, 0, sizeof(a));
	snprintf(a.id, sizeof(a.id), "snapaaa");
	snprintf(a.project, sizeof(a.project), "default");
	snprintf(a.name, sizeof(a.name), "warm");
	snprintf(a.source, sizeof(a.source), "aaa");
	snprintf(a.template_name, sizeof(a.template_name), "base");
	a.vcpus = 1;
	a.memory_mb = 512;
	a.env = json_pack("{s:s}", "K", "v");
	a.network = json_pack("{s:s,s:[]}", "mode", "full", "allow");
	a.created_at = store_now_ms();
	b = a;
	snprintf(b.id, sizeof(b.id), "snapbbb");
	snprintf(b.project, sizeof(b.project), "other");
	snprintf(b.worker, sizeof(b.worker), "w7");	/* a in direct mode: "" */
	b.created_at = a.created_at + 1;
	CHECK(store_snap_insert(st, &a, &cause) == 0);
	CHECK(store_snap_insert(st, &b, &cause) == 0);	/* same name, another project */
	CHECK(store_snap_insert(st, &a, &cause) == -1);	/* duplicate id */
	CHECK_CAUSE(cause, "insert snapshot");
	snprintf(a.id, sizeof(a.id), "snapccc");
	CHECK(store_snap_insert(st, &a, &cause) == -1);	/* duplicate name in its project */
	CHECK_CAUSE(cause, "insert snapshot");
	snprintf(a.id, sizeof(a.id), "snapaaa");

	CHECK(store_snap_get(st, "default", "warm", &got, &cause) == 1);
	CHECK_STR(got.id, "snapaaa");
	CHECK_STR(got.source, "aaa");
	CHECK(got.vcpus == 1 && got.memory_mb == 512);
	CHECK_STR(json_string_value(json_object_get(got.env, "K")), "v");
	CHECK_STR(json_string_value(json_object_get(got.network, "mode")), "full");
	store_snap_clear(&got);
	CHECK(store_snap_get(st, "default", "snapaaa", &got, &cause) == 1);
	CHECK_STR(got.name, "warm");
	CHECK_STR(got.worker, "");
	store_snap_clear(&got);
	CHECK(store_snap_get(st, "other", "warm", &got, &cause) == 1);
	CHECK_STR(got.id, "snapbbb");
	CHECK_STR(got.worker, "w7");
	store_snap_clear(&got);
	CHECK(store_snap_get(st, "other", "snapaaa", &got, &cause) == 0);	/* another project's */
	CHECK(store_snap_get(st, "default", "nope", &got, &cause) == 0);

	CHECK(store_snap_list(st, "default", &list, &n, &cause) == 0);
	CHECK(n == 1);
	for (i = 0; i < n; i++)
		store_snap_clear(&list[i]);
	free(list);
	CHECK(store_snap_list(st, NULL, &list, &n, &cause) == 0);
	CHECK(n == 2);
	if (n == 2)
		CHECK_STR(list[0].id, "snapaaa");
	for (i = 0; i < n; i++)
		store_snap_clear(&list[i]);
	free(list);

	CHECK(store_snap_delete(st, "snapbbb", &cause) == 1);
	CHECK(store_snap_delete(st, "snapbbb", &cause) == 0);
	CHECK(store_snap_delete(st, "snapaaa", &cause) == 1);
	json_decref(a.env);
	json_decref(a.network);

	/* A sandbox's origin is kept through insert and update. */
	mk(&sb, "snaporigin", "creating", "k", "v");
	sb.origin = xstrdup("snapshot:snapaaa");
	CHECK(store_sandbox_insert(st, &sb, &cause) == 0);
	CHECK(store_sandbox_get(st, "snaporigin", &sbgot, &cause) == 1);
	CHECK_STR(sbgot.origin, "snapshot:snapaaa");
	free(sbgot.origin);
	sbgot.origin = xstrdup("fork:aaa");
	CHECK(store_sandbox_update(st, &sbgot, &cause) == 1);
	store_sandbox_clear(&sbgot);
	CHECK(store_sandbox_get(st, "snaporigin", &sbgot, &cause) == 1);
	CHECK_STR(sbgot.origin, "fork:aaa");
	store_sandbox_clear(&sbgot);
	CHECK(store_sandbox_delete(st, "snaporigin", &cause) == 1);
	store_sandbox_clear(&sb);
	free(cause);
}

/* Lifetime accounting and autoResume (migration 6) survive insert, update and a re-read. */
static void
test_lifecycle_cols(struct store *st)
{
	struct store_sandbox sb, got;
	char *cause = NULL;

	mk(&sb, "lifecyclecols", "creating", "k", "v");
	sb.paused_at = 1234567890123LL;
	sb.auto_resume = 1;
	sb.traffic_token = xstrdup("traffic-tok");	/* migration 7 */
	CHECK(store_sandbox_insert(st, &sb, &cause) == 0);
	CHECK(store_sandbox_get(st, "lifecyclecols", &got, &cause) == 1);
	CHECK(got.paused_at == 1234567890123LL);
	CHECK(got.auto_resume == 1);
	CHECK_STR(got.traffic_token, "traffic-tok");
	got.paused_at = 0;
	got.auto_resume = 0;
	free(got.traffic_token);
	got.traffic_token = NULL;
	CHECK(store_sandbox_update(st, &got, &cause) == 1);
	store_sandbox_clear(&got);
	CHECK(store_sandbox_get(st, "lifecyclecols", &got, &cause) == 1);
	CHECK(got.paused_at == 0 && got.auto_resume == 0 && got.traffic_token == NULL);
	store_sandbox_clear(&got);
	CHECK(store_sandbox_delete(st, "lifecyclecols", &cause) == 1);
	CHECK(store_schema_version(st) >= 7);
	store_sandbox_clear(&sb);
	free(cause);
}

/* Template records: put (a rebuild keeps the last use), touch, list in order, delete. */
static void
test_templates(struct store *st)
{
	struct store_template t, *list = NULL;
	char *cause = NULL;
	size_t n = 0;

	memset(&t, 0, sizeof(t));
	snprintf(t.name, sizeof(t.name), "py");
	t.image_bytes = 4LL << 30;
	t.allocated_bytes = 400LL << 20;
	t.built_at = 1000;
	CHECK(store_template_put(st, &t, &cause) == 0);
	snprintf(t.name, sizeof(t.name), "base");
	CHECK(store_template_put(st, &t, &cause) == 0);
	CHECK(store_template_touch(st, "nope", 5, &cause) == 0);
	CHECK(store_template_touch(st, "py", 2000, &cause) == 1);
	/* A rebuild: new sizes, the last use stays. */
	snprintf(t.name, sizeof(t.name), "py");
	t.allocated_bytes = 500LL << 20;
	t.built_at = 3000;
	CHECK(store_template_put(st, &t, &cause) == 0);
	CHECK(store_template_list(st, &list, &n, &cause) == 0 && n == 2);
	if (n == 2) {
		CHECK_STR(list[0].name, "base");
		CHECK(list[0].last_used_at == 0);
		CHECK_STR(list[1].name, "py");
		CHECK(list[1].last_used_at == 2000 && list[1].built_at == 3000 &&
		    list[1].allocated_bytes == 500LL << 20 && list[1].image_bytes == 4LL << 30);
	}
	free(list);
	CHECK(store_template_delete(st, "py", &cause) == 1);
	CHECK(store_template_delete(st, "py", &cause) == 0);
	CHECK(store_template_list(st, &list, &n, &cause) == 0 && n == 1);
	free(list);
	if (cause != NULL)
		fprintf(stderr, "cause: %s\n", cause);
	free(cause);
}

/* Volumes: names per project, one read-write or many read-only attachments. */
static void
test_volumes(struct store *st)
{
	struct store_volume v, *all = NULL;
	struct store_attachment a, *atts = NULL;
	char *cause = NULL;
	size_t n = 0;

	memset(&v, 0, sizeof(v));
	snprintf(v.project, sizeof(v.project), "p1");
	snprintf(v.name, sizeof(v.name), "data");
	v.size_mb = 512;
	CHECK(store_volume_insert(st, &v, &cause) == 1);
	CHECK(store_volume_insert(st, &v, &cause) == 0);
	snprintf(v.project, sizeof(v.project), "p2");	/* the same name in another project */
	snprintf(v.worker, sizeof(v.worker), "w3");	/* a cluster worker's */
	CHECK(store_volume_insert(st, &v, &cause) == 1);
	CHECK(store_volume_get(st, "p2", "data", &v, &cause) == 1);
	CHECK_STR(v.worker, "w3");
	CHECK(store_volume_get(st, "p1", "data", &v, &cause) == 1);
	CHECK(v.size_mb == 512 && v.created_at > 0 && v.last_used_at == 0 && v.attached == 0);
	CHECK_STR(v.worker, "");
	CHECK(store_volume_get(st, "p1", "nope", &v, &cause) == 0);

	memset(&a, 0, sizeof(a));
	snprintf(a.volume, sizeof(a.volume), "data");
	snprintf(a.sandbox, sizeof(a.sandbox), "sb1");
	snprintf(a.path, sizeof(a.path), "/data");
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 1);
	snprintf(a.sandbox, sizeof(a.sandbox), "sb2");
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 0);
	CHECK_CAUSE(cause, "sb1");
	a.read_only = 1;
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 0);	/* ro beside a rw: no */
	CHECK(store_volume_attach(st, "p2", &a, &cause) == 1);	/* p2's own volume */
	snprintf(a.volume, sizeof(a.volume), "nope");
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 2);
	CHECK(store_volume_delete(st, "p1", "data", &cause) == 2);	/* attached: kept */
	CHECK(store_volume_get(st, "p1", "data", &v, &cause) == 1);
	CHECK(v.attached == 1 && v.last_used_at > 0);
	CHECK(store_volume_attachments(st, "sb1", &atts, &n, &cause) == 0 && n == 1);
	if (n == 1)
		CHECK_STR(atts[0].path, "/data");
	free(atts);
	CHECK(store_volume_detach(st, "sb1", &cause) == 0);
	/* Many read-only ones once nobody writes; then a read-write one is refused. */
	snprintf(a.volume, sizeof(a.volume), "data");
	snprintf(a.sandbox, sizeof(a.sandbox), "sb3");
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 1);
	snprintf(a.sandbox, sizeof(a.sandbox), "sb4");
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 1);
	a.read_only = 0;
	snprintf(a.sandbox, sizeof(a.sandbox), "sb5");
	CHECK(store_volume_attach(st, "p1", &a, &cause) == 0);
	CHECK(store_volume_detach(st, "sb3", &cause) == 0);
	CHECK(store_volume_detach(st, "sb4", &cause) == 0);
	CHECK(store_volume_list(st, NULL, &all, &n, &cause) == 0 && n == 2);
	free(all);
	CHECK(store_volume_list(st, "p1", &all, &n, &cause) == 0 && n == 1);
	free(all);
	CHECK(store_volume_delete(st, "p1", "data", &cause) == 1);
	CHECK(store_volume_delete(st, "p1", "data", &cause) == 0);
	free(cause);
}

/* Workers: registration bumps the epoch, a heartbeat under an old epoch is fenced. */
static void
test_workers(struct store *st)
{
	struct store_worker w, w2, got, *list;
	struct store_sandbox a, b, *sl;
	struct store_filter f;
	char *cause = NULL;
	size_t n, i;

	memset(&w, 0, sizeof(w));
	snprintf(w.name, sizeof(w.name), "w1");
	snprintf(w.addr, sizeof(w.addr), "10.77.0.11:7071");
	w.labels = json_pack("{s:s}", "zone", "a");
	w.abi = json_pack("{s:s,s:s}", "qemu", "7.2", "accel", "tcg");
	w.templates = json_pack("[s]", "base");
	w.vcpus = 2;
	w.memory_mb = 24576;
	w.started_at = w.heartbeat_at = store_now_ms();
	CHECK(store_worker_register(st, &w, &cause) == 0);
	CHECK(w.epoch == 1);
	w.used_vcpus = 4;
	w.used_memory_mb = 1024;
	w.sandboxes = 2;
	w.pool_ready = 3;
	snprintf(w.state, sizeof(w.state), "draining");
	w.heartbeat_at += 2000;
	CHECK(store_worker_heartbeat(st, &w, &cause) == 1);
	CHECK(store_worker_get(st, "w1", &got, &cause) == 1);
	CHECK_STR(got.addr, "10.77.0.11:7071");
	CHECK_STR(got.state, "draining");
	CHECK(got.used_vcpus == 4 && got.used_memory_mb == 1024 && got.sandboxes == 2 &&
	    got.pool_ready == 3 && got.memory_mb == 24576 && got.epoch == 1);
	CHECK(got.heartbeat_at == w.heartbeat_at);
	CHECK_STR(json_string_value(json_object_get(got.labels, "zone")), "a");
	CHECK_STR(json_string_value(json_object_get(got.abi, "accel")), "tcg");
	CHECK_STR(json_string_value(json_array_get(got.templates, 0)), "base");
	store_worker_clear(&got);
	/* The same name registers again (a restart, or a replacement): the old epoch is fenced. */
	w2 = w;
	w2.labels = json_incref(w.labels);
	w2.abi = json_incref(w.abi);
	w2.templates = json_incref(w.templates);
	CHECK(store_worker_register(st, &w2, &cause) == 0);
	CHECK(w2.epoch == 2);
	CHECK(store_worker_heartbeat(st, &w, &cause) == 0);
	CHECK(store_worker_heartbeat(st, &w2, &cause) == 1);
	snprintf(w2.name, sizeof(w2.name), "w0");
	CHECK(store_worker_register(st, &w2, &cause) == 0 && w2.epoch == 1);
	CHECK(store_worker_list(st, &list, &n, &cause) == 0);
	CHECK(n == 2 && strcmp(list[0].name, "w0") == 0 && strcmp(list[1].name, "w1") == 0);
	for (i = 0; i < n; i++)
		store_worker_clear(&list[i]);
	free(list);
	CHECK(store_worker_delete(st, "w0", &cause) == 1);
	CHECK(store_worker_delete(st, "w0", &cause) == 0);
	CHECK(store_worker_get(st, "w0", &got, &cause) == 0);
	store_worker_clear(&w);
	store_worker_clear(&w2);

	/* Sandboxes carry their worker; a list can ask for one worker's. */
	mk(&a, "wk-a", "running", "k", "v");
	mk(&b, "wk-b", "running", "k", "v");
	snprintf(a.worker, sizeof(a.worker), "w1");
	CHECK(store_sandbox_insert(st, &a, &cause) == 0);
	CHECK(store_sandbox_insert(st, &b, &cause) == 0);
	memset(&f, 0, sizeof(f));
	f.after = "wk-";
	f.worker = "w1";
	CHECK(store_sandbox_list(st, &f, &sl, &n, &cause) == 0);
	CHECK(n == 1 && strcmp(sl[0].id, "wk-a") == 0 && strcmp(sl[0].worker, "w1") == 0);
	for (i = 0; i < n; i++)
		store_sandbox_clear(&sl[i]);
	free(sl);
	f.worker = "";
	CHECK(store_sandbox_list(st, &f, &sl, &n, &cause) == 0);
	CHECK(n == 1 && strcmp(sl[0].id, "wk-b") == 0);
	for (i = 0; i < n; i++)
		store_sandbox_clear(&sl[i]);
	free(sl);
	snprintf(b.worker, sizeof(b.worker), "w2");
	CHECK(store_sandbox_update(st, &b, &cause) == 1);
	store_sandbox_clear(&b);
	CHECK(store_sandbox_get(st, "wk-b", &b, &cause) == 1);
	CHECK_STR(b.worker, "w2");
	store_sandbox_clear(&a);
	store_sandbox_clear(&b);
	free(cause);
}

/* Quotas: put/get/delete; usage counts a project's live sandboxes only. */
static void
test_quotas(struct store *st)
{
	struct store_quota q, got;
	struct store_usage u;
	struct store_sandbox a, b, c;
	char *cause = NULL;

	CHECK(store_quota_get(st, "qp", &got, &cause) == 0);
	memset(&q, 0, sizeof(q));
	snprintf(q.project, sizeof(q.project), "qp");
	q.max_sandboxes = 2;
	q.max_vcpus = 8;
	q.max_memory_mb = 4096;
	CHECK(store_quota_put(st, &q, &cause) == 0);
	CHECK(store_quota_get(st, "qp", &got, &cause) == 1);
	CHECK(got.max_sandboxes == 2 && got.max_vcpus == 8 && got.max_memory_mb == 4096 &&
	    got.updated_at > 0);
	q.max_sandboxes = 3;
	CHECK(store_quota_put(st, &q, &cause) == 0);
	CHECK(store_quota_get(st, "qp", &got, &cause) == 1 && got.max_sandboxes == 3);
	mk(&a, "qa", "running", "k", "v");
	mk(&b, "qb", "suspended", "k", "v");
	mk(&c, "qc", "creating", "k", "v");
	snprintf(a.project, sizeof(a.project), "qp");
	snprintf(b.project, sizeof(b.project), "qp");
	snprintf(c.project, sizeof(c.project), "qp");
	c.vcpus = 4;
	c.memory_mb = 1024;
	CHECK(store_sandbox_insert(st, &a, &cause) == 0);
	CHECK(store_sandbox_insert(st, &b, &cause) == 0);
	CHECK(store_sandbox_insert(st, &c, &cause) == 0);
	CHECK(store_usage(st, "qp", &u, &cause) == 0);
	/* A suspended sandbox holds nothing of the host's. */
	CHECK(u.sandboxes == 2 && u.vcpus == 6 && u.memory_mb == 1536);
	CHECK(store_usage(st, "nobody", &u, &cause) == 0 && u.sandboxes == 0 && u.vcpus == 0);
	CHECK(store_project_lock(st, "qp", &cause) == 0);
	store_project_unlock(st, "qp");
	CHECK(store_quota_delete(st, "qp", &cause) == 1);
	CHECK(store_quota_get(st, "qp", &got, &cause) == 0);
	store_sandbox_clear(&a);
	store_sandbox_clear(&b);
	store_sandbox_clear(&c);
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
	CHECK(store_schema_version(st) >= 3);
	test_sandboxes(st);
	test_keys_events(st);
	test_secrets(st);
	test_snaps(st);
	test_lifecycle_cols(st);
	test_templates(st);
	test_volumes(st);
	test_workers(st);
	test_quotas(st);
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
	CHECK(store_schema_version(st) >= 3);
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

/*
 * The quota lock holds across connections (two workers): while one handle
 * holds a project's lock, another blocks on it, and gets it once released.
 */
static void
test_pg_project_lock(const char *url)
{
	struct store *st1;
	char *cause = NULL;
	pid_t pid;
	int status;

	if ((st1 = store_open(url, &cause)) == NULL) {
		CHECK(0);
		free(cause);
		return;
	}
	CHECK(store_project_lock(st1, "p1", &cause) == 0);
	if ((pid = fork()) == 0) {
		struct store *st2 = store_open(url, NULL);
		/* Another project is not held up; this one waits for st1. */
		if (st2 == NULL || store_project_lock(st2, "p2", NULL) == -1)
			_exit(2);
		store_project_unlock(st2, "p2");
		_exit(store_project_lock(st2, "p1", NULL) == 0 ? 0 : 3);
	}
	CHECK(pid > 0);
	usleep(500 * 1000);
	/* Still waiting (a child that was not blocked would have exited by now). */
	CHECK(waitpid(pid, &status, WNOHANG) == 0);
	store_project_unlock(st1, "p1");
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	store_close(st1);
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
	test_pg_project_lock(pc.url);
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
