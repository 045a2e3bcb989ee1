/*
 * Secrets at rest: credential values sealed with AES-256-GCM under one
 * host key, <data_dir>/secrets.key (32 random bytes, 0600, owned by the
 * daemon's user). The store only ever holds sealed bytes; plaintext exists
 * in airlockd just long enough to build a sandbox's credential list for the
 * gateway, and every buffer that held it is wiped.
 *
 * Sealed layout: version (1 byte) | nonce (12) | ciphertext | tag (16).
 * The version byte and (scope, scope_id, name) are the GCM additional data,
 * so a sealed value copied to another secret's row fails to open.
 *
 * The key is process state: secrets_init() checks it once at startup, and
 * it is created on the first seal, so a host that never stores a secret
 * never grows a key file.
 */
#ifndef AIRLOCK_SECRETS_H
#define AIRLOCK_SECRETS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SECRETS_KEY_FILE	"secrets.key"
#define SECRETS_KEY_LEN		32
#define SECRETS_VERSION		1
#define SECRETS_NONCE_LEN	12
#define SECRETS_TAG_LEN		16
#define SECRETS_OVERHEAD	(1 + SECRETS_NONCE_LEN + SECRETS_TAG_LEN)
#define SECRETS_VALUE_MAX	(64 * 1024)

struct store;

/*
 * Check and load <data_dir>/secrets.key if it exists: refuses a key that
 * is not a regular file of exactly SECRETS_KEY_LEN bytes, owned by us,
 * with no group or other permission bits. A missing key is fine.
 */
int secrets_init(const char *data_dir, char **cause);
/*
 * The same with the key file's own path (secrets_key): the workers of a
 * cluster must all open what any of them sealed, so they share one key.
 */
int secrets_init_path(const char *path, char **cause);
/* Wipe the key from memory. */
void secrets_shutdown(void);

/* Seal value for (scope, scope_id, name); *sealed is malloc'd. Creates the key if needed. */
int secrets_seal(const char *scope, const char *scope_id, const char *name,
    const char *value, uint8_t **sealed, size_t *sealedlen, char **cause);
/*
 * Open a sealed value; returns the plaintext (NUL-terminated, malloc'd:
 * release with secrets_free_value) or NULL with a cause that never
 * includes any of the plaintext.
 */
char *secrets_unseal(const char *scope, const char *scope_id, const char *name,
    const uint8_t *sealed, size_t sealedlen, char **cause);
/* Wipe and free a plaintext value. */
void secrets_free_value(char *value);

/*
 * The credentials a sandbox sees: global, its project's and its own
 * secrets, the most specific one winning per name (sandbox > project >
 * global), opened into the gateway's shape
 * [{"name","value","hosts":[...],"header","format"}] (gw_policy.h).
 * Release *credentials with secrets_credentials_free, which wipes the values.
 */
int secrets_resolve(struct store *st, const char *project, const char *sandbox_id,
    json_t **credentials, char **cause);
void secrets_credentials_free(json_t *credentials);

#endif
