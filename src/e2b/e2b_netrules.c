/*
 * E2B's network.rules {host: [{transform: {headers: {Name: value}}}]} onto
 * airlock's network.headers [{host, set}] (docs/api.md "network"): the
 * egress gateway sets those headers on every HTTP(S) request to host.
 * Each entry is checked with the gateway's own parser, so what passes is
 * what the gateway applies; the refusal names E2B's field and never
 * carries a value (they are secrets). Several entries for one host merge,
 * a later one winning for the same header name, as E2B applies them in
 * order.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "e2b/e2b_netmap.h"
#include "egress/egress_policy.h"

static int
fail(char *field, char **cause, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* field and cause both get the message's text up to its first ':' as the field. */
static int
fail(char *field, char **cause, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL, *colon;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) == -1)
		msg = NULL;
	va_end(ap);
	snprintf(field, E2B_FIELD_MAX, "%s", msg != NULL ? msg : "network.rules");
	if ((colon = strstr(field, ": ")) != NULL)
		*colon = '\0';
	free(*cause);
	*cause = msg;
	return -1;
}

/* Only the keys in keys[]: 0, or -1 naming the first other one. */
static int
only_keys(const json_t *o, const char *const *keys, const char *at, char *field, char **cause)
{
	const char *k, *const *a;
	json_t *v;

	json_object_foreach((json_t *)o, k, v) {
		for (a = keys; *a != NULL && strcmp(*a, k) != 0; a++)
			;
		if (*a == NULL)
			return fail(field, cause, "%s.%.64s: not supported by airlock (only "
			    "transform.headers)", at, k);
	}
	return 0;
}

/* One host's headers as the gateway will read them; the cause renamed to E2B's field. */
static int
check_set(const char *host, const json_t *set, const char *at, char *field, char **cause)
{
	json_t *net;
	char *why = NULL, *p;
	int rc;

	net = json_pack("{s:s,s:[{s:s,s:O}]}", "mode", "full", "headers", "host", host, "set", set);
	rc = egress_network_check(net, &why);
	json_decref(net);
	if (rc == 0)
		return 0;
	/* "network.headers[0].host: ..." / "network.headers[0].set.X: ..." / "...set: ..." */
	p = why != NULL ? strstr(why, "].") : NULL;
	if (p != NULL && strncmp(p + 2, "host:", 5) == 0)
		fail(field, cause, "%s: \"%.200s\" must be a host name or *.domain", at, host);
	else if (p != NULL && strncmp(p + 2, "set", 3) == 0)
		fail(field, cause, "%s.transform.headers%s", at, p + 5);
	else
		fail(field, cause, "%s: %s", at, why != NULL ? why : "not a valid rule");
	free(why);
	return -1;
}

/* rules[host]: the array of {transform: {headers}}, merged into set. */
static int
host_rules(const char *host, const json_t *list, const char *name, json_t *set, char *field,
    char **cause)
{
	static const char *const rule_keys[] = { "transform", NULL };
	static const char *const tr_keys[] = { "headers", NULL };
	const json_t *r, *tr, *hd;
	char at[E2B_FIELD_MAX + 64];
	size_t j;

	if (!json_is_array(list) || json_array_size(list) == 0 ||
	    json_array_size(list) > E2B_NET_RULES_MAX)
		return fail(field, cause, "%s.%.64s: must be an array of 1-%d "
		    "{transform: {headers}}", name, host, E2B_NET_RULES_MAX);
	json_array_foreach(list, j, r) {
		snprintf(at, sizeof(at), "%s.%.64s[%zu]", name, host, j);
		/* The SDK sends a rule without a transform as {}: it sets nothing. */
		if (json_is_object(r) && json_object_size(r) == 0)
			continue;
		if (!json_is_object(r) || (tr = json_object_get(r, "transform")) == NULL)
			return fail(field, cause, "%s: must be an object {transform: {headers}}", at);
		if (only_keys(r, rule_keys, at, field, cause) == -1)
			return -1;
		snprintf(at, sizeof(at), "%s.%.64s[%zu].transform", name, host, j);
		if (!json_is_object(tr) || (hd = json_object_get(tr, "headers")) == NULL)
			return fail(field, cause, "%s: must be an object {headers}", at);
		if (only_keys(tr, tr_keys, at, field, cause) == -1)
			return -1;
		snprintf(at, sizeof(at), "%s.%.64s[%zu]", name, host, j);
		if (check_set(host, hd, at, field, cause) == -1)
			return -1;
		json_object_update(set, (json_t *)hd);
	}
	return 0;
}

int
e2b_rules_map(const json_t *rules, const char *name, json_t **headers, char *field,
    char **cause)
{
	char at[E2B_FIELD_MAX + 64];
	const char *host;
	json_t *list, *set, *out;

	*headers = NULL;
	if (rules == NULL || json_is_null(rules))
		return 0;
	if (!json_is_object(rules) || json_object_size(rules) > E2B_NET_RULES_MAX)
		return fail(field, cause, "%s: must be an object {host: [{transform: {headers}}]} "
		    "of at most %d hosts", name, E2B_NET_RULES_MAX);
	out = json_array();
	json_object_foreach((json_t *)rules, host, list) {
		set = json_object();
		snprintf(at, sizeof(at), "%s.%.64s", name, host);
		/* Merged, the set is checked again: the entries may add up past the limits. */
		if (host_rules(host, list, name, set, field, cause) == -1 ||
		    (json_object_size(set) > 0 && check_set(host, set, at, field, cause) == -1)) {
			json_decref(set);
			json_decref(out);
			return -1;
		}
		if (json_object_size(set) == 0) {
			json_decref(set);
			continue;
		}
		json_array_append_new(out, json_pack("{s:s,s:o}", "host", host, "set", set));
	}
	if (json_array_size(out) == 0) {
		json_decref(out);
		return 0;
	}
	*headers = out;
	return 0;
}
