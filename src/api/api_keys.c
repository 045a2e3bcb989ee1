/* API keys: created by admins, shown once, stored as SHA-256 hashes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/api.h"
#include "common/digest.h"
#include "common/log.h"
#include "common/util.h"

#define KEY_SECRET_LEN	40
#define KEY_PREFIX	"al_"
#define KEY_E2B_PREFIX	"e2b_"	/* + 40 hex: E2B's format, which SDKs check client-side */

void
api_key_hash(const char *key, char out[65])
{
	sha256_hex(key, strlen(key), out);
}

int
api_project_valid(const char *p)
{
	size_t i;

	if (*p == '\0' || strlen(p) > 63)
		return 0;
	for (i = 0; p[i] != '\0'; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
		    (i > 0 && (p[i] == '-' || p[i] == '_'))))
			return 0;
	return 1;
}

/* 40 lowercase hex digits: 160 random bits (the al_ form has 206). */
static void
random_hex(char out[KEY_SECRET_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[KEY_SECRET_LEN / 2];
	size_t i;

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		fatal("getrandom");
	for (i = 0; i < sizeof(rnd); i++) {
		out[2 * i] = hex[rnd[i] >> 4];
		out[2 * i + 1] = hex[rnd[i] & 15];
	}
	out[KEY_SECRET_LEN] = '\0';
}

char *
api_key_create(struct store *st, const char *name, const char *project, const char *role,
    struct store_key *out, char **cause)
{
	return api_key_create_fmt(st, name, project, role, 0, out, cause);
}

char *
api_key_create_fmt(struct store *st, const char *name, const char *project, const char *role,
    int e2b, struct store_key *out, char **cause)
{
	char secret[KEY_SECRET_LEN + 1], *key, hash[65];
	struct store_key k;

	memset(&k, 0, sizeof(k));
	random_id(k.id, 12);
	if (e2b) {
		random_hex(secret);
		xasprintf(&key, KEY_E2B_PREFIX "%s", secret);
	} else {
		random_id(secret, KEY_SECRET_LEN);
		xasprintf(&key, KEY_PREFIX "%s", secret);
	}
	snprintf(k.project, sizeof(k.project), "%s", project);
	snprintf(k.name, sizeof(k.name), "%s", name);
	snprintf(k.prefix, sizeof(k.prefix), "%.8s", key);
	snprintf(k.role, sizeof(k.role), "%s", role);
	k.created_at = store_now_ms();
	api_key_hash(key, hash);
	if (store_key_insert(st, &k, hash, cause) == -1) {
		free(key);
		return NULL;
	}
	if (out != NULL)
		*out = k;
	return key;
}

static json_t *
key_json(const struct store_key *k)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:o}", "id", k->id, "name", k->name,
	    "project", k->project, "role", k->role, "prefix", k->prefix,
	    "created_at", json_time_ms(k->created_at), "last_used_at", json_time_ms(k->last_used_at));
}

void
api_keys_create(struct api_call *c)
{
	static const char *const fields[] = { "name", "project", "role", "format", NULL };
	const char *name, *project, *role, *format;
	struct store_key k;
	char *key, *cause = NULL;
	json_t *j;

	if (api_check_fields(c, c->body, "", fields) == -1 ||
	    api_get_string(c, c->body, "name", 1, 120, &name) == -1 ||
	    api_get_string(c, c->body, "project", 0, 63, &project) == -1 ||
	    api_get_string(c, c->body, "role", 0, 16, &role) == -1 ||
	    api_get_string(c, c->body, "format", 0, 16, &format) == -1)
		return;
	if (format != NULL && strcmp(format, "airlock") != 0 && strcmp(format, "e2b") != 0) {
		api_fail(c, 400, "bad_request", "format", "format: must be \"airlock\" (al_...) "
		    "or \"e2b\" (e2b_ + 40 hex, for E2B SDKs)");
		return;
	}
	if (project == NULL)
		project = c->key.project;
	if (role == NULL)
		role = "user";
	if (!api_project_valid(project)) {
		api_fail(c, 400, "bad_request", "project", "project: must match "
		    "[a-z0-9][a-z0-9_-]{0,62}");
		return;
	}
	if (strcmp(role, "user") != 0 && strcmp(role, "admin") != 0) {
		api_fail(c, 400, "bad_request", "role", "role: must be \"user\" or \"admin\"");
		return;
	}
	if (*name == '\0') {
		api_fail(c, 400, "bad_request", "name", "name: must not be empty");
		return;
	}
	if ((key = api_key_create_fmt(c->api->store, name, project, role,
	    format != NULL && strcmp(format, "e2b") == 0, &k, &cause)) == NULL) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		return;
	}
	j = key_json(&k);
	json_object_set_new(j, "key", json_string(key));
	free(key);
	api_json(c, 201, j);
}

void
api_keys_list(struct api_call *c)
{
	struct store_key *keys;
	char *cause = NULL;
	size_t n, i;
	json_t *arr;

	if (store_key_list(c->api->store, NULL, &keys, &n, &cause) == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
		return;
	}
	arr = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(arr, key_json(&keys[i]));
	free(keys);
	api_json(c, 200, json_pack("{s:o}", "keys", arr));
}

void
api_keys_delete(struct api_call *c)
{
	char *cause = NULL;
	int rc;

	if (strcmp(c->params[0], c->key.id) == 0) {
		api_error(c, 409, "conflict", "refusing to delete the key this request uses");
		return;
	}
	rc = store_key_delete(c->api->store, c->params[0], &cause);
	if (rc == -1) {
		api_error(c, 500, "internal", "%s", cause);
		free(cause);
	} else if (rc == 0)
		api_error(c, 404, "not_found", "key \"%s\" not found", c->params[0]);
	else
		api_no_content(c);
}
