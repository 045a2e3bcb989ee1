/* The SQLite store: migrations, sandboxes with compare-and-set, keys, events. */
#include <unistd.h>

#include "common/util.h"
#include "store/store.h"
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
	CHECK_CAUSE(cause, "UNIQUE");

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

int
main(void)
{
	char dir[] = "/tmp/airlock-store-XXXXXX", *url, *cause = NULL;
	struct store *st;

	CHECK(mkdtemp(dir) != NULL);
	xasprintf(&url, "sqlite:%s/state.db", dir);
	st = store_open(url, &cause);
	CHECK(st != NULL);
	if (st == NULL) {
		fprintf(stderr, "%s\n", cause);
		return 1;
	}
	CHECK(store_schema_version(st) >= 1);
	test_sandboxes(st);
	test_keys_events(st);
	store_close(st);
	/* Reopening applies nothing twice and keeps the data. */
	st = store_open(url, &cause);
	CHECK(st != NULL);
	struct store_sandbox got;
	CHECK(store_sandbox_get(st, "ccc", &got, &cause) == 1);
	store_sandbox_clear(&got);
	store_close(st);
	CHECK(store_open("mysql://x", &cause) == NULL);
	CHECK_CAUSE(cause, "unknown URL");
	CHECK(store_open("sqlite:/nonexistent/dir/x.db", &cause) == NULL);
	CHECK_CAUSE(cause, "open");
	remove_tree(dir, NULL);
	free(url);
	free(cause);
	return t_done();
}
