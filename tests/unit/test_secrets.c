/* Secret sealing: round trip, bound additional data, tamper detection, scope precedence, key file checks. */
#include <sys/stat.h>

#include <fcntl.h>
#include <unistd.h>

#include "common/util.h"
#include "egress/secrets.h"
#include "db/store.h"
#include "t.h"

static char dir[] = "/tmp/airlock-test-secrets-XXXXXX";

static char *
keypath(void)
{
	char *p;

	xasprintf(&p, "%s/%s", dir, SECRETS_KEY_FILE);
	return p;
}

static void
test_round_trip(void)
{
	char *cause = NULL, *v, *kp = keypath();
	uint8_t *s1, *s2;
	size_t n1, n2;
	struct stat sb;

	CHECK(secrets_init(dir, &cause) == 0);
	CHECK(!path_exists(kp));	/* created on first seal, not before */
	CHECK(secrets_seal("project", "p1", "TOKEN", "hunter2", &s1, &n1, &cause) == 0);
	CHECK(stat(kp, &sb) == 0 && (sb.st_mode & 0777) == 0600 && sb.st_size == SECRETS_KEY_LEN);
	CHECK(n1 == SECRETS_OVERHEAD + 7);
	CHECK(s1[0] == SECRETS_VERSION);
	CHECK(memmem(s1, n1, "hunter2", 7) == NULL);
	v = secrets_unseal("project", "p1", "TOKEN", s1, n1, &cause);
	CHECK_STR(v, "hunter2");
	secrets_free_value(v);

	/* Fresh nonce each time: sealing twice gives different bytes. */
	CHECK(secrets_seal("project", "p1", "TOKEN", "hunter2", &s2, &n2, &cause) == 0);
	CHECK(n1 == n2 && memcmp(s1, s2, n1) != 0);
	free(s2);

	/* The key survives a restart: a new init loads the same key. */
	CHECK(secrets_init(dir, &cause) == 0);
	v = secrets_unseal("project", "p1", "TOKEN", s1, n1, &cause);
	CHECK_STR(v, "hunter2");
	secrets_free_value(v);

	CHECK(secrets_seal("project", "p1", "TOKEN", "", &s2, &n2, &cause) == -1);
	CHECK_CAUSE(cause, "value");
	free(cause);
	cause = NULL;
	free(s1);
	free(kp);
}

static void
test_wrong_aad(void)
{
	char *cause = NULL, *v;
	uint8_t *s;
	size_t n;

	CHECK(secrets_seal("project", "p1", "TOKEN", "hunter2", &s, &n, &cause) == 0);
	/* Moved to another name, project, scope: all refuse to open. */
	v = secrets_unseal("project", "p1", "TOKEN2", s, n, &cause);
	CHECK(v == NULL);
	CHECK_CAUSE(cause, "does not open");
	CHECK(strstr(cause, "hunter2") == NULL);
	free(cause);
	cause = NULL;
	CHECK(secrets_unseal("project", "p2", "TOKEN", s, n, &cause) == NULL);
	free(cause);
	cause = NULL;
	CHECK(secrets_unseal("sandbox", "p1", "TOKEN", s, n, &cause) == NULL);
	free(cause);
	cause = NULL;
	/* NUL-separated parts: ("ab", "c") must differ from ("a", "bc"). */
	CHECK(secrets_unseal("project", "p", "1TOKEN", s, n, &cause) == NULL);
	free(cause);
	cause = NULL;
	free(s);
}

static void
test_tamper(void)
{
	char *cause = NULL, *v;
	uint8_t *s;
	size_t n, i;
	int opened = 0;

	CHECK(secrets_seal("global", "", "K", "secret-value", &s, &n, &cause) == 0);
	for (i = 0; i < n; i++) {
		s[i] ^= 0x01;
		v = secrets_unseal("global", "", "K", s, n, &cause);
		if (v != NULL)
			opened++;
		secrets_free_value(v);
		free(cause);
		cause = NULL;
		s[i] ^= 0x01;
	}
	CHECK(opened == 0);
	/* Truncated (no tag) and the untouched original. */
	CHECK(secrets_unseal("global", "", "K", s, n - 1, &cause) == NULL);
	free(cause);
	cause = NULL;
	CHECK(secrets_unseal("global", "", "K", s, SECRETS_OVERHEAD, &cause) == NULL);
	free(cause);
	cause = NULL;
	v = secrets_unseal("global", "", "K", s, n, &cause);
	CHECK_STR(v, "secret-value");
	secrets_free_value(v);
	free(s);
}

static void
put(struct store *st, const char *scope, const char *scope_id, const char *name,
    const char *value, const char *host)
{
	struct store_secret sec;
	char *cause = NULL;

	memset(&sec, 0, sizeof sec);
	sec.scope = (char *)scope;
	sec.scope_id = (char *)scope_id;
	sec.name = (char *)name;
	sec.hosts = json_pack("[s]", host);
	sec.header = (char *)"Authorization";
	sec.format = (char *)"Bearer {value}";
	CHECK(secrets_seal(scope, scope_id, name, value, &sec.sealed, &sec.sealedlen, &cause) == 0);
	CHECK(store_secret_put(st, &sec, &cause) == 0);
	free(sec.sealed);
	json_decref(sec.hosts);
}

/* name -> value in a resolved list, or NULL. */
static const char *
cred(json_t *creds, const char *name, const char *field)
{
	size_t i;
	json_t *c;

	json_array_foreach(creds, i, c)
		if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
			return json_string_value(json_object_get(c, field));
	return NULL;
}

static void
test_precedence(void)
{
	struct store *st;
	char *cause = NULL, *url;
	json_t *creds;

	xasprintf(&url, "sqlite:%s/state.db", dir);
	st = store_open(url, &cause);
	free(url);
	CHECK(st != NULL);
	if (st == NULL)
		return;
	put(st, "global", "", "A", "global-a", "a.example.com");
	put(st, "global", "", "B", "global-b", "b.example.com");
	put(st, "global", "", "C", "global-c", "c.example.com");
	put(st, "project", "p1", "B", "p1-b", "b.p1.example.com");
	put(st, "project", "p1", "C", "p1-c", "c.p1.example.com");
	put(st, "project", "p2", "A", "p2-a", "a.p2.example.com");
	put(st, "sandbox", "sb1", "C", "sb1-c", "c.sb1.example.com");
	put(st, "sandbox", "sb2", "D", "sb2-d", "d.sb2.example.com");

	CHECK(secrets_resolve(st, "p1", "sb1", &creds, &cause) == 0);
	CHECK(json_array_size(creds) == 3);
	CHECK_STR(cred(creds, "A", "value"), "global-a");
	CHECK_STR(cred(creds, "B", "value"), "p1-b");
	CHECK_STR(cred(creds, "B", "format"), "Bearer {value}");
	CHECK_STR(cred(creds, "C", "value"), "sb1-c");
	CHECK_STR(json_string_value(json_array_get(json_object_get(json_array_get(creds, 2),
	    "hosts"), 0)), "c.sb1.example.com");
	CHECK(cred(creds, "D", "value") == NULL);
	secrets_credentials_free(creds);

	/* Another project's sandbox sees the globals and its own. */
	CHECK(secrets_resolve(st, "p2", "sb2", &creds, &cause) == 0);
	CHECK(json_array_size(creds) == 4);
	CHECK_STR(cred(creds, "A", "value"), "p2-a");
	CHECK_STR(cred(creds, "B", "value"), "global-b");
	CHECK_STR(cred(creds, "D", "value"), "sb2-d");
	secrets_credentials_free(creds);

	/* A row whose sealed bytes belong to another secret fails the whole resolve. */
	struct store_secret moved;
	CHECK(store_secret_get(st, "project", "p1", "B", &moved, &cause) == 1);
	free(moved.name);
	moved.name = xstrdup("E");
	CHECK(store_secret_put(st, &moved, &cause) == 0);
	store_secret_clear(&moved);
	CHECK(secrets_resolve(st, "p1", "sb1", &creds, &cause) == -1);
	CHECK(creds == NULL);
	CHECK_CAUSE(cause, "secret E");
	CHECK(strstr(cause, "p1-b") == NULL);
	free(cause);
	store_close(st);
}

static void
test_key_file(void)
{
	char *cause = NULL, *kp = keypath(), *other;
	uint8_t *s;
	size_t n;
	int fd;

	CHECK(chmod(kp, 0640) == 0);
	CHECK(secrets_init(dir, &cause) == -1);
	CHECK_CAUSE(cause, "mode 0640");
	free(cause);
	cause = NULL;
	CHECK(chmod(kp, 0604) == 0);
	CHECK(secrets_init(dir, &cause) == -1);
	free(cause);
	cause = NULL;
	CHECK(chmod(kp, 0400) == 0);	/* stricter is fine */
	CHECK(secrets_init(dir, &cause) == 0);
	CHECK(chmod(kp, 0600) == 0);

	/* Wrong size. */
	fd = open(kp, O_WRONLY | O_APPEND);
	CHECK(fd != -1 && write(fd, "x", 1) == 1);
	close(fd);
	CHECK(secrets_init(dir, &cause) == -1);
	CHECK_CAUSE(cause, "33 bytes");
	free(cause);
	cause = NULL;

	/* A symlink is refused, not followed. */
	xasprintf(&other, "%s/elsewhere.key", dir);
	CHECK(rename(kp, other) == 0);
	CHECK(truncate(other, SECRETS_KEY_LEN) == 0);
	CHECK(symlink(other, kp) == 0);
	CHECK(secrets_init(dir, &cause) == -1);
	free(cause);
	cause = NULL;
	unlink(kp);
	unlink(other);
	free(other);

	/* A missing key with sealed values around: opening says so. */
	CHECK(secrets_init(dir, &cause) == 0);
	CHECK(secrets_unseal("global", "", "K", (const uint8_t *)"\1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	    34, &cause) == NULL);
	CHECK_CAUSE(cause, "key is missing");
	free(cause);
	cause = NULL;
	/* And a seal creates a fresh one. */
	CHECK(secrets_seal("global", "", "K", "v", &s, &n, &cause) == 0);
	CHECK(path_exists(kp));
	free(s);
	free(kp);
}

int
main(void)
{
	char *cause = NULL;

	if (mkdtemp(dir) == NULL)
		return 1;
	umask(022);
	T_RUN(test_round_trip);
	T_RUN(test_wrong_aad);
	T_RUN(test_tamper);
	T_RUN(test_precedence);
	T_RUN(test_key_file);
	secrets_shutdown();
	remove_tree(dir, &cause);
	free(cause);
	return t_done();
}
