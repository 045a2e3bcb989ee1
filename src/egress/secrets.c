/* Secret sealing (AES-256-GCM under the host key) and per-sandbox resolution. */
#include <sys/random.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/log.h"
#include "common/util.h"
#include "egress/secrets.h"
#include "db/store.h"

static struct {
	char		*path;		/* <data_dir>/secrets.key */
	int		 loaded;
	uint8_t		 key[SECRETS_KEY_LEN];
} secrets;

static int
secrets_random(void *buf, size_t len, char **cause)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len > 0) {
		if ((n = getrandom(p, len, 0)) == -1) {
			if (errno == EINTR)
				continue;
			cause_set(cause, "getrandom: %s", strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Read the key from an open file after checking what it is: a key others
 * can read is as good as published, so refuse it rather than use it.
 */
static int
secrets_key_read(int fd, const char *path, char **cause)
{
	struct stat sb;
	ssize_t n;

	if (fstat(fd, &sb) == -1) {
		cause_set(cause, "stat %s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISREG(sb.st_mode)) {
		cause_set(cause, "%s: not a regular file", path);
		return -1;
	}
	if (sb.st_uid != geteuid()) {
		cause_set(cause, "%s: owned by uid %u, not %u", path, (unsigned)sb.st_uid,
		    (unsigned)geteuid());
		return -1;
	}
	if ((sb.st_mode & 077) != 0) {
		cause_set(cause, "%s: mode %04o gives access beyond its owner; "
		    "want 0600 (chmod 600 it if it never left this host)", path,
		    (unsigned)(sb.st_mode & 07777));
		return -1;
	}
	if (sb.st_size != SECRETS_KEY_LEN) {
		cause_set(cause, "%s: %lld bytes, want %d", path, (long long)sb.st_size,
		    SECRETS_KEY_LEN);
		return -1;
	}
	n = pread(fd, secrets.key, SECRETS_KEY_LEN, 0);
	if (n != SECRETS_KEY_LEN) {
		explicit_bzero(secrets.key, sizeof secrets.key);
		cause_set(cause, "read %s: %s", path, n == -1 ? strerror(errno) : "short read");
		return -1;
	}
	secrets.loaded = 1;
	return 0;
}

/* 1 loaded, 0 no key file, -1 error. */
static int
secrets_key_load(char **cause)
{
	int fd, rc;

	fd = open(secrets.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1 && errno == ENOENT)
		return 0;
	if (fd == -1) {
		cause_set(cause, "open %s: %s", secrets.path, strerror(errno));
		return -1;
	}
	rc = secrets_key_read(fd, secrets.path, cause);
	close(fd);
	return rc == 0 ? 1 : -1;
}

/*
 * Write a fresh key under a temporary name, then link() it into place:
 * link never replaces an existing file, so a key that sealed values is
 * never overwritten, and a crash leaves either no key or a whole one.
 */
static int
secrets_key_create(char **cause)
{
	uint8_t key[SECRETS_KEY_LEN];
	char *tmp;
	int fd, rc = -1;

	if (secrets_random(key, sizeof key, cause) == -1)
		return -1;
	xasprintf(&tmp, "%s.new.%ld", secrets.path, (long)getpid());
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd == -1) {
		cause_set(cause, "create %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (fchmod(fd, 0600) == -1 || write(fd, key, sizeof key) != (ssize_t)sizeof key ||
	    fsync(fd) == -1) {
		cause_set(cause, "write %s: %s", tmp, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	if (link(tmp, secrets.path) == -1 && errno != EEXIST) {
		cause_set(cause, "link %s: %s", secrets.path, strerror(errno));
		goto out;
	}
	/* Whoever won the link, the file in place is the key; load it as any other. */
	if (secrets_key_load(cause) == 1) {
		log_info("created the secrets key %s (mode 0600)", secrets.path);
		rc = 0;
	}
out:
	explicit_bzero(key, sizeof key);
	(void)unlink(tmp);
	free(tmp);
	return rc;
}

int
secrets_init(const char *data_dir, char **cause)
{
	char *path;
	int rc;

	xasprintf(&path, "%s/%s", data_dir, SECRETS_KEY_FILE);
	rc = secrets_init_path(path, cause);
	free(path);
	return rc;
}

int
secrets_init_path(const char *path, char **cause)
{
	secrets_shutdown();
	secrets.path = xstrdup(path);
	return secrets_key_load(cause) == -1 ? -1 : 0;
}

void
secrets_shutdown(void)
{
	explicit_bzero(secrets.key, sizeof secrets.key);
	secrets.loaded = 0;
	free(secrets.path);
	secrets.path = NULL;
}

/* The additional data: the version byte, then scope, scope_id, name, NUL-separated. */
static int
secrets_aad(EVP_CIPHER_CTX *ctx, uint8_t version, const char *scope, const char *scope_id,
    const char *name)
{
	const char *parts[] = { scope, scope_id, name };
	int n;

	if (EVP_CipherUpdate(ctx, NULL, &n, &version, 1) != 1)
		return -1;
	for (size_t i = 0; i < 3; i++)
		if (EVP_CipherUpdate(ctx, NULL, &n, (const uint8_t *)parts[i],
		    (int)strlen(parts[i]) + 1) != 1)
			return -1;
	return 0;
}

int
secrets_seal(const char *scope, const char *scope_id, const char *name, const char *value,
    uint8_t **sealed, size_t *sealedlen, char **cause)
{
	size_t len = strlen(value), total;
	EVP_CIPHER_CTX *ctx;
	uint8_t *out, *ct;
	int n, fin;

	*sealed = NULL;
	*sealedlen = 0;
	if (len == 0 || len > SECRETS_VALUE_MAX) {
		cause_set(cause, "value must be 1-%d bytes", SECRETS_VALUE_MAX);
		return -1;
	}
	if (secrets.path == NULL) {
		cause_set(cause, "secrets: not initialised");
		return -1;
	}
	if (!secrets.loaded && secrets_key_create(cause) == -1)
		return -1;
	total = SECRETS_OVERHEAD + len;
	out = xmalloc(total);
	out[0] = SECRETS_VERSION;
	if (secrets_random(out + 1, SECRETS_NONCE_LEN, cause) == -1) {
		free(out);
		return -1;
	}
	ct = out + 1 + SECRETS_NONCE_LEN;
	if ((ctx = EVP_CIPHER_CTX_new()) == NULL)
		fatalx("EVP_CIPHER_CTX_new failed");
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SECRETS_NONCE_LEN, NULL) != 1 ||
	    EVP_EncryptInit_ex(ctx, NULL, NULL, secrets.key, out + 1) != 1 ||
	    secrets_aad(ctx, out[0], scope, scope_id, name) == -1 ||
	    EVP_EncryptUpdate(ctx, ct, &n, (const uint8_t *)value, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(ctx, ct + n, &fin) != 1 ||
	    (size_t)(n + fin) != len ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SECRETS_TAG_LEN, ct + len) != 1) {
		EVP_CIPHER_CTX_free(ctx);
		free(out);
		cause_set(cause, "sealing failed");
		return -1;
	}
	EVP_CIPHER_CTX_free(ctx);
	*sealed = out;
	*sealedlen = total;
	return 0;
}

char *
secrets_unseal(const char *scope, const char *scope_id, const char *name,
    const uint8_t *sealed, size_t sealedlen, char **cause)
{
	EVP_CIPHER_CTX *ctx;
	const uint8_t *ct;
	size_t len;
	char *out;
	int n, fin, ok;

	if (!secrets.loaded) {
		cause_set(cause, "secret %s: the secrets key is missing, cannot open it", name);
		return NULL;
	}
	if (sealedlen <= SECRETS_OVERHEAD || sealed[0] != SECRETS_VERSION ||
	    sealedlen - SECRETS_OVERHEAD > SECRETS_VALUE_MAX) {
		cause_set(cause, "secret %s: not a sealed value (version or size)", name);
		return NULL;
	}
	len = sealedlen - SECRETS_OVERHEAD;
	ct = sealed + 1 + SECRETS_NONCE_LEN;
	out = xmalloc(len + 1);
	if ((ctx = EVP_CIPHER_CTX_new()) == NULL)
		fatalx("EVP_CIPHER_CTX_new failed");
	ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, SECRETS_NONCE_LEN, NULL) == 1 &&
	    EVP_DecryptInit_ex(ctx, NULL, NULL, secrets.key, sealed + 1) == 1 &&
	    secrets_aad(ctx, sealed[0], scope, scope_id, name) == 0 &&
	    EVP_DecryptUpdate(ctx, (uint8_t *)out, &n, ct, (int)len) == 1 &&
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SECRETS_TAG_LEN,
	    (void *)(ct + len)) == 1 &&
	    EVP_DecryptFinal_ex(ctx, (uint8_t *)out + n, &fin) == 1 &&
	    (size_t)(n + fin) == len;
	EVP_CIPHER_CTX_free(ctx);
	/* A value that is not a C string would be cut short when injected: refuse it too. */
	if (!ok || memchr(out, '\0', len) != NULL) {
		explicit_bzero(out, len + 1);
		free(out);
		cause_set(cause, "secret %s: does not open with this key (tampered, moved, or "
		    "sealed under another key)", name);
		return NULL;
	}
	out[len] = '\0';
	return out;
}

void
secrets_free_value(char *value)
{
	if (value == NULL)
		return;
	explicit_bzero(value, strlen(value));
	free(value);
}

/*
 * jansson frees strings without wiping them, so a credential's value is
 * wiped before it is released. The string is jansson's own heap copy: writing
 * through the const pointer touches memory that is ours to free anyway.
 */
static void
secrets_wipe(json_t *c)
{
	json_t *v = json_object_get(c, "value");

	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v), json_string_length(v));
}

/* Index of name in creds, or -1. */
static ssize_t
secrets_find(json_t *creds, const char *name)
{
	size_t i;
	json_t *c;

	json_array_foreach(creds, i, c)
		if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
			return (ssize_t)i;
	return -1;
}

/* Open one stored secret into the gateway's credential object. */
static json_t *
secrets_credential(const struct store_secret *s, char **cause)
{
	char *value;
	json_t *c;

	value = secrets_unseal(s->scope, s->scope_id, s->name, s->sealed, s->sealedlen, cause);
	if (value == NULL)
		return NULL;
	c = json_pack("{s:s,s:s,s:o}", "name", s->name, "value", value, "hosts",
	    s->hosts != NULL ? json_deep_copy(s->hosts) : json_array());
	secrets_free_value(value);
	if (c == NULL) {
		cause_set(cause, "secret %s: cannot build its credential", s->name);
		return NULL;
	}
	if (s->header != NULL)
		json_object_set_new(c, "header", json_string(s->header));
	if (s->format != NULL)
		json_object_set_new(c, "format", json_string(s->format));
	return c;
}

int
secrets_resolve(struct store *st, const char *project, const char *sandbox_id,
    json_t **credentials, char **cause)
{
	/* Least specific first: a later scope replaces an earlier one's entry. */
	const char *scopes[3] = { "global", "project", "sandbox" };
	const char *ids[3] = { "", project, sandbox_id };
	struct store_secret *list;
	json_t *creds = json_array(), *c;
	size_t n, i, k;
	ssize_t at;
	int rc = 0;

	*credentials = NULL;
	for (k = 0; k < 3 && rc == 0; k++) {
		if (ids[k] == NULL || (k > 0 && *ids[k] == '\0'))
			continue;
		if (store_secret_list(st, scopes[k], ids[k], &list, &n, cause) == -1) {
			rc = -1;
			break;
		}
		for (i = 0; i < n; i++) {
			if (rc == 0 && (c = secrets_credential(&list[i], cause)) == NULL)
				rc = -1;
			else if (rc == 0 && (at = secrets_find(creds, list[i].name)) != -1) {
				secrets_wipe(json_array_get(creds, (size_t)at));
				json_array_set_new(creds, (size_t)at, c);
			}
			else if (rc == 0)
				json_array_append_new(creds, c);
			store_secret_clear(&list[i]);
		}
		free(list);
	}
	if (rc == -1) {
		secrets_credentials_free(creds);
		return -1;
	}
	*credentials = creds;
	return 0;
}

void
secrets_credentials_free(json_t *credentials)
{
	json_t *c;
	size_t i;

	json_array_foreach(credentials, i, c)
		secrets_wipe(c);
	json_decref(credentials);
}
