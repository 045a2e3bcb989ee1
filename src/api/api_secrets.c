/*
 * /v1/secrets: credentials the egress gateway injects. Values are
 * write-only: sealed on the way in (sandbox/secrets.c), and no answer,
 * error message or log line ever carries one back out. A secret lives at
 * (scope, scope_id, name): "global" (admin keys write it, every sandbox
 * sees it), "project" (the key's project, the default) or "sandbox" (one
 * sandbox of the key's project).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/util.h"
#include "gateway/shared/gw_policy.h"
#include "sandbox/sbm.h"
#include "egress/secrets.h"

#define SECRET_NAME_MAX	64

/* Where a call's secret lives, from the body (PUT) or the query. */
struct secret_at {
	const char	*scope;
	const char	*scope_id;	/* points into the call, or "" */
};

/* [A-Z_][A-Z0-9_]{0,63}: the placeholder "airlock:NAME" must be unambiguous in a header. */
static int
secret_name_ok(const char *n)
{
	size_t len = strlen(n);

	return len > 0 && len <= SECRET_NAME_MAX && (*n < '0' || *n > '9') &&
	    strspn(n, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == len;
}

static int
secret_check_name(struct api_call *c)
{
	if (secret_name_ok(c->params[0]))
		return 0;
	return api_fail(c, 400, "bad_request", "name", "name: must match [A-Z_][A-Z0-9_]{0,63}");
}

/*
 * Resolve scope and sandbox into where the secret lives. Global secrets are
 * readable by every key (their names are what a sandbox's placeholders
 * refer to) but written only by admin keys; a sandbox must belong to the
 * key's project. Records 400/403/404 (api_fail) and returns -1 on failure.
 */
static int
secret_locate(struct api_call *c, const char *scope, const char *sandbox, int write,
    struct secret_at *at)
{
	if (scope == NULL)
		scope = sandbox != NULL ? "sandbox" : "project";
	if (strcmp(scope, "global") != 0 && strcmp(scope, "project") != 0 &&
	    strcmp(scope, "sandbox") != 0)
		return api_fail(c, 400, "bad_request", "scope", "scope: must be global, project or "
		    "sandbox");
	if (sandbox != NULL && strcmp(scope, "sandbox") != 0)
		return api_fail(c, 400, "bad_request", "sandbox", "sandbox: only with scope sandbox");
	at->scope = scope;
	if (strcmp(scope, "global") == 0) {
		if (write && strcmp(c->key.role, "admin") != 0)
			return api_fail(c, 403, "forbidden", "scope", "global secrets need an admin "
			    "key");
		at->scope_id = "";
	} else if (strcmp(scope, "project") == 0)
		at->scope_id = c->key.project;
	else if (sandbox == NULL)
		return api_fail(c, 400, "bad_request", "sandbox", "sandbox: required with scope "
		    "sandbox");
	else if (sbm_find(c->api->sbm, sandbox, c->key.project) == NULL)
		return api_fail(c, 404, "not_found", "sandbox", "sandbox \"%s\" not found", sandbox);
	else
		at->scope_id = sandbox;
	return 0;
}

/* The metadata of a secret: everything but the value. */
static json_t *
secret_json(const struct store_secret *s)
{
	return json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "name", s->name, "scope", s->scope,
	    "scope_id", *s->scope_id != '\0' ? json_string(s->scope_id) : json_null(),
	    "hosts", s->hosts != NULL ? json_deep_copy(s->hosts) : json_array(),
	    "header", s->header != NULL ? json_string(s->header) : json_null(),
	    "format", s->format != NULL ? json_string(s->format) : json_null(),
	    "created_at", json_time_ms(s->created_at), "updated_at", json_time_ms(s->updated_at));
}

/*
 * The query's scope and sandbox, NULL when absent. The router has refused
 * a malformed value (%zz, %00, not UTF-8) with a 400: absent means absent,
 * so a broken ?sandbox= can never fall back to the project scope.
 */
static void
secret_query(struct api_call *c, const char **scope, const char **sandbox)
{
	*scope = api_query_str(c, "scope");
	*sandbox = api_query_str(c, "sandbox");
}

/*
 * Check the credential exactly as the gateway will parse it, so a secret
 * the API accepts can never make a sandbox's policy push fail. On success
 * returns the parsed policy (its one credential has the normalized hosts
 * and the header and format defaults filled in).
 */
static struct gw_policy *
secret_validate(struct api_call *c, const char *value, json_t *hosts, const char *header,
    const char *format)
{
	struct gw_policy *p;
	json_t *cred, *policy;
	char *cause = NULL;
	const char *msg, *pfx = "policy.credentials[0]: ";

	cred = json_pack("{s:s,s:s,s:O}", "name", c->params[0], "value", value, "hosts", hosts);
	if (header != NULL)
		json_object_set_new(cred, "header", json_string(header));
	if (format != NULL)
		json_object_set_new(cred, "format", json_string(format));
	policy = json_pack("{s:s,s:[o]}", "mode", "none", "credentials", cred);
	p = gw_policy_parse(policy, &cause);
	/* The copy of the value inside policy is ours: wipe it before jansson frees it. */
	explicit_bzero((char *)json_string_value(json_object_get(cred, "value")), strlen(value));
	json_decref(policy);
	if (p == NULL) {
		/* gw_cred_parse names the field and never quotes the value. */
		msg = cause != NULL ? cause : "invalid credential";
		if (strncmp(msg, pfx, strlen(pfx)) == 0)
			msg += strlen(pfx);
		api_fail(c, 400, "bad_request", NULL, "%s", msg);
		free(cause);
		return NULL;
	}
	return p;
}

/* Reply with the stored metadata of a secret just written. */
static void
secret_reply(struct api_call *c, const struct secret_at *at, int status)
{
	struct store_secret s;
	char *cause = NULL;
	int rc;

	rc = store_secret_get(c->api->store, at->scope, at->scope_id, c->params[0], &s, &cause);
	if (rc != 1) {
		api_error(c, 500, "internal", "secret %s: %s", c->params[0],
		    rc == 0 ? "gone right after it was written" : cause);
		free(cause);
		return;
	}
	api_json(c, status, secret_json(&s));
	store_secret_clear(&s);
}

static int
secret_store(struct api_call *c, const struct secret_at *at, const struct gw_credential *cred,
    int *created)
{
	struct store_secret s, old;
	char *cause = NULL;
	int rc;

	memset(&s, 0, sizeof s);
	rc = store_secret_get(c->api->store, at->scope, at->scope_id, c->params[0], &old, &cause);
	if (rc == 1)
		store_secret_clear(&old);
	*created = rc == 0;
	if (rc == -1)
		goto fail;
	if (secrets_seal(at->scope, at->scope_id, c->params[0], cred->value, &s.sealed,
	    &s.sealedlen, &cause) == -1)
		goto fail;
	s.scope = (char *)at->scope;
	s.scope_id = (char *)at->scope_id;
	s.name = (char *)c->params[0];
	s.header = cred->header;
	s.format = cred->format;
	s.hosts = json_array();
	for (size_t i = 0; i < cred->nhosts; i++)
		json_array_append_new(s.hosts, json_string(cred->hosts[i]));
	rc = store_secret_put(c->api->store, &s, &cause);
	json_decref(s.hosts);
	free(s.sealed);
	if (rc == -1)
		goto fail;
	return 0;
fail:
	api_error(c, 500, "internal", "secret %s: %s", c->params[0], cause);
	free(cause);
	return -1;
}

/*
 * Take the value out of the body: a copy the handler owns, and the body's
 * string wiped at once. Every reply frees the call and its body, and
 * jansson frees strings without wiping, so this must happen before anything
 * can reply. (The transport's own buffers are freed unwiped: the value is
 * kept out of the store, logs and answers, not out of a dump of airlockd.)
 * Returns NULL when there is no string value; *present says whether the
 * field was there at all.
 */
static char *
secret_take_value(json_t *body, int *present, size_t *len)
{
	json_t *v = json_object_get(body, "value");
	char *copy;

	*present = v != NULL;
	*len = 0;
	if (!json_is_string(v))
		return NULL;
	*len = json_string_length(v);
	copy = xmalloc(*len + 1);
	memcpy(copy, json_string_value(v), *len);
	copy[*len] = '\0';
	explicit_bzero((char *)json_string_value(v), *len);
	return copy;
}

void
api_secrets_put(struct api_call *c)
{
	static const char *const fields[] = { "value", "hosts", "header", "format", "scope",
	    "sandbox", NULL };
	const char *header, *format, *scope, *sandbox;
	struct secret_at at;
	struct gw_policy *p;
	json_t *hosts;
	char *value;
	size_t len;
	int created, present;

	value = secret_take_value(c->body, &present, &len);
	if (secret_check_name(c) == -1 || api_check_fields(c, c->body, "", fields) == -1)
		goto out;
	if (value == NULL) {
		api_fail(c, 400, "bad_request", "value", present ? "value: must be a string" :
		    "value: required");
		goto out;
	}
	if (len > SECRETS_VALUE_MAX || strlen(value) != len) {
		api_fail(c, 400, "bad_request", "value", "value: must be at most %d bytes, without "
		    "NUL", SECRETS_VALUE_MAX);
		goto out;
	}
	if (api_get_string(c, c->body, "header", 0, 256, &header) == -1 ||
	    api_get_string(c, c->body, "format", 0, 1024, &format) == -1 ||
	    api_get_string(c, c->body, "scope", 0, 16, &scope) == -1 ||
	    api_get_string(c, c->body, "sandbox", 0, STORE_ID_MAX - 1, &sandbox) == -1)
		goto out;
	hosts = json_object_get(c->body, "hosts");
	if (hosts == NULL || json_is_null(hosts)) {
		api_fail(c, 400, "bad_request", "hosts", "hosts: required (the host patterns the "
		    "value may be sent to)");
		goto out;
	}
	if (secret_locate(c, scope, sandbox, 1, &at) == -1)
		goto out;
	if ((p = secret_validate(c, value, hosts, header, format)) == NULL)
		goto out;
	if (secret_store(c, &at, &p->creds[0], &created) == 0) {
		sbm_secrets_changed(c->api->sbm, at.scope, at.scope_id);
		secret_reply(c, &at, created ? 201 : 200);
	}
	gw_policy_unref(p);
out:
	secrets_free_value(value);
}

/*
 * Append the metadata of the secrets at (scope, scope_id) to arr; scope_id
 * NULL (sandbox scope only) means those of every sandbox of the key's project.
 */
static int
secret_list_into(struct api_call *c, const char *scope, const char *scope_id, json_t *arr,
    char **cause)
{
	struct store_secret *list;
	size_t n, i;

	if (store_secret_list(c->api->store, scope, scope_id, &list, &n, cause) == -1)
		return -1;
	for (i = 0; i < n; i++) {
		if (scope_id != NULL ||
		    sbm_find(c->api->sbm, list[i].scope_id, c->key.project) != NULL)
			json_array_append_new(arr, secret_json(&list[i]));
		store_secret_clear(&list[i]);
	}
	free(list);
	return 0;
}

void
api_secrets_list(struct api_call *c)
{
	const char *scope, *sandbox;
	char *cause = NULL;
	struct secret_at at;
	json_t *arr = json_array();
	int rc;

	secret_query(c, &scope, &sandbox);
	if (scope == NULL && sandbox == NULL) {
		/* Everything this key's sandboxes can see. */
		rc = secret_list_into(c, "global", "", arr, &cause);
		if (rc == 0)
			rc = secret_list_into(c, "project", c->key.project, arr, &cause);
		if (rc == 0)
			rc = secret_list_into(c, "sandbox", NULL, arr, &cause);
	} else if (sandbox == NULL && strcmp(scope, "sandbox") == 0)
		rc = secret_list_into(c, "sandbox", NULL, arr, &cause);
	else if (secret_locate(c, scope, sandbox, 0, &at) == -1)
		goto out;
	else
		rc = secret_list_into(c, at.scope, at.scope_id, arr, &cause);
	if (rc == -1)
		api_error(c, 500, "internal", "list secrets: %s", cause);
	else
		api_json(c, 200, json_pack("{s:O}", "secrets", arr));
	free(cause);
out:
	json_decref(arr);
}

/* The secret a get or delete names, located (write: as its writer); -1 with c->err set. */
static int
secret_named(struct api_call *c, int write, struct secret_at *at)
{
	const char *scope, *sandbox;

	if (secret_check_name(c) == -1)
		return -1;
	secret_query(c, &scope, &sandbox);
	return secret_locate(c, scope, sandbox, write, at);
}

/* The reply when the store did not find the named secret (rc 0) or failed (-1). */
static void
secret_reply_missing(struct api_call *c, int rc, const struct secret_at *at,
    const char *cause)
{
	if (rc == -1)
		api_error(c, 500, "internal", "secret %s: %s", c->params[0], cause);
	else
		api_error(c, 404, "not_found", "secret %s not found in scope %s", c->params[0],
		    at->scope);
}

void
api_secrets_get(struct api_call *c)
{
	struct store_secret s;
	struct secret_at at;
	char *cause = NULL;
	int rc;

	if (secret_named(c, 0, &at) == -1)
		return;
	rc = store_secret_get(c->api->store, at.scope, at.scope_id, c->params[0], &s, &cause);
	if (rc != 1)
		secret_reply_missing(c, rc, &at, cause);
	else {
		api_json(c, 200, secret_json(&s));
		store_secret_clear(&s);
	}
	free(cause);
}

void
api_secrets_delete(struct api_call *c)
{
	struct secret_at at;
	char *cause = NULL;
	int rc;

	if (secret_named(c, 1, &at) == -1)
		return;
	rc = store_secret_delete(c->api->store, at.scope, at.scope_id, c->params[0], &cause);
	if (rc != 1)
		secret_reply_missing(c, rc, &at, cause);
	else {
		sbm_secrets_changed(c->api->sbm, at.scope, at.scope_id);
		api_no_content(c);
	}
	free(cause);
}
