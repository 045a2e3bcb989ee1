/* Build and validate the gateway policy of a sandbox. */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "egress/egress_policy.h"
#include "gateway/shared/gw_policy.h"

json_t *
egress_policy_build(const json_t *network, const json_t *credentials,
    const struct egress_defaults *d)
{
	const char *mode = json_string_value(json_object_get(network, "mode"));
	json_t *p, *allow, *rate, *internal, *hdrs;

	p = json_pack("{s:s}", "mode", mode != NULL ? mode : "none");
	if ((allow = json_object_get(network, "allow")) != NULL)
		json_object_set_new(p, "allow", json_deep_copy(allow));
	if ((hdrs = json_object_get(network, "headers")) != NULL)
		json_object_set_new(p, "headers", json_deep_copy(hdrs));
	if ((rate = json_object_get(network, "rate")) != NULL)
		json_object_set_new(p, "rate", json_deep_copy(rate));
	else if (d != NULL && (d->rps > 0 || d->bps > 0)) {
		rate = json_object();
		if (d->rps > 0)
			json_object_set_new(rate, "rps", json_real(d->rps));
		if (d->bps > 0)
			json_object_set_new(rate, "bps", json_real(d->bps));
		json_object_set_new(p, "rate", rate);
	}
	if (d != NULL && d->internal != NULL && *d->internal != '\0') {
		char *copy = xstrdup(d->internal), *save, *tok;

		internal = json_array();
		for (tok = strtok_r(copy, ", ", &save); tok != NULL; tok = strtok_r(NULL, ", ", &save))
			json_array_append_new(internal, json_string(tok));
		free(copy);
		json_object_set_new(p, "internal", internal);
	}
	if (credentials != NULL && json_array_size(credentials) > 0)
		json_object_set_new(p, "credentials", json_deep_copy(credentials));
	return p;
}

json_t *
egress_network_redact(const json_t *network)
{
	json_t *out, *hdrs, *e, *set, *v;
	const char *k;
	size_t i;

	if (network == NULL)
		return NULL;
	out = json_deep_copy(network);
	hdrs = json_object_get(out, "headers");
	json_array_foreach(hdrs, i, e) {
		set = json_object_get(e, "set");
		json_object_foreach(set, k, v)
			json_object_set_new(set, k, json_string(EGRESS_REDACTED));
	}
	return out;
}

int
egress_network_check(const json_t *network, char **cause)
{
	struct gw_policy *gp;
	json_t *p;
	char *why = NULL;

	p = egress_policy_build(network, NULL, NULL);
	gp = gw_policy_parse(p, &why);
	json_decref(p);
	if (gp == NULL) {
		/* "policy.allow[2]: ..." → "network.allow[2]: ..." */
		cause_set(cause, "network.%s", strncmp(why, "policy.", 7) == 0 ? why + 7 : why);
		free(why);
		return -1;
	}
	gw_policy_unref(gp);
	return 0;
}
