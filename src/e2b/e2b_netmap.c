/*
 * E2B's network settings onto airlock's network spec (pure; unit-tested in
 * tests/unit/test_e2b.c, fuzzed by fuzz/fuzz_e2b_network.c). See
 * e2b_netmap.h for the mapping; every entry is checked here with the
 * gateway's own parser (egress_network_check), so what passes is what the
 * gateway enforces, and a refusal names E2B's field.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "e2b/e2b_netmap.h"
#include "egress/egress_policy.h"
#include "gateway/shared/gw_policy.h"

static int
fail(char *field, const char *f, char **cause, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
fail(char *field, const char *f, char **cause, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;

	snprintf(field, E2B_FIELD_MAX, "%s", f);
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) == -1)
		msg = NULL;
	va_end(ap);
	free(*cause);
	*cause = msg;
	return -1;
}

/* Absent, null, false-y: an empty array, object or string. */
static int
unset(const json_t *v)
{
	return v == NULL || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
	    (json_is_object(v) && json_object_size(v) == 0) ||
	    (json_is_string(v) && json_string_length(v) == 0);
}

/* "0.0.0.0/0" or "::/0": E2B's ALL_TRAFFIC. */
static int
all_traffic(const struct gw_cidr *c)
{
	return c->prefix == 0;
}

static int
check_list(const json_t *v, const char *name, char *field, char **cause)
{
	if (v != NULL && !json_is_null(v) && (!json_is_array(v) ||
	    json_array_size(v) > E2B_NET_RULES_MAX))
		return fail(field, name, cause, "%s: must be an array of at most %d strings", name,
		    E2B_NET_RULES_MAX);
	return 0;
}

/* One allowOut entry as the gateway will read it; the cause renamed to E2B's field. */
static int
check_allow(const char *s, size_t i, char *field, char **cause)
{
	struct gw_cidr c;
	json_t *net;
	char f[64], *why = NULL, *colon;
	int rc;

	snprintf(f, sizeof(f), "network.allowOut[%zu]", i);
	if (gw_cidr_parse(s, &c) == 0)
		return fail(field, f, cause, "%s: \"%s\": airlock allows an address per port "
		    "(write \"%s:443\"); names and *.domain wildcards cover HTTP and HTTPS", f, s, s);
	net = json_pack("{s:s,s:[s]}", "mode", "allowlist", "allow", s);
	rc = egress_network_check(net, &why);
	json_decref(net);
	if (rc == -1) {
		/* "network.allow[0]: ..." -> "network.allowOut[i]: ..." */
		colon = why != NULL ? strchr(why, ':') : NULL;
		fail(field, f, cause, "%s%s", f, colon != NULL ? colon : ": not a valid rule");
		free(why);
		return -1;
	}
	return 0;
}

static int map_access(const json_t *n, int internet, int put, int has_headers, json_t **out,
    char *field, char **cause);

int
e2b_network_map(const json_t *n, int internet, int put, json_t **out, char *field,
    char **cause)
{
	static const char *const create_keys[] = { "allowOut", "denyOut", "rules",
	    "allowPublicTraffic", "maskRequestHost", "httpsPorts", NULL };
	static const char *const put_keys[] = { "allowOut", "denyOut", "rules", "egressProxy",
	    "allow_internet_access", NULL };
	const char *const *keys = put ? put_keys : create_keys, *const *a, *k;
	const json_t *v;
	json_t *hdrs = NULL;
	char f[96];
	int rc;

	*out = NULL;
	field[0] = '\0';
	if (n != NULL && !json_is_object(n))
		return fail(field, put ? "body" : "network", cause, "%s: must be an object",
		    put ? "body" : "network");
	json_object_foreach((json_t *)n, k, v) {
		for (a = keys; *a != NULL; a++)
			if (strcmp(*a, k) == 0)
				break;
		/* An empty key is still named: the body (PUT) or network (create) holds it. */
		if (*k == '\0')
			snprintf(f, sizeof(f), "%s", put ? "body" : "network");
		else
			snprintf(f, sizeof(f), "%s%.64s", put ? "" : "network.", k);
		if (*a == NULL)
			return fail(field, f, cause, "%s: unknown field%s", f, *k == '\0' ?
			    " \"\" (an empty name)" : "");
	}
	/* PUT replaces the whole config: an omitted allow_internet_access is E2B's default. */
	if (put)
		internet = 1;
	if (put && (v = json_object_get(n, "allow_internet_access")) != NULL) {
		if (!json_is_boolean(v))
			return fail(field, "allow_internet_access", cause,
			    "allow_internet_access: must be a boolean");
		internet = json_is_true(v);
	}
	if ((v = json_object_get(n, "allowPublicTraffic")) != NULL && !json_is_null(v)) {
		if (!json_is_boolean(v))
			return fail(field, "network.allowPublicTraffic", cause,
			    "network.allowPublicTraffic: must be a boolean");
		/* false: the caller gives the sandbox a traffic token (e2b_sandboxes.c). */
	}
	if (!unset(v = json_object_get(n, "maskRequestHost")))
		return fail(field, "network.maskRequestHost", cause, "network.maskRequestHost: not "
		    "supported by airlock (the Host header reaches the guest as sent)");
	if (!unset(v = json_object_get(n, "httpsPorts")))
		return fail(field, "network.httpsPorts", cause, "network.httpsPorts: not supported "
		    "by airlock (its TLS front serves the sandbox ports it routes)");
	if (!unset(v = json_object_get(n, "egressProxy")))
		return fail(field, "egressProxy", cause, "egressProxy: not supported by airlock "
		    "(no SOCKS5 egress proxy)");
	if (e2b_rules_map(json_object_get(n, "rules"), put ? "rules" : "network.rules", &hdrs,
	    field, cause) == -1)
		return -1;
	rc = map_access(n, internet, put, hdrs != NULL, out, field, cause);
	if (rc == 0 && hdrs != NULL)
		json_object_set(*out, "headers", hdrs);
	json_decref(hdrs);
	return rc;
}

/* allowOut, denyOut and allow_internet_access onto mode and allow. */
static int
map_access(const json_t *n, int internet, int put, int has_headers, json_t **out, char *field,
    char **cause)
{
	const json_t *allow, *deny;
	int deny_all = 0, given;
	char f[96];
	size_t i;

	allow = json_object_get(n, "allowOut");
	deny = json_object_get(n, "denyOut");
	if (check_list(allow, "network.allowOut", field, cause) == -1 ||
	    check_list(deny, "network.denyOut", field, cause) == -1)
		return -1;
	for (i = 0; i < json_array_size(deny); i++) {
		const char *s = json_string_value(json_array_get(deny, i));
		struct gw_cidr c;

		snprintf(f, sizeof(f), "network.denyOut[%zu]", i);
		if (s == NULL)
			return fail(field, f, cause, "%s: must be a string", f);
		if (gw_cidr_parse(s, &c) == -1)
			return fail(field, f, cause, "%s: \"%.200s\": must be an address or a CIDR "
			    "(denyOut takes no names, as E2B's)", f, s);
		if (all_traffic(&c))
			deny_all = 1;
	}
	for (i = 0; i < json_array_size(allow); i++) {
		const char *s = json_string_value(json_array_get(allow, i));

		if (s == NULL) {
			snprintf(f, sizeof(f), "network.allowOut[%zu]", i);
			return fail(field, f, cause, "%s: must be a string", f);
		}
		if (check_allow(s, i, field, cause) == -1)
			return -1;
	}
	if (!internet)
		deny_all = 1;
	if (!deny_all) {
		/*
		 * The internet is open: allowOut adds nothing. airlock's full mode
		 * already refuses private and internal ranges; it cannot refuse
		 * part of the public internet and let the rest through.
		 */
		if (json_array_size(deny) > 0)
			return fail(field, "network.denyOut[0]", cause, "network.denyOut[0]: airlock "
			    "cannot deny part of the internet and allow the rest: deny 0.0.0.0/0 "
			    "(or set allow_internet_access false) and list what is allowed in "
			    "allowOut");
		*out = json_pack("{s:s,s:[]}", "mode", "full", "allow");
		return 0;
	}
	/*
	 * Everything denied but allowOut. Without any network setting the
	 * sandbox gets no interface at all (mode none: nothing to filter);
	 * with one, even an empty allowOut, it gets the gateway's allowlist,
	 * so a later PUT .../network can open it live.
	 */
	given = allow != NULL || deny != NULL || put || has_headers;
	if (json_array_size(allow) == 0 && !given) {
		*out = json_pack("{s:s,s:[]}", "mode", "none", "allow");
		return 0;
	}
	*out = json_pack("{s:s,s:o}", "mode", "allowlist", "allow",
	    json_is_array(allow) ? json_deep_copy(allow) : json_array());
	return 0;
}
